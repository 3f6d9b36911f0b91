"""
bench/fleet_scale.py - part 5 of scenario 8 (bench/s8_fleet.py): one
fleet of 1, 10 and 50 gateways on one PostgreSQL in front of the emulator
(real processes on loopback, the emulator standalone), and what the fleet
costs as it grows.

Per size, a fresh schema and n fresh gateways, started at once (threads)
while the emulator's data exchange login is slowed by --login-ms, so the
whole fleet starts cold together; then:

- logins: the emulator's login counters once every instance holds its
  tokens (goal: 1 per service for the fleet);
- idle: --idle-seconds with no client at all: transaction ids assigned in
  the database, and the state operations the gateways report
  (tidegate_state_query_duration_seconds_count: one a statement sent),
  per instance per second; with pg_stat_statements loaded, also what they
  were;
- requests: --requests export submits and as many polls of the jobs made,
  8 client threads round robin over the instances: p50/p99 of each,
  transaction ids and state operations per client request;
- polls of one job: one job kept IN_PROGRESS, one client per instance
  (at least 10) polling it every 250 ms for --poll-seconds through its
  instance (poll.interval 1 s): the emulator's GET /public/export per job
  per interval (goal about 1), the wake-ups sent (NOTIFY: one a published
  vendor answer) and heard, so the instances woken per state change, and
  the fleet's state operations per client poll (a woken instance with no
  waiter for the job reads nothing: what its clients cost is their own);
- PostgreSQL client connections per instance, the gateways' RSS.
"""
import concurrent.futures
import os
import re
import statistics
import sys
import threading
import time

import requests

import lib

LOGIN = "POST /public/v1/authenticate"
SIM_LOGIN = "POST /api/oauth2/token"
EXPORT_GET = "GET /public/export"
CLIENT_THREADS = 8
POLL_EVERY_S = 0.25
INTERVAL_S = 1.0
METRICS = {"ops": r"^tidegate_state_query_duration_seconds_count\{[^}]*\} (\d+)",
           "wakeups": r"^tidegate_state_wakeups_total (\d+)",
           "notifies": r"^tidegate_state_notifies_total (\d+)"}


def log(*a):
    print("[scale]", *a, file=sys.stderr, flush=True)


def metrics(gws):
    """The state counters summed over gws (a gateway that does not answer
    counts 0 and is named in "unread")."""
    out = {k: 0 for k in METRICS}
    out["unread"] = 0

    def one(g):
        try:
            return requests.get(g.admin + "/metrics", timeout=10).text
        except requests.RequestException:
            return None
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        texts = list(pool.map(one, gws))
    for t in texts:
        if t is None:
            out["unread"] += 1
            continue
        for k, rx in METRICS.items():
            m = re.search(rx, t, re.M)
            out[k] += int(m.group(1)) if m else 0
    return out


def delta(a, b):
    return {k: b[k] - a[k] for k in METRICS}


def statements(pg):
    """pg_stat_statements' calls by statement (None when not loaded)."""
    try:
        out = pg.sql("SELECT calls, regexp_replace(left(query, 70), '\\s+', ' ', 'g') "
                     "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
                     "WHERE datname = current_database())")
    except RuntimeError:
        return None
    res = {}
    for line in out.splitlines():
        calls, _, q = line.partition("|")
        res[q] = res.get(q, 0) + int(calls)
    return res


def stmt_delta(a, b):
    if a is None or b is None:
        return None
    out = {q: n - a.get(q, 0) for q, n in b.items()}
    return {q: n for q, n in out.items() if n > 0 and "pg_stat" not in q
            and "pg_current_xact_id" not in q and "pg_backend_pid" not in q}


def start(emu, n, url, build, started):
    """n gateways on url, started at once; appended to started."""
    lock = threading.Lock()

    def one(i):
        over = {"state": {"url": url, "instance": f"gw{i}"}, "sim": emu.sim_config(),
                "poll": {"interval": f"{INTERVAL_S:g}s"}}
        g = lib.tidegate(emu.dex, build=build, overrides=over)
        with lock:
            started.append(g)
        return g
    with concurrent.futures.ThreadPoolExecutor(min(n, 16)) as pool:
        return list(pool.map(one, range(n)))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000.0 if xs else float("nan")


def client_load(gws, count):
    """count export submits, then a poll of each job made, over
    CLIENT_THREADS threads round robin over gws: latencies and failures."""
    lat = {"submit": [], "poll": []}
    bad = {"submit": 0, "poll": 0}
    lock = threading.Lock()
    jobs = []

    def submit(i):
        g = gws[i % len(gws)]
        t = time.monotonic()
        try:
            r = requests.post(g.url + "/public/v1/export/activities",
                              json={"projectId": "P-DEMO"}, headers=g.headers, timeout=30)
            ok = r.status_code in (200, 202)
            cid = r.json().get("correlationId") if ok else None
        except (requests.RequestException, ValueError):
            ok, cid = False, None
        with lock:
            if ok and cid:
                lat["submit"].append(time.monotonic() - t)
                jobs.append((i, cid))
            else:
                bad["submit"] += 1

    def poll(j):
        i, cid = j
        g = gws[(i + 1) % len(gws)]     # another instance than the submit's
        t = time.monotonic()
        try:
            r = requests.get(g.url + "/public/export", params={"correlationId": cid},
                             headers=g.headers, timeout=30)
            ok = 200 <= r.status_code < 300
        except requests.RequestException:
            ok = False
        with lock:
            if ok:
                lat["poll"].append(time.monotonic() - t)
            else:
                bad["poll"] += 1
    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(submit, range(count)))
        list(pool.map(poll, list(jobs)))
    return lat, bad, len(jobs)


def poll_one_job(emu, gws, seconds):
    """One fresh job polled through every instance: upstream GETs per
    interval, client polls, failures."""
    r = requests.post(gws[0].url + "/public/v1/export/activities",
                      json={"projectId": "P-DEMO"}, headers=gws[0].headers, timeout=30)
    r.raise_for_status()
    cid = r.json()["correlationId"]
    time.sleep(0.5)
    clients = max(len(gws), 10)
    stop = time.monotonic() + seconds
    counts = {"ok": 0, "bad": 0}
    lock = threading.Lock()

    def run(k):
        g = gws[k % len(gws)]
        s = requests.Session()
        nxt = time.monotonic() + (k % 10) * POLL_EVERY_S / 10
        while time.monotonic() < stop:
            time.sleep(max(0.0, nxt - time.monotonic()))
            nxt += POLL_EVERY_S
            try:
                code = s.get(g.url + "/public/export", params={"correlationId": cid},
                             headers=g.headers, timeout=10).status_code
                ok = 200 <= code < 300
            except requests.RequestException:
                ok = False
            with lock:
                counts["ok" if ok else "bad"] += 1
    before = emu.calls(EXPORT_GET)
    ts = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(seconds + 60)
    time.sleep(0.3)
    up = emu.calls(EXPORT_GET) - before
    return {"clients": clients, "client_polls": counts["ok"], "bad": counts["bad"],
            "upstream": up, "per_interval": up * INTERVAL_S / seconds}


def one_size(a, emu, pg, n):
    started = []
    schema = None
    requests.delete(emu.dex + "/__emulator/stats", timeout=5).raise_for_status()
    emu.fault(method="POST", path="/public/v1/authenticate", latencyMs=a.login_ms)
    try:
        schema, url = pg.new()
        t = time.monotonic()
        gws = start(emu, n, url, a.build, started)
        for g in gws:
            lib.wait_tokens(g, timeout=60)
        up_s = time.monotonic() - t
        emu.clear_faults()
        out = {"instances": n, "start_s": up_s, "dex_logins": emu.calls(LOGIN),
               "sim_logins": emu.calls(SIM_LOGIN)}
        out["conns"] = len(pg.backends())
        out["rss_mb"] = sum(g.rss_kb() for g in gws) / 1024.0
        log(f"s8 scale {n}: started in {up_s:.1f} s, logins dex "
                     f"{out['dex_logins']} sim {out['sim_logins']}, {out['conns']} "
                     f"connections, RSS {out['rss_mb']:.0f} MB")
        time.sleep(a.settle)
        # A scrape of /metrics asks the state for its gauges: measured, and
        # taken off the idle figure; pg_stat_statements is read between
        # the scrapes, so it never sees theirs.
        m0, s0, x0 = metrics(gws), statements(pg), pg.xid()
        time.sleep(a.idle_seconds)
        x1, s1, m1 = pg.xid(), statements(pg), metrics(gws)
        scrape = metrics(gws)["ops"] - m1["ops"]
        d = delta(m0, m1)
        out["idle"] = {"xids": x1 - x0 - 1, "ops": d["ops"] - scrape, "secs": a.idle_seconds,
                       "statements": stmt_delta(s0, s1), "unread": m1["unread"],
                       "scrape_ops": scrape}
        m0, s0, x0 = metrics(gws), statements(pg), pg.xid()
        lat, bad, made = client_load(gws, a.requests)
        x1, s1, m1 = pg.xid(), statements(pg), metrics(gws)
        d = delta(m0, m1)
        d["ops"] -= scrape
        reqs = len(lat["submit"]) + len(lat["poll"])
        out["load"] = {"requests": reqs, "jobs": made, "bad": bad, "xids": x1 - x0 - 1,
                       "ops": d["ops"], "statements": stmt_delta(s0, s1),
                       "submit_p50": pct(lat["submit"], 0.5),
                       "submit_p99": pct(lat["submit"], 0.99),
                       "poll_p50": pct(lat["poll"], 0.5), "poll_p99": pct(lat["poll"], 0.99)}
        m0 = metrics(gws)
        p = poll_one_job(emu, gws, a.poll_seconds)
        m1 = metrics(gws)
        d = delta(m0, m1)
        d["ops"] -= scrape
        p.update(notifies=d["notifies"], wakeups=d["wakeups"], ops=d["ops"])
        out["polls"] = p
        log(f"s8 scale {n}: idle {out['idle']}, load {out['load']}, polls {p}")
        out["errors"] = sum(1 for g in gws for _ in warn_lines(g))
        return out
    finally:
        emu.clear_faults()
        for g in reversed(started):
            g.stop()
        if schema:
            pg.drop(schema)


def warn_lines(g):
    try:
        with open(os.path.join(g.tmp, "tidegate.log"), errors="replace") as f:
            for line in f:
                if '"level":"warn"' in line or '"level":"error"' in line:
                    if "running_as_root" not in line:
                        yield line
    except OSError:
        return


def run(a, pg, started):
    """Every size of a.sizes, a.scale_rounds times (sizes interleaved)."""
    emu = lib.emulator({"export": {"delay": "1h", "expiry": "2h"}}, build=a.build)
    started.append(emu)
    rows = []
    for i in range(a.scale_rounds):
        for n in (a.sizes if i % 2 == 0 else a.sizes[::-1]):
            rows.append(one_size(a, emu, pg, n))
    started.remove(emu)
    emu.stop()
    return rows


def med(rs, f):
    vals = [f(r) for r in rs]
    vals = [v for v in vals if v == v]
    return statistics.median(vals) if vals else float("nan")


def report(a, rows, label=""):
    print(f"Fleet size{label}: {', '.join(str(n) for n in a.sizes)} instances on one "
          f"PostgreSQL in front of the emulator (release builds, all on core {lib.SUT_CPU}; "
          f"started at once while the data exchange login takes {a.login_ms} ms); idle: "
          f"{a.idle_seconds} s without a client after {a.settle} s; requests: "
          f"{a.requests} export submits and a poll of each job through another "
          f"instance, {CLIENT_THREADS} client threads; polls of one job: one client per "
          f"instance (at least 10) every {POLL_EVERY_S * 1000:.0f} ms for "
          f"{a.poll_seconds} s, poll.interval {INTERVAL_S:g} s. State operations: the "
          f"statements the gateways sent (their tidegate_state_query_duration_seconds"
          f"_count); transaction ids: those assigned in the database (writes). Medians over "
          f"{a.scale_rounds} round(s).\n")
    table = []
    for n in a.sizes:
        rs = [r for r in rows if r["instances"] == n]
        idle_x = med(rs, lambda r: r["idle"]["xids"] / r["idle"]["secs"] / n)
        idle_o = med(rs, lambda r: r["idle"]["ops"] / r["idle"]["secs"] / n)
        req_x = med(rs, lambda r: r["load"]["xids"] / max(1, r["load"]["requests"]))
        req_o = med(rs, lambda r: r["load"]["ops"] / max(1, r["load"]["requests"]))
        fan = med(rs, lambda r: r["polls"]["wakeups"] / r["polls"]["notifies"]
                  if r["polls"]["notifies"] else float("nan"))
        per_poll = med(rs, lambda r: r["polls"]["ops"] / max(1, r["polls"]["client_polls"]))
        per_state = med(rs, lambda r: r["polls"]["notifies"] / a.poll_seconds)
        bad = sum(r["load"]["bad"]["submit"] + r["load"]["bad"]["poll"] + r["polls"]["bad"]
                  for r in rs)
        table.append([
            n, f"{med(rs, lambda r: r['dex_logins']):g} / {med(rs, lambda r: r['sim_logins']):g}",
            f"{med(rs, lambda r: r['polls']['per_interval']):.2f}",
            f"{idle_x:.3f}", f"{idle_o:.2f}", f"{req_x:.2f}", f"{req_o:.2f}",
            f"{per_state:.2f}", f"{fan:.1f}", f"{per_poll:.2f}",
            f"{med(rs, lambda r: r['load']['submit_p50']):.1f} / "
            f"{med(rs, lambda r: r['load']['submit_p99']):.1f}",
            f"{med(rs, lambda r: r['load']['poll_p50']):.1f} / "
            f"{med(rs, lambda r: r['load']['poll_p99']):.1f}",
            f"{med(rs, lambda r: r['conns'] / n):.1f}",
            f"{med(rs, lambda r: r['rss_mb']):.0f}", bad,
            sum(r["errors"] for r in rs)])
    print(lib.table(["instances", "vendor logins (dex / sim)", "vendor polls per job per s",
                     "idle xids / instance / s", "idle statements / instance / s",
                     "xids / request", "statements / request",
                     "NOTIFY / s (one job)", "instances woken per NOTIFY",
                     "statements per client poll (one job)",
                     "submit p50 / p99 ms", "poll p50 / p99 ms",
                     "PostgreSQL connections / instance", "gateways' RSS MB",
                     "failed requests", "gateway warnings"], table))
    print()
    for n in a.sizes:
        rs = [r for r in rows if r["instances"] == n]
        st = rs[0]["idle"]["statements"]
        if st:
            top = sorted(st.items(), key=lambda kv: -kv[1])[:5]
            print(f"- {n} instance(s), idle {a.idle_seconds} s (pg_stat_statements, first "
                  f"round): " + "; ".join(f"{k} × `{q.strip()}…`" for q, k in top))
    print()
