"""The fleet's database path made cheaper (issue 29): writes committed in
groups, a poll's lead committed without waiting for the disk. What a
caller is told must not change:

- callback exports sent over eight connections at once (their job adds,
  owner records and correlation ids committed in groups), the database
  killed while a group is known to be in flight (its job add waiting on
  a lock the test holds on outbox_jobs, seen waiting in
  pg_stat_activity, so the premise holds however fast the machine) and
  started again: every export answered 200 has its
  job once and its webhook delivered exactly once; one answered 503
  naming a webhook id gets its webhook once if the job exists, never if
  not; nothing is delivered twice;
- ownership still refuses another key's first poll of a job through
  another instance, before any lead is taken: the owner's first poll
  after it is answered by the vendor's one GET at once."""
import concurrent.futures
import contextlib
import select
import subprocess
import time

import requests

from test_fleet import OTHER_KEY, OTHER_SHA, new_export, pg_url, start_fleet  # noqa: F401
from test_fleet_faults import (KEYS, Receiver, export, fleet, hooks, private_pg,  # noqa: F401
                               secret_file)


def rows(pg, wid):
    return int(pg.psql(f"SELECT count(*) FROM outbox_jobs WHERE id = '{wid}'")[0][0])


@contextlib.contextmanager
def table_locked(pg, table):
    """An open transaction of psql's holding EXCLUSIVE on table: reads go
    on, every write to it waits until the transaction ends (here: the
    cluster is killed under it)."""
    p = subprocess.Popen(["psql", "-qXAt", "-h", "127.0.0.1", "-p", str(pg.port), "-U",
                          "postgres", "-d", "postgres"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        p.stdin.write(f"BEGIN;\nLOCK TABLE {table} IN EXCLUSIVE MODE;\nSELECT 'locked';\n")
        p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], 30)
        assert ready and p.stdout.readline().strip() == "locked"
        yield
    finally:
        p.kill()
        p.wait()


def wait_lock_waiters(pg, table, timeout):
    """The statements that wait on a lock and write table, once there are
    any (at most timeout seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        w = pg.psql("SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    f" AND query LIKE '%{table}%' AND pid <> pg_backend_pid()")
        if w or time.monotonic() > deadline:
            return w
        time.sleep(0.01)


def wait_delivered(rcv, wids, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(rcv.delivered().get(w, 0) < 1 for w in wids):
        time.sleep(0.05)
    time.sleep(1.0)                 # a second delivery would come by now


def test_groups_killed_mid_commit_each_told_and_delivered_once(private_pg, make_emulator,
                                                               fleet, secret_file):
    url = f"postgresql://postgres@127.0.0.1:{private_pg.port}/postgres"
    emu = make_emulator()
    rcv = Receiver()
    try:
        gw, = fleet(emu, url, 1, dict(hooks(secret_file), state={"timeout": "2s"}))
        gw.wait_tokens()
        warm = export(gw, rcv.url("/warm"))
        assert warm.status_code == 200, warm.text

        def client(i):
            out = []
            for n in range(16):
                try:
                    r = export(gw, rcv.url(f"/c{i}-{n}"), timeout=30)
                    out.append((r.status_code, r.headers.get("X-Tidegate-Webhook-Id"), r.text))
                except requests.RequestException as e:
                    out.append(("exception", None, str(e)))
            return out

        with concurrent.futures.ThreadPoolExecutor(8) as pool, \
                table_locked(private_pg, "outbox_jobs"):
            fs = [pool.submit(client, i) for i in range(8)]
            # seen within a poll (~30 ms) of its wait starting: well inside
            # the state timeout (2 s) that would end it
            waiting = wait_lock_waiters(private_pg, "outbox_jobs", 10)
            assert waiting, "no write of the burst waiting on the lock"
            private_pg.stop(mode="immediate")   # mid-commit: a group in flight
            time.sleep(0.5)
            private_pg.start()
            res = [x for f in fs for x in f.result(120)]
        assert len(res) == 128
        assert all(s in (200, 503) for s, _, _ in res), [r for r in res if r[0] not in (200, 503)]
        ok = [w for s, w, _ in res if s == 200]
        assert ok and all(ok) and len(set(ok)) == len(ok)
        lost = [e for e in gw.log_lines() if e.get("event") in ("state_write_replay",
                                                                "webhook_add_unknown")]
        assert lost or len(ok) < 128, "the kill came after the burst"
        told = [w for s, w, _ in res if s == 503 and w]
        for w in ok:
            assert rows(private_pg, w) == 1, w
        wait_delivered(rcv, ok, 45)
        got = rcv.delivered()
        assert [w for w in ok if got.get(w, 0) != 1] == [], got
        for w in told:
            assert got.get(w, 0) == rows(private_pg, w), (w, got.get(w, 0))
        assert all(v == 1 for v in got.values()), got
        assert gw.proc.poll() is None
    finally:
        rcv.close()


def test_refused_first_poll_takes_no_lead(make_emulator, make_gateway, pg_url):
    emu = make_emulator({"export": {"delay": "5s"}})
    a, b, c = start_fleet(make_gateway, emu, pg_url)
    cid = new_export(a, pg_url)
    requests.delete(emu.dex + "/__emulator/stats")
    theirs = requests.get(c.dex + "/public/export", params={"correlationId": cid},
                          headers=c.headers(OTHER_KEY), timeout=30)
    assert theirs.status_code == 404, theirs.text
    assert theirs.json()["error"] == "NOT_FOUND"
    assert emu.calls("GET /public/export") == 0
    t = time.monotonic()
    mine = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                        headers=b.headers(), timeout=30)
    took = time.monotonic() - t
    assert mine.status_code in (200, 202), mine.text
    assert mine.json()["correlationId"] == cid
    # a lead the refused poll held would be waited out (poll.max_interval),
    # looking for its answer every 200 ms
    assert took < 1.0, took
    assert emu.calls("GET /public/export") == 1


# The statements of a first poll's ownership read and poll lead (not the
# owner record, the prune or the publish).
FIRST_POLL_SQL = ("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE"
                  " (query LIKE '%FROM owners WHERE%' AND query NOT LIKE 'DELETE%')"
                  " OR (query LIKE '%INTO poll_entries (key, leader%')")


def test_first_poll_through_another_instance_is_one_statement(private_pg, make_emulator,
                                                              fleet):
    """The owner read and the poll lead of a first poll through an instance
    with no entry for the job are one statement (before: the lookup, then
    the lead, one round trip after the other); a refused caller still gets
    404 and takes no lead; a stopped database still 503
    OWNERSHIP_UNAVAILABLE."""
    private_pg.psql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    private_pg.stop()
    private_pg.start()
    private_pg.psql("CREATE EXTENSION pg_stat_statements")
    emu = make_emulator({"export": {"delay": "5s"}})
    keys = KEYS + [{"name": "other", "sha256": OTHER_SHA, "services": ["dex", "sim"]}]
    a, b = fleet(emu, private_pg.url, 2, {"state": {"timeout": "2s"}, "keys": keys})
    r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=a.headers(), timeout=30)
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    private_pg.psql("SELECT pg_stat_statements_reset()")
    theirs = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                          headers=b.headers(OTHER_KEY), timeout=30)
    assert theirs.status_code == 404, theirs.text
    assert theirs.json()["error"] == "NOT_FOUND"
    assert private_pg.psql("SELECT count(*) FROM poll_entries WHERE key LIKE"
                           f" '%correlationId={cid}'") == [["0"]]
    assert private_pg.psql(FIRST_POLL_SQL) == [["1"]]
    private_pg.psql("SELECT pg_stat_statements_reset()")
    mine = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                        headers=b.headers(), timeout=30)
    assert mine.status_code in (200, 202), mine.text
    assert mine.json()["correlationId"] == cid
    assert emu.calls("GET /public/export") == 1
    assert private_pg.psql("SELECT count(*) FROM poll_entries WHERE key LIKE"
                           f" '%correlationId={cid}'") == [["1"]]     # led, then published
    # one statement read the owner and took the lead, and nothing more
    assert private_pg.psql(FIRST_POLL_SQL) == [["1"]]
    rows = private_pg.psql("SELECT count(*) FROM pg_stat_statements WHERE query LIKE"
                           " '%FROM owners WHERE%' AND query LIKE '%INTO poll_entries%'")
    assert rows == [["1"]]
    r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=a.headers(), timeout=30)
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    private_pg.stop()
    gone = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                        headers=b.headers(), timeout=30)
    assert gone.status_code == 503, gone.text
    assert gone.json()["error"] == "OWNERSHIP_UNAVAILABLE"
    assert gone.headers["Retry-After"] == "1"
    assert emu.calls("GET /public/export") == 1
    private_pg.start()


def test_first_polls_at_once_are_pipelined(make_emulator, make_gateway, pg_url):
    """Sixteen first polls at once through an instance that made none of
    the jobs: each is answered with its own job's state by one vendor GET
    of its own, and the instance's owner reads and leads went behind each
    other on its connections (tidegate_state_pipelined_total rose)
    instead of each waiting for one of the two to come free."""
    emu = make_emulator({"export": {"delay": "30s"}})     # running: answers name their job
    a, b = start_fleet(make_gateway, emu, pg_url, 2)
    b.wait_tokens()
    cids = [new_export(a, pg_url) for _ in range(16)]
    before = b.metric("tidegate_state_pipelined_total")
    polls0 = emu.calls("GET /public/export")

    def first(cid):
        return requests.get(b.dex + "/public/export", params={"correlationId": cid},
                            headers=b.headers(), timeout=30)

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        got = list(ex.map(first, cids))
    for cid, r in zip(cids, got):
        assert r.status_code in (200, 202), r.text
        assert r.json()["correlationId"] == cid
    assert emu.calls("GET /public/export") - polls0 == 16
    assert b.metric("tidegate_state_pipelined_total") > before
