"""
The Debian package (debian/, docs/operations.md "Install from the
package"), built once per session from a copy of the tree (built_deb,
debbuild.py): its version is meson's, its files and conffile are where the
configuration and the unit say, lintian reports no error and no warning the
docs do not explain; then installed on this machine with `dpkg -i`: the
account, the directories and modes, the unit installed but neither enabled
nor started, `tidegate -t` as the account on the installed configuration,
the installed gateway started as the account (the installed configuration
pointed at an installed emulator on free loopback ports) answers /readyz
with both vendor tokens held; `dpkg --purge` then leaves no file of the
package, no /etc/tidegate, no /var/lib/tidegate and no systemd state, and
keeps the account (Debian's practice for system accounts).
"""
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import ROOT, Process, free_port, tokens_held
from debbuild import point_at_emulator, write_secrets

CONF = "/etc/tidegate/tidegate.yaml"
DOC = "/usr/share/doc/tidegate"


def deb_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", deb, field], capture_output=True, text=True,
                          check=True).stdout.strip()


def deb_files(deb):
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1][1:].rstrip("/") or "/": line.split()[0]
            for line in out.splitlines()}


def test_version_is_meson_project_version(built_deb):
    with open(os.path.join(ROOT, "debian/changelog")) as f:
        top = re.match(r"tidegate \(([^)]+)\) ", f.readline())
    assert top and top.group(1) == built_deb["version"]
    assert deb_field(built_deb["deb"], "Version") == built_deb["version"]
    assert deb_field(built_deb["deb"], "Package") == "tidegate"


def test_contents(built_deb, tmp_path):
    deb = built_deb["deb"]
    files = deb_files(deb)
    for path in ("/usr/bin/tidegate", "/usr/bin/tidegate-emulator", CONF,
                 "/lib/systemd/system/tidegate.service", "/usr/lib/sysusers.d/tidegate.conf",
                 "/usr/lib/tmpfiles.d/tidegate.conf", "/usr/share/man/man8/tidegate.8.gz",
                 "/usr/share/man/man5/tidegate.yaml.5.gz",
                 "/usr/share/man/man1/tidegate-emulator.1.gz", f"{DOC}/copyright",
                 f"{DOC}/examples/production.example.yaml"):
        assert path in files, path
    # docs/*.md and the OpenAPI documents, uncompressed where the
    # configuration names them.
    for name in os.listdir(os.path.join(ROOT, "docs")):
        if name.endswith(".md"):
            assert f"{DOC}/{name}" in files, name
    for name in os.listdir(os.path.join(ROOT, "docs/openapi")):
        if not name.startswith("."):
            assert f"{DOC}/openapi/{name}" in files, name
    assert not any(p.startswith(("/usr/local", "/var/")) for p in files), files
    ctl = tmp_path / "ctl"
    subprocess.run(["dpkg-deb", "-e", deb, str(ctl)], check=True)
    assert (ctl / "conffiles").read_text().split() == [CONF]
    # The account before tmpfiles.d (which names its group), both before
    # the unit's state.
    post = (ctl / "postinst").read_text()
    assert 0 < post.index("systemd-sysusers") < post.index("systemd-tmpfiles") \
        < post.index("deb-systemd-helper")
    depends = deb_field(deb, "Depends")
    assert "systemd-standalone-sysusers" in depends and "libyajl2" in depends, depends
    data = tmp_path / "data"
    subprocess.run(["dpkg-deb", "-x", deb, str(data)], check=True)
    unit = (data / "lib/systemd/system/tidegate.service").read_text()
    assert f"\nExecStartPre=/usr/bin/tidegate -t -c {CONF}\n" in unit
    assert f"\nExecStart=/usr/bin/tidegate -c {CONF}\n" in unit
    assert "\nConfigurationDirectory=tidegate\n" in unit
    conf = (data / CONF[1:]).read_text()
    for named in (f"{DOC}/configuration.md", f"{DOC}/examples/", f"{DOC}/openapi/"):
        assert named in conf and os.path.exists(str(data) + named), named


def test_lintian(built_deb):
    r = subprocess.run(["lintian", built_deb["changes"]], capture_output=True, text=True,
                       timeout=300)
    lines = [l for l in r.stdout.splitlines() if re.match(r"[EW]: ", l)]
    assert not [l for l in lines if l.startswith("E: ")], r.stdout
    # Every warning is one docs/operations.md lists and explains.
    with open(os.path.join(ROOT, "docs/operations.md")) as f:
        explained = set(re.findall(r"lintian `([a-z0-9-]+)`", f.read()))
    for line in lines:
        tag = line.split()[2]
        assert tag in explained, f"lintian warning not explained in docs/operations.md: {line}"


def installed():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "tidegate"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "not-installed" not in r.stdout


def owner(path):
    st = os.stat(path)
    return (stat.S_IMODE(st.st_mode), pwd.getpwuid(st.st_uid).pw_name,
            grp.getgrgid(st.st_gid).gr_name)


def start_installed(make_emulator, state):
    """The installed gateway as the account, the installed configuration
    with the listeners on free loopback ports and the vendor at an emulator
    (the installed one); its state stays in /var/lib/tidegate."""
    emu = make_emulator(build="/usr/bin")
    ports = {k: free_port() for k in ("dex", "sim", "admin")}
    text = point_at_emulator(open(CONF).read(), emu, ports)
    path = os.path.join(state, "tidegate.yaml")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    gw = Process(["setpriv", "--reuid=tidegate", "--regid=tidegate", "--init-groups",
                  "/usr/bin/tidegate", "-c", path], os.path.join(state, "tidegate.log"),
                 f"http://127.0.0.1:{ports['admin']}/healthz")
    return gw, ports


def wait_ready(admin, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        r = requests.get(admin + "/readyz", timeout=5)
        if r.status_code == 200 and tokens_held(r.json()):
            return r.json()
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)


def test_install_start_purge(built_deb, make_emulator):
    for tool in ("dpkg", "setpriv", "runuser"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    if os.geteuid() != 0:
        pytest.skip("dpkg -i needs root")
    if installed():     # a run that stopped half-way
        subprocess.run(["dpkg", "--purge", "tidegate"], capture_output=True, timeout=120)
    # The account an earlier run's purge kept (as Debian does): removed, so
    # that this installation has to make it.
    if subprocess.run(["getent", "passwd", "tidegate"], capture_output=True).returncode == 0:
        subprocess.run(["userdel", "tidegate"], check=True, capture_output=True, timeout=30)
    if subprocess.run(["getent", "group", "tidegate"], capture_output=True).returncode == 0:
        subprocess.run(["groupdel", "tidegate"], check=True, capture_output=True, timeout=30)
    state = tempfile.mkdtemp(prefix="tg-deb-")
    os.chmod(state, 0o755)
    try:
        r = subprocess.run(["dpkg", "-i", built_deb["deb"]], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        listed = subprocess.run(["dpkg", "-L", "tidegate"], capture_output=True, text=True,
                                check=True).stdout.split()
        assert pwd.getpwnam("tidegate").pw_dir == "/var/lib/tidegate"
        assert owner("/etc/tidegate") == (0o750, "root", "tidegate")
        assert owner(CONF) == (0o640, "root", "tidegate")
        assert owner("/var/lib/tidegate") == (0o700, "tidegate", "tidegate")
        # Installed, neither enabled nor started (debian/rules).
        assert not os.path.lexists("/etc/systemd/system/multi-user.target.wants/"
                                   "tidegate.service")
        # The operator's steps (the configuration's header): the secret
        # files, then the check as the account the unit runs as.
        write_secrets("/etc/tidegate", grp.getgrnam("tidegate").gr_gid)
        r = subprocess.run(["runuser", "-u", "tidegate", "--", "/usr/bin/tidegate", "-t", "-c",
                            CONF], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r.stderr
        gw, ports = start_installed(make_emulator, state)
        try:
            ready = wait_ready(f"http://127.0.0.1:{ports['admin']}")
            assert set(ready["services"]) == {"dex", "sim"}, ready
        finally:
            rc = gw.stop()
        assert rc == 0, gw.read_log()
        made = os.listdir("/var/lib/tidegate")
        assert "owners.db" in made, made
        assert owner("/var/lib/tidegate/owners.db")[1] == "tidegate"
    finally:
        r = subprocess.run(["dpkg", "--purge", "tidegate"], capture_output=True, text=True,
                           timeout=120)
        shutil.rmtree(state, ignore_errors=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not installed()
    left = [p for p in listed if os.path.lexists(p) and not os.path.isdir(p)]
    assert left == [], left
    for path in ("/etc/tidegate", "/var/lib/tidegate", "/usr/share/doc/tidegate",
                 "/var/lib/systemd/deb-systemd-helper-enabled/tidegate.service.dsh-also"):
        assert not os.path.lexists(path), path
    assert not [f for f in os.listdir("/var/lib/dpkg/info") if f.startswith("tidegate.")]
    # Debian keeps a system account on purge: files it owned elsewhere must
    # not pass to an account a later package gets with the same uid.
    assert pwd.getpwnam("tidegate").pw_shell in ("/usr/sbin/nologin", "/sbin/nologin")
