#!/usr/bin/env python3
"""
bench/s7_spool.py - scenario 7: K callers of one large ready export (over
poll.cache_max_body), served from one spool file.

For each K (1, 10, 100), a fresh tidegate (release build, defaults) in
front of the emulator; K curl clients (pinned to the load core, body
discarded) fetch the same export at once. Reported: the vendor's GETs of
the export (emulator call counters) and the bytes they cost, the gateway's
RSS before and its peak (VmHWM), the spool's largest size on disk
(tidegate_poll_spool_bytes, sampled every 0.1 s), and that every client
got the whole export.

    /usr/bin/python3 bench/s7_spool.py [--mb 100] [--callers 1,10,100]
"""
import argparse
import os
import subprocess
import sys
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

ACTIVITIES_PER_MB = 2700


def metric(d, name):
    for line in requests.get(d.admin + "/metrics", timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def run(emu, k):
    d = lib.tidegate(emu.dex, overrides={"sim": emu.sim_config()})
    try:
        lib.wait_tokens(d)
        r = requests.post(d.url + "/public/v1/export/activities", json={"projectId": "P-S7"},
                          headers=d.headers, timeout=10)
        cid = r.json()["correlationId"]
        requests.delete(emu.dex + "/__emulator/stats", timeout=5)
        before = d.rss_kb()
        argv = ["taskset", "-c", str(lib.LOAD_CPU), "curl", "-sS", "-o", "/dev/null",
                "-w", "%{http_code} %{size_download}", "-H",
                "Authorization: " + d.headers["Authorization"],
                f"{d.url}/public/export?correlationId={cid}"]
        t0 = time.monotonic()
        ps = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(k)]
        disk = 0
        while any(p.poll() is None for p in ps) and time.monotonic() < t0 + 900:
            disk = max(disk, metric(d, "tidegate_poll_spool_bytes"))
            time.sleep(0.1)
        secs = time.monotonic() - t0
        got = [p.communicate()[0].split() for p in ps]
        sizes = {int(s) for c, s in got if c == "200"}
        gets = emu.calls("GET /public/export")
        size = max(sizes) if sizes else 0
        return {"callers": k, "ok": sum(c == "200" for c, _ in got), "sizes": len(sizes),
                "bytes": size, "vendor_gets": gets, "vendor_bytes": gets * size,
                "rss_before_kb": before, "peak_kb": d.rss_kb("VmHWM"),
                "spool_max_bytes_on_disk": disk, "secs": secs}
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--callers", default="1,10,100")
    a = ap.parse_args()
    emu = lib.emulator({"projects": [{"id": "P-S7", "seed": 7,
                                      "activities": a.mb * ACTIVITIES_PER_MB}],
                        "export": {"delay": "0s", "chunk_records": 2000}})
    try:
        rows, raw = [], []
        for k in (int(x) for x in a.callers.split(",")):
            r = run(emu, k)
            raw.append(r)
            rows.append([k, f"{r['ok']}/{k}", f"{r['bytes'] / 1e6:.1f}", r["vendor_gets"],
                         f"{r['vendor_bytes'] / 1e6:.1f}", f"{r['rss_before_kb'] / 1024:.1f}",
                         f"{r['peak_kb'] / 1024:.1f}",
                         f"{r['spool_max_bytes_on_disk'] / 1e6:.1f}", f"{r['secs']:.1f}"])
        print(lib.table(["callers", "whole", "export MB", "vendor GETs", "vendor MB",
                         "RSS before MB", "peak RSS MB", "spool on disk MB", "s"], rows))
        lib.save("s7_spool", raw)
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
