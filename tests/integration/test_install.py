"""
`meson install --destdir` of the release build ($TG_RELEASE_BUILD): the tree
it installs (binaries, man pages, default and example configurations, the
systemd unit with its sysusers.d and tmpfiles.d entries, their modes), the
pages render, the default configuration passes `tidegate -t` once its secret
files exist, `systemd-analyze verify` accepts the unit and `systemd-analyze
security` rates its exposure under 2.0 (docs/operations.md), and
systemd-sysusers and systemd-tmpfiles run on the DESTDIR make the account
and the directories with their owners and modes.

For both --prefix=/usr (sysconfdir /etc) and the default /usr/local
(sysconfdir /usr/local/etc), a build configured at that prefix installs
its distribution files (tags man, doc, config, systemd) into a scratch
root: the unit, the tmpfiles.d entry and the configuration name the one
configuration directory the files are in, the documentation the
configuration points to is there, and after systemd-sysusers and
systemd-tmpfiles ran on that root the account they made reads the
configuration: `tidegate -t` passes as that account (the start's
ExecStartPre=).
"""
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import RELEASE_BUILD, ROOT


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
            "lib": os.path.join(dest + prefix, "lib"), "prefix": prefix, "opts": opts,
            "confdir": os.path.join(prefix, opts["sysconfdir"], "tidegate")}


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
    text = text.replace(tree["confdir"] + "/", f"{tmp_path}/").replace(
        "/var/lib/tidegate/", f"{tmp_path}/")
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
                 "User=tidegate", "StateDirectory=tidegate",
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
    etc = os.stat(str(root) + tree["confdir"])
    state = os.stat(root / "var/lib/tidegate")
    assert (stat.S_IMODE(etc.st_mode), etc.st_uid, etc.st_gid) == (0o750, 0, gid)
    assert (stat.S_IMODE(state.st_mode), state.st_uid, state.st_gid) == (0o700, uid, gid)


# --- every prefix: a build configured there, its distribution files only ---

SYSCONFDIR = {"/usr": "/etc", "/usr/local": "/usr/local/etc"}   # meson's rule
MAN_TARGETS = ["dist/tidegate.8", "dist/tidegate.yaml.5", "dist/tidegate-emulator.1"]


@pytest.fixture(scope="module", params=sorted(SYSCONFDIR))
def prefix_root(request):
    """meson setup --prefix=PARAM, the man pages built, `meson install
    --tags man,doc,config,systemd` into a scratch root that other accounts
    can traverse (the account sysusers makes reads from it)."""
    prefix = request.param
    root = tempfile.mkdtemp(prefix="tg-prefix-")
    os.chmod(root, 0o755)
    build = os.path.join(root + ".build")
    r = subprocess.run(["meson", "setup", build, ROOT, f"--prefix={prefix}",
                        "-Dbuildtype=release", "-Dtests=false"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    subprocess.run(["ninja", "-C", build] + MAN_TARGETS, capture_output=True, check=True,
                   timeout=300)
    r = subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--destdir", root,
                        "--tags", "man,doc,config,systemd"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    yield {"root": root, "prefix": prefix, "confdir": SYSCONFDIR[prefix] + "/tidegate",
           "lib": root + prefix + "/lib", "doc": root + prefix + "/share/doc/tidegate"}
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(build, ignore_errors=True)


def test_prefix_paths_agree(prefix_root):
    confdir, root = prefix_root["confdir"], prefix_root["root"]
    conf = confdir + "/tidegate.yaml"
    assert mode(root + conf) == 0o640 and mode(root + confdir) == 0o750
    unit = open(os.path.join(prefix_root["lib"], "systemd/system/tidegate.service")).read()
    exe = prefix_root["prefix"] + "/bin/tidegate"
    assert f"\nExecStartPre={exe} -t -c {conf}\n" in unit, unit
    assert f"\nExecStart={exe} -c {conf}\n" in unit, unit
    # ConfigurationDirectory= is always /etc/tidegate: named only when it is.
    assert ("\nConfigurationDirectory=tidegate\n" in unit) == (confdir == "/etc/tidegate")
    assert not re.search(r"@[a-z_]+@", unit), unit
    tmpfiles = [l.split() for l in open(os.path.join(
        prefix_root["lib"], "tmpfiles.d/tidegate.conf")) if l.strip() and l[0] != "#"]
    assert tmpfiles == [["d", confdir, "0750", "root", "tidegate", "-"],
                        ["z", conf, "0640", "root", "tidegate", "-"],
                        ["d", "/var/lib/tidegate", "0700", "tidegate", "tidegate", "-"]]
    text = open(root + conf).read()
    assert not re.search(r"@[a-z_]+@", text), text
    named = set(re.findall(r"(?<![\w:/])(/[\w./-]*[\w/])", text))   # no URLs
    assert {f"{confdir}/dex-password", f"{confdir}/sim-client-secret",
            f"{confdir}/tidegate.yaml"} <= named
    # Every installed path the configuration names is there: the reference
    # (configuration.md), the examples and the OpenAPI documents.
    doc = prefix_root["prefix"] + "/share/doc/tidegate"
    docs = {p for p in named if p.startswith(doc)}
    assert {f"{doc}/configuration.md", f"{doc}/examples/", f"{doc}/openapi/"} <= docs, named
    for p in docs:
        assert os.path.exists(root + p), p
    for other in named - docs:
        assert other.startswith((confdir + "/", "/var/lib/tidegate/")), other
    # The man pages name the same places.
    page = open(root + prefix_root["prefix"] + "/share/man/man8/tidegate.8").read().replace(
        "\\&", "")      # scdoc's zero-width marks after a full stop
    assert f"{conf}" in page and f"{doc}/examples/" in page, page
    assert not re.search(r"@[a-z_]+@", page)
    assert sorted(os.listdir(os.path.join(prefix_root["doc"], "openapi"))) == sorted(
        f for f in os.listdir(os.path.join(ROOT, "docs/openapi")) if not f.startswith("."))
    assert {f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")} <= set(
        os.listdir(prefix_root["doc"]))


def test_prefix_account_reads_configuration(prefix_root):
    """sysusers and tmpfiles applied to the scratch root, the secret files
    put beside the configuration as the operator would (0640 root:tidegate),
    then `tidegate -t` as the account sysusers made: the unit's
    ExecStartPre=. The configuration is checked where it was installed;
    its absolute paths lead into the scratch root (a copy beside it)."""
    for tool in ("systemd-sysusers", "systemd-tmpfiles", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing (Debian packages systemd, util-linux)")
    if os.geteuid() != 0:
        pytest.skip("needs root: setpriv to the account sysusers made")
    root, confdir = prefix_root["root"], prefix_root["confdir"]
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    subprocess.run(["systemd-sysusers", f"--root={root}",
                    os.path.join(prefix_root["lib"], "sysusers.d/tidegate.conf")],
                   check=True, capture_output=True, timeout=30)
    entry = [l.split(":") for l in open(os.path.join(root, "etc/passwd"))
             if l.startswith("tidegate:")]
    assert entry, "sysusers made no tidegate account"
    uid, gid = int(entry[0][2]), int(entry[0][3])
    subprocess.run(["systemd-tmpfiles", f"--root={root}", "--create",
                    os.path.join(prefix_root["lib"], "tmpfiles.d/tidegate.conf")],
                   check=True, capture_output=True, timeout=30)
    st = os.stat(root + confdir + "/tidegate.yaml")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, 0, gid)
    for name in ("dex-password", "sim-client-secret"):
        path = root + confdir + "/" + name
        with open(path, "w") as f:
            f.write("secret\n")
        os.chmod(path, 0o640)
        os.chown(path, 0, gid)
    text = open(root + confdir + "/tidegate.yaml").read()
    local = root + confdir + "/scratch.yaml"    # the paths moved into the root
    with open(local, "w") as f:
        f.write(text.replace("user: tidegate", "").replace(confdir + "/", root + confdir + "/")
                .replace("/var/lib/tidegate/", root + "/var/lib/tidegate/"))
    os.chown(local, 0, gid)
    os.chmod(local, 0o640)
    exe = os.path.join(root, "tidegate")
    shutil.copy2(os.path.join(RELEASE_BUILD, "tidegate"), exe)
    as_account = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", exe]
    r = subprocess.run(as_account + ["-t", "-c", local], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r.stdout + r.stderr
    # The installed file itself, as the account: readable (only its secret
    # files' host paths may be missing, never a permission).
    r = subprocess.run(as_account + ["-t", "-c", root + confdir + "/tidegate.yaml"],
                       capture_output=True, text=True, timeout=10)
    assert "Permission denied" not in r.stderr and "cannot read" not in r.stderr, r.stderr
