#!/usr/bin/env bash
# What transactions cost (issue 16's benchmark): `shardlog bench produce
# --transactional --txn-interval 100ms`, which runs the workload without
# transactions and then with a transactional producer committing every
# interval. CLIENT=native (the default) is our generator: its producer, its
# transaction coordinator conversation and its read_committed fetchers on
# one event loop; CLIENT=rdkafka is librdkafka's transactional producer and
# a librdkafka read_committed consumer. 1 KiB records, 16 partitions,
# acks=all (a transactional producer's), a fresh broker with one shard
# pinned to BROKER_CORE, the generator (every thread of it) pinned to
# CLIENT_CORE:
#   1. throughput: unthrottled (--rate 0), THROUGHPUT_REPS (default REPS) times;
#   2. latency: at each rate of RATES msg/s, REPS times, with a
#      read_committed consumer timing every record end to end; each time
#      also against the null broker (`bench null-broker`, transactions
#      in memory, nothing written), the floor of the generator, librdkafka
#      and loopback for the same workload (FLOOR=0 leaves it out).
# perf/transactions-summary.py prints the medians.
#
# Usage: perf/transactions-bench.sh     (about 4 minutes with the defaults)
#        THROUGHPUT_REPS=0 RATES=2000 perf/transactions-bench.sh   (latency only)
#        BROKER_BIN=/path/to/other/shardlog ...  (an A/B: another broker
#        build under the same generator)
#        BIN=/path/to/shardlog ...  (the generator and null broker; no build)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-2s}"
REPS="${REPS:-3}"
THROUGHPUT_REPS="${THROUGHPUT_REPS:-$REPS}"
RATES="${RATES:-2000 20000}"
INTERVAL="${INTERVAL:-100ms}"
BROKER_CORE="${BROKER_CORE:-0}"
CLIENT_CORE="${CLIENT_CORE:-1}"
PORT="${PORT:-19192}"
METRICS_PORT="${METRICS_PORT:-19193}"
DATA="${DATA:-target/perf-data-txn}"

FLOOR="${FLOOR:-1}"
CLIENT="${CLIENT:-native}"
if [ -z "${BIN:-}" ]; then
    cargo build --release --features rdkafka-client --bin shardlog
    BIN=target/release/shardlog
fi
BROKER_BIN="${BROKER_BIN:-$BIN}"
# Named after the commit the measured binary was built from (its --version),
# not the checkout's, so a BIN built elsewhere is not mislabelled. (lib.sh
# keeps the defaults set above.)
. perf/lib.sh
COMMIT="$(binary_commit "$BROKER_BIN")"
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT-txn}"
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"
printf 'log_maintenance_interval_ms = 1000\n' >"$OUT/broker.toml"

# The disk's own append and fdatasync latency, the floor under every durable
# step of a commit (the summary adds them up).
"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-10s}" \
    --output "$OUT/io-properties.toml"

run() { # name, extra bench arguments
    local name="$1"
    shift
    rm -rf "$DATA/broker"
    if [[ "$name" == floor-* ]]; then
        "$BIN" bench null-broker --listen "127.0.0.1:$PORT" --cpuset "$BROKER_CORE" >"$OUT/broker-$name.log" 2>&1 &
    else
        "$BROKER_BIN" serve --config "$OUT/broker.toml" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
            --metrics-listen "127.0.0.1:$METRICS_PORT" --listen "127.0.0.1:$PORT" >"$OUT/broker-$name.log" 2>&1 &
    fi
    local broker=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$OUT/broker-$name.log" 2>/dev/null && break
        sleep 0.1
    done
    taskset -c "$CLIENT_CORE" "$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic txn-bench \
        --partitions 16 --record-size 1024 --acks all --duration "$DURATION" --warmup "$WARMUP" \
        --cores "$CLIENT_CORE" --client "$CLIENT" --transactional --txn-interval "$INTERVAL" \
        --topic-config retention.bytes=268435456 --topic-config segment.bytes=67108864 \
        --output "$OUT" --name "$name" "$@" 2>&1 | tr '\r' '\n' | grep -v -E '^(rdkafka produce|plain e2e|transactional e2e|plain produce|transactional produce) \[' \
        >"$OUT/$name.log"
    # The broker's own stage histograms: where EndTxn's time went.
    curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/metrics-$name.txt" || true
    kill -TERM "$broker"
    wait "$broker" || true
    grep "transactions / none" "$OUT/$name.log"
}

for i in $(seq "$THROUGHPUT_REPS"); do
    run "throughput-$i" --rate 0
done
for rate in $RATES; do
    for i in $(seq "$REPS"); do
        [ "$FLOOR" = 1 ] && run "floor-latency-$rate-$i" --rate "$rate"
        run "latency-$rate-$i" --rate "$rate"
    done
done
python3 perf/transactions-summary.py "$OUT" | tee "$OUT/summary.md"
