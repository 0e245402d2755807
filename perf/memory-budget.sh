#!/usr/bin/env bash
# Memory under a budget with many partitions (issue 15): a full-speed
# produce-and-consume (bench e2e, 1 KiB, acks=1) over one topic of
# PARTITIONS partitions, against one shard on BROKER_CORE with --memory
# BUDGET, and against the same broker with the default budget (a quarter of
# the machine's memory) as the baseline, REPS times each, interleaved. The
# broker's RSS is sampled every second; the batch cache's hits and misses
# and its evictions are read from /metrics at the end of each run.
#
# Usage: perf/memory-budget.sh   (about 5 minutes; PARTITIONS=5000
# BUDGET=2GiB RATE=400000 DURATION=20s WORKLOAD=e2e by default;
# WORKLOAD=produce RATE=0 is an unthrottled produce, with no reads)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PORT="${PORT:-19095}"
METRICS_PORT="${METRICS_PORT:-19645}"
PARTITIONS="${PARTITIONS:-5000}"
BUDGET="${BUDGET:-2GiB}"
RATE="${RATE:-400000}"
DURATION="${DURATION:-20s}"
WORKLOAD="${WORKLOAD:-e2e}"
perf_setup "memory-budget-$WORKLOAD"

ulimit -n "$(ulimit -Hn)"

run() { # run MODE REP
    local mode=$1 rep=$2 extra=()
    [ "$mode" = budget ] && extra=(--memory "$BUDGET")
    rm -rf "$DATA/broker"
    broker_start "$OUT/broker-$mode-$rep.log" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
        --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" "${extra[@]}"
    local pid=$BROKER_PID
    (while kill -0 "$pid" 2>/dev/null; do
        echo "$(date +%s) $(awk '/VmRSS/ {print $2}' /proc/"$pid"/status 2>/dev/null)"
        sleep 1
    done) >"$OUT/rss-$mode-$rep.txt" &
    local sampler=$!
    "$BIN" bench "$WORKLOAD" --bootstrap "127.0.0.1:$PORT" --topic many --partitions "$PARTITIONS" --record-size 1024 \
        --rate "$RATE" --acks 1 --cores "$CLIENT_CORE" --duration "$DURATION" --warmup 3s \
        --output "$OUT" --name "run-$mode-$rep" >"$OUT/run-$mode-$rep.txt" 2>&1 || true
    curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^shardlog_(memory|batch_cache)' >"$OUT/metrics-$mode-$rep.txt" || true
    broker_stop
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
}

for rep in $(seq "$REPS"); do
    for mode in budget default; do
        run "$mode" "$rep"
    done
done
rm -rf "$DATA/broker"
python3 - "$OUT" "$BUDGET" "$PARTITIONS" "$RATE" "$DURATION" "$COMMIT" "$WORKLOAD" <<'PY' | tee "$OUT/summary.md"
import glob, json, os, re, statistics, sys
d, budget, partitions, rate, duration, commit, workload = sys.argv[1:]
def metric(path, name, label=None):
    total = 0.0
    for line in open(path):
        if line.startswith(name) and (label is None or label in line):
            total += float(line.rsplit(" ", 1)[1])
    return total
print(f"commit {commit}; {os.uname().nodename}, {os.cpu_count()} cores, kernel {os.uname().release}")
print(f"bench {workload}: {partitions} partitions, 1 KiB, acks=1, --rate {rate}, {duration}; one shard; RSS every second\n")
print("| broker | run | peak RSS MiB | msg/s | cache MiB (limit) | evicted MiB | tail-read hit rate |")
print("|---|---:|---:|---:|---:|---:|---:|")
peaks = {}
for mode in ("budget", "default"):
    for path in sorted(glob.glob(f"{d}/rss-{mode}-*.txt")):
        rep = path.rsplit("-", 1)[1][:-4]
        rss = [int(l.split()[1]) for l in open(path) if len(l.split()) == 2]
        peak = max(rss) / 1024 if rss else float("nan")
        peaks.setdefault(mode, []).append(peak)
        m = f"{d}/metrics-{mode}-{rep}.txt"
        hits = metric(m, "shardlog_batch_cache_reads_total", 'result="hit"')
        misses = metric(m, "shardlog_batch_cache_reads_total", 'result="miss"')
        cache = metric(m, "shardlog_memory_used_bytes", 'part="batch_cache"') / 2**20
        limit = metric(m, "shardlog_batch_cache_limit_bytes") / 2**20
        evicted = metric(m, "shardlog_batch_cache_evicted_bytes_total") / 2**20
        try:
            msgs = json.load(open(f"{d}/run-{mode}-{rep}.json"))["throughput"]["msgs_per_s"]
        except (OSError, KeyError, ValueError):
            msgs = float("nan")
        hit_rate = hits / (hits + misses) if hits + misses else float("nan")
        label = f"--memory {budget}" if mode == "budget" else "default budget"
        print(f"| {label} | {rep} | {peak:,.0f} | {msgs:,.0f} | {cache:,.0f} ({limit:,.0f}) | {evicted:,.0f} | {hit_rate:.3f} |")
if len(peaks) == 2:
    b, base = statistics.median(peaks["budget"]), statistics.median(peaks["default"])
    print(f"\nmedian peak RSS: {b:,.0f} MiB under --memory {budget}, {base:,.0f} MiB with the default budget "
          f"(ratio {b / base:.2f})")
PY
