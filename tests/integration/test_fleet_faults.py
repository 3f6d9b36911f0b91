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
- test_postgres_frozen: the same private cluster frozen with SIGSTOP (the
  postmaster and every backend: sockets open, nothing answers) for 8 s
  under two instances with state.timeout 2 s: a poll whose owner only the
  database knows and a callback export answer 503 + Retry-After with a
  JSON error within the deadline, /readyz says degraded naming it on both
  instances within seconds, plain GETs go on, and after SIGCONT both come
  back without a restart.
- test_start_with_postgres_down: an instance started with the cluster
  stopped starts degraded (proxying, callback exports 503) and comes up
  by itself once the cluster starts: schema migrated, a webhook accepted
  and delivered, its connections named tidegate/gw0 in pg_stat_activity.

All need PostgreSQL (CI runs the suite under pg_virtualenv -v 15); the
private cluster's tests also need /usr/lib/postgresql/15/bin/initdb. As root, initdb
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
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
import requests

from conftest import TEST_KEY_SHA, Gateway, _attach_log_on_failure, free_port
import webhook_verify
from test_gateway_prebody import HUGE, head, on_head

pytestmark = pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL: PG* unset (scripts/test starts one unless TG_TEST_NO_PG=1)")

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
            cfg.setdefault("keys", KEYS)
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
        gws = fleet(emu, pg_url, 3, hooks(secret_file, max_inflight=4, max_inflight_per_host=4))
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
        try:
            self.run(os.path.join(PG_BIN, "initdb"), "-D", self.data, "-A", "trust",
                     "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions")
            for attempt in range(3):    # a free port may be taken before the server binds it
                self.port = free_port()
                self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
                try:
                    self.start()
                    break
                except RuntimeError:
                    if attempt == 2:
                        raise
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

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

    def pids(self):
        """The postmaster's pid, then its children's (every backend and
        auxiliary process of the cluster)."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pm = int(f.readline())
        kids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pm:
                kids.append(int(d))
        return pm, kids

    def freeze(self):
        """SIGSTOP every process of the cluster (the postmaster first, so
        that it forks no new one): the sockets stay open, nothing answers."""
        pm, _ = self.pids()
        os.kill(pm, signal.SIGSTOP)
        self.frozen = [pm] + self.pids()[1]
        for pid in self.frozen[1:]:
            os.kill(pid, signal.SIGSTOP)

    def thaw(self):
        for pid in reversed(getattr(self, "frozen", [])):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    def psql(self, sql):
        """One query's rows (as text) on the cluster, as the postgres user."""
        p = subprocess.run(["psql", "-qXAt", "-h", "127.0.0.1", "-p", str(self.port), "-U",
                            "postgres", "-d", "postgres", "-c", sql],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return [line.split("|") for line in p.stdout.splitlines()]

    def destroy(self):
        self.thaw()
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
            # the webhook's outbox is asked first (its payload quota): unreachable,
            # so nothing was sent to the vendor and no job is left unowned
            assert body["statusCode"] == 503 and body["error"] == "WEBHOOK_UNAVAILABLE", body
            assert "could not be stored" in body["message"] and body["requestId"], body
            assert "nothing was sent to the vendor" in body["message"], body

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


# ---- 3. PostgreSQL frozen (SIGSTOP): sockets open, nothing answers ----

FROZEN_S = 8.0
STATE_TIMEOUT_S = 2.0
MARGIN_S = 1.5      # the loop's turn, a loaded machine: past the deadline at most


def timed(f, *args, **kw):
    t = time.monotonic()
    r = f(*args, **kw)
    return r, time.monotonic() - t


def readyz(gw):
    return requests.get(gw.admin + "/readyz", timeout=5).json()


def wait_owners(pg, n, timeout=10.0):
    """Until the cluster holds n owner records (committed just after the
    creation's answer)."""
    deadline = time.monotonic() + timeout
    while int(pg.psql("SELECT count(*) FROM owners")[0][0]) < n:
        assert time.monotonic() < deadline, f"fewer than {n} owner records"
        time.sleep(0.05)


def assert_503(r, code, took):
    assert r.status_code == 503, (r.status_code, r.text)
    assert int(r.headers["Retry-After"]) > 0, r.headers
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert body["statusCode"] == 503 and body["error"] == code and body["requestId"], body
    assert body["message"], body
    assert took <= STATE_TIMEOUT_S + MARGIN_S, (code, took)


def test_postgres_frozen(private_pg, make_emulator, fleet, secret_file):
    """Every process of the cluster stopped with SIGSTOP for FROZEN_S:
    a poll whose owner only the database knows and a callback export
    answer 503 + Retry-After with a JSON error within state.timeout;
    /readyz says degraded, naming the deadline, within seconds on both
    instances (the idle one too); plain GETs go on; after SIGCONT both
    recover without a restart."""
    emu = make_emulator()
    rcv = Receiver()
    try:
        cfg = hooks(secret_file)
        cfg["state"] = {"timeout": f"{int(STATE_TIMEOUT_S * 1000)}ms"}
        gws = fleet(emu, private_pg.url, 2, cfg)
        for gw in gws:
            gw.wait_tokens()
        pids = [gw.proc.pid for gw in gws]

        def create(gw):
            r = requests.post(gw.dex + EXPORT, json={"projectId": "P-DEMO"},
                              headers=gw.headers(), timeout=10)
            assert r.status_code == 200, r.text
            return r.json()["correlationId"]

        theirs = create(gws[1])         # gw0 knows its owner from the database only
        mine = create(gws[0])
        wait_owners(private_pg, 2)

        private_pg.freeze()
        t_freeze = time.monotonic()
        poll, took_poll = timed(requests.get, gws[0].dex + "/public/export",
                                params={"correlationId": theirs}, headers=gws[0].headers(),
                                timeout=30)
        hook, took_hook = timed(export, gws[0], rcv.url("/during"), timeout=30)
        own, took_own = timed(requests.get, gws[0].dex + "/public/export",
                              params={"correlationId": mine}, headers=gws[0].headers(),
                              timeout=30)
        degraded = {}
        while len(degraded) < 2 and time.monotonic() - t_freeze < FROZEN_S:
            for i, gw in enumerate(gws):
                body = readyz(gw)
                if body["degraded"] and i not in degraded:
                    degraded[i] = (round(time.monotonic() - t_freeze, 2), body)
            time.sleep(0.1)
        gets = [requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(),
                             timeout=10).status_code for gw in gws]
        time.sleep(max(0.0, FROZEN_S - (time.monotonic() - t_freeze)))
        assert all(gw.proc.poll() is None for gw in gws), "an instance died"
        private_pg.thaw()
        t_thaw = time.monotonic()

        print(f"frozen: poll {poll.status_code} in {took_poll:.2f} s, callback export "
              f"{hook.status_code} in {took_hook:.2f} s, own poll {own.status_code} in "
              f"{took_own:.2f} s; degraded after {[degraded[i][0] for i in sorted(degraded)]} s")
        assert_503(poll, "OWNERSHIP_UNAVAILABLE", took_poll)
        assert_503(hook, "WEBHOOK_UNAVAILABLE", took_hook)
        for r in (poll, hook):      # the error names the cause: the state's deadline
            assert "no answer within 2000 ms (state.timeout)" in r.json()["message"], r.text
        # a job this instance made is still read (its owner known here), in time
        assert own.status_code in (200, 202) and took_own <= STATE_TIMEOUT_S + MARGIN_S
        assert gets == [200, 200], gets
        assert sorted(degraded) == [0, 1], degraded
        for i, (at, body) in degraded.items():
            assert at <= 2 * STATE_TIMEOUT_S + 2 * MARGIN_S, (i, at, body)
            assert body["ready"] is True and body["state"]["up"] is False, body
            assert "no answer within 2000 ms" in body["reason"], body

        # SIGCONT: both answer again, up, without a restart
        deadline = t_thaw + 15
        for gw in gws:
            while readyz(gw)["degraded"]:
                assert time.monotonic() < deadline, readyz(gw)
                time.sleep(0.1)
        t_up = time.monotonic() - t_thaw
        p = requests.get(gws[0].dex + "/public/export", params={"correlationId": theirs},
                         headers=gws[0].headers(), timeout=10)
        assert p.status_code in (200, 202), p.text
        r = export(gws[0], rcv.url("/after"))
        assert r.status_code == 200, r.text
        wid = r.headers["X-Tidegate-Webhook-Id"]
        deadline = time.monotonic() + 20
        while wid not in rcv.delivered():
            assert time.monotonic() < deadline, job_state(gws[0], wid)
            time.sleep(0.1)
        print(f"up again {t_up:.2f} s after SIGCONT")
        assert [gw.proc.pid for gw in gws] == pids
        assert not [g for g in rcv.got if g[4] == "/during"]
        assert log_events(gws[0], "state_pg_timeout"), "no state_pg_timeout logged"
    finally:
        private_pg.thaw()
        rcv.close()


# ---- 4. Started while PostgreSQL is down ----

def test_start_with_postgres_down(private_pg, make_emulator, fleet, secret_file):
    """An instance started with its database stopped starts degraded (it
    proxies with the tokens it logs in for itself; a callback export is
    refused with 503 + Retry-After), and once PostgreSQL starts it comes up
    by itself: the schema migrated, webhooks accepted and delivered, its
    connections named tidegate/<instance> in pg_stat_activity."""
    private_pg.stop("fast")
    emu = make_emulator()
    rcv = Receiver()
    try:
        (gw,) = fleet(emu, private_pg.url, 1, hooks(secret_file))
        pid = gw.proc.pid
        gw.wait_tokens()
        body = readyz(gw)
        assert body["ready"] is True and body["degraded"] is True, body
        assert body["state"]["up"] is False and "postgresql unavailable" in body["reason"], body
        r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=10)
        assert r.status_code == 200 and r.json(), r.text
        r, took = timed(export, gw, rcv.url("/down"))
        assert_503(r, "WEBHOOK_UNAVAILABLE", took)
        assert "postgresql unavailable" in r.json()["message"], r.text

        private_pg.start()
        t_start = time.monotonic()
        while readyz(gw)["degraded"]:
            assert time.monotonic() - t_start < 15, readyz(gw)
            time.sleep(0.1)
        t_up = time.monotonic() - t_start
        r = export(gw, rcv.url("/up"))
        assert r.status_code == 200, r.text
        wid = r.headers["X-Tidegate-Webhook-Id"]
        deadline = time.monotonic() + 20
        while wid not in rcv.delivered():
            assert time.monotonic() < deadline, job_state(gw, wid)
            time.sleep(0.1)
        print(f"up {t_up:.2f} s after PostgreSQL started")
        assert int(private_pg.psql("SELECT max(version) FROM tidegate_schema")[0][0]) >= 3
        deadline = time.monotonic() + 10
        while True:
            names = [n for (n,) in private_pg.psql(
                "SELECT application_name FROM pg_stat_activity WHERE application_name "
                "LIKE 'tidegate%'")]
            if len(names) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(names) == 2 and set(names) == {"tidegate/gw0"}, names
        assert gw.proc.pid == pid and gw.proc.poll() is None
        assert not [g for g in rcv.got if g[4] == "/down"]
    finally:
        rcv.close()


def test_relay_refused_until_the_relay_key_is_loaded(private_pg, make_emulator, fleet,
                                                     secret_file):
    """Started with its database stopped, a relay-mode instance has no
    relay key to check a relay URL with: a delivery (150 MB announced, no
    byte sent) is refused 503 + Retry-After on the head, and a relay export
    503 before the vendor is called. Once PostgreSQL starts the key is
    loaded: a made-up MAC is refused 404 on the head."""
    private_pg.stop("fast")
    emu = make_emulator()
    rcv = Receiver()
    path = f"/__tidegate/callbacks/msg_{uuid.uuid4().hex}.{uuid.uuid4().hex}"
    try:
        (gw,) = fleet(emu, private_pg.url, 1, hooks(secret_file, mode="relay",
                                                  public_url="http://127.0.0.1:9"))
        gw.wait_tokens()
        status, fields, doc = on_head(gw.ports["dex"], head("POST", path, length=HUGE))
        assert status == 503 and doc["error"] == "WEBHOOK_UNAVAILABLE", doc
        assert int(fields["retry-after"]) > 0, fields
        r, took = timed(export, gw, rcv.url("/down"))
        assert_503(r, "WEBHOOK_UNAVAILABLE", took)
        assert emu.calls("POST /public/v1/export/activities") == 0
        private_pg.start()
        deadline = time.monotonic() + 15
        while not log_events(gw, "webhook_relay_key_loaded"):
            assert time.monotonic() < deadline, readyz(gw)
            time.sleep(0.1)
        status, _, doc = on_head(gw.ports["dex"], head("POST", path, length=HUGE))
        assert status == 404 and doc["error"] == "NOT_FOUND", doc
    finally:
        rcv.close()


def test_drained_instance_hands_its_ready_jobs_over_at_once(pg_url, make_emulator, fleet,
                                                            secret_file):
    """With webhooks.lease 60 s an idle instance looks for due jobs only
    every 20 s. gw1 accepts 6 callback exports and delivers them one at a
    time (max_inflight 1, the receiver answers after 1 s); SIGTERM to it
    while some are ready and not leased: its drain wakes the fleet (topic
    "outbox"), and gw0 (started just before, its next look 20 s away)
    delivers them at once (measured: within 1 s, as gw1's last attempt
    ended). Before, they waited for gw0's timer: only gw1's attempt in
    flight was delivered within 8 s."""
    emu = make_emulator({"export": {"delay": "300ms", "expiry": "1h"}})
    rcv = Receiver(delay=(1.0, 1.0))
    try:
        other = fleet(emu, pg_url, 1, hooks(secret_file, lease="60s"))[0]
        t_other = time.monotonic()
        gw = fleet(emu, pg_url, 1, hooks(secret_file, lease="60s", max_inflight=1,
                                         max_inflight_per_host=1))[0]
        gw.wait_tokens()
        other.wait_tokens()
        ids = []
        for _ in range(6):
            r = export(gw, rcv.url("/hook"))
            assert r.status_code == 200, r.text
            ids.append(r.headers["X-Tidegate-Webhook-Id"])
        deadline = time.monotonic() + 10        # every job's data fetched: none waiting
        while any(isinstance(s, dict) and s.get("state") == "waiting"
                  for s in (job_state(gw, w) for w in ids)):
            assert time.monotonic() < deadline, [job_state(gw, w) for w in ids]
            time.sleep(0.1)
        assert len(rcv.delivered()) < 5         # gw1 is still at it, one a second
        t_term = time.monotonic()
        assert t_term - t_other < 12            # well before gw0's own next look
        assert gw.stop() == 0                   # drains: its attempt in flight ends
        deadline = t_term + 8
        while len(rcv.delivered()) < len(ids):
            assert time.monotonic() < deadline, (rcv.delivered(), t_term - t_other)
            time.sleep(0.05)
        assert set(rcv.delivered()) == set(ids)
    finally:
        rcv.close()


def test_fleet_endpoint_answers_503_within_the_deadline_while_frozen(private_pg, make_emulator,
                                                                     fleet):
    """GET /fleet waits on the database: frozen, it answers 503
    STATE_UNAVAILABLE with Retry-After within state.timeout, and the
    instances again once the cluster is thawed."""
    emu = make_emulator()
    (gw,) = fleet(emu, private_pg.url, 1,
                  {"state": {"timeout": f"{int(STATE_TIMEOUT_S * 1000)}ms"}})
    adm = gw.headers(ADMIN_KEY)
    r = requests.get(gw.admin + "/fleet", headers=adm, timeout=10)
    assert r.status_code == 200 and [i["instance"] for i in r.json()["instances"]] == ["gw0"]
    private_pg.freeze()
    try:
        r, took = timed(requests.get, gw.admin + "/fleet", headers=adm, timeout=30)
        assert_503(r, "STATE_UNAVAILABLE", took)
        assert gw.proc.poll() is None
    finally:
        private_pg.thaw()
    deadline = time.monotonic() + 15
    while True:
        r = requests.get(gw.admin + "/fleet", headers=adm, timeout=10)
        if r.status_code == 200:
            break
        assert time.monotonic() < deadline, r.text
        time.sleep(0.2)
    assert [i["instance"] for i in r.json()["instances"]] == ["gw0"]
