"""
`meson install --destdir` of the release build ($TG_RELEASE_BUILD): the tree
it installs (binaries, man pages, default and example configurations, the
systemd unit with its sysusers.d and tmpfiles.d entries, their modes), the
pages render, the default configuration passes `tidegate -t` once its secret
files exist, `systemd-analyze verify` accepts the unit and `systemd-analyze
security` rates its exposure under 2.0 (docs/operations.md), and
systemd-sysusers and systemd-tmpfiles run on the DESTDIR make the account
and the directories with their owners and modes.
"""
import json
import os
import pwd
import re
import shutil
import stat
import subprocess

import pytest

from conftest import RELEASE_BUILD


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("destdir"))
    r = subprocess.run(["meson", "install", "-C", RELEASE_BUILD, "--destdir", dest],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    opts = {o["name"]: o["value"] for o in json.loads(subprocess.run(
        ["meson", "introspect", "--buildoptions", RELEASE_BUILD], capture_output=True,
        text=True, check=True).stdout)}
    prefix = opts["prefix"]

    def at(key, *rest):
        return os.path.join(dest + os.path.join(prefix, opts[key]), *rest)
    return {"dest": dest, "bin": at("bindir"), "etc": at("sysconfdir", "tidegate"),
            "man": at("mandir"), "doc": at("datadir", "doc", "tidegate"),
            "lib": os.path.join(dest + prefix, "lib"), "prefix": prefix, "opts": opts}


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_binaries(tree):
    for exe in ("tidegate", "tidegate-emulator"):
        path = os.path.join(tree["bin"], exe)
        assert mode(path) == 0o755
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.startswith(exe + " ")


def test_configuration(tree, tmp_path):
    assert mode(tree["etc"]) == 0o750
    conf = os.path.join(tree["etc"], "tidegate.yaml")
    assert mode(conf) == 0o640
    text = open(conf).read()
    assert "user: tidegate" in text and "/var/lib/tidegate/runs.db" in text
    examples = os.path.join(tree["doc"], "examples")
    assert sorted(os.listdir(examples)) == ["emulator.yaml", "haproxy.example.cfg",
                                            "nginx.example.conf", "production.example.yaml"]
    # The default passes the check once the secret files and the account it
    # names exist (here the account running the test stands for the one
    # sysusers.d makes at installation; -t refuses an account that is not).
    for name in ("dex-password", "sim-client-secret"):
        (tmp_path / name).write_text("secret\n")
    local = tmp_path / "tidegate.yaml"
    text = text.replace("/etc/tidegate/", f"{tmp_path}/").replace("/var/lib/tidegate/",
                                                                  f"{tmp_path}/")
    local.write_text(text.replace("user: tidegate", "user: no-such-account-tg"))
    r = subprocess.run([os.path.join(tree["bin"], "tidegate"), "-t", "-c", str(local)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "user: no such user 'no-such-account-tg'" in r.stderr
    local.write_text(text.replace("user: tidegate",
                                  "user: " + pwd.getpwuid(os.geteuid()).pw_name))
    r = subprocess.run([os.path.join(tree["bin"], "tidegate"), "-t", "-c", str(local)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r.stderr


@pytest.mark.parametrize("page", ["man8/tidegate.8", "man5/tidegate.yaml.5",
                                  "man1/tidegate-emulator.1"])
def test_man_pages(tree, page):
    path = os.path.join(tree["man"], page)
    src = open(path).read()
    assert ".SH NAME" in src
    name = os.path.basename(page).rsplit(".", 1)[0]
    if shutil.which("man") is None:
        pytest.skip("man is not installed: the roff source was checked")
    r = subprocess.run(["man", "-l", path], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "MANWIDTH": "80"})
    assert r.returncode == 0, r.stderr
    out = re.sub(r".\x08", "", r.stdout)      # overstruck bold when not on a terminal
    assert "NAME" in out and name in out and "SEE ALSO" in out, out


def unit_path(tree):
    return os.path.join(tree["lib"], "systemd", "system", "tidegate.service")


def test_unit_contents(tree):
    text = open(unit_path(tree)).read()
    exe = os.path.join(tree["prefix"], tree["opts"]["bindir"], "tidegate")
    for line in ("Type=notify", f"ExecStart={exe} -c ", "ExecReload=/bin/kill -HUP $MAINPID",
                 "User=tidegate", "StateDirectory=tidegate", "ConfigurationDirectory=tidegate",
                 "ProtectSystem=strict", "NoNewPrivileges=yes", "\nCapabilityBoundingSet=\n",
                 "SystemCallFilter=@system-service", "UMask=0077",
                 "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX"):
        assert line in text, line


def local_unit(tree, tmp_path):
    """The unit with its binaries at their DESTDIR copies (verify runs them)."""
    exe_dir = os.path.join(tree["prefix"], tree["opts"]["bindir"])
    text = open(unit_path(tree)).read().replace(exe_dir + "/", tree["bin"] + "/")
    path = tmp_path / "tidegate.service"
    path.write_text(text)
    return str(path)


def test_systemd_analyze_verify(tree, tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is missing (Debian package systemd)")
    env = {**os.environ, "MANPATH": tree["man"]}    # Documentation=man:… is checked too
    r = subprocess.run(["systemd-analyze", "verify", local_unit(tree, tmp_path)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr


def test_systemd_analyze_security(tree, tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is missing (Debian package systemd)")
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes",
                        local_unit(tree, tmp_path)], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Overall exposure level for tidegate.service: ([0-9.]+)", r.stdout)
    if m is None and "offline" in r.stderr:
        pytest.skip("systemd-analyze security has no --offline: " + r.stderr.strip())
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) < 2.0, r.stdout


def test_sysusers_and_tmpfiles(tree, tmp_path):
    for tool in ("systemd-sysusers", "systemd-tmpfiles"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing (Debian package systemd)")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    sysusers = os.path.join(tree["lib"], "sysusers.d", "tidegate.conf")
    tmpfiles = os.path.join(tree["lib"], "tmpfiles.d", "tidegate.conf")
    subprocess.run(["systemd-sysusers", f"--root={root}", sysusers], check=True,
                   capture_output=True, timeout=30)
    entry = [l for l in (root / "etc/passwd").read_text().splitlines()
             if l.startswith("tidegate:")]
    assert entry and entry[0].split(":")[5] == "/var/lib/tidegate", entry
    uid, gid = int(entry[0].split(":")[2]), int(entry[0].split(":")[3])
    subprocess.run(["systemd-tmpfiles", f"--root={root}", "--create", tmpfiles], check=True,
                   capture_output=True, timeout=30)
    etc, state = os.stat(root / "etc/tidegate"), os.stat(root / "var/lib/tidegate")
    assert (stat.S_IMODE(etc.st_mode), etc.st_uid, etc.st_gid) == (0o750, 0, gid)
    assert (stat.S_IMODE(state.st_mode), state.st_uid, state.st_gid) == (0o700, uid, gid)
