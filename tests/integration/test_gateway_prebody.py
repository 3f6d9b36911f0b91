"""
Nothing is read before the caller is known: the four shapes in which a body
used to be buffered whole before the gateway could tell who sent it, each
answered on its head (or cut at a small cap), with the gateway's peak RSS
measured while clients push 150 MB bodies at it (release build: RSS under
ASan is meaningless), and the legitimate use of each still working:

1. a bearer that is not a gateway key (caller_tokens): capped at the
   service's caller_max_body;
2. a caller's login: capped at login_max_body;
3. the relay endpoint POST /__tidegate/callbacks/<id>.<mac>: an id whose MAC
   is not the state's relay key's is refused on its head, on one instance
   and in a fleet; one instance also refuses an id no job waiting here has;
4. the admin listener: its API key checked on the head, bodies capped at
   admin_max_body.

Raw sockets: an HTTP client library sends the body with the head.
"""
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

from conftest import BUILD, RELEASE_BUILD, TEST_KEY, TEST_KEY_SHA
from test_fleet import pg_url  # noqa: F401 (fixture)
from test_gateway_frontdoor import parse as parse_raw
from test_gateway_webhooks import hooks, receiver, secret_file, wait_log  # noqa: F401

MB = 1 << 20
HUGE = 150 * MB
ADMIN_KEY = "admin-key"
ADMIN_SHA = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "ops", "sha256": ADMIN_SHA, "services": ["admin"]}]
EXPORT = "/public/v1/export/activities"
LOGIN = "/public/v1/authenticate"
SIM_LOGIN = "/api/oauth2/token"
REDELIVER = "/webhooks/redeliver?since=2024-01-01T00:00:00Z"


def relay_path():
    return "/__tidegate/callbacks/msg_" + secrets.token_hex(16)


def head(method, path, fields=(), length=None, chunked=False):
    lines = [f"{method} {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    lines += list(fields)
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(s):
    """One answer (head and Content-Length body), or b"" when the gateway
    closed or reset first."""
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return out
        if not chunk:
            return out
        out += chunk
        h, sep, body = out.partition(b"\r\n\r\n")
        if sep:
            n = [int(l.split(b":")[1]) for l in h.split(b"\r\n")
                 if l.lower().startswith(b"content-length:")]
            if n and len(body) >= n[0]:
                return out


def parse(resp):
    status, fields, body = parse_raw(resp)
    return status, fields, json.loads(body)


def on_head(port, data):
    """Send a head announcing a body, and nothing of the body: the answer
    must come on the head alone, with the connection closed after it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(data)
        out = read_answer(s)
        assert out, "no answer to the head alone"
        status, fields, doc = parse(out)
        assert fields.get("connection") == "close", fields
        assert doc["statusCode"] == status and doc["requestId"], doc
        return status, fields, doc
    finally:
        s.close()


def push(port, data, total, chunked=False):
    """Send the head, then up to total bytes of body (1 MiB pieces, chunked
    when asked) until the gateway stops taking them. Returns (bytes sent,
    the answer read, b"" when none)."""
    blob = b"x" * MB
    piece = (b"%x\r\n" % MB) + blob + b"\r\n" if chunked else blob
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    sent = 0
    try:
        s.sendall(data)
        while sent < total:
            s.sendall(piece)
            sent += MB
        if chunked:
            s.sendall(b"0\r\n\r\n")
    except OSError:
        pass                    # refused or cut: expected
    try:
        out = read_answer(s)
    except OSError:
        out = b""
    s.close()
    return sent, out


def pushed_by_four(port, data, total, chunked=False):
    """Four clients at once, as the attack ran; their results."""
    res = [None] * 4

    def run(i):
        res[i] = push(port, data, total, chunked)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None for r in res)
    return res


@pytest.mark.parametrize("body,want", [
    ("dex:\n  caller_max_body: 512\n",
     "2:20: dex.caller_max_body: must be between 1KiB and 4GiB"),
    ("sim:\n  login_max_body: 2MB\n",
     "2:19: sim.login_max_body: must be between 1KiB and 1MiB"),
    ("admin_max_body: 1GB\n", "1:17: admin_max_body: must be between 1KiB and 1MiB"),
])
def test_caps_have_bounds(tmp_path, body, want):
    path = os.path.join(str(tmp_path), "tidegate.yaml")
    with open(path, "w") as f:
        f.write(body)
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", path],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and f"{path}:{want}" in r.stderr, r.stderr


# ---- 1. a bearer that is not a gateway key ----

@pytest.mark.parametrize("svc,path", [("dex", EXPORT), ("sim", "/api/v1/simulations")])
def test_caller_token_body_over_its_cap_refused_on_the_head(make_emulator, make_gateway,
                                                            svc, path):
    emu = make_emulator()
    gw = make_gateway(emu)
    status, _, doc = on_head(gw.ports[svc], head("POST", path, ["Authorization: Bearer junk"],
                                                 length=HUGE))
    assert status == 413 and doc["error"] == "PAYLOAD_TOO_LARGE"
    msg = doc["message"]
    assert f"{svc}.caller_max_body" in msg and "8388608" in msg, msg
    assert "gateway API key" in msg and "268435456" in msg, msg
    # at the cap the head passes (and the vendor answers the junk token)
    s = socket.create_connection(("127.0.0.1", gw.ports[svc]), timeout=5)
    s.sendall(head("POST", path, ["Authorization: Bearer junk"], length=8 * MB))
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.recv(1)               # waiting for the body, not refused
    s.close()
    # a gateway key may send up to max_body
    status, _, doc = on_head(gw.ports[svc], head("POST", path, [f"Authorization: Bearer "
                                                                f"{TEST_KEY}"],
                                                 length=HUGE * 2))
    assert status == 413 and "268435456" in doc["message"]


def test_caller_token_under_its_cap_still_reaches_the_vendor(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"dex": {"caller_max_body": "64KB"}})
    own = {"Authorization": "Bearer " + emu.token(), "Content-Type": "application/json"}
    # an export of 60 KB (a long list of names): under the cap, forwarded
    # with the caller's own token
    body = json.dumps({"projectId": "P-DEMO", "names": ["n" * 500] * 118}).encode()
    assert 58_000 < len(body) < 64 * 1024
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    r = requests.post(gw.dex + EXPORT, data=body, headers=own, timeout=10)
    assert r.status_code == 200 and r.json()["correlationId"], r.text
    assert emu.calls("POST " + EXPORT) == 1
    # over it: refused on the head, the vendor never asked
    body = body[:-1] + b" " * (64 * 1024 - len(body) + 1) + b"}"
    r = requests.post(gw.dex + EXPORT, data=body, headers=own, timeout=10)
    assert r.status_code == 413 and "dex.caller_max_body" in r.json()["message"]
    assert emu.calls("POST " + EXPORT) == 1


def test_caller_token_chunked_body_cut_at_its_cap(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"dex": {"caller_max_body": "2MB"}})
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    sent, out = push(gw.ports["dex"], head("POST", EXPORT, ["Authorization: Bearer junk"],
                                           chunked=True), 64 * MB, chunked=True)
    assert sent < 64 * MB, "the gateway kept reading past the caller's cap"
    if out:                     # cut with an answer, or reset
        status, _, doc = parse(out)
        assert status == 413, doc
    assert emu.calls("POST " + EXPORT) == 0
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200


# ---- 2. logins ----

@pytest.mark.parametrize("svc,path", [("dex", LOGIN), ("sim", SIM_LOGIN)])
def test_login_body_over_its_cap_refused_on_the_head(make_emulator, make_gateway, svc, path):
    emu = make_emulator()
    gw = make_gateway(emu)
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    status, _, doc = on_head(gw.ports[svc], head("POST", path, length=HUGE))
    assert status == 413 and doc["error"] == "PAYLOAD_TOO_LARGE"
    assert f"{svc}.login_max_body" in doc["message"] and "16384" in doc["message"], doc
    status, _, doc = on_head(gw.ports[svc], head("POST", path, length=16 * 1024 + 1))
    assert status == 413
    # chunked: cut once past the cap, the vendor never asked
    sent, out = push(gw.ports[svc], head("POST", path, chunked=True), 64 * MB, chunked=True)
    assert sent < 64 * MB
    assert emu.calls("POST " + path) == 0 and emu.calls("POST /public/v1/authenticate") == 0


def test_logins_with_a_normal_body_still_work(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu)
    r = requests.post(gw.dex + LOGIN, json={"username": "demo", "password": "demo"},
                      timeout=5)
    assert r.status_code == 200 and r.json()["token"]
    r = requests.post(gw.sim + SIM_LOGIN, data={"grant_type": "client_credentials",
                                                "client_id": "demo",
                                                "client_secret": "demo-secret"}, timeout=5)
    assert r.status_code == 200 and r.json()["access_token"]


# ---- 3. the relay endpoint ----

def test_relay_id_no_job_waits_for_refused_on_the_head(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu)      # the default mode: no relay job can wait
    for path in (relay_path(), "/__tidegate/callbacks/nope"):
        status, _, doc = on_head(gw.ports["dex"], head("POST", path, length=HUGE))
        assert status == 404 and doc["error"] == "NOT_FOUND", doc
    status, _, doc = on_head(gw.ports["dex"], head("POST", relay_path(), chunked=True))
    assert status == 404
    # a small body still gets the job's own answer from the outbox
    r = requests.post(gw.dex + relay_path(), data=b"[]", timeout=5)
    assert r.status_code == 404 and r.json()["message"] == "no such webhook job"
    # another method with a body: its 405, after a few KB at most
    status, _, doc = on_head(gw.ports["dex"], head("PUT", relay_path(), length=HUGE))
    assert status == 405, doc


def relay_export(make_gateway, emu, secret_file, callback):
    """One instance in relay mode (public_url its own listener) and an
    export with callback: the gateway and the job's webhook id."""
    gw = make_gateway(emu, {**hooks(secret_file), "keys": KEYS})
    gw.cfg["webhooks"].update({"mode": "relay", "public_url": gw.dex})
    gw.write_config(gw.cfg)
    gw.send_signal(signal.SIGHUP)
    wait_log(gw, "reloaded")
    r = requests.post(gw.dex + EXPORT, json={"projectId": "P-DEMO", "callbackUrl": callback},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return gw, r.headers["X-Tidegate-Webhook-Id"]


def relay_seg(key, wid):
    """The relay URL segment the gateway makes for job wid under the
    state's relay key (src/webhook/relay_mac.c)."""
    mac = hmac.new(key, b"tidegate-relay-v1:" + wid.encode(), hashlib.sha256)
    return f"{wid}.{mac.hexdigest()[:32]}"


def sqlite_relay_key(gw):
    db = sqlite3.connect(os.path.join(gw.tmp, "tidegate.db"), timeout=10)
    try:
        rows = db.execute("SELECT key FROM state_keys WHERE name = 'relay'").fetchall()
    finally:
        db.close()
    assert len(rows) == 1 and len(rows[0][0]) == 32
    return bytes(rows[0][0])


def test_relay_id_carries_a_mac_checked_on_the_head(make_emulator, make_gateway,
                                                    receiver, secret_file):
    """The relay URL names its job and a MAC under the state's relay key: a
    made-up MAC for the id of a job that does wait is refused on the head
    (150 MB announced, nothing sent), the genuine one is read and stored,
    and the key survives a restart (a URL given before it still works)."""
    emu = make_emulator({"export": {"delay": "30s"}})
    gw, wid = relay_export(make_gateway, emu, secret_file, receiver.url("/mac"))
    key = sqlite_relay_key(gw)
    genuine = "/__tidegate/callbacks/" + relay_seg(key, wid)
    forged = [f"/__tidegate/callbacks/{wid}.{secrets.token_hex(16)}",
              "/__tidegate/callbacks/" + relay_seg(secrets.token_bytes(32), wid),
              genuine[:-1] + ("0" if genuine[-1] != "0" else "1"),
              genuine.upper().replace("/__TIDEGATE/CALLBACKS/", "/__tidegate/callbacks/")]
    for path in forged:
        status, _, doc = on_head(gw.ports["dex"], head("POST", path, length=HUGE))
        assert status == 404 and doc["error"] == "NOT_FOUND", (path, doc)
    assert gw.stop() == 0
    gw.restart()
    assert sqlite_relay_key(gw) == key
    body = json.dumps([{"n": i} for i in range(2000)]).encode()
    r = requests.post(gw.dex + genuine, data=body, timeout=10)
    assert r.status_code == 200 and r.json() == {"id": wid, "status": "accepted"}, r.text
    receiver.wait(lambda: len(receiver.seen()) == 1, timeout=15)
    got = receiver.seen()[0]
    assert got["headers"]["webhook-id"] == wid and got["body"] == body
    assert gw.metric("tidegate_webhook_relay_deliveries_total") == 1


# ---- 4. the admin listener ----

def test_admin_key_checked_on_the_head_and_bodies_capped(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"keys": KEYS})
    port = gw.ports["admin"]
    status, fields, doc = on_head(port, head("POST", REDELIVER, length=HUGE))
    assert status == 401 and doc["error"] == "UNAUTHORIZED"
    assert fields.get("www-authenticate") == "Bearer"
    status, _, doc = on_head(port, head("POST", REDELIVER, ["X-Api-Key: wrong"], length=HUGE))
    assert status == 401 and doc["message"] == "unknown API key"
    status, _, doc = on_head(port, head("POST", REDELIVER, ["Authorization: Bearer junk"],
                                        chunked=True))
    assert status == 401
    status, _, doc = on_head(port, head("POST", REDELIVER, [f"X-Api-Key: {ADMIN_KEY}"],
                                        length=HUGE))
    assert status == 413 and "admin_max_body" in doc["message"] and "16384" in doc["message"]
    # with its key the API works, a small body or none
    adm = {"Authorization": "Bearer " + ADMIN_KEY}
    r = requests.post(gw.admin + REDELIVER, headers=adm, timeout=5)
    assert r.status_code == 200 and r.json() == {"redelivered": 0}
    r = requests.post(gw.admin + REDELIVER, headers=adm, data=b"{}", timeout=5)
    assert r.status_code == 200
    # a known key without the admin service: its 403 after a small body
    r = requests.post(gw.admin + REDELIVER, headers=gw.headers(), data=b"{}", timeout=5)
    assert r.status_code == 403
    # the probes ask for no key (a body sent to one: capped, then its 405)
    assert requests.get(gw.admin + "/readyz", timeout=5).status_code == 200
    status, _, doc = on_head(port, head("POST", "/healthz", length=HUGE))
    assert status == 413 and "admin_max_body" in doc["message"]


def test_admin_without_keys_still_caps_bodies(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"keys": []})
    status, _, doc = on_head(gw.ports["admin"], head("POST", REDELIVER, length=HUGE))
    assert status == 413 and "admin_max_body" in doc["message"]
    r = requests.post(gw.admin + REDELIVER, timeout=5)
    assert r.status_code == 200


# ---- peak RSS while clients push 150 MB bodies (release build) ----

SHAPES = [
    ("caller token", "dex", lambda: head("POST", EXPORT, ["Authorization: Bearer junk"],
                                         length=HUGE), False),
    ("caller token, chunked", "sim", lambda: head("POST", "/api/v1/simulations",
                                                  ["Authorization: Bearer junk"],
                                                  chunked=True), True),
    ("login", "dex", lambda: head("POST", LOGIN, length=HUGE), False),
    ("login, chunked", "sim", lambda: head("POST", SIM_LOGIN, chunked=True), True),
    ("relay", "dex", lambda: head("POST", relay_path(), length=HUGE), False),
    ("relay, chunked", "dex", lambda: head("POST", relay_path(), chunked=True), True),
    ("admin", "admin", lambda: head("POST", REDELIVER, length=HUGE), False),
    ("admin, chunked", "admin", lambda: head("POST", REDELIVER, chunked=True), True),
]


def test_peak_rss_flat_while_clients_push_150_mb_bodies(make_emulator, make_gateway):
    """Four clients at once per shape, each pushing up to 150 MB: before, RSS
    went from 15 to 623 MB (952 MB on a login route). The caps are the
    defaults but for caller_max_body, lowered to 1 MB so that the chunked
    shape's bound (four bodies held at the cap) stays tight."""
    emu = make_emulator(build=RELEASE_BUILD)
    gw = make_gateway(emu, {"log_level": "warn", "keys": KEYS,
                            "sim": {"caller_max_body": "1MB"}}, build=RELEASE_BUILD)
    requests.get(gw.admin + "/metrics", timeout=5)
    base = gw.hwm_kb()
    for name, port, make_head, chunked in SHAPES:
        t0 = time.monotonic()
        res = pushed_by_four(gw.ports[port], make_head(), HUGE, chunked)
        took = time.monotonic() - t0
        peak = gw.hwm_kb()
        print(f"{name}: bytes pushed per client {[r[0] >> 20 for r in res]} MiB, "
              f"{took:.1f} s; peak RSS {base} -> {peak} kB")
        for sent, out in res:
            assert sent < 64 * MB, f"{name}: the gateway kept reading ({sent} bytes)"
            if out:
                assert parse(out)[0] in (401, 404, 413), (name, out[:200])
        assert peak - base < 12 * 1024, f"{name}: peak RSS grew {peak - base} kB"
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200


# ---- a second instance: relay ids carry a MAC any instance checks ----

@pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT")),
    reason="no PostgreSQL: PG* unset (scripts/test starts one unless TG_TEST_NO_PG=1)")
def test_fleet_relay_delivery_to_another_instance_is_read(make_emulator, make_gateway,
                                                          receiver, secret_file, pg_url):
    """A job waits at instance 0; the vendor delivers to instance 1 (one
    public_url for the fleet, a load balancer behind it). Instance 1 does
    not know the job, yet reads the delivery (over 4 KB) and stores it: the
    URL's MAC, made under the fleet's one relay key, vouches for it. An id
    whose MAC is not the key's is refused on the head by every instance."""
    emu = make_emulator()
    gws = [make_gateway(emu, {**hooks(secret_file), "keys": KEYS,
                              "state": {"url": pg_url, "instance": f"gw{i}"}})
           for i in range(2)]
    for gw in gws:
        gw.cfg["webhooks"].update({"mode": "relay", "public_url": gws[1].dex})
        gw.write_config(gw.cfg)
        gw.send_signal(signal.SIGHUP)
        wait_log(gw, "reloaded")
    r = requests.post(gws[0].dex + EXPORT, json={"projectId": "P-DEMO",
                                                 "callbackUrl": receiver.url("/fleet")},
                      headers=gws[0].headers(), timeout=10)
    assert r.status_code == 200, r.text
    wid = r.headers["X-Tidegate-Webhook-Id"]
    receiver.wait(lambda: len(receiver.seen()) == 1)
    got = receiver.seen()[0]
    assert got["headers"]["webhook-id"] == wid and len(got["body"]) > 4096
    assert gws[1].metric("tidegate_webhook_relay_deliveries_total") == 1
    assert gws[0].metric("tidegate_webhook_relay_deliveries_total") == 0
    # one relay key for the fleet, which instance 1 checked instance 0's URL with
    schema = pg_url.rsplit("%3D", 1)[1]
    out = subprocess.run(["psql", "-qXAtc", f"SELECT name, length(key) FROM {schema}.state_keys"],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    assert out.split() == ["relay|32"], out
    # a made-up id is refused on the head by every instance, 150 MB announced:
    # a wrong MAC for a real job's id, a random one, a bare id (no MAC)
    for gw in gws:
        for path in (f"/__tidegate/callbacks/{wid}.{secrets.token_hex(16)}",
                     relay_path() + "." + secrets.token_hex(16), relay_path()):
            status, _, doc = on_head(gw.ports["dex"], head("POST", path, length=HUGE))
            assert status == 404 and doc["error"] == "NOT_FOUND", (path, doc)


def test_relay_job_waiting_across_a_restart_still_gets_its_delivery(
        make_emulator, make_gateway, receiver, secret_file):
    """One instance refuses ids no waiting job has on the head: a job that
    waited through a restart is known again before its delivery comes (the
    start lists every waiting job), so its delivery (over 4 KB) is read."""
    emu = make_emulator({"export": {"delay": "3s"}})
    gw, wid = relay_export(make_gateway, emu, secret_file, receiver.url("/later"))
    assert gw.stop() == 0
    gw.restart()
    receiver.wait(lambda: len(receiver.seen()) == 1, timeout=15)
    got = receiver.seen()[0]
    assert got["headers"]["webhook-id"] == wid and len(got["body"]) > 4096
    assert gw.metric("tidegate_webhook_relay_deliveries_total") == 1
