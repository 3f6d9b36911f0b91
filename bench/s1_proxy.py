#!/usr/bin/env python3
"""
bench/s1_proxy.py - Scenario 1: a proxied small GET over keep-alive.

Systems: the fixed-answer stub upstream asked directly (the ceiling), nginx,
HAProxy and tidegate (GET of the passthrough path /public/v1/bench with the
gateway API key; tidegate swaps it for its vendor token). Every system gets
the same request, Authorization header included.

1. Throughput: a warm-up per system, then ROUNDS interleaved rounds (each
   round runs every system once per connection count, the order rotated
   from round to round), wrk at 16, 64 and 256 connections for SECONDS.
2. Latency: paced wrk at 64 connections at 25/50/80 % of nginx's median
   maximum rate at 64 connections; p50/p99 per system and the p99 added to
   the direct one (system p99 minus direct p99, round by round).
3. Instructions per request (callgrind; skipped with --quick): nginx
   (master_process off), HAProxy and tidegate under valgrind, sent 2,000
   then 12,000 requests by a small keep-alive client over 4 connections;
   the difference of the totals over the 10,000 extra requests.

Prints a Markdown section (tables and target lines) on stdout, progress on
stderr; raw figures in bench/results/s1_proxy.json. Loopback only.

    /usr/bin/python3 bench/s1_proxy.py [--rounds 5] [--seconds 2] [--quick]

--quick: 3 rounds of 1 s, one latency round at 50 % only, no callgrind (under
a minute).
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
PACES = (25, 50, 80)
CG_SMALL, CG_LARGE = 2000, 12000


T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:5.1f}s]", *a, file=sys.stderr, flush=True)


def callgrind(stub, headers):
    """Instructions per request of each proxy."""
    starters = {
        "nginx": lambda pre: lib.nginx_proxy(stub.port, master=False, prefix=pre),
        "HAProxy": lambda pre: lib.haproxy(stub.port, prefix=pre),
        "tidegate": lambda pre: lib.tidegate(stub.url, prefix=pre),
    }
    out = {}
    for name, start in starters.items():
        log(f"s1: callgrind {name}")
        out[name] = lib.callgrind_ir(start, lambda d, n: lib.send_n(d.port, PATH, headers, n),
                                     CG_SMALL, CG_LARGE)
    return out


def ratio_line(what, med, target, better="high"):
    ok = med >= target if better == "high" else med <= target
    sign = "≥" if better == "high" else "≤"
    verdict = "met" if ok else f"gap {abs(med - target):.2f}"
    return f"- Target {what} {sign} {target:g} — measured {med:.2f} — {verdict}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help="3 rounds of 1 s, one latency round at 50 %%, no callgrind")
    ap.add_argument("--no-callgrind", action="store_true")
    a = ap.parse_args()
    paces = PACES
    if a.quick:
        a.rounds, a.seconds, a.no_callgrind, paces = 3, 1, True, (50,)
    a.rounds = max(1, min(a.rounds, 50))
    a.seconds = max(1, min(a.seconds, 60))
    os.sched_setaffinity(0, {lib.LOAD_CPU})

    headers = {"Authorization": "Bearer " + lib.TEST_KEY}
    started, data = [], {"rounds": a.rounds, "seconds": a.seconds}
    try:
        systems = lib.start_systems(started)
        stub = systems["direct"]
        names = list(systems)

        def run(name, conns, rate=None):
            r = lib.wrk(systems[name].url + PATH, conns, a.seconds, headers=headers, rate=rate)
            if r["requests"] == 0 or r["non2xx"] or r["errors"]:
                raise RuntimeError(f"{name}: failed load run\n{r['raw']}")
            return r

        log("s1: warm-up")
        for n in names:
            run(n, 64)
        thr = {c: {n: [] for n in names} for c in CONNS}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            log(f"s1: throughput round {r + 1}/{a.rounds}: {', '.join(order)}")
            for c in CONNS:
                for n in order:
                    thr[c][n].append(run(n, c)["rps"])
        data["throughput"] = thr

        base = statistics.median(thr[64]["nginx"])
        lat = {p: {n: [] for n in names} for p in paces}
        lat_rounds = 1 if a.quick else a.rounds
        for r in range(lat_rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            log(f"s1: latency round {r + 1}/{lat_rounds}")
            for p in paces:
                for n in order:
                    lat[p][n].append(run(n, 64, rate=base * p / 100.0))
        data["latency"] = {p: {n: [{k: v for k, v in x.items() if k != "raw"} for x in xs]
                               for n, xs in d.items()} for p, d in lat.items()}

        ir = None if a.no_callgrind else callgrind(stub, headers)
        data["instructions_per_request"] = ir
    finally:
        for d in reversed(started):
            d.stop()
    lib.save("s1_proxy", data)

    # ---- report ----
    cmd = "/usr/bin/python3 bench/s1_proxy.py" + (" --quick" if a.quick else
                                                  f" --rounds {a.rounds} --seconds {a.seconds}")
    out = ["### 1. Proxied small GET, keep-alive", "", "    " + cmd, "",
           f"wrk, 1 thread, {a.seconds} s per run, {a.rounds} interleaved rounds; "
           f"GET {PATH} (63-byte JSON answer). Requests/s, median (min-max).", ""]
    rows = []
    for c in CONNS:
        t = thr[c]
        ratios = {o: [x / y for x, y in zip(t["tidegate"], t[o])] for o in ("nginx", "HAProxy")}
        rows.append([c] + [lib.fmt(t[n]) for n in names] +
                    [lib.fmt(ratios[o], 2) for o in ("nginx", "HAProxy")])
    out.append(lib.table(["connections"] + names + ["tidegate/nginx", "tidegate/HAProxy"],
                         rows))
    out += ["", "Ratios: per round, median (min-max).", ""]

    rows = []
    added = {p: {} for p in paces}
    for p in paces:
        direct99 = [x["p99"] for x in lat[p]["direct"]]
        for n in names:
            xs = lat[p][n]
            add = [x["p99"] - d for x, d in zip(xs, direct99)]
            added[p][n] = statistics.median(add)
            rows.append([f"{p} % ({base * p / 100:,.0f}/s)", n,
                         lib.fmt([x["rps"] for x in xs]),
                         lib.fmt([x["p50"] for x in xs], 2), lib.fmt([x["p99"] for x in xs], 2),
                         "—" if n == "direct" else lib.fmt(add, 2)])
    out += [f"Latency at 64 connections, {lat_rounds} round(s), paced (each connection "
            f"waits between requests so that all together aim at the rate; closed loop) at "
            f"{'/'.join(str(p) for p in paces)} % of nginx's median maximum rate "
            f"({base:,.0f}/s); ms, median (min-max). Added p99: system p99 minus direct p99 "
            f"in the same round.", ""]
    out.append(lib.table(["rate", "system", "achieved req/s", "p50 ms", "p99 ms",
                          "added p99 ms"], rows))
    if ir:
        out += ["", f"Instructions per request: callgrind, user-space instructions of the "
                f"proxy process, the difference between a run of {CG_LARGE:,} and one of "
                f"{CG_SMALL:,} requests (4 keep-alive connections) divided by "
                f"{CG_LARGE - CG_SMALL:,}.", ""]
        out.append(lib.table(["system", "instructions/request", "relative to nginx"],
                             [[n, f"{v:,.0f}", f"{v / ir['nginx']:.2f}"]
                              for n, v in ir.items()]))
    out.append("")
    for c in CONNS:
        t = thr[c]
        for o in ("nginx", "HAProxy"):
            med = statistics.median(x / y for x, y in zip(t["tidegate"], t[o]))
            out.append(ratio_line(f"throughput tidegate/{o} at {c} connections", med, 1.0))
    tg, ng = added[50]["tidegate"], added[50]["nginx"]
    if ng > 0:
        out.append(ratio_line("added p99 at 50 % tidegate/nginx", tg / ng, 1.2, "low")
                   + f" (tidegate +{tg:.2f} ms, nginx +{ng:.2f} ms)")
    else:
        verdict = "met" if tg <= 0 else "not comparable"
        out.append(f"- Target added p99 at 50 % tidegate ≤ 1.2 × nginx — measured tidegate "
                   f"{tg:+.2f} ms, nginx {ng:+.2f} ms — {verdict} (nginx adds nothing "
                   f"measurable)")
    if not ir:
        out.append("- Instructions per request: not measured (--quick or --no-callgrind)")
    print("\n".join(out))


if __name__ == "__main__":
    main()
