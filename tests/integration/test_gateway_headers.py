"""What the gateway sends the vendor: never the caller's gateway key, never
hop-by-hop headers; the vendor token (or the caller's own bearer in
caller-token mode), X-Request-Id and X-Forwarded-For. Uses a recording
upstream on a loopback port instead of the emulator."""
import http.server
import json
import socket
import threading

import pytest
import requests

from conftest import TEST_KEY, free_port


class Recorder(http.server.BaseHTTPRequestHandler):
    seen = []

    protocol_version = "HTTP/1.1"
    raw = []

    def do_GET(self):
        Recorder.seen.append(dict(self.headers.items()))
        Recorder.raw.append(self.headers.as_string())
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        if "no-type" not in self.path:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Keep-Alive", "timeout=5")
        self.send_header("X-Vendor", "yes")
        self.send_header("X-Request-Id", "vendor-own-id")
        self.send_header("X-Empty", "")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    Recorder.seen = []
    Recorder.raw = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Recorder)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", Recorder.seen
    srv.shutdown()
    srv.server_close()


def test_gateway_key_and_hop_by_hop_headers_never_reach_the_vendor(make_gateway, recorder):
    url, seen = recorder
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    r = requests.get(gw.dex + "/public/v2/anything?a=1", timeout=10, headers={
        "Authorization": "Bearer " + TEST_KEY, "X-Api-Key": TEST_KEY,
        "Connection": "keep-alive, X-Secret-Hop", "X-Secret-Hop": "1", "TE": "trailers",
        "X-Request-Id": "req-42", "X-Custom": "kept"})
    assert r.status_code == 200 and r.json() == {"ok": True}
    assert r.headers["X-Vendor"] == "yes" and "Keep-Alive" not in r.headers
    h = {k.lower(): v for k, v in seen[-1].items()}
    assert TEST_KEY not in json.dumps(seen)
    assert "authorization" not in h and "x-api-key" not in h
    assert "x-secret-hop" not in h and "te" not in h
    assert h["x-request-id"] == "req-42" and h["x-custom"] == "kept"
    assert h["x-forwarded-for"] == "127.0.0.1"
    assert h["host"] == url.split("//")[1]


def test_callers_own_bearer_is_forwarded_untouched(make_gateway, recorder):
    url, seen = recorder
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    requests.get(gw.dex + "/public/v2/anything", headers={"Authorization": "Bearer vendor-tok"},
                 timeout=10)
    assert seen[-1]["Authorization"] == "Bearer vendor-tok"


def read_answer(sock):
    """One answer off a raw socket: its head's lines and its body (framed by
    Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed before the head"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    fields = [tuple(x.strip() for x in ln.split(":", 1)) for ln in lines[1:]]
    n = int(dict((k.lower(), v) for k, v in fields)["content-length"])
    while len(rest) < n:
        rest += sock.recv(65536)
    return lines[0], fields, rest[:n]


def test_heads_written_as_blocks_keep_every_field_once(make_gateway, recorder):
    """The request to the vendor and the streamed answer each have their
    end-to-end headers written as one block (hblock.h): on the wire, every
    field once (Content-Length, then Host first on the vendor side); the vendor's X-Request-Id
    replaced by the request's; Date and Content-Type present once (libevent
    adds neither a second time); an empty value kept; two requests on one
    kept-alive connection framed alike."""
    url, seen = recorder
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    port = int(gw.dex.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for i in range(2):
            s.sendall((f"GET /public/v2/anything?i={i} HTTP/1.1\r\nHost: gw\r\n"
                       f"Authorization: Bearer {TEST_KEY}\r\nX-Request-Id: req-{i}\r\n"
                       "X-Custom: kept\r\nAccept: */*\r\n\r\n").encode())
            status, fields, body = read_answer(s)
            assert status == "HTTP/1.1 200 OK" and json.loads(body) == {"ok": True}
            names = [k.lower() for k, _ in fields]
            assert len(names) == len(set(names)), fields
            f = dict((k.lower(), v) for k, v in fields)
            assert f["x-request-id"] == f"req-{i}" and f["x-vendor"] == "yes"
            assert f["content-type"] == "application/json"
            assert f["content-length"] == str(len(body)) and "date" in f
            assert f["x-empty"] == "" and "keep-alive" not in f
            assert "transfer-encoding" not in f and "connection" not in f
    for i, raw in enumerate(Recorder.raw):
        lines = [ln for ln in raw.split("\n") if ln.strip()]
        names = [ln.split(":", 1)[0].lower() for ln in lines]
        assert names[:2] == ["content-length", "host"], lines
        assert len(names) == len(set(names)), lines
        h = {k.lower(): v for k, v in seen[i].items()}
        assert h["host"] == url.split("//")[1] and h["x-custom"] == "kept"
        assert h["x-request-id"] == f"req-{i}" and h["accept"] == "*/*"
        assert "authorization" not in h


def test_answer_without_content_type_gets_none(make_gateway, recorder):
    """A vendor answer without Content-Type is relayed without one: libevent
    would label it text/html (its default content type is unset)."""
    url, seen = recorder
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    port = int(gw.dex.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall((f"GET /public/v2/no-type HTTP/1.1\r\nHost: gw\r\n"
                   f"Authorization: Bearer {TEST_KEY}\r\n\r\n").encode())
        status, fields, body = read_answer(s)
    assert status == "HTTP/1.1 200 OK" and json.loads(body) == {"ok": True}
    names = [k.lower() for k, _ in fields]
    assert "content-type" not in names, fields
    assert names.count("content-length") == 1 and names.count("date") == 1
