"""Fleet mode at rest: what an idle instance asks of the shared PostgreSQL.
An instance with no client, no job and its tokens held sends only what a
guarantee needs: the health probe (a SELECT 1 once nothing was answered
for state.timeout), the webhook worker's look for due jobs and the
adoption of a dead instance's waiting jobs, each every third of
webhooks.lease. Before, the worker read the outbox's next due time every
second. Runs when PostgreSQL is there (pg_virtualenv sets PG*), else
skipped with the reason."""
import os
import time

import pytest

from conftest import TEST_KEY_SHA
from test_fleet import pg_url  # noqa: F401  (a schema of its own per test)

pytestmark = pytest.mark.skipif(
    not (os.environ.get("PGHOST") or os.environ.get("PGPORT") or os.environ.get("PGDATABASE")),
    reason="no PostgreSQL: PG* unset (scripts/test starts one unless TG_TEST_NO_PG=1)")

SECRET = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
OPS = "tidegate_state_query_duration_seconds_count"
IDLE_S = 8


def ops(gw):
    return gw.metric(OPS, backend="postgresql")


def test_idle_instance_leaves_the_database_alone(emulator, make_gateway, pg_url, tmp_path):
    secret = tmp_path / "webhook-secret"
    secret.write_text(SECRET + "\n")
    keys = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]}]
    hooks = {"mode": "deliver", "allow": ["127.0.0.1/32"], "secret_file": str(secret),
             "poll_interval": "200ms"}          # webhooks.lease: its default, 60 s
    gws = [make_gateway(emulator, {"state": {"url": pg_url, "instance": f"gw{i}",
                                             "timeout": "3s"},
                                   "keys": keys, "webhooks": hooks}) for i in range(2)]
    for gw in gws:
        gw.wait_tokens()
    time.sleep(3)                               # start-up: logins, adoption, first looks
    # A scrape of /metrics asks the state for its gauges: its own cost is
    # measured back to back and taken off.
    before = [ops(gw) for gw in gws]
    scrape = [ops(gw) - b for gw, b in zip(gws, before)]
    time.sleep(IDLE_S)
    after = [ops(gw) for gw in gws]
    idle = [a - b - 2 * s for a, b, s in zip(after, before, scrape)]
    # Pings: at most one per 3 s (state.timeout) -> 3 in 8 s; the worker's
    # look and the adoption: each at most once in 8 s (every 20 s).
    # Before: the worker's look alone came every second (8+).
    assert all(0 <= n <= 5 for n in idle), (idle, scrape)


LOGIN_MS = 8000


def test_followers_wait_for_the_leaders_token_without_polling(emulator, make_gateway, pg_url):
    """Three instances start while the vendor's login takes 8 s: the first
    leads the login, the two others follow. A follower is woken by the
    leader's token write (NOTIFY, topic "token") and otherwise looks after
    250 ms doubling to 2 s: about 7 looks of 2 statements; before, it read
    the record and tried the lead every 250 ms: 2 statements × 4 a second
    × 8 s, 60 more per follower than the leader's start-up."""
    emulator.fault(method="POST", path="/public/v1/authenticate", latencyMs=LOGIN_MS)
    keys = [{"name": "test", "sha256": TEST_KEY_SHA, "services": ["dex", "sim"]}]
    gws, first = [], []
    for i in range(3):
        gws.append(make_gateway(emulator, {"state": {"url": pg_url, "instance": f"gw{i}"},
                                           "keys": keys}))
        first.append(ops(gws[-1]))
    t0 = time.monotonic()
    for gw in gws:
        gw.wait_tokens(timeout=LOGIN_MS / 1000 + 10)
    waited = time.monotonic() - t0
    used = [ops(gw) - f for gw, f in zip(gws, first)]
    assert emulator.calls("POST /public/v1/authenticate") == 1      # one login for three
    assert waited < LOGIN_MS / 1000 + 1.5, waited   # the token came when written, not later
    # Each follower: what the leader spent (start-up, scrapes, readiness)
    # and its looks (a read and a lead attempt each: 250 ms, 500 ms, 1 s,
    # then every 2 s, then woken).
    assert all(n <= used[0] + 24 for n in used[1:]), used
    assert all(gw.metric("tidegate_state_wakeups_total") >= 1 for gw in gws[1:])
