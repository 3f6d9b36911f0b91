#!/usr/bin/env python3
"""
bench/profile.py - where tidegate's instructions go on a proxied GET.

Runs the release tidegate under valgrind --tool=callgrind in front of the
nginx stub (bench/lib.py) twice, sending N1 then N2 keep-alive GETs of a
passthrough path with the API key, and prints the instructions per request
(difference of the two totals over N2 - N1, so start-up and shutdown cancel
out) and the top functions of the larger run. Noise-proof: the figure does
not depend on the machine's load.

    /usr/bin/python3 bench/profile.py [--n1 500] [--n2 2500] [--top 25]
    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/bin/python3 bench/profile.py
    /usr/bin/python3 bench/profile.py --otlp   # tracing on: spans exported to a local
                                               # collector answering 200
    /usr/bin/python3 bench/profile.py --limit-rate 1e6   # the key used has a rate limit
                                                         # (keys[].limits) it never reaches
    /usr/bin/python3 bench/profile.py --max 70000        # exit 1 above 70,000 a GET

The functions are listed by their instructions per request (each the
difference of the two runs, as the total), not by the larger run's total,
which start-up weighs down.
"""
import argparse
import http.client
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import lib


class Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that reads each export and answers 200."""
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def collector():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", lib.free_port()), Collector)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def run(stub, n, keep, overrides=None):
    """Total instructions of tidegate serving n GETs; the callgrind file is
    kept at keep when given."""
    t = lib.tidegate(stub.url, overrides=overrides)     # writes a config with free ports
    cfg = tempfile.mkdtemp(prefix="tg-bench-profile-")
    for f in ("tidegate.yaml", "dex-password", "sim-secret"):
        shutil.copy(os.path.join(t.tmp, f), cfg)
    port, admin = t.port, int(t.admin.rsplit(":", 1)[1])
    t.stop()
    out = keep or tempfile.mktemp(prefix="tg-bench-callgrind-")
    p = subprocess.Popen(["taskset", "-c", str(lib.SUT_CPU), "valgrind", "--tool=callgrind",
                          f"--callgrind-out-file={out}", os.path.join(lib.BUILD, "tidegate"),
                          "-c", os.path.join(cfg, "tidegate.yaml")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lib.wait_port(admin, "/healthz", timeout=60)
        time.sleep(0.5)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(n):
            c.request("GET", "/public/v1/bench", headers={"Authorization": "Bearer " +
                                                          lib.TEST_KEY})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError(f"tidegate answered {r.status}")
        c.close()
    finally:
        p.terminate()
        p.wait(timeout=60)
        shutil.rmtree(cfg, ignore_errors=True)
    total = lib._callgrind_total(out)
    if not keep:
        os.unlink(out)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n1", type=int, default=500)
    ap.add_argument("--n2", type=int, default=2500)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--otlp", action="store_true",
                    help="tracing on: export spans to a local collector")
    ap.add_argument("--limit-rate", type=float, default=0,
                    help="give the key used this rate limit a second (burst the same)")
    ap.add_argument("--max", type=int, default=0,
                    help="exit 1 when a proxied GET takes more instructions than this")
    ap.add_argument("--no-fields", action="store_true",
                    help="with --limit-rate: no RateLimit fields under the limit")
    a = ap.parse_args()
    stub = lib.stub()
    col = collector() if a.otlp else None
    over = {"tracing": {"otlp_url": f"http://127.0.0.1:{col.server_address[1]}/v1/traces"}} \
        if col else {}
    if a.limit_rate:
        over["keys"] = [{"name": "bench", "sha256": lib.TEST_KEY_SHA, "services": ["dex", "sim"],
                         "limits": {"rate": a.limit_rate, "burst": int(a.limit_rate)}}]
        over["limits"] = {"headers": not a.no_fields}
    keep = [tempfile.mktemp(prefix="tg-bench-callgrind-") for _ in range(2)]
    try:
        small = run(stub, a.n1, keep[0], over)
        large = run(stub, a.n2, keep[1], over)
    finally:
        stub.stop()
        if col:
            col.shutdown()
    per = (large - small) / (a.n2 - a.n1)
    print(f"instructions per proxied GET: {per:,.0f}")
    # per function, the difference of the two runs over the requests between
    # them: start-up and shutdown cancel out, as in the total
    fa, fb = functions(keep[0]), functions(keep[1])
    rows = sorted(((fb.get(f, 0) - fa.get(f, 0)) / (a.n2 - a.n1), f) for f in set(fa) | set(fb))
    for ir, f in reversed(rows[-a.top:]):
        print(f"{ir:9,.0f} {100 * ir / per:5.1f} %  {f}")
    for k in keep:
        if os.environ.get("TG_PROFILE_KEEP"):
            print(f"kept {k}")
        else:
            os.unlink(k)
    if a.max and per > a.max:
        print(f"over the bound: {per:,.0f} > {a.max:,}")
        return 1
    return 0


def functions(path):
    """Inclusive-free (self) instructions by function of a callgrind file."""
    ann = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True,
                         text=True).stdout
    out = {}
    for ln in ann.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", ln)
        if m and ":" in m.group(2):
            name = re.sub(r"^.*?:", "", m.group(2).split(" [")[0])
            out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out

if __name__ == "__main__":
    sys.exit(main())
