#!/usr/bin/env python3
"""
bench/fleet_db.py - the fleet's database path: what PostgreSQL state costs
a gateway over SQLite state, side by side in one run (issue 29, target 4).

One emulator; per build (comma-separated release build directories,
interleaved per round) and per state, fresh gateways with webhooks in
deliver mode: SQLite state (one gateway, its own files), or PostgreSQL
state (two gateways, gw0 and gw1, instances of one fleet on a fresh
schema). Measured each round:

- first poll: --clients client threads (1, then 8), each --polls times:
  create an export (POST /public/v1/export/activities on gw0, answered once
  its owner is recorded; not timed), then time the first
  GET /public/export?correlationId=<it> of that job, sent through gw0
  ("same instance") or, PostgreSQL only, through gw1 ("other instance": its
  ownership read, the fleet's poll lead, the vendor GET and the answer
  published to the fleet). p50/p99 over all the polls of the round; the
  overhead is PostgreSQL's less SQLite's (same instance), per round.
- job creations per second (the same POST, no callback): --jobs on one
  keep-alive connection, then 2 x --jobs over --conns;
- webhook jobs accepted per second (the POST with a callbackUrl to a local
  receiver: an owner record and an outbox job committed before the 200),
  the same counts.

--db-rtt MS puts PostgreSQL "across the network": the gateways reach it
through bench/delay_proxy.py (on LOAD_CPU), which holds each piece half
MS each way (this machine's loopback has no netem).

The gateways on SUT_CPU, emulator, receiver and clients on LOAD_CPU.
Medians (min-max) over --rounds. Run under a cluster with fsync on:

    pg_virtualenv -t -o fsync=on -v 15 /usr/bin/python3 bench/fleet_db.py \\
        --builds /tmp/i29c-base/build-release,build-release [--rounds 3]
"""
import argparse
import base64
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import creations  # noqa: E402
import lib  # noqa: E402
from callback_p99 import Receiver  # noqa: E402
from s8_fleet import Pg, post_exports  # noqa: E402

SECRET = "whsec_" + base64.b64encode(b"tidegate-bench-fleet-secret-0001").decode()
CREATE = "/public/v1/export/activities"


def pct(vals, p):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(round(p / 100.0 * (len(vals) - 1))))]


def first_polls(creator, target, clients, polls):
    """clients threads, each creating polls jobs on creator and timing the
    first GET of each through target: (latencies in ms, failures)."""
    body = json.dumps({"projectId": "P-DEMO"})
    hdr = dict(creator.headers, **{"Content-Type": "application/json"})
    lat, bad, lock = [], [0], threading.Lock()

    def worker(n):
        c = http.client.HTTPConnection("127.0.0.1", creator.port, timeout=30)
        g = http.client.HTTPConnection("127.0.0.1", target.port, timeout=30)
        mine = []
        try:
            for _ in range(n):
                c.request("POST", CREATE, body=body, headers=hdr)
                r = c.getresponse()
                cid = json.loads(r.read()).get("correlationId") if r.status == 200 else None
                if cid is None:
                    with lock:
                        bad[0] += 1
                        if bad[0] == 1:
                            print(f"creation answered {r.status}", file=sys.stderr)
                    continue
                t = time.perf_counter()
                g.request("GET", f"/public/export?correlationId={cid}",
                          headers=target.headers)
                r = g.getresponse()
                r.read()
                dt = (time.perf_counter() - t) * 1000.0
                if 200 <= r.status < 300:     # 202 while the vendor works on it
                    mine.append(dt)
                else:
                    with lock:
                        bad[0] += 1
                        if bad[0] == 1:
                            print(f"first poll answered {r.status}", file=sys.stderr)
        finally:
            c.close()
            g.close()
        with lock:
            lat.extend(mine)
    lib.spread(worker, polls * clients, clients)
    return lat, bad[0]


def one(a, emu, rc, pg, build, state):
    """One build with one state: its figures of the round."""
    hooks = {"webhooks": {"mode": "deliver", "allow": ["127.0.0.1/32"],
                          "secret_file": a.secret, "poll_interval": "500ms"},
             "sim": emu.sim_config()}
    gws, schema = [], None
    try:
        if state == "PostgreSQL":
            schema, url = pg.new()
            if a.db_rtt > 0:    # through the delay relay (user, password: PG*)
                url = url.replace("postgresql:///", f"postgresql://127.0.0.1:{a.relay_port}/")
            for i in range(2):
                gws.append(lib.tidegate(emu.dex, build=build, overrides=dict(
                    hooks, state={"url": url, "instance": f"gw{i}"})))
        else:
            gws.append(lib.tidegate(emu.dex, build=build, overrides=hooks))
        for g in gws:
            lib.wait_tokens(g, timeout=30)
        first_polls(gws[0], gws[-1], 2, 10)     # warm: connections, statements
        out, fails = {}, 0
        for clients in (1, 8):
            for where, tgt in (("same", gws[0]), ("other", gws[-1])):
                if where == "other" and len(gws) == 1:
                    continue
                lat, bad = first_polls(gws[0], tgt, clients, a.polls)
                fails += bad
                out[f"poll_{where}_{clients}"] = (pct(lat, 50), pct(lat, 99))
        for conns, count in ((1, a.jobs), (a.conns, 2 * a.jobs)):
            ok, out[f"create_{conns}"] = creations.post(gws[0], count, conns)
            fails += count - ok
            ok, other, secs, _ = post_exports(gws[0], rc.url, count, conns)
            out[f"hook_{conns}"] = ok / secs
            fails += count - ok
        out["fails"] = fails
        return out
    finally:
        for g in reversed(gws):
            g.stop()
        if schema:
            pg.drop(schema)


def row(name, vals, digits):
    return [name] + [lib.fmt(v, digits) for v in vals]


def report(a, builds, res, states):
    names = {b: (os.path.basename(os.path.dirname(b.rstrip("/"))) or b) for b in builds}
    print(f"First poll (ms, p50 / p99; {a.polls} jobs per client, 1 then 8 clients) and "
          f"creations / webhook jobs accepted per second ({a.jobs} on 1 connection, "
          f"{2 * a.jobs} over {a.conns}); median (min-max) over {a.rounds} rounds; "
          + (f"PostgreSQL through bench/delay_proxy.py, +{a.db_rtt:g} ms a round trip; "
             if a.db_rtt > 0 else "") + f"{lib.machine()}\n")
    hdr = ["build", "state", "first poll, same instance, 1 client",
           "other instance, 1 client", "same instance, 8 clients", "other instance, 8 clients",
           "creations/s, 1 conn", f"creations/s, {a.conns} conns", "webhook jobs/s, 1 conn",
           f"webhook jobs/s, {a.conns} conns", "failures"]
    rows = []
    for b in builds:
        for s in states:
            rs = res[(b, s)]

            def lat(k):
                if k not in rs[0]:
                    return "—"
                return (f"{statistics.median(r[k][0] for r in rs):.2f} / "
                        f"{statistics.median(r[k][1] for r in rs):.2f}")
            rows.append([names[b], s, lat("poll_same_1"), lat("poll_other_1"),
                         lat("poll_same_8"), lat("poll_other_8"),
                         lib.fmt([r["create_1"] for r in rs]),
                         lib.fmt([r[f"create_{a.conns}"] for r in rs]),
                         lib.fmt([r["hook_1"] for r in rs]),
                         lib.fmt([r[f"hook_{a.conns}"] for r in rs]),
                         sum(r["fails"] for r in rs)])
    print(lib.table(hdr, rows))
    if "PostgreSQL" not in states:
        return
    print("\nPostgreSQL over SQLite, per round (first poll through the other instance "
          "less SQLite's through its one; ms p50 / p99), and PostgreSQL ÷ SQLite:\n")
    rows = []
    for b in builds:
        p, q = res[(b, "PostgreSQL")], res[(b, "SQLite")]

        def over(k, i, kq):
            return lib.fmt([x[k][i] - y[kq][i] for x, y in zip(p, q)], 2)

        def ratio(k):
            return lib.fmt([x[k] / y[k] for x, y in zip(p, q)], 2)
        rows.append([names[b], over("poll_other_1", 0, "poll_same_1"),
                     over("poll_other_1", 1, "poll_same_1"),
                     over("poll_other_8", 0, "poll_same_8"),
                     over("poll_other_8", 1, "poll_same_8"),
                     over("poll_same_1", 0, "poll_same_1"), over("poll_same_8", 0, "poll_same_8"),
                     ratio(f"create_{a.conns}"), ratio("hook_1"), ratio(f"hook_{a.conns}")])
    print(lib.table(["build", "+p50, 1 client", "+p99, 1 client", "+p50, 8 clients",
                     "+p99, 8 clients", "+p50 same instance, 1", "+p50 same instance, 8",
                     f"creations/s ÷, {a.conns} conns", "webhook jobs/s ÷, 1 conn",
                     f"webhook jobs/s ÷, {a.conns} conns"], rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--polls", type=int, default=100, help="first polls per client")
    ap.add_argument("--db-rtt", type=float, default=0.0,
                    help="ms: PostgreSQL reached through bench/delay_proxy.py, holding each "
                    "piece half this each way (a database across the network)")
    a, builds, states = creations.parse(ap, 3)
    relay = None
    if a.db_rtt > 0 and "PostgreSQL" in states:
        a.relay_port = lib.free_port()
        relay = subprocess.Popen(
            ["taskset", "-c", str(lib.LOAD_CPU), sys.executable,
             os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay_proxy.py"),
             os.environ.get("PGHOST", "localhost").replace("localhost", "127.0.0.1"), os.environ.get("PGPORT", "5432"),
             str(a.db_rtt), str(a.relay_port)])
        time.sleep(0.5)     # listening
    res = {(b, s): [] for b in builds for s in states}
    pg = Pg() if "PostgreSQL" in states else None
    emu = lib.emulator()
    rc = Receiver()
    a.secret = os.path.join(os.path.dirname(emu.config_path), "webhook-secret")
    with open(a.secret, "w") as f:
        f.write(SECRET + "\n")
    try:
        for i in range(a.rounds):
            for s in (states if i % 2 == 0 else states[::-1]):
                for b in (builds if i % 2 == 0 else builds[::-1]):
                    r = one(a, emu, rc, pg, b, s)
                    res[(b, s)].append(r)
                    print(f"round {i + 1} {s} {b}: {r}", file=sys.stderr, flush=True)
    finally:
        rc.stop()
        emu.stop()
        if relay:
            relay.terminate()
            relay.wait()
        if pg:
            pg.drop_all()
    lib.save("fleet_db", {"args": {k: v for k, v in vars(a).items()},
                          "results": {f"{b}|{s}": v for (b, s), v in res.items()}})
    report(a, builds, res, states)
    return 0


if __name__ == "__main__":
    sys.exit(main())
