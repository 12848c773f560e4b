#!/bin/bash
# Where sluice's AF_XDP loop spends kernel work per forwarded frame, with 1
# and with N RX queues on the same veths (issue #38's multi-queue gap).
#
#   client ns  c0 ── lan0  shaper ns (sluice --io xdp)  wan0 ── v0  server ns
#
# Every veth end gets Q RX and TX queues. A 4-stream iperf3 upload runs for
# SECS + 4 s; over SECS seconds in its middle the script counts, for the
# sluice process: frames received (lan0 + wan0, `show info`), CPU time
# (utime / stime of /proc/PID/stat), syscalls by name and kernel events in
# its context (perf stat on tracepoints, low overhead unlike strace), and
# prints them per received frame, with the ring drops of the whole run.
#   EVENTS (env): other tracepoints than the default list.
#   HOSTQ (env): queues of the hosts' ends (c0, v0) instead of QUEUES, to
#   tell the hosts' queue count from sluice's.
#
# usage (root): crates/io/scripts/mq-cost.sh SLUICE_BIN [SECS] [QUEUES...]
#   RECORD=FILE (env): record a call-graph profile to FILE.qN instead.
# e.g. crates/io/scripts/mq-cost.sh target/release/sluice 6 1 4 4 1
# Needs ip, ethtool, iperf3, perf, python3.
set -u
SL=$1
SECS=${2:-6}
shift 2 2>/dev/null || shift $#
QS=${*:-"1 4"}
CALLS="sendto recvfrom epoll_pwait timerfd_settime getsockopt"

one() {
	local Q=$1 p=mqc$$q$1 C S V SPID=
	C=${p}c S=${p}s V=${p}v
	local CTL=/tmp/$p.sock LOG=/tmp/$p.log OUT=/tmp/$p.json PS=/tmp/$p.perf
	cleanup() {
		[ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
		for n in $C $S $V; do ip netns del "$n" 2>/dev/null; done
		rm -f "$CTL" "$OUT" "$PS"
	}
	trap cleanup RETURN
	for n in $C $S $V; do ip netns add "$n" && ip -n "$n" link set lo up; done
	local H=${HOSTQ:-$Q}
	ip link add c0 netns "$C" numtxqueues "$H" numrxqueues "$H" type veth \
		peer name lan0 netns "$S" numtxqueues "$Q" numrxqueues "$Q"
	ip link add v0 netns "$V" numtxqueues "$H" numrxqueues "$H" type veth \
		peer name wan0 netns "$S" numtxqueues "$Q" numrxqueues "$Q"
	ip -n "$C" addr add 10.9.0.1/24 dev c0
	ip -n "$V" addr add 10.9.0.2/24 dev v0
	for x in "$C c0" "$V v0" "$S lan0" "$S wan0"; do
		set -- $x
		ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off >/dev/null 2>&1
		ip -n "$1" link set "$2" up
	done
	echo "pass all" >/tmp/$p.conf
	ip netns exec "$S" "$SL" run -f /tmp/$p.conf --bridge lan0,wan0 --io xdp \
		--control "$CTL" >"$LOG" 2>&1 &
	SPID=$!
	sleep 2
	ip netns exec "$C" ping -c 3 -i 0.2 -q 10.9.0.2 >/dev/null || {
		echo "q=$Q: ping failed"; cat "$LOG"; return 1; }
	ip netns exec "$V" iperf3 -s -D -1 -p 5401
	sleep 0.5
	ip netns exec "$C" iperf3 -c 10.9.0.2 -p 5401 -t $((SECS + 4)) -P 4 -C cubic -J >"$OUT" &
	local IP=$!
	sleep 2
	# frames: received on both ports; drops: frames the kernel dropped for
	# a full RX ring or an empty fill ring, both ports.
	counter() {
		ip netns exec "$S" "$SL" show info --json --control "$CTL" | python3 -c '
import json, sys
io = dict(json.load(sys.stdin)["io"])
print(io["lan0_'$1'"] + io["wan0_'$1'"])'
	}
	frames() { counter rx_frames; }
	local f0 s0 f1 s1
	f0=$(frames)
	s0=$(awk '{print $14, $15}' /proc/$SPID/stat)
	local ev=""
	for c in $CALLS; do ev="$ev,syscalls:sys_enter_$c"; done
	# Kernel events in sluice's context (its softirqs included): transmits
	# beyond its own are the hosts' TCP run from its sendto.
	ev="$ev,${EVENTS:-net:net_dev_xmit,net:netif_receive_skb,xdp:xdp_redirect,timer:hrtimer_expire_entry,sched:sched_wakeup}"
	if [ -n "${RECORD:-}" ]; then
		# A call-graph profile instead of the syscall counts.
		: >"$PS"
		perf record -q -g -o "$RECORD.q$Q" -p "$SPID" -- sleep "$SECS" 2>/dev/null
	else
		perf stat -x, -e "raw_syscalls:sys_enter$ev" -p "$SPID" -o "$PS" sleep "$SECS" 2>/dev/null
	fi
	f1=$(frames)
	s1=$(awk '{print $14, $15}' /proc/$SPID/stat)
	wait $IP
	sleep 1.2 # the drop counters are collected once a second
	local drops
	drops=$(counter ring_drops)
	python3 - "$Q" "$f0" "$f1" "$s0" "$s1" "$PS" "$OUT" "$drops" "$H" <<'EOF'
import json, sys
q, f0, f1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
drops = int(sys.argv[8])
u0, k0 = map(int, sys.argv[4].split()); u1, k1 = map(int, sys.argv[5].split())
frames = max(f1 - f0, 1)
calls = {}
for line in open(sys.argv[6]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        calls[f[2].split(":")[-1].replace("sys_enter_", "")] = int(float(f[0]))
    elif len(f) > 2 and f[0] == "<not counted>":
        pass
up = json.load(open(sys.argv[7]))["end"]["sum_received"]["bits_per_second"]
ns = lambda t: t * 1e7 / frames  # USER_HZ ticks -> ns per frame
per = " ".join(f"{k}={v / frames:.4f}" for k, v in calls.items() if v)
print(f"q={q} hostq={sys.argv[9]} up={up / 1e9:.2f} Gbit/s ring drops (whole run)={drops} "
      f"frames={frames} user={ns(u1 - u0):.0f} "
      f"sys={ns(k1 - k0):.0f} ns/frame; events/frame: {per}")
EOF
}

for q in $QS; do one "$q"; done
