//! The lab's data model: what a scenario asks for, what a run records, and
//! what its summary says. Everything here is plain data (serde), shared by
//! the runner (which fills [`Series`]), the analysis (which turns a series
//! into a [`Summary`]) and the report (plots, HTML, terminal table).
//!
//! Times in a run are seconds since the run's origin (`t = 0` is the start
//! of the first phase); rates are bits per second; latencies milliseconds.
//! The schema of `summary.json` is documented in docs/lab-results.md: change both
//! together.

use serde::{Deserialize, Serialize};

/// Traffic direction, seen from the user behind the shaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Server → client (leaves sluice through `$int_if`).
    Down,
    /// Client → server (leaves sluice through `$ext_if`).
    Up,
}

/// The emulated access link: the modem's rates, its FIFO and the path's
/// base round-trip time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub down_bps: u64,
    pub up_bps: u64,
    /// Base RTT added by the delay line (half each way).
    pub rtt_ms: f64,
    /// Packets the modem's FIFO holds in each direction (with
    /// [`FifoKind::Bytes`], that many full-size frames' worth of bytes).
    pub buffer_pkts: u32,
    /// How the modem's FIFO counts its limit.
    #[serde(default)]
    pub fifo: FifoKind,
    /// Per-packet link overhead the modem charges (as `tc … overhead N`),
    /// bytes; `atm` adds the ATM cell tax (`linklayer atm`).
    pub overhead_bytes: i32,
    pub atm: bool,
    /// The name the overhead was given by (`pppoe-llcsnap`, `none`, or the
    /// number as text).
    pub overhead_name: String,
    /// When the link's rate moves (`--trace FILE`): the modem follows it,
    /// and `down_bps`/`up_bps` are its rates at `t = 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::RateTrace>,
    /// The modem drops every ICMP packet it would forward (`--drop-icmp`):
    /// no reflector beyond it answers a ping, as behind an ISP that filters
    /// ICMP. The lab's latency probe is then irtt's round trip
    /// ([`Link::latency_probe`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_icmp: bool,
    /// Random loss beyond the modem (`--loss`), both directions, on the
    /// delay line between the modem and the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LinkLoss>,
}

/// Independent random loss on the path beyond the modem: each frame, either
/// way, is lost with probability `ppm / 10⁶`; `seed` replays the draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkLoss {
    pub ppm: u32,
    pub seed: u64,
}

impl LinkLoss {
    /// `1%`, `0.5%`: the figure as people read it.
    pub fn percent(&self) -> f64 {
        f64::from(self.ppm) / 10_000.0
    }
}

/// The rate sampler's period: each of a run's rate samples covers the time
/// since the one before it (the first, this long).
pub const RATE_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

pub use crate::trace::{LINK_MAX_BPS, LINK_MIN_BPS};

/// A full-size Ethernet frame without FCS, bytes: the unit of a `bfifo`
/// modem's buffer.
pub const FULL_FRAME_BYTES: u64 = 1514;

impl Link {
    /// The capacity in force at `t_s` (the trace's, else the fixed rates):
    /// `(down, up)` bit/s.
    pub fn rates_at(&self, t_s: f64) -> (u64, u64) {
        match &self.trace {
            Some(tr) => {
                let s = tr.at(t_s);
                (s.down_bps, s.up_bps)
            }
            None => (self.down_bps, self.up_bps),
        }
    }

    /// Mean `(down, up)` capacity over `[a, b)`, bit/s.
    pub fn mean_capacity(&self, a: f64, b: f64) -> (f64, f64) {
        match &self.trace {
            Some(tr) => tr.mean_capacity(a, b),
            None => (self.down_bps as f64, self.up_bps as f64),
        }
    }

    /// What the run's latency figures are the round trips of: ICMP echo
    /// (`ping`), or irtt's UDP packets where the link drops ICMP.
    pub fn latency_probe(&self) -> &'static str {
        if self.drop_icmp {
            "irtt"
        } else {
            "ping"
        }
    }

    /// Makes the link follow `trace`, starting at its first step's rates.
    pub fn follow(&mut self, trace: crate::trace::RateTrace) {
        let s = trace.at(0.0);
        (self.down_bps, self.up_bps) = (s.down_bps, s.up_bps);
        self.trace = Some(trace);
    }

    /// The `bfifo` limit of [`FifoKind::Bytes`]: `buffer_pkts` (at least
    /// one) full-size frames.
    pub fn fifo_limit_bytes(&self) -> u64 {
        u64::from(self.buffer_pkts.max(1)) * FULL_FRAME_BYTES
    }
}

/// How the modem's FIFO is full: after `buffer_pkts` packets (`pfifo`), or
/// after `buffer_pkts` × 1514 bytes (`bfifo`), where a small ACK takes a
/// small part of the buffer instead of a whole slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FifoKind {
    #[default]
    Packets,
    Bytes,
}

/// Bulk TCP traffic: one iperf3 client with `streams` parallel streams,
/// running from the start of phase `from` to the end of phase `to`
/// (indices into [`Scenario::phases`], inclusive).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowSpec {
    pub dir: Dir,
    pub streams: u32,
    pub from: usize,
    pub to: usize,
    /// Socket buffer size in bytes, both ends (iperf3 `-w`, which sets
    /// SO_SNDBUF and SO_RCVBUF on the client's and the server's sockets,
    /// so it caps the sender's data in flight and the receiver's
    /// advertised window alike); `None` = the kernel's autotuning.
    pub window: Option<u64>,
    /// The LAN host it runs on (index into the scenario's hosts; 0 is
    /// the first, `10.77.0.1`).
    #[serde(default)]
    pub host: usize,
}

/// An irtt stream (VoIP-like isochronous UDP probes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IrttSpec {
    pub interval_ms: u32,
    pub payload_bytes: u32,
    /// Phases it runs in (inclusive indices).
    pub from: usize,
    pub to: usize,
    /// The LAN host it runs on.
    #[serde(default)]
    pub host: usize,
}

/// One phase of a scenario: a named time window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpec {
    pub name: String,
    /// Default length; `--duration S` replaces every phase's length.
    pub secs: f64,
}

/// A lab experiment: the link, the traffic over time, and the shaper
/// configuration it ships with (a file under `examples/`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub name: String,
    /// One line for `sluice lab list`.
    pub about: String,
    pub link: Link,
    pub phases: Vec<PhaseSpec>,
    pub flows: Vec<FlowSpec>,
    /// ICMP echo every `ping_interval_ms` through the whole run.
    pub ping_interval_ms: u32,
    /// The LAN host that pings.
    #[serde(default)]
    pub ping_host: usize,
    /// How many LAN hosts (1..=[`MAX_HOSTS`]): host `i` is `10.77.0.(i+1)`,
    /// in its own namespace; two or more share a switch (crate::topo).
    #[serde(default = "one_host")]
    pub hosts: usize,
    pub irtt: Option<IrttSpec>,
    /// TCP congestion control of both hosts.
    pub cc: String,
    /// ECN on both hosts (`net.ipv4.tcp_ecn` 1 in the client and server
    /// namespaces: request it and accept it), else 0 (neither).
    pub ecn: bool,
    /// SACK on both hosts (`net.ipv4.tcp_sack`; `--no-sack` turns it off).
    #[serde(default = "yes")]
    pub sack: bool,
    /// TCP timestamps on both hosts (`net.ipv4.tcp_timestamps`;
    /// `--no-timestamps` turns them off).
    #[serde(default = "yes")]
    pub timestamps: bool,
    /// A hostile host's attack during the run (`--attack`), or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<crate::attack::Attack>,
    /// The lying connections when the attack is `lying-clock`.
    #[serde(default)]
    pub lying: crate::attack::Lying,
    /// The scenario's own shaper configuration, relative to the repository
    /// (or install) root, e.g. `examples/priq-ack.conf`.
    pub shaper_example: String,
}

/// Most LAN hosts a scenario may have (addresses `10.77.0.1` to `.16`).
pub const MAX_HOSTS: usize = 16;

fn one_host() -> usize {
    1
}

fn yes() -> bool {
    true
}

/// A host's name in tables and plots: `A`, `B`, … (host 0 is `A`).
pub fn host_name(host: usize) -> String {
    match u8::try_from(host).ok().filter(|&h| h < 26) {
        Some(h) => char::from(b'A' + h).to_string(),
        None => format!("H{host}"),
    }
}

impl Scenario {
    /// A run's label in tables and plots: the shaper's, and the attack it
    /// ran under (`tcp1down-paced.conf + forged-ack`, `… + lying-clock 6
    /// frozen`), so a comparison with
    /// and without an attack lines up as rows of one table.
    pub fn run_label(&self, shaper: &str) -> String {
        match self.attack {
            Some(crate::attack::Attack::LyingClock) => format!(
                "{shaper} + {} {} {}",
                crate::attack::Attack::LyingClock.name(),
                self.lying.liars,
                self.lying.clock.name()
            ),
            Some(a) => format!("{shaper} + {}", a.name()),
            None => shaper.to_string(),
        }
    }

    /// The scenario's attack, timed against its first loaded phase (phase 1;
    /// a scenario of one phase is attacked from its start). `None` without one.
    pub fn attack_plan(&self) -> Option<crate::attack::Plan> {
        let attack = self.attack?;
        let (mut start, mut end) = (0.0, 0.0);
        let loaded = if self.phases.len() > 1 { 1 } else { 0 };
        for (i, p) in self.phases.iter().enumerate() {
            if i == loaded {
                end = start + p.secs;
                break;
            }
            start += p.secs;
        }
        let start_s = start + crate::attack::LEAD_S.min((end - start) / 4.0);
        let secs = match attack {
            crate::attack::Attack::SynFlood => crate::attack::SYN_FLOOD_S,
            _ => end - start_s,
        }
        .clamp(0.1, crate::attack::MAX_SECS);
        Some(crate::attack::Plan {
            attack,
            start_s,
            secs,
        })
    }

    /// Phase windows `(start_s, end_s)` in run time.
    pub fn phase_windows(&self) -> Vec<(f64, f64)> {
        let mut t = 0.0;
        self.phases
            .iter()
            .map(|p| {
                let w = (t, t + p.secs);
                t += p.secs;
                w
            })
            .collect()
    }

    /// Total length of the run in seconds.
    pub fn total_secs(&self) -> f64 {
        self.phases.iter().map(|p| p.secs).sum()
    }

    /// Which directions carry bulk traffic in phase `i`.
    pub fn load_in_phase(&self, i: usize) -> (bool, bool) {
        let active = |d: Dir| {
            self.flows
                .iter()
                .any(|f| f.dir == d && f.from <= i && i <= f.to)
        };
        (active(Dir::Down), active(Dir::Up))
    }
}

/// What shapes the traffic at the shaper's position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ShaperSpec {
    /// Nothing: the shaper namespace only bridges (the modem's FIFO fills).
    None,
    /// sluice with this pf.conf (macros `ext_if` and `int_if` defined).
    Sluice { path: String },
    /// The kernel's own qdisc on the upload side (`tc:'cake bandwidth 950kbit'`);
    /// `down`, when given (`tc:'UP ARGS;DOWN ARGS'`), on the download side.
    Tc { up: String, down: Option<String> },
}

impl ShaperSpec {
    /// Parses `none`, `tc:ARGS[;DOWN ARGS]` or a file path.
    pub fn parse(s: &str) -> Result<ShaperSpec, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty --shaper: give `none`, a pf.conf path or tc:'QDISC ARGS'".into());
        }
        if s == "none" {
            return Ok(ShaperSpec::None);
        }
        if let Some(rest) = s.strip_prefix("tc:") {
            let mut parts = rest.splitn(2, ';');
            let up = parts.next().unwrap_or("").trim().to_string();
            let down = parts
                .next()
                .map(|d| d.trim().to_string())
                .filter(|d| !d.is_empty());
            if up.is_empty() {
                return Err(format!(
                    "`{s}`: tc: needs a qdisc and its arguments, e.g. tc:'cake bandwidth 950kbit'"
                ));
            }
            return Ok(ShaperSpec::Tc { up, down });
        }
        Ok(ShaperSpec::Sluice {
            path: s.to_string(),
        })
    }

    /// A short label for tables and plot legends: `none`, the file name
    /// without directory, or `tc:cake bandwidth 950kbit`.
    pub fn label(&self) -> String {
        match self {
            ShaperSpec::None => "none".into(),
            ShaperSpec::Sluice { path } => std::path::Path::new(path)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.clone()),
            ShaperSpec::Tc { up, down: None } => format!("tc:{up}"),
            ShaperSpec::Tc { up, down: Some(d) } => format!("tc:{up};{d}"),
        }
    }
}

/// Throughput over one sampling interval ending at `t_s`: Ethernet frame
/// bits per second received by the client (down) and by the server (up).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateSample {
    pub t_s: f64,
    pub down_bps: f64,
    pub up_bps: f64,
}

/// One probe: sent at `t_s`; `rtt_ms` is `None` when no answer came.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PingSample {
    pub t_s: f64,
    pub rtt_ms: Option<f64>,
}

/// One irtt round trip: sent at `t_s`; one-way delays client→server (up)
/// and server→client (down). All `None` when the probe was lost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IrttSample {
    pub t_s: f64,
    pub rtt_ms: Option<f64>,
    pub up_owd_ms: Option<f64>,
    pub down_owd_ms: Option<f64>,
}

/// A bulk flow as it ran: when, and what iperf3 reported at its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    pub dir: Dir,
    pub streams: u32,
    /// The socket buffer it ran with (iperf3 `-w`, bytes); `None` =
    /// autotuning.
    #[serde(default)]
    pub window: Option<u64>,
    pub start_s: f64,
    pub end_s: f64,
    /// The LAN host it ran on.
    #[serde(default)]
    pub host: usize,
    /// Payload bits per second at the receiver, when iperf3 finished.
    pub goodput_bps: Option<f64>,
    pub retransmits: Option<u64>,
    /// Why there is no result (iperf3's error), if none.
    pub error: Option<String>,
}

/// Everything a run recorded, in run time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub rate: Vec<RateSample>,
    pub ping: Vec<PingSample>,
    pub irtt: Vec<IrttSample>,
    pub flows: Vec<FlowRecord>,
    /// Per-host TCP goodput over time (multi-host scenarios only; empty
    /// otherwise and in runs recorded before hosts existed).
    #[serde(default)]
    pub host_rate: Vec<HostRateSample>,
    /// sluice's own rate per direction over time, when its configuration
    /// has `autorate` (from the run's autorate.csv): each sample holds
    /// until the next of its direction. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shaper_rate: Vec<ShaperRateSample>,
    /// A sluice shaper's `show health`, once a second (crate::verdict).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<crate::verdict::HealthSample>,
}

/// The shaper's rate in direction `dir` from `t_s` on (an autorate
/// decision; the first sample of a direction is the rate it started at).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShaperRateSample {
    pub t_s: f64,
    pub dir: Dir,
    pub bps: f64,
}

/// How the shaper answered one step of a moving link's capacity in one
/// direction (loaded phases only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateStep {
    /// When the link's capacity changed (run time).
    pub t_s: f64,
    pub dir: Dir,
    pub from_bps: u64,
    pub to_bps: u64,
    /// A step down: seconds until the shaper's own rate was at or below the
    /// new capacity (`None`: not before the next step or the end of the
    /// load; absent without autorate's log). A step up: seconds until the
    /// measured throughput (1 s mean) reached 80 % of the new capacity.
    pub settle_s: Option<f64>,
    /// Seconds the search had: to the direction's next step or the end of
    /// the load (a step up cut short after 4 s was not missed against a
    /// goal of 10). 0 in summaries written before it was kept.
    #[serde(default)]
    pub window_s: f64,
    /// Whether the figure could be measured at all (a step down needs the
    /// shaper's rate, i.e. autorate's log).
    pub measured: bool,
}

/// One host's TCP goodput over one sampling interval ending at `t_s`:
/// payload bits per second the server's sockets received from the host
/// (up) and had acknowledged by it (down), summed over its connections.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostRateSample {
    pub t_s: f64,
    pub host: usize,
    pub down_bps: f64,
    pub up_bps: f64,
}

/// Latency statistics in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Answered probes the statistics come from.
    pub samples: u64,
}

/// One phase of a run, summarised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseSummary {
    pub name: String,
    pub start_s: f64,
    pub end_s: f64,
    /// Mean received rate over the phase (Ethernet frame bits).
    pub down_bps: f64,
    pub up_bps: f64,
    /// Ping RTT; `None` when no probe was answered.
    pub latency_ms: Option<Latency>,
    /// Share of the phase's pings that got no answer.
    pub loss_pct: f64,
    /// Which directions carried bulk traffic.
    pub load_down: bool,
    pub load_up: bool,
    /// Of a loaded direction: the received rate as a percentage of the
    /// link's capacity at the same moments (the trace's, on a moving link),
    /// sample by sample; `None` in a direction without load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_util_pct: Option<f64>,
    /// A sluice shaper's own verdict per direction at the phase's end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<crate::verdict::PhaseVerdict>,
}

/// The VoIP estimate from the irtt stream during load.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Voip {
    /// Mean one-way delay, the worse direction.
    pub owd_ms: f64,
    /// Mean absolute IPDV (RFC 3550-style jitter), the worse direction.
    pub jitter_ms: f64,
    pub loss_pct: f64,
    /// E-model estimate (ITU-T G.107, simplified), 1..4.5.
    pub mos: f64,
}

/// DSLReports-style bufferbloat grade of the added latency under load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grades {
    /// The worst phase with load.
    pub overall: String,
    /// Phases with download load only / upload load (any); `None` when the
    /// scenario has no such phase.
    pub down: Option<String>,
    pub up: Option<String>,
    /// Added mean latency (ms) the grades come from.
    pub added_ms: f64,
    pub added_down_ms: Option<f64>,
    pub added_up_ms: Option<f64>,
}

/// One LAN host of a multi-host run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    pub host: usize,
    /// `A`, `B`, … (see [`host_name`]).
    pub name: String,
    pub ip: String,
    /// One entry per phase of the run, in order.
    pub phases: Vec<HostPhase>,
}

/// One host during one phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostPhase {
    pub name: String,
    /// Mean TCP goodput of the host's connections (payload bits/s).
    pub down_bps: f64,
    pub up_bps: f64,
    /// The host's part of the phase's goodput in each direction, percent of
    /// the sum over hosts; `None` when no host moved data that way.
    pub down_share_pct: Option<f64>,
    pub up_share_pct: Option<f64>,
    /// Ping RTT, when this host pings and some probe was answered.
    pub ping_ms: Option<Latency>,
    /// The irtt stream's figures, when this host runs it in this phase.
    pub voip: Option<Voip>,
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub shaper: String,
    pub link: Link,
    pub cc: String,
    /// Whether the hosts negotiated ECN (`net.ipv4.tcp_ecn` 1 on both).
    #[serde(default)]
    pub ecn: bool,
    /// SACK and timestamps on both hosts (summaries before they could be
    /// turned off: on).
    #[serde(default = "yes")]
    pub sack: bool,
    #[serde(default = "yes")]
    pub timestamps: bool,
    /// The attack played during the run and what it sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<crate::attack::AttackRecord>,
    /// Ping RTT over the first idle phase (or over answered probes before
    /// any load starts).
    pub idle_latency_ms: Latency,
    pub phases: Vec<PhaseSummary>,
    pub voip: Option<Voip>,
    pub grade: Grades,
    pub flows: Vec<FlowRecord>,
    /// Per-host figures of a scenario with several LAN hosts (empty with
    /// one host, and in summaries written before hosts existed).
    #[serde(default)]
    pub hosts: Vec<HostSummary>,
    /// On a moving link: each step of its capacity inside a phase loaded
    /// in that direction, and how long the shaper took to follow it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_steps: Vec<RateStep>,
    /// `Some(reason)` when the run did not go as planned (a flow failed,
    /// the shaper died…): the numbers are kept but flagged.
    pub warnings: Vec<String>,
    /// Wall-clock start, RFC 3339 UTC.
    pub started_at: String,
    pub sluice_version: String,
}

/// A whole run: its summary and its raw data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub summary: Summary,
    pub series: Series,
}
