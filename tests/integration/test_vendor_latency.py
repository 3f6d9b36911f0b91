"""
test_vendor_latency.py - tidegate_vendor_request_duration_seconds: one
observation per vendor attempt, timed from sending to the response head,
by service and origin, in Prometheus's cumulative buckets. A delay the
emulator's fault API puts on one call lands in the bucket the delay falls
in and nowhere lower; calls that do not reach the vendor are not counted.
"""
import requests

H = "tidegate_vendor_request_duration_seconds"
LES = ["0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
       "2.5", "5", "10", "30", "+Inf"]


def histogram(gw, service, origin="primary"):
    """{le: cumulative count} plus 'sum' and 'count' for one service and origin."""
    text = requests.get(gw.admin + "/metrics", timeout=5).text
    assert f"# TYPE {H} histogram" in text
    lab = f'service="{service}",origin="{origin}"'
    out = {}
    for line in text.splitlines():
        series, _, v = line.rpartition(" ")
        for le in LES:
            if series == f'{H}_bucket{{{lab},le="{le}"}}':
                out[le] = int(v)
        if series == f"{H}_sum{{{lab}}}":
            out["sum"] = float(v)
        if series == f"{H}_count{{{lab}}}":
            out["count"] = int(v)
    assert set(out) == set(LES) | {"sum", "count"}, out
    assert [out[le] for le in LES] == sorted(out[le] for le in LES)   # cumulative
    assert out["count"] == out["+Inf"]
    return out


def diff(a, b):
    return {k: b[k] - a[k] for k in a}


def get_case(gw, case_id):
    r = requests.get(gw.sim + "/api/v1/cases/" + case_id, headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    return r


def test_a_delayed_vendor_call_lands_in_its_bucket(emulator, gateway):
    gateway.wait_tokens()
    a = histogram(gateway, "sim")
    dex_a = histogram(gateway, "dex")
    emulator.fault(path="/api/v1/cases/CASE-OM-2", latencyMs=300, count=1)
    get_case(gateway, "CASE-OM-2")
    b = histogram(gateway, "sim")
    d = diff(a, b)
    # one attempt, in (0.25, 0.5]: every bucket from le=0.5 up counts it, none below
    assert d["count"] == 1
    assert [d[le] for le in LES] == [0] * 8 + [1] * 7, d
    assert 0.3 <= d["sum"] < 0.5
    assert diff(dex_a, histogram(gateway, "dex"))["count"] == 0   # the other service's own
    # a plain call: one more, well under the delay
    get_case(gateway, "CASE-OM-1")
    d = diff(b, histogram(gateway, "sim"))
    assert d["count"] == 1 and d["0.25"] == 1, d
    assert d["sum"] < 0.25


def test_calls_that_never_reach_the_vendor_are_not_counted(gateway):
    gateway.wait_tokens()
    a = histogram(gateway, "sim")
    # refused at the door (no key)
    for _ in range(3):
        r = requests.get(gateway.sim + "/api/v1/cases/CASE-OM-1", timeout=10)
        assert r.status_code == 401
    assert diff(a, histogram(gateway, "sim"))["count"] == 0
    # a caller's own bearer token is relayed: that is a vendor call
    r = requests.get(gateway.sim + "/api/v1/cases/CASE-OM-1",
                     headers={"Authorization": "Bearer nope"}, timeout=10)
    assert r.status_code == 401
    assert diff(a, histogram(gateway, "sim"))["count"] == 1
