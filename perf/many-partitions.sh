#!/usr/bin/env bash
# Many partitions on one node (issue 15): TOPICS × PER_TOPIC partitions on
# --cores CORES. Creates them, produces one record to each and reads every
# one back (confluent-kafka, perf/many_partitions.py), lets the broker go
# idle and counts its descriptors and RSS, then restarts it after SIGTERM
# and after SIGKILL (right after a second acknowledged round), timing each
# start, and reads everything back again. The baseline is the same restart
# of a broker holding only its offsets partitions, in the same run.
#
# Usage: perf/many-partitions.sh   (TOPICS=50 PER_TOPIC=1000 CORES=2;
# IDLE_CLOSE_MS=10000: files idle that long close, instead of 30 s)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PORT="${PORT:-19096}"
TOPICS="${TOPICS:-50}"
PER_TOPIC="${PER_TOPIC:-1000}"
CORES="${CORES:-2}"
IDLE_CLOSE_MS="${IDLE_CLOSE_MS:-10000}"
perf_setup many-partitions
ulimit -n "$(ulimit -Hn)"
rm -rf "$DATA/many" "$DATA/empty"
printf 'segment_files_idle_close_ms = %s\n' "$IDLE_CLOSE_MS" >"$OUT/broker.toml"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

start() { # start DIR LOG: starts the broker, waits for its banner, records the start time
    local started=$(date +%s.%N)
    broker_start "$2" --data-dir "$1" --cores "$CORES" --listen "127.0.0.1:$PORT" --metrics-listen "" \
        --config "$OUT/broker.toml"
    local ready_ms=$(grep -o 'ready in [0-9]*' "$2" | grep -o '[0-9]*$')
    echo "{\"step\": \"start\", \"log\": \"$(basename "$2")\", \"wall_seconds\": $(echo "$(date +%s.%N) - $started" | bc | sed 's/^\./0./'), \"ready_ms\": $ready_ms}" | tee -a "$RESULTS"
}
idle() { # idle LABEL: waits for idle files to close, then counts descriptors and RSS
    sleep $((IDLE_CLOSE_MS * 2 / 1000 + 5))
    local fds=$(ls /proc/"$BROKER_PID"/fd | wc -l)
    local rss=$(awk '/VmRSS/ {print $2}' /proc/"$BROKER_PID"/status)
    echo "{\"step\": \"idle\", \"label\": \"$1\", \"descriptors\": $fds, \"rss_kib\": $rss}" | tee -a "$RESULTS"
}
stop() { broker_stop "$1"; }
py() { local cmd=$1; shift; python3 perf/many_partitions.py "$cmd" "127.0.0.1:$PORT" "$@" | tee -a "$RESULTS"; }

# Baseline: a broker with nothing but its offsets partitions.
start "$DATA/empty" "$OUT/empty-1.log"
stop TERM
start "$DATA/empty" "$OUT/empty-2.log"
stop KILL
start "$DATA/empty" "$OUT/empty-3.log"
stop TERM

start "$DATA/many" "$OUT/many-1.log"
py create "$TOPICS" "$PER_TOPIC"
py produce "$TOPICS" "$PER_TOPIC" 0
py verify "$TOPICS" "$PER_TOPIC" 1
idle "after create, produce and read"
stop TERM
start "$DATA/many" "$OUT/many-2-after-sigterm.log"
py produce "$TOPICS" "$PER_TOPIC" 1
stop KILL
start "$DATA/many" "$OUT/many-3-after-sigkill.log"
py verify "$TOPICS" "$PER_TOPIC" 2
idle "after restarts and a full read"
stop TERM
du -sh "$DATA/many" | tee "$OUT/disk.txt"
rm -rf "$DATA/many" "$DATA/empty"

python3 - "$RESULTS" "$COMMIT" "$TOPICS" "$PER_TOPIC" "$CORES" "$IDLE_CLOSE_MS" <<'PY' | tee "$OUT/summary.md"
import json, os, sys
path, commit, topics, per_topic, cores, idle_ms = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
starts = [r for r in rows if r["step"] == "start"]
print(f"commit {commit}; {os.uname().nodename}, {os.cpu_count()} cores, kernel {os.uname().release}")
print(f"{topics} topics × {per_topic} partitions on --cores {cores}; idle files close after {idle_ms} ms\n")
for r in rows:
    if r["step"] == "start":
        print(f"- start ({r['log']}): ready in {r['ready_ms'] / 1000:.2f} s (wall {r['wall_seconds']:.2f} s)")
    elif r["step"] == "idle":
        print(f"- idle {r['label']}: {r['descriptors']} descriptors, RSS {r['rss_kib'] / 1024:.0f} MiB")
    else:
        print(f"- {r['step']}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items() if k != "step"))
base = {s["log"]: s["wall_seconds"] for s in starts}
for log, label in (("many-2-after-sigterm.log", "empty-2.log"), ("many-3-after-sigkill.log", "empty-3.log")):
    if log in base and label in base:
        print(f"\n{log}: {base[log]:.2f} s against {base[label]:.2f} s for the empty broker ({base[log] / base[label]:.1f}×)")
PY
