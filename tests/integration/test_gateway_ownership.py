"""Correlation ownership (poll.ownership): a job created through the gateway
with one API key is 404 for every other key however its poll is spelled.
A query the vendor could read more than one way (correlationId repeated in
any spelling, or empty) is refused with 400 before anything is sent; a
percent-encoded or differently-cased spelling is the same job, and so are
the spellings a vendor might read as the same id (its case, a UUID's
hyphens and braces, surrounding spaces); the record is durable, so a
restart of the gateway on the same directory keeps it. The key that
created the job reads it in every case. A job no record names proves no
key (created outside the gateway, or its record gone): refused to every
key, left to the vendor for a caller's own token. Records are bounded per
key (poll.ownership_max): a key that creates past its bound loses its own
oldest records, never another key's."""
import os
import time

import requests

from conftest import TEST_KEY, TEST_KEY_SHA

OTHER_KEY = "other-key"
OTHER_SHA = "580843d03d2216ff1a275d0991bad66e4d1af871171d929e9de604b7959f9bca"
KEYS = [{"name": "a", "sha256": TEST_KEY_SHA, "services": ["dex"]},
        {"name": "b", "sha256": OTHER_SHA, "services": ["dex"]}]
EXPORT = "/public/export"
STATUS = "/public/v1/import/status"


def create_export(gw, key=TEST_KEY):
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(key), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


def create_import(gw, key=TEST_KEY):
    r = requests.post(gw.dex + "/public/v1/import/activities?projectId=P-DEMO",
                      json=[{"id": "ACT-000001", "siteId": "S-1"}], headers=gw.headers(key),
                      timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


def get(gw, path, query, key=TEST_KEY):
    """GET with the query string sent exactly as written."""
    return requests.get(f"{gw.dex}{path}?{query}", headers=gw.headers(key), timeout=10)


def ready(gw, cid):
    """A's export once it is ready (bounded wait)."""
    for _ in range(100):
        r = get(gw, EXPORT, f"correlationId={cid}")
        if r.status_code != 202:
            break
        time.sleep(0.1)
    assert r.status_code == 200, r.text
    assert len(r.json()) == 50
    return r


def pct(s):
    return "".join(f"%{ord(c):02X}" for c in s)


def assert_refused(r, words):
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["statusCode"] == 400 and body["error"] == "VALIDATION_FAILED"
    assert body["requestId"] == r.headers["X-Request-Id"]
    assert body["details"][0]["path"] == ""
    assert words in body["details"][0]["message"], body


def test_repeated_or_empty_correlation_id_is_refused(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": KEYS})
    a, b = create_export(gw), create_export(gw, OTHER_KEY)
    first = ready(gw, a)
    imp = create_import(gw)
    requests.delete(emulator.dex + "/__emulator/stats")
    ambiguous = {
        f"correlationId={b}&correlationId={a}": "more than once",   # B's own id first
        f"correlationId={a}&correlationId={b}": "more than once",
        f"correlationId={a}&correlationId={a}": "more than once",
        f"correlationId={b}&CorrelationID={a}": "more than once",
        f"correlationId={b}&%63orrelationId={a}": "more than once",
        f"correlationId=&correlationId={a}": "empty",
        f"correlationId={a}&correlationId": "more than once",
        "correlationId=": "empty",
        f"correlationId={a}%00": "control character",
    }
    for query, words in ambiguous.items():
        for key in (OTHER_KEY, TEST_KEY):   # ambiguous for everyone, the creator too
            assert_refused(get(gw, EXPORT, query, key), words)
    assert_refused(get(gw, STATUS, f"correlationId={b}&correlationId={imp}", OTHER_KEY),
                   "more than once")
    assert_refused(get(gw, EXPORT, "wait=1", OTHER_KEY), "required")
    # nothing reached the vendor
    calls = emulator.stats()["calls"]
    assert calls.get("GET /public/export", 0) == 0
    assert calls.get("GET /public/v1/import/status", 0) == 0
    # the plain spelling: A's job is A's
    r = get(gw, EXPORT, f"correlationId={a}", OTHER_KEY)
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    assert get(gw, STATUS, f"correlationId={imp}", OTHER_KEY).status_code == 404
    r = get(gw, EXPORT, f"correlationId={a}")
    assert r.status_code == 200 and r.content == first.content
    assert get(gw, STATUS, f"correlationId={imp}").json()["correlationId"] == imp
    assert gw.metric("tidegate_job_owner_refusals_total") == 2


def test_percent_encoded_or_recased_id_is_the_same_job(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": KEYS})
    a = create_export(gw)
    first = ready(gw, a)
    spellings = [f"correlationId={pct(a)}", f"correlationId={pct(a[:1])}{a[1:]}",
                 f"correlationid={a}", f"%63orrelation%49d={a}", f"wait=0&correlationId={a}"]
    for query in spellings:
        r = get(gw, EXPORT, query, OTHER_KEY)
        assert r.status_code == 404, query
        assert r.json()["message"] == "no such job for this API key", query
    n = emulator.calls("GET /public/export")
    for query in spellings:
        r = get(gw, EXPORT, query)
        assert r.status_code == 200 and r.content == first.content, query
        # one canonical upstream request: every spelling shares the cached answer
        assert r.headers["X-Tidegate-Poll"] == "cached", query
    assert emulator.calls("GET /public/export") == n
    # the import family is checked on its own ids; an export id is no
    # import of anybody's: refused before the vendor, to its creator too
    imp = create_import(gw)
    assert get(gw, STATUS, f"correlationId={pct(imp)}", OTHER_KEY).status_code == 404
    assert get(gw, STATUS, f"correlationId={pct(imp)}").json()["correlationId"] == imp
    n = emulator.calls("GET /public/v1/import/status")
    for key in (OTHER_KEY, TEST_KEY):
        r = get(gw, STATUS, f"correlationId={a}", key)
        assert r.status_code == 404 and r.json()["message"] == "no such job for this API key"
    assert emulator.calls("GET /public/v1/import/status") == n


def test_other_spellings_of_the_id_are_the_owners(emulator, make_gateway):
    """A vendor may read other spellings as the same job (a UUID column ignores
    case, hyphens and braces; some frameworks trim values): none of them
    reaches the vendor for another key."""
    gw = make_gateway(emulator, {"keys": KEYS})
    a = create_export(gw)
    first = ready(gw, a)
    requests.delete(emulator.dex + "/__emulator/stats")
    spellings = [a.upper(), a.replace("-", ""), "%7B" + a + "%7D", "%20" + a, a + "+"]
    for spelled in spellings:
        r = get(gw, EXPORT, f"correlationId={spelled}", OTHER_KEY)
        assert r.status_code == 404, spelled
        assert r.json()["message"] == "no such job for this API key", spelled
    assert emulator.calls("GET /public/export") == 0
    assert gw.metric("tidegate_job_owner_refusals_total") == len(spellings)
    # the creator's own spellings go to the vendor, which decides (the
    # emulator matches ids exactly)
    r = get(gw, EXPORT, f"correlationId={a.upper()}")
    assert r.status_code == 404 and "no export with" in r.json()["message"]
    assert emulator.calls("GET /public/export") == 1
    r = get(gw, EXPORT, f"correlationId={a}")
    assert r.status_code == 200 and r.content == first.content


def test_ownership_survives_a_restart(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": KEYS})
    a, imp = create_export(gw), create_import(gw)
    first = ready(gw, a)
    assert gw.metric("tidegate_job_owners") == 2
    assert gw.stop() == 0
    assert os.path.exists(os.path.join(gw.tmp, "owners.db"))
    gw.restart()
    gw.wait_tokens()
    assert gw.metric("tidegate_job_owners") == 2
    for query in (f"correlationId={a}", f"correlationId={pct(a)}"):
        r = get(gw, EXPORT, query, OTHER_KEY)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    assert get(gw, STATUS, f"correlationId={imp}", OTHER_KEY).status_code == 404
    r = get(gw, EXPORT, f"correlationId={a}")
    assert r.status_code == 200 and r.content == first.content
    assert get(gw, STATUS, f"correlationId={imp}").json()["correlationId"] == imp


def test_ownership_holds_without_the_poll_multiplexer(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": KEYS, "poll": {"enabled": False}})
    a = create_export(gw)
    first = ready(gw, a)
    assert get(gw, EXPORT, f"correlationId={a}", OTHER_KEY).status_code == 404
    assert get(gw, EXPORT, f"correlationId={a}&correlationId={a}", OTHER_KEY).status_code == 400
    r = get(gw, EXPORT, f"correlationId={pct(a)}&wait=1")
    assert r.status_code == 200 and r.content == first.content
    assert "X-Tidegate-Poll" not in r.headers


def test_one_key_cannot_push_out_anothers_records(emulator, make_gateway):
    """B creates three times the bound: A's job stays A's, refused to B."""
    gw = make_gateway(emulator, {"keys": KEYS, "poll": {"ownership_max": 5}})
    a = create_export(gw)
    first = ready(gw, a)
    mine = [create_export(gw, OTHER_KEY) for _ in range(15)]
    assert gw.metric("tidegate_job_owners") == 1 + 5
    requests.delete(emulator.dex + "/__emulator/stats")
    r = get(gw, EXPORT, f"correlationId={a}", OTHER_KEY)
    assert r.status_code == 404 and r.json()["message"] == "no such job for this API key"
    r = get(gw, EXPORT, f"correlationId={a}")
    assert r.status_code == 200 and r.content == first.content
    # B's newest five are B's; its older ones lost their record: refused to
    # every key, B too (refuse, never open)
    for cid in mine[-5:]:
        assert get(gw, EXPORT, f"correlationId={cid}", OTHER_KEY).status_code in (200, 202)
    for cid in mine[:10]:
        for key in (OTHER_KEY, TEST_KEY):
            r = get(gw, EXPORT, f"correlationId={cid}", key)
            assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", cid
    assert emulator.calls("GET /public/export") <= 1 + 5
    assert gw.metric("tidegate_job_owner_refusals_total") == 1 + 20


def test_a_job_no_record_names_is_refused_to_every_key(emulator, make_gateway):
    """A job created at the vendor directly (or through a gateway without
    ownership) proves no key: 404 to every key before the vendor is asked;
    a caller with its own vendor token is the vendor's to judge."""
    r = requests.post(emulator.dex + "/public/v1/export/activities",
                      json={"projectId": "P-DEMO"}, headers=emulator.dex_headers(), timeout=10)
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    gw = make_gateway(emulator, {"keys": KEYS})
    a = create_export(gw)
    requests.delete(emulator.dex + "/__emulator/stats")
    for key in (TEST_KEY, OTHER_KEY):
        r = get(gw, EXPORT, f"correlationId={cid}", key)
        assert r.status_code == 404 and r.json()["message"] == "no such job for this API key"
    assert emulator.calls("GET /public/export") == 0
    # the caller's own vendor token: the vendor answers for a job no key owns,
    # the gateway refuses a key's job
    own = {"Authorization": "Bearer " + emulator.token()}
    r = requests.get(f"{gw.dex}{EXPORT}?correlationId={cid}", headers=own, timeout=10)
    assert r.status_code in (200, 202), r.text
    assert emulator.calls("GET /public/export") == 1
    r = requests.get(f"{gw.dex}{EXPORT}?correlationId={a}", headers=own, timeout=10)
    assert r.status_code == 404 and r.json()["message"] == "no such job for this API key"
    assert emulator.calls("GET /public/export") == 1


# ---- simulation runs, per key on the vendor's own routes ----

SIM_KEYS = [{"name": "a", "sha256": TEST_KEY_SHA, "services": ["sim"]},
            {"name": "b", "sha256": OTHER_SHA, "services": ["sim"]}]
SIMS = "/api/v1/simulations"


def submit_run(gw, key=TEST_KEY):
    case = requests.get(gw.sim + "/api/v1/cases/CASE-OM-1", headers=gw.headers(key),
                        timeout=10).json()
    r = requests.post(gw.sim + SIMS, json=case, headers=gw.headers(key), timeout=10)
    assert r.status_code == 201, r.text
    return r.json()["simulationId"]


def sim_get(gw, path, headers):
    return requests.get(gw.sim + path, headers=headers, timeout=10)


def listed(r):
    assert r.status_code == 200, r.text
    return [run["simulationId"] for run in r.json()]


def test_simulation_runs_are_the_submitting_keys(emulator, make_gateway):
    """B neither lists nor reads A's run, nor fetches its results; a run the
    registry does not hold (submitted at the vendor directly) is no key's:
    refused to both, left to the vendor for a caller's own token."""
    gw = make_gateway(emulator, {"keys": SIM_KEYS})
    mine, theirs = submit_run(gw), submit_run(gw, OTHER_KEY)
    own = emulator.sim_headers()
    case = requests.get(emulator.sim + "/api/v1/cases/CASE-OM-1", headers=own,
                        timeout=10).json()
    r = requests.post(emulator.sim + SIMS, json=case, headers=own, timeout=10)
    assert r.status_code == 201, r.text
    outside = r.json()["simulationId"]
    requests.delete(emulator.dex + "/__emulator/stats")
    assert listed(sim_get(gw, SIMS, gw.headers())) == [mine]
    assert listed(sim_get(gw, SIMS, gw.headers(OTHER_KEY))) == [theirs]
    assert listed(sim_get(gw, SIMS + "?caseId=CASE-OM-1", gw.headers(OTHER_KEY))) == [theirs]
    # a caller's own vendor token: the vendor's list, less the keys' runs
    assert listed(sim_get(gw, SIMS, own)) == [outside]
    for sim_id, owner, other in ((mine, TEST_KEY, OTHER_KEY), (theirs, OTHER_KEY, TEST_KEY)):
        for path in (f"{SIMS}/{sim_id}", f"{SIMS}/{sim_id}/results"):
            r = sim_get(gw, path, gw.headers(other))
            assert r.status_code == 404, (path, r.text)
            assert r.json()["message"] == "no such simulation for this API key"
            r = sim_get(gw, path, own)
            assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", path
        r = sim_get(gw, f"{SIMS}/{sim_id}", gw.headers(owner))
        assert r.status_code == 200 and r.json()["simulationId"] == sim_id
        r = sim_get(gw, f"{SIMS}/{sim_id}/results", gw.headers(owner))
        assert r.status_code in (200, 409), r.text      # the vendor's answer
    for key in (TEST_KEY, OTHER_KEY):
        for path in (f"{SIMS}/{outside}", f"{SIMS}/{outside}/results"):
            r = sim_get(gw, path, gw.headers(key))
            assert r.status_code == 404, (path, r.text)
            assert r.json()["message"] == "no such simulation for this API key"
    r = sim_get(gw, f"{SIMS}/{outside}", own)
    assert r.status_code == 200 and r.json()["simulationId"] == outside
    calls = emulator.stats()["calls"]
    # refusals never reached the vendor: only the owners' reads and own-token reads did
    assert sum(n for k, n in calls.items() if k.startswith(f"GET {SIMS}/")) == 5, calls
    assert calls.get(f"GET {SIMS}", 0) == 4


def test_a_lost_submission_names_no_other_keys_run(emulator, make_gateway):
    """A submission sent without an answer is answered with the runs of its
    case made since (one may be it): another key's run is not named."""
    gw = make_gateway(emulator, {"keys": SIM_KEYS})
    theirs = submit_run(gw, OTHER_KEY)
    own = emulator.sim_headers()
    case = requests.get(emulator.sim + "/api/v1/cases/CASE-OM-1", headers=own,
                        timeout=10).json()
    outside = requests.post(emulator.design + SIMS, json=case, headers=own,
                            timeout=10).json()["simulationId"]
    emulator.fault(listener="sim", method="POST", path=SIMS, reset=True, count=1)
    r = requests.post(gw.sim + SIMS, json=case, headers=gw.headers(), timeout=30)
    assert r.status_code == 502, r.text
    assert r.headers["X-Tidegate-Run-Candidates"] == outside
    assert theirs not in r.text and theirs not in r.headers["X-Tidegate-Run-Candidates"]
    assert "check them" in r.json()["message"]
