#!/usr/bin/env python3
"""
bench/quota.py - how exactly a fleet holds one per-key limit (issue 27):
10 gateways on one PostgreSQL, one API key limited to --rate requests a
second (burst --burst), load spread unevenly (--hot of it on the first
instance, the rest over the other nine), offered at --load times the
limit (2: twice).

Four setups, interleaved over --rounds rounds:
- share: the fleet's limit (keys[].limits.rate on a shared state.url) as
  shipped (limits.rates share): each instance reports its demand once a
  second (limits.share_every) and runs the share it is given.
- exact: limits.rates exact: each instance leases units in batches from one
  fleet-wide bucket (limits.lease 200 ms, hold 1 s).
- split: the naive per-instance split: each instance alone (SQLite state of
  its own) with rate / 10 and burst / 10.
- per-request: exact with limits.lease at its least (10 ms: a batch of one
  unit, so one lease a request, as a limit that asks the database on every
  request does).

Reported per setup: the admitted rate (200s a second over --seconds,
after a warm-up) against the limit, the 429s, the offered rate reached,
p50/p99 of the admitted requests, and what PostgreSQL spent: transaction
ids assigned (and what the same fleet takes idle, measured for a few
seconds before the load: most of a share's xids), the rows the rate's own statements
wrote (a share's report, a batch of units: from the table statistics),
and its backends' CPU time per 1,000 requests offered.

    pg_virtualenv -t -v 15 /usr/bin/python3 bench/quota.py [--rounds 3]
        [--seconds 30] [--rate 200] [--burst 20] [--hot 0.7] [--load 2]
        [--build build-release]

Without PG* it says so on stderr and exits 0. Prints a Markdown section on
stdout, progress on stderr; raw figures in bench/results/quota.json.
"""
import argparse
import http.client
import os
import sys
import threading
import time

import lib
from s8_fleet import Pg, cpu_ms, fleet, log, stop_all

INSTANCES = 10
WARMUP_S = 3.0
SETUPS = ("share", "exact", "split", "per-request")
IDLE_S = 3.0


def key_limits(rate, burst):
    return [{"name": "bench", "sha256": lib.TEST_KEY_SHA, "services": ["dex", "sim"],
             "limits": {"rate": rate, "burst": burst}}]


def pace(port, headers, rate, t0, t_end, out, lock):
    """Requests to port at rate a second from t0 until t_end (an open
    schedule: a slot missed is sent late, never twice); out gets
    (sent_at, status, seconds) per request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    mine = []
    i = 0
    try:
        while True:
            due = t0 + i / rate
            if due >= t_end:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            s = time.monotonic()
            try:
                c.request("GET", "/public/v1/bench", headers=headers)
                r = c.getresponse()
                r.read()
                mine.append((s, r.status, time.monotonic() - s))
            except (OSError, http.client.HTTPException):
                mine.append((s, 0, time.monotonic() - s))
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            i += 1
    finally:
        c.close()
        with lock:
            out.extend(mine)


def load(gws, total, hot, seconds):
    """total requests a second: hot of them to gws[0], the rest spread over
    the others, each instance's share over 4 paced connections."""
    rates = [total * hot] + [total * (1 - hot) / (len(gws) - 1)] * (len(gws) - 1)
    out, lock, ts = [], threading.Lock(), []
    t0 = time.monotonic() + 0.2
    t_end = t0 + WARMUP_S + seconds
    for g, r in zip(gws, rates):
        for k in range(4):
            ts.append(threading.Thread(target=pace, args=(g.port, g.headers, r / 4,
                                                          t0 + k / r, t_end, out, lock)))
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=seconds + 120)
    return [x for x in out if x[0] >= t0 + WARMUP_S]


def limit_writes(pg, schema):
    """Rows the quota engine's rate wrote in schema so far (a share's
    report, a batch of units: one row each, inserted or updated), from
    PostgreSQL's table statistics; 0 without a schema (SQLite)."""
    if not schema:
        return 0
    return int(pg.sql("SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM "
                      f"pg_stat_user_tables WHERE schemaname = '{schema}' AND relname "
                      "IN ('quota_share', 'quota_rate')") or 0)


def run(a, setup, pg, emu_url, started):
    schema = None
    if setup == "split":
        over = {"keys": key_limits(a.rate / INSTANCES, max(1, a.burst // INSTANCES))}
        gws = fleet(emu_url, INSTANCES, None, a.build, over, started)
    else:
        over = {"keys": key_limits(a.rate, a.burst)}
        if setup == "exact":
            over["limits"] = {"rates": "exact"}
        if setup == "per-request":
            over["limits"] = {"rates": "exact", "lease": "10ms"}
        schema, url = pg.new()
        gws = fleet(emu_url, INSTANCES, url, a.build, over, started)
    time.sleep(1.0)
    pids = pg.backends()
    w0 = limit_writes(pg, schema)
    i0, t_i0 = pg.xid(), time.monotonic()
    time.sleep(IDLE_S)
    c0, x0, t0 = cpu_ms(pids), pg.xid(), time.monotonic()
    idle_per_s = (x0 - i0 - 1) / (t0 - t_i0)
    got = load(gws, a.load * a.rate, a.hot, a.seconds)
    c1, x1, t1 = cpu_ms(pids), pg.xid(), time.monotonic()
    time.sleep(1.5)	# the backends' table counts reach the statistics within a second
    w1 = limit_writes(pg, schema)
    stop_all(started[-INSTANCES:])
    del started[-INSTANCES:]
    if schema:
        pg.drop(schema)
    ok = sorted(t for s, st, t in got if st == 200)
    n = len(got)
    res = {"admitted_rps": len(ok) / a.seconds,
           "refused_rps": sum(1 for x in got if x[1] == 429) / a.seconds,
           "other": sum(1 for x in got if x[1] not in (200, 429)),
           "offered_rps": n / a.seconds,
           "p50_ms": 1000 * ok[len(ok) // 2] if ok else float("nan"),
           "p99_ms": 1000 * ok[min(len(ok) - 1, int(len(ok) * 0.99))] if ok else float("nan"),
           "pg_xids_per_1k": 1000.0 * (x1 - x0) / max(1, n),
           "pg_idle_xids_per_s": idle_per_s,
           "limit_writes_per_1k": 1000.0 * (w1 - w0) / max(1, n),
           "pg_cpu_ms_per_1k": 1000.0 * (c1 - c0) / max(1, n)}
    log(f"quota {setup}: admitted {res['admitted_rps']:.1f}/s of {a.rate}, offered "
        f"{res['offered_rps']:.1f}/s, other {res['other']}, xids/1k {res['pg_xids_per_1k']:.0f}")
    return res


def report(a, cmd, res):
    print(f"### Quotas: one key's limit across a fleet of {INSTANCES}\n")
    print(f"`{cmd}`; {lib.machine()}. Limit {a.rate} requests/s (burst {a.burst}) on one "
          f"key; {a.load * a.rate:g} requests/s offered, {int(a.hot * 100)} % to one instance and "
          f"the rest over the other nine (4 paced connections each); {a.seconds} s "
          f"measured after {WARMUP_S:.0f} s; medians (min-max) over {a.rounds} rounds.\n")
    rows = []
    for setup in SETUPS:
        rs = res[setup]
        adm = [r["admitted_rps"] for r in rs]
        rows.append([setup, lib.fmt(adm, 1),
                     lib.fmt([100.0 * (x - a.rate) / a.rate for x in adm], 1, " %"),
                     lib.fmt([r["refused_rps"] for r in rs], 1),
                     lib.fmt([r["offered_rps"] for r in rs], 1),
                     lib.fmt([r["p50_ms"] for r in rs], 2),
                     lib.fmt([r["p99_ms"] for r in rs], 2),
                     lib.fmt([r["pg_xids_per_1k"] for r in rs], 0),
                     lib.fmt([r["limit_writes_per_1k"] for r in rs], 0),
                     lib.fmt([r["pg_cpu_ms_per_1k"] for r in rs], 1)])
    print(lib.table(["setup", "admitted/s", "vs limit", "429/s", "offered/s",
                     "p50 ms", "p99 ms", "PG xids per 1k req",
                     "rate's writes per 1k req",
                     "PG CPU ms per 1k req"], rows))
    idle = [r["pg_idle_xids_per_s"] for s in SETUPS if s != "split" for r in res[s]]
    print(f"\nThe idle fleet (same {INSTANCES} instances, no requests, measured {IDLE_S:.0f} s "
          f"before each load) took {lib.fmt(idle, 1)} xids a second.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--hot", type=float, default=0.7)
    ap.add_argument("--load", type=float, default=2.0, help="offered load, times the limit")
    ap.add_argument("--build", default=lib.BUILD)
    a = ap.parse_args()
    if not (1 <= a.rounds <= 10 and 5 <= a.seconds <= 120 and 10 <= a.rate <= 1000
            and 1 <= a.burst <= 1000 and 0.1 <= a.hot <= 0.9 and 0.1 <= a.load <= 5):
        ap.error("out of range: rounds 1-10, seconds 5-120, rate 10-1000, burst 1-1000, "
                 "hot 0.1-0.9, load 0.1-5")
    cmd = " ".join(["/usr/bin/python3", "bench/quota.py"] + sys.argv[1:])
    if not (os.environ.get("PGHOST") or os.environ.get("PGPORT")
            or os.environ.get("PGDATABASE")):
        print("quota: skipped: no PostgreSQL (no PG* variables); run it under "
              "`pg_virtualenv -t -v 15 /usr/bin/python3 bench/quota.py`", file=sys.stderr)
        return 0
    a.build = os.path.abspath(a.build)
    pg = Pg()
    res = {setup: [] for setup in SETUPS}
    started = []
    stub = lib.stub()
    started.append(stub)
    try:
        for _ in range(a.rounds):
            for setup in res:
                res[setup].append(run(a, setup, pg, stub.url, started))
    finally:
        stop_all(started)
        pg.drop_all()
    lib.save("quota", {"args": vars(a), "results": res})
    report(a, cmd, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
