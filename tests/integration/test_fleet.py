"""Fleet mode: three gateways on one PostgreSQL (state.url) in front of one
emulator share what a fleet shares: one vendor login per service for a
cold burst spread over the instances, and correlation ownership (a job
created through one instance is its key's on every instance, 404 to other
keys). Runs when PostgreSQL is there (CI runs the tests under
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
    reason="no PostgreSQL (run under pg_virtualenv -v 15, as CI does)")


@pytest.fixture
def pg_url():
    """A schema of its own on the test cluster: the fleet's database."""
    schema = "fleet_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", "-qXc", f"CREATE SCHEMA {schema}"], check=True,
                   capture_output=True, timeout=30)
    yield f"postgresql:///?options=-csearch_path%3D{schema}"
    subprocess.run(["psql", "-qXc", f"DROP SCHEMA {schema} CASCADE"], check=False,
                   capture_output=True, timeout=30)


def start_fleet(make_gateway, emulator, url, n=3):
    keys = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]},
            {"name": "other", "sha256": OTHER_SHA, "services": ["dex", "sim"]}]
    return [make_gateway(emulator, {"state": {"url": url, "instance": f"gw{i}"},
                                    "keys": keys}) for i in range(n)]


def test_cold_burst_over_three_instances_logs_in_once(emulator, make_gateway, pg_url):
    gws = start_fleet(make_gateway, emulator, pg_url)

    def one(i):
        gw = gws[i % len(gws)]
        return requests.get(gw.dex + "/public/export",
                            params={"correlationId": "nope-" + uuid.uuid4().hex},
                            headers=gw.headers(), timeout=30).status_code

    with concurrent.futures.ThreadPoolExecutor(30) as pool:
        codes = list(pool.map(one, range(300)))
    assert set(codes) == {404}          # the emulator's answer for an unknown id
    assert emulator.calls("POST /public/v1/authenticate") == 1
    assert emulator.calls("GET /public/export") == 300
    for gw in gws:
        gw.wait_tokens()
    assert emulator.calls("POST /api/oauth2/token") == 1
    logins = sum(gw.metric("tidegate_token_logins_total", service="dex") for gw in gws)
    assert logins == 1


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
    wait_owner_recorded(pg_url, cid)    # committed just after the creation's answer
    mine = requests.get(b.dex + "/public/export", params={"correlationId": cid},
                        headers=b.headers(), timeout=30)
    assert mine.status_code in (200, 202), mine.text
    theirs = requests.get(c.dex + "/public/export", params={"correlationId": cid},
                          headers=c.headers(OTHER_KEY), timeout=30)
    assert theirs.status_code == 404
    assert theirs.json()["error"] == "NOT_FOUND"
