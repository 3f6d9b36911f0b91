"""Large bodies stream through the gateway with backpressure: a 1 GB export
is relayed with the gateway's peak RSS under 32 MB, and a slow client holds
the vendor back instead of filling the gateway's memory. Runs the release
build (RSS under ASan is meaningless)."""
import time

import requests

from conftest import RELEASE_BUILD

GIB = 1 << 30
# 2,900,000 generated activities make a little over 1 GiB of JSON.
BIG = {"projects": [{"id": "P-BIG", "seed": 7, "activities": 2900000}],
       "export": {"delay": "0s", "chunk_records": 2000}}


def start(make_emulator, make_gateway):
    emu = make_emulator(BIG, build=RELEASE_BUILD)
    # the relay from the vendor: no spool (test_gateway_spool.py covers that)
    gw = make_gateway(emu, {"log_level": "warn", "poll": {"spool_max_bytes": 0}},
                      build=RELEASE_BUILD)
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-BIG"},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return emu, gw, r.json()["correlationId"]


def test_one_gib_export_streams_in_flat_memory(make_emulator, make_gateway):
    emu, gw, cid = start(make_emulator, make_gateway)
    base_rss = gw.rss_kb()
    total = 0
    tail = b""
    with requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                      headers=gw.headers(), stream=True, timeout=120) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "application/json"
        for chunk in r.iter_content(1 << 20):
            total += len(chunk)
            tail = (tail + chunk)[-64:]
    assert total > GIB, total
    assert tail.endswith(b"}]")
    peak = gw.hwm_kb()
    print(f"relayed {total} bytes; gateway RSS {base_rss} kB before, peak {peak} kB")
    assert peak < 32 * 1024, peak


def test_slow_client_holds_the_vendor_back(make_emulator, make_gateway):
    emu, gw, cid = start(make_emulator, make_gateway)
    got = 0
    with requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                      headers=gw.headers(), stream=True, timeout=60) as r:
        assert r.status_code == 200
        deadline = time.monotonic() + 3
        for chunk in r.iter_content(64 * 1024):
            got += len(chunk)
            time.sleep(0.01)                  # about 6 MB/s
            if time.monotonic() > deadline:
                break
        assert gw.hwm_kb() < 32 * 1024
    # the client closed early: the gateway dropped the stream and is still well
    time.sleep(0.3)
    assert got < 64 << 20
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200
    gw.own("nope")
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "nope"},
                     headers=gw.headers(), timeout=10)
    assert r.status_code == 404
