"""docs/openapi/*.yaml against the real binaries (issue 17).

Both documents are linted with Spectral (npm @stoplight/spectral-cli, the
`spectral:oas` ruleset, warnings fail), and Stoplight Prism (npm
@stoplight/prism-cli) runs in proxy mode with `--errors` in front of every
listener of the emulator (docs/openapi/vendor.yaml) and in front of the
gateway's listeners (docs/openapi/tidegate.yaml for its own API on the
simulation and admin listeners, vendor.yaml for the vendor API it relays):
a whole export, import and simulation flow, then runs, sweeps, webhooks and
probes go through Prism, and every response must validate against its
document (Prism turns a violation into an error answer and names it in
`sl-violations`). The npm tools come from scripts/deps.sh (tg_install_npm);
the test skips only when node is not installed."""

import base64
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import NPM_DIR, ROOT, TEST_KEY_SHA, free_port

DOCS = os.path.join(ROOT, "docs", "openapi")
VENDOR = os.path.join(DOCS, "vendor.yaml")
TIDEGATE = os.path.join(DOCS, "tidegate.yaml")
GW_DEX = os.path.join(DOCS, "gateway-dex.yaml")
GW_SIM = os.path.join(DOCS, "gateway-sim.yaml")
BIN = os.path.join(NPM_DIR, "node_modules", ".bin")

needs_node = pytest.mark.skipif(shutil.which("node") is None,
                                reason="node is not installed (npm tools: scripts/deps.sh "
                                       "tg_install_npm)")


def npm_tool(name, package):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.fail(f"{package} is not installed in {NPM_DIR}: "
                    ". scripts/deps.sh && tg_install_npm")
    return path


class Prism:
    """`prism proxy <doc> <upstream> --errors` on a free loopback port."""

    def __init__(self, tmp_path, name, document, upstream):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log_path = os.path.join(tmp_path, f"prism-{name}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [npm_tool("prism", "@stoplight/prism-cli"), "proxy", document, upstream,
             "--errors", "-h", "127.0.0.1", "-p", str(self.port), "--cors=false"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, deadline):
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prism {self.name} exited:\n{self.read_log()}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"prism {self.name} did not listen:\n{self.read_log()}")

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def prisms(tmp_path, request):
    """start({name: (document, upstream)}) starts them in parallel and returns
    {name: Prism}; each is stopped at teardown (its log shown on failure)."""
    started = []

    def start(spec):
        out = {}
        for name, (doc, upstream) in spec.items():
            out[name] = Prism(str(tmp_path), name, doc, upstream)
            started.append(out[name])
        deadline = time.monotonic() + 30
        for p in out.values():
            p.wait_ready(deadline)
        return out

    yield start
    rep = getattr(request.node, "rep_call", None)
    for p in started:
        p.stop()
        if rep is not None and rep.failed:
            print(f"\n----- log of prism {p.name} -----\n{p.read_log()}")


def checked(r, status):
    """The response went through Prism without a violation and has `status`.
    (Requests the document does not allow are refused by Prism itself with 422,
    which this refuses too: bad requests are sent only where the document
    allows the request and the server refuses it.)"""
    where = f"{r.request.method} {r.request.url}"
    assert "sl-violations" not in r.headers, \
        f"{where}: violations {r.headers['sl-violations']}\n{r.text[:2000]}"
    assert r.status_code == status, f"{where}: {r.status_code} {r.text[:2000]}"
    assert "problem+json" not in r.headers.get("Content-Type", ""), \
        f"{where}: an answer of Prism's own: {r.text[:2000]}"
    return r


@needs_node
def test_lint():
    spectral = npm_tool("spectral", "@stoplight/spectral-cli")
    for doc in (VENDOR, TIDEGATE, GW_DEX, GW_SIM):
        p = subprocess.run([spectral, "lint", "--fail-severity=warn", "-r",
                            os.path.join(DOCS, ".spectral.yaml"), doc],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"{doc}:\n{p.stdout}\n{p.stderr}"


@needs_node
def test_vendor_flows_validate(tmp_path, emulator, prisms):
    # a copy of the document that the emulator's answer breaks: the harness
    # must see that violation, or a pass below would prove nothing
    broken = str(tmp_path / "broken.yaml")
    with open(VENDOR) as f:
        text = f.read()
    assert text.count("required: [correlationId]\n") == 1
    with open(broken, "w") as f:
        f.write(text.replace("required: [correlationId]\n",
                             "required: [correlationId, notSent]\n"))
    px = prisms({"dex": (VENDOR, emulator.dex), "sim": (VENDOR, emulator.sim),
                 "design": (VENDOR, emulator.design), "auth": (VENDOR, emulator.auth),
                 "broken": (broken, emulator.dex)})
    dex, sim, design, auth = (px[k].url for k in ("dex", "sim", "design", "auth"))
    t = 10
    h = emulator.dex_headers()
    r = requests.post(px["broken"].url + "/public/v1/export/activities", headers=h,
                      json={"projectId": "P-DEMO"}, timeout=t)
    assert r.status_code == 500 and "notSent" in r.headers.get("sl-violations", ""), \
        (r.status_code, r.headers, r.text)

    # data exchange login
    r = checked(requests.post(dex + "/public/v1/authenticate",
                              json={"username": "demo", "password": "demo"}, timeout=t), 200)
    h = {"Authorization": "Bearer " + r.json()["token"]}
    checked(requests.post(dex + "/public/v1/authenticate",
                          json={"username": "demo", "password": "wrong"}, timeout=t), 401)

    # export: request, 202 until ready, then the data
    for kind in ("activities", "activity-categories", "personnel", "timesheets",
                 "work-order-sequences", "work-orders", "work-packages"):
        r = checked(requests.post(dex + "/public/v1/export/" + kind,
                                  json={"projectId": "P-DEMO"}, headers=h, timeout=t), 200)
        cid = r.json()["correlationId"]
        saw_202 = kind != "activities"
        deadline = time.monotonic() + 10
        while True:
            r = requests.get(dex + "/public/export", params={"correlationId": cid},
                             headers=h, timeout=t)
            if r.status_code == 202:
                checked(r, 202)
                saw_202 = True
                assert time.monotonic() < deadline, "export never ready"
                time.sleep(0.1)
                continue
            checked(r, 200)
            break
        assert saw_202 and len(r.json()) > 0, kind
    checked(requests.post(dex + "/public/v1/export/activities",
                          json={"projectId": "P-NOPE"}, headers=h, timeout=t), 404)
    checked(requests.post(dex + "/public/v1/export/activities",
                          json={"projectId": "P-DEMO", "statuses": ["LOST"]},
                          headers=h, timeout=t), 400)
    checked(requests.get(dex + "/public/export", params={"correlationId": "nope"},
                         headers=h, timeout=t), 404)
    checked(requests.get(dex + "/public/export", params={"correlationId": cid},
                         headers={"Authorization": "Bearer forged"}, timeout=t), 401)

    # import: JSON and a file, status until processed, result, failed rows
    rows = [{"id": "NEW-1", "siteId": "S-1", "status": "PLANNED", "teams": ["Alpha"],
             "manpower": {"Alpha": 2}, "startDate": "2024-03-05T07:08:59Z"},
            {"id": "ACT-000001", "siteId": "S-1", "status": "DISPATCHED"},
            {"id": "NEW-2", "siteId": "S-99"}]
    r = checked(requests.post(dex + "/public/v1/import/activities",
                              params={"projectId": "P-DEMO"}, json=rows, headers=h,
                              timeout=t), 200)
    icid = r.json()["correlationId"]
    r = checked(requests.post(dex + "/public/v1/import/activities/file",
                              params={"projectId": "P-DEMO"}, headers=h, timeout=t,
                              files={"file": ("a.json", json.dumps(rows[:1]),
                                              "application/json")}), 200)
    deadline = time.monotonic() + 10
    while True:
        st = checked(requests.get(dex + "/public/v1/import/status",
                                  params={"correlationId": icid}, headers=h, timeout=t),
                     200).json()
        if st["processed"] == st["total"]:
            break
        assert time.monotonic() < deadline, st
        time.sleep(0.1)
    assert (st["created"], st["updated"], st["failed"]) == (1, 1, 1)
    res = checked(requests.get(dex + "/public/v1/import/result",
                               params={"correlationId": icid}, headers=h, timeout=t), 200)
    assert res.json()["failed"][0]["index"] == 3
    failed = checked(requests.get(dex + "/public/v1/import/activities/failed",
                                  params={"correlationId": icid}, headers=h, timeout=t), 200)
    assert len(failed.json()) == 1
    checked(requests.get(dex + "/public/v1/import/status",
                         params={"correlationId": "nope"}, headers=h, timeout=t), 404)

    # simulation: token, cases, a case, a run on one host seen on the other, results
    checked(requests.post(auth + "/api/oauth2/token",
                          data={"grant_type": "client_credentials", "client_id": "demo",
                                "client_secret": "wrong"}, timeout=t), 401)
    r = checked(requests.post(auth + "/api/oauth2/token",
                              data={"grant_type": "client_credentials", "client_id": "demo",
                                    "client_secret": "demo-secret"}, timeout=t), 200)
    s = {"Authorization": "Bearer " + r.json()["access_token"]}
    cases = checked(requests.get(sim + "/api/v1/cases", headers=s, timeout=t), 200).json()
    assert {c["caseId"] for c in cases} >= {"CASE-OM-1", "CASE-CON-1"}
    checked(requests.get(sim + "/api/v1/cases/CASE-NOPE", headers=s, timeout=t), 404)
    runs = []
    for case_id in ("CASE-OM-1", "CASE-CON-1"):
        case = checked(requests.get(sim + "/api/v1/cases/" + case_id, headers=s, timeout=t),
                       200).json()
        r = checked(requests.post(sim + "/api/v1/simulations", json=case, headers=s,
                                  timeout=t), 201)
        runs.append(r.json()["simulationId"])
    checked(requests.get(sim + f"/api/v1/simulations/{runs[0]}/results", headers=s,
                         timeout=t), 409)
    checked(requests.post(sim + "/api/v1/simulations", json={"caseId": "CASE-NOPE"},
                          headers=s, timeout=t), 404)
    deadline = time.monotonic() + 10
    for sid in runs:
        while True:
            run = checked(requests.get(design + "/api/v1/simulations/" + sid, headers=s,
                                       timeout=t), 200).json()
            if run["status"] != "IN_PROGRESS":
                break
            assert time.monotonic() < deadline, run
            time.sleep(0.2)
        assert run["status"] == "COMPLETED", run
        checked(requests.get(sim + f"/api/v1/simulations/{sid}/results", headers=s,
                             timeout=t), 200)
    listed = checked(requests.get(sim + "/api/v1/simulations",
                                  params={"caseId": "CASE-OM-1", "status": "COMPLETED"},
                                  headers=s, timeout=t), 200).json()
    assert [x["simulationId"] for x in listed] == runs[:1]
    checked(requests.get(sim + "/api/v1/simulations/nope", headers=s, timeout=t), 404)


class Receiver:
    """scripts/webhook-receiver (the README's offline receiver) on a free port,
    checking signatures with `secret_file`; lines() is what it printed."""

    def __init__(self, tmp_path, secret_file):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(tmp_path, "receiver.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(ROOT, "scripts", "webhook-receiver"),
             str(self.port), secret_file], stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while "listening" not in self.text():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.text()
            time.sleep(0.05)

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=5)
        self.log.close()


ADMIN_KEY = "admin-key"


@needs_node
def test_gateway_api_validates(tmp_path, emulator, make_gateway, prisms):
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    secret_file = str(tmp_path / "webhook-secret")
    with open(secret_file, "w") as f:
        f.write(secret + "\n")
    receiver = Receiver(str(tmp_path), secret_file)
    try:
        _gateway_api_validates(emulator, make_gateway, prisms, receiver, secret_file)
    finally:
        receiver.stop()


def _gateway_api_validates(emulator, make_gateway, prisms, receiver, secret_file):
    import hashlib
    admin_sha = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()
    gw = make_gateway(emulator, {
        "keys": [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
                 {"name": "ops", "sha256": admin_sha, "services": ["admin"]}],
        "webhooks": {"secret_file": secret_file, "allow": ["127.0.0.1/32"]}})
    gw.wait_tokens()
    # the gateway's own API (tidegate.yaml), and the vendor's API as the gateway
    # relays it (vendor.yaml) on the same listeners
    px = prisms({"sim": (TIDEGATE, gw.sim), "admin": (TIDEGATE, gw.admin),
                 "gw-dex": (VENDOR, gw.dex), "gw-sim": (VENDOR, gw.sim)})
    sim, admin = px["sim"].url, px["admin"].url
    vdex, vsim = px["gw-dex"].url, px["gw-sim"].url
    h = gw.headers()
    a = {"Authorization": "Bearer " + ADMIN_KEY}
    t = 10

    # probes
    checked(requests.get(admin + "/healthz", timeout=t), 200)
    r = checked(requests.get(admin + "/readyz", timeout=t), 200)
    assert r.json()["ready"] is True
    # HEAD straight to the gateway: Prism 5 tries to parse the empty body of a
    # HEAD answer as JSON and fails ("Unexpected end of JSON input")
    for path in ("/healthz", "/readyz"):
        got, head = requests.get(gw.admin + path, timeout=t), requests.head(gw.admin + path,
                                                                            timeout=t)
        assert (head.status_code, head.headers["Content-Length"], head.content) == \
            (got.status_code, str(len(got.content)), b"")
    assert "tidegate_" in checked(requests.get(admin + "/metrics", timeout=t), 200).text

    # an export with a webhook to the local receiver, fetched through the gateway
    r = checked(requests.post(vdex + "/public/v1/export/activities", headers=h, timeout=t,
                              json={"projectId": "P-DEMO",
                                    "callbackUrl": receiver.url + "/exports"}), 200)
    cid = r.json()["correlationId"]
    wid = r.headers["X-Tidegate-Webhook-Id"]
    deadline = time.monotonic() + 10
    while True:
        r = requests.get(vdex + "/public/export", params={"correlationId": cid}, headers=h,
                         timeout=t)
        if r.status_code != 202:
            break
        checked(r, 202)
        assert time.monotonic() < deadline, "export never ready"
        time.sleep(0.1)
    assert len(checked(r, 200).json()) == 50
    checked(requests.get(vdex + "/public/export", params={"correlationId": "nope"}, headers=h,
                         timeout=t), 404)

    # an import through the gateway
    r = checked(requests.post(vdex + "/public/v1/import/activities",
                              params={"projectId": "P-DEMO"},
                              json=[{"id": "GW-1", "siteId": "S-2"}], headers=h, timeout=t),
                200)
    icid = r.json()["correlationId"]
    deadline = time.monotonic() + 10
    while True:
        st = checked(requests.get(vdex + "/public/v1/import/status",
                                  params={"correlationId": icid}, headers=h, timeout=t),
                     200).json()
        if st["processed"] == st["total"]:
            break
        assert time.monotonic() < deadline, st
        time.sleep(0.1)
    checked(requests.get(vdex + "/public/v1/import/result", params={"correlationId": icid},
                         headers=h, timeout=t), 200)
    checked(requests.get(vdex + "/public/v1/import/activities/failed",
                         params={"correlationId": icid}, headers=h, timeout=t), 200)

    # runs: one submission through the gateway, then a sweep of two variants
    checked(requests.get(vsim + "/api/v1/cases", headers=h, timeout=t), 200)
    case = checked(requests.get(vsim + "/api/v1/cases/CASE-OM-1", headers=h, timeout=t),
                   200).json()
    r = checked(requests.post(vsim + "/api/v1/simulations", json=case, headers=h, timeout=t),
                201)
    sid = r.json()["simulationId"]
    r = checked(requests.get(sim + "/tidegate/v1/runs", headers=h, timeout=t), 200)
    assert [x["simulationId"] for x in r.json()["runs"]] == [sid]
    checked(requests.get(sim + "/tidegate/v1/runs/" + sid, headers=h, timeout=t), 200)
    checked(requests.get(sim + "/tidegate/v1/runs/" + sid,
                         headers={"X-Api-Key": "test-key"}, timeout=t), 200)
    checked(requests.get(sim + "/tidegate/v1/runs/nope", headers=h, timeout=t), 404)
    checked(requests.get(sim + "/tidegate/v1/runs", headers={"Authorization": "Bearer nope"},
                         timeout=t), 401)
    checked(requests.get(sim + "/tidegate/v1/runs", headers=a, timeout=t), 403)

    ctv = [dict(case["vesselList"][0], quantity=3)] + case["vesselList"][1:]
    body = {"baseCaseId": "CASE-OM-1", "concurrency": 2,
            "variants": [{"name": "base", "patch": {}},
                         {"name": "ctv-3", "patch": {"vesselList": ctv}}]}
    r = checked(requests.post(sim + "/tidegate/v1/sweeps", json=body, headers=h, timeout=t), 201)
    swid = r.json()["sweepId"]
    assert r.headers["Location"] == "/tidegate/v1/sweeps/" + swid
    bad = {"baseCaseId": "CASE-OM-1",
           "variants": [{"name": "b", "patch": {"vesselList": ctv, "name": "renamed"}}]}
    r = checked(requests.post(sim + "/tidegate/v1/sweeps", json=bad, headers=h, timeout=t), 400)
    assert r.json()["error"] == "VALIDATION_FAILED" and r.json()["details"]
    checked(requests.post(sim + "/tidegate/v1/sweeps", headers=h, timeout=t,
                          json={"baseCaseId": "CASE-NOPE",
                                "variants": [{"name": "b", "patch": {}}]}), 404)
    deadline = time.monotonic() + 20
    while True:
        sw = checked(requests.get(sim + "/tidegate/v1/sweeps/" + swid, headers=h, timeout=t),
                     200).json()
        if sw["state"] == "done":
            break
        assert time.monotonic() < deadline, sw
        time.sleep(0.3)
    assert sw["counts"]["completed"] == 2 and "availability" in sw["columns"], sw
    r = checked(requests.get(sim + "/tidegate/v1/sweeps/" + swid, timeout=t,
                             headers=dict(h, Accept="text/csv")), 200)
    assert r.text.startswith("variant,status,availability")
    r = checked(requests.get(sim + "/tidegate/v1/sweeps", params={"state": "done"},
                             headers=h, timeout=t), 200)
    assert [x["sweepId"] for x in r.json()["sweeps"]] == [swid]
    checked(requests.get(sim + "/tidegate/v1/sweeps", params={"limit": 5}, headers=h,
                         timeout=t), 200)
    r = checked(requests.get(sim + "/tidegate/v1/runs", params={"sweepId": swid},
                             headers=h, timeout=t), 200)
    assert sorted(x["variant"] for x in r.json()["runs"]) == ["base", "ctv-3"]
    checked(requests.get(sim + "/tidegate/v1/sweeps/swp_" + "0" * 32, headers=h,
                         timeout=t), 404)
    deadline = time.monotonic() + 20
    while True:
        run = checked(requests.get(sim + "/tidegate/v1/runs/" + sid, headers=h, timeout=t),
                      200).json()
        if run["status"] != "IN_PROGRESS":
            break
        assert time.monotonic() < deadline, run
        time.sleep(0.3)
    assert run["status"] == "COMPLETED" and run["figures"], run
    checked(requests.get(vsim + "/api/v1/simulations/" + sid, headers=h, timeout=t), 200)
    checked(requests.get(vsim + f"/api/v1/simulations/{sid}/results", headers=h, timeout=t),
            200)

    # the webhook: delivered to the receiver, signature verified; the admin API
    deadline = time.monotonic() + 20
    while True:
        job = checked(requests.get(admin + "/webhooks/" + wid, headers=a, timeout=t), 200).json()
        if job["state"] == "delivered":
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    assert f"{wid} verified /exports 50 records" in receiver.text(), receiver.text()
    r = checked(requests.get(admin + "/webhooks", params={"correlationId": cid, "limit": 10},
                             headers=a, timeout=t), 200)
    assert [j["id"] for j in r.json()["webhooks"]] == [wid]
    checked(requests.get(admin + "/webhooks", params={"state": "delivered"},
                         headers={"X-Api-Key": ADMIN_KEY}, timeout=t), 200)
    checked(requests.get(admin + "/webhooks/msg_" + "0" * 32, headers=a, timeout=t), 404)
    checked(requests.post(admin + f"/webhooks/{wid}/redeliver", headers=a, timeout=t), 409)
    r = checked(requests.post(admin + "/webhooks/redeliver",
                              params={"since": "2020-01-01T00:00:00Z"}, headers=a, timeout=t),
                200)
    assert r.json() == {"redelivered": 0}
    checked(requests.get(admin + "/webhooks", headers={"Authorization": "Bearer nope"},
                         timeout=t), 401)
    checked(requests.get(admin + "/webhooks", headers=h, timeout=t), 403)
    # the run registry across keys (the console's Simulations panel)
    r = checked(requests.get(admin + "/runs", params={"sweepId": swid}, headers=a, timeout=t),
                200)
    assert sorted(x["variant"] for x in r.json()["runs"]) == ["base", "ctv-3"]
    r = checked(requests.get(admin + "/runs/sweeps", headers=a, timeout=t), 200)
    assert [x["sweepId"] for x in r.json()["sweeps"]] == [swid]
    checked(requests.get(admin + "/runs/sweeps/" + swid, headers=a, timeout=t), 200)
    checked(requests.get(admin + "/runs/sweeps/swp_" + "0" * 32, headers=a, timeout=t), 404)
    checked(requests.get(admin + "/runs", headers=h, timeout=t), 403)


def test_readme_webhook_example_allows_the_receiver(tmp_path):
    """The README's offline webhook example: its sed command turns the allow
    list on in (a copy of) conf/tidegate.yaml, which stays valid (tidegate
    -t) and allows the receiver's address. test_gateway_api_validates
    delivers to scripts/webhook-receiver with that allow list."""
    import re
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    m = re.search(r"^    sed -i '([^']+)' conf/tidegate\.yaml$", readme, re.M)
    assert m, "README: no sed command for conf/tidegate.yaml"
    assert "scripts/webhook-receiver 9999" in readme
    assert '"callbackUrl":"http://127.0.0.1:9999/exports"' in readme
    conf = tmp_path / "conf"
    shutil.copytree(os.path.join(ROOT, "conf"), conf,
                    ignore=shutil.ignore_patterns("emulator-data", "*.db*"))
    subprocess.run(["sed", "-i", m.group(1), str(conf / "tidegate.yaml")], check=True)
    with open(conf / "tidegate.yaml") as f:
        text = f.read()
    assert re.search(r"^webhooks:.*(\n  .*)*\n  allow: \[127\.0\.0\.1/32\]", text, re.M), text
    from conftest import BUILD
    p = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c",
                        str(conf / "tidegate.yaml")], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0 and "configuration OK" in p.stdout + p.stderr, p.stdout + p.stderr


@needs_node
def test_gateway_listener_documents_validate(emulator, make_gateway, prisms):
    """gateway-dex.yaml and gateway-sim.yaml in front of the gateway's own
    listeners: long-polls, validation errors, 413, 415, 404 (with its hint),
    the vendor's errors wrapped (401 of a bearer that is no key, 429, 409)."""
    gw = make_gateway(emulator, {"max_body": "64KB", "poll": {"uuid_ids": True}})
    gw.wait_tokens()
    px = prisms({"dex": (GW_DEX, gw.dex), "sim": (GW_SIM, gw.sim)})
    dex, sim = px["dex"].url, px["sim"].url
    h, t = gw.headers(), 10

    # an export, long-polled until ready (X-Api-Key this time)
    r = checked(requests.post(dex + "/public/v1/export/activities", timeout=t,
                              headers={"X-Api-Key": "test-key"},
                              json={"projectId": "P-DEMO"}), 200)
    cid = r.json()["correlationId"]
    r = requests.get(dex + "/public/export", params={"correlationId": cid, "wait": 10},
                     headers=h, timeout=15)
    assert r.headers["X-Tidegate-Poll"] == "long-poll", r.headers
    assert len(checked(r, 200).json()) == 50
    # an import, its status long-polled
    r = checked(requests.post(dex + "/public/v1/import/activities", timeout=t,
                              params={"projectId": "P-DEMO"}, headers=h,
                              json=[{"id": "GW-2", "siteId": "S-1"}]), 200)
    icid = r.json()["correlationId"]
    checked(requests.get(dex + "/public/v1/import/status", timeout=15, headers=h,
                         params={"correlationId": icid, "wait": 5}), 200)

    # errors made by the gateway
    r = checked(requests.post(dex + "/public/v1/export/activities", headers=h, timeout=t,
                              json={"projectId": "P-DEMO", "projectid": "P-DEMO"}), 400)
    assert r.json()["error"] == "VALIDATION_FAILED" and r.json()["details"][0]["path"]
    big = {"projectId": "P-DEMO", "names": ["n" * 1000] * 100}
    r = checked(requests.post(dex + "/public/v1/export/activities", json=big, headers=h,
                              timeout=t), 413)
    assert "max_body (65536 bytes)" in r.json()["message"]
    r = checked(requests.post(dex + "/public/v1/import/activities/file", timeout=t,
                              params={"projectId": "P-DEMO"}, headers=h,
                              files={"file": ("a.json", b"[]", "application/json")}), 200)
    other = "0f0e0d0c-0b0a-4909-8807-060504030201"      # no record names it: the gateway's
    r = checked(requests.get(dex + "/public/export", params={"correlationId": other},
                             headers=h, timeout=t), 404)
    assert "vendor" not in r.json()

    # the vendor's errors, in the gateway's body
    r = checked(requests.post(dex + "/public/v1/export/activities", timeout=t,
                              headers={"Authorization": "Bearer not-a-key"},
                              json={"projectId": "P-DEMO"}), 401)
    assert r.json()["message"].startswith("not an API key of this gateway, and the vendor "
                                          "refused it as a token")
    emulator.fault(path="/public/v1/export/activities", status=429, retryAfter=3, count=1)
    r = checked(requests.post(dex + "/public/v1/export/activities", headers=h, timeout=t,
                              json={"projectId": "P-DEMO"}), 429)
    assert r.headers["Retry-After"] == "3" and r.json()["vendor"]["status"] == 429
    r = checked(requests.post(dex + "/public/v1/authenticate", timeout=t,
                              json={"username": "demo", "password": "wrong"}), 401)
    assert r.json()["vendor"]["message"] == "invalid username or password"

    # the simulation listener: a run submitted, its results asked too early (the
    # vendor's 409, wrapped), its status long-polled; a case the checks refuse
    case = checked(requests.get(sim + "/api/v1/cases/CASE-OM-1", headers=h, timeout=t),
                   200).json()
    sid = checked(requests.post(sim + "/api/v1/simulations", json=case, headers=h,
                                timeout=t), 201).json()["simulationId"]
    r = checked(requests.get(sim + f"/api/v1/simulations/{sid}/results", headers=h,
                             timeout=t), 409)
    assert r.json()["vendor"]["status"] == 409 and r.json()["requestId"]
    checked(requests.get(sim + f"/api/v1/simulations/{sid}", params={"wait": 1},
                         headers=h, timeout=t), 200)
    r = checked(requests.post(sim + "/api/v1/simulations", headers=h, timeout=t,
                              json=dict(case, name="renamed")), 400)
    assert r.json()["error"] == "VALIDATION_FAILED"
    checked(requests.post(sim + "/api/oauth2/token", timeout=t,
                          data={"grant_type": "client_credentials", "client_id": "demo",
                                "client_secret": "demo-secret"}), 200)

    # what Prism itself refuses (the document does not allow it) is checked
    # straight at the gateway: a body of another type, a path near a route
    r = requests.post(gw.dex + "/public/v1/export/activities", data="<x/>", timeout=t,
                      headers={**h, "Content-Type": "text/xml"})
    assert r.status_code == 415 and r.headers["Accept-Post"] == "application/json"
    r = requests.get(gw.dex + "/public/v1/import/statu", headers=h, timeout=t,
                     params={"correlationId": icid})
    assert r.status_code == 404 and "did you mean '/public/v1/import/status'" in r.text
