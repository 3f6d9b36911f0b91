"""Spans exported over OTLP/HTTP JSON (tracing.*): a SERVER span per client
request on dex/sim, continuing the caller's traceparent (its span the
parent), and a CLIENT span per vendor call attempt made for it, whose id is
the span id the vendor saw in its traceparent and whose parent is the
SERVER span; a shared poll's call too. A collector that answers 500, is
down or never answers costs the callers nothing: the spans are dropped and
counted (export_failed, queue_full) and one warning is logged. Tracing off
(the default): nothing is sent anywhere. -t refuses a bad URL; SIGHUP turns
tracing on. The collector is a recording http.server on a loopback port;
the vendor the recording one of test_gateway_trace.py."""
import http.server
import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests

from conftest import BUILD, free_port
from test_gateway_trace import CALLER_TP, CALLER_TRACE, TP, Vendor, calls, vendor  # noqa: F401

CALLER_SPAN = CALLER_TP.split("-")[2]


class Collector(http.server.BaseHTTPRequestHandler):
    """Records each POST (path, headers, parsed body); answers status."""
    posts = []
    status = 200

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0) or 0)
        data = self.rfile.read(n)
        Collector.posts.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                json.loads(data)))
        self.send_response(Collector.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    Collector.posts = []
    Collector.status = 200
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Collector)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1/traces", Collector
    srv.shutdown()
    srv.server_close()


def spans(col):
    return [s for _, _, body in col.posts for rs in body["resourceSpans"]
            for ss in rs["scopeSpans"] for s in ss["spans"]]


def attrs(span):
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def wait_for(cond, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def server_span(col, rid):
    for s in spans(col):
        if s["kind"] == 2 and attrs(s).get("tidegate.request_id") == rid:
            return s
    return None


def client_span(col, span_id):
    for s in spans(col):
        if s["kind"] == 3 and s["spanId"] == span_id:
            return s
    return None


def traced_gateway(make_gateway, url, otlp, **tracing):
    return make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None},
                               "poll": {"interval": "200ms"},
                               "tracing": {"otlp_url": otlp, "flush_interval": "200ms",
                                           **tracing}})


def test_relayed_request_and_poll_export_server_and_client_spans(make_gateway, vendor,
                                                                  collector):
    url, seen = vendor
    otlp, col = collector
    gw = traced_gateway(make_gateway, url, otlp, service_name="tg-test")
    h = gw.headers()
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers={**h, "X-Request-Id": "req-create", "traceparent": CALLER_TP},
                      timeout=10)
    assert r.status_code == 200, r.text
    sent = TP.match(calls(seen, "POST", "/public/v1/export")[-1]["traceparent"])
    srv = wait_for(lambda: server_span(col, "req-create"), what="the SERVER span")
    assert srv["traceId"] == CALLER_TRACE
    assert srv["parentSpanId"] == CALLER_SPAN
    assert srv["name"] == "dex export"
    assert srv["spanId"] not in (CALLER_SPAN, sent.group(2))
    a = attrs(srv)
    assert a["http.request.method"] == "POST"
    assert a["url.path"] == "/public/v1/export/activities"
    assert a["http.response.status_code"] == "200"
    assert a["client.address"] == "127.0.0.1"
    assert a["tidegate.served"] == "relayed" and a["tidegate.origin"] == "primary"
    assert a["tidegate.key"] == "test"
    assert int(srv["startTimeUnixNano"]) <= int(srv["endTimeUnixNano"])
    assert abs(int(srv["endTimeUnixNano"]) / 1e9 - time.time()) < 60
    assert srv["status"] == {}
    cli = wait_for(lambda: client_span(col, sent.group(2)), what="the CLIENT span")
    assert cli["traceId"] == CALLER_TRACE and cli["parentSpanId"] == srv["spanId"]
    assert cli["name"] == "POST"
    ca = attrs(cli)
    assert ca["server.address"] == url.split("//")[1]
    assert ca["http.response.status_code"] == "200"
    assert srv["startTimeUnixNano"] <= cli["startTimeUnixNano"]

    # a poll of the export: its SERVER span, and the shared poll's CLIENT span
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "C-1"},
                     headers={**h, "X-Request-Id": "req-poll"}, timeout=10)
    assert r.status_code == 202, r.text
    polled = TP.match(calls(seen, "GET", "/public/export")[-1]["traceparent"])
    poll = wait_for(lambda: server_span(col, "req-poll"), what="the poll's SERVER span")
    assert poll["name"] == "dex export_get" and "parentSpanId" not in poll
    assert poll["traceId"] == polled.group(1)
    pc = wait_for(lambda: client_span(col, polled.group(2)), what="the poll's CLIENT span")
    assert pc["parentSpanId"] == poll["spanId"] and attrs(pc)["http.request.method"] == "GET"

    # the body is OTLP JSON, posted as such
    path, headers, body = col.posts[0]
    assert path == "/v1/traces" and headers["content-type"] == "application/json"
    res = body["resourceSpans"][0]
    assert {"key": "service.name", "value": {"stringValue": "tg-test"}} in \
        res["resource"]["attributes"]
    assert res["scopeSpans"][0]["scope"]["name"] == "tidegate"
    assert gw.metric("tidegate_spans_exported_total") >= 4
    assert gw.metric("tidegate_spans_dropped_total", reason="export_failed") == 0


def test_logins_a_traced_request_waits_for_are_client_spans(make_gateway, vendor, collector):
    """The gateway's own vendor login that a traced request waits for (the
    start-up login failed: the first request starts the next one) and a
    caller's own login the cache does not answer are CLIENT spans of the
    request's SERVER span, with the span id their traceparent carried; the
    login nobody waited for makes none."""
    url, seen = vendor
    otlp, col = collector
    Vendor.fail_logins = 1
    gw = make_gateway(None, {"dex": {"url": url},
                             "sim": {"url": url, "auth_url": url, "client_id": None,
                                     "client_secret_file": None},
                             "tracing": {"otlp_url": otlp, "flush_interval": "200ms"}})
    wait_for(lambda: calls(seen, "POST", "/public/v1/authenticate"), what="the first login")
    time.sleep(1.2)                                 # its 1 s backoff
    gw.own("C-1")
    r = requests.get(gw.dex + "/public/export", params={"correlationId": "C-1"},
                     headers={**gw.headers(), "X-Request-Id": "req-cold",
                              "traceparent": CALLER_TP}, timeout=10)
    assert r.status_code == 202, r.text
    first, login = calls(seen, "POST", "/public/v1/authenticate")
    login_span = TP.match(login["traceparent"]).group(2)
    srv = wait_for(lambda: server_span(col, "req-cold"), what="the SERVER span")
    cli = wait_for(lambda: client_span(col, login_span), what="the login's CLIENT span")
    assert cli["traceId"] == CALLER_TRACE and cli["parentSpanId"] == srv["spanId"]
    assert cli["name"] == "POST" and cli["status"] == {}
    assert attrs(cli)["http.response.status_code"] == "200"
    assert attrs(cli)["server.address"] == url.split("//")[1]
    assert int(cli["startTimeUnixNano"]) >= int(srv["startTimeUnixNano"])
    assert client_span(col, TP.match(first["traceparent"]).group(2)) is None

    r = requests.post(gw.dex + "/public/v1/authenticate",
                      json={"username": "someone", "password": "pw"},
                      headers={"X-Request-Id": "req-own", "traceparent": CALLER_TP},
                      timeout=10)
    assert r.status_code == 200, r.text
    own = TP.match(calls(seen, "POST", "/public/v1/authenticate")[-1]["traceparent"])
    srv = wait_for(lambda: server_span(col, "req-own"), what="the caller login's SERVER span")
    cli = wait_for(lambda: client_span(col, own.group(2)), what="its CLIENT span")
    assert cli["parentSpanId"] == srv["spanId"] and attrs(cli)["http.request.method"] == "POST"
    assert len(calls(seen, "POST", "/public/v1/authenticate")) == 3


def test_a_gateway_error_is_an_error_span(make_gateway, collector):
    otlp, col = collector
    dead = f"http://127.0.0.1:{free_port()}"      # no vendor: 502
    gw = traced_gateway(make_gateway, dead, otlp)
    r = requests.get(gw.dex + "/public/v1/anything", headers={**gw.headers(),
                     "X-Request-Id": "req-502"}, timeout=10)
    assert r.status_code == 502
    srv = wait_for(lambda: server_span(col, "req-502"), what="the SERVER span")
    assert srv["status"] == {"code": 2}
    assert attrs(srv)["http.response.status_code"] == "502"
    assert len(srv["traceId"]) == 32 and "parentSpanId" not in srv
    cli = wait_for(lambda: [s for s in spans(col) if s.get("parentSpanId") == srv["spanId"]],
                   what="the failed attempt's CLIENT span")
    assert cli[0]["kind"] == 3 and cli[0]["status"] == {"code": 2}
    assert "http.response.status_code" not in attrs(cli[0])


@pytest.mark.parametrize("how", ["500", "down"])
def test_failed_exports_are_dropped_and_counted(make_gateway, vendor, collector, how):
    url, _ = vendor
    otlp, col = collector
    if how == "500":
        col.status = 500
    else:
        otlp = f"http://127.0.0.1:{free_port()}/v1/traces"
    gw = traced_gateway(make_gateway, url, otlp)
    for i in range(3):
        r = requests.get(gw.dex + "/public/v1/ping", headers=gw.headers(), timeout=10)
        assert r.status_code == 200
        time.sleep(0.3)      # over flush_interval: several exports fail
    wait_for(lambda: gw.metric("tidegate_spans_dropped_total", reason="export_failed") >= 6,
             what="6 spans dropped")
    assert gw.metric("tidegate_spans_exported_total") == 0
    assert gw.metric("tidegate_spans_dropped_total", reason="queue_full") == 0
    if how == "500":
        assert len(col.posts) >= 2      # each export tried once, never again
    warns = [e for e in gw.log_lines() if e.get("event") == "otlp_export_failed"]
    assert len(warns) == 1, warns     # at most once a minute
    assert warns[0]["url"] == otlp
    r = requests.get(gw.dex + "/public/v1/ping", headers=gw.headers(), timeout=10)
    assert r.status_code == 200


def test_a_full_queue_drops_and_counts(make_gateway, vendor):
    url, _ = vendor
    stalled = socket.socket()      # accepts connections, never answers
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(16)
    try:
        otlp = f"http://127.0.0.1:{stalled.getsockname()[1]}/v1/traces"
        gw = traced_gateway(make_gateway, url, otlp, max_queue=4)
        for _ in range(6):
            r = requests.get(gw.dex + "/public/v1/ping", headers=gw.headers(), timeout=10)
            assert r.status_code == 200
        wait_for(lambda: gw.metric("tidegate_spans_dropped_total", reason="queue_full") >= 4,
                 what="queue_full drops")
        assert gw.metric("tidegate_spans_exported_total") == 0
        t0 = time.monotonic()
        assert gw.stop() == 0       # the drain gives the stalled export up
        assert time.monotonic() - t0 < 8
    finally:
        stalled.close()


def test_sampling_follows_the_caller_and_tracing_sample(make_gateway, vendor, collector):
    """A caller's traceparent decides by its sampled flag, whatever
    tracing.sample says; a trace started here is sampled with that share
    (0: none, 0.5: about half of 400); the traceparent sent to the vendor
    carries the decision."""
    url, seen = vendor
    otlp, col = collector
    gw = traced_gateway(make_gateway, url, otlp, sample=0)
    h = gw.headers()
    not_sampled = CALLER_TP[:-2] + "00"

    def ping(rid, tp=None):
        hh = {**h, "X-Request-Id": rid, **({"traceparent": tp} if tp else {})}
        assert requests.get(gw.dex + "/public/v1/ping", headers=hh, timeout=10).status_code == 200

    ping("req-flag-on", CALLER_TP)
    ping("req-flag-off", not_sampled)
    ping("req-new")
    srv = wait_for(lambda: server_span(col, "req-flag-on"), what="the sampled span")
    assert srv["parentSpanId"] == CALLER_SPAN
    assert wait_for(lambda: client_span(col, TP.match(
        calls(seen, "GET", "/public/v1/ping")[0]["traceparent"]).group(2)), what="its CLIENT")
    time.sleep(0.6)                                   # three flush intervals
    assert server_span(col, "req-flag-off") is None and server_span(col, "req-new") is None
    assert len(spans(col)) == 2 and gw.metric("tidegate_spans_exported_total") == 2
    # the vendor gets the caller's trace, and the decision: "-00" for a
    # caller's unsampled trace and for one tracing.sample drew out
    sent = [c["traceparent"] for c in calls(seen, "GET", "/public/v1/ping")]
    assert TP.match(sent[0]) and sent[1].startswith(f"00-{CALLER_TRACE}-"), sent
    assert sent[1].endswith("-00") and sent[2].endswith("-00"), sent

    gw2 = traced_gateway(make_gateway, url, otlp, sample=0.5)
    Collector.posts = []
    for i in range(400):
        requests.get(gw2.dex + "/public/v1/ping", headers={**h, "X-Request-Id": f"s-{i}"},
                     timeout=10)
    time.sleep(0.6)
    n = len([s for s in spans(col) if s["kind"] == 2])
    assert 140 <= n <= 260, n                         # 200 expected, 6 sigma either side
    sent = [c["traceparent"] for c in calls(seen, "GET", "/public/v1/ping")[3:]]
    assert len(sent) == 400 and sum(t.endswith("-01") for t in sent) == n   # as drawn
    assert all(s["kind"] != 2 or "parentSpanId" not in s for s in spans(col))


def test_tracing_off_sends_nothing(make_gateway, vendor, collector):
    url, _ = vendor
    _, col = collector
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    for _ in range(3):
        r = requests.get(gw.dex + "/public/v1/ping", headers={**gw.headers(),
                         "traceparent": CALLER_TP}, timeout=10)
        assert r.status_code == 200
    time.sleep(2.5)      # past the default flush_interval
    assert col.posts == []
    assert gw.metric("tidegate_spans_exported_total") == 0
    assert gw.metric("tidegate_spans_dropped_total", reason="queue_full") == 0
    assert gw.metric("tidegate_spans_dropped_total", reason="export_failed") == 0
    assert "tidegate_spans_exported_total 0" in gw.metrics()
    assert not [e for e in gw.log_lines() if e.get("event") == "tracing"]


def test_sighup_turns_tracing_on_and_off(make_gateway, vendor, collector):
    url, _ = vendor
    otlp, col = collector
    gw = make_gateway(None, {"dex": {"url": url, "username": None, "password_file": None}})
    cfg = json.loads(json.dumps(gw.cfg))
    cfg["tracing"] = {"otlp_url": otlp, "flush_interval": "200ms"}
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)
    wait_for(lambda: [e for e in gw.log_lines() if e.get("event") == "tracing"],
             what="tracing on")
    requests.get(gw.dex + "/public/v1/ping", headers={**gw.headers(), "X-Request-Id": "r-on"},
                 timeout=10)
    wait_for(lambda: server_span(col, "r-on"), what="a span after the reload")
    del cfg["tracing"]
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)
    wait_for(lambda: len([e for e in gw.log_lines() if e.get("event") == "reloaded"]) == 2,
             what="the second reload")
    n = len(col.posts)
    requests.get(gw.dex + "/public/v1/ping", headers=gw.headers(), timeout=10)
    time.sleep(0.6)
    assert len(col.posts) == n


def test_spans_queued_at_a_reload_go_on(make_gateway, vendor, collector):
    """Spans queued when SIGHUP changes tracing.* are exported by the new
    exporter (to its URL); turning tracing off drops the queued ones,
    counted with reason="reload"."""
    url, _ = vendor
    otlp, col = collector
    slow = {"otlp_url": otlp, "flush_interval": "1h"}      # nothing leaves on its own
    gw = traced_gateway(make_gateway, url, otlp, flush_interval="1h")

    def reload(tracing, n):
        cfg = json.loads(json.dumps(gw.cfg))
        if tracing:
            cfg["tracing"] = tracing
        else:
            cfg.pop("tracing", None)
        gw.write_config(cfg)
        gw.send_signal(signal.SIGHUP)
        wait_for(lambda: len([e for e in gw.log_lines() if e.get("event") == "reloaded"]) == n,
                 what=f"reload {n}")

    for i in range(3):
        requests.get(gw.dex + "/public/v1/ping", headers={**gw.headers(),
                     "X-Request-Id": f"q-{i}"}, timeout=10)
    time.sleep(0.3)
    assert col.posts == []
    reload({"otlp_url": otlp.replace("/v1/", "/v2/"), "flush_interval": "200ms"}, 1)
    for i in range(3):
        wait_for(lambda: server_span(col, f"q-{i}"), what=f"the queued span q-{i}")
    assert {p for p, _, _ in col.posts} == {"/v2/traces"}
    assert len(spans(col)) == 6 and gw.metric("tidegate_spans_exported_total") == 6
    assert gw.metric("tidegate_spans_dropped_total", reason="reload") == 0

    reload(slow, 2)
    requests.get(gw.dex + "/public/v1/ping", headers=gw.headers(), timeout=10)
    time.sleep(0.3)
    reload(None, 3)                                         # off: the queued two dropped
    assert gw.metric("tidegate_spans_dropped_total", reason="reload") == 2
    assert len(spans(col)) == 6


@pytest.mark.parametrize("bad", ["ftp://127.0.0.1:4318/v1/traces", "http:///v1/traces",
                                 "http://127.0.0.1:4318/v1/traces?x=1"])
def test_check_refuses_a_bad_otlp_url(tmp_path, bad):
    path = os.path.join(tmp_path, "t.yaml")
    with open(path, "w") as f:
        f.write(f"upstream: remote\ntracing:\n  otlp_url: \"{bad}\"\n")
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", path],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "tracing.otlp_url" in r.stdout + r.stderr
