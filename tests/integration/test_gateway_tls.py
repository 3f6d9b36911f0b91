"""TLS to the vendor: the gateway verifies the upstream certificate against a
configured CA and the host name, refuses a wrong name or an unknown CA with a
502 (nothing is sent), and can be told not to verify."""
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
    return requests.get(gw.dex + "/public/export",
                        params={"correlationId": "x-" + uuid.uuid4().hex},
                        headers=gw.headers(), timeout=15)


def test_self_signed_ca_works(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki)
    gw = gateway_to(make_gateway, emu, url, ca_file=pki["ca"])
    for _ in range(5):
        r = get_export(gw)
        assert r.status_code == 404, r.text          # the emulator's answer, over TLS
    assert emu.calls("GET /public/export") == 5
    assert emu.calls("POST /public/v1/authenticate") == 1


def test_wrong_host_name_is_refused(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki, "wrong_cert", "wrong_key")
    gw = gateway_to(make_gateway, emu, url, ca_file=pki["ca"])
    r = get_export(gw)
    assert r.status_code == 503                       # no vendor token can be had
    assert r.json()["error"] == "TOKEN_UNAVAILABLE"
    assert emu.calls("POST /public/v1/authenticate") == 0
    assert "mismatch" in gw.read_log()


def test_unknown_ca_is_refused(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki)
    gw = make_gateway(emu, {"dex": {"url": url, "username": None, "password_file": None},
                            "tls": {"ca_file": pki["other"]}})
    r = get_export(gw)
    assert r.status_code == 502
    assert r.json()["error"] == "UPSTREAM_UNREACHABLE"
    assert emu.calls("GET /public/export") == 0
    assert "upstream_tls_failed" in gw.read_log()


def test_verification_can_be_turned_off(make_emulator, make_gateway, pki):
    emu, url = tls_emulator(make_emulator, pki)
    gw = gateway_to(make_gateway, emu, url, ca_file=pki["other"], verify=False)
    assert get_export(gw).status_code == 404
