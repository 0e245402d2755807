#!/usr/bin/env bash
# Maximum produce throughput (1 KiB, acks=1, 16 partitions, one shard on
# BROKER_CORE, generator on CLIENT_CORE) with zero-ahead on (the default)
# and off (--zero-ahead-bytes 0), interleaved REPS times each, plus the raw
# loopback TCP and raw DMA baselines of the same run; prints the medians and
# each ratio to min(raw TCP, raw DMA).
#
# Usage: perf/zero-ahead-max.sh   (about 5 minutes)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PORT="${PORT:-19094}"
perf_setup zero-ahead-max
"$BIN" bench baseline --dir "$DATA/baseline" --server-core "$BROKER_CORE" --client-core "$CLIENT_CORE" \
    --output "$OUT/baseline" >"$OUT/baseline.txt" 2>&1
rm -rf "$DATA/baseline"
for rep in $(seq "$REPS"); do
    for mode in on off; do
        rm -rf "$DATA/broker"
        extra=()
        [ "$mode" = off ] && extra=(--zero-ahead-bytes 0)
        "$BIN" serve --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" --metrics-listen "" \
            --listen "127.0.0.1:$PORT" "${extra[@]}" >"$OUT/broker-$mode-$rep.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do grep -q "listening on" "$OUT/broker-$mode-$rep.log" && break; sleep 0.1; done
        "$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic max --partitions 16 --record-size 1024 --rate 0 \
            --acks 1 --cores "$CLIENT_CORE" --duration 10s --warmup 3s --topic-config retention.bytes=268435456 \
            --topic-config segment.bytes=67108864 --output "$OUT" --name "max-$mode-$rep" >"$OUT/max-$mode-$rep.txt" 2>&1
        kill -TERM "$pid"
        wait "$pid" || true
    done
done
rm -rf "$DATA/broker"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import glob, json, statistics, sys
d = sys.argv[1]
base = json.load(open(glob.glob(f"{d}/baseline/*.json")[0]))
print(json.dumps(base.get("machine", {})))
floor_mb = min(base["raw_loopback_tcp_mb_per_s"], base["raw_dma_write_mb_per_s"])
for mode in ("on", "off"):
    rates = [json.load(open(p))["throughput"]["msgs_per_s"] for p in sorted(glob.glob(f"{d}/max-{mode}-*.json"))]
    med = statistics.median(rates)
    share = f", {med * 1024 / 1e6 / floor_mb:.2f} of min(raw TCP, raw DMA) = {floor_mb:.0f} MB/s" if floor_mb else ""
    print(f"zero-ahead {mode}: median {med:,.0f} msg/s ({', '.join(f'{r:,.0f}' for r in rates)}){share}")
PY
