"""Emulator core: data exchange login, token checks, the control API, config errors."""
import base64
import json
import os
import subprocess
import time

import requests

from conftest import BUILD


def jwt_claims(token):
    payload = token.split(".")[1]
    payload += "=" * (-len(payload) % 4)
    return json.loads(base64.urlsafe_b64decode(payload))


def test_authenticate_returns_hs256_jwt_with_iat_exp(emulator):
    tok = emulator.token()
    header = json.loads(base64.urlsafe_b64decode(tok.split(".")[0] + "=="))
    claims = jwt_claims(tok)
    assert header == {"alg": "HS256", "typ": "JWT"}
    assert claims["sub"] == "demo"
    assert claims["exp"] - claims["iat"] == 3600
    assert abs(claims["iat"] - time.time()) < 5


def test_authenticate_rejects_bad_credentials_and_bodies(emulator):
    url = emulator.dex + "/public/v1/authenticate"
    r = requests.post(url, json={"username": "demo", "password": "nope"})
    assert r.status_code == 401
    assert r.json()["error"] == "UNAUTHORIZED"
    r = requests.post(url, json={"username": "demo"})
    assert r.status_code == 400 and r.json()["statusCode"] == 400
    r = requests.post(url, data="{not json")
    assert r.status_code == 400 and "invalid JSON" in r.json()["message"]
    r = requests.post(url, json=["demo", "demo"])
    assert r.status_code == 400


def test_every_protected_endpoint_needs_a_valid_token(emulator):
    endpoints = [("POST", "/public/v1/export/activities"), ("GET", "/public/export"),
                 ("POST", "/public/v1/import/activities"), ("GET", "/public/v1/import/status"),
                 ("POST", "/public/v1/import/activities/file"),
                 ("GET", "/public/v1/import/result"),
                 ("GET", "/public/v1/import/activities/failed")]
    tok = emulator.token()
    forged = tok[:-4] + ("AAAA" if not tok.endswith("AAAA") else "BBBB")
    for method, path in endpoints:
        for hdr in ({}, {"Authorization": "Bearer " + forged},
                    {"Authorization": "Bearer garbage"}, {"Authorization": "Basic x"}):
            r = requests.request(method, emulator.dex + path, headers=hdr, json={})
            assert r.status_code == 401, (method, path, hdr)
            assert r.json()["error"] == "UNAUTHORIZED"


def test_expired_token_is_refused(make_emulator):
    emu = make_emulator({"dex": {"token_lifetime": "2s"}})
    hdr = emu.dex_headers()
    r = requests.get(emu.dex + "/public/export?correlationId=x", headers=hdr)
    assert r.status_code != 401
    emu.advance("3s")
    r = requests.get(emu.dex + "/public/export?correlationId=x", headers=hdr)
    assert r.status_code == 401


def test_revoke_invalidates_all_earlier_tokens(emulator):
    old = emulator.dex_headers()
    old_sim = emulator.sim_headers()
    assert requests.post(emulator.dex + "/__emulator/revoke").json() == {"ok": True}
    r = requests.get(emulator.dex + "/public/export?correlationId=x", headers=old)
    assert r.status_code == 401
    r = requests.get(emulator.sim + "/api/v1/cases", headers=old_sim)
    assert r.status_code == 401
    r = requests.get(emulator.dex + "/public/export?correlationId=x",
                     headers=emulator.dex_headers())
    assert r.status_code != 401


def test_unknown_path_is_json_404(emulator):
    r = requests.get(emulator.dex + "/public/v2/nothing")
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "application/json"
    assert r.json()["error"] == "NOT_FOUND"
    r = requests.get(emulator.dex + "/public/v1/authenticate")
    assert r.status_code == 405


def test_stats_count_by_method_and_path_without_query(emulator):
    hdr = emulator.dex_headers()
    for _ in range(3):
        requests.get(emulator.dex + "/public/export?correlationId=abc", headers=hdr)
    s = emulator.stats()
    assert s["calls"]["GET /public/export"] == 3
    assert s["calls"]["POST /public/v1/authenticate"] == 1
    assert s["byListener"]["dex"]["GET /public/export"] == 3
    assert "GET /__emulator/stats" not in s["calls"]
    assert requests.delete(emulator.dex + "/__emulator/stats").status_code == 200
    assert emulator.stats()["calls"] == {}


def test_fault_status_with_retry_after_and_count(emulator):
    emulator.fault(method="POST", path="/public/v1/authenticate", status=429, retryAfter=7,
                   count=2)
    url = emulator.dex + "/public/v1/authenticate"
    body = {"username": "demo", "password": "demo"}
    for _ in range(2):
        r = requests.post(url, json=body)
        assert r.status_code == 429
        assert r.headers["Retry-After"] == "7"
        assert r.json()["statusCode"] == 429
    assert requests.post(url, json=body).status_code == 200
    assert emulator.calls("POST /public/v1/authenticate") == 3


def test_fault_latency_delays_reply(emulator):
    emulator.fault(path="/public/v1/authenticate", latencyMs=400, count=1)
    t0 = time.monotonic()
    emulator.token()
    assert time.monotonic() - t0 >= 0.38
    t0 = time.monotonic()
    emulator.token()
    assert time.monotonic() - t0 < 0.3


def test_fault_latency_client_gone_does_not_crash(emulator):
    emulator.fault(path="/public/v1/authenticate", latencyMs=500, count=3)
    for _ in range(3):
        try:
            requests.post(emulator.dex + "/public/v1/authenticate", json={}, timeout=0.1)
        except requests.Timeout:
            pass
    time.sleep(0.7)
    assert emulator.token()


def test_fault_connection_reset(emulator):
    emulator.fault(path="/public/v1/authenticate", reset=True, count=1)
    try:
        requests.post(emulator.dex + "/public/v1/authenticate", json={}, timeout=2)
        assert False, "expected a connection error"
    except requests.ConnectionError:
        pass
    assert emulator.token()


def test_fault_error_rate_is_a_probability(emulator):
    emulator.fault(path="/public/v1/authenticate", status=503, rate=0.5)
    codes = [requests.post(emulator.dex + "/public/v1/authenticate",
                           json={"username": "demo", "password": "demo"}).status_code
             for _ in range(60)]
    assert 5 < codes.count(503) < 55
    assert set(codes) == {200, 503}
    emulator.clear_faults()
    assert emulator.token()


def test_fault_rules_are_validated(emulator):
    r = requests.post(emulator.dex + "/__emulator/faults", json={"rate": 3})
    assert r.status_code == 400
    r = requests.post(emulator.dex + "/__emulator/faults", json={"listener": "nope"})
    assert r.status_code == 400


def test_clock_advance(emulator):
    before = requests.get(emulator.dex + "/__emulator/clock").json()
    after = emulator.advance("31d")
    assert after["offsetMs"] - before["offsetMs"] == 31 * 86400 * 1000
    r = requests.post(emulator.dex + "/__emulator/clock", json={"advance": "soon"})
    assert r.status_code == 400


def test_config_check_and_errors(tmp_path):
    exe = os.path.join(BUILD, "tidegate-emulator")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([exe, "-t", "-c", os.path.join(root, "conf/emulator.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK"
    bad = tmp_path / "bad.yaml"
    bad.write_text("listen:\n  dex: 127.0.0.1:7080\n  sym: 127.0.0.1:1\n")
    r = subprocess.run([exe, "-t", "-c", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"{bad}:3:3: listen.sym: unknown key (did you mean 'listen.sim'?)" in r.stderr
    bad.write_text("export:\n  delay: soon\n")
    r = subprocess.run([exe, "-t", "-c", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and ":2:10: export.delay: expected a duration" in r.stderr
