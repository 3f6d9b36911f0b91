"""Emulator exports: POST /public/v1/export/<kind> with the filters of spec tables E1-E7,
GET /public/export readiness, expiry and streaming, callbacks, and memory use of large
exports. Expected results are computed here from the unfiltered export, so each filter
test checks the exact ids a filter must keep."""
import http.server
import json
import os
import socket
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
import requests

KINDS = ["activities", "activity-categories", "personnel", "timesheets",
         "work-order-sequences", "work-orders", "work-packages"]

PROJECT = {"id": "P-F", "seed": 7, "sites": 6, "assets_per_site": 3, "activity_categories": 12,
           "personnel": 40, "timesheets": 60, "work_order_sequences": 5, "work_orders": 40,
           "work_packages": 20, "activities": 300}
RICH = {"projects": [PROJECT], "export": {"delay": "0s"}}


class Dex:
    """Export calls against one emulator with one token."""

    def __init__(self, emu, project="P-F"):
        self.emu = emu
        self.project = project
        self.h = emu.dex_headers()

    def create(self, kind, body, raw=None):
        url = f"{self.emu.dex}/public/v1/export/{kind}"
        if raw is not None:
            return requests.post(url, data=raw, headers=self.h, timeout=10)
        return requests.post(url, json=body, headers=self.h, timeout=10)

    def get(self, cid, **kw):
        return requests.get(self.emu.dex + "/public/export", params={"correlationId": cid},
                            headers=self.h, timeout=60, **kw)

    def fetch(self, cid, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            r = self.get(cid)
            if r.status_code != 202 or time.monotonic() > deadline:
                return r
            time.sleep(0.05)

    def cid(self, kind, **filters):
        r = self.create(kind, {"projectId": self.project, **filters})
        assert r.status_code == 200, r.text
        return r.json()["correlationId"]

    def export(self, kind, **filters):
        r = self.fetch(self.cid(kind, **filters))
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == "application/json"
        return r.json()


@pytest.fixture
def dex(make_emulator):
    return Dex(make_emulator(RICH))


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def ids(records):
    return [r["id"] for r in records]


def pick(records, values):
    """A value that some but not all records carry, so the filter must narrow."""
    counts = {}
    for r in records:
        for v in set(values(r)):
            counts[v] = counts.get(v, 0) + 1
    for v, n in sorted(counts.items()):
        if 0 < n < len(records):
            return v
    raise AssertionError("no narrowing value in the data")


def check_set_filter(dex, kind, everything, name, values):
    a = pick(everything, values)
    b = next(v for r in reversed(everything) for v in values(r) if v != a)
    for chosen in ([a], [a, b]):
        want = [r["id"] for r in everything if set(values(r)) & set(chosen)]
        got = dex.export(kind, **{name: chosen})
        assert ids(got) == want, (kind, name, chosen)
        assert 0 < len(want) < len(everything), (kind, name)


def check_date_filter(dex, kind, everything, name, field, op):
    values = sorted(r[field] for r in everything if r.get(field))
    edge = values[len(values) // 2]
    keep = (lambda t: t >= ts(edge)) if op == "ge" else (lambda t: t <= ts(edge))
    want = [r["id"] for r in everything if r.get(field) and keep(ts(r[field]))]
    assert 0 < len(want) < len(everything), (kind, name)
    assert edge in [r[field] for r in everything if r["id"] in want], "bound is inclusive"
    assert ids(dex.export(kind, **{name: edge})) == want, (kind, name)
    # the same instant written with another zone selects the same records
    shifted = ts(edge).astimezone(timezone(timedelta(hours=2))).isoformat()
    assert ids(dex.export(kind, **{name: shifted})) == want, (kind, name, shifted)


def one(field):
    return lambda r: [r[field]] if r.get(field) is not None else []


def many(field):
    return lambda r: r.get(field) or []


SET_FILTERS = {
    "activities": [("workPackages", one("workPackageId")), ("sites", one("siteId")),
                   ("names", one("name")), ("activities", one("id")),
                   ("statuses", one("status")), ("status", one("status"))],
    "activity-categories": [("activityCategories", one("id")), ("names", one("name")),
                            ("workPackages", many("workPackageIds"))],
    "personnel": [("names", one("name")), ("emails", one("email")), ("roles", one("role")),
                  ("departments", one("department")), ("teams", many("teams")),
                  ("workPackages", many("workPackageIds"))],
    "timesheets": [("timesheets", one("id")), ("names", one("name")),
                   ("statuses", one("status")), ("status", one("status")),
                   ("submittedBy", one("submittedBy")), ("approvedBy", one("approvedBy")),
                   ("timeEntries", lambda r: [e["id"] for e in r["timeEntries"]]),
                   ("activities", many("activityIds")),
                   ("workPackages", many("workPackageIds")),
                   ("personnel", many("personnelIds"))],
    "work-order-sequences": [("workOrderSequences", one("id")), ("names", one("name"))],
    "work-orders": [("workOrders", one("id")), ("names", one("name")), ("types", one("type")),
                    ("priorities", one("priority")), ("workPackages", one("workPackageId")),
                    ("workOrderSequences", one("workOrderSequenceId"))],
    "work-packages": [("workPackages", one("id")), ("names", one("name")),
                      ("types", one("type")), ("status", one("status")),
                      ("statuses", one("status")), ("countries", one("country")),
                      ("assetTypes", one("assetType"))],
}

DATE_FILTERS = {
    "activities": [("startDate", "startDate", "ge"), ("endDate", "endDate", "ge")],
    "timesheets": [("dateFrom", "createdAt", "ge"), ("dateTo", "createdAt", "le")],
    "work-packages": [("startDate", "startDate", "ge"), ("endDate", "endDate", "le")],
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_filter_narrows_exactly(dex, kind):
    everything = dex.export(kind)
    assert len(everything) == {"activities": 300, "activity-categories": 12, "personnel": 40,
                               "timesheets": 60, "work-order-sequences": 5, "work-orders": 40,
                               "work-packages": 20}[kind]
    assert len(set(ids(everything))) == len(everything)
    for name, values in SET_FILTERS[kind]:
        check_set_filter(dex, kind, everything, name, values)
    for name, field, op in DATE_FILTERS.get(kind, []) + [("changedSince", "updatedAt", "ge")]:
        check_date_filter(dex, kind, everything, name, field, op)


def test_filters_combine_and_empty_arrays_filter_nothing(dex):
    everything = dex.export("activities")
    assert dex.export("activities", sites=[], statuses=[], names=[]) == everything
    assert dex.export("activities", bogus=1, another={"x": []}) == everything
    assert dex.export("activities", sites=None) == everything
    want = [r["id"] for r in everything if r["siteId"] == "S-2" and r["status"] == "PLANNED"]
    assert 0 < len(want)
    assert ids(dex.export("activities", sites=["S-2"], statuses=["PLANNED"])) == want
    assert dex.export("activities", sites=["S-999"]) == []


def test_activity_export_record_shape(dex):
    records = dex.export("activities")
    fields = {"startDate", "endDate", "createdAt", "updatedAt", "teams", "name",
              "activityCategory", "personnelIds", "status", "type", "siteId", "id",
              "externalRemarks"}
    with_wp = [r for r in records if "workPackageId" in r]
    assert 0 < len(with_wp) < len(records)
    for r in records:
        assert set(r) - {"workPackageId"} == fields
        assert r["status"] in ("PLANNED", "DISPATCHED", "COMPLETED")
        for f in ("startDate", "endDate", "createdAt", "updatedAt"):
            assert r[f].endswith("Z") and ts(r[f])
        assert ts(r["startDate"]) <= ts(r["endDate"])
        assert all(isinstance(t, str) for t in r["teams"] + r["personnelIds"])
    assert "NONE" in {r["type"] for r in records}
    assert ids(records) == [f"ACT-{i:06d}" for i in range(1, 301)]


def test_references_point_at_generated_records(dex):
    by_kind = {k: dex.export(k) for k in KINDS}
    known = {k: set(ids(v)) for k, v in by_kind.items()}
    sites = {f"S-{i}" for i in range(1, 7)}
    for a in by_kind["activities"]:
        assert a["siteId"] in sites and a["activityCategory"] in known["activity-categories"]
        assert set(a["personnelIds"]) <= known["personnel"]
        assert a.get("workPackageId", "WP-1") in known["work-packages"]
    for t in by_kind["timesheets"]:
        assert set(t["activityIds"]) <= known["activities"]
        assert set(t["workPackageIds"]) <= known["work-packages"]
        assert {t["submittedBy"], t["approvedBy"]} - {None} <= known["personnel"]
        assert t["status"] in ("DRAFT", "PENDING", "SIGNED", "REJECTED")
    for o in by_kind["work-orders"]:
        assert o["workPackageId"] in known["work-packages"]
        assert o["workOrderSequenceId"] in known["work-order-sequences"] | {None}
    for p in by_kind["work-packages"]:
        assert p["status"] in ("NONE", "PLANNED", "CONFIRMED", "FINISHED", "CANCELED")
        assert ts(p["startDate"]) <= ts(p["endDate"])


# The export record has no assetId or workOrderId, yet E1 filters on them: the
# generator is reproduced here (splitmix64 over seed, kind, index, field) to know them.
M64 = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rand(seed, kind, i, field):
    return mix(((seed * 1000003) & M64) ^ mix(((kind << 56) ^ (field << 40) ^ i) & M64))


def hidden_activity_fields(i):
    site = rand(PROJECT["seed"], 1, i, 0) % PROJECT["sites"] + 1
    r = rand(PROJECT["seed"], 1, i, 3)
    wo = f"WO-{(r >> 36) % PROJECT['work_orders'] + 1}" if (r >> 32) % 2 == 0 else None
    return f"S-{site}", f"A-{site}-{r % PROJECT['assets_per_site'] + 1}", wo


def test_activity_filters_on_assets_and_work_orders(dex):
    everything = dex.export("activities")
    oracle = {f"ACT-{i + 1:06d}": hidden_activity_fields(i) for i in range(300)}
    assert all(oracle[r["id"]][0] == r["siteId"] for r in everything)
    for name, col in (("assets", 1), ("workOrders", 2)):
        check_set_filter(dex, "activities", everything, name,
                         lambda r, c=col: [oracle[r["id"]][c]] if oracle[r["id"]][c] else [])


def test_date_filter_quirks(dex):
    acts = dex.export("activities")
    edge = sorted(r["endDate"] for r in acts)[100]
    got = dex.export("activities", endDate=edge)
    assert got and all(ts(r["endDate"]) >= ts(edge) for r in got)  # E1: ending on or after
    assert len(got) == sum(ts(r["endDate"]) >= ts(edge) for r in acts)
    wps = dex.export("work-packages")
    edge = sorted(r["endDate"] for r in wps)[10]
    got = dex.export("work-packages", endDate=edge)
    assert got and all(ts(r["endDate"]) <= ts(edge) for r in got)  # E7: end on or before
    sheets = dex.export("timesheets")
    lo, hi = sorted(r["createdAt"] for r in sheets)[20], sorted(r["createdAt"] for r in sheets)[40]
    got = dex.export("timesheets", dateFrom=lo, dateTo=hi)
    assert ids(got) == [r["id"] for r in sheets if ts(lo) <= ts(r["createdAt"]) <= ts(hi)]
    assert len(got) == 21


def test_alternate_spellings(dex):
    everything = dex.export("work-orders")
    r = dex.create("work-orders", {"projectID": "P-F", "workOrders": ["WO-3"]})
    assert r.status_code == 200, r.text
    assert ids(dex.fetch(r.json()["correlationId"]).json()) == ["WO-3"]
    assert len(everything) == 40
    planned = dex.export("work-packages", statuses=["PLANNED"])
    assert planned == dex.export("work-packages", status=["PLANNED"])
    assert planned and {p["status"] for p in planned} == {"PLANNED"}


def assert_error(r, status, text=None):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert set(body) >= {"statusCode", "error", "message"}
    assert body["statusCode"] == status
    assert body["error"] == {400: "BAD_REQUEST", 404: "NOT_FOUND"}[status]
    if text:
        assert text in body["message"], body


BAD_BODIES = [
    ("activities", {}, "projectId"),
    ("activities", {"projectId": ""}, "projectId"),
    ("activities", {"projectId": 5}, "projectId"),
    ("activities", {"projectId": "P-F", "startDate": "2024-13-01T00:00:00Z"}, "startDate"),
    ("activities", {"projectId": "P-F", "endDate": "2024-01-01T00:00:00"}, "endDate"),
    ("activities", {"projectId": "P-F", "startDate": "2024-01-01"}, "startDate"),
    ("activities", {"projectId": "P-F", "startDate": 1704067200}, "startDate"),
    ("timesheets", {"projectId": "P-F", "dateFrom": "2024-02-30T00:00:00Z"}, "dateFrom"),
    ("personnel", {"projectId": "P-F", "changedSince": "yesterday"}, "changedSince"),
    ("activities", {"projectId": "P-F", "statuses": ["DONE"]}, "PLANNED, DISPATCHED"),
    ("timesheets", {"projectId": "P-F", "statuses": ["APPROVED"]}, "statuses"),
    ("work-packages", {"projectId": "P-F", "status": ["planned"]}, "CANCELED"),
    ("work-packages", {"projectId": "P-F", "statuses": ["OPEN"]}, "statuses"),
    ("activities", {"projectId": "P-F", "sites": [1]}, "sites must be an array of strings"),
    ("activities", {"projectId": "P-F", "sites": "S-1"}, "sites"),
    ("work-orders", {"projectId": "P-F", "priorities": [None]}, "priorities"),
    ("personnel", {"projectId": "P-F", "teams": [["Alpha"]]}, "teams"),
    ("activity-categories", {"projectId": "P-F", "callbackUrl": "not a url"}, "callbackUrl"),
    ("activities", {"projectId": "P-F", "callbackUrl": "ftp://127.0.0.1/x"}, "callbackUrl"),
    ("timesheets", {"projectId": "P-F", "callbackURL": "http://"}, "callbackUrl"),
    ("activities", {"projectId": "P-F", "callbackUrl": 7}, "callbackUrl"),
]


def test_bad_requests_are_400(dex):
    for kind, body, text in BAD_BODIES:
        assert_error(dex.create(kind, body), 400, text)
    for raw in ("[]", '"P-F"', "{", "", "null"):
        assert_error(dex.create("activities", None, raw=raw), 400)
    r = requests.get(dex.emu.dex + "/public/export", headers=dex.h)
    assert_error(r, 400, "correlationId")
    assert_error(dex.get(""), 400)
    assert dex.emu.stats()["exports"] == 0


def test_unknown_things_are_404(dex):
    assert_error(dex.create("activities", {"projectId": "P-NOPE"}), 404, "P-NOPE")
    assert_error(dex.create("widgets", {"projectId": "P-F"}), 404)
    assert_error(dex.get("00000000-0000-4000-8000-000000000000"), 404)
    r = requests.post(dex.emu.dex + "/public/v1/export/activities/more", json={}, headers=dex.h)
    assert r.status_code == 404


def test_every_kind_returns_a_correlation_id(emulator):
    d = Dex(emulator, "P-DEMO")
    seen = set()
    for kind in KINDS:
        r = d.create(kind, {"projectId": "P-DEMO"})
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == "application/json"
        assert list(r.json()) == ["correlationId"]
        cid = r.json()["correlationId"]
        assert len(cid) == 36 and cid[14] == "4" and cid not in seen
        seen.add(cid)
    assert emulator.stats()["exports"] == len(KINDS)
    assert emulator.calls("POST /public/v1/export/activities") == 1


def test_not_ready_is_202_then_200(emulator):
    d = Dex(emulator, "P-DEMO")
    cid = d.cid("activities")
    r = d.get(cid)
    assert r.status_code == 202
    assert r.headers["Content-Type"] == "application/json"
    assert r.json() == {"correlationId": cid, "status": "IN_PROGRESS",
                        "message": "export is being prepared"}
    assert r.headers["Retry-After"] == "1"
    time.sleep(0.35)
    r = d.get(cid)
    assert r.status_code == 200 and len(r.json()) == 50
    assert d.get(cid).json() == r.json()  # may be read again until it expires


def test_readiness_and_expiry_follow_the_emulator_clock(emulator):
    d = Dex(emulator, "P-DEMO")
    cid = d.cid("work-orders")
    assert d.get(cid).status_code == 202
    emulator.advance("1s")
    assert d.get(cid).status_code == 200
    emulator.advance("59m")
    assert d.get(cid).status_code == 200
    emulator.advance("2m")
    d.h = emulator.dex_headers()  # tokens live 1h on the same clock
    assert_error(d.get(cid), 404, "expired")
    assert emulator.stats()["exports"] == 0
    # unread exports are dropped too once expired
    d.cid("personnel")
    emulator.advance("2h")
    d.h = emulator.dex_headers()
    d.cid("personnel")
    assert emulator.stats()["exports"] == 1


def test_same_seed_same_data(make_emulator):
    a, b = Dex(make_emulator(RICH)), Dex(make_emulator(RICH))
    for kind in KINDS:
        assert a.export(kind) == b.export(kind), kind
    other = json.loads(json.dumps(RICH))
    other["projects"][0]["seed"] = 8
    c = Dex(make_emulator(other))
    assert c.export("activities") != a.export("activities")
    assert ids(c.export("activities")) == ids(a.export("activities"))


class Hook:
    """A loopback HTTP server that records the POSTs it receives."""

    def __init__(self, status=200):
        self.received = []
        self.event = threading.Event()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = self.headers.get("Content-Length")
                body = self.rfile.read(int(n)) if n is not None else self.rfile.read()
                hook.received.append((self.path, dict(self.headers), body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                hook.event.set()

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_for_log(emu, text, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in emu.read_log():
            return True
        time.sleep(0.05)
    return False


def test_callback_receives_the_export(make_emulator):
    emu = make_emulator(RICH)
    d = Dex(emu)
    hook = Hook()
    try:
        url = f"http://127.0.0.1:{hook.port}/hook?x=1"
        cid = d.cid("timesheets", callbackURL=url, statuses=["SIGNED", "DRAFT"])
        assert hook.event.wait(5), "callback not delivered"
        path, headers, body = hook.received[0]
        assert path == "/hook?x=1"
        assert headers["Content-Type"] == "application/json"
        assert headers["X-Correlation-Id"] == cid
        sent = json.loads(body)
        assert sent and {t["status"] for t in sent} == {"SIGNED", "DRAFT"}
        assert sent == d.fetch(cid).json()
        assert wait_for_log(emu, '"outcome":"delivered"')
        time.sleep(0.2)
        assert len(hook.received) == 1
    finally:
        hook.close()


def test_callback_to_unreachable_url_is_logged(make_emulator):
    emu = make_emulator(RICH)
    d = Dex(emu)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    cid = d.cid("work-packages", callbackUrl=f"http://127.0.0.1:{port}/gone")
    assert wait_for_log(emu, '"outcome":"failed"')
    assert cid in emu.read_log()
    assert len(d.export("work-packages")) == 20
    hook = Hook(status=500)
    try:
        d.cid("work-packages", callbackUrl=f"http://localhost:{hook.port}/")
        assert hook.event.wait(5)
        assert wait_for_log(emu, '"outcome":"rejected"')
    finally:
        hook.close()


def test_stop_with_callback_pending_or_unanswered(make_emulator):
    emu = make_emulator({"projects": [PROJECT], "export": {"delay": "200ms"}})
    d = Dex(emu)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)  # accepts connections, never answers
    try:
        d.cid("personnel", callbackUrl=f"http://127.0.0.1:{silent.getsockname()[1]}/")
        time.sleep(0.5)  # the POST is now in flight
        d.cid("personnel", callbackUrl="http://127.0.0.1:9/never")  # timer still pending
        assert emu.stop() == 0, emu.read_log()
    finally:
        silent.close()


def raw_get(emu, token, cid, linger_reset=False):
    s = socket.create_connection(("127.0.0.1", emu.ports["dex"]), timeout=10)
    if linger_reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.sendall((f"GET /public/export?correlationId={cid} HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {token}\r\n\r\n").encode())
    got = b""
    while len(got) < 200000:
        got += s.recv(65536)
    assert got.startswith(b"HTTP/1.1 200") and b"chunked" in got.split(b"\r\n\r\n")[0]
    return s


def test_client_disconnecting_mid_stream(make_emulator):
    emu = make_emulator({"projects": [{"id": "P-MID", "activities": 60000}],
                         "export": {"delay": "0s"}})
    d = Dex(emu, "P-MID")
    token = emu.token()
    cid = d.cid("activities")
    for reset in (False, True, False, True):
        raw_get(emu, token, cid, linger_reset=reset).close()
    assert wait_for_log(emu, "export_stream_aborted")
    time.sleep(0.2)
    assert emu.token()
    r = d.get(cid, stream=True)
    first = next(r.iter_content(100))
    r.close()
    assert first.startswith(b'[{"startDate"')
    assert len(d.export("activities", sites=["S-1"])) > 0


def test_stop_with_a_stream_open(make_emulator):
    emu = make_emulator({"projects": [{"id": "P-MID", "activities": 60000}],
                         "export": {"delay": "0s"}})
    cid = Dex(emu, "P-MID").cid("activities")
    s = raw_get(emu, emu.token(), cid)
    try:
        assert emu.stop() == 0, emu.read_log()
    finally:
        s.close()


def test_sparse_filter_over_many_records_streams(make_emulator):
    emu = make_emulator({"projects": [{"id": "P-MID", "activities": 60000}],
                         "export": {"delay": "0s", "chunk_records": 50}})
    d = Dex(emu, "P-MID")
    got = d.export("activities", activities=["ACT-000007", "ACT-059999"])
    assert ids(got) == ["ACT-000007", "ACT-059999"]


def test_large_export_streams_with_bounded_memory(make_emulator, monkeypatch):
    # Under ASan, freed memory waits in a 256 MB quarantine, which would make
    # RSS follow the bytes sent rather than what the emulator holds; shrink it.
    monkeypatch.setenv("ASAN_OPTIONS",
                       os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=8")
    n = 200000
    emu = make_emulator({"projects": [{"id": "P-BIG", "activities": n}],
                         "export": {"delay": "0s"}})
    d = Dex(emu, "P-BIG")
    d.export("work-order-sequences")  # warm up the paths once
    base = emu.rss_kb()
    cid = d.cid("activities")
    parts, size, peak = [], 0, 0
    with d.get(cid, stream=True) as r:
        assert r.status_code == 200
        assert r.headers.get("Transfer-Encoding") == "chunked"
        for i, chunk in enumerate(r.iter_content(1 << 16)):
            parts.append(chunk)
            size += len(chunk)
            if i % 64 == 0:
                peak = max(peak, emu.rss_kb())
    records = json.loads(b"".join(parts))
    assert len(records) == n
    assert records[0]["id"] == "ACT-000001" and records[-1]["id"] == f"ACT-{n:06d}"
    growth_kb = max(peak, emu.hwm_kb()) - base
    print(f"\nexport of {n} activities: {size} bytes, emulator RSS {base} kB before, "
          f"growth {growth_kb} kB")
    assert size > 60 * 1024 * 1024
    assert growth_kb < 32 * 1024, f"RSS grew by {growth_kb} kB for a {size}-byte export"
