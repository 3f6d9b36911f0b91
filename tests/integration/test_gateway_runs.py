"""The simulation run registry wired into the gateway: an accepted
submission is recorded (durably, before the client is answered) with the
caller's key, the host that answered, the case digest and the validation
verdict, and the registry survives a restart; the tracker follows runs to
their end, keeps the key figures and delivers the completion webhook."""
import hashlib
import json
import os
import sqlite3
import time

import pytest
import requests

import webhook_verify
from conftest import EMULATOR_DEFAULTS, TEST_KEY_SHA, free_port, to_yaml
from test_gateway_webhooks import SECRET, Receiver, hooks


def get_case(gw, case_id):
    r = requests.get(gw.sim + "/api/v1/cases/" + case_id, headers=gw.headers(), timeout=10)
    assert r.status_code == 200
    return r.json()


def submit(gw, body):
    return requests.post(gw.sim + "/api/v1/simulations", data=body,
                         headers={**gw.headers(), "Content-Type": "application/json"},
                         timeout=10)


def registry_row(gw, sim_id):
    db = sqlite3.connect(os.path.join(gw.tmp, "runs.db"))
    try:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM runs WHERE simulation_id = ?", (sim_id,)).fetchone()
        return dict(row) if row is not None else None
    finally:
        db.close()


def test_submission_recorded(emulator, gateway):
    case = get_case(gateway, "CASE-OM-1")
    case["vesselList"][0]["quantity"] += 1
    body = json.dumps(case).encode()
    r = submit(gateway, body)
    assert r.status_code == 201, r.text
    sim_id = r.json()["simulationId"]
    assert "X-Tidegate-Run-Tracked" not in r.headers
    row = registry_row(gateway, sim_id)
    assert row is not None
    assert row["api_key"] == "test"
    assert row["host"] == "primary"
    assert row["case_id"] == "CASE-OM-1"
    assert row["case_sha256"] == hashlib.sha256(body).hexdigest()
    assert row["validation"] == "passed (diff checked)"
    assert row["status"] == "IN_PROGRESS"


def test_refused_submission_not_recorded(emulator, gateway):
    case = get_case(gateway, "CASE-OM-1")
    case["caseId"] = 42
    r = submit(gateway, json.dumps(case).encode())
    assert r.status_code == 400
    assert emulator.calls("POST /api/v1/simulations") == 0


def test_registry_survives_restart(emulator, gateway):
    case = get_case(gateway, "CASE-OM-1")
    r = submit(gateway, json.dumps(case).encode())
    assert r.status_code == 201, r.text
    sim_id = r.json()["simulationId"]
    assert gateway.stop() == 0
    gateway.restart()
    assert registry_row(gateway, sim_id) is not None
    r = submit(gateway, json.dumps(case).encode())
    assert r.status_code == 201, r.text
    assert registry_row(gateway, r.json()["simulationId"]) is not None


def wait_row(gw, sim_id, pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        row = registry_row(gw, sim_id)
        if row is not None and pred(row):
            return row
        assert time.monotonic() < deadline, row
        time.sleep(0.1)


def submit_case(gw, headers=None, params=None, expect=201):
    case = get_case(gw, "CASE-OM-1")
    r = requests.post(gw.sim + "/api/v1/simulations", data=json.dumps(case),
                      headers={**gw.headers(), "Content-Type": "application/json",
                               **(headers or {})}, params=params, timeout=10)
    assert r.status_code == expect, r.text
    return r


def test_run_tracked_to_completion(emulator, gateway):
    sim_id = submit_case(gateway).json()["simulationId"]
    row = wait_row(gateway, sim_id, lambda r: r["status"] != "IN_PROGRESS")
    assert row["status"] == "COMPLETED"
    assert row["checks"] >= 1 and row["completed_at"]
    row = wait_row(gateway, sim_id, lambda r: r["figures"] is not None)
    assert json.loads(row["figures"])


def test_run_tracked_to_failure(make_emulator, make_gateway):
    emu = make_emulator({"sim": {"failure_rate": 1}})
    gw = make_gateway(emu)
    sim_id = submit_case(gw).json()["simulationId"]
    row = wait_row(gw, sim_id, lambda r: r["status"] != "IN_PROGRESS")
    assert row["status"] == "FAILED"
    assert row["failure"]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_completion_webhook_delivered(emulator, make_gateway, receiver, tmp_path):
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    gw = make_gateway(emulator, hooks(str(secret)))
    r = submit_case(gw, headers={"X-Tidegate-Callback-Url": receiver.url("/done")})
    sim_id = r.json()["simulationId"]
    receiver.wait(lambda: receiver.seen("/done"), timeout=15)
    req = receiver.seen("/done")[0]
    assert webhook_verify.verify(SECRET, req["headers"], req["body"])
    ev = json.loads(req["body"])
    assert ev["type"] == "simulation.completed"
    assert ev["data"]["simulationId"] == sim_id
    assert emulator.calls("POST /api/v1/simulations") == 1


def test_callback_refused_by_egress_policy(emulator, make_gateway, tmp_path):
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    gw = make_gateway(emulator, hooks(str(secret)))
    r = submit_case(gw, params={"callbackUrl": "http://10.1.2.3/hook"}, expect=400)
    assert "egress" in r.text
    assert emulator.calls("POST /api/v1/simulations") == 0


def embedded_gateway(tmp_path, make_gateway, overrides=None, emulator=None):
    """A gateway running the emulator in its own process, so that advancing
    the emulator's clock advances the gateway's too."""
    ports = {k: free_port() for k in ("dex", "sim", "design", "auth")}
    cfg = json.loads(json.dumps(EMULATOR_DEFAULTS))
    for section, values in (emulator or {}).items():
        cfg.setdefault(section, {}).update(values)
    cfg["listen"] = {k: f"127.0.0.1:{p}" for k, p in ports.items()}
    path = tmp_path / "embedded-emulator.yaml"
    path.write_text(to_yaml(cfg) + "\n")
    gw = make_gateway(None, {
        "upstream": "embedded", "emulator_config": str(path),
        "dex": {"url": f"http://127.0.0.1:{ports['dex']}"},
        "sim": {"url": f"http://127.0.0.1:{ports['sim']}",
                "fallback_url": f"http://127.0.0.1:{ports['design']}",
                "auth_url": f"http://127.0.0.1:{ports['auth']}"},
        **(overrides or {})})
    gw.emu_dex = f"http://127.0.0.1:{ports['dex']}"
    return gw


def advance(gw, duration):
    r = requests.post(gw.emu_dex + "/__emulator/clock", json={"advance": duration}, timeout=5)
    assert r.status_code == 200, r.text


def test_expired_run_answers_410(tmp_path, make_gateway):
    gw = embedded_gateway(tmp_path, make_gateway)
    sim_id = submit_case(gw).json()["simulationId"]
    wait_row(gw, sim_id, lambda r: r["status"] == "COMPLETED")
    url = gw.sim + "/api/v1/simulations/" + sim_id
    assert requests.get(url, headers=gw.headers(), timeout=10).status_code == 200
    advance(gw, "31d")
    for u in (url, url + "/results"):
        r = requests.get(u, headers=gw.headers(), timeout=10)
        assert r.status_code == 410, r.text
        body = r.json()
        assert body["error"] == "GONE" and body["simulationId"] == sim_id
        assert "expired" in body["message"]
        assert "X-Tidegate-Archived" not in r.headers


def test_archived_results_served_after_expiry(tmp_path, make_gateway):
    gw = embedded_gateway(tmp_path, make_gateway, {"runs": {"archive": True}})
    sim_id = submit_case(gw).json()["simulationId"]
    wait_row(gw, sim_id, lambda r: r["archived"])
    url = gw.sim + "/api/v1/simulations/" + sim_id
    before = requests.get(url + "/results", headers=gw.headers(), timeout=10)
    assert before.status_code == 200
    advance(gw, "31d")
    r = requests.get(url + "/results", headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["X-Tidegate-Archived"] == "true"
    assert r.json() == before.json()
    r = requests.get(url, headers=gw.headers(), timeout=10)
    assert r.status_code == 410 and r.json()["archived"] is True


OTHER_KEY = "other-key"
OTHER_SHA = hashlib.sha256(OTHER_KEY.encode()).hexdigest()


def api(gw, path, key=None, **params):
    return requests.get(gw.sim + "/tidegate/v1" + path, params=params,
                        headers=gw.headers(key) if key else gw.headers(), timeout=10)


def test_runs_api_filters_and_ownership(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": [
        {"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "other", "sha256": OTHER_SHA, "services": ["sim"]}]})
    mine = [submit_case(gw).json()["simulationId"] for _ in range(2)]
    case = get_case(gw, "CASE-OM-1")
    r = requests.post(gw.sim + "/api/v1/simulations", json=case,
                      headers=gw.headers(OTHER_KEY), timeout=10)
    assert r.status_code == 201, r.text
    theirs = r.json()["simulationId"]
    for sim_id in mine:
        wait_row(gw, sim_id, lambda row: row["status"] == "COMPLETED")

    body = api(gw, "/runs").json()
    assert sorted(x["simulationId"] for x in body["runs"]) == sorted(mine)
    assert body["more"] is False
    assert [x["simulationId"] for x in api(gw, "/runs", OTHER_KEY).json()["runs"]] == [theirs]
    assert len(api(gw, "/runs", status="COMPLETED", caseId="CASE-OM-1").json()["runs"]) == 2
    assert api(gw, "/runs", caseId="CASE-NONE").json()["runs"] == []
    page = api(gw, "/runs", limit="1").json()
    assert len(page["runs"]) == 1 and page["more"] is True
    assert len(api(gw, "/runs", limit="1", offset="1").json()["runs"]) == 1
    assert api(gw, "/runs", **{"from": "2999-01-01T00:00:00Z"}).json()["runs"] == []
    assert api(gw, "/runs", status="BOGUS").status_code == 400
    assert api(gw, "/runs", limit="0").status_code == 400
    assert api(gw, "/runs", to="yesterday").status_code == 400

    one = api(gw, "/runs/" + mine[0])
    assert one.status_code == 200 and one.json()["simulationId"] == mine[0]
    assert one.json()["apiKey"] == "test" and one.json()["status"] == "COMPLETED"
    assert api(gw, "/runs/" + mine[0], OTHER_KEY).status_code == 404
    assert api(gw, "/runs/nope").status_code == 404
    assert requests.get(gw.sim + "/tidegate/v1/runs", timeout=10).status_code == 401
    assert requests.post(gw.sim + "/tidegate/v1/runs", headers=gw.headers(),
                         timeout=10).status_code == 405
    assert sum(n for k, n in emulator.stats()["calls"].items() if "tidegate" in k) == 0



@pytest.mark.parametrize("poll", [True, False])
def test_status_seen_by_client_recorded(emulator, make_gateway, poll):
    gw = make_gateway(emulator, {"poll": {"enabled": poll}})
    sim_id = submit_case(gw).json()["simulationId"]
    time.sleep(1.1)     # the emulator's run time; the tracker's first check is at 2 s
    r = requests.get(gw.sim + "/api/v1/simulations/" + sim_id, headers=gw.headers(),
                     timeout=10)
    assert r.status_code == 200 and r.json()["status"] == "COMPLETED", r.text
    row = registry_row(gw, sim_id)
    assert row["status"] == "COMPLETED" and row["checks"] == 1
    wait_row(gw, sim_id, lambda x: x["figures"] is not None)


def test_unfinished_run_deleted_by_vendor_gets_expired_webhook(tmp_path, make_gateway,
                                                               receiver):
    """A run still in progress when its 30 days pass ends as EXPIRED: the
    retention pass marks it, and its end is handled like any other."""
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    gw = embedded_gateway(tmp_path, make_gateway,
                          {**hooks(str(secret)), "runs": {"retention_interval": "300ms"}},
                          emulator={"sim": {"run_time": "10d"}})
    sim_id = submit_case(gw, headers={"X-Tidegate-Callback-Url": receiver.url("/x")}) \
        .json()["simulationId"]
    advance(gw, "31d")
    receiver.wait(lambda: receiver.seen("/x"), timeout=15)
    ev = json.loads(receiver.seen("/x")[0]["body"])
    assert ev["type"] == "simulation.expired" and ev["data"]["simulationId"] == sim_id
    row = registry_row(gw, sim_id)
    assert row["status"] == "EXPIRED" and row["ended_handled"] == 1


def test_archive_survives_restart(tmp_path, make_gateway):
    """The archive lives in the registry: after a restart (the embedded
    vendor forgets everything) the expired run's results are still served."""
    gw = embedded_gateway(tmp_path, make_gateway, {"runs": {"archive": True}})
    sim_id = submit_case(gw).json()["simulationId"]
    wait_row(gw, sim_id, lambda r: r["archived"])
    url = gw.sim + "/api/v1/simulations/" + sim_id
    before = requests.get(url + "/results", headers=gw.headers(), timeout=10).json()
    assert gw.stop() == 0
    gw.restart()
    advance(gw, "31d")
    r = requests.get(url + "/results", headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["X-Tidegate-Archived"] == "true"
    assert r.json() == before
    run = requests.get(gw.sim + "/tidegate/v1/runs/" + sim_id, headers=gw.headers(),
                       timeout=10).json()
    assert run["status"] in ("COMPLETED", "EXPIRED") and run["archived"] is True
