#!/usr/bin/env bash
# The sweeps the sample capacity reports are sized from, and the reports
# rendered from them. One shard on BROKER_CORE, the generator on
# CLIENT_CORE, 1 KiB records, 16 partitions, a fresh broker per sweep:
#   - low: acks=1 and acks=all from LOW_TOP/LOW_STEPS up to LOW_TOP msg/s
#     (default 10k to 100k), where a tight objective can be met;
#     perf/reports/example (p99 ≤ 5 ms, acks=all) is sized from it;
#   - full: acks=all up to FULL_TOP (default 1.1M msg/s, past saturation);
#     perf/reports/relaxed (p99 ≤ 150 ms) is sized from it;
#   - floor: the low sweeps again against the null broker, so each step's
#     p99 can be read against the generator's own (summary.md).
# The disk profile (iotune) is measured in the same run; the replication
# cost comes from the latest perf/cluster-bench.sh run (REPLICATION).
#
#   perf/capacity-sweeps.sh        (about 15 minutes)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LOW_TOP="${LOW_TOP:-100000}"
LOW_STEPS="${LOW_STEPS:-10}"
FULL_TOP="${FULL_TOP:-1100000}"
FULL_STEPS="${FULL_STEPS:-10}"
PORT="${PORT:-19592}"
REPLICATION="${REPLICATION:-$(ls -d perf/results/*-cluster/replication-cost.json | tail -1)}"
perf_setup sweeps
"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-30s}" \
    --output "$OUT/io-properties.toml" >"$OUT/iotune.txt" 2>&1
printf 'log_maintenance_interval_ms = 1000\n' >"$OUT/broker.toml"

sweep() { # results dir, acks, top rate, steps
    mkdir -p "$1"
    "$BIN" bench sweep --bootstrap "127.0.0.1:$PORT" --topic "sweep-acks$2" --partitions 16 --record-size 1024 \
        --acks "$2" --rate "$3" --steps "$4" --cores "$CLIENT_CORE" --duration "${SWEEP_DURATION:-10s}" \
        --warmup "${SWEEP_WARMUP:-2s}" --topic-config retention.bytes=268435456 \
        --topic-config segment.bytes=67108864 --output "$1" --name "sweep-1024B-acks$2" \
        >"$1/sweep-acks$2.txt" 2>&1
}

for run in low:1 low:all full:all; do
    IFS=: read -r range acks <<<"$run"
    echo "== $range sweep, acks=$acks"
    rm -rf "$DATA/broker"
    broker_start "$OUT/broker-$range-acks$acks.log" --config "$OUT/broker.toml" --data-dir "$DATA/broker" \
        --cores 1 --cpuset "$BROKER_CORE" --listen "127.0.0.1:$PORT"
    if [ "$range" = low ]; then sweep "$OUT/low" "$acks" "$LOW_TOP" "$LOW_STEPS"; else
        sweep "$OUT/full" "$acks" "$FULL_TOP" "$FULL_STEPS"; fi
    broker_stop
done

echo "== floor: the low sweeps against the null broker"
null_broker_start "$OUT/null-broker.log"
for acks in 1 all; do sweep "$OUT/floor" "$acks" "$LOW_TOP" "$LOW_STEPS"; done
broker_stop

python3 perf/capacity_sweeps.py "$OUT" | tee "$OUT/summary.md"
for report in example:low relaxed:full; do
    IFS=: read -r name range <<<"$report"
    "$BIN" plan --workload "perf/workloads/$name.toml" --results "$OUT/$range" --io "$OUT/io-properties.toml" \
        --replication "$REPLICATION" --output "perf/reports/$name"
    head -3 "perf/reports/$name/report.md"
done
