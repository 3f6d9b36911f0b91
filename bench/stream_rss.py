#!/usr/bin/env python3
"""
bench/stream_rss.py - peak memory while streaming large exports.

Runs the release build of tidegate-emulator alone, then tidegate in front of
it, and streams an export of N activities (default 1,000,000 and 2,900,000,
about 0.37 GB and 1.08 GB) through each, ROUNDS times, reporting bytes,
seconds, throughput and the process's RSS before and its peak (VmHWM) after,
as medians with min-max. Loopback only; every loop is bounded.

    meson setup build-release -Dbuildtype=release -Dtests=false
    ninja -C build-release
    /usr/bin/python3 bench/stream_rss.py [--rounds 3] [--sizes 1000000,2900000]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "tests", "integration"))
from conftest import Emulator, Gateway  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stream(url, headers, cid):
    t0 = time.monotonic()
    total = 0
    with requests.get(url + "/public/export", params={"correlationId": cid},
                      headers=headers, stream=True, timeout=600) as r:
        r.raise_for_status()
        for chunk in r.iter_content(1 << 20):
            total += len(chunk)
    return total, time.monotonic() - t0


def one_round(build, activities, via_gateway):
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "e"))
        emu = Emulator(os.path.join(tmp, "e"), {
            "log_level": "warn",
            "projects": [{"id": "P-BIG", "seed": 7, "activities": activities}],
            "export": {"delay": "0s", "chunk_records": 2000}}, build)
        procs = [emu]
        try:
            if via_gateway:
                os.mkdir(os.path.join(tmp, "g"))
                gw = Gateway(os.path.join(tmp, "g"), emu, {"log_level": "warn",
                                                           "access_log": False}, build)
                procs.append(gw)
                base, hdr, measured = gw.dex, gw.headers(), gw
            else:
                base, hdr, measured = emu.dex, emu.dex_headers(), emu
            cid = requests.post(base + "/public/v1/export/activities",
                                json={"projectId": "P-BIG"}, headers=hdr,
                                timeout=30).json()["correlationId"]
            before = measured.rss_kb()
            total, secs = stream(base, hdr, cid)
            return {"bytes": total, "secs": secs, "before": before,
                    "peak": measured.hwm_kb()}
        finally:
            for p in reversed(procs):
                p.stop()


def fmt(vals, unit, scale=1.0, digits=1):
    v = [x * scale for x in vals]
    return (f"{statistics.median(v):.{digits}f} {unit} "
            f"({min(v):.{digits}f}-{max(v):.{digits}f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="1000000,2900000")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    a = ap.parse_args()
    print("| system | activities | body | throughput | RSS before | peak RSS |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in a.sizes.split(",")):
        for via, name in ((False, "emulator (origin)"), (True, "tidegate → emulator")):
            rs = []
            for _ in range(a.rounds):       # interleaving is per size: same data
                rs.append(one_round(a.build, n, via))
            print(f"| {name} | {n:,} | {rs[0]['bytes'] / 1e6:.0f} MB | "
                  f"{fmt([r['bytes'] / r['secs'] for r in rs], 'MB/s', 1e-6)} | "
                  f"{fmt([r['before'] for r in rs], 'MB', 1 / 1024)} | "
                  f"{fmt([r['peak'] for r in rs], 'MB', 1 / 1024)} |", flush=True)


if __name__ == "__main__":
    main()
