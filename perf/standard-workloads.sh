#!/usr/bin/env bash
# The standard workloads, modelled on OpenMessaging Benchmark's: one topic of
# 16 partitions, 1 KiB and 100 B records, acks=1 and acks=all. For each, a
# freshly started broker (one shard, pinned to BROKER_CORE) and the load
# generator pinned to CLIENT_CORE:
#   1. maximum produce throughput: unthrottled runs (--rate 0), median of REPS;
#   2. latency at half of that maximum: an open-loop e2e run (produce and
#      end-to-end percentiles, corrected for coordinated omission).
#   3. for 1 KiB records, a sweep (latency against throughput up to 1.2× the
#      maximum), which `shardlog plan` reads.
# The same run measures the baselines (raw loopback TCP, raw DMA write on the
# broker's disk), the disk profile (`shardlog iotune`) and a librdkafka
# comparison; perf/summarize.py writes the ratios to summary.md, and the
# sample capacity report perf/reports/example/ is rendered from the results.
# Results: perf/results/<time>-<commit>/.
#
# Usage: perf/standard-workloads.sh            (about 15 minutes)
#        DURATION=10s WARMUP=2s REPS=1 perf/standard-workloads.sh   (quick look)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-20s}"
WARMUP="${WARMUP:-5s}"
REPS="${REPS:-3}"
BROKER_CORE="${BROKER_CORE:-0}"
CLIENT_CORE="${CLIENT_CORE:-1}"
PORT="${PORT:-19092}"
# Direct I/O needs a real file system: never tmpfs.
DATA="${DATA:-target/perf-data}"

cargo build --release --features rdkafka-client
BIN=target/release/shardlog
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo -dirty)"
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT}"
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

"$BIN" bench baseline --dir "$DATA" --server-core "$BROKER_CORE" --client-core "$CLIENT_CORE" \
    --repetitions "$REPS" --output "$OUT"
"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-60s}" \
    --output "$OUT/io-properties.toml"

# Unthrottled runs write over 1 GB/s: bench topics keep 256 MiB per
# partition (retention.bytes, checked every second), so a run's disk use
# stays bounded, as a production broker's would.
printf 'log_maintenance_interval_ms = 1000\n' >"$OUT/broker.toml"
TOPIC_CONFIG=(--topic-config retention.bytes=268435456 --topic-config segment.bytes=67108864)

BROKER=""
start_broker() {
    rm -rf "$DATA/broker"
    "$BIN" serve --config "$OUT/broker.toml" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
        --metrics-listen 127.0.0.1:0 --listen "127.0.0.1:$PORT" >"$OUT/broker-$1.log" 2>&1 &
    BROKER=$!
    for _ in $(seq 100); do
        if grep -q "listening on" "$OUT/broker-$1.log" 2>/dev/null; then return; fi
        sleep 0.1
    done
    echo "broker did not start; see $OUT/broker-$1.log" >&2
    exit 1
}
stop_broker() {
    kill -TERM "$BROKER"
    wait "$BROKER" || true
}
trap '[ -n "$BROKER" ] && kill -TERM "$BROKER" 2>/dev/null || true' EXIT

bench() {
    "$BIN" bench "$@" --bootstrap "127.0.0.1:$PORT" --partitions 16 --cores "$CLIENT_CORE" \
        --duration "$DURATION" --warmup "$WARMUP" --output "$OUT" "${TOPIC_CONFIG[@]}"
}

for size in 1024 100; do
    for acks in 1 all; do
        w="${size}B-acks${acks}"
        echo "== $w"
        start_broker "$w"
        for rep in $(seq "$REPS"); do
            bench produce --topic "max-$rep" --rate 0 --record-size "$size" --acks "$acks" --name "max-$w-$rep"
        done
        max=$(python3 perf/summarize.py --median-rate "$OUT" "max-$w-")
        half=$(python3 -c "print(int($max / 2))")
        echo "== $w: maximum $max msg/s; latency at half: $half msg/s"
        bench e2e --topic half --rate "$half" --record-size "$size" --acks "$acks" --name "half-$w"
        if [ "$size" = "1024" ]; then
            top=$(python3 -c "print(int($max * 1.2))")
            "$BIN" bench sweep --bootstrap "127.0.0.1:$PORT" --partitions 16 --cores "$CLIENT_CORE" \
                --duration "${SWEEP_DURATION:-10s}" --warmup "${SWEEP_WARMUP:-2s}" --output "$OUT" \
                --topic sweep --rate "$top" --steps "${SWEEP_STEPS:-8}" --record-size "$size" --acks "$acks" \
                --name "sweep-$w" "${TOPIC_CONFIG[@]}"
        fi
        if [ "$w" = "1024B-acks1" ]; then
            # The native generator against librdkafka on the same workload.
            bench produce --topic vs-rdkafka --rate 0 --record-size "$size" --acks "$acks" \
                --client rdkafka --name "rdkafka-$w"
        fi
        stop_broker
    done
done
BROKER=""
python3 perf/summarize.py "$OUT" | tee "$OUT/summary.md"
"$BIN" plan --workload perf/workloads/example.toml --results "$OUT" --io "$OUT/io-properties.toml" \
    --output perf/reports/example
