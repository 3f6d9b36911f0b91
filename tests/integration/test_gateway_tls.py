"""TLS to the vendor: the gateway verifies the upstream certificate against a
configured CA and the host name, refuses a wrong name, an address not in the
certificate or an unknown CA with 502 UPSTREAM_TLS_FAILED naming the reason
(nothing is sent), on the proxy path and for its own vendor logins alike, and
can be told not to verify."""
import uuid

import requests

from conftest import free_port


def tls_emulator(make_emulator, pki, cert="cert", key="key"):
    port = free_port()
    emu = make_emulator({"listen": {"dex_tls": f"127.0.0.1:{port}"},
                         "tls": {"cert_file": pki[cert], "key_file": pki[key]}})
    return emu, f"https://127.0.0.1:{port}"


def gateway_to(make_gateway, emu, url, **tls):
    return make_gateway(emu, {"dex": {"url": url}, "tls": tls})


def get_export(gw):
    cid = "x-" + uuid.uuid4().hex
    gw.own(cid)                 # a job of the key's: the poll goes to the vendor
    return requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                        headers=gw.headers(), timeout=15)


def test_self_signed_ca_works(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki)
    gw = gateway_to(make_gateway, emu, url, ca_file=pki["ca"])
    for _ in range(5):
        r = get_export(gw)
        assert r.status_code == 404, r.text          # the emulator's answer, over TLS
    assert emu.calls("GET /public/export") == 5
    assert emu.calls("POST /public/v1/authenticate") == 1


def assert_tls_refused(r, reason, *more):
    """502 UPSTREAM_TLS_FAILED whose message carries the verifier's reason."""
    assert r.status_code == 502, r.text
    body = r.json()
    assert body["error"] == "UPSTREAM_TLS_FAILED"
    assert body["statusCode"] == 502
    assert "failed TLS verification" in body["message"]
    assert reason in body["message"], body["message"]
    for m in more:
        assert m in body["message"], body["message"]
    assert "demo-secret" not in r.text


def test_wrong_host_name_is_refused(make_emulator, make_gateway, pki):
    """The vendor login meets a certificate for another name (the address is
    not in it): the caller reads the certificate problem, not an outage."""
    emu, url = tls_emulator(make_emulator, pki, "wrong_cert", "wrong_key")
    gw = gateway_to(make_gateway, emu, url, ca_file=pki["ca"])
    r = get_export(gw)
    assert_tls_refused(r, "IP address mismatch", "vendor login endpoint",
                       url + "/public/v1/authenticate")
    assert r.headers["Retry-After"]
    assert emu.calls("POST /public/v1/authenticate") == 0
    log = gw.read_log()
    assert "upstream_tls_failed" in log and "token_login_failed" in log
    assert "mismatch" in log
    assert "demo\n" not in log


def test_unknown_ca_is_refused(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki)
    gw = make_gateway(emu, {"dex": {"url": url, "username": None, "password_file": None},
                            "tls": {"ca_file": pki["other"]}})
    r = get_export(gw)
    assert_tls_refused(r, "certificate verify failed", "the dex vendor API",
                       "unable to get local issuer certificate")
    assert emu.calls("GET /public/export") == 0
    assert "upstream_tls_failed" in gw.read_log()


def test_no_ca_file_uses_system_store(make_emulator, make_gateway, pki):
    """Without tls.ca_file the system store is used, which does not hold the
    test CA: refused, and said so."""
    emu, url = tls_emulator(make_emulator, pki)
    gw = make_gateway(emu, {"dex": {"url": url, "username": None, "password_file": None}})
    r = get_export(gw)
    assert_tls_refused(r, "unable to get local issuer certificate")
    assert emu.calls("GET /public/export") == 0


def test_name_mismatch_on_the_proxy_path(make_emulator, make_gateway, pki):
    """localhost is in the certificate's names, but the name the gateway
    asks for is not: a host name mismatch (by name, not address)."""
    emu, url = tls_emulator(make_emulator, pki, "wrong_cert", "wrong_key")
    url = url.replace("127.0.0.1", "localhost")
    gw = make_gateway(emu, {"dex": {"url": url, "username": None, "password_file": None},
                            "tls": {"ca_file": pki["ca"]}})
    r = get_export(gw)
    assert_tls_refused(r, "hostname mismatch")
    assert emu.calls("GET /public/export") == 0


def test_sim_login_tls_failure_is_named(make_emulator, make_gateway, pki):
    """The simulation token endpoint (sim.token_url) with an unknown CA: the
    sim call is answered 502 UPSTREAM_TLS_FAILED naming the token URL."""
    emu, url = tls_emulator(make_emulator, pki)        # any TLS listener will do
    token_url = url + "/api/oauth2/token"
    gw = make_gateway(emu, {"sim": {"token_url": token_url},
                            "tls": {"ca_file": pki["other"]}})
    gw.own_run("nope")
    r = requests.get(gw.sim + "/api/v1/simulations/nope", headers=gw.headers(), timeout=15)
    assert_tls_refused(r, "unable to get local issuer certificate", token_url)
    assert emu.calls("POST /api/oauth2/token") == 0
    assert emu.calls("GET /api/v1/simulations/nope") == 0


def test_verification_can_be_turned_off(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki)
    gw = gateway_to(make_gateway, emu, url, ca_file=pki["other"], verify=False)
    assert get_export(gw).status_code == 404
