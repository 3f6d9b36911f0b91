"""
Slow, idle and numerous clients at the front door: the time limits
(client_header_timeout, client_body_timeout, keepalive_timeout) and the
connection limits (max_clients, max_clients_per_ip), with their metrics.
Every loop is bounded in rounds and seconds; all traffic is on loopback.
"""
import json
import signal
import socket
import time

import requests

from conftest import TEST_KEY

FAST = {"client_header_timeout": "2s", "client_body_timeout": "1s", "keepalive_timeout": "1s"}


def closed_within(s, seconds):
    """True when the peer closes or resets s within seconds."""
    s.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = s.recv(65536)
            if not data:
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def refused(port, source="127.0.0.1"):
    """A new connection is reset at once (connect itself may see the reset)."""
    try:
        sk = socket.create_connection(("127.0.0.1", port), timeout=5,
                                      source_address=(source, 0))
    except OSError:
        return True
    try:
        return closed_within(sk, 2)
    finally:
        sk.close()


def test_slowloris_closed_after_header_timeout_normal_client_unaffected(emulator, make_gateway):
    gw = make_gateway(emulator, FAST)
    gw.own("nope", family="import")        # the normal client's polls reach the vendor
    s = requests.Session()
    h = {"Authorization": f"Bearer {TEST_KEY}"}
    url = gw.dex + "/public/v1/import/status?correlationId=nope"

    def p99(n=40):
        t = []
        for _ in range(n):
            t0 = time.perf_counter()
            s.get(url, headers=h, timeout=5)
            t.append(time.perf_counter() - t0)
        t.sort()
        return t[int(len(t) * 0.99) - 1]

    quiet = p99()
    head = b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\nX-A: "
    socks = [socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
             for _ in range(300)]
    t0 = time.monotonic()
    alive = list(socks)
    attacked = []
    for i in range(16):                     # one byte per socket every 0.25 s, 4 s at most
        nxt = []
        for sk in alive:
            try:
                sk.send(head[i:i + 1] if i < len(head) else b"a")
                nxt.append(sk)
            except OSError:
                pass
        alive = nxt
        attacked.append(p99(5))
        if not alive:
            break
        time.sleep(0.25)
    still = sum(1 for sk in alive if not closed_within(sk, 0.01))
    for sk in socks:
        sk.close()
    assert still == 0 and time.monotonic() - t0 < 6, (still, time.monotonic() - t0)
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="header") >= 300
    # the normal client kept its latency (bound far above it, far below the limits)
    assert max(attacked) < max(0.25, 20 * quiet), (quiet, attacked)


def answer_then_close(s, seconds):
    """What the peer sends until it closes (within seconds), or None."""
    s.settimeout(0.2)
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        if not data:
            return out
        out += data
    return None


def assert_408(out, words):
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), out
    assert b"Connection: close" in head and b"application/json" in head, out
    doc = json.loads(body)
    assert doc["statusCode"] == 408 and doc["error"] == "REQUEST_TIMEOUT", doc
    assert words in doc["message"] and doc["requestId"], doc


def test_body_stall_answered_408_after_body_timeout(emulator, make_gateway):
    gw = make_gateway(emulator, FAST)
    sk = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
    sk.sendall("POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
               "Content-Length: 100\r\n\r\n{\"proj".encode())
    t0 = time.monotonic()
    out = answer_then_close(sk, 4)
    assert out is not None and time.monotonic() - t0 >= 0.5
    sk.close()
    assert_408(out, "client_body_timeout")
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="body") == 1


def test_partial_head_answered_408_after_header_timeout(emulator, make_gateway):
    gw = make_gateway(emulator, FAST)
    sk = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
    sk.sendall(b"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\n")
    out = answer_then_close(sk, 5)
    sk.close()
    assert out is not None
    assert_408(out, "request head")
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="header") == 1


RATE = {"client_body_min_rate": "4KB", "client_body_rate_grace": "1s",
        "client_body_timeout": "60s"}


def test_body_under_min_rate_answered_408(emulator, make_gateway):
    """A valid key sending a 10 MB body a byte every 0.2 s (nginx would hold
    it for days, client_body_timeout never fires): cut once it is behind
    the grace plus its bytes over client_body_min_rate."""
    gw = make_gateway(emulator, RATE)
    before = emulator.stats()["calls"]
    sk = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
    sk.sendall("POST /public/v1/import/activities HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {10 << 20}\r\n\r\n".encode())
    t0 = time.monotonic()
    out = None
    sk.settimeout(0.2)
    for _ in range(30):                     # 6 s at most
        try:
            sk.send(b" ")
        except OSError:
            break
        try:
            out = sk.recv(65536)
            break
        except socket.timeout:
            pass
    elapsed = time.monotonic() - t0
    rest = answer_then_close(sk, 3) if out else None
    sk.close()
    assert out, "still held after 6 s"
    assert 1.0 <= elapsed < 3.5, elapsed     # 1 s grace, then the next one-second sweep
    assert rest is not None, "not closed after the 408"
    assert_408(out + rest, "client_body_min_rate")
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="body_rate") == 1
    assert emulator.stats()["calls"] == before


def chunks_at(sk, data, per_second, piece=1024):
    for i in range(0, len(data), piece):
        sk.sendall(data[i:i + piece])
        time.sleep(piece / per_second)


def read_answer(sk):
    sk.settimeout(10)
    out = b""
    while b"\r\n\r\n" not in out:
        out += sk.recv(65536)
    head, _, body = out.partition(b"\r\n\r\n")
    n = int([ln.split(b":")[1] for ln in head.split(b"\r\n")
             if ln.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        body += sk.recv(65536)
    return int(head.split(b" ")[1]), body


def test_slow_but_steady_upload_passes(emulator, make_gateway):
    """A slow uplink above the rate (24 KB at 8 KB/s against 4 KB/s, past
    the grace) is read whole and answered by the handler."""
    gw = make_gateway(emulator, RATE)
    body = b'{"projectId":"P-DEMO"}' + b" " * (24 * 1024)
    sk = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
    sk.sendall("POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n".encode())
    chunks_at(sk, body, 8 * 1024)
    status, resp = read_answer(sk)
    sk.close()
    assert status == 200 and json.loads(resp)["correlationId"], resp
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="body_rate") == 0


def test_body_rate_waits_while_an_earlier_request_is_answered(make_emulator, make_gateway):
    """A pipelined body behind a 3 s long-poll: its client could not send
    while the long-poll was answered (nothing is read meanwhile), so its
    rate counts from that answer, not from its head."""
    emu = make_emulator({"export": {"delay": "30s"}})
    gw = make_gateway(emu, dict(RATE, client_body_min_rate="1MB", client_body_rate_grace="2s"))
    cid = requests.post(gw.dex + "/public/v1/export/activities", headers=gw.headers(),
                        json={"projectId": "P-DEMO"}, timeout=5).json()["correlationId"]
    body = b'{"projectId":"P-DEMO"}'
    sk = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
    sk.sendall(f"GET /public/export?correlationId={cid}&wait=3 HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TEST_KEY}\r\n\r\n"
               "POST /public/v1/export/activities HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TEST_KEY}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:5])
    status, _ = read_answer(sk)
    assert status == 202
    time.sleep(1.2)                         # a sweep runs; the grace (2 s) holds
    sk.sendall(body[5:])
    status, resp = read_answer(sk)
    sk.close()
    assert status == 200 and json.loads(resp)["correlationId"], resp


def test_idle_keepalive_closed_but_long_poll_is_not(make_emulator, make_gateway):
    emu = make_emulator({"export": {"delay": "30s"}})
    gw = make_gateway(emu, FAST)
    h = {"Authorization": f"Bearer {TEST_KEY}"}
    cid = requests.post(gw.dex + "/public/v1/export/activities", headers=h,
                        json={"projectId": "P-DEMO"}, timeout=5).json()["correlationId"]
    # a long-poll of 3 s on a connection whose keep-alive limit is 1 s
    t0 = time.monotonic()
    r = requests.get(gw.dex + f"/public/export?correlationId={cid}&wait=3", headers=h,
                     timeout=10)
    # answered by the poll (wait minus poll.wait_margin), not cut at 1 s
    assert r.status_code == 202 and time.monotonic() - t0 >= 2.0
    # an idle keep-alive connection is closed in an orderly way
    sk = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
    sk.sendall(f"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())
    sk.settimeout(5)
    first = sk.recv(65536)
    assert first.startswith(b"HTTP/1.1 ")
    assert closed_within(sk, 4)
    sk.close()
    assert gw.metric("tidegate_client_timeouts_total", listener="dex", kind="keepalive") >= 1


def test_max_clients_refuses_new_connections_not_open_ones(emulator, make_gateway):
    gw = make_gateway(emulator, {"max_clients": 10})
    h = f"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\n" \
        f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode()
    held = [socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
            for _ in range(10)]
    time.sleep(0.2)
    assert refused(gw.ports["dex"])
    for sk in held:                         # the open ones are served as before
        sk.sendall(h)
        assert sk.recv(65536).startswith(b"HTTP/1.1 ")
    held.pop().close()
    time.sleep(0.3)
    r = requests.get(gw.dex + "/public/v1/import/status?correlationId=x",
                     headers={"Authorization": f"Bearer {TEST_KEY}"}, timeout=5)
    assert r.status_code in (200, 404)
    for sk in held:
        sk.close()
    assert gw.metric("tidegate_client_connections_refused_total", listener="dex",
                     reason="max_clients") == 1


def test_max_clients_per_ip(emulator, make_gateway):
    gw = make_gateway(emulator, {"max_clients_per_ip": 3})
    held = [socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
            for _ in range(3)]
    time.sleep(0.2)
    assert refused(gw.ports["dex"])
    other = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5,
                                     source_address=("127.0.0.2", 0))
    other.sendall(f"GET /public/v1/import/status?correlationId=x HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: Bearer {TEST_KEY}\r\n\r\n".encode())
    other.settimeout(5)
    assert other.recv(65536).startswith(b"HTTP/1.1 ")
    for sk in held + [other]:
        sk.close()
    assert gw.metric("tidegate_client_connections_refused_total", listener="dex",
                     reason="max_clients_per_ip") == 1
    assert gw.metric("tidegate_client_connections", listener="dex") >= 0


def test_limits_follow_a_reload(emulator, make_gateway):
    gw = make_gateway(emulator)
    gw.cfg["max_clients"] = 2
    gw.write_config(gw.cfg)
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while not any(ln.get("event") == "reloaded" for ln in gw.log_lines()):
        assert time.monotonic() < deadline, "no reload"
        time.sleep(0.05)
    held = [socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=5)
            for _ in range(2)]
    time.sleep(0.2)
    assert refused(gw.ports["dex"])
    for sk in held:
        sk.close()
    assert gw.metric("tidegate_client_connections_refused_total", listener="dex",
                     reason="max_clients") == 1
