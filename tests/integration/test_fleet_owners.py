"""Correlation ownership across a fleet on PostgreSQL (issue 24): no job is
served to a key before, or without, a committed record that names it.

- test_creation_answered_only_once_its_owner_is_committed: two instances
  on one database whose owner records commit late (a side session keeps
  locking the table against writes); a job created through the first is
  read at once through the second, by another key and by its creator, 100
  times: the other key is refused every time, the creator served every
  time (its answer came only after the record's commit, so no read
  anywhere can precede it).
- test_no_job_accepted_unowned_while_postgres_is_down: a private cluster
  stopped under two instances: every creation is answered 503 with
  Retry-After and a JSON error saying the job was made at the vendor but
  will not be served (a keyed simulation submission likewise); once the
  database is back, none of those jobs is readable by any key on either
  instance, while the jobs made before stay their creator's.

Both need PostgreSQL (pg_virtualenv -v 15, as CI runs the suite); the
outage test also needs /usr/lib/postgresql/15/bin (see test_fleet_faults)."""
import concurrent.futures
import re
import subprocess
import time

import requests

from conftest import TEST_KEY, TEST_KEY_SHA
from test_fleet import OTHER_KEY, OTHER_SHA, pg_url, pytestmark  # noqa: F401 (fixtures)
from test_fleet_faults import private_pg  # noqa: F401 (fixture)

KEYS = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
        {"name": "other", "sha256": OTHER_SHA, "services": ["dex", "sim"]}]
NOT_YOURS = "no such job for this API key"


def two(make_gateway, emulator, url):
    gws = [make_gateway(emulator, {"state": {"url": url, "instance": f"gw{i}"}, "keys": KEYS})
           for i in range(2)]
    for gw in gws:
        gw.wait_tokens()
    return gws


def create(gw, key=TEST_KEY):
    return requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                         headers=gw.headers(key), timeout=30)


def read(gw, cid, key=TEST_KEY):
    return requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                        headers=gw.headers(key), timeout=30)


def refused(r):
    return r.status_code == 404 and r.json().get("message") == NOT_YOURS


class SlowCommits:
    """A side session of psql that keeps taking a lock on the owners table
    which writes wait for and reads do not (SHARE ROW EXCLUSIVE), 50 ms at a
    time with 10 ms gaps: owner records commit tens of milliseconds late, as
    on a loaded database, while lookups answer at once."""

    def __init__(self, url, seconds=60):
        schema = url.split("search_path%3D")[1]
        step = (f"BEGIN; LOCK TABLE {schema}.owners IN SHARE ROW EXCLUSIVE MODE; "
                "SELECT pg_sleep(0.05); COMMIT; SELECT pg_sleep(0.01);\n")
        self.proc = subprocess.Popen(["psql", "-qXo", "/dev/null"], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     text=True)
        self.proc.stdin.write(step * int(seconds / 0.06))
        self.proc.stdin.close()

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def test_creation_answered_only_once_its_owner_is_committed(emulator, make_gateway, pg_url):
    a, b = two(make_gateway, emulator, pg_url)
    theirs_refused = mine_served = 0
    bad = []
    slow = SlowCommits(pg_url)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for _ in range(100):
            r = create(a)
            assert r.status_code == 200, r.text
            cid = r.json()["correlationId"]
            other = pool.submit(read, b, cid, OTHER_KEY)
            mine = pool.submit(read, b, cid)
            o, m = other.result(), mine.result()
            theirs_refused += refused(o)
            mine_served += m.status_code in (200, 202)
            if not refused(o) or m.status_code not in (200, 202):
                bad.append((cid, o.status_code, o.text[:120], m.status_code, m.text[:120]))
    slow.stop()
    print(f"read at once through the other instance: another key refused {theirs_refused}/100, "
          f"the creator served {mine_served}/100")
    assert theirs_refused == 100 and mine_served == 100, bad[:5]
    assert sum(gw.metric("tidegate_job_owner_errors_total") for gw in (a, b)) == 0


def refusal_ids(r, what):
    """The job id a 503 for an unrecorded creation names."""
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) > 0
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert body["statusCode"] == 503 and body["requestId"], body
    m = re.match(rf"{what} (\S+) was (created|accepted) (at|by) the vendor, but ", body["message"])
    assert m and "will not be served" in body["message"], body
    return body["error"], m.group(1)


def test_no_job_accepted_unowned_while_postgres_is_down(private_pg, make_emulator,  # noqa: F811
                                                        make_gateway):
    emu = make_emulator()
    a, b = two(make_gateway, emu, private_pg.url)
    before = []
    for gw in (a, b):
        r = create(gw)
        assert r.status_code == 200, r.text
        before.append(r.json()["correlationId"])
    case = requests.get(a.sim + "/api/v1/cases/CASE-OM-1", headers=a.headers(), timeout=10).json()
    private_pg.stop("fast")
    try:
        made = emu.calls("POST /public/v1/export/activities")
        during = []
        for i in range(20):
            code, cid = refusal_ids(create((a, b)[i % 2], (TEST_KEY, OTHER_KEY)[i // 2 % 2]),
                                    "export")
            assert code == "OWNERSHIP_UNAVAILABLE"
            during.append(cid)
        # made at the vendor, every one: the refusal is the gateway's
        assert emu.calls("POST /public/v1/export/activities") == made + 20
        r = requests.post(a.sim + "/api/v1/simulations", json=case, headers=a.headers(),
                          timeout=30)
        code, sim = refusal_ids(r, "simulation")
        assert code == "REGISTRY_UNAVAILABLE"
        # the jobs made before: their creator's through the instance that made
        # them (it remembers), refused to the other key
        for gw, cid in zip((a, b), before):
            assert read(gw, cid).status_code in (200, 202)
            assert refused(read(gw, cid, OTHER_KEY))
    finally:
        private_pg.start()
    deadline = time.monotonic() + 30
    while True:             # until the instance has its connection again
        r = create(a)
        if r.status_code == 200:
            break
        code, cid = refusal_ids(r, "export")
        during.append(cid)
        assert time.monotonic() < deadline, "no creation accepted after PostgreSQL came back"
        time.sleep(0.2)
    leaked = [(gw.cfg["state"]["instance"], cid, key) for gw in (a, b) for cid in during
              for key in (TEST_KEY, OTHER_KEY) if not refused(read(gw, cid, key))]
    assert not leaked, leaked
    for gw in (a, b):
        for key in (TEST_KEY, OTHER_KEY):
            for path in (f"/api/v1/simulations/{sim}", f"/api/v1/simulations/{sim}/results"):
                r = requests.get(gw.sim + path, headers=gw.headers(key), timeout=10)
                assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", r.text
            r = requests.get(gw.sim + "/api/v1/simulations", headers=gw.headers(key), timeout=10)
            assert r.status_code == 200 and sim not in [x["simulationId"] for x in r.json()]
        for cid in before:
            assert read(gw, cid).status_code in (200, 202)
            assert refused(read(gw, cid, OTHER_KEY))
    errors = sum(gw.metric("tidegate_job_owner_errors_total") for gw in (a, b))
    assert errors == len(during), (errors, len(during))
