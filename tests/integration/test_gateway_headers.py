"""What the gateway sends the vendor: never the caller's gateway key, never
hop-by-hop headers; the vendor token (or the caller's own bearer in
caller-token mode), X-Request-Id and X-Forwarded-For. Uses a recording
upstream on a loopback port instead of the emulator."""
import http.server
import json
import threading

import pytest
import requests

from conftest import TEST_KEY, free_port


class Recorder(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        Recorder.seen.append(dict(self.headers.items()))
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Keep-Alive", "timeout=5")
        self.send_header("X-Vendor", "yes")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    Recorder.seen = []
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
