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
