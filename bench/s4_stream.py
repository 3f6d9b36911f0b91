#!/usr/bin/env python3
"""
bench/s4_stream.py - scenario 4: streaming large exports, memory and speed.

The emulator holds one ready export per size (about 2,700 activities per
MB: 270,000 for 100 MB, 2,700,000 for 1 GB), generated chunk by chunk as
it is read. Each round, every system streams each export to curl (pinned
to the load core, body discarded): tidegate (its defaults, gateway API
key), nginx (proxy_buffering off), HAProxy, and the emulator directly.
Every proxy is started fresh for each transfer, so its peak RSS (VmHWM,
summed over its processes: nginx master + worker) belongs to that size.
Then a slow client (curl --limit-rate 20 MB/s for 3 s, about 60 MB of the
largest export) reads through each proxy: VmRSS before it, after 1 s and
at its end (sampled every 0.2 s), and the peak (VmHWM).
Targets: tidegate peak RSS flat in size (grows by at most 2 MB from the
smallest to the largest) and at most 32 MB; throughput at least 0.9 x
nginx; under the slow client tidegate's RSS at the end is at most 1 MB
above its RSS after the first second (it does not grow with the bytes
passed).

    /usr/bin/python3 bench/s4_stream.py [--rounds 5] [--sizes 100,1000] [--quick]

--quick: 100 MB only, 1 round.
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
SLOW_RATE = 20_000_000           # bytes/s
SLOW_SECONDS = 3
TARGETS = ("tidegate", "nginx", "HAProxy", "emulator")
PROXIES = TARGETS[:3]


def start(target, emu, emu_hdr):
    """(daemon or None, base url, headers) for target in front of emu."""
    if target == "tidegate":
        # The export is made at the emulator, once for every proxy: no owner
        # record of it, which poll.ownership would refuse (404).
        d = lib.tidegate(emu.dex, overrides={"sim": emu.sim_config(),
                                             "poll": {"ownership": False}})
        try:
            lib.wait_tokens(d)
        except RuntimeError:
            d.stop()
            raise
        return d, d.url, d.headers
    if target == "nginx":
        d = lib.nginx_proxy(emu.ports["dex"])
    elif target == "HAProxy":
        d = lib.haproxy(emu.ports["dex"])
    else:
        return None, emu.dex, emu_hdr
    return d, d.url, emu_hdr


def curl(url, headers, rate=None, max_time=600):
    argv = ["taskset", "-c", str(lib.LOAD_CPU), "curl", "-sS", "-o", "/dev/null",
            "--max-time", str(max_time), "-w", "%{http_code} %{size_download} %{time_total}"]
    if rate:
        argv += ["--limit-rate", str(rate)]
    for k, v in headers.items():
        argv += ["-H", f"{k}: {v}"]
    return subprocess.Popen(argv + [url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(p, timeout):
    out, err = p.communicate(timeout=timeout)
    code, size, secs = out.split()
    return int(code), int(size), float(secs), p.returncode, err.strip()


def full_read(target, emu, emu_hdr, cid, mb):
    d, base, hdr = start(target, emu, emu_hdr)
    try:
        before = d.rss_kb() if d else None
        code, size, secs, rc, err = finish(curl(f"{base}/public/export?correlationId={cid}",
                                                hdr), 660)
        if code != 200 or rc != 0:
            raise RuntimeError(f"{target}: HTTP {code}, curl exit {rc} {err}")
        return {"target": target, "mb": mb, "bytes": size, "secs": secs,
                "mbps": size / secs / 1e6, "rss_before_kb": before,
                "peak_kb": d.rss_kb("VmHWM") if d else None}
    finally:
        if d:
            d.stop()


def slow_read(target, emu, emu_hdr, cid):
    d, base, hdr = start(target, emu, emu_hdr)
    try:
        before = d.rss_kb()
        p = curl(f"{base}/public/export?correlationId={cid}", hdr, SLOW_RATE, SLOW_SECONDS)
        t0 = time.monotonic()
        samples = []                  # (seconds into the read, VmRSS)
        while p.poll() is None and time.monotonic() < t0 + SLOW_SECONDS + 10:
            samples.append((time.monotonic() - t0, d.rss_kb()))
            time.sleep(0.2)
        code, size, secs, rc, err = finish(p, 15)
        if code != 200 or rc not in (0, 28):     # 28: stopped by --max-time, as meant
            raise RuntimeError(f"{target} slow: HTTP {code}, curl exit {rc} {err}")
        return {"target": target, "bytes": size, "secs": secs, "rss_before_kb": before,
                "rss_1s_kb": next((kb for t, kb in samples if t >= 1.0), before),
                "rss_end_kb": samples[-1][1] if samples else before,
                "peak_kb": d.rss_kb("VmHWM")}
    finally:
        d.stop()


def med(rs, key, target, mb=None):
    vals = [r[key] for r in rs if r["target"] == target and (mb is None or r["mb"] == mb)]
    return lib.stats(vals)[0]


def report(a, cmd, full, slow):
    print("### 4. Streaming exports: memory and throughput\n")
    print(f"    {cmd}\n")
    print(f"Exports of about {ACTIVITIES_PER_MB:,} activities per MB streamed to curl; each "
          f"proxy started fresh per transfer (tidegate with poll.ownership off: the export "
          f"is made at the emulator, for every proxy alike); RSS summed over the proxy's processes; "
          f"median (min-max) over {a.rounds} round(s).\n")
    rows = []
    for mb in a.sizes:
        for t in TARGETS:
            rs = [r for r in full if r["target"] == t and r["mb"] == mb]
            mem = lambda k: (lib.fmt([r[k] / 1024 for r in rs], 1, "MB")  # noqa: E731
                             if t != "emulator" else "origin")
            rows.append([f"{mb:,} MB", t, f"{rs[0]['bytes'] / 1e6:,.0f} MB",
                         lib.fmt([r["mbps"] for r in rs], 0, "MB/s"), mem("rss_before_kb"),
                         mem("peak_kb")])
    print(lib.table(["export", "system", "body", "throughput", "RSS before", "peak RSS"],
                    rows))
    big = max(a.sizes)
    print(f"\nSlow client: curl --limit-rate {SLOW_RATE / 1e6:g} MB/s for {SLOW_SECONDS} s "
          f"on the {big:,} MB export:\n")
    rows = []
    for t in PROXIES:
        rs = [r for r in slow if r["target"] == t]
        rows.append([t, lib.fmt([r["bytes"] / 1e6 for r in rs], 0, "MB"),
                     lib.fmt([r["rss_before_kb"] / 1024 for r in rs], 1, "MB"),
                     lib.fmt([r["rss_1s_kb"] / 1024 for r in rs], 1, "MB"),
                     lib.fmt([r["rss_end_kb"] / 1024 for r in rs], 1, "MB"),
                     lib.fmt([r["peak_kb"] / 1024 for r in rs], 1, "MB")])
    print(lib.table(["system", "read", "RSS at start", "RSS after 1 s",
                     "RSS at the end",
                     "peak RSS (VmHWM)"], rows))
    print()
    peak = {mb: med(full, "peak_kb", "tidegate", mb) / 1024 for mb in a.sizes}
    top = max(peak.values())
    print(f"- Target: tidegate peak RSS at most 32 MB — measured {top:.1f} MB (median, "
          f"largest over sizes) — {'met' if top <= 32 else 'gap'}")
    if len(a.sizes) > 1:
        small = min(a.sizes)
        grow = peak[big] - peak[small]
        print(f"- Target: tidegate peak RSS flat in size (+2 MB at most from {small:,} MB to "
              f"{big:,} MB) — measured {peak[small]:.1f} → {peak[big]:.1f} MB "
              f"({grow:+.1f} MB) — {'met' if grow <= 2 else 'gap'}")
    else:
        print("- Target: tidegate peak RSS flat in size — not measured (one size only)")
    for mb in a.sizes:
        ratio = med(full, "mbps", "tidegate", mb) / med(full, "mbps", "nginx", mb)
        print(f"- Target: tidegate throughput at least 0.9 × nginx ({mb:,} MB) — measured "
              f"{ratio:.2f} × — {'met' if ratio >= 0.9 else 'gap'}")
    grow = {t: med(slow, "rss_end_kb", t) / 1024 - med(slow, "rss_1s_kb", t) / 1024
            for t in PROXIES}
    print(f"- Target: tidegate RSS flat under a slow client (at the end at most 1 MB above "
          f"the RSS after 1 s, while the rest of the read passes) — measured "
          f"{grow['tidegate']:+.1f} MB (nginx {grow['nginx']:+.1f} MB, HAProxy "
          f"{grow['HAProxy']:+.1f} MB) — {'met' if grow['tidegate'] <= 1 else 'gap'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="100,1000", help="export sizes in MB")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    cmd = " ".join(["/usr/bin/python3", "bench/s4_stream.py"] + sys.argv[1:])
    a.sizes = [int(x) for x in a.sizes.split(",")]
    if a.quick:
        a.sizes, a.rounds = [100], 1
    full, slow = [], []
    emu = None
    try:
        emu = lib.emulator({
            "projects": [{"id": f"P-{mb}", "seed": 7, "activities": mb * ACTIVITIES_PER_MB}
                         for mb in a.sizes],
            "export": {"delay": "0s", "expiry": "12h", "chunk_records": 2000}})
        emu_hdr = emu.dex_headers()
        cids = {}
        for mb in a.sizes:
            r = requests.post(emu.dex + "/public/v1/export/activities",
                                  json={"projectId": f"P-{mb}"}, headers=emu_hdr, timeout=10)
            r.raise_for_status()
            cids[mb] = r.json()["correlationId"]
        for _ in range(a.rounds):
            for mb in a.sizes:
                for t in TARGETS:
                    full.append(full_read(t, emu, emu_hdr, cids[mb], mb))
            for t in PROXIES:
                slow.append(slow_read(t, emu, emu_hdr, cids[max(a.sizes)]))
    finally:
        if emu:
            emu.stop()
    lib.save("s4_stream", {"rounds": a.rounds, "sizes_mb": a.sizes, "full": full,
                           "slow": slow})
    report(a, cmd, full, slow)


if __name__ == "__main__":
    main()
