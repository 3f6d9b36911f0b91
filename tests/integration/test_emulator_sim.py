"""Emulator simulation API: the OAuth2 token endpoint, cases, runs, validity, results
and their monotonicity, the shared state of the sim and design hosts, retention."""
import copy
import json
import re
from datetime import datetime, timedelta

import pytest
import requests

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
CONSTRUCTION_TYPES = {"INSTALLATION_TASK", "COMMISSIONING_TASK"}
OM_TYPES = {"CORRECTIVE_MAINTENANCE", "PREVENTIVE_MAINTENANCE", "SCHEDULED_SERVICE",
            "INSPECTION"}
RUN_FIELDS = {"simulationId", "caseId", "status", "submittedAt", "expiresAt"}
SIM_ENDPOINTS = [("GET", "/api/v1/cases"), ("GET", "/api/v1/cases/CASE-OM-1"),
                 ("POST", "/api/v1/simulations"), ("GET", "/api/v1/simulations"),
                 ("GET", "/api/v1/simulations/x"), ("GET", "/api/v1/simulations/x/results")]


def iso(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def fixables(case):
    for farm in case["windFarms"]:
        for asset in farm["infrastructureList"]:
            yield from asset["fixable"]


class Sim:
    """The simulation API of one emulator, with a token fetched once per clock jump."""

    def __init__(self, emu):
        self.emu = emu
        self.h = emu.sim_headers()

    def url(self, path, host=None):
        return (host or self.emu.sim) + path

    def get(self, path, host=None, **kw):
        return requests.get(self.url(path, host), headers=self.h, timeout=10, **kw)

    def case(self, cid):
        r = self.get("/api/v1/cases/" + cid)
        assert r.status_code == 200, r.text
        return r.json()

    def submit(self, case, host=None):
        r = requests.post(self.url("/api/v1/simulations", host), headers=self.h, json=case,
                          timeout=10)
        assert r.status_code == 201, r.text
        return r.json()

    def finish(self):
        self.emu.advance("2s")

    def jump(self, duration):
        self.emu.advance(duration)
        self.h = self.emu.sim_headers()   # tokens live 1h; the clock may jump past that

    def status(self, sid, host=None):
        return self.get("/api/v1/simulations/" + sid, host)

    def results(self, sid, host=None):
        return self.get(f"/api/v1/simulations/{sid}/results", host)

    def run_all(self, cases):
        ids = [self.submit(c)["simulationId"] for c in cases]
        self.finish()
        out = []
        for sid in ids:
            r = self.results(sid)
            assert r.status_code == 200, r.text
            out.append(r.json())
        return out


@pytest.fixture
def sim(emulator):
    return Sim(emulator)


# ---- token endpoint ----

def test_token_endpoint_issues_bearer_tokens(emulator):
    r = requests.post(emulator.auth + "/api/oauth2/token",
                      data={"grant_type": "client_credentials", "client_id": "demo",
                            "client_secret": "demo-secret"})
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.headers["Cache-Control"] == "no-store"
    body = r.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert isinstance(body["access_token"], str) and len(body["access_token"]) > 20
    r = requests.get(emulator.sim + "/api/v1/cases",
                     headers={"Authorization": "Bearer " + body["access_token"]})
    assert r.status_code == 200


@pytest.mark.parametrize("kwargs,status,code", [
    ({"json": {"grant_type": "client_credentials", "client_id": "demo",
               "client_secret": "demo-secret"}}, 400, "invalid_request"),
    ({"data": {"grant_type": "client_credentials", "client_id": "demo"}}, 400,
     "invalid_request"),
    ({"data": {"client_id": "demo", "client_secret": "demo-secret"}}, 400, "invalid_request"),
    ({"data": {"grant_type": "password", "client_id": "demo", "client_secret": "demo-secret",
               "username": "demo", "password": "demo"}}, 400, "unsupported_grant_type"),
    ({"data": {"grant_type": "client_credentials", "client_id": "demo",
               "client_secret": "wrong"}}, 401, "invalid_client"),
    ({"data": {"grant_type": "client_credentials", "client_id": "nobody",
               "client_secret": "demo-secret"}}, 401, "invalid_client"),
])
def test_token_endpoint_errors_follow_rfc6749(emulator, kwargs, status, code):
    r = requests.post(emulator.auth + "/api/oauth2/token", **kwargs)
    assert r.status_code == status
    body = r.json()
    assert body["error"] == code
    assert set(body) <= {"error", "error_description", "error_uri"}
    assert isinstance(body.get("error_description", ""), str)
    assert r.headers["Cache-Control"] == "no-store"


def test_sim_endpoints_need_a_valid_token_on_both_hosts(emulator):
    good = emulator.sim_token()
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    dex = emulator.token()
    for host in (emulator.sim, emulator.design):
        for method, path in SIM_ENDPOINTS:
            for hdr in ({}, {"Authorization": "Bearer " + forged},
                        {"Authorization": "Bearer " + dex}, {"Authorization": "Basic x"}):
                r = requests.request(method, host + path, headers=hdr, json={})
                assert r.status_code == 401, (host, method, path, hdr)
                assert r.json()["error"] == "UNAUTHORIZED"


# ---- cases ----

def test_cases_list_names_construction_and_om_cases(sim):
    for host in (sim.emu.sim, sim.emu.design):
        r = sim.get("/api/v1/cases", host)
        assert r.status_code == 200
        cases = r.json()
        assert all(set(c) == {"caseId", "name", "type"} for c in cases)
        types = [c["type"] for c in cases]
        assert types.count("CONSTRUCTION") >= 1 and types.count("O&M") >= 2
        assert {"CASE-CON-1", "CASE-OM-1", "CASE-OM-2"} <= {c["caseId"] for c in cases}


def check_case_shape(case):
    assert {"caseId", "name", "startDate", "endDate", "weather", "ports", "vesselList",
            "personnelList", "windFarms"} <= set(case)
    assert "type" not in case and "caseType" not in case
    for v in case["vesselList"]:
        assert {"id", "name", "type", "quantity", "dayRate", "capacities",
                "operationalLimits"} <= set(v)
    for p in case["personnelList"]:
        assert {"role", "quantity", "shift", "dayRate"} <= set(p)
    assert case["windFarms"]
    for farm in case["windFarms"]:
        assert farm["name"] and farm["infrastructureList"]
        kinds = {a["type"] for a in farm["infrastructureList"]}
        assert "WTG" in kinds and "SUBSTATION" in kinds
        for asset in farm["infrastructureList"]:
            assert asset["id"] and asset["fixable"]
            for f in asset["fixable"]:
                assert {"id", "name", "fixableType", "durationHours", "vesselType",
                        "techniciansRequired"} <= set(f)


def test_case_get_returns_partial_cases_of_both_kinds(sim):
    con, om1, om2 = (sim.case(c) for c in ("CASE-CON-1", "CASE-OM-1", "CASE-OM-2"))
    for c in (con, om1, om2):
        check_case_shape(c)
    con_types = {f["fixableType"] for f in fixables(con)}
    assert "INSTALLATION_TASK" in con_types and con_types <= CONSTRUCTION_TYPES
    for om in (om1, om2):
        om_types = {f["fixableType"] for f in fixables(om)}
        assert "CORRECTIVE_MAINTENANCE" in om_types and om_types <= OM_TYPES
        assert all("failureRatePerYear" in f for f in fixables(om)
                   if f["fixableType"] == "CORRECTIVE_MAINTENANCE")
    assert len(om2["windFarms"]) == 2
    assert sim.case("CASE-OM-1") == om1   # stable
    assert sim.get("/api/v1/cases/CASE-OM-1", sim.emu.design).json() == om1


def test_unknown_case_is_404(sim):
    r = sim.get("/api/v1/cases/CASE-NOPE")
    assert r.status_code == 404
    assert r.json()["statusCode"] == 404 and r.json()["error"] == "NOT_FOUND"


# ---- runs ----

def test_unchanged_case_runs_in_progress_then_completes(sim):
    for cid in ("CASE-CON-1", "CASE-OM-1", "CASE-OM-2"):
        run = sim.submit(sim.case(cid))
        assert set(run) == RUN_FIELDS
        assert UUID4.match(run["simulationId"]) and run["caseId"] == cid
        assert run["status"] == "IN_PROGRESS"
        assert iso(run["expiresAt"]) - iso(run["submittedAt"]) == timedelta(days=30)
        st = sim.status(run["simulationId"]).json()
        assert st == run
        r = sim.results(run["simulationId"])
        assert r.status_code == 409 and r.json()["error"] == "CONFLICT"
        sim.finish()
        st = sim.status(run["simulationId"]).json()
        assert st["status"] == "COMPLETED" and set(st) == RUN_FIELDS | {"completedAt"}
        assert iso(st["completedAt"]) - iso(st["submittedAt"]) == timedelta(seconds=1)
        res = sim.results(run["simulationId"])
        assert res.status_code == 200
        res = res.json()
        assert res["simulationId"] == run["simulationId"] and res["caseId"] == cid
        if cid == "CASE-CON-1":
            assert res["caseType"] == "CONSTRUCTION"
            assert 0 < res["completionDays"] <= res["simulationPeriodDays"]
            assert res["allTasksCompleted"] is True
            assert res["installationTasksCompleted"] == res["installationTasksTotal"] > 0
            assert res["weatherDelayDays"] > 0
        else:
            assert res["caseType"] == "O&M"
            assert 0.5 < res["availability"] < 1
            assert res["availability"] == res["timeBasedAvailability"]
            assert 0 < res["energyBasedAvailability"] < 1
            assert res["repairsCompleted"] > 0 and res["downtimeHours"] > 0
        assert res["totalCost"] == res["vesselCost"] + res["personnelCost"] + res["partsCost"]


def test_run_completes_by_waiting_too(sim):
    import time
    sid = sim.submit(sim.case("CASE-OM-2"))["simulationId"]
    time.sleep(1.1)
    assert sim.status(sid).json()["status"] == "COMPLETED"


def test_valid_edits_of_editable_sections_complete(sim):
    om = sim.case("CASE-OM-1")
    om["vesselList"].append({"id": "V-SOV-9", "name": "Petrel", "type": "SOV", "quantity": 1,
                             "dayRate": 30000, "capacities": {"technicians": 40},
                             "operationalLimits": {"maxSignificantWaveHeightM": 3.0}})
    om["personnelList"].append({"id": "P-BL", "role": "BLADE_TECHNICIAN", "quantity": 2,
                                "shift": "DAY", "dayRate": 700})
    asset = om["windFarms"][0]["infrastructureList"][0]
    asset["fixable"].pop()
    asset["fixable"].append({"id": asset["id"] + "-CM-BLADE", "name": "Blade repair",
                             "fixableType": "CORRECTIVE_MAINTENANCE",
                             "failureRatePerYear": 0.5, "durationHours": 20,
                             "vesselType": "SOV", "technicianRole": "BLADE_TECHNICIAN",
                             "techniciansRequired": 2})
    con = sim.case("CASE-CON-1")
    con["vesselList"][0]["quantity"] = 2
    for f in fixables(con):
        f["durationHours"] = f["durationHours"] * 2
    # key order and 2 vs 2.0 are not changes
    reordered = json.loads(json.dumps(sim.case("CASE-OM-2"), sort_keys=True))
    reordered["windFarms"][0]["distanceToPortKm"] = 80.0
    ids = [sim.submit(c)["simulationId"] for c in (om, con, reordered)]
    sim.finish()
    for sid in ids:
        assert sim.status(sid).json()["status"] == "COMPLETED", sid


def om_mutations():
    def drop(key):
        return lambda c: c.pop(key)

    def asset(c, i=0):
        return c["windFarms"][0]["infrastructureList"][i]

    def all_to_construction(c):
        for f in fixables(c):
            f["fixableType"] = "INSTALLATION_TASK"

    return {
        "no vesselList": drop("vesselList"),
        "vesselList not array": lambda c: c.update(vesselList={"V": 1}),
        "no personnelList": drop("personnelList"),
        "personnelList null": lambda c: c.update(personnelList=None),
        "fixable missing": lambda c: asset(c).pop("fixable"),
        "fixable not array": lambda c: asset(c).update(fixable="none"),
        "fixable entry not object": lambda c: asset(c)["fixable"].append(7),
        "mixed kinds": lambda c: asset(c)["fixable"][0].update(fixableType="INSTALLATION_TASK"),
        "kind changed everywhere": all_to_construction,
        "unknown fixableType": lambda c: asset(c)["fixable"][0].update(fixableType="REPAIR"),
        "duplicate fixable id": lambda c: asset(c)["fixable"].append(
            copy.deepcopy(asset(c)["fixable"][0])),
        "failure rate missing": lambda c: asset(c)["fixable"][0].pop("failureRatePerYear"),
        "name changed": lambda c: c.update(name="Renamed"),
        "dates changed": lambda c: c.update(endDate="2027-01-01T00:00:00Z"),
        "weather changed": lambda c: c["weather"].update(meanSignificantWaveHeightM=0.5),
        "extra top-level key": lambda c: c.update(notes="x"),
        "ports removed": drop("ports"),
        "wind farm renamed": lambda c: c["windFarms"][0].update(name="Elsewhere"),
        "wind farm added": lambda c: c["windFarms"].append(copy.deepcopy(c["windFarms"][0])),
        "asset removed": lambda c: c["windFarms"][0]["infrastructureList"].pop(),
        "asset power changed": lambda c: asset(c).update(ratedPowerMW=15),
        "asset key added": lambda c: asset(c).update(hubHeightM=120),
        "negative vessel quantity": lambda c: c["vesselList"][0].update(quantity=-1),
        "string vessel quantity": lambda c: c["vesselList"][0].update(quantity="2"),
        "fractional vessel quantity": lambda c: c["vesselList"][0].update(quantity=1.5),
        "negative technicians": lambda c: c["personnelList"][0].update(quantity=-3),
        "null technicians": lambda c: c["personnelList"][0].update(quantity=None),
        "negative day rate": lambda c: c["vesselList"][0].update(dayRate=-5),
        "vessel without type": lambda c: c["vesselList"][0].pop("type"),
        "bad charter": lambda c: c["vesselList"][0].update(charterType="BAREBOAT"),
        "negative duration": lambda c: asset(c)["fixable"][0].update(durationHours=-1),
        "other case's id": lambda c: c.update(caseId="CASE-OM-2"),
    }


def test_invalid_edits_fail_without_a_reason(sim):
    base = sim.case("CASE-OM-1")
    muts = om_mutations()
    ids = {}
    for name, mutate in muts.items():
        case = copy.deepcopy(base)
        mutate(case)
        ids[name] = sim.submit(case)["simulationId"]
    con = sim.case("CASE-CON-1")
    con["windFarms"][0]["infrastructureList"][0]["fixable"][2].update(
        fixableType="CORRECTIVE_MAINTENANCE", failureRatePerYear=1)
    ids["turbine fixable turned O&M"] = sim.submit(con)["simulationId"]
    sim.finish()
    for name, sid in ids.items():
        st = sim.status(sid).json()
        assert st["status"] == "FAILED", name
        assert set(st) == RUN_FIELDS | {"completedAt"}, name
        r = sim.results(sid)
        assert r.status_code == 409, name
        assert r.json() == {"statusCode": 409, "error": "CONFLICT",
                            "message": "simulation failed"}, name


def test_failure_rate_fails_valid_runs(make_emulator):
    emu = make_emulator({"sim": {"failure_rate": 1}})
    s = Sim(emu)
    sid = s.submit(s.case("CASE-OM-1"))["simulationId"]
    s.finish()
    assert s.status(sid).json()["status"] == "FAILED"
    assert s.results(sid).status_code == 409


def test_failure_rate_is_a_share_of_runs(make_emulator):
    emu = make_emulator({"sim": {"failure_rate": 0.5, "run_time": "0s"}})
    s = Sim(emu)
    case = s.case("CASE-OM-2")
    statuses = [s.submit(case)["status"] for _ in range(40)]
    assert set(statuses) == {"COMPLETED", "FAILED"}
    assert 5 <= statuses.count("FAILED") <= 35


# ---- results ----

def test_om_results_are_monotone_in_vessels_and_technicians(sim):
    base = sim.case("CASE-OM-1")
    more_ctv = copy.deepcopy(base)
    more_ctv["vesselList"][0]["quantity"] += 1
    better_ctv = copy.deepcopy(base)
    better_ctv["vesselList"].append({
        "id": "V-CTV-9", "name": "Gannet", "type": "CTV", "quantity": 1, "dayRate": 5200,
        "transitSpeedKn": 30, "capacities": {"technicians": 24},
        "operationalLimits": {"maxSignificantWaveHeightM": 2.0}})
    more_techs = copy.deepcopy(base)
    more_techs["personnelList"][0]["quantity"] = 20
    few_techs = copy.deepcopy(base)
    few_techs["personnelList"][0]["quantity"] = 2   # below what the tasks need
    unused = copy.deepcopy(base)
    unused["vesselList"].append({"id": "V-X", "name": "Idle", "type": "CTV", "quantity": 0,
                                 "dayRate": 1000})
    b, mc, bc, mt, ft, un = sim.run_all([base, more_ctv, better_ctv, more_techs, few_techs,
                                         unused])
    for key in ("availability", "timeBasedAvailability", "energyBasedAvailability"):
        assert mc[key] >= b[key] and bc[key] > b[key] and mt[key] >= b[key], key
        assert ft[key] < b[key], key
        assert un[key] == b[key], key
    assert bc["downtimeHours"] < b["downtimeHours"]
    assert mc["vesselCost"] > b["vesselCost"] and mt["personnelCost"] > b["personnelCost"]
    assert mc["vesselUtilisation"]["CTV"] < b["vesselUtilisation"]["CTV"]
    assert ft["repairsCompleted"] < b["repairsCompleted"]


def test_construction_results_are_monotone(sim):
    base = sim.case("CASE-CON-1")
    more_jackups = copy.deepcopy(base)
    more_jackups["vesselList"][1]["quantity"] = 3
    more_installers = copy.deepcopy(base)
    more_installers["personnelList"][0]["quantity"] = 30
    no_hlv = copy.deepcopy(base)
    no_hlv["vesselList"][0]["quantity"] = 0
    slower = copy.deepcopy(base)
    for f in fixables(slower):
        f["durationHours"] *= 3
    b, mj, mi, nh, sl = sim.run_all([base, more_jackups, more_installers, no_hlv, slower])
    assert mj["completionDays"] <= b["completionDays"]
    assert mi["completionDays"] < b["completionDays"]
    assert sl["completionDays"] > b["completionDays"]
    assert nh["allTasksCompleted"] is False
    assert nh["completionDays"] == nh["simulationPeriodDays"]
    assert nh["installationTasksCompleted"] < b["installationTasksCompleted"]
    assert date_plus(base["startDate"], b["completionDays"]) == iso(b["completionDate"])


def date_plus(start, days):
    return iso(start) + timedelta(days=days)


def test_results_are_deterministic(sim):
    case = sim.case("CASE-OM-2")
    case["personnelList"][1]["quantity"] = 6
    a, b = sim.run_all([case, case])
    assert a.pop("simulationId") != b.pop("simulationId")
    assert a == b


# ---- hosts, listing, counters ----

def test_sim_and_design_hosts_share_state(sim):
    emu = sim.emu
    a = sim.submit(sim.case("CASE-OM-1"), host=emu.sim)["simulationId"]
    b = sim.submit(sim.case("CASE-CON-1"), host=emu.design)["simulationId"]
    sim.finish()
    for sid in (a, b):
        for host in (emu.sim, emu.design):
            assert sim.status(sid, host).json()["status"] == "COMPLETED"
            assert sim.results(sid, host).status_code == 200
    assert sim.results(a, emu.sim).json() == sim.results(a, emu.design).json()
    listed = [[r["simulationId"] for r in sim.get("/api/v1/simulations", h).json()]
              for h in (emu.sim, emu.design)]
    assert listed[0] == listed[1] == [a, b]
    by = emu.stats()["byListener"]
    assert by["sim"]["POST /api/v1/simulations"] == 1
    assert by["design"]["POST /api/v1/simulations"] == 1
    assert by["design"][f"GET /api/v1/simulations/{b}/results"] == 1
    assert "POST /api/oauth2/token" in by["auth"]
    assert not any(k.startswith("POST /api/v1") for k in by["dex"])
    assert emu.stats()["simulations"] == 2


def test_listing_order_and_filters(sim):
    om = sim.case("CASE-OM-1")
    bad = copy.deepcopy(om)
    bad.pop("vesselList")
    ids = [sim.submit(c)["simulationId"] for c in (om, sim.case("CASE-CON-1"), bad)]
    runs = sim.get("/api/v1/simulations").json()
    assert [r["simulationId"] for r in runs] == ids
    assert all(r["status"] == "IN_PROGRESS" and set(r) == RUN_FIELDS for r in runs)
    sim.finish()
    q = sim.get("/api/v1/simulations", params={"caseId": "CASE-OM-1"}).json()
    assert [r["simulationId"] for r in q] == [ids[0], ids[2]]
    q = sim.get("/api/v1/simulations", params={"status": "FAILED"}).json()
    assert [r["simulationId"] for r in q] == [ids[2]]
    q = sim.get("/api/v1/simulations", params={"status": "COMPLETED"}).json()
    assert [r["simulationId"] for r in q] == ids[:2]
    assert sim.get("/api/v1/simulations", params={"status": "DONE"}).status_code == 400


def test_unknown_simulation_is_404(sim):
    for path in ("/api/v1/simulations/00000000-0000-4000-8000-000000000000",
                 "/api/v1/simulations/nope/results"):
        r = sim.get(path)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"


def test_runs_are_deleted_after_retention(sim):
    old = sim.submit(sim.case("CASE-OM-1"))["simulationId"]
    sim.jump("29d")
    new = sim.submit(sim.case("CASE-OM-1"))["simulationId"]
    sim.finish()
    assert sim.status(old).status_code == 200 and sim.results(old).status_code == 200
    sim.jump("1d")
    assert sim.status(old).status_code == 404
    assert sim.results(old).status_code == 404
    assert sim.results(new).status_code == 200
    assert [r["simulationId"] for r in sim.get("/api/v1/simulations").json()] == [new]
    sim.jump("31d")
    assert sim.status(new).status_code == 404 and sim.results(new).status_code == 404
    assert sim.get("/api/v1/simulations").json() == []
    assert sim.emu.stats()["simulations"] == 0


@pytest.mark.parametrize("body,status", [
    (b"", 400), (b"{not json", 400), (b"[1, 2]", 400), (b'"CASE-OM-1"', 400), (b"{}", 400),
    (b'{"caseId": 7}', 400), (b'{"caseId": null}', 400), (b'{"caseId": "CASE-NOPE"}', 404),
])
def test_malformed_submissions_are_rejected(sim, body, status):
    r = requests.post(sim.url("/api/v1/simulations"), data=body,
                      headers=dict(sim.h, **{"Content-Type": "application/json"}))
    assert r.status_code == status, body
    err = r.json()
    assert err["statusCode"] == status and err["message"]
    assert sim.get("/api/v1/simulations").json() == []
