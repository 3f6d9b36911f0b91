"""A fleet behind PgBouncer in transaction mode (issue 28): three gateways
whose statements go through a real pgbouncer (pool_mode = transaction, a
pool smaller than the clients, so server connections change hands between
transactions) with state.pooler: transaction, and whose LISTEN goes
straight to the server (state.listen_url).

- test_fleet_through_pgbouncer_in_transaction_mode: one login per vendor
  service for the fleet, a job owned across the instances (its key's
  everywhere, 404 to another key), callback exports accepted on every
  instance and each delivered exactly once, and long-polls on every
  instance ending together on one answer, woken by the instance that
  fetched it (wake-ups counted, every instance listening).
- test_pgbouncer_restarted_under_the_fleet: the pooler stopped under two
  instances: callback exports 503 + Retry-After naming the cause, /readyz
  degraded, yet both still listening (LISTEN does not go through it); the
  pooler started again: both up by themselves, and callback exports
  accepted and each delivered once.
- test_pgbouncer_without_the_pooler_setting_is_refused: the same fleet
  without state.pooler: every statement connection sees that a pooler
  stands between it and the server and is refused, by name: /readyz
  degraded naming state.pooler, a callback export 503 + Retry-After with
  the same cause, and not a table written.
- test_listen_through_pgbouncer_is_refused: state.listen_url through the
  pooler: the statements work, the listener is refused (the listening
  gauge says 0, the log names state.listen_url).
(tidegate -t's refusals of the settings are test_config_check.py's.)

PostgreSQL comes from the session (pg_virtualenv sets PG*); pgbouncer is
Debian's (scripts/deps.sh installs it): without it these tests skip,
saying so. As root, pgbouncer (which refuses root) runs as the postgres
user in a directory it owns."""
import concurrent.futures
import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

from conftest import TEST_KEY_SHA, free_port
from test_fleet_faults import SECRET, Receiver, export, hooks

pytestmark = pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL: PG* unset (scripts/test starts one unless TG_TEST_NO_PG=1)")

PGBOUNCER = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)
need_pgbouncer = pytest.mark.skipif(
    PGBOUNCER is None, reason="pgbouncer not installed (scripts/deps.sh installs it)")

OTHER_KEY = "other-key"
OTHER_SHA = hashlib.sha256(OTHER_KEY.encode()).hexdigest()
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "other", "sha256": OTHER_SHA, "services": ["dex", "sim"]}]
POOL = 3           # server connections per pool: fewer than the fleet's 6 clients


def psql(db, sql):
    return subprocess.run(["psql", "-qXAtd", db, "-c", sql], check=True, capture_output=True,
                          text=True, timeout=30).stdout.strip()


@pytest.fixture
def database():
    """A database of its own on the session cluster (pgbouncer passes no
    search_path option, so no schema of its own will do)."""
    name = "pool_" + uuid.uuid4().hex[:12]
    psql("postgres", f"CREATE DATABASE {name}")
    yield name
    psql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class PgBouncer:
    """pgbouncer on a free loopback port in transaction mode in front of
    the session cluster's database db, authenticating the session's user
    with its password (SCRAM both ways)."""

    def __init__(self, db):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tg-pgbouncer-")
        user = os.environ.get("PGUSER", "postgres")
        host = os.environ.get("PGHOST", "localhost")
        if host.startswith("/"):
            host = "localhost"
        ini = os.path.join(self.dir, "pgbouncer.ini")
        with open(os.path.join(self.dir, "userlist.txt"), "w") as f:
            f.write(f'"{user}" "{os.environ.get("PGPASSWORD", "")}"\n')
        with open(ini, "w") as f:
            f.write(f"[databases]\n{db} = host={host} port={os.environ.get('PGPORT', '5432')} "
                    f"dbname={db}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n"
                    f"listen_port = {self.port}\nunix_socket_dir =\n"
                    f"auth_type = scram-sha-256\nauth_file = {self.dir}/userlist.txt\n"
                    f"pool_mode = transaction\ndefault_pool_size = {POOL}\n"
                    f"max_client_conn = 100\nlogfile = {self.dir}/pgbouncer.log\n")
        self.argv = [PGBOUNCER, "-q", ini]
        if os.geteuid() == 0:           # pgbouncer will not run as root
            pw = pwd.getpwnam("postgres")
            for p in (self.dir, ini, os.path.join(self.dir, "userlist.txt")):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            self.argv = ["runuser", "-u", "postgres", "--"] + self.argv
        self.url = f"postgresql://127.0.0.1:{self.port}/{db}"
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while subprocess.run(["psql", "-qXAtd", self.url, "-c", "SELECT 1"],
                             capture_output=True, timeout=10).returncode != 0:
            assert self.proc.poll() is None, f"pgbouncer exited: {self.log()}"
            assert time.monotonic() < deadline, f"pgbouncer does not answer: {self.log()}"
            time.sleep(0.1)

    def log(self):
        try:
            with open(os.path.join(self.dir, "pgbouncer.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def halt(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def pgbouncer(database):
    b = PgBouncer(database)
    yield b
    b.stop()


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "webhook-secret"
    p.write_text(SECRET + "\n")
    return str(p)


def direct_url(db):
    return f"postgresql:///{db}"        # PGHOST, PGPORT: the server itself


def start_fleet(make_gateway, emulator, state, secret_file, n=3):
    return [make_gateway(emulator, {"state": {**state, "instance": f"gw{i}"}, "keys": KEYS,
                                    "poll": {"interval": "500ms", "max_interval": "500ms"},
                                    **hooks(secret_file)})
            for i in range(n)]


def delivered_once(rcv, ids, timeout=30.0):
    """Until rcv has every webhook id of ids; then each exactly once, and
    nothing else (a second delivery would have come within the second)."""
    deadline = time.monotonic() + timeout
    while set(rcv.delivered()) != set(ids) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    got = rcv.delivered()
    assert got == {w: 1 for w in ids}, got


def pooled(database, pgbouncer):
    return {"url": pgbouncer.url, "listen_url": direct_url(database), "pooler": "transaction"}


@need_pgbouncer
def test_fleet_through_pgbouncer_in_transaction_mode(database, pgbouncer, make_emulator,
                                                     make_gateway, secret_file):
    emu = make_emulator({"export": {"delay": "2s"}})
    gws = start_fleet(make_gateway, emu, pooled(database, pgbouncer), secret_file)
    deadline = time.monotonic() + 10    # ready before its LISTEN connection is
    while [gw.metric("tidegate_state_listening") for gw in gws] != [1] * len(gws):
        assert time.monotonic() < deadline, "the LISTEN connections did not come up"
        time.sleep(0.05)
    # LISTEN went straight to the server, one connection per instance; the
    # statements through the pooler (its server connections, at most POOL)
    conns = psql(database, "SELECT application_name, query LIKE 'LISTEN %' FROM "
                 "pg_stat_activity WHERE datname = current_database() AND "
                 "pid <> pg_backend_pid() ORDER BY 1, 2").splitlines()
    listen = [c for c in conns if c.endswith("|t")]
    assert listen == ["tidegate/gw0|t", "tidegate/gw1|t", "tidegate/gw2|t"], conns
    assert len(conns) - len(listen) <= POOL, conns

    # one login per service for the fleet
    def nope(i):
        gw = gws[i % 3]
        return requests.post(gw.dex + "/public/v1/export/nope", json={"projectId": "P-DEMO"},
                             headers=gw.headers(), timeout=30).status_code
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        assert set(pool.map(nope, range(60))) == {404}
    for gw in gws:
        r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=30)
        assert r.status_code == 200, r.text
    assert emu.calls("POST /public/v1/authenticate") == 1
    assert emu.calls("POST /api/oauth2/token") == 1
    assert sum(gw.metric("tidegate_token_logins_total", service="dex") for gw in gws) == 1
    assert sum(gw.metric("tidegate_token_logins_total", service="sim") for gw in gws) == 1

    # a job owned across the fleet
    a, b, c = gws
    r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=a.headers(), timeout=30)
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    assert psql(database, "SELECT count(*) FROM owners") == "1"
    mine = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                        headers=b.headers(), timeout=30)
    assert mine.status_code in (200, 202), mine.text
    theirs = requests.get(c.dex + "/public/export", params={"correlationId": cid},
                          headers=c.headers(OTHER_KEY), timeout=30)
    assert theirs.status_code == 404 and theirs.json()["error"] == "NOT_FOUND", theirs.text

    # long-polls on every instance end together on the one answer
    requests.delete(emu.dex + "/__emulator/stats")
    wakeups0 = [gw.metric("tidegate_state_wakeups_total") for gw in gws]

    def long_poll(i):
        gw = gws[i % 3]
        r = requests.get(gw.dex + "/public/export", params={"correlationId": cid, "wait": "20"},
                         headers=gw.headers(), timeout=30)
        return r, time.monotonic()
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(9) as pool:
        polls = list(pool.map(long_poll, range(9)))
    assert [r.status_code for r, _ in polls] == [200] * 9, [r.text for r, _ in polls]
    assert len({r.content for r, _ in polls}) == 1
    ends = [t - t0 for _, t in polls]
    print(f"9 long-polls over 3 instances ended {min(ends):.2f}..{max(ends):.2f} s; "
          f"{emu.calls('GET /public/export')} upstream GETs")
    assert max(ends) < 4.0, ends            # the export is ready 2 s after its creation
    # the others woke on the leader's publish (measured: 10 ms apart), not
    # on their own 200 ms looks: every instance but the leader heard it
    assert max(ends) - min(ends) < 0.2, ends
    assert emu.calls("GET /public/export") <= int(max(ends) / 0.5) + 2
    woke = [gw.metric("tidegate_state_wakeups_total") - w0 for gw, w0 in zip(gws, wakeups0)]
    assert sum(w > 0 for w in woke) >= 2, woke

    # callback exports accepted on every instance, each delivered once
    rcv = Receiver()
    try:
        def submit(i):
            r = export(gws[i % 3], rcv.url(f"/hook/{i}"))
            assert r.status_code == 200, r.text
            return r.headers["X-Tidegate-Webhook-Id"]
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            ids = list(pool.map(submit, range(30)))
        assert len(set(ids)) == 30
        delivered_once(rcv, ids)
        assert not rcv.unsigned()
        assert psql(database, "SELECT count(*) FROM outbox_jobs WHERE state = 'delivered'") == "30"
    finally:
        rcv.close()
    for gw in gws:
        ready = requests.get(gw.admin + "/readyz", timeout=5).json()
        assert ready["state"] == {"backend": "postgresql", "up": True, "shared": True}, ready
    assert "pooler" not in "".join(gw.read_log() for gw in gws)


def wait_ready(gws, up, timeout=15.0):
    """Until every gateway's /readyz says the state is up (or down)."""
    deadline = time.monotonic() + timeout
    while True:
        ready = [requests.get(gw.admin + "/readyz", timeout=5).json() for gw in gws]
        if all(r["state"]["up"] is up for r in ready):
            return ready
        assert time.monotonic() < deadline, ready
        time.sleep(0.1)


@need_pgbouncer
def test_pgbouncer_restarted_under_the_fleet(database, pgbouncer, make_emulator, make_gateway,
                                             secret_file):
    emu = make_emulator()
    gws = start_fleet(make_gateway, emu, pooled(database, pgbouncer), secret_file, n=2)
    rcv = Receiver()
    try:
        wait_ready(gws, True)
        pgbouncer.halt()
        for r in wait_ready(gws, False):
            assert r["degraded"] is True and "postgresql unavailable" in r["reason"], r
        for gw in gws:
            r = export(gw, rcv.url("/hook/down"))
            assert r.status_code == 503 and r.headers.get("Retry-After"), r.text
            assert r.json()["error"] == "WEBHOOK_UNAVAILABLE", r.text
            assert gw.metric("tidegate_state_listening") == 1     # LISTEN is direct
        pgbouncer.start()
        t0 = time.monotonic()
        wait_ready(gws, True)
        print(f"up again {time.monotonic() - t0:.2f} s after the pooler started")
        ids = []
        for i in range(10):
            r = export(gws[i % 2], rcv.url(f"/hook/{i}"))
            assert r.status_code == 200, r.text
            ids.append(r.headers["X-Tidegate-Webhook-Id"])
        delivered_once(rcv, ids)
    finally:
        rcv.close()


@need_pgbouncer
def test_pgbouncer_without_the_pooler_setting_is_refused(database, pgbouncer, make_emulator,
                                                          make_gateway, secret_file):
    emu = make_emulator()
    gws = start_fleet(make_gateway, emu, {"url": pgbouncer.url}, secret_file)
    rcv = Receiver()
    try:
        deadline = time.monotonic() + 10
        while True:
            ready = [requests.get(gw.admin + "/readyz", timeout=5).json() for gw in gws]
            if all("state.pooler" in str(r) for r in ready):
                break
            assert time.monotonic() < deadline, ready
            time.sleep(0.1)
        for r in ready:
            assert r["degraded"] is True and r["state"]["up"] is False, r
        for gw in gws:
            assert gw.metric("tidegate_state_up", backend="postgresql") == 0
            assert gw.metric("tidegate_state_listening") == 0
            r = export(gw, rcv.url("/hook"))
            assert r.status_code == 503 and r.headers.get("Retry-After"), r.text
            body = r.json()
            assert body["statusCode"] == 503 and "state.pooler" in body["message"], body
            assert "connection pooler" in body["message"], body
            why = [e["why"] for e in gw.log_lines() if e.get("event") == "state_pg_down"]
            assert why and all("state.url leads through a connection pooler" in w
                               for w in why), why
        # refused before the migration: nothing was written through it
        assert psql(database, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0"
        assert rcv.delivered() == {}
    finally:
        rcv.close()


@need_pgbouncer
def test_listen_through_pgbouncer_is_refused(database, pgbouncer, make_emulator,
                                             make_gateway, secret_file):
    emu = make_emulator()
    (gw,) = start_fleet(make_gateway, emu, {"url": pgbouncer.url, "listen_url": pgbouncer.url,
                                            "pooler": "transaction"}, secret_file, n=1)
    deadline = time.monotonic() + 10
    while not [e for e in gw.log_lines() if e.get("event") == "state_pg_down"]:
        assert time.monotonic() < deadline, gw.read_log()[-3000:]
        time.sleep(0.1)
    down = [e for e in gw.log_lines() if e.get("event") == "state_pg_down"]
    assert {e["connection"] for e in down} == {"listen"}, down
    assert all("state.listen_url leads through a connection pooler" in e["why"] for e in down)
    assert gw.metric("tidegate_state_listening") == 0
    # the statements go on: an export is created and owned
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=30)
    assert r.status_code == 200, r.text
    assert psql(database, "SELECT count(*) FROM owners") == "1"

