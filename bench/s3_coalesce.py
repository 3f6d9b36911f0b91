#!/usr/bin/env python3
"""
bench/s3_coalesce.py - scenario 3: K clients polling one export job.

The emulator keeps every export IN_PROGRESS (export.delay 1h) and answers
`GET /public/export` after a fault latency of 5, 50 or 500 ms. For each
latency, round and K in {1, 10, 100, 1000}, a fresh job is created and wrk
polls it over K connections for a fixed time through each system: tidegate
(callers send the gateway API key, so they share its poll multiplexer,
poll.interval 1s), nginx and HAProxy (callers send an emulator token; each
poll is forwarded). Client calls are wrk's completed requests; upstream
calls are the emulator's `GET /public/export` counter delta. Target:
tidegate makes one upstream call per job per poll interval whatever K (at
most one per started interval plus the first).

    /usr/bin/python3 bench/s3_coalesce.py [--rounds 3] [--seconds 3]
        [--ks 1,10,100,1000] [--latencies 5,50,500] [--quick]

Three rounds by default: the counts barely vary, and one round is 36 runs
of --seconds each. --quick: K in {1, 100, 1000}, 50 ms only, 1 round of 2 s.
"""
import argparse
import math
import os
import sys
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

INTERVAL_S = 1.0
COUNTER = "GET /public/export"
TARGETS = ("tidegate", "nginx", "HAProxy")


def new_job(base, headers):
    r = requests.post(base + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=headers, timeout=10)
    r.raise_for_status()
    return r.json()["correlationId"]


def measure(emu, sut, headers, k, seconds, latency_ms):
    """One wrk run of k connections polling a fresh job through sut."""
    cid = new_job(sut.url, headers)
    before = emu.calls(COUNTER)
    res = lib.wrk(f"{sut.url}/public/export?correlationId={cid}", k, seconds,
                  headers=headers, timeout_s=max(10, 4 * latency_ms / 1000))
    time.sleep(0.3)                  # polls already forwarded reach the counter
    up = emu.calls(COUNTER) - before
    return {"k": k, "latency_ms": latency_ms, "seconds": seconds, "client": res["requests"],
            "upstream": up, "ratio": up / max(1, res["requests"]),
            "per_interval": up * INTERVAL_S / seconds, "errors": res["errors"],
            "non2xx": res["non2xx"], "rps": res["rps"], "p50": res.get("p50"),
            "p99": res.get("p99")}


def report(a, cmd, results):
    print("### 3. Coalescing: K clients polling one export job\n")
    print(f"    {cmd}\n")
    print(f"One job kept IN_PROGRESS; wrk polls it over K connections for {a.seconds} s per "
          f"run; tidegate poll.interval {INTERVAL_S:g} s; median (min-max) over "
          f"{a.rounds} round(s). Client calls are the polls wrk completed; upstream "
          f"calls also count the polls still in flight when wrk stopped (up to K), so "
          f"nginx and HAProxy can exceed 1 upstream call per client call.\n")
    for lat in a.latencies:
        print(f"Upstream latency {lat} ms:\n")
        rows = []
        for k in a.ks:
            for t in TARGETS:
                rs = [r for r in results[t] if r["k"] == k and r["latency_ms"] == lat]
                rows.append([k, t, lib.fmt([r["client"] for r in rs]),
                             lib.fmt([r["upstream"] for r in rs]),
                             lib.fmt([r["ratio"] for r in rs], 4),
                             lib.fmt([r["per_interval"] for r in rs],
                                     2 if t == "tidegate" else 0),
                             sum(r["errors"] + r["non2xx"] for r in rs)])
        print(lib.table(["K", "system", "client calls", "upstream calls", "upstream ÷ client",
                         f"upstream per {INTERVAL_S:g} s interval", "errors + non-2xx (all rounds)"],
                        rows))
        print()
    allowed = math.floor(a.seconds / INTERVAL_S) + 1
    worst = max(results["tidegate"], key=lambda r: r["upstream"])
    ok = all(r["upstream"] <= allowed for r in results["tidegate"])
    print(f"- Target: tidegate makes one upstream call per job per poll interval whatever K "
          f"(at most {allowed} in {a.seconds} s) — measured at most {worst['upstream']} "
          f"({worst['per_interval']:.2f} per interval, K={worst['k']}, "
          f"{worst['latency_ms']} ms) — {'met' if ok else 'gap'}")
    for t in TARGETS[1:]:
        ratios = [r["ratio"] for r in results[t]]
        ok = all(x >= 0.98 for x in ratios)
        print(f"- Reference: {t} forwards every poll (upstream ÷ client ≈ 1) — measured "
              f"{min(ratios):.3f}-{max(ratios):.3f} — {'met' if ok else 'gap'}")
    bad = sum(r["errors"] + r["non2xx"] for rs in results.values() for r in rs)
    print(f"- Every poll answered 2xx without socket errors — measured {bad} errors + "
          f"non-2xx — {'met' if bad == 0 else 'gap'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3, help="wrk duration per run")
    ap.add_argument("--ks", default="1,10,100,1000", help="client counts")
    ap.add_argument("--latencies", default="5,50,500", help="upstream latencies, ms")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    cmd = " ".join(["/usr/bin/python3", "bench/s3_coalesce.py"] + sys.argv[1:])
    a.ks = [int(x) for x in a.ks.split(",")]
    a.latencies = [int(x) for x in a.latencies.split(",")]
    if a.quick:
        a.ks, a.latencies, a.rounds, a.seconds = (1, 100, 1000), (50,), 1, 2
    procs = []
    results = {t: [] for t in TARGETS}
    try:
        emu = lib.emulator({"export": {"delay": "1h", "expiry": "2h"}})
        procs.append(emu)
        tg = lib.tidegate(emu.dex, overrides={"sim": emu.sim_config(),
                                              "poll": {"interval": f"{INTERVAL_S:g}s"}})
        procs.append(tg)
        lib.wait_tokens(tg)
        ng = lib.nginx_proxy(emu.ports["dex"])
        procs.append(ng)
        ha = lib.haproxy(emu.ports["dex"])
        procs.append(ha)
        emu_hdr = emu.dex_headers()
        suts = {"tidegate": (tg, tg.headers), "nginx": (ng, emu_hdr), "HAProxy": (ha, emu_hdr)}
        for lat in a.latencies:
            emu.clear_faults()
            emu.fault(method="GET", path="/public/export", latencyMs=lat)
            for _ in range(a.rounds):
                for k in a.ks:
                    for t in TARGETS:
                        sut, hdr = suts[t]
                        results[t].append(measure(emu, sut, hdr, k, a.seconds, lat))
    finally:
        for p in reversed(procs):
            p.stop()
    lib.save("s3_coalesce", {"interval_s": INTERVAL_S, "rounds": a.rounds, "results": results})
    report(a, cmd, results)


if __name__ == "__main__":
    main()
