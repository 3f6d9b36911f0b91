"""Gateway operations: admin endpoints, config check, the loopback rule,
SIGHUP reload without dropping requests, SIGTERM drain, the embedded emulator,
the access log."""
import os
import signal
import subprocess
import threading
import time

import pytest
import requests

from conftest import BUILD, ROOT, TEST_KEY, free_port


def test_healthz_readyz_metrics(emulator, gateway):
    assert requests.get(gateway.admin + "/healthz").json() == {"status": "ok"}
    deadline = time.monotonic() + 10
    gateway.wait_tokens()
    r = requests.get(gateway.admin + "/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True
    assert r.json()["services"] == {"dex": "token held", "sim": "token held"}
    assert r.json()["vendor"] == {"dex": "up", "sim": "up"}
    assert r.json()["state"] == {"backend": "sqlite", "up": True, "shared": False}
    assert r.json()["degraded"] is False
    gateway.own("x")
    requests.get(gateway.dex + "/public/export?correlationId=x", headers=gateway.headers())
    m = gateway.metrics()
    assert 'tidegate_requests_total{service="dex",op="export_get",code="404"} 1' in m
    assert 'tidegate_request_duration_seconds_count{service="dex",op="export_get"} 1' in m
    assert 'tidegate_upstream_connections{service="dex",state="idle"}' in m
    assert "# TYPE tidegate_requests_total counter" in m
    assert 'tidegate_state_up{backend="sqlite"} 1' in m
    assert 'tidegate_vendor_up{service="dex"} 1' in m


def test_readyz_reports_failing_login(make_emulator, make_gateway):
    emu = make_emulator()
    emu.fault(path="/public/v1/authenticate", status=500)
    gw = make_gateway(emu)
    time.sleep(0.5)
    r = requests.get(gw.admin + "/readyz")
    # ready means the instance can serve (the runs API, cached answers, the
    # simulation service): the vendor's trouble is said beside it
    assert r.status_code == 200 and r.json()["ready"] is True
    assert r.json()["services"]["dex"] in ("vendor login failing", "logging in")
    assert r.json()["vendor"]["dex"] in ("login failing", "logging in")
    assert r.json()["vendor"]["sim"] == "up"
    assert gw.metric("tidegate_vendor_up", service="dex") == 0


def test_readyz_tells_a_vendor_gone_after_start(make_emulator, make_gateway):
    emu = make_emulator()
    gw = make_gateway(emu, {"failover": {"eject_after": 0}})
    gw.wait_tokens()
    cid = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                        headers=gw.headers(), timeout=10).json()["correlationId"]
    emu.fault(listener="dex", reset=True)
    r = requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                     headers=gw.headers(), timeout=10)
    assert r.status_code == 502
    ready = requests.get(gw.admin + "/readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    assert ready.json()["services"]["dex"] == "token held"
    assert ready.json()["vendor"]["dex"] == "unreachable"
    assert gw.metric("tidegate_vendor_up", service="dex") == 0
    emu.clear_faults()
    requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                 headers=gw.headers(), timeout=10)
    assert requests.get(gw.admin + "/readyz", timeout=5).json()["vendor"]["dex"] == "up"


def test_config_check(tmp_path):
    exe = os.path.join(BUILD, "tidegate")
    r = subprocess.run([exe, "-t", "-c", os.path.join(ROOT, "conf/tidegate.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r.stderr
    r = subprocess.run([exe, "-t", "-c", os.path.join(ROOT, "conf/production.example.yaml")],
                       capture_output=True, text=True, env={**os.environ,
                                                            "TIDEGATE_DEX_PASSWORD": "x"})
    assert r.returncode == 1 and "client_secret" in r.stderr   # the secret file is absent
    bad = tmp_path / "t.yaml"
    bad.write_text("dex:\n  usename: x\n")
    r = subprocess.run([exe, "-t", "-c", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"{bad}:2:3: dex.usename: unknown key "
                                "(did you mean 'dex.username'?)")
    bad.write_text("keys:\n  - name: a\n    sha256: abc\n")
    r = subprocess.run([exe, "-t", "-c", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "keys[0].sha256: expected 64 hex digits" in r.stderr


def test_refuses_public_address_without_keys(tmp_path):
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"listen:\n  dex: 0.0.0.0:{free_port()}\n  sim: 127.0.0.1:{free_port()}\n"
                   f"  admin: 127.0.0.1:{free_port()}\n" +
                   ("user: root\n" if os.geteuid() == 0 else ""))
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-c", str(cfg)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert "not a loopback address and no API keys are configured" in r.stderr


def slow_request(emulator, gw):
    """A request the emulator holds for 1.5 s, in flight when this returns."""
    gw.own("x")
    emulator.fault(path="/public/export", latencyMs=1500, count=1)
    result = {}

    def slow():
        result["r"] = requests.get(gw.dex + "/public/export?correlationId=x",
                                   headers=gw.headers(), timeout=10)

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.3)
    return t, result


def test_sighup_reload_swaps_keys_without_dropping_requests(emulator, make_gateway):
    gw = make_gateway(emulator)
    t, result = slow_request(emulator, gw)
    cfg = dict(gw.cfg)
    cfg["keys"] = [{"name": "new", "sha256":
                    "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92",
                    "services": ["dex"]}]       # sha256("123456")
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    gw.own("y", key="new")
    assert requests.get(gw.dex + "/public/export?correlationId=y",
                        headers=gw.headers("123456")).status_code == 404
    # the old key is no key now: a caller's token, which the vendor refuses
    assert requests.get(gw.dex + "/public/export?correlationId=z",
                        headers=gw.headers()).status_code == 401
    t.join()
    assert result["r"].status_code == 404       # the in-flight request finished
    assert any(e.get("event") == "reloaded" for e in gw.log_lines())


def test_sighup_reload_forgets_remembered_keys_at_once(emulator, make_gateway):
    """The keyring remembers the keys it matched (no hash a request): a key
    used on a kept-alive connection, then replaced by another by a reload,
    is refused on that same connection by the next request (not taken for
    the key now in its place), and a key renamed answers in its new name."""
    gw = make_gateway(emulator)
    gw.own("x")
    s = requests.Session()
    for _ in range(3):
        assert s.get(gw.dex + "/public/export?correlationId=x",
                     headers=gw.headers()).status_code == 404

    def reload(cfg, n):
        gw.write_config(cfg)
        gw.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while sum(e.get("event") == "reloaded" for e in gw.log_lines()) < n:
            assert time.time() < deadline
            time.sleep(0.05)

    cfg = dict(gw.cfg)
    old = cfg["keys"][0]
    cfg["keys"] = [{"name": "other", "services": ["dex"], "sha256":
                    "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92"}]
    reload(cfg, 1)                              # sha256("123456")
    # no key now: a caller's own token, which the vendor refuses
    r = s.get(gw.dex + "/public/export?correlationId=z", headers=gw.headers())
    assert r.status_code == 401, r.text
    assert s.get(gw.dex + "/public/export?correlationId=x",
                 headers=gw.headers("123456")).status_code == 404
    cfg["keys"] = [dict(old, name="renamed")]
    reload(cfg, 2)
    r = s.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers())
    assert r.status_code == 404     # the job's owner is the key's digest, not its name
    metrics = requests.get(gw.admin + "/metrics", timeout=5).text
    assert 'key="renamed"' in metrics


def test_sighup_with_bad_config_keeps_running(emulator, gateway):
    gateway.own("x")
    with open(gateway.config_path, "a") as f:
        f.write("bogus: 1\n")
    gateway.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert requests.get(gateway.dex + "/public/export?correlationId=x",
                        headers=gateway.headers()).status_code == 404
    assert any(e.get("event") == "reload_failed" for e in gateway.log_lines())


def test_sigterm_drains_in_flight_and_exits_zero(emulator, make_gateway):
    gw = make_gateway(emulator)
    t, result = slow_request(emulator, gw)
    gw.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    with pytest.raises(requests.ConnectionError):
        requests.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers(),
                     timeout=2)
    t.join()
    assert result["r"].status_code == 404
    assert gw.proc.wait(timeout=10) == 0


def test_embedded_emulator_quick_start(tmp_path, make_gateway):
    """conf/tidegate.yaml as shipped, on free ports: one process, real HTTP."""
    emu_ports = {k: free_port() for k in ("dex", "sim", "design", "auth")}
    emu_cfg = tmp_path / "emulator.yaml"
    with open(os.path.join(ROOT, "conf/emulator.yaml")) as f:
        text = f.read()
    for name, default in (("dex", 7080), ("sim", 7081), ("design", 7082), ("auth", 7083)):
        text = text.replace(f"127.0.0.1:{default}", f"127.0.0.1:{emu_ports[name]}")
    emu_cfg.write_text(text)
    gw = make_gateway(None, {
        "upstream": "embedded", "emulator_config": str(emu_cfg),
        "dex": {"url": f"http://127.0.0.1:{emu_ports['dex']}"},
        "sim": {"url": f"http://127.0.0.1:{emu_ports['sim']}",
                "fallback_url": f"http://127.0.0.1:{emu_ports['design']}",
                "auth_url": f"http://127.0.0.1:{emu_ports['auth']}"}})
    r = requests.post(gw.dex + "/public/v1/export/activities", json={"projectId": "P-DEMO"},
                      headers=gw.headers(), timeout=10)
    assert r.status_code == 200 and "correlationId" in r.json()
    r = requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(), timeout=10)
    assert r.status_code == 200 and len(r.json()) >= 2


def test_access_log_has_no_secrets(emulator, gateway):
    requests.post(gateway.dex + "/public/v1/authenticate",
                  json={"username": "demo", "password": "demo"})
    requests.post(gateway.dex + "/public/v1/export/nope", json={"projectId": "P-DEMO"},
                  headers=gateway.headers())
    lines = gateway.access_lines(2, lambda e: e["service"] != "admin")
    assert len(lines) == 2
    e = lines[1]
    assert e["service"] == "dex" and e["op"] == "export" and e["status"] == 404
    assert e["key"] == "test" and e["upstream_status"] == 404 and len(e["id"]) == 36
    text = gateway.read_log()
    assert TEST_KEY not in text and "demo-secret" not in text and "eyJ" not in text


def test_configuration_doc_lists_every_key():
    out = subprocess.run([os.path.join(BUILD, "tidegate"), "-K"], capture_output=True,
                         text=True, check=True).stdout
    with open(os.path.join(ROOT, "docs/configuration.md")) as f:
        doc = f.read()
    table = doc.split("<!-- generated by: build/tidegate -K -->\n")[1].split(
        "<!-- end of generated table -->")[0]
    assert table == out, "docs/configuration.md is stale: regenerate with tidegate -K"
