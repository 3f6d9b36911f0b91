"""A large webhook is sent from its durable copy in bounded pieces (issue
31): an export of about 300 MB delivered to a callbackUrl over plain HTTP
and over TLS, the gateway's resident memory sampled every 100 ms while it
is sent (and its peak, VmHWM, read after), both under 64 MB; the receiver
gets every byte, correctly signed, identical to the export read through
the gateway. Before, each attempt mapped the whole payload file at once
and the gateway's RSS rose with the bytes sent to about the payload's
size. Runs the release build (RSS under ASan is meaningless)."""
import base64
import hashlib
import hmac
import http.server
import ssl
import threading
import time

import pytest
import requests

import webhook_verify
from conftest import RELEASE_BUILD, free_port

SECRET = "whsec_" + "bGFyZ2UtcGF5bG9hZC1zZWNyZXQtZm9yLXRlc3Rz"
ACTIVITIES = 800000            # about 300 MB of JSON
BIG = {"projects": [{"id": "P-BIG", "seed": 11, "activities": ACTIVITIES}],
       "export": {"delay": "0s", "chunk_records": 2000}}
LIMIT_KB = 64 * 1024


class Receiver:
    """A loopback receiver (HTTP, or HTTPS with cert/key) that reads each
    POST in 1 MB pieces, hashing it, and answers 200."""

    def __init__(self, cert=None, key=None):
        self.port = free_port()
        self.got = []                       # (bytes, sha256 hex, signature ok)
        rcv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                hd = {k.lower(): v for k, v in self.headers.items()}
                # the Standard Webhooks signature over id.timestamp.body,
                # worked out piece by piece as the body comes
                mac = hmac.new(webhook_verify.secret_key(SECRET),
                               f"{hd['webhook-id']}.{hd['webhook-timestamp']}.".encode(),
                               hashlib.sha256)
                h, left = hashlib.sha256(), n
                while left > 0:
                    b = self.rfile.read(min(left, 1 << 20))
                    if not b:
                        break
                    h.update(b)
                    mac.update(b)
                    left -= len(b)
                want = "v1," + base64.b64encode(mac.digest()).decode()
                ok = any(hmac.compare_digest(want, s)
                         for s in hd["webhook-signature"].split(" "))
                rcv.got.append((n - left, h.hexdigest(), ok))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.scheme = "https" if cert else "http"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def url(self):
        return f"{self.scheme}://127.0.0.1:{self.port}/hook"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_large_webhook_in_flat_memory(make_emulator, make_gateway, tmp_path, pki, tls):
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    rcv = Receiver(pki["cert"], pki["key"]) if tls else Receiver()
    try:
        emu = make_emulator(BIG, build=RELEASE_BUILD)
        hooks = {"allow": ["127.0.0.1/32"], "secret_file": str(secret),
                 "poll_interval": "200ms", "attempt_timeout": "60s"}
        if tls:
            hooks["ca_file"] = pki["ca"]
        gw = make_gateway(emu, {"log_level": "warn", "webhooks": hooks}, build=RELEASE_BUILD)
        r = requests.post(gw.dex + "/public/v1/export/activities",
                          json={"projectId": "P-BIG", "callbackUrl": rcv.url()},
                          headers=gw.headers(), timeout=30)
        assert r.status_code == 200, r.text
        cid = r.json()["correlationId"]
        samples, deadline = [], time.monotonic() + 240
        while not rcv.got:
            assert time.monotonic() < deadline, "no delivery within 240 s"
            samples.append(gw.rss_kb())
            time.sleep(0.1)
        peak, hwm = max(samples), gw.hwm_kb()
        size, digest, signed = rcv.got[0]
        # the same bytes through the gateway's own read of the export
        h, total = hashlib.sha256(), 0
        with requests.get(gw.dex + "/public/export", params={"correlationId": cid},
                          headers=gw.headers(), stream=True, timeout=120) as e:
            assert e.status_code == 200
            for chunk in e.iter_content(1 << 20):
                h.update(chunk)
                total += len(chunk)
        print(f"{'https' if tls else 'http'}: delivered {size} bytes; gateway RSS peak "
              f"sampled {peak} kB, VmHWM {hwm} kB over {len(samples)} samples")
        assert size == total and size > 250 * 1000 * 1000, (size, total)
        assert digest == h.hexdigest()
        assert signed
        assert len(rcv.got) == 1
        assert peak < LIMIT_KB, peak
        assert hwm < LIMIT_KB, hwm
    finally:
        rcv.close()
