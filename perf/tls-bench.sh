#!/usr/bin/env bash
# What TLS costs (issue 17's benchmark): one broker with a PLAINTEXT and an
# SSL listener (certificates made here with openssl: a CA and a server
# certificate for 127.0.0.1, RSA 2048), one shard pinned to BROKER_CORE;
# `shardlog bench` pinned to CLIENT_CORE. Each of REPS rounds, plaintext
# and TLS alternating so drift hits both alike:
#   1. produce: unthrottled (--rate 0), 1 KiB records, 16 partitions,
#      acks=1, DURATION after WARMUP, into a fresh topic per run;
#   2. fetch: `bench consume` reads that topic back from the start to its
#      end, every record checked (a few GB: beyond the tail cache, older
#      segments are sent with sendfile in plaintext, read into memory and
#      encrypted over TLS).
# Prints the medians, p99 beside each, and TLS/plaintext ratios (target
# >= 0.7), with the machine, commit and parameters.
#
# Usage: perf/tls-bench.sh          (about 3 minutes with the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-2s}"
REPS="${REPS:-3}"
BROKER_CORE="${BROKER_CORE:-0}"
CLIENT_CORE="${CLIENT_CORE:-1}"
PORT="${PORT:-19292}"
SSL_PORT="${SSL_PORT:-19293}"
DATA="${DATA:-target/perf-data-tls}"

cargo build --release --bin shardlog
BIN=target/release/shardlog
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo -dirty)"
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT-tls}"
PKI="$DATA/pki"  # test keys: kept out of the results
mkdir -p "$OUT" "$PKI" "$DATA"
echo "results in $OUT"

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.pem" -days 2 \
    -subj "/CN=shardlog perf CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$PKI/server.key" -out "$PKI/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$PKI/server.ext"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
    -out "$PKI/server.pem" -days 2 -extfile "$PKI/server.ext" 2>/dev/null

cat >"$OUT/broker.toml" <<TOML
log_maintenance_interval_ms = 1000
[[listeners]]
name = "PLAINTEXT"
address = "127.0.0.1:$PORT"
protocol = "PLAINTEXT"
[[listeners]]
name = "SSL"
address = "127.0.0.1:$SSL_PORT"
protocol = "SSL"
[tls]
cert_file = "$PKI/server.pem"
key_file = "$PKI/server.key"
TOML

rm -rf "$DATA/broker"
"$BIN" serve --config "$OUT/broker.toml" --data-dir "$DATA/broker" --cores 1 --cpuset "$BROKER_CORE" \
    --metrics-listen "" >"$OUT/broker.log" 2>&1 &
BROKER=$!
trap 'kill -TERM $BROKER 2>/dev/null; wait $BROKER 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    grep -q "listening on" "$OUT/broker.log" 2>/dev/null && break
    sleep 0.1
done
grep "listening on" "$OUT/broker.log"

bench() { # mode, name, topic, transport, extra arguments
    local mode="$1" name="$2" topic="$3" transport="$4"
    shift 4
    local target=(--bootstrap "127.0.0.1:$PORT")
    if [ "$transport" = tls ]; then
        target=(--bootstrap "127.0.0.1:$SSL_PORT" --tls --tls-ca "$PKI/ca.pem")
    fi
    taskset -c "$CLIENT_CORE" "$BIN" bench "$mode" "${target[@]}" --topic "$topic" --partitions 16 \
        --record-size 1024 --cores "$CLIENT_CORE" --output "$OUT" --name "$name" \
        --topic-config retention.bytes=268435456 "$@" 2>&1 | tr '\r' '\n' | grep -v '\[#*\.*\]' >"$OUT/$name.log"
    grep "throughput" "$OUT/$name.log" | sed "s/^/$name: /"
}

for i in $(seq "$REPS"); do
    for transport in plain tls; do
        bench produce "produce-$transport-$i" "tls-bench-$transport-$i" "$transport" \
            --rate 0 --acks 1 --duration "$DURATION" --warmup "$WARMUP"
        bench consume "fetch-$transport-$i" "tls-bench-$transport-$i" "$transport" --duration 300s
    done
done

python3 - "$OUT" "$REPS" "$DURATION" "$WARMUP" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys, os
out, reps, duration, warmup = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(name):
    return json.load(open(os.path.join(out, name + ".json")))
rows = {}
for kind, p99_key in (("produce", "latency_ms"), ("fetch", "fetch_round_trip_ms")):
    for t in ("plain", "tls"):
        runs = [load(f"{kind}-{t}-{i}") for i in range(1, reps + 1)]
        bad = [r["validation"] for r in runs if r["status"] != "ok"]
        rows[(kind, t)] = (
            statistics.median(r["throughput"]["mb_per_s"] for r in runs),
            statistics.median(r["throughput"]["msgs_per_s"] for r in runs),
            statistics.median(r[p99_key]["p99_ms"] for r in runs),
            bad,
        )
first = load("produce-plain-1")
m = first["machine"]
print(f"machine: {m.get('cpu')} ({m.get('cores')} cores), kernel {m.get('kernel', '?')}; commit {first['commit'][:12]}")
print(f"parameters: 1 KiB records, 16 partitions, acks=1, unthrottled produce {duration} after {warmup} warm-up; "
      f"fetch = bench consume of that topic; broker 1 shard on its own core, bench on another; medians of {reps}")
print()
print("| run | plaintext MB/s (msg/s) | p99 ms | TLS MB/s (msg/s) | p99 ms | TLS / plaintext |")
print("|---|---|---|---|---|---|")
for kind in ("produce", "fetch"):
    p, t = rows[(kind, "plain")], rows[(kind, "tls")]
    print(f"| {kind} | {p[0]:.1f} ({p[1]:.0f}) | {p[2]:.2f} | {t[0]:.1f} ({t[1]:.0f}) | {t[2]:.2f} | {t[0] / p[0]:.2f} |")
    for bad in p[3] + t[3]:
        print(f"  not ok: {bad}")
PY
