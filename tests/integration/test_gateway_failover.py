"""Two vendor hosts used as one: the simulation API's primary host (the
emulator's sim listener) and its fallback (the design listener), and the
data exchange API with a second emulator as fallback. The emulator's fault
API breaks one listener; its per-listener counters say exactly which host
got each call: failover of idempotent requests on a reset, a 503 or a
timeout; a 429 relayed; a 503's Retry-After honoured; ejection after
consecutive failures and return after the probe; both hosts down answered
at once with 503; a POST /simulations never sent twice."""
import concurrent.futures
import socket
import struct
import threading
import time
import uuid

import pytest
import requests

FAST = {"failover": {"eject_after": 3, "eject_time": "1s", "probe_interval": "200ms"}}


def by_listener(emu, listener, key):
    return emu.stats()["byListener"].get(listener, {}).get(key, 0)


def cases(gw, path="/api/v1/cases"):
    return requests.get(gw.sim + path, headers=gw.headers(), timeout=30)


def origin(gw, service, name):
    ready = requests.get(gw.admin + "/readyz", timeout=5).json()
    return next(o for o in ready["origins"][service] if o["origin"] == name)


@pytest.fixture
def pair(make_emulator, make_gateway):
    def make(cfg=None):
        emu = make_emulator()
        gw = make_gateway(emu, cfg or FAST)
        gw.wait_tokens()
        requests.delete(emu.dex + "/__emulator/stats", timeout=5)
        return emu, gw
    return make


def test_reset_on_the_primary_fails_over_to_the_fallback(pair):
    emu, gw = pair()
    emu.fault(listener="sim", reset=True, count=1)
    r = cases(gw)
    assert r.status_code == 200, r.text
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 1      # reset
    assert by_listener(emu, "design", "GET /api/v1/cases") == 1   # answered
    assert gw.metric("tidegate_upstream_origin_failovers_total", service="sim",
                     origin="primary", reason="reset") == 1
    r = cases(gw)                                                 # the primary again
    assert r.status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 2
    assert by_listener(emu, "design", "GET /api/v1/cases") == 1


def test_503_on_the_primary_is_answered_by_the_fallback(pair):
    emu, gw = pair()
    emu.fault(listener="sim", status=503, count=3)
    for _ in range(2):
        r = cases(gw, "/api/v1/cases/CASE-OM-1")
        assert r.status_code == 200, r.text
        assert r.json()["caseId"] == "CASE-OM-1"
    assert by_listener(emu, "sim", "GET /api/v1/cases/CASE-OM-1") == 2
    assert by_listener(emu, "design", "GET /api/v1/cases/CASE-OM-1") == 2
    assert gw.metric("tidegate_upstream_origin_failovers_total", service="sim",
                     origin="primary", reason="503") == 2


def test_503_retry_after_keeps_the_primary_out_that_long(pair):
    emu, gw = pair()
    emu.fault(listener="sim", status=503, retryAfter=2, count=1)
    assert cases(gw).status_code == 200
    for _ in range(3):                       # within the 2 s: straight to the fallback
        assert cases(gw).status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 1
    assert by_listener(emu, "design", "GET /api/v1/cases") == 4
    time.sleep(2.2)
    assert cases(gw).status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 2


def test_429_is_relayed_not_failed_over(pair):
    emu, gw = pair()
    emu.fault(listener="sim", status=429, retryAfter=3, count=1)
    r = cases(gw)
    assert r.status_code == 429
    assert r.headers.get("Retry-After") == "3"
    assert by_listener(emu, "design", "GET /api/v1/cases") == 0
    assert cases(gw).status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 2


def test_timeout_on_the_primary_fails_over(pair):
    emu, gw = pair({**FAST, "pool": {"read_timeout": "500ms"}})
    emu.fault(listener="sim", latencyMs=3000, count=1)
    t0 = time.monotonic()
    r = cases(gw)
    assert r.status_code == 200, r.text
    assert time.monotonic() - t0 < 2.5
    assert by_listener(emu, "design", "GET /api/v1/cases") == 1
    assert gw.metric("tidegate_upstream_origin_failovers_total", service="sim",
                     origin="primary", reason="timeout") == 1


def test_ejected_after_consecutive_failures_and_back_after_the_probe(pair):
    emu, gw = pair()
    emu.fault(listener="sim", reset=True)
    for _ in range(3):
        assert cases(gw).status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 3
    assert origin(gw, "sim", "primary")["state"] == "out"
    assert gw.metric("tidegate_upstream_origin_in_service", service="sim",
                     origin="primary") == 0
    for _ in range(5):                       # straight to the fallback, no attempt
        assert cases(gw).status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 3
    assert by_listener(emu, "design", "GET /api/v1/cases") == 8
    emu.clear_faults()
    deadline = time.monotonic() + 5
    while origin(gw, "sim", "primary")["state"] != "in service":
        assert time.monotonic() < deadline, origin(gw, "sim", "primary")
        time.sleep(0.1)
    assert by_listener(emu, "sim", "GET /") >= 1           # the probe
    assert cases(gw).status_code == 200
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 4
    assert gw.metric("tidegate_upstream_origin_ejections_total", service="sim",
                     origin="primary") == 1


def test_both_hosts_down_answered_at_once_with_503(pair):
    emu, gw = pair({"failover": {"eject_after": 1, "eject_time": "30s"}})
    emu.fault(listener="sim", reset=True)
    emu.fault(listener="design", reset=True)
    r = cases(gw)
    assert r.status_code == 502              # both tried, both reset: both out now
    t0 = time.monotonic()
    r = cases(gw)
    elapsed = time.monotonic() - t0
    assert r.status_code == 503, r.text
    assert elapsed < 0.5, elapsed            # nothing sent: no connect to wait for
    body = r.json()
    assert body["error"] == "UPSTREAM_UNAVAILABLE"
    assert "primary" in body["message"] and "fallback" in body["message"]
    assert emu.design.split("//")[1] in body["message"]
    assert 1 <= int(r.headers["Retry-After"]) <= 31
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 1
    assert by_listener(emu, "design", "GET /api/v1/cases") == 1


def submit_reset(emu, gw, case):
    """POST case through gw while the first host resets that one POST."""
    emu.fault(listener="sim", method="POST", path="/api/v1/simulations", reset=True,
              count=1)
    r = requests.post(gw.sim + "/api/v1/simulations", json=case, headers=gw.headers(),
                      timeout=30)
    assert r.status_code == 502, r.text
    return r


def test_post_simulation_sent_without_answer_is_never_sent_twice(pair):
    emu, gw = pair()
    r = submit_reset(emu, gw, cases(gw, "/api/v1/cases/CASE-OM-1").json())
    msg = r.json()["message"]
    # the vendor's run list of the case, read after the loss, shows no new run
    assert "no run of case CASE-OM-1 submitted since" in msg and "submit again" in msg, msg
    assert "X-Tidegate-Run-Candidates" not in r.headers
    assert by_listener(emu, "sim", "POST /api/v1/simulations") == 1
    assert by_listener(emu, "design", "POST /api/v1/simulations") == 0
    assert emu.stats()["simulations"] == 0
    listed = (by_listener(emu, "sim", "GET /api/v1/simulations") +
              by_listener(emu, "design", "GET /api/v1/simulations"))
    assert listed == 1


def test_post_simulation_without_answer_names_the_runs_that_may_be_it(pair):
    emu, gw = pair()
    case = cases(gw, "/api/v1/cases/CASE-OM-1").json()
    other = requests.post(emu.design + "/api/v1/simulations", json=case,
                          headers=emu.sim_headers(), timeout=10)
    assert other.status_code == 201     # a run of the same case made meanwhile
    r = submit_reset(emu, gw, case)
    sid = other.json()["simulationId"]
    assert r.headers["X-Tidegate-Run-Candidates"] == sid
    assert sid in r.json()["message"] and "check them" in r.json()["message"]
    assert by_listener(emu, "sim", "POST /api/v1/simulations") == 1


class Relay:
    """A TCP relay on a free loopback port in front of target: forwards, or,
    once broken, resets every connection as soon as a request arrives (the
    open ones are cut at the switch). Counts the requests it reset."""

    def __init__(self, target):
        host, port = target.split("//")[1].split(":")
        self.target = (host, int(port))
        self.broken = False
        self.resets = 0
        self.lock = threading.Lock()
        self.conns = []
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _pipe(self, a, b):
        try:
            while (data := a.recv(65536)):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _reset(self, c):
        c.recv(65536)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        with self.lock:
            self.resets += 1

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            if self.broken:
                threading.Thread(target=self._reset, args=(c,), daemon=True).start()
                continue
            up = socket.create_connection(self.target)
            with self.lock:
                self.conns += [c, up]
            threading.Thread(target=self._pipe, args=(c, up), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, c), daemon=True).start()

    def brake(self):
        self.broken = True
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.srv.close()


def test_dex_fallback_answers_when_the_primary_resets(emulator, make_gateway):
    relay = Relay(emulator.dex)          # the primary: the same vendor, through a relay
    try:
        gw = make_gateway(emulator, {**FAST, "dex": {"url": relay.url,
                                                     "fallback_url": emulator.dex}})
        gw.wait_tokens()
        nope = [f"nope-{uuid.uuid4().hex}" for _ in range(8)]
        gw.own(*nope)
        relay.brake()
        requests.delete(emulator.dex + "/__emulator/stats", timeout=5)
        for i in range(5):
            r = requests.get(gw.dex + "/public/export", params={"correlationId": nope[i]},
                             headers=gw.headers(), timeout=30)
            assert r.status_code == 404, r.text  # the vendor's answer for an unknown id
        n = relay.resets
        assert 1 <= n <= 3, n                    # then ejected: not asked again
        assert origin(gw, "dex", "primary")["state"] == "out", (n, origin(gw, "dex", "primary"))
        for i in range(5, 8):
            r = requests.get(gw.dex + "/public/export", params={"correlationId": nope[i]},
                             headers=gw.headers(), timeout=30)
            assert r.status_code == 404, r.text
        assert relay.resets == n
        assert emulator.calls("GET /public/export") == 8
        assert gw.metric("tidegate_upstream_origin_failovers_total", service="dex",
                         origin="primary", reason="ejected") >= 3
    finally:
        relay.close()


def test_retry_budget_caps_failovers_in_flight(pair):
    emu, gw = pair({"failover": {"eject_after": 0, "retry_budget": 1,
                                 "retry_budget_min": 1}})
    emu.fault(listener="sim", status=503)
    emu.fault(listener="design", latencyMs=800)
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        codes = list(pool.map(lambda _: cases(gw).status_code, range(10)))
    tried = by_listener(emu, "design", "GET /api/v1/cases")
    # one second attempt in flight at a time: the rest relay the first host's 503
    assert codes.count(200) == tried and 1 <= tried <= 3, (codes, tried)
    assert codes.count(503) == 10 - tried
    assert by_listener(emu, "sim", "GET /api/v1/cases") == 10
