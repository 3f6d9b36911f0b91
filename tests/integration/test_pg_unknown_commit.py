"""Commits whose outcome is unknown (issue 28): the connection between a
gateway and PostgreSQL is lost after a callback export's webhook job was
sent to the database, before its answer came. A TCP proxy (pgproxy.py)
between the gateway and a private PostgreSQL 15 cluster does it on
purpose, on the Bind of the job's INSERT (prepared statement ob_add):

- answer: the INSERT committed, its answer dropped;
- swallow: the INSERT never reached the server, though it was sent;
- either, then the database unreachable (every connection closed, new
  ones refused) for longer than state.timeout.

The same for an owner record and a run record, and for the record of a
delivered attempt (ob_complete). Whatever happened, the caller's answer
must match whether the job exists:
200 with the job (X-Tidegate-Webhook-Id) when it does, and its webhook
delivered exactly once; 503 + Retry-After saying the outcome is unknown
and naming the webhook id (never "no callback will come") when the
database did not answer again in time: then the webhook is delivered
exactly once if the job exists, never if it does not."""
import json
import time

import pytest
import requests

from pgproxy import PgProxy
from test_fleet_faults import (Receiver, export, fleet, hooks, private_pg,  # noqa: F401
                               secret_file)

pytestmark = pytest.mark.skipif(
    not __import__("os").path.exists("/usr/lib/postgresql/15/bin/initdb"),
    reason="no /usr/lib/postgresql/15/bin/initdb (Debian's postgresql-15)")

STATE_TIMEOUT = "1s"


@pytest.fixture
def proxied(private_pg):
    p = PgProxy(private_pg.port)
    yield p, f"postgresql://postgres@127.0.0.1:{p.port}/postgres"
    p.close()


def rows(pg, wid):
    return int(pg.psql(f"SELECT count(*) FROM outbox_jobs WHERE id = '{wid}'")[0][0])


def delivered_once(rcv, wid, timeout=15.0):
    deadline = time.monotonic() + timeout
    while rcv.delivered().get(wid, 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)                 # a second delivery would come by now
    return rcv.delivered().get(wid, 0)


def log_events(gw, name):
    return [e for e in gw.log_lines() if e.get("event") == name]


def warm_gateway(fleet, emu, url, secret_file, rcv):
    """One instance on url, a job stored through it (its statements
    prepared, its connections made) before anything is armed."""
    gw, = fleet(emu, url, 1, dict(hooks(secret_file), state={"timeout": STATE_TIMEOUT}))
    gw.wait_tokens()
    r = export(gw, rcv.url("/warm"))
    assert r.status_code == 200, r.text
    return gw, r.headers["X-Tidegate-Webhook-Id"]


@pytest.mark.parametrize("mode", ["answer", "swallow"])
def test_lost_answer_made_known(private_pg, proxied, make_emulator, fleet, secret_file, mode):
    """The connection lost at the job's commit, the database reachable
    again at once: the write is sent again, finds the job committed
    (answer) or commits it (swallow): the caller gets its 200 and one
    webhook, and the database holds the job once."""
    proxy, url = proxied
    emu = make_emulator()
    rcv = Receiver()
    try:
        gw, _ = warm_gateway(fleet, emu, url, secret_file, rcv)
        proxy.arm("ob_add", mode)
        r = export(gw, rcv.url("/lost"))
        assert proxy.fired == [mode], "the proxy never saw the job's INSERT"
        assert r.status_code == 200, r.text
        wid = r.headers["X-Tidegate-Webhook-Id"]
        assert r.json()["correlationId"]
        assert rows(private_pg, wid) == 1
        assert delivered_once(rcv, wid) == 1, rcv.got
        replays = log_events(gw, "state_write_replay")
        assert replays and replays[0]["statement"] == "ob_add", replays
        known = log_events(gw, "state_write_known")
        assert known and known[0]["rc"] == 0, known
        assert gw.proc.poll() is None
    finally:
        rcv.close()


@pytest.mark.parametrize("mode", ["answer", "swallow"])
def test_unknown_told_as_unknown(private_pg, proxied, make_emulator, fleet, secret_file, mode):
    """The connection lost at the job's commit and the database then
    unreachable past state.timeout: the caller hears 503 + Retry-After
    saying the outcome is unknown, naming the webhook id, never "no
    callback"; once the database is back, the webhook comes exactly once
    if the job was committed (answer), never if not (swallow)."""
    proxy, url = proxied
    emu = make_emulator()
    rcv = Receiver()
    try:
        gw, _ = warm_gateway(fleet, emu, url, secret_file, rcv)
        proxy.arm("ob_add", mode, then_block=True)
        t = time.monotonic()
        r = export(gw, rcv.url("/unknown"))
        took = time.monotonic() - t
        assert proxy.fired == [mode]
        assert r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) > 0
        body = r.json()
        wid = r.headers.get("X-Tidegate-Webhook-Id")
        assert wid and wid.startswith("msg_"), r.headers
        assert body["error"] == "WEBHOOK_UNAVAILABLE", body
        assert "unknown" in body["message"] and wid in body["message"], body
        assert "no callback" not in body["message"], body
        assert took < 1.0 + 3.0, took           # state.timeout after the loss, and a margin
        proxy.unblock()
        exists = rows(private_pg, wid)
        assert exists == (1 if mode == "answer" else 0), exists
        got = delivered_once(rcv, wid, timeout=15.0 if exists else 4.0)
        assert got == exists, (mode, exists, rcv.got)
        assert log_events(gw, "webhook_add_unknown"), "not logged"
        assert gw.proc.poll() is None
    finally:
        rcv.close()


def other_gateway(fleet, emu, url):
    gw, = fleet(emu, url, 1, {"state": {"timeout": STATE_TIMEOUT}})
    gw.wait_tokens()
    return gw


@pytest.mark.parametrize("stmt", ["owners_record", "run_insert"])
def test_records_made_known(private_pg, proxied, make_emulator, fleet, stmt):
    """The same for the other writes whose answer promises something: an
    export's owner record (the job is the creator's on every instance)
    and a keyed simulation submission's run record (the run is served to
    its key). Their answer lost at the commit: 200 / 201, and the record
    serves the creator through a second instance straight from the
    database."""
    proxy, url = proxied
    emu = make_emulator()
    a = other_gateway(fleet, emu, url)
    b = other_gateway(fleet, emu, f"postgresql://postgres@127.0.0.1:{private_pg.port}/postgres")
    case = requests.get(a.sim + "/api/v1/cases/CASE-OM-1", headers=a.headers(), timeout=10)
    assert case.status_code == 200, case.text
    r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=a.headers(), timeout=15)
    assert r.status_code == 200, r.text         # statements prepared
    proxy.arm(stmt, "answer")
    if stmt == "owners_record":
        r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                          headers=a.headers(), timeout=15)
        assert r.status_code == 200, r.text
        cid = r.json()["correlationId"]
        got = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                           headers=b.headers(), timeout=10)
    else:
        r = requests.post(a.sim + "/api/v1/simulations", json=case.json(), headers=a.headers(),
                          timeout=30)
        assert r.status_code == 201, r.text
        sim = r.json().get("simulationId") or r.json().get("id")
        got = requests.get(f"{b.sim}/api/v1/simulations/{sim}", headers=b.headers(), timeout=10)
    assert proxy.fired == ["answer"], "the proxy never saw the record's write"
    assert got.status_code in (200, 202), got.text
    assert [e["statement"] for e in log_events(a, "state_write_replay")] == [stmt]
    assert a.proc.poll() is None


@pytest.mark.parametrize("mode", ["answer", "swallow"])
def test_delivery_record_lost(private_pg, proxied, make_emulator, fleet, secret_file, mode):
    """The record of a delivered attempt (ob_complete) committed with its
    answer lost, or lost before the server: it is recorded again while
    the lease lasts, so the receiver gets the webhook once, not again
    when the lease runs out (2 s here), and the job ends delivered."""
    proxy, url = proxied
    emu = make_emulator()
    rcv = Receiver()
    try:
        gw, warm = warm_gateway(fleet, emu, url, secret_file, rcv)
        assert delivered_once(rcv, warm) == 1
        proxy.arm("ob_complete", mode)
        r = export(gw, rcv.url("/record"))
        assert r.status_code == 200, r.text
        wid = r.headers["X-Tidegate-Webhook-Id"]
        deadline = time.monotonic() + 15
        while not proxy.fired and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proxy.fired == [mode]
        time.sleep(3.0)                         # past the 2 s lease
        assert delivered_once(rcv, wid) == 1, rcv.got
        state = private_pg.psql(f"SELECT state FROM outbox_jobs WHERE id = '{wid}'")
        assert state == [["delivered"]], state
        assert not log_events(gw, "webhook_complete_failed")
    finally:
        rcv.close()


@pytest.mark.parametrize("stmt", ["owners_record", "run_insert", "sw_create"])
def test_record_unknown_told(private_pg, proxied, make_emulator, fleet, stmt):
    """An owner record, a run record or a sweep committed, its answer lost, and the
    database then unreachable past state.timeout: 503 + Retry-After saying
    whether it was stored is unknown and how to find out, never "will not
    be served"; once the database is back the record is there, and serves
    the creator through another instance, as the message said it might."""
    proxy, url = proxied
    emu = make_emulator()
    a = other_gateway(fleet, emu, url)
    b = other_gateway(fleet, emu, f"postgresql://postgres@127.0.0.1:{private_pg.port}/postgres")
    case = requests.get(a.sim + "/api/v1/cases/CASE-OM-1", headers=a.headers(), timeout=10)
    r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=a.headers(), timeout=15)
    assert r.status_code == 200, r.text         # statements prepared
    proxy.arm(stmt, "answer", then_block=True)
    if stmt == "owners_record":
        r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                          headers=a.headers(), timeout=15)
        code = "OWNERSHIP_UNAVAILABLE"
    elif stmt == "run_insert":
        r = requests.post(a.sim + "/api/v1/simulations", json=case.json(), headers=a.headers(),
                          timeout=30)
        code = "REGISTRY_UNAVAILABLE"
    else:
        r = requests.post(a.sim + "/tidegate/v1/sweeps", headers=a.headers(), timeout=15,
                          json={"baseCaseId": "CASE-OM-1", "concurrency": 1,
                                "variants": [{"name": "v1", "patch": {}}]})
        code = "REGISTRY_UNAVAILABLE"
    assert proxy.fired == ["answer"]
    assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, r.text
    body = r.json()
    assert body["error"] == code and "unknown" in body["message"], body
    assert "will not be served" not in body["message"], body
    proxy.unblock()
    if stmt == "owners_record":
        cid = body["message"].split()[1]
        got = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                           headers=b.headers(), timeout=10)
    elif stmt == "run_insert":
        sim = body["message"].split()[1]
        got = requests.get(f"{b.sim}/api/v1/simulations/{sim}", headers=b.headers(), timeout=10)
    else:
        sid = body["message"].split()[2]
        assert sid.startswith("swp_"), body
        assert "will be submitted" in body["message"], body
        got = requests.get(f"{b.sim}/tidegate/v1/sweeps/{sid}", headers=b.headers(), timeout=10)
    assert got.status_code in (200, 202), (body["message"], got.text)
