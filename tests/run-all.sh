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
for tool in cc make; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq build-essential
        break
    fi
done

# Direct I/O needs a real file system: tests keep their files under
# target/tmp (CARGO_TARGET_TMPDIR), never in /tmp, which may be tmpfs.
echo "== formatting"
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all -- --check
else
    echo "rustfmt not installed; skipping the format check"
fi

echo "== benches compile (they run with: cargo bench --bench storage)"
cargo build --release --benches

echo "== tests"
cargo test --lib --bins --tests
