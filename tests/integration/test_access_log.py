"""The access log's one vocabulary (docs/configuration.md, Signals and
logs): a request of every kind (relayed, polled and fetched, cached poll,
long-poll, caller login from the cache, 4xx refusal, vendor failure) is
logged with every field, each value from the documented set."""
import re
import time

import requests

FIELDS = {"ts", "level", "event", "id", "trace_id", "client", "user_agent", "service", "op",
          "method", "path", "correlationId", "status", "request_bytes", "bytes", "ms", "key",
          "origin", "served", "upstream_addr", "upstream_status", "upstream_ms", "retry",
          "error"}
ORIGINS = {None, "primary", "fallback", "none"}
SERVED = {"relayed", "fetched", "coalesced", "long-poll", "cached", "spool", "gateway"}
RETRIES = {None, "connect", "reset", "timeout", "tls", "502", "503", "504", "ejected"}


def lines(gw):
    return {e["id"]: e for e in gw.log_lines() if e.get("event") == "access"}


def check(e):
    assert set(e) == FIELDS, set(e) ^ FIELDS
    assert re.match(r"^[0-9a-f]{32}$", e["trace_id"]) and e["trace_id"] != "0" * 32
    assert e["client"] == "127.0.0.1"
    assert e["service"] in ("dex", "sim") and isinstance(e["op"], str)
    assert e["method"] in ("GET", "POST", "HEAD", "PUT", "DELETE", "PATCH")
    for k in ("status", "request_bytes", "bytes", "ms", "upstream_status"):
        assert isinstance(e[k], int) and e[k] >= 0, (k, e)
    assert e["origin"] in ORIGINS and e["served"] in SERVED and e["retry"] in RETRIES
    if e["origin"] in ("primary", "fallback"):
        assert re.match(r"^127\.0\.0\.1:\d+$", e["upstream_addr"]), e
    else:
        assert e["upstream_addr"] is None, e
    if e["served"] == "relayed":
        assert e["origin"] in ("primary", "fallback") and e["upstream_status"] > 0
        assert isinstance(e["upstream_ms"], int) and e["upstream_ms"] >= 0
    if e["served"] == "gateway":
        assert e["error"] is not None or e["status"] < 300, e


def test_a_line_of_every_kind(make_emulator, make_gateway):
    emu = make_emulator({"export": {"delay": "300ms"}})
    gw = make_gateway(emu, {"poll": {"interval": "100ms"}})
    gw.wait_tokens()
    h = gw.headers()

    def send(method, path, rid, **kw):
        kw.setdefault("headers", h)
        kw["headers"] = {**kw["headers"], "X-Request-Id": rid, "User-Agent": "ua/" + rid}
        return requests.request(method, gw.dex + path, timeout=20, **kw)

    r = send("POST", "/public/v1/export/activities", "relayed", json={"projectId": "P-DEMO"})
    assert r.status_code == 200
    cid = r.json()["correlationId"]
    assert send("GET", "/public/export", "fetched",
                params={"correlationId": cid}).status_code == 202
    assert send("GET", "/public/export", "long-poll",
                params={"correlationId": cid, "wait": "5"}).status_code == 200
    assert send("GET", "/public/export", "cached",
                params={"correlationId": cid}).status_code == 200
    login = {"username": "demo", "password": "demo"}
    assert send("POST", "/public/v1/authenticate", "login-1", json=login,
                headers={}).status_code == 200
    assert send("POST", "/public/v1/authenticate", "login-2", json=login,
                headers={}).status_code == 200
    assert send("GET", "/public/export", "refused", headers={},
                params={"correlationId": cid}).status_code == 401
    emu.fault(path="/public/v1/export/activities", reset=True, count=5)
    assert send("POST", "/public/v1/export/activities", "failed",
                json={"projectId": "P-DEMO"}).status_code >= 500
    time.sleep(0.2)
    got = lines(gw)
    for rid in ("relayed", "fetched", "long-poll", "cached", "login-1", "login-2", "refused",
                "failed"):
        assert rid in got, (rid, sorted(got))
        check(got[rid])
        assert got[rid]["user_agent"] == "ua/" + rid
    assert got["relayed"]["served"] == "relayed" and got["relayed"]["origin"] == "primary"
    assert got["relayed"]["request_bytes"] == len('{"projectId": "P-DEMO"}')
    assert got["relayed"]["correlationId"] is None
    for rid in ("fetched", "long-poll", "cached"):
        assert got[rid]["served"] == rid and got[rid]["origin"] is None
        assert got[rid]["correlationId"] == cid and got[rid]["upstream_ms"] is None
    assert got["login-2"]["served"] == "cached" and got["login-2"]["key"] is None
    assert got["refused"]["served"] == "gateway" and got["refused"]["status"] == 401
    assert got["refused"]["upstream_status"] == 0 and got["refused"]["error"]
    assert got["failed"]["served"] == "gateway" and got["failed"]["origin"] == "primary"
    assert got["failed"]["error"]
