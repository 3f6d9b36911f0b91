"""A payload read from PostgreSQL once per job and instance (issue 31): a
webhook whose first two attempts the receiver answers 500 is delivered
by the third from the copy the instance spooled for the first (no rows
read again: tidegate_webhook_payload_reused_total counts the two later
attempts), every attempt correctly signed; the copy goes
once the job is delivered."""
import time


from test_limits import needs_pg
from test_fleet import pg_url  # noqa: F401 (a fixture)
from test_fleet_faults import Receiver, export, fleet, hooks, secret_file  # noqa: F401


def wait(cond, seconds=30):
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


@needs_pg
def test_retries_read_the_kept_copy(pg_url, make_emulator, fleet, secret_file):
    emu = make_emulator()
    rcv = Receiver()
    try:
        gw, = fleet(emu, pg_url, 1, hooks(secret_file))
        rcv.status = 500
        r = export(gw, rcv.url("/kept"))
        assert r.status_code == 200, r.text
        wid = r.headers["X-Tidegate-Webhook-Id"]
        wait(lambda: len([g for g in rcv.got if g[0] == wid]) >= 2)
        rcv.status = 200
        wait(lambda: rcv.delivered().get(wid) == 1)
        got = [g for g in rcv.got if g[0] == wid]
        assert all(g[3] for g in got), got              # every attempt signed right
        reused = gw.metric("tidegate_webhook_payload_reused_total")
        assert reused == len(got) - 1, (reused, len(got))
    finally:
        rcv.close()
