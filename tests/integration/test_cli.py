"""
--help, --version and wrong options of both binaries (issue 16): help on
stdout with exit 0, the version of meson.build (and `git describe` when
built from a git checkout), the usage on stderr with exit 2 for an unknown
option or a stray argument.
"""
import os
import re
import subprocess

import pytest

from conftest import BUILD, ROOT

BINARIES = ("tidegate", "tidegate-emulator")


def run(exe, *args):
    return subprocess.run([os.path.join(BUILD, exe), *args], capture_output=True, text=True,
                          timeout=10)


def project_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        return re.search(r"version:\s*'([^']+)'", f.read()).group(1)


@pytest.mark.parametrize("exe", BINARIES)
@pytest.mark.parametrize("opt", ["--help", "-h"])
def test_help(exe, opt):
    r = run(exe, opt)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith(f"usage: {exe} ")
    assert "--version" in r.stdout and "--config" in r.stdout


@pytest.mark.parametrize("exe", BINARIES)
@pytest.mark.parametrize("opt", ["--version", "-V", "-v"])
def test_version(exe, opt):
    r = run(exe, opt)
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.strip().split("\n")
    line = lines[0]
    # the gateway says what the build has (this one: everything)
    assert lines[1:] == (["features: sqlite +postgresql +systemd"] if exe == "tidegate" else [])
    assert line.split()[:2] == [exe, project_version()], line
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--git-dir"], capture_output=True)
    if git.returncode == 0:     # built from a checkout: git describe names a commit of it
        m = re.fullmatch(rf"{re.escape(exe)} \S+ \(git (\S+?)(-dirty)?\)", line)
        assert m, line
        commit = m.group(1).rsplit("-g", 1)[-1]     # a tag's describe: v1-3-gabc1234
        r = subprocess.run(["git", "-C", ROOT, "cat-file", "-e", commit + "^{commit}"])
        assert r.returncode == 0, line

@pytest.mark.parametrize("exe", BINARIES)
@pytest.mark.parametrize("args", [["--bogus"], ["-x"], ["stray"]])
def test_wrong_option(exe, args):
    r = run(exe, *args)
    assert r.returncode == 2 and r.stdout == ""
    assert f"usage: {exe} " in r.stderr


def test_keys_list_user():
    r = run("tidegate", "--keys")
    assert r.returncode == 0 and "| `user` |" in r.stdout
