#!/usr/bin/env bash
# bench/validate.sh - throughput of the streaming import check against a bare
# yajl parse of the same body (target: at most 1.3 times the parse's time).
# Builds the release tree and runs bench/validate_bench pinned to one core.
#
#     bench/validate.sh [MB] [ROUNDS]        (defaults: 200 MB, 5 rounds)
#     CPU=0 bench/validate.sh                (core to pin to; default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
R=build-release
if [ ! -f "$R/build.ninja" ]; then
	meson setup "$R" -Dbuildtype=release -Dtests=false >/dev/null
fi
ninja -C "$R" bench/validate_bench >/dev/null || { ninja -C "$R"; exit 1; }
exec taskset -c "${CPU:-1}" "$R/bench/validate_bench" "${1:-200}" "${2:-5}"
