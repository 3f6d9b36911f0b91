"""The vendor read deadline as the pool arms it: counted from the moment
the whole request has left (not re-armed by every write), on a fresh and
on a kept-alive connection that sat idle for longer than the deadline
itself, so that an answer inside the deadline is relayed and a silent
vendor is cut at the deadline, not before it and not much after."""
import time

import requests

FAST = {"pool": {"read_timeout": "800ms"}}


def cases(gw):
    t0 = time.monotonic()
    r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=30)
    return r, time.monotonic() - t0


def test_read_deadline_counts_from_the_request_sent(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, FAST)
    gw.wait_tokens()
    r, _ = cases(gw)
    assert r.status_code == 200, r.text
    time.sleep(1.2)                          # idle for longer than the deadline
    emu.fault(listener="sim", latencyMs=500, count=1)
    r, took = cases(gw)
    assert r.status_code == 200 and isinstance(r.json(), (list, dict)), r.text
    assert 0.45 < took < 0.8, took
    emu.fault(listener="sim", latencyMs=2000, count=1)
    emu.fault(listener="design", latencyMs=2000, count=1)        # the fallback
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    r, took = cases(gw)
    emu.clear_faults()
    body = r.json()
    assert r.status_code == 504 and body["error"] == "UPSTREAM_TIMEOUT", r.text
    seen = emu.stats()["byListener"]
    attempts = sum(seen.get(ln, {}).get("GET /api/v1/cases", 0) for ln in ("sim", "design"))
    assert attempts in (1, 2), attempts
    # each attempt cut at its deadline (libevent's timers count from the
    # loop turn's cached time, a few ms before the request left): not
    # early, and not a deadline or more late
    assert 0.78 * attempts <= took < 0.8 * attempts + 0.35, (took, attempts)
