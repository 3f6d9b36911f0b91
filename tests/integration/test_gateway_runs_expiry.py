"""The run registry's fallback expiry: a vendor whose answers carry no
`expiresAt` (the simulation API documents it, but a vendor may leave it
out) gets its runs expired 30 days after submission, end to end: recorded
so at submission, still served before, answered 410 GONE after (the
embedded emulator's clock is the gateway's, so days can be advanced). A
proxy in front of the emulator drops `expiresAt` from every answer, and
the emulator keeps runs 60 days, so a gateway that took a vendor's
retention from anywhere else would be seen."""
import http.client
import http.server
import json
import threading

import requests

from test_gateway_runs import advance, embedded_gateway, submit_case, wait_row
from test_config_check import wait_event

DAY_MS = 24 * 3600 * 1000


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k != "expiresAt"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def without_expires_at(target):
    """A proxy to target ("127.0.0.1:port") that drops expiresAt from JSON
    answers; serve_forever on a thread (shutdown() at the end)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            c = http.client.HTTPConnection(target, timeout=10)
            c.request(self.command, self.path, body=body or None,
                      headers={k: v for k, v in self.headers.items()
                               if k.lower() not in ("host", "content-length", "connection")})
            r = c.getresponse()
            data = r.read()
            if (r.getheader("Content-Type") or "").startswith("application/json") and data:
                data = json.dumps(strip(json.loads(data))).encode()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            c.close()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = forward

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_run_without_expires_at_expires_after_30_days(tmp_path, make_gateway):
    gw = embedded_gateway(tmp_path, make_gateway, emulator={"sim": {"retention": "60d"}})
    proxy = without_expires_at(gw.cfg["sim"]["url"].split("//", 1)[1])
    try:
        gw.cfg["sim"]["url"] = f"http://127.0.0.1:{proxy.server_address[1]}"
        gw.write_config(gw.cfg)
        gw.send_signal(1)                                      # SIGHUP: the new URL
        wait_event(gw, "reloaded", timeout=5)
        r = submit_case(gw)
        assert "expiresAt" not in r.json(), r.json()           # the proxy dropped it
        sim_id = r.json()["simulationId"]
        row = wait_row(gw, sim_id, lambda row: row["status"] == "COMPLETED")
        assert row["expires_at"] - row["submitted_at"] == 30 * DAY_MS, row
        url = gw.sim + "/api/v1/simulations/" + sim_id
        advance(gw, "29d")
        r = requests.get(url, headers=gw.headers(), timeout=10)
        assert r.status_code == 200, r.text
        advance(gw, "2d")
        r = requests.get(url, headers=gw.headers(), timeout=10)
        assert r.status_code == 410, r.text
        assert r.json()["error"] == "GONE" and "expired" in r.json()["message"]
        token = requests.post(gw.cfg["sim"]["auth_url"] + "/api/oauth2/token", timeout=10,
                              data={"grant_type": "client_credentials", "client_id": "demo",
                                    "client_secret": "demo-secret"}).json()["access_token"]
        direct = requests.get(gw.cfg["sim"]["fallback_url"] + "/api/v1/simulations/" + sim_id,
                              headers={"Authorization": "Bearer " + token}, timeout=10)
        assert direct.status_code == 200, direct.text          # the vendor keeps it 60 days
    finally:
        proxy.shutdown()
