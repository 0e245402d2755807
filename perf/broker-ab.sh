#!/usr/bin/env bash
# Two broker settings against each other on the same build, interleaved: per
# repetition, arm A, then arm B, then the null broker (the floor of the
# generator plus loopback). 1 KiB records, 16 partitions, one shard on
# BROKER_CORE, the generator on CLIENT_CORE. Workloads (`WORKLOADS`,
# mode:acks:rate): produce acks=1 at 5k and 50k msg/s, acks=all at 50k, e2e
# acks=1 at 50k, and the maximum (rate 0). The broker's /metrics is read
# after each workload, so the summary gives device writes per second, and
# the broker core's rescheduling interrupts (/proc/interrupts RES: another
# core waking something on it) and the broker's CPU time are read around
# each workload (ipis-NAME.txt: milliseconds, interrupts, CPU ticks, ticks
# per second).
#
#   ARM_A="spin=--spin-before-park-us 50" ARM_B="park=" KIND=spin-ab perf/broker-ab.sh
#   DURATION=20s REPS=5 perf/write-behind-ab.sh     (this script, preset arms)
#
# An arm is NAME=SERVE-FLAGS (flags split on spaces; empty for the
# defaults); leading VAR=VALUE words are set in the broker's environment
# only, e.g. "one-arena=MALLOC_ARENA_MAX=1". The summary (perf/broker_ab.py)
# gives A ÷ B per workload. The leading word SERVE_BIN=PATH runs that arm's
# broker from another build (the generator stays this build's), e.g. the
# commit before a change:
#
#   ARM_A="new=" ARM_B="old=SERVE_BIN=/tmp/shardlog-old" SEGMENT_BYTES=8388608 \
#       RETENTION_BYTES=33554432 KIND=roll-ab perf/broker-ab.sh
#
# SEGMENT_BYTES and RETENTION_BYTES (per partition; 64 MiB and 256 MiB by
# default) set the topics' segment.bytes and retention.bytes: small ones
# make the partitions roll, and retention delete, within a run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
PORT="${PORT:-19492}"
METRICS_PORT="${METRICS_PORT:-19493}"
WORKLOADS="${WORKLOADS:-produce:1:5000 produce:1:50000 produce:all:50000 e2e:1:50000 produce:1:0}"
: "${ARM_A:?ARM_A=NAME=FLAGS is needed}" "${ARM_B:?ARM_B=NAME=FLAGS is needed}"
perf_setup "${KIND:-broker-ab}"
"$BIN" iotune --dir "$DATA/iotune" --core "$BROKER_CORE" --duration "${IOTUNE_DURATION:-10s}" \
    --output "$OUT/io-properties.toml" >"$OUT/iotune.txt" 2>&1
printf 'arm A: %s\narm B: %s\nsegment.bytes=%s retention.bytes=%s\n' "$ARM_A" "$ARM_B" "${SEGMENT_BYTES:-67108864}" "${RETENTION_BYTES:-268435456}" >"$OUT/arms.txt"

res_ipis() { # the broker core's count of rescheduling interrupts so far
    awk -v col=$((BROKER_CORE + 2)) '$1 == "RES:" { print $col }' /proc/interrupts
}

cpu_ticks() { # the broker process's user plus system time so far, in clock ticks
    awk '{ print $14 + $15 }' "/proc/$BROKER_PID/stat"
}

workloads() { # arm, port, rep
    local arm=$1 port=$2 rep=$3 w mode acks rate name ipis ticks started
    for w in $WORKLOADS; do
        IFS=: read -r mode acks rate <<<"$w"
        name="$arm-$mode-acks$acks-$rate-r$rep"
        ipis=$(res_ipis) ticks=$(cpu_ticks) started=$(date +%s%3N)
        "$BIN" bench "$mode" --bootstrap "127.0.0.1:$port" --topic "$mode-acks$acks" --partitions 16 \
            --record-size 1024 --rate "$rate" --acks "$acks" --cores "$CLIENT_CORE" --duration "$DURATION" \
            --warmup "$WARMUP" --topic-config "retention.bytes=${RETENTION_BYTES:-268435456}" \
            --topic-config "segment.bytes=${SEGMENT_BYTES:-67108864}" --output "$OUT" --name "$name" >"$OUT/$name.txt" 2>&1 || echo "run $name failed: see $OUT/$name.txt" >&2
        echo "$(($(date +%s%3N) - started)) $(($(res_ipis) - ipis)) $(($(cpu_ticks) - ticks)) $(getconf CLK_TCK)" \
            >"$OUT/ipis-$name.txt"
        [ "$arm" = floor ] || curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/metrics-$name.txt"
    done
}

for rep in $(seq "$REPS"); do
    for spec in "$ARM_A" "$ARM_B"; do
        arm="${spec%%=*}"
        read -r -a words <<<"${spec#*=}"
        envs=() args=()
        for w in ${words[@]+"${words[@]}"}; do # leading NAME=VALUE words go to the environment
            if [ ${#args[@]} -eq 0 ] && [[ $w =~ ^[A-Z_][A-Z0-9_]*= ]]; then envs+=("$w"); else args+=("$w"); fi
        done
        echo "== rep $rep: $arm (${words[*]:-defaults})"
        rm -rf "$DATA/broker"
        for w in ${envs[@]+"${envs[@]}"}; do export "${w?}"; done
        broker_start "$OUT/broker-$arm-r$rep.log" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
            --metrics-listen "127.0.0.1:$METRICS_PORT" --listen "127.0.0.1:$PORT" ${args[@]+"${args[@]}"}
        for w in ${envs[@]+"${envs[@]}"}; do unset "${w%%=*}"; done
        workloads "$arm" "$PORT" "$rep"
        broker_stop
    done
    echo "== rep $rep: floor"
    null_broker_start "$OUT/null-broker-r$rep.log"
    WORKLOADS="$(echo "$WORKLOADS" | tr ' ' '\n' | grep -v ':all:' | grep -v ':0$' | tr '\n' ' ')" \
        workloads floor "$PORT" "$rep"
    broker_stop
done
python3 perf/broker_ab.py "$OUT" "${ARM_A%%=*}" "${ARM_B%%=*}" | tee "$OUT/summary.md"
