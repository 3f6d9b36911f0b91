#!/usr/bin/env python3
"""
bench/creations.py - job creations answered per second through one gateway,
each answered only once its owner record is committed (poll.ownership,
docs/configuration.md): POST /public/v1/export/activities with the one API
key, --jobs one after another on one keep-alive connection, then 2 x --jobs
over --conns connections. State: SQLite files, and PostgreSQL (a schema of
its own per gateway) when the PG* variables name a cluster (run under
pg_virtualenv -t -o fsync=on, as bench/s8_fleet.py). Each build given
(comma-separated release build directories: compare a build before a
change with one after) runs in front of one emulator, builds interleaved
per round; medians (min-max) over --rounds. The gateway on SUT_CPU, the
emulator and this client on LOAD_CPU.

    pg_virtualenv -t -o fsync=on -v 15 /usr/bin/python3 bench/creations.py \
        --builds /tmp/before/build-release,build-release [--rounds 5]
"""
import argparse
import http.client
import json
import os
import subprocess
import threading
import time
import uuid

import lib


def post(gw, count, conns):
    """count creations over conns connections: (answered 200, per second)."""
    body = json.dumps({"projectId": "P-DEMO"})
    hdr = dict(gw.headers, **{"Content-Type": "application/json"})
    ok, lock = [0], threading.Lock()

    def worker(k):
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        try:
            for _ in range(k):
                c.request("POST", "/public/v1/export/activities", body=body, headers=hdr)
                r = c.getresponse()
                r.read()
                with lock:
                    ok[0] += r.status == 200
        finally:
            c.close()
    t = lib.spread(worker, count, conns)
    return ok[0], ok[0] / (time.monotonic() - t)


def one(a, emu, build, state):
    over = {"sim": emu.sim_config()}
    schema = None
    if state == "PostgreSQL":
        schema = "bench_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", "-qXc", f"CREATE SCHEMA {schema}"], check=True,
                       capture_output=True, timeout=30)
        over["state"] = {"url": f"postgresql:///?options=-csearch_path%3D{schema}"}
    gw = lib.tidegate(emu.dex, build=build, overrides=over)
    try:
        lib.wait_tokens(gw)
        post(gw, 50, 1)                         # warm: connections, statements
        n1, seq = post(gw, a.jobs, 1)
        n2, conc = post(gw, 2 * a.jobs, a.conns)
        return {"seq": seq, "conc": conc, "answered": n1 + n2, "sent": 3 * a.jobs}
    finally:
        gw.stop()
        if schema:
            subprocess.run(["psql", "-qXc", f"DROP SCHEMA {schema} CASCADE"],
                           capture_output=True, timeout=30)


def parse(ap, rounds):
    """ap's arguments with the builds, rounds, jobs and connections of a
    run: (args, build directories, states: PostgreSQL when PG* name one)."""
    ap.add_argument("--builds", default=lib.BUILD)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--conns", type=int, default=8)
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.builds.split(",")]
    states = ["SQLite"] + (["PostgreSQL"] if os.environ.get("PGHOST") or
                           os.environ.get("PGPORT") else [])
    return a, builds, states


def main():
    a, builds, states = parse(argparse.ArgumentParser(), 5)
    res = {(b, s): [] for b in builds for s in states}
    emu = lib.emulator()
    try:
        for _ in range(a.rounds):
            for s in states:
                for b in builds:
                    res[(b, s)].append(one(a, emu, b, s))
    finally:
        emu.stop()
    print(f"{a.jobs} creations on 1 connection, then {2 * a.jobs} over {a.conns}; "
          f"median (min-max) over {a.rounds} rounds; {lib.machine()}\n")
    rows = [[s, b, lib.fmt([r["seq"] for r in rs]), lib.fmt([r["conc"] for r in rs]),
             f"{sum(r['answered'] for r in rs)}/{sum(r['sent'] for r in rs)}"]
            for (b, s), rs in res.items()]
    print(lib.table(["state", "build", "creations/s, 1 connection",
                     f"creations/s, {a.conns} connections", "answered 200"], rows))


if __name__ == "__main__":
    main()
