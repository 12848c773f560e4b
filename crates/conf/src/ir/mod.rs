//! The validated intermediate representation that `conf` hands to the engine.
//!
//! Everything here is resolved: macros expanded, lists expanded into one rule
//! per combination, percentages turned into absolute rates, defaults filled in,
//! names checked. The engine builds runtime objects from this and nothing else;
//! `conf` knows nothing of the schedulers that will implement it.

mod options;
pub use options::*;

use sluice_time::{Duration, Rate};
use std::net::IpAddr;

/// A whole configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// One entry per interface that has queueing (ALTQ `altq on`, OpenBSD 5.5+
    /// root `queue … on IF`, or dummynet `pipe … on IF`).
    pub interfaces: Vec<IfaceQueueing>,
    /// Filter rules after list expansion, in file order.
    pub rules: Vec<Rule>,
    pub tables: Vec<Table>,
    pub options: Options,
}

/// The language a queue tree was written in, so it prints back in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// `altq on IF SCHED … queue { … }` and `queue NAME … SCHED(…)`.
    #[default]
    Altq,
    /// OpenBSD 5.5+: `queue NAME on IF bandwidth …` / `parent NAME`.
    OpenBsd,
}

/// Flags written on the `altq on` line itself (`altq on em0 cbq(red ecn)
/// …`). pfctl gives them to ALTQ's root class, which holds no packets:
/// kept to print back, not acted on (a warning says so); but for the
/// root's `upperlimit`, which caps the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RootFlags {
    pub default: bool,
    pub borrow: bool,
    pub red: bool,
    pub ecn: bool,
    pub rio: bool,
    pub codel: bool,
    /// pfctl's root-class options that share nothing (a root has no
    /// siblings): `realtime`, `linkshare`, `buckets`, `hogs`. Read, warned
    /// and dropped; not printed.
    pub unshared: [bool; 4],
    /// The root class's `upperlimit`: unlike the rest, it acts — it caps
    /// the whole tree below the interface's bandwidth (its `m2`).
    pub upperlimit: Option<ServiceCurve>,
}

impl RootFlags {
    /// The flags set, in the printer's order and spelling.
    pub fn words(self) -> impl Iterator<Item = &'static str> {
        [
            (self.default, "default"),
            (self.borrow, "borrow"),
            (self.red, "red"),
            (self.ecn, "ecn"),
            (self.rio, "rio"),
            (self.codel, "codel"),
        ]
        .into_iter()
        .filter_map(|(on, w)| on.then_some(w))
    }

    /// The root-class options read and dropped, in pfctl's spelling.
    pub fn dropped(self) -> impl Iterator<Item = &'static str> {
        ["realtime", "linkshare", "buckets", "hogs"]
            .into_iter()
            .zip(self.unshared)
            .filter_map(|(w, on)| on.then_some(w))
    }
}

/// Which scheduler runs an interface's queue tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedKind {
    Priq,
    Cbq,
    Hfsc,
    /// A dummynet pipe whose own scheduler is given in [`Pipe`].
    Pipe,
    /// FreeBSD/DragonFly ALTQ's `fairq`: flat, classes by priority 0..7,
    /// flows hashed into buckets inside each ([`Queue::buckets`], [`Queue::hogs`]).
    Fairq,
}

impl SchedKind {
    /// The scheduler's word in pf.conf (`priq`, `cbq`, …).
    pub fn name(self) -> &'static str {
        match self {
            SchedKind::Priq => "priq",
            SchedKind::Cbq => "cbq",
            SchedKind::Hfsc => "hfsc",
            SchedKind::Pipe => "pipe",
            SchedKind::Fairq => "fairq",
        }
    }

    /// Its options' form, for messages (`cbq(…)`).
    pub fn opts_name(self) -> &'static str {
        match self {
            SchedKind::Priq => "priq(…)",
            SchedKind::Cbq => "cbq(…)",
            SchedKind::Fairq => "fairq(…)",
            _ => "hfsc(…)",
        }
    }
}

/// ALTQ's `FAIRQ_MAX_BUCKETS`: the most flow buckets a FAIRQ class has.
pub const FAIRQ_MAX_BUCKETS: u64 = 2048;

/// The queueing of one interface.
#[derive(Clone, Debug, PartialEq)]
pub struct IfaceQueueing {
    pub ifname: String,
    pub sched: SchedKind,
    /// Interface bandwidth (root rate).
    pub bandwidth: Rate,
    /// `tbrsize` in bytes, if given.
    pub tbrsize: Option<u32>,
    /// The queue tree, parents before children; `Queue::parent` indexes this
    /// vector. For PRIQ all queues are children of an implicit root (parent None).
    pub queues: Vec<Queue>,
    /// Index into `queues` of the default queue (there is exactly one, a
    /// leaf, except under CBQ, whose interior classes hold packets too).
    pub default_queue: usize,
    /// Set when `sched` is `Pipe`.
    pub pipe: Option<Pipe>,
    /// Line of the defining statement, for messages.
    pub line: u32,
    /// The dialect it was written in ([`Dialect::Altq`] for pipes).
    pub dialect: Dialect,
    /// Flags of the `altq on` line (none for other dialects).
    pub root_flags: RootFlags,
}

impl IfaceQueueing {
    /// The rate the interface is shaped at: its bandwidth, or less when
    /// every root queue is capped lower (`max` on a 5.5+ root).
    pub fn shaped_rate(&self) -> Rate {
        let caps = self
            .queues
            .iter()
            .filter(|q| q.parent.is_none())
            .map(|q| q.upperlimit.map_or(self.bandwidth, |c| c.m2));
        caps.max().unwrap_or(self.bandwidth).min(self.link_rate())
    }

    /// The rate the tree is served at: the interface's bandwidth, or the
    /// altq line's `upperlimit` below it (pfctl's root class caps the
    /// tree; children's percentages still resolve against the bandwidth).
    pub fn link_rate(&self) -> Rate {
        self.root_flags
            .upperlimit
            .map_or(self.bandwidth, |c| c.m2.min(self.bandwidth))
    }
}

/// A queue (ALTQ class, 5.5+ queue, or dummynet queue under a pipe).
#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    pub name: String,
    pub parent: Option<usize>,
    /// Absolute bandwidth (percentages resolved against the parent). For
    /// HFSC, `linkshare` defaults to this when not given (as pfctl does).
    pub bandwidth: Option<Rate>,
    /// PRIQ 0..15 (unique per interface), CBQ/HFSC 0..7; pfctl's default 1.
    /// OpenBSD 5.5+ and dummynet queues carry the default 1 (unused there).
    pub priority: u8,
    /// Packets; pf's default is 50.
    pub qlimit: u32,
    /// Optional byte limit (sluice extension `qlimit 64KB` style is not pf; kept
    /// for dummynet `queue 64KB`).
    pub qlimit_bytes: Option<u64>,
    pub default: bool,
    pub red: bool,
    pub rio: bool,
    pub ecn: bool,
    /// CBQ `borrow`.
    pub borrow: bool,
    /// HFSC curves; for OpenBSD 5.5+ `min` is realtime, `max` upperlimit and
    /// `bandwidth` linkshare.
    pub realtime: Option<ServiceCurve>,
    pub linkshare: Option<ServiceCurve>,
    pub upperlimit: Option<ServiceCurve>,
    /// OpenBSD 5.5+ `flows N`: this leaf is FQ-CoDel with N flows.
    pub flows: Option<u32>,
    /// `quantum N` bytes (FQ-CoDel / DRR).
    pub quantum: Option<u32>,
    /// dummynet weight 1..100 within its pipe.
    pub weight: Option<u32>,
    /// Index of child queues (derivable from `parent`, kept for printing order).
    pub children: Vec<usize>,
    pub line: u32,
    /// `ingress` (sluice extension, CAKE's ingress mode): the drops of this
    /// queue, or of every leaf under it, are charged to the interface's
    /// shaper as if sent. Under a pipe it is the pipe's [`Pipe::ingress`],
    /// copied to each of its queues.
    pub ingress: bool,
    /// `ack-filter` / `ack-filter-aggressive` (sluice extension, CAKE's
    /// semantics): the leaf drops queued pure ACKs a newer one makes
    /// redundant.
    pub ack_filter: Option<AckFilterMode>,
    /// `dual-srchost` / `dual-dsthost` / `triple-isolate` (sluice
    /// extension, CAKE's semantics): the leaf's flow queues are fair
    /// between hosts first, then between each host's flows. Only on a
    /// leaf with flow queues (`flows N`, or a queue of an fq_codel pipe,
    /// which copies the pipe's).
    pub isolate: Option<HostIsolation>,
    /// TCP download control (sluice extension, docs/tcp-control.md): the
    /// ACKs of TCP connections whose data uses this queue are paced (`ack-pacing`)
    /// and their advertised window clamped (`window-clamp`) to the flow's share.
    /// As written on this queue: on a queue with children it covers every
    /// leaf under it, as `ingress` does ([`IfaceQueueing::tcp_control`]
    /// resolves a leaf's). Under a pipe it is the pipe's [`Pipe::tcp`],
    /// copied to each of its queues, plus the queue's own.
    pub tcp: TcpControl,
    /// FreeBSD ALTQ's `codel` flag (`priq(codel)` & co., or `altq on IF
    /// codel`): the class's packets wait in a CoDel queue (RFC 8289).
    pub codel: Option<CodelParams>,
    /// FAIRQ `buckets N`: the class's flow buckets (a power of two,
    /// 1..=2048; ALTQ's default 256 when `None`).
    pub buckets: Option<u32>,
    /// FAIRQ `hogs BW`: a bucket below this rate is served ahead of the
    /// round (crates/sched/src/fairq.rs).
    pub hogs: Option<Rate>,
}

/// What sluice does to the TCP connections whose data uses a queue or pipe,
/// through the segments their receivers send back (docs/tcp-control.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpControl {
    /// `ack-pacing`: the receivers' pure ACKs are released at the pace that
    /// clocks each flow's data at its share of the queue's rate.
    pub ack_pacing: bool,
    /// `window-clamp`: the window the receivers advertise is lowered to what
    /// each flow needs in flight at its share (right edge never moves left).
    pub window_clamp: bool,
}

impl TcpControl {
    pub fn any(self) -> bool {
        self.ack_pacing || self.window_clamp
    }

    /// Both: what either asks for.
    pub fn union(self, other: TcpControl) -> TcpControl {
        TcpControl {
            ack_pacing: self.ack_pacing || other.ack_pacing,
            window_clamp: self.window_clamp || other.window_clamp,
        }
    }
}

impl IfaceQueueing {
    /// The TCP control of queue `i`: its own and every ancestor's (a
    /// parent's `ack-pacing` covers every leaf under it); default for an
    /// index out of range.
    pub fn tcp_control(&self, i: usize) -> TcpControl {
        let mut tcp = TcpControl::default();
        let mut at = Some(i);
        // Parents come before children: each step goes up, so at most
        // `queues.len()` steps.
        for _ in 0..=self.queues.len() {
            let Some(q) = at.and_then(|j| self.queues.get(j)) else {
                break;
            };
            tcp = tcp.union(q.tcp);
            at = q.parent.filter(|&p| Some(p) < at);
        }
        tcp
    }
}

impl Queue {
    /// pf's default qlimit in packets.
    pub const DEFAULT_QLIMIT: u32 = 50;
    /// pfctl's DEFAULT_PRIORITY.
    pub const DEFAULT_PRIORITY: u8 = 1;

    /// A queue named `name` (declared at `line`) with pf's defaults and
    /// nothing else set: the start of every queue sema builds.
    pub fn new(name: &str, line: u32) -> Queue {
        Queue {
            name: name.to_string(),
            parent: None,
            bandwidth: None,
            priority: Queue::DEFAULT_PRIORITY,
            qlimit: Queue::DEFAULT_QLIMIT,
            qlimit_bytes: None,
            default: false,
            red: false,
            rio: false,
            ecn: false,
            borrow: false,
            realtime: None,
            linkshare: None,
            upperlimit: None,
            flows: None,
            quantum: None,
            weight: None,
            children: Vec::new(),
            line,
            ingress: false,
            ack_filter: None,
            isolate: None,
            tcp: TcpControl::default(),
            codel: None,
            buckets: None,
            hogs: None,
        }
    }
}

/// A service curve: `m1` for the first `d`, then `m2` (HFSC paper §2). A linear
/// curve has `d = 0` and `m1 = m2`... written simply as `m2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceCurve {
    pub m1: Rate,
    pub d: Duration,
    pub m2: Rate,
}

impl ServiceCurve {
    pub fn linear(r: Rate) -> Self {
        ServiceCurve {
            m1: Rate::ZERO,
            d: Duration::ZERO,
            m2: r,
        }
    }
}

/// The link part of a dummynet pipe.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipe {
    pub name: String,
    pub delay: Duration,
    /// Packet loss probability in parts per million.
    pub loss_ppm: u32,
    /// Queue size in packets for FIFO-like schedulers.
    pub qlimit: u32,
    pub sched: PipeSched,
    /// `ingress`: every drop of the pipe's queues occupies its link as if
    /// the packet had been sent (see [`Queue::ingress`]).
    pub ingress: bool,
    /// `ack-filter` on the pipe: every queue of it filters ACKs.
    pub ack_filter: Option<AckFilterMode>,
    /// Host isolation on an fq_codel pipe: every queue of it isolates.
    pub isolate: Option<HostIsolation>,
    /// `ack-pacing` / `window-clamp` on the pipe: every queue of it.
    pub tcp: TcpControl,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PipeSched {
    Fifo,
    Drr,
    Wf2q,
    FqCodel(FqCodelParams),
}

/// FQ-CoDel parameters (RFC 8290 §5.1 names), with Linux/dummynet defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqCodelParams {
    pub target: Duration,
    pub interval: Duration,
    pub quantum: u32,
    /// Total packet limit across flows.
    pub limit: u32,
    pub flows: u32,
    pub ecn: bool,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            quantum: 1514,
            limit: 10_240,
            flows: 1024,
            ecn: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub name: String,
    /// Entries; `bool` is negation (`!10.0.0.1`).
    pub entries: Vec<(IpNet, bool)>,
}

/// An address with prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Pass,
    Block,
    Match,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrFamily {
    Inet,
    Inet6,
}

/// One side of `from … to …` after expansion.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Endpoint {
    pub addr: AddrMatch,
    pub negated: bool,
    pub port: Option<PortOp>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub enum AddrMatch {
    #[default]
    Any,
    Net(IpNet),
    /// `<name>`.
    Table(String),
    /// An interface name: the interface's own addresses (`$ext_if`, `egress`).
    Iface(String),
    /// `(IF:network)`-style or `IF:network`: the networks of the interface.
    IfaceNetwork(String),
    /// `self`: every address of every local interface.
    SelfAddr,
    /// `no-route`: addresses with no route in the routing table.
    NoRoute,
    /// `urpf-failed`: packets failing the unicast reverse-path check.
    UrpfFailed,
}

/// Port comparisons of pf.conf(5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortOp {
    Eq(u16),
    Ne(u16),
    Lt(u16),
    Le(u16),
    Gt(u16),
    Ge(u16),
    /// `a:b` inclusive range.
    Range(u16, u16),
    /// `a >< b`: strictly between.
    Between(u16, u16),
    /// `a <> b`: outside.
    Outside(u16, u16),
}

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;

/// pf's default `flags S/SA` of stateful pass rules: (SYN, SYN|ACK).
pub const FLAGS_S_SA: (u8, u8) = (0x02, 0x12);

/// `scrub (max-mss …)`: the largest MSS a TCP SYN or SYN-ACK of the rule's
/// connections may announce; a larger one is lowered, a smaller one kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxMss {
    /// This many bytes ([`MAX_MSS_MIN`]..=65535).
    Bytes(u16),
    /// Per interface: the largest segment whose frame, with the interface's
    /// link overhead, takes at most ~20 ms at its shaped rate (sluice's
    /// extension; computed by the engine).
    Auto,
}

/// The least `max-mss`: RFC 9293's default MSS for IPv4 (an IPv6 SYN is
/// never lowered below 1220, its own default).
pub const MAX_MSS_MIN: u16 = 536;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatePolicy {
    Keep,
    No,
    /// `modulate state` / `synproxy state`: treated as keep.
    Modulate,
}

/// One filter rule after expansion.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub action: Action,
    pub direction: Option<Direction>,
    pub quick: bool,
    pub log: bool,
    /// `on IF` / `on !IF`.
    pub iface: Option<(String, bool)>,
    pub af: Option<AddrFamily>,
    pub proto: Option<u8>,
    pub from: Endpoint,
    pub to: Endpoint,
    /// `flags X/Y`: (set, mask), bits F=0x01 S=0x02 R=0x04 P=0x08 A=0x10
    /// U=0x20 E=0x40 W=0x80; tested on TCP packets only. None for `flags
    /// any`, or when not written on a rule that is not a stateful pass. A
    /// stateful `pass` rule that can match TCP and does not say carries pf's
    /// default [`FLAGS_S_SA`] (written out by the printer).
    pub flags: Option<(u8, u8)>,
    pub tos: Option<u8>,
    /// `icmp-type T [code C]` / `icmp6-type …`: ICMP (or ICMPv6, by `proto`)
    /// type and optional code.
    pub icmp_type: Option<(u8, Option<u8>)>,
    /// pf's default for pass rules is keep state (OpenBSD 4.1+); always
    /// `No` on block and match rules.
    pub state: StatePolicy,
    /// `queue q` or `queue (q, q_pri)` (also `set queue …`). Names exist on
    /// at least one interface and are leaves; resolved on the egress interface.
    pub queue: Option<(String, Option<String>)>,
    /// `set prio p` or `(p, p_pri)`.
    pub prio: Option<(u8, Option<u8>)>,
    /// `scrub (max-mss N|auto)` (also the bare `max-mss N`).
    pub max_mss: Option<MaxMss>,
    /// State options acted on (`keep state ( … )`); the others draw a
    /// warning from `sluice check`.
    pub state_opts: StateOpts,
    /// Source line, for `sluice show rules`.
    pub line: u32,
}

/// Which states of an overloading source `overload … flush` removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// None (no `flush`).
    No,
    /// Those created by the rule (`flush`).
    Rule,
    /// All of them (`flush global`).
    Global,
}

/// The state options of a rule that sluice acts on (pf.conf(5) "STATEFUL
/// TRACKING OPTIONS").
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StateOpts {
    /// `max N`: states this rule may have at once.
    pub max: Option<u32>,
    /// `max-src-states N`: states this rule may have per source address.
    pub max_src_states: Option<u32>,
    /// `max-src-nodes N`: source addresses this rule may have states from.
    pub max_src_nodes: Option<u32>,
    /// `max-src-conn N`: TCP connections past the handshake this rule may
    /// have per source address.
    pub max_src_conn: Option<u32>,
    /// `max-src-conn-rate N/S`: at most N such connections per source in
    /// any S seconds (pf's decaying count).
    pub max_src_conn_rate: Option<(u32, u32)>,
    /// `overload <table> [flush [global]]`: a source over `max-src-conn`
    /// or `max-src-conn-rate` is added to the table.
    pub overload: Option<(String, Flush)>,
    /// Per-rule timeouts (`tcp.established 600`, …), overriding `set timeout`.
    pub timeouts: Vec<(TimeoutKind, Duration)>,
    /// `sloppy`: its TCP states skip the sequence-window check (pf's
    /// meaning, for asymmetric paths).
    pub sloppy: bool,
}

/// How a queue's ACK filter decides (tc-cake(8) `ack-filter` and
/// `ack-filter-aggressive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckFilterMode {
    /// Drop a redundant queued ACK only when two or more are queued.
    Conservative,
    /// Drop one as soon as one is queued.
    Aggressive,
}

/// Which hosts a flow queue is fair between before their flows (CAKE's
/// `dual-srchost`, `dual-dsthost`, `triple-isolate`; docs/host-isolation.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostIsolation {
    /// Source addresses: a LAN's hosts, on the upload.
    SrcHost,
    /// Destination addresses: a LAN's hosts, on the download.
    DstHost,
    /// Both ends at once.
    Both,
}

impl HostIsolation {
    /// The keyword, as written and printed.
    pub fn name(self) -> &'static str {
        match self {
            HostIsolation::SrcHost => "dual-srchost",
            HostIsolation::DstHost => "dual-dsthost",
            HostIsolation::Both => "triple-isolate",
        }
    }

    pub fn from_word(w: &str) -> Option<HostIsolation> {
        [
            HostIsolation::SrcHost,
            HostIsolation::DstHost,
            HostIsolation::Both,
        ]
        .into_iter()
        .find(|m| m.name() == w)
    }
}

impl AckFilterMode {
    /// The keyword, as written and printed.
    pub fn name(self) -> &'static str {
        match self {
            AckFilterMode::Conservative => "ack-filter",
            AckFilterMode::Aggressive => "ack-filter-aggressive",
        }
    }

    pub fn from_word(w: &str) -> Option<AckFilterMode> {
        [AckFilterMode::Conservative, AckFilterMode::Aggressive]
            .into_iter()
            .find(|m| m.name() == w)
    }
}

/// CoDel on an ALTQ class, as FreeBSD's altq_codel(4) sets it up: `target`
/// and `interval` default to 5 ms and 100 ms (`codel_alloc(5, 100, …)`);
/// only `altq on IF codel(…)` can change them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    pub target: Duration,
    pub interval: Duration,
    /// `ecn`: mark ECT packets CE instead of dropping them (FreeBSD parses
    /// the word and still drops; sluice marks, as RFC 8289 §4.2 allows).
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: false,
        }
    }
}

impl CodelParams {
    /// The name `altq on IF codel` gives its one implicit queue.
    pub const ROOT_QUEUE: &'static str = "codel";
}
