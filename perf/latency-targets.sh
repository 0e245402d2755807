#!/usr/bin/env bash
# The tail-latency targets (1 KiB records, 16 partitions, one shard pinned to
# BROKER_CORE, the load generator on CLIENT_CORE), each workload REPS times,
# against shardlog and against the null broker (the floor of the generator
# plus loopback) in the same run:
#   - produce acks=1 and acks=all, and e2e acks=1, at 5,000 and 50,000 msg/s;
#   - the maximum produce throughput (acks=1, unthrottled), then the same
#     three workloads at half of it;
#   - the disk's fdatasync p99 (shardlog iotune), the allowance acks=all gets;
#   - the broker's stage breakdown of its slowest Produce requests at 50k;
#   - with ZERO_AHEAD_AB=1, the 5k and 50k workloads again against the broker
#     with zero-ahead off (--zero-ahead-bytes 0): what it buys, same run.
# perf/latency_targets.py prints medians of REPS, ratios to the floor and
# each target met or not.
#
# Usage: perf/latency-targets.sh                    (about 15 minutes)
#        DURATION=60s REPS=3 perf/latency-targets.sh (the issue's length)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
DURATION="${DURATION:-15s}"
WARMUP="${WARMUP:-3s}"
PORT="${PORT:-19092}"
NULL_PORT="${NULL_PORT:-19192}"
METRICS_PORT="${METRICS_PORT:-19644}"
perf_setup latency
mkdir -p "$OUT/broker" "$OUT/floor"
[ "${ZERO_AHEAD_AB:-0}" = 1 ] && mkdir -p "$OUT/broker-zero-ahead-off"

"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-10s}" \
    --output "$OUT/io-properties.toml"

PID=""
trap '[ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null || true' EXIT
wait_listening() {
    for _ in $(seq 100); do
        if grep -q "listening on" "$1" 2>/dev/null; then return; fi
        sleep 0.1
    done
    echo "did not start; see $1" >&2
    exit 1
}
stop() {
    kill -TERM "$PID"
    wait "$PID" || true
    PID=""
}
start_broker() {
    rm -rf "$DATA/broker"
    printf 'log_maintenance_interval_ms = 1000\n' >"$OUT/broker.toml"
    "$BIN" serve --config "$OUT/broker.toml" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
        --metrics-listen "127.0.0.1:$METRICS_PORT" --listen "127.0.0.1:$PORT" "$@" >"$OUT/broker.log" 2>&1 &
    PID=$!
    wait_listening "$OUT/broker.log"
}
start_null() {
    "$BIN" bench null-broker --listen "127.0.0.1:$NULL_PORT" --cpuset "$BROKER_CORE" --tail-bytes 67108864 \
        >"$OUT/null-broker.log" 2>&1 &
    PID=$!
    wait_listening "$OUT/null-broker.log"
}
# run TARGET_PORT RESULTS_DIR NAME MODE RATE ACKS
run() {
    local port=$1 dir=$2 name=$3 mode=$4 rate=$5 acks=$6
    for rep in $(seq "$REPS"); do
        # One topic per mode and acks (e2e reads from the end): the null
        # broker's memory holds a few topics' tails, not one per workload.
        "$BIN" bench "$mode" --bootstrap "127.0.0.1:$port" --topic "$mode-acks$acks" --partitions 16 --record-size 1024 \
            --rate "$rate" --acks "$acks" --cores "$CLIENT_CORE" --duration "$DURATION" --warmup "$WARMUP" \
            --topic-config retention.bytes=268435456 --topic-config segment.bytes=67108864 --output "$dir" --name "$name-$rep" >"$dir/$name-$rep.txt" 2>&1 ||
            echo "run $name-$rep failed: see $dir/$name-$rep.txt" >&2
    done
}
scrape() {
    curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$1"
}

echo "== shardlog"
start_broker
run "$PORT" "$OUT/broker" max produce 0 1
max=$(python3 perf/summarize.py --median-rate "$OUT/broker" "max-")
half=$(python3 -c "print(int($max / 2))")
echo "maximum $max msg/s (median of $REPS); half $half msg/s"
echo "$half" >"$OUT/half-rate"
for rate in 5000 50000 "$half"; do
    [ "$rate" = 50000 ] && scrape "$OUT/metrics-before-50k.txt"
    run "$PORT" "$OUT/broker" "produce-acks1-$rate" produce "$rate" 1
    [ "$rate" = 50000 ] && scrape "$OUT/metrics-after-50k.txt"
    run "$PORT" "$OUT/broker" "produce-acksall-$rate" produce "$rate" all
    run "$PORT" "$OUT/broker" "e2e-acks1-$rate" e2e "$rate" 1
done
stop
BEFORE="$OUT/metrics-before-50k.txt" python3 perf/stage_breakdown.py "$OUT/metrics-after-50k.txt" Produce 0.99 \
    >"$OUT/stages-50k.md" || echo "no stage breakdown" >&2

if [ "${ZERO_AHEAD_AB:-0}" = 1 ]; then
    echo "== shardlog, zero-ahead off"
    start_broker --zero-ahead-bytes 0
    for rate in 5000 50000; do
        run "$PORT" "$OUT/broker-zero-ahead-off" "produce-acks1-$rate" produce "$rate" 1
        run "$PORT" "$OUT/broker-zero-ahead-off" "produce-acksall-$rate" produce "$rate" all
        run "$PORT" "$OUT/broker-zero-ahead-off" "e2e-acks1-$rate" e2e "$rate" 1
    done
    stop
fi

echo "== floor: the null broker"
start_null
for rate in 5000 50000 "$half"; do
    run "$NULL_PORT" "$OUT/floor" "produce-acks1-$rate" produce "$rate" 1
    run "$NULL_PORT" "$OUT/floor" "e2e-acks1-$rate" e2e "$rate" 1
done
stop

python3 perf/latency_targets.py "$OUT" | tee "$OUT/summary.md"
