"""Webhook delivery against receivers that drip and a disk that fills:
receivers on one host that drip their answer hold at most that host's
share of the in-flight slots, and each of their attempts ends at its
deadline, while callbacks to another host are delivered at once; an
answer's status decides without waiting for a body that drips; the payload
quota refuses new callbackUrls with 503 WEBHOOK_QUOTA naming the cap once
export data fills it (nothing is sent to the vendor), keeps every job it
accepted (one whose data waits for room says so as its lastError), and
accepts again once deliveries free space; a key at its share
is refused while another key is not.

Receivers listen on free loopback ports; 127.0.0.1 and 127.0.0.2 are two
hosts to the share, both allowed by webhooks.allow 127.0.0.0/8. The
dripping receivers are raw sockets: they read the request, then write what
they are told a byte at a time."""
import hashlib
import os
import socket
import socketserver
import subprocess
import threading
import time

import pytest
import requests

from conftest import BUILD, TEST_KEY_SHA, free_port
from test_fleet import pg_url  # noqa: F401 (a fixture)
from test_gateway_webhooks import Receiver, secret_file  # noqa: F401 (a fixture)

ADMIN_KEY = "admin-key"
ADMIN_SHA = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()
OTHER_KEY = "other-key"
OTHER_SHA = hashlib.sha256(OTHER_KEY.encode()).hexdigest()
EXPORT = "/public/v1/export/activities"
ACTIVITIES = 300                # an export of about 109 KB


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class Dripper:
    """Reads each request whole, writes `now` at once, then `drip` one byte
    every `every` seconds, round and round, until the client closes."""

    def __init__(self, now, drip, every, host="127.0.0.1"):
        self.now, self.drip, self.every = now, drip, every
        self.lock = threading.Lock()
        self.open = self.peak = self.conns = 0
        self.closed = []                # (seconds open, monotonic time of the close)
        self.stop = threading.Event()
        rcv = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                rcv.serve(self.request)

        self.server = _Server((host, free_port()), Handler)
        self.host, self.port = self.server.server_address
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://{self.host}:{self.port}{path}"

    @staticmethod
    def read_request(s):
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = s.recv(65536)
            if not got:
                return False
            buf += got
        head, _, body = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(body) < length:
            got = s.recv(65536)
            if not got:
                return False
            body += got
        return True

    def serve(self, s):
        t0 = time.monotonic()
        with self.lock:
            self.open += 1
            self.conns += 1
            self.peak = max(self.peak, self.open)
        try:
            if self.read_request(s):
                s.sendall(self.now)
                s.settimeout(self.every)
                i = 0
                while not self.stop.is_set():
                    try:
                        if s.recv(1) == b"":
                            break       # the client closed
                    except socket.timeout:
                        pass
                    s.sendall(self.drip[i % len(self.drip):i % len(self.drip) + 1])
                    i += 1
        except OSError:
            pass                        # reset by the client
        finally:
            with self.lock:
                self.open -= 1
                self.closed.append((time.monotonic() - t0, time.monotonic()))

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def closing():
    """Servers to close at the end of the test."""
    servers = []
    yield servers.append
    for s in servers:
        s.close()


def config(secret_file, **hooks):
    cfg = {"allow": ["127.0.0.0/8"], "secret_file": secret_file, "poll_interval": "200ms",
           "schedule": ["0s"] + ["300ms"] * 60}
    cfg.update(hooks)
    return {"webhooks": cfg,
            "keys": [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
                     {"name": "other", "sha256": OTHER_SHA, "services": ["dex"]},
                     {"name": "ops", "sha256": ADMIN_SHA, "services": ["admin"]}]}


def export(gw, callback, key=None):
    return requests.post(gw.dex + EXPORT, json={"projectId": "P-DEMO", "callbackUrl": callback},
                         headers=gw.headers(key) if key else gw.headers(), timeout=10)


def accepted(gw, callback, key=None):
    r = export(gw, callback, key)
    assert r.status_code == 200, r.text
    return r.headers["X-Tidegate-Webhook-Id"]


def job(gw, wid):
    r = requests.get(f"{gw.admin}/webhooks/{wid}", headers=gw.headers(ADMIN_KEY), timeout=5)
    assert r.status_code == 200, r.text
    return r.json()


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def attempts_to(gw, host):
    return [e for e in gw.log_lines() if e.get("event") == "webhook_attempt"
            and e.get("host") == host]


def test_a_dripping_host_holds_its_share_and_each_attempt_ends_at_its_deadline(
        make_emulator, make_gateway, secret_file, closing):
    """Eight receivers on 127.0.0.1 that drip a header line a byte every
    200 ms (the silence timeout never fires) and one healthy receiver on
    127.0.0.2. The eight jobs' exports are ready first, yet they hold only
    their host's share (2 of 8 slots): every healthy callback arrives
    within 2 s of its request, where without the share it would wait for
    a dripping attempt's deadline (4 s). Each dripping attempt ends at the
    deadline, failed 'deadline', and is retried."""
    emu = make_emulator()
    gw = make_gateway(emu, config(secret_file, attempt_timeout="2s", attempt_deadline="4s"))
    gw.wait_tokens()
    drip = Dripper(b"HTTP/1.1 200 OK\r\n", b"X-Drip: y\r\n", 0.2)
    closing(drip)
    good = Receiver(host="127.0.0.2")
    closing(good)
    dripping = [accepted(gw, drip.url(f"/d{i}")) for i in range(8)]
    time.sleep(0.3)                     # their exports are ready first
    sent = {}
    for i in range(6):
        sent[f"/h{i}"] = time.monotonic()
        accepted(gw, good.url(f"/h{i}"))
    wait_for(lambda: len(good.seen()) == 6, 10, "the healthy callbacks")
    late = {q["path"]: round(q["t"] - sent[q["path"]], 2) for q in good.seen()}
    print(f"healthy callbacks arrived after {late} s")
    assert max(late.values()) < 2.0, late
    assert {job(gw, w)["state"] for w in dripping} == {"ready"}
    # Each dripping attempt ends at its deadline, whatever the receiver sends.
    wait_for(lambda: len(attempts_to(gw, "127.0.0.1")) >= 4, 15, "dripping attempts to end")
    ends = attempts_to(gw, "127.0.0.1")
    assert all("deadline" in e["error"] and e["status"] == 0 for e in ends), ends
    assert all(3900 <= e["ms"] <= 5000 for e in ends), [e["ms"] for e in ends]
    assert drip.peak == 2, drip.peak    # the host's share, never more
    wait_for(lambda: len(drip.closed) >= 4, 5, "the dripping connections to close")
    assert all(held < 5.5 for held, _ in drip.closed), drip.closed
    tried = [job(gw, w) for w in dripping]
    assert sum(j["attempts"] for j in tried) >= 4
    errors = [j["lastError"] for j in tried if j["lastError"] is not None]
    assert len(errors) >= 2 and all(e.startswith("deadline") for e in errors), tried


def test_the_status_decides_without_waiting_for_a_dripping_body(make_emulator, make_gateway,
                                                                secret_file, closing):
    """A receiver that answers 200 with a 100000-byte Content-Length, then
    sends a byte every 5 s (the issue's receiver: the silence timeout of
    15 s never fires): the job is delivered about a second after the
    status, on its first attempt, and the connection is closed."""
    emu = make_emulator()
    gw = make_gateway(emu, config(secret_file))
    gw.wait_tokens()
    drip = Dripper(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"x", 5.0)
    closing(drip)
    t0 = time.monotonic()
    wid = accepted(gw, drip.url("/slow-body"))
    wait_for(lambda: job(gw, wid)["state"] == "delivered", 4, "the delivery")
    took = time.monotonic() - t0
    print(f"delivered {took:.2f} s after the request")
    assert took < 3.0
    j = job(gw, wid)
    assert j["attempts"] == 1 and j["lastStatus"] == 200
    wait_for(lambda: len(drip.closed) == 1, 2, "the connection to close")


def export_size(emu):
    """The bytes of one export of P-DEMO's activities (the same every time)."""
    h = emu.dex_headers()
    cid = requests.post(emu.dex + EXPORT, json={"projectId": "P-DEMO"}, headers=h,
                        timeout=5).json()["correlationId"]
    time.sleep(0.4)
    r = requests.get(emu.dex + "/public/export", params={"correlationId": cid}, headers=h,
                     timeout=10)
    assert r.status_code == 200, r.text
    return len(r.content)


def answering(closing, paths, status):
    """A receiver (closed at the end) answering status on paths."""
    rcv = Receiver()
    closing(rcv)
    answer(rcv, paths, status)
    return rcv


def answer(rcv, paths, status):
    for p in paths:
        rcv.answer(p, then=status)


def big_exports(make_emulator):
    """An emulator whose exports are about 109 KB, and that size."""
    emu = make_emulator({"projects": [{"id": "P-DEMO", "seed": 1, "sites": 5,
                                       "activities": ACTIVITIES}]})
    return emu, export_size(emu)


def payload_bytes(gw):
    d = os.path.join(gw.tmp, "tidegate.db.payloads")
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def quota_log(gw, stage):
    return [e for e in gw.log_lines() if e.get("event") == "webhook_quota"
            and e.get("stage") == stage]


def test_the_payload_quota_refuses_new_callbacks_and_loses_no_job(make_emulator, make_gateway,
                                                                  secret_file, closing):
    """payload_max_bytes of 3.5 exports and a receiver that answers 500:
    three jobs hold their data; a fourth is accepted but its data does not
    fit, so it waits; a fifth callbackUrl is refused 503 WEBHOOK_QUOTA
    (Retry-After, the cap named) without a vendor call. The files never
    hold more than the cap. Once the receiver answers 200 all four are
    delivered (the fourth stored once the others freed their space), and a
    new callbackUrl is accepted again."""
    emu, size = big_exports(make_emulator)
    cap = size * 7 // 2
    gw = make_gateway(emu, config(secret_file, payload_max_bytes=cap, payload_key_share=1,
                                  max_payload=2 * size))
    gw.wait_tokens()
    paths = [f"/q{i}" for i in range(6)]
    rcv = answering(closing, paths, 500)
    first = [accepted(gw, rcv.url(f"/q{i}")) for i in range(3)]
    wait_for(lambda: all(job(gw, w)["size"] == size for w in first), 10, "three payloads")
    assert payload_bytes(gw) == 3 * size
    fourth = accepted(gw, rcv.url("/q3"))          # 3 of 3.5 held: still room to ask
    wait_for(lambda: job(gw, fourth)["lastError"] is not None, 10, "the fourth payload refused")
    waiting = job(gw, fourth)
    assert waiting["state"] == "waiting" and quota_log(gw, "store"), waiting
    assert waiting["lastError"].startswith("waiting for room: webhook payloads would hold")
    assert f"over their cap of {cap}" in waiting["lastError"], waiting
    assert payload_bytes(gw) <= cap
    calls = emu.calls("POST " + EXPORT)
    r = export(gw, rcv.url("/q4"))
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "WEBHOOK_QUOTA"
    assert r.headers["Retry-After"] == "60"
    msg = r.json()["message"]
    assert "webhooks.payload_max_bytes" in msg and str(cap) in msg, msg
    assert "nothing was sent to the vendor" in msg and "waits for room" in msg, msg
    assert emu.calls("POST " + EXPORT) == calls    # the vendor never heard of it
    assert gw.metric("tidegate_webhook_quota_refusals_total", stage="request") == 1
    assert gw.metric("tidegate_webhook_quota_refusals_total", stage="store") >= 1
    assert gw.metric("tidegate_webhook_payload_bytes") == 3 * size
    assert gw.metric("tidegate_webhook_payload_max_bytes") == cap
    assert payload_bytes(gw) <= cap
    # The receiver heals: every accepted job is delivered, none lost.
    answer(rcv, paths, 200)
    wait_for(lambda: all(job(gw, w)["state"] == "delivered" for w in first + [fourth]), 15,
             "every accepted job delivered")
    assert payload_bytes(gw) == 0
    assert gw.metric("tidegate_webhook_payload_bytes") == 0
    delivered = [q for q in rcv.seen() if q["status"] == 200]
    assert sorted({q["path"] for q in delivered}) == ["/q0", "/q1", "/q2", "/q3"]
    assert job(gw, fourth)["lastError"] is None     # stored, then delivered
    assert all(len(q["body"]) == size for q in delivered)
    again = accepted(gw, rcv.url("/q5"))
    wait_for(lambda: job(gw, again)["state"] == "delivered", 10, "a new job delivered")


def test_a_key_at_its_share_is_refused_and_another_is_not(make_emulator, make_gateway,
                                                           secret_file, closing):
    """payload_key_share 0.25 of ten exports' worth: key test holds two
    exports, its third waits (2.5 exports is its share) and its fourth is
    refused naming the share; key other is accepted and its data stored."""
    emu, size = big_exports(make_emulator)
    gw = make_gateway(emu, config(secret_file, payload_max_bytes=10 * size,
                                  payload_key_share=0.25, max_payload=2 * size))
    gw.wait_tokens()
    rcv = answering(closing, ["/k0", "/k1", "/k2", "/k3", "/o0"], 500)
    mine = [accepted(gw, rcv.url(f"/k{i}")) for i in range(3)]
    wait_for(lambda: quota_log(gw, "store"), 10, "the third payload refused")
    # the three fetches run at once: whichever stores last finds the share
    # full (two exports' worth), whatever order they were accepted in
    states = [job(gw, w)["state"] for w in mine]
    assert sorted(states) == ["ready", "ready", "waiting"], states
    third = mine[states.index("waiting")]
    wait_for(lambda: job(gw, third)["lastError"] is not None, 5, "the third job's note")
    assert "this API key's share" in job(gw, third)["lastError"]
    r = export(gw, rcv.url("/k3"))
    assert r.status_code == 503 and r.json()["error"] == "WEBHOOK_QUOTA", r.text
    assert "webhooks.payload_key_share" in r.json()["message"], r.text
    theirs = accepted(gw, rcv.url("/o0"), key=OTHER_KEY)
    wait_for(lambda: job(gw, theirs)["size"] == size, 10, "the other key's payload")
    assert job(gw, theirs)["apiKey"] == "other"


@pytest.mark.parametrize("body,want", [
    ("webhooks:\n  attempt_timeout: 20s\n  attempt_deadline: 10s\n",
     "{f}:4:21: webhooks.attempt_deadline: must be at least webhooks.attempt_timeout "
     "(20000 ms)"),
    ("webhooks:\n  payload_max_bytes: 100MB\n",
     "{f}:3:22: webhooks.max_payload: 1073741824 bytes is more than one API key may hold "
     "(webhooks.payload_max_bytes times webhooks.payload_key_share: 52428800 bytes): such "
     "an export could never be stored; lower webhooks.max_payload or raise the cap"),
    ("webhooks:\n  payload_key_share: 0\n",
     "{f}:3:22: webhooks.payload_key_share: "),
], ids=["deadline_below_timeout", "export_over_key_share", "share_zero"])
def test_limits_that_contradict_each_other_are_refused(tmp_path, body, want):
    f = tmp_path / "tidegate.yaml"
    f.write_text("upstream: remote\n" + body)
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", str(f)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 1, r.stdout + r.stderr
    assert want.format(f=f) in r.stderr, r.stderr


@pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL: PG* unset (scripts/test starts one unless TG_TEST_NO_PG=1)")
def test_a_fleet_shares_the_quota_in_its_database(make_emulator, make_gateway, pg_url,
                                                  secret_file, closing):
    """Two instances on one PostgreSQL: the bytes held are the database's.
    Three exports through the first fill 3 of 3.5 exports' worth; the
    second sees them (tidegate_webhook_payload_bytes), cannot store a
    fourth export's data, refuses a fifth callbackUrl, and every accepted
    job is delivered once the receiver heals."""
    emu, size = big_exports(make_emulator)
    cap = size * 7 // 2
    gws = []
    for i in range(2):
        cfg = config(secret_file, payload_max_bytes=cap, payload_key_share=1,
                     max_payload=2 * size)
        cfg["state"] = {"url": pg_url, "instance": f"gw{i}"}
        gws.append(make_gateway(emu, cfg))
    for gw in gws:
        gw.wait_tokens()
    paths = [f"/f{i}" for i in range(5)]
    rcv = answering(closing, paths, 500)
    first = [accepted(gws[0], rcv.url(f"/f{i}")) for i in range(3)]
    wait_for(lambda: all(job(gws[1], w)["size"] == size for w in first), 10, "three payloads")
    assert gws[1].metric("tidegate_webhook_payload_bytes") == 3 * size
    fourth = accepted(gws[1], rcv.url("/f3"))
    wait_for(lambda: quota_log(gws[1], "store"), 10, "the fourth payload refused")
    assert job(gws[0], fourth)["state"] == "waiting"
    r = export(gws[1], rcv.url("/f4"))
    assert r.status_code == 503 and r.json()["error"] == "WEBHOOK_QUOTA", r.text
    answer(rcv, paths, 200)
    wait_for(lambda: all(job(gws[0], w)["state"] == "delivered" for w in first + [fourth]),
             20, "every accepted job delivered")
    assert gws[0].metric("tidegate_webhook_payload_bytes") == 0
