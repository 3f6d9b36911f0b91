"""Validation through the gateway: every problem of a request is listed at
once with its JSON Pointer and rule code, nothing is sent upstream when a
request is refused (the emulator's counters prove it), valid requests are
normalised to the vendor's spelling, dry runs answer without sending."""
import json

import requests

EXPORT = "/public/v1/export/"


def post_export(gw, kind, body, **kw):
    return requests.post(gw.dex + EXPORT + kind, data=json.dumps(body),
                         headers={**gw.headers(), "Content-Type": "application/json"},
                         timeout=10, **kw)


def details(r):
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["error"] == "VALIDATION_FAILED" and body["requestId"]
    return {(d["path"], d["code"]): d["message"] for d in body["details"]}


def test_export_lists_every_problem_and_sends_nothing(emulator, gateway):
    r = post_export(gateway, "activities", {
        "projectid": "P-DEMO", "statuses": ["PLANNED", "DONE"], "startDate": "2024-13-01",
        "sites": ["S-1", 7], "callbackUrl": "ftp://x"})
    d = details(r)
    assert d[("/statuses/1", "enum")] == "'DONE' is not one of PLANNED, DISPATCHED, COMPLETED"
    assert ("/projectId", "required") in d
    assert "did you mean 'projectId'" in d[("/projectid", "unknown_field")]
    assert ("/startDate", "date") in d
    assert ("/sites/1", "type") in d
    assert ("/callbackUrl", "url") in d
    assert r.json()["message"].startswith("6 problems")
    assert emulator.calls("POST /public/v1/export/activities") == 0


def test_export_is_normalised_to_the_vendor_spelling(emulator, gateway):
    r = post_export(gateway, "work-orders", {"projectID": "P-DEMO", "types": ["CORRECTIVE"]})
    assert r.status_code == 200, r.text
    cid = r.json()["correlationId"]
    assert emulator.calls("POST /public/v1/export/work-orders") == 1
    # the emulator accepted projectId: the export exists and can be fetched
    r = requests.get(gateway.dex + "/public/export", params={"correlationId": cid},
                     headers=gateway.headers(), timeout=10)
    assert r.status_code in (200, 202)
    r = post_export(gateway, "work-packages", {"projectId": "P-DEMO",
                                               "statuses": ["PLANNED"]})
    assert r.status_code == 200, r.text


def test_strict_mode_refuses_unknown_members(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"strict": True}})
    d = details(post_export(gw, "personnel", {"projectId": "P-DEMO", "colour": "blue"}))
    assert ("/colour", "unknown_field") in d
    lax = make_gateway(emulator)
    assert post_export(lax, "personnel", {"projectId": "P-DEMO",
                                          "colour": "blue"}).status_code == 200


def test_import_rows_checked_before_sending(emulator, gateway):
    rows = [{"id": "A-1", "siteId": "S-1", "manpower": {"Alpha": -1}},
            {"siteId": "S-1", "status": "DONE", "teams": ["x", 3]},
            {"id": "A-1", "siteId": "S-1", "startDate": "yesterday"}]
    r = requests.post(gateway.dex + "/public/v1/import/activities?projectId=P-DEMO",
                      json=rows, headers=gateway.headers(), timeout=10)
    d = details(r)
    assert ("/0/manpower/Alpha", "range") in d or ("/0/manpower/Alpha", "type") in d
    assert ("/1/id", "required") in d
    assert ("/1/status", "enum") in d
    assert ("/1/teams/1", "type") in d
    assert ("/2/id", "duplicate_id") in d
    assert ("/2/startDate", "date") in d
    assert emulator.calls("POST /public/v1/import/activities") == 0


def test_import_dry_run_answers_without_sending(emulator, gateway):
    rows = [{"id": f"D-{i}", "siteId": "S-1"} for i in range(25)]
    r = requests.post(gateway.dex + "/public/v1/import/activities",
                      params={"projectId": "P-DEMO", "dryRun": "true"}, json=rows,
                      headers=gateway.headers(), timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["valid"] is True and r.json()["rows"] == 25
    assert emulator.calls("POST /public/v1/import/activities") == 0
    r = requests.post(gateway.dex + "/public/v1/import/activities",
                      params={"projectId": "P-DEMO", "dryRun": "false"}, json=rows,
                      headers=gateway.headers(), timeout=10)
    assert r.status_code == 200 and "correlationId" in r.json()
    assert emulator.calls("POST /public/v1/import/activities") == 1


def test_dry_run_is_true_or_false_once(emulator, gateway):
    """A dryRun the gateway does not read as true or false, or given twice,
    is refused: a caller who believes it only checks never imports. A bare
    parameter beside projectId does not hide it."""
    rows = [{"id": "D-1", "siteId": "S-1"}]
    url = gateway.dex + "/public/v1/import/activities"
    for q in ("projectId=P-DEMO&dryRun=1", "projectId=P-DEMO&dryRun=TRUE",
              "projectId=P-DEMO&dryRun", "projectId=P-DEMO&dryRun=true&dryRun=false"):
        r = requests.post(url + "?" + q, json=rows, headers=gateway.headers(), timeout=10)
        assert r.status_code == 400, (q, r.text)
        [d] = r.json()["details"]
        assert d["path"] == "" and "dryRun" in d["message"], (q, d)
        assert d["code"] == ("ambiguous" if "false" in q else "type")
    r = requests.post(url + "?verbose&projectId=P-DEMO&dryRun=true", json=rows,
                      headers=gateway.headers(), timeout=10)
    assert r.status_code == 200 and r.json()["valid"] is True, r.text
    assert emulator.calls("POST /public/v1/import/activities") == 0


def test_unknown_site_is_a_vendor_row_failure_not_a_400(emulator, gateway):
    r = requests.post(gateway.dex + "/public/v1/import/activities?projectId=P-DEMO",
                      json=[{"id": "U-1", "siteId": "S-999"}], headers=gateway.headers(),
                      timeout=10)
    assert r.status_code == 200
    cid = r.json()["correlationId"]
    emulator.advance("10s")
    st = requests.get(gateway.dex + "/public/v1/import/status",
                      params={"correlationId": cid}, headers=gateway.headers()).json()
    assert st["failed"] == 1 and "S-999" in st["messages"][0]


def test_import_file_upload_checked(emulator, gateway):
    url = gateway.dex + "/public/v1/import/activities/file?projectId=P-DEMO"
    bad = json.dumps([{"id": "F-1"}])
    r = requests.post(url, files={"file": ("a.json", bad, "application/json")},
                      headers=gateway.headers(), timeout=10)
    assert ("/0/siteId", "required") in details(r)
    r = requests.post(url, files={"other": ("a.json", "[]")}, headers=gateway.headers(),
                      timeout=10)
    assert r.status_code == 400
    r = requests.post(url, data="[]", headers={**gateway.headers(),
                                               "Content-Type": "application/json"},
                      timeout=10)
    # a JSON body to the file import: the type it does not take (was 400 "multipart")
    assert r.status_code == 415 and r.headers["Accept-Post"] == "multipart/form-data"
    good = json.dumps([{"id": "F-1", "siteId": "S-1"}])
    r = requests.post(gateway.dex + "/public/v1/import/activities/file?correlationId=P-DEMO",
                      files={"file": ("a.json", good, "application/json")},
                      headers=gateway.headers(), timeout=10)
    assert r.status_code == 200, r.text
    assert emulator.calls("POST /public/v1/import/activities/file") == 1


def get_case(gw, case_id):
    r = requests.get(gw.sim + "/api/v1/cases/" + case_id, headers=gw.headers(), timeout=10)
    assert r.status_code == 200
    return r.json()


def submit(gw, case):
    return requests.post(gw.sim + "/api/v1/simulations", json=case, headers=gw.headers(),
                         timeout=10)


def test_case_edits_outside_editable_sections_refused(emulator, gateway):
    case = get_case(gateway, "CASE-OM-1")
    case["name"] = "renamed"
    case["windFarms"][0]["distanceToPortKm"] = 1
    case["vesselList"][0]["quantity"] = 5                   # editable: fine
    r = submit(gateway, case)
    d = details(r)
    assert ("/name", "not_editable") in d
    assert ("/windFarms/0/distanceToPortKm", "not_editable") in d
    assert len(d) == 2
    assert r.headers["X-Tidegate-Case-Diff"] == "checked"
    assert emulator.calls("POST /api/v1/simulations") == 0


def test_case_kind_change_and_mixing_refused(emulator, gateway):
    case = get_case(gateway, "CASE-CON-1")
    fx = case["windFarms"][0]["infrastructureList"][0]["fixable"][0]
    fx["fixableType"] = "CORRECTIVE_MAINTENANCE"
    d = details(submit(gateway, case))
    assert ("/windFarms/0/infrastructureList/0/fixable/0/fixableType", "kind_changed") in d
    assert emulator.calls("POST /api/v1/simulations") == 0


def test_case_entries_checked_member_by_member(emulator, gateway):
    """Entries the vendor would run and fail (docs/validation.md): every
    member problem listed, nothing sent; sim.check_entries: false sends it."""
    case = get_case(gateway, "CASE-OM-1")
    case["vesselList"][0]["quantity"] = 2.5
    case["vesselList"][1]["charterType"] = "BAREBOAT"
    del case["personnelList"][0]["dayRate"]
    fixes = case["windFarms"][0]["infrastructureList"][0]["fixable"]
    pm = next(i for i, f in enumerate(fixes) if f["fixableType"] == "PREVENTIVE_MAINTENANCE")
    fixes[pm]["intervalDays"] = 0
    fixes[pm]["id"] = fixes[0]["id"]
    r = submit(gateway, case)
    assert r.status_code == 400, r.text
    body = r.json()
    at = f"/windFarms/0/infrastructureList/0/fixable/{pm}"
    assert {(d["path"], d["code"]) for d in body["details"]} == {
        ("/vesselList/0/quantity", "type"), ("/vesselList/1/charterType", "enum"),
        ("/personnelList/0/dayRate", "required"), (at + "/intervalDays", "range"),
        (at + "/id", "duplicate_id")}
    assert body["requestId"] == r.headers["X-Request-Id"]
    assert emulator.calls("POST /api/v1/simulations") == 0


def test_case_entries_check_can_be_turned_off(emulator, make_gateway):
    gw = make_gateway(emulator, {"sim": {"check_entries": False}})
    case = get_case(gw, "CASE-OM-1")
    case["personnelList"][0]["quantity"] = -1
    r = submit(gw, case)
    assert r.status_code == 201, r.text               # the vendor runs it, and fails it
    assert emulator.calls("POST /api/v1/simulations") == 1


def test_valid_edit_is_submitted(emulator, gateway):
    case = get_case(gateway, "CASE-OM-1")
    case["vesselList"][0]["quantity"] += 1
    case["personnelList"][0]["quantity"] += 2
    r = submit(gateway, case)
    assert r.status_code == 201, r.text
    assert r.headers["X-Tidegate-Case-Diff"] == "checked"
    sid = r.json()["simulationId"]
    assert r.headers["Location"] == "/api/v1/simulations/" + sid   # the vendor's header
    assert emulator.calls("POST /api/v1/simulations") == 1


def test_unknown_base_case_gets_structural_checks_only(emulator, make_gateway):
    gw = make_gateway(emulator)
    case = requests.get(emulator.sim + "/api/v1/cases/CASE-OM-2",
                        headers=emulator.sim_headers()).json()   # not through the gateway
    case["name"] = "renamed"                                    # not diffed: no base
    r = submit(gw, case)
    assert r.status_code == 201, r.text
    assert r.headers["X-Tidegate-Case-Diff"].startswith("skipped")
    del case["vesselList"]
    assert ("/vesselList", "structure") in details(submit(gw, case)) or \
        ("/vesselList", "required") in details(submit(gw, case))


def test_validation_can_be_turned_off(emulator, make_gateway):
    gw = make_gateway(emulator, {"dex": {"validate": False}})
    r = post_export(gw, "activities", {"projectId": "P-DEMO", "statuses": ["DONE"]})
    assert r.status_code == 400 and r.json()["error"] == "BAD_REQUEST"   # the vendor's 400
    assert emulator.calls("POST /public/v1/export/activities") == 1
