#!/usr/bin/env bash
# The broker confined to its shard's core (the whole process under
# `taskset -c BROKER_CORE`, helper threads included) against the same
# broker with only the shard pinned: e2e acks=all at 5,000 msg/s, 1 KiB,
# 16 partitions, generator on CLIENT_CORE, interleaved REPS times each.
# The issue's bound: confined p99 within 2x of the unconfined p99.
#
# Usage: perf/confined.sh   (about 2 minutes)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PORT="${PORT:-19095}"
perf_setup confined
for rep in $(seq "$REPS"); do
    for mode in pinned confined; do
        rm -rf "$DATA/broker"
        pre=()
        [ "$mode" = confined ] && pre=(taskset -c "$BROKER_CORE")
        "${pre[@]}" "$BIN" serve --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" --metrics-listen "" \
            --listen "127.0.0.1:$PORT" >"$OUT/broker-$mode-$rep.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do grep -q "listening on" "$OUT/broker-$mode-$rep.log" && break; sleep 0.1; done
        "$BIN" bench e2e --bootstrap "127.0.0.1:$PORT" --topic confined --partitions 16 --record-size 1024 --rate 5000 \
            --acks all --cores "$CLIENT_CORE" --duration 10s --warmup 3s --topic-config segment.bytes=67108864 \
            --output "$OUT" --name "e2e-acksall-$mode-$rep" >"$OUT/e2e-acksall-$mode-$rep.txt" 2>&1
        kill -TERM "$pid"
        wait "$pid" || true
    done
done
rm -rf "$DATA/broker"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import glob, json, statistics, sys
d = sys.argv[1]
med = {}
for mode in ("pinned", "confined"):
    rs = [json.load(open(p)) for p in sorted(glob.glob(f"{d}/e2e-acksall-{mode}-*.json"))]
    ok = [r for r in rs if r.get("status") == "ok"]
    med[mode] = {k: statistics.median(r[k]["p99_ms"] for r in ok) for k in ("latency_ms", "e2e_latency_ms")}
    print(f"{mode}: {len(ok)}/{len(rs)} runs ok; produce p99 median {med[mode]['latency_ms']:.3f} ms "
          f"({', '.join(str(r['latency_ms']['p99_ms']) for r in ok)}); e2e p99 median {med[mode]['e2e_latency_ms']:.3f} ms")
for k in ("latency_ms", "e2e_latency_ms"):
    print(f"{k} p99 confined / pinned: {med['confined'][k] / med['pinned'][k]:.2f} (bound: 2.00)")
PY
