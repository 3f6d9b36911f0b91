#!/usr/bin/env python3
"""
bench/webhook_large.py - what a large webhook costs (issue 31): an export
of about --mb MB delivered to a callbackUrl (a loopback receiver that
reads and hashes it), in SQLite mode (a payload file beside the database)
and, under pg_virtualenv, in PostgreSQL mode (chunk rows); then --many
such deliveries of --many-mb MB at once. Reported per run: the gateway's
peak resident memory while it stores and sends (RSS sampled every 100 ms,
and VmHWM), the time from the export accepted to the receiver holding
every byte, and in PostgreSQL mode what the database wrote: the payload
table's size and the WAL bytes.

    [pg_virtualenv -t -v 15] /usr/bin/python3 bench/webhook_large.py [--mb 1000]
        [--many 8] [--many-mb 128] [--build build-release]

Prints a Markdown section on stdout, progress on stderr; raw figures in
bench/results/webhook_large.json.
"""
import argparse
import hashlib
import http.server
import os
import sys
import threading
import time

import requests

import lib
from s8_fleet import Pg, log

BYTES_PER_ACTIVITY = 370      # the emulator's generated activities, about


class Receiver:
    def __init__(self):
        self.port = lib.free_port()
        self.got = {}
        self.lock = threading.Lock()
        rcv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                h, left = hashlib.sha256(), n
                while left > 0:
                    b = self.rfile.read(min(left, 1 << 20))
                    if not b:
                        break
                    h.update(b)
                    left -= len(b)
                with rcv.lock:
                    rcv.got[self.headers.get("webhook-id")] = (n - left, time.monotonic())
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def run(a, mode, n, mb, pg):
    acts = int(mb * 1e6 / BYTES_PER_ACTIVITY)
    emu = lib.emulator({"projects": [{"id": "P-BIG", "seed": 5, "activities": acts}],
                        "export": {"delay": "0s", "chunk_records": 2000}}, build=a.build)
    rcv = Receiver()
    secret = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                          "webhook-secret")
    os.makedirs(os.path.dirname(secret), exist_ok=True)
    with open(secret, "w") as f:
        f.write("whsec_" + "YmVuY2gtd2ViaG9vay1zZWNyZXQtZm9yLWxhcmdl" + "\n")
    over = {"sim": emu.sim_config(),
            "webhooks": {"allow": ["127.0.0.1/32"], "secret_file": secret,
                         "poll_interval": "200ms", "attempt_timeout": "60s"}}
    schema = None
    if mode == "postgresql":
        schema, url = pg.new()
        over["state"] = {"url": url, "instance": "gw0"}
        wal0 = pg.sql("SELECT pg_current_wal_lsn()")
    gw = lib.tidegate(emu.dex, overrides=over, build=a.build)
    try:
        t0 = time.monotonic()
        ids = []
        for _ in range(n):
            r = requests.post(gw.url + "/public/v1/export/activities",
                              json={"projectId": "P-BIG",
                                    "callbackUrl": f"http://127.0.0.1:{rcv.port}/hook"},
                              headers=gw.headers, timeout=60)
            r.raise_for_status()
            ids.append(r.headers["X-Tidegate-Webhook-Id"])
        peak, deadline = 0, time.monotonic() + 1800
        while len(rcv.got) < n:
            if time.monotonic() > deadline:
                raise RuntimeError("not delivered within 30 min")
            peak = max(peak, lib.rss_kb(gw.proc.pid))
            time.sleep(0.1)
        res = {"mode": mode, "n": n, "bytes": sum(v[0] for v in rcv.got.values()),
               "rss_peak_mb": peak / 1024, "hwm_mb": lib.rss_kb(gw.proc.pid, "VmHWM") / 1024,
               "seconds": max(v[1] for v in rcv.got.values()) - t0}
        if mode == "postgresql":
            res["wal_mb"] = float(pg.sql(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), "
                                         f"'{wal0}')")) / 1e6
            res["table_mb"] = float(pg.sql(f"SELECT pg_total_relation_size("
                                           f"'{schema}.outbox_payloads')")) / 1e6
        log(f"webhook_large {mode} x{n}: {res}")
        return res
    finally:
        gw.stop()
        emu.stop()
        rcv.close()
        if schema:
            pg.drop(schema)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1000)
    ap.add_argument("--many", type=int, default=8)
    ap.add_argument("--many-mb", type=float, default=128)
    ap.add_argument("--build", default=lib.BUILD)
    a = ap.parse_args()
    if not (10 <= a.mb <= 1000 and 1 <= a.many <= 16 and 10 <= a.many_mb <= 1050):
        ap.error("--mb 10-1000 (webhooks.max_payload: 1 GiB), --many 1-16, --many-mb 10-1050")
    a.build = os.path.abspath(a.build)
    modes = ["sqlite"]
    if os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE"):
        modes.append("postgresql")
    pg = Pg()
    out = []
    try:
        for mode in modes:
            out.append(run(a, mode, 1, a.mb, pg))
            out.append(run(a, mode, a.many, a.many_mb, pg))
    finally:
        pg.drop_all()
    lib.save("webhook_large", {"args": vars(a), "results": out})
    cmd = " ".join(["/usr/bin/python3", "bench/webhook_large.py"] + sys.argv[1:])
    print("### Large webhooks: memory, time and what the database writes\n")
    print(f"`{cmd}`; {lib.machine()}. Release build; the receiver on loopback reads and "
          "hashes each body; RSS sampled every 100 ms from the export accepted to the "
          "last byte received.\n")
    rows = [[r["mode"], str(r["n"]), f"{r['bytes'] / 1e6:,.0f}", f"{r['rss_peak_mb']:.1f}",
             f"{r['hwm_mb']:.1f}", f"{r['seconds']:.1f}",
             f"{r['table_mb']:,.0f}" if "table_mb" in r else "-",
             f"{r['wal_mb']:,.0f}" if "wal_mb" in r else "-"] for r in out]
    print(lib.table(["state", "deliveries at once", "MB delivered", "RSS peak MB",
                     "VmHWM MB", "s accepted -> delivered", "payload table MB",
                     "WAL MB"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
