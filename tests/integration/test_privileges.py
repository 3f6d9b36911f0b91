"""
Privileges of a gateway started as root (issue 16), as nginx does it: the
listeners are bound as root, then the process runs as the account named by
`user:` for good; root without `user:` refuses to start; `user: root` keeps
root with a warning; files the gateway creates are 0600 (umask 077). The
suite runs as root in CI: these tests skip otherwise.
"""
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import BUILD, Gateway, free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CI runs as root)")


def ids(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Groups", "CapEff", "CapPrm"):
                out[k] = v.split()
    return out


def write_config(d, text):
    path = os.path.join(d, "t.yaml")
    with open(path, "w") as f:
        f.write(f"listen:\n  dex: 127.0.0.1:{free_port()}\n  sim: 127.0.0.1:{free_port()}\n"
                f"  admin: 127.0.0.1:{free_port()}\n" + text)
    return path


def test_root_without_user_refuses(tmp_path):
    cfg = write_config(str(tmp_path), "")
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-c", cfg], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1
    assert "started as root without `user:`" in r.stderr and cfg in r.stderr
    assert not os.path.exists(tmp_path / "runs.db")     # refused before any state
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-t", "-c", cfg],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0     # the check of a file says nothing of who runs it


def test_unknown_user_refuses(tmp_path):
    cfg = write_config(str(tmp_path), "user: no-such-account-tg\n")
    r = subprocess.run([os.path.join(BUILD, "tidegate"), "-c", cfg], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1 and "no such user 'no-such-account-tg'" in r.stderr


def test_user_root_keeps_root_with_warning(emulator, make_gateway):
    gw = make_gateway(emulator)     # conftest writes user: root as root
    st = ids(gw.proc.pid)
    assert st["Uid"] == ["0"] * 4
    warn = [e for e in gw.log_lines() if e.get("event") == "running_as_root"]
    assert warn and warn[0]["level"] == "warn"
    mode = stat.S_IMODE(os.stat(os.path.join(gw.tmp, "runs.db")).st_mode)
    assert mode == 0o600, oct(mode)     # umask 077 even as root


@pytest.fixture
def nobody_dir():
    """A directory the account nobody can write (pytest's tmp_path is under
    root's 0700 /tmp/pytest-of-root)."""
    d = tempfile.mkdtemp(prefix="tg-priv-")
    pw = pwd.getpwnam("nobody")
    os.chmod(d, 0o755)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_drops_to_user_after_binding(emulator, nobody_dir, request):
    pw = pwd.getpwnam("nobody")
    gw = Gateway(nobody_dir, emulator, {"user": "nobody"})
    try:
        st = ids(gw.proc.pid)
        assert st["Uid"] == [str(pw.pw_uid)] * 4, st       # real, effective, saved, fs
        assert st["Gid"] == [str(pw.pw_gid)] * 4, st
        assert int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0, st
        assert requests.get(gw.admin + "/healthz", timeout=5).status_code == 200
        for name in ("runs.db", "owners.db", "tidegate.db"):
            path = os.path.join(nobody_dir, name)
            if not os.path.exists(path):
                continue
            s = os.stat(path)
            assert (s.st_uid, stat.S_IMODE(s.st_mode)) == (pw.pw_uid, 0o600), (name, s)
        assert os.path.exists(os.path.join(nobody_dir, "runs.db"))
        user = [e for e in gw.log_lines() if e.get("event") == "user"]
        assert user and user[0]["user"] == "nobody" and user[0]["uid"] == pw.pw_uid
        gw.send_signal(signal.SIGHUP)       # the config is read again as nobody
        deadline = time.monotonic() + 5
        while not any(e.get("event") == "reloaded" for e in gw.log_lines()):
            assert time.monotonic() < deadline, gw.read_log()
            time.sleep(0.05)
        assert ids(gw.proc.pid)["Uid"] == [str(pw.pw_uid)] * 4
    finally:
        rc = gw.stop()
    assert rc == 0, gw.read_log()


def test_pid_file_written_as_root_kept_when_the_user_cannot_remove_it(emulator, nobody_dir):
    """pid_file in a directory only root may write (/run's way): written
    before the drop, root's and 0644; at exit the account cannot remove it,
    which the log says, and the next start takes the stale file over."""
    rundir = tempfile.mkdtemp(prefix="tg-run-")
    os.chmod(rundir, 0o755)
    pid_file = os.path.join(rundir, "tidegate.pid")
    try:
        gw = Gateway(nobody_dir, emulator, {"user": "nobody", "pid_file": pid_file})
        try:
            s = os.stat(pid_file)
            assert (s.st_uid, stat.S_IMODE(s.st_mode)) == (0, 0o644)
            assert open(pid_file).read() == f"{gw.proc.pid}\n"
            r = subprocess.run([os.path.join(BUILD, "tidegate"), "-s", "stop", "-c",
                                gw.config_path], capture_output=True, text=True, timeout=20)
            assert r.returncode == 0, r
            assert gw.proc.wait(timeout=10) == 0
        finally:
            gw.stop()
        kept = [e for e in gw.log_lines() if e.get("event") == "pid_file_kept"]
        assert kept and "Permission denied" in kept[0]["reason"], gw.read_log()
        gw.restart()
        try:
            assert open(pid_file).read() == f"{gw.proc.pid}\n"
        finally:
            assert gw.stop() == 0
    finally:
        shutil.rmtree(rundir, ignore_errors=True)
