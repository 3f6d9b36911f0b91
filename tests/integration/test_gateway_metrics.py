"""The admin listener's /metrics as Prometheus tools read it: `promtool check
metrics` (Debian `prometheus`) finds no problem after some traffic;
tidegate_build_info and the process_* series of the client libraries are
there; every counter with labels known in advance is at 0 before any request;
latency has sub-millisecond buckets and microsecond resolution; long-polls
have their own latency series."""
import os
import re
import shutil
import subprocess
import time

import pytest
import requests

from conftest import BUILD

PROMTOOL = shutil.which("promtool")


def promtool_check(text):
    if PROMTOOL is None:
        pytest.skip("promtool not installed (Debian package prometheus, scripts/deps.sh)")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", \
        f"promtool: rc={r.returncode}\n{r.stdout}\n{r.stderr}"


def series(text, name):
    """{labels string: value} of name's samples in text."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if m and m.group(1) == name:
            out[m.group(3) or ""] = float(m.group(4))
    return out


def test_fresh_gateway_shows_every_family_at_zero(emulator, make_gateway):
    gw = make_gateway(emulator)
    text = gw.metrics()
    promtool_check(text)
    # counters at 0 before their first event, declared families with HELP/TYPE
    assert "\ntidegate_token_replays_total 0\n" in text
    assert 'tidegate_validation_failures_total{service="dex"} 0\n' in text
    assert 'tidegate_poll_requests_total{service="sim",result="long-poll"} 0\n' in text
    assert 'tidegate_webhook_attempts_total{result="delivered"} 0\n' in text
    assert 'tidegate_sweep_submissions_total{result="accepted"} 0\n' in text
    assert 'tidegate_request_target_refusals_total{service="dex",rule="percent"} 0\n' in text
    assert "# TYPE tidegate_requests_total counter\n" in text
    assert 'tidegate_request_duration_seconds_count{service="dex",op="export_get"} 0\n' in text
    assert 'tidegate_long_poll_duration_seconds_count{service="dex",op="export_get"} 0\n' \
        in text


def test_build_info_and_process_series(emulator, make_gateway):
    t0 = time.time()
    gw = make_gateway(emulator)
    text = gw.metrics()
    version = subprocess.run([os.path.join(BUILD, "tidegate"), "--version"],
                             capture_output=True, text=True).stdout.split("\n")[0].split()
    info = series(text, "tidegate_build_info")
    assert len(info) == 1 and list(info.values()) == [1.0]
    labels = dict(re.findall(r'(\w+)="([^"]*)"', list(info)[0]))
    assert labels["version"] == version[1]
    if len(version) > 2:    # "(git <describe>)"
        assert labels["commit"] == version[3].rstrip(")")
    assert "# TYPE process_cpu_seconds_total counter" in text
    cpu = series(text, "process_cpu_seconds_total")[""]
    rss = series(text, "process_resident_memory_bytes")[""]
    vsz = series(text, "process_virtual_memory_bytes")[""]
    fds = series(text, "process_open_fds")[""]
    maxfds = series(text, "process_max_fds")[""]
    start = series(text, "process_start_time_seconds")[""]
    assert 0 <= cpu < 60
    assert abs(rss / 1024 - gw.rss_kb()) < 64 * 1024, (rss, gw.rss_kb())
    assert vsz >= rss > 1 << 20
    assert 3 <= fds <= maxfds
    assert t0 - 5 < start < time.time() + 1, (t0, start)


def test_traffic_latency_resolution_long_polls_apart(make_emulator, make_gateway):
    emu = make_emulator({"export": {"delay": "30s"}})
    gw = make_gateway(emu)
    h = gw.headers()
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=h, timeout=10)
    cid = r.json()["correlationId"]
    assert requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                        headers=h, timeout=10).status_code == 202
    r = requests.get(gw.dex + "/public/export", params={"correlationId": cid, "wait": 1},
                     headers=h, timeout=10)
    assert r.status_code == 202
    assert requests.get(gw.dex + "/public/v1/no-such-thing", headers=h,
                        timeout=10).status_code == 404
    text = gw.metrics()
    promtool_check(text)
    lp = 'service="dex",op="export_get"'
    # the long-poll in its own series, the plain GET alone in the other
    assert series(text, "tidegate_long_poll_duration_seconds_count")[lp] == 1
    assert series(text, "tidegate_request_duration_seconds_count")[lp] == 1
    held = series(text, "tidegate_long_poll_duration_seconds_sum")[lp]
    assert 0.5 < held < 1.0, held
    buckets = series(text, "tidegate_long_poll_duration_seconds_bucket")
    assert buckets[lp + ',le="0.5"'] == 0 and buckets[lp + ',le="1"'] == 1
    # sub-millisecond buckets, and sums that are not rounded to the millisecond
    buckets = series(text, "tidegate_request_duration_seconds_bucket")
    assert lp + ',le="0.0001"' in buckets and lp + ',le="0.00025"' in buckets
    assert lp + ',le="0.0005"' in buckets
    sums = series(text, "tidegate_request_duration_seconds_sum")
    assert all(v > 0 for k, v in sums.items()
               if series(text, "tidegate_request_duration_seconds_count")[k] > 0), sums
    assert any(round(v * 1000) != v * 1000 for v in sums.values() if v > 0), sums
    codes = series(text, "tidegate_requests_total")
    assert codes[lp + ',code="202"'] == 2
    assert sum(v for k, v in codes.items() if k.endswith('code="404"')) == 1, codes
    assert series(text, "tidegate_poll_requests_total")[
        'service="dex",result="long-poll"'] == 1
