"""The console on the admin listener: GET / and its files served from the
binary without a key, with a strict Content-Security-Policy and ETags that
are the files' hashes; the run registry on the admin listener across keys
(GET /runs, /runs/sweeps, /runs/sweeps/{id}); and the console driven in
Debian's chromium with playwright-core (console_browser.mjs): each panel
shows what the JSON endpoints say, a dead webhook is redelivered by a
click, the sweep chart has one series per variant, a wrong key is refused
in words, no console error, no request leaves the admin origin, no layout
shift while refreshing. Screenshots of each panel go to $TG_CONSOLE_SHOTS
(default: the test's directory)."""
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest
import requests

import webhook_verify
from conftest import NPM_DIR, ROOT, TEST_KEY, TEST_KEY_SHA
from test_gateway_runs import embedded_gateway, submit_case, wait_row
from test_gateway_sweeps import get_case, get_sweep, post_sweep, vessels, wait_done
from test_gateway_webhooks import (ADMIN_KEY, ADMIN_SHA, SECRET, Receiver, export, hooks,
                                   wait_state)

CONSOLE_DIR = os.path.join(ROOT, "src", "gateway", "console")
OTHER_KEY = "other-console-key"
VIEW_KEY = "viewer-console-key"
HOSTILE = '<img src="/x" data-x="1"><b>k</b>'


def keys():
    return [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
            {"name": "other", "sha256": hashlib.sha256(OTHER_KEY.encode()).hexdigest(),
             "services": ["dex", "sim"]},
            {"name": "ops", "sha256": ADMIN_SHA, "services": ["admin"]},
            {"name": "viewer", "sha256": hashlib.sha256(VIEW_KEY.encode()).hexdigest(),
             "services": ["admin-read"]},
            # a name that is markup: the console must show it as text
            {"name": HOSTILE, "sha256": hashlib.sha256(b"hostile").hexdigest(),
             "services": ["dex"]}]


def adm():
    return {"Authorization": "Bearer " + ADMIN_KEY}


def test_page_and_files_served_without_a_key_with_csp_and_etags(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": keys()})
    with open(os.path.join(CONSOLE_DIR, "index.html"), "rb") as f:
        page_src = f.read()
    r = requests.get(gw.admin + "/", timeout=5)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.content == page_src               # the file as written, from the binary
    csp = r.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Cache-Control"] == "no-cache"
    assert "Set-Cookie" not in r.headers
    assert r.headers["ETag"] == '"' + hashlib.sha256(page_src).hexdigest()[:32] + '"'
    # nothing inline, nothing from elsewhere: every reference is a path here
    text = page_src.decode()
    assert "<script>" not in text and "<style" not in text and " style=" not in text
    assert "//" not in text.replace("http://www.w3.org", "")
    # the files, each with its type, policy and hash
    for name, ctype in (("console.js", "text/javascript; charset=utf-8"),
                        ("console.css", "text/css; charset=utf-8")):
        with open(os.path.join(CONSOLE_DIR, name), "rb") as f:
            src = f.read()
        r = requests.get(f"{gw.admin}/console/{name}", timeout=5)
        assert r.status_code == 200 and r.content == src, name
        assert r.headers["Content-Type"] == ctype
        assert r.headers["Content-Security-Policy"] == csp
        etag = '"' + hashlib.sha256(src).hexdigest()[:32] + '"'
        assert r.headers["ETag"] == etag
        # revalidation: 304 without a body while the binary is the same
        r = requests.get(f"{gw.admin}/console/{name}", headers={"If-None-Match": etag},
                         timeout=5)
        assert r.status_code == 304 and r.content == b"" and r.headers["ETag"] == etag
        r = requests.get(f"{gw.admin}/console/{name}", headers={"If-None-Match": '"other"'},
                         timeout=5)
        assert r.status_code == 200 and r.content == src
    # HEAD: the head alone, with the length
    r = requests.head(gw.admin + "/", timeout=5)
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["Content-Length"]) == len(page_src)
    # what is not a file of it
    r = requests.get(gw.admin + "/console/nope.js", timeout=5)
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    assert requests.get(gw.admin + "/index.html", timeout=5).status_code == 404
    r = requests.post(gw.admin + "/", timeout=5)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    # the JSON it reads still asks for the key
    assert requests.get(gw.admin + "/webhooks", timeout=5).status_code == 401
    assert requests.get(gw.admin + "/runs", timeout=5).status_code == 401
    ops = [e["op"] for e in gw.log_lines() if e.get("event") == "access"
           and e.get("path", "").startswith(("/console/", "/"))]
    assert "console" in ops


def test_runs_and_sweeps_on_the_admin_listener_across_keys(tmp_path, make_gateway):
    gw = embedded_gateway(tmp_path, make_gateway, {"keys": keys()})
    mine = submit_case(gw).json()["simulationId"]
    other = submit_case(gw, headers={"Authorization": "Bearer " + OTHER_KEY}).json()["simulationId"]
    wait_row(gw, mine, lambda r: r["status"] == "COMPLETED")
    wait_row(gw, other, lambda r: r["status"] == "COMPLETED")
    base = get_case(gw, "CASE-OM-1")
    first = base["vesselList"][0]["quantity"]
    sid = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "concurrency": 2, "variants": [
        {"name": f"q{q}", "patch": vessels(base, first + q)} for q in (1, 2)]}).json()["sweepId"]
    done = wait_done(gw, sid)

    # the key: 401 without, 403 without the admin service, as the other admin APIs
    r = requests.get(gw.admin + "/runs", timeout=5)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    r = requests.get(gw.admin + "/runs", headers={"Authorization": "Bearer wrong"}, timeout=5)
    assert r.status_code == 401 and r.json()["message"] == "unknown API key"
    r = requests.get(gw.admin + "/runs/sweeps", headers=gw.headers(TEST_KEY), timeout=5)
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN"

    # every key's runs, as the runs API shows each its own
    r = requests.get(gw.admin + "/runs", headers=adm(), timeout=5)
    assert r.status_code == 200, r.text
    body = r.json()
    ids = [x["simulationId"] for x in body["runs"]]
    assert len(ids) == 4 and {mine, other} <= set(ids)
    assert {x["apiKey"] for x in body["runs"]} == {"test", "other"}
    assert body["limit"] == 100 and body["more"] is False
    own = requests.get(gw.sim + "/tidegate/v1/runs", headers=gw.headers(), timeout=5).json()
    by_id = {x["simulationId"]: x for x in body["runs"]}
    for x in own["runs"]:
        assert by_id[x["simulationId"]] == x          # the same body, run for run
    r = requests.get(gw.admin + "/runs", params={"sweepId": sid}, headers=adm(), timeout=5)
    assert sorted(x["variant"] for x in r.json()["runs"]) == ["q1", "q2"]
    r = requests.get(gw.admin + "/runs", params={"limit": 1}, headers=adm(), timeout=5)
    assert len(r.json()["runs"]) == 1 and r.json()["more"] is True
    for path, q in (("/runs", {"status": "BOGUS"}), ("/runs/sweeps", {"state": "bogus"})):
        r = requests.get(gw.admin + path, params=q, headers=adm(), timeout=5)
        assert r.status_code == 400 and r.json()["error"] == "BAD_REQUEST", (path, r.text)
    for bad in ("0", "1001", "x", "-1"):
        r = requests.get(gw.admin + "/runs", params={"limit": bad}, headers=adm(), timeout=5)
        assert r.status_code == 400 and r.json()["error"] == "BAD_REQUEST", bad

    # sweeps: the list and the summary are the API's
    r = requests.get(gw.admin + "/runs/sweeps", headers=adm(), timeout=5)
    assert r.status_code == 200
    assert [s["sweepId"] for s in r.json()["sweeps"]] == [sid]
    r = requests.get(f"{gw.admin}/runs/sweeps/{sid}", headers=adm(), timeout=5)
    assert r.status_code == 200 and r.json() == done == get_sweep(gw, sid).json()
    for path in (f"/runs/sweeps/swp_{'0' * 32}", "/runs/sweeps/", f"/runs/sweeps/{sid}/x",
                 "/runs/nope"):
        r = requests.get(gw.admin + path, headers=adm(), timeout=5)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", path
    r = requests.post(gw.admin + "/runs", headers=adm(), timeout=5)
    assert r.status_code == 405 and r.headers["Allow"] == "GET"
    line = [e for e in gw.log_lines() if e.get("event") == "access" and e["path"] == "/runs"][-1]
    assert line["op"] == "runs" and line["key"] == "ops"


def test_admin_read_key_reads_the_admin_api_and_cannot_act(make_emulator, make_gateway,
                                                          tmp_path):
    """A key with admin-read: every admin API's GET, marked
    X-Tidegate-Admin-Actions: none (the console disables its buttons);
    every other method 403 before the feature, nothing done."""
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    receiver = Receiver()
    try:
        gw = make_gateway(make_emulator(), {**hooks(str(secret), schedule=["0s", "100ms"]),
                                            "keys": keys()})
        receiver.answer("/down", then=500)
        wid = export(gw, receiver.url("/down")).headers["X-Tidegate-Webhook-Id"]
        wait_state(gw, wid, "dead")
        view = {"Authorization": "Bearer " + VIEW_KEY}
        for path in ("/webhooks", f"/webhooks/{wid}", "/limits", "/runs", "/runs/sweeps"):
            r = requests.get(gw.admin + path, headers=view, timeout=5)
            assert r.status_code == 200, (path, r.text)
            assert r.headers["X-Tidegate-Admin-Actions"] == "none", path
            r = requests.get(gw.admin + path, headers=adm(), timeout=5)
            assert r.status_code == 200 and "X-Tidegate-Admin-Actions" not in r.headers, path
        assert [j["id"] for j in requests.get(gw.admin + "/webhooks", headers=view,
                                              timeout=5).json()["webhooks"]] == [wid]
        seen = len(receiver.seen("/down"))
        for path in (f"/webhooks/{wid}/redeliver", "/webhooks/redeliver?since=2000-01-01T00:00:00Z"):
            r = requests.post(gw.admin + path, headers=view, timeout=5)
            assert r.status_code == 403, r.text
            assert r.json()["error"] == "FORBIDDEN"
            assert r.json()["message"] == ("this API key may read the admin API but not act "
                                           "on it (admin-read)")
        line = [e for e in gw.log_lines() if e.get("event") == "access"
                and e["method"] == "POST"][-1]
        assert line["key"] == "viewer" and line["status"] == 403
        time.sleep(0.3)
        assert len(receiver.seen("/down")) == seen
        assert requests.get(f"{gw.admin}/webhooks/{wid}", headers=adm(),
                            timeout=5).json()["state"] == "dead"
        # a key without either admin service is refused its reads as before
        r = requests.get(gw.admin + "/webhooks", headers=gw.headers(TEST_KEY), timeout=5)
        assert r.status_code == 403 and "X-Tidegate-Admin-Actions" not in r.headers
        # and the admin key acts
        r = requests.post(f"{gw.admin}/webhooks/{wid}/redeliver", headers=adm(), timeout=5)
        assert r.status_code == 200, r.text
    finally:
        receiver.close()


def test_long_poll_waiters_and_jobs_in_flight_gauges(make_emulator, make_gateway):
    """tidegate_poll_waiters and tidegate_poll_in_flight{family} (the Jobs
    panel): the long-polls held now, back to 0 once they are answered; the
    jobs whose final answer has not come, by family."""
    emu = make_emulator({"export": {"delay": "30s"}})
    gw = make_gateway(emu)
    cids = [export_cid(gw) for _ in range(2)]
    assert gw.metric("tidegate_poll_waiters") == 0
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futs = [pool.submit(requests.get, gw.dex + "/public/export",
                            params={"correlationId": c, "wait": 3}, headers=gw.headers(),
                            timeout=10) for c in (cids[0], cids[0], cids[1])]
        deadline = time.monotonic() + 2
        while gw.metric("tidegate_poll_waiters") != 3:
            assert time.monotonic() < deadline, gw.metric("tidegate_poll_waiters")
            time.sleep(0.05)
        assert gw.metric("tidegate_poll_entries") == 2
        assert gw.metric("tidegate_poll_in_flight", family="export") == 2
        assert [f.result().status_code for f in futs] == [202, 202, 202]
    assert gw.metric("tidegate_poll_waiters") == 0
    # still in flight (the vendor said 202), none of the other families
    assert gw.metric("tidegate_poll_in_flight", family="export") == 2
    assert gw.metric("tidegate_poll_in_flight", family="import") == 0
    assert gw.metric("tidegate_poll_in_flight", family="simulation") == 0
    # one ends: the vendor's final answer is no longer in flight
    emu.advance("31s")
    deadline = time.monotonic() + 5
    while requests.get(gw.dex + "/public/export", params={"correlationId": cids[0]},
                       headers=gw.headers(), timeout=10).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert gw.metric("tidegate_poll_in_flight", family="export") == 1


def export_cid(gw):
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


# ---- in a real browser ----

def metric(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{want}}}" if want else name
    total = 0.0
    for line in text.splitlines():
        s, _, v = line.rpartition(" ")
        if not line.startswith("#") and (s == series or (not want and s.startswith(name + "{"))):
            total += float(v)
    return total


def snapshot(gw):
    """The JSON endpoints the console reads, as a client reads them."""
    return {
        "ready": requests.get(gw.admin + "/readyz", timeout=5).json(),
        "metrics": requests.get(gw.admin + "/metrics", timeout=5).text,
        "dead": requests.get(gw.admin + "/webhooks?state=dead&limit=50", headers=adm(),
                             timeout=5).json(),
        "runs": requests.get(gw.admin + "/runs?limit=10", headers=adm(), timeout=5).json(),
        "limits": requests.get(gw.admin + "/limits", headers=adm(), timeout=5).json(),
        "policy": requests.get(gw.admin + "/webhooks/policy", headers=adm(), timeout=5).json(),
        "fleet": requests.get(gw.admin + "/fleet", headers=adm(), timeout=5).json(),
    }


def figures(snap):
    """What the console's figures must read, from a snapshot."""
    m = snap["metrics"]
    saved = sum(metric(m, "tidegate_poll_requests_total", service=s, result=r)
                for s in ("dex", "sim") for r in ("cached", "coalesced")) + \
        sum(metric(m, "tidegate_login_cache_total", service=s, result="hit") for s in ("dex", "sim"))
    calls = sum(metric(m, "tidegate_upstream_requests_total", service=s, kind="sent")
                for s in ("dex", "sim"))
    f = {"saved": str(int(saved)), "calls": str(int(calls))}
    for st in ("IN_PROGRESS", "COMPLETED", "FAILED", "EXPIRED", "UNKNOWN"):
        f["runs_" + st] = str(int(metric(m, "tidegate_runs", status=st)))
    for st in ("waiting", "ready", "delivered", "gone", "dead"):
        f["webhook_" + st] = str(int(metric(m, "tidegate_webhook_jobs", state=st)))
    f["sweeps_done"] = str(int(metric(m, "tidegate_sweeps", state="done")))
    f["poll_entries"] = str(int(metric(m, "tidegate_poll_entries")))
    f["poll_waiters"] = str(int(metric(m, "tidegate_poll_waiters")))
    for fam in ("export", "import", "simulation"):
        f["in_flight_" + fam] = str(int(metric(m, "tidegate_poll_in_flight", family=fam)))
    f["poll_spool_files"] = str(int(metric(m, "tidegate_poll_spool_files")))
    f["leases_held"] = str(int(metric(m, "tidegate_state_leases_held")))
    f["backend"] = snap["ready"]["state"]["backend"]
    f["status"] = snap["ready"]["status"]
    return f


def shown(panels):
    f = dict(panels["figures"])
    f["saved"], f["calls"] = panels["saved"], panels["calls"]
    return f


def test_console_in_chromium(tmp_path, make_gateway):
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed (scripts/deps.sh installs it with the test "
                    "packages)")
    if not os.path.isfile(os.path.join(NPM_DIR, "node_modules", "playwright-core",
                                       "package.json")):
        pytest.fail(f"playwright-core is not installed in {NPM_DIR}: "
                    "run . scripts/deps.sh && tg_install_npm")
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    receiver = Receiver()
    try:
        gw = embedded_gateway(tmp_path, make_gateway, {
            **hooks(str(secret), schedule=["0s", "100ms"]), "keys": keys()})
        receiver.answer("/down", then=500)
        wid = export(gw, receiver.url("/down")).headers["X-Tidegate-Webhook-Id"]
        wait_state(gw, wid, "dead")
        base = get_case(gw, "CASE-OM-1")
        first = base["vesselList"][0]["quantity"]
        variants = [{"name": f"ctv-{first + q}", "patch": vessels(base, first + q)}
                    for q in (0, 2, 4)]
        sid = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "concurrency": 3,
                              "variants": variants}).json()["sweepId"]
        run = submit_case(gw).json()["simulationId"]
        done = wait_done(gw, sid)
        wait_row(gw, run, lambda r: r["status"] == "COMPLETED")
        receiver.answer("/down", then=200)       # the redelivery goes through
        shots = os.environ.get("TG_CONSOLE_SHOTS") or str(tmp_path / "shots")
        os.makedirs(shots, exist_ok=True)
        cfg = {"admin": gw.admin, "chromium": browser, "shots": shots, "sweeps": 1,
               "pid": gw.proc.pid,
               "wrongKey": "not-a-key", "readKey": TEST_KEY, "viewKey": VIEW_KEY,
               "adminKey": ADMIN_KEY, "mark": str(tmp_path / "mark")}
        env = {**os.environ, "TG_NPM_DIR": NPM_DIR}
        p = subprocess.Popen(["node", os.path.join(os.path.dirname(__file__),
                                                   "console_browser.mjs"), json.dumps(cfg)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            # vendor calls between the page's first samples: its latency chart has them
            deadline = time.monotonic() + 60
            while not os.path.exists(cfg["mark"] + ".loaded") and p.poll() is None:
                assert time.monotonic() < deadline, "the page did not load"
                time.sleep(0.1)
            for _ in range(3):
                get_case(gw, "CASE-OM-1")
            before = snapshot(gw)
            open(cfg["mark"] + ".go", "w").close()
            stdout, stderr = p.communicate(timeout=180)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        assert p.returncode == 0, stderr
        out = json.loads(stdout)
        assert "failure" not in out, out.get("failure")
        steps = out["steps"]

        # the page: no console error, nothing but the admin origin, the policy on
        # (the browser logs each refused JSON request; those are the test's
        # wrong and read-only keys, before the admin key is typed)
        refused = [e for e in out["errors"] if e["step"] != "adminKey"]
        assert [e for e in out["errors"] if e["step"] == "adminKey"] == []
        assert all("status of 401" in e["text"] or "status of 403" in e["text"]
                   for e in refused), refused
        assert out["requests"] and all(u.startswith(gw.admin + "/") for u in out["requests"])
        assert "default-src 'self'" in steps["headers"]["content-security-policy"]

        # without a key, with a wrong one, with one lacking the admin service
        assert "Enter an admin API key" in steps["noKey"]["auth"]
        assert steps["wrongKey"]["auth"] == "This key was refused: unknown API key."
        assert steps["wrongKey"]["buttons"] == [] and steps["wrongKey"]["dead"] == [
            ["needs a key with the admin service"]]
        vr = steps["viewKey"]
        assert "admin-read" in vr["auth"] and vr["status"].endswith("read-only")
        assert vr["buttons"] == [{"id": wid, "disabled": True}]
        assert [r[0] for r in vr["dead"]] == [wid]
        ro = steps["readKey"]
        assert "read-only" in ro["auth"] and ro["buttons"] == []
        assert ro["status"].endswith("read-only")
        assert ro["figures"]["runs_COMPLETED"] == "4"     # the public figures still show

        # with the admin key: each panel as the JSON endpoints say
        a = steps["admin"]
        after = snapshot(gw)
        want_b, want_a = figures(before), figures(after)
        for k, v in shown(a).items():
            if k in want_b:
                assert v in (want_b[k], want_a[k]), (k, v, want_b[k], want_a[k])
        assert shown(a)["runs_COMPLETED"] == "4" and shown(a)["webhook_dead"] == "1"
        assert int(shown(a)["calls"]) > 0
        ready = before["ready"]
        assert [r[:3] for r in a["services"]] == [
            [s, ready["vendor"][s], ready["services"][s]] for s in ("dex", "sim")]
        assert [r[:4] for r in a["origins"]] == [
            [s, o["origin"], o["host"], o["state"]] for s in ("dex", "sim")
            for o in ready["origins"][s]]
        assert [r[0] for r in a["dead"]] == [j["id"] for j in before["dead"]["webhooks"]] == [wid]
        assert a["buttons"] == [{"id": wid, "disabled": False}]
        assert [r[0] for r in a["runs"]] == [x["simulationId"] for x in before["runs"]["runs"]]
        assert [r[0] for r in a["limits"]] == [k["key"] for k in before["limits"]["keys"]]
        assert HOSTILE in [r[0] for r in a["limits"]] and a["markup"] == 0
        # the instances (one, SQLite): itself, its leads not recorded
        (inst,) = before["fleet"]["instances"]
        assert a["fleet"] == [[inst["instance"] + " (this one)", "–",
                               "not recorded (one instance)", "–", "–"]]
        assert inst["self"] is True and inst["leadCount"] is None
        # the webhook egress policy: the allow-list and the refused ranges
        pol = before["policy"]
        assert a["egressAllow"] == [[x] for x in pol["allow"]] == [["127.0.0.1/32"]]
        assert a["egressRefused"] == [[x["cidr"], x["range"]] for x in pol["refused"]]
        assert (shown(a)["egress_mode"], shown(a)["egress_schemes"], shown(a)["egress_ports"],
                shown(a)["egress_ca"]) == ("deliver", "http, https", "1–65535", "system")
        assert a["callSeries"] == 2                       # dex and sim
        # the vendor's latency: p50 and p95 of the sim calls made after the first sample
        names = [v["name"] for v in a["vendorSeries"]]
        assert {"sim p50", "sim p95"} <= set(names), a["vendorSeries"]
        assert set(names) <= {"dex p50", "dex p95", "sim p50", "sim p95"}, names
        assert all(v["points"] >= 1 for v in a["vendorSeries"])
        assert "sim p95" in a["vendorLegend"] and "ms" in a["vendorLegend"]
        # the sweep: its variants side by side, and three series in its chart
        [sw] = a["sweeps"]
        assert sw["id"] == sid
        assert [r[:2] for r in sw["rows"]] == [[v["name"], v["status"]] for v in done["variants"]]
        col = done["columns"].index("availability")
        assert [float(r[2 + col]) for r in sw["rows"]] == pytest.approx(
            [v["figures"]["availability"] for v in done["variants"]], rel=1e-2)
        assert [s["name"] for s in sw["series"]] == [v["name"] for v in variants]
        assert all(s["points"] == min(8, len(done["columns"])) for s in sw["series"])

        # redelivered by its button: the receiver has it, signed; the job delivered
        assert steps["redelivered"]["id"] == wid
        assert "queued" in steps["redelivered"]["message"]
        receiver.wait(lambda: any(q["status"] == 200 for q in receiver.seen("/down")))
        got = [q for q in receiver.seen("/down") if q["status"] == 200]
        assert len(got) == 1 and webhook_verify.verify(SECRET, got[0]["headers"], got[0]["body"])
        wait_state(gw, wid, "delivered")
        red = [e for e in gw.log_lines() if e.get("event") == "access"
               and e.get("path") == f"/webhooks/{wid}/redeliver"]
        assert [(e["method"], e["status"], e["key"]) for e in red] == [("POST", 200, "ops")]

        # safe and usable: the key in the tab's storage only, no cookie; keys
        # reach the button; no layout shift while refreshing; narrow; schemes
        assert steps["keyStored"] == ADMIN_KEY and steps["cookies"] == []
        assert steps["tabReachesRedeliver"] is True
        assert steps["shiftScore"] < 0.001, steps["shiftScore"]
        assert steps["narrowOverflow"] <= 0
        assert steps["schemes"]["light"] != steps["schemes"]["dark"]
        # a frozen gateway: the page says so at its 10 s deadline, then goes on
        fr = steps["frozen"]
        assert fr["status"] == "the gateway did not answer within 10 s (retrying)", fr
        assert 9000 <= fr["ms"] <= 25000, fr
        assert steps["thawed"] is True
        for name in ("vendor", "jobs", "webhooks", "simulations", "fleet", "console-1280",
                     "console-400", "console-dark"):
            with open(os.path.join(shots, name + ".png"), "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
    finally:
        receiver.close()
