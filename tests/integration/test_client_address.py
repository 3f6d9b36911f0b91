"""The real client address behind a load balancer (docs/operations.md,
Behind a load balancer): the PROXY protocol (v1 and v2) on a listener,
from a real HAProxy (conf/haproxy.example.cfg, send-proxy-v2 and
send-proxy) and from raw sockets (malformed, missing, oversized, late or
LOCAL headers); trusted proxies (real_ip_from) through a real nginx
(conf/nginx.example.conf: X-Forwarded-For sent, a caller's X-Request-Id
kept) and directly (recursive walk, several fields, a malformed entry, an
untrusted peer's spoofed X-Forwarded-For ignored). The access log's
client and max_clients_per_ip follow the real client: per connection from
a PROXY header, per request in flight through a trusted proxy (429).
Loopback's other addresses (127.0.0.2, 127.0.0.3) play distinct clients."""
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest
import requests

from conftest import BUILD, TEST_KEY, free_port
from test_gateway_proxies import example, start_export, start_haproxy, start_nginx

PP_DEX = {"proxy_protocol": {"listeners": ["dex"]}}
needs_haproxy = pytest.mark.skipif(shutil.which("haproxy") is None,
                                   reason="haproxy is not installed (scripts/deps.sh)")
needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None,
                                 reason="nginx is not installed (scripts/deps.sh)")
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
PATH = "/public/v1/client-probe"    # passed through: the vendor's 404


def rid():
    return str(uuid.uuid4())


def request_bytes(path=PATH, headers=None, request_id=None):
    h = {"Host": "x", "Connection": "close", "Authorization": "Bearer " + TEST_KEY}
    if request_id is not None:
        h["X-Request-Id"] = request_id
    lines = [f"GET {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in h.items()]
    lines += [f"{k}: {v}" for k, v in (headers or [])]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def raw(port, data, src="127.0.0.1", timeout=10):
    """data sent from src; everything answered until the gateway closes
    (b"" for a close or a reset without a byte)."""
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    out = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    return out


def access(gw, request_id, timeout=5.0):
    """The access line of request_id (written as its answer ends)."""
    got = gw.access_lines(1, lambda e: e.get("id") == request_id, timeout)
    assert got, f"no access line for {request_id}"
    return got[0]


def client_of(gw, port, prefix=b"", src="127.0.0.1", headers=None):
    i = rid()
    out = raw(port, prefix + request_bytes(headers=headers, request_id=i), src)
    assert out.startswith(b"HTTP/1.1 404 "), out
    return access(gw, i)["client"]


def v2(cmd, fam, body):
    return V2_SIG + bytes([cmd, fam]) + struct.pack("!H", len(body)) + body


def refused(gw, name):
    return gw.metric("tidegate_client_connections_refused_total", listener=name,
                     reason="max_clients_per_ip")


def test_proxy_protocol_header_gives_the_client_address(emulator, make_gateway):
    """v1 TCP4, v2 TCP6 with TLVs: the header's source is the client; v2
    LOCAL and v1 UNKNOWN keep the peer's; a listener without the option
    is untouched."""
    gw = make_gateway(emulator, PP_DEX)
    dex = gw.ports["dex"]
    assert client_of(gw, dex, b"PROXY TCP4 203.0.113.9 127.0.0.1 40000 8080\r\n") == \
        "203.0.113.9"
    six = socket.inet_pton(socket.AF_INET6, "2001:db8::5") + \
        socket.inet_pton(socket.AF_INET6, "2001:db8::1") + struct.pack("!HH", 40000, 8080)
    tlvs = b"\x01\x00\x02h2" + b"\x05\x00\x03abc"
    assert client_of(gw, dex, v2(0x21, 0x21, six + tlvs)) == "2001:db8::5"
    four = socket.inet_aton("198.51.100.4") + socket.inet_aton("127.0.0.1") + b"\0\1\0\2"
    assert client_of(gw, dex, v2(0x21, 0x11, four)) == "198.51.100.4"
    assert client_of(gw, dex, v2(0x20, 0x11, four), src="127.0.0.2") == "127.0.0.2"
    assert client_of(gw, dex, b"PROXY UNKNOWN\r\n", src="127.0.0.3") == "127.0.0.3"
    assert client_of(gw, gw.ports["sim"], src="127.0.0.2") == "127.0.0.2"


BAD_HEADERS = [
    ("no_header", b""),
    ("v1_bad_address", b"PROXY TCP4 203.0.113.999 127.0.0.1 1 2\r\n"),
    ("v1_no_crlf", b"PROXY UNKNOWN " + b"x" * 120),
    ("v1_lowercase", b"proxy TCP4 203.0.113.9 127.0.0.1 1 2\r\n"),
    ("v2_oversize", V2_SIG + b"\x21\x11" + struct.pack("!H", 5000) + b"\0" * 12),
    ("v2_short_addresses", V2_SIG + b"\x21\x11\x00\x04" + b"\0" * 4),
    ("v2_udp", v2(0x21, 0x12, b"\0" * 12)),
    ("tls_hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"),
]


def test_proxy_protocol_bad_or_missing_header_closes_unanswered(emulator, make_gateway):
    """Each connection is closed without a byte of HTTP; the vendor sees
    nothing; the gateway serves the next client on that listener."""
    gw = make_gateway(emulator, PP_DEX)
    gw.wait_tokens()   # start-up logins are not the test's calls
    before = emulator.stats()["calls"]
    for name, prefix in BAD_HEADERS:
        t0 = time.monotonic()
        out = raw(gw.ports["dex"], prefix + request_bytes())
        assert out == b"", (name, out)
        assert time.monotonic() - t0 < 2, name     # at once, not at a timeout
    assert emulator.stats()["calls"] == before
    assert not [e for e in gw.log_lines() if e.get("event") == "access"
                and e.get("service") == "dex"]
    assert client_of(gw, gw.ports["dex"], b"PROXY TCP4 192.0.2.1 127.0.0.1 1 2\r\n") == \
        "192.0.2.1"


def test_proxy_protocol_header_must_arrive_within_client_header_timeout(emulator,
                                                                          make_gateway):
    """A header begun and never finished, dribbled a byte at a time: the
    connection is closed unanswered at client_header_timeout from its
    start (bytes of the header do not restart the clock)."""
    gw = make_gateway(emulator, {**PP_DEX, "client_header_timeout": "2s"})
    s = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=10)
    t0 = time.monotonic()
    out = b""
    try:
        for b in b"PROXY TCP4 192.0.2.1 ":
            s.sendall(bytes([b]))
            time.sleep(0.2)
        out = s.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    elapsed = time.monotonic() - t0
    assert out == b"", out
    assert 1.9 < elapsed < 3.5, elapsed
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="header") == 1


def test_proxy_protocol_counts_per_real_client(emulator, make_gateway):
    """max_clients_per_ip counts the PROXY header's address: one
    connection each for two clients of one balancer address; a second
    connection of the first is closed unanswered, and counted."""
    gw = make_gateway(emulator, {**PP_DEX, "max_clients_per_ip": 1})
    dex = gw.ports["dex"]

    def held(addr):
        s = socket.create_connection(("127.0.0.1", dex), timeout=10)
        s.sendall(f"PROXY TCP4 {addr} 127.0.0.1 1 2\r\n".encode())
        return s

    a, b = held("192.0.2.1"), held("192.0.2.2")
    try:
        time.sleep(0.3)
        assert raw(dex, b"PROXY TCP4 192.0.2.1 127.0.0.1 3 2\r\n" + request_bytes()) == b""
        assert refused(gw, "dex") == 1
        assert client_of(gw, dex, b"PROXY TCP4 192.0.2.3 127.0.0.1 3 2\r\n") == "192.0.2.3"
    finally:
        a.close()
        b.close()
    time.sleep(0.3)
    assert client_of(gw, dex, b"PROXY TCP4 192.0.2.1 127.0.0.1 4 2\r\n") == "192.0.2.1"


@needs_haproxy
@pytest.mark.parametrize("send", ["send-proxy-v2", "send-proxy"])
def test_haproxy_example_sends_the_client_address(tmp_path, emulator, make_gateway, send):
    """conf/haproxy.example.cfg as written (send-proxy-v2), and with
    send-proxy (v1): each client's own address in the access log."""
    gw = make_gateway(emulator, PP_DEX)
    cfg = example("haproxy.example.cfg", {"send-proxy-v2": send})
    assert send in cfg
    proxy, port = start_haproxy(str(tmp_path), gw, "10s", cfg)
    try:
        assert client_of(gw, port, src="127.0.0.2") == "127.0.0.2"
        assert client_of(gw, port, src="127.0.0.3") == "127.0.0.3"
        e = access(gw, client_request(port, "127.0.0.2"))
        assert e["client"] == "127.0.0.2" and e["status"] == 404
    finally:
        proxy.stop()


def client_request(port, src):
    i = rid()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(src, 0))
    c.request("GET", PATH, headers={"Authorization": "Bearer " + TEST_KEY, "X-Request-Id": i})
    assert c.getresponse().status == 404
    c.close()
    return i


@needs_haproxy
def test_haproxy_send_proxy_v2_counts_per_real_client(tmp_path, emulator, make_gateway):
    """Through HAProxy (TCP mode: one gateway connection per client
    connection) with max_clients_per_ip 1: two clients hold a connection
    each; the first one's second connection is refused."""
    gw = make_gateway(emulator, {**PP_DEX, "max_clients_per_ip": 1})
    port = free_port()
    cfg = (f"defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 30s\n"
           f"    timeout server 30s\nfrontend f\n    bind 127.0.0.1:{port}\n"
           f"    default_backend b\nbackend b\n"
           f"    server gw1 127.0.0.1:{gw.ports['dex']} send-proxy-v2\n")
    proxy, port = start_haproxy(str(tmp_path), gw, "10s", cfg, port)
    conns = []
    try:
        for src in ("127.0.0.2", "127.0.0.3"):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                           source_address=(src, 0))
            c.request("GET", PATH, headers={"Authorization": "Bearer " + TEST_KEY})
            r = c.getresponse()
            r.read()
            assert r.status == 404 and r.getheader("Connection") != "close"
            conns.append(c)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                       source_address=("127.0.0.2", 0))
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            c.request("GET", PATH, headers={"Authorization": "Bearer " + TEST_KEY})
            c.getresponse()
        c.close()
        assert refused(gw, "dex") == 1
    finally:
        for c in conns:
            c.close()
        proxy.stop()


@needs_nginx
def test_nginx_example_forwards_the_client_and_its_request_id(tmp_path, emulator,
                                                              make_gateway):
    """conf/nginx.example.conf with real_ip_from naming nginx's address:
    each client's own address in the access log, a spoofed X-Forwarded-For
    of the client's ignored (nginx appends the address it saw); the
    caller's X-Request-Id kept end to end, nginx's own only when none."""
    gw = make_gateway(emulator, {"real_ip_from": ["127.0.0.1"]})
    proxy, port = start_nginx(str(tmp_path), gw, "10s")
    try:
        i = rid()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                       source_address=("127.0.0.2", 0))
        c.request("GET", PATH, headers={"Authorization": "Bearer " + TEST_KEY,
                                        "X-Request-Id": i})
        r = c.getresponse()
        assert r.status == 404 and r.getheader("X-Request-Id") == i
        r.read()
        c.close()
        assert access(gw, i)["client"] == "127.0.0.2"
        spoofed = [("X-Forwarded-For", "203.0.113.66")]
        assert client_of(gw, port, src="127.0.0.3", headers=spoofed) == "127.0.0.3"
        out = raw(port, request_bytes(), "127.0.0.2")
        nginx_id = [ln.split(b": ", 1)[1].decode() for ln in out.split(b"\r\n")
                    if ln.lower().startswith(b"x-request-id: ")]
        assert len(nginx_id) == 1 and len(nginx_id[0]) == 32, out
        assert access(gw, nginx_id[0])["client"] == "127.0.0.2"
    finally:
        proxy.stop()


def test_real_ip_from_walks_forwarded_for_from_trusted_peers_only(emulator, make_gateway):
    """From a trusted peer: X-Forwarded-For from the right past trusted
    proxies, over several fields; a malformed entry stops at the last good
    address. From any other peer it is never read."""
    gw = make_gateway(emulator, {"real_ip_from": ["127.0.0.1", "10.0.0.0/8"]})
    sim = gw.ports["sim"]

    def via(src, *values):
        return client_of(gw, sim, src=src, headers=[("X-Forwarded-For", v) for v in values])

    assert via("127.0.0.1", "203.0.113.7") == "203.0.113.7"
    assert via("127.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.1.1") == "203.0.113.7"
    assert via("127.0.0.1", "198.51.100.9", "10.2.2.2, 10.1.1.1") == "198.51.100.9"
    assert via("127.0.0.1", "10.3.3.3, 10.1.1.1") == "10.3.3.3"
    assert via("127.0.0.1", "203.0.113.7, bogus") == "127.0.0.1"
    assert via("127.0.0.1", "203.0.113.7, bogus, 10.1.1.1") == "10.1.1.1"
    assert via("127.0.0.1", "2001:DB8::7") == "2001:db8::7"
    assert via("127.0.0.1") == "127.0.0.1"
    assert via("127.0.0.2", "203.0.113.7") == "127.0.0.2"      # untrusted: spoof ignored
    assert via("127.0.0.2", "10.1.1.1") == "127.0.0.2"


def long_poll_from(gw, cid, xff, result):
    i = rid()
    out = raw(gw.ports["dex"], request_bytes(f"/public/export?correlationId={cid}&wait=60",
                                             [("X-Forwarded-For", xff)], i))
    result.append((out, i))


def test_trusted_proxy_requests_count_per_client_while_in_flight(make_emulator, make_gateway):
    """max_clients_per_ip 1 behind a trusted proxy: a client's long-poll in
    flight; the same client's next request is 429 (the JSON error, counted),
    another client's is served; once the long-poll is answered the first
    client is served again. An untrusted peer naming that client is counted
    under its own address."""
    from test_gateway_proxies import slow_gateway
    gw = slow_gateway(make_emulator, make_gateway,
                      {"real_ip_from": ["127.0.0.1"], "max_clients_per_ip": 1})
    cid = start_export(gw.dex, gw)
    result = []
    t = threading.Thread(target=long_poll_from, args=(gw, cid, "198.51.100.1", result))
    t.start()
    try:
        time.sleep(0.8)
        i = rid()
        out = raw(gw.ports["dex"], request_bytes(headers=[("X-Forwarded-For", "198.51.100.1")],
                                                 request_id=i))
        assert out.startswith(b"HTTP/1.1 429 "), out
        body = json.loads(out.split(b"\r\n\r\n", 1)[1])
        assert body["error"] == "TOO_MANY_REQUESTS" and body["requestId"] == i, body
        assert "max_clients_per_ip" in body["message"]
        assert access(gw, i)["client"] == "198.51.100.1"
        assert refused(gw, "dex") == 1
        xff = [("X-Forwarded-For", "198.51.100.2")]
        assert client_of(gw, gw.ports["dex"], headers=xff) == "198.51.100.2"
        xff = [("X-Forwarded-For", "198.51.100.1")]
        assert client_of(gw, gw.ports["dex"], src="127.0.0.2", headers=xff) == "127.0.0.2"
    finally:
        t.join(15)
    out, i = result[0]
    assert out.startswith(b"HTTP/1.1 202 "), out
    assert access(gw, i)["client"] == "198.51.100.1"
    xff = [("X-Forwarded-For", "198.51.100.1")]
    assert client_of(gw, gw.ports["dex"], headers=xff) == "198.51.100.1"


def check_config(tmp_path, body):
    path = os.path.join(str(tmp_path), "tidegate.yaml")
    with open(path, "w") as f:
        f.write("upstream: remote\n" + body)
    p = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", path],
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stderr.replace(path, "{f}")


def test_config_refuses_bad_blocks_and_listeners(tmp_path, pki):
    """Each bad CIDR by its key path and why; an unknown listener; the
    PROXY protocol on a listener that speaks TLS."""
    rc, err = check_config(tmp_path, "real_ip_from: [10.0.0.0/8, 10.1.2.3/8, bogus, "
                           "'::/129']\nproxy_protocol:\n  listeners: [dex, dexx]\n")
    assert rc == 1
    assert "{f}:2:28: real_ip_from[1]: '10.1.2.3/8' has host bits set (did you mean " \
        "'10.0.0.0/8'?)" in err, err
    assert "{f}:2:40: real_ip_from[2]: 'bogus' is not an IPv4 or IPv6 address" in err, err
    assert "real_ip_from[3]: prefix length '129' is not 0 to 128" in err, err
    assert "proxy_protocol.listeners[1]: must be dex, sim or admin, got 'dexx'" in err, err
    assert "real_ip_from[0]" not in err
    rc, err = check_config(tmp_path, f"tls_listen:\n  cert_file: {pki['cert']}\n"
                           f"  key_file: {pki['key']}\n  listeners: [sim]\n"
                           "proxy_protocol:\n  listeners: [dex, sim]\n")
    assert rc == 1
    assert "proxy_protocol.listeners: sim speaks TLS (tls_listen.listeners): the PROXY " \
        "protocol is read on plain listeners only" in err, err
    assert "dex speaks TLS" not in err
    rc, err = check_config(tmp_path, "real_ip_from: [127.0.0.1, 'fd00::/8']\n"
                           "proxy_protocol:\n  listeners: [dex, admin]\n")
    assert rc == 0, err


def test_reload_that_stops_trusting_a_proxy_holds_on_its_open_connections(emulator,
                                                                          make_gateway):
    """A keep-alive connection from a trusted proxy, then a SIGHUP without
    real_ip_from: its next request's X-Forwarded-For is no longer read."""
    import signal
    gw = make_gateway(emulator, {"real_ip_from": ["127.0.0.1"]})
    c = http.client.HTTPConnection("127.0.0.1", gw.ports["sim"], timeout=10)

    def client():
        i = rid()
        c.request("GET", PATH, headers={"Authorization": "Bearer " + TEST_KEY,
                                        "X-Request-Id": i, "X-Forwarded-For": "203.0.113.8"})
        r = c.getresponse()
        r.read()
        assert r.status == 404
        return access(gw, i)["client"]

    try:
        assert client() == "203.0.113.8"
        cfg = dict(gw.cfg)
        del cfg["real_ip_from"]
        gw.write_config(cfg)
        gw.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not [e for e in gw.log_lines() if e.get("event") == "reloaded"]:
            assert time.monotonic() < deadline, "no reload"
            time.sleep(0.05)
        assert client() == "127.0.0.1"
    finally:
        c.close()
