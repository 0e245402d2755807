# The start every perf script shares; sourced right after `set -euo pipefail`.
# Moves to the repository root and sets the defaults each script may
# override from the environment: REPS, BROKER_CORE (the broker's one shard),
# CLIENT_CORE (the load generator), DATA (scratch data directories).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPS="${REPS:-3}"
BROKER_CORE="${BROKER_CORE:-0}"
CLIENT_CORE="${CLIENT_CORE:-1}"
DATA="${DATA:-target/perf-data}"

# perf_setup KIND: builds the release binary and sets BIN, COMMIT (with
# -dirty when src/ has changes) and OUT (perf/results/<UTC time>-<commit>-KIND
# unless OUT is set), then makes OUT and DATA.
perf_setup() {
    cargo build --release --features rdkafka-client
    BIN=target/release/shardlog
    COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo -dirty)"
    OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT-$1}"
    mkdir -p "$OUT" "$DATA"
    echo "results in $OUT"
}
