"""Emulator activity imports: JSON and file submission, the rate-driven status
counters, created versus updated, row failures in row form, and request errors."""
import json
import time

import pytest
import requests

IMPORT = "/public/v1/import/activities"
FILE = "/public/v1/import/activities/file"

ROWFORM_FIELDS = [
    "id", "siteId", "assetId", "subassemblyId", "componentId", "startDate", "startTime",
    "endDate", "endTime", "activityCategory", "type", "status", "workPackageId",
    "additionalClientWork", "voNumber", "voAgreedWith", "voSigned", "workOrderId", "teams",
    "personnelIds", "manpower", "internalRemarks", "externalRemarks", "dropOffTransportId",
    "pickupTransportId", "isLocked",
]


def rowform(**values):
    form = {k: "" for k in ROWFORM_FIELDS}
    form.update(values)
    return form


class Client:
    """One logged-in caller of the import endpoints."""

    def __init__(self, emu):
        self.emu = emu
        self.hdr = emu.dex_headers()

    def submit(self, rows, project="P-DEMO"):
        r = requests.post(self.emu.dex + IMPORT, params={"projectId": project}, json=rows,
                          headers=self.hdr, timeout=5)
        assert r.status_code == 200, r.text
        return r.json()["correlationId"]

    def get(self, what, cid):
        path = {"status": "/public/v1/import/status", "result": "/public/v1/import/result",
                "failed": "/public/v1/import/activities/failed"}[what]
        r = requests.get(self.emu.dex + path, params={"correlationId": cid}, headers=self.hdr,
                         timeout=5)
        assert r.status_code == 200, r.text
        return r.json()

    def wait(self, cid, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            st = self.get("status", cid)
            if st["processed"] == st["total"] or time.monotonic() > deadline:
                return st
            time.sleep(0.02)


@pytest.fixture
def client(emulator):
    return Client(emulator)


def test_json_array_and_single_object(client):
    cid = client.submit([{"id": "NEW-1", "siteId": "S-1"}, {"id": "NEW-2", "siteId": "S-2"}])
    assert len(cid) == 36 and cid.count("-") == 4
    st = client.wait(cid)
    assert st == {"correlationId": cid, "total": 2, "processed": 2, "created": 2,
                  "updated": 0, "failed": 0, "deleted": 0, "messages": []}
    res = client.get("result", cid)
    assert [(e["index"], e["id"]) for e in res["created"]] == [(1, "NEW-1"), (2, "NEW-2")]
    assert res["created"][1]["activity"] == rowform(id="NEW-2", siteId="S-2")
    assert res["updated"] == [] and res["failed"] == []

    cid = client.submit({"id": "NEW-3", "siteId": "S-3", "status": "PLANNED"})
    st = client.wait(cid)
    assert (st["total"], st["processed"], st["created"]) == (1, 1, 1)

    cid = client.submit([])
    assert client.get("status", cid)["total"] == 0
    assert client.get("result", cid) == {"created": [], "updated": [], "failed": []}


def test_created_versus_updated(client):
    cid = client.submit([{"id": "NEW-1", "siteId": "S-1"},
                         {"id": "ACT-000001", "siteId": "S-2"},
                         {"id": "NEW-1", "siteId": "S-3"}])
    st = client.wait(cid)
    assert (st["created"], st["updated"], st["failed"]) == (1, 2, 0)
    res = client.get("result", cid)
    assert [(e["index"], e["id"]) for e in res["created"]] == [(1, "NEW-1")]
    assert [(e["index"], e["id"]) for e in res["updated"]] == [(2, "ACT-000001"), (3, "NEW-1")]

    # a second import of the same ids only updates
    cid = client.submit([{"id": "NEW-1", "siteId": "S-1"}, {"id": "ACT-000050", "siteId": "S-1"},
                         {"id": "ACT-000051", "siteId": "S-1"}])
    st = client.wait(cid)
    assert (st["created"], st["updated"]) == (1, 2)
    assert [e["id"] for e in client.get("result", cid)["created"]] == ["ACT-000051"]


def test_counters_move_with_the_rate(make_emulator):
    emu = make_emulator({"import": {"rows_per_second": 20}})
    c = Client(emu)
    t0 = time.monotonic()
    cid = c.submit([{"id": f"R-{i}", "siteId": "S-1"} for i in range(100)])
    queued = c.submit([{"id": "LATER", "siteId": "S-1"}])
    time.sleep(0.6)
    st = c.get("status", cid)
    elapsed = time.monotonic() - t0
    assert 0 < st["processed"] < st["total"] == 100
    assert st["processed"] <= 20 * elapsed + 1
    assert st["created"] == st["processed"]
    res = c.get("result", cid)
    assert len(res["created"]) >= st["processed"]
    # imports are processed one after another
    assert c.get("status", queued)["processed"] == 0
    emu.advance("6s")
    assert c.get("status", cid)["processed"] == 100
    assert c.get("status", queued)["processed"] == 1
    assert len(c.get("result", cid)["created"]) == 100


def test_clock_advance_alone_completes_a_slow_import(make_emulator):
    emu = make_emulator({"import": {"rows_per_second": 1}})
    c = Client(emu)
    cid = c.submit([{"id": f"R-{i}", "siteId": "S-1"} for i in range(5)])
    assert c.get("status", cid)["processed"] == 0
    emu.advance("2s")
    assert 2 <= c.get("status", cid)["processed"] <= 3
    emu.advance("30s")  # not 1h: the token would expire
    assert c.get("status", cid)["processed"] == 5


FAILURES = [
    ("not an object", 5, "must be a JSON object, not a number"),
    ("no id", {"siteId": "S-1"}, "field 'id' is required"),
    ("id not a string", {"id": 1, "siteId": "S-1"}, "field 'id' must be a string"),
    ("no siteId", {"id": "F"}, "field 'siteId' is required"),
    ("unknown site", {"id": "F", "siteId": "S-99"},
     "site 'S-99' does not exist in project 'P-DEMO'"),
    ("assetId", {"id": "F", "siteId": "S-1", "assetId": 3}, "field 'assetId' must be a string"),
    ("startDate", {"id": "F", "siteId": "S-1", "startDate": "2024-03-05"},
     "field 'startDate' must be an ISO 8601 UTC timestamp"),
    ("endDate", {"id": "F", "siteId": "S-1", "endDate": "2024-02-30T10:00:00Z"},
     "field 'endDate' must be an ISO 8601 UTC timestamp"),
    ("activityCategory", {"id": "F", "siteId": "S-1", "activityCategory": ["C"]},
     "field 'activityCategory' must be a string"),
    ("status", {"id": "F", "siteId": "S-1", "status": "DONE"},
     "field 'status' must be one of PLANNED, DISPATCHED, COMPLETED"),
    ("workPackageId", {"id": "F", "siteId": "S-1", "workPackageId": {}},
     "field 'workPackageId' must be a string"),
    ("additionalClientWork", {"id": "F", "siteId": "S-1", "additionalClientWork": "true"},
     "field 'additionalClientWork' must be a boolean"),
    ("workOrderId", {"id": "F", "siteId": "S-1", "workOrderId": 7},
     "field 'workOrderId' must be a string"),
    ("teams", {"id": "F", "siteId": "S-1", "teams": "Alpha"},
     "field 'teams' must be an array of strings"),
    ("personnelIds", {"id": "F", "siteId": "S-1", "personnelIds": ["P-1", 2]},
     "field 'personnelIds' must be an array of strings"),
    ("manpower type", {"id": "F", "siteId": "S-1", "manpower": ["Alpha"]},
     "field 'manpower' must be an object of team names to integers"),
    ("manpower value", {"id": "F", "siteId": "S-1", "manpower": {"Alpha": -2}},
     "field 'manpower' team 'Alpha' must be a non-negative integer"),
    ("internalRemarks", {"id": "F", "siteId": "S-1", "internalRemarks": True},
     "field 'internalRemarks' must be a string"),
    ("externalRemarks", {"id": "F", "siteId": "S-1", "externalRemarks": 1.5},
     "field 'externalRemarks' must be a string"),
]


def test_each_failure_kind_has_its_message(client):
    rows = [{"id": "OK-1", "siteId": "S-1"}] + [row for _, row, _ in FAILURES]
    cid = client.submit(rows)
    st = client.wait(cid)
    want = [f"Row {i + 2}: {msg}" for i, (_, _, msg) in enumerate(FAILURES)]
    assert (st["created"], st["failed"], st["processed"]) == (1, len(FAILURES), len(rows))
    assert st["messages"] == want
    res = client.get("result", cid)
    assert [e["message"] for e in res["failed"]] == want
    assert [e["index"] for e in res["failed"]] == list(range(2, len(rows) + 1))
    for e in res["failed"]:
        assert set(e) == {"index", "activity", "message"}
        assert list(e["activity"]) == ROWFORM_FIELDS
        assert all(isinstance(v, str) for v in e["activity"].values())
    assert client.get("failed", cid) == res["failed"]
    # failed rows stored nothing: "F" is new
    assert client.wait(client.submit({"id": "F", "siteId": "S-1"}))["created"] == 1


def test_failed_row_in_row_form(client):
    row = {"id": "X-1", "siteId": "S-99", "assetId": "A-1", "startDate": "2024-03-05T07:08:59Z",
           "endDate": "2024-03-06T01:30:00+02:00", "activityCategory": "CAT-2",
           "type": "REPAIR", "status": "COMPLETED", "workPackageId": "WP-1",
           "additionalClientWork": True, "workOrderId": "WO-3", "teams": ["Alpha", "Bravo"],
           "personnelIds": ["PER-1", "PER-2"], "manpower": {"Alpha": 2, "Bravo": 1},
           "internalRemarks": "in", "externalRemarks": "ex", "voNumber": "VO-1",
           "isLocked": False, "createdAt": "2024-01-01T00:00:00Z"}
    cid = client.submit([row])
    client.wait(cid)
    failed = client.get("failed", cid)
    assert failed == [{
        "index": 1,
        "message": "Row 1: site 'S-99' does not exist in project 'P-DEMO'",
        "activity": rowform(id="X-1", siteId="S-99", assetId="A-1", startDate="05/03/2024",
                            startTime="07:08", endDate="05/03/2024", endTime="23:30",
                            activityCategory="CAT-2", type="REPAIR", status="COMPLETED",
                            workPackageId="WP-1", additionalClientWork="true",
                            voNumber="VO-1", workOrderId="WO-3", teams="Alpha,Bravo",
                            personnelIds="PER-1,PER-2", manpower="Alpha:2,Bravo:1",
                            internalRemarks="in", externalRemarks="ex"),
    }]


def test_wrong_types_render_as_text_in_row_form(client):
    cid = client.submit([{"id": 42, "siteId": "S-1", "teams": "Alpha", "startDate": "soon",
                          "startTime": "9:00", "manpower": {"Alpha": "two"},
                          "additionalClientWork": "yes"}])
    client.wait(cid)
    [entry] = client.get("failed", cid)
    assert entry["message"] == "Row 1: field 'id' must be a string"
    assert entry["activity"] == rowform(id="42", siteId="S-1", teams="Alpha", startDate="soon",
                                        startTime="9:00", manpower="Alpha:two",
                                        additionalClientWork="yes")


def test_failed_endpoint_is_empty_when_all_rows_import(client):
    cid = client.submit([{"id": "G-1", "siteId": "S-1"}, {"id": "ACT-000002", "siteId": "S-5"}])
    client.wait(cid)
    assert client.get("failed", cid) == []
    assert client.get("status", cid)["messages"] == []


def test_file_upload_with_project_id_or_correlation_id(emulator, client):
    data = json.dumps([{"id": "FILE-1", "siteId": "S-1"}, {"id": "FILE-2", "siteId": "S-9"}])
    for param in ("projectId", "correlationId"):
        r = requests.post(emulator.dex + FILE, params={param: "P-DEMO"}, headers=client.hdr,
                          files={"file": ("a.json", data, "application/json")},
                          data={"note": "other fields are ignored"}, timeout=5)
        assert r.status_code == 200, r.text
        st = client.wait(r.json()["correlationId"])
        assert (st["total"], st["failed"]) == (2, 1)
    assert (st["created"], st["updated"]) == (0, 1)
    r = requests.post(emulator.dex + FILE, params={"projectId": "P-DEMO"}, headers=client.hdr,
                      files={"file": ("one.json", b'{"id": "FILE-3", "siteId": "S-2"}')},
                      timeout=5)
    assert r.status_code == 200, r.text
    assert client.wait(r.json()["correlationId"])["created"] == 1


def raw_upload(emu, hdr, body, ctype, params=None):
    h = dict(hdr, **{"Content-Type": ctype})
    return requests.post(emu.dex + FILE, params=params or {"projectId": "P-DEMO"}, headers=h,
                         data=body, timeout=5)


def test_file_upload_errors(emulator, client):
    url = emulator.dex + FILE
    hdr = client.hdr

    def bad(r, status, text):
        assert r.status_code == status, r.text
        assert r.json()["statusCode"] == status
        assert text in r.json()["message"], r.json()["message"]

    bad(requests.post(url, params={"projectId": "P-DEMO"}, headers=hdr,
                      files={"upload": ("a.json", "[]")}), 400, "no 'file' part")
    bad(requests.post(url, params={"projectId": "P-DEMO"}, headers=hdr, json=[]), 400,
        "Content-Type must be multipart/form-data")
    bad(raw_upload(emulator, hdr, "x", "multipart/form-data"), 400, "no boundary parameter")
    part = ('--B\r\nContent-Disposition: form-data; name="file"; filename="a.json"\r\n\r\n'
            '[{"id": "T-1", "siteId": "S-1"}]')
    bad(raw_upload(emulator, hdr, part, "multipart/form-data; boundary=B"), 400,
        "missing closing boundary")
    bad(raw_upload(emulator, hdr, part[:40], "multipart/form-data; boundary=B"), 400,
        "inside the headers")
    bad(raw_upload(emulator, hdr, "--B\r\nContent-Type: x\r\n\r\n\r\n--B--",
                   "multipart/form-data; boundary=B"), 400, "no Content-Disposition")
    bad(raw_upload(emulator, hdr, part + "\r\n--B\r\n" + part[5:] + "\r\n--B--",
                   "multipart/form-data; boundary=B"), 400, "more than one 'file' part")
    r = raw_upload(emulator, hdr, part + "\r\n--B--\r\n", "multipart/form-data; boundary=B")
    assert r.status_code == 200, r.text
    bad(requests.post(url, params={"projectId": "P-DEMO"}, headers=hdr,
                      files={"file": ("a.json", "[{]")}), 400, "file: invalid JSON")
    bad(requests.post(url, params={"projectId": "P-DEMO"}, headers=hdr,
                      files={"file": ("a.json", "42")}), 400, "file must be a JSON array")
    bad(requests.post(url, params={"projectId": "P-DEMO"}, headers=hdr,
                      files={"file": ("a.json", "")}), 400, "file is empty")
    bad(requests.post(url, headers=hdr, files={"file": ("a.json", "[]")}), 400,
        "projectId (or correlationId) query parameter is required")
    bad(requests.post(url, params={"correlationId": "P-NONE"}, headers=hdr,
                      files={"file": ("a.json", "[]")}), 404, "project 'P-NONE' not found")


def test_json_submission_errors(emulator, client):
    url = emulator.dex + IMPORT
    hdr = client.hdr
    cases = [
        ({}, json.dumps([]), 400, "projectId query parameter is required"),
        ({"projectId": ""}, json.dumps([]), 400, "projectId query parameter is required"),
        ({"projectId": "P-NONE"}, json.dumps([]), 404, "project 'P-NONE' not found"),
        ({"projectId": "P-DEMO"}, "[{", 400, "body: invalid JSON"),
        ({"projectId": "P-DEMO"}, "", 400, "body is empty"),
        ({"projectId": "P-DEMO"}, '"text"', 400, "body must be a JSON array"),
        ({"projectId": "P-DEMO"}, "[] []", 400, "body: invalid JSON"),
    ]
    for params, body, status, text in cases:
        r = requests.post(url, params=params, headers=hdr, data=body, timeout=5)
        assert r.status_code == status, (params, body, r.text)
        assert r.json()["error"] == ("BAD_REQUEST" if status == 400 else "NOT_FOUND")
        assert text in r.json()["message"], (params, body, r.json())


def test_deep_nesting_is_refused_not_fatal(emulator, client):
    deep = "[" * 1000000 + "]" * 1000000
    r = requests.post(emulator.dex + IMPORT, params={"projectId": "P-DEMO"}, data=deep,
                      headers=client.hdr, timeout=20)
    assert r.status_code == 400, r.text
    assert r.json()["message"] == "body: invalid JSON: nested deeper than 64 levels"
    r = requests.post(emulator.dex + FILE, params={"projectId": "P-DEMO"}, headers=client.hdr,
                      files={"file": ("a.json", deep)}, timeout=20)
    assert r.status_code == 400, r.text
    assert r.json()["message"] == "file: invalid JSON: nested deeper than 64 levels"
    ok = [{"id": "D-1", "siteId": "S-1", "manpower": {"A": 1}, "teams": ["A"]}]
    assert client.wait(client.submit(ok))["created"] == 1


def test_reports_need_a_known_correlation_id(emulator, client):
    for path in ("/public/v1/import/status", "/public/v1/import/result",
                 "/public/v1/import/activities/failed"):
        r = requests.get(emulator.dex + path, headers=client.hdr, timeout=5)
        assert r.status_code == 400, r.text
        assert r.json()["message"] == "correlationId query parameter is required"
        r = requests.get(emulator.dex + path, params={"correlationId": "nope"},
                         headers=client.hdr, timeout=5)
        assert r.status_code == 404, r.text
        assert r.json()["message"] == "no import with correlationId 'nope'"


def test_bodies_over_max_body_get_413(make_emulator):
    emu = make_emulator({"max_body": "2k"})
    c = Client(emu)
    rows = [{"id": f"BIG-{i}", "siteId": "S-1", "externalRemarks": "x" * 40} for i in range(60)]
    r = requests.post(emu.dex + IMPORT, params={"projectId": "P-DEMO"}, json=rows,
                      headers=c.hdr, timeout=5)
    assert r.status_code == 413
    r = requests.post(emu.dex + FILE, params={"projectId": "P-DEMO"}, headers=c.hdr,
                      files={"file": ("a.json", json.dumps(rows))}, timeout=5)
    assert r.status_code == 413
    # below the limit both still work
    assert c.wait(c.submit(rows[:5]))["created"] == 5


def test_stopping_mid_import_is_clean(make_emulator):
    emu = make_emulator({"import": {"rows_per_second": 1}})
    c = Client(emu)
    cid = c.submit([{"id": f"R-{i}", "siteId": "S-1", "teams": ["A"]} for i in range(50)])
    c.submit({"id": "Q", "siteId": "S-1"})
    emu.advance("3s")
    assert 3 <= c.get("status", cid)["processed"] < 50
    assert emu.stop() == 0, emu.read_log()
