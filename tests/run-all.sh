#!/usr/bin/env bash
# Runs every shardlog test, installing what the tests need first.
# This is the README's test command; .ci/run calls it unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "run-all: cargo not found; install Rust with rustup first" >&2
    exit 1
fi

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
