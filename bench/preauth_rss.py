"""
bench/preauth_rss.py - peak RSS of a tidegate while 4 clients without an
API key push 200 MB bodies (bounded: each client sends at most 200 MB, for
at most 60 s), and how many of those bytes the gateway let in. The front
door refuses such a body on its head, before reading it.

    /usr/bin/python3 bench/preauth_rss.py build-release
"""
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import conftest  # noqa: E402  (the tests' process helpers)
build = sys.argv[1]
d = tempfile.mkdtemp()
os.makedirs(d + "/e"); os.makedirs(d + "/g")
emu = conftest.Emulator(d + "/e", None, build)
gw = conftest.Gateway(d + "/g", emu, {"max_body": "256MB"}, build)
before = gw.rss_kb()
sent = [0] * 4
def push(i):
    s = socket.create_connection(("127.0.0.1", gw.ports["dex"]), timeout=10)
    s.sendall(b"POST /public/v1/import/activities HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: 209715200\r\n\r\n")
    blob = b"[" + b" " * (1 << 20)
    t0 = time.time()
    try:
        while sent[i] < 200 << 20 and time.time() - t0 < 60:
            s.sendall(blob); sent[i] += len(blob)
    except OSError:
        pass
    s.close()
ts = [threading.Thread(target=push, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
time.sleep(0.5)
print(f"{build}: RSS before {before} kB, high-water {gw.hwm_kb()} kB; bytes the clients got in: "
      f"{sum(sent) >> 20} MB of 800 MB")
gw.stop(); emu.stop()
