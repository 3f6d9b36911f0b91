"""Request ids and W3C trace context on every vendor call the gateway makes
for a caller (issue 17): a polled GET shared by the poll multiplexer, a
long-poll, a caller's login and a pass-through, each with the caller's
X-Request-Id, a traceparent of the caller's trace with a new span id per
call, its tracestate, X-Forwarded-For, and User-Agent: tidegate/<version> on
the calls the gateway makes itself (a relayed request keeps its client's);
and on webhook deliveries (X-Request-Id of the request that added the job,
a traceparent of the trace derived from the webhook id). The gateway's own
vendor logins: the one a waiting caller started carries that caller's id
and trace (a new span), one nobody waits for a trace of its own and no id;
the token log lines name the account and the login's trigger. The
upstream client's failover and failure lines name the request. The vendor
is a recording http.server on a loopback port (the emulator does not show
the headers it receives)."""
import hashlib
import http.server
import json
import re
import threading
import time

import pytest
import requests

from conftest import free_port
from test_gateway_failover import FAST
from test_gateway_webhooks import Receiver, hooks, secret_file  # noqa: F401 (fixture)

TP = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_TP = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


class Vendor(http.server.BaseHTTPRequestHandler):
    """Records method, path and headers; an export C-1 that never finishes;
    the first fail_logins logins answered 500."""
    seen = []
    fail_logins = 0

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
        if self.path.endswith("/authenticate") and Vendor.fail_logins > 0:
            Vendor.fail_logins -= 1
            self.answer(500, {"error": "down"})
        elif self.path.endswith("/authenticate"):
            self.answer(200, {"token": "caller-own-token", "expiresIn": 3600})
        else:
            self.answer(200, {"correlationId": "C-1"})

    def log_message(self, *args):
        pass


@pytest.fixture
def vendor():
    Vendor.seen = []
    Vendor.fail_logins = 0
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
    return gw.access_lines(1, lambda e: e.get("id") == rid)


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


@pytest.mark.parametrize("flags,sent", [("01", "01"), ("00", "00"), ("03", "01"),
                                         ("0a", "00"), (None, "01")])
def test_the_callers_sampled_flag_goes_on(make_gateway, vendor, flags, sent):
    """A caller's traceparent's sampled flag reaches every vendor call made
    for it (W3C: a trace its caller does not sample stays unsampled); a
    trace begun here says sampled (tracing off: the vendor may record)."""
    url, seen = vendor
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    gw.own("C-1")
    tp = {"traceparent": f"00-{CALLER_TRACE}-00f067aa0ba902b7-{flags}"} if flags else {}
    h = {**gw.headers(), "X-Request-Id": "req-flags", **tp}
    r = requests.get(gw.dex + "/public/v2/anything", headers=h, timeout=10)
    assert r.status_code == 200
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "C-1"}, headers=h,
                     timeout=10)
    assert r.status_code == 202
    got = [calls(seen, "GET", p)[-1]["traceparent"] for p in ("/public/v2/", "/public/export")]
    for g in got:
        assert re.match(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-" + sent + "$", g), (flags, got)
        assert (g.split("-")[1] == CALLER_TRACE) == (flags is not None)


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
        # the attempt's line is written once the receiver's answer is read
        wait_for(lambda: events(gw, "webhook_attempt"))
        attempt = events(gw, "webhook_attempt")[0]
        assert attempt["webhook_id"] == wid and attempt["request_id"] == "req-hook"
        assert attempt["trace_id"] == want
    finally:
        receiver.close()


def events(gw, name):
    return [e for e in gw.log_lines() if e.get("event") == name]


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_vendor_login_carries_the_waiting_callers_trace(make_gateway, vendor):
    """The start-up login fails; past its 1 s backoff the first request finds
    no token and waits for the login it starts: that login is the caller's."""
    url, seen = vendor
    Vendor.fail_logins = 1
    gw = make_gateway(None, {"dex": {"url": url},
                             "sim": {"url": url, "auth_url": url, "client_id": None,
                                     "client_secret_file": None}})
    wait_for(lambda: events(gw, "token_login_failed"))
    prefetch = calls(seen, "POST", "/public/v1/authenticate")
    assert len(prefetch) == 1
    m = TP.match(prefetch[0]["traceparent"])       # a trace of its own, no request id
    assert m and m.group(1) != CALLER_TRACE, prefetch[0]
    assert "x-request-id" not in prefetch[0]
    assert re.match(r"^tidegate/\S+$", prefetch[0]["user-agent"])
    failed = events(gw, "token_login_failed")[0]
    assert failed["account"] == "demo" and "id" not in failed
    assert failed["request_id"] is None and failed["trace_id"] == m.group(1)   # its own

    time.sleep(1.2)                                 # the backoff window
    gw.own("C-1")
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "C-1"},
                     headers={**gw.headers(), "X-Request-Id": "req-cold",
                              "traceparent": CALLER_TP, "tracestate": "vendor=abc"},
                     timeout=10)
    assert r.status_code == 202, r.text
    logins = calls(seen, "POST", "/public/v1/authenticate")
    assert len(logins) == 2
    _, login_span = check_traced(logins[1], "req-cold", CALLER_TRACE)
    assert logins[1]["tracestate"] == "vendor=abc"
    _, get_span = check_traced(calls(seen, "GET", "/public/export")[-1], "req-cold",
                               CALLER_TRACE)
    assert len({login_span, get_span, CALLER_TP.split("-")[2]}) == 3
    ok = events(gw, "token_login_ok")
    assert len(ok) == 1 and "id" not in ok[0], ok
    assert ok[0]["account"] == "demo" and ok[0]["request_id"] == "req-cold"
    assert ok[0]["trace_id"] == CALLER_TRACE


def test_upstream_failure_lines_name_the_request(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, FAST)
    gw.wait_tokens()
    emu.fault(listener="sim", reset=True, count=1)
    r = requests.get(gw.sim + "/api/v1/cases", timeout=30,
                     headers={**gw.headers(), "X-Request-Id": "req-failover",
                              "traceparent": CALLER_TP})
    assert r.status_code == 200, r.text
    over = events(gw, "upstream_failover")
    assert over and over[0]["request_id"] == "req-failover", over
    assert over[0]["trace_id"] == CALLER_TRACE

    emu.fault(path="/public/v1/export/activities", reset=True, count=5)
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers={**gw.headers(), "X-Request-Id": "req-broken"}, timeout=30)
    assert r.status_code >= 500
    failed = events(gw, "upstream_failed")
    assert failed and failed[-1]["request_id"] == "req-broken", failed
    assert re.match(r"^[0-9a-f]{32}$", failed[-1]["trace_id"])
    assert failed[-1]["trace_id"] == access(gw, "req-broken")[0]["trace_id"]


def test_every_id_in_the_log_is_a_request_id(make_emulator, make_gateway,
                                             secret_file):  # noqa: F811
    """`id` in a log line is always a request id: an export with a callback,
    a simulation and a sweep with theirs, and a token the vendor revoked, and
    every line's id is one of the X-Request-Ids sent or answered; the
    objects are named otherwise (account, webhook_id, request_id)."""
    receiver = Receiver()
    try:
        emu = make_emulator()
        gw = make_gateway(emu, hooks(secret_file))
        s = requests.Session()
        ids = set()

        def send(method, url, rid=None, headers=None, **kw):
            h = {**gw.headers(), **(headers or {})}
            if rid is not None:
                h["X-Request-Id"] = rid
                ids.add(rid)
            r = s.request(method, url, headers=h, timeout=15, **kw)
            ids.add(r.headers["X-Request-Id"])
            return r

        r = send("POST", gw.dex + "/public/v1/export/activities", "req-export",
                 json={"projectId": "P-DEMO", "callbackUrl": receiver.url("/export")})
        assert r.status_code == 200, r.text
        case = send("GET", gw.sim + "/api/v1/cases/CASE-OM-1").json()   # a generated id
        r = send("POST", gw.sim + "/api/v1/simulations", "req-sim", data=json.dumps(case),
                 headers={"Content-Type": "application/json",
                          "X-Tidegate-Callback-Url": receiver.url("/sim")})
        assert r.status_code == 201, r.text
        r = send("POST", gw.sim + "/tidegate/v1/sweeps", "req-sweep",
                 json={"baseCaseId": "CASE-OM-1", "callbackUrl": receiver.url("/sweep"),
                       "variants": [{"name": "a", "patch": {}}]})
        assert r.status_code == 201, r.text
        receiver.wait(lambda: all(receiver.seen(p) for p in ("/export", "/sim", "/sweep")),
                      timeout=30, what="the three webhooks")
        requests.post(emu.dex + "/__emulator/revoke", timeout=5)
        gw.own("nope")
        r = send("GET", gw.dex + "/public/export", "req-revoked",
                 params={"correlationId": "nope"})
        assert r.status_code == 404, r.text
        time.sleep(0.3)

        lines = gw.log_lines()
        # the harness's own probes of the admin listener have ids made for them
        probes = [e for e in lines if e.get("service") == "admin"]
        assert probes and all(re.match(r"^[0-9a-f-]{36}$", e["id"]) for e in probes)
        assert [e for e in lines if "id" in e and e["id"] not in ids and e not in probes] == []
        names = {e["event"] for e in lines}
        assert {"access", "token_login_ok", "token_invalidated", "webhook_job_added",
                "run_webhook_added", "sweep_webhook_added"} <= names, names
        tokens = [e for e in lines if e["event"].startswith("token_")]
        assert all(e["account"] == "demo" and "id" not in e for e in tokens), tokens
        assert "req-revoked" in {e["request_id"] for e in events(gw, "token_invalidated")}
        for name in ("run_webhook_added", "sweep_webhook_added"):
            assert all(e["webhook_id"] and "id" not in e for e in events(gw, name))
    finally:
        receiver.close()
