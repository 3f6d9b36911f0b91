"""test_limits.py - per-key limits (keys[].limits.*): a key over its rate
gets 429 RATE_LIMITED with Retry-After and the RateLimit fields while another
key is served; answers under the limit carry the fields; a key over its
concurrency gets 429 CONCURRENCY_LIMITED until its request ends; a SIGHUP
keeps what was used; the counters name the key and the limit."""
import hashlib
import json
import signal
import threading
import time

import requests

from conftest import TEST_KEY, TEST_KEY_SHA

OTHER = "other-key"
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "other", "sha256": hashlib.sha256(OTHER.encode()).hexdigest(),
         "services": ["dex", "sim"]}]
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
