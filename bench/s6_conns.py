#!/usr/bin/env python3
"""
bench/s6_conns.py - Scenario 6: many idle keep-alive clients, and new
connections per second.

1. Memory: each proxy (nginx, HAProxy, tidegate) is started fresh in front
   of the stub upstream and warmed with 200 requests; its RSS (VmRSS, summed
   over its processes) is read, then a bounded asyncio client opens CLIENTS
   connections (256 at a time), sends one keep-alive GET on each, reads the
   answer and holds the connection open; RSS is read again with all of them
   held (and the held count checked with ss), then the clients close. The fd
   hard limit must cover the clients: the script raises its soft limit to
   the hard one. HAProxy reserves two fds per connection, so its maxconn is
   the largest the limit allows and it is measured at that many clients when
   fewer than CLIENTS (the table says so).
2. New connections per second: wrk at 64 connections with
   `Connection: close` (one request per connection), for the stub (direct),
   nginx, HAProxy and tidegate, in interleaved rounds.

Prints a Markdown section on stdout, progress on stderr; raw figures in
bench/results/s6_conns.json. Loopback only; every wait is bounded.

    /usr/bin/python3 bench/s6_conns.py [--rounds 5] [--seconds 2] [--quick]
                                       [--clients 10000]

--quick: 3 rounds of 1 s for connections per second, one memory round (under
a minute).
"""
import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

PATH = "/public/v1/bench"
HEADERS = {"Authorization": "Bearer " + lib.TEST_KEY}
T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:5.1f}s]", *a, file=sys.stderr, flush=True)


async def read_answer(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(None, 2)[1])
    length = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    if length is not None:
        await reader.readexactly(length)
    else:                                   # chunked: the answers here are small
        await reader.readuntil(b"\r\n0\r\n\r\n")
    return status


async def hold(port, n, measure):
    """Open n keep-alive connections, one GET each, hold them; call
    measure() while all are open; close them. Returns (opened, measure())."""
    req = (f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n" +
           "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items()) + "\r\n").encode()
    sem = asyncio.Semaphore(256)
    conns = []

    async def one():
        async with sem:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            conns.append(w)
            w.write(req)
            if await read_answer(r) != 200:
                raise RuntimeError("answer not 200")

    try:
        res = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n)),
                                                    return_exceptions=True), 120)
        fails = [x for x in res if isinstance(x, BaseException)]
        if fails:
            log(f"s6: {len(fails)} clients failed, first: {fails[0]!r}")
        await asyncio.sleep(0.5)
        return n - len(fails), measure()
    finally:
        for w in conns:
            w.close()
        await asyncio.sleep(0.2)


def established(port):
    """Connections from this host's clients to port, as ss sees them."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, timeout=30).stdout
    return len(out.splitlines())


def memory(name, start, clients):
    d = start()
    try:
        lib.wrk(d.url + PATH, 4, 1, headers=HEADERS)        # warm: pools, buffers
        before = d.rss_kb()
        opened, (rss, held) = asyncio.run(
            hold(d.port, clients, lambda: (d.rss_kb(), established(d.port))))
        return {"before_kb": before, "with_kb": rss, "opened": opened, "held": held}
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--quick", action="store_true", help="3 rounds of 1 s, one memory round")
    a = ap.parse_args()
    mem_rounds = min(a.rounds, 3)
    if a.quick:
        a.rounds, a.seconds, mem_rounds = 3, 1, 1
    a.rounds = max(1, min(a.rounds, 50))
    a.seconds = max(1, min(a.seconds, 60))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    a.clients = max(1, min(a.clients, hard - 500))
    hap_maxconn = min(a.clients + 100, (hard - 100) // 2)
    hap_clients = min(a.clients, hap_maxconn - 50)
    os.sched_setaffinity(0, {lib.LOAD_CPU})

    data = {"rounds": a.rounds, "seconds": a.seconds, "clients": a.clients,
            "haproxy_maxconn": hap_maxconn, "fd_limit": hard}
    started = []
    try:
        stub = lib.stub()
        started.append(stub)
        starters = {
            "nginx": (lambda: lib.nginx_proxy(stub.port), a.clients),
            "HAProxy": (lambda: lib.haproxy(stub.port, maxconn=hap_maxconn), hap_clients),
            # max_clients (4096 a listener by default) raised above the clients,
            # as nginx's worker_connections is (20000, bench/lib.py)
            "tidegate": (lambda: lib.tidegate(stub.url, overrides={"max_clients": a.clients + 1000}),
                         a.clients),
        }
        mem = {n: [] for n in starters}
        for r in range(mem_rounds):
            for name, (start, n) in starters.items():
                log(f"s6: memory round {r + 1}/{mem_rounds}: {name}, {n} clients")
                mem[name].append(memory(name, start, n))
        data["memory"] = mem

        systems = {"direct": stub}
        for name, (start, _) in starters.items():
            systems[name] = start()
            started.append(systems[name])
        names = list(systems)
        close = dict(HEADERS, Connection="close")
        cps = {n: [] for n in names}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            log(f"s6: connections/s round {r + 1}/{a.rounds}: {', '.join(order)}")
            for n in order:
                res = lib.wrk(systems[n].url + PATH, 64, a.seconds, headers=close)
                if res["requests"] == 0 or res["non2xx"] or res["errors"]:
                    raise RuntimeError(f"{n}: failed load run\n{res['raw']}")
                cps[n].append(res["rps"])
        data["connections_per_second"] = cps
    finally:
        for d in reversed(started):
            d.stop()
    lib.save("s6_conns", data)

    cmd = "/usr/bin/python3 bench/s6_conns.py" + (" --quick" if a.quick else
                                                  f" --rounds {a.rounds} --seconds {a.seconds}")
    if a.clients != 10000:
        cmd += f" --clients {a.clients}"
    out = ["### 6. Idle keep-alive clients and new connections", "", "    " + cmd, "",
           f"Memory: RSS of the proxy (VmRSS, nginx master + worker) after a warm-up, then "
           f"with every client connected, one keep-alive GET answered on each, held idle; "
           f"{mem_rounds} round(s), a fresh process each, median (min-max). fd limit {hard}.",
           ""]
    rows = []
    for name, runs in mem.items():
        n = starters[name][1]
        held = min(x["held"] for x in runs)
        per = [(x["with_kb"] - x["before_kb"]) / max(1, x["opened"]) for x in runs]
        rows.append([name, f"{n:,}" + ("" if n == a.clients else f" (maxconn {hap_maxconn})"),
                     f"{held:,}", lib.fmt([x["before_kb"] / 1024 for x in runs], 1, "MB"),
                     lib.fmt([x["with_kb"] / 1024 for x in runs], 1, "MB"),
                     lib.fmt(per, 2, "KB")])
    out.append(lib.table(["system", "clients", "held (min)", "RSS before", "RSS with clients",
                          "per client"], rows))
    if hap_clients < a.clients:
        out += ["", f"HAProxy reserves two fds per connection: with the fd hard limit of "
                f"{hard} its maxconn is {hap_maxconn}, so it is measured at {hap_clients:,} "
                f"clients; compare the per-client column."]
    out += ["", f"New connections per second: wrk, 1 thread, 64 connections, "
            f"`Connection: close` (one GET per connection), {a.seconds} s per run, "
            f"{a.rounds} interleaved rounds; median (min-max). direct: the stub on the load "
            f"core beside wrk, so not a ceiling here.", ""]
    ng = statistics.median(cps["nginx"])
    out.append(lib.table(["system", "connections/s", "relative to nginx"],
                         [[n, lib.fmt(cps[n]), f"{statistics.median(cps[n]) / ng:.2f}"]
                          for n in names]))
    out.append("")
    tg = mem["tidegate"]
    rss = statistics.median(x["with_kb"] for x in tg) / 1024
    held = min(x["held"] for x in tg)
    ok = rss <= 64 and held >= a.clients
    verdict = "met" if ok else (f"gap {rss - 64:.1f} MB" if rss > 64 else
                                f"gap: only {held:,} of {a.clients:,} connections held")
    out.append(f"- Target tidegate RSS with {a.clients:,} idle keep-alive clients ≤ 64 MB — "
               f"measured {rss:.1f} MB ({held:,} held) — {verdict}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
