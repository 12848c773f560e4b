#!/usr/bin/env bash
# The main job until the lab lands: check every shipped configuration and
# print its canonical form, the way `pfctl -nvf` would.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -q --release --locked --bin sluice
for f in examples/*.conf; do
    echo "### $f"
    ./target/release/sluice check -v -D ext_if=wan0 -D int_if=lan0 "$f"
    echo
done
