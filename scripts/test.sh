#!/usr/bin/env bash
# The whole test suite: what CI runs (via .ci/run) and what developers run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never
# Each step's start in seconds since the script began: where the time goes
# (docs/testing.md has the table).
step() { echo "== $1 (${SECONDS} s)"; }

step build
cargo build --workspace --all-targets --locked
step fmt
cargo fmt --all -- --check
step clippy
cargo clippy --workspace --all-targets --locked -- -D warnings
step "fuzz targets"
# Built on stable (cargo-fuzz is not needed to compile them), so a library
# change cannot silently break a target; fuzz/Cargo.lock pins their deps.
cargo build --manifest-path fuzz/Cargo.toml --bins --locked
step examples
# The binary the build step made. `cargo run --bin sluice` would resolve
# the features of sluice's own dependencies only (serde without the
# `alloc` a dev-dependency turns on) and build serde and every crate above
# it again, in debug, for nothing.
for f in examples/*.conf; do
    target/debug/sluice check -D ext_if=wan0 -D int_if=lan0 "$f"
done
step "release builds"
# The end-to-end tests drive an optimised sluice: a debug build cannot
# forward 100 Mbit/s on two cores (netns_rate skips that case without it).
# First the router package's daemon, without the lab, for tests/package.rs:
# in the release profile, so it shares every dependency's build with the
# lab's binary below (package.sh's own `deb` profile would build them all
# again); package.sh strips it as it packs it.
cargo build --release --locked --no-default-features --bin sluice
cp target/release/sluice target/sluice-nolab
export SLUICE_DEB_BIN="$PWD/target/sluice-nolab"
cargo build --release --locked --bin sluice
export SLUICE_BIN="$PWD/target/release/sluice"
# A network-namespace test that cannot run (not root, a tool missing, a
# debug build, an I/O path the kernel refuses) prints a SKIP line and passes;
# with SLUICE_REQUIRE_NETNS=1 it fails instead (sluice-testkit). Required
# under CI, which must not turn green by skipping, and as root, where
# scripts/setup.sh provides everything and a skip would hide a broken
# machine. An explicit SLUICE_REQUIRE_NETNS (0 to allow skips) wins.
if [ -z "${SLUICE_REQUIRE_NETNS+set}" ] && { [ -n "${CI:-}" ] || [ "$(id -u)" -eq 0 ]; }; then
    export SLUICE_REQUIRE_NETNS=1
fi
echo "SLUICE_REQUIRE_NETNS=${SLUICE_REQUIRE_NETNS:-unset}"
step tests
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --no-fail-fast: one failing test binary does not hide the rest of the
# suite's results (the exit status still fails).
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
# One closing line for the whole suite (cargo's last line is a doc-test run
# that may well have 0 tests, which says nothing about the suite), in the
# plain "N passed, N failed, N skipped" form. cargo counts a test that
# printed SKIP and returned as passed: it is counted as skipped instead.
awk '/^test result:/ { p += $4; f += $6 } /^SKIP / { s++ }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p - s, f, s }' "$log"
step done
