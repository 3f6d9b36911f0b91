"""Vendor connections under clients that never read, at small scale: one API
key holds at most pool.max_conns_per_key of the vendor connections, so a
request of another key is answered at once; a client that takes no byte of
its answer for client_send_timeout is reset and its vendor request cancelled,
so the connections come back; a request that waits pool.queue_timeout for a
connection is answered 503 UPSTREAM_BUSY with Retry-After, and nothing of it
reaches the vendor. Long-polls and idle keep-alive connections outlast the
send timeout. Key names starting with '(' are refused (they name the shared
allowances of callers without a key)."""
import concurrent.futures
import hashlib
import os
import socket
import subprocess
import time

import requests

from conftest import BUILD, TEST_KEY, TEST_KEY_SHA

GREEDY_KEY = "greedy-key"
GREEDY_SHA = hashlib.sha256(GREEDY_KEY.encode()).hexdigest()
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "greedy", "sha256": GREEDY_SHA, "services": ["dex"]}]
# About 37 MB of JSON: far more than the socket buffers and the relay's
# 1 MB high mark between the emulator and a client that never reads.
BIG = {"projects": [{"id": "P-DEMO", "seed": 1, "sites": 5, "activities": 50},
                    {"id": "P-BIG", "seed": 7, "activities": 100000}],
       "export": {"delay": "0s", "chunk_records": 2000}}
STALLED = 6


def until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def export(gw, key, project="P-DEMO"):
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": project},
                      headers=gw.headers(key), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


def stalled_get(gw, path, key):
    """A client that sends its request and never reads: a 4 KB receive buffer."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", gw.ports["dex"]))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Authorization: Bearer {key}\r\n\r\n".encode())
    return s


def read_to_end(s, timeout=10):
    """What the client gets when it finally reads: 'reset' or 'eof', and bytes."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return "eof", got
            got += b
    except ConnectionResetError:
        return "reset", got


def read_reply(s):
    """One reply with a Content-Length off a keep-alive socket: status, body."""
    s.settimeout(5)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        assert b, "connection closed"
        buf += b
    head, _, body = buf.partition(b"\r\n\r\n")
    length = [int(ln.split(b":")[1]) for ln in head.split(b"\r\n")
              if ln.lower().startswith(b"content-length:")][0]
    while len(body) < length:
        b = s.recv(65536)
        assert b, "connection closed"
        body += b
    return int(head.split(b" ")[1]), body


def owner(gw, name, state):
    return gw.metric("tidegate_upstream_owner_connections", service="dex", owner=name,
                     state=state)


def test_stalled_readers_of_one_key_cannot_starve_another(make_emulator, make_gateway):
    emu = make_emulator(BIG)
    gw = make_gateway(emu, {"keys": KEYS, "client_send_timeout": "1500ms",
                            "pool": {"max_conns": 4, "max_conns_per_key": 2,
                                     "queue_timeout": "60s"},
                            # each reader streams its own copy (no shared spool)
                            "poll": {"spool_max_bytes": 0}})
    gw.wait_tokens()
    cid = export(gw, GREEDY_KEY, "P-BIG")
    requests.delete(emu.dex + "/__emulator/stats")
    socks = [stalled_get(gw, f"/public/export?correlationId={cid}", GREEDY_KEY)
             for _ in range(STALLED)]
    try:
        # greedy holds its two connections; its other requests wait for them
        until(lambda: owner(gw, "greedy", "busy") == 2 and
              owner(gw, "greedy", "queued") == STALLED - 2, 10, "greedy at its cap")
        t0 = time.monotonic()
        r = requests.post(gw.dex + "/public/v1/export/activities",
                          json={"projectId": "P-DEMO"}, headers=gw.headers(TEST_KEY),
                          timeout=10)
        elapsed = time.monotonic() - t0
        assert r.status_code == 200, r.text
        assert r.json()["correlationId"]
        assert elapsed < 1.0, elapsed
        assert gw.metric("tidegate_upstream_owner_waits_total", service="dex",
                         owner="greedy") >= 1

        # every stalled client is reset in turn, and its vendor connection
        # handed to the next; in the end no connection is held
        until(lambda: gw.metric("tidegate_client_send_timeouts_total", service="dex")
              == STALLED, 60, "stalled clients dropped")
        print(f"another key answered in {elapsed * 1000:.0f} ms; {STALLED} stalled clients "
              f"reset within {time.monotonic() - t0:.1f} s")
        until(lambda: gw.metric("tidegate_upstream_connections", service="dex",
                                state="busy") == 0, 10, "vendor connections released")
        assert owner(gw, "greedy", "busy") == 0 and owner(gw, "greedy", "queued") == 0
        assert emu.calls("GET /public/export") == 1 + STALLED  # the poll's probe + each
        for s in socks:
            how, got = read_to_end(s)
            assert how == "reset", (how, len(got))
            assert got.startswith(b"HTTP/1.1 200 ")
    finally:
        for s in socks:
            s.close()
    dropped = [e for e in gw.log_lines() if e.get("event") == "access" and
               e.get("key") == "greedy" and e.get("error") == "client_send_timeout"]
    assert len(dropped) == STALLED
    assert len([e for e in gw.log_lines() if e.get("event") == "client_send_timeout"]) \
        == STALLED
    # the pool serves on
    assert requests.get(gw.dex + "/public/export", params={"correlationId": export(gw,
                        TEST_KEY)}, headers=gw.headers(), timeout=10).status_code in (200, 202)


def test_queue_deadline_answers_503_upstream_busy(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"pool": {"max_conns": 2, "max_conns_per_key": 2,
                                     "queue_timeout": "1s"}})
    gw.wait_tokens()
    emu.fault(method="POST", path="/public/v1/export", latencyMs=4000)
    requests.delete(emu.dex + "/__emulator/stats")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = [pool.submit(export, gw, TEST_KEY) for _ in range(2)]
        until(lambda: gw.metric("tidegate_upstream_connections", service="dex",
                                state="busy") == 2, 5, "both connections busy")
        t0 = time.monotonic()
        r = requests.post(gw.dex + "/public/v1/export/activities",
                          json={"projectId": "P-DEMO"}, headers=gw.headers(), timeout=10)
        elapsed = time.monotonic() - t0
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == "1"
        assert r.headers["Content-Type"] == "application/json"
        body = r.json()
        assert body["statusCode"] == 503 and body["error"] == "UPSTREAM_BUSY"
        assert "all 2 connections are busy" in body["message"], body
        assert body["requestId"] == r.headers["X-Request-Id"]
        assert 0.9 < elapsed < 3, elapsed
        for f in slow:
            assert f.result()                      # the two in flight are unharmed
    assert emu.calls("POST /public/v1/export/activities") == 2   # nothing of the third
    assert gw.metric("tidegate_upstream_queue_timeouts_total", service="dex") == 1
    assert gw.metric("tidegate_upstream_owner_queue_timeouts_total", service="dex",
                     owner="test") == 1
    assert gw.metric("tidegate_requests_total", service="dex", op="export", code="503") == 1


def test_one_key_at_its_cap_is_told_so(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"keys": KEYS, "pool": {"max_conns": 4, "max_conns_per_key": 1,
                                                   "queue_timeout": "500ms"}})
    gw.wait_tokens()
    emu.fault(method="POST", path="/public/v1/export", latencyMs=3000)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(export, gw, GREEDY_KEY)
        until(lambda: owner(gw, "greedy", "busy") == 1, 5, "greedy holds one")
        r = requests.post(gw.dex + "/public/v1/export/activities",
                          json={"projectId": "P-DEMO"}, headers=gw.headers(GREEDY_KEY),
                          timeout=10)
        assert r.status_code == 503 and r.json()["error"] == "UPSTREAM_BUSY", r.text
        assert "holds 1 of the 4 connections" in r.json()["message"]
        emu.clear_faults()
        # another key still gets a connection at once
        gw.own("nope", key="test")
        assert requests.get(gw.dex + "/public/export", params={"correlationId": "nope"},
                            headers=gw.headers(TEST_KEY), timeout=5).status_code == 404
        assert slow.result()


def test_long_poll_and_idle_keepalive_outlast_the_send_timeout(make_emulator, make_gateway):
    emu = make_emulator({"export": {"delay": "2500ms"}})
    gw = make_gateway(emu, {"client_send_timeout": "500ms"})
    cid = export(gw, TEST_KEY)
    t0 = time.monotonic()
    r = requests.get(gw.dex + "/public/export", params={"correlationId": cid, "wait": "10"},
                     headers=gw.headers(), timeout=15)
    assert r.status_code == 200 and r.json(), r.text
    assert time.monotonic() - t0 > 1.5
    # a keep-alive connection idle for longer than the send timeout is kept
    s = socket.create_connection(("127.0.0.1", gw.ports["dex"]))
    try:
        for _ in range(2):
            s.sendall(f"GET /public/export?correlationId={cid} HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())
            status, body = read_reply(s)
            assert status == 200 and body == r.content
            time.sleep(1.2)
    finally:
        s.close()
    assert gw.metric("tidegate_client_send_timeouts_total", service="dex") == 0


def test_key_names_in_parentheses_are_reserved(tmp_path):
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"keys:\n  - name: (caller tokens)\n    sha256: {TEST_KEY_SHA}\n")
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", str(cfg)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert "keys[0].name: names starting with '(' are reserved" in r.stderr, r.stderr
    cfg.write_text(f"keys:\n  - name: caller\n    sha256: {TEST_KEY_SHA}\n"
                   "pool:\n  max_conns_per_key: 3\n  queue_timeout: 2s\n"
                   "client_send_timeout: 0\n")
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", str(cfg)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r.stderr


def test_poll_past_the_queue_deadline_is_503_upstream_busy(make_emulator, make_gateway):
    """A shared poll that waits out queue_timeout answers its waiters as a
    proxied request would: 503 UPSTREAM_BUSY with Retry-After."""
    emu = make_emulator({"export": {"delay": "30s"}})
    gw = make_gateway(emu, {"pool": {"max_conns": 2, "max_conns_per_key": 2,
                                     "queue_timeout": "1s"}})
    gw.wait_tokens()
    cid = export(gw, TEST_KEY)
    emu.fault(method="POST", path="/public/v1/export", latencyMs=4000)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = [pool.submit(export, gw, TEST_KEY) for _ in range(2)]
        until(lambda: gw.metric("tidegate_upstream_connections", service="dex",
                                state="busy") == 2, 5, "both connections busy")
        r = requests.get(gw.dex + f"/public/export?correlationId={cid}",
                         headers=gw.headers(), timeout=10)
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == "1"
        body = r.json()
        assert body["error"] == "UPSTREAM_BUSY" and "busy" in body["message"], body
        for f in slow:
            assert f.result()
