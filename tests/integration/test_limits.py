"""test_limits.py - per-key limits (keys[].limits.*): a key over its rate
gets 429 RATE_LIMITED with Retry-After and the RateLimit fields while another
key is served; answers under the limit carry the fields; a key over its
concurrency gets 429 CONCURRENCY_LIMITED until its request ends; a SIGHUP
keeps what was used; the counters name the key and the limit."""
import hashlib
import json
import os
import signal
import threading
import time

import pytest
import requests

from conftest import TEST_KEY, TEST_KEY_SHA
from test_fleet import pg_url  # noqa: F401 (a fixture)
from test_fleet_faults import private_pg  # noqa: F401 (a fixture)

OTHER = "other-key"
OPS = "ops-key"
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "other", "sha256": hashlib.sha256(OTHER.encode()).hexdigest(),
         "services": ["dex", "sim"]},
        {"name": "ops", "sha256": hashlib.sha256(OPS.encode()).hexdigest(),
         "services": ["admin"]}]
PATH = "/public/v1/nothing-here"


def get(gw, key=TEST_KEY):
    return requests.get(gw.dex + PATH, headers={"Authorization": "Bearer " + key},
                        timeout=10)


def limited(rate=None, burst=None, concurrent=None):
    keys = [dict(k) for k in KEYS]
    lim = {}
    if rate is not None:
        lim.update({"rate": rate, "burst": burst})
    if concurrent is not None:
        lim["concurrent"] = concurrent
    keys[0]["limits"] = lim
    return {"keys": keys}


def test_rate_429_with_fields_other_key_served(emulator, make_gateway):
    gw = make_gateway(emulator, limited(rate=0.5, burst=3))
    seen = [get(gw) for _ in range(3)]
    assert [r.status_code for r in seen] == [404, 404, 404]
    assert [r.headers["RateLimit"] for r in seen] == [
        '"rate";r=2;t=2', '"rate";r=1;t=4', '"rate";r=0;t=6']
    assert {r.headers["RateLimit-Policy"] for r in seen} == {'"rate";q=3;w=6'}
    r = get(gw)
    assert r.status_code == 429
    body = r.json()
    assert body["error"] == "RATE_LIMITED" and body["statusCode"] == 429
    assert "keys[].limits.rate" in body["message"] and '"test"' in body["message"]
    assert body["requestId"]
    assert r.headers["Retry-After"] == "2"
    assert r.headers["RateLimit-Policy"] == '"rate";q=3;w=6'
    assert r.headers["RateLimit"] == '"rate";r=0;t=6'
    other = get(gw, OTHER)
    assert other.status_code == 404
    assert "RateLimit" not in other.headers
    assert gw.metric("tidegate_key_limited_total", key="test", limit="rate") == 1
    assert gw.metric("tidegate_key_admitted_total", key="test") == 3
    assert gw.metric("tidegate_key_limited_total", key="other", limit="rate") == 0
    assert gw.metric("tidegate_key_quota_left", key="test", limit="rate") == 0
    # the admin API: each key's limits, figures and use
    assert requests.get(gw.admin + "/limits", timeout=5).status_code == 401
    a = requests.get(gw.admin + "/limits", headers={"Authorization": "Bearer " + OPS},
                     timeout=5)
    assert a.status_code == 200, a.text
    keys = {k["key"]: k for k in a.json()["keys"]}
    assert a.json()["fallback_limits"] == 0
    assert keys["other"] == {"key": "other", "admitted": 0, "limits": {}}
    rate = keys["test"]["limits"]["rate"]
    assert keys["test"]["admitted"] == 3
    assert {k: rate[k] for k in ("name", "kind", "per_second", "quota", "window_s", "left",
                                 "local_share")} == {
        "name": "key:test:rate", "kind": "rate", "per_second": 0.5, "quota": 3,
        "window_s": 6, "left": 0, "local_share": False}


def test_concurrency_429_until_the_request_ends(emulator, make_gateway):
    gw = make_gateway(emulator, limited(concurrent=1))
    emulator.fault(path=PATH, latencyMs=1500, count=1)
    slow = {}
    t = threading.Thread(target=lambda: slow.update(r=get(gw)))
    t.start()
    time.sleep(0.5)
    r = get(gw)
    assert r.status_code == 429
    assert r.json()["error"] == "CONCURRENCY_LIMITED"
    assert "keys[].limits.concurrent" in r.json()["message"]
    assert r.headers["RateLimit"] == '"concurrent";r=0;t=0'
    assert r.headers["Retry-After"] == "1"
    assert get(gw, OTHER).status_code == 404
    t.join(10)
    assert slow["r"].status_code == 404
    assert slow["r"].headers["RateLimit"] == '"concurrent";r=0;t=0'
    r = get(gw)
    assert r.status_code == 404			# the slot came back
    assert r.headers["RateLimit"] == '"concurrent";r=0;t=0'
    assert gw.metric("tidegate_key_limited_total", key="test", limit="concurrent") == 1


def test_reload_keeps_use(emulator, make_gateway):
    gw = make_gateway(emulator, limited(rate=0.1, burst=2))
    assert [get(gw).status_code for _ in range(2)] == [404, 404]
    cfg = json.loads(json.dumps(gw.cfg))
    cfg["keys"][0]["limits"]["burst"] = 3	# one more at once: not a fresh bucket
    cfg["limits"] = {"headers": False}
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while not [e for e in gw.log_lines() if e.get("event") == "reloaded"]:
        assert time.monotonic() < deadline, gw.read_log()
        time.sleep(0.05)
    r = get(gw)
    assert r.status_code == 404 and "RateLimit" not in r.headers
    r = get(gw)
    assert r.status_code == 429			# 2 + 1 of a burst of 3 used
    assert r.headers["RateLimit-Policy"] == '"rate";q=3;w=30'


def export(gw, key=TEST_KEY):
    return requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                         headers={"Authorization": "Bearer " + key}, timeout=10)


def to_midnight():
    now = time.time()
    return 86400 - int(now) % 86400


def test_daily_exports_and_give_back_on_refusal(emulator, make_gateway):
    cfg = limited()
    cfg["keys"][0]["limits"] = {"daily": {"exports": 2}}
    gw = make_gateway(emulator, cfg)
    emulator.fault(path="/public/v1/export/activities", status=500, count=1)
    r = export(gw)
    assert r.status_code == 500			# the vendor refused: not counted
    assert r.headers["RateLimit-Policy"] == '"daily-exports";q=2;w=86400'
    firsts = [export(gw) for _ in range(2)]
    assert [x.status_code for x in firsts] == [200, 200], [x.text for x in firsts]
    assert [x.headers["RateLimit"].split(";")[1] for x in firsts] == ["r=1", "r=0"]
    r = export(gw)
    assert r.status_code == 429
    assert r.json()["error"] == "QUOTA_EXCEEDED"
    assert "keys[].limits.daily.exports" in r.json()["message"]
    assert abs(int(r.headers["Retry-After"]) - to_midnight()) <= 2
    assert r.headers["RateLimit-Policy"] == '"daily-exports";q=2;w=86400'
    assert r.headers["RateLimit"].startswith('"daily-exports";r=0;t=')
    assert get(gw).status_code == 404		# reads are not creations
    assert export(gw, OTHER).status_code == 200
    assert gw.metric("tidegate_key_limited_total", key="test", limit="daily-exports") == 1
    assert gw.metric("tidegate_key_jobs_created_total", key="test") == 2
    assert gw.metric("tidegate_key_vendor_calls_total", key="test") == 4	# 500, 2 x 200, 404
    assert gw.metric("tidegate_key_jobs_created_total", key="other") == 1
    # kept in the owners file: a restart does not forget the day's use
    gw.stop()
    gw.restart()
    assert export(gw).status_code == 429


def test_operation_rate_limits_that_operation_only(emulator, make_gateway):
    cfg = limited(rate=1, burst=10)
    cfg["keys"][0]["limits"]["operations"] = {"export": {"rate": 0.5, "burst": 2}}
    gw = make_gateway(emulator, cfg)
    firsts = [export(gw) for _ in range(2)]
    assert [x.status_code for x in firsts] == [200, 200], [x.text for x in firsts]
    # the fields report the tighter limit: the operation's, with fewer left
    assert [x.headers["RateLimit"] for x in firsts] == [
        '"export-rate";r=1;t=2', '"export-rate";r=0;t=4']
    assert {x.headers["RateLimit-Policy"] for x in firsts} == {'"export-rate";q=2;w=4'}
    r = export(gw)
    assert r.status_code == 429
    body = r.json()
    assert body["error"] == "RATE_LIMITED"
    assert "keys[].limits.operations.export.rate" in body["message"]
    assert '"test"' in body["message"]
    assert r.headers["Retry-After"] == "2"
    assert r.headers["RateLimit-Policy"] == '"export-rate";q=2;w=4'
    assert r.headers["RateLimit"] == '"export-rate";r=0;t=4'
    # the key's other calls pass, under its overall rate (which the two
    # exports took from; the refused one gave its unit back)
    others = [get(gw) for _ in range(3)]
    assert [x.status_code for x in others] == [404, 404, 404]
    assert [x.headers["RateLimit"].split(";")[:2] for x in others] == [
        ['"rate"', "r=7"], ['"rate"', "r=6"], ['"rate"', "r=5"]]
    assert export(gw, OTHER).status_code == 200
    assert gw.metric("tidegate_key_limited_total", key="test", limit="export-rate") == 1
    assert gw.metric("tidegate_key_limited_total", key="test", limit="rate") == 0
    assert gw.metric("tidegate_key_quota_left", key="test", limit="export-rate") == 0
    a = requests.get(gw.admin + "/limits", headers={"Authorization": "Bearer " + OPS},
                     timeout=5)
    lim = {k["key"]: k for k in a.json()["keys"]}["test"]["limits"]
    assert lim["export-rate"]["name"] == "key:test:op:export:rate"
    assert lim["export-rate"]["quota"] == 2


def sweep(gw, body=None, key=TEST_KEY):
    body = body or {"baseCaseId": "CASE-OM-1", "variants": [{"name": "a", "patch": {}}]}
    return requests.post(gw.sim + "/tidegate/v1/sweeps", json=body,
                         headers={"Authorization": "Bearer " + key}, timeout=15)


def test_daily_sweeps_refused_ones_do_not_count(emulator, make_gateway):
    cfg = limited()
    cfg["keys"][0]["limits"] = {"daily": {"sweeps": 1}}
    gw = make_gateway(emulator, cfg)
    bad = sweep(gw, {"variants": []})
    assert bad.status_code == 400, bad.text		# refused before the quota
    none = sweep(gw, {"baseCaseId": "CASE-NONE", "variants": [{"name": "a", "patch": {}}]})
    assert none.status_code == 404, none.text	# took a unit, gave it back
    first = sweep(gw)
    assert first.status_code == 201, first.text
    assert first.headers["RateLimit-Policy"] == '"daily-sweeps";q=1;w=86400'
    assert first.headers["RateLimit"].startswith('"daily-sweeps";r=0;t=')
    r = sweep(gw)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "QUOTA_EXCEEDED"
    assert "keys[].limits.daily.sweeps" in r.json()["message"]
    assert abs(int(r.headers["Retry-After"]) - to_midnight()) <= 2
    assert r.headers["RateLimit-Policy"] == '"daily-sweeps";q=1;w=86400'
    assert sweep(gw, key=OTHER).status_code == 201
    assert gw.metric("tidegate_key_limited_total", key="test", limit="daily-sweeps") == 1
    assert gw.metric("tidegate_key_jobs_created_total", key="test") == 1
    assert gw.metric("tidegate_key_quota_left", key="test", limit="daily-sweeps") == 0
    assert gw.metric("tidegate_sweeps_created_total") == 2


# ---- a fleet: real PostgreSQL ----

needs_pg = pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL: PG* unset (run under pg_virtualenv -v 15)")


def fleet_of(make_gateway, emulator, url, n, cfg, timeout=None):
    gws = []
    for i in range(n):
        c = json.loads(json.dumps(cfg))
        c["state"] = {"url": url, "instance": f"gw{i}"}
        if timeout:
            c["state"]["timeout"] = timeout
        gws.append(make_gateway(emulator, c))
    return gws


def load(targets, seconds):
    """Each target (a gateway, repeated for more load) asked in a loop by its
    own thread for seconds: the statuses, and how long it ran."""
    out, lock = [], threading.Lock()
    stop = time.monotonic() + seconds

    def worker(gw):
        s = requests.Session()
        while time.monotonic() < stop:
            r = s.get(gw.dex + PATH, headers={"Authorization": "Bearer " + TEST_KEY},
                      timeout=10)
            with lock:
                out.append(r.status_code)

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(gw,)) for gw in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out, time.monotonic() - t0


def rate_shares(gws):
    """Each instance's share of the key's rate now (GET /limits)."""
    out = []
    for g in gws:
        a = requests.get(g.admin + "/limits", headers={"Authorization": "Bearer " + OPS},
                         timeout=5).json()
        out.append({k["key"]: k for k in a["keys"]}["test"]["limits"]["rate"]
                   ["instance_per_second"])
    return out


@needs_pg
@pytest.mark.parametrize("rates", ["share", "exact"])
def test_fleet_rate_holds_across_three_instances(emulator, make_gateway, pg_url, rates):
    """20/s with a burst of 20 for the fleet; load spread unevenly (four
    callers on gw0, one on each other): admitted at most burst + rate x
    time, and not far below it; shared by demand, the shares the instances
    run add up to at most the rate, the busiest holding the most."""
    cfg = limited(rate=20, burst=20)
    cfg["limits"] = {"rates": rates}
    gws = fleet_of(make_gateway, emulator, pg_url, 3, cfg)
    seen = []
    peek = threading.Timer(2.5, lambda: seen.append(rate_shares(gws)))
    peek.start()
    codes, took = load([gws[0]] * 4 + gws[1:], 3.0)
    peek.join(10)
    shares = seen[0]
    if rates == "share":
        assert sum(shares) <= 20.001, shares
        assert shares[0] > max(shares[1:]) > 0, shares
    else:
        assert shares == [20, 20, 20]
    ok, refused = codes.count(404), codes.count(429)
    assert ok + refused == len(codes), set(codes)
    # the bound holds while every instance leases; a lease unanswered within
    # state.timeout (a loaded machine) puts that instance on a local share
    # of 20/3 a second with a burst of 6 until one answers, counted
    falls = sum(g.metric("tidegate_quota_fallbacks_total") for g in gws)
    assert ok <= 20 + 20 * took + falls * (6 + 20 / 3 * took), (ok, took, falls)
    assert ok >= 0.75 * (20 + 20 * took) - 20, (ok, took)
    assert sum(g.metric("tidegate_key_admitted_total", key="test") for g in gws) == ok
    assert sum(g.metric("tidegate_key_limited_total", key="test", limit="rate")
               for g in gws) == refused
    assert all(requests.get(g.admin + "/readyz", timeout=5).json()["quota"]["state"]
               == "leasing" for g in gws)


@needs_pg
def test_database_frozen_local_shares_then_recovery(private_pg, make_emulator, make_gateway):
    """The database frozen (SIGSTOP) under two instances: leases time out,
    each instance serves the key from a local share of its limit (the limit
    / the 2 live instances), /readyz and the metrics say so; thawed, they
    lease again."""
    emulator = make_emulator()
    gws = fleet_of(make_gateway, emulator, private_pg.url, 2, limited(rate=10, burst=10),
                   timeout="1s")
    codes, _ = load(gws, 1.0)			# leasing; members counted
    assert set(codes) <= {404, 429}
    time.sleep(5.5)
    load(gws, 0.5)				# leases count the live instances again: 2
    private_pg.freeze()
    try:
        load(gws, 2.5)				# a report a second times out: local shares
        for g in gws:
            q = requests.get(g.admin + "/readyz", timeout=5).json()["quota"]
            assert q == {"fallback_limits": 1, "state": "local-shares"}, q
            assert g.metric("tidegate_quota_fallback_limits") == 1
            assert g.metric("tidegate_quota_fallbacks_total") >= 1
        codes, took = load([gws[0]], 2.0)
        ok = codes.count(404)
        assert set(codes) <= {404, 429}
        assert ok <= 5 + 5 * took + 1, (ok, took)	# half the limit, one instance
        assert ok >= 5, ok
    finally:
        private_pg.thaw()
    deadline = time.monotonic() + 10
    while any(requests.get(g.admin + "/readyz", timeout=5).json()["quota"]["state"]
              != "leasing" for g in gws):
        assert time.monotonic() < deadline, "still on local shares"
        load(gws, 0.2)
    assert all(g.metric("tidegate_quota_fallback_limits") == 0 for g in gws)


def test_count_vendor_only_answers_of_the_vendor_count(emulator, make_gateway):
    """limits.count vendor: the gateway's own answers (a read of a job no
    record gives this key, refused without asking the vendor) do not use
    the key's rate; answers of the vendor do."""
    cfg = limited(rate=0.1, burst=2)
    cfg["limits"] = {"count": "vendor"}
    gw = make_gateway(emulator, cfg)
    reads = [requests.get(gw.dex + "/public/export", params={"correlationId": "nope"},
                          headers=gw.headers(), timeout=10) for _ in range(3)]
    assert {r.status_code for r in reads} == {404}
    assert emulator.calls("GET /public/export") == 0
    assert [get(gw).status_code for _ in range(3)] == [404, 404, 429]
    assert gw.metric("tidegate_key_limited_total", key="test", limit="rate") == 1


def test_key_name_escaped_in_labels(emulator, make_gateway):
    """A key's name is the operator's text: a quote in it is escaped in the
    series' labels, never ending them."""
    keys = [dict(KEYS[0], name='team "a"\\x', limits={"rate": 100})]
    gw = make_gateway(emulator, {"keys": keys})
    assert get(gw).status_code == 404
    lines = [ln for ln in gw.metrics().splitlines() if ln.startswith("tidegate_key_")]
    assert 'tidegate_key_admitted_total{key="team \\"a\\"\\\\x"} 1' in lines, lines
    assert 'tidegate_key_vendor_calls_total{key="team \\"a\\"\\\\x"} 1' in lines, lines
