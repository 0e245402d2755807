#!/usr/bin/env bash
# Runs every shardlog test, installing what the tests need first.
# This is the README's test command; .ci/run calls it unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "run-all: cargo not found; install Rust with rustup first" >&2
    exit 1
fi

echo "== client packages for the protocol tests"
# kafka-python drives the broker from Python; librdkafka comes in through the
# rdkafka crate, built from source by cargo (needs a C compiler and make).
if ! python3 -c 'import kafka' >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "kafka-python==3.0.12"
fi
# Debian's kcat (librdkafka 2.0.2) and kafkajs 2.2.4 consume in
# client_kcat and client_kafkajs; kafkajs is installed from its lock file
# into tests/kafkajs/node_modules.
if ! command -v kcat >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat
fi
if ! command -v npm >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
if [ ! -d tests/kafkajs/node_modules/kafkajs ]; then
    (cd tests/kafkajs && npm ci --no-audit --no-fund --silent)
fi
# confluent-kafka's AdminClient drives the admin tests (admin_clients,
# confluent_admin: ListOffsets MAX_TIMESTAMP; acls: ACL administration and
# what the ACLs allow); librdkafka is inside the wheel.
if ! python3 -c 'import confluent_kafka' >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "confluent-kafka==2.16.1"
fi
# tests/tls.rs makes its CA and certificates with the openssl CLI.
if ! command -v openssl >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl
fi
# The metrics test parses /metrics with the official Prometheus client's
# OpenMetrics parser, and checks an unknown path with curl.
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "prometheus-client==0.26.0"
fi
if ! command -v curl >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq curl
fi
# The plan test loads its HTML report in a real headless browser.
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
for tool in cc make; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq build-essential
        break
    fi
done
# The disk-full test makes a small ext4 image and loop-mounts it (as root);
# the confined test runs the broker under taskset (util-linux).
if ! command -v mkfs.ext4 >/dev/null 2>&1 || ! command -v losetup >/dev/null 2>&1 \
    || ! command -v taskset >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq e2fsprogs mount util-linux
fi
# cargo-fuzz, for the bounded fuzzing runs at the end.
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --quiet --locked cargo-fuzz
fi

# Direct I/O needs a real file system: tests keep their files under
# target/tmp (CARGO_TARGET_TMPDIR), never in /tmp, which may be tmpfs.
echo "== formatting"
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all -- --check
else
    echo "rustfmt not installed; skipping the format check"
fi

# rdkafka-client: `shardlog bench --client rdkafka` (librdkafka is built for
# the tests anyway, as a dev-dependency).
echo "== lints"
if ! cargo clippy --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
    rustup component add clippy >/dev/null 2>&1 || true
fi
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --all-targets --features rdkafka-client -- -D warnings
else
    echo "clippy not installed and rustup cannot add it; skipping the lint check"
fi

# The house size limits: no file over 700 lines in src/ (functions over
# 120 lines are clippy's too_many_lines, set in clippy.toml).
echo "== size limits"
long_files=$(find src -name '*.rs' -exec wc -l {} + | awk '$2 != "total" && $1 > 700 {print $2 " (" $1 " lines)"}')
if [ -n "$long_files" ]; then
    echo "files over 700 lines in src/: $long_files" >&2
    exit 1
fi

# The benches (cargo bench --bench storage, …) are type-checked by the
# clippy run above (--all-targets); a release build of them here would only
# cost CI several minutes of optimisation.

# Free disk space, before and after: the build and the brokers' data both
# live under target/, and a full disk fails tests with storage errors.
echo "== tests ($(df -h --output=avail . | tail -1 | tr -d ' ') free on the disk)"
trap 'echo "== disk at exit: $(df -h --output=avail . | tail -1 | tr -d " ") free"' EXIT
cargo test --lib --bins --tests --features rdkafka-client

# Coverage-guided fuzzing, bounded: request framing and decoding, and
# recovery of arbitrary segment bytes. A crash fails the run and leaves its
# input in tests/fuzz/artifacts/; it then becomes a regression test.
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the stable toolchain
# (the only one CI has) accept them.
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
for target in request_frame segment_recovery; do
    echo "== fuzz $target for ${FUZZ_SECONDS}s"
    corpus="target/fuzz-corpus/$target"
    mkdir -p "$corpus"
    cp -n tests/fuzz/seeds/"$target"/* "$corpus"/ 2>/dev/null || true
    RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir tests/fuzz "$target" "$corpus" \
        -- -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=4096 -print_final_stats=1
done
