#!/usr/bin/env python3
"""
bench/s2_import.py - Scenario 2: POST of an activity import, validated.

tidegate receives POST /public/v1/import/activities?projectId=P-DEMO and
checks every row (docs/validation.md) before sending it to the stub
upstream; nginx and HAProxy proxy the same body to the stub unchecked; the
stub asked directly is the ceiling; it reads each body whole before it
answers (lib.stub(read_body=True)), as the vendor does. Bodies of 1 KB,
64 KB and 1 MB are JSON arrays of valid activities (every field, unique ids)
padded to the exact size; each is first checked with ?dryRun=true and one
real POST.

A warm-up per system, then ROUNDS interleaved rounds (each round runs every
system once per body size, the order rotated), wrk at 64 connections for
SECONDS with bench/wrk/post_file.lua. Every answer must be 2xx: a run with
a non-2xx answer or a socket error is flagged, so a 400 cannot pass as
speed.

Prints a Markdown section on stdout, progress on stderr; raw figures in
bench/results/s2_import.json. Loopback only.

    /usr/bin/python3 bench/s2_import.py [--rounds 5] [--seconds 2] [--quick]

--quick: 3 rounds of 1 s (under a minute).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

PATH = "/public/v1/import/activities?projectId=P-DEMO"
SIZES = (("1 KB", 1024), ("64 KB", 64 * 1024), ("1 MB", 1024 * 1024))
CONNS = 64
SCRIPT = os.path.join(lib.HERE, "wrk", "post_file.lua")


T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:5.1f}s]", *a, file=sys.stderr, flush=True)


def activity(i):
    return {"id": f"B-{i:07d}", "siteId": f"S-{i % 3 + 1}", "status": "PLANNED",
            "activityCategory": "MAINTENANCE", "workPackageId": f"WP-{i % 50}",
            "startDate": "2024-05-01T08:00:00Z", "endDate": "2024-05-01T16:00:00Z",
            "teams": ["Alpha", "Bravo"], "manpower": {"Alpha": 2, "Bravo": 1},
            "additionalClientWork": False, "externalRemarks": ""}


def body(size):
    """A JSON array of valid activities, exactly size bytes (the last row's
    externalRemarks pads it)."""
    rows, used = [], 2
    while True:
        row = activity(len(rows))
        n = len(json.dumps(row, separators=(",", ":"))) + (1 if rows else 0)
        if rows and used + n > size:
            break
        rows.append(row)
        used += n
    rows[-1]["externalRemarks"] = "x" * (size - used)
    data = json.dumps(rows, separators=(",", ":")).encode()
    assert len(data) == size, (len(data), size)
    return data, len(rows)


def check(tg, data, rows, headers):
    """The body is valid for tidegate and goes through."""
    h = dict(headers, **{"Content-Type": "application/json"})
    r = requests.post(tg.url + PATH + "&dryRun=true", data=data, headers=h, timeout=30)
    if r.status_code != 200 or r.json().get("rows") != rows:
        raise RuntimeError(f"dry run refused the body: {r.status_code} {r.text[:500]}")
    r = requests.post(tg.url + PATH, data=data, headers=h, timeout=30)
    if r.status_code != 200:
        raise RuntimeError(f"import refused: {r.status_code} {r.text[:500]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="3 rounds of 1 s")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds = 3, 1
    a.rounds = max(1, min(a.rounds, 50))
    a.seconds = max(1, min(a.seconds, 60))
    os.sched_setaffinity(0, {lib.LOAD_CPU})

    headers = {"Authorization": "Bearer " + lib.TEST_KEY}
    tmp = tempfile.mkdtemp(prefix="tg-bench-s2-")
    files, nrows = {}, {}
    for label, size in SIZES:
        data, nrows[label] = body(size)
        files[label] = os.path.join(tmp, f"body-{size}.json")
        with open(files[label], "wb") as f:
            f.write(data)

    started, data = [], {"rounds": a.rounds, "seconds": a.seconds, "rows": nrows}
    bad = []
    try:
        systems = lib.start_systems(started, read_body=True)
        names = list(systems)
        for label, _ in SIZES:
            with open(files[label], "rb") as f:
                check(systems["tidegate"], f.read(), nrows[label], headers)

        def run(name, label):
            os.environ["WRK_BODY_FILE"] = files[label]
            r = lib.wrk(systems[name].url + PATH, CONNS, a.seconds, headers=headers,
                        script=SCRIPT)
            if r["requests"] == 0 or r["non2xx"] or r["errors"]:
                bad.append((name, label, r["requests"], r["non2xx"], r["errors"]))
                log(f"s2: {name} {label}: {r['non2xx']} non-2xx, {r['errors']} errors")
            return r

        log("s2: warm-up")
        for n in names:
            run(n, "64 KB")
        thr = {label: {n: [] for n in names} for label, _ in SIZES}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            log(f"s2: round {r + 1}/{a.rounds}: {', '.join(order)}")
            for label, _ in SIZES:
                for n in order:
                    thr[label][n].append(run(n, label)["rps"])
        data["throughput"] = thr
        data["flagged"] = bad
    finally:
        for d in reversed(started):
            d.stop()
        for f in files.values():
            os.unlink(f)
        os.rmdir(tmp)
    lib.save("s2_import", data)

    cmd = "/usr/bin/python3 bench/s2_import.py" + (" --quick" if a.quick else
                                                   f" --rounds {a.rounds} --seconds {a.seconds}")
    out = ["### 2. POST import with validation", "", "    " + cmd, "",
           f"wrk, 1 thread, {CONNS} connections, {a.seconds} s per run, {a.rounds} interleaved "
           f"rounds; POST {PATH} with a JSON array of valid activities (tidegate checks every "
           f"row; nginx and HAProxy pass the body through unchecked). Requests/s, median "
           f"(min-max); MB/s of request bodies in brackets under the median.", ""]
    rows = []
    for label, size in SIZES:
        t = thr[label]
        ratios = {o: [x / y for x, y in zip(t["tidegate"], t[o])] for o in ("nginx", "HAProxy")}
        rows.append([f"{label} ({nrows[label]:,} rows)"] +
                    [f"{lib.fmt(t[n])} [{statistics.median(t[n]) * size / 1e6:,.0f} MB/s]"
                     for n in names] +
                    [lib.fmt(ratios[o], 2) for o in ("nginx", "HAProxy")])
    out.append(lib.table(["body"] + names + ["tidegate/nginx", "tidegate/HAProxy"], rows))
    out += ["", "Ratios: per round, median (min-max).", ""]
    t = thr["64 KB"]
    ratio = statistics.median(x / y for x, y in zip(t["tidegate"], t["nginx"]))
    ok64 = not any(b[1] == "64 KB" for b in bad)
    verdict = ("met" if ratio >= 0.8 else f"gap {0.8 - ratio:.2f}") if ok64 else \
        "invalid (non-2xx answers or errors)"
    out.append(f"- Target throughput tidegate/nginx at 64 KB ≥ 0.8 — measured {ratio:.2f} — "
               f"{verdict}")
    if bad:
        out.append("- Every answer 2xx — gap: runs with non-2xx answers or socket errors "
                   "(system, body, requests, non-2xx, errors): "
                   + "; ".join(f"{b[0]} {b[1]} {b[2]} {b[3]} {b[4]}" for b in bad))
    else:
        out.append("- Target every answer 2xx — measured 0 non-2xx answers and 0 socket errors "
                   "in every run — met")
    print("\n".join(out))


if __name__ == "__main__":
    main()
