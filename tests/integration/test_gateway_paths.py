"""Request targets on the gateway's service listeners (docs/architecture.md,
Request targets): every spelling of a path is normalised before routing
(dot segments, encoded dots, encoded unreserved characters, empty
segments), so ownership and validation apply to it and the vendor receives
the canonical path under its base path; targets that cannot be normalised
safely, or that would inject into the vendor's request line, are 400 JSON
with nothing sent; the emulator's control API is 404 in every spelling.

HTTP client libraries normalise or refuse such targets themselves, so
every request here is written as raw bytes on a socket."""
import json
import socket
import socketserver
import threading
import uuid

import pytest
import requests

from conftest import TEST_KEY, free_port


def raw(port, target, method=b"GET", headers=None, body=None):
    """Send one request with target as given (bytes); (status, headers, body)."""
    hdrs = {"Host": "127.0.0.1", "Connection": "close", **(headers or {})}
    if body is not None:
        hdrs["Content-Length"] = str(len(body))
    head = method + b" " + target + b" HTTP/1.1\r\n" + b"".join(
        f"{k}: {v}\r\n".encode() for k, v in hdrs.items()) + b"\r\n"
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head + (body or b""))
        while len(data) < 4 << 20:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    rh = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if rh.get("transfer-encoding") == "chunked":
        out = b""
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        rest = out
    return status, rh, rest


def key():
    return {"Authorization": "Bearer " + TEST_KEY}


def quiet(emulator, gateway):
    """Start-up logins done, counters zeroed: what follows is the test's own."""
    gateway.wait_tokens()
    requests.delete(emulator.dex + "/__emulator/stats", timeout=5)


def all_calls(emulator):
    s = emulator.stats()
    return {f"{lst}:{k}": v for lst, calls in s["byListener"].items() for k, v in calls.items()}


def assert_error(status, body, want_status, want_code, message_part=""):
    assert status == want_status, body
    b = json.loads(body)
    assert b["statusCode"] == want_status and b["error"] == want_code, b
    assert message_part in b["message"], b
    assert len(b["requestId"]) == 36, b
    return b


# ---- spellings that used to skip routing ----

ESCAPING_EXPORTS = [
    b"/public/v1/x/../export/activities",
    b"/public/v1/x/%2e%2e/export/activities",
    b"/public/v1/x/%2E./export/activities",
    b"/public/v1/%65xport/activities",
    b"/public/v1/%65%78%70%6f%72%74/%61ctivities",
    b"/public//v1//export/activities",
    b"/public/v1/./export/activities",
    b"//api/public/v1/export/x/../activities",
]


@pytest.mark.parametrize("target", ESCAPING_EXPORTS)
def test_escaping_spellings_are_routed_and_validated(emulator, gateway, target):
    """An invalid export in any spelling is refused by validation (it used
    to go upstream as pass-through with the gateway's token)."""
    quiet(emulator, gateway)
    status, _, body = raw(gateway.ports["dex"], target, b"POST",
                          {**key(), "Content-Type": "application/json"},
                          json.dumps({"projectid": "P-DEMO"}).encode())
    b = assert_error(status, body, 400, "VALIDATION_FAILED")
    assert {d["code"] for d in b["details"]} >= {"unknown_field", "required"}
    assert all_calls(emulator) == {}
    assert gateway.metric("tidegate_requests_total", service="dex", op="export",
                          code="400") == 1


@pytest.mark.parametrize("target", ESCAPING_EXPORTS)
def test_escaping_spellings_reach_the_canonical_endpoint(emulator, gateway, target):
    quiet(emulator, gateway)
    status, _, body = raw(gateway.ports["dex"], target, b"POST",
                          {**key(), "Content-Type": "application/json"},
                          json.dumps({"projectId": "P-DEMO"}).encode())
    assert status == 200, body
    assert "correlationId" in json.loads(body)
    assert all_calls(emulator) == {"dex:POST /public/v1/export/activities": 1}


@pytest.mark.parametrize("target", [b"/public/x/../export", b"/public/x/%2e%2e/export",
                                    b"/public/%65xport", b"/public//export",
                                    b"/api/public/v1/import/..//../export"])
def test_report_spellings_of_get_export(emulator, gateway, target):
    quiet(emulator, gateway)
    cid = uuid.uuid4().hex
    gateway.own(cid)
    status, _, body = raw(gateway.ports["dex"], target + b"?correlationId=" + cid.encode(),
                          headers=key())
    assert status == 404, body      # the vendor's answer for an unknown job
    assert all_calls(emulator) == {"dex:GET /public/export": 1}
    assert gateway.metric("tidegate_requests_total", service="dex", op="export_get",
                          code="404") == 1


def test_sim_spellings_reach_the_canonical_endpoint(emulator, gateway):
    quiet(emulator, gateway)
    for target in [b"/api/v1/cases/%2e%2e/cases", b"/api//v1/%63ases", b"/v1/x/../cases/"
                   b"CASE-OM-1", b"/api/v1/cases/./CASE-OM-1"]:
        status, _, body = raw(gateway.ports["sim"], target, headers=key())
        assert status == 200, (target, body)
    assert all_calls(emulator) == {"sim:GET /api/v1/cases": 2,
                                   "sim:GET /api/v1/cases/CASE-OM-1": 2}


def test_aliases_keep_working_over_raw_targets(emulator, gateway):
    quiet(emulator, gateway)
    for prefix in [b"/public/v1", b"/public", b"/api/public/v1", b"/api", b""]:
        cid = uuid.uuid4().hex
        gateway.own(cid, family="import")
        status, _, body = raw(gateway.ports["dex"], prefix + b"/import/status?correlationId=" +
                              cid.encode(), headers=key())
        assert status == 404, (prefix, body)
    assert all_calls(emulator) == {"dex:GET /public/v1/import/status": 5}


# ---- the vendor URL's base path ----

class LineRecorder(socketserver.StreamRequestHandler):
    """A vendor that records each request line as bytes and answers 200 {}."""
    lines = []

    def handle(self):
        line = self.rfile.readline(65536)
        LineRecorder.lines.append(line)
        while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
            pass
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")


@pytest.fixture
def line_vendor():
    LineRecorder.lines = []
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", free_port()), LineRecorder)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", LineRecorder.lines
    srv.shutdown()
    srv.server_close()


BASE_CASES = [
    (b"/../../x/y", b"GET /vendor/api/x/y HTTP/1.1\r\n"),
    (b"/%2e%2e/%2E%2E/x/./y?q=../a", b"GET /vendor/api/x/y?q=../a HTTP/1.1\r\n"),
    (b"/public/v2/../../../../etc/passwd", b"GET /vendor/api/etc/passwd HTTP/1.1\r\n"),
    (b"//x//y/%7e/%c3%a9", b"GET /vendor/api/x/y/~/%C3%A9 HTTP/1.1\r\n"),
    (b"/public/x/../export?correlationId=c1",
     b"GET /vendor/api/public/export?correlationId=c1 HTTP/1.1\r\n"),
]


def test_passthrough_never_leaves_the_base_path(make_gateway, line_vendor):
    url, lines = line_vendor
    gw = make_gateway(None, {"dex": {"url": url + "/vendor/api/", "username": None,
                                     "password_file": None}})
    gw.own("c1")
    for target, want in BASE_CASES:
        status, _, body = raw(gw.ports["dex"], target, headers=key())
        assert status == 200 and body == b"{}", (target, body)
        assert lines[-1] == want, (target, lines[-1])
    assert len(lines) == len(BASE_CASES)


def test_dot_segments_cannot_climb_to_the_emulator_control_api(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"url": emulator.dex + "/vendor", "username": None,
                                         "password_file": None}})
    requests.delete(emulator.dex + "/__emulator/stats", timeout=5)
    status, _, body = raw(gw.ports["dex"], b"/../x/%2e%2e/y", headers=key())
    assert status == 404        # the emulator knows no /vendor/y
    for target in [b"/../__emulator/stats", b"/x/%2e%2e/%2e%2e/__emulator/stats"]:
        status, _, body = raw(gw.ports["dex"], target, headers=key())
        assert_error(status, body, 404, "NOT_FOUND", "no such endpoint")
    assert all_calls(emulator) == {"dex:GET /vendor/y": 1}


# ---- the emulator's control API ----

EMULATOR_SPELLINGS = [
    b"/__emulator/faults", b"/%5F%5Femulator/faults", b"/%5f_emulator/faults",
    b"/__EMULATOR/faults", b"//__emulator//faults", b"/public/../__emulator/faults",
    b"/public/x/%2e%2e/../__emulator/faults", b"/public/v1/__emulator/faults",
    b"/__emulator/", b"/__emulator",
]


@pytest.mark.parametrize("listener", ["dex", "sim"])
def test_emulator_control_api_is_unreachable(emulator, gateway, listener):
    quiet(emulator, gateway)
    rule = json.dumps({"status": 500, "path": "/public/v1/import/status"}).encode()
    for target in EMULATOR_SPELLINGS:
        for hdrs in ({"Authorization": "Bearer not-a-gateway-key"}, key(), {}):
            status, _, body = raw(gateway.ports[listener], target, b"POST",
                                  {**hdrs, "Content-Type": "application/json"}, rule)
            assert_error(status, body, 404, "NOT_FOUND", "no such endpoint")
        status, _, body = raw(gateway.ports[listener], target, b"DELETE", key())
        assert_error(status, body, 404, "NOT_FOUND")
    assert gateway.metric("tidegate_request_target_refusals_total", service=listener,
                          rule="reserved") == 4 * len(EMULATOR_SPELLINGS)
    # no fault was installed and nothing reached the emulator
    r = requests.get(emulator.dex + "/public/v1/import/status?correlationId=x",
                     headers=emulator.dex_headers(), timeout=5)
    assert r.status_code != 500


def test_emulator_control_api_through_caller_token_is_404(emulator, gateway):
    """The report's case: a non-key bearer used to be forwarded to
    /__emulator/faults and answered 200."""
    quiet(emulator, gateway)
    status, _, body = raw(gateway.ports["dex"], b"/__emulator/faults", b"POST",
                          {"Authorization": "Bearer x", "Content-Type": "application/json"},
                          json.dumps({"status": 503}).encode())
    assert_error(status, body, 404, "NOT_FOUND")
    assert all_calls(emulator) == {}
    r = requests.post(emulator.dex + "/public/v1/authenticate",
                      json={"username": "demo", "password": "demo"}, timeout=5)
    assert r.status_code == 200


# ---- targets refused before routing ----

REFUSED = [
    # (method, target, rule, message fragment)
    (b"GET", b'/public/v1/a"b', "char", "byte 0x22"),
    (b"GET", b"/public/v1/<script>", "char", "byte 0x3C"),
    (b"GET", b"/public/v1/a>b", "char", "byte 0x3E"),
    (b"GET", b"/public/v1/{x}", "char", "byte 0x7B"),
    (b"GET", b"/public/v1/a}", "char", "byte 0x7D"),
    (b"GET", b"/public/v1/a|b", "char", "byte 0x7C"),
    (b"GET", b"/public/v1/a\\..\\b", "char", "byte 0x5C"),
    (b"GET", b"/public/v1/a^b", "char", "byte 0x5E"),
    (b"GET", b"/public/v1/a`b", "char", "byte 0x60"),
    (b"GET", b"/public/v1/a[0]", "char", "byte 0x5B"),
    (b"GET", b"/public/export#frag", "char", "byte 0x23"),
    (b"GET", b"/public/export?correlationId=<x>", "char", "byte 0x3C"),
    (b"GET", b"/public/export?correlationId=\"x\"", "char", "byte 0x22"),
    (b"OPTIONS", b"*", "form", "asterisk-form"),
    (b"GET", b"http://127.0.0.1/public/export?correlationId=x", "form", "forward proxy"),
    (b"GET", b"HTTPS://evil.example/public/v2/x", "form", "forward proxy"),
    (b"GET", b"public/v1/export", "form", "absolute path"),
    (b"GET", b"../__emulator/stats", "form", "absolute path"),
    (b"GET", b"/public/v1%2Fexport", "encoded", "%2F at offset 10"),
    (b"GET", b"/public/x/..%2f..%2f__emulator/stats", "encoded", "%2F"),
    (b"GET", b"/public/v1/a%00", "encoded", "%00"),
    (b"GET", b"/public/v1/a%0d%0aX-Injected:%201", "encoded", "%0D"),
    (b"GET", b"/public/v1/a%5c..%5cb", "encoded", "%5C"),
    (b"GET", b"/public/v1/a%zz", "percent", "two hex digits"),
    (b"GET", b"/public/v1/a%4", "percent", "two hex digits"),
    (b"GET", b"/public/v1/..;/export", "dot_params", "parameters"),
    (b"GET", b"/public/v1/x/%2e%2e;y/export", "dot_params", "parameters"),
]


# Bytes the request-line grammar of RFC 9112 does not allow at all (CTLs,
# space, DEL, non-ASCII): the front door refuses the head before routing
# (docs/architecture.md, The front door), with its own message.
FRAMING_REFUSED = [
    (b"GET", b"/public/v1/a\rX-Injected:1", "bare CR or LF"),
    (b"GET", b"/public/export?correlationId=a b", "malformed request line"),
    (b"GET", b"/public/v1/a b/export", "malformed request line"),
    (b"GET", b"/public/v1/a\tb", "malformed request line"),
    (b"GET", b"/public/v1/a\x01b", "malformed request line"),
    (b"GET", b"/public/v1/a\x7f", "malformed request line"),
    (b"GET", b"/public/v1/caf\xc3\xa9", "malformed request line"),
]


@pytest.mark.parametrize("listener", ["dex", "sim"])
def test_request_line_bytes_refused_by_the_front_door(emulator, gateway, listener):
    quiet(emulator, gateway)
    for method, target, fragment in FRAMING_REFUSED:
        for hdrs in (key(), {"Authorization": "Bearer not-a-gateway-key"}):
            status, rh, body = raw(gateway.ports[listener], target, method, hdrs)
            assert rh.get("content-type") == "application/json", (target, rh)
            b = assert_error(status, body, 400, "BAD_REQUEST", fragment)
            assert rh["x-request-id"] == b["requestId"]
            assert rh.get("connection") == "close"
    assert all_calls(emulator) == {}


@pytest.mark.parametrize("listener", ["dex", "sim"])
def test_bad_targets_are_400_and_never_sent(emulator, gateway, listener):
    quiet(emulator, gateway)
    rules = {}
    for method, target, rule, fragment in REFUSED:
        for hdrs in (key(), {"Authorization": "Bearer not-a-gateway-key"}):
            status, rh, body = raw(gateway.ports[listener], target, method, hdrs)
            assert rh.get("content-type") == "application/json", (target, rh)
            b = assert_error(status, body, 400, "BAD_REQUEST_TARGET", fragment)
            assert rh["x-request-id"] == b["requestId"]
            rules[rule] = rules.get(rule, 0) + 1
    assert all_calls(emulator) == {}
    for rule, n in rules.items():
        assert gateway.metric("tidegate_request_target_refusals_total", service=listener,
                              rule=rule) == n, rule
    assert gateway.metric("tidegate_requests_total", service=listener, op="passthrough",
                          code="400") == 2 * len(REFUSED)


def test_refusal_is_one_escaped_access_log_line(emulator, gateway):
    quiet(emulator, gateway)
    raw(gateway.ports["dex"], b"/public/v1/a%0d%0aX-Injected:%201", headers=key())
    lines = [ln for ln in gateway.log_lines() if ln.get("error") == "BAD_REQUEST_TARGET"]
    assert len(lines) == 1 and lines[0]["status"] == 400 and lines[0]["op"] == "passthrough"
    raw(gateway.ports["dex"], b"/public/v1/a\rX-Injected:1", headers=key())
    lines = [ln for ln in gateway.log_lines() if ln.get("error") == "BAD_REQUEST"]
    assert len(lines) == 1 and lines[0]["status"] == 400
    assert "\r" not in gateway.read_log()
    assert not any("X-Injected" in k for ln in gateway.log_lines() for k in ln)
