#!/usr/bin/env bash
# The shard journal against per-partition segment syncs, on the same build:
# acks=all produce latency, interleaved, REPS repetitions per arm (the
# summary quotes medians), for each partition count in PARTITIONS.
#
#   perf/journal-ab.sh                  # 16 and 128 partitions, 20,000 msg/s
#   PARTITIONS="16" RATE=5000 REPS=3 perf/journal-ab.sh
#
# Arm "segment" runs with `--journal-file-bytes 0` (every durable append
# syncs its partition's segment, as before the journal); arm "journal" with
# the default. Broker on BROKER_CORE, generator on CLIENT_CORE.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-20s}"
WARMUP="${WARMUP:-3s}"
REPS="${REPS:-3}"
RATE="${RATE:-20000}"
PARTITIONS="${PARTITIONS:-16 128}"
BROKER_CORE="${BROKER_CORE:-0}"
CLIENT_CORE="${CLIENT_CORE:-1}"
PORT="${PORT:-19392}"
METRICS_PORT="${METRICS_PORT:-19393}"
DATA="${DATA:-target/perf-data-journal}"
if [ -z "${BIN:-}" ]; then
    touch build.rs
    cargo build --release --bin shardlog
    BIN=target/release/shardlog
fi
# Named after the commit the measured binary was built from (its --version),
# not the checkout's, so a BIN built elsewhere is not mislabelled. (lib.sh
# keeps the defaults set above.)
. perf/lib.sh
COMMIT="$(binary_commit "$BIN")"
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT-journal-ab}"
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

run() { # name, partitions, journal file bytes
    local name="$1" parts="$2" journal="$3"
    rm -rf "$DATA/broker"
    "$BIN" serve --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" --journal-file-bytes "$journal" \
        --metrics-listen "127.0.0.1:$METRICS_PORT" --listen "127.0.0.1:$PORT" >"$OUT/broker-$name.log" 2>&1 &
    local broker=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$OUT/broker-$name.log" 2>/dev/null && break
        sleep 0.1
    done
    taskset -c "$CLIENT_CORE" "$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic journal-ab \
        --partitions "$parts" --record-size 1024 --acks all --rate "$RATE" --duration "$DURATION" \
        --warmup "$WARMUP" --cores "$CLIENT_CORE" --output "$OUT" --name "$name" 2>&1 | tr '\r' '\n' |
        grep -v '^produce \[' >"$OUT/$name.log"
    curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/metrics-$name.txt" || true
    kill "$broker"
    wait "$broker" || true
}

for parts in $PARTITIONS; do
    for rep in $(seq "$REPS"); do
        run "segment-p$parts-r$rep" "$parts" 0
        run "journal-p$parts-r$rep" "$parts" 33554432
    done
done
python3 perf/journal_ab.py "$OUT" | tee "$OUT/summary.md"
