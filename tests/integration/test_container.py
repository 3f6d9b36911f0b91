"""
The container image (dist/container/build, docs/operations.md "Run the
container"), built once per module from the session's .deb (built_deb):
the OCI layout (digests and sizes of every blob, the layer's diff_id), the
image config (the tidegate account by number, the entrypoint on
/etc/tidegate/tidegate.yaml, /var/lib/tidegate a volume, the listeners'
ports, StopSignal SIGTERM, the Docker-format Healthcheck on /readyz), the
root file system (the account, the directories' owners and modes, no apt
caches, a bound on its size); then the layer unpacked into a scratch
directory and the image's entrypoint started there with chroot as the
image's user, on free loopback ports in front of an emulator: /readyz
with both tokens held, a proxied call, the health check's command passing
while it serves and failing once it stopped; `podman run` where podman is.
"""
import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time

import pytest
import requests

from conftest import ROOT, Process, free_port, tokens_held
from debbuild import point_at_emulator, write_secrets

BUILD_SCRIPT = os.path.join(ROOT, "dist/container/build")


@pytest.fixture(scope="module")
def image(built_deb, tmp_path_factory):
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is missing (Debian package mmdebstrap): no image built")
    out = tmp_path_factory.mktemp("image")
    r = subprocess.run([BUILD_SCRIPT, "--deb", built_deb["deb"], "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    archive = out / f"tidegate-{built_deb['version']}.oci.tar"
    assert r.stdout.strip().endswith(str(archive)), r.stdout
    layout = out / "layout"
    with tarfile.open(archive) as t:
        t.extractall(layout)

    def read_blob(desc):
        return (layout / "blobs/sha256" / desc["digest"].split(":")[1]).read_bytes()
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(read_blob(index["manifests"][0]))
    config = json.loads(read_blob(manifest["config"]))
    layer = layout / "blobs/sha256" / manifest["layers"][0]["digest"].split(":")[1]
    with tarfile.open(layer) as t:
        passwd = t.extractfile("./etc/passwd").read().decode()
    account = next(l.split(":") for l in passwd.splitlines() if l.startswith("tidegate:"))
    return {"layout": layout, "index": index, "manifest": manifest, "config": config,
            "layer": str(layer), "uid": int(account[2]), "gid": int(account[3]),
            "read_blob": read_blob, "archive": str(archive), "version": built_deb["version"]}


def test_oci_layout(image):
    layout = image["layout"]
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = image["index"]
    assert index["schemaVersion"] == 2 and len(index["manifests"]) == 1
    entry = index["manifests"][0]
    assert entry["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == \
        "tidegate:" + image["version"]
    manifest = image["manifest"]
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert [l["mediaType"] for l in manifest["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar+gzip"]
    for desc in [entry, manifest["config"]] + manifest["layers"]:
        data = image["read_blob"](desc)
        assert len(data) == desc["size"], desc
        assert "sha256:" + hashlib.sha256(data).hexdigest() == desc["digest"], desc
    blobs = sorted(os.listdir(layout / "blobs/sha256"))
    assert blobs == sorted(d["digest"][7:] for d in [entry, manifest["config"]]
                           + manifest["layers"])
    with gzip.open(image["layer"], "rb") as f:
        diff_id = "sha256:" + hashlib.sha256(f.read()).hexdigest()
    assert image["config"]["rootfs"] == {"type": "layers", "diff_ids": [diff_id]}


def test_image_config(image):
    cfg = image["config"]
    assert cfg["os"] == "linux" and cfg["architecture"] == "amd64"
    c = cfg["config"]
    assert image["uid"] != 0 and image["gid"] != 0
    assert c["User"] == f"{image['uid']}:{image['gid']}"
    assert c["Entrypoint"] == ["/usr/bin/tidegate", "-c", "/etc/tidegate/tidegate.yaml"]
    assert c["StopSignal"] == "SIGTERM"
    assert c["Volumes"] == {"/var/lib/tidegate": {}}
    assert c["WorkingDir"] == "/var/lib/tidegate"
    # The ports are the default configuration's listeners.
    conf = subprocess.run(["tar", "-xzOf", image["layer"], "./etc/tidegate/tidegate.yaml"],
                          capture_output=True, text=True, check=True).stdout
    for key, port in (("dex", 8080), ("sim", 8081), ("admin", 9090)):
        assert f"{key}: 127.0.0.1:{port}" in conf
        assert f"{port}/tcp" in c["ExposedPorts"]
    assert len(c["ExposedPorts"]) == 3
    hc = c["Healthcheck"]
    assert hc["Test"][0] == "CMD" and "/dev/tcp/127.0.0.1/9090" in hc["Test"][-1]
    assert "GET /readyz " in hc["Test"][-1]
    assert 0 < hc["Timeout"] <= hc["Interval"] and hc["Retries"] >= 1
    assert c["Labels"]["org.opencontainers.image.version"] == image["version"]


def members(image):
    with tarfile.open(image["layer"]) as t:
        return {m.name[2:] if m.name.startswith("./") else m.name: m for m in t.getmembers()}


def test_root_file_system(image):
    m = members(image)
    uid, gid = image["uid"], image["gid"]

    def own(name):
        x = m[name]
        return (stat.S_IMODE(x.mode), x.uid, x.gid)
    assert own("etc/tidegate") == (0o750, 0, gid)
    assert own("etc/tidegate/tidegate.yaml") == (0o640, 0, gid)
    assert own("var/lib/tidegate") == (0o700, uid, gid)
    assert m["usr/bin/tidegate"].isfile() and "usr/share/doc/tidegate/configuration.md" in m
    for name in m:      # (apt's empty lists/lock is mmdebstrap's own)
        assert not name.startswith(("var/cache/apt/", "var/lib/apt/lists/",
                                    "usr/share/man/", "usr/share/locale/")) \
            or m[name].isdir() or m[name].size == 0, name
        assert not name.endswith(".deb"), name
    # Only what the gateway runs on: no apt, no full perl (usrmerge's).
    status = subprocess.run(["tar", "-xzOf", image["layer"], "./var/lib/dpkg/status"],
                            capture_output=True, text=True, check=True).stdout
    installed = {l.split()[1] for l in status.splitlines() if l.startswith("Package: ")}
    assert {"tidegate", "systemd-standalone-sysusers", "libyajl2"} <= installed
    assert not installed & {"apt", "perl", "usrmerge", "systemd", "curl"}, installed
    size = sum(x.size for x in m.values())
    assert size < 90e6, f"root file system {size / 1e6:.1f} MB (73 MB when written)"


def unpack(image):
    root = tempfile.mkdtemp(prefix="tg-image-")
    os.chmod(root, 0o755)
    subprocess.run(["tar", "-xzf", image["layer"], "--numeric-owner", "-C", root],
                   check=True, capture_output=True, timeout=120)
    return root


def configure(root, image, emu):
    """The image's own configuration, its listeners moved to free loopback
    ports and its vendor to the emulator, with the secret files beside it
    (0640 root:tidegate) as an operator's mount would hold them."""
    ports = {k: free_port() for k in ("dex", "sim", "admin")}
    path = os.path.join(root, "etc/tidegate/tidegate.yaml")
    text = point_at_emulator(open(path).read(), emu, ports)
    with open(path, "w") as f:
        f.write(text)
    write_secrets(os.path.join(root, "etc/tidegate"), image["gid"])
    return ports


def test_chroot_run(image, make_emulator):
    if os.geteuid() != 0 or shutil.which("chroot") is None:
        pytest.skip("chroot needs root")
    root = unpack(image)
    try:
        emu = make_emulator()
        ports = configure(root, image, emu)
        c = image["config"]["config"]
        as_user = ["chroot", f"--userspec={c['User']}", root]
        r = subprocess.run(as_user + [c["Entrypoint"][0], "-t"] + c["Entrypoint"][1:],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r.stderr
        admin = f"http://127.0.0.1:{ports['admin']}"
        gw = Process(as_user + c["Entrypoint"], os.path.join(root, "tidegate.log"),
                     admin + "/healthz")
        health = as_user + [a.replace("/9090", f"/{ports['admin']}") for a in
                            c["Healthcheck"]["Test"][1:]]
        try:
            deadline = time.monotonic() + 15
            while True:
                r = requests.get(admin + "/readyz", timeout=5)
                if r.status_code == 200 and tokens_held(r.json()):
                    break
                assert time.monotonic() < deadline, r.text
                time.sleep(0.1)
            cases = requests.get(f"http://127.0.0.1:{ports['sim']}/api/v1/cases", timeout=10)
            assert cases.status_code == 200, cases.text
            assert cases.json() and all("caseId" in x for x in cases.json()), cases.text
            h = subprocess.run(health, capture_output=True, text=True, timeout=10)
            assert h.returncode == 0, h.stderr
            # The state is written as the image's user in its volume.
            made = os.listdir(os.path.join(root, "var/lib/tidegate"))
            assert "owners.db" in made, made
            st = os.stat(os.path.join(root, "var/lib/tidegate/owners.db"))
            assert (st.st_uid, st.st_gid) == (image["uid"], image["gid"])
        finally:
            rc = gw.stop()      # the image's StopSignal
        assert rc == 0, gw.read_log()
        h = subprocess.run(health, capture_output=True, text=True, timeout=10)
        assert h.returncode != 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_podman_run(image, make_emulator):
    """Where podman works: the image loaded and run with its configuration
    mounted on /etc/tidegate (host network, free loopback ports), /readyz
    answered, stopped with its StopSignal."""
    if shutil.which("podman") is None:
        pytest.skip("podman is missing: the image ran from its root file system (chroot)")
    r = subprocess.run(["podman", "load", "-i", image["archive"]], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip("podman cannot load images on this machine: " + r.stderr.strip()[-300:])
    ref = r.stdout.strip().split()[-1]
    root = unpack(image)
    name = f"tidegate-test-{os.getpid()}"
    try:
        ports = configure(root, image, make_emulator())
        run = ["podman", "run", "--network=host",
               "-v", os.path.join(root, "etc/tidegate") + ":/etc/tidegate:ro"]
        r = subprocess.run(run + ["--rm", "--entrypoint", "/usr/bin/tidegate", ref, "-t", "-c",
                                  "/etc/tidegate/tidegate.yaml"],
                           capture_output=True, text=True, timeout=120)
        if "configuration OK" not in r.stdout and "tidegate.yaml" not in r.stderr:
            pytest.skip("podman run does not work here: " + r.stderr.strip()[-300:])
        assert r.returncode == 0, r.stdout + r.stderr
        subprocess.run(run + ["-d", "--name", name, ref], check=True, capture_output=True,
                       timeout=120)
        deadline = time.monotonic() + 30
        while True:
            try:
                r = requests.get(f"http://127.0.0.1:{ports['admin']}/readyz", timeout=2)
                if r.status_code == 200 and tokens_held(r.json()):
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "no /readyz from the podman container"
            time.sleep(0.2)
        r = subprocess.run(["podman", "stop", "-t", "40", name], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        code = subprocess.run(["podman", "inspect", "--format", "{{.State.ExitCode}}", name],
                              capture_output=True, text=True, timeout=30).stdout.strip()
        assert code == "0", code
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, timeout=60)
        subprocess.run(["podman", "rmi", "-f", ref], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
