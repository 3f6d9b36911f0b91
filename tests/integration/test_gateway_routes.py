"""Gateway routing: every spelling of every operation reaches the configured
upstream path (checked with the emulator's counters), pass-through of unknown
paths, hop-by-hop headers and request ids."""
import uuid

import requests

# (method, canonical path, upstream path the emulator must see); {u} makes each
# poll a new job, so the poll multiplexer asks the vendor every time
DEX_OPS = [
    ("POST", "/authenticate", "POST /public/v1/authenticate"),
    ("POST", "/export/activities", "POST /public/v1/export/activities"),
    ("POST", "/export/work-orders", "POST /public/v1/export/work-orders"),
    ("GET", "/export?correlationId={u}", "GET /public/export"),
    ("POST", "/import/activities?projectId=P-DEMO", "POST /public/v1/import/activities"),
    ("GET", "/import/status?correlationId={u}", "GET /public/v1/import/status"),
    ("GET", "/import/result?correlationId={u}", "GET /public/v1/import/result"),
    ("GET", "/import/failed?correlationId={u}", "GET /public/v1/import/activities/failed"),
    ("GET", "/import/activities/failed?correlationId={u}",
     "GET /public/v1/import/activities/failed"),
]
BODIES = {"authenticate": None, "export": {"projectId": "P-DEMO"},
          "import": [{"id": "R-1", "siteId": "S-1"}]}
PREFIXES = ["/public/v1", "/public", "/api/public/v1", "/api", ""]


def test_every_dex_alias_reaches_the_canonical_upstream_path(emulator, gateway):
    gateway.wait_tokens()
    for prefix in PREFIXES:
        for method, path, upstream in DEX_OPS:
            requests.delete(emulator.dex + "/__emulator/stats")
            # a refused login is never cached, so each one reaches the vendor
            body = next((b for k, b in BODIES.items() if path.startswith("/" + k)), None)
            if "authenticate" in path:
                body = {"username": "demo", "password": "wrong" + prefix}
            u = uuid.uuid4().hex
            gateway.own(u, family="import" if "/import/" in path else "export")
            r = requests.request(method, gateway.dex + prefix + path.format(u=u),
                                 json=body, headers=gateway.headers(), timeout=10)
            assert r.status_code != 502, (prefix, path, r.text)
            calls = emulator.stats()["calls"]
            assert calls.get(upstream) == 1, (prefix, path, calls)


SIM_OPS = [
    ("GET", "/cases", "GET /api/v1/cases"),
    ("GET", "/cases/CASE-OM-1", "GET /api/v1/cases/CASE-OM-1"),
    ("GET", "/simulations", "GET /api/v1/simulations"),
    ("GET", "/simulations/{u}", "GET /api/v1/simulations/{u}"),
    ("GET", "/simulations/{u}/results", "GET /api/v1/simulations/{u}/results"),
]


def test_every_sim_alias_reaches_the_canonical_upstream_path(emulator, gateway):
    gateway.wait_tokens()
    for prefix in ["/api/v1", "/v1", ""]:
        for method, path, upstream in SIM_OPS:
            requests.delete(emulator.dex + "/__emulator/stats")
            u = uuid.uuid4().hex
            gateway.own_run(u)
            r = requests.request(method, gateway.sim + prefix + path.format(u=u),
                                 headers=gateway.headers(), timeout=10)
            assert r.status_code not in (401, 502), (prefix, path, r.text)
            calls = emulator.stats()["byListener"]["sim"]
            assert calls.get(upstream.format(u=u)) == 1, (prefix, path, calls)


def test_configured_route_template_is_used(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"routes": {"export_get": "/public/v1/export"}}})
    gw.own("x")
    requests.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers())
    assert emulator.calls("GET /public/v1/export") == 1
    assert emulator.calls("GET /public/export") == 0


def test_unknown_path_passes_through_with_credentials(emulator, gateway):
    r = requests.get(gateway.dex + "/public/v2/brand-new?x=1", headers=gateway.headers())
    assert r.status_code == 404
    body = r.json()     # the emulator's answer, in the gateway's error body
    assert body["message"] == ("the dex vendor answered 404 Not Found to this request: "
                               "no such endpoint")
    assert body["vendor"]["message"] == "no such endpoint" and body["vendor"]["status"] == 404
    assert body["requestId"] == r.headers["X-Request-Id"]
    assert emulator.calls("GET /public/v2/brand-new") == 1


def test_passthrough_off_refuses_unknown_paths(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"passthrough": False}})
    r = requests.get(gw.dex + "/public/v2/brand-new", headers=gw.headers())
    assert r.status_code == 404
    body = r.json()
    assert body["error"] == "NOT_FOUND" and body["statusCode"] == 404 and body["requestId"]
    assert emulator.calls("GET /public/v2/brand-new") == 0


def test_wrong_method_on_known_path_is_405(gateway):
    """405 names the methods the path takes in Allow (RFC 9110 15.5.6)."""
    r = requests.delete(gateway.dex + "/public/v1/import/status", headers=gateway.headers())
    assert r.status_code == 405
    assert r.json()["error"] == "METHOD_NOT_ALLOWED"
    assert r.headers["Allow"] == "GET"
    r = requests.get(gateway.dex + "/public/v1/export/activities", headers=gateway.headers())
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    r = requests.put(gateway.sim + "/tidegate/v1/sweeps", headers=gateway.headers())
    assert r.status_code == 405 and r.headers["Allow"] == "GET, POST"
    r = requests.post(gateway.sim + "/tidegate/v1/runs", headers=gateway.headers())
    assert r.status_code == 405 and r.headers["Allow"] == "GET"
    r = requests.post(gateway.admin + "/healthz", timeout=5)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"


def test_request_id_is_propagated_or_generated(gateway):
    r = requests.get(gateway.dex + "/public/export?correlationId=x",
                     headers={**gateway.headers(), "X-Request-Id": "abc-123"})
    assert r.headers["X-Request-Id"] == "abc-123"
    r = requests.get(gateway.dex + "/public/export?correlationId=x", headers=gateway.headers())
    assert len(r.headers["X-Request-Id"]) == 36
    r = requests.get(gateway.dex + "/public/export?correlationId=x",
                     headers={**gateway.headers(), "X-Request-Id": "bad id\u00e9"})
    assert len(r.headers["X-Request-Id"]) == 36


def test_sim_failover_to_second_host_when_first_is_down(emulator, make_gateway):
    from conftest import free_port
    gw = make_gateway(emulator, {"sim": {"url": f"http://127.0.0.1:{free_port()}",
                                         "fallback_url": emulator.design}})
    r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    assert emulator.stats()["byListener"]["design"]["GET /api/v1/cases"] == 1


def test_unreachable_upstream_is_502_json(emulator, make_gateway):
    from conftest import free_port
    gw = make_gateway(emulator, {"dex": {"url": f"http://127.0.0.1:{free_port()}",
                                         "username": None, "password_file": None}})
    gw.own("x")
    r = requests.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers(),
                     timeout=10)
    assert r.status_code == 502
    assert r.json()["error"] == "UPSTREAM_UNREACHABLE"
