#!/usr/bin/env python3
"""
bench/emulator_kill9.py - webhooks of exports through a gateway whose
embedded emulator (upstream: embedded) dies with it on kill -9.

One release tidegate runs the emulator in its own process (deliver mode:
the gateway polls the vendor's export, then POSTs it signed to a loopback
receiver). --exports exports with callbackUrl are sent in --kills rounds;
each round ends with a kill -9 of the gateway at a random moment (0.1 to
1.2 s after the round's last export, while exports are being prepared and
delivered) and a restart on the same files. Then it waits until every job
is final and counts: delivered, dead (given up: "the vendor has no
export"), duplicate deliveries (at least once: receivers dedupe by
webhook-id). With --no-data-dir the emulator keeps its state in memory
only (the figure before data_dir).

    /usr/bin/python3 bench/emulator_kill9.py [--exports 120] [--kills 15]
        [--no-data-dir] [--build build-release]
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import Gateway  # noqa: E402
from test_emulator_persist import embedded, exports_under_kills, states  # noqa: E402
from test_gateway_webhooks import Receiver  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exports", type=int, default=120)
    ap.add_argument("--kills", type=int, default=15)
    ap.add_argument("--no-data-dir", action="store_true")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build-release"))
    a = ap.parse_args()
    rcv = Receiver()
    with tempfile.TemporaryDirectory() as tmp:
        gw = embedded(tmp, lambda over: Gateway(tmp, None, over, os.path.abspath(a.build)),
                      data_dir=not a.no_data_dir)
        t0 = time.monotonic()
        try:
            ids = exports_under_kills(gw, rcv, a.exports, a.kills)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                st = states(gw)
                if st.get("delivered", 0) + st.get("dead", 0) + st.get("gone", 0) == len(ids):
                    break
                time.sleep(0.2)
            secs = time.monotonic() - t0
        finally:
            gw.stop()
        rcv.close()
    seen = [q["headers"]["webhook-id"] for q in rcv.seen() if q["status"] == 200]
    print(f"data_dir: {'no' if a.no_data_dir else 'yes'}; {len(ids)} exports, {a.kills} "
          f"kill -9: {st.get('delivered', 0)} delivered, {st.get('dead', 0)} dead, "
          f"{len(seen) - len(set(seen))} duplicate deliveries, other states "
          f"{ {k: v for k, v in st.items() if k not in ('delivered', 'dead')} }, "
          f"{secs:.1f} s")
    return 0 if st.get("dead", 0) == 0 and st.get("delivered", 0) == len(ids) else 1


if __name__ == "__main__":
    sys.exit(main())
