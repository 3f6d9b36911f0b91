"""
A gateway built without the optional libraries (meson -Dpostgres=disabled
-Dsystemd=disabled): it builds, links neither libpq nor libsystemd, says
so in --version, and refuses a PostgreSQL state.url at the check (and at
the start) with a clear reason, while SQLite works as ever.
"""
import os
import subprocess

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    build = str(tmp_path_factory.mktemp("bare"))
    r = subprocess.run(["meson", "setup", build, ROOT, "-Dpostgres=disabled",
                        "-Dsystemd=disabled", "-Dtests=false", "-Dbuildtype=release"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run(["ninja", "-C", build, "tidegate"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:]
    return os.path.join(build, "tidegate")


def check(exe, tmp_path, url):
    conf = tmp_path / "tidegate.yaml"
    state = f"state:\n  url: \"{url}\"\n" if url else ""
    conf.write_text("upstream: remote\n" + state)
    return subprocess.run([exe, "-t", "-c", str(conf)], capture_output=True, text=True,
                          timeout=30, cwd=str(tmp_path))


def test_version_says_what_is_built(bare):
    r = subprocess.run([bare, "--version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert r.stdout.split("\n")[1] == "features: sqlite -postgresql -systemd"


def test_links_neither_library(bare):
    r = subprocess.run(["ldd", bare], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert "libpq" not in r.stdout and "libsystemd" not in r.stdout


def test_postgresql_refused_sqlite_checks(bare, tmp_path):
    r = check(bare, tmp_path, "postgresql://gw@127.0.0.1/tidegate")
    assert r.returncode != 0
    assert "the postgresql backend is not built into this tidegate" in r.stderr + r.stdout
    r = check(bare, tmp_path, None)
    assert r.returncode == 0, r.stderr
