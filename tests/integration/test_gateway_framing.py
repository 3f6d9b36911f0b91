"""
One framing decision at the edge: the front door decides where each request
ends and evhttp reads only what the front door wrote. A HEAD with a body
(evhttp reads none after HEAD: the body would be its next request) is
refused on every listener, and behind nginx's upstream keep-alive no client
ever gets another's answer. Raw sockets throughout: a client library would
tidy the bytes up.
"""
import json
import re
import socket
import ssl
import time

import pytest

from conftest import TEST_KEY, free_port
from test_gateway_proxies import start_nginx

MARK = "smuggled-0d2c"     # the X-Request-Id of the request hidden in a body


def hidden_get(path):
    """A request evhttp would read and answer if it took a HEAD's body as
    the next request: a head the front door would refuse (Content-Length
    twice) carrying a marker."""
    return (f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TEST_KEY}\r\n"
            f"X-Request-Id: {MARK}\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n").encode()


def head_with_body(path, inner):
    return (f"HEAD {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TEST_KEY}\r\n"
            f"Content-Length: {len(inner)}\r\n\r\n").encode() + inner


def exchange(sock, data, timeout=5.0):
    """Send data, read until the peer closes; a reset is an error here."""
    sock.settimeout(timeout)
    sock.sendall(data)
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


def plain(port):
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def tls(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(plain(port), server_hostname="127.0.0.1")


def assert_one_refusal(out):
    """One answer (a HEAD's: no body), 400, closing; nothing of the hidden
    request in it."""
    assert out.count(b"HTTP/1.1 ") == 1, out
    head = out.partition(b"\r\n\r\n")[0].decode().lower()
    assert head.startswith("http/1.1 400"), out
    assert "connection: close" in head and "content-type: application/json" in head, out
    assert MARK.encode() not in out


def listener(kind, emulator, make_gateway, make_emulator, pki):
    """(connect, path) of the listener named kind."""
    if kind in ("dex", "sim", "admin"):
        gw = make_gateway(emulator)
        path = {"dex": "/public/v1/import/status?correlationId=x",
                "sim": "/api/v1/cases", "admin": "/healthz"}[kind]
        return (lambda: plain(gw.ports[kind])), path
    if kind == "tls":
        gw = make_gateway(emulator, {"tls_listen": {"cert_file": pki["cert"],
                                                    "key_file": pki["key"]}})
        return (lambda: tls(gw.ports["sim"])), "/api/v1/cases"
    port = free_port()
    emu = make_emulator({"listen": {"dex_tls": f"127.0.0.1:{port}"},
                         "tls": {"cert_file": pki["cert"], "key_file": pki["key"]}})
    if kind == "emulator":
        return (lambda: plain(emu.ports["dex"])), "/public/v1/import/status?correlationId=x"
    return (lambda: tls(port)), "/public/v1/import/status?correlationId=x"


@pytest.mark.parametrize("kind", ["dex", "sim", "admin", "tls", "emulator", "emulator_tls"])
def test_head_with_body_refused_on_every_listener(kind, emulator, make_gateway,
                                                  make_emulator, pki):
    connect, path = listener(kind, emulator, make_gateway, make_emulator, pki)
    with connect() as s:
        out = exchange(s, head_with_body(path, hidden_get(path)))
    assert_one_refusal(out)
    # chunked on a HEAD likewise; Content-Length: 0 is no body and passes
    with connect() as s:
        out = exchange(s, (f"HEAD {path} HTTP/1.1\r\nHost: x\r\n"
                           f"Authorization: Bearer {TEST_KEY}\r\nTransfer-Encoding: chunked"
                           "\r\n\r\n").encode() + b"0\r\n\r\n" + hidden_get(path))
    assert_one_refusal(out)
    with connect() as s:
        out = exchange(s, (f"HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                           f"Authorization: Bearer {TEST_KEY}\r\nContent-Length: 0\r\n"
                           "\r\n").encode())
    assert out.count(b"HTTP/1.1 ") == 1 and not out.startswith(b"HTTP/1.1 400"), out


def test_head_with_body_reaches_nobody(gateway, emulator):
    """Nothing of it reaches the vendor; the access log has the HEAD's 400
    and no line for the request hidden in its body."""
    gateway.wait_tokens()   # start-up logins are not the test's calls
    before = emulator.stats()["calls"]
    path = "/public/v1/import/status?correlationId=x"
    with plain(gateway.ports["dex"]) as s:
        exchange(s, head_with_body(path, hidden_get(path)))
    assert emulator.stats()["calls"] == before
    lines = gateway.access_lines(1, lambda ln: ln.get("service") == "dex")
    assert [(ln["method"], ln["status"]) for ln in lines] == [("HEAD", 400)], lines
    assert all(ln["id"] != MARK for ln in lines)


def attack(nginx_port, emulator):
    """The attacker's HEAD through nginx hides a request that tidegate
    would answer a second later (a pass-through path for which the vendor
    is slow, answering 409; the answer carries the hidden request's
    X-Request-Id); what nginx answered the HEAD comes back at once."""
    emulator.fault(path="/public/v1/slow-", latencyMs=1000, status=409, count=1)
    inner = (f"GET /public/v1/slow-{MARK} HTTP/1.1\r\nHost: x\r\n"
             f"Authorization: Bearer {TEST_KEY}\r\nX-Request-Id: {MARK}\r\n\r\n").encode()
    with plain(nginx_port) as s:
        s.settimeout(5)
        s.sendall(head_with_body("/public/v1/head", inner))
        return s.recv(65536)


def victim(nginx_port):
    with plain(nginx_port) as s:
        return exchange(s, b"GET /public/v1/victim HTTP/1.1\r\n"
                        b"Host: x\r\nConnection: close\r\n"
                        + f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())


def test_nginx_keepalive_never_hands_an_answer_to_the_wrong_client(tmp_path, emulator,
                                                                   make_gateway):
    """conf/nginx.example.conf (upstream keep-alive): an attacker's HEAD with
    a body, then a victim's request on nginx's reused upstream connection.
    With the HEAD's body read as a request, tidegate answered it on that
    connection and nginx handed the answer to the victim; refused with a
    closing 400, the connection is never reused."""
    gw = make_gateway(emulator)
    proxy, port = start_nginx(str(tmp_path), gw, "10s")
    try:
        for _ in range(5):
            first = attack(port, emulator)
            out = victim(port)
            emulator.clear_faults()
            assert MARK.encode() not in out and b" 409 " not in out, out
            assert out.count(b"HTTP/1.1 ") == 1 and out.startswith(b"HTTP/1.1 404 "), out
            assert first.startswith(b"HTTP/1.1 400"), first
    finally:
        proxy.stop()


EXPORT = b'{"projectId":"P-DEMO"}'         # 22 bytes: chunk size 16


def chunked_export(chunks):
    return (f"POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Authorization: Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode() + chunks


def answer(port, data):
    with plain(port) as s:
        out = exchange(s, data)
    head, _, body = out.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head.decode().lower(), body


@pytest.mark.parametrize("chunks", [
    b"16;a=b\r\n" + EXPORT + b"\r\n0\r\n\r\n",
    b"16 ; name = \"quoted ; \\\" value\" ; flag\r\n" + EXPORT + b"\r\n0;last=1\r\n\r\n",
    b"0000016\r\n" + EXPORT + b"\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n",
    b"b\r\n" + EXPORT[:11] + b"\r\nB\r\n" + EXPORT[11:] + b"\r\n000\r\n\r\n",
], ids=["extension", "extensions-quoted", "leading-zeros-trailer", "case"])
def test_chunk_lines_read_as_rfc_9112_says(gateway, chunks):
    """Chunk extensions are ignored (a recipient MUST, RFC 9112 section
    7.1.1), sizes read in any case with any leading zeros, trailer fields
    dropped: the export is accepted with its whole body."""
    status, _, body = answer(gateway.ports["dex"], chunked_export(chunks))
    assert status == 200, body
    assert json.loads(body)["correlationId"]


@pytest.mark.parametrize("chunks", [
    b"0x16\r\n" + EXPORT + b"\r\n0\r\n\r\n",
    b"16\n" + EXPORT + b"\r\n0\r\n\r\n",
    b"16;a=\"b\r\n" + EXPORT + b"\r\n0\r\n\r\n",
    b"16\r\n" + EXPORT + b"XX0\r\n\r\n",
    b"16\r\n" + EXPORT + b"\r\n0\r\n folded: trailer\r\n\r\n",
    b"16\r\n" + EXPORT + b"\r\n0\r\nX-A: \x01\r\n\r\n",
    b"1\r\n{\r\n" + b"-1\r\n\r\n",
], ids=["0x", "bare-lf", "open-quote", "no-crlf-after-data", "folded-trailer",
        "ctl-in-trailer", "negative"])
def test_malformed_chunk_is_a_json_400_not_a_reset(gateway, emulator, chunks):
    gateway.wait_tokens()   # start-up logins are not the test's calls
    before = emulator.stats()["calls"]
    status, head, body = answer(gateway.ports["dex"], chunked_export(chunks))
    assert status == 400 and "connection: close" in head, body
    doc = json.loads(body)
    assert doc["error"] == "BAD_REQUEST" and "chunked body" in doc["message"], doc
    assert doc["statusCode"] == 400 and doc["requestId"]
    assert emulator.stats()["calls"] == before       # the partial body went nowhere


GET = (f"GET /public/v1/import/status?correlationId=nope HTTP/1.1\r\nHost: x\r\n"
       f"Authorization: Bearer {TEST_KEY}\r\n\r\n").encode()


def test_read_ending_on_the_cr_of_an_empty_line_waits_for_its_lf(gateway):
    """Two pipelined requests with empty lines between them, split into two
    reads at every byte around the empty lines: both are answered alike (the
    second was refused 400 when a read ended on a lone CR)."""
    stream = GET + b"\r\n\r\n" + GET.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n")
    for cut in range(len(GET) - 3, len(GET) + 7):
        with plain(gateway.ports["dex"]) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(stream[:cut])
            time.sleep(0.15)
            out = exchange(s, stream[cut:])
        statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", out)
        assert len(statuses) == 2 and statuses[0] == statuses[1] != b"400", (cut, out)


@pytest.mark.parametrize("host", [b"a b", b"evil.example/x", b"u@evil.example", b"[::1",
                                  b"x:123456", b"caf\xc3\xa9", b"%zz"])
def test_host_outside_rfc_3986_is_a_json_400(gateway, emulator, host):
    gateway.wait_tokens()   # start-up logins are not the test's calls
    before = emulator.stats()["calls"]
    status, head, body = answer(gateway.ports["dex"],
                                b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\n"
                                b"Host: " + host + b"\r\n"
                                + f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())
    assert status == 400 and "connection: close" in head, body
    doc = json.loads(body)
    assert doc["error"] == "BAD_REQUEST" and "RFC 3986" in doc["message"]
    assert emulator.stats()["calls"] == before


def test_host_forms_that_are_hosts_pass(gateway):
    for host in (b"127.0.0.1:8080", b"[::1]:80", b"api.example.com", b"a_b~c"):
        status, _, body = answer(gateway.ports["dex"],
                                 b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\n"
                                 b"Host: " + host + b"\r\nConnection: close\r\n"
                                 + f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())
        assert status != 400 and json.loads(body)["error"] != "BAD_REQUEST", (host, body)


def test_expect_other_than_100_continue_is_a_json_417(gateway):
    """evhttp answered it itself, in HTML, while the body was on its way."""
    status, head, body = answer(gateway.ports["dex"], (
        "POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n"
        f"Authorization: Bearer {TEST_KEY}\r\nContent-Length: 22\r\n\r\n").encode() + EXPORT)
    assert status == 417 and "connection: close" in head, body
    assert json.loads(body)["error"] == "EXPECTATION_FAILED"


def test_tab_before_a_value_is_read_alike(gateway, emulator):
    """OWS may be a tab; evhttp skips only spaces before a value. The front
    door writes such a head again, so evhttp reads the value it checked:
    the key is a key and the chunked body is a body."""
    status, _, body = answer(gateway.ports["dex"], (
        "POST /public/v1/export/activities HTTP/1.1\r\nHost:\tx\r\nConnection: close\r\n"
        f"Authorization:\t Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: \tchunked\r\n\r\n16\r\n").encode() + EXPORT + b"\r\n0\r\n\r\n")
    assert status == 200 and json.loads(body)["correlationId"], body


@pytest.mark.parametrize("target", [b"//a:99999/public/v1/x", b"1:x", b"//[zz]/x",
                                    b"http://a:123456/"])
def test_target_evhttp_cannot_parse_is_a_json_400(gateway, target):
    """evhttp dropped the connection without a word on these."""
    status, head, body = answer(gateway.ports["dex"], b"GET " + target + b" HTTP/1.1\r\n"
                                b"Host: x\r\n" + f"Authorization: Bearer {TEST_KEY}\r\n\r\n"
                                .encode())
    assert status == 400 and "connection: close" in head, body
    assert json.loads(body)["error"] == "BAD_REQUEST_TARGET"
