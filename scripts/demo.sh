#!/usr/bin/env bash
# The main job: the classic bufferbloat experiments, without and with the
# shaper, in network namespaces on this machine (docs/lab.md).
#   1. tcp_1up: ping during one saturating TCP upload on a 5/1 Mbit/s cable
#      line with a 200-packet modem FIFO; then HFSC qlimit 9 in front of it.
#   2. ack_priority: a download during an upload on 512/128 kbit/s DSL; then
#      the article's PRIQ with empty ACKs first; then the best measured for
#      that line (examples/lab/ack-priority-mss.conf: ping and DNS first too,
#      the download shaped with FQ-CoDel below the line and paced from its
#      ACKs, and `max-mss auto` so no frame holds the uplink for 100 ms).
# Prints each before/after table and the path of its report. Needs root.
# DEMO_DURATION=S shortens every phase (default: the scenarios' own lengths,
# about 2.5 + 8 minutes in all).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -q --release --locked --bin sluice
bin="${CARGO_TARGET_DIR:-target}/release/sluice"
dur=()
[ -z "${DEMO_DURATION:-}" ] || dur=(--duration "$DEMO_DURATION")
stamp=$(date -u +%Y%m%d-%H%M%S)
reports=()
declare -A shapers=(
    [tcp_1up]="none examples/hfsc-qlimit9.conf"
    [ack_priority]="none examples/priq-ack.conf examples/lab/ack-priority-mss.conf"
)
for s in tcp_1up ack_priority; do
    out="lab-results/demo-$stamp/$s"
    args=()
    for sh in ${shapers[$s]}; do args+=(--shaper "$sh"); done
    echo "### sluice lab compare $s ${args[*]}"
    "$bin" lab compare "$s" "${args[@]}" "${dur[@]}" --out "$out"
    reports+=("$out")
    echo
done
echo "### reports"
for r in "${reports[@]}"; do
    if [ -f "$r/report.html" ]; then echo "$r/report.html"; else echo "$r/"; fi
done
