#!/usr/bin/env bash
# The issue's long run: produce acks=1 (1 KiB, 16 partitions, one shard on
# BROKER_CORE, generator on CLIENT_CORE) at RATE msg/s (default: half of the
# maximum measured by perf/latency-targets.sh in this session) for DURATION,
# then p99.99 against p99 and the first minute's p99 against the last's,
# from the run's per-minute split (`latency_by_minute_ms`).
#
# Usage: RATE=469277 DURATION=600s perf/long-run.sh   (about 11 minutes)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
RATE="${RATE:-469277}"
DURATION="${DURATION:-600s}"
PORT="${PORT:-19096}"
perf_setup long-run
rm -rf "$DATA/broker"
printf 'log_maintenance_interval_ms = 1000\n' >"$OUT/broker.toml"
"$BIN" serve --config "$OUT/broker.toml" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
    --metrics-listen "" --listen "127.0.0.1:$PORT" >"$OUT/broker.log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "listening on" "$OUT/broker.log" && break; sleep 0.1; done
"$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic long --partitions 16 --record-size 1024 --rate "$RATE" \
    --acks 1 --cores "$CLIENT_CORE" --duration "$DURATION" --warmup 3s --topic-config retention.bytes=268435456 \
    --topic-config segment.bytes=67108864 --output "$OUT" --name long >"$OUT/long.txt" 2>&1 || true
kill -TERM "$pid"
wait "$pid" || true
rm -rf "$DATA/broker"
python3 - "$OUT/long.json" <<'PY' | tee "$OUT/summary.md"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"commit {r['commit']}, machine {r['machine']}, status {r['status']}: {r['validation']}")
if r["status"] == "ok":
    l = r["latency_ms"]
    print(f"rate {r['parameters'].get('rate')} msg/s, achieved {r['throughput']['msgs_per_s']:,.0f}; "
          f"p50 {l['p50_ms']} p99 {l['p99_ms']} p99.9 {l['p99.9_ms']} p99.99 {l['p99.99_ms']} ms")
    print(f"p99.99 / p99 = {l['p99.99_ms'] / l['p99_ms']:.2f} (target <= 5)")
    m = [x for x in r["latency_by_minute_ms"] if x["count"] > 0]
    for x in m:
        print(f"minute {x['minute']}: {x['count']} records, p99 {x['p99_ms']} ms")
    if len(m) >= 2:
        a, b = m[0]["p99_ms"], m[-1]["p99_ms"]
        print(f"first / last minute p99: {a} / {b} ms, ratio {max(a, b) / min(a, b):.2f} (target <= 1.5)")
PY
