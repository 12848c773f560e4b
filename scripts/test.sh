#!/usr/bin/env bash
# The whole test suite: what CI runs (via .ci/run) and what developers run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never

echo "== build"
cargo build --workspace --all-targets --locked
echo "== fmt"
cargo fmt --all -- --check
echo "== clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== examples"
for f in examples/*.conf; do
    cargo run -q --locked --bin sluice -- check -D ext_if=wan0 -D int_if=lan0 "$f"
done
echo "== tests"
cargo test --workspace --locked
