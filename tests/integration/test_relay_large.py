"""Large vendor answers relayed: read from a plain vendor connection in
large chunks rather than libevent's 4 KB a loop turn, and written to the
client in the turn they arrive. A 4 MB answer reaches a raw-socket client
byte for byte with its framing (Content-Length kept, chunked re-framed),
both connections kept alive, in a bounded number of reads
(tidegate_upstream_reads_total); a client that stops reading still holds
the vendor back, and one that goes away mid-body cancels the vendor call."""
import contextlib
import hashlib
import http.server
import os
import random
import shutil
import socket
import struct
import sys
import threading
import time

import pytest
import requests

from conftest import TEST_KEY, free_port

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import lib as bench_lib  # noqa: E402  (lib.syscalls: strace -c of a process)

MB4 = random.Random(29).randbytes(4 * 1024 * 1024 + 12345)
SLOW_CHUNK = 64 * 1024


class Vendor(http.server.BaseHTTPRequestHandler):
    """GET /big: MB4 with Content-Length, in one write; /chunked: MB4 in
    chunked framing, 64 KB a chunk; /endless: an answer of 1 GB
    (Content-Length) written as fast as the reader takes it, counting the
    bytes sent and noting when the reader went away."""
    protocol_version = "HTTP/1.1"
    ports = []          # the gateway's source port, per request
    sent = 0            # /endless: bytes handed to the kernel
    gone = None         # /endless: monotonic time the reader went away

    def do_GET(self):
        Vendor.ports.append(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if self.path.startswith("/public/v2/big"):
            self.send_header("Content-Length", str(len(MB4)))
            self.end_headers()
            self.wfile.write(MB4)
        elif self.path.startswith("/public/v2/untilclose"):
            self.until_close("reset" in self.path)
        elif self.path.startswith("/public/v2/chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(MB4), SLOW_CHUNK):
                piece = MB4[i:i + SLOW_CHUNK]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.endless()

    def until_close(self, reset):
        """1 MB with neither length nor chunks: the close ends it, or a
        reset cuts it (right behind the last bytes: both wait in the
        gateway's socket together)."""
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(MB4[:1 << 20])
        self.wfile.flush()
        self.close_connection = True
        if reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()

    def endless(self):
        self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        Vendor.sent = 0
        Vendor.gone = None
        try:
            while Vendor.sent < 1 << 30:
                self.wfile.write(MB4[:SLOW_CHUNK])
                Vendor.sent += SLOW_CHUNK
        except OSError:
            Vendor.gone = time.monotonic()
            self.close_connection = True

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(handler):
    """handler served by a threaded HTTP server on a free loopback port:
    its base URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def vendor():
    Vendor.ports = []
    with serving(Vendor) as url:
        yield url


def gateway(make_gateway, url):
    return make_gateway(None, {"log_level": "warn",
                               "dex": {"url": url, "username": None, "password_file": None},
                               "client_send_timeout": "5s"})


def connect(gw):
    s = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def ask(s, path):
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())


def read_head(s, buf):
    while b"\r\n\r\n" not in buf:
        more = s.recv(65536)
        assert more, "closed before the head"
        buf += more
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        fields[k.strip().lower()] = v.strip()
    return lines[0], fields, rest


def read_exact(s, buf, n):
    while len(buf) < n:
        more = s.recv(1 << 20)
        assert more, f"closed after {len(buf)} of {n} bytes"
        buf += more
    return buf[:n], buf[n:]


def read_chunked(s, buf):
    body = b""
    while True:
        while b"\r\n" not in buf:
            more = s.recv(1 << 20)
            assert more, "closed inside the chunked body"
            buf += more
        size_line, _, buf = buf.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        piece, buf = read_exact(s, buf, size + 2)
        assert piece[size:] == b"\r\n"
        if size == 0:
            return body, buf
        body += piece[:size]


def reads(gw):
    return gw.metric("tidegate_upstream_reads_total", service="dex")


def test_4mb_answer_arrives_whole_in_large_reads_both_connections_kept(make_gateway, vendor):
    gw = gateway(make_gateway, vendor)
    s = connect(gw)
    buf = b""
    per_answer = []
    for _ in range(3):
        before = reads(gw)
        ask(s, "/public/v2/big")
        status, fields, buf = read_head(s, buf)
        assert status == "HTTP/1.1 200 OK"
        assert fields["content-length"] == str(len(MB4))
        assert "transfer-encoding" not in fields
        body, buf = read_exact(s, buf, len(MB4))
        assert hashlib.sha256(body).digest() == hashlib.sha256(MB4).digest()
        per_answer.append(reads(gw) - before)
    assert buf == b""
    s.close()
    # one gateway connection to the vendor carried all three
    assert len(set(Vendor.ports)) == 1, Vendor.ports
    # libevent alone reads 4 KB a time: over 1,000 reads for this answer
    print(f"reads per 4 MB answer: {per_answer}")
    assert max(per_answer) <= 300, per_answer


def test_chunked_4mb_answer_reframed_whole(make_gateway, vendor):
    gw = gateway(make_gateway, vendor)
    s = connect(gw)
    buf = b""
    for _ in range(2):
        before = reads(gw)
        ask(s, "/public/v2/chunked")
        status, fields, buf = read_head(s, buf)
        assert status == "HTTP/1.1 200 OK"
        assert fields.get("transfer-encoding") == "chunked"
        assert "content-length" not in fields
        body, buf = read_chunked(s, buf)
        assert hashlib.sha256(body).digest() == hashlib.sha256(MB4).digest()
        assert reads(gw) - before <= 300
    s.close()
    assert len(set(Vendor.ports)) == 1, Vendor.ports


@pytest.mark.parametrize("path", ["/public/v2/big", "/public/v2/chunked"])
def test_http10_client_gets_the_whole_answer_then_the_close(make_gateway, vendor, path):
    """An HTTP/1.0 client: no chunked framing, the connection closed after
    the answer, which may end inside the write of its last bytes."""
    gw = gateway(make_gateway, vendor)
    s = connect(gw)
    s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n"
              f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())
    status, fields, body = read_head(s, b"")
    assert status.startswith("HTTP/1.0 200")
    assert "transfer-encoding" not in fields
    while True:
        more = s.recv(1 << 20)
        if not more:
            break
        body += more
    s.close()
    assert hashlib.sha256(body).digest() == hashlib.sha256(MB4).digest()
    if path.endswith("big"):
        assert fields["content-length"] == str(len(MB4))
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200


def test_body_read_until_close_complete_only_when_closed_not_reset(make_gateway, vendor):
    """The large reads are sized so they never take the vendor's EOF or
    reset from libevent: a body the vendor ends by closing arrives whole
    and terminated; one it cuts with a reset is cut for the client too."""
    gw = gateway(make_gateway, vendor)
    for path, whole in (("/public/v2/untilclose", True), ("/public/v2/untilclose-reset", False)):
        s = connect(gw)
        ask(s, path)
        status, fields, buf = read_head(s, b"")
        assert status == "HTTP/1.1 200 OK"
        assert fields.get("transfer-encoding") == "chunked"
        try:
            body, _ = read_chunked(s, buf)
        except (AssertionError, ConnectionResetError):
            body = None
        s.close()
        if whole:
            assert body == MB4[:1 << 20]
        else:
            assert body is None, "a reset answer was ended as if complete"


def test_client_that_stops_reading_holds_the_vendor_back(make_gateway, vendor):
    gw = gateway(make_gateway, vendor)
    s = connect(gw)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    ask(s, "/public/v2/endless")
    _, fields, buf = read_head(s, b"")
    assert fields["content-length"] == str(1 << 30)
    got = len(buf)
    while got < 8 << 20:
        got += len(s.recv(1 << 20))
    time.sleep(1.5)                   # the client reads nothing
    held = Vendor.sent
    time.sleep(1.0)
    # paused: the vendor sent nothing more while the client read nothing,
    # and no more than the socket buffers and the relay's 1 MB mark ahead
    assert Vendor.sent == held, (held, Vendor.sent)
    assert held - got < 40 << 20, (held, got)
    while got < 64 << 20:             # and it goes on once the client reads
        more = s.recv(1 << 20)
        assert more
        got += len(more)
    s.close()


def test_client_gone_mid_body_cancels_the_vendor_call(make_gateway, vendor):
    gw = gateway(make_gateway, vendor)
    s = connect(gw)
    ask(s, "/public/v2/endless")
    _, _, buf = read_head(s, b"")
    got = len(buf)
    while got < 4 << 20:
        got += len(s.recv(1 << 20))
    s.close()
    t0 = time.monotonic()
    deadline = t0 + 5
    while Vendor.gone is None:
        assert time.monotonic() < deadline, "the vendor call went on"
        time.sleep(0.02)
    assert Vendor.sent < 1 << 30
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_4mb_answer_costs_fewer_syscalls_than_4kb_relaying(make_gateway, vendor):
    """Each large read is written to the client in the same loop turn, with
    no write event armed and disarmed for it: a handful of epoll_ctl and
    writev per answer (relaying 4 KB a turn made over 1,000 of each)."""
    gw = gateway(make_gateway, vendor)
    s = connect(gw)
    state = {"buf": b""}
    n = 5

    def work():
        for _ in range(n):
            ask(s, "/public/v2/big")
            _, _, buf = read_head(s, state["buf"])
            body, state["buf"] = read_exact(s, buf, len(MB4))
            assert hashlib.sha256(body).digest() == hashlib.sha256(MB4).digest()

    counts = bench_lib.syscalls(gw.proc.pid, work)
    s.close()
    total = sum(counts.values())
    print(f"syscalls per 4 MB answer: {total / n:.1f} {counts}")
    # the client's write event is not armed per read
    assert counts.get("epoll_ctl", 0) / n <= 10, counts
    assert counts.get("writev", 0) / n <= 80, counts
    # nginx proxy_pass makes ~2,100 for this answer (bench/s7_sizes.py)
    assert total / n <= 400, counts
