"""The gateway's lifecycle as a load balancer and an operator see it: on
SIGTERM /readyz answers 503 for drain_delay while the listeners still accept
and serve, then the drain; SIGHUP's outcome in
tidegate_config_last_reload_successful and its timestamp; a changed listen
address rebound on SIGHUP; the pid file and `tidegate -s`; the version line
first in the log; `-T`, the effective configuration with secrets redacted."""
import signal
import time

import pytest
import requests

from test_gateway_drain import in_thread
from test_gateway_metrics import promtool_check


def wait_event(gw, event, n=1, timeout=5.0):
    """Until the log holds n lines of event; they are returned."""
    deadline = time.monotonic() + timeout
    while True:
        got = [e for e in gw.log_lines() if e.get("event") == event]
        if len(got) >= n:
            return got
        assert time.monotonic() < deadline, f"no {event}:\n" + gw.read_log()
        time.sleep(0.02)


def readyz(gw):
    r = requests.get(gw.admin + "/readyz", timeout=2)
    return r.status_code, r.json()


def refused(url, timeout=1):
    """1 when a new connection to url is refused."""
    try:
        requests.get(url, timeout=timeout)
    except requests.ConnectionError:
        return True
    return False


def test_drain_delay_readyz_503_while_listeners_serve(emulator, make_gateway):
    delay = 1.5
    gw = make_gateway(emulator, {"drain_delay": "1500ms", "drain_timeout": "10s"})
    gw.wait_tokens()
    gw.own("x", "y")
    assert readyz(gw)[0] == 200
    t0 = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    while True:                                  # the flip, measured
        status, body = readyz(gw)
        if status == 503:
            break
        assert time.monotonic() - t0 < 0.05, body
    flipped = time.monotonic() - t0
    assert flipped < 0.05, flipped
    assert body["status"] == "draining" and body["draining"] is True
    assert body["ready"] is False
    assert delay * 1000 - 100 <= body["listeners_stop_in_ms"] <= delay * 1000, body
    assert requests.get(gw.admin + "/healthz", timeout=2).status_code == 200
    # the data listener accepts new connections and serves during the delay
    time.sleep(0.5)
    with requests.Session() as s:
        r = s.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers(), timeout=5)
    assert r.status_code == 404 and r.headers.get("Connection") != "close", r.text
    status, body = readyz(gw)
    assert status == 503 and 0 < body["listeners_stop_in_ms"] < (delay - 0.4) * 1000, body
    # a request in flight when the delay ends is answered
    while time.monotonic() - t0 < delay - 0.3:
        time.sleep(0.01)
    emulator.fault(path="/public/export", latencyMs=1200, count=1)
    th, slow = in_thread(lambda: requests.get(gw.dex + "/public/export?correlationId=y",
                                              headers=gw.headers(), timeout=10))
    # the listeners stop accepting when the delay ends, not before
    last_ok = None
    while not refused(gw.dex + "/healthz", timeout=0.5):
        last_ok = time.monotonic() - t0
        assert last_ok < delay + 0.5, "still accepting after the delay"
        time.sleep(0.01)
    stopped = time.monotonic() - t0
    assert last_ok is not None and last_ok >= delay - 0.3, last_ok
    assert delay <= stopped < delay + 0.15, stopped
    status, body = readyz(gw)
    assert status == 503 and body["listeners_stop_in_ms"] == 0, body
    th.join()
    assert slow["r"].status_code == 404, slow      # finished through the drain
    assert slow["t"] - t0 > delay + 0.5
    assert gw.proc.wait(timeout=10) == 0
    exited = time.monotonic() - t0
    assert exited < slow["t"] - t0 + 0.5, (exited, slow["t"] - t0)
    events = [e["event"] for e in gw.log_lines() if "event" in e]
    assert "drain_delay" in events and events.index("drain_delay") < events.index("draining")


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_second_sigterm_or_sigint_cuts_the_delay(emulator, make_gateway, second):
    gw = make_gateway(emulator, {"drain_delay": "30s"})
    gw.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert readyz(gw)[0] == 503
    assert not refused(gw.dex + "/healthz")
    t0 = time.monotonic()
    gw.send_signal(second)
    assert gw.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 1.0
    assert any(e.get("event") == "drain_delay_cut" for e in gw.log_lines())


def test_sigint_skips_the_delay(emulator, make_gateway):
    gw = make_gateway(emulator, {"drain_delay": "30s"})
    t0 = time.monotonic()
    gw.send_signal(signal.SIGINT)
    assert gw.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 1.0
    assert not any(e.get("event") == "drain_delay" for e in gw.log_lines())


RELOAD_OK = "tidegate_config_last_reload_successful"
RELOAD_AT = "tidegate_config_last_reload_success_timestamp_seconds"


def test_reload_metrics_follow_each_sighup(emulator, make_gateway):
    before = time.time()
    gw = make_gateway(emulator)
    text = gw.metrics()
    promtool_check(text)
    assert f"# TYPE {RELOAD_OK} gauge\n" in text and f"# TYPE {RELOAD_AT} gauge\n" in text
    assert f"# HELP {RELOAD_OK} " in text and f"# HELP {RELOAD_AT} " in text
    assert gw.metric(RELOAD_OK) == 1
    started = gw.metric(RELOAD_AT)
    assert before - 1 <= started <= time.time(), (before, started)
    # a refused file: 0, the timestamp of the last one loaded kept
    good = open(gw.config_path).read()
    with open(gw.config_path, "a") as f:
        f.write("bogus: 1\n")
    time.sleep(0.05)
    gw.send_signal(signal.SIGHUP)
    wait_event(gw, "reload_failed")
    assert gw.metric(RELOAD_OK) == 0
    assert gw.metric(RELOAD_AT) == started
    promtool_check(gw.metrics())
    # the file mended: 1 and a new timestamp
    with open(gw.config_path, "w") as f:
        f.write(good)
    time.sleep(0.05)
    sent = time.time()
    gw.send_signal(signal.SIGHUP)
    wait_event(gw, "reloaded")
    assert gw.metric(RELOAD_OK) == 1
    at = gw.metric(RELOAD_AT)
    assert sent - 0.01 <= at <= time.time() and at > started, (sent, at, started)
