#!/usr/bin/env python3
"""
bench/s8_fleet.py - scenario 8: a fleet of gateways on one PostgreSQL
(state.url, docs/fleet.md), against one gateway and against SQLite state.

Needs a PostgreSQL cluster named by the PG* variables (run under
pg_virtualenv, below); each fleet gets a schema of its own, created and
dropped with psql (postgresql:///?options=-csearch_path%3D<schema>).
Without PG* it says so on stderr and exits 0 (bench/run keeps the last
section; without PG* bench/run itself starts a throwaway cluster for it
when PostgreSQL 15 is installed, and sets TG_BENCH_PG to say how). Every
gateway is the release tidegate of --build, pinned to SUT_CPU; the
emulator (tidegate-emulator), the nginx stub, wrk, the webhook receiver and
this script's clients to LOAD_CPU; PostgreSQL is not pinned.

1. Vendor logins for a cold burst. Each round, per setup (1 instance on
   PostgreSQL, 3 instances on one PostgreSQL, and for reference 3
   instances with SQLite state each), fresh gateways (and a fresh schema)
   start in front of the emulator, whose data exchange login is slowed by
   --login-ms; while the first login is pending, --burst exports of a kind
   the vendor does not know (30 threads, round robin over the instances:
   each reaches the vendor with the token and makes no job; a read of an
   unknown job would be refused before the vendor) are sent.
   Reported: the emulator's counters `POST /public/v1/authenticate` and
   (once every instance holds its tokens) `POST /api/oauth2/token`.
2. Upstream polls of one export. The emulator keeps exports IN_PROGRESS;
   per round and setup (1 and 3 instances on PostgreSQL, poll.interval
   1 s) a fresh job is created through the first instance and --clients
   clients, spread round robin over the instances, poll it for
   --poll-seconds: each every 100 ms (wrk paced), then with long-polls
   (?wait=2, back to back). Reported: the emulator's `GET /public/export`
   delta per job per interval.
3. Proxied GET, one instance, PostgreSQL against SQLite state: wrk, 64
   connections, --seconds per run, GET /public/v1/bench answered by the
   nginx stub; interleaved rounds. Also the gateway's CPU time per
   request, the CPU time of its PostgreSQL backends and the transaction ids
   assigned during the runs (both ~0 if the proxy path leaves the database
   alone).
4. Webhook jobs accepted per second, one instance, SQLite against
   PostgreSQL: --jobs exports with a callbackUrl (deliver mode) sent one
   after another on one connection, then 2 x --jobs over --conns
   connections; the time until a local receiver has them all.

5. Fleet size (bench/fleet_scale.py): 1, 10 and 50 instances (--sizes)
   started at once in front of the emulator: vendor logins, vendor polls per
   job per interval, transaction ids and state statements per idle
   instance per second and per client request, instances woken per NOTIFY
   and what each then sends, p50/p99 of an export submit and a poll,
   PostgreSQL connections per instance, RSS. `--only scale` runs this part
   alone; load pg_stat_statements (-o shared_preload_libraries=...) to have
   the idle statements named. 50 instances hold 100 connections: the
   server needs max_connections above PostgreSQL's default of 100.

Medians (min-max) over --rounds rounds. Prints a Markdown section on
stdout, progress on stderr; raw figures in bench/results/s8_fleet.json.

    pg_virtualenv -t -o fsync=on -o max_connections=200 \
        -o shared_preload_libraries=pg_stat_statements \
        -v 15 /usr/bin/python3 bench/s8_fleet.py
        [--rounds 5] [--build build-release] [--quick] [--only scale]
        [--sizes 1,10,50] [--idle-seconds 30] [--requests 200]

pg_virtualenv: -t keeps the throwaway cluster in a directory of its own
(as root it would otherwise take the system's 15/regress, which a test run
may hold); -o fsync=on because it turns fsync off by default, and SQLite
commits durably.

--quick: 1 round, shorter runs (indicative).
"""
import argparse
import base64
import concurrent.futures
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import uuid

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import fleet_scale  # noqa: E402
from callback_p99 import Receiver  # noqa: E402

T0 = time.monotonic()
INTERVAL_S = 1.0                # poll.interval of part 2
LONG_WAIT_S = 2                 # ?wait= of part 2's long-polls
POLL_EVERY_MS = 100             # part 2: one poll per client per 100 ms
PROXY_CONNS = 64
LOGIN = "POST /public/v1/authenticate"
SIM_LOGIN = "POST /api/oauth2/token"
EXPORT_GET = "GET /public/export"
EXPORT_NOPE = "POST /public/v1/export/nope"
MODES = {"poll": f"poll every {POLL_EVERY_MS} ms", "long-poll": f"long-poll ?wait={LONG_WAIT_S}"}
SECRET = "whsec_" + base64.b64encode(b"tidegate-bench-fleet-secret-0001").decode()


def log(*a):
    print(f"[{time.monotonic() - T0:5.1f}s]", *a, file=sys.stderr, flush=True)


# ---- PostgreSQL ----

class Pg:
    """The cluster of the PG* variables: one schema per fleet."""

    def __init__(self):
        self.schemas = []

    def sql(self, query):
        p = subprocess.run(["psql", "-qXAtc", query], capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"psql: {query}: {p.stderr.strip()}")
        return p.stdout.strip()

    def new(self):
        """A fresh schema; the state.url that puts a gateway in it."""
        schema = "bench_" + uuid.uuid4().hex[:12]
        self.sql(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        return schema, f"postgresql:///?options=-csearch_path%3D{schema}"

    def drop(self, schema):
        subprocess.run(["psql", "-qXc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                       capture_output=True, timeout=30)
        if schema in self.schemas:
            self.schemas.remove(schema)

    def drop_all(self):
        for s in list(self.schemas):
            self.drop(s)

    def owners(self, schema):
        out = self.sql(f"SELECT count(*) FROM {schema}.owners")
        return int(out or 0)

    def backends(self):
        """pids of the server processes of other clients of this database."""
        out = self.sql("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        return [int(x) for x in out.split()]

    def xid(self):
        return int(self.sql("SELECT pg_current_xact_id()"))

    def version(self):
        return self.sql("SHOW server_version").split()[0]

    def durability(self):
        """fsync and synchronous_commit of the cluster (pg_virtualenv turns
        fsync off unless given -o fsync=on)."""
        return {k: self.sql(f"SHOW {k}") for k in ("fsync", "synchronous_commit")}


def cpu_ms(pids):
    """User + system CPU of pids so far, ms (0 for a pid gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total * 1000.0 / tick


# ---- gateways ----

def fleet(upstream, n, url, build, overrides, started):
    """n gateways in front of upstream (an Emulator or a stub URL): on the
    PostgreSQL state.url, or (url None) each with its own SQLite files.
    Each is appended to started as soon as it runs."""
    out = []
    for i in range(n):
        over = dict(overrides or {})
        if isinstance(upstream, str):
            target = upstream
        else:
            target = upstream.dex
            over["sim"] = upstream.sim_config()
        if url:
            over["state"] = {"url": url, "instance": f"gw{i}"}
        g = lib.tidegate(target, build=build, overrides=over)
        started.append(g)
        out.append(g)
    return out


def stop_all(ds):
    for d in reversed(ds):
        d.stop()
    ds.clear()


def gateway_errors(gws, skip_sim_login=False):
    """The gateways' log lines so far (log_level warn: warnings and errors;
    other lines, such as a libpq NOTICE, as level "other"), as {"level",
    "event", "line"}. skip_sim_login: leave out the failed simulation logins
    of gateways in front of the stub (it has no OAuth2 endpoint)."""
    out = []
    for g in gws:
        try:
            with open(os.path.join(g.tmp, "tidegate.log"), errors="replace") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                        level, event = rec.get("level", "?"), rec.get("event", "?")
                    except ValueError:
                        level, event = "other", line.split(":")[0][:20]
                    if skip_sim_login and "/api/oauth2/token" in line:
                        continue
                    out.append({"level": level, "event": event, "line": line.strip()[:300]})
        except OSError:
            pass
    return out


def reset_stats(emu):
    requests.delete(emu.dex + "/__emulator/stats", timeout=5).raise_for_status()


# ---- 1. vendor logins for a cold burst ----

LOGIN_SETUPS = (("1 instance, PostgreSQL", 1, True), ("3 instances, one PostgreSQL", 3, True),
                ("3 instances, SQLite each (no fleet)", 3, False))


def login_round(a, emu, pg, name, n, use_pg, errors):
    reset_stats(emu)
    started = []
    schema = None
    try:
        url = None
        if use_pg:
            schema, url = pg.new()
        gws = fleet(emu, n, url, a.build, None, started)
        cold = all(not lib.tokens_held(requests.get(g.admin + "/readyz", timeout=5).json())
                   for g in gws)

        def one(i):
            g = gws[i % n]
            try:
                return requests.post(g.url + "/public/v1/export/nope",
                                     json={"projectId": "P-DEMO"}, headers=g.headers,
                                     timeout=30).status_code
            except requests.RequestException:
                return 0
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(30) as pool:
            codes = list(pool.map(one, range(a.burst)))
        secs = time.monotonic() - t
        for g in gws:
            lib.wait_tokens(g, timeout=30)
        time.sleep(0.2)
        errors.extend(gateway_errors(gws))
        return {"setup": name, "instances": n, "cold": cold, "burst_s": secs,
                "dex_logins": emu.calls(LOGIN), "sim_logins": emu.calls(SIM_LOGIN),
                "upstream_gets": emu.calls(EXPORT_NOPE),
                "codes": {str(c): codes.count(c) for c in sorted(set(codes))}}
    finally:
        stop_all(started)
        if schema:
            pg.drop(schema)


# ---- 2. upstream polls of one export ----

def new_job(pg, schema, gw):
    before = pg.owners(schema)
    r = requests.post(gw.url + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers, timeout=10)
    r.raise_for_status()
    cid = r.json()["correlationId"]
    deadline = time.monotonic() + 5
    while pg.owners(schema) <= before:     # committed before the answer
        if time.monotonic() > deadline:
            raise RuntimeError(f"the owner of {cid} was never recorded")
        time.sleep(0.02)
    return cid


def poll_run(a, emu, pg, schema, gws, mode):
    """--clients clients over gws polling one fresh job for --poll-seconds."""
    cid = new_job(pg, schema, gws[0])
    n = len(gws)
    per = [a.clients // n + (i < a.clients % n) for i in range(n)]
    res = [None] * n
    before = emu.calls(EXPORT_GET)

    def run(i):
        g = gws[i]
        if mode == "poll":
            res[i] = lib.wrk(f"{g.url}/public/export?correlationId={cid}", per[i],
                             a.poll_seconds, headers=g.headers,
                             rate=per[i] * 1000.0 / POLL_EVERY_MS)
        else:
            res[i] = lib.wrk(f"{g.url}/public/export?correlationId={cid}&wait={LONG_WAIT_S}",
                             per[i], a.poll_seconds, headers=g.headers,
                             timeout_s=LONG_WAIT_S + 10)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n) if per[i]]
    for t in ts:
        t.start()
    for t in ts:
        t.join(a.poll_seconds + 120)
    time.sleep(0.3)                  # polls already sent reach the counter
    up = emu.calls(EXPORT_GET) - before
    rs = [r for r in res if r]
    return {"instances": n, "mode": mode, "clients": a.clients, "upstream": up,
            "per_interval": up * INTERVAL_S / a.poll_seconds,
            "client": sum(r["requests"] for r in rs),
            "bad": sum(r["errors"] + r["non2xx"] for r in rs)}


# ---- 3. proxied GET, PostgreSQL against SQLite ----

def proxy_run(a, gw, pg):
    pids = pg.backends() if pg else []
    c0, x0, g0 = cpu_ms(pids), (pg.xid() if pg else 0), cpu_ms(gw.pids)
    r = lib.wrk(gw.url + "/public/v1/bench", PROXY_CONNS, a.seconds, headers=gw.headers)
    c1, x1, g1 = cpu_ms(pids), (pg.xid() if pg else 0), cpu_ms(gw.pids)
    return {"rps": r["rps"], "p50": r.get("p50", float("nan")),
            "p99": r.get("p99", float("nan")), "requests": r["requests"],
            "bad": r["errors"] + r["non2xx"], "pg_cpu_ms": c1 - c0,
            "pg_xids": (x1 - x0 - 1) if pg else 0,   # less the xid of the first query
            "pg_backends": len(pids),
            "gw_cpu_us": (g1 - g0) * 1000.0 / max(1, r["requests"])}


# ---- 4. webhook jobs ----

def post_exports(gw, receiver_url, count, conns):
    """count exports with a callbackUrl over conns keep-alive connections:
    (accepted, other answers, seconds from the first send to the last answer)."""
    body = json.dumps({"projectId": "P-DEMO", "callbackUrl": receiver_url})
    hdr = dict(gw.headers, **{"Content-Type": "application/json"})
    lock = threading.Lock()
    out = {"ok": 0, "other": {}}

    def worker(k):
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        try:
            for _ in range(k):
                try:
                    c.request("POST", "/public/v1/export/activities", body=body, headers=hdr)
                    r = c.getresponse()
                    r.read()
                    ok = r.status == 200 and r.getheader("X-Tidegate-Webhook-Id")
                    key = r.status
                except (OSError, http.client.HTTPException) as e:
                    ok, key = False, type(e).__name__
                    c.close()
                    c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
                with lock:
                    if ok:
                        out["ok"] += 1
                    else:
                        out["other"][str(key)] = out["other"].get(str(key), 0) + 1
        finally:
            c.close()
    t = lib.spread(worker, count, conns)
    return out["ok"], out["other"], time.monotonic() - t, t


def wait_delivered(receiver, target, limit_s):
    """Until receiver has counted target webhooks (at most limit_s): the
    monotonic time it did, or None."""
    deadline = time.monotonic() + limit_s
    while receiver.count.value < target:
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)
    return time.monotonic()


def webhook_run(a, sysd, count, conns):
    rc = sysd["receiver"]
    base = rc.count.value
    ok, other, secs, t0 = post_exports(sysd["gw"], rc.url, count, conns)
    done = wait_delivered(rc, base + ok, a.deliver_timeout)
    return {"jobs": count, "conns": conns, "accepted": ok, "other": other,
            "per_s": ok / secs if secs > 0 else 0.0,
            "deliver_s": (done - t0) if done else float("nan"),
            "delivered": rc.count.value - base}


# ---- report ----

def med_ratio(xs, ys):
    return [x / y if y else float("nan") for x, y in zip(xs, ys)]


def report(a, cmd, pgver, dur, res, errors):
    print("### 8. A fleet on one PostgreSQL: logins, polls, proxy, webhooks\n")
    print(f"    {cmd}\n")
    where = (f"a throwaway cluster of `{os.environ['TG_BENCH_PG']}` started by bench/run"
             if os.environ.get("TG_BENCH_PG") else
             f"the cluster of the PG* variables ({os.environ.get('PGHOST', 'socket')}:"
             f"{os.environ.get('PGPORT', '5432')})")
    print(f"PostgreSQL {pgver}, {where} (fsync {dur['fsync']}, "
          f"synchronous_commit {dur['synchronous_commit']}), a fresh schema per fleet; "
          f"every gateway on core "
          f"{lib.SUT_CPU}, emulator, stub, wrk and clients on core {lib.LOAD_CPU}; "
          f"median (min-max) over {a.rounds} round(s). Load average (1 min) at the start "
          f"and at the end: {res['load'][0]:.2f}, {res['load'][-1]:.2f} (this scenario's "
          f"own load included; more means other work shared the cores).\n")

    rows = res["logins"]
    print(f"Vendor logins for a cold burst: fresh gateways (and schema) each round, the "
          f"emulator's data exchange login slowed to {a.login_ms} ms; {a.burst} exports of "
          f"a kind the vendor does not know (`{EXPORT_NOPE}`: each reaches it, none makes a "
          f"job; 30 threads, round robin over the instances) sent while the first login is "
          f"pending.\n")
    table = []
    for name, n, _ in LOGIN_SETUPS:
        rs = [r for r in rows if r["setup"] == name]
        codes = {}
        for r in rs:
            for c, k in r["codes"].items():
                codes[c] = codes.get(c, 0) + k
        table.append([name, lib.fmt([r["dex_logins"] for r in rs]),
                      lib.fmt([r["sim_logins"] for r in rs]),
                      lib.fmt([r["upstream_gets"] for r in rs]),
                      ", ".join(f"{c}: {k}" for c, k in sorted(codes.items())),
                      f"{sum(r['cold'] for r in rs)}/{len(rs)}"])
    print(lib.table(["setup", "data exchange logins", "simulation logins",
                     "upstream calls", "answers (all rounds)", "burst left cold"], table))
    print()

    rows = res["polls"]
    print(f"Upstream polls of one export kept IN_PROGRESS: a fresh job per run, "
          f"{a.clients} clients spread round robin over the instances for "
          f"{a.poll_seconds} s, poll.interval {INTERVAL_S:g} s; each client polls every "
          f"{POLL_EVERY_MS} ms (wrk paced), or sends back-to-back long-polls "
          f"`?wait={LONG_WAIT_S}`. Upstream calls are the emulator's `{EXPORT_GET}` "
          f"delta.\n")
    table = []
    pm = {}
    for mode in ("poll", "long-poll"):
        for n in (1, 3):
            rs = [r for r in rows if r["instances"] == n and r["mode"] == mode]
            pm[(mode, n)] = [r["per_interval"] for r in rs]
            table.append([MODES[mode], n, lib.fmt([r["client"] for r in rs]),
                          lib.fmt([r["upstream"] for r in rs]),
                          lib.fmt([r["per_interval"] for r in rs], 2),
                          sum(r["bad"] for r in rs)])
        ratio = med_ratio(pm[(mode, 3)], pm[(mode, 1)])
        table.append([MODES[mode], "3 ÷ 1", "", "", lib.fmt(ratio, 2), ""])
    print(lib.table(["clients", "instances", "client polls", "upstream GETs",
                     f"upstream per job per {INTERVAL_S:g} s", "errors + non-2xx"], table))
    print()

    rows = res["proxy"]
    print(f"Proxied GET through one instance: wrk, 1 thread, {PROXY_CONNS} connections, "
          f"{a.seconds} s per run, GET /public/v1/bench answered by the nginx stub, the "
          f"two gateways interleaved. Gateway CPU: user + system time of the gateway "
          f"process per request (less sensitive to other load on the machine than "
          f"requests/s). PostgreSQL backend CPU: user + system time of the "
          f"gateway's PostgreSQL server processes during the run; transaction ids: "
          f"those assigned (writes) in the database during the run.\n")
    table = []
    for st in ("SQLite", "PostgreSQL"):
        rs = [r for r in rows if r["state"] == st]
        table.append([st, lib.fmt([r["rps"] for r in rs]), lib.fmt([r["p50"] for r in rs], 2),
                      lib.fmt([r["p99"] for r in rs], 2),
                      lib.fmt([r["gw_cpu_us"] for r in rs], 1),
                      lib.fmt([r["pg_cpu_ms"] for r in rs]) if st == "PostgreSQL" else "—",
                      lib.fmt([r["pg_xids"] for r in rs]) if st == "PostgreSQL" else "—",
                      sum(r["bad"] for r in rs)])
    sq = [r for r in rows if r["state"] == "SQLite"]
    pq = [r for r in rows if r["state"] == "PostgreSQL"]
    ratio = med_ratio([r["rps"] for r in pq], [r["rps"] for r in sq])
    table.append(["PostgreSQL ÷ SQLite", lib.fmt(ratio, 3),
                  lib.fmt(med_ratio([r["p50"] for r in pq], [r["p50"] for r in sq]), 2),
                  lib.fmt(med_ratio([r["p99"] for r in pq], [r["p99"] for r in sq]), 2),
                  lib.fmt(med_ratio([r["gw_cpu_us"] for r in pq],
                                    [r["gw_cpu_us"] for r in sq]), 3), "", "", ""])
    print(lib.table(["state", "requests/s", "p50 ms", "p99 ms", "gateway CPU µs/request",
                     "PostgreSQL backend CPU ms",
                     "transaction ids", "errors + non-2xx"], table))
    print()

    rows = res["webhooks"]
    print(f"Webhook jobs through one instance (deliver mode, webhooks.poll_interval "
          f"500 ms, the emulator's exports ready after 300 ms): POST "
          f"/public/v1/export/activities with a callbackUrl to a local receiver (answers "
          f"204); accepted: 200 with X-Tidegate-Webhook-Id. Jobs/s from the first send to "
          f"the last answer; delivered: from the first send until the receiver has them "
          f"all. The SQLite outbox commits with synchronous=FULL (WAL); PostgreSQL ran "
          f"with fsync {dur['fsync']}"
          + ("." if dur["fsync"] == "on" else " (pg_virtualenv's default: its commits are "
             "not durable, so this comparison flatters PostgreSQL).") + "\n")
    table = []
    wm = {}
    for kind, conns in (("sequential", 1), ("concurrent", a.conns)):
        for st in ("SQLite", "PostgreSQL"):
            rs = [r for r in rows if r["state"] == st and r["conns"] == conns]
            wm[(kind, st)] = [r["per_s"] for r in rs]
            other = {}
            for r in rs:
                for c, k in r["other"].items():
                    other[c] = other.get(c, 0) + k
            table.append([f"{kind}: {rs[0]['jobs']} jobs, {conns} "
                          f"connection{'s' if conns > 1 else ''}", st,
                          lib.fmt([r["per_s"] for r in rs]),
                          lib.fmt([r["deliver_s"] for r in rs], 2, "s"),
                          f"{sum(r['accepted'] for r in rs)}/{sum(r['jobs'] for r in rs)}",
                          f"{sum(r['delivered'] for r in rs)}",
                          ", ".join(f"{c}: {k}" for c, k in sorted(other.items())) or "none"])
        table.append([kind, "PostgreSQL ÷ SQLite",
                      lib.fmt(med_ratio(wm[(kind, "PostgreSQL")], wm[(kind, "SQLite")]), 2),
                      "", "", "", ""])
    print(lib.table(["exports", "state", "jobs accepted/s", "all delivered after",
                     "accepted (all rounds)", "delivered", "other answers"], table))
    print()

    fleet3 = [r for r in res["logins"] if r["setup"] == LOGIN_SETUPS[1][0]]
    got = sorted({(r["dex_logins"], r["sim_logins"]) for r in fleet3})
    print(f"- Target: a cold burst over 3 instances on one PostgreSQL makes 1 login per "
          f"service — measured (data exchange, simulation) {got} — "
          f"{'met' if got == [(1, 1)] else 'gap'}")
    for mode in ("poll", "long-poll"):
        p1, p3 = lib.stats(pm[(mode, 1)])[0], lib.stats(pm[(mode, 3)])[0]
        ok = p3 <= 1.5 * p1
        print(f"- Target ({mode}): 3 instances poll the vendor as 1 does (one call per job "
              f"per interval across the fleet) — measured {p3:.2f} per interval against "
              f"{p1:.2f} ({p3 / p1 if p1 else float('nan'):.2f}×) — "
              f"{'met' if ok else 'gap'}")
    r = lib.stats(ratio)[0]
    print(f"- Target: proxied GET throughput with PostgreSQL state ≥ 0.95× SQLite's — "
          f"measured {r:.3f}× — {'met' if r >= 0.95 else 'gap'}")
    xids = max((x["pg_xids"] for x in pq), default=0)
    reqs = min((x["requests"] for x in pq), default=0)
    print(f"- Check: the proxy path does not write to PostgreSQL per request — at most "
          f"{xids} transaction ids assigned during a run of {reqs:,}+ requests — "
          f"{'met' if xids < max(1, reqs // 100) else 'gap'}")
    bad = (sum(r["bad"] for r in res["polls"]) + sum(r["bad"] for r in res["proxy"])
           + sum(r["jobs"] - r["accepted"] for r in res["webhooks"]))
    print(f"- Check: every poll, proxied GET and export answered as expected — measured "
          f"{bad} failures — {'met' if bad == 0 else 'gap'}")
    undelivered = sum(r["accepted"] - r["delivered"] for r in res["webhooks"])
    print(f"- Check: every accepted webhook delivered within {a.deliver_timeout} s — "
          f"{undelivered} missing — {'met' if undelivered <= 0 else 'gap'}")
    counts = {}
    for e in errors:
        counts[(e["level"], e["event"])] = counts.get((e["level"], e["event"]), 0) + 1
    print(f"- Gateway log lines (log_level warn; part 3's failed simulation logins at the "
          f"stub left out) during the run: {len(errors)}"
          + (" (" + ", ".join(f"{lv} {ev}: {k}" for (lv, ev), k in sorted(counts.items()))
             + ")" if errors else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=lib.BUILD, help="build directory (tidegate, "
                    "tidegate-emulator); default $TG_BENCH_BUILD or build-release")
    ap.add_argument("--burst", type=int, default=300, help="part 1: requests in the burst")
    ap.add_argument("--login-ms", type=int, default=1000, help="part 1: vendor login latency")
    ap.add_argument("--clients", type=int, default=30, help="part 2: clients of one job")
    ap.add_argument("--poll-seconds", type=int, default=5, help="part 2: length of a run")
    ap.add_argument("--seconds", type=int, default=3, help="part 3: wrk duration per run")
    ap.add_argument("--jobs", type=int, default=300, help="part 4: sequential exports "
                    "(twice as many concurrent)")
    ap.add_argument("--conns", type=int, default=8, help="part 4: concurrent connections")
    ap.add_argument("--deliver-timeout", type=int, default=60)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("all", "scale"), default="all",
                    help="scale: part 5 (fleet size) alone")
    ap.add_argument("--sizes", default="1,10,50", help="part 5: fleet sizes")
    ap.add_argument("--scale-rounds", type=int, default=1, help="part 5: rounds")
    ap.add_argument("--idle-seconds", type=int, default=30, help="part 5: idle window")
    ap.add_argument("--settle", type=int, default=5, help="part 5: wait before the idle "
                    "window")
    ap.add_argument("--requests", type=int, default=200, help="part 5: export submits "
                    "(and as many polls)")
    a = ap.parse_args()
    a.sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    if not (a.sizes and all(1 <= n <= 100 for n in a.sizes) and 1 <= a.scale_rounds <= 10
            and 5 <= a.idle_seconds <= 600 and 0 <= a.settle <= 120
            and 10 <= a.requests <= 5000):
        ap.error("out of range: sizes 1-100, scale-rounds 1-10, idle-seconds 5-600, "
                 "settle 0-120, requests 10-5000")
    if a.quick:
        a.rounds, a.poll_seconds, a.seconds, a.jobs, a.burst = 1, 3, 2, 100, 150
    if not (1 <= a.rounds <= 20 and 1 <= a.burst <= 3000 and 3 <= a.clients <= 300
            and 2 <= a.poll_seconds <= 60 and 1 <= a.seconds <= 60 and 1 <= a.jobs <= 5000
            and 1 <= a.conns <= 32 and 0 <= a.login_ms <= 10000
            and 1 <= a.deliver_timeout <= 600):
        ap.error("out of range: rounds 1-20, burst 1-3000, clients 3-300, poll-seconds "
                 "2-60, seconds 1-60, jobs 1-5000, conns 1-32, login-ms 0-10000, "
                 "deliver-timeout 1-600")
    cmd = " ".join(["/usr/bin/python3", "bench/s8_fleet.py"] + sys.argv[1:])
    if not (os.environ.get("PGHOST") or os.environ.get("PGPORT")
            or os.environ.get("PGDATABASE")):
        print("s8_fleet: skipped: no PostgreSQL (no PG* variables); run it under "
              "`pg_virtualenv -t -o fsync=on -v 15 /usr/bin/python3 bench/s8_fleet.py` "
              "(or `pg_virtualenv -t -o fsync=on -v 15 bench/run s8`)", file=sys.stderr)
        return 0
    a.build = os.path.abspath(a.build)
    for exe in ("tidegate", "tidegate-emulator"):
        if not os.access(os.path.join(a.build, exe), os.X_OK):
            ap.error(f"no {exe} in {a.build}: build it first (meson setup build-release "
                     f"-Dbuildtype=release -Dtests=false && ninja -C build-release)")
    os.sched_setaffinity(0, {lib.LOAD_CPU})
    pg = Pg()
    pgver = pg.version()
    dur = pg.durability()
    if dur["fsync"] != "on":
        log("s8: PostgreSQL runs with fsync off (pg_virtualenv's default): its commits "
            "are not durable, SQLite's are; give pg_virtualenv -o fsync=on to compare "
            "like with like")
    res = {"logins": [], "polls": [], "proxy": [], "webhooks": [],
           "load": [os.getloadavg()[0]]}
    errors = []
    started = []
    receivers = []
    if a.only == "scale":
        try:
            res["scale"] = fleet_scale.run(a, pg, started)
        finally:
            stop_all(started)
            pg.drop_all()
        res["load"].append(os.getloadavg()[0])
        lib.save("s8_fleet_scale", {"args": vars(a), "postgresql": pgver,
                                    "durability": dur, "results": res})
        print("### 8. A fleet on one PostgreSQL: fleet size\n")
        print(f"    {cmd}\n")
        print(f"PostgreSQL {pgver} (fsync {dur['fsync']}); load average (1 min) at the "
              f"start and at the end: {res['load'][0]:.2f}, {res['load'][-1]:.2f}.\n")
        fleet_scale.report(a, res["scale"])
        return 0
    try:
        # 1. logins
        emu = lib.emulator({"export": {"delay": "1h", "expiry": "2h"}}, build=a.build)
        started.append(emu)
        emu.fault(method="POST", path="/public/v1/authenticate", latencyMs=a.login_ms)
        for i in range(a.rounds):
            setups = LOGIN_SETUPS if i % 2 == 0 else LOGIN_SETUPS[::-1]
            for name, n, use_pg in setups:
                r = login_round(a, emu, pg, name, n, use_pg, errors)
                res["logins"].append(r)
                log(f"s8 logins round {i + 1}, {name}: dex {r['dex_logins']}, sim "
                    f"{r['sim_logins']}, answers {r['codes']}, cold {r['cold']}")
        emu.clear_faults()

        # 2. polls of one job
        fleets = {}
        for n in (1, 3):
            schema, url = pg.new()
            fleets[n] = (schema, fleet(emu, n, url, a.build,
                                       {"poll": {"interval": f"{INTERVAL_S:g}s"}}, started))
            for g in fleets[n][1]:
                lib.wait_tokens(g, timeout=30)
        for i in range(a.rounds):
            for n in ((1, 3) if i % 2 == 0 else (3, 1)):
                schema, gws = fleets[n]
                for mode in ("poll", "long-poll"):
                    r = poll_run(a, emu, pg, schema, gws, mode)
                    res["polls"].append(r)
                    log(f"s8 polls round {i + 1}, {n} instance(s), {mode}: {r['client']} "
                        f"client polls, {r['upstream']} upstream "
                        f"({r['per_interval']:.2f} per interval), bad {r['bad']}")
        for n in (1, 3):
            errors.extend(gateway_errors(fleets[n][1]))
        stop_all(started)
        for n in (1, 3):
            pg.drop(fleets[n][0])

        # 3. proxied GET
        origin = lib.stub()
        started.append(origin)
        sq = fleet(origin.url, 1, None, a.build, None, started)[0]
        schema, url = pg.new()
        pgw = fleet(origin.url, 1, url, a.build, None, started)[0]
        gws = {"SQLite": (sq, None), "PostgreSQL": (pgw, pg)}
        for st, (g, p) in gws.items():          # warm-up: tokens, connections
            lib.wrk(g.url + "/public/v1/bench", PROXY_CONNS, 1, headers=g.headers)
        for i in range(a.rounds):
            for st in (("SQLite", "PostgreSQL") if i % 2 == 0 else ("PostgreSQL", "SQLite")):
                g, p = gws[st]
                r = dict(proxy_run(a, g, p), state=st)
                res["proxy"].append(r)
                log(f"s8 proxy round {i + 1}, {st}: {r['rps']:,.0f} req/s, p50 "
                    f"{r['p50']:.2f} ms, p99 {r['p99']:.2f} ms, bad {r['bad']}, PostgreSQL "
                    f"CPU {r['pg_cpu_ms']:.0f} ms over {r['pg_backends']} backends, xids "
                    f"{r['pg_xids']}, gateway CPU {r['gw_cpu_us']:.1f} us/request")
        errors.extend(gateway_errors([sq, pgw], skip_sim_login=True))
        stop_all(started)
        pg.drop(schema)

        # 4. webhook jobs
        emu = lib.emulator({"export": {"delay": "300ms", "expiry": "1h"}}, build=a.build)
        started.append(emu)
        secret = os.path.join(os.path.dirname(emu.config_path), "webhook-secret")
        with open(secret, "w") as f:
            f.write(SECRET + "\n")
        hooks = {"webhooks": {"mode": "deliver", "allow": ["127.0.0.1/32"],
                              "secret_file": secret, "poll_interval": "500ms"}}
        schema, url = pg.new()
        systems = {}
        for st, u in (("SQLite", None), ("PostgreSQL", url)):
            receivers.append(Receiver())
            g = fleet(emu, 1, u, a.build, hooks, started)[0]
            lib.wait_tokens(g, timeout=30)
            systems[st] = {"gw": g, "receiver": receivers[-1]}
        for i in range(a.rounds):
            for st in (("SQLite", "PostgreSQL") if i % 2 == 0 else ("PostgreSQL", "SQLite")):
                for count, conns in ((a.jobs, 1), (2 * a.jobs, a.conns)):
                    r = dict(webhook_run(a, systems[st], count, conns), state=st)
                    res["webhooks"].append(r)
                    log(f"s8 webhooks round {i + 1}, {st}, {count} jobs over {conns}: "
                        f"{r['per_s']:.0f} accepted/s, all delivered after "
                        f"{r['deliver_s']:.2f} s, other {r['other']}")
        errors.extend(gateway_errors([s["gw"] for s in systems.values()]))
        stop_all(started)

        # 5. fleet size
        res["scale"] = fleet_scale.run(a, pg, started)
        res["load"].append(os.getloadavg()[0])
    finally:
        stop_all(started)
        for r in receivers:
            r.stop()
        pg.drop_all()
    lib.save("s8_fleet", {"args": vars(a), "postgresql": pgver, "durability": dur,
                          "results": res,
                          "gateway_log": errors})
    report(a, cmd, pgver, dur, res, errors)
    fleet_scale.report(a, res["scale"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
