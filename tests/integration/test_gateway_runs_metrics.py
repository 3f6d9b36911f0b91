"""The run registry's gauges on the admin listener's /metrics: runs by
status (every status, zeros included), the archive's runs and bytes, and
sweeps and their unsubmitted variants, read from the registry at scrape
time."""
import re

from test_gateway_runs import submit_case, wait_row

STATUSES = ("IN_PROGRESS", "COMPLETED", "FAILED", "EXPIRED", "UNKNOWN")
FAMILIES = ("tidegate_runs", "tidegate_runs_archived", "tidegate_runs_archived_bytes",
            "tidegate_sweeps", "tidegate_sweep_variants_unsubmitted")


def samples(gw):
    """Every sample of the registry's families: {series: value}."""
    out = {}
    for line in gw.metrics().splitlines():
        m = re.fullmatch(r"((tidegate_runs|tidegate_sweep)\S*) (\S+)", line)
        if m and "_total" not in m.group(1):    # the gauges, not the counters
            out[m.group(1)] = float(m.group(3))
    return out


def runs_by_status(gw):
    s = samples(gw)
    return {st: s[f'tidegate_runs{{status="{st}"}}'] for st in STATUSES}


def test_families_declared_with_zeros(gateway):
    text = gateway.metrics()
    for name in FAMILIES:
        assert text.count(f"# HELP {name} ") == 1, name
        assert text.count(f"# TYPE {name} gauge\n") == 1, name
    s = samples(gateway)
    assert runs_by_status(gateway) == {st: 0 for st in STATUSES}
    assert s["tidegate_runs_archived"] == 0 and s["tidegate_runs_archived_bytes"] == 0
    for state in ("running", "done"):
        assert s[f'tidegate_sweeps{{state="{state}"}}'] == 0
    for state in ("pending", "submitting"):
        assert s[f'tidegate_sweep_variants_unsubmitted{{state="{state}"}}'] == 0
    assert len(s) == len(STATUSES) + 2 + 2 + 2


def test_completed_run_counted(emulator, gateway):
    sim_id = submit_case(gateway).json()["simulationId"]
    wait_row(gateway, sim_id, lambda r: r["status"] == "COMPLETED")
    assert runs_by_status(gateway) == {**{st: 0 for st in STATUSES}, "COMPLETED": 1}
    assert gateway.metric("tidegate_runs_archived") == 0
    assert gateway.metric("tidegate_runs_archived_bytes") == 0


def test_archived_run_counted(emulator, make_gateway):
    gw = make_gateway(emulator, {"runs": {"archive": True}})
    sim_id = submit_case(gw).json()["simulationId"]
    row = wait_row(gw, sim_id, lambda r: r["archived"])
    assert row["results_size"] > 0
    assert gw.metric("tidegate_runs", status="COMPLETED") == 1
    assert gw.metric("tidegate_runs", status="IN_PROGRESS") == 0
    assert gw.metric("tidegate_runs_archived") == 1
    assert gw.metric("tidegate_runs_archived_bytes") == row["results_size"]
