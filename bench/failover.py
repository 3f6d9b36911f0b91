#!/usr/bin/env python3
"""
bench/failover.py - a primary failover, again and again (issue 28): runs
tests/integration/test_pg_failover.py --runs times for each standby
(synchronous, then asynchronous; each run a fresh primary + streaming
standby, three gateways on the multi-host URL, callback exports from four
threads, the primary killed with -9 and the standby promoted 2 s later)
and sums up what each run printed: the time from the promotion to each
instance's first accepted callback export (its first durable write
after the failover: the export's webhook job committed on the new
primary), p50 and max over every instance of every run, and exports
accepted (200) then lost, delivered twice, or delivered after a refusal
that did not say the outcome was unknown.

    /usr/bin/python3 bench/failover.py [--runs 10] [--build build-test]

Needs Debian's postgresql-15 (pg_basebackup) and runuser when root, as the
test does; no PG* variables (it makes its own clusters). Prints a Markdown
section on stdout, progress on stderr; raw figures in
bench/results/failover.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import lib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def one(build, standby):
    """One run of the test for standby ('sync' or 'async'): its figures."""
    env = dict(os.environ, TG_BUILD=build)
    for k in [k for k in env if k.startswith("PG")]:
        del env[k]
    p = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "-s", "tests/integration/test_pg_failover.py", "-k", standby],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    figs = [json.loads(ln.split(" ", 1)[1]) for ln in p.stdout.splitlines()
            if ln.startswith("FAILOVER-JSON ")]
    if not figs:
        raise RuntimeError(f"no figures from the {standby} run:\n{p.stdout[-3000:]}")
    figs[0]["passed"] = p.returncode == 0
    return figs[0]


def row(name, runs):
    rec = [r for run in runs for r in run["recovery_s"] if r is not None]
    none = sum(r is None for run in runs for r in run["recovery_s"])
    return [name, str(len(runs)), str(sum(r["passed"] for r in runs)),
            f"{statistics.median(r['accepted'] for r in runs):.0f}",
            str(sum(r["lost"] for r in runs)), str(sum(r["duplicated"] for r in runs)),
            str(sum(r["unasked"] for r in runs)), str(sum(r["unknown"] for r in runs)),
            f"{statistics.median(rec):.2f}" if rec else "-",
            f"{max(rec):.2f}" if rec else "-", str(none)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-test"))
    a = ap.parse_args()
    if not 1 <= a.runs <= 30:
        ap.error("--runs: 1-30")
    res = {"sync": [], "async": []}
    for i in range(a.runs):
        for standby in res:
            r = one(os.path.abspath(a.build), standby)
            res[standby].append(r)
            print(f"[{i + 1}/{a.runs}] {standby}: {r}", file=sys.stderr, flush=True)
    lib.save("failover", {"args": vars(a), "results": res})
    cmd = " ".join(["/usr/bin/python3", "bench/failover.py"] + sys.argv[1:])
    print("### A primary killed, its standby promoted 2 s later\n")
    print(f"`{cmd}`; {lib.machine()}. Each run: a fresh primary and streaming standby, "
          "three gateways on the multi-host URL, callback exports from four threads, "
          "`kill -9` of every primary process, `pg_ctl promote` 2 s later. Recovery: "
          "from the promotion to an instance's first accepted callback export.\n")
    print(lib.table(["standby", "runs", "passed", "accepted per run (median)",
                     "accepted then lost", "delivered twice", "delivered unasked",
                     "told unknown", "recovery p50 s", "recovery max s",
                     "instances not back"],
                    [row("synchronous", res["sync"]), row("asynchronous", res["async"])]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
