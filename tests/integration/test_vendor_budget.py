"""The vendor's budget per service (dex.budget.*): at most budget.rate calls a
second (budget.burst at once) reach the vendor, the rest wait in the pool's
queue (callers' reads before their submissions) up to pool.queue_timeout,
then 503 UPSTREAM_BUSY with Retry-After. A vendor 429 with Retry-After pauses
the service's calls (capped at budget.pause_max), on every instance of a
fleet sharing PostgreSQL: the state row and its wake-up carry it."""
import concurrent.futures
import threading
import time

import pytest
import requests

from test_fleet import pg_url, pytestmark as pg     # noqa: F401 (a fixture)

LIST = "GET /public/v1/budget-probe"
CREATE = "POST /public/v1/export/nope"


def get(gw, timeout=30):
    return requests.get(gw.dex + "/public/v1/budget-probe", headers=gw.headers(), timeout=timeout)


def create(gw, timeout=30):
    return requests.post(gw.dex + "/public/v1/export/nope", json={"projectId": "P-DEMO"},
                         headers=gw.headers(), timeout=timeout)


def parallel(fns):
    with concurrent.futures.ThreadPoolExecutor(len(fns)) as pool:
        return list(pool.map(lambda f: f(), fns))


class Sampler:
    """Counts of one emulator call key, sampled every 50 ms in a thread:
    (seconds since start, count) pairs."""

    def __init__(self, emulator, key):
        self.emulator, self.key, self.samples = emulator, key, []
        self.stop_ev = threading.Event()
        self.t0 = time.monotonic()
        self.base = emulator.calls(key)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_ev.is_set():
            n = self.emulator.calls(self.key) - self.base
            self.samples.append((time.monotonic() - self.t0, n))
            time.sleep(0.05)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(5)
        return self.samples


def gets_within_rate(emulator, gws, at_least, slack):
    """One GET through each of gws (a gateway per caller) at once, with a
    budget of 10/s and a burst of 5: all answered by the vendor, taking at
    least at_least seconds, the vendor never seeing more than the budget
    allows by then (plus slack)."""
    s = Sampler(emulator, LIST)
    t0 = time.monotonic()
    codes = [r.status_code for r in parallel([lambda g=g: get(g) for g in gws])]
    took = time.monotonic() - t0
    samples = s.stop()
    assert codes == [404] * len(gws)
    assert took >= at_least, took
    for t, n in samples:
        assert n <= 5 + 10 * t + slack, (t, n, samples)


def test_rate_budget_caps_vendor_calls_per_second(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"budget": {"rate": 10, "burst": 5}},
                                 "pool": {"queue_timeout": "20s"}})
    gw.wait_tokens()
    assert get(gw).status_code == 404      # the connection warm; one unit used
    time.sleep(1)                   # the bucket full again
    # 5 at once, then one each 100 ms: 35 more take 3.5 s
    gets_within_rate(emulator, [gw] * 40, 3.2, slack=1)
    # the warm-up call and the first five of the burst went at once
    assert gw.metric("tidegate_vendor_budget_waits_total", service="dex", **{"class": "read"}) \
        >= 33


def test_concurrent_budget_caps_calls_in_flight(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"budget": {"concurrent": 2}},
                                 "pool": {"queue_timeout": "20s"}})
    gw.wait_tokens()
    emulator.fault(method="GET", path="/public/v1/budget-probe", latencyMs=300)
    t0 = time.monotonic()
    codes = [r.status_code for r in parallel([lambda: get(gw)] * 6)]
    took = time.monotonic() - t0
    assert codes == [404] * 6
    assert took >= 0.85, took       # three rounds of two, 300 ms each
    assert gw.metric("tidegate_vendor_budget_inflight", service="dex") == 0
    assert gw.metric("tidegate_vendor_budget_waits_total", service="dex",
                     **{"class": "read"}) == 4


def test_reads_go_before_submissions(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"budget": {"rate": 4, "burst": 1}},
                                 "pool": {"queue_timeout": "20s"}})
    gw.wait_tokens()
    done = {}

    def timed(name, fn):
        def run():
            r = fn(gw)
            done[name] = time.monotonic()
            return r.status_code
        return run

    creates = [timed(f"c{i}", create) for i in range(8)]
    reads = [timed(f"r{i}", get) for i in range(4)]

    def late_reads():
        time.sleep(0.3)     # the creates queued first
        return parallel(reads)

    with concurrent.futures.ThreadPoolExecutor(9) as pool:
        fc = [pool.submit(f) for f in creates]
        fr = pool.submit(late_reads)
        assert [f.result() for f in fc] == [404] * 8
        assert fr.result() == [404] * 4
    last_read = max(done[f"r{i}"] for i in range(4))
    later_creates = [i for i in range(8) if done[f"c{i}"] > last_read]
    # at 4/s, 0.3 s in at most 3 creates went; every read beats the rest
    assert len(later_creates) >= 4, (later_creates, done)


def test_gateway_polls_go_before_submissions(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"budget": {"rate": 4, "burst": 1}},
                                 "pool": {"queue_timeout": "20s"}})
    gw.wait_tokens()
    cids = []
    for _ in range(3):
        r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                          headers=gw.headers(), timeout=10)
        assert r.status_code == 200, r.text
        cids.append(r.json()["correlationId"])
    time.sleep(0.5)
    done = {}

    def timed(name, fn):
        def run():
            r = fn()
            done[name] = time.monotonic()
            return r.status_code
        return run

    def status(cid):
        return requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                            headers=gw.headers(), timeout=30)

    creates = [timed(f"c{i}", lambda: create(gw)) for i in range(6)]
    reads = [timed(f"r{i}", lambda: get(gw)) for i in range(6)]
    polls = [timed(f"p{i}", lambda cid=cid: status(cid)) for i, cid in enumerate(cids)]

    def later(delay, fns):
        time.sleep(delay)
        return parallel(fns)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        fc = [pool.submit(f) for f in creates]
        fr = pool.submit(later, 0.1, reads)     # behind the creates
        fp = pool.submit(later, 0.3, polls)     # behind both
        assert [f.result() for f in fc] == [404] * 6
        assert fr.result() == [404] * 6
        assert all(c in (200, 202) for c in fp.result())
    last_poll = max(done[f"p{i}"] for i in range(3))
    # at 4/s, 0.3 s in at most two calls went: the polls beat the rest
    later_creates = [i for i in range(6) if done[f"c{i}"] > last_poll]
    later_reads = [i for i in range(6) if done[f"r{i}"] > last_poll]
    assert len(later_creates) >= 4 and len(later_reads) >= 4, (later_reads, done)
    assert gw.metric("tidegate_vendor_budget_waits_total", service="dex",
                     **{"class": "poll"}) >= 1


def test_queue_timeout_is_503_upstream_busy(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"budget": {"rate": 1, "burst": 1}},
                                 "pool": {"queue_timeout": "500ms"}})
    gw.wait_tokens()
    before = emulator.calls(LIST)
    rs = parallel([lambda: get(gw)] * 6)
    busy = [r for r in rs if r.status_code == 503]
    assert len([r for r in rs if r.status_code == 404]) <= 2
    assert len(busy) >= 4
    for r in busy:
        body = r.json()
        assert body["error"] == "UPSTREAM_BUSY", body
        assert "budget" in body["message"], body
        assert int(r.headers["Retry-After"]) >= 1
    assert emulator.calls(LIST) - before <= 2
    assert gw.metric("tidegate_vendor_budget_refusals_total", service="dex",
                     **{"class": "read"}) == len(busy)


@pytest.mark.parametrize("status", [429, 503])
def test_vendor_429_pauses_the_service_and_is_capped(emulator, make_gateway, status):
    gw = make_gateway(emulator, {"dex": {"budget": {"pause_max": "2s"}}})
    gw.wait_tokens()
    assert get(gw).status_code == 404
    emulator.fault(method="GET", path="/public/v1/budget-probe", status=status,
                   retryAfter=86400, count=1)
    r = get(gw)
    assert r.status_code == status
    t0 = time.monotonic()
    before = emulator.calls(LIST)
    s = Sampler(emulator, LIST)
    rs = parallel([lambda: get(gw)] * 3)
    took = time.monotonic() - t0
    samples = s.stop()
    assert [x.status_code for x in rs] == [404] * 3
    # held the pause (2 s, the cap, not a day) and sent after it
    assert 1.6 <= took < 5, took
    assert all(n == 0 for t, n in samples if t < 1.5), samples
    assert emulator.calls(LIST) - before == 3
    assert gw.metric("tidegate_vendor_throttled_total", service="dex") == (status == 429)
    assert gw.metric("tidegate_vendor_pauses_total", service="dex", **{"from": "vendor"}) == 1
    assert gw.metric("tidegate_vendor_pause_delayed_total", service="dex") == 3



def test_pause_past_the_queue_deadline_is_answered_at_once(emulator, make_gateway):
    """A pause longer than pool.queue_timeout: a call is answered 503
    UPSTREAM_BUSY at once (nothing sent), naming the pause, rather than
    waiting out the queue deadline for nothing."""
    gw = make_gateway(emulator, {"dex": {"budget": {"pause_max": "30s"}},
                                 "pool": {"queue_timeout": "5s"}})
    gw.wait_tokens()
    emulator.fault(method="GET", path="/public/v1/budget-probe", status=429,
                   retryAfter=20, count=1)
    assert get(gw).status_code == 429
    before = emulator.calls(LIST)
    t0 = time.monotonic()
    r = get(gw)
    took = time.monotonic() - t0
    assert r.status_code == 503 and r.json()["error"] == "UPSTREAM_BUSY", r.text
    assert "a pause it asked for" in r.json()["message"], r.text
    assert "Retry-After" in r.headers
    assert took < 1.0, took
    assert emulator.calls(LIST) == before

@pg
def test_vendor_429_at_one_instance_pauses_the_fleet(emulator, make_gateway, pg_url):
    gws = [make_gateway(emulator, {"state": {"url": pg_url, "instance": f"gw{i}"},
                                   "dex": {"budget": {"pause_max": "10s"}}})
           for i in range(3)]
    for gw in gws:
        gw.wait_tokens()
        assert get(gw).status_code == 404
    emulator.fault(method="GET", path="/public/v1/budget-probe", status=429, retryAfter=3, count=1)
    assert get(gws[0]).status_code == 429
    t0 = time.monotonic()
    time.sleep(0.3)     # the wake-up travels
    s = Sampler(emulator, LIST)
    rs = parallel([lambda g=g: get(g) for g in gws[1:] for _ in range(2)])
    took = time.monotonic() - t0
    samples = s.stop()
    assert [x.status_code for x in rs] == [404] * 4
    assert 2.5 <= took < 6, took
    assert all(n == 0 for t, n in samples if t < 2.2), samples
    for gw in gws[1:]:
        assert gw.metric("tidegate_vendor_pauses_total", service="dex",
                         **{"from": "fleet"}) == 1
        assert gw.metric("tidegate_vendor_pause_delayed_total", service="dex") == 2
    assert gws[0].metric("tidegate_vendor_pauses_total", service="dex", **{"from": "vendor"}) == 1
    # a late joiner reads the pause from its row
    emulator.fault(method="GET", path="/public/v1/budget-probe", status=429, retryAfter=4, count=1)
    assert get(gws[0]).status_code == 429
    late = make_gateway(emulator, {"state": {"url": pg_url, "instance": "gw9"},
                                   "dex": {"budget": {"pause_max": "10s"}}})
    late.wait_tokens()
    assert late.metric("tidegate_vendor_pauses_total", service="dex", **{"from": "fleet"}) == 1


@pg
def test_rate_budget_holds_for_the_fleet(emulator, make_gateway, pg_url):
    gws = [make_gateway(emulator, {"state": {"url": pg_url, "instance": f"gw{i}"},
                                   "dex": {"budget": {"rate": 10, "burst": 5}},
                                   "pool": {"queue_timeout": "20s"}})
           for i in range(3)]
    for gw in gws:
        gw.wait_tokens()
    time.sleep(1)
    # uneven: the first instance gets half the callers; the fleet's 10/s
    # with 5 at once: 31 more take 3.1 s, whatever instance they came to
    gets_within_rate(emulator, [gws[0]] * 18 + [gws[1]] * 9 + [gws[2]] * 9, 2.8, slack=2)
