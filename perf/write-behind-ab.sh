#!/usr/bin/env bash
# Write-behind against each append writing its segment, on the same build,
# interleaved: per repetition, arm "behind" (`--write-behind-ms 10`) then arm
# "direct" (the default, write-behind off), then the null broker (the floor of the generator
# plus loopback). 1 KiB records, 16 partitions, one shard on BROKER_CORE,
# the generator on CLIENT_CORE. Workloads (`WORKLOADS`, mode:acks:rate):
# produce acks=1 at 5k and 50k msg/s, acks=all at 50k, e2e acks=1 at 50k,
# and the maximum (rate 0). The broker's /metrics is read after each
# workload, so the summary gives device writes per second per workload.
#
#   perf/write-behind-ab.sh                        (about 12 minutes)
#   DURATION=20s REPS=5 perf/write-behind-ab.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
PORT="${PORT:-19492}"
METRICS_PORT="${METRICS_PORT:-19493}"
WORKLOADS="${WORKLOADS:-produce:1:5000 produce:1:50000 produce:all:50000 e2e:1:50000 produce:1:0}"
perf_setup write-behind-ab
"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-10s}" \
    --output "$OUT/io-properties.toml" >"$OUT/iotune.txt" 2>&1

workloads() { # arm, port, rep
    local arm=$1 port=$2 rep=$3 w mode acks rate name
    for w in $WORKLOADS; do
        IFS=: read -r mode acks rate <<<"$w"
        name="$arm-$mode-acks$acks-$rate-r$rep"
        "$BIN" bench "$mode" --bootstrap "127.0.0.1:$port" --topic "$mode-acks$acks" --partitions 16 \
            --record-size 1024 --rate "$rate" --acks "$acks" --cores "$CLIENT_CORE" --duration "$DURATION" \
            --warmup "$WARMUP" --topic-config retention.bytes=268435456 --topic-config segment.bytes=67108864 \
            --output "$OUT" --name "$name" >"$OUT/$name.txt" 2>&1 || echo "run $name failed: see $OUT/$name.txt" >&2
        [ "$arm" = floor ] || curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/metrics-$name.txt"
    done
}

for rep in $(seq "$REPS"); do
    for arm in behind direct; do
        echo "== rep $rep: $arm"
        rm -rf "$DATA/broker"
        args=()
        [ "$arm" = behind ] && args=(--write-behind-ms "${WRITE_BEHIND_MS:-10}")
        broker_start "$OUT/broker-$arm-r$rep.log" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
            --metrics-listen "127.0.0.1:$METRICS_PORT" --listen "127.0.0.1:$PORT" "${args[@]}"
        workloads "$arm" "$PORT" "$rep"
        broker_stop
    done
    echo "== rep $rep: floor"
    "$BIN" bench null-broker --listen "127.0.0.1:$PORT" --cpuset "$BROKER_CORE" --tail-bytes 67108864 \
        >"$OUT/null-broker-r$rep.log" 2>&1 &
    BROKER_PID=$!
    until grep -q "listening on" "$OUT/null-broker-r$rep.log"; do sleep 0.05; done
    WORKLOADS="$(echo "$WORKLOADS" | tr ' ' '\n' | grep -v ':all:' | grep -v ':0$' | tr '\n' ' ')" \
        workloads floor "$PORT" "$rep"
    broker_stop
done
python3 perf/write_behind_ab.py "$OUT" | tee "$OUT/summary.md"
