#!/usr/bin/env python3
"""
bench/callback_p99.py - latency of proxied GETs while callback exports are
being accepted.

Every export with a callbackUrl that the gateway accepts commits a webhook
job to its SQLite outbox (WAL, synchronous=FULL: an fsync) before the caller
gets its 200, and later the payload, the lease and the outcome of the
delivery (one commit each). This measures whether that work raises the tail
latency of unrelated requests served by the same gateway.

One run starts, per build, the release tidegate (pinned to SUT_CPU) in front
of that build's tidegate-emulator, and a webhook receiver (an http.server
on 127.0.0.1 answering 204, allow-listed with webhooks.allow
127.0.0.1/32; deliver mode, the outbox in the gateway's directory under
/tmp). Each round, per build:

- Phase A (baseline): --get-conns keep-alive connections send proxied
  `GET /api/v1/cases` (sim listener, forwarded to the emulator every time,
  222 bytes) open-loop at --get-rate in all for --seconds. A latency is
  measured from the request's scheduled send time (so a stall also counts
  against the requests queued behind it) to the end of its answer.
- Phase B: the same GET stream while a second client POSTs
  `/public/v1/export/activities` with a callbackUrl at --rate per second
  (paced over a few connections, rate x seconds exports at most).
- Phase C (control): as B, the exports without a callbackUrl (no outbox
  commit, no webhook polls or deliveries; the same export handling at the
  gateway and the vendor and the same client load), so C-A is what any
  export stream costs and B-C what the webhook work adds.

Before each phase the outboxes of all gateways are drained (no job waiting
or ready, no attempt in flight; at most --drain seconds). Figures are
medians over --rounds of each round's p50, p99, p99.9 and max; B-A is the
median of the per-round differences. Clients, emulator and receiver run in
separate processes on LOAD_CPU.

    /usr/bin/python3 bench/callback_p99.py [--rate 100] [--seconds 10]
        [--rounds 5] [--build build-release] [--build2 OTHER_BUILD]

--build2 runs the same phases against a second build in the same run
(rounds interleaved, the order alternating) and prints both. Build a build
directory with `meson setup build-release -Dbuildtype=release -Dtests=false
&& ninja -C build-release`.
"""
import argparse
import base64
import http.client
import http.server
import json
import multiprocessing as mp
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

GET_PATH = "/api/v1/cases"
EXPORT_PATH = "/public/v1/export/activities"
SECRET = "whsec_" + base64.b64encode(b"tidegate-bench-callback-secret-01").decode()
MAX_SAMPLES = 1_000_000          # per client process, whatever the options


# ---- the webhook receiver (its own process) ----

def _receiver(port, count, ready):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            while n > 0:
                chunk = self.rfile.read(min(n, 65536))
                if not chunk:
                    break
                n -= len(chunk)
            with count.get_lock():
                count.value += 1
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    ready.set()
    srv.serve_forever()


class Receiver:
    def __init__(self):
        self.port = lib.free_port()
        self.count = mp.Value("l", 0)
        ready = mp.Event()
        self.proc = mp.Process(target=_receiver, args=(self.port, self.count, ready),
                               daemon=True)
        self.proc.start()
        if not ready.wait(10):
            self.stop()
            raise RuntimeError("the webhook receiver did not start")
        lib.pin(self.proc.pid, lib.LOAD_CPU)
        self.url = f"http://127.0.0.1:{self.port}/hooks/export"

    def stop(self):
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()


# ---- load (each stream in its own process) ----

def _get_stream(port, headers, rate, seconds, start_at, out):
    """Open loop on one keep-alive connection: request i is due at start_at
    + i/rate; its latency runs from then to the end of the answer."""
    lat, bad = [], 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = min(int(rate * seconds), MAX_SAMPLES)
    while time.monotonic() < start_at:
        time.sleep(min(0.01, max(0.0, start_at - time.monotonic())))
    for i in range(n):
        due = start_at + i / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            conn.request("GET", GET_PATH, headers=headers)
            r = conn.getresponse()
            r.read()
            ok = r.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        done = time.monotonic()
        if ok:
            lat.append((done - due) * 1000.0)
        else:
            bad += 1
    conn.close()
    out.put({"lat": lat, "bad": bad})


def _post_stream(port, headers, body, rate, count, start_at, out):
    """count callback exports paced at rate over conns threads (slot i due
    at start_at + i/rate)."""
    conns = max(1, min(16, int(rate // 25) or 1))
    res = {"accepted": 0, "other": {}, "errors": 0, "ms": []}
    lock = threading.Lock()

    def worker(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(k, count, conns):
            wait = start_at + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            t = time.monotonic()
            try:
                c.request("POST", EXPORT_PATH, body=body, headers=headers)
                r = c.getresponse()
                r.read()
                wid = r.getheader("X-Tidegate-Webhook-Id")
                with lock:
                    res["ms"].append((time.monotonic() - t) * 1000.0)
                    if r.status == 200 and (wid or "callbackUrl" not in body):
                        res["accepted"] += 1
                    else:
                        res["other"][r.status] = res["other"].get(r.status, 0) + 1
            except (OSError, http.client.HTTPException):
                with lock:
                    res["errors"] += 1
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.close()

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(res)


def _start(target, args):
    p = mp.Process(target=target, args=args, daemon=True)
    p.start()
    lib.pin(p.pid, lib.LOAD_CPU)
    return p


def _collect(procs, q, timeout):
    """One result per process from q; every process ended."""
    got = []
    deadline = time.monotonic() + timeout
    for _ in procs:
        got.append(q.get(timeout=max(1.0, deadline - time.monotonic())))
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
        if p.is_alive():
            p.terminate()
            p.join()
    return got


def phase(sys_, a, exports):
    """One phase on system sys_: the GET stream, with exports None (A),
    "callback" (B) or "plain" (C). Returns its latencies and counters."""
    q = mp.Queue()
    start_at = time.monotonic() + 0.5
    per = a.get_rate / a.get_conns
    gets = [_start(_get_stream, (sys_["sim_port"], sys_["gw"].headers, per, a.seconds,
                                 start_at, q)) for _ in range(a.get_conns)]
    post = None
    pq = mp.Queue()
    before = metrics(sys_["gw"])
    if exports:
        doc = {"projectId": "P-DEMO"}
        if exports == "callback":
            doc["callbackUrl"] = sys_["receiver"].url
        body = json.dumps(doc)
        hdr = dict(sys_["gw"].headers, **{"Content-Type": "application/json"})
        post = _start(_post_stream, (sys_["gw"].port, hdr, body, a.rate,
                                     int(a.rate * a.seconds), start_at, pq))
    got = _collect(gets, q, a.seconds + 60)
    res = {"lat": sorted(x for g in got for x in g["lat"]),
           "bad": sum(g["bad"] for g in got), "accepted": 0, "other": {}, "errors": 0}
    if post is not None:
        pr = _collect([post], pq, a.seconds + 60)[0]
        res.update(accepted=pr["accepted"], other=pr["other"], errors=pr["errors"],
                   post_p50=pct(sorted(pr["ms"]), 50), post_p99=pct(sorted(pr["ms"]), 99))
    res["metrics_delta"] = {k: v - before.get(k, 0.0) for k, v in metrics(sys_["gw"]).items()}
    return res


# ---- the systems under test ----

def start_system(build, receiver, procs, tmp):
    build = os.path.abspath(build)
    emu = lib.emulator({"projects": [{"id": "P-DEMO", "seed": 1, "sites": 2,
                                      "activities": 5}],
                        "export": {"delay": "300ms", "expiry": "1h"}}, build=build)
    procs.append(emu)
    secret = os.path.join(tmp, "webhook-secret")
    with open(secret, "w") as f:
        f.write(SECRET + "\n")
    gw = lib.tidegate(emu.dex, build=build, overrides={
        "sim": emu.sim_config(),
        "webhooks": {"mode": "deliver", "allow": ["127.0.0.1/32"], "secret_file": secret}})
    procs.append(gw)
    lib.wait_tokens(gw)
    with open(os.path.join(gw.tmp, "tidegate.yaml")) as f:
        sim_port = int(re.search(r'sim: "127\.0\.0\.1:(\d+)"', f.read()).group(1))
    return {"build": build, "emu": emu, "gw": gw, "sim_port": sim_port, "receiver": receiver}


def metrics(gw):
    """The webhook series of gw's /metrics: {series: value}."""
    out = {}
    text = requests.get(gw.admin + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith("tidegate_webhook_") and "_bucket{" not in line:
            series, _, value = line.rpartition(" ")
            try:
                out[series] = float(value)
            except ValueError:
                pass
    return out


def pending(m):
    return (m.get('tidegate_webhook_jobs{state="waiting"}', 0)
            + m.get('tidegate_webhook_jobs{state="ready"}', 0)
            + m.get("tidegate_webhook_attempts_in_flight", 0))


def drain(systems, limit_s):
    """Until no gateway has a job waiting, ready or in flight (at most
    limit_s); returns the seconds it took."""
    t0 = time.monotonic()
    while any(pending(metrics(s["gw"])) for s in systems):
        if time.monotonic() - t0 > limit_s:
            left = {s["build"]: pending(metrics(s["gw"])) for s in systems}
            raise RuntimeError(f"outboxes not drained after {limit_s} s: {left}")
        time.sleep(0.2)
    return time.monotonic() - t0


# ---- figures ----

def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


PHASES = {"A": "A (GETs only)", "B": "B (+ callback exports)",
          "C": "C (+ exports, no callback)"}
QS = (("p50", 50), ("p99", 99), ("p99.9", 99.9), ("max", 100))


def summary(lat):
    return {name: pct(lat, p) for name, p in QS}


def med(vals):
    return statistics.median(vals) if vals else float("nan")


def report(a, cmd, builds, rounds, final):
    print("### Proxied GET latency while callback exports are accepted\n")
    print(f"    {cmd}\n")
    print(f"Machine: {lib.machine()}.\n")
    print(f"GET {GET_PATH} (sim listener, proxied to the emulator) open-loop at "
          f"{a.get_rate:g}/s over {a.get_conns} connections for {a.seconds:g} s per phase; "
          f"phase B adds {a.rate:g} callback exports/s (POST {EXPORT_PATH} with a "
          f"callbackUrl, {int(a.rate * a.seconds)} per phase), phase C as many exports "
          f"without a callbackUrl (control). Latency from the scheduled "
          f"send time, ms; median over {a.rounds} rounds (B-A: median of the per-round "
          f"differences).\n")
    rows = []
    for b in builds:
        rs = rounds[b]
        for ph in ("A", "B", "C"):
            rows.append([b, PHASES[ph]] + [f"{med([r[ph][q] for r in rs]):.2f}" for q, _ in QS]
                        + [f"{med([r[ph]['n'] for r in rs]):.0f}"])
        for x, y in (("B", "A"), ("C", "A"), ("B", "C")):
            rows.append([b, f"{x}-{y}"] + [f"{med([r[x][q] - r[y][q] for r in rs]):+.2f}"
                                           for q, _ in QS] + [""])
    print(lib.table(["build", "phase"] + [q for q, _ in QS] + ["GETs"], rows))
    print()
    print("Per round (p50 / p99 / p99.9 / max, ms):\n")
    rows = []
    for b in builds:
        for i, r in enumerate(rounds[b]):
            rows.append([b, i + 1] + [" / ".join(f"{r[ph][q]:.2f}" for q, _ in QS)
                                      for ph in ("A", "B", "C")]
                        + [r["accepted"], f"{r['post_p50']} / {r['post_p99']}",
                           f"{r['plain_p50']} / {r['plain_p99']}", r["get_bad"],
                           f"{r['drain_s']:.1f}"])
    print(lib.table(["build", "round", "A", "B", "C", "callback exports accepted",
                     "B export p50 / p99 ms", "C export p50 / p99 ms", "GET failures",
                     "drain after B, s"], rows))
    print()
    for b in builds:
        f = final[b]
        print(f"- {b}: {f['accepted']} callback exports accepted "
              f"({f['rejected']} other answers, {f['errors']} transport errors); "
              f"receiver got {f['received']} webhooks; gateway /metrics: "
              + ", ".join(f"{k} {v:g}" for k, v in sorted(f["metrics"].items())))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=100, help="callback exports per second")
    ap.add_argument("--seconds", type=float, default=10, help="length of each phase")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(lib.ROOT, "build-release"))
    ap.add_argument("--build2", help="a second build directory, measured alongside")
    ap.add_argument("--get-rate", type=float, default=400, help="GETs per second in all")
    ap.add_argument("--get-conns", type=int, default=4)
    ap.add_argument("--drain", type=float, default=120,
                    help="longest wait for the outboxes to empty, s")
    a = ap.parse_args()
    if not (0 < a.rate <= 2000 and 0 < a.seconds <= 600 and 1 <= a.rounds <= 50
            and 0 < a.get_rate <= 5000 and 1 <= a.get_conns <= 32):
        ap.error("out of range: rate 0-2000, seconds 0-600, rounds 1-50, get-rate 0-5000, "
                 "get-conns 1-32")
    cmd = " ".join(["/usr/bin/python3", "bench/callback_p99.py"] + sys.argv[1:])
    builds = [a.build] + ([a.build2] if a.build2 else [])
    names = [os.path.relpath(os.path.abspath(b), lib.ROOT) for b in builds]
    if len(names) == 2 and names[0] == names[1]:
        names = [names[0] + " (1)", names[1] + " (2)"]
    for b in builds:
        for exe in ("tidegate", "tidegate-emulator"):
            if not os.access(os.path.join(b, exe), os.X_OK):
                ap.error(f"no {exe} in {b}: build it first")
    procs, tmps = [], []
    rounds = {n: [] for n in names}
    final = {}
    receivers = []
    try:
        systems = {}
        for n, b in zip(names, builds):
            tmps.append(tempfile.mkdtemp(prefix="tg-bench-callback-"))
            receivers.append(Receiver())
            systems[n] = start_system(b, receivers[-1], procs, tmps[-1])
        totals = {n: {"accepted": 0, "rejected": 0, "errors": 0} for n in names}
        for i in range(a.rounds):
            order = names if i % 2 == 0 else names[::-1]
            for n in order:
                s = systems[n]
                drain(systems.values(), a.drain)
                ra = phase(s, a, None)
                drain(systems.values(), a.drain)
                rb = phase(s, a, "callback")
                drain_s = drain(systems.values(), a.drain)
                rc = phase(s, a, "plain")
                t = totals[n]
                t["accepted"] += rb["accepted"]
                t["rejected"] += sum(rb["other"].values())
                t["errors"] += rb["errors"]
                rounds[n].append({
                    "A": dict(summary(ra["lat"]), n=len(ra["lat"])),
                    "B": dict(summary(rb["lat"]), n=len(rb["lat"])),
                    "C": dict(summary(rc["lat"]), n=len(rc["lat"])),
                    "plain_p50": f"{rc['post_p50']:.2f}", "plain_p99": f"{rc['post_p99']:.2f}",
                    "accepted": rb["accepted"], "other": rb["other"],
                    "post_p50": f"{rb['post_p50']:.2f}", "post_p99": f"{rb['post_p99']:.2f}",
                    "get_bad": ra["bad"] + rb["bad"] + rc["bad"], "drain_s": drain_s,
                    "metrics_B": rb["metrics_delta"]})
                print(f"callback_p99: {n} round {i + 1}: A p99 "
                      f"{rounds[n][-1]['A']['p99']:.2f} ms, B p99 "
                      f"{rounds[n][-1]['B']['p99']:.2f} ms, C p99 "
                      f"{rounds[n][-1]['C']['p99']:.2f} ms, {rb['accepted']} callback "
                      f"exports accepted", file=sys.stderr)
        for n in names:
            m = metrics(systems[n]["gw"])
            final[n] = dict(totals[n], metrics={k: v for k, v in m.items() if v},
                            received=systems[n]["receiver"].count.value)
    finally:
        for p in reversed(procs):
            p.stop()
        for r in receivers:
            r.stop()
        for t in tmps:
            shutil.rmtree(t, ignore_errors=True)
    lib.save("callback_p99", {"args": vars(a), "rounds": rounds,
                              "final": {n: final[n] for n in names}})
    report(a, cmd, names, rounds, final)


if __name__ == "__main__":
    main()
