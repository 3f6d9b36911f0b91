"""TLS on the gateway's own listeners (tls_listen.*): the API listeners
speak HTTPS with the configured certificate (TLS 1.2 or newer) while the
admin listener stays plain unless named; client certificates are required
when tls_listen.client_ca_file is set; a SIGHUP reads the files again for
new connections; files that do not load refuse the start and `-t`.
Certificates come from the pki fixture and the openssl CLI (conftest.py)."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
import requests

from conftest import BUILD, EC, free_port, make_ca, openssl


def https(gw, listener="sim"):
    return f"https://127.0.0.1:{gw.ports[listener]}"


def tls_gateway(make_gateway, emulator, pki, extra=None):
    cfg = {"tls_listen": {"cert_file": pki["cert"], "key_file": pki["key"], **(extra or {})}}
    return make_gateway(emulator, cfg)


def served_cert(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            return t.getpeercert(binary_form=True), t.version()


def test_api_listeners_speak_tls_admin_stays_plain(emulator, make_gateway, pki):
    gw = tls_gateway(make_gateway, emulator, pki)
    r = requests.get(https(gw) + "/api/v1/cases", headers=gw.headers(), verify=pki["ca"],
                     timeout=10)
    assert r.status_code == 200, r.text
    r = requests.post(https(gw, "dex") + "/public/v1/export/activities",
                      json={"projectId": "P-DEMO"}, headers=gw.headers(), verify=pki["ca"],
                      timeout=10)
    assert r.status_code == 200, r.text
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=5)  # plain
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(https(gw) + "/api/v1/cases", headers=gw.headers(), verify=pki["other"],
                     timeout=5)
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200
    _, version = served_cert(gw.ports["sim"])
    assert version in ("TLSv1.2", "TLSv1.3")


def test_tls_1_1_is_refused(emulator, make_gateway, pki):
    gw = tls_gateway(make_gateway, emulator, pki)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot offer TLS 1.1 at all")
    with socket.create_connection(("127.0.0.1", gw.ports["sim"]), timeout=5) as s:
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(s, server_hostname="127.0.0.1")


def client_cert(d, ca_name, name):
    openssl(d, "req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")
    openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca_name}.pem", "-CAkey",
            f"{ca_name}.key", "-CAcreateserial", "-days", "2", "-out", f"{name}.pem")
    return os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")


def test_client_certificates_required_when_a_client_ca_is_set(emulator, make_gateway, pki,
                                                               tmp_path):
    d = str(tmp_path)
    clients = make_ca(d, "clients")
    good = client_cert(d, "clients", "tool-a")
    bad = client_cert(d, "other-ca", "tool-b")      # signed by another CA
    gw = tls_gateway(make_gateway, emulator, pki, {"client_ca_file": clients})
    url = https(gw) + "/api/v1/cases"
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(url, headers=gw.headers(), verify=pki["ca"], timeout=5)
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(url, headers=gw.headers(), verify=pki["ca"], cert=bad, timeout=5)
    r = requests.get(url, headers=gw.headers(), verify=pki["ca"], cert=good, timeout=10)
    assert r.status_code == 200, r.text


def test_sighup_reads_the_certificate_again(emulator, make_gateway, pki, tmp_path):
    d = str(tmp_path)
    cert, key = os.path.join(d, "live.pem"), os.path.join(d, "live.key")
    shutil.copy(pki["cert"], cert)
    shutil.copy(pki["key"], key)
    gw = make_gateway(emulator, {"tls_listen": {"cert_file": cert, "key_file": key}})
    before, _ = served_cert(gw.ports["sim"])
    # a new certificate for the same address, from the same CA
    openssl(d, "req", *EC, "-keyout", "next.key", "-out", "next.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "next.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl(d, "x509", "-req", "-in", "next.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "next.ext", "-out", "next.pem")
    shutil.copy(os.path.join(d, "next.pem"), cert)
    shutil.copy(os.path.join(d, "next.key"), key)
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while served_cert(gw.ports["sim"])[0] == before:
        assert time.monotonic() < deadline, "the new certificate was never served"
        time.sleep(0.1)
    r = requests.get(https(gw) + "/api/v1/cases", headers=gw.headers(), verify=pki["ca"],
                     timeout=10)
    assert r.status_code == 200
    # files that do not load: the whole reload is refused, the context in
    # use kept, and the reason names the file
    with open(key, "w") as f:
        f.write("not a key\n")
    gw.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    [failed] = [e for e in gw.log_lines() if e.get("event") == "reload_failed"]
    assert "tls_listen.key_file" in failed["reason"], failed
    r = requests.get(https(gw) + "/api/v1/cases", headers=gw.headers(), verify=pki["ca"],
                     timeout=10)
    assert r.status_code == 200


def test_a_reload_never_turns_tls_off(emulator, make_gateway, pki):
    """A listener that speaks TLS stays TLS, and client certificates stay
    asked for, until a restart: a reload that would drop them is refused
    (reload_failed names why) and the API key it also changed is not
    applied either; then a reload that keeps TLS is applied."""
    tls = {"cert_file": pki["cert"], "key_file": pki["key"], "client_ca_file": pki["ca"]}
    gw = make_gateway(emulator, {"tls_listen": tls})
    cfg = json.loads(json.dumps(gw.cfg))
    for change in ({"listeners": ["dex"]}, {"cert_file": None, "key_file": None,
                                            "client_ca_file": None},
                   {"client_ca_file": None}):
        cfg["tls_listen"] = {**tls, **change}
        cfg["log_level"] = "warn"
        gw.write_config(cfg)
        n = len([e for e in gw.log_lines() if e.get("event") == "reload_failed"])
        gw.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while len([e for e in gw.log_lines() if e.get("event") == "reload_failed"]) == n:
            assert time.monotonic() < deadline, change
            time.sleep(0.05)
        reason = [e for e in gw.log_lines() if e.get("event") == "reload_failed"][-1]["reason"]
        assert "restart" in reason and ("plain" in reason or "client certificates" in reason)
        assert served_cert(gw.ports["sim"])[0]                    # still TLS
    # a reload that keeps TLS goes through, its log_level too: access lines
    # (info) stop at warn
    fails = len([e for e in gw.log_lines() if e.get("event") == "reload_failed"])
    assert [e for e in gw.log_lines() if e.get("event") == "access"]
    cfg["tls_listen"] = tls
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert len([e for e in gw.log_lines() if e.get("event") == "reload_failed"]) == fails
    n = len(gw.log_lines())
    assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200
    time.sleep(0.3)
    assert not [e for e in gw.log_lines()[n:] if e.get("event") == "access"]


def test_a_key_that_does_not_match_refuses_check_and_start(pki, tmp_path):
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"upstream: remote\ntls_listen:\n  cert_file: {pki['cert']}\n"
                   f"  key_file: {pki['wrong_key']}\n")
    exe = os.path.join(BUILD, "tidegate")
    r = subprocess.run([exe, "-t", "-c", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "tls_listen" in r.stderr
    cfg.write_text(f"upstream: remote\ntls_listen:\n  cert_file: {pki['cert']}\n")
    r = subprocess.run([exe, "-t", "-c", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 1 and "key_file" in r.stderr, r.stderr


def test_sighup_rebinds_a_tls_listener(emulator, make_gateway, pki):
    """A TLS listener moved by SIGHUP speaks TLS at its new address; the old
    address refuses new connections."""
    gw = tls_gateway(make_gateway, emulator, pki)
    old = https(gw)
    port = free_port()
    cfg = dict(gw.cfg)
    cfg["listen"] = dict(cfg["listen"], sim=f"127.0.0.1:{port}")
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while not any(e.get("event") == "reloaded" for e in gw.log_lines()):
        assert time.monotonic() < deadline, gw.read_log()
        time.sleep(0.02)
    r = requests.get(f"https://127.0.0.1:{port}/api/v1/cases", headers=gw.headers(),
                     verify=pki["ca"], timeout=10)
    assert r.status_code == 200, r.text
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/api/v1/cases", headers=gw.headers(), timeout=5)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(old + "/api/v1/cases", headers=gw.headers(), verify=pki["ca"], timeout=5)
