"""Errors that say what to fix: a vendor's error answer relayed in the
gateway's error body (its status, message and body kept, the request id
added); bodies of the wrong media type refused with 415 naming the types the
route takes; "did you mean" for export kinds and paths; 413s naming the
limit and its key; a malformed correlationId refused before the vendor is
asked; callback URLs refused with the key that allows them."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import free_port

EXPORT = "/public/v1/export/"


def gw_error(r, status, code):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    body = r.json()
    assert body["statusCode"] == status and body["error"] == code, body
    assert body["requestId"] == r.headers["X-Request-Id"], body
    return body


# ---- relayed vendor errors ----

def test_unknown_bearer_refused_by_the_vendor_is_wrapped(emulator, gateway):
    """A bearer that is no gateway key goes to the vendor as the caller's
    own token; the vendor's bare 401 comes back in the gateway's body."""
    r = requests.post(gateway.dex + EXPORT + "activities", json={"projectId": "P-DEMO"},
                      headers={"Authorization": "Bearer not-a-key"}, timeout=10)
    body = gw_error(r, 401, "UNAUTHORIZED")
    assert body["message"] == ("not an API key of this gateway, and the vendor refused it "
                               "as a token: invalid, expired or revoked token")
    assert body["vendor"]["status"] == 401
    assert body["vendor"]["message"] == "invalid, expired or revoked token"
    assert body["vendor"]["body"]["error"] == "UNAUTHORIZED"
    assert emulator.calls("POST /public/v1/export/activities") == 1


def test_vendor_error_keeps_status_headers_and_message(emulator, gateway):
    gateway.wait_tokens()
    emulator.fault(path="/public/v1/export/activities", status=429, retryAfter=7, count=1)
    r = requests.post(gateway.dex + EXPORT + "activities", json={"projectId": "P-DEMO"},
                      headers=gateway.headers(), timeout=10)
    body = gw_error(r, 429, "TOO_MANY_REQUESTS")
    assert r.headers["Retry-After"] == "7"
    assert body["message"].startswith("the dex vendor answered 429 Too Many Requests to "
                                      "this request")
    assert body["vendor"]["status"] == 429 and body["vendor"]["body"]["statusCode"] == 429


def test_vendor_login_refusal_is_wrapped_token_endpoint_is_not(emulator, gateway):
    r = requests.post(gateway.dex + "/public/v1/authenticate",
                      json={"username": "demo", "password": "wrong"}, timeout=10)
    body = gw_error(r, 401, "UNAUTHORIZED")
    assert body["message"] == ("the dex vendor answered 401 Unauthorized to the login: "
                               "invalid username or password")
    # OAuth clients read RFC 6749 error bodies: the token endpoint's stay as they came
    r = requests.post(gateway.sim + "/api/oauth2/token",
                      data={"grant_type": "client_credentials", "client_id": "demo",
                            "client_secret": "wrong"}, timeout=10)
    assert r.status_code in (400, 401), r.text
    assert "statusCode" not in r.json() and r.json()["error"] == "invalid_client"


class _Vendor(BaseHTTPRequestHandler):
    """A vendor whose errors are HTML pages larger than the gateway reads."""
    page = b"<html>" + "\u00e9".encode() * 6000 + b"</html>"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        if self.path.endswith("/authenticate"):
            out, status, ctype = b'{"token":"t"}', 200, "application/json"
        else:
            out, status, ctype = self.page, 502, "text/html"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.send_header("X-Vendor-Trace", "v-1")
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


@pytest.fixture
def html_vendor():
    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), _Vendor)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_large_text_vendor_error_is_cut_at_8k_as_text(make_gateway, html_vendor):
    gw = make_gateway(None, {"dex": {"url": html_vendor}, "upstream": "remote"})
    r = requests.post(gw.dex + EXPORT + "activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=10)
    body = gw_error(r, 502, "BAD_GATEWAY")
    assert r.headers["X-Vendor-Trace"] == "v-1"
    v = body["vendor"]
    assert v["status"] == 502 and v["truncated"] is True
    # 8192 bytes read: "<html>" and whole two-byte characters, none cut in half
    assert v["body"].startswith("<html>\u00e9") and len(v["body"].encode()) in (8191, 8192)
    # the message: the text's first line, up to 399 bytes of whole characters
    assert v["body"].startswith(v["message"]) and len(v["message"].encode()) in (398, 399)
    assert body["message"].startswith("the dex vendor answered 502 Bad Gateway to this "
                                      "request: <html>\u00e9")
