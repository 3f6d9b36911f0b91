"""The gateway's simulation login against a real OAuth2 server (npm
oauth2-mock-server, started by the make_oauth2_server fixture) at
sim.token_url: client authentication in the body (client_secret_post) or by
HTTP Basic with RFC 6749 2.3.1's form-urlencoding (client_secret_basic),
scope and audience sent as configured, refusals and a wrong URL named in the
caller's error and the log. The simulation upstream stays the emulator,
which only accepts tokens it issued itself, so these tests assert on the
login and the token request rather than on a simulation call."""
import base64
import os
import subprocess
from urllib.parse import quote_plus

import requests

from conftest import BUILD


def sim_gateway(make_gateway, emulator, srv, client_id, secret, token_url=None, **sim):
    d = os.path.join(str(srv.record) + ".d")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "sim-secret")
    with open(path, "w") as f:
        f.write(secret + "\n")
    cfg = {"client_id": client_id, "client_secret_file": path,
           "token_url": token_url or srv.url + "/token", **sim}
    return make_gateway(emulator, {"sim": cfg})


def sim_get(gw):
    gw.own_run("no-such-run")       # a run no record names is refused before any login
    return requests.get(gw.sim + "/api/v1/simulations/no-such-run", headers=gw.headers(),
                        timeout=15)


def test_client_secret_post_with_scope_and_audience(make_oauth2_server, make_gateway,
                                                    emulator):
    srv = make_oauth2_server("demo", "demo-secret")
    gw = sim_gateway(make_gateway, emulator, srv, "demo", "demo-secret",
                     scope="api://sim/.default read", audience="https://sim.example/api")
    gw.wait_tokens()                                   # the login was accepted
    [req] = srv.requests()
    assert req["path"] == "/token"
    assert req["content_type"] == "application/x-www-form-urlencoded"
    assert req["client_auth"] == "client_secret_post" and req["accepted"]
    assert req["client_id"] == "demo" and req["secret_ok"]
    assert req["form"] == {"grant_type": "client_credentials", "client_id": "demo",
                           "client_secret": "(present)", "scope": "api://sim/.default read",
                           "audience": "https://sim.example/api"}
    assert emulator.calls("POST /api/oauth2/token") == 0
    assert "demo-secret" not in gw.read_log()


def test_client_secret_basic_form_urlencodes_id_and_secret(make_oauth2_server, make_gateway,
                                                           emulator):
    """A ':' and a space in the id and odd bytes in the secret survive: each
    is form-urlencoded before the Basic scheme joins them with ':'."""
    client_id, secret = "sim app:1", "s3cr et:+%/\u00e9&="
    srv = make_oauth2_server(client_id, secret)
    gw = sim_gateway(make_gateway, emulator, srv, client_id, secret,
                     client_auth="client_secret_basic", scope="runs")
    gw.wait_tokens()
    [req] = srv.requests()
    assert req["client_auth"] == "client_secret_basic" and req["accepted"]
    assert req["basic_user"] == "sim+app%3A1"
    assert req["client_id"] == client_id and req["secret_ok"]
    assert req["form"] == {"grant_type": "client_credentials", "scope": "runs"}


def test_basic_credentials_refused_are_named(make_oauth2_server, make_gateway, emulator):
    srv = make_oauth2_server("demo", "right-secret")
    gw = sim_gateway(make_gateway, emulator, srv, "demo", "wrong-secret",
                     client_auth="client_secret_basic")
    r = sim_get(gw)
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error"] == "TOKEN_UNAVAILABLE"
    assert (f"the vendor rejected the configured credentials (HTTP 401 from POST "
            f"{srv.url}/token, invalid_client)") in body["message"]
    assert r.headers["Retry-After"]
    assert all(q["client_auth"] == "client_secret_basic" and not q["accepted"]
               for q in srv.requests())
    assert emulator.calls("GET /api/v1/simulations/no-such-run") == 0
    log = gw.read_log()
    assert f'"url":"{srv.url}/token"' in log
    assert "wrong-secret" not in log and "wrong-secret" not in r.text


def test_token_endpoint_404_names_the_url(make_oauth2_server, make_gateway, emulator):
    srv = make_oauth2_server("demo", "demo-secret")
    url = srv.url + "/oauth2/v2.0/token"               # the mock serves /token only
    gw = sim_gateway(make_gateway, emulator, srv, "demo", "demo-secret", token_url=url)
    r = sim_get(gw)
    assert r.status_code == 503, r.text
    assert f"the vendor login failed (HTTP 404 from POST {url})" in r.json()["message"]
    assert srv.requests() == []                        # the token handler never ran
    assert f'"url":"{url}"' in gw.read_log()
    assert '"event":"token_login_failed"' in gw.read_log()


def test_auth_url_and_route_still_work(make_oauth2_server, make_gateway, emulator):
    """Without sim.token_url the token URL is sim.auth_url + sim.routes.token."""
    srv = make_oauth2_server("demo", "demo-secret")
    gw = make_gateway(emulator, {"sim": {"auth_url": srv.url,
                                         "routes": {"token": "/token"}}})
    gw.wait_tokens()
    [req] = srv.requests()
    assert req["path"] == "/token" and req["accepted"]
    assert req["client_auth"] == "client_secret_post"
    assert emulator.calls("POST /api/oauth2/token") == 0


def check_config(tmp_path, sim):
    cfg = tmp_path / "t.yaml"
    cfg.write_text("sim:\n" + "".join(f"  {k}: {v}\n" for k, v in sim.items()))
    return subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", str(cfg)],
                          capture_output=True, text=True, timeout=30)


def basic(client_id, secret):
    raw = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


def test_callers_basic_logins_go_to_the_token_url_and_are_cached(make_oauth2_server,
                                                                 make_gateway, emulator):
    """A caller's own client_secret_basic token request reaches sim.token_url
    as it was sent and its answer is cached under the same id and secret as
    a client_secret_post one: one login for three requests. A wrong secret is
    the server's 401, relayed, not cached; Basic beside a client_id that
    names another client is passed through as sent."""
    client_id, secret = "tool:7", "p@ss word+"
    srv = make_oauth2_server(client_id, secret)
    gw = sim_gateway(make_gateway, emulator, srv, client_id, secret)
    gw.wait_tokens()
    n = len(srv.requests())                            # the gateway's own login
    url = gw.sim + "/api/oauth2/token"
    grant = {"grant_type": "client_credentials"}
    got = [requests.post(url, data=grant, headers=basic(client_id, secret), timeout=10)
           for _ in range(2)]
    got.append(requests.post(url, data={**grant, "client_id": client_id,
                                        "client_secret": secret}, timeout=10))
    assert [r.status_code for r in got] == [200, 200, 200], got[0].text
    assert len({r.json()["access_token"] for r in got}) == 1
    [req] = srv.requests()[n:]
    assert req["path"] == "/token" and req["client_auth"] == "client_secret_basic"
    assert req["client_id"] == client_id and req["accepted"] and req["form"] == grant
    assert gw.metric("tidegate_login_cache_total", service="sim", result="hit") == 2
    assert gw.metric("tidegate_login_cache_total", service="sim", result="miss") == 1

    r = requests.post(url, data=grant, headers=basic(client_id, "wrong"), timeout=10)
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    r = requests.post(url, data={**grant, "client_id": "other"},
                      headers=basic(client_id, secret), timeout=10)
    assert r.status_code == 200                        # the server's answer to what was sent
    seen = srv.requests()[n:]
    assert len(seen) == 3 and seen[2]["form"] == {**grant, "client_id": "other"}
    b64 = lambda raw: base64.b64encode(raw).decode()                 # noqa: E731
    odd = ["Basic", "Basic ", "Basic !!!", "Basic " + b64(b"no-colon"),
           "Basic " + b64(b":secret-only"), "Basic " + b64(b"a\0b:c"), "Basic =" * 40]
    for h in odd:                                      # not read: passed on as sent
        r = requests.post(url, data=grant, headers={"Authorization": h}, timeout=10)
        assert r.status_code == 401, (h, r.text)
    assert len(srv.requests()[n:]) == 3 + len(odd)
    assert gw.metric("tidegate_login_cache_total", service="sim", result="hit") == 2
    assert secret not in gw.read_log() and "wrong" not in gw.read_log()


def test_config_checks(tmp_path):
    p = check_config(tmp_path, {"client_auth": "private_key_jwt"})
    assert p.returncode == 1
    assert "sim.client_auth: must be client_secret_post or client_secret_basic" in p.stderr
    for bad in ("ftp://h/token", "https://h/token?x=1", "https://u:p@h/token", "token"):
        p = check_config(tmp_path, {"token_url": f'"{bad}"'})
        assert p.returncode == 1, bad
        assert "sim.token_url: expected http(s)://host[:port]/path" in p.stderr
    p = check_config(tmp_path, {"token_url": "https://login.example.com/t/oauth2/v2.0/token",
                                "client_auth": "client_secret_basic",
                                "scope": '"api://x/.default"', "audience": "https://a/"})
    assert p.returncode == 0, p.stderr
    assert "configuration OK" in p.stdout
