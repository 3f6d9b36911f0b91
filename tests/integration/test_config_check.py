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
    ("limits_count_unknown", "limits:\n  count: some\n",
     ["{f}:3:10: limits.count: must be all or vendor"]),
    ("limits_rate_negative", f"keys:\n  - name: a\n    sha256: {SHA}\n    limits:\n"
     "      rate: -1\n",
     ["{f}:6:13: keys[0].limits.rate: must be between 0 and 1000000"]),
    ("limits_operation_unknown", f"keys:\n  - name: a\n    sha256: {SHA}\n    limits:\n"
     "      operations:\n        exprot:\n          rate: 1\n",
     ["{f}:7:9: keys[0].limits.operations.exprot: unknown key (did you mean "
      "'keys[0].limits.operations.export'?)"]),
    ("route_without_slash", "sim:\n  routes:\n    token: oauth/token\n",
     ["{f}:4:12: sim.routes.token: must start with '/' (did you mean '/oauth/token'?)"]),
    ("route_absolute_url", "dex:\n  routes:\n    export: https://vendor.example/x/{{kind}}\n",
     ["{f}:4:13: dex.routes.export: must be a path starting with '/', not a URL (the "
      "origin belongs in dex.url)"]),
    ("unknown_service", f"keys:\n  - name: a\n    sha256: {SHA}\n    services: [dex, simm]\n",
     ["{f}:5:21: keys[0].services[1]: must be dex, sim, admin or admin-read, got 'simm' (did you mean "
      "'sim'?)"]),
    ("url_scheme", "dex:\n  url: htp:/vendor.example\n",
     ["{f}:3:8: dex.url: scheme must be http or https, got 'htp:/vendor.example' " + WANT_URL]),
    ("auth_url_query", "sim:\n  auth_url: https://login.example/?tenant=1\n",
     ["{f}:3:13: sim.auth_url: 'https://login.example/?tenant=1' has a query; give no '?…' "
      "(the token path is sim.routes.token)"]),
    ("emulator_config_missing", "emulator_config: emu.yaml\n",
     ["{f}:2:18: emulator_config: cannot read {d}/emu.yaml: " + NOENT +
      " (needed by upstream: embedded)"]),
    # the state, checked as the start opens it (root starts with a user)
    ("database_directory_missing", "runs:\n  db: nodir/runs.db\nuser: root\n",
     ["{f}:3:7: runs.db: directory {d}/nodir does not exist"]),
    ("database_directory_read_only", "webhooks:\n  db: ro/tidegate.db\nuser: root\n",
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
     ["{f}:4:18: dex.password_file: cannot use {d}/.: not a regular file (a directory)"]),
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
    # what only the start found before: the keyring, the binds, libpq's parser
    ("two_keys_one_digest", f"keys:\n  - name: a\n    sha256: {SHA}\n  - name: b\n"
     f"    sha256: {SHA.upper()}\n",
     ["{f}:6:13: keys[1].sha256: key \"b\": same digest as key \"a\""]),
    ("two_listeners_one_port", "listen:\n  dex: 127.0.0.1:18080\n  sim: 127.0.0.1:18080\n",
     ["{f}:4:8: listen.sim: 127.0.0.1:18080 overlaps listen.dex (127.0.0.1:18080): each "
      "listener needs its own port"]),
    ("wildcard_and_loopback_one_port", f"keys:\n  - name: a\n    sha256: {SHA}\n"
     "listen:\n  dex: 0.0.0.0:18080\n  admin: 127.0.0.1:18080\n",
     ["{f}:7:10: listen.admin: 127.0.0.1:18080 overlaps listen.dex (0.0.0.0:18080): each "
      "listener needs its own port"]),
    ("ipv6_wildcard_takes_ipv4", f"keys:\n  - name: a\n    sha256: {SHA}\n"
     "listen:\n  sim: '[::]:18081'\n  admin: 127.0.0.1:18081\n",
     ["{f}:7:10: listen.admin: 127.0.0.1:18081 overlaps listen.sim ([::]:18081): each "
      "listener needs its own port"]),
    ("state_url_unknown_parameter", "user: root\nstate:\n  url: "
     "postgresql://tg:hunter2@127.0.0.1/tidegate?bogus=1\n",
     ["{f}:4:8: state.url: not a valid postgresql URL (libpq: invalid URI query parameter)"]),
    ("state_url_bad_escape", "user: root\nstate:\n  url: postgresql://tg:hun%zzter2@127.0.0.1/x\n",
     ["{f}:4:8: state.url: not a valid postgresql URL (libpq: invalid percent-encoded token)"]),
    # behind a pooler (docs/fleet.md): LISTEN needs a direct URL of its own
    ("state_pooler_unknown", "state:\n  url: postgresql://127.0.0.1:6432/x\n  pooler: session\n",
     ["{f}:4:11: state.pooler: must be none or transaction"]),
    ("state_pooler_without_listen_url", "state:\n  url: postgresql://127.0.0.1:6432/x\n"
     "  pooler: transaction\n",
     ["{f}:4:11: state.pooler: transaction needs a postgresql:// state.url and "
      "state.listen_url: a direct connection to the server for LISTEN, which a transaction "
      "pooler does not keep (docs/fleet.md)"]),
    ("state_listen_url_without_url", "state:\n  listen_url: postgresql://tg:hunter2@db/x\n",
     ["{f}:3:15: state.listen_url: must be a postgresql:// URL and goes with a postgresql:// "
      "state.url"]),
    ("state_listen_url_bad_escape", "user: root\nstate:\n  url: postgresql://127.0.0.1/x\n"
     "  listen_url: postgresql://tg:hun%zzter2@127.0.0.1/x\n",
     ["{f}:5:15: state.listen_url: not a valid postgresql URL (libpq: invalid percent-encoded "
      "token)"]),
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
    (never the password in the URL, nor in state.listen_url's, nor does
    the log), and SIGTERM stops it cleanly."""
    path = os.path.join(case_dir, "gw.yaml")
    ports = {k: free_port() for k in ("dex", "sim", "admin")}
    with open(path, "w") as f:
        f.write("upstream: remote\nlog_level: info\n"
                "state:\n  url: postgresql://tg:hunter2@127.0.0.1:1/tidegate\n"
                "  listen_url: postgresql://tg:swordfish@127.0.0.1:2/tidegate\n"
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
        assert "hunter2" not in ready.text and "swordfish" not in ready.text
    finally:
        rc = gw.stop()
    assert rc == 0, gw.read_log()[-3000:]
    log = gw.read_log()
    assert "hunter2" not in log and "swordfish" not in log
    assert '"connection":"listen"' in log      # the listener was tried, and failed




# Files the configuration names that must be refused at once, never read:
# (id, file body after line 1 up to the value, key, the value, how to make
# it, the message after "cannot use|read <path>: "). A named pipe blocked
# the reader until a writer came (a -t that never ended); a file of /proc
# was read and sent to the vendor as the password.
KERNEL = "a file of the kernel's /proc or /sys, refused"
FIFO = "not a regular file (a named pipe)"
SHAPES = [
    ("password_fifo", "dex:\n  username: u\n  password_file: ", "dex.password_file", "pw",
     "fifo", FIFO),
    ("password_proc_environ", "dex:\n  username: u\n  password_file: ", "dex.password_file",
     "/proc/self/environ", None, KERNEL),
    ("secret_symlink_into_proc", "sim:\n  client_id: c\n  client_secret_file: ",
     "sim.client_secret_file", "s", "/proc/self/environ", KERNEL),
    ("secret_under_sys", "webhooks:\n  secret_file: ", "webhooks.secret_file",
     "/sys/kernel/mm/transparent_hugepage/enabled", None, KERNEL),
    ("state_url_fifo", "state:\n  url_file: ", "state.url_file", "url", "fifo", FIFO),
    ("ca_file_fifo", "tls:\n  ca_file: ", "tls.ca_file", "ca.pem", "fifo", FIFO),
    ("config_itself_fifo", None, None, None, None, FIFO),
]


@pytest.mark.parametrize("name,head,key,value,make,why", SHAPES, ids=[c[0] for c in SHAPES])
def test_special_files_are_refused_at_once(case_dir, name, head, key, value, make, why):
    """-t and the start each exit 1 within seconds, naming the file as
    resolved (relative to the configuration's directory) and why."""
    path = os.path.join(case_dir, "gw.yaml")
    if head is None:                 # the configuration file itself is a pipe
        os.mkfifo(path)
        want = [f"{path}: {why}"]
    else:
        if value.startswith("/") and not os.path.isfile(value):
            pytest.skip(f"{value} does not exist here")
        full = value if value.startswith("/") else os.path.join(case_dir, value)
        if make == "fifo":
            os.mkfifo(full)
        elif make is not None:
            os.symlink(make, full)     # a link is followed; where it leads is judged
        with open(path, "w") as f:
            f.write("upstream: remote\n" + head + value + "\n")
        lines = head.split("\n")
        verb = "read" if key == "tls.ca_file" else "use"
        want = [f"{path}:{len(lines) + 1}:{len(lines[-1]) + 1}: {key}: cannot {verb} {full}: "
                f"{why}"]
    for args in (["-t", "-c", path], ["-c", path]):
        r = subprocess.run([EXE] + args, capture_output=True, text=True, timeout=5)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert r.stderr.splitlines() == want, args
        assert "PATH=" not in r.stdout + r.stderr          # nothing of the environment


def test_sighup_with_a_fifo_secret_keeps_serving(emulator, gateway):
    """A reload whose secret file became a named pipe is refused at once,
    logged with the file and why; every listener goes on answering and a
    later reload with a regular file is taken."""
    gateway.wait_tokens()
    secret = os.path.join(gateway.tmp, "dex-password")
    os.remove(secret)
    os.mkfifo(secret)
    gateway.send_signal(signal.SIGHUP)
    failed = wait_event(gateway, "reload_failed", timeout=5)
    assert failed[0]["reason"].endswith(
        f"dex.password_file: cannot use {secret}: {FIFO}"), failed
    assert requests.get(gateway.admin + "/healthz", timeout=2).json() == {"status": "ok"}
    r = requests.get(gateway.dex + "/public/export", params={"correlationId": "x"},
                     headers=gateway.headers(), timeout=2)
    assert r.status_code in (200, 202, 404), r.text      # the dex listener answers
    assert requests.get(gateway.sim + "/api/v1/simulations", headers=gateway.headers(),
                        timeout=2).status_code == 200
    os.remove(secret)
    with open(secret, "w") as f:
        f.write("demo\n")
    gateway.send_signal(signal.SIGHUP)
    wait_event(gateway, "reloaded", timeout=5)


def run_both(path, timeout=30, **kw):
    """-t, then the real start, on one file: both results."""
    return (subprocess.run([EXE, "-t", "-c", path], capture_output=True, text=True,
                           timeout=timeout, **kw),
            subprocess.run([EXE, "-c", path], capture_output=True, text=True,
                           timeout=timeout, **kw))


def test_unknown_user_is_refused_by_the_check(case_dir):
    """-t refuses an account that does not exist, whoever runs it; the start
    as root refuses it with the same line."""
    path = os.path.join(case_dir, "gw.yaml")
    with open(path, "w") as f:
        f.write("upstream: remote\nuser: no-such-account-tg\n")
    want = [f"{path}:2:7: user: no such user 'no-such-account-tg'"]
    r = run(["-t", "-c", path])
    assert (r.returncode, r.stderr.splitlines()) == (1, want), r.stderr
    if os.geteuid() == 0:
        start = run(["-c", path])
        assert (start.returncode, start.stderr.splitlines()) == (1, want), start.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another account needs root")
def test_state_directory_the_user_cannot_write(case_dir):
    """user: nobody and a state directory only root may write: -t (as root)
    checks the state as nobody, as the start opens it, and both refuse with
    the same lines; once nobody owns the directory both accept."""
    path = os.path.join(case_dir, "gw.yaml")
    with open(path, "w") as f:
        f.write("upstream: remote\nuser: nobody\n")
    want = [f"{path}:1:1: {key}: directory {case_dir} is not writable: Permission denied "
            "(checked as user 'nobody')" for key in ("webhooks.db", "runs.db",
                                                    "poll.ownership_db")]
    check, start = run_both(path)
    assert (check.returncode, check.stderr.splitlines()) == (1, want), check.stderr
    assert (start.returncode, start.stderr.splitlines()) == (1, want), start.stderr
    assert sorted(os.listdir(case_dir)) == ["gw.yaml"]          # nothing created
    os.chown(case_dir, 65534, 65534)
    check = run(["-t", "-c", path])
    assert (check.returncode, check.stdout) == (0, "configuration OK\n"), check.stderr


def test_embedded_emulator_port_taken_by_a_listener(case_dir):
    """upstream: embedded binds the emulator's listeners first: a gateway
    listener on one of their ports is refused by -t as the start refused it."""
    path = os.path.join(case_dir, "gw.yaml")
    with open(os.path.join(case_dir, "emu.yaml"), "w") as f:
        f.write("listen:\n  dex: 127.0.0.1:17480\n  sim: 127.0.0.1:17481\n"
                "  design: 127.0.0.1:17482\n  auth: 127.0.0.1:17483\n")
    with open(path, "w") as f:
        f.write("upstream: embedded\nemulator_config: emu.yaml\nlisten:\n"
                "  dex: 127.0.0.1:17480\n  sim: 127.0.0.1:17491\n  admin: 127.0.0.1:17492\n")
    want = [f"{path}:4:8: listen.dex: 127.0.0.1:17480 overlaps the embedded emulator's "
            "listen.dex (127.0.0.1:17480): each listener needs its own port"]
    check, start = run_both(path)
    assert (check.returncode, check.stderr.splitlines()) == (1, want), check.stderr
    assert (start.returncode, start.stderr.splitlines()) == (1, want), start.stderr


def sqlite_db(path):
    """A real SQLite database in WAL mode, about 85 pages of 4 KiB."""
    import sqlite3
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    db.executemany("INSERT INTO t (v) VALUES (?)", [("x" * 1000,) for _ in range(60)])
    db.execute("CREATE INDEX tv ON t (v)")
    db.commit()
    db.close()


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def junk(n):
    return bytes((i * 151 + 89) % 251 for i in range(n))


# How a state database is damaged: (id, the file (default webhooks.db), the
# damage, what the check says after "<file>", None when it is accepted).
MALFORMED = ": database disk image is malformed"
NOT_A_DB = ": file is not a database"
DAMAGED = " is damaged (SQLite's quick_check: "
DB_SHAPES = [
    ("garbage_header", "tidegate.db", lambda p: patch(p, 0, junk(100)), NOT_A_DB),
    ("wrong_magic", "tidegate.db", lambda p: patch(p, 0, b"SQLite format 2\x00"), NOT_A_DB),
    ("bad_page_size", "tidegate.db", lambda p: patch(p, 16, b"\x12\x34"), NOT_A_DB),
    ("text_file", "tidegate.db", lambda p: open(p, "wb").write(b"not a database\n"), NOT_A_DB),
    ("truncated_to_header", "tidegate.db", lambda p: os.truncate(p, 100), MALFORMED),
    ("truncated_mid_page", "tidegate.db", lambda p: os.truncate(p, 4096 * 3 + 1000), MALFORMED),
    ("truncated_at_half", "runs.db",
     lambda p: os.truncate(p, os.path.getsize(p) // 8192 * 4096), MALFORMED),
    ("page_count_too_big", "tidegate.db", lambda p: patch(p, 28, b"\x00\x10\x00\x00"),
     MALFORMED),
    ("garbage_schema_page", "owners.db", lambda p: patch(p, 100, junk(3996)), MALFORMED),
    ("garbage_table_page", "tidegate.db", lambda p: patch(p, 4096 * 2, junk(4096)),
     DAMAGED + "Page 3: "),
    ("zeroed_page", "owners.db", lambda p: patch(p, 4096 * 3, bytes(4096)),
     DAMAGED + "Page 4: "),
    ("garbage_last_page", "tidegate.db",
     lambda p: patch(p, os.path.getsize(p) - 4096, junk(4096)), DAMAGED + "On tree page "),
    ("newer_schema", "runs.db", lambda p: patch(p, 60, b"\x00\x00\x00\x63"),
     ": schema version 99 is newer than this tidegate's ("),
    ("newer_schema_outbox", "tidegate.db", lambda p: patch(p, 60, b"\x00\x00\x00\x63"),
     ": schema version 99 is newer than this tidegate's (3)"),
    ("newer_schema_owners", "owners.db", lambda p: patch(p, 60, b"\x00\x00\x00\x63"),
     ": schema version 99 is newer than this tidegate's (4)"),
    ("not_writable", "tidegate.db", lambda p: os.chmod(p, 0o444), " is not writable: "),
    ("a_directory", "runs.db", lambda p: (os.remove(p), os.mkdir(p)), " is not a regular file"),
    ("zero_length", "tidegate.db", lambda p: open(p, "wb").close(), None),
    ("valid_foreign_table", "tidegate.db", lambda p: None, None),
]
KEY_OF = {"tidegate.db": "webhooks.db", "runs.db": "runs.db", "owners.db": "poll.ownership_db"}


@pytest.mark.parametrize("name,db,damage,why", DB_SHAPES, ids=[c[0] for c in DB_SHAPES])
def test_state_database_shapes_check_and_start_agree(case_dir, name, db, damage, why):
    """A damaged state database is refused by -t, which opens it read-only,
    and by the start with the same line, before anything is written; a
    zero-length file or a sound one is accepted by both (the start serves)."""
    from conftest import free_port
    if name == "not_writable" and os.geteuid() == 0:
        pytest.skip("root writes a read-only file")
    ports = [free_port() for _ in range(3)]
    path = os.path.join(case_dir, "gw.yaml")
    with open(path, "w") as f:
        f.write(f"upstream: remote\nlog_level: warn\nlisten:\n  dex: 127.0.0.1:{ports[0]}\n"
                f"  sim: 127.0.0.1:{ports[1]}\n  admin: 127.0.0.1:{ports[2]}\n" +
                ("user: root\n" if os.geteuid() == 0 else ""))
    full = os.path.join(case_dir, db)
    sqlite_db(full)
    damage(full)
    before = {f: os.stat(os.path.join(case_dir, f)).st_mtime_ns for f in os.listdir(case_dir)}
    check = run(["-t", "-c", path])
    after = {f: os.stat(os.path.join(case_dir, f)).st_mtime_ns for f in os.listdir(case_dir)
             if not f.endswith(("-shm", "-wal"))}
    assert after == before, "the check wrote"
    if why is None:
        assert (check.returncode, check.stdout) == (0, "configuration OK\n"), check.stderr
        proc = subprocess.Popen([EXE, "-c", path], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 15
            while True:
                assert proc.poll() is None, proc.stderr.read()
                try:
                    if requests.get(f"http://127.0.0.1:{ports[2]}/healthz",
                                    timeout=1).status_code == 200:
                        break
                except requests.ConnectionError:
                    pass
                assert time.monotonic() < deadline, "the start did not serve"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0, proc.stderr.read()
        return
    lines = check.stderr.splitlines()
    assert check.returncode == 1 and len(lines) == 1, check.stderr
    assert lines[0].startswith(f"{path}:1:1: {KEY_OF[db]}: {full}{why}"), lines
    start = run(["-c", path])
    assert (start.returncode, start.stderr.splitlines()) == (1, lines), start.stderr


def test_check_while_the_gateway_runs(emulator, gateway):
    """-t on the configuration of a running gateway (before a reload) reads
    its live databases beside it, changes nothing and passes."""
    requests.get(gateway.admin + "/healthz", timeout=5)
    for _ in range(3):
        r = run(["-t", "-c", gateway.config_path])
        assert (r.returncode, r.stdout) == (0, "configuration OK\n"), r.stderr
    assert requests.get(gateway.admin + "/healthz", timeout=5).json() == {"status": "ok"}
    gateway.send_signal(signal.SIGHUP)
    wait_event(gateway, "reloaded", timeout=5)
