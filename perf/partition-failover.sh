#!/usr/bin/env bash
# A replicated partition's recovery from its leader's SIGKILL (issue 18):
# three brokers on this machine, default timeouts, REPS kills; see
# perf/partition_failover.py for what is timed.
#
#   perf/partition-failover.sh                  # builds the release binary
#   BIN=/path/to/shardlog REPS=9 PARTITIONS=3 perf/partition-failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REPS="${REPS:-9}"
PARTITIONS="${PARTITIONS:-3}"
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin shardlog
    BIN=target/release/shardlog
fi
. perf/lib.sh
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$(binary_commit "$BIN")-partition-failover}"
echo "results in $OUT"
python3 perf/partition_failover.py "$BIN" "$OUT" "$REPS" "$PARTITIONS"
# The brokers' data directories are not results.
rm -rf "$OUT"/data-*
