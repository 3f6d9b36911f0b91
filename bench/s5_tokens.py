#!/usr/bin/env python3
"""
bench/s5_tokens.py - scenario 5: a cold-start token storm.

The emulator's data exchange login (POST /public/v1/authenticate) is slowed
by a fault latency (default 1 s). Each round starts a fresh tidegate in
front of it, and while tidegate's first vendor login is still pending, N
callers (default 1,000, one connection each, opened beforehand, asyncio on
the load core) send at once a request that needs the vendor token
(POST /public/v1/export/activities with the gateway API key). Reported:
vendor logins made (emulator counter; target exactly 1), answers 2xx
(target all), and p50/p99/max latency from the burst to each full answer.
nginx and HAProxy cannot hold a token, so the same N callers go through
them logging in themselves (login, then the same request on the same
connection): N vendor logins.

    /usr/bin/python3 bench/s5_tokens.py [--rounds 5] [--callers 1000] [--login-ms 1000] [--quick]

--quick: 1 round.
"""
import argparse
import asyncio
import json
import math
import os
import socket
import sys
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

LOGIN = "POST /public/v1/authenticate"
EXPORT = "POST /public/v1/export/activities"
TIMEOUT_S = 60                 # bound of one burst


def http_request(method, path, body, token=None):
    data = json.dumps(body).encode()
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n")
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    return head.encode() + b"\r\n" + data


async def exchange(reader, writer, raw):
    """Send one request, read its answer: (status, body bytes)."""
    writer.write(raw)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length, chunked = None, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
        elif k.strip().lower() == "transfer-encoding" and "chunked" in v.lower():
            chunked = True
    if chunked:
        body = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            body += await reader.readexactly(size + 2)
            if size == 0:
                break
        return status, body[:-2]
    if length is not None:
        return status, await reader.readexactly(length)
    return status, await reader.read()


async def caller(conn, go, key, login):
    """One caller on its own connection: (status, seconds from the burst)."""
    reader, writer = conn
    await go.wait()
    t0 = time.monotonic()
    try:
        token = key
        if login:
            st, body = await exchange(reader, writer, http_request(
                "POST", "/public/v1/authenticate", {"username": "demo", "password": "demo"}))
            if st != 200:
                return st, time.monotonic() - t0
            token = json.loads(body)["token"]
        st, _ = await exchange(reader, writer, http_request(
            "POST", "/public/v1/export/activities", {"projectId": "P-DEMO"}, token))
        return st, time.monotonic() - t0
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
        return 0, time.monotonic() - t0
    finally:
        writer.close()


def connect(port, n):
    """n connected sockets, made one after another (quicker than asyncio's
    connects, so the burst leaves while the vendor login is pending)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks.append(s)
    except OSError:
        for s in socks:
            s.close()
        raise
    return socks


async def burst(port, n, key, login, before_fire):
    """Open n connections, call before_fire(), then release every caller at
    once; [(status, seconds)] (status 0: no answer) and before_fire's value."""
    conns = [await asyncio.open_connection(sock=s) for s in connect(port, n)]
    go = asyncio.Event()
    tasks = [asyncio.ensure_future(caller(c, go, key, login)) for c in conns]
    info = await asyncio.get_running_loop().run_in_executor(None, before_fire)
    go.set()
    done, pending = await asyncio.wait(tasks, timeout=TIMEOUT_S)
    for t in pending:
        t.cancel()
    res = [t.result() for t in done]
    res += [(0, float(TIMEOUT_S))] * len(pending)
    return res, info


def pct(sorted_vals, q):
    return sorted_vals[max(0, math.ceil(q * len(sorted_vals)) - 1)]


def summary(name, res, emu, extra=None):
    lat = sorted(t * 1000 for _, t in res)
    out = {"system": name, "n": len(res), "ok": sum(200 <= s < 300 for s, _ in res),
           "codes": sorted({s for s, _ in res}), "logins": emu.calls(LOGIN),
           "upstream_requests": emu.calls(EXPORT), "first": lat[0], "p50": pct(lat, 0.5),
           "p99": pct(lat, 0.99), "max": lat[-1]}
    out.update(extra or {})
    return out


def reset(emu):
    requests.delete(emu.dex + "/__emulator/stats", timeout=5).raise_for_status()


def round_tidegate(emu, n):
    reset(emu)
    t0 = time.monotonic()
    tg = lib.tidegate(emu.dex, overrides={"sim": emu.sim_config()})
    try:
        def before_fire():
            ready = requests.get(tg.admin + "/readyz", timeout=5).json()
            return {"cold": not lib.tokens_held(ready),
                    "fired_after_start_s": time.monotonic() - t0}
        res, info = asyncio.run(burst(tg.port, n, lib.TEST_KEY, False, before_fire))
        return summary("tidegate", res, emu, info)
    finally:
        tg.stop()


def round_proxy(name, start, emu, n):
    reset(emu)
    d = start(emu.ports["dex"])
    try:
        res, _ = asyncio.run(burst(d.port, n, None, True, lambda: None))
        return summary(name, res, emu)
    finally:
        d.stop()


def report(a, cmd, rows):
    print("### 5. Cold-start token storm\n")
    print(f"    {cmd}\n")
    print(f"Vendor login slowed to {a.login_ms} ms; {a.callers:,} callers, one connection "
          f"each, released at once; latency from the release to the full answer, so for "
          f"tidegate it includes the rest of its first login (the first answer comes when "
          f"the token does); median (min-max) over {a.rounds} round(s), a fresh proxy "
          f"each.\n")
    how = {"tidegate": "gateway API key, tidegate cold",
           "nginx": "each caller logs in itself", "HAProxy": "each caller logs in itself"}
    table = []
    for name in ("tidegate", "nginx", "HAProxy"):
        rs = [r for r in rows if r["system"] == name]
        table.append([name, how[name], lib.fmt([r["logins"] for r in rs]),
                      lib.fmt([r["ok"] for r in rs]),
                      lib.fmt([r["first"] for r in rs], 0, "ms"),
                      lib.fmt([r["p50"] for r in rs], 0, "ms"),
                      lib.fmt([r["p99"] for r in rs], 0, "ms"),
                      lib.fmt([r["max"] for r in rs], 0, "ms")])
    print(lib.table(["system", "callers authenticate with", "vendor logins",
                     f"2xx of {a.callers:,}", "first answer", "p50", "p99", "max"], table))
    print()
    tg = [r for r in rows if r["system"] == "tidegate"]
    logins = sorted({r["logins"] for r in tg})
    print(f"- Target: exactly 1 vendor login for the storm — measured "
          f"{', '.join(map(str, logins))} — {'met' if logins == [1] else 'gap'}")
    ok = min(r["ok"] for r in tg)
    print(f"- Target: all {a.callers:,} answers 2xx — measured {ok:,} at least (codes "
          f"{sorted({c for r in tg for c in r['codes']})}) — "
          f"{'met' if ok == a.callers else 'gap'}")
    cold = sum(r["cold"] for r in tg)
    fired = max(r["fired_after_start_s"] for r in tg)
    print(f"- Check: the burst left while tidegate's first login was pending — measured "
          f"{cold} of {len(tg)} rounds (released at most {fired:.2f} s after start) — "
          f"{'met' if cold == len(tg) else 'gap'}")
    for name in ("nginx", "HAProxy"):
        rs = [r for r in rows if r["system"] == name]
        print(f"- Reference: through {name} the same callers cost {a.callers:,} logins — "
              f"measured {lib.fmt([r['logins'] for r in rs])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--callers", type=int, default=1000)
    ap.add_argument("--login-ms", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    cmd = " ".join(["/usr/bin/python3", "bench/s5_tokens.py"] + sys.argv[1:])
    if a.quick:
        a.rounds = 1
    os.sched_setaffinity(0, {lib.LOAD_CPU})
    rows = []
    emu = None
    try:
        emu = lib.emulator({"export": {"delay": "1h"}})
        emu.fault(method="POST", path="/public/v1/authenticate", latencyMs=a.login_ms)
        for _ in range(a.rounds):
            rows.append(round_tidegate(emu, a.callers))
            rows.append(round_proxy("nginx", lib.nginx_proxy, emu, a.callers))
            rows.append(round_proxy("HAProxy", lib.haproxy, emu, a.callers))
    finally:
        if emu:
            emu.stop()
    lib.save("s5_tokens", {"rounds": a.rounds, "callers": a.callers, "login_ms": a.login_ms,
                           "results": rows})
    report(a, cmd, rows)


if __name__ == "__main__":
    main()
