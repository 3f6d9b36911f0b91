"""
The sd_notify protocol of tidegate.service (Type=notify), against a fake
service manager: an AF_UNIX datagram socket named by NOTIFY_SOCKET. The real
gateway says READY=1 once it serves, RELOADING=1 (with MONOTONIC_USEC) and
READY=1 around a SIGHUP reload, STOPPING=1 when SIGTERM starts the drain.
"""
import signal
import socket
import time

import pytest
import requests


@pytest.fixture
def manager(tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(10)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    yield s
    s.close()


def next_message(sock):
    fields = {}
    for line in sock.recv(4096).decode().splitlines():
        k, _, v = line.partition("=")
        fields[k] = v
    return fields


def test_ready_reloading_stopping(emulator, make_gateway, manager):
    gw = make_gateway(emulator)
    m = next_message(manager)
    assert m.get("READY") == "1", m
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200

    gw.send_signal(signal.SIGHUP)
    m = next_message(manager)
    assert m.get("RELOADING") == "1", m
    assert abs(int(m["MONOTONIC_USEC"]) / 1e6 - time.monotonic()) < 5
    m = next_message(manager)
    assert m.get("READY") == "1", m
    deadline = time.monotonic() + 5
    while not any(e.get("event") == "reloaded" for e in gw.log_lines()):
        assert time.monotonic() < deadline, gw.read_log()
        time.sleep(0.05)

    gw.send_signal(signal.SIGTERM)
    m = next_message(manager)
    assert m.get("STOPPING") == "1", m
    assert gw.proc.wait(timeout=10) == 0



def test_stopping_at_sigterm_not_after_drain_delay(emulator, make_gateway, manager):
    """With drain_delay, the stop begins at SIGTERM: STOPPING=1 then, once,
    though the listeners serve a while longer."""
    gw = make_gateway(emulator, {"drain_delay": "1s"})
    assert next_message(manager).get("READY") == "1"
    t0 = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    m = next_message(manager)
    assert m.get("STOPPING") == "1", m
    assert time.monotonic() - t0 < 0.3
    assert gw.proc.wait(timeout=10) == 0
    assert time.monotonic() - t0 >= 1.0
    manager.settimeout(0.2)
    with pytest.raises(socket.timeout):
        next_message(manager)
