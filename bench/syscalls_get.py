#!/usr/bin/env python3
"""
bench/syscalls_get.py - syscalls per proxied small GET (scenario 1's
/public/v1/bench over one kept-alive connection), counted by strace -c -f
of the proxy, for tidegate, the bare evhttp floor (bench/evhttp_floor.c)
and, with --before, the tidegate of another release build, all in front of
the same stub upstream. Exact counts: load does not move them. Loopback
only; needs strace.

    TG_BENCH_BUILD=$PWD/build-release /usr/bin/python3 bench/syscalls_get.py [--n 2000] [--before DIR]
"""
import argparse
import http.client
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor as floor_mod  # noqa: E402
import lib  # noqa: E402

KEYS = ("epoll_ctl", "epoll_wait", "readv", "writev", "ioctl")


def gets(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": "Bearer " + lib.TEST_KEY}
    for _ in range(n):
        c.request("GET", floor_mod.PATH, headers=headers)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise RuntimeError(f"status {r.status}")
    c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--before", help="release build directory of a tidegate to compare")
    a = ap.parse_args()
    a.n = max(10, min(a.n, 100000))
    started, rows = [], []
    try:
        stub = lib.stub()
        started.append(stub)
        systems = {"bare evhttp floor": floor_mod.floor(stub.port)}
        started.append(systems["bare evhttp floor"])
        systems["tidegate"] = lib.tidegate(stub.url)
        started.append(systems["tidegate"])
        if a.before:
            systems["tidegate before"] = lib.tidegate(stub.url, build=a.before)
            started.append(systems["tidegate before"])
        for name, d in systems.items():
            port = int(d.url.rsplit(":", 1)[1])
            gets(port, 50)      # connections up, pools warm
            counts = lib.syscalls(d.worker, lambda: gets(port, a.n))
            total = sum(counts.values())
            rows.append([name, f"{total / a.n:.2f}"] +
                        [f"{counts.get(k, 0) / a.n:.2f}" for k in KEYS])
    finally:
        for d in reversed(started):
            d.stop()
    print(f"{a.n} kept-alive GETs, syscalls per request (strace -c -f):\n")
    print(lib.table(["proxy", "total"] + list(KEYS), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
