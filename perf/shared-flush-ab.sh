#!/usr/bin/env bash
# The shared device flush (storage::device_sync) against the broker before
# it: durable produce (acks=all) at 5k and 50k msg/s and acks=1 at 50k as a
# control, 1 KiB, 16 partitions, one shard on BROKER_CORE, the generator on
# CLIENT_CORE; the two binaries interleaved REPS times. The same run also
# measures the disk (iotune) and the null-broker floor at 50k. Prints the
# medians and each ratio to the floor.
#
# Usage: BEFORE_BIN=/path/to/shardlog-before perf/shared-flush-ab.sh
#        (about 10 minutes; DURATION, WARMUP, REPS as in the other scripts)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
: "${BEFORE_BIN:?set BEFORE_BIN to the binary of the commit before the shared flush}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
PORT="${PORT:-19095}"
METRICS_PORT="${METRICS_PORT:-19645}"
perf_setup shared-flush-ab
mkdir -p "$OUT/before" "$OUT/after" "$OUT/floor"
"$BEFORE_BIN" --version >"$OUT/before-version.txt" 2>&1 || true
"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-10s}" \
    --output "$OUT/io-properties.toml" >"$OUT/iotune.txt" 2>&1
rm -rf "$DATA/iotune"
load() {
    local dir=$1 name=$2 mode=$3 rate=$4 acks=$5
    "$BIN" bench "$mode" --bootstrap "127.0.0.1:$PORT" --topic "$name" --partitions 16 --record-size 1024 \
        --rate "$rate" --acks "$acks" --cores "$CLIENT_CORE" --duration "$DURATION" --warmup "$WARMUP" \
        --topic-config retention.bytes=268435456 --topic-config segment.bytes=67108864 \
        --output "$dir" --name "$name" >"$dir/$name.txt" 2>&1 || echo "run $dir/$name failed" >&2
}
for rep in $(seq "$REPS"); do
    for which in before after; do
        bin="$BIN"
        [ "$which" = before ] && bin="$BEFORE_BIN"
        rm -rf "$DATA/broker"
        BIN_SAVED="$BIN"
        BIN="$bin" broker_start "$OUT/$which/broker-$rep.log" --data-dir "$DATA/broker" --cores 1 \
            --cpuset "$BROKER_CORE" --metrics-listen "127.0.0.1:$METRICS_PORT" --listen "127.0.0.1:$PORT"
        BIN="$BIN_SAVED"
        for w in "produce-acksall-5000 all 5000" "produce-acksall-50000 all 50000" "produce-acks1-50000 1 50000"; do
            set -- $w
            load "$OUT/$which" "$1-$rep" produce "$3" "$2"
        done
        curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/$which/metrics-$rep.txt" || true
        broker_stop
    done
done
rm -rf "$DATA/broker"
"$BIN" bench null-broker --listen "127.0.0.1:$PORT" --cpuset "$BROKER_CORE" >"$OUT/floor/null-broker.log" 2>&1 &
BROKER_PID=$!
until grep -q "listening on" "$OUT/floor/null-broker.log"; do sleep 0.05; done
for rep in $(seq "$REPS"); do
    load "$OUT/floor" "produce-acks1-50000-$rep" produce 50000 1
    load "$OUT/floor" "produce-acks1-5000-$rep" produce 5000 1
done
broker_stop
python3 perf/shared_flush_ab.py "$OUT" "$COMMIT" | tee "$OUT/summary.md"
