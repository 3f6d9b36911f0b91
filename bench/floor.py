#!/usr/bin/env python3
"""
bench/floor.py - the proxied small GET of scenario 1, tidegate side by
side with the bare evhttp proxy (bench/evhttp_floor.c: the least an evhttp
server can do, same libevent, same allocator) in front of the same stub
upstream.

A warm-up per system, then ROUNDS interleaved rounds (each runs both
systems once per connection count, the order swapped from round to round),
wrk at 16, 64 and 256 connections for SECONDS. The ratio is tidegate's
requests/s over the floor's within the same round, so the machine's load
weighs on both alike; the median and range of the rounds are printed, with
each system's requests/s. Raw figures in bench/results/floor.json.
Loopback only.

    /usr/bin/python3 bench/floor.py [--rounds 5] [--seconds 2] [--before DIR]
    TG_BENCH_BUILD=$PWD/build-release /usr/bin/python3 bench/floor.py

--before DIR: a third system, the tidegate of another release build
(DIR/tidegate), measured in the same rounds (a change's before and after).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

PATH = "/public/v1/bench"
CONNS = (16, 64, 256)
TARGET = 1.15
T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:5.1f}s]", *a, file=sys.stderr, flush=True)


def floor(upstream_port):
    port = lib.free_port()
    d = lib.Daemon("evhttp-floor", [os.path.join(lib.BUILD, "bench", "evhttp_floor"),
                                    str(port), str(upstream_port)], lib.SUT_CPU, port, PATH)
    d.port = port
    d.url = f"http://127.0.0.1:{port}"
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--before", help="release build directory of a tidegate to compare")
    a = ap.parse_args()
    a.rounds = max(1, min(a.rounds, 50))
    a.seconds = max(1, min(a.seconds, 60))
    os.sched_setaffinity(0, {lib.LOAD_CPU})
    headers = {"Authorization": "Bearer " + lib.TEST_KEY}
    started, thr = [], {c: {"floor": [], "tidegate": [], "before": []} for c in CONNS}
    try:
        stub = lib.stub()
        started.append(stub)
        systems = {"floor": floor(stub.port)}
        started.append(systems["floor"])
        systems["tidegate"] = lib.tidegate(stub.url)
        started.append(systems["tidegate"])
        if a.before:
            systems["before"] = lib.tidegate(stub.url, build=a.before)
            started.append(systems["before"])
        names = list(systems)

        def run(name, conns):
            r = lib.wrk(systems[name].url + PATH, conns, a.seconds, headers=headers)
            if r["requests"] == 0 or r["non2xx"] or r["errors"]:
                raise RuntimeError(f"{name}: failed load run\n{r['raw']}")
            return r["rps"]

        log("floor: warm-up")
        for n in names:
            run(n, 64)
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            log(f"floor: round {r + 1}/{a.rounds}: {', '.join(order)}")
            for c in CONNS:
                for n in order:
                    thr[c][n].append(run(n, c))
    finally:
        for d in reversed(started):
            d.stop()
    lib.save("floor", {"rounds": a.rounds, "seconds": a.seconds, "throughput": thr})
    rows, lines = [], []
    for c in CONNS:
        ratios = [t / f for t, f in zip(thr[c]["tidegate"], thr[c]["floor"])]
        med = statistics.median(ratios)
        row = [c, lib.fmt(thr[c]["floor"]), lib.fmt(thr[c]["tidegate"]),
               lib.fmt(ratios, 2) + " ×"]
        if a.before:
            row += [lib.fmt(thr[c]["before"]), lib.fmt([b / f for b, f in zip(
                thr[c]["before"], thr[c]["floor"])], 2) + " ×"]
        rows.append(row)
        lines.append(f"- Target tidegate/floor at {c} connections ≥ {TARGET:g} — measured "
                     f"{med:.2f} — {'met' if med >= TARGET else 'not met'}")
    print(f"Machine: {lib.machine()}\n")
    print(f"{a.rounds} interleaved rounds of {a.seconds} s, requests/s median (min-max):\n")
    heads = ["connections", "bare evhttp floor", "tidegate", "tidegate/floor"]
    heads += ["tidegate before", "before/floor"] if a.before else []
    print(lib.table(heads, rows))
    print()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
