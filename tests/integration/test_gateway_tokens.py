"""Gateway credentials: one vendor login for many requests and concurrent cold
starts, refresh before expiry, healing after revocation (401 → refresh →
replay), 503 with Retry-After during login outages, callers' own logins
answered from the cache, and caller authentication with API keys."""
import concurrent.futures
import time
import uuid

import requests

from conftest import TEST_KEY


def get_export(gw, headers=None, cid=None):
    """An export poll for a fresh unknown id (so the poll multiplexer asks the
    vendor every time), recorded as the key's job (a caller's own token needs
    none): the emulator answers 404."""
    if cid is None:
        cid = "nope-" + uuid.uuid4().hex
        if headers is None:
            gw.own(cid)
    return requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                        headers=headers or gw.headers(), timeout=15)


def test_one_login_for_a_thousand_requests(emulator, gateway):
    cids = ["nope-" + uuid.uuid4().hex for _ in range(1000)]
    gateway.own(*cids)
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        codes = list(pool.map(lambda c: get_export(gateway, cid=c).status_code, cids))
    assert set(codes) == {404}              # the emulator's answer for an unknown id
    assert emulator.calls("POST /public/v1/authenticate") == 1
    assert emulator.calls("GET /public/export") == 1000
    assert gateway.metric("tidegate_token_logins_total", service="dex") == 1


def test_concurrent_cold_start_makes_one_login(make_emulator, make_gateway):
    """1,000 requests in flight while the first vendor login is still pending."""
    emu = make_emulator()
    emu.fault(path="/public/v1/authenticate", latencyMs=1500)
    emu.fault(path="/api/oauth2/token", latencyMs=1500)
    gw = make_gateway(emu)
    with concurrent.futures.ThreadPoolExecutor(200) as pool:
        dex = [pool.submit(get_export, gw) for _ in range(1000)]
        sim = [pool.submit(requests.get, gw.sim + "/api/v1/cases", headers=gw.headers(),
                           timeout=30) for _ in range(200)]
        codes = [f.result().status_code for f in dex]
        sim_codes = [f.result().status_code for f in sim]
    assert set(codes) == {404} and set(sim_codes) == {200}
    assert emu.calls("POST /public/v1/authenticate") == 1
    assert emu.calls("POST /api/oauth2/token") == 1
    assert emu.calls("GET /public/export") == 1000


def test_revocation_heals_by_refresh_and_replay(emulator, gateway):
    gateway.wait_tokens()
    assert get_export(gateway).status_code == 404
    requests.post(emulator.dex + "/__emulator/revoke")
    r = get_export(gateway)
    assert r.status_code == 404, r.text      # replayed with a new token, not a 401
    assert emulator.calls("POST /public/v1/authenticate") == 2
    assert emulator.calls("GET /public/export") == 3   # first, refused, replayed
    assert gateway.metric("tidegate_token_replays_total") == 1
    r = requests.get(gateway.sim + "/api/v1/cases", headers=gateway.headers())
    assert r.status_code == 200
    assert emulator.calls("POST /api/oauth2/token") == 2


def test_replayed_post_keeps_its_body(emulator, gateway):
    gateway.wait_tokens()
    assert get_export(gateway).status_code == 404
    requests.post(emulator.dex + "/__emulator/revoke")
    r = requests.post(gateway.dex + "/public/v1/import/activities?projectId=P-DEMO",
                      json=[{"id": "X-1", "siteId": "S-1"}], headers=gateway.headers())
    assert r.status_code == 200, r.text
    assert "correlationId" in r.json()


def test_refresh_ahead_of_expiry(make_emulator, make_gateway):
    emu = make_emulator({"dex": {"token_lifetime": "3s"}})
    gw = make_gateway(emu, {"dex": {"refresh_before": "2s", "refresh_jitter": "0s"}})
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:
        assert get_export(gw).status_code == 404
        time.sleep(0.1)
    assert emu.calls("POST /public/v1/authenticate") >= 2
    assert gw.metric("tidegate_token_replays_total") == 0   # refreshed, never refused


def test_login_outage_is_503_with_retry_after_not_a_hang(make_emulator, make_gateway):
    emu = make_emulator()
    emu.fault(path="/public/v1/authenticate", status=500)
    gw = make_gateway(emu, {"dex": {"login_retry_after": "7s"}})
    t0 = time.monotonic()
    r = get_export(gw)
    assert time.monotonic() - t0 < 5
    assert r.status_code == 503
    assert int(r.headers["Retry-After"]) >= 1
    body = r.json()
    assert body["error"] == "TOKEN_UNAVAILABLE" and body["requestId"]
    assert "demo" not in r.text.replace("dex", "")   # no credentials in the error
    emu.clear_faults()
    deadline = time.monotonic() + 40
    while get_export(gw).status_code != 404:
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_callers_own_logins_answered_from_cache(emulator, gateway):
    url = gateway.dex + "/public/v1/authenticate"
    tokens = {requests.post(url, json={"username": "demo", "password": "demo"}).json()["token"]
              for _ in range(20)}
    assert len(tokens) == 1
    assert emulator.calls("POST /public/v1/authenticate") <= 2   # the gateway's own + one
    tok = tokens.pop()
    r = get_export(gateway, {"Authorization": "Bearer " + tok})   # caller token forwarded
    assert r.status_code == 404
    r = requests.post(url, json={"username": "demo", "password": "wrong"})
    assert r.status_code == 401
    assert gateway.metric("tidegate_login_cache_total", service="dex", result="hit") == 19


def test_callers_own_client_credentials_answered_from_cache(emulator, gateway):
    url = gateway.sim + "/api/oauth2/token"
    form = {"grant_type": "client_credentials", "client_id": "demo",
            "client_secret": "demo-secret"}
    first = requests.post(url, data=form).json()
    time.sleep(1.1)
    second = requests.post(url, data=form).json()
    assert first["access_token"] == second["access_token"]
    assert second["expires_in"] < first["expires_in"]
    assert emulator.stats()["byListener"]["auth"]["POST /api/oauth2/token"] <= 2
    r = requests.post(url, data={**form, "client_secret": "nope"})
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"


def test_a_refused_token_is_not_handed_out_again(emulator, gateway):
    """After the vendor revokes its tokens, a caller's cached login is not
    answered again: the 401 its token got through the gateway forgets that
    token (dex); the 401 the gateway's own token got forgets every cached
    login of the service (sim: the caller never used its token)."""
    gateway.wait_tokens()
    dex = gateway.dex + "/public/v1/authenticate"
    creds = {"username": "demo", "password": "demo"}
    old = requests.post(dex, json=creds, timeout=10).json()["token"]
    assert requests.post(dex, json=creds, timeout=10).json()["token"] == old   # cached
    sim = gateway.sim + "/api/oauth2/token"
    form = {"grant_type": "client_credentials", "client_id": "demo",
            "client_secret": "demo-secret"}
    old_sim = requests.post(sim, data=form, timeout=10).json()["access_token"]
    requests.post(emulator.dex + "/__emulator/revoke", timeout=10)

    r = get_export(gateway, {"Authorization": "Bearer " + old})
    assert r.status_code == 401, r.text                  # the caller's own: relayed
    new = requests.post(dex, json=creds, timeout=10).json()["token"]
    assert new != old
    assert get_export(gateway, {"Authorization": "Bearer " + new}).status_code == 404

    r = requests.get(gateway.sim + "/api/v1/cases", headers=gateway.headers(), timeout=10)
    assert r.status_code == 200                          # the gateway's token: replayed
    new_sim = requests.post(sim, data=form, timeout=10).json()["access_token"]
    assert new_sim != old_sim
    r = requests.get(gateway.sim + "/api/v1/cases",
                     headers={"Authorization": "Bearer " + new_sim}, timeout=10)
    assert r.status_code == 200, r.text
    assert gateway.metric("tidegate_login_cache_total", service="dex", result="miss") == 2
    assert gateway.metric("tidegate_login_cache_total", service="sim", result="miss") == 2


def test_callers_token_requests_reach_the_token_endpoint(emulator, make_gateway):
    """A caller's own token request the cache does not answer (login_cache
    off, or a form it does not read) goes to sim.auth_url, not to sim.url:
    the emulator's token endpoint answers it, and the access line names
    that host."""
    gw = make_gateway(emulator, {"sim": {"login_cache": False}})
    gw.wait_tokens()
    before = emulator.stats()["byListener"]["auth"]["POST /api/oauth2/token"]
    url = gw.sim + "/api/oauth2/token"
    form = {"grant_type": "client_credentials", "client_id": "demo",
            "client_secret": "demo-secret"}
    r = requests.post(url, data=form, headers={"X-Request-Id": "own-token"}, timeout=10)
    assert r.status_code == 200 and r.json()["access_token"], r.text
    # a grant the cache does not read: the vendor's own refusal
    r = requests.post(url, data={"grant_type": "password"}, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
    by = emulator.stats()["byListener"]
    assert by["auth"]["POST /api/oauth2/token"] == before + 2
    assert "POST /api/oauth2/token" not in by["sim"]
    [line] = gw.access_lines(1, lambda e: e.get("id") == "own-token")
    assert line["upstream_addr"] == emulator.auth.split("//")[1], line


def test_api_keys(emulator, make_gateway):
    gw = make_gateway(emulator, {"keys": [
        {"name": "dexonly",
         "sha256": "62af8704764faf8ea82fc61ce9c4c3908b6cb97d463a634e9e587d7c885db0ef",
         "services": ["dex"]}], "dex": {"caller_tokens": False}})
    assert get_export(gw).status_code == 404
    gw.own("x")
    assert requests.get(gw.dex + "/public/export?correlationId=x",
                        headers={"X-Api-Key": TEST_KEY}).status_code == 404
    r = requests.get(gw.dex + "/public/export?correlationId=x")
    assert r.status_code == 401 and r.json()["error"] == "UNAUTHORIZED"
    r = requests.get(gw.dex + "/public/export?correlationId=x",
                     headers={"Authorization": "Bearer not-a-key"})
    assert r.status_code == 401
    r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers())
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN"
    log = gw.read_log()
    assert TEST_KEY not in log and "demo-secret" not in log


def test_a_401_is_replayed_once_only(emulator, gateway):
    """A vendor that refuses every call with 401 while each login gives a
    new token: the caller gets the vendor's 401 after exactly two vendor
    calls (the first, and one replay with a fresh token), one replay
    counted, one login more; never a third call or a loop of logins. The
    same on the simulation API."""
    gateway.wait_tokens()
    cases = (
        ("dex", "/public/v1/authenticate", "GET", "/public/export",
         lambda: get_export(gateway)),
        ("sim", "/api/oauth2/token", "GET", "/api/v1/cases",
         lambda: requests.get(gateway.sim + "/api/v1/cases", headers=gateway.headers(),
                              timeout=15)),
    )
    for svc, login, method, path, call in cases:
        logins = emulator.calls("POST " + login)
        calls = emulator.calls(f"{method} {path}")
        replays = gateway.metric("tidegate_token_replays_total")
        emulator.fault(method=method, path=path, status=401)
        r = call()
        assert r.status_code == 401, (svc, r.text)
        time.sleep(0.5)                          # a third call or login would show by now
        assert emulator.calls(f"{method} {path}") == calls + 2, svc
        assert emulator.calls("POST " + login) == logins + 1, svc
        assert gateway.metric("tidegate_token_replays_total") == replays + 1, svc
        emulator.clear_faults()
