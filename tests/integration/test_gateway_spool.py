"""Final answers larger than poll.cache_max_body are spooled: K callers of a
multi-MB export cost one vendor download, all get the same bytes, the
gateway's memory stays flat (release build), and the spool file is removed
when the entry expires."""
import concurrent.futures
import os
import time

import requests

from conftest import RELEASE_BUILD

# about 365 bytes per activity: ~5 MB and ~55 MB exports
MB5 = {"projects": [{"id": "P-SPOOL", "seed": 5, "sites": 5, "activities": 14000}],
       "export": {"delay": "0s"}}
MB55 = {"projects": [{"id": "P-SPOOL", "seed": 5, "sites": 5, "activities": 150000}],
        "export": {"delay": "0s"}}


def ready_export(gw, emu):
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-SPOOL"},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    return r.json()["correlationId"]


def get(gw, cid, wait=None):
    params = {"correlationId": cid}
    if wait:
        params["wait"] = str(wait)
    return requests.get(gw.dex + "/public/export", params=params, headers=gw.headers(),
                        timeout=120)


def spool_files(gw):
    d = os.path.join(gw.tmp, "spool")
    return [os.path.join(d, f) for f in os.listdir(d)] if os.path.isdir(d) else []


def test_ten_callers_one_vendor_download_same_bytes_file_removed(make_emulator, make_gateway):
    emu = make_emulator(MB5)
    gw = make_gateway(emu, {"poll": {"terminal_ttl": "1s"}})
    cid = ready_export(gw, emu)
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        rs = list(pool.map(lambda i: get(gw, cid, wait=10 if i % 2 else None), range(10)))
    assert all(r.status_code == 200 for r in rs), [r.status_code for r in rs]
    body = rs[0].content
    assert len(body) > 4 << 20 and body.endswith(b"]")
    assert all(r.content == body for r in rs)
    assert emu.calls("GET /public/export") == 1
    # later callers are served from the spool too, with its length known
    r = get(gw, cid)
    assert r.content == body and r.headers["X-Tidegate-Poll"] == "cached"
    assert r.headers["Content-Length"] == str(len(body))
    assert emu.calls("GET /public/export") == 1
    files = spool_files(gw)
    assert len(files) == 1 and os.path.getsize(files[0]) == len(body)
    assert os.stat(files[0]).st_mode & 0o777 == 0o600
    assert gw.metric("tidegate_poll_spool_bytes") == len(body)
    assert gw.metric("tidegate_poll_spooled_total") == 1
    assert gw.metric("tidegate_poll_cache_bytes") == 0
    # expiry with the entry (terminal_ttl 1 s) removes the file
    deadline = time.monotonic() + 10
    while spool_files(gw) or gw.metric("tidegate_poll_spool_files") != 0:
        assert time.monotonic() < deadline, spool_files(gw)
        time.sleep(0.2)
    assert gw.metric("tidegate_poll_spool_bytes") == 0


def test_leftover_spool_files_removed_at_start(make_emulator, make_gateway, tmp_path):
    emu = make_emulator()
    d = tmp_path / "spool-elsewhere"
    d.mkdir()
    (d / "tg-spool-leftover").write_bytes(b"x" * 1000)
    (d / "keep-me").write_bytes(b"y")
    make_gateway(emu, {"poll": {"spool_dir": str(d)}})
    assert sorted(os.listdir(d)) == ["keep-me"]


def test_answer_over_the_spool_cap_streams_per_caller(make_emulator, make_gateway):
    emu = make_emulator(MB5)
    gw = make_gateway(emu, {"poll": {"spool_max_bytes": "2MB"}})
    cid = ready_export(gw, emu)
    try:
        first = get(gw, cid)
        cut = len(first.content) < 4 << 20
    except requests.exceptions.RequestException:
        cut = True
    assert cut      # the spool outgrew its cap: its readers were reset, never truncated
    r = get(gw, cid)
    assert r.status_code == 200 and len(r.content) > 4 << 20 and r.content.endswith(b"]")
    assert not spool_files(gw) and gw.metric("tidegate_poll_spool_bytes") == 0


def test_spooled_callers_memory_stays_flat(make_emulator, make_gateway):
    emu = make_emulator(MB55, build=RELEASE_BUILD)
    gw = make_gateway(emu, {"log_level": "warn"}, build=RELEASE_BUILD)
    cid = ready_export(gw, emu)
    base = gw.rss_kb()
    sizes = set()

    def read(_):
        n = 0
        with requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                          headers=gw.headers(), stream=True, timeout=120) as r:
            assert r.status_code == 200
            for chunk in r.iter_content(1 << 16):
                n += len(chunk)
        return n

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        sizes = set(pool.map(read, range(10)))
    peak = gw.hwm_kb()
    (size,) = sizes
    print(f"10 callers of {size} bytes: 1 vendor GET, gateway RSS {base} kB before, "
          f"peak {peak} kB")
    assert size > 50 << 20
    assert emu.calls("GET /public/export") == 1
    assert peak - base < 24 * 1024, (base, peak)


def test_slow_reader_of_the_spool_holds_only_a_chunk(make_emulator, make_gateway):
    emu = make_emulator(MB55, build=RELEASE_BUILD)
    gw = make_gateway(emu, {"log_level": "warn"}, build=RELEASE_BUILD)
    cid = ready_export(gw, emu)
    base = gw.rss_kb()
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
        # the vendor's 55 MB went to the spool; the gateway holds a chunk per reader
        assert gw.metric("tidegate_poll_spool_bytes") > 50 << 20
        peak = gw.hwm_kb()
    assert got < 40 << 20
    assert peak - base < 16 * 1024, (base, peak)
