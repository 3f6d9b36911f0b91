"""`tidegate -t` runs every check the start runs: one table of files that
the gateway refuses, each refused by `-t` (exit 1) with the exact
`file:line:col: key: message` lines (and "did you mean" where a near
spelling exists), and by the real start with the same lines. Several
problems of one file are reported at once, in file order, and a SIGHUP
reload of such a file names them all."""
import os
import signal
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import BUILD, Process, free_port

EXE = os.path.join(BUILD, "tidegate")
SHA = "a" * 64
NOENT = "No such file or directory"
WANT_URL = "(want http://host[:port][/path] or https://…)"

# (id, file body after "upstream: remote\n" on line 1, expected lines);
# {f} is the file's path, {d} its directory.
CASES = [
    ("tls_ca_file_missing", "tls:\n  ca_file: ca.pem\n",
     ["{f}:3:12: tls.ca_file: cannot read {d}/ca.pem: " + NOENT]),
    ("webhooks_ca_file_missing", "webhooks:\n  ca_file: hooks-ca.pem\n",
     ["{f}:3:12: webhooks.ca_file: cannot read {d}/hooks-ca.pem: " + NOENT]),
    ("route_without_slash", "sim:\n  routes:\n    token: oauth/token\n",
     ["{f}:4:12: sim.routes.token: must start with '/' (did you mean '/oauth/token'?)"]),
    ("route_absolute_url", "dex:\n  routes:\n    export: https://vendor.example/x/{{kind}}\n",
     ["{f}:4:13: dex.routes.export: must be a path starting with '/', not a URL (the "
      "origin belongs in dex.url)"]),
    ("unknown_service", f"keys:\n  - name: a\n    sha256: {SHA}\n    services: [dex, simm]\n",
     ["{f}:5:21: keys[0].services[1]: must be dex, sim or admin, got 'simm' (did you mean "
      "'sim'?)"]),
    ("url_scheme", "dex:\n  url: htp:/vendor.example\n",
     ["{f}:3:8: dex.url: scheme must be http or https, got 'htp:/vendor.example' " + WANT_URL]),
    ("auth_url_query", "sim:\n  auth_url: https://login.example/?tenant=1\n",
     ["{f}:3:13: sim.auth_url: 'https://login.example/?tenant=1' has a query; give no '?…' "
      "(the token path is sim.routes.token)"]),
    ("emulator_config_missing", "emulator_config: emu.yaml\n",
     ["{f}:2:18: emulator_config: cannot read {d}/emu.yaml: " + NOENT +
      " (needed by upstream: embedded)"]),
    ("database_directory_missing", "runs:\n  db: nodir/runs.db\n",
     ["{f}:3:7: runs.db: directory {d}/nodir does not exist"]),
    ("database_directory_read_only", "webhooks:\n  db: ro/tidegate.db\n",
     ["{f}:3:7: webhooks.db: directory {d}/ro is not writable: Permission denied"]),
    ("listen_scalar", "listen: 8080\n",
     ["{f}:2:9: listen: must be a mapping of keys (listen.<key>: value, one per line), "
      "not a scalar"]),
    ("listen_list", "listen: [a, b]\n",
     ["{f}:2:9: listen: must be a mapping of keys (listen.<key>: value, one per line), "
      "not a list"]),
    ("pool_scalar", "pool: 5\n",
     ["{f}:2:7: pool: must be a mapping of keys (pool.<key>: value, one per line), "
      "not a scalar"]),
    ("empty_file", None,
     ["{f}:1:1: the file sets nothing (an empty configuration is refused; start from "
      "conf/tidegate.yaml)"]),
    ("log_level", "log_level: verbose\n",
     ["{f}:2:12: log_level: must be debug, info, warn, error or off, got 'verbose'"]),
    ("upstream_choice", None,
     ["{f}:1:11: upstream: must be remote or embedded, got 'embeded' (did you mean "
      "'embedded'?)"]),
    ("webhooks_mode", "webhooks:\n  mode: relai\n",
     ["{f}:3:9: webhooks.mode: must be deliver, forward or relay, got 'relai' (did you mean "
      "'relay'?)"]),
    ("runs_sync", "runs:\n  sync: fast\n",
     ["{f}:3:9: runs.sync: must be full or normal, got 'fast'"]),
    ("key_sha256", "keys:\n  - name: a\n    sha256: abc\n",
     ["{f}:4:13: keys[0].sha256: expected 64 hex digits (the SHA-256 of the key, e.g. "
      "printf %s KEY | sha256sum)"]),
    ("webhooks_allow", "webhooks:\n  allow: [10.0.0.0/99]\n",
     ["{f}:3:10: webhooks.allow: egress allow entry '10.0.0.0/99' is not a valid CIDR or "
      "address"]),
    ("dex_password_file_typo", "dex:\n  username: u\n  pasword_file: pw\n",
     ["{f}:2:1: dex: give both username and its secret, or neither",
      "{f}:4:3: dex.pasword_file: unknown key (did you mean 'dex.password_file'?)"]),
    # a secret file that cannot be used is named as resolved, and only once
    ("dex_password_file_is_a_directory", "dex:\n  username: u\n  password_file: .\n",
     ["{f}:4:18: dex.password_file: cannot use {d}/.: not a regular file"]),
    ("dex_password_file_empty", "dex:\n  username: u\n  password_file: empty-secret\n",
     ["{f}:4:18: dex.password_file: cannot use {d}/empty-secret: the file is empty"]),
    ("sim_client_secret_file_missing", "sim:\n  client_id: c\n  client_secret_file: nope\n",
     ["{f}:4:23: sim.client_secret_file: cannot use {d}/nope: " + NOENT]),
    # bounds as the keys are written: durations and sizes in whole units
    ("bounds_in_units", "max_body: 5\npoll:\n  max_wait: 100d\ntracing:\n"
     "  flush_interval: 5ms\n",
     ["{f}:2:11: max_body: must be between 1KiB and 4GiB",
      "{f}:4:13: poll.max_wait: must be between 0 and 1h",
      "{f}:6:19: tracing.flush_interval: must be between 100ms and 1h"]),
    ("sim_client_secret_file_typo", "sim:\n  client_secret_fil: s\n",
     ["{f}:3:3: sim.client_secret_fil: unknown key (did you mean "
      "'sim.client_secret_file'?)"]),
    ("webhook_section_typo", "webhook:\n  mode: relay\n",
     ["{f}:2:1: webhook: unknown key (did you mean 'webhooks'?)"]),
    # the URL's scheme is checked; the rest, which may hold a password, is never quoted
    ("state_url_scheme", "state:\n  url: mysql://u:hunter2@db/x\n",
     ["{f}:3:8: state.url: must be a postgresql:// URL (without state.url the state is kept "
      "in SQLite files)"]),
]


def as_nobody():
    """Run a child unprivileged when the tests run as root (root writes into
    a read-only directory, so it would not see one)."""
    return {"user": 65534, "group": 65534} if os.geteuid() == 0 else {}


def write_case(d, name, body):
    path = os.path.join(d, "gw.yaml")
    with open(path, "w") as f:
        if name == "empty_file":
            pass
        elif name == "upstream_choice":
            f.write("upstream: embeded\n")
        elif name == "emulator_config_missing":
            f.write("upstream: embedded\n" + body)
        else:
            f.write("upstream: remote\n" + body)
    if name == "dex_password_file_empty":
        with open(os.path.join(d, "empty-secret"), "w") as f:
            f.write("\n")                         # a line end only: nothing left
    if name == "database_directory_read_only":
        os.chmod(d, 0o777)                      # the other databases' directory
        os.mkdir(os.path.join(d, "ro"), 0o555)
    return path


@pytest.fixture
def case_dir():
    # a directory an unprivileged child can read (pytest's tmp_path is 0700)
    d = tempfile.mkdtemp(prefix="tg-check-")
    os.chmod(d, 0o755)
    yield d
    subprocess.run(["rm", "-rf", d], check=False)


def run(args, **kw):
    return subprocess.run([EXE] + args, capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.parametrize("name,body,want", CASES, ids=[c[0] for c in CASES])
def test_check_refuses_what_the_start_refuses(case_dir, name, body, want):
    path = write_case(case_dir, name, body)
    lines = [w.format(f=path, d=case_dir) for w in want]
    kw = as_nobody() if name == "database_directory_read_only" else {}
    r = run(["-t", "-c", path], **kw)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "configuration OK" not in r.stdout
    assert r.stderr.splitlines() == lines
    start = run(["-c", path], **kw)            # the real start, same file
    assert start.returncode == 1, start.stderr[-2000:]
    assert start.stderr.splitlines() == lines


def test_several_problems_are_reported_at_once(case_dir):
    path = os.path.join(case_dir, "gw.yaml")
    with open(path, "w") as f:
        f.write("log_level: loud\nlisten: 8080\ndex:\n  url: htp:/x\n  pasword: p\n"
                "sim:\n  routes:\n    token: oauth/token\nrunz:\n  db: x\n")
    r = run(["-t", "-c", path])
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"{path}:1:12: log_level: must be debug, info, warn, error or off, got 'loud'",
        f"{path}:2:9: listen: must be a mapping of keys (listen.<key>: value, one per "
        "line), not a scalar",
        f"{path}:4:8: dex.url: scheme must be http or https, got 'htp:/x' " + WANT_URL,
        f"{path}:5:3: dex.pasword: unknown key (did you mean 'dex.password'?)",
        f"{path}:8:12: sim.routes.token: must start with '/' (did you mean "
        "'/oauth/token'?)",
        f"{path}:9:1: runz: unknown key (did you mean 'runs'?)",
    ]


def test_relative_ca_file_is_beside_the_config(case_dir, tmp_path):
    """tls.ca_file, like every other path, is relative to the config file,
    not to the working directory."""
    path = os.path.join(case_dir, "gw.yaml")
    with open(os.path.join(case_dir, "ca.pem"), "w") as f:
        f.write("not checked by -t beyond being readable\n")
    with open(path, "w") as f:
        f.write("upstream: remote\ntls:\n  ca_file: ca.pem\n")
    r = run(["-t", "-c", path], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "configuration OK"


def test_embedded_emulator_file_is_checked(case_dir):
    path = os.path.join(case_dir, "gw.yaml")
    emu = os.path.join(case_dir, "emu.yaml")
    with open(emu, "w") as f:
        f.write("listen:\n  dexx: 127.0.0.1:1\n")
    with open(path, "w") as f:
        f.write("upstream: embedded\nemulator_config: emu.yaml\nlog_level: loud\n")
    r = run(["-t", "-c", path])
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"{path}:3:12: log_level: must be debug, info, warn, error or off, got 'loud'",
        f"{emu}:2:3: listen.dexx: unknown key (did you mean 'listen.dex'?)",
    ]


def wait_event(gw, event, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in gw.log_lines() if e.get("event") == event]
        if found:
            return found
        assert time.monotonic() < deadline, f"no {event} in the log:\n{gw.read_log()}"
        time.sleep(0.05)


def test_sighup_names_every_problem_and_keeps_serving(emulator, gateway):
    good = open(gateway.config_path).read()
    with open(gateway.config_path, "w") as f:
        f.write(good + "pool: 5\nrunz: 1\n")
    gateway.send_signal(signal.SIGHUP)
    failed = wait_event(gateway, "reload_failed")
    n = len(good.splitlines())
    p = gateway.config_path
    assert failed[0]["reason"] == (
        f"{p}:{n + 1}:7: pool: must be a mapping of keys (pool.<key>: value, one per "
        f"line), not a scalar; {p}:{n + 2}:1: runz: unknown key (did you mean 'runs'?)")
    assert requests.get(gateway.admin + "/healthz", timeout=5).json() == {"status": "ok"}


def test_postgresql_state_unreachable_at_start(case_dir):
    """state.url passes -t (a postgresql:// URL); a start whose database
    cannot be reached starts all the same, degraded: /readyz says why
    (never the password in the URL, nor does the log), and SIGTERM stops it
    cleanly."""
    path = os.path.join(case_dir, "gw.yaml")
    ports = {k: free_port() for k in ("dex", "sim", "admin")}
    with open(path, "w") as f:
        f.write("upstream: remote\nlog_level: info\n"
                "state:\n  url: postgresql://tg:hunter2@127.0.0.1:1/tidegate\n"
                "listen:\n" + "".join(f"  {k}: 127.0.0.1:{p}\n" for k, p in ports.items()) +
                ("user: root\n" if os.geteuid() == 0 else ""))
    r = run(["-t", "-c", path])
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stderr
    gw = Process([EXE, "-c", path], os.path.join(case_dir, "gw.log"),
                 f"http://127.0.0.1:{ports['admin']}/healthz")
    try:
        deadline = time.monotonic() + 10
        while True:
            ready = requests.get(f"http://127.0.0.1:{ports['admin']}/readyz", timeout=5)
            body = ready.json()
            if "postgresql unavailable" in body.get("reason", "") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert ready.status_code == 200 and body["ready"] is True, body
        assert body["degraded"] is True and body["state"]["up"] is False, body
        assert "postgresql unavailable" in body["reason"], body
        assert "hunter2" not in ready.text
    finally:
        rc = gw.stop()
    assert rc == 0, gw.read_log()[-3000:]
    assert "hunter2" not in gw.read_log()
