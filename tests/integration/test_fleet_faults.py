"""Fleet mode under faults (issue 14): gateways sharing one PostgreSQL lose
no accepted webhook when instances are killed with SIGKILL mid-delivery,
and ride out a PostgreSQL outage without a restart.

- test_kill_two_of_three_mid_delivery: 200 callback exports accepted over
  three instances on one database (the session cluster, a schema of its
  own); two instances are SIGKILLed at random moments while deliveries are
  under way (the moments are picked from the receiver's progress); the
  survivor finishes their jobs once their leases run out. Every accepted
  webhook id must reach the receiver at least once; duplicates are allowed
  and counted in the messages.
- test_postgres_outage: a private PostgreSQL 15 cluster (initdb + pg_ctl in
  a temporary directory on a free loopback port, so the shared session
  cluster is never stopped) is stopped for 10 s under two instances: plain
  proxied GETs go on with the tokens held, a callback export gets 503 with
  Retry-After and a JSON error naming the cause, the instances recover
  without a restart, and every job accepted before the outage is delivered.

Both need PostgreSQL (CI runs the suite under pg_virtualenv -v 15); the
outage test also needs /usr/lib/postgresql/15/bin/initdb. As root, initdb
and the server run as the postgres user (runuser) in a directory it owns.
Set TG_FAULTS_SEED to replay the kill moments of a failed run (its seed is
in the failure message)."""
import base64
import concurrent.futures
import hashlib
import http.server
import json
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
import requests

from conftest import TEST_KEY_SHA, Gateway, _attach_log_on_failure, free_port
import webhook_verify

pytestmark = pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL (run under pg_virtualenv -v 15, as CI does)")

PG_BIN = "/usr/lib/postgresql/15/bin"
SECRET = "whsec_" + base64.b64encode(b"tidegate-fleet-faults-key-0001").decode()
ADMIN_KEY = "admin-key"
ADMIN_SHA = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()
EXPORT = "/public/v1/export/activities"
KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "ops", "sha256": ADMIN_SHA, "services": ["admin"]}]


# ---- a receiver that counts deliveries per webhook id ----

class Receiver:
    """An http.server on a free loopback port: records every POST (webhook
    id, status answered, time) and answers 200 after a random short delay,
    or `status` while that is set (an outage of the receiver)."""

    def __init__(self, delay=(0.0, 0.0), seed=None):
        self.port = free_port()
        self.got = []               # (webhook-id, status, monotonic t, verified)
        self.status = 200
        self.delay = delay
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        rcv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with rcv.lock:
                    status = rcv.status
                    delay = rcv.rng.uniform(*rcv.delay)
                time.sleep(delay)
                ok = webhook_verify.verify(SECRET, dict(self.headers), body)
                with rcv.lock:
                    rcv.got.append((self.headers.get("webhook-id"), status,
                                    time.monotonic(), ok, self.path))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def delivered(self):
        """webhook id -> how many 2xx deliveries it got."""
        out = {}
        with self.lock:
            for wid, status, _, _, _ in self.got:
                if 200 <= status < 300:
                    out[wid] = out.get(wid, 0) + 1
        return out

    def unsigned(self):
        with self.lock:
            return [g for g in self.got if not g[3]]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def hooks(secret_file, **over):
    cfg = {"allow": ["127.0.0.1/32"], "secret_file": secret_file, "poll_interval": "200ms",
           "attempt_timeout": "3s", "lease": "2s",
           "schedule": ["0s", "200ms", "400ms", "800ms"] + ["1s"] * 30}
    cfg.update(over)
    return {"webhooks": cfg}


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "webhook-secret"
    p.write_text(SECRET + "\n")
    return str(p)


@pytest.fixture
def fleet(tmp_path, request):
    """Factory: fleet(emulator, url, n, overrides) starts n gateways named
    gw0… on state.url url. Unlike make_gateway it lets a test SIGKILL some
    (kill(gw)): those are not asked for exit 0 at teardown; the rest are
    stopped with SIGTERM and must exit 0. Tests ask for their database
    fixture before this one, so the gateways stop before it goes."""
    started, killed = [], set()

    def make(emulator, url, n, overrides):
        gws = []
        for i in range(n):
            d = tmp_path / f"gw{len(started)}"
            d.mkdir()
            cfg = json.loads(json.dumps(overrides))
            cfg.setdefault("state", {}).update({"url": url, "instance": f"gw{len(started)}"})
            cfg["keys"] = KEYS
            gw = Gateway(str(d), emulator, cfg)
            started.append(gw)
            gws.append(gw)
        return gws

    def kill(gw):
        gw.proc.kill()
        gw.proc.wait()
        killed.add(id(gw))

    make.kill = kill
    yield make
    bad = []
    for gw in started:
        _attach_log_on_failure(request, gw)
        rc = gw.stop()
        if id(gw) not in killed and rc != 0:
            bad.append(f"tidegate {gw.cfg['state']['instance']} exited with {rc}:\n"
                       f"{gw.read_log()[-20000:]}")
    assert not bad, "\n".join(bad)


def export(gw, callback, timeout=15):
    return requests.post(gw.dex + EXPORT, json={"projectId": "P-DEMO", "callbackUrl": callback},
                         headers=gw.headers(), timeout=timeout)


def job_state(gw, wid):
    try:
        r = requests.get(f"{gw.admin}/webhooks/{wid}", headers=gw.headers(ADMIN_KEY), timeout=5)
        return r.json() if r.status_code == 200 else f"HTTP {r.status_code} {r.text[:200]}"
    except requests.RequestException as e:
        return f"unreadable: {e}"


def log_events(gw, *names):
    return [e for e in gw.log_lines() if e.get("event") in names]


# ---- 1. SIGKILL two of three instances while deliveries are under way ----

@pytest.fixture
def pg_url():
    """A schema of its own on the session cluster: the fleet's database."""
    schema = "faults_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", "-qXc", f"CREATE SCHEMA {schema}"], check=True,
                   capture_output=True, timeout=30)
    yield f"postgresql:///?options=-csearch_path%3D{schema}"
    subprocess.run(["psql", "-qXc", f"DROP SCHEMA {schema} CASCADE"], check=False,
                   capture_output=True, timeout=30)


def psql_ids(url, where):
    """Webhook job ids in url's schema matching where (the session cluster)."""
    schema = url.split("search_path%3D")[1]
    out = subprocess.run(["psql", "-qXAtc", f"SELECT id FROM {schema}.outbox_jobs WHERE {where}"],
                         capture_output=True, text=True, timeout=30).stdout
    return out.split()


N_EXPORTS = 200
PACE_S = 0.015


@pytest.mark.parametrize("traffic", ["stored", "arriving"])
def test_kill_two_of_three_mid_delivery(pg_url, make_emulator, fleet, secret_file, traffic):
    """stored: the 200 exports are accepted and their data stored (no job
    waiting) before the kills, which land while deliveries are under way:
    the dead instances' leased and due jobs pass to the survivor.
    arriving: the exports come PACE_S apart, so the kills also catch jobs
    of the victims still waiting for their export data."""
    seed = int(os.environ.get("TG_FAULTS_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    emu = make_emulator()
    rcv = Receiver(delay=(0.05, 0.3), seed=seed)
    try:
        gws = fleet(emu, pg_url, 3, hooks(secret_file, max_inflight=4))
        for gw in gws:
            gw.wait_tokens()
        victims = rng.sample(range(3), 2)
        survivor = gws[({0, 1, 2} - set(victims)).pop()]
        alive = set(range(3))
        alive_lock = threading.Lock()
        accepted = {}                   # webhook id -> instance that accepted it
        refused = []                    # answers other than 200 (not accepted)
        kills = []                      # (instance, deliveries seen then, t)
        waiting_at_kill = {}            # instance -> ids waiting for data just after
        pace = PACE_S if traffic == "arriving" else 0.0
        t0 = time.monotonic()

        def submit(i):
            """One export; another live instance when the first dies under it."""
            time.sleep(max(0.0, t0 + i * pace - time.monotonic()))
            for attempt in range(6):
                with alive_lock:
                    live = sorted(alive)
                k = live[(i + attempt) % len(live)]
                try:
                    r = export(gws[k], rcv.url(f"/hook/{i}"))
                except requests.RequestException:
                    continue            # killed under the request: not accepted, retry
                if r.status_code == 200:
                    return r.headers["X-Tidegate-Webhook-Id"], k
                refused.append((i, k, r.status_code, r.text[:300]))
                return None
            refused.append((i, None, "no live instance answered", ""))
            return None

        def killer(base):
            """Each victim dies once the receiver has seen a random number
            more deliveries (plus up to 200 ms)."""
            at = base
            for victim in victims:
                at += rng.randint(10, 40)
                deadline = time.monotonic() + 30
                while len(rcv.delivered()) < at and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(rng.uniform(0, 0.2))
                with alive_lock:
                    alive.discard(victim)
                fleet.kill(gws[victim])
                kills.append((f"gw{victim}", len(rcv.delivered()),
                              round(time.monotonic() - t0, 2)))
                waiting_at_kill[f"gw{victim}"] = set(psql_ids(pg_url, "state = 'waiting'"))

        kt = threading.Thread(target=killer, args=(0,))
        if traffic == "arriving":
            kt.start()
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            for res in pool.map(submit, range(N_EXPORTS)):
                if res is not None:
                    accepted[res[0]] = f"gw{res[1]}"
        t_submitted = time.monotonic() - t0
        if traffic == "stored":
            deadline = time.monotonic() + 15
            while psql_ids(pg_url, "state = 'waiting'"):
                assert time.monotonic() < deadline, "export data not stored in 15 s"
                time.sleep(0.05)
            base = len(rcv.delivered())
            assert base < N_EXPORTS - 100, f"deliveries nearly over ({base}) before the kills"
            kt = threading.Thread(target=killer, args=(base,))
            kt.start()
        kt.join(timeout=60)
        assert not kt.is_alive(), "the killer thread hung"
        assert len(kills) == 2 and all(gws[v].proc.poll() is not None for v in victims)

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if set(accepted) <= set(rcv.delivered()):
                break
            time.sleep(0.1)
        t_done = time.monotonic() - t0
        got = rcv.delivered()
        lost = sorted(set(accepted) - set(got))
        dups = {w: n for w, n in got.items() if n > 1}
        extra = sorted(set(got) - set(accepted))
        orphaned = {w for g, ids in waiting_at_kill.items() for w in ids if accepted.get(w) == g}
        by_instance = {g: list(accepted.values()).count(g) for g in sorted(set(accepted.values()))}
        summary = (f"seed {seed}; kills (instance, deliveries seen, s): {kills}; "
                   f"survivor {survivor.cfg['state']['instance']}; accepted {len(accepted)} "
                   f"{by_instance}, refused {len(refused)}; "
                   f"delivered {len(set(got) & set(accepted))}; duplicates {len(dups)} "
                   f"({sum(dups.values()) - len(dups)} extra deliveries); delivered but "
                   f"never accepted {len(extra)}; victims' jobs waiting for export data "
                   f"when they died {len(orphaned)}; submitted in {t_submitted:.1f} s, "
                   f"done at {t_done:.1f} s")
        print(summary)
        lost_detail = [(w, accepted[w], job_state(survivor, w)) for w in lost[:10]]
        assert not lost, (f"{len(lost)} accepted webhooks never delivered: {lost_detail}; "
                          + summary)
        # Every export answered (none refused: a live instance took each one).
        assert not refused, f"refused: {refused[:5]}; " + summary
        assert len(accepted) == N_EXPORTS, summary
        assert rcv.unsigned() == [], "deliveries failing the signature check"
        # The survivor's records agree: delivered, and it did the dead ones' work.
        for w in rng.sample(sorted(accepted), 20):
            j = job_state(survivor, w)
            assert isinstance(j, dict) and j["state"] == "delivered", (w, j)
        took_over = [e for e in log_events(survivor, "webhook_attempt")
                     if accepted.get(e.get("webhook_id"), survivor.cfg["state"]["instance"])
                     != survivor.cfg["state"]["instance"] and e.get("state") == "delivered"]
        assert took_over, "the survivor delivered none of the dead instances' jobs; " + summary
    finally:
        rcv.close()


# ---- 2. PostgreSQL stopped for 10 s ----

class PrivateCluster:
    """A PostgreSQL 15 cluster of this test's own: initdb in a temporary
    directory, trust authentication for the postgres role, listening on a
    free loopback port (and a socket in its directory). As root everything
    runs as the postgres user (initdb refuses root), so the directory is
    made outside pytest's root-only tmp tree and given to that user."""

    def __init__(self):
        self.root = os.geteuid() == 0
        self.dir = tempfile.mkdtemp(prefix="tg-faults-pg-")
        if self.root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "postgres.log")
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.run(os.path.join(PG_BIN, "initdb"), "-D", self.data, "-A", "trust",
                 "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions")
        self.start()

    def run(self, *argv, timeout=60):
        argv = list(argv)
        if self.root:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{argv} exited with {p.returncode}:\n{p.stdout}\n{p.stderr}\n"
                               + self.read_log())
        return p

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()[-5000:]
        except OSError:
            return ""

    def start(self):
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} "
                "-c fsync=off -c full_page_writes=off -c max_connections=50")
        self.run(os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, "-l", self.log, "-w",
                 "-t", "30", "-o", opts, "start")

    def stop(self, mode="fast"):
        self.run(os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, "-m", mode, "-w",
                 "-t", "30", "stop")

    def running(self):
        argv = [os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, "status"]
        if self.root:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0

    def destroy(self):
        if self.running():
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def private_pg():
    """A private PostgreSQL 15 cluster the test may stop and start
    (stop(), start()); removed at teardown."""
    if not os.path.exists(os.path.join(PG_BIN, "initdb")):
        pytest.skip(f"no {PG_BIN}/initdb (Debian's postgresql-15)")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("running as root without runuser to run initdb as postgres")
    c = PrivateCluster()
    try:
        yield c
    finally:
        c.destroy()


OUTAGE_S = 10.0


def test_postgres_outage(private_pg, make_emulator, fleet, secret_file):
    emu = make_emulator({"export": {"delay": "1s"}})
    rcv = Receiver()
    try:
        gws = fleet(emu, private_pg.url, 2, hooks(secret_file))
        for gw in gws:
            gw.wait_tokens()
        pids = [gw.proc.pid for gw in gws]

        def plain_get(gw):
            return requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=10)

        for gw in gws:                  # the sim token is held by each instance
            r = plain_get(gw)
            assert r.status_code == 200 and isinstance(r.json(), list) and r.json(), r.text
        cases = r.json()
        # Before: ten jobs the receiver refuses (retrying when PostgreSQL
        # stops), and ten still waiting for their export data (1 s) when it does.
        rcv.status = 500
        before, cids = [], []
        for i in range(10):
            r = export(gws[i % 2], rcv.url("/retrying"))
            assert r.status_code == 200, r.text
            before.append(r.headers["X-Tidegate-Webhook-Id"])
            cids.append(r.json()["correlationId"])
        deadline = time.monotonic() + 15
        while {g[0] for g in rcv.got} < set(before):
            assert time.monotonic() < deadline, "first attempts never came"
            time.sleep(0.05)
        for i in range(10):
            r = export(gws[i % 2], rcv.url("/waiting"))
            assert r.status_code == 200, r.text
            before.append(r.headers["X-Tidegate-Webhook-Id"])
        assert len(set(before)) == 20

        private_pg.stop("fast")
        t_stop = time.monotonic()
        gets, refusals, readyz, others = [], [], [], []
        while time.monotonic() - t_stop < OUTAGE_S:
            for gw in gws:
                r = plain_get(gw)
                gets.append((r.status_code, r.json() == cases if r.status_code == 200 else
                             r.text[:200]))
                rz = requests.get(gw.admin + "/readyz", timeout=5)
                readyz.append((round(time.monotonic() - t_stop, 1), rz.status_code, rz.text))
            if time.monotonic() - t_stop > 1.0 and len(refusals) < 6:
                # after a second: the instances have noticed (idle sockets watched)
                k = len(refusals) % 2
                gw = gws[k]
                r = export(gw, rcv.url("/during"))
                refusals.append((r.status_code, r.headers.get("Retry-After"),
                                 r.headers.get("Content-Type"), r.text))
                # the caller's poll of a job it made through this instance before
                p = requests.get(gw.dex + "/public/export",
                                 params={"correlationId": cids[k]},
                                 headers=gw.headers(), timeout=10)
                others.append((p.status_code, p.json().get("error")
                               if p.status_code != 200 else len(p.json())))
            time.sleep(0.25)
        assert all(gw.proc.poll() is None for gw in gws), "an instance died in the outage"
        private_pg.start()
        t_start = time.monotonic()
        rcv.status = 200

        print(f"readyz during the outage: {sorted({(s, t) for _, s, t in readyz})}")
        print(f"GET /public/export of a job made before, during the outage: {others}")
        # A job created through an instance stays readable there by its key
        # (the owner it recorded), polled from the vendor by each instance.
        assert others and all(o[0] == 200 for o in others), others
        # Plain proxied GETs went on, every one of them, with the same answer.
        assert gets and all(g == (200, True) for g in gets), gets
        # readyz answered, still ready (it proxies), degraded with the reason once
        # the instances noticed.
        assert all(s == 200 and json.loads(t)["ready"] for _, s, t in readyz), readyz
        late = [json.loads(t) for at, _, t in readyz if at > 1.0]
        assert late and all(b["degraded"] is True and b["state"]["up"] is False and
                            "postgresql unavailable" in b["reason"] for b in late), late
        # Callback exports: 503 + Retry-After + a JSON error naming the cause.
        assert len(refusals) == 6, refusals
        for status, retry_after, ctype, text in refusals:
            assert status == 503, refusals
            assert retry_after is not None and int(retry_after) > 0, refusals
            assert ctype.startswith("application/json"), refusals
            body = json.loads(text)
            # the export's owner cannot be recorded, so neither it nor its webhook is kept
            assert body["statusCode"] == 503 and body["error"] == "OWNERSHIP_UNAVAILABLE", body
            assert "could not be stored" in body["message"] and body["requestId"], body

        # Recovery without a restart: a new callback export is accepted ...
        deadline = time.monotonic() + 20
        after = None
        while after is None:
            r = export(gws[len(gets) % 2], rcv.url("/after"))
            if r.status_code == 200:
                after = r.headers["X-Tidegate-Webhook-Id"]
            else:
                assert r.status_code == 503 and time.monotonic() < deadline, r.text
                time.sleep(0.2)
        t_recovered = time.monotonic() - t_start
        # ... on both instances
        r = export(gws[1 - len(gets) % 2], rcv.url("/after"))
        deadline = time.monotonic() + 20
        while r.status_code != 200:
            assert r.status_code == 503 and time.monotonic() < deadline, r.text
            time.sleep(0.2)
            r = export(gws[1 - len(gets) % 2], rcv.url("/after"))
        after2 = r.headers["X-Tidegate-Webhook-Id"]
        want = set(before) | {after, after2}
        deadline = time.monotonic() + 30
        while not want <= set(rcv.delivered()) and time.monotonic() < deadline:
            time.sleep(0.1)
        t_done = time.monotonic() - t_start
        got = rcv.delivered()
        lost = sorted(want - set(got))
        print(f"accepted again {t_recovered:.1f} s after PostgreSQL started; all delivered "
              f"{t_done:.1f} s after; duplicates {sum(n > 1 for n in got.values())}")
        assert not lost, (f"{len(lost)} of {len(want)} never delivered: "
                          f"{[(w, job_state(gws[0], w)) for w in lost[:10]]}")
        assert [gw.proc.pid for gw in gws] == pids and all(gw.proc.poll() is None for gw in gws)
        assert rcv.unsigned() == []
        # The instances saw the database go and come back (in their logs).
        for gw in gws:
            assert log_events(gw, "state_pg_down"), "no state_pg_down logged"
        # During the outage nothing reached the receiver for /during (refused).
        assert not [g for g in rcv.got if g[4] == "/during"]
    finally:
        rcv.close()
