"""callbackUrl webhooks through the gateway: delivered signed with the export
data (checked with the independent verifier), retried across a receiver
outage, stopped by 410, never sent upstream in deliver mode, passed through
in forward mode, relayed through the gateway's inbound endpoint in relay
mode, kept across kill -9, refused at request time for special address
ranges; the admin API and the metrics.

The receiver is an http.server in a thread on a free loopback port,
allow-listed with webhooks.allow; schedules are short."""
import base64
import hashlib
import http.server
import json
import os
import signal
import threading
import time

import pytest
import requests

from conftest import TEST_KEY_SHA, free_port
import webhook_verify

SECRET = "whsec_" + base64.b64encode(b"tidegate-test-signing-key-0001").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"tidegate-test-signing-key-0000").decode()
KEY_SECRET = "whsec_" + base64.b64encode(b"tidegate-test-key-own-secret-01").decode()
ADMIN_KEY = "admin-key"
ADMIN_SHA = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()
OTHER_KEY = "other-key"
OTHER_SHA = hashlib.sha256(OTHER_KEY.encode()).hexdigest()
EXPORT = "/public/v1/export/activities"


class Receiver:
    """Records every POST; answers per path from a script, then a default."""

    def __init__(self, host="127.0.0.1"):
        self.host = host
        self.port = free_port()
        self.requests = []
        self.scripts = {}
        self.defaults = {}
        self.delays = {}
        self.lock = threading.Lock()
        rcv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with rcv.lock:
                    script = rcv.scripts.get(self.path, [])
                    status = script.pop(0) if script else rcv.defaults.get(self.path, 200)
                    rcv.requests.append({"path": self.path, "headers": dict(self.headers),
                                         "body": body, "t": time.monotonic(),
                                         "status": status})
                    delay = rcv.delays.get(self.path, 0)
                time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((host, self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://{self.host}:{self.port}{path}"

    def answer(self, path, *statuses, then=200):
        with self.lock:
            self.scripts[path] = list(statuses)
            self.defaults[path] = then

    def seen(self, path=None):
        with self.lock:
            return [r for r in self.requests if path is None or r["path"] == path]

    def wait(self, pred, timeout=10.0, what="the receiver"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}: {self.seen()!r:.2000}")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def secret_file(tmp_path):
    """The global secret file: the current secret first, the previous one after."""
    p = tmp_path / "webhook-secret"
    p.write_text(f"{SECRET}\n{OLD_SECRET}\n")
    return str(p)


def hooks(secret_file, **over):
    cfg = {"allow": ["127.0.0.1/32"], "schedule": ["0s", "200ms", "400ms", "800ms"],
           "secret_file": secret_file, "poll_interval": "200ms", "attempt_timeout": "3s"}
    cfg.update(over)
    return {"webhooks": cfg}


def export(gw, callback, key=None, member="callbackUrl", expect=200):
    r = requests.post(gw.dex + EXPORT, json={"projectId": "P-DEMO", member: callback},
                      headers=gw.headers(key) if key else gw.headers(), timeout=10)
    assert r.status_code == expect, r.text
    return r


def job(gw, wid, key=ADMIN_KEY):
    r = requests.get(f"{gw.admin}/webhooks/{wid}", headers=gw.headers(key), timeout=5)
    assert r.status_code == 200, r.text
    return r.json()


def wait_state(gw, wid, state, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        j = job(gw, wid)
        if j["state"] == state:
            return j
        assert time.monotonic() < deadline, j
        time.sleep(0.05)


def verified(req, secret=SECRET):
    return webhook_verify.verify(secret, req["headers"], req["body"])


def wait_log(gw, event, n=1, timeout=10.0):
    deadline = time.monotonic() + timeout
    while sum(e.get("event") == event for e in gw.log_lines()) < n:
        assert time.monotonic() < deadline, f"no {event} in the log"
        time.sleep(0.05)


def keys_with_admin():
    return [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
            {"name": "ops", "sha256": ADMIN_SHA, "services": ["admin"]}]


def test_delivered_signed_with_the_export_data_and_not_sent_upstream(
        make_emulator, make_gateway, receiver, secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file), "keys": keys_with_admin()})
    t0 = time.monotonic()
    r = export(gw, receiver.url("/hook?token=s3cr3t"))
    cid, wid = r.json()["correlationId"], r.headers["X-Tidegate-Webhook-Id"]
    assert wid.startswith("msg_") and len(wid) == 36
    receiver.wait(lambda: len(receiver.seen()) == 1)
    got = receiver.seen()[0]
    ready_at = t0 + 0.3        # the emulator's export.delay
    latency = got["t"] - ready_at
    print(f"delivered {latency * 1000:.0f} ms after the export was ready")
    h = {k.lower(): v for k, v in got["headers"].items()}
    assert h["webhook-id"] == wid and h["content-type"] == "application/json"
    assert verified(got) and verified(got, OLD_SECRET)       # rotation: both signatures
    assert len(h["webhook-signature"].split(" ")) == 2
    assert not webhook_verify.verify(KEY_SECRET, got["headers"], got["body"])
    data = requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                        headers=gw.headers(), timeout=10)
    assert data.status_code == 200 and json.loads(got["body"]) == data.json()
    assert len(data.json()) > 0
    # The vendor never got the URL: after its own callback time nothing else came.
    time.sleep(0.6)
    assert len(receiver.seen()) == 1
    assert all("webhook-id" in {k.lower() for k in q["headers"]} for q in receiver.seen())
    j = wait_state(gw, wid, "delivered")
    assert j["correlationId"] == cid and j["attempts"] == 1 and j["apiKey"] == "test"
    assert "s3cr3t" not in j["url"]
    log = gw.read_log()
    assert "s3cr3t" not in log and SECRET not in log and h["webhook-signature"] not in log
    line = [e for e in gw.log_lines() if e.get("event") == "webhook_attempt"][0]
    assert line["correlationId"] == cid and line["key"] == "test"
    assert line["host"] == "127.0.0.1" and line["state"] == "delivered"
    emu_log = emu.read_log()
    assert "export_callback" not in emu_log


def test_retried_across_an_outage_and_410_stops(make_emulator, make_gateway, receiver,
                                                 secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file), "keys": keys_with_admin()})
    receiver.answer("/flaky", 500, 500)
    receiver.answer("/gone", 410)
    flaky = export(gw, receiver.url("/flaky")).headers["X-Tidegate-Webhook-Id"]
    gone = export(gw, receiver.url("/gone")).headers["X-Tidegate-Webhook-Id"]
    receiver.wait(lambda: [q["status"] for q in receiver.seen("/flaky")] == [500, 500, 200])
    tries = receiver.seen("/flaky")
    assert {q["headers"]["webhook-id"] for q in tries} == {flaky}
    assert all(verified(q) for q in tries)
    j = wait_state(gw, flaky, "delivered")
    assert j["attempts"] == 3 and j["lastStatus"] == 200
    # 410: one attempt, then nothing more
    wait_state(gw, gone, "gone")
    time.sleep(0.5)
    assert [q["status"] for q in receiver.seen("/gone")] == [410]
    assert gw.metric("tidegate_webhook_attempts_total", result="retry") == 2
    assert gw.metric("tidegate_webhook_attempts_total", result="delivered") == 1
    assert gw.metric("tidegate_webhook_attempts_total", result="gone") == 1


def test_dead_letters_admin_api_and_metrics(make_emulator, make_gateway, receiver,
                                            secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file, schedule=["0s", "100ms"]),
                            "keys": keys_with_admin()})
    receiver.answer("/down", then=500)
    before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    a = export(gw, receiver.url("/down"))
    b = export(gw, receiver.url("/down"))
    wa, wb = (x.headers["X-Tidegate-Webhook-Id"] for x in (a, b))
    wait_state(gw, wa, "dead")
    wait_state(gw, wb, "dead")
    adm = gw.headers(ADMIN_KEY)
    # authentication: no key 401, a key without the admin service 403
    assert requests.get(gw.admin + "/webhooks", timeout=5).status_code == 401
    r = requests.get(gw.admin + "/webhooks", headers=gw.headers(), timeout=5)
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN"
    r = requests.post(f"{gw.admin}/webhooks/{wa}/redeliver", timeout=5)
    assert r.status_code == 401
    # list and filters
    r = requests.get(gw.admin + "/webhooks", params={"state": "dead"}, headers=adm, timeout=5)
    assert r.status_code == 200 and {w["id"] for w in r.json()["webhooks"]} == {wa, wb}
    cid = a.json()["correlationId"]
    r = requests.get(gw.admin + "/webhooks", params={"correlationId": cid},
                     headers={"X-Api-Key": ADMIN_KEY}, timeout=5)
    assert [w["id"] for w in r.json()["webhooks"]] == [wa]
    r = requests.get(gw.admin + "/webhooks", params={"state": "delivered"}, headers=adm,
                     timeout=5)
    assert r.json()["webhooks"] == []
    r = requests.get(gw.admin + "/webhooks", params={"limit": 1, "offset": 1}, headers=adm,
                     timeout=5)
    assert len(r.json()["webhooks"]) == 1
    assert requests.get(gw.admin + "/webhooks", params={"state": "lost"}, headers=adm,
                        timeout=5).status_code == 400
    assert requests.get(gw.admin + "/webhooks", params={"since": "yesterday"}, headers=adm,
                        timeout=5).status_code == 400
    j = job(gw, wa)
    assert j["attempts"] == 2 and j["lastStatus"] == 500 and j["lastError"] == "HTTP 500"
    # rotate the secret (SIGHUP), then redeliver one: signed with the new secret
    with open(secret_file, "w") as f:
        f.write(KEY_SECRET + "\n")
    gw.send_signal(signal.SIGHUP)
    wait_log(gw, "reloaded")
    receiver.answer("/down", then=200)
    r = requests.post(f"{gw.admin}/webhooks/{wa}/redeliver",
                      headers={**adm, "X-Request-Id": "req-redeliver"}, timeout=5)
    assert r.status_code == 200 and r.json()["state"] == "ready", r.text
    red = [e for e in gw.log_lines() if e.get("event") == "webhook_redeliver"]
    assert red and red[-1]["id"] == "req-redeliver" and red[-1]["webhook_id"] == wa, red
    wait_state(gw, wa, "delivered")
    last = receiver.seen("/down")[-1]
    assert verified(last, KEY_SECRET) and not verified(last, SECRET)
    r = requests.post(f"{gw.admin}/webhooks/{wa}/redeliver", headers=adm, timeout=5)
    assert r.status_code == 409 and r.json()["error"] == "CONFLICT"
    r = requests.post(f"{gw.admin}/webhooks/msg_{'0' * 32}/redeliver", headers=adm, timeout=5)
    assert r.status_code == 404
    assert requests.get(f"{gw.admin}/webhooks/msg_{'0' * 32}", headers=adm,
                        timeout=5).status_code == 404
    assert requests.get(f"{gw.admin}/webhooks/{wa}/redeliver", headers=adm,
                        timeout=5).status_code == 405
    # redeliver every failure since a time
    assert requests.post(gw.admin + "/webhooks/redeliver", headers=adm,
                         timeout=5).status_code == 400
    r = requests.post(gw.admin + "/webhooks/redeliver", params={"since": before}, headers=adm,
                      timeout=5)
    assert r.status_code == 200 and r.json() == {"redelivered": 1}
    red = [e for e in gw.log_lines() if e.get("event") == "webhook_redeliver"]
    assert red[-1]["id"] == r.headers["X-Request-Id"] and red[-1]["jobs"] == 1, red
    wait_state(gw, wb, "delivered")
    ids = [q["headers"]["webhook-id"] for q in receiver.seen("/down")]
    assert ids.count(wa) == 3 and ids.count(wb) == 3
    # metrics
    assert gw.metric("tidegate_webhook_attempts_total", result="dead") == 2
    assert gw.metric("tidegate_webhook_attempts_total", result="retry") == 2
    assert gw.metric("tidegate_webhook_attempts_total", result="delivered") == 2
    assert gw.metric("tidegate_webhook_dead_letters_total", reason="exhausted") == 2
    assert gw.metric("tidegate_webhook_jobs", state="delivered") == 2
    assert gw.metric("tidegate_webhook_jobs", state="dead") == 0
    assert gw.metric("tidegate_webhook_first_attempt_seconds_count") >= 2
    assert gw.metric("tidegate_webhook_attempts_in_flight") == 0


def test_forward_mode_passes_the_url_to_the_vendor(make_emulator, make_gateway, receiver,
                                                   secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file, mode="forward"), "keys": keys_with_admin()})
    r = export(gw, receiver.url("/fwd"))
    assert "X-Tidegate-Webhook-Id" not in r.headers
    receiver.wait(lambda: len(receiver.seen()) == 1)
    got = receiver.seen()[0]
    h = {k.lower(): v for k, v in got["headers"].items()}
    assert h["x-correlation-id"] == r.json()["correlationId"] and "webhook-id" not in h
    time.sleep(0.3)
    assert len(receiver.seen()) == 1
    r = requests.get(gw.admin + "/webhooks", headers=gw.headers(ADMIN_KEY), timeout=5)
    assert r.json()["webhooks"] == []


def test_relay_mode_delivers_what_the_vendor_posts_to_the_gateway(
        make_emulator, make_gateway, receiver, secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file), "keys": keys_with_admin()})
    # public_url names the gateway's own (free) port: set it by reload
    gw.cfg["webhooks"].update({"mode": "relay", "public_url": gw.dex + "/"})
    gw.write_config(gw.cfg)
    gw.send_signal(signal.SIGHUP)
    wait_log(gw, "reloaded")
    r = export(gw, receiver.url("/relayed"))
    cid, wid = r.json()["correlationId"], r.headers["X-Tidegate-Webhook-Id"]
    receiver.wait(lambda: len(receiver.seen()) == 1)
    got = receiver.seen()[0]
    assert got["headers"]["webhook-id"] == wid and verified(got)
    data = requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                        headers=gw.headers(), timeout=10)
    assert json.loads(got["body"]) == data.json()
    calls = [e for e in emu.log_lines() if e.get("event") == "export_callback"]
    assert [(e["outcome"], e["dest"]) for e in calls] == [("delivered", gw.dex[7:])]
    assert gw.metric("tidegate_webhook_relay_deliveries_total") == 1
    j = wait_state(gw, wid, "delivered")
    assert j["correlationId"] == cid
    # the inbound endpoint: no API key needed, unknown ids 404, repeats are harmless
    inbound = f"{gw.dex}/__tidegate/callbacks/"
    assert requests.post(inbound + "msg_" + "1" * 32, data=b"[]",
                         timeout=5).status_code == 404
    assert requests.post(inbound + "nope", data=b"[]", timeout=5).status_code == 404
    r = requests.post(inbound + wid, data=b"[]", timeout=5)
    assert r.status_code == 200 and r.json()["status"] == "duplicate"
    time.sleep(0.3)
    assert len(receiver.seen()) == 1


def test_kill_9_loses_nothing(make_emulator, make_gateway, receiver, secret_file):
    emu = make_emulator()
    sched = ["0s", "300ms"] + ["1s"] * 10
    gw = make_gateway(emu, {**hooks(secret_file, schedule=sched, lease="2s"),
                            "keys": keys_with_admin()})
    receiver.answer("/k", then=500)
    ids = [export(gw, receiver.url("/k")).headers["X-Tidegate-Webhook-Id"] for _ in range(5)]
    receiver.wait(lambda: {q["headers"]["webhook-id"] for q in receiver.seen()} == set(ids))
    # two more, still waiting for their export data when the process dies
    ids += [export(gw, receiver.url("/k")).headers["X-Tidegate-Webhook-Id"] for _ in range(2)]
    gw.proc.kill()
    gw.proc.wait()
    receiver.answer("/k", then=200)
    t0 = time.monotonic()
    gw.restart()
    delivered = lambda: {q["headers"]["webhook-id"] for q in receiver.seen()
                         if q["status"] == 200}
    receiver.wait(lambda: delivered() == set(ids), timeout=15)
    print(f"all {len(ids)} delivered {time.monotonic() - t0:.1f} s after the restart began")
    for wid in ids:
        assert wait_state(gw, wid, "delivered")["attempts"] >= 1
    assert all(verified(q) for q in receiver.seen())


URLS = ["http://127.0.0.1/x", "http://10.0.0.1/x", "http://172.16.0.1/x",
        "http://192.168.1.1/x", "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/x", "http://224.0.0.1/x", "http://[::1]/x", "http://[fe80::1]/x",
        "http://[::ffff:127.0.0.1]/x", "http://192.0.2.1/x", "http://0.0.0.0/x",
        "ftp://example.com/x"]


def test_refused_callback_urls_never_reach_the_vendor(make_emulator, make_gateway,
                                                      secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {"webhooks": {"secret_file": secret_file},
                            "keys": keys_with_admin()})
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    for url in URLS:
        r = export(gw, url, expect=400)
        body = r.json()
        assert body["error"] == "VALIDATION_FAILED", url
        # validation refuses a non-http scheme first (code url); egress the rest
        want = "url" if url.startswith("ftp:") else "egress"
        assert [(d["path"], d["code"]) for d in body["details"]] == [("/callbackUrl", want)]
    assert emu.calls("POST " + EXPORT) == 0
    assert gw.metric("tidegate_webhook_egress_refusals_total",
                     stage="request") == len(URLS) - 1
    r = requests.get(gw.admin + "/webhooks", headers=gw.headers(ADMIN_KEY), timeout=5)
    assert r.json()["webhooks"] == []


def test_secrets_per_key_and_checks_without_validation(make_emulator, make_gateway,
                                                       receiver):
    emu = make_emulator()
    keys = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex"],
             "webhook_secret_env": "TG_TEST_KEY_WHSEC"},
            {"name": "other", "sha256": OTHER_SHA, "services": ["dex"]}]
    os.environ["TG_TEST_KEY_WHSEC"] = KEY_SECRET
    try:
        gw = make_gateway(emu, {"dex": {"validate": False}, "keys": keys,
                                "webhooks": {"allow": ["127.0.0.1/32"],
                                             "poll_interval": "200ms"}})
    finally:
        del os.environ["TG_TEST_KEY_WHSEC"]
    # the key's own secret signs its webhooks; the caller's spelling is taken out too
    export(gw, receiver.url("/own"), member="callbackURL")
    receiver.wait(lambda: len(receiver.seen()) == 1)
    got = receiver.seen()[0]
    assert verified(got, KEY_SECRET) and not verified(got, SECRET)
    assert "export_callback" not in emu.read_log()
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    r = export(gw, "http://10.1.2.3/x", member="callbackURL", expect=400)
    assert [(d["path"], d["code"]) for d in r.json()["details"]] == [("/callbackURL", "egress")]
    r = export(gw, "ftp://example.com/x", expect=400)
    assert r.json()["details"][0]["code"] == "egress"
    # a key without a secret of its own, and no global secret
    r = export(gw, "http://hooks.example.com/x", key=OTHER_KEY, expect=400)
    assert [(d["path"], d["code"]) for d in r.json()["details"]] == [("/callbackUrl",
                                                                      "no_secret")]
    assert emu.calls("POST " + EXPORT) == 0


def test_a_callers_poll_answers_the_fetcher_from_the_cache(make_emulator, make_gateway,
                                                          receiver, secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file, poll_interval="1500ms"),
                            "keys": keys_with_admin()})
    gw.wait_tokens()
    requests.delete(emu.dex + "/__emulator/stats", timeout=5)
    r = export(gw, receiver.url("/cached"))
    time.sleep(0.5)             # ready after 300 ms; the fetcher polls after 1.5 s
    data = requests.get(gw.dex + "/public/export", params={"correlationId":
                        r.json()["correlationId"]}, headers=gw.headers(), timeout=10)
    assert data.status_code == 200
    receiver.wait(lambda: len(receiver.seen()) == 1)
    assert json.loads(receiver.seen()[0]["body"]) == data.json()
    assert emu.calls("GET /public/export") == 1
    assert gw.metric("tidegate_webhook_payload_polls_total", result="cached") == 1


def test_jobs_given_up_before_their_data(make_emulator, make_gateway, receiver, secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file, max_payload="1k", payload_timeout="2s"),
                            "keys": keys_with_admin()})
    big = export(gw, receiver.url("/x")).headers["X-Tidegate-Webhook-Id"]
    assert "max_payload" in wait_state(gw, big, "dead")["lastError"]
    emu.fault(method="GET", path="/public/export", status=503)
    late = export(gw, receiver.url("/x")).headers["X-Tidegate-Webhook-Id"]
    assert "payload_timeout" in wait_state(gw, late, "dead", timeout=6)["lastError"]
    emu.clear_faults()
    lost = export(gw, receiver.url("/x")).headers["X-Tidegate-Webhook-Id"]
    emu.advance("2h")           # the export expires (and the gateway's token with it)
    assert "404" in wait_state(gw, lost, "dead")["lastError"]
    r = requests.post(f"{gw.admin}/webhooks/{big}/redeliver", headers=gw.headers(ADMIN_KEY),
                      timeout=5)
    assert r.status_code == 409
    assert receiver.seen() == []
    assert gw.metric("tidegate_webhook_dead_letters_total", reason="abandoned") == 3


def test_sigterm_waits_for_the_attempt_in_flight(make_emulator, make_gateway, receiver,
                                                 secret_file):
    emu = make_emulator()
    gw = make_gateway(emu, {**hooks(secret_file), "keys": keys_with_admin()})
    receiver.delays["/slow"] = 1.0
    wid = export(gw, receiver.url("/slow")).headers["X-Tidegate-Webhook-Id"]
    receiver.wait(lambda: len(receiver.seen()) == 1)
    gw.send_signal(signal.SIGTERM)
    assert gw.proc.wait(timeout=10) == 0
    events = [e for e in gw.log_lines() if e.get("event") in ("webhook_attempt", "stopped")]
    assert [(e["event"], e.get("webhook_id"), e.get("state")) for e in events] == [
        ("webhook_attempt", wid, "delivered"), ("stopped", None, None)]


def test_localhost_callback_refused_by_address_range_delivered_when_named(
        make_emulator, make_gateway, receiver, secret_file):
    emu = make_emulator()
    url = receiver.url("/hook").replace("127.0.0.1", "localhost")
    assert url.startswith("http://localhost:")
    # 127.0.0.1/32 allowed: the name is still refused, and the error says what to allow
    gw = make_gateway(emu, hooks(secret_file))
    r = export(gw, url, expect=400)
    (d,) = r.json()["details"]
    assert (d["path"], d["code"]) == ("/callbackUrl", "egress")
    assert "list 'localhost' itself in webhooks.allow" in d["message"], d
    assert emu.calls("POST " + EXPORT) == 0
    # allowed by name: accepted and delivered there
    gw2 = make_gateway(emu, hooks(secret_file, allow=["localhost"]))
    export(gw2, url)
    receiver.wait(lambda: len(receiver.seen()) == 1)
    assert verified(receiver.seen()[0])


def test_refused_by_the_egress_policy_at_delivery_is_dead_at_once(make_emulator, make_gateway,
                                                                   receiver, secret_file):
    emu = make_emulator({"export": {"delay": "1500ms"}})
    cfg = {**hooks(secret_file), "keys": keys_with_admin()}
    gw = make_gateway(emu, cfg)
    wid = export(gw, receiver.url("/hook")).headers["X-Tidegate-Webhook-Id"]
    # the policy changes while the job waits for its data: loopback is refused now
    gw.write_config({**gw.cfg, "webhooks": {**cfg["webhooks"], "allow": ["10.99.0.0/16"]}})
    gw.send_signal(signal.SIGHUP)
    j = wait_state(gw, wid, "dead", timeout=15)
    assert j["attempts"] == 1, j               # no schedule: the policy will not heal
    assert "egress refused" in j["lastError"] and "webhooks.allow" in j["lastError"], j
    assert receiver.requests == []
    # allowed again and redelivered: it goes
    gw.write_config(gw.cfg)
    gw.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    r = requests.post(f"{gw.admin}/webhooks/{wid}/redeliver", headers=gw.headers(ADMIN_KEY),
                      timeout=5)
    assert r.status_code in (200, 202), r.text
    wait_state(gw, wid, "delivered")


def test_egress_policy_on_the_admin_api_follows_reloads_and_holds_no_secret(
        make_emulator, make_gateway, secret_file):
    emu = make_emulator()
    allow = ["127.0.0.1/32", "10.1.0.0/16", "localhost", "*.internal.example"]
    gw = make_gateway(emu, {**hooks(secret_file, allow=allow), "keys": keys_with_admin()})
    url = gw.admin + "/webhooks/policy"
    assert requests.get(url, timeout=5).status_code == 401
    assert requests.get(url, headers=gw.headers(), timeout=5).status_code == 403
    assert requests.post(url, headers=gw.headers(ADMIN_KEY), timeout=5).status_code == 405
    r = requests.get(url, headers=gw.headers(ADMIN_KEY), timeout=5)
    assert r.status_code == 200, r.text
    p = r.json()
    assert set(p) == {"mode", "schemes", "ports", "allow", "refused", "caFile"}
    assert (p["mode"], p["schemes"], p["ports"], p["allow"], p["caFile"]) == (
        "deliver", ["http", "https"], {"min": 1, "max": 65535}, allow, None)
    refused = {x["cidr"]: x["range"] for x in p["refused"]}
    assert (refused["127.0.0.0/8"], refused["169.254.169.254/32"], refused["fc00::/7"],
            refused["::ffff:0:0/96"]) == ("loopback", "metadata", "private", "IPv4-mapped")
    assert len(refused) == len(p["refused"]) == 17 + 14 + 5
    # what the table says is what is enforced: a refused range is refused at request time
    export(gw, "http://192.168.1.10/hook", expect=400)
    for s in (SECRET, OLD_SECRET, SECRET.split("_", 1)[1]):
        assert s not in r.text
    # a reload changes the policy shown with the one enforced
    gw.cfg["webhooks"].update({"allow": ["192.168.0.0/16"], "mode": "forward"})
    gw.write_config(gw.cfg)
    gw.send_signal(signal.SIGHUP)
    wait_log(gw, "reloaded")
    p = requests.get(url, headers=gw.headers(ADMIN_KEY), timeout=5).json()
    assert (p["mode"], p["allow"]) == ("forward", ["192.168.0.0/16"])
