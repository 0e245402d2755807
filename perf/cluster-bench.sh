#!/usr/bin/env bash
# Produce throughput and latency of a three-broker cluster beside one
# broker, same build, same run. The cluster is three voters of one metadata
# quorum; the topic's partitions are spread over them, with one replica
# each (arm `cluster`: the cost of routing and of three processes sharing
# the machine) and with three (arm `rf3`: every record copied to the two
# other brokers; acks=all waits for them).
#
#   perf/cluster-bench.sh                 # 16 partitions, 1 KiB, 5,000 msg/s
#   RATE=20000 REPS=3 perf/cluster-bench.sh
#
# Per repetition and arm: acks=1 and acks=all at RATE, and acks=1 as fast as
# the brokers acknowledge (rate 0). Every broker's shard is on BROKER_CORE
# (this machine has two cores), the generator on CLIENT_CORE.
set -euo pipefail
DATA="${DATA:-target/perf-data-cluster}"
. "$(dirname "$0")/lib.sh"

DURATION="${DURATION:-15s}"
DURATION_MAX="${DURATION_MAX:-5s}"
WARMUP="${WARMUP:-3s}"
RATE="${RATE:-5000}"
PARTITIONS="${PARTITIONS:-16}"
PORT="${PORT:-19500}"
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin shardlog
    BIN=target/release/shardlog
fi
COMMIT="$(binary_commit "$BIN")"
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT-cluster}"
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

PIDS=()
stop_all() {
    for pid in "${PIDS[@]}"; do
        kill "${1:-TERM}" "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}
trap 'stop_all -KILL' EXIT

start() { # log, serve args...
    local log=$1 tries=0
    shift
    "$BIN" serve --cores 1 --cpuset "$BROKER_CORE" --metrics-listen "" "$@" >"$log" 2>&1 &
    PIDS+=($!)
    until grep -q "listening on" "$log"; do
        if [ $((tries += 1)) -gt 1200 ]; then
            echo "broker did not start: $(tail -5 "$log")" >&2
            exit 1
        fi
        sleep 0.05
    done
}

start_arm() { # arm, rep
    rm -rf "$DATA/$1"
    if [ "$1" = single ]; then
        start "$OUT/broker-$1-r$2.log" --data-dir "$DATA/$1/b1" --listen "127.0.0.1:$PORT"
        return
    fi
    local quorum="1@127.0.0.1:$((PORT + 11)),2@127.0.0.1:$((PORT + 12)),3@127.0.0.1:$((PORT + 13))"
    for id in 1 2 3; do
        start "$OUT/broker-$1-b$id-r$2.log" --data-dir "$DATA/$1/b$id" --listen "127.0.0.1:$((PORT + id - 1))" \
            --node-id "$id" --controller-quorum "$quorum"
    done
    # Every broker registers with its first heartbeat; a topic created
    # before the third has is placed on two.
    sleep 3
}

# CPU time (clock ticks, utime + stime) of every broker started, and now.
cpu_ticks() {
    local t=0 pid f
    for pid in "${PIDS[@]}"; do
        read -r -a f <"/proc/$pid/stat"
        t=$((t + f[13] + f[14]))
    done
    echo "$t $(date +%s.%N)"
}

bench() { # name, topic, acks, rate, replication factor
    # As fast as acknowledged writes GBs a second, three times over with
    # three replicas: those runs are shorter, so the disk holds them.
    local duration=$DURATION
    [ "$4" = 0 ] && duration=$DURATION_MAX
    taskset -c "$CLIENT_CORE" "$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic "$2" \
        --partitions "$PARTITIONS" --replication-factor "$5" --record-size 1024 --acks "$3" --rate "$4" \
        --duration "$duration" \
        --warmup "$WARMUP" --cores "$CLIENT_CORE" --output "$OUT" --name "$1" 2>&1 | tr '\r' '\n' |
        grep -v '^produce \[' >"$OUT/$1.log"
}

for rep in $(seq "$REPS"); do
    for arm in single cluster rf3; do
        start_arm "$arm" "$rep"
        rf=1
        [ "$arm" = rf3 ] && rf=3
        # The brokers' CPU while idle (3 s) and through acks=1 at RATE: the
        # cost of a replica against a produce (cluster_bench.py, for
        # `shardlog plan --replication`).
        idle_from=$(cpu_ticks)
        sleep 3
        idle_to=$(cpu_ticks)
        bench "$arm-acks1-r$rep" acks1 1 "$RATE" "$rf"
        echo "$idle_from $idle_to $(cpu_ticks) $(getconf CLK_TCK)" >"$OUT/cpu-$arm-r$rep.txt"
        bench "$arm-acksall-r$rep" acksall all "$RATE" "$rf"
        bench "$arm-max-r$rep" max 1 0 "$rf"
        bench "$arm-maxall-r$rep" maxall all 0 "$rf"
        # Where the cluster put the partitions: their directories.
        for dir in "$DATA/$arm"/b*; do
            echo "$(basename "$dir") $(find "$dir" -maxdepth 1 -name 'acks1-*' | wc -l)"
        done >"$OUT/placement-$arm-r$rep.txt"
        stop_all
        rm -rf "${DATA:?}/$arm"
    done
done
python3 perf/cluster_bench.py "$OUT" | tee "$OUT/summary.md"
