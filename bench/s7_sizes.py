#!/usr/bin/env python3
"""
bench/s7_sizes.py - scenario 7: answers of 16 KB, 256 KB and 4 MB, proxied
and cached.

The bytes: for each size the emulator holds a project whose ready export is
about that large (46, 718 and 11,480 activities: 16,755, 262,552 and
4,214,643 bytes). The same bytes are served two ways:

- Proxied: the fixed-answer nginx stub (bench/lib.py) serves each export's
  bytes as a file (GET /public/v1/size/<size>, with Content-Length). The stub
  asked directly (the ceiling), nginx proxy_pass (s1's configuration) and
  tidegate (gateway API key; passthrough path) proxy it.
- Cached: tidegate's poll multiplexer serves a ready export from its cache
  (`GET /public/export?correlationId=…` of a job created through it,
  poll.cache_max_body 8MB; X-Tidegate-Poll: cached), and nginx with
  proxy_cache in front of the emulator serves its own job's export from its
  cache zone (proxy_cache_valid 200 10m; X-Cache-Status: HIT). Each is
  warmed (and checked to answer from its cache) before every run, and the
  emulator's export counter shows whether a run reached the vendor.

Before/after the 40 ms defect (no TCP_NODELAY on accepted sockets, fixed in
0d1bdb3): the 16 KB cells are also measured with the build of 7cb2c2f, the
commit before the fix, as an extra system. Its build is taken from
TG_BENCH_BEFORE_BUILD (a build directory) or made once from `git archive`
of that commit in build-before-7cb2c2f/ (--no-before: skipped).

Every cell is checked once to answer exactly the export's bytes. Then each
round runs every cell twice with wrk (1 thread, keep-alive, latency
distribution): one connection (each request sent when the previous answer
is in: the latency of one request, no queueing) and CONNS connections
(throughput, and p50/p99 under load); the systems of one size are
interleaved and their order rotated from round to round. Figures are
medians (min-max) over rounds; differences against nginx are taken round by
round.

Syscalls per request (strace -c, when strace is installed): nginx and
tidegate, each answer proxied and cached, requests one after another on one
connection.

Instructions per request (callgrind; skipped with --quick): nginx and
tidegate serving the 16 KB answer proxied and cached, 1,000 then 5,000
requests over 4 keep-alive connections, the difference over 4,000; and
tidegate's top functions in the 5,000-request runs.

Prints a Markdown section on stdout, progress on stderr; raw figures in
bench/results/s7_sizes.json. Loopback only.

    /usr/bin/python3 bench/s7_sizes.py [--rounds 5] [--seconds 2] [--conns 32]
        [--quick] [--no-before] [--no-callgrind]

--quick: 2 rounds of 1 s, no callgrind (about two minutes).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

# (label, file name, activities in the export)
SIZES = (("16 KB", "16k", 46), ("256 KB", "256k", 718), ("4 MB", "4m", 11480))
BEFORE_COMMIT = "7cb2c2f6910f5f631e57537869955dd14f262389"
BEFORE = "tidegate before fix"       # the system name of the pre-fix build
COUNTER = "GET /public/export"
CG_SMALL, CG_LARGE = 1000, 5000
CG_TOP = 8                 # tidegate's top functions shown
STRACE_N = {"16k": 400, "256k": 100, "4m": 20}     # requests counted per answer size
HEADERS = {"Authorization": "Bearer " + lib.TEST_KEY}

T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:5.1f}s]", *a, file=sys.stderr, flush=True)


def before_build():
    """(build directory, description) of the pre-fix tidegate, or (None, why
    not)."""
    env = os.environ.get("TG_BENCH_BEFORE_BUILD")
    if env:
        if not os.path.isfile(os.path.join(env, "tidegate")):
            raise SystemExit(f"TG_BENCH_BEFORE_BUILD={env}: no tidegate there")
        head = subprocess.run(["git", "-C", env, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        return env, f"release build of {head or 'an unknown commit'} ({env})"
    out = os.path.join(lib.ROOT, "build-before-" + BEFORE_COMMIT[:7])
    build = os.path.join(out, "build")
    desc = (f"release build of {BEFORE_COMMIT[:7]} (made by bench/s7_sizes.py in "
            f"{os.path.basename(out)}/)")
    if os.path.isfile(os.path.join(build, "tidegate")):
        return build, desc
    log(f"s7: building {BEFORE_COMMIT[:7]} in {out}")
    src = os.path.join(out, "src")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(src)
    try:
        tar = subprocess.run(["git", "-C", lib.ROOT, "archive", BEFORE_COMMIT],
                             capture_output=True, check=True, timeout=120).stdout
        subprocess.run(["tar", "-x", "-C", src], input=tar, check=True, timeout=120)
        subprocess.run(["meson", "setup", build, src, "-Dbuildtype=release", "-Dtests=false"],
                       check=True, capture_output=True, timeout=300)
        subprocess.run(["ninja", "-C", build], check=True, capture_output=True, timeout=1800)
    except (subprocess.SubprocessError, OSError) as e:
        shutil.rmtree(out, ignore_errors=True)
        return None, f"no build of {BEFORE_COMMIT[:7]}: {e}"
    return build, desc


class Cell:
    """One system serving one size one way."""

    def __init__(self, kind, size, system, daemon, url, headers, cached_check=None):
        self.kind, self.size, self.system, self.daemon = kind, size, system, daemon
        self.url, self.headers = url, headers
        self.cached_check = cached_check     # (header, value) of an answer from the cache
        self.lat, self.thr = [], []

    def warm(self, body):
        """Answer once; for a cache, until it answers from the cache (at most 3
        tries). The body must be the export's bytes."""
        for _ in range(3):
            r = requests.get(self.url, headers=self.headers, timeout=60)
            if r.status_code != 200 or r.content != body:
                raise RuntimeError(f"{self.system} {self.kind} {self.size}: HTTP {r.status_code}, "
                                   f"{len(r.content)} bytes, not the export's {len(body)}")
            if not self.cached_check:
                return
            h, v = self.cached_check
            if r.headers.get(h) == v:
                return
        raise RuntimeError(f"{self.system} {self.kind} {self.size}: not from its cache "
                           f"({h}: {r.headers.get(h)})")


def new_job(base, headers, project):
    r = requests.post(base + "/public/v1/export/activities", json={"projectId": project},
                      headers=headers, timeout=10)
    r.raise_for_status()
    return r.json()["correlationId"]


def read_export(emu, hdr, project):
    cid = new_job(emu.dex, hdr, project)
    for _ in range(100):
        r = requests.get(emu.dex + "/public/export", params={"correlationId": cid},
                         headers=hdr, timeout=60)
        if r.status_code == 200:
            return r.content
        time.sleep(0.05)
    raise RuntimeError(f"export of {project} not ready")


def callgrind(stub, emu, emu_hdr, name, project):
    """Instructions per request of nginx and tidegate for the 16 KB answer,
    proxied and cached."""
    path = f"/public/v1/size/{name}"

    def cached_load(hdr, job_base):
        def load(d, n):
            cid = new_job(job_base(d), hdr, project)
            p = f"/public/export?correlationId={cid}"
            lib.send_n(d.port, p, hdr, 2, conns=1)          # fetched, then from the cache
            lib.send_n(d.port, p, hdr, n)
        return load

    def tg_cached(pre):
        d = lib.tidegate(emu.dex, overrides={"sim": emu.sim_config(),
                                             "poll": {"cache_max_body": "8MB"}}, prefix=pre)
        lib.wait_tokens(d, timeout=120)
        return d

    runs = {
        ("proxied", "nginx"): (lambda pre: lib.nginx_proxy(stub.port, master=False, prefix=pre),
                               lambda d, n: lib.send_n(d.port, path, HEADERS, n)),
        ("proxied", "tidegate"): (lambda pre: lib.tidegate(stub.url, prefix=pre),
                                  lambda d, n: lib.send_n(d.port, path, HEADERS, n)),
        ("cached", "nginx"): (lambda pre: lib.nginx_cache(emu.ports["dex"], master=False,
                                                          prefix=pre),
                              cached_load(emu_hdr, lambda d: emu.dex)),
        ("cached", "tidegate"): (tg_cached, cached_load(HEADERS, lambda d: d.url)),
    }
    out = {"top": {}}
    for (kind, system), (start, load) in runs.items():
        log(f"s7: callgrind {kind} {system}")
        keep = tempfile.mktemp(prefix="tg-bench-callgrind-") if system == "tidegate" else None
        out[f"{kind} {system}"] = lib.callgrind_ir(start, load, CG_SMALL, CG_LARGE, keep=keep)
        if keep:
            try:
                out["top"][kind] = lib.callgrind_top(keep, CG_TOP)
            finally:
                os.unlink(keep)
    return out


def syscalls(cells, bodies):
    """Syscalls per request of nginx and tidegate for each answer:
    {(kind, size, system): {syscall: calls per request}}."""
    out = {}
    for c in cells:
        if c.system not in ("nginx", "nginx proxy_cache", "tidegate"):
            continue
        if c.cached_check:
            c.warm(bodies[c.size])
        u = urllib.parse.urlsplit(c.url)
        path = u.path + ("?" + u.query if u.query else "")
        n = STRACE_N[c.size]
        log(f"s7: strace {c.kind} {c.size} {c.system}")
        counts = lib.syscalls(c.daemon.worker,
                              lambda: lib.send_n(u.port, path, c.headers, n, conns=1))
        out[(c.kind, c.size, c.system)] = {k: v / n for k, v in counts.items()}
    return out


def median_diff(xs, ys, key):
    """Round-by-round differences x - y of key: list."""
    return [x[key] - y[key] for x, y in zip(xs, ys)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds of 1 s, no callgrind")
    ap.add_argument("--no-before", action="store_true",
                    help="skip the build before the TCP_NODELAY fix")
    ap.add_argument("--no-callgrind", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds, a.no_callgrind = 2, 1, True
    a.rounds = max(1, min(a.rounds, 50))
    a.seconds = max(1, min(a.seconds, 60))
    a.conns = max(2, min(a.conns, 1000))
    os.sched_setaffinity(0, {lib.LOAD_CPU})

    before, before_desc = (None, "--no-before") if a.no_before else before_build()
    started, cells, bodies = [], [], {}
    files = tempfile.mkdtemp(prefix="tg-bench-s7-files-")
    os.chmod(files, 0o755)               # nginx's worker (nobody when run as root) reads them
    data = {"rounds": a.rounds, "seconds": a.seconds, "conns": a.conns,
            "before": before_desc}
    ir = sc = None
    try:
        emu = lib.emulator({
            "projects": [{"id": f"P-{name.upper()}", "seed": 7, "activities": n}
                         for _, name, n in SIZES],
            "export": {"delay": "0s", "expiry": "12h"}})
        started.append(emu)
        emu_hdr = emu.dex_headers()
        for _, name, _n in SIZES:
            bodies[name] = read_export(emu, emu_hdr, f"P-{name.upper()}")
            with open(os.path.join(files, name), "wb") as f:
                f.write(bodies[name])
            os.chmod(os.path.join(files, name), 0o644)
        data["bytes"] = {name: len(b) for name, b in bodies.items()}

        stub = lib.stub(files_dir=files)
        started.append(stub)
        ng = lib.nginx_proxy(stub.port)
        started.append(ng)
        ngc = lib.nginx_cache(emu.ports["dex"])
        started.append(ngc)
        tgs = {}
        for sysname, build in (("tidegate", None), (BEFORE, before)):
            if sysname == BEFORE and not before:
                continue
            # the pre-fix build keeps its defaults: its cache_max_body (1 MB)
            # holds the 16 KB answer, the only size it is measured at
            poll = {} if sysname == BEFORE else {"poll": {"cache_max_body": "8MB"}}
            p = lib.tidegate(stub.url, build=build)
            started.append(p)
            c = lib.tidegate(emu.dex, overrides=dict({"sim": emu.sim_config()}, **poll),
                             build=build)
            started.append(c)
            lib.wait_tokens(c)      # (the stub has no simulation login: p never is ready)
            tgs[sysname] = (p, c)

        for label, name, _n in SIZES:
            path = f"/public/v1/size/{name}"
            cells.append(Cell("proxied", name, "direct", stub, stub.url + path, HEADERS))
            cells.append(Cell("proxied", name, "nginx", ng, ng.url + path, HEADERS))
            for sysname, (p, _c) in tgs.items():
                if sysname == BEFORE and name != SIZES[0][1]:
                    continue
                cells.append(Cell("proxied", name, sysname, p, p.url + path, HEADERS))
        for label, name, _n in SIZES:
            project = f"P-{name.upper()}"
            cid = new_job(emu.dex, emu_hdr, project)
            cells.append(Cell("cached", name, "nginx proxy_cache", ngc,
                              f"{ngc.url}/public/export?correlationId={cid}", emu_hdr,
                              ("X-Cache-Status", "HIT")))
            for sysname, (_p, c) in tgs.items():
                if sysname == BEFORE and name != SIZES[0][1]:
                    continue
                cid = new_job(c.url, c.headers, project)
                cells.append(Cell("cached", name, sysname, c,
                                  f"{c.url}/public/export?correlationId={cid}", c.headers,
                                  ("X-Tidegate-Poll", "cached")))
        for cell in cells:
            cell.warm(bodies[cell.size])

        def run(cell, conns):
            if cell.cached_check:
                cell.warm(bodies[cell.size])
            up = emu.calls(COUNTER)
            r = lib.wrk(cell.url, conns, a.seconds, headers=cell.headers)
            if r["requests"] == 0 or r["non2xx"] or r["errors"]:
                raise RuntimeError(f"{cell.system} {cell.kind} {cell.size}: failed load run\n"
                                   f"{r['raw']}")
            r = {k: v for k, v in r.items() if k != "raw"}
            r["upstream"] = emu.calls(COUNTER) - up
            return r

        log("s7: warm-up")
        for cell in cells:
            run(cell, a.conns)
        for rnd in range(a.rounds):
            log(f"s7: round {rnd + 1}/{a.rounds}")
            for kind in ("proxied", "cached"):
                for _, name, _n in SIZES:
                    cs = [c for c in cells if c.kind == kind and c.size == name]
                    k = rnd % len(cs)
                    for cell in cs[k:] + cs[:k]:
                        cell.lat.append(run(cell, 1))
                        cell.thr.append(run(cell, a.conns))
        sc = syscalls(cells, bodies) if shutil.which("strace") else None
        if not a.no_callgrind:
            ir = callgrind(stub, emu, emu_hdr, SIZES[0][1], f"P-{SIZES[0][1].upper()}")
    finally:
        for d in reversed(started):
            d.stop()
        shutil.rmtree(files, ignore_errors=True)
    data["cells"] = [{"kind": c.kind, "size": c.size, "system": c.system,
                      "one_connection": c.lat, "connections": c.thr} for c in cells]
    data["instructions_per_request"] = ir
    data["syscalls_per_request"] = {" ".join(k): v for k, v in (sc or {}).items()}
    lib.save("s7_sizes", data)
    report(a, cells, data, ir, sc, before_desc)


def report(a, cells, data, ir, sc, before_desc):
    env = os.environ.get("TG_BENCH_BEFORE_BUILD")
    cmd = ((f"TG_BENCH_BEFORE_BUILD={env} " if env and not a.no_before else "")
           + "/usr/bin/python3 bench/s7_sizes.py"
           + (" --quick" if a.quick else f" --rounds {a.rounds} --seconds {a.seconds}")
           + (f" --conns {a.conns}" if a.conns != 32 else "")
           + (" --no-before" if a.no_before else "")
           + (" --no-callgrind" if a.no_callgrind and not a.quick else ""))
    labels = {name: label for label, name, _ in SIZES}
    nbytes = data["bytes"]

    def cell(kind, size, system):
        for c in cells:
            if (c.kind, c.size, c.system) == (kind, size, system):
                return c
        return None

    out = ["### 7. Answers of 16 KB to 4 MB: proxied and cached", "", "    " + cmd, "",
           "One ready export per size (" + ", ".join(
               f"{labels[n]}: {nbytes[n]:,} bytes" for n in nbytes) +
           "). Proxied: the stub serves the export's bytes as a file (Content-Length) to "
           "nginx proxy_pass (s1's configuration) and tidegate; direct is the stub itself. "
           "Cached: `GET /public/export?correlationId=…` of a ready export, answered by "
           "tidegate's poll multiplexer from its cache (X-Tidegate-Poll: cached) and by nginx "
           "proxy_cache in front of the emulator from its cache zone (X-Cache-Status: HIT, "
           "sendfile on); each is warmed before every run. " +
           (f"\"{BEFORE}\" is the {before_desc}: 7cb2c2f is the commit before 0d1bdb3 "
            "set TCP_NODELAY on accepted sockets." if any(c.system == BEFORE for c in cells)
            else f"The build before the TCP_NODELAY fix is not measured ({before_desc})."),
           "",
           f"wrk, 1 thread, keep-alive, {a.seconds} s per run, {a.rounds} rounds, the systems "
           f"of one size interleaved in rotated order. 1 connection: each request sent when "
           f"the previous answer is in (latency of one request, no queueing); "
           f"{a.conns} connections: throughput and latency under load. ms (wrk resolves 1 µs) "
           f"and requests/s, median (min-max) over rounds; MB/s is the median requests/s "
           f"times the size. Differences from nginx are taken round by round. The "
           f"min-max is the noise: a p99 moves by milliseconds from round to round when "
           f"other work shares the machine; p50s and the round-by-round differences hold "
           f"better.", ""]
    first = SIZES[0][1]
    diffs = {}
    for kind, ref in (("proxied", "nginx"), ("cached", "nginx proxy_cache")):
        title = {"proxied": "Proxied answers (stub → proxy → wrk):",
                 "cached": "Cached answers (the proxy's cache → wrk):"}[kind]
        out += [title, ""]
        rows = []
        for label, name, _n in SIZES:
            base = cell(kind, name, ref)
            for c in [c for c in cells if c.kind == kind and c.size == name]:
                d50 = "—"
                if c is not base and c.system != "direct":
                    dl = median_diff(c.lat, base.lat, "p50")
                    dt = [x["rps"] / y["rps"] for x, y in zip(c.thr, base.thr)]
                    diffs[(kind, name, c.system)] = (dl, dt)
                    d50 = f"{lib.fmt(dl, 3)}; {lib.fmt(dt, 2)} ×"
                rps_med = statistics.median(x["rps"] for x in c.thr)
                rows.append([f"{label}", c.system,
                             lib.fmt([x["p50"] for x in c.lat], 3),
                             lib.fmt([x["p99"] for x in c.lat], 2),
                             lib.fmt([x["rps"] for x in c.thr]),
                             f"{rps_med * nbytes[name] / 1e6:,.0f}",
                             lib.fmt([x["p50"] for x in c.thr], 2),
                             lib.fmt([x["p99"] for x in c.thr], 2), d50])
        out.append(lib.table(
            ["size", "system", "1 conn p50 ms", "1 conn p99 ms",
             f"{a.conns} conns req/s", "MB/s", f"{a.conns} conns p50 ms",
             f"{a.conns} conns p99 ms", f"vs {ref}: 1 conn p50 diff ms; {a.conns} conns "
             "req/s ratio"], rows))
        if kind == "cached":
            ups = {s: sum(x["upstream"] for c in cells if c.kind == "cached" and c.system == s
                          for x in c.lat + c.thr)
                   for s in dict.fromkeys(c.system for c in cells if c.kind == "cached")}
            out += ["", "Vendor calls during the measured cached runs (emulator's export "
                    "counter): " + ", ".join(f"{s} {n}" for s, n in ups.items()) + "."]
            data["cached_upstream_calls"] = ups
        out.append("")
    if sc:
        out += ["Syscalls per request: strace -c of the proxy's (worker) process while "
                "one connection asks " + ", ".join(f"{STRACE_N[n]:,} times for {labels[n]}"
                                                   for n in labels) +
                "; the total and the two most frequent calls.", ""]
        cols = (("proxied", "nginx"), ("proxied", "tidegate"), ("cached", "nginx proxy_cache"),
                ("cached", "tidegate"))
        rows = []
        for label, name, _n in SIZES:
            row = [label]
            for kind, system in cols:
                per = sc.get((kind, name, system), {})
                top = sorted(per.items(), key=lambda kv: -kv[1])[:2]
                row.append(f"{sum(per.values()):,.1f} (" +
                           ", ".join(f"{k} {v:,.1f}" for k, v in top) + ")")
            rows.append(row)
        out += [lib.table(["size", "nginx proxy_pass", "tidegate proxied",
                           "nginx proxy_cache", "tidegate cached"], rows), ""]
    if ir:
        out += [f"Instructions per request, {labels[first]} answer: callgrind, user-space "
                f"instructions of the proxy process, the difference between a run of "
                f"{CG_LARGE:,} and one of {CG_SMALL:,} requests (4 keep-alive connections) "
                f"divided by {CG_LARGE - CG_SMALL:,}. nginx's sendfile copies in the kernel, "
                f"which callgrind does not count.", ""]
        rows = []
        for kind in ("proxied", "cached"):
            n, t = ir[f"{kind} nginx"], ir[f"{kind} tidegate"]
            rows.append([kind, f"{n:,.0f}", f"{t:,.0f}", f"{t / n:.2f}"])
        out += [lib.table(["16 KB answer", "nginx", "tidegate", "tidegate/nginx"], rows), ""]
        top = ir.get("top", {})
        if top.get("cached") and top.get("proxied"):
            out += [f"tidegate's top functions for the {labels[first]} answer (share of all "
                    f"instructions of the {CG_LARGE:,}-request run, start-up included; "
                    f"valgrind counts `rep movsb`, glibc's memcpy for large copies, once per "
                    f"byte, so memcpy's share overstates its time):", ""]
            rows = [[i + 1] + [f"{top[k][i][0]} {top[k][i][1]:.1f} %" if i < len(top[k])
                               else "" for k in ("cached", "proxied")]
                    for i in range(CG_TOP)]
            out += [lib.table(["", "cached", "proxied"], rows), ""]

    # targets
    for label, name, _n in SIZES:
        dl, _dt = diffs[("cached", name, "tidegate")]
        tg = statistics.median(x["p50"] for x in cell("cached", name, "tidegate").lat)
        ngv = statistics.median(x["p50"] for x in cell("cached", name, "nginx proxy_cache").lat)
        tg99 = statistics.median(x["p99"] for x in cell("cached", name, "tidegate").lat)
        ng99 = statistics.median(x["p99"] for x in cell("cached", name,
                                                         "nginx proxy_cache").lat)
        med = statistics.median(dl)
        out.append(f"- Target: cached answer latency ≤ nginx proxy_cache's ({label}, 1 "
                   f"connection p50) — measured tidegate {tg:.3f} ms, nginx {ngv:.3f} ms "
                   f"(difference {med:+.3f} ms, {lib.fmt(dl, 3)} over rounds; p99 "
                   f"{tg99:.2f} against {ng99:.2f} ms) — {'met' if med <= 0 else 'not met'}")
    dl, _ = diffs[("proxied", first, "tidegate")]
    med = statistics.median(dl)
    out.append(f"- Target: proxied {labels[first]} p50 within 0.3 ms of nginx's (1 "
               f"connection) — measured {med:+.3f} ms ({lib.fmt(dl, 3)} over rounds) — "
               f"{'met' if med <= 0.3 else 'not met'}")
    c_tg, c_ng = cell("proxied", first, "tidegate"), cell("proxied", first, "nginx")
    under = median_diff(c_tg.thr, c_ng.thr, "p50")
    out.append(f"- Reference: proxied {labels[first]} p50 at {a.conns} connections — "
               f"tidegate {statistics.median(x['p50'] for x in c_tg.thr):.2f} ms, nginx "
               f"{statistics.median(x['p50'] for x in c_ng.thr):.2f} ms (difference "
               f"{statistics.median(under):+.2f} ms; under load p50 follows throughput)")
    for kind in ("proxied", "cached"):
        old = cell(kind, first, BEFORE)
        new = cell(kind, first, "tidegate")
        if not old:
            out.append(f"- Before/after the TCP_NODELAY fix ({kind}): not measured "
                       f"({before_desc})")
            continue
        m = lambda c, key, xs: statistics.median(x[key] for x in getattr(c, xs))  # noqa: E731
        out.append(f"- Before/after the TCP_NODELAY fix, {kind} {labels[first]}: 1 connection "
                   f"p50 {m(old, 'p50', 'lat'):.2f} → {m(new, 'p50', 'lat'):.3f} ms; "
                   f"{a.conns} connections {m(old, 'rps', 'thr'):,.0f} → "
                   f"{m(new, 'rps', 'thr'):,.0f} requests/s, p50 "
                   f"{m(old, 'p50', 'thr'):.2f} → {m(new, 'p50', 'thr'):.2f} ms")
    if not ir:
        out.append("- Instructions per request: not measured (--quick or --no-callgrind)")
    print("\n".join(out))


if __name__ == "__main__":
    main()
