"""
bench/lib.py - what the benchmark scenarios share: the systems under test
(tidegate; nginx as a proxy, plain or caching; HAProxy) and the
fixed-answer nginx stub upstream, each on free loopback ports and pinned to
a core; wrk runs with their parsed figures; callgrind instruction counts;
syscall counts (strace -c); medians with min-max; Markdown tables; a
description of the machine.

Core assignment (2 cores): the system under test on SUT_CPU, the load
generator and the upstream on LOAD_CPU.
"""
import http.client
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from conftest import (TEST_KEY, TEST_KEY_SHA, Emulator, Gateway,  # noqa: E402,F401
                      free_port, to_yaml, tokens_held)

BUILD = os.environ.get("TG_BENCH_BUILD", os.path.join(ROOT, "build-release"))
SUT_CPU = int(os.environ.get("SUT_CPU", "0"))
LOAD_CPU = int(os.environ.get("LOAD_CPU", "1"))
KEEPALIVE = 256          # idle upstream connections each proxy may keep

# A JWT whose exp is far away: the stub answers tidegate's vendor login.
_JWT_PAYLOAD = "eyJzdWIiOiJkZW1vIiwiZXhwIjo0MTAyNDQ0ODAwfQ"
STUB_JWT = "eyJhbGciOiJIUzI1NiJ9." + _JWT_PAYLOAD + ".c2ln"
STUB_BODY = '{"correlationId":"c0ffee","status":"IN_PROGRESS","progress":42}'


def spread(worker, count, conns):
    """Run worker(n) on conns threads, count calls shared out among them;
    the monotonic time when they started."""
    t = time.monotonic()
    ts = [threading.Thread(target=worker, args=(count // conns + (i < count % conns),))
          for i in range(conns)]
    for th in ts:
        th.start()
    for th in ts:
        th.join(300)
    return t


def pin(pid, cpu):
    """Pin every thread of pid to cpu."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), {cpu})


def rss_kb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_port(port, path="/", timeout=10.0, headers=None):
    deadline = time.monotonic() + timeout
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}{path}", timeout=0.5, headers=headers)
            return
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answers on port {port}")
            time.sleep(0.05)


class Daemon:
    """A foreground process in its own directory, pinned; stop() ends it."""

    def __init__(self, name, argv, cpu, ready_port, ready_path="/", tmp=None, headers=None):
        self.name = name
        self.tmp = tmp or tempfile.mkdtemp(prefix=f"tg-bench-{name}-")
        self.log = open(os.path.join(self.tmp, f"{name}.log"), "wb")
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu)] + argv, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.tmp)
        try:
            wait_port(ready_port, ready_path, headers=headers)
        except RuntimeError:
            with open(os.path.join(self.tmp, f"{name}.log")) as f:
                log = f.read()
            self.stop()
            raise RuntimeError(f"{name} did not start:\n{log}")
        self.pids = self._tree()

    def _tree(self):
        """The process and its children (nginx's worker)."""
        out = [self.proc.pid]
        try:
            kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split()
            out += [int(k) for k in kids]
        except OSError:
            pass
        return out

    @property
    def worker(self):
        """The pid doing the work (nginx's single worker, not its cache
        manager or loader; else the process)."""
        for pid in self.pids[1:]:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"worker process" in f.read():
                        return pid
            except OSError:
                pass
        return self.pids[-1]

    def rss_kb(self, field="VmRSS"):
        return sum(rss_kb(p, field) for p in self.pids)

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after timeout seconds (a process under
        callgrind needs longer: it writes its profile on the way out)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _nginx(name, server_block, cpu, port, ready_path="/", master=True, prefix=None, main=""):
    tmp = tempfile.mkdtemp(prefix=f"tg-bench-{name}-")
    os.chmod(tmp, 0o755)     # run as root, the worker is nobody: it writes its cache here
    conf = f"""{main}worker_processes 1;
daemon off;
master_process {"on" if master else "off"};
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
worker_rlimit_nofile 30000;
events {{ worker_connections 20000; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
{server_block}
}}
"""
    conf = conf.replace("@TMP@", tmp)        # the block may name its own directory
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(conf)
    argv = (prefix or []) + ["nginx", "-p", tmp, "-c", os.path.join(tmp, "nginx.conf")]
    return Daemon(name, argv, cpu, port, ready_path, tmp)


ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


def stub(cpu=None, port=None, read_body=False, files_dir=None):
    """The fixed-answer upstream: nginx `return 200` for every path, a
    vendor login that hands out STUB_JWT, request bodies discarded.
    read_body: answer only once the whole body is read (as a real vendor
    does; else nginx answers first and proxies streaming the body cannot
    keep the connection), with the echo module of nginx-light; the answer
    is then chunked. files_dir: GET /public/v1/size/<name> answers the file
    files_dir/<name> as application/json with its Content-Length (sendfile,
    so the stub beside wrk spends little on large answers)."""
    port = port or free_port()
    answer = f"default_type application/json; return 200 '{STUB_BODY}';"
    main = ""
    if read_body:
        answer = (f"client_body_buffer_size 2m; default_type application/json; "
                  f"echo_read_request_body; echo -n '{STUB_BODY}';")
        main = f"load_module {ECHO_MODULE};\n"
    files = ""
    if files_dir:
        files = (f"\n    location /public/v1/size/ {{ alias {files_dir.rstrip('/')}/; "
                 f"default_type application/json; sendfile on; }}")
    block = f"""  server {{
    listen 127.0.0.1:{port} backlog=4096;
    client_max_body_size 0;
    location = /public/v1/authenticate {{
      default_type application/json; return 200 '{{"token":"{STUB_JWT}"}}'; }}
    location / {{ {answer} }}{files}
  }}"""
    d = _nginx("stub", block, LOAD_CPU if cpu is None else cpu, port, main=main)
    d.port = port
    d.url = f"http://127.0.0.1:{port}"
    return d


def nginx_proxy(upstream_port, cpu=None, port=None, master=True, prefix=None):
    """nginx as a reverse proxy: one worker, upstream keep-alive, no
    buffering, no logging. master=False: a single process (master_process
    off, for valgrind); prefix goes before the argv (callgrind_ir)."""
    port = port or free_port()
    block = f"""  upstream origin {{ server 127.0.0.1:{upstream_port}; keepalive {KEEPALIVE}; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    client_max_body_size 0;
    location / {{
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 600s;
    }}
  }}"""
    d = _nginx("nginx", block, SUT_CPU if cpu is None else cpu, port, "/healthz-probe",
               master, prefix)
    d.port = port
    d.url = f"http://127.0.0.1:{port}"
    return d


def nginx_cache(upstream_port, cpu=None, port=None, master=True, prefix=None):
    """nginx as a caching reverse proxy: nginx_proxy's upstream keep-alive,
    proxy_cache in a zone in its own directory, 200 answers kept 10 min
    whatever the upstream's caching headers say (the key is the request
    URI, query included), sendfile on as Debian's nginx.conf ships it.
    Answers carry X-Cache-Status (MISS, HIT, ...)."""
    port = port or free_port()
    block = f"""  proxy_cache_path @TMP@/cache levels=1:2 keys_zone=bench:10m max_size=1g
                   inactive=1h use_temp_path=off;
  upstream origin {{ server 127.0.0.1:{upstream_port}; keepalive {KEEPALIVE}; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    sendfile on;
    location / {{
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache bench;
      proxy_cache_valid 200 10m;
      proxy_ignore_headers Cache-Control Expires Set-Cookie X-Accel-Expires;
      add_header X-Cache-Status $upstream_cache_status;
      proxy_read_timeout 600s;
    }}
  }}"""
    d = _nginx("nginx-cache", block, SUT_CPU if cpu is None else cpu, port, "/healthz-probe",
               master, prefix)
    d.port = port
    d.url = f"http://127.0.0.1:{port}"
    return d


def haproxy(upstream_port, cpu=None, port=None, maxconn=9000, prefix=None):
    """HAProxy in http mode: one thread, connection reuse, no logging.
    maxconn must fit the fd limit (about 2 fds per connection)."""
    port = port or free_port()
    tmp = tempfile.mkdtemp(prefix="tg-bench-haproxy-")
    cfg = f"""global
  nbthread 1
  maxconn {maxconn}
defaults
  mode http
  timeout connect 5s
  timeout client 600s
  timeout server 600s
  http-reuse always
frontend fe
  bind 127.0.0.1:{port}
  default_backend be
backend be
  server s1 127.0.0.1:{upstream_port} maxconn {KEEPALIVE * 4}
"""
    with open(os.path.join(tmp, "haproxy.cfg"), "w") as f:
        f.write(cfg)
    argv = (prefix or []) + ["haproxy", "-db", "-f", os.path.join(tmp, "haproxy.cfg")]
    d = Daemon("haproxy", argv, SUT_CPU if cpu is None else cpu, port, "/healthz-probe", tmp)
    d.port = port
    d.url = f"http://127.0.0.1:{port}"
    return d


def tidegate(upstream_url, cpu=None, overrides=None, build=None, prefix=None):
    """tidegate in front of upstream_url (both services), one API key, no
    access log; the dex listener is .url. overrides merge into the config."""
    tmp = tempfile.mkdtemp(prefix="tg-bench-tidegate-")
    ports = {k: free_port() for k in ("dex", "sim", "admin")}
    with open(os.path.join(tmp, "dex-password"), "w") as f:
        f.write("demo\n")
    with open(os.path.join(tmp, "sim-secret"), "w") as f:
        f.write("demo-secret\n")
    cfg = {
        "listen": {k: f"127.0.0.1:{p}" for k, p in ports.items()},
        "log_level": "warn", "access_log": False, "upstream": "remote",
        "dex": {"url": upstream_url, "username": "demo", "password_file": "dex-password"},
        "sim": {"url": upstream_url, "client_id": "demo", "client_secret_file": "sim-secret"},
        "pool": {"max_idle": KEEPALIVE},
        "keys": [{"name": "bench", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]}],
    }
    if os.geteuid() == 0:   # root refuses to start without user:
        cfg["user"] = "root"
    for k, v in (overrides or {}).items():
        if isinstance(v, dict):
            cfg.setdefault(k, {}).update(v)
        else:
            cfg[k] = v
    with open(os.path.join(tmp, "tidegate.yaml"), "w") as f:
        f.write(to_yaml(cfg) + "\n")
    argv = (prefix or []) + [os.path.join(build or BUILD, "tidegate"), "-c",
                             os.path.join(tmp, "tidegate.yaml")]
    d = Daemon("tidegate", argv, SUT_CPU if cpu is None else cpu, ports["admin"], "/healthz",
               tmp)
    d.port = ports["dex"]
    d.sim_port = ports["sim"]
    d.url = f"http://127.0.0.1:{ports['dex']}"
    d.admin = f"http://127.0.0.1:{ports['admin']}"
    d.headers = {"Authorization": "Bearer " + TEST_KEY}
    return d


def start_systems(started, read_body=False, haproxy_maxconn=9000):
    """The stub and nginx, HAProxy and tidegate in front of it, as
    {"direct": …, "nginx": …, "HAProxy": …, "tidegate": …} in report order.
    Each is appended to started as soon as it runs, so the caller's finally
    stops whatever did start."""
    origin = stub(read_body=read_body)
    started.append(origin)
    systems = {"direct": origin}
    for name, make in (("nginx", lambda: nginx_proxy(origin.port)),
                       ("HAProxy", lambda: haproxy(origin.port, maxconn=haproxy_maxconn)),
                       ("tidegate", lambda: tidegate(origin.url))):
        systems[name] = make()
        started.append(systems[name])
    return systems


def wait_tokens(d, timeout=10.0):
    """Until tidegate d holds its vendor tokens (/readyz: its start-up
    logins are done)."""
    deadline = time.monotonic() + timeout
    while not tokens_held(requests.get(d.admin + "/readyz", timeout=5).json()):
        if time.monotonic() > deadline:
            raise RuntimeError("tidegate did not get its vendor tokens")
        time.sleep(0.05)


def emulator(overrides=None, cpu=None, build=None):
    """tidegate-emulator (the vendor) on free ports, pinned (default: the
    load core), logging warnings only; .stop() also removes its directory.
    The conftest Emulator helpers (token, dex_headers, stats, calls, fault)
    apply. Give tidegate its sim.url/auth_url: {"sim": emu.sim_config()}."""
    tmp = tempfile.mkdtemp(prefix="tg-bench-emulator-")
    over = {"log_level": "warn"}
    over.update(overrides or {})
    try:
        emu = Emulator(tmp, over, build or BUILD)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pin(emu.proc.pid, LOAD_CPU if cpu is None else cpu)
    emu.sim_config = lambda: {"url": emu.sim, "auth_url": emu.auth}
    stop = emu.stop

    def stop_and_clean(*a, **kw):
        try:
            return stop(*a, **kw)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    emu.stop = stop_and_clean
    return emu


# ---- load ----

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")


def wrk(url, conns, seconds, headers=None, script=None, rate=None, threads=1, cpu=None,
        timeout_s=10):
    """Run wrk pinned to the load core; returns {rps, p50, p90, p99 (ms),
    requests, errors, non2xx}. rate (requests/s in all) paces each
    connection with the script's delay() (closed loop: figures at a rate
    below saturation, not an open-loop generator)."""
    argv = ["taskset", "-c", str(LOAD_CPU if cpu is None else cpu), "wrk", "-t", str(threads),
            "-c", str(conns), "-d", f"{seconds}s", "--latency", "--timeout", f"{timeout_s}s"]
    for k, v in (headers or {}).items():
        argv += ["-H", f"{k}: {v}"]
    env = dict(os.environ)
    if rate:
        env["WRK_DELAY_MS"] = f"{conns * 1000.0 / rate:.3f}"
        script = script or os.path.join(HERE, "wrk", "paced.lua")
    if script:
        argv += ["-s", script]
    argv.append(url)
    out = subprocess.run(argv, capture_output=True, text=True, env=env,
                         timeout=seconds + 60).stdout
    res = {"rps": 0.0, "requests": 0, "errors": 0, "non2xx": 0}
    for line in out.splitlines():
        s = line.split()
        if line.startswith("Requests/sec:"):
            res["rps"] = float(s[1])
        elif re.match(r"\s+\d+ requests in", line):
            res["requests"] = int(s[0])
        elif line.strip().startswith("Non-2xx"):
            res["non2xx"] = int(s[-1])
        elif line.strip().startswith("Socket errors"):
            res["errors"] = sum(int(x.strip(",")) for x in s[3::2])
        elif len(s) == 2 and s[0] in ("50%", "90%", "99%"):
            res["p" + s[0][:-1]] = _ms(s[1])
    res["raw"] = out
    return res


def syscalls(pid, load_fn):
    """{syscall: count} of pid's threads while load_fn() runs (strace -c -f)."""
    out = tempfile.mktemp(prefix="tg-bench-strace-")
    st = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)                  # attached
        load_fn()
        time.sleep(0.2)
    finally:
        st.send_signal(signal.SIGINT)
        st.wait(timeout=30)
    counts = {}
    with open(out) as f:
        for line in f:
            s = line.split()
            # % time, seconds, usecs/call, calls, [errors,] syscall
            if len(s) >= 5 and s[3].isdigit() and s[-1] != "total":
                counts[s[-1]] = int(s[3])
    os.unlink(out)
    return counts


def callgrind_ir(argv_fn, load_fn, n_small, n_large, cpu=None, keep=None):
    """Instructions per request, startup cancelled out: run the system under
    valgrind --tool=callgrind twice, sending n_small then n_large requests
    (load_fn(daemon, n)), and divide the difference of the totals.
    argv_fn(prefix) starts the daemon with prefix prepended to its argv.
    keep: a path where the larger run's callgrind file is kept."""
    totals = []
    for n in (n_small, n_large):
        out = tempfile.mktemp(prefix="tg-bench-callgrind-")
        d = argv_fn(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
        try:
            load_fn(d, n)
        finally:
            # under valgrind, exiting (the profile written) takes a while:
            # killed at 10 s, nginx left no totals (bench/s7_sizes.py)
            d.stop(timeout=180)
        totals.append(_callgrind_total(out))
        if keep and n == n_large:
            shutil.move(out, keep)
        else:
            os.unlink(out)
    return (totals[1] - totals[0]) / float(n_large - n_small)


def callgrind_top(path, n):
    """The n functions with the most instructions in a callgrind file:
    [(name, share of the total)]."""
    ann = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True).stdout
    share = {}                       # a function's lines may come from several files
    for line in ann.splitlines():
        m = re.match(r"\s*[\d,]+ \(\s*([\d.]+)%\)\s+(.*?)(?: \[(.*)\])?$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        name = m.group(2).rsplit(":", 1)[-1]
        if name.startswith("0x") and m.group(3):
            name = f"{os.path.basename(m.group(3))} {name}"
        share[name] = share.get(name, 0.0) + float(m.group(1))
    return sorted(share.items(), key=lambda kv: -kv[1])[:n]


def _callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + path)


# ---- figures ----

def stats(vals):
    """(median, min, max) of vals."""
    vals = list(vals)
    return statistics.median(vals), min(vals), max(vals)


def fmt(vals, digits=0, unit=""):
    """'median (min-max)' of vals."""
    med, lo, hi = stats(vals)
    u = f" {unit}" if unit else ""
    return f"{med:,.{digits}f}{u} ({lo:,.{digits}f}-{hi:,.{digits}f})"


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def machine():
    """One line on the machine the figures come from."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ver = {}
    for name, argv in (("nginx", ["nginx", "-v"]), ("haproxy", ["haproxy", "-v"]),
                       ("wrk", ["wrk", "-v"])):
        try:
            p = subprocess.run(argv, capture_output=True, text=True)
            m = re.search(r"(\d+\.\d+[\.\d]*)", p.stdout + p.stderr)
            ver[name] = m.group(1) if m else "?"
        except OSError:
            ver[name] = "missing"
    return (f"{model or platform.processor()}, {os.cpu_count()} cores, "
            f"Linux {platform.release()}; nginx {ver['nginx']}, HAProxy {ver['haproxy']}, "
            f"wrk {ver['wrk']}; system under test on core {SUT_CPU}, load and upstream on "
            f"core {LOAD_CPU}")


def save(name, data):
    """Keep a scenario's raw figures in bench/results/<name>.json."""
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", name + ".json"), "w") as f:
        json.dump(data, f, indent=1, default=str)


def send_n(port, path, headers, n, conns=4):
    """n GETs of path over `conns` keep-alive connections; all must be 200
    (the load of the callgrind counts of s1 and s7)."""
    errors = []

    def worker(count):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            for _ in range(count):
                c.request("GET", path, headers=headers)
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
        except OSError as e:
            errors.append(repr(e))
        finally:
            c.close()

    ts = [threading.Thread(target=worker, args=(n // conns + (i < n % conns),))
          for i in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=900)
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, first {errors[0]}")
