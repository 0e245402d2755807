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

# binary_commit BIN: the short commit (with -dirty) BIN was built from, as
# its --version says; "unknown" for a binary that does not say.
binary_commit() {
    local c
    c="$("$1" --version | sed -n 's/.*(commit \([0-9a-f]\{7\}\)[0-9a-f]*\(-dirty\)\{0,1\}).*/\1\2/p')"
    echo "${c:-unknown}"
}

# broker_start LOG ARGS...: runs `$BIN serve ARGS...` with its output in
# LOG and waits until it listens (at most a minute; fails at once if it
# exits first). Sets BROKER_PID; an EXIT trap stops it if the script ends
# early, so a failed step never leaves a broker on the port.
broker_start() {
    local log=$1 tries=0
    shift
    "${SERVE_BIN:-$BIN}" serve "$@" >"$log" 2>&1 &
    BROKER_PID=$!
    trap 'broker_stop KILL' EXIT
    until grep -q "listening on" "$log"; do
        if ! kill -0 "$BROKER_PID" 2>/dev/null || [ $((tries += 1)) -gt 1200 ]; then
            echo "broker did not start: $(tail -5 "$log")" >&2
            exit 1
        fi
        sleep 0.05
    done
}

# null_broker_start LOG: runs `$BIN bench null-broker` (the floor: acks at
# once, fetches from a 64 MiB tail in memory) on BROKER_CORE at
# 127.0.0.1:$PORT with its output in LOG, and waits until it listens. Sets
# BROKER_PID, so broker_stop stops it.
null_broker_start() {
    "$BIN" bench null-broker --listen "127.0.0.1:$PORT" --cpuset "$BROKER_CORE" --tail-bytes 67108864 >"$1" 2>&1 &
    BROKER_PID=$!
    trap 'broker_stop KILL' EXIT
    until grep -q "listening on" "$1"; do
        kill -0 "$BROKER_PID" 2>/dev/null || { echo "null broker did not start: $(tail -5 "$1")" >&2; exit 1; }
        sleep 0.05
    done
}

# broker_stop [SIGNAL]: stops the broker (SIGTERM by default) and waits.
broker_stop() {
    [ -n "${BROKER_PID:-}" ] || return 0
    kill "-${1:-TERM}" "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
}
