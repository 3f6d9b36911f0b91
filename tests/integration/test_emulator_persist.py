"""The emulator's data_dir: exports, imports, simulation runs, token keys
and the clock offset kept across a kill -9 (the same ids answer the same
way after a restart); without data_dir nothing is kept, as before; expired
jobs leave the disk; and the embedded emulator of a gateway killed -9
again and again loses no export, so every webhook is delivered (0 dead).

The webhook receiver is the one of test_gateway_webhooks.py."""
import base64
import hashlib
import json
import os
import random
import subprocess
import time

import requests

from conftest import BUILD, EMULATOR_DEFAULTS, TEST_KEY_SHA, Process, free_port, to_yaml
from test_gateway_webhooks import Receiver  # noqa: F401 (the receiver fixture's class)
from test_gateway_webhooks import receiver  # noqa: F401 (fixture)

EXPORT = "/public/v1/export/"
IMPORT = "/public/v1/import/activities"
SECRET = "whsec_" + base64.b64encode(b"tidegate-test-signing-key-0001").decode()
ADMIN_KEY = "admin-key"
ADMIN_SHA = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()


def restart(emu):
    """kill -9 the emulator, then start it again with the same config file."""
    emu.proc.kill()
    emu.proc.wait()
    emu.log.close()
    emu.runs = getattr(emu, "runs", 1) + 1
    log = os.path.join(os.path.dirname(emu.config_path), f"emulator.{emu.runs}.log")
    Process.__init__(emu, emu.argv, log, emu.dex + "/__emulator/health")


def wait(pred, timeout=10.0, what="a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def get_export(emu, h, cid):
    return requests.get(emu.dex + "/public/export", params={"correlationId": cid}, headers=h,
                        timeout=10)


def new_export(emu, h, kind, body):
    r = requests.post(emu.dex + EXPORT + kind, json=body, headers=h, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


def new_import(emu, h, project, rows):
    r = requests.post(emu.dex + IMPORT, params={"projectId": project}, json=rows, headers=h,
                      timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


def import_view(emu, h, cid):
    out = {}
    for what in ("status", "result"):
        r = requests.get(emu.dex + "/public/v1/import/" + what, params={"correlationId": cid},
                         headers=h, timeout=10)
        assert r.status_code == 200, r.text
        out[what] = r.json()
    return out


def run_view(emu, h, sid):
    base = emu.sim + "/api/v1/simulations/" + sid
    st = requests.get(base, headers=h, timeout=10)
    res = requests.get(base + "/results", headers=h, timeout=10)
    return st.status_code, st.json(), res.status_code, res.json()


ROWS = [{"id": "ACT-000001", "siteId": "S-1", "name": "renamed before the kill"},
        {"id": "NEW-1", "siteId": "S-2", "name": "created before the kill"},
        {"id": "NEW-2", "siteId": "S-99"}]


def test_data_dir_keeps_every_job_across_kill_9(make_emulator):
    emu = make_emulator({
        "data_dir": "data",
        "projects": [{"id": "P-DEMO", "seed": 1, "sites": 5, "activities": 50},
                     {"id": "P-TWO", "seed": 2, "sites": 3, "activities": 10}],
        "import": {"rows_per_second": 20}})
    data = os.path.join(os.path.dirname(emu.config_path), "data")
    h, sh = emu.dex_headers(), emu.sim_headers()
    # an import done before the kill, one still running at the kill
    done = new_import(emu, h, "P-DEMO", ROWS)
    wait(lambda: import_view(emu, h, done)["status"]["processed"] == 3, what="the import")
    running = new_import(emu, h, "P-TWO", [{"id": f"N-{i}", "siteId": "S-1"}
                                           for i in range(60)])
    # exports: ready (read after the import), one whose callback-less data is regenerated
    acts = new_export(emu, h, "activities", {"projectId": "P-DEMO"})
    wos = new_export(emu, h, "work-orders", {"projectId": "P-DEMO", "types": ["REPAIR"]})
    wait(lambda: get_export(emu, h, acts).status_code == 200, what="the export")
    before_acts, before_wos = get_export(emu, h, acts).content, get_export(emu, h, wos).content
    assert b"renamed before the kill" in before_acts
    # runs: one completed with results, one failed (an edit outside the editable parts)
    case = requests.get(emu.sim + "/api/v1/cases/CASE-OM-1", headers=sh, timeout=10).json()
    ok = requests.post(emu.sim + "/api/v1/simulations", json=case, headers=sh,
                       timeout=10).json()["simulationId"]
    bad = requests.post(emu.sim + "/api/v1/simulations", json={**case, "name": "x"},
                        headers=sh, timeout=10).json()["simulationId"]
    emu.advance("10m")
    runs_before = {s: run_view(emu, sh, s) for s in (ok, bad)}
    assert runs_before[ok][0] == 200 and runs_before[ok][1]["status"] == "COMPLETED"
    assert runs_before[bad][1]["status"] == "FAILED" and runs_before[bad][2] == 409
    listing = requests.get(emu.sim + "/api/v1/simulations", headers=sh, timeout=10).json()
    imp_before = import_view(emu, h, done)
    clock = requests.get(emu.dex + "/__emulator/clock", timeout=5).json()
    assert clock["offsetMs"] == 600000
    progress = import_view(emu, h, running)["status"]["processed"]

    restart(emu)

    # the clock offset is kept (it never moves back); tokens issued before still work
    assert requests.get(emu.dex + "/__emulator/clock", timeout=5).json()["offsetMs"] == 600000
    assert get_export(emu, h, acts).content == before_acts
    assert get_export(emu, h, wos).content == before_wos
    assert import_view(emu, h, done) == imp_before
    assert import_view(emu, h, running)["status"]["processed"] >= progress
    assert {s: run_view(emu, sh, s) for s in (ok, bad)} == runs_before
    assert requests.get(emu.sim + "/api/v1/simulations", headers=sh,
                        timeout=10).json() == listing
    st = emu.stats()
    assert (st["exports"], st["imports"], st["simulations"]) == (2, 2, 2)
    # the running import goes on where it was: 60 rows at 20/s are due 3 s after its start
    emu.advance("5s")
    two = import_view(emu, h, running)["status"]
    assert (two["processed"], two["created"], two["failed"]) == (60, 60, 0)
    # a new submission after the restart gets a new id and is kept too
    again = new_import(emu, h, "P-DEMO", [{"id": "NEW-3", "siteId": "S-1"}])
    restart(emu)
    assert import_view(emu, h, again)["status"]["processed"] == 1
    assert import_view(emu, h, done) == imp_before
    # expired jobs leave memory and disk: exports 1 h after ready, runs after 30 d
    emu.advance("2h")
    h = emu.dex_headers()  # the old token expired too
    assert get_export(emu, h, acts).status_code == 404
    new_export(emu, h, "personnel", {"projectId": "P-DEMO"})  # sweeps the others
    assert len(os.listdir(os.path.join(data, "exports"))) == 1
    emu.advance("31d")
    sh = emu.sim_headers()
    assert requests.get(emu.sim + "/api/v1/simulations", headers=sh, timeout=10).json() == []
    assert os.listdir(os.path.join(data, "runs")) == []
    assert sorted(os.listdir(data)) == ["emulator.json", "exports", "imports", "runs"]
    assert oct(os.stat(data).st_mode & 0o777) == "0o700"


def test_revocation_is_kept(make_emulator):
    emu = make_emulator({"data_dir": "data"})
    old = emu.dex_headers()
    requests.post(emu.dex + "/__emulator/revoke", timeout=5)
    new = emu.dex_headers()
    restart(emu)
    r = requests.get(emu.dex + "/public/export", params={"correlationId": "x"}, headers=old,
                     timeout=5)
    assert r.status_code == 401
    r = requests.get(emu.dex + "/public/export", params={"correlationId": "x"}, headers=new,
                     timeout=5)
    assert r.status_code == 404


def test_without_data_dir_nothing_is_kept(make_emulator):
    emu = make_emulator()
    d = os.path.dirname(emu.config_path)
    h = emu.dex_headers()
    cid = new_export(emu, h, "activities", {"projectId": "P-DEMO"})
    emu.advance("1m")
    restart(emu)
    assert requests.get(emu.dex + "/__emulator/clock", timeout=5).json()["offsetMs"] == 0
    r = get_export(emu, emu.dex_headers(), cid)
    assert r.status_code == 404
    r = requests.get(emu.dex + "/public/export", params={"correlationId": cid}, headers=h,
                     timeout=5)
    assert r.status_code == 401  # the token key was random per start
    assert sorted(os.listdir(d)) == ["emulator.2.log", "emulator.log", "emulator.yaml"]


def test_unusable_data_dir_refuses_to_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cfg = json.loads(json.dumps(EMULATOR_DEFAULTS))
    cfg["listen"] = {k: f"127.0.0.1:{free_port()}" for k in ("dex", "sim", "design", "auth")}
    cfg["data_dir"] = "file/data"
    path = tmp_path / "emulator.yaml"
    path.write_text(to_yaml(cfg) + "\n")
    r = subprocess.run([os.path.join(BUILD, "tidegate-emulator"), "-c", str(path)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 1
    assert "data_dir: cannot create" in r.stderr, r.stderr


# ---- the embedded emulator under kill -9 of the gateway ----

def embedded(tmp_path, start, data_dir=True):
    """A gateway (start(overrides) makes it) with the emulator in its process,
    keeping its state in tmp_path/emulator-data, and webhooks to loopback."""
    ports = {k: free_port() for k in ("dex", "sim", "design", "auth")}
    cfg = json.loads(json.dumps(EMULATOR_DEFAULTS))
    cfg["listen"] = {k: f"127.0.0.1:{p}" for k, p in ports.items()}
    cfg["export"] = {"delay": "1s", "expiry": "1h"}
    if data_dir:
        cfg["data_dir"] = "emulator-data"
    path = os.path.join(tmp_path, "embedded-emulator.yaml")
    with open(path, "w") as f:
        f.write(to_yaml(cfg) + "\n")
    secret = os.path.join(tmp_path, "webhook-secret")
    with open(secret, "w") as f:
        f.write(SECRET + "\n")
    return start({
        "upstream": "embedded", "emulator_config": path,
        "dex": {"url": f"http://127.0.0.1:{ports['dex']}"},
        "sim": {"url": f"http://127.0.0.1:{ports['sim']}",
                "fallback_url": f"http://127.0.0.1:{ports['design']}",
                "auth_url": f"http://127.0.0.1:{ports['auth']}"},
        "keys": [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
                 {"name": "ops", "sha256": ADMIN_SHA, "services": ["admin"]}],
        "webhooks": {"allow": ["127.0.0.1/32"], "secret_file": secret,
                     "schedule": ["0s", "200ms", "400ms", "800ms", "1s", "1s"],
                     "poll_interval": "200ms", "attempt_timeout": "3s", "lease": "2s"}})


def states(gw):
    """How many webhook jobs are in each state (the admin API)."""
    r = requests.get(gw.admin + "/webhooks", params={"limit": 1000},
                     headers=gw.headers(ADMIN_KEY), timeout=10)
    assert r.status_code == 200, r.text
    out = {}
    for j in r.json()["webhooks"]:
        out[j["state"]] = out.get(j["state"], 0) + 1
    return out


def exports_under_kills(gw, receiver, n, kills, seed=16):
    """n exports with callbackUrl through gw, in kills rounds, each ended by a
    kill -9 of the gateway at a random moment and a restart: the webhook ids."""
    rnd = random.Random(seed)
    ids = []
    for k in range(kills):
        for _ in range(n * (k + 1) // kills - n * k // kills):
            r = requests.post(gw.dex + EXPORT + "activities", headers=gw.headers(), timeout=10,
                              json={"projectId": "P-DEMO", "callbackUrl": receiver.url("/k")})
            assert r.status_code == 200, r.text
            ids.append(r.headers["X-Tidegate-Webhook-Id"])
        time.sleep(rnd.uniform(0.1, 1.2))
        gw.proc.kill()
        gw.proc.wait()
        gw.restart()
    return ids


def test_embedded_emulator_loses_no_export_under_kill_9(tmp_path, make_gateway, receiver):
    """40 exports with callbackUrl, 5 kill -9 of the gateway (and so of its
    emulator) at random moments while exports are being prepared: every
    webhook delivered, none dead. bench/emulator_kill9.py runs it larger,
    and without data_dir for the figure before."""
    gw = embedded(str(tmp_path), lambda over: make_gateway(None, over))
    t0 = time.monotonic()
    ids = exports_under_kills(gw, receiver, 40, 5)
    delivered = lambda: {q["headers"]["webhook-id"] for q in receiver.seen()
                         if q["status"] == 200}
    receiver.wait(lambda: delivered() >= set(ids), timeout=40, what="every webhook")
    seen = [q["headers"]["webhook-id"] for q in receiver.seen()]
    print(f"{len(ids)} exports, 5 kills: {len(set(seen))} delivered, "
          f"{len(seen) - len(set(seen))} duplicates, {time.monotonic() - t0:.1f} s")
    wait(lambda: states(gw).get("delivered") == len(ids), timeout=10,
         what="every job delivered")
    assert states(gw) == {"delivered": len(ids)}
    assert len(os.listdir(tmp_path / "emulator-data" / "exports")) == len(ids)
