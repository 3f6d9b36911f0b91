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


# ---- Content-Type ----

@pytest.mark.parametrize("ctype", ["text/xml", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=B"])
def test_export_body_of_another_type_is_415(emulator, gateway, ctype):
    r = requests.post(gateway.dex + EXPORT + "activities", data=b"<x/>",
                      headers={**gateway.headers(), "Content-Type": ctype}, timeout=10)
    body = gw_error(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert body["message"].startswith(f"Content-Type {ctype} is not taken here: this "
                                      "endpoint takes application/json (or a +json type)")
    assert ("curl -d sends" in body["message"]) == ctype.startswith("application/x-www")
    assert r.headers["Accept-Post"] == "application/json"
    assert emulator.calls("POST /public/v1/export/activities") == 0


def test_json_types_and_a_missing_type_are_taken(emulator, gateway):
    gateway.wait_tokens()
    body = json.dumps({"projectId": "P-DEMO"}).encode()
    for ctype in ["application/json", "Application/JSON ; charset=utf-8",
                  "application/vnd.example+json", None]:
        h = dict(gateway.headers(), **({"Content-Type": ctype} if ctype else {}))
        r = requests.post(gateway.dex + EXPORT + "activities", data=body, headers=h,
                          timeout=10)
        assert r.status_code == 200, (ctype, r.text)
    assert emulator.calls("POST /public/v1/export/activities") == 4


def test_multipart_upload_to_the_json_import_is_415_and_json_to_the_file_import(
        emulator, gateway):
    files = {"file": ("a.json", b"[]", "application/json")}
    r = requests.post(gateway.dex + "/public/v1/import/activities?projectId=P-DEMO",
                      files=files, headers=gateway.headers(), timeout=10)
    body = gw_error(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert "this endpoint takes application/json" in body["message"]
    r = requests.post(gateway.dex + "/public/v1/import/activities/file?projectId=P-DEMO",
                      json=[], headers=gateway.headers(), timeout=10)
    body = gw_error(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert body["message"] == ("Content-Type application/json is not taken here: this "
                               "endpoint takes multipart/form-data")
    assert r.headers["Accept-Post"] == "multipart/form-data"
    r = requests.post(gateway.sim + "/api/v1/simulations", data="<case/>",
                      headers={**gateway.headers(), "Content-Type": "application/xml"},
                      timeout=10)
    gw_error(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert emulator.calls("POST /public/v1/import/activities") == 0
    assert emulator.calls("POST /public/v1/import/activities/file") == 0


# ---- correlationId, callbacks, 413 ----

@pytest.mark.parametrize("auth", ["key", "caller"])
def test_malformed_correlation_id_is_400_and_never_reaches_the_vendor(emulator, make_gateway,
                                                                     auth):
    gw = make_gateway(emulator, {"poll": {"uuid_ids": True}})
    h = gw.headers() if auth == "key" else {"Authorization": "Bearer " + emulator.token()}
    for path in ["/public/export", "/public/v1/import/status", "/public/v1/import/result",
                 "/api/public/v1/import/activities/failed"]:
        r = requests.get(gw.dex + path, params={"correlationId": "abc", "wait": 5},
                         headers=h, timeout=10)
        body = gw_error(r, 400, "VALIDATION_FAILED")
        (d,) = body["details"]
        assert (d["path"], d["code"]) == ("", "format"), d
        assert d["message"].startswith("query parameter 'correlationId' is not a job id of "
                                       "the vendor: 'abc' (its ids are UUIDs"), d
        assert "poll.uuid_ids" in d["message"]
    calls = emulator.stats()["calls"]
    assert not [c for c in calls if "/export" in c or "/import" in c], calls
    # the vendor's own ids pass
    r = requests.post(gw.dex + EXPORT + "activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=10)
    cid = r.json()["correlationId"]
    r = requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                     headers=gw.headers(), timeout=10)
    assert r.status_code in (200, 202), r.text
    assert emulator.calls("GET /public/export") == 1


def egress_detail(gw, url):
    r = requests.post(gw.dex + EXPORT + "activities",
                      json={"projectId": "P-DEMO", "callbackUrl": url},
                      headers=gw.headers(), timeout=10)
    (d,) = gw_error(r, 400, "VALIDATION_FAILED")["details"]
    assert (d["path"], d["code"]) == ("/callbackUrl", "egress"), d
    return d["message"]


def test_refused_callback_addresses_name_webhooks_allow(emulator, make_gateway, tmp_path):
    secret = tmp_path / "whsec"
    secret.write_text("whsec_" + "A" * 43 + "=\n")
    gw = make_gateway(emulator, {"webhooks": {"secret_file": str(secret)}})
    assert egress_detail(gw, "http://127.0.0.1:9/x") == (
        "callback URL host 127.0.0.1 is a loopback address (not allowed; to allow it, "
        "list 127.0.0.1/32 in webhooks.allow)")
    assert egress_detail(gw, "http://10.1.2.3/x") == (
        "callback URL host 10.1.2.3 is a private address (not allowed; to allow it, list "
        "10.1.2.3/32 in webhooks.allow)")
    assert egress_detail(gw, "http://[::1]/x").endswith("list ::1/128 in webhooks.allow)")
    assert egress_detail(gw, "http://[::ffff:192.168.1.1]/x").endswith(
        "a private address (not allowed; to allow it, list 192.168.1.1/32 in "
        "webhooks.allow)")
    assert "list 'localhost' itself in webhooks.allow" in egress_detail(
        gw, "http://localhost:9/x")
    assert emulator.calls("POST /public/v1/export/activities") == 0


def test_413_names_the_limit_and_its_key(emulator, make_gateway):
    gw = make_gateway(emulator, {"max_body": "4KB", "dex": {"caller_max_body": "2KB"}})
    big = json.dumps({"projectId": "P-DEMO", "names": ["n" * 100] * 50}).encode()
    r = requests.post(gw.dex + EXPORT + "activities", data=big,
                      headers={**gw.headers(), "Content-Type": "application/json"}, timeout=10)
    body = gw_error(r, 413, "PAYLOAD_TOO_LARGE")
    assert "at most 4096 bytes with a gateway API key (max_body), 2048 with a caller's own " \
           "token" in body["message"] and "dex.caller_max_body" in body["message"], body
    r = requests.post(gw.dex + "/public/v1/authenticate", data=b"{" + b" " * 20000 + b"}",
                      headers={"Content-Type": "application/json"}, timeout=10)
    body = gw_error(r, 413, "PAYLOAD_TOO_LARGE")
    assert body["message"] == "a login body is at most 4096 bytes (dex.login_max_body)"
    r = requests.post(gw.admin + "/webhooks/redeliver", data=b"x" * 20000,
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 413 and "(admin_max_body)" in r.json()["message"], r.text
    assert emulator.calls("POST /public/v1/export/activities") == 0


# ---- did you mean ----

def test_export_kind_near_miss_gets_a_hint_and_is_not_sent(emulator, gateway):
    r = requests.post(gateway.dex + EXPORT + "activites", json={"projectId": "P-DEMO"},
                      headers=gateway.headers(), timeout=10)
    (d,) = gw_error(r, 400, "VALIDATION_FAILED")["details"]
    assert d["code"] == "unknown_kind"
    assert d["message"].startswith("unknown export kind 'activites' (did you mean "
                                   "'activities'? one of activities, "), d
    assert emulator.calls("POST /public/v1/export/activites") == 0
    # a kind near none is the vendor's to judge (a kind added since): sent
    r = requests.post(gateway.dex + EXPORT + "invoices", json={"projectId": "P-DEMO"},
                      headers=gateway.headers(), timeout=10)
    body = gw_error(r, 404, "NOT_FOUND")
    assert body["vendor"]["message"] == "no such export kind"
    assert "did you mean" not in body["message"]
    assert emulator.calls("POST /public/v1/export/invoices") == 1


@pytest.mark.parametrize("passthrough", [True, False])
def test_unknown_path_near_a_route_gets_a_hint(emulator, make_gateway, passthrough):
    gw = make_gateway(emulator, {"dex": {"passthrough": passthrough}})
    cases = [("/public/v1/import/statu", "/public/v1/import/status"),
             ("/api/public/v1/exports/work-orders", "/api/public/v1/export/work-orders"),
             ("/public/v1/Import/Result", "/public/v1/import/result")]
    for sent, near in cases:
        r = requests.get(gw.dex + sent, params={"correlationId": "x"},
                         headers=gw.headers(), timeout=10)
        body = gw_error(r, 404, "NOT_FOUND")
        assert body["message"].endswith(f" (did you mean '{near}'?)"), body
    # far from every route: no hint
    r = requests.get(gw.dex + "/public/v2/brand-new", headers=gw.headers(), timeout=10)
    assert "did you mean" not in gw_error(r, 404, "NOT_FOUND")["message"]
    sent = sum(v for k, v in emulator.stats()["calls"].items() if k.startswith("GET "))
    assert sent == (4 if passthrough else 0)
