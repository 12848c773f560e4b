//! The lab's network (DESIGN.md §6): five namespaces in a line.
//!
//! ```text
//!  client ns ── shaper ns ──────────── modem ns ─────────── delay ns ───────── server ns
//!  c0 ─ lan0 [sluice|bridge] wan0 ─ m0 [router] m1 ─ d0 [delay line] d1 ─ v0
//!  10.77.0.1/24          10.77.0.254/24 ┘     └ 10.77.1.254/24               10.77.1.2/24
//!                                   htb+pfifo on m1 (up)       RTT/2 each way
//!                                   and m0 (down)
//! ```
//!
//! A scenario with several LAN hosts (`Scenario::hosts` ≥ 2) puts a switch
//! namespace between them and the shaper; the rest is the same:
//!
//! ```text
//!  host A ns  c0 ─ h0 ┐
//!  10.77.0.1/24       │ switch ns
//!  host B ns  c0 ─ h1 ┼ [br0] w0 ─ lan0 [sluice|bridge] wan0 ─ m0 … (as above)
//!  10.77.0.2/24       │
//!  …          c0 ─ hN ┘
//! ```
//!
//! # Principles
//! - The bloated bottleneck is the kernel's (htb at the link rate with the
//!   link's overhead, a `pfifo` of `buffer_pkts` packets under it), so it is
//!   independent of the code under test; so is the delay line (netem where
//!   the kernel has it, else `sluice delay-line`, which shares no code with
//!   the engine). Random loss beyond the modem (`--loss`) is always the
//!   delay line's, both ways, seeded (the seed is in summary.json).
//! - The modem's wire sends one frame at a time on slow links: below ~3
//!   Mbit/s its htb bucket holds [`MODEM_BURST_NS`] of the rate, not tc's
//!   default (~1600 bytes). With the default, a frame that arrived at a modem
//!   running under its rate passed at once: on a 128 kbit/s uplink that is
//!   100 ms of line time, so a ping never waited for the frame on the wire
//!   that a real modem would still be sending (measured: 0.0 ms at the
//!   modem while sluice sent 590-byte frames at 120 kbit/s).
//! - The modem routes, as a real modem/router does; the shaper and the
//!   delay namespaces only bridge. Routing matters for realism: a packet
//!   that crosses namespaces without passing an IP stack keeps its sending
//!   socket, and TCP small queues then count the modem's FIFO as the
//!   sender's own queue. Measured with Debian's 6.1 kernel: through a
//!   bridging modem an upload at 1 Mbit/s stayed at a 16-segment window
//!   (ping +55 ms); through a routing one the window grows and the FIFO
//!   fills (seconds), as between two real machines (IP input orphans it).
//! - Hosts and the modem have static neighbours, IPv6 is off everywhere, so
//!   the only packets on the path are the experiment's own.
//! - Each LAN host is a namespace of its own: its own TCP stack (sysctls,
//!   congestion control, socket buffers) and address, as separate machines
//!   are. The switch is a plain kernel bridge outside the shaper namespace,
//!   so the shaper still sees exactly `lan0` and `wan0`, whatever the
//!   number of hosts (a `tc:` shaper's qdiscs go on those two).
//! - Everything belongs to one [`Topology`]: dropping a [`LabNet`] kills
//!   every process it started and deletes every namespace, whatever the exit
//!   path.

use crate::attack::Clock;
use crate::model::{FifoKind, Link, MAX_HOSTS};
use crate::netns::{Netns, ProcId, Topology};
use std::io;
use std::path::Path;
use std::time::Duration;

pub const CLIENT_IP: &str = "10.77.0.1";

/// LAN host `i`'s address: `10.77.0.(i+1)` (host 0 is [`CLIENT_IP`]).
pub fn host_ip(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}
pub const SERVER_IP: &str = "10.77.1.2";
/// The lying clocks' remote host (`--attack lying-clock`): a second
/// address of the server namespace in another /24, so the shaper sees the
/// liars as a network apart from the victim's server, as on the Internet.
pub const LIAR_IP: &str = "10.77.2.2";
/// The modem's addresses: the client's and the server's gateway.
const MODEM_LAN_IP: &str = "10.77.0.254";
/// Nobody's, on the client's link (see `Topology::arp_from`).
pub(crate) const UNUSED_CLIENT_NET_IP: &str = "10.77.0.253";
const MODEM_WAN_IP: &str = "10.77.1.254";
/// Interfaces of the shaper namespace, as the shaper config sees them.
pub const LAN_IF: &str = "lan0";
pub const WAN_IF: &str = "wan0";
/// The switch's port towards the shaper (multi-host scenarios).
const SWITCH_UPLINK: &str = "w0";

/// How long [`LabNet::wait_path`] tries before giving up: a few seconds of
/// one-second pings (a base RTT of up to ~1 s still answers).
const PATH_TRIES: u32 = 8;

/// How the delay namespace adds the base RTT.
#[derive(Clone, Debug, PartialEq)]
pub enum DelayKind {
    /// `--rtt 0`: a plain bridge.
    Bridge,
    /// Kernel bridge and `netem delay RTT/2` on both egresses.
    Netem,
    /// `sluice delay-line --between d0,d1 --delay RTT/2`.
    DelayLine,
}

/// The five namespaces and what runs in the middle ones.
pub struct LabNet {
    pub topo: Topology,
    /// Every LAN host, host `i` at [`host_ip`]`(i)`, its interface `c0`.
    pub hosts: Vec<Netns>,
    /// The switch joining two or more hosts to `lan0` (`None` with one).
    pub switch: Option<Netns>,
    pub shaper: Netns,
    pub modem: Netns,
    pub delay: Netns,
    pub server: Netns,
    pub delay_kind: DelayKind,
    delay_line: Option<ProcId>,
}

/// `tc`-style rate text for a bit/s figure (tc takes plain `bit`).
fn tc_rate(bps: u64) -> String {
    format!("{bps}bit")
}

impl LabNet {
    /// Builds the namespaces, links, the modem and the delay line. The
    /// shaper namespace is left without anything joining `lan0` and `wan0`:
    /// the shaper (crate::shaper) does that. `sluice_bin` runs the delay
    /// line when the kernel has no netem; its log goes to `dir`. `hosts`
    /// LAN hosts (1..=[`MAX_HOSTS`]); one is the five-namespace line above.
    /// `ts_lie`: the delay line rewrites the TSval of the connections of
    /// this server port (`--attack lying-clock`).
    pub fn build(
        link: &Link,
        hosts: usize,
        sluice_bin: &Path,
        dir: &Path,
        ts_lie: Option<(Clock, u16)>,
    ) -> io::Result<LabNet> {
        if !(1..=MAX_HOSTS).contains(&hosts) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a lab scenario has 1 to {MAX_HOSTS} LAN hosts, not {hosts}"),
            ));
        }
        let mut topo = Topology::new("lab");
        let client = topo.add_ns("c")?;
        let shaper = topo.add_ns("s")?;
        let modem = topo.add_ns("m")?;
        let delay = topo.add_ns("d")?;
        let server = topo.add_ns("v")?;
        let mut host_ns = vec![client];
        for i in 1..hosts {
            host_ns.push(topo.add_ns(&format!("c{i}"))?);
        }
        let switch = if hosts > 1 {
            Some(topo.add_ns("w")?)
        } else {
            None
        };
        let all = [&shaper, &modem, &delay, &server]
            .into_iter()
            .chain(&host_ns)
            .chain(switch.as_ref());
        for ns in all {
            // No router solicitations, MLD or DAD on the path: only the
            // experiment's packets cross the modem.
            topo.exec(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
        }
        match &switch {
            None => topo.veth(&host_ns[0], "c0", &shaper, LAN_IF)?,
            Some(sw) => {
                topo.veth(sw, SWITCH_UPLINK, &shaper, LAN_IF)?;
                let mut ports = vec![SWITCH_UPLINK.to_string()];
                for (i, h) in host_ns.iter().enumerate() {
                    let port = format!("h{i}");
                    topo.veth(h, "c0", sw, &port)?;
                    ports.push(port);
                }
                let ports: Vec<&str> = ports.iter().map(String::as_str).collect();
                bridge_ports(&topo, sw, &ports)?;
            }
        }
        topo.veth(&shaper, WAN_IF, &modem, "m0")?;
        topo.veth(&modem, "m1", &delay, "d0")?;
        topo.veth(&delay, "d1", &server, "v0")?;
        topo.addr(&server, "v0", &format!("{SERVER_IP}/24"))?;
        topo.addr(&modem, "m0", &format!("{MODEM_LAN_IP}/24"))?;
        topo.addr(&modem, "m1", &format!("{MODEM_WAN_IP}/24"))?;
        let smac = topo.mac(&server, "v0")?;
        let (m0mac, m1mac) = (topo.mac(&modem, "m0")?, topo.mac(&modem, "m1")?);
        for (i, h) in host_ns.iter().enumerate() {
            let ip = host_ip(i);
            topo.addr(h, "c0", &format!("{ip}/24"))?;
            let cmac = topo.mac(h, "c0")?;
            topo.neigh(h, "c0", MODEM_LAN_IP, &m0mac)?;
            topo.neigh(&modem, "m0", &ip, &cmac)?;
            topo.ip(h, &["route", "add", "default", "via", MODEM_LAN_IP])?;
        }
        topo.neigh(&server, "v0", MODEM_WAN_IP, &m1mac)?;
        topo.neigh(&modem, "m1", SERVER_IP, &smac)?;
        topo.ip(&server, &["route", "add", "default", "via", MODEM_WAN_IP])?;
        if ts_lie.is_some() {
            topo.addr(&server, "v0", &format!("{LIAR_IP}/24"))?;
            let net = format!("{}.0/24", LIAR_IP.rsplit_once('.').map_or(LIAR_IP, |p| p.0));
            topo.ip(&modem, &["route", "add", &net, "via", SERVER_IP])?;
        }
        topo.exec(&modem, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        // Upload leaves the modem through m1, download through m0.
        modem_queue(&topo, &modem, "m1", link.up_bps, link)?;
        modem_queue(&topo, &modem, "m0", link.down_bps, link)?;

        let half_ms = link.rtt_ms / 2.0;
        let mut net = LabNet {
            topo,
            hosts: host_ns,
            switch,
            shaper,
            modem,
            delay,
            server,
            delay_kind: DelayKind::Bridge,
            delay_line: None,
        };
        // Loss and lying clocks are the delay line's (netem has neither
        // seed nor rewriting).
        let lossy = link.loss.is_some_and(|l| l.ppm > 0) || ts_lie.is_some();
        if half_ms <= 0.0 && !lossy {
            bridge(&net.topo, &net.delay, "d0", "d1")?;
        } else if !lossy && has_netem(&net.topo, &net.delay) {
            bridge(&net.topo, &net.delay, "d0", "d1")?;
            let d = format!("{half_ms}ms");
            for dev in ["d0", "d1"] {
                let args = [
                    "tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", &d, "limit",
                    "100000",
                ];
                net.topo.exec(&net.delay, &args)?;
            }
            net.delay_kind = DelayKind::Netem;
        } else {
            let bin = sluice_bin.to_string_lossy();
            let d = format!("{half_ms:.3}");
            let log = dir.join("delay-line.log");
            let ns = net.delay.clone();
            let mut args = vec![&*bin, "delay-line", "--between", "d0,d1", "--delay", &d];
            let (pct, seed) = link.loss.map_or((String::new(), String::new()), |l| {
                (format!("{}%", l.percent()), l.seed.to_string())
            });
            if link.loss.is_some() {
                args.extend(["--loss", &pct, "--loss-seed", &seed]);
            }
            let port = ts_lie.map(|(_, p)| p.to_string()).unwrap_or_default();
            if let Some((clock, _)) = ts_lie {
                args.extend(["--ts-lie", clock.name(), "--ts-lie-port", &port]);
            }
            let id = net.topo.spawn(&ns, &args, Some(&log))?;
            net.delay_line = Some(id);
            net.delay_kind = DelayKind::DelayLine;
        }
        Ok(net)
    }

    /// True when the delay line (if any) still runs.
    pub fn delay_line_alive(&mut self) -> bool {
        match self.delay_line {
            Some(id) => matches!(self.topo.try_status(id), Ok(None)),
            None => true,
        }
    }

    /// Stops the delay line (if any) with SIGTERM, so its counters (frames
    /// lost at random among them) end its log.
    pub fn stop_delay_line(&mut self) {
        if let Some(id) = self.delay_line {
            let _ = self.topo.stop(id, "TERM");
        }
    }

    /// Waits until a ping from every LAN host crosses the whole path;
    /// `Err` says what is missing.
    pub fn wait_path(&mut self) -> Result<(), String> {
        for (i, h) in self.hosts.clone().iter().enumerate() {
            self.wait_path_from(h, &host_ip(i))?;
        }
        Ok(())
    }

    fn wait_path_from(&mut self, host: &Netns, ip: &str) -> Result<(), String> {
        for _ in 0..PATH_TRIES {
            if !self.delay_line_alive() {
                return Err("the delay line exited (see delay-line.log)".into());
            }
            let ok = self
                .topo
                .exec(host, &["ping", "-n", "-c", "1", "-W", "1", SERVER_IP])
                .is_ok();
            if ok {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "no ping crosses the lab path {ip} -> {SERVER_IP} after {PATH_TRIES} tries"
        ))
    }

    /// The LAN's gateway MAC (the modem's `m0`), where crafted frames from
    /// a LAN host are sent.
    pub fn gateway_mac(&self) -> io::Result<String> {
        self.topo.mac(&self.modem, "m0")
    }

    /// Where everything the LAN receives can be counted: the single host's
    /// `c0`, or the switch's uplink (all hosts' frames, before the switch
    /// delivers them).
    pub fn lan_rx_point(&self) -> (&Netns, &'static str) {
        match &self.switch {
            Some(sw) => (sw, SWITCH_UPLINK),
            None => (&self.hosts[0], "c0"),
        }
    }

    /// From now on the modem drops every ICMP packet it would forward
    /// (`--drop-icmp`), both ways: a reflector beyond it is out of reach,
    /// and so is any ping a shaper could send past it. A policy rule after
    /// the local table's: the modem's own addresses still answer, as a real
    /// modem's do. Called once the path was seen to work (with a ping).
    pub fn drop_forwarded_icmp(&self) -> io::Result<()> {
        self.topo
            .ip(
                &self.modem,
                &["rule", "add", "pref", "100", "ipproto", "icmp", "blackhole"],
            )
            .map(drop)
    }

    /// Moves the modem's rates to `down_bps` (on `m0`, towards the LAN) and
    /// `up_bps` (on `m1`), live: what a trace step does.
    pub fn set_modem_rates(&self, link: &Link, down_bps: u64, up_bps: u64) -> io::Result<()> {
        for (dev, bps) in [("m0", down_bps), ("m1", up_bps)] {
            let args = modem_class("change", dev, bps, link);
            self.topo.exec(&self.modem, &strs(&args))?;
        }
        Ok(())
    }

    /// `tc -s qdisc` and `tc -s class` of the modem and the shaper
    /// namespaces, for the run directory.
    pub fn qdisc_report(&self) -> String {
        let mut out = String::new();
        for (what, ns) in [("modem", &self.modem), ("shaper", &self.shaper)] {
            for args in [
                ["tc", "-s", "qdisc", "show"].as_slice(),
                ["tc", "-s", "class", "show", "dev", "m1"].as_slice(),
                ["tc", "-s", "class", "show", "dev", "m0"].as_slice(),
            ] {
                if what == "shaper" && args.len() > 4 {
                    continue; // The shaper has no htb classes of ours.
                }
                out.push_str(&format!("== {what}: {}\n", args.join(" ")));
                match self.topo.exec_unchecked(ns, args) {
                    Ok(o) => out.push_str(&String::from_utf8_lossy(&o.stdout)),
                    Err(e) => out.push_str(&format!("({e})\n")),
                }
            }
        }
        out
    }
}

/// A kernel bridge `br0` over two interfaces of `ns`.
pub fn bridge(topo: &Topology, ns: &Netns, a: &str, b: &str) -> io::Result<()> {
    bridge_ports(topo, ns, &[a, b])
}

/// A kernel bridge `br0` over interfaces of `ns` (no STP: ports forward at
/// once; it learns the hosts' MACs from their first frames and floods
/// until then).
pub fn bridge_ports(topo: &Topology, ns: &Netns, ports: &[&str]) -> io::Result<()> {
    topo.ip(ns, &["link", "add", "br0", "type", "bridge"])?;
    for p in ports {
        topo.ip(ns, &["link", "set", p, "master", "br0"])?;
    }
    topo.ip(ns, &["link", "set", "br0", "up"])?;
    Ok(())
}

/// The modem's queue on `dev`: htb at `bps` charging the link's overhead,
/// with a pfifo of `buffer_pkts` under it (the "big dumb FIFO").
fn modem_queue(topo: &Topology, ns: &Netns, dev: &str, bps: u64, link: &Link) -> io::Result<()> {
    topo.exec(
        ns,
        &[
            "tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
        ],
    )?;
    topo.exec(ns, &strs(&modem_class("add", dev, bps, link)))?;
    let (fifo, limit) = fifo_args(link);
    topo.exec(
        ns,
        &[
            "tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", fifo, "limit",
            &limit,
        ],
    )?;
    Ok(())
}

/// `tc class VERB` of the modem's htb class on `dev` at `bps`: `add` when
/// it is built, `change` when a trace moves the rate (the FIFO under it
/// keeps its packets; htb recomputes its bursts for the new rate).
fn modem_class(verb: &str, dev: &str, bps: u64, link: &Link) -> Vec<String> {
    let rate = tc_rate(bps);
    let mut class: Vec<String> = [
        "tc", "class", verb, "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
        "ceil", &rate,
    ]
    .map(String::from)
    .to_vec();
    if let Some(b) = modem_burst_bytes(bps) {
        let b = format!("{b}b");
        class.extend(["burst".into(), b.clone(), "cburst".into(), b]);
    }
    if link.overhead_bytes != 0 {
        class.extend(["overhead".into(), link.overhead_bytes.to_string()]);
    }
    if link.atm {
        class.extend(["linklayer".into(), "atm".into()]);
    }
    class
}

/// Line time the modem may send back to back after being idle on a slow
/// link: short against a frame's time there (a 1514-byte frame is 12 ms at
/// 1 Mbit/s, 95 ms at 128 kbit/s), long enough that a late timer does not
/// cost it rate (htb drops the tokens lateness would have earned beyond
/// its bucket).
pub const MODEM_BURST_NS: u64 = 4_000_000;

/// tc's own htb bucket, about one MTU at any rate.
const TC_DEFAULT_BURST_BYTES: u64 = 1600;

/// The modem's htb bucket in bytes at `bps`: [`MODEM_BURST_NS`] of line
/// time where that is less than tc's default (below ~3 Mbit/s, where a
/// frame takes longer than 4 ms), at least one byte (`burst 0` means "the
/// default"); `None`, tc's default, above. Larger buckets at 30 Mbit/s
/// (a few ms) let `rrul`'s paced download fall to 22 Mbit/s on two busy
/// cores in CI, where the default never did.
fn modem_burst_bytes(bps: u64) -> Option<u64> {
    let b = (u128::from(bps) * u128::from(MODEM_BURST_NS) / 8 / 1_000_000_000).max(1) as u64;
    (b < TC_DEFAULT_BURST_BYTES).then_some(b)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The modem FIFO's qdisc and limit: `pfifo` of `buffer_pkts` packets, or
/// `bfifo` of as many full-size (1514-byte) frames (tc-pfifo(8)).
fn fifo_args(link: &Link) -> (&'static str, String) {
    let pkts = link.buffer_pkts.max(1);
    match link.fifo {
        FifoKind::Packets => ("pfifo", pkts.to_string()),
        FifoKind::Bytes => ("bfifo", link.fifo_limit_bytes().to_string()),
    }
}

/// Whether the kernel has netem: add it on a dummy interface and look.
fn has_netem(topo: &Topology, ns: &Netns) -> bool {
    if topo
        .ip(ns, &["link", "add", "probe0", "type", "dummy"])
        .is_err()
    {
        return false;
    }
    let ok = topo
        .exec(
            ns,
            &[
                "tc", "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms",
            ],
        )
        .is_ok();
    let _ = topo.ip(ns, &["link", "del", "probe0"]);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modem_fifo_counts_packets_or_full_frames_of_bytes() {
        let mut l = crate::scenario::ack_priority().link;
        l.fifo = FifoKind::Packets;
        assert_eq!(fifo_args(&l), ("pfifo", "100".to_string()));
        l.fifo = FifoKind::Bytes;
        assert_eq!(fifo_args(&l), ("bfifo", "151400".to_string()));
        l.buffer_pkts = 0;
        assert_eq!(
            fifo_args(&l),
            ("bfifo", "1514".to_string()),
            "at least one frame"
        );
    }

    #[test]
    fn on_slow_links_the_modem_bucket_is_a_few_milliseconds_of_line_time() {
        let l = crate::scenario::ack_priority().link;
        let up = modem_class("add", "m1", 128_000, &l);
        let at = up.iter().position(|a| a == "burst").unwrap();
        // 4 ms at 128 kbit/s: 64 bytes, under half an ACK's ATM cells.
        assert_eq!(up[at + 1], "64b");
        let c = up.iter().position(|a| a == "cburst").unwrap();
        assert_eq!(up[c + 1], "64b");
        assert_eq!(modem_burst_bytes(1_000_000), Some(500));
        assert_eq!(modem_burst_bytes(1_000), Some(1), "never `burst 0`");
        // Where a frame is under 4 ms, tc's own bucket (as before).
        assert_eq!(modem_burst_bytes(30_000_000), None);
        let down = modem_class("add", "m0", 30_000_000, &l);
        assert!(!down.iter().any(|a| a == "burst"));
    }
}
