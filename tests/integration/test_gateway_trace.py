"""Request ids and W3C trace context on every vendor call the gateway makes
for a caller (issue 17): a polled GET shared by the poll multiplexer, a
long-poll, a caller's login and a pass-through, each with the caller's
X-Request-Id, a traceparent of the caller's trace with a new span id per
call, its tracestate, X-Forwarded-For, and User-Agent: tidegate/<version> on
the calls the gateway makes itself (a relayed request keeps its client's);
and on webhook deliveries (X-Request-Id of the request that added the job,
a traceparent of the trace derived from the webhook id). The vendor is a
recording http.server on a loopback port (the emulator does not show the
headers it receives)."""
import hashlib
import http.server
import json
import re
import threading

import pytest
import requests

from conftest import free_port
from test_gateway_webhooks import Receiver, hooks, secret_file  # noqa: F401 (fixture)

TP = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_TP = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


class Vendor(http.server.BaseHTTPRequestHandler):
    """Records method, path and headers; an export C-1 that never finishes."""
    seen = []

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self):
        n = int(self.headers.get("Content-Length", 0) or 0)
        if n:
            self.rfile.read(n)
        Vendor.seen.append((self.command, self.path, {k.lower(): v for k, v in
                                                      self.headers.items()}))

    def do_GET(self):
        self.record()
        if self.path.startswith("/public/export"):
            self.answer(202, {"status": "IN_PROGRESS"})
        else:
            self.answer(200, {"ok": True})

    def do_POST(self):
        self.record()
        if self.path.endswith("/authenticate"):
            self.answer(200, {"token": "caller-own-token", "expiresIn": 3600})
        else:
            self.answer(200, {"correlationId": "C-1"})

    def log_message(self, *args):
        pass


@pytest.fixture
def vendor():
    Vendor.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Vendor)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", Vendor.seen
    srv.shutdown()
    srv.server_close()


def calls(seen, method, prefix):
    return [h for m, p, h in seen if m == method and p.startswith(prefix)]


def check_traced(h, rid, trace=None, relayed=False):
    assert h["x-request-id"] == rid, h
    m = TP.match(h["traceparent"])
    assert m, h["traceparent"]
    if trace is not None:
        assert m.group(1) == trace
    assert h["x-forwarded-for"].endswith("127.0.0.1")
    if relayed:     # a relayed request keeps its client's User-Agent
        assert h["user-agent"].startswith("python-requests/"), h["user-agent"]
    else:           # a call the gateway makes itself names the gateway
        assert re.match(r"^tidegate/\S+$", h["user-agent"]), h["user-agent"]
    return m.group(1), m.group(2)


def access(gw, rid):
    return [e for e in gw.log_lines() if e.get("event") == "access" and e.get("id") == rid]


def test_polls_long_polls_and_passthrough_carry_the_callers_trace(make_gateway, vendor):
    url, seen = vendor
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None},
                             "poll": {"interval": "200ms"}})
    h = gw.headers()
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers={**h, "X-Request-Id": "req-create", "traceparent": CALLER_TP,
                               "tracestate": "vendor=abc"}, timeout=10)
    assert r.status_code == 200, r.text
    _, span_create = check_traced(calls(seen, "POST", "/public/v1/export")[-1], "req-create",
                                  CALLER_TRACE, relayed=True)
    assert calls(seen, "POST", "/public/v1/export")[-1]["tracestate"] == "vendor=abc"
    assert span_create != CALLER_TP.split("-")[2]      # a child span, not the caller's

    # a shared poll: its GET carries the first caller's id and trace
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "C-1"},
                     headers={**h, "X-Request-Id": "req-poll", "traceparent": CALLER_TP,
                              "X-Forwarded-For": "10.1.2.3"}, timeout=10)
    assert r.status_code == 202, r.text
    polled = calls(seen, "GET", "/public/export")
    assert polled, seen
    check_traced(polled[-1], "req-poll", CALLER_TRACE)
    assert polled[-1]["x-forwarded-for"] == "10.1.2.3, 127.0.0.1"

    # a long-poll without a traceparent: a new trace, named in the access log
    n = len(polled)
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "C-1", "wait": "1"},
                     headers={**h, "X-Request-Id": "req-long"}, timeout=10)
    assert r.status_code == 202
    polled = calls(seen, "GET", "/public/export")
    assert len(polled) > n
    trace, _ = check_traced(polled[n], "req-long")
    assert trace != CALLER_TRACE
    line = access(gw, "req-long")[0]
    assert line["trace_id"] == trace and line["served"] == "long-poll"
    assert line["correlationId"] == "C-1"
    spans = [TP.match(p["traceparent"]).group(2) for p in polled]
    assert len(set(spans)) == len(spans)                # a new span id per vendor call

    # a pass-through and a caller's own login
    r = requests.get(gw.dex + "/public/v2/anything", headers={**h, "X-Request-Id": "req-pass"},
                     timeout=10)
    assert r.status_code == 200
    check_traced(calls(seen, "GET", "/public/v2/anything")[-1], "req-pass", relayed=True)


def test_caller_login_carries_the_callers_trace(make_gateway, vendor):
    url, seen = vendor
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    r = requests.post(gw.dex + "/public/v1/authenticate",
                      json={"username": "someone", "password": "pw"},
                      headers={"X-Request-Id": "req-login", "traceparent": CALLER_TP},
                      timeout=10)
    assert r.status_code == 200, r.text
    check_traced(calls(seen, "POST", "/public/v1/authenticate")[-1], "req-login",
                 CALLER_TRACE)


def test_webhook_delivery_names_the_request_and_its_trace(make_emulator, make_gateway,
                                                          secret_file):  # noqa: F811
    receiver = Receiver()
    try:
        emu = make_emulator()
        gw = make_gateway(emu, hooks(secret_file))
        r = requests.post(gw.dex + "/public/v1/export/activities",
                          json={"projectId": "P-DEMO", "callbackUrl": receiver.url("/hook")},
                          headers={**gw.headers(), "X-Request-Id": "req-hook"}, timeout=10)
        assert r.status_code == 200, r.text
        wid = r.headers["X-Tidegate-Webhook-Id"]
        receiver.wait(lambda: len(receiver.seen()) == 1)
        h = {k.lower(): v for k, v in receiver.seen()[0]["headers"].items()}
        assert h["x-request-id"] == "req-hook" and h["webhook-id"] == wid
        want = hashlib.sha256(f"tidegate-webhook:{wid}".encode()).hexdigest()[:32]
        m = TP.match(h["traceparent"])
        assert m and m.group(1) == want, h["traceparent"]
        added = [e for e in gw.log_lines() if e.get("event") == "webhook_job_added"][0]
        assert added["webhook_id"] == wid and added["request_id"] == "req-hook"
        assert added["delivery_trace_id"] == want
        assert added["trace_id"] == access(gw, "req-hook")[0]["trace_id"]
        attempt = [e for e in gw.log_lines() if e.get("event") == "webhook_attempt"][0]
        assert attempt["webhook_id"] == wid and attempt["request_id"] == "req-hook"
        assert attempt["trace_id"] == want
    finally:
        receiver.close()
