#!/usr/bin/env bash
# Installs what sluice needs on a Debian machine (run as root). Idempotent:
# packages already present are not reinstalled, so a warm machine is quick.
set -euo pipefail

# Tools the lab and the end-to-end tests drive: iproute2 (ip netns, tc),
# ethtool (offloads), iperf3 and irtt (traffic), iputils-ping (ICMP RTT),
# pkg-config and a C toolchain for crates with build scripts, python3 for
# the bad-input injector of the end-to-end tests, fonts-dejavu-core for the
# text of the lab's plots (loaded at runtime; without it plots are skipped),
# bpftool for the XDP tests (tests/netns_xdp.rs detaches sluice's program),
# nftables for the router's masquerade in tests/netns_attach.rs.
# Packaging (scripts/package.sh, tests/package.rs): dpkg-dev comes with
# build-essential; lintian, man-db (man -l) and systemd (systemd-analyze
# verify, systemd-sysusers) check and install the package. git for the
# commit-msg hook's test (tests/commit_msg_hook.rs).
# dnsmasq-base, busybox (udhcpc, nslookup) and dhcpcd-base: a router's own
# daemons on an attached interface (tests/netns_attach_daemons.rs); none
# ships a service.
# flent and python3-matplotlib (its plots; a Recommends, which --no-install-recommends
# leaves out) read the lab's SCENARIO.flent.gz in tests/lab_flent.rs.
# tmux: the terminal `sluice top` is read through (tests/top_tmux.rs).
# chromium loads the metrics server's dashboard headless
# (tests/dashboard_chromium.rs).
PKGS=(build-essential git pkg-config iproute2 ethtool iperf3 irtt iputils-ping procps python3 fonts-dejavu-core bpftool nftables lintian man-db systemd dnsmasq-base busybox dhcpcd-base flent python3-matplotlib tmux chromium)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    # rustup's installer downloads a toolchain, which a closed network refuses;
    # Debian's own cargo is the fallback (it may be older than rust-version).
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        apt-get install -y -qq --no-install-recommends cargo rustc >/dev/null
    fi
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
echo "setup: ok ($(cargo --version))"
