"""
The gateway's front door: what reaches a handler and what is refused before
it. Raw sockets where an HTTP client library would tidy the request up.
"""
import json
import socket
import time

import pytest
import requests

from conftest import TEST_KEY

JSON_ENDPOINTS = [
    ("dex", "/public/v1/export/activities"),
    ("dex", "/public/v1/import/activities"),
    ("dex", "/public/v1/authenticate"),
    ("sim", "/api/v1/simulations"),
    ("sim", "/tidegate/v1/sweeps"),
]


def raw(port, data, timeout=5.0, read_all=True):
    """Send bytes, read until the peer closes (or one answer when read_all is
    False); returns the bytes read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                     if l.lower().startswith(b"content-length:")]
                if n and len(body) >= n[0]:
                    break
        return out
    finally:
        s.close()


def parse(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode()
    return status, headers, body


@pytest.mark.parametrize("svc,path", JSON_ENDPOINTS)
def test_empty_json_body_is_400_and_gateway_lives(gateway, svc, path):
    port = gateway.ports[svc]
    req = (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TEST_KEY}\r\n"
           "Content-Type: application/json\r\nContent-Length: 0\r\n\r\n").encode()
    status, _, body = parse(raw(port, req, read_all=False))
    assert status == 400, body
    doc = json.loads(body)
    assert doc["statusCode"] == 400 and doc["error"] and doc["message"]
    # the process is alive and serves the next request
    r = requests.get(gateway.admin + "/healthz", timeout=5)
    assert r.status_code == 200


def test_body_without_key_refused_before_it_is_read(gateway):
    """401 on the head alone: no 100 Continue, no body read, connection closed."""
    port = gateway.ports["dex"]
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 200000000\r\n\r\n")
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    assert not out.startswith(b"HTTP/1.1 100"), out
    status, headers, body = parse(out)
    assert status == 401
    assert headers.get("connection") == "close"
    doc = json.loads(body)
    assert doc["error"] == "UNAUTHORIZED" and doc["statusCode"] == 401


def test_unknown_key_with_body_refused_and_memory_flat(gateway):
    """Clients pushing large bodies without a valid key cost no memory."""
    before = gateway.rss_kb()
    blob = b"x" * (1 << 20)
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", gateway.ports["sim"]), timeout=5)
        s.sendall(b"POST /api/v1/simulations HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer not-a-key-but-long-enough\r\n"
                  b"X-Api-Key: wrong\r\nContent-Length: 50000000\r\n\r\n")
        sent = 0
        try:
            for _ in range(48):      # bounded: at most 48 MB per client
                s.sendall(blob)
                sent += len(blob)
        except OSError:
            pass                     # the gateway closed: expected
        out = s.recv(65536)
        s.close()
        assert sent < 48 << 20, "the gateway kept reading an unauthenticated body"
        if out:
            status, _, body = parse(out)
            assert status == 401 and json.loads(body)["error"] == "UNAUTHORIZED"
    assert gateway.rss_kb() - before < 64 * 1024


def test_login_body_without_key_still_accepted(gateway):
    r = requests.post(gateway.dex + "/public/v1/authenticate",
                      json={"username": "demo", "password": "demo"}, timeout=5)
    assert r.status_code == 200 and r.json()["token"]


SMUGGLING = [
    ("duplicate-length", b"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length: 22\r\nContent-Length: 5\r\n\r\n", 400, b"more than once"),
    ("space-before-colon", b"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400, b"field name"),
    ("length-and-te", b"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, b"together"),
    ("te-not-chunked", b"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501, b"Transfer-Encoding"),
    ("obs-fold", b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\n"
     b"X-A: 1\r\n  folded\r\n\r\n", 400, b"folding"),
    ("ctl-in-value", b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\n"
     b"X-A: a\x01b\r\n\r\n", 400, b"control character"),
    ("bare-cr-target", b"GET /public/v1/a\rX-Injected:1 HTTP/1.1\r\nHost: x\r\n\r\n",
     400, b"bare CR"),
    ("no-host", b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\n\r\n",
     400, b"Host"),
    ("reserved-field", b"GET / HTTP/1.1\r\nHost: x\r\nTidegate-Refusal: 1\r\n\r\n",
     400, b"reserved"),
    ("bad-version", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, b"HTTP/1.0"),
    ("bad-method", b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501, b"method"),
    ("bad-method-bare-lf", b"BREW /x HTTP/1.1\nHost: x\n\n", 400, b"bare CR or LF"),
    ("too-large", b"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
     b"Authorization: Bearer test-key\r\nContent-Length: 999999999999\r\n\r\n", 413,
     b"max_body"),
]


@pytest.mark.parametrize("name,data,status,words", SMUGGLING, ids=[c[0] for c in SMUGGLING])
def test_ambiguous_framing_refused_and_nothing_sent(gateway, emulator, name, data, status,
                                                    words):
    gateway.wait_tokens()   # start-up logins are not the test's calls
    before = emulator.stats()["calls"]
    out = raw(gateway.ports["dex"], data)
    got, headers, body = parse(out)
    assert got == status, out
    assert headers.get("connection") == "close"
    doc = json.loads(body)
    assert doc["statusCode"] == status and words in doc["message"].encode()
    assert emulator.stats()["calls"] == before


def test_pipelined_refusal_answers_in_order(gateway):
    """A good request, then a smuggling attempt on the same connection: the
    first is answered, then the refusal, then the connection closes."""
    good = (f"GET /public/v1/import/status?correlationId=nope HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {TEST_KEY}\r\n\r\n").encode()
    bad = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
    out = raw(gateway.ports["dex"], good + bad)
    first, _, rest = out.partition(b"\r\n\r\n")
    assert first.split(b" ")[1] != b"400"
    assert out.count(b"HTTP/1.1 ") == 2 and b"more than once" in out


def test_chunked_body_passes_and_bad_chunk_answered(gateway, emulator):
    body = b'{"projectId":"P-DEMO"}'
    ok = (f"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
          f"Authorization: Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
          f"Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n").encode() + body + b"\r\n0\r\n\r\n"
    status, _, resp = parse(raw(gateway.ports["dex"], ok, read_all=False))
    assert status == 200 and json.loads(resp)["correlationId"]
    bad = (f"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
           f"Authorization: Bearer {TEST_KEY}\r\nTransfer-Encoding: chunked\r\n\r\n"
           "0x5\r\nhello\r\n0\r\n\r\n").encode()
    gateway.wait_tokens()   # start-up logins are not the test's calls
    before = emulator.stats()["calls"]
    status, headers, resp = parse(raw(gateway.ports["dex"], bad))
    # evhttp would read "0x5" as 5 (strtoll): answered, not passed, not reset
    assert status == 400 and headers.get("connection") == "close"
    doc = json.loads(resp)
    assert doc["error"] == "BAD_REQUEST" and "chunked body" in doc["message"]
    assert emulator.stats()["calls"] == before


def test_keepalive_large_answer_is_fast(gateway, emulator):
    """TCP_NODELAY on accepted sockets: a ~16 KB answer on a reused connection
    takes well under the 40 ms of Nagle + delayed ACK."""
    s = requests.Session()
    h = {"Authorization": f"Bearer {TEST_KEY}"}
    r = s.get(gateway.sim + "/api/v1/cases/CASE-OM-2", headers=h, timeout=5)
    assert r.status_code == 200 and len(r.content) > 10000
    times = []
    for _ in range(15):
        t = time.perf_counter()
        r = s.get(gateway.sim + "/api/v1/cases/CASE-OM-2", headers=h, timeout=5)
        times.append(time.perf_counter() - t)
        assert r.status_code == 200
    times.sort()
    assert times[len(times) // 2] < 0.020, times


def test_keepalive_cached_export_answer_is_fast(make_emulator, make_gateway):
    """A ready export of about 20 KB served from the poll cache on a reused
    connection: far below the 40 ms a delayed ACK costs without TCP_NODELAY."""
    emu = make_emulator({"export": {"delay": "0s"},
                         "projects": [{"id": "P-DEMO", "seed": 1, "sites": 5,
                                       "activities": 60}]})
    gw = make_gateway(emu)
    s = requests.Session()
    h = {"Authorization": f"Bearer {TEST_KEY}"}
    cid = s.post(gw.dex + "/public/v1/export/activities", headers=h,
                 json={"projectId": "P-DEMO"}, timeout=5).json()["correlationId"]
    url = gw.dex + f"/public/export?correlationId={cid}"
    deadline = time.monotonic() + 10
    while s.get(url, headers=h, timeout=5).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    times = []
    for _ in range(15):
        t = time.perf_counter()
        r = s.get(url, headers=h, timeout=5)
        times.append(time.perf_counter() - t)
        assert r.status_code == 200 and r.headers["X-Tidegate-Poll"] == "cached"
    assert len(r.content) > 16000, len(r.content)
    times.sort()
    assert times[len(times) // 2] < 0.020, times
