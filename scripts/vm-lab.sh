#!/bin/bash
# `sluice lab compare` inside the kernel VM of ../shared/tools/kernel-vm,
# whose stock Debian kernel has the qdiscs this development kernel lacks
# (cake, fq_codel, netem), so `tc:` shapers run beside sluice's on the same
# emulated machine. Numbers from the VM compare only with each other.
#
# On the host, from the repository (after `cargo build --release -p sluice`):
#   ../shared/tools/kernel-vm/run-guest -o /var/tmp/vm-t1d -t 3000 \
#     -e SLUICE_ROOT="$PWD" scripts/vm-lab.sh tcp_1down --duration 20 \
#     --shaper none --shaper examples/lab/tcp1down-paced.conf \
#     --shaper "tc:cake bandwidth 970kbit besteffort;cake bandwidth 4850kbit besteffort ingress"
# Results: /var/tmp/vm-t1d/out/run (the lab's run directory), the table in
# /var/tmp/vm-t1d/output.log.
set -eu
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
: "${SLUICE_ROOT:?run-guest -e SLUICE_ROOT=/path/to/the/repository}"
cd "$SLUICE_ROOT"
echo "kernel $(uname -r)"
exec "$SLUICE_ROOT/target/release/sluice" lab compare "$@" --out /job/out/run
