"""SIGTERM drains as Kubernetes expects: the admin listener stays up and
/readyz answers 503 "draining" until the process exits; waiting long-polls
are answered at once with the job's current state; past drain_timeout what
is left is cut by the gateway and the access log says so (drain_timeout, not
499 client_closed); probes accept HEAD."""
import json
import signal
import socket
import threading
import time

import pytest
import requests


def in_thread(fn):
    """Run fn in a thread; its result (or exception) lands in the returned dict."""
    out = {}

    def run():
        t0 = time.monotonic()
        try:
            out["r"] = fn()
        except Exception as e:                  # noqa: BLE001 - reported by the test
            out["exc"] = e
        out["t"] = time.monotonic()
        out["elapsed"] = out["t"] - t0

    t = threading.Thread(target=run)
    t.start()
    return t, out


def access(gw, path=None):
    return [e for e in gw.log_lines() if e.get("event") == "access"
            and (path is None or e["path"] == path)]


def export(gw):
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


def long_poll(gw, cid, wait=30, session=None):
    return (session or requests).get(gw.dex + "/public/export",
                                     params={"correlationId": cid, "wait": str(wait)},
                                     headers=gw.headers(), timeout=60)


def wait_waiting(gw, n=1):
    """Until n long-polls wait in the multiplexer."""
    deadline = time.monotonic() + 10
    while gw.metric("tidegate_poll_requests_total", service="dex", result="long-poll") < n:
        assert time.monotonic() < deadline, "the long-poll is not waiting"
        time.sleep(0.02)


def test_readyz_says_draining_until_the_process_exits(emulator, make_gateway):
    gw = make_gateway(emulator, {"drain_timeout": "60s"})
    gw.wait_tokens()
    gw.own("x")
    assert requests.get(gw.admin + "/readyz", timeout=5).json()["status"] == "ready"
    emulator.fault(path="/public/export", latencyMs=2500, count=1)
    t, slow = in_thread(lambda: requests.get(gw.dex + "/public/export?correlationId=x",
                                             headers=gw.headers(), timeout=30))
    time.sleep(0.3)
    gw.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    with pytest.raises(requests.ConnectionError):       # no new client connections
        requests.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers(),
                     timeout=2)
    probes = []
    while gw.proc.poll() is None:
        try:
            r = requests.get(gw.admin + "/readyz", timeout=2)
            h = requests.get(gw.admin + "/healthz", timeout=2)
            hd = requests.head(gw.admin + "/readyz", timeout=2)
        except requests.ConnectionError:
            break                               # the process is exiting
        probes.append((time.monotonic(), r.status_code, r.json(), h.status_code,
                       hd.status_code, hd.content))
        time.sleep(0.05)
    t.join()
    assert gw.proc.wait(timeout=10) == 0
    assert slow["r"].status_code == 404         # the request in flight was finished
    # the admin listener answered through the whole drain, up to its end
    assert len(probes) >= 10, probes
    assert probes[-1][0] > slow["t"] - 0.5, (probes[-1][0], slow["t"])
    for _, status, body, health, head, head_body in probes:
        assert status == 503 and body["status"] == "draining", body
        assert body["draining"] is True and body["ready"] is False
        assert health == 200
        assert head == 503 and head_body == b""


def test_long_poll_answered_at_once_on_sigterm(make_emulator, make_gateway):
    emu = make_emulator({"export": {"delay": "20s"}})
    gw = make_gateway(emu, {"drain_timeout": "60s"})
    cid = export(gw)
    t, lp = in_thread(lambda: long_poll(gw, cid, wait=30))
    wait_waiting(gw)
    t0 = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    t.join(timeout=10)
    r = lp["r"]
    answered = lp["t"] - t0
    assert r.status_code == 202, r.text
    assert answered < 0.5, answered             # at once, not at the export's readiness
    assert r.json()["correlationId"] == cid and r.json()["status"] == "IN_PROGRESS"
    assert 0 < int(r.headers["Retry-After"]) <= 20
    assert r.headers["X-Tidegate-Poll"] == "long-poll"
    assert gw.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 3
    line = access(gw, "/public/export")[-1]
    assert line["status"] == 202 and line["error"] is None


def test_a_poll_made_while_draining_does_not_wait(make_emulator, make_gateway):
    """A keep-alive connection opened before SIGTERM may still carry a
    long-poll while a slow request holds the drain: it is answered at once."""
    emu = make_emulator({"export": {"delay": "20s"}})
    gw = make_gateway(emu, {"drain_timeout": "60s"})
    gw.own("x")
    cid = export(gw)
    s = requests.Session()
    assert s.get(gw.dex + "/public/export", params={"correlationId": cid},
                 headers=gw.headers(), timeout=10).status_code == 202
    emu.fault(path="/public/export", latencyMs=3000, count=1)
    t, slow = in_thread(lambda: requests.get(gw.dex + "/public/export?correlationId=x",
                                             headers=gw.headers(), timeout=30))
    time.sleep(0.3)
    gw.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    t0 = time.monotonic()
    r = long_poll(gw, cid, wait=30, session=s)
    assert r.status_code == 202 and time.monotonic() - t0 < 0.5
    assert r.headers.get("Connection") == "close"
    t.join()
    assert slow["r"].status_code == 404
    assert gw.proc.wait(timeout=10) == 0


def test_drain_timeout_is_logged_as_the_gateways_cut(emulator, make_gateway):
    gw = make_gateway(emulator, {"drain_timeout": "500ms"})
    gw.own("x")
    # a request the drain's deadline cuts: 503 DRAIN_TIMEOUT, logged as such
    emulator.fault(path="/public/export", latencyMs=5000, count=1)
    t, slow = in_thread(lambda: requests.get(gw.dex + "/public/export?correlationId=x",
                                             headers={**gw.headers(),
                                                      "X-Request-Id": "cut-1"}, timeout=30))
    time.sleep(0.3)
    t0 = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    t.join()
    r = slow["r"]
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "DRAIN_TIMEOUT" and r.json()["requestId"] == "cut-1"
    assert 0.4 < slow["t"] - t0 < 2.5, slow["t"] - t0
    assert gw.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 3
    cut = [e for e in access(gw) if e["id"] == "cut-1"]
    assert [(e["status"], e["error"]) for e in cut] == [(503, "drain_timeout")], cut
    assert any(e.get("event") == "drain_timeout" for e in gw.log_lines())


def test_drain_timeout_resets_an_answer_already_started(make_emulator, make_gateway):
    """A relayed answer the client stopped reading: past drain_timeout its
    connection is reset (a truncated body must not look complete) and the
    access line keeps the status sent, with error drain_timeout; a client
    that closes such an answer itself is still client_closed."""
    emu = make_emulator({"projects": [{"id": "P-BIG", "seed": 7, "activities": 200000}],
                         "export": {"delay": "0s", "chunk_records": 2000}})
    gw = make_gateway(emu, {"drain_timeout": "1s", "poll": {"spool_max_bytes": 0}})
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-BIG"},
                      headers=gw.headers(), timeout=10)
    cid = r.json()["correlationId"]
    with requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                      headers={**gw.headers(), "X-Request-Id": "gone-1"}, stream=True,
                      timeout=30) as r:
        assert r.status_code == 200
        r.raw.read(1024)                        # then the client goes away
    deadline = time.monotonic() + 10
    while not (gone := [e for e in access(gw) if e["id"] == "gone-1"]):
        assert time.monotonic() < deadline, "no access line for the client that left"
        time.sleep(0.05)
    assert [(e["status"], e["error"]) for e in gone] == [(200, "client_closed")], gone
    with requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                      headers={**gw.headers(), "X-Request-Id": "cut-2"}, stream=True,
                      timeout=30) as r:
        assert r.status_code == 200
        r.raw.read(1024)                        # then the client reads no more
        time.sleep(0.5)
        t0 = time.monotonic()
        gw.send_signal(signal.SIGTERM)
        assert gw.proc.wait(timeout=10) == 0
        assert time.monotonic() - t0 < 4
        with pytest.raises(Exception):        # reset: the body never ends well
            while r.raw.read(1 << 20):
                pass
    cut = [e for e in access(gw) if e["id"] == "cut-2"]
    assert [(e["status"], e["error"]) for e in cut] == [(200, "drain_timeout")], cut


def raw(gw, data):
    """Send data on one admin connection and read until the server closes."""
    s = socket.create_connection(("127.0.0.1", gw.ports["admin"]), timeout=10)
    s.sendall(data)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    return out


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_probes_accept_head(gateway, path):
    gateway.wait_tokens()
    get = requests.get(gateway.admin + path, timeout=5)
    head = requests.head(gateway.admin + path, timeout=5)
    assert head.status_code == get.status_code == 200
    assert head.headers["Content-Type"] == get.headers["Content-Type"]
    assert head.content == b""
    if path == "/healthz":
        assert int(head.headers["Content-Length"]) == len(get.content)
    else:                                       # the figures move between two scrapes
        assert int(head.headers["Content-Length"]) > 0
    # no body on the wire: the next answer on the connection starts right after
    out = raw(gateway, f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\n"
                       "Host: x\r\nConnection: close\r\n\r\n".encode())
    first, rest = out.split(b"\r\n\r\n", 1)
    assert first.startswith(b"HTTP/1.1 200"), out
    assert rest.startswith(b"HTTP/1.1 200"), out
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1]) == {"status": "ok"}
    assert requests.post(gateway.admin + path, timeout=5).status_code == 405
