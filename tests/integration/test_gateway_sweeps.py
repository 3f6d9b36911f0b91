"""Sweeps through the gateway: one base case, named variants as restricted
JSON Merge Patches, every variant checked before anything is submitted,
submitted within the sweep's concurrency, tracked as one sweep, summarised
side by side (JSON and CSV), with a webhook when every variant has ended;
running sweeps resume after a restart and settle when their runs expire."""
import copy
import csv
import hashlib
import io
import json
import os
import sqlite3
import time

import requests

import webhook_verify
from conftest import TEST_KEY_SHA
from test_gateway_runs import (OTHER_KEY, OTHER_SHA, advance, embedded_gateway, get_case,  # noqa: F401
                               receiver)
from test_gateway_webhooks import SECRET, hooks

SIM_POST = "POST /api/v1/simulations"


def post_sweep(gw, body, key=None, expect=201):
    r = requests.post(gw.sim + "/tidegate/v1/sweeps", json=body,
                      headers=gw.headers(key) if key else gw.headers(), timeout=15)
    assert r.status_code == expect, r.text
    return r


def get_sweep(gw, sid, key=None, accept=None):
    h = gw.headers(key) if key else gw.headers()
    if accept:
        h["Accept"] = accept
    return requests.get(gw.sim + "/tidegate/v1/sweeps/" + sid, headers=h, timeout=10)


def wait_done(gw, sid, timeout=60.0, watch=None, key=None):
    deadline = time.monotonic() + timeout
    while True:
        body = get_sweep(gw, sid, key=key).json()
        if watch:
            watch(body)
        if body["state"] == "done":
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def vessels(base, qty):
    """A vesselList patch: the base vessels with the first one's quantity."""
    vl = copy.deepcopy(base["vesselList"])
    vl[0]["quantity"] = qty
    return {"vesselList": vl}


def registry_runs(gw, sid):
    db = sqlite3.connect(os.path.join(gw.tmp, "runs.db"))
    try:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(
            "SELECT * FROM runs WHERE sweep_id = ? ORDER BY submitted_at", (sid,))]
    finally:
        db.close()


def max_overlap(runs):
    """Most runs in flight at once: each from its submission to the moment
    the gateway saw it end (its slot came free)."""
    spans = [(r["submitted_at"], r["status_at"]) for r in runs]
    return max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)


def test_twenty_variant_sweep(emulator, make_gateway, receiver, tmp_path):
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    # the entry check off (sim.check_entries): a variant the vendor fails
    gw = make_gateway(emulator, {**hooks(str(secret)), "sim": {"check_entries": False}})
    base = get_case(gw, "CASE-OM-1")
    first = base["vesselList"][0]["quantity"]
    variants = [{"name": f"v{q:02d}", "patch": vessels(base, first + q)} for q in range(19)]
    bad = copy.deepcopy(base["personnelList"])
    bad[0]["quantity"] = -1          # unchecked here; the vendor fails it
    variants.append({"name": "broken-crew", "patch": {"personnelList": bad}})
    r = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "concurrency": 4,
                        "callbackUrl": receiver.url("/sweep"), "variants": variants})
    sid = r.json()["sweepId"]
    assert r.headers["Location"] == "/tidegate/v1/sweeps/" + sid
    assert r.json()["state"] == "running" and len(r.json()["variants"]) == 20

    in_flight = []
    done = wait_done(gw, sid, watch=lambda b: in_flight.append(
        b["counts"]["submitting"] + b["counts"]["inProgress"]))
    assert max(in_flight) <= 4
    assert done["counts"]["completed"] == 19 and done["counts"]["failed"] == 1
    assert emulator.calls(SIM_POST) == 20
    runs = registry_runs(gw, sid)
    assert len(runs) == 20
    assert max_overlap(runs) == 4          # the limit, and used
    assert all(r["api_key"] == "test" for r in runs)

    # side by side: the variants in request order, figures under the columns
    assert [v["name"] for v in done["variants"]] == [v["name"] for v in variants]
    assert done["columns"][0] == "availability" and "totalCost" in done["columns"]
    ok = done["variants"][:19]
    assert all(v["status"] == "COMPLETED" and v["figures"]["availability"] > 0 for v in ok)
    avail = [v["figures"]["availability"] for v in ok]
    assert avail == sorted(avail) and avail[-1] > avail[0]   # more vessels, no worse
    failed = done["variants"][19]
    assert failed["status"] == "FAILED" and failed["figures"] == {}
    assert "gives no reason" in failed["failure"]

    # the same as CSV
    r = get_sweep(gw, sid, accept="text/csv")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/csv")
    assert "\r\n" in r.text
    rows = list(csv.reader(io.StringIO(r.text)))
    assert rows[0] == ["variant", "status"] + done["columns"]
    assert len(rows) == 21
    col = rows[0].index("availability")
    assert [float(row[col]) for row in rows[1:20]] == avail
    assert rows[20][:2] == ["broken-crew", "FAILED"] and set(rows[20][2:]) == {""}

    # the runs are listed under the sweep, and one webhook tells of the sweep
    listed = requests.get(gw.sim + "/tidegate/v1/runs", params={"sweepId": sid},
                          headers=gw.headers(), timeout=10).json()["runs"]
    assert len(listed) == 20 and {x["variant"] for x in listed} == {v["name"] for v in variants}
    receiver.wait(lambda: receiver.seen("/sweep"), timeout=15)
    time.sleep(0.5)
    assert len(receiver.seen("/sweep")) == 1
    req = receiver.seen("/sweep")[0]
    assert webhook_verify.verify(SECRET, req["headers"], req["body"])
    ev = json.loads(req["body"])
    assert ev["type"] == "sweep.done" and ev["data"]["sweepId"] == sid
    assert ev["data"]["counts"]["completed"] == 19


def test_every_problem_reported_before_anything_is_submitted(emulator, gateway):
    base = get_case(gateway, "CASE-OM-1")
    fx = copy.deepcopy(base["windFarms"][0]["infrastructureList"][0]["fixable"])
    fx[0]["fixableType"] = "CORECTIVE_MAINTENANCE"
    infra = [{} for _ in base["windFarms"][0]["infrastructureList"]]
    infra[0] = {"fixable": fx}
    crew = copy.deepcopy(base["personnelList"])
    crew[0]["quantity"] = -1         # a run the vendor would fail
    crew[1]["shiftHours"] = 0
    del crew[1]["role"]
    body = {"baseCaseId": "CASE-OM-1", "variants": [
        {"name": "ok", "patch": vessels(base, 2)},
        {"name": "renamed", "patch": {"name": "x"}},
        {"name": "typo", "patch": {"windFarms": [{"infrastructureList": infra}]}},
        {"name": "ok", "patch": {}},
        {"name": "crew", "patch": {"personnelList": crew}}]}
    r = post_sweep(gateway, body, expect=400)
    err = r.json()
    assert err["error"] == "VALIDATION_FAILED"
    paths = {d["path"]: d["code"] for d in err["details"]}
    assert paths["/variants/3/name"] == "duplicate"
    # name problems come first; fix them and the patch and case problems show
    body["variants"][3]["name"] = "ok-2"
    err = post_sweep(gateway, body, expect=400).json()
    paths = {d["path"]: d["code"] for d in err["details"]}
    assert paths["/variants/1/patch/name"] == "not_editable"
    typo = "/variants/2/case/windFarms/0/infrastructureList/0/fixable/0/fixableType"
    assert typo in paths
    assert "did you mean CORRECTIVE_MAINTENANCE" in next(
        d["message"] for d in err["details"] if d["path"] == typo)
    msgs = {d["path"]: d["message"] for d in err["details"]}
    assert paths["/variants/4/case/personnelList/0/quantity"] == "range"
    assert msgs["/variants/4/case/personnelList/0/quantity"] == \
        "must be at least 0 and at most 100000, not -1"
    assert paths["/variants/4/case/personnelList/1/shiftHours"] == "range"
    assert paths["/variants/4/case/personnelList/1/role"] == "required"
    assert not [p for p in paths if p.startswith("/variants/0/") or p.startswith("/variants/3/")]
    assert emulator.calls(SIM_POST) == 0
    runs = requests.get(gateway.sim + "/tidegate/v1/runs", headers=gateway.headers(),
                        timeout=10).json()["runs"]
    assert runs == []


def test_request_errors(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": [
        {"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "other", "sha256": OTHER_SHA, "services": ["sim"]}]})
    r = post_sweep(gw, {"baseCaseId": "CASE-NONE", "variants": [{"name": "a", "patch": {}}]},
                   expect=404)
    assert r.json()["error"] == "NOT_FOUND" and "CASE-NONE" in r.json()["message"]
    err = post_sweep(gw, {"variants": [], "concurrency": 0, "extra": 1}, expect=400).json()
    assert {"/baseCaseId", "/variants", "/concurrency", "/extra"} <= {
        d["path"] for d in err["details"]}
    err = post_sweep(gw, {"baseCaseId": "x", "variants": [
        {"name": f"v{i}", "patch": {}} for i in range(101)]}, expect=400).json()
    assert [(d["path"], d["code"]) for d in err["details"]] == [("/variants", "range")]
    r = requests.post(gw.sim + "/tidegate/v1/sweeps", json={}, timeout=10)
    assert r.status_code == 401
    r = requests.delete(gw.sim + "/tidegate/v1/sweeps", headers=gw.headers(), timeout=10)
    assert r.status_code == 405
    assert get_sweep(gw, "swp_nope").status_code == 404

    sid = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "variants": [
        {"name": "a", "patch": {}}]}).json()["sweepId"]
    assert get_sweep(gw, sid, key=OTHER_KEY).status_code == 404
    assert get_sweep(gw, sid).status_code == 200
    wait_done(gw, sid)

    # the list: each key its own, newest first, by state, paged
    theirs = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "variants": [
        {"name": "b", "patch": {}}]}, key=OTHER_KEY).json()["sweepId"]
    second = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "variants": [
        {"name": "c", "patch": {}}, {"name": "d", "patch": {}}]}).json()["sweepId"]

    def listed(key=None, **params):
        r = requests.get(gw.sim + "/tidegate/v1/sweeps", params=params,
                         headers=gw.headers(key) if key else gw.headers(), timeout=10)
        assert r.status_code == 200, r.text
        return r.json()
    body = listed()
    assert [x["sweepId"] for x in body["sweeps"]] == [second, sid]
    assert body["sweeps"][0]["variants"] == 2 and body["more"] is False
    assert [x["sweepId"] for x in listed(OTHER_KEY)["sweeps"]] == [theirs]
    assert [x["sweepId"] for x in listed(state="done")["sweeps"]] == [sid]
    page = listed(limit=1)
    assert [x["sweepId"] for x in page["sweeps"]] == [second] and page["more"] is True
    r = requests.get(gw.sim + "/tidegate/v1/sweeps", params={"state": "over"},
                     headers=gw.headers(), timeout=10)
    assert r.status_code == 400 and "running, done" in r.json()["message"]
    r = requests.get(gw.sim + "/tidegate/v1/sweeps", params={"limit": "0"},
                     headers=gw.headers(), timeout=10)
    assert r.status_code == 400
    wait_done(gw, second)
    wait_done(gw, theirs, key=OTHER_KEY)


def test_callback_checked_before_anything_is_stored(emulator, make_gateway, tmp_path):
    gw = make_gateway(emulator)          # no signing secret configured
    err = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "callbackUrl": "https://example.com/x",
                          "variants": [{"name": "a", "patch": {}}]}, expect=400).json()
    assert err["details"][0]["path"] == "/callbackUrl"
    assert err["details"][0]["code"] == "no_secret"
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    gw2 = make_gateway(emulator, hooks(str(secret)))
    err = post_sweep(gw2, {"baseCaseId": "CASE-OM-1", "callbackUrl": "http://10.1.2.3/x",
                           "variants": [{"name": "a", "patch": {}}]}, expect=400).json()
    assert err["details"][0]["code"] == "egress"
    assert emulator.calls(SIM_POST) == 0


def test_refused_and_unanswered_submissions(emulator, gateway):
    """A 4xx rejects the variant for good; a 503 puts it back to pending and
    the sweep retries after a pause."""
    emulator.fault(method="POST", path="/api/v1/simulations", status=422, count=1)
    sid = post_sweep(gateway, {"baseCaseId": "CASE-OM-1", "concurrency": 1, "variants": [
        {"name": "first", "patch": {}}, {"name": "second", "patch": {}}]}).json()["sweepId"]
    done = wait_done(gateway, sid)
    first, second = done["variants"]
    assert first["status"] == "REJECTED" and "HTTP 422" in first["error"]
    assert second["status"] == "COMPLETED"
    assert done["counts"]["rejected"] == 1

    emulator.fault(method="POST", path="/api/v1/simulations", status=503, count=2)
    t0 = time.monotonic()
    sid = post_sweep(gateway, {"baseCaseId": "CASE-OM-1", "variants": [
        {"name": "only", "patch": {}}]}).json()["sweepId"]
    done = wait_done(gateway, sid)
    assert done["variants"][0]["status"] == "COMPLETED"
    assert time.monotonic() - t0 >= 2 + 4 - 0.5     # waited 2 s, then 4 s
    db = sqlite3.connect(os.path.join(gateway.tmp, "runs.db"))
    attempts = db.execute("SELECT attempts FROM sweep_variants WHERE sweep_id = ?",
                          (sid,)).fetchone()[0]
    db.close()
    assert attempts == 3


def test_a_wait_holds_every_variant_back(emulator, gateway):
    """A 429 with Retry-After: 30 holds the whole sweep back: four variants
    submitting at once reach the vendor once each, and none again while
    the sweep waits (a claim asked for before the failure is given back
    unsent); the same when both hosts are out (no vendor call at all)."""
    emulator.fault(method="POST", path="/api/v1/simulations", status=429, retryAfter=30,
                   count=100)
    n0 = emulator.calls(SIM_POST)
    sid = post_sweep(gateway, {"baseCaseId": "CASE-OM-2", "concurrency": 8, "variants": [
        {"name": x, "patch": {}} for x in "abcd"]}).json()["sweepId"]
    time.sleep(2.5)
    assert emulator.calls(SIM_POST) - n0 <= 4
    failed = gateway.metric("tidegate_sweep_submissions_total", result="failed")
    assert 1 <= failed <= 4
    body = get_sweep(gateway, sid).json()
    assert {v["status"] for v in body["variants"]} == {"PENDING"}, body
    # the 429's Retry-After pauses the service: a variant claimed meanwhile is
    # answered at once, unsent, and its error names the pause
    assert all("HTTP 429" in v["error"] or "a pause it asked for" in v["error"]
               for v in body["variants"] if v.get("error")), body
    lines = [e for e in gateway.log_lines() if e.get("event") == "sweep_variant_claimed"]
    assert len(lines) <= 8, len(lines)                  # not a claim loop
    emulator.clear_faults()


def test_sweep_resumes_after_restart(emulator, make_gateway):
    gw = make_gateway(emulator)
    sid = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "concurrency": 1, "variants": [
        {"name": n, "patch": {}} for n in ("a", "b", "c")]}).json()["sweepId"]
    deadline = time.monotonic() + 10
    while emulator.calls(SIM_POST) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert gw.stop() == 0
    gw.restart()
    assert get_sweep(gw, sid).json()["state"] == "running"
    done = wait_done(gw, sid)
    assert [v["status"] for v in done["variants"]] == ["COMPLETED"] * 3
    assert emulator.calls(SIM_POST) == 3


def long_runs_gateway(tmp_path, make_gateway):
    """The gateway with its embedded emulator (one clock) whose runs take an
    hour, and the retention pass every half second."""
    gw = embedded_gateway(tmp_path, make_gateway, {"runs": {"retention_interval": "500ms"}},
                          emulator={"sim": {"run_time": "1h"}})
    return gw


def test_sweep_settles_when_its_runs_expire(tmp_path, make_gateway):
    gw = long_runs_gateway(tmp_path, make_gateway)
    sid = post_sweep(gw, {"baseCaseId": "CASE-OM-1", "concurrency": 1, "variants": [
        {"name": "a", "patch": {}}, {"name": "b", "patch": {}}]}).json()["sweepId"]
    body = wait_for(gw, sid, lambda b: b["counts"]["inProgress"] == 1)
    assert [v["status"] for v in body["variants"]] == ["IN_PROGRESS", "PENDING"]
    advance(gw, "31d")               # the vendor deletes "a" unfinished: "b" may go
    body = wait_for(gw, sid, lambda b: b["variants"][1]["status"] == "IN_PROGRESS")
    assert body["variants"][0]["status"] == "EXPIRED"
    advance(gw, "31d")
    body = wait_done(gw, sid, timeout=15)
    assert [v["status"] for v in body["variants"]] == ["EXPIRED", "EXPIRED"]
    assert body["counts"]["expired"] == 2


def wait_for(gw, sid, pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        body = get_sweep(gw, sid).json()
        if pred(body):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)
