"""
The emulator's optional TLS listener (listen.dex_tls, tls.cert_file,
tls.key_file): the data exchange routes over HTTPS, counted with the plain
dex listener, verified against the CA that signed the certificate and
refused against any other. Certificates come from the pki fixture (conftest.py).
"""
import pytest
import requests

from conftest import free_port

DEMO = {"username": "demo", "password": "demo"}


def tls_emulator(make_emulator, pki):
    port = free_port()
    emu = make_emulator({"listen": {"dex_tls": f"127.0.0.1:{port}"},
                         "tls": {"cert_file": pki["cert"], "key_file": pki["key"]}})
    return emu, f"https://127.0.0.1:{port}"


def test_authenticate_over_tls(make_emulator, pki):
    emu, base = tls_emulator(make_emulator, pki)
    r = requests.post(base + "/public/v1/authenticate", json=DEMO, verify=pki["ca"],
                      timeout=5)
    assert r.status_code == 200, r.text
    assert r.json()["token"].count(".") == 2
    # Same routes, state and counters as the plain listener.
    assert emu.calls("POST /public/v1/authenticate") == 1
    r = requests.post(emu.dex + "/public/v1/authenticate", json=DEMO, timeout=5)
    assert r.status_code == 200
    assert emu.calls("POST /public/v1/authenticate") == 2


def test_tls_refused_with_another_ca(make_emulator, pki):
    _, base = tls_emulator(make_emulator, pki)
    with pytest.raises(requests.exceptions.SSLError):
        requests.post(base + "/public/v1/authenticate", json=DEMO, verify=pki["other"],
                      timeout=5)


def test_tls_listener_needs_cert_and_key(make_emulator, pki):
    port = free_port()
    with pytest.raises(RuntimeError, match="tls.cert_file and tls.key_file"):
        make_emulator({"listen": {"dex_tls": f"127.0.0.1:{port}"},
                       "tls": {"cert_file": pki["cert"]}})


def test_tls_listener_rejects_mismatched_key(make_emulator, pki, tmp_path):
    port = free_port()
    with pytest.raises(RuntimeError, match="tls.cert_file/tls.key_file"):
        make_emulator({"listen": {"dex_tls": f"127.0.0.1:{port}"},
                       "tls": {"cert_file": pki["cert"],
                               "key_file": str(tmp_path / "other-ca.key")}})
