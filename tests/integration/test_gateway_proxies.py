"""tidegate behind a reverse proxy: the example configs in conf/ run as
written (ports and timeouts swapped for the test's), and a long-poll at the
gateway's maximum wait is answered by the gateway (202, its own headers)
before the proxy's read timeout, not by the proxy (504)."""
import os
import subprocess
import time

import pytest
import requests

from conftest import ROOT, Process, free_port

CONF = os.path.join(ROOT, "conf")


def example(name, subs):
    with open(os.path.join(CONF, name)) as f:
        text = f.read()
    for old, new in subs.items():
        assert old in text, f"{name} no longer holds {old!r}"
        text = text.replace(old, new)
    return text


def start_nginx(tmp, gw, read_timeout):
    port = free_port()
    snippet = example("nginx.example.conf", {
        "server 127.0.0.1:8080;": f"server 127.0.0.1:{gw.ports['dex']};",
        "listen 127.0.0.1:8443;": f"listen 127.0.0.1:{port};",
        "proxy_read_timeout 60s;": f"proxy_read_timeout {read_timeout};"})
    d = os.path.join(tmp, f"nginx-{port}")
    os.mkdir(d)
    with open(os.path.join(d, "tidegate.conf"), "w") as f:
        f.write(snippet)
    temps = "".join(f"  {k}_temp_path {d}/{k};\n" for k in
                    ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"daemon off;\nmaster_process off;\npid {d}/nginx.pid;\n"
                f"error_log {d}/error.log warn;\nevents {{ worker_connections 256; }}\n"
                f"http {{\n  access_log off;\n{temps}  include {d}/tidegate.conf;\n}}\n")
    return Process(["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf")],
                   os.path.join(d, "stdout.log"), f"http://127.0.0.1:{port}/"), port


def start_haproxy(tmp, gw, server_timeout, text=None, port=None):
    """HAProxy with conf/haproxy.example.cfg (or text: another
    configuration, the example's ports and timeout swapped where it has
    them) on port (default: a free one)."""
    port = port or free_port()
    subs = {"server gw1 127.0.0.1:8080 check port 9090":
            f"server gw1 127.0.0.1:{gw.ports['dex']} check port {gw.ports['admin']}",
            "bind 127.0.0.1:8443": f"bind 127.0.0.1:{port}",
            "timeout server 60s": f"timeout server {server_timeout}"}
    if text is None:
        cfg = example("haproxy.example.cfg", subs)
    else:
        cfg = text
        for old, new in subs.items():
            cfg = cfg.replace(old, new)
    path = os.path.join(tmp, f"haproxy-{port}.cfg")
    with open(path, "w") as f:
        f.write(cfg)
    return Process(["haproxy", "-db", "-f", path], path + ".log",
                   f"http://127.0.0.1:{port}/"), port


def slow_gateway(make_emulator, make_gateway, overrides=None):
    """A gateway whose long-polls last at most 3 s, in front of a vendor
    whose exports stay in progress far longer."""
    emu = make_emulator({"export": {"delay": "60s"}})
    return make_gateway(emu, {"poll": {"max_wait": "3s"}, **(overrides or {})})


def start_export(base, gw):
    r = requests.post(base + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["correlationId"]


@pytest.fixture
def slow_export(make_emulator, make_gateway):
    """slow_gateway, and a job of it that stays in progress."""
    gw = slow_gateway(make_emulator, make_gateway)
    return gw, start_export(gw.dex, gw)


def long_poll(port, gw, cid):
    t0 = time.monotonic()
    r = requests.get(f"http://127.0.0.1:{port}/public/export",
                     params={"correlationId": cid, "wait": "60"}, headers=gw.headers(),
                     timeout=30)
    return r, time.monotonic() - t0


def assert_gateway_202(r, elapsed):
    assert r.status_code == 202, (r.status_code, r.text)
    assert r.headers.get("X-Tidegate-Poll") == "long-poll"
    assert r.headers["Content-Type"].startswith("application/json")
    r.json()
    # min(60 s, max_wait 3 s) less the 500 ms margin: before the proxy's 3 s
    assert 2.4 < elapsed < 3.0, elapsed


def test_nginx_example_long_poll_at_max_wait_gets_the_gateways_202(tmp_path, slow_export):
    gw, cid = slow_export
    proxy, port = start_nginx(str(tmp_path), gw, "3s")
    try:
        r, elapsed = long_poll(port, gw, cid)
        assert_gateway_202(r, elapsed)
        # the proxy's timeout is real: one below the gateway's answer is a 504
        short, sport = start_nginx(str(tmp_path), gw, "2s")
        try:
            r, elapsed = long_poll(sport, gw, cid)
            assert r.status_code == 504 and "X-Tidegate-Poll" not in r.headers
            assert 1.9 < elapsed < 2.4, elapsed
        finally:
            short.stop()
    finally:
        proxy.stop()


def test_haproxy_example_long_poll_at_max_wait_gets_the_gateways_202(tmp_path, make_emulator,
                                                                    make_gateway):
    """The example sends a PROXY protocol header (send-proxy-v2): the dex
    listener expects one."""
    gw = slow_gateway(make_emulator, make_gateway, {"proxy_protocol": {"listeners": ["dex"]}})
    proxy, port = start_haproxy(str(tmp_path), gw, "3s")
    try:
        cid = start_export(f"http://127.0.0.1:{port}", gw)
        r, elapsed = long_poll(port, gw, cid)
        assert_gateway_202(r, elapsed)
        short, sport = start_haproxy(str(tmp_path), gw, "2s")
        try:
            r, elapsed = long_poll(sport, gw, cid)
            assert r.status_code == 504 and "X-Tidegate-Poll" not in r.headers
        finally:
            short.stop()
    finally:
        proxy.stop()
