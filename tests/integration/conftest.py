"""
Integration test harness: starts the real binaries on free loopback ports,
waits until they answer, and kills them afterwards, attaching the process log
to the report of a failed test.

Binaries come from $TG_BUILD (default: build/ at the repository root).
"""
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("TG_BUILD", os.path.join(ROOT, "build"))
# An optimised build without sanitizers, for tests that measure memory:
# ASan's shadow memory and quarantine make RSS figures meaningless.
RELEASE_BUILD = os.environ.get("TG_RELEASE_BUILD", os.path.join(ROOT, "build"))


_handed_out = set()


def free_port():
    """A loopback port below the kernel's ephemeral range (where the tests' own
    client connections take their ports, so a port picked there can be taken
    again before the binary binds it), not handed out before in this run."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(max(1024, low - 12000), low)
        if port in _handed_out:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port")


def to_yaml(value, indent=0):
    """A small YAML emitter for the dicts, lists and scalars of test configs."""
    pad = "  " * indent
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{k}:")
                out.append(to_yaml(v, indent + 1))
            else:
                out.append(f"{pad}{k}: {scalar(v)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                lines = to_yaml(item, indent + 1).split("\n")
                out.append(f"{pad}- " + lines[0].lstrip())
                out.extend(lines[1:])
            else:
                out.append(f"{pad}- {scalar(item)}")
    return "\n".join(out)


def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "~"
    if isinstance(v, (dict, list)):
        return "{}" if isinstance(v, dict) else "[]"
    return json.dumps(v) if isinstance(v, str) else str(v)


def deep_merge(base, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_merge(base[k], v)
        else:
            base[k] = v
    return base


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


class Process:
    """A running binary with its log file; stop() kills it and returns the rc."""

    def __init__(self, argv, log_path, health_url):
        self.argv = argv
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.wait_ready(health_url)

    def wait_ready(self, url, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[0]} exited with {self.proc.returncode}:\n"
                                   + self.read_log())
            try:
                requests.get(url, timeout=0.5)
                return
            except requests.RequestException:
                time.sleep(0.05)
        raise RuntimeError(f"{self.argv[0]} did not answer at {url}:\n" + self.read_log())

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def hwm_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


EMULATOR_DEFAULTS = {
    "log_level": "info",
    "users": [{"username": "demo", "password": "demo"}],
    "clients": [{"id": "demo", "secret": "demo-secret"}],
    "projects": [{"id": "P-DEMO", "seed": 1, "sites": 5, "activities": 50}],
    "dex": {"token_lifetime": "1h"},
    "sim": {"token_lifetime": "1h", "run_time": "1s", "retention": "30d"},
    "export": {"delay": "300ms", "expiry": "1h"},
    "import": {"rows_per_second": 1000},
}


class Emulator(Process):
    """tidegate-emulator on free ports, with helpers for its APIs."""

    def __init__(self, tmp_path, overrides=None, build=None):
        self.ports = {k: free_port() for k in ("dex", "sim", "design", "auth")}
        cfg = json.loads(json.dumps(EMULATOR_DEFAULTS))
        cfg["listen"] = {k: f"127.0.0.1:{p}" for k, p in self.ports.items()}
        deep_merge(cfg, overrides or {})
        self.config_path = os.path.join(tmp_path, "emulator.yaml")
        with open(self.config_path, "w") as f:
            f.write(to_yaml(cfg) + "\n")
        self.dex = f"http://127.0.0.1:{self.ports['dex']}"
        self.sim = f"http://127.0.0.1:{self.ports['sim']}"
        self.design = f"http://127.0.0.1:{self.ports['design']}"
        self.auth = f"http://127.0.0.1:{self.ports['auth']}"
        super().__init__([os.path.join(build or BUILD, "tidegate-emulator"), "-c",
                          self.config_path],
                         os.path.join(tmp_path, "emulator.log"),
                         self.dex + "/__emulator/health")

    # data exchange
    def token(self, username="demo", password="demo"):
        r = requests.post(self.dex + "/public/v1/authenticate",
                          json={"username": username, "password": password}, timeout=5)
        assert r.status_code == 200, r.text
        return r.json()["token"]

    def dex_headers(self):
        return {"Authorization": "Bearer " + self.token()}

    # simulation
    def sim_token(self, client_id="demo", secret="demo-secret"):
        r = requests.post(self.auth + "/api/oauth2/token",
                          data={"grant_type": "client_credentials", "client_id": client_id,
                                "client_secret": secret}, timeout=5)
        assert r.status_code == 200, r.text
        return r.json()["access_token"]

    def sim_headers(self):
        return {"Authorization": "Bearer " + self.sim_token()}

    # control API
    def stats(self):
        return requests.get(self.dex + "/__emulator/stats", timeout=5).json()

    def log_lines(self):
        out = []
        for line in self.read_log().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def calls(self, key):
        return self.stats()["calls"].get(key, 0)

    def advance(self, duration):
        r = requests.post(self.dex + "/__emulator/clock", json={"advance": duration}, timeout=5)
        assert r.status_code == 200, r.text
        return r.json()

    def fault(self, **rule):
        r = requests.post(self.dex + "/__emulator/faults", json=rule, timeout=5)
        assert r.status_code == 200, r.text

    def clear_faults(self):
        requests.delete(self.dex + "/__emulator/faults", timeout=5)


def _attach_log_on_failure(request, proc):
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"\n----- log of {proc.argv[0]} -----\n{proc.read_log()}")


@pytest.fixture
def make_emulator(tmp_path, request):
    """Factory: make_emulator(overrides) starts an emulator; all stop at teardown."""
    started = []

    def make(overrides=None, build=None):
        d = tmp_path / f"emu{len(started)}"
        d.mkdir()
        emu = Emulator(str(d), overrides, build)
        started.append(emu)
        return emu

    yield make
    for emu in started:
        _attach_log_on_failure(request, emu)
        rc = emu.stop()
        assert rc == 0, f"emulator exited with {rc}:\n{emu.read_log()}"


@pytest.fixture
def emulator(make_emulator):
    """An emulator with the test defaults (short delays, demo data)."""
    return make_emulator()


# Started as root (how CI runs), the gateway refuses to start without
# `user:`; the tests keep root (their files are root's): test_privileges.py
# runs it as another account.
ROOT_USER = {"user": "root"} if os.geteuid() == 0 else {}

TEST_KEY = "test-key"
TEST_KEY_SHA = "62af8704764faf8ea82fc61ce9c4c3908b6cb97d463a634e9e587d7c885db0ef"


def tokens_held(ready):
    """/readyz's body (ready: parsed) says every service with credentials
    holds its vendor token."""
    return all(v == "token held" or v.startswith("no credentials")
               for v in ready["services"].values())


class Gateway(Process):
    """tidegate on free ports in front of an Emulator (or embedded), with helpers."""

    def __init__(self, tmp_path, emulator=None, overrides=None, build=None):
        self.tmp = tmp_path
        self.ports = {k: free_port() for k in ("dex", "sim", "admin")}
        with open(os.path.join(tmp_path, "dex-password"), "w") as f:
            f.write("demo\n")
        with open(os.path.join(tmp_path, "sim-secret"), "w") as f:
            f.write("demo-secret\n")
        cfg = {
            "listen": {k: f"127.0.0.1:{p}" for k, p in self.ports.items()},
            "log_level": "info",
            "upstream": "remote",
            "dex": {"username": "demo", "password_file": "dex-password"},
            "sim": {"client_id": "demo", "client_secret_file": "sim-secret"},
            "keys": [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]}],
            # tests read made-up jobs ("x", "nope"): not UUIDs (test_gateway_errors
            # checks the default, true)
            "poll": {"uuid_ids": False},
        }
        cfg.update(ROOT_USER)
        if emulator is not None:
            cfg["dex"]["url"] = emulator.dex
            cfg["sim"].update({"url": emulator.sim, "fallback_url": emulator.design,
                               "auth_url": emulator.auth})
        deep_merge(cfg, overrides or {})
        self.cfg = cfg
        self.config_path = os.path.join(tmp_path, "tidegate.yaml")
        self.write_config(cfg)
        self.dex = f"http://127.0.0.1:{self.ports['dex']}"
        self.sim = f"http://127.0.0.1:{self.ports['sim']}"
        self.admin = f"http://127.0.0.1:{self.ports['admin']}"
        super().__init__([os.path.join(build or BUILD, "tidegate"), "-c", self.config_path],
                         os.path.join(tmp_path, "tidegate.log"), self.admin + "/healthz")

    def wait_tokens(self, timeout=10.0):
        """Until /readyz says every vendor token is held (the start-up logins
        are done, so later counts of vendor calls are the test's own)."""
        deadline = time.monotonic() + timeout
        while not tokens_held(requests.get(self.admin + "/readyz", timeout=5).json()):
            assert time.monotonic() < deadline, "vendor tokens not obtained"
            time.sleep(0.05)

    def write_config(self, cfg):
        with open(self.config_path, "w") as f:
            f.write(to_yaml(cfg) + "\n")

    def headers(self, key=TEST_KEY):
        return {"Authorization": "Bearer " + key}

    def own(self, *cids, key=None, family="export"):
        """Record key (its name; the first configured key's when None) as the
        creator of jobs cids (not UUIDs) in owners.db, as a creation through
        the gateway would: a read of a made-up id by that key then reaches the
        vendor (a job no record names is refused to keys)."""
        key = key or self.cfg["keys"][0]["name"]
        now = int(time.time() * 1000)
        db = sqlite3.connect(os.path.join(self.tmp, "owners.db"), timeout=10)
        with db:
            db.executemany("INSERT OR REPLACE INTO owners (family, correlation_id, api_key,"
                           " created_at) VALUES (?, ?, ?, ?)",
                           [(family, c.strip().lower(), key, now) for c in cids])
        db.close()

    def own_run(self, *ids, key=None):
        """Record key (its name; the first configured key's when None) as the
        submitter of simulation runs ids in the run registry (runs.db), as a
        submission through the gateway would: a read of a made-up run by that
        key then reaches the vendor."""
        key = key or self.cfg["keys"][0]["name"]
        now = int(time.time() * 1000)
        db = sqlite3.connect(os.path.join(self.tmp, "runs.db"), timeout=10)
        with db:
            db.executemany("INSERT INTO runs (simulation_id, api_key, host, case_id,"
                           " case_sha256, submitted_at, expires_at, status, status_at)"
                           " VALUES (?, ?, 'primary', 'CASE-OM-1', '', ?, ?, 'IN_PROGRESS', ?)",
                           [(i, key, now, now + 30 * 86400000, now) for i in ids])
        db.close()

    def metrics(self):
        return requests.get(self.admin + "/metrics", timeout=5).text

    def metric(self, name, **labels):
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for line in self.metrics().splitlines():
            if line.startswith("#"):
                continue
            series, _, value = line.rpartition(" ")
            if series == (f"{name}{{{want}}}" if want else name):
                return float(value)
        return 0.0

    def wait_ready(self, url, timeout=15.0):
        super().wait_ready(url, timeout)

    def restart(self):
        """Start the binary again with the same config file and ports, after it
        was stopped or killed; the new run logs to tidegate.<n>.log."""
        assert self.proc.poll() is not None, "still running"
        if not self.log.closed:
            self.log.close()
        self.runs = getattr(self, "runs", 1) + 1
        Process.__init__(self, self.argv, os.path.join(self.tmp, f"tidegate.{self.runs}.log"),
                         self.admin + "/healthz")

    def log_lines(self):
        out = []
        for line in self.read_log().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def access_lines(self, n, where=lambda e: True, timeout=5.0):
        """The access lines where(line) accepts, once n are written: a line
        is logged when its answer is done, which may be after the client
        has read the answer (written in the turn it is made)."""
        deadline = time.monotonic() + timeout
        while True:
            got = [e for e in self.log_lines() if e.get("event") == "access" and where(e)]
            if len(got) >= n or time.monotonic() >= deadline:
                return got
            time.sleep(0.02)


@pytest.fixture
def make_gateway(tmp_path, request):
    """Factory: make_gateway(emulator, overrides) starts tidegate; stopped at teardown."""
    started = []

    def make(emulator=None, overrides=None, build=None):
        d = tmp_path / f"gw{len(started)}"
        d.mkdir()
        gw = Gateway(str(d), emulator, overrides, build)
        started.append(gw)
        return gw

    yield make
    for gw in started:
        _attach_log_on_failure(request, gw)
        rc = gw.stop()
        assert rc == 0, f"tidegate exited with {rc}:\n{gw.read_log()}"


@pytest.fixture
def gateway(emulator, make_gateway):
    """A gateway in front of a test emulator, with API key test-key."""
    return make_gateway(emulator)


# ---- TLS test material ----

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def openssl(cwd, *args):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl(d, "req", "-x509", *EC, "-keyout", f"{name}.key", "-out", f"{name}.pem",
            "-days", "2", "-subj", f"/CN={name}")
    return os.path.join(d, f"{name}.pem")


@pytest.fixture
def pki(tmp_path):
    """A CA, a server certificate it signed for 127.0.0.1/localhost, one it
    signed for another name only, and an unrelated CA (openssl CLI, tmp dir)."""
    d = str(tmp_path)
    ca = make_ca(d, "ca")
    other = make_ca(d, "other-ca")
    openssl(d, "req", *EC, "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
    openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
    openssl(d, "req", *EC, "-keyout", "wrong.key", "-out", "wrong.csr",
            "-subj", "/CN=other.example")
    with open(os.path.join(d, "wrong.ext"), "w") as f:
        f.write("subjectAltName=DNS:other.example\nbasicConstraints=CA:FALSE\n")
    openssl(d, "x509", "-req", "-in", "wrong.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "wrong.ext", "-out", "wrong.pem")
    return {"ca": ca, "other": other, "cert": os.path.join(d, "server.pem"),
            "key": os.path.join(d, "server.key"), "wrong_cert": os.path.join(d, "wrong.pem"),
            "wrong_key": os.path.join(d, "wrong.key")}


# ---- a real OAuth2 server (npm oauth2-mock-server) ----

NPM_DIR = os.environ.get("TG_NPM_DIR", os.path.join(ROOT, "build-npm"))


class OAuth2Mock(Process):
    """tests/integration/oauth2_mock.mjs on a free loopback port: issues
    client-credentials tokens at /token to client_id with the secret in
    secret_file, and records every token request (requests())."""

    def __init__(self, tmp_path, client_id, secret_file):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.record = os.path.join(tmp_path, "token-requests.jsonl")
        open(self.record, "w").close()
        os.environ.setdefault("TG_NPM_DIR", NPM_DIR)
        super().__init__(["node", os.path.join(ROOT, "tests", "integration", "oauth2_mock.mjs"),
                          str(self.port), self.record, client_id, secret_file],
                         os.path.join(tmp_path, "oauth2-mock.log"),
                         self.url + "/.well-known/openid-configuration")

    def requests(self):
        with open(self.record) as f:
            return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def make_oauth2_server(tmp_path, request):
    """Factory: make_oauth2_server(client_id, secret) starts the mock OAuth2
    server (the secret goes through a file); all stop at teardown. Needs
    node and oauth2-mock-server in $TG_NPM_DIR (scripts/deps.sh:
    tg_install_npm, which scripts/test runs)."""
    if not os.path.isfile(os.path.join(NPM_DIR, "node_modules", "oauth2-mock-server",
                                       "package.json")):
        pytest.fail(f"oauth2-mock-server is not installed in {NPM_DIR}: "
                    "run . scripts/deps.sh && tg_install_npm")
    started = []

    def make(client_id, secret):
        d = tmp_path / f"oauth{len(started)}"
        d.mkdir()
        secret_file = str(d / "client-secret")
        with open(secret_file, "w") as f:
            f.write(secret + "\n")
        srv = OAuth2Mock(str(d), client_id, secret_file)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        _attach_log_on_failure(request, srv)
        srv.stop()


@pytest.fixture(scope="session")
def built_deb(tmp_path_factory):
    """The tidegate .deb, built once per session from a copy of the tree
    (debbuild.py); skipped, naming the tool, where the machine cannot build
    it (scripts/deps.sh installs them: TG_TEST_PACKAGES)."""
    import debbuild
    missing = debbuild.missing_tools()
    if missing:
        pytest.skip("cannot build the Debian package: missing " + ", ".join(missing))
    return debbuild.build_deb(ROOT, str(tmp_path_factory.mktemp("deb")))
