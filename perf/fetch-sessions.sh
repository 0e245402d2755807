#!/usr/bin/env bash
# Fetch request bytes of a consumer of many partitions with incremental
# fetch sessions (KIP-227) and without, in the same run: TOPICS × PER_TOPIC
# partitions, one record each, one shard on BROKER_CORE; kafka-python
# (perf/fetch_sessions.py) reads everything, then polls idle for 15 s; its
# own metrics give the idle window's request size and bytes sent per second.
# Sessions on and off alternate, REPS times each.
#
# Usage: perf/fetch-sessions.sh   (TOPICS=10 PER_TOPIC=1000: 10,000 partitions)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PORT="${PORT:-19098}"
TOPICS="${TOPICS:-10}"
PER_TOPIC="${PER_TOPIC:-1000}"
perf_setup fetch-sessions
ulimit -n "$(ulimit -Hn)"
rm -rf "$DATA/sessions"
broker_start "$OUT/broker.log" --data-dir "$DATA/sessions" --cores 1 --cpuset "$BROKER_CORE" \
    --listen "127.0.0.1:$PORT" --metrics-listen ""
python3 perf/many_partitions.py create "127.0.0.1:$PORT" "$TOPICS" "$PER_TOPIC" | tee "$OUT/setup.jsonl"
python3 perf/many_partitions.py produce "127.0.0.1:$PORT" "$TOPICS" "$PER_TOPIC" 0 | tee -a "$OUT/setup.jsonl"
: >"$OUT/results.jsonl"
for rep in $(seq "$REPS"); do
    for mode in on off; do
        taskset -c "$CLIENT_CORE" python3 perf/fetch_sessions.py "127.0.0.1:$PORT" "$TOPICS" "$PER_TOPIC" "$mode" \
            | tee -a "$OUT/results.jsonl"
    done
done
broker_stop
rm -rf "$DATA/sessions"
python3 - "$OUT/results.jsonl" "$COMMIT" <<'PY' | tee "$OUT/summary.md"
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"commit {sys.argv[2]}; {os.uname().nodename}, {os.cpu_count()} cores, kernel {os.uname().release}")
print(f"kafka-python, {rows[0]['partitions']} partitions assigned, idle window after reading everything\n")
print("| sessions | request size avg (B) | requests/s | bytes sent/s | read all in s |")
print("|---|---:|---:|---:|---:|")
med = {}
for mode in ("on", "off"):
    rs = [r for r in rows if r["sessions"] == mode]
    for r in rs:
        print(f"| {mode} | {r['idle_request_size_avg']:,.0f} | {r['idle_request_rate']:.1f} | "
              f"{r['idle_outgoing_bytes_per_s']:,.0f} | {r['read_seconds']} |")
    med[mode] = statistics.median(r["idle_outgoing_bytes_per_s"] for r in rs)
print(f"\nmedian bytes sent per second while idle: {med['on']:,.0f} with sessions, {med['off']:,.0f} without "
      f"(ratio {med['on'] / med['off']:.4f})")
PY
