"""Deeply nested configuration files: the loader refuses nesting past 64
levels with the file:line:col of the first level too many, so neither
`tidegate -t` nor a SIGHUP reload can be crashed by a hostile or broken file
(a file nested 100,000 deep once overflowed the stack). A refused reload
leaves the running gateway on its old configuration."""
import os
import signal
import subprocess
import time

import requests

from conftest import BUILD

DEPTH = 100000


def deep_file(path, prefix="listen: ", opener="[", closer="]"):
    """prefix followed by DEPTH openers (and closers): 100,000 levels deep."""
    with open(path, "w") as f:
        f.write(prefix + opener * DEPTH + closer * DEPTH + "\n")
    return str(path)


def test_config_check_refuses_100000_levels(tmp_path):
    flow = deep_file(tmp_path / "flow.yaml")
    # "listen: " is 8 columns; the top mapping is level 1, so level 65 is
    # the 64th bracket, at column 9 + 63.
    for exe in ("tidegate", "tidegate-emulator"):
        r = subprocess.run([os.path.join(BUILD, exe), "-t", "-c", flow], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1, (exe, r.returncode, r.stderr[-2000:])
        assert r.stderr.strip() == f"{flow}:1:72: nested deeper than 64 levels", exe
        assert "configuration OK" not in r.stdout
    maps = deep_file(tmp_path / "maps.yaml", "dex:\n  url: ", "{a: ", "}")
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", maps],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr[-2000:]
    # line 2: "  url: " is 7 columns, levels 1 and 2 are the mappings above
    assert r.stderr.strip() == f"{maps}:2:{8 + 62 * 4}: nested deeper than 64 levels"


def wait_event(gw, event, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in gw.log_lines() if e.get("event") == event]
        if found:
            return found
        assert time.monotonic() < deadline, f"no {event} in the log:\n{gw.read_log()}"
        time.sleep(0.05)


def test_sighup_with_100000_levels_keeps_serving(emulator, gateway):
    gateway.own("x")
    good = open(gateway.config_path).read()
    deep_file(gateway.config_path)
    gateway.send_signal(signal.SIGHUP)
    failed = wait_event(gateway, "reload_failed")
    assert failed[0]["reason"] == (f"{gateway.config_path}:1:72: nested deeper than 64 "
                                   "levels")
    assert gateway.proc.poll() is None, "the gateway died on the reload"
    # still serving, with the old configuration (its API key, its upstream)
    assert requests.get(gateway.admin + "/healthz", timeout=5).json() == {"status": "ok"}
    r = requests.get(gateway.dex + "/public/export?correlationId=x",
                     headers=gateway.headers(), timeout=5)
    assert r.status_code == 404, r.text          # the vendor's answer, through the old key
    assert emulator.calls("GET /public/export") == 1
    assert not any(e.get("event") == "reloaded" for e in gateway.log_lines())
    # and a good file reloads afterwards
    with open(gateway.config_path, "w") as f:
        f.write(good)
    gateway.send_signal(signal.SIGHUP)
    wait_event(gateway, "reloaded")
    assert requests.get(gateway.dex + "/public/export?correlationId=x",
                        headers=gateway.headers(), timeout=5).status_code == 404
