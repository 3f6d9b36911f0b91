"""
The Debian package, built once per test session (the built_deb fixture in
conftest.py; test_package.py and test_container.py share it): the tree is
copied to a scratch directory (never the build directories or .git: the
repository is not written to) and `dpkg-buildpackage -us -uc -b` runs
there, tests off (debian/rules), as on a packager's machine.
"""
import glob
import os
import re
import shutil
import subprocess

TOOLS = {"dpkg-buildpackage": "dpkg-dev", "dh": "debhelper", "lintian": "lintian"}


def missing_tools(tools=TOOLS):
    return [f"{t} (Debian package {p})" for t, p in tools.items() if shutil.which(t) is None]


def project_version(root):
    with open(os.path.join(root, "meson.build")) as f:
        return re.search(r"^\s*version:\s*'([^']+)'", f.read(), re.M).group(1)


def _ignore_top(root):
    def ignore(d, names):
        if os.path.abspath(d) != os.path.abspath(root):
            return [n for n in names if n == "__pycache__"]
        return [n for n in names if n.startswith("build") or n in (".git", "__pycache__")]
    return ignore


def build_deb(root, workdir):
    """Copies root to workdir/tidegate, builds; returns the .deb, .changes,
    the build log and the version."""
    src = os.path.join(workdir, "tidegate")
    shutil.copytree(root, src, symlinks=True, ignore=_ignore_top(root))
    env = {**os.environ, "DEB_BUILD_OPTIONS": "nocheck parallel=2"}
    log = os.path.join(workdir, "build.log")
    with open(log, "wb") as out:
        r = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, stdout=out,
                           stderr=subprocess.STDOUT, env=env, timeout=900)
    text = open(log, errors="replace").read()
    assert r.returncode == 0, "dpkg-buildpackage failed:\n" + text[-4000:]
    version = project_version(root)
    debs = glob.glob(os.path.join(workdir, f"tidegate_{version}_*.deb"))
    changes = glob.glob(os.path.join(workdir, f"tidegate_{version}_*.changes"))
    assert len(debs) == 1 and len(changes) == 1, os.listdir(workdir)
    return {"deb": debs[0], "changes": changes[0], "log": text, "version": version,
            "dir": workdir}


def _edit(text, old, new):
    assert text.count(old) == 1, f"the shipped configuration no longer has {old!r}"
    return text.replace(old, new)


def point_at_emulator(text, emu, ports):
    """The shipped configuration (dist/tidegate.yaml.in) with its listeners
    on ports (dex, sim, admin) and its vendor at the Emulator emu, the demo
    accounts (secrets: demo, demo-secret in the files it names); each line
    it edits must be there once, so a changed default fails loudly."""
    for k, default in (("dex", 8080), ("sim", 8081), ("admin", 9090)):
        text = _edit(text, f"{k}: 127.0.0.1:{default}", f"{k}: 127.0.0.1:{ports[k]}")
    text = _edit(text, "url: https://dataexchange.example.com/api", f"url: {emu.dex}")
    text = _edit(text, "username: integration@example.com", "username: demo")
    text = _edit(text, "url: https://simulation.example.com", f"url: {emu.sim}")
    text = _edit(text, "token_url: https://auth.example.com/api/oauth2/token",
                 f"token_url: {emu.auth}/api/oauth2/token")
    return _edit(text, "client_id: tidegate-client", "client_id: demo")


SECRETS = (("dex-password", "demo"), ("sim-client-secret", "demo-secret"))


def write_secrets(confdir, gid):
    """The two secret files beside the configuration, 0640 root:gid, as the
    operator writes them."""
    for name, secret in SECRETS:
        path = os.path.join(confdir, name)
        with open(path, "w") as f:
            f.write(secret + "\n")
        os.chown(path, 0, gid)
        os.chmod(path, 0o640)
