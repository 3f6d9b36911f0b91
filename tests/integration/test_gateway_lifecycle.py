"""The gateway's lifecycle as a load balancer and an operator see it: on
SIGTERM /readyz answers 503 for drain_delay while the listeners still accept
and serve, then the drain; SIGHUP's outcome in
tidegate_config_last_reload_successful and its timestamp; a changed listen
address rebound on SIGHUP; the pid file and `tidegate -s`; the version line
first in the log; `-T`, the effective configuration with secrets redacted."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import requests

from conftest import BUILD, ROOT, ROOT_USER, TEST_KEY_SHA, free_port, to_yaml
from test_gateway_drain import in_thread
from test_gateway_metrics import promtool_check


def wait_event(gw, event, n=1, timeout=5.0):
    """Until the log holds n lines of event; they are returned."""
    deadline = time.monotonic() + timeout
    while True:
        got = [e for e in gw.log_lines() if e.get("event") == event]
        if len(got) >= n:
            return got
        assert time.monotonic() < deadline, f"no {event}:\n" + gw.read_log()
        time.sleep(0.02)


def readyz(gw):
    r = requests.get(gw.admin + "/readyz", timeout=2)
    return r.status_code, r.json()


def refused(url, timeout=1):
    """1 when a new connection to url is refused."""
    try:
        requests.get(url, timeout=timeout)
    except requests.ConnectionError:
        return True
    return False


def test_drain_delay_readyz_503_while_listeners_serve(emulator, make_gateway):
    delay = 1.5
    gw = make_gateway(emulator, {"drain_delay": "1500ms", "drain_timeout": "10s"})
    gw.wait_tokens()
    gw.own("x", "y")
    assert readyz(gw)[0] == 200
    t0 = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    while True:                                  # the flip, measured
        status, body = readyz(gw)
        if status == 503:
            break
        assert time.monotonic() - t0 < 0.02, body
    flipped = time.monotonic() - t0
    assert flipped < 0.02, flipped                # measured: about 1 ms
    assert body["status"] == "draining" and body["draining"] is True
    assert body["ready"] is False
    assert delay * 1000 - 100 <= body["listeners_stop_in_ms"] <= delay * 1000, body
    assert requests.get(gw.admin + "/healthz", timeout=2).status_code == 200
    # the data listener accepts new connections and serves during the delay
    time.sleep(0.5)
    with requests.Session() as s:
        r = s.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers(), timeout=5)
    assert r.status_code == 404 and r.headers.get("Connection") != "close", r.text
    status, body = readyz(gw)
    assert status == 503 and 0 < body["listeners_stop_in_ms"] < (delay - 0.4) * 1000, body
    # a request in flight when the delay ends is answered
    while time.monotonic() - t0 < delay - 0.3:
        time.sleep(0.01)
    emulator.fault(path="/public/export", latencyMs=1200, count=1)
    th, slow = in_thread(lambda: requests.get(gw.dex + "/public/export?correlationId=y",
                                              headers=gw.headers(), timeout=10))
    # the listeners stop accepting when the delay ends, not before
    last_ok = None
    while not refused(gw.dex + "/healthz", timeout=0.5):
        last_ok = time.monotonic() - t0
        assert last_ok < delay + 0.5, "still accepting after the delay"
        time.sleep(0.01)
    stopped = time.monotonic() - t0
    assert last_ok is not None and last_ok >= delay - 0.05, last_ok
    assert delay <= stopped < delay + 0.1, stopped   # measured: delay + 5 ms
    status, body = readyz(gw)
    assert status == 503 and body["listeners_stop_in_ms"] == 0, body
    th.join()
    assert slow["r"].status_code == 404, slow      # finished through the drain
    assert slow["t"] - t0 > delay + 0.5
    assert gw.proc.wait(timeout=10) == 0
    exited = time.monotonic() - t0
    assert exited < slow["t"] - t0 + 0.2, (exited, slow["t"] - t0)
    events = [e["event"] for e in gw.log_lines() if "event" in e]
    assert "drain_delay" in events and events.index("drain_delay") < events.index("draining")


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_second_sigterm_or_sigint_cuts_the_delay(emulator, make_gateway, second):
    gw = make_gateway(emulator, {"drain_delay": "30s"})
    gw.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert readyz(gw)[0] == 503
    assert not refused(gw.dex + "/healthz")
    t0 = time.monotonic()
    gw.send_signal(second)
    assert gw.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 1.0
    assert any(e.get("event") == "drain_delay_cut" for e in gw.log_lines())


def test_sigint_skips_the_delay(emulator, make_gateway):
    gw = make_gateway(emulator, {"drain_delay": "30s"})
    t0 = time.monotonic()
    gw.send_signal(signal.SIGINT)
    assert gw.proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 1.0
    assert not any(e.get("event") == "drain_delay" for e in gw.log_lines())


RELOAD_OK = "tidegate_config_last_reload_successful"
RELOAD_AT = "tidegate_config_last_reload_success_timestamp_seconds"


def test_reload_metrics_follow_each_sighup(emulator, make_gateway):
    before = time.time()
    gw = make_gateway(emulator)
    text = gw.metrics()
    promtool_check(text)
    assert f"# TYPE {RELOAD_OK} gauge\n" in text and f"# TYPE {RELOAD_AT} gauge\n" in text
    assert f"# HELP {RELOAD_OK} " in text and f"# HELP {RELOAD_AT} " in text
    assert gw.metric(RELOAD_OK) == 1
    started = gw.metric(RELOAD_AT)
    assert before - 1 <= started <= time.time(), (before, started)
    # a refused file: 0, the timestamp of the last one loaded kept
    good = open(gw.config_path).read()
    with open(gw.config_path, "a") as f:
        f.write("bogus: 1\n")
    time.sleep(0.05)
    gw.send_signal(signal.SIGHUP)
    wait_event(gw, "reload_failed")
    assert gw.metric(RELOAD_OK) == 0
    assert gw.metric(RELOAD_AT) == started
    promtool_check(gw.metrics())
    # the file mended: 1 and a new timestamp
    with open(gw.config_path, "w") as f:
        f.write(good)
    time.sleep(0.05)
    sent = time.time()
    gw.send_signal(signal.SIGHUP)
    wait_event(gw, "reloaded")
    assert gw.metric(RELOAD_OK) == 1
    at = gw.metric(RELOAD_AT)
    assert sent - 0.01 <= at <= time.time() and at > started, (sent, at, started)


def tidegate(*args):
    return subprocess.run([os.path.join(BUILD, "tidegate"), *args], capture_output=True,
                          text=True, timeout=20)


def test_version_line_first_in_the_log(emulator, make_gateway):
    gw = make_gateway(emulator, {"log_level": "warn"})
    first = json.loads(gw.read_log().splitlines()[0])
    v = tidegate("--version").stdout.splitlines()
    assert first["event"] == "starting" and first["level"] == "info", first
    assert v[0].startswith(f"tidegate {first['version']}")
    assert v[1] == "features: " + first["features"]
    assert first["config"] == gw.config_path and first["pid"] == gw.proc.pid
    # log_level: warn holds back the rest of the info lines
    assert not any(e.get("event") == "listening" for e in gw.log_lines())


def test_pid_file_and_signal_commands(emulator, make_gateway):
    gw = make_gateway(emulator, {"pid_file": "tidegate.pid"})    # beside the file
    pid_file = os.path.join(gw.tmp, "tidegate.pid")
    assert open(pid_file).read() == f"{gw.proc.pid}\n"
    assert os.stat(pid_file).st_mode & 0o777 == 0o644
    assert not [f for f in os.listdir(gw.tmp) if f.endswith(".tmp")]
    # a second instance of the configuration is refused while this one lives
    second = tidegate("-c", gw.config_path)
    assert second.returncode == 1
    assert f"process {gw.proc.pid}, a running tidegate, holds it" in second.stderr
    assert pid_file in second.stderr
    assert open(pid_file).read() == f"{gw.proc.pid}\n"
    r = tidegate("-s", "reload", "-c", gw.config_path)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r
    wait_event(gw, "reloaded")
    # a file a reload would refuse: reported, nothing sent
    good = open(gw.config_path).read()
    with open(gw.config_path, "a") as f:
        f.write("bogus: 1\n")
    r = tidegate("-s", "reload", "-c", gw.config_path)
    assert r.returncode == 1 and "bogus" in r.stderr and "reload not sent" in r.stderr, r
    time.sleep(0.2)
    assert len(wait_event(gw, "reloaded")) == 1 and not any(
        e.get("event") == "reload_failed" for e in gw.log_lines())
    with open(gw.config_path, "w") as f:
        f.write(good)
    r = tidegate("-s", "stop", "-c", gw.config_path)
    assert r.returncode == 0, r
    assert gw.proc.wait(timeout=10) == 0
    assert not os.path.exists(pid_file)
    # the process gone: the file missing, then stale
    r = tidegate("-s", "stop", "-c", gw.config_path)
    assert r.returncode == 1 and f"pid_file {pid_file}: no such file" in r.stderr, r
    with open(pid_file, "w") as f:
        f.write(f"{gw.proc.pid}\n")
    r = tidegate("-s", "reload", "-c", gw.config_path)
    assert r.returncode == 1, r
    assert f"pid_file {pid_file}: process {gw.proc.pid} is not running" in r.stderr


def test_stale_pid_file_is_taken_over(emulator, make_gateway, tmp_path):
    """A file naming a process gone, or one that is not a tidegate (a pid
    reused since), does not stop the start; -s refuses to signal the other."""
    pid_file = str(tmp_path / "tidegate.pid")
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()}\n")               # this test: alive, not a tidegate
    gw = make_gateway(emulator, {"pid_file": pid_file})
    assert open(pid_file).read() == f"{gw.proc.pid}\n"
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()}\n")
    r = tidegate("-s", "stop", "-c", gw.config_path)
    assert r.returncode == 1 and "runs another program" in r.stderr, r
    assert gw.proc.poll() is None


def test_signal_without_pid_file(tmp_path):
    cfg = tmp_path / "tidegate.yaml"
    cfg.write_text("log_level: info\n")
    r = tidegate("-s", "reload", "-c", str(cfg))
    assert r.returncode == 1
    assert f"{cfg} sets no pid_file: nothing to signal" in r.stderr, r
    assert tidegate("-s", "restart", "-c", str(cfg)).returncode == 2


def move(gw, **addrs):
    """SIGHUP with listen.<name> changed to each of addrs (host:port)."""
    cfg = dict(gw.cfg)
    cfg["listen"] = dict(cfg["listen"], **addrs)
    gw.write_config(cfg)
    gw.send_signal(signal.SIGHUP)


def test_sighup_rebinds_a_changed_listen_address(emulator, make_gateway):
    gw = make_gateway(emulator)
    gw.wait_tokens()
    gw.own("x", "y")
    old = gw.dex
    # a keep-alive connection open on the old address, and a request in flight on it
    keep = requests.Session()
    assert keep.get(old + "/public/export?correlationId=x", headers=gw.headers(),
                    timeout=5).status_code == 404
    emulator.fault(path="/public/export", latencyMs=1500, count=1)
    th, slow = in_thread(lambda: requests.get(old + "/public/export?correlationId=y",
                                              headers=gw.headers(), timeout=10))
    time.sleep(0.3)
    new_port = free_port()
    move(gw, dex=f"127.0.0.1:{new_port}")
    wait_event(gw, "reloaded")
    new = f"http://127.0.0.1:{new_port}"
    r = requests.get(new + "/public/export?correlationId=x", headers=gw.headers(), timeout=5)
    assert r.status_code == 404 and r.headers.get("Connection") != "close", r.text
    assert refused(old + "/healthz")
    # the keep-alive connection's next answer is its last
    r = keep.get(old + "/public/export?correlationId=x", headers=gw.headers(), timeout=5)
    assert r.status_code == 404 and r.headers.get("Connection") == "close"
    th.join()
    assert slow["r"].status_code == 404, slow           # finished on the old listener
    assert slow["r"].headers.get("Connection") == "close"
    assert gw.metric("tidegate_config_last_reload_successful") == 1
    listening = [e for e in gw.log_lines() if e.get("event") == "listening"]
    assert listening[-1]["listener"] == "dex" and listening[-1]["port"] == new_port
    keep.close()
    retired = wait_event(gw, "listener_retired")        # its last connection closed
    assert retired[0]["listener"] == "dex"
    assert gw.metric("tidegate_client_connections", listener="dex") == 0
    assert not any(e.get("event") == "reload_listeners_kept" for e in gw.log_lines())
    # the new address is the one drained on SIGTERM
    assert gw.stop() == 0


def test_sighup_to_a_taken_port_keeps_the_old_listener(emulator, make_gateway):
    gw = make_gateway(emulator)
    gw.own("x")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        sim = f"127.0.0.1:{free_port()}"
        move(gw, sim=sim, dex=f"127.0.0.1:{port}")
        failed = wait_event(gw, "reload_failed")
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in \
            failed[0]["reason"], failed
        assert gw.metric("tidegate_config_last_reload_successful") == 0
        assert requests.get(gw.dex + "/public/export?correlationId=x", headers=gw.headers(),
                            timeout=5).status_code == 404
        assert requests.get(gw.sim + "/api/v1/cases", headers=gw.headers(),
                            timeout=5).status_code == 200
        # the sim listener bound for the failed reload was closed again
        assert refused(f"http://{sim}/healthz")
    finally:
        taken.close()


SECRETS = {"dex-pass-7f3a", "sim-secret-9c1e", "pg-pass-5d2b", "pg-listen-8e4c",
           "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}


def secret_config(tmp_path, webhook_secrets=True):
    (tmp_path / "dex-password").write_text("dex-pass-7f3a\n")
    cfg = {
        **ROOT_USER,
        "dex": {"username": "demo", "password_file": "dex-password"},
        "sim": {"client_id": "demo", "client_secret": "sim-secret-9c1e"},
        "state": {"url": "postgresql://gw:pg-pass-5d2b@127.0.0.1:1/tg?sslmode=disable",
                  "listen_url": "postgresql://gw:pg-listen-8e4c@127.0.0.1:2/tg"},
        "keys": [{"name": "a", "sha256": TEST_KEY_SHA}],
        "pid_file": "tidegate.pid",
    }
    if webhook_secrets:
        cfg["webhooks"] = {"secret": "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}
    path = tmp_path / "tidegate.yaml"
    path.write_text(to_yaml(cfg) + "\n")
    return str(path)


def printed_keys(text):
    """{dotted path: value text} of -T's output (its own shape: two spaces a
    level, "- " opening a list item; an item's members as keys[].name; an
    unset key, commented, with the value "(unset)")."""
    out, stack = {}, []
    for line in text.splitlines()[1:]:
        m = re.match(r"^( *)(- )?(# )?([a-z_0-9]+):(?: (.*))?$", line)
        assert m, line
        depth = (len(m.group(1)) + (2 if m.group(2) else 0)) // 2
        if m.group(2):                          # a new item: its level is "[]"
            del stack[depth - 1:]
            stack.append("[]")
        del stack[depth:]
        stack.append(m.group(4))
        out[".".join(stack).replace(".[]", "[]")] = m.group(5) or ""
    return out


def keys_listed():
    """Every key path of -K (a secret by its own name)."""
    out = []
    for line in tidegate("-K").stdout.splitlines()[2:]:
        names = re.findall(r"`([^`]+)`", line.split("|")[1])
        out.append(names[-1] if "(or" in line else names[0])
    return out


def test_print_config_every_key_secrets_redacted(tmp_path):
    path = secret_config(tmp_path)
    r = tidegate("-T", "-c", path)
    assert r.returncode == 0 and r.stderr == "configuration OK\n", r
    for s in SECRETS:
        assert s not in r.stdout and s not in r.stderr
        assert s.split("-")[-1] not in r.stdout       # nor a part of one
    doc = printed_keys(r.stdout)
    for key in keys_listed():
        assert key in doc, key
    # the secrets' keys are kept, their values redacted; defaults shown
    assert doc["dex.password"] == doc["sim.client_secret"] == '"(redacted)"'
    assert doc["webhooks.secret"] == '"(redacted)"'
    assert doc["state.url"] == '"postgresql://gw:(redacted)@127.0.0.1:1/tg?sslmode=disable"'
    assert doc["state.listen_url"] == '"postgresql://gw:(redacted)@127.0.0.1:2/tg"'
    assert doc["drain_timeout"] == "30000ms" and doc["keys[].services"] == '["dex", "sim"]'
    assert doc["pid_file"] == f'"{tmp_path / "tidegate.pid"}"'
    assert doc["tracing.otlp_url"] == "(unset)"
    # the -t of a file with errors: the same errors, exit 1, nothing printed
    with open(path, "a") as f:
        f.write("bogus: 1\n")
    r = tidegate("-T", "-c", path)
    assert r.returncode == 1 and r.stdout == "" and "bogus" in r.stderr


def test_printed_config_loads_again(tmp_path):
    """-T's output is a configuration -t accepts, and prints itself again
    (a webhook secret, redacted, no longer decodes: left out here)."""
    r = tidegate("-T", "-c", secret_config(tmp_path, webhook_secrets=False))
    assert r.returncode == 0, r
    again = tmp_path / "printed.yaml"
    again.write_text(r.stdout)
    t = tidegate("-t", "-c", str(again))
    assert t.returncode == 0 and t.stdout == "configuration OK\n", t
    r2 = tidegate("-T", "-c", str(again))
    assert r2.stdout.split("\n", 1)[1] == r.stdout.split("\n", 1)[1]


def test_readme_reloads_through_the_pid_file():
    """The README signals the quick start's gateway by its pid_file, never by
    a pgrep that reaches every gateway of the host."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert "pgrep" not in readme and "kill -HUP" not in readme
    assert "build/tidegate -s reload -c conf/tidegate.yaml" in readme
    with open(os.path.join(ROOT, "conf", "tidegate.yaml")) as f:
        assert re.search(r"^pid_file: tidegate\.pid ", f.read(), re.M)


def test_sighup_while_draining_opens_no_listener(emulator, make_gateway):
    gw = make_gateway(emulator, {"drain_timeout": "10s"})
    gw.wait_tokens()
    gw.own("x")
    emulator.fault(path="/public/export", latencyMs=1500, count=1)
    th, slow = in_thread(lambda: requests.get(gw.dex + "/public/export?correlationId=x",
                                              headers=gw.headers(), timeout=10))
    time.sleep(0.3)
    gw.send_signal(signal.SIGTERM)
    wait_event(gw, "draining")
    port = free_port()
    move(gw, dex=f"127.0.0.1:{port}")
    wait_event(gw, "reloaded")
    assert refused(f"http://127.0.0.1:{port}/healthz")
    th.join()
    assert slow["r"].status_code == 404
    assert gw.proc.wait(timeout=10) == 0
