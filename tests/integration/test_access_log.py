"""The access log's one vocabulary (docs/configuration.md, Signals and
logs): a request of every kind (relayed, polled and fetched, cached poll,
long-poll, caller login from the cache, 4xx refusal, vendor failure) is
logged with every field, each value from the documented set; the admin
listener's requests too (probes, 404, 405, the webhook admin API, a front
door refusal, a client gone before its answer), each with its request id
answered and named in its error body."""
import hashlib
import json
import os
import re
import socket
import sqlite3
import struct
import time

import requests

from conftest import TEST_KEY_SHA

FIELDS = {"ts", "level", "event", "id", "trace_id", "client", "user_agent", "service", "op",
          "method", "path", "correlationId", "status", "request_bytes", "bytes", "ms", "key",
          "origin", "served", "upstream_addr", "upstream_status", "upstream_ms", "retry",
          "error"}
ORIGINS = {None, "primary", "fallback", "none"}
SERVED = {"relayed", "fetched", "coalesced", "long-poll", "cached", "spool", "gateway"}
RETRIES = {None, "connect", "reset", "timeout", "tls", "502", "503", "504", "ejected"}
ADMIN_OPS = {"healthz", "readyz", "metrics", "webhooks", "unknown"}
OPS_KEY = "ops-key"
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "ops", "sha256": hashlib.sha256(OPS_KEY.encode()).hexdigest(),
         "services": ["admin"]}]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def lines(gw):
    return {e["id"]: e for e in gw.log_lines() if e.get("event") == "access"}


def check(e):
    assert set(e) == FIELDS, set(e) ^ FIELDS
    assert re.match(r"^[0-9a-f]{32}$", e["trace_id"]) and e["trace_id"] != "0" * 32
    assert e["client"] == "127.0.0.1"
    assert e["service"] in ("dex", "sim", "admin") and isinstance(e["op"], str)
    if e["service"] == "admin":
        assert e["op"] in ADMIN_OPS and e["served"] == "gateway", e
        assert (e["origin"], e["upstream_addr"], e["upstream_status"], e["upstream_ms"],
                e["retry"], e["correlationId"]) == (None, None, 0, None, None, None), e
    assert e["method"] in ("GET", "POST", "HEAD", "PUT", "DELETE", "PATCH")
    for k in ("status", "request_bytes", "bytes", "ms", "upstream_status"):
        assert isinstance(e[k], int) and e[k] >= 0, (k, e)
    assert e["origin"] in ORIGINS and e["served"] in SERVED and e["retry"] in RETRIES
    if e["origin"] in ("primary", "fallback"):
        assert re.match(r"^127\.0\.0\.1:\d+$", e["upstream_addr"]), e
    else:
        assert e["upstream_addr"] is None, e
    if e["served"] == "relayed":
        assert e["origin"] in ("primary", "fallback") and e["upstream_status"] > 0
        assert isinstance(e["upstream_ms"], int) and e["upstream_ms"] >= 0
    if e["served"] == "gateway":
        assert e["error"] is not None or e["status"] < 300, e


def test_a_line_of_every_kind(make_emulator, make_gateway):
    emu = make_emulator({"export": {"delay": "300ms"}})
    gw = make_gateway(emu, {"poll": {"interval": "100ms"}})
    gw.wait_tokens()
    h = gw.headers()

    def send(method, path, rid, **kw):
        kw.setdefault("headers", h)
        kw["headers"] = {**kw["headers"], "X-Request-Id": rid, "User-Agent": "ua/" + rid}
        return requests.request(method, gw.dex + path, timeout=20, **kw)

    r = send("POST", "/public/v1/export/activities", "relayed", json={"projectId": "P-DEMO"})
    assert r.status_code == 200
    cid = r.json()["correlationId"]
    assert send("GET", "/public/export", "fetched",
                params={"correlationId": cid}).status_code == 202
    assert send("GET", "/public/export", "long-poll",
                params={"correlationId": cid, "wait": "5"}).status_code == 200
    assert send("GET", "/public/export", "cached",
                params={"correlationId": cid}).status_code == 200
    login = {"username": "demo", "password": "demo"}
    assert send("POST", "/public/v1/authenticate", "login-1", json=login,
                headers={}).status_code == 200
    assert send("POST", "/public/v1/authenticate", "login-2", json=login,
                headers={}).status_code == 200
    assert send("GET", "/public/export", "refused", headers={},
                params={"correlationId": cid}).status_code == 401
    emu.fault(path="/public/v1/export/activities", reset=True, count=5)
    assert send("POST", "/public/v1/export/activities", "failed",
                json={"projectId": "P-DEMO"}).status_code >= 500
    time.sleep(0.2)
    got = lines(gw)
    for rid in ("relayed", "fetched", "long-poll", "cached", "login-1", "login-2", "refused",
                "failed"):
        assert rid in got, (rid, sorted(got))
        check(got[rid])
        assert got[rid]["user_agent"] == "ua/" + rid
    assert got["relayed"]["served"] == "relayed" and got["relayed"]["origin"] == "primary"
    assert got["relayed"]["request_bytes"] == len('{"projectId": "P-DEMO"}')
    assert got["relayed"]["correlationId"] is None
    for rid in ("fetched", "long-poll", "cached"):
        assert got[rid]["served"] == rid and got[rid]["origin"] is None
        assert got[rid]["correlationId"] == cid and got[rid]["upstream_ms"] is None
    assert got["login-2"]["served"] == "cached" and got["login-2"]["key"] is None
    assert got["refused"]["served"] == "gateway" and got["refused"]["status"] == 401
    assert got["refused"]["upstream_status"] == 0 and got["refused"]["error"]
    assert got["failed"]["served"] == "gateway" and got["failed"]["origin"] == "primary"
    assert got["failed"]["error"]


def admin_send(gw, method, path, rid=None, **kw):
    h = {**kw.pop("headers", {}), "User-Agent": "probe/1"}
    if rid is not None:
        h["X-Request-Id"] = rid
    return requests.request(method, gw.admin + path, headers=h, timeout=10, **kw)


def wait_line(gw, rid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while (e := lines(gw).get(rid)) is None:
        assert time.monotonic() < deadline, f"no access line {rid}"
        time.sleep(0.05)
    return e


def test_admin_lines_of_every_kind(make_emulator, make_gateway):
    """Each admin request: its id answered (the client's, else a new uuid),
    named in its error body, and one line with the dex/sim fields."""
    gw = make_gateway(make_emulator(), {"keys": KEYS})
    gw.wait_tokens()
    tp = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    sent = {
        "a-healthz": admin_send(gw, "GET", "/healthz", "a-healthz",
                                headers={"traceparent": tp}),
        "a-readyz": admin_send(gw, "HEAD", "/readyz", "a-readyz"),
        "a-metrics": admin_send(gw, "GET", "/metrics", "a-metrics"),
        "a-404": admin_send(gw, "GET", "/nothing/here", "a-404"),
        "a-405": admin_send(gw, "POST", "/healthz", "a-405", data=b"x=1"),
        "a-list": admin_send(gw, "GET", "/webhooks", "a-list",
                             headers={"Authorization": "Bearer " + OPS_KEY}),
        "a-401": admin_send(gw, "GET", "/webhooks", "a-401"),
        "a-403": admin_send(gw, "GET", "/webhooks", "a-403", headers=gw.headers()),
    }
    want = {"a-healthz": ("GET", "healthz", 200, None, None),
            "a-readyz": ("HEAD", "readyz", 200, None, None),
            "a-metrics": ("GET", "metrics", 200, None, None),
            "a-404": ("GET", "unknown", 404, "NOT_FOUND", None),
            "a-405": ("POST", "healthz", 405, "METHOD_NOT_ALLOWED", None),
            "a-list": ("GET", "webhooks", 200, None, "ops"),
            "a-401": ("GET", "webhooks", 401, "UNAUTHORIZED", None),
            "a-403": ("GET", "webhooks", 403, "FORBIDDEN", "test")}
    for rid, r in sent.items():
        assert r.headers["X-Request-Id"] == rid, (rid, r.headers)
        e = wait_line(gw, rid)
        check(e)
        method, op, status, error, key = want[rid]
        assert (e["service"], e["method"], e["op"], e["status"], e["error"], e["key"]) == \
            ("admin", method, op, status, error, key), e
        assert r.status_code == status and e["user_agent"] == "probe/1"
        assert e["bytes"] == len(r.content), (e, len(r.content))
        if status >= 400:
            body = r.json()
            assert body["requestId"] == rid and body["error"] == error, body
            assert body["statusCode"] == status and body["message"], body
    assert lines(gw)["a-healthz"]["trace_id"] == "ab" * 16
    assert lines(gw)["a-readyz"]["bytes"] == 0 and sent["a-readyz"].content == b""
    assert int(sent["a-readyz"].headers["Content-Length"]) > 0    # GET's length
    assert lines(gw)["a-405"]["request_bytes"] == 3
    assert lines(gw)["a-404"]["path"] == "/nothing/here"
    assert sent["a-list"].json()["webhooks"] == []


def test_admin_request_id_made_when_absent(make_emulator, make_gateway):
    """No X-Request-Id (or one not worth keeping): a new uuid, answered, in
    the error body and on the line."""
    gw = make_gateway(make_emulator(), {"keys": KEYS})
    for hdr in ({}, {"X-Request-Id": "bad id with spaces"}):
        r = requests.get(gw.admin + "/webhooks/x", headers=hdr, timeout=5)
        rid = r.headers["X-Request-Id"]
        assert UUID.match(rid), rid
        assert r.status_code == 401 and r.json()["requestId"] == rid, r.text
        e = wait_line(gw, rid)
        check(e)
        assert (e["op"], e["path"], e["status"], e["error"]) == \
            ("webhooks", "/webhooks/x", 401, "UNAUTHORIZED"), e
    r = requests.get(gw.admin + "/healthz", timeout=5)
    assert UUID.match(r.headers["X-Request-Id"])
    assert wait_line(gw, r.headers["X-Request-Id"])["status"] == 200


def raw(gw, data):
    s = socket.create_connection(("127.0.0.1", gw.ports["admin"]), timeout=10)
    s.sendall(data)
    return s


def exchange(gw, data):
    """data sent on a new admin connection: every byte until it closes."""
    s = raw(gw, data)
    answer = b""
    while chunk := s.recv(65536):
        answer += chunk
    s.close()
    return answer


def test_admin_head_answer_is_the_head_alone(make_emulator, make_gateway):
    """A HEAD the webhook API refuses: the error's head with its
    Content-Length and no body (the next answer on the connection starts
    right after it), bytes 0 on its line."""
    gw = make_gateway(make_emulator())
    answer = exchange(gw, b"HEAD /webhooks HTTP/1.1\r\nHost: t\r\nX-Request-Id: head-1\r\n\r\n"
                      b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401") and b"X-Request-Id: head-1" in head, answer
    assert int(re.search(rb"Content-Length: (\d+)", head).group(1)) > 0, head
    assert rest.startswith(b"HTTP/1.1 200"), answer
    assert rest.endswith(b'{"status":"ok"}'), answer
    e = wait_line(gw, "head-1")
    check(e)
    assert (e["method"], e["op"], e["status"], e["error"], e["bytes"]) == \
        ("HEAD", "webhooks", 401, "UNAUTHORIZED", 0), e


def test_admin_front_door_refusal_names_its_id(make_emulator, make_gateway):
    """A head the front door refuses gets the JSON error with its id, and
    its line."""
    gw = make_gateway(make_emulator())
    answer = exchange(gw, b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Request-Id: refused-1\r\n"
                      b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"X-Request-Id: refused-1" in head, answer
    assert b'"requestId":"refused-1"' in body, body
    e = wait_line(gw, "refused-1")
    check(e)
    assert (e["op"], e["status"], e["error"], e["bytes"]) == \
        ("healthz", 400, "BAD_REQUEST", len(body)), e


def test_admin_client_gone_before_its_answer(make_emulator, make_gateway):
    """A webhook redelivery held on a locked outbox: the client resets its
    connection, the answer then meets the reset, and the line says 499
    client_closed; the gateway goes on."""
    gw = make_gateway(make_emulator(), {"keys": KEYS})
    db = sqlite3.connect(os.path.join(gw.tmp, "tidegate.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")           # the outbox's writer waits on this
    try:
        s = raw(gw, b"POST /webhooks/redeliver?since=2024-01-01T00:00:00Z HTTP/1.1\r\n"
                b"Host: t\r\nX-Request-Id: left-1\r\nAuthorization: Bearer " +
                OPS_KEY.encode() + b"\r\nContent-Length: 0\r\n\r\n")
        time.sleep(0.5)
        assert "left-1" not in lines(gw)    # held
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()                           # a reset
        time.sleep(0.2)
    finally:
        db.execute("ROLLBACK")
        db.close()
    e = wait_line(gw, "left-1")
    check(e)
    assert (e["op"], e["status"], e["error"], e["key"], e["bytes"]) == \
        ("webhooks", 499, "client_closed", "ops", 0), e
    assert e["ms"] >= 500
    r = requests.post(gw.admin + "/webhooks/redeliver",
                      params={"since": "2024-01-01T00:00:00Z"},
                      headers={"Authorization": "Bearer " + OPS_KEY}, timeout=10)
    assert r.status_code == 200 and r.json() == {"redelivered": 0}


def test_a_client_that_leaves_is_seen_within_a_second(make_emulator, make_gateway):
    """A client that closes while its answer is being made is seen by the
    front door's once-a-second look at the connections in flight, not when
    the answer would be written: a long-poll held for 10 s and a relayed GET
    the vendor answers after 4 s are logged 499 client_closed within about a
    second, and nothing is in flight any more; a client that resets is the
    same. The gateway goes on answering."""
    emu = make_emulator({"export": {"delay": "60s"}})
    gw = make_gateway(emu, {"keys": KEYS})
    gw.wait_tokens()
    cid = [requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                         headers=gw.headers(), timeout=10).json()["correlationId"]
           for _ in range(2)]
    emu.fault(path="/api/v1/cases/CASE-OM-2", latencyMs=4000, count=1)
    key = gw.headers()["Authorization"].encode()
    poll = "GET /public/export?correlationId={}&wait=10"
    reqs = {"gone-poll": (gw.ports["dex"], poll.format(cid[0]).encode()),
            "gone-slow": (gw.ports["sim"], b"GET /api/v1/cases/CASE-OM-2"),
            "gone-reset": (gw.ports["dex"], poll.format(cid[1]).encode())}
    socks = {}
    for rid, (port, line) in reqs.items():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(line + b" HTTP/1.1\r\nHost: t\r\nX-Request-Id: " + rid.encode() +
                  b"\r\nAuthorization: " + key + b"\r\n\r\n")
        socks[rid] = s
    time.sleep(0.3)
    t0 = time.monotonic()
    socks["gone-reset"].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    for s in socks.values():
        s.close()
    for rid in reqs:
        e = wait_line(gw, rid, timeout=5)
        check(e)
        assert (e["status"], e["error"], e["bytes"]) == (499, "client_closed", 0), e
    assert time.monotonic() - t0 < 2.5
    assert gw.metric("tidegate_inflight_requests") == 0
    r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=10)
    assert r.status_code == 200


def test_admin_probe_lines_can_be_dropped(make_emulator, make_gateway):
    """access_log_probes: false drops /healthz, /readyz and /metrics lines
    only; access_log: false drops every admin line."""
    emu = make_emulator()
    gw = make_gateway(emu, {"keys": KEYS, "access_log_probes": False})
    quiet = make_gateway(emu, {"keys": KEYS, "access_log": False})
    for g in (gw, quiet):
        for path in ("/healthz", "/readyz", "/metrics"):
            r = admin_send(g, "GET", path, "p-" + path[1:])
            assert r.headers["X-Request-Id"] == "p-" + path[1:]
        r = admin_send(g, "GET", "/webhooks", "p-webhooks")
        assert r.status_code == 401 and r.json()["requestId"] == "p-webhooks"
        assert admin_send(g, "GET", "/nope", "p-nope").json()["requestId"] == "p-nope"
    e = wait_line(gw, "p-webhooks")
    check(e)
    assert e["op"] == "webhooks" and e["status"] == 401
    time.sleep(0.2)
    admin = [e for e in gw.log_lines() if e.get("event") == "access"]
    assert sorted(e["id"] for e in admin) == ["p-nope", "p-webhooks"], admin
    assert [e for e in quiet.log_lines() if e.get("event") == "access"] == []


def test_non_utf8_user_agent_is_logged_as_valid_json(make_emulator, make_gateway):
    """A User-Agent of raw bytes 0x80-0xff (and an ill-formed sequence) is
    logged with U+FFFD for each ill-formed sequence, as Python's "replace"
    decodes it: the log decodes as strict UTF-8 and every line is JSON.
    Valid UTF-8 passes unchanged. On dex (the request core's line) and on
    the admin listener (its own)."""
    gw = make_gateway(make_emulator())
    latin1 = bytes(range(0x80, 0x100))
    agents = {"ua-raw": b"raw/" + latin1 + b" \xe2\x82 \xed\xa0\x80 end",
              "ua-utf8": "caf\u00e9/\u20ac \U0001F600".encode()}
    for rid, ua in agents.items():
        for port, target, auth in ((gw.ports["dex"], b"/public/export?correlationId=nope",
                                    b"Authorization: Bearer test-key\r\n"),
                                   (gw.ports["admin"], b"/healthz", b"")):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n" + auth +
                      b"X-Request-Id: " + f"{rid}-{port}".encode() + b"\r\nUser-Agent: " +
                      ua + b"\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
            s.close()
            assert answer.startswith(b"HTTP/1.1 "), answer
    deadline = time.monotonic() + 10
    while True:
        with open(gw.log_path, "rb") as f:
            raw_log = f.read()
        text = raw_log.decode("utf-8", "strict")          # a strict collector's read
        got = {}
        for line in text.splitlines():
            e = json.loads(line)                           # every line, not only these
            if e.get("event") == "access":
                got[e["id"]] = e
        if all(f"{rid}-{gw.ports[l]}" in got for rid in agents for l in ("dex", "admin")):
            break
        assert time.monotonic() < deadline, sorted(got)
        time.sleep(0.05)
    for rid, ua in agents.items():
        for listener in ("dex", "admin"):
            e = got[f"{rid}-{gw.ports[listener]}"]
            check(e)
            assert e["user_agent"] == ua.decode("utf-8", "replace"), (listener, e)
    assert got[f"ua-raw-{gw.ports['dex']}"]["user_agent"].count("\ufffd") == 128 + 1 + 3
    assert got[f"ua-utf8-{gw.ports['admin']}"]["user_agent"] == "caf\u00e9/\u20ac \U0001F600"
