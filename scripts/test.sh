#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, golden, crash and integration tests
# (the integration tests start real ringmq processes on 127.0.0.1 and drive them with
# rocketmq-client-rust). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "scripts/test.sh: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo build (binaries used by the integration tests)"
cargo build --workspace --bins
echo "== cargo test"
cargo test --workspace -- --test-threads="${RINGMQ_TEST_THREADS:-2}"
