#!/usr/bin/env bash
# The metadata quorum's recovery from its leader's SIGKILL (issue 18): three
# brokers on this machine, default timeouts, REPS kills; see
# perf/controller_failover.py for what is timed.
#
#   perf/controller-failover.sh                 # builds the release binary
#   BIN=/path/to/shardlog REPS=5 perf/controller-failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REPS="${REPS:-3}"
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin shardlog
    BIN=target/release/shardlog
fi
. perf/lib.sh
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$(binary_commit "$BIN")-controller-failover}"
echo "results in $OUT"
python3 perf/controller_failover.py "$BIN" "$OUT" "$REPS"
# The brokers' data directories are not results.
rm -rf "$OUT"/data-*
