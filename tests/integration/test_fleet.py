"""Fleet mode: three gateways on one PostgreSQL (state.url) in front of one
emulator share what a fleet shares: one vendor login per service for a
cold burst spread over the instances, correlation ownership (a job
created through one instance is its key's on every instance, 404 to other
keys), and the polls of a job (one upstream GET per interval for the
fleet, long-polls on every instance ending on one answer). Runs when PostgreSQL is there (CI runs the tests under
pg_virtualenv, which sets PG*), else skipped with the reason."""
import concurrent.futures
import os
import subprocess
import time
import uuid

import pytest
import requests

from conftest import TEST_KEY, TEST_KEY_SHA

OTHER_KEY = "other-key"
OTHER_SHA = "580843d03d2216ff1a275d0991bad66e4d1af871171d929e9de604b7959f9bca"

pytestmark = pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL: PG* unset (scripts/test starts one unless TG_TEST_NO_PG=1)")


@pytest.fixture
def pg_url():
    """A schema of its own on the test cluster: the fleet's database."""
    schema = "fleet_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", "-qXc", f"CREATE SCHEMA {schema}"], check=True,
                   capture_output=True, timeout=30)
    yield f"postgresql:///?options=-csearch_path%3D{schema}"
    subprocess.run(["psql", "-qXc", f"DROP SCHEMA {schema} CASCADE"], check=False,
                   capture_output=True, timeout=30)


def start_fleet(make_gateway, emulator, url, n=3, extra=None):
    keys = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
            {"name": "other", "sha256": OTHER_SHA, "services": ["dex", "sim"]}]
    return [make_gateway(emulator, {"state": {"url": url, "instance": f"gw{i}"},
                                    "keys": keys, **(extra or {})}) for i in range(n)]


def burst(gws, n):
    """n exports of a kind the vendor does not know (so each reaches it with
    the fleet's token and makes no job) spread over gws, 30 at a time: their
    codes."""
    def one(i):
        gw = gws[i % len(gws)]
        return requests.post(gw.dex + "/public/v1/export/nope", json={"projectId": "P-DEMO"},
                             headers=gw.headers(), timeout=30).status_code

    with concurrent.futures.ThreadPoolExecutor(30) as pool:
        return list(pool.map(one, range(n)))


def test_cold_burst_over_three_instances_logs_in_once(emulator, make_gateway, pg_url):
    gws = start_fleet(make_gateway, emulator, pg_url)
    assert set(burst(gws, 300)) == {404}    # the emulator's answer for an unknown kind
    assert emulator.calls("POST /public/v1/authenticate") == 1
    assert emulator.calls("POST /public/v1/export/nope") == 300
    for gw in gws:
        gw.wait_tokens()
    assert emulator.calls("POST /api/oauth2/token") == 1
    logins = sum(gw.metric("tidegate_token_logins_total", service="dex") for gw in gws)
    assert logins == 1


def test_vendor_401_after_revocation_makes_one_login_for_the_fleet(emulator, make_gateway,
                                                                  pg_url):
    gws = start_fleet(make_gateway, emulator, pg_url)
    assert set(burst(gws, 60)) == {404}
    assert emulator.calls("POST /public/v1/authenticate") == 1
    requests.post(emulator.dex + "/__emulator/revoke", timeout=5).raise_for_status()
    assert set(burst(gws, 150)) == {404}    # each refused once, replayed with the new token
    assert emulator.calls("POST /public/v1/authenticate") == 2
    replays = sum(gw.metric("tidegate_token_replays_total") for gw in gws)
    assert replays >= 3, replays        # every instance met the 401


TOKEN_S = 6        # the vendor's tokens live this long: below refresh_before (60 s)
LOAD_S = 24


def test_short_lived_tokens_one_login_per_half_life_for_the_fleet(make_emulator,
                                                                 make_gateway, pg_url):
    """Tokens that live shorter than refresh_before are refreshed at half
    their life: one instance of the fleet logs in, the others take its
    token, so the fleet makes about one login per half life and service,
    and callers never see a 503 meanwhile (the login timeout is scaled down
    with the tokens: a follower waiting for the leader's token longer than
    it must not fail the login)."""
    emu = make_emulator({"dex": {"token_lifetime": f"{TOKEN_S}s"},
                         "sim": {"token_lifetime": f"{TOKEN_S}s"}})
    t0 = time.monotonic()
    gws = start_fleet(make_gateway, emu, pg_url,
                      extra={"dex": {"login_timeout": "2s"}, "sim": {"login_timeout": "2s"}})
    stop = time.monotonic() + LOAD_S

    def caller(i):
        got = {}
        n = 0
        while time.monotonic() < stop:
            gw = gws[(i + n) % 3]
            if n % 2:
                r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=30)
                ok = 200
            else:
                r = requests.get(gw.dex + "/public/export",
                                 params={"correlationId": "nope-" + uuid.uuid4().hex},
                                 headers=gw.headers(), timeout=30)
                ok = 404                # the emulator's answer for an unknown id
            key = r.status_code if r.status_code != ok else "ok"
            if key != "ok":
                got.setdefault(key, r.text[:300])
            got[str(key)] = got.get(str(key), 0) + 1
            n += 1
            time.sleep(0.05)
        return got

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(caller, range(6)))
    elapsed = time.monotonic() - t0
    counts = {}
    for got in results:
        for k, v in got.items():
            if isinstance(v, int):
                counts[k] = counts.get(k, 0) + v
    bad = {k: v for got in results for k, v in got.items() if not isinstance(v, int)}
    dex = emu.calls("POST /public/v1/authenticate")
    sim = emu.calls("POST /api/oauth2/token")
    # one per half life, and the first (a JWT's exp is in whole seconds: its
    # life may be a second shorter)
    want = int(elapsed / ((TOKEN_S - 1) / 2)) + 2
    print(f"{counts} in {elapsed:.1f} s; logins: dex {dex}, sim {sim} (at most {want} each)")
    assert counts.get("ok", 0) > 300 and not bad, (counts, bad)
    assert dex <= want and sim <= want, (dex, sim, want)
    logins = sum(gw.metric("tidegate_token_logins_total", service="dex") for gw in gws)
    assert logins == dex
    events = [e.get("event") for gw in gws for e in gw.log_lines()]
    assert "token_login_failed" not in events     # no login failed, nor was said to
    assert events.count("token_shared") >= dex     # the others took the leader's tokens


def wait_owner_recorded(url, cid, timeout=5.0):
    schema = url.split("search_path%3D")[1]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["psql", "-qXAtc", f"SELECT count(*) FROM {schema}.owners"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out not in ("", "0"):
            return
        time.sleep(0.05)
    raise AssertionError(f"the owner of {cid} was never recorded")


def test_job_owned_across_the_fleet(emulator, make_gateway, pg_url):
    a, b, c = start_fleet(make_gateway, emulator, pg_url)
    r = requests.post(a.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=a.headers(), timeout=30)
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    wait_owner_recorded(pg_url, cid)    # committed before the creation's answer
    mine = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                        headers=b.headers(), timeout=30)
    assert mine.status_code in (200, 202), mine.text
    theirs = requests.get(c.dex + "/public/export", params={"correlationId": cid},
                          headers=c.headers(OTHER_KEY), timeout=30)
    assert theirs.status_code == 404
    assert theirs.json()["error"] == "NOT_FOUND"


def new_export(gw, url):
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=30)
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    wait_owner_recorded(url, cid)
    return cid


def fleet_poll(gw, cid, wait=None):
    params = {"correlationId": cid}
    if wait is not None:
        params["wait"] = str(wait)
    return requests.get(gw.dex + "/public/export", params=params, headers=gw.headers(),
                        timeout=30)


POLL_500MS = {"poll": {"interval": "500ms", "max_interval": "500ms"}}


def test_long_polls_over_three_instances_one_upstream_get_per_interval(make_emulator,
                                                                       make_gateway, pg_url):
    emu = make_emulator({"export": {"delay": "3s"}})
    gws = start_fleet(make_gateway, emu, pg_url, extra=POLL_500MS)
    cid = new_export(gws[0], pg_url)
    requests.delete(emu.dex + "/__emulator/stats")
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(30) as pool:
        rs = list(pool.map(lambda i: fleet_poll(gws[i % 3], cid, wait=20), range(30)))
    elapsed = time.monotonic() - t0
    assert [r.status_code for r in rs] == [200] * 30, [r.text for r in rs if r.status_code != 200]
    assert len({r.content for r in rs}) == 1
    upstream = emu.calls("GET /public/export")
    # one GET per 500 ms interval for the fleet (three instances on their own: three)
    print(f"30 long-polls over 3 instances: {upstream} upstream GETs in {elapsed:.2f} s")
    assert upstream <= int(elapsed / 0.5) + 2, (upstream, elapsed)
    assert elapsed < 6, elapsed         # every instance woke on the answer
    assert sum(gw.metric("tidegate_state_wakeups_total") for gw in gws) > 0


def test_plain_polls_over_three_instances_one_upstream_get_per_interval(make_emulator,
                                                                        make_gateway, pg_url):
    emu = make_emulator({"export": {"delay": "20s"}})
    gws = start_fleet(make_gateway, emu, pg_url, extra=POLL_500MS)
    cid = new_export(gws[0], pg_url)
    requests.delete(emu.dex + "/__emulator/stats")
    stop = time.monotonic() + 3

    def caller(i):
        n = 0
        while time.monotonic() < stop:
            r = fleet_poll(gws[(i + n) % 3], cid)
            assert r.status_code == 202, r.text
            n += 1
        return n

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(15) as pool:
        polls = sum(pool.map(caller, range(15)))
    elapsed = time.monotonic() - t0
    upstream = emu.calls("GET /public/export")
    print(f"{polls} polls over 3 instances: {upstream} upstream GETs in {elapsed:.2f} s")
    assert polls > 100
    assert upstream <= int(elapsed / 0.5) + 2, (upstream, polls, elapsed)


def test_readyz_and_metrics_tell_the_state_backend(emulator, make_gateway, pg_url):
    (gw,) = start_fleet(make_gateway, emulator, pg_url, n=1)
    new_export(gw, pg_url)
    ready = requests.get(gw.admin + "/readyz", timeout=5).json()
    assert ready["state"] == {"backend": "postgresql", "up": True, "shared": True}
    assert ready["degraded"] is False and ready["ready"] is True
    assert gw.metric("tidegate_state_up", backend="postgresql") == 1
    assert gw.metric("tidegate_state_query_duration_seconds_count", backend="postgresql") > 0
    assert gw.metric("tidegate_state_leases_held") >= 0


def runs_of(gw):
    r = requests.get(gw.sim + "/tidegate/v1/runs", headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["runs"]


def test_runs_api_same_everywhere_and_tracked_once_per_fleet(make_emulator, make_gateway,
                                                             pg_url):
    # checks 2 s and 6 s after submission: the second finds the run completed
    emu = make_emulator({"sim": {"run_time": "5s"}})
    gws = start_fleet(make_gateway, emu, pg_url)
    ids = []
    for gw in gws:
        case = requests.get(gw.sim + "/api/v1/cases/CASE-OM-1", headers=gw.headers(),
                            timeout=10).json()
        r = requests.post(gw.sim + "/api/v1/simulations", json=case, headers=gw.headers(),
                          timeout=10)
        assert r.status_code == 201, r.text
        ids.append(r.json()["simulationId"])
    lists = [runs_of(gw) for gw in gws]
    assert sorted(x["simulationId"] for x in lists[0]) == sorted(ids)
    assert lists[1] == lists[0] and lists[2] == lists[0]
    deadline = time.monotonic() + 30
    while not all(x["status"] == "COMPLETED" for x in runs_of(gws[1])):
        assert time.monotonic() < deadline, runs_of(gws[1])
        time.sleep(0.2)
    lists = [runs_of(gw) for gw in gws]
    assert lists[1] == lists[0] and lists[2] == lists[0]
    checks = [gw.metric("tidegate_run_checks_total", kind="status") for gw in gws]
    assert sorted(checks)[:2] == [0, 0], checks     # one instance tracks
    for sim_id in ids:
        assert emu.calls(f"GET /api/v1/simulations/{sim_id}") <= 3, emu.stats()["calls"]
        assert emu.calls(f"GET /api/v1/simulations/{sim_id}/results") == 1


FLEET_ADMIN = "fleet-admin-key"


def fleet_of(gw, key=FLEET_ADMIN):
    r = requests.get(gw.admin + "/fleet", headers={"Authorization": "Bearer " + key},
                     timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_fleet_endpoint_lists_each_instance_with_the_leads_it_holds(emulator, make_gateway,
                                                                    pg_url):
    import hashlib
    keys = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"],
             "limits": {"rate": 100, "burst": 100}},
            {"name": "ops", "sha256": hashlib.sha256(FLEET_ADMIN.encode()).hexdigest(),
             "services": ["admin"]}]
    gws = [make_gateway(emulator, {"state": {"url": pg_url, "instance": f"gw{i}"},
                                   "keys": keys}) for i in range(2)]
    assert requests.get(gws[0].admin + "/fleet", timeout=5).status_code == 401
    r = requests.get(gws[0].admin + "/fleet", headers=gws[0].headers(), timeout=5)
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN"
    # a limited key's request makes each instance a quota member; one of
    # them takes the run tracker's lead (lead:runs)
    for gw in gws:
        assert requests.post(gw.dex + "/public/v1/export/nope", json={"projectId": "P-DEMO"},
                             headers=gw.headers(), timeout=10).status_code in (404, 429)
    deadline = time.monotonic() + 20
    while True:
        body = fleet_of(gws[0])
        names = [i["instance"] for i in body["instances"]]
        leaders = [i["instance"] for i in body["instances"] if "lead:runs" in i["leads"]]
        if (names == ["gw0", "gw1"] and len(leaders) == 1
                and all(i["liveUntil"] for i in body["instances"])):
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.2)
    assert body["backend"] == "postgresql"
    for i in body["instances"]:
        assert set(i) == {"instance", "self", "liveUntil", "leads", "leadCount",
                          "webhookLeases", "claims"}
        assert i["self"] is (i["instance"] == "gw0")
        assert i["leadCount"] == len(i["leads"]) and i["webhookLeases"] == 0
        assert i["claims"] == 0
    # the other instance sees the same fleet, itself as self
    other = fleet_of(gws[1])
    assert [i["instance"] for i in other["instances"]] == ["gw0", "gw1"]
    assert [i["instance"] for i in other["instances"] if i["self"]] == ["gw1"]
    assert [i["instance"] for i in other["instances"] if "lead:runs" in i["leads"]] == leaders
    # a poll lead of a caller's own token: its key holds a hash of the token,
    # shown as "caller"; a lead that ran out is not shown
    schema = pg_url.rsplit("%3D", 1)[1]
    far, hashed = int(time.time() * 1000) + 600000, "0123456789abcdef" * 2
    subprocess.run(["psql", "-qXc", f"INSERT INTO {schema}.poll_entries (key, leader, lead_until)"
                    f" VALUES ('dex|{hashed}|/public/v1/export/x', 'gw1', {far}),"
                    f" ('dex|gateway|/public/v1/export/y', 'gw1', {far}),"
                    f" ('dex|gateway|/public/v1/export/z', 'gw1', 1)"],
                   check=True, capture_output=True, timeout=30)
    r = requests.get(gws[0].admin + "/fleet", headers={"Authorization": "Bearer " + FLEET_ADMIN},
                     timeout=10)
    (gw1,) = [i for i in r.json()["instances"] if i["instance"] == "gw1"]
    assert [k for k in gw1["leads"] if k.startswith("dex|")] == [
        "dex|caller|/public/v1/export/x", "dex|gateway|/public/v1/export/y"]
    assert hashed not in r.text
    access = [e for e in gws[0].log_lines() if e.get("event") == "access"
              and e.get("path") == "/fleet"]
    assert access and all(e["op"] == "fleet" for e in access)
