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
# Then every latency run (2 and 3) again, with the same arguments, against
# `shardlog bench null-broker` pinned to BROKER_CORE: a broker that acks at
# once and serves fetches from memory, so its latency is the floor of the
# generator plus loopback, and each percentile is also given ÷ that floor.
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
NULL_PORT="${NULL_PORT:-$((PORT + 100))}"
# Memory the null broker keeps per partition: its e2e consumer may lag up to
# this much (64 MiB is about 2 s at the half-load rates of perf/README.md).
NULL_TAIL_BYTES="${NULL_TAIL_BYTES:-67108864}"
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
# Where the bench runs go: the broker, then the null broker, whose results
# go to $OUT/floor/ (so `shardlog plan` never sizes from them).
TARGET="$PORT"
RESULTS="$OUT"
wait_listening() {
    for _ in $(seq 100); do
        if grep -q "listening on" "$1" 2>/dev/null; then return; fi
        sleep 0.1
    done
    echo "broker did not start; see $1" >&2
    exit 1
}
start_broker() {
    rm -rf "$DATA/broker"
    "$BIN" serve --config "$OUT/broker.toml" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
        --metrics-listen 127.0.0.1:0 --listen "127.0.0.1:$PORT" >"$OUT/broker-$1.log" 2>&1 &
    BROKER=$!
    wait_listening "$OUT/broker-$1.log"
}
stop_broker() {
    kill -TERM "$BROKER"
    wait "$BROKER" || true
}
trap '[ -n "$BROKER" ] && kill -TERM "$BROKER" 2>/dev/null || true' EXIT

bench() {
    "$BIN" bench "$@" --bootstrap "127.0.0.1:$TARGET" --partitions 16 --cores "$CLIENT_CORE" \
        --duration "$DURATION" --warmup "$WARMUP" --output "$RESULTS" "${TOPIC_CONFIG[@]}"
}
sweep() {
    "$BIN" bench sweep "$@" --bootstrap "127.0.0.1:$TARGET" --partitions 16 --cores "$CLIENT_CORE" \
        --duration "${SWEEP_DURATION:-10s}" --warmup "${SWEEP_WARMUP:-2s}" --output "$RESULTS" \
        --steps "${SWEEP_STEPS:-8}" "${TOPIC_CONFIG[@]}"
}
# Every latency run, as "NAME COMMAND ARGS…" (no argument has a space), to
# run again against the null broker.
LATENCY=()
latency() {
    local name=$1 cmd=$2
    shift 2
    "$cmd" "$@" --name "$name"
    LATENCY+=("$name $cmd $*")
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
        latency "half-$w" bench e2e --topic half --rate "$half" --record-size "$size" --acks "$acks"
        if [ "$size" = "1024" ]; then
            top=$(python3 -c "print(int($max * 1.2))")
            latency "sweep-$w" sweep --topic sweep --rate "$top" --record-size "$size" --acks "$acks"
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
echo "== floor: the ${#LATENCY[@]} latency runs again, against the null broker on core $BROKER_CORE"
"$BIN" bench null-broker --listen "127.0.0.1:$NULL_PORT" --cpuset "$BROKER_CORE" --tail-bytes "$NULL_TAIL_BYTES" \
    >"$OUT/null-broker.log" 2>&1 &
BROKER=$!
wait_listening "$OUT/null-broker.log"
TARGET="$NULL_PORT"
RESULTS="$OUT/floor"
mkdir -p "$RESULTS"
for run in "${LATENCY[@]}"; do
    read -ra args <<<"$run"
    # A failed floor run is reported by summarize.py, not fatal here.
    "${args[1]}" "${args[@]:2}" --name "${args[0]}" || echo "floor run ${args[0]} failed" >&2
done
stop_broker
BROKER=""
python3 perf/summarize.py "$OUT" | tee "$OUT/summary.md"
"$BIN" plan --workload perf/workloads/example.toml --results "$OUT" --io "$OUT/io-properties.toml" \
    --output perf/reports/example
