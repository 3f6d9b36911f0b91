#!/usr/bin/env python3
"""
bench/pooler.py - what unnamed statements cost against prepared ones
(state.pooler, docs/fleet.md "Behind a connection pooler"): one gateway on
PostgreSQL, its clients polling one export job the vendor keeps
IN_PROGRESS (each poll asks the database who owns the job and whether the
fleet holds a fresh answer), in three setups interleaved over --rounds
rounds, a fresh database each:

- prepared: state.pooler none, a direct state.url (statements prepared
  once per connection, run with PQsendQueryPrepared);
- unnamed: state.pooler transaction on the same direct URL
  (PQsendQueryParams: parsed and planned on every run), state.listen_url
  the same URL;
- pgbouncer: the unnamed setup with state.url through Debian's pgbouncer
  in transaction mode (skipped when it is not installed).

Load: --conns keep-alive clients (this script's threads) sending GETs back
to back for --seconds. Reported per setup: requests/s and p50/p99 of the
polls, state operations per poll and their mean time from send to answer
(the gateway's tidegate_state_query_duration_seconds), and the CPU time
of PostgreSQL's server processes for the database per 1,000 operations.

    pg_virtualenv -t -v 15 /usr/bin/python3 bench/pooler.py [--rounds 3]
        [--seconds 5] [--conns 8] [--build build-release]

Without PG* it says so on stderr and exits 0. Prints a Markdown section on
stdout, progress on stderr; raw figures in bench/results/pooler.json.
"""
import argparse
import http.client
import os
import re
import subprocess
import sys
import threading
import time
import uuid

import requests

import lib
from s8_fleet import cpu_ms, log
from test_fleet_pooler import PGBOUNCER, PgBouncer


def psql(db, sql):
    return subprocess.run(["psql", "-qXAtd", db, "-c", sql], check=True, capture_output=True,
                          text=True, timeout=30).stdout.strip()


def backends(db):
    out = psql(db, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
               "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
    return [int(x) for x in out.split()]


def state_ops(gw):
    """(operations answered, their seconds in all) from gw's /metrics."""
    text = requests.get(gw.admin + "/metrics", timeout=5).text
    n = re.search(r"^tidegate_state_query_duration_seconds_count\S* (\S+)$", text, re.M)
    s = re.search(r"^tidegate_state_query_duration_seconds_sum\S* (\S+)$", text, re.M)
    return float(n.group(1)), float(s.group(1))


def load(gw, path, conns, seconds):
    """conns clients GETting path back to back: (answers, latencies ms, bad)."""
    lat, bad = [], []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client():
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        mine, wrong = [], 0
        while time.monotonic() < stop:
            t = time.perf_counter()
            c.request("GET", path, headers=gw.headers)
            r = c.getresponse()
            r.read()
            mine.append((time.perf_counter() - t) * 1000.0)
            wrong += r.status != 202
        c.close()
        with lock:
            lat.extend(mine)
            bad.append(wrong)
    ts = [threading.Thread(target=client) for _ in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(seconds + 60)
    return len(lat), sorted(lat), sum(bad)


def one(a, emu, setup):
    db = "bench_" + uuid.uuid4().hex[:12]
    psql("postgres", f"CREATE DATABASE {db}")
    bouncer, gw = None, None
    try:
        direct = f"postgresql:///{db}"
        state = {"url": direct, "instance": "gw0"}
        if setup != "prepared":
            state.update({"pooler": "transaction", "listen_url": direct})
        if setup == "pgbouncer":
            bouncer = PgBouncer(db)
            state["url"] = bouncer.url
        gw = lib.tidegate(emu.dex, build=a.build, overrides={
            "sim": emu.sim_config(), "state": state,
            "poll": {"interval": "1s", "uuid_ids": False}})
        lib.wait_tokens(gw)
        r = requests.post(gw.url + "/public/v1/export/activities",
                          json={"projectId": "P-DEMO"}, headers=gw.headers, timeout=10)
        r.raise_for_status()
        path = "/public/export?correlationId=" + r.json()["correlationId"]
        time.sleep(0.5)
        pids = backends(db)
        n0, s0 = state_ops(gw)
        c0 = cpu_ms(pids)
        t0 = time.monotonic()
        answers, lat, bad = load(gw, path, a.conns, a.seconds)
        elapsed = time.monotonic() - t0
        c1 = cpu_ms(pids)
        n1, s1 = state_ops(gw)
        ops = max(1.0, n1 - n0)
        return {"setup": setup, "rps": answers / elapsed, "answers": answers, "bad": bad,
                "p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)],
                "ops_per_poll": ops / max(1, answers), "op_ms": (s1 - s0) * 1000.0 / ops,
                "pg_cpu_us_per_op": (c1 - c0) * 1000.0 / ops, "pg_backends": len(pids)}
    finally:
        if gw is not None:
            gw.stop()
        if bouncer is not None:
            bouncer.stop()
        psql("postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--conns", type=int, default=8)
    p.add_argument("--build", default=lib.BUILD)
    a = p.parse_args()
    if not (os.environ.get("PGHOST") or os.environ.get("PGPORT")):
        print("bench/pooler.py: no PostgreSQL (PG* unset): run under pg_virtualenv",
              file=sys.stderr)
        return 0
    setups = ["prepared", "unnamed"] + (["pgbouncer"] if PGBOUNCER else [])
    emu = lib.emulator({"export": {"delay": "1h"}}, build=a.build)
    res = []
    try:
        for rnd in range(a.rounds):
            for s in setups:
                r = one(a, emu, s)
                log(f"round {rnd + 1} {s}: {r['rps']:.0f}/s, {r['op_ms']:.3f} ms an operation")
                res.append(r)
    finally:
        emu.stop()
    lib.save("pooler", {"args": vars(a), "results": res})
    ver = psql("postgres", "SHOW server_version").split()[0]
    print(f"PostgreSQL {ver}; {lib.machine()}; {a.conns} clients for {a.seconds:g} s per "
          f"run, median (min-max) over {a.rounds} round(s).\n")
    rows = []
    for s in setups:
        rs = [r for r in res if r["setup"] == s]
        rows.append([s, lib.fmt([r["rps"] for r in rs]), lib.fmt([r["p50"] for r in rs], 2),
                     lib.fmt([r["p99"] for r in rs], 2),
                     lib.fmt([r["ops_per_poll"] for r in rs], 2),
                     lib.fmt([r["op_ms"] for r in rs], 3),
                     lib.fmt([r["pg_cpu_us_per_op"] for r in rs], 1),
                     sum(r["bad"] for r in rs)])
    print(lib.table(["statements", "polls/s", "p50 ms", "p99 ms", "state operations a poll",
                     "ms an operation", "PostgreSQL CPU µs an operation", "not 202"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
