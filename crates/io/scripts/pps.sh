#!/bin/sh
# Packets per second through sluice versus the kernel bridge, same namespaces.
#
#   client ns  c0 ── lan0  shaper ns (br0 | sluice)  wan0 ── v0  server ns
#
# blast (crates/io/examples/blast.rs) sends from c0; the figure is v0's
# rx_packets per second. The destination MAC is not v0's, so the server
# drops each frame at the IP layer's door (PACKET_OTHERHOST) — the cost of
# the server's UDP/ICMP stack stays out of a forwarding measurement. The
# kernel bridge floods such frames to its one other port; sluice forwards
# every frame anyway.
#
# usage (root): crates/io/scripts/pps.sh SLUICE_BIN BLAST_BIN [ROUNDS] [SECS] [CASES]
#   CASES: space-separated from: kernel mmsg ring xdp xdp-generic fq-mmsg fq-ring fq-xdp
# The generator's own ceiling: blast from one namespace to another over a
# single veth pair with --rx-file/--rx-if (docs/adr/0002-packet-io.md).
#   LENS (env): frame lengths without FCS, default "60 1514"; TCP=1 adds iperf3.
# Prints one line per (round, case, len): "case len rx_pps sent_pps
# sluice_ns machine_ns": sluice's CPU time (utime + stime from
# /proc/PID/stat over the run; "-" for the kernel bridge) and the whole
# machine's non-idle time (/proc/stat, generator and softirqs included, so
# only meaningful on an otherwise idle machine), each in ns per frame
# received at v0.
set -eu
SLUICE=$1
BLAST=$2
ROUNDS=${3:-3}
SECS=${4:-3}
CASES=${5:-"kernel mmsg ring fq-mmsg"}
LENS=${LENS:-"60 1514"}
FLOWS=${FLOWS:-16}
T=pps$$
C=${T}c S=${T}s V=${T}v
DIR=$(mktemp -d)
SLEEPER=
SL=
cleanup() {
	[ -n "$SL" ] && kill "$SL" 2>/dev/null && wait "$SL" 2>/dev/null
	[ -n "$SLEEPER" ] && kill "$SLEEPER" 2>/dev/null
	for n in $C $S $V; do ip netns del $n 2>/dev/null || true; done
	rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
for n in $C $S $V; do ip netns add $n; ip -n $n link set lo up; done
ip link add c0 netns $C type veth peer name lan0 netns $S
ip link add v0 netns $V type veth peer name wan0 netns $S
ip -n $C addr add 10.76.0.1/24 dev c0
ip -n $V addr add 10.76.0.2/24 dev v0
for p in $C:c0 $S:lan0 $S:wan0 $V:v0; do
	ip -n ${p%:*} link set ${p#*:} up
	ip netns exec ${p%:*} ethtool -K ${p#*:} tso off gso off tx off gro off >/dev/null 2>&1 || true
done
VMAC=$(ip netns exec $V cat /sys/class/net/v0/address)
ip -n $C neigh replace 10.76.0.2 lladdr $VMAC dev c0
ip -n $V neigh replace 10.76.0.1 lladdr $(ip netns exec $C cat /sys/class/net/c0/address) dev v0
ip netns exec $V sleep 100000 &
SLEEPER=$!
sleep 0.2
printf 'pass keep state\n' >"$DIR/unshaped.conf"
printf 'queue fq on $ext_if bandwidth 10G flows 1024 qlimit 10240 default\npass keep state\n' >"$DIR/fq.conf"

blast() { # len → "rx_pps sent_pps"
	ip netns exec $C "$BLAST" --dev c0 --dst-mac 02:00:00:00:00:02 --src 10.76.0.1 \
		--dst 10.76.0.2 --len $1 --flows $FLOWS --secs $SECS \
		--rx-file /proc/$SLEEPER/net/dev --rx-if v0 2>/dev/null |
		sed -n 's/.*: \([0-9]*\) pps.*received [0-9]* (\([0-9]*\) pps.*/\2 \1/p'
}
tcp() {
	ip netns exec $V iperf3 -s -1 -p 5399 >/dev/null 2>&1 &
	sleep 0.3
	ip netns exec $C iperf3 -c 10.76.0.2 -p 5399 -t $SECS -J 2>/dev/null |
		python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])'
}
start() { # conf io
	ip netns exec $S "$SLUICE" run -f "$DIR/$1.conf" --bridge lan0,wan0 --io $2 \
		--control "$DIR/ctl.sock" ${SLUICE_ARGS:-} 2>>"$DIR/sluice.log" &
	SL=$!
	for _ in $(seq 50); do
		ip netns exec $C ping -c1 -W1 10.76.0.2 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "no path through sluice" >&2; cat "$DIR/sluice.log" >&2; exit 1
}
stop() { kill $SL; wait $SL || true; SL=; }
ticks() { # utime + stime of sluice in clock ticks
	awk '{ print $14 + $15 }' /proc/$SL/stat
}
busy() { # non-idle ticks of the whole machine (all cores, every process)
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat
}
measure() { # case
	for len in $LENS; do
		t0=$([ -n "$SL" ] && ticks || echo 0)
		b0=$(busy)
		r=$(blast $len)
		b1=$(busy)
		t1=$([ -n "$SL" ] && ticks || echo 0)
		echo "$1 $len $r $(echo "$r" | awk -v d=$((t1 - t0)) -v b=$((b1 - b0)) -v sl="$SL" \
			-v hz=$(getconf CLK_TCK) -v s=$SECS '$1 > 0 {
				f = $1 * s
				printf "%s %.0f", sl == "" ? "-" : sprintf("%.0f", d / hz * 1e9 / f), b / hz * 1e9 / f }')"
	done
	[ "${TCP:-0}" = 1 ] && echo "$1 tcp $(tcp)"
	true
}
for r in $(seq $ROUNDS); do
	for c in $CASES; do
		case $c in
		kernel)
			ip -n $S link add br0 type bridge
			ip -n $S link set lan0 master br0
			ip -n $S link set wan0 master br0
			ip -n $S link set br0 up
			sleep 0.3
			measure kernel
			ip -n $S link del br0 ;;
		mmsg) start unshaped mmsg; measure mmsg; stop ;;
		ring) start unshaped ring; measure ring; stop ;;
		fq-mmsg) start fq mmsg; measure fq-mmsg; stop ;;
		fq-ring) start fq ring; measure fq-ring; stop ;;
		xdp) start unshaped xdp; measure xdp; stop ;;
		xdp-generic) start unshaped xdp-generic; measure xdp-generic; stop ;;
		fq-xdp) start fq xdp; measure fq-xdp; stop ;;
		esac
	done
done
