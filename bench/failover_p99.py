#!/usr/bin/env python3
"""
bench/failover_p99.py - latency of proxied GETs while the first of the
simulation API's two hosts fails.

One release tidegate (pinned to SUT_CPU) in front of one tidegate-emulator
(the vendor, on LOAD_CPU): sim.url is the emulator's sim listener, the
first host; sim.fallback_url its design listener, the second (identical,
one shared store). Each round, a client on LOAD_CPU sends --n sequential
`GET /api/v1/cases/CASE-OM-1` over one keep-alive connection (forwarded to
the vendor every time) and times each from send to the answer's end:

- healthy: both hosts answer;
- failing, ejected: the first host resets every connection (the emulator's
  fault API, {"listener": "sim", "reset": true}); the first --warm requests
  meet the resets, fail over and eject the host (they are reported apart:
  "while ejecting"); the --n after them are the figure: with the host
  ejected they go straight to the second;
- failing, not ejected (failover.eject_after 0, the control): every
  request meets a reset on the first host and fails over.

Figures are medians over --rounds of each round's p50, p99 and max, and the
per-round p99 differences to the healthy run. Target (issue 15): once the
host is ejected, p99 within 1 ms of the healthy run.

    /usr/bin/python3 bench/failover_p99.py [--n 2000] [--rounds 5]
        [--warm 20] [--build build-release]
"""
import argparse
import http.client
import os
import statistics
import sys
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def timed_gets(port, headers, n):
    """n sequential GETs over one connection: their latencies in ms."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            c.request("GET", "/api/v1/cases/CASE-OM-1", headers=headers)
            r = c.getresponse()
            r.read()
            out.append((time.perf_counter() - t0) * 1000)
            if r.status != 200:
                raise RuntimeError(f"GET answered {r.status}")
    finally:
        c.close()
    return out


def pct(vals, p):
    s = sorted(vals)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def one_round(emu, build, n, warm, eject):
    over = {"sim": {**emu.sim_config(), "fallback_url": emu.design},
            "failover": {"eject_after": 3 if eject else 0, "eject_time": "5m"}}
    gw = lib.tidegate(emu.dex, overrides=over, build=build)
    try:
        lib.wait_tokens(gw)
        port = gw.sim_port
        hdr = gw.headers
        healthy = timed_gets(port, hdr, n) if eject else None
        requests.post(emu.dex + "/__emulator/faults",
                      json={"listener": "sim", "reset": True}, timeout=5).raise_for_status()
        ejecting = timed_gets(port, hdr, warm)
        failing = timed_gets(port, hdr, n)
        requests.delete(emu.dex + "/__emulator/faults", timeout=5)
        return healthy, ejecting, failing
    finally:
        gw.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--build", default=os.path.join(lib.ROOT, "build-release"))
    a = ap.parse_args()
    emu = lib.emulator(build=a.build)
    res = {"healthy": [], "ejecting": [], "ejected": [], "not ejected": []}
    try:
        for i in range(a.rounds):
            h, w, f = one_round(emu, a.build, a.n, a.warm, True)
            _, _, c = one_round(emu, a.build, a.n, a.warm, False)
            for k, v in (("healthy", h), ("ejecting", w), ("ejected", f), ("not ejected", c)):
                res[k].append({"p50": statistics.median(v), "p99": pct(v, 99), "max": max(v)})
            print(f"[round {i + 1}] healthy p99 {res['healthy'][-1]['p99']:.3f} ms, ejected "
                  f"p99 {res['ejected'][-1]['p99']:.3f} ms, not ejected p99 "
                  f"{res['not ejected'][-1]['p99']:.3f} ms", file=sys.stderr)
    finally:
        emu.stop()
    rows = []
    for k in ("healthy", "ejecting", "ejected", "not ejected"):
        rows.append([k, a.warm if k == "ejecting" else a.n,
                     lib.fmt([r["p50"] for r in res[k]], 3),
                     lib.fmt([r["p99"] for r in res[k]], 3),
                     lib.fmt([r["max"] for r in res[k]], 3),
                     "" if k in ("healthy", "ejecting") else lib.fmt(
                         [x["p99"] - y["p99"] for x, y in zip(res[k], res["healthy"])], 3)])
    print(f"Command: `/usr/bin/python3 bench/failover_p99.py --n {a.n} --rounds {a.rounds} "
          f"--warm {a.warm}`; {lib.machine()}; medians (min-max) over {a.rounds} rounds, "
          f"ms.\n")
    print(lib.table(["first host", "GETs", "p50", "p99", "max", "p99 - healthy p99"], rows))
    d = statistics.median([x["p99"] - y["p99"] for x, y in zip(res["ejected"],
                                                                res["healthy"])])
    print(f"\n- Target: p99 with the first host ejected within 1 ms of the healthy run — "
          f"measured {d:+.3f} ms — {'met' if abs(d) <= 1.0 else 'not met'}")
    lib.save("failover_p99", res)


if __name__ == "__main__":
    main()
