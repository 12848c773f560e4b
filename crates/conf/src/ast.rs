//! The syntax tree: what the user wrote, with spans, before any checking.
//! Lists are kept as lists here; `sema` expands them into IR rules.

use crate::diag::Span;
use crate::ir::{
    Action, AddrFamily, AddrMatch, Direction, PipeSched, PortOp, SchedKind, StatePolicy,
    TimeoutKind,
};
use crate::units::Bw;
use sluice_time::{Duration, Overhead};
use std::net::IpAddr;

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Sp<T> {
    pub v: T,
    pub span: Span,
}

impl<T> Sp<T> {
    pub fn new(v: T, span: Span) -> Sp<T> {
        Sp { v, span }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Altq(AltqDecl),
    Queue(Box<QueueDecl>),
    Pipe(PipeDecl),
    Overhead(Sp<String>, Overhead),
    /// `set limit …`: the states limit, if given, and the other limits.
    Limit {
        states: Option<Sp<u64>>,
        ignored: Vec<Sp<String>>,
    },
    /// `set timeout …`: each name and its value in seconds.
    Timeouts(Vec<(Sp<TimeoutName>, Sp<u64>)>),
    Table(TableDecl),
    Rule(Box<RuleAst>),
    /// A statement or option sluice accepts and does not act on (`scrub`,
    /// `nat`, `set skip`, …): what to name in the warning, and where.
    Ignored(Vec<Sp<String>>),
}

/// A name of `set timeout` (pf.conf(5) "OPTIONS").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutName {
    State(TimeoutKind),
    Interval,
    AdaptiveStart,
    AdaptiveEnd,
    /// `frag`, `src.track`: timeouts of pf machinery sluice does not have.
    Other(&'static str),
}

/// `keep state ( … )` as written.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StateOptsAst {
    pub max: Option<Sp<u64>>,
    pub max_src_states: Option<Sp<u64>>,
    pub max_src_nodes: Option<Sp<u64>>,
    pub max_src_conn: Option<Sp<u64>>,
    pub max_src_conn_rate: Option<Sp<(u32, u32)>>,
    pub overload: Option<Sp<(String, crate::ir::Flush)>>,
    pub timeouts: Vec<(Sp<TimeoutName>, Sp<u64>)>,
    pub sloppy: bool,
    /// Options parsed and not acted on (warned about).
    pub ignored: Vec<Sp<String>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AltqDecl {
    pub iface: Sp<String>,
    pub sched: Option<Sp<SchedKind>>,
    pub bandwidth: Option<Sp<Bw>>,
    pub qlimit: Option<Sp<u64>>,
    pub tbrsize: Option<Sp<u64>>,
    pub children: Vec<Sp<String>>,
    pub span: Span,
    /// `codel` / `codelq` (FreeBSD ALTQ) as the scheduler, with its options.
    pub codel: Option<Sp<crate::ir::CodelParams>>,
    /// `autorate (…)`, where written.
    pub autorate: Option<AutorateAst>,
    /// `altq on { IF1 IF2 … }`: the interfaces after the first.
    pub on_more: Vec<Sp<String>>,
    /// `altq on IF cbq(red ecn) …`: the scheduler's flags on the altq line.
    pub root_flags: Option<Sp<crate::ir::RootFlags>>,
    /// `altq on IF hfsc(upperlimit X) …`: the root class's cap.
    pub upperlimit: Option<Sp<CurveAst>>,
}

/// `autorate [(min BW, max BW, dry-run, probe ADDR, reconfig …)]` as
/// written (issue #16).
#[derive(Clone, Debug, PartialEq)]
pub struct AutorateAst {
    pub min: Option<Sp<Bw>>,
    pub max: Option<Sp<Bw>>,
    pub dry_run: bool,
    /// `probe ADDR`: an address literal; its class (loopback, multicast…)
    /// is checked in sema.
    pub probe: Option<Sp<IpAddr>>,
    /// `reconfig starlink` or `reconfig (every P, at A, lead L, hold H)`.
    pub reconfig: Option<ReconfigAst>,
    pub span: Span,
}

/// `reconfig …` as written. The parser has checked each value's range and
/// that `every` and `at` are there (`reconfig starlink` fills them from
/// [`crate::ir::Reconfig::STARLINK`], at the word's span); how they relate
/// (`at < every`, `lead + hold < every`) is sema's, which also puts in the
/// defaults of `lead` and `hold`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconfigAst {
    pub every: Sp<Duration>,
    pub at: Sp<Duration>,
    pub lead: Option<Sp<Duration>>,
    pub hold: Option<Sp<Duration>>,
    /// From `reconfig` to its `)` or `starlink`.
    pub span: Span,
}

/// The hint of every error about an autorate `probe` address, from the
/// parser (not an address) and from sema (loopback, multicast…): one
/// example, so both say the same thing.
pub const PROBE_HINT: &str =
    "e.g. `autorate (min 5M, max 40M, probe 192.0.2.1)`: the modem or the ISP's first hop";

/// A service curve as written: `BW` or `(m1 d m2)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurveAst {
    pub m1: Option<Bw>,
    pub d: Duration,
    pub m2: Bw,
}

/// Every form of `queue`: ALTQ, OpenBSD 5.5+, and dummynet (`pipe P`).
/// Which one it is gets decided in `sema` from the keywords present.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct QueueDecl {
    pub name: Sp<String>,
    pub on: Option<Sp<String>>,
    pub bandwidth: Option<Sp<CurveAst>>,
    pub min: Option<Sp<CurveAst>>,
    pub max: Option<Sp<CurveAst>>,
    pub priority: Option<Sp<u64>>,
    pub qlimit: Option<Sp<u64>>,
    /// `priq(…)`, `cbq(…)`, `hfsc(…)` as written.
    pub sched: Option<Sp<SchedKind>>,
    pub default: Option<Span>,
    pub red: bool,
    pub rio: bool,
    pub ecn: bool,
    pub borrow: bool,
    pub realtime: Option<Sp<CurveAst>>,
    pub linkshare: Option<Sp<CurveAst>>,
    pub upperlimit: Option<Sp<CurveAst>>,
    pub children: Vec<Sp<String>>,
    pub parent: Option<Sp<String>>,
    pub flows: Option<Sp<u64>>,
    pub quantum: Option<Sp<u64>>,
    pub pipe: Option<Sp<String>>,
    pub weight: Option<Sp<u64>>,
    /// First keyword only OpenBSD 5.5+ has (parent, min, max, burst, flows, quantum, bare `default`).
    pub new_style: Option<Sp<&'static str>>,
    /// First keyword only ALTQ has (priority, `priq(…)`/`cbq(…)`/`hfsc(…)`, `{ children }`).
    pub old_style: Option<Sp<&'static str>>,
    pub span: Span,
    /// `ingress` (bare, or among ALTQ's scheduler options), where written.
    pub ingress: Option<Span>,
    /// `ack-filter[-aggressive]`, bare (5.5+, dummynet) or in `priq(…)` & co.
    pub ack_filter: Option<Sp<crate::ir::AckFilterMode>>,
    /// `dual-srchost`, `dual-dsthost` or `triple-isolate`, bare.
    pub isolate: Option<Sp<crate::ir::HostIsolation>>,
    /// `ack-pacing` (bare, or among ALTQ's scheduler options), where written.
    pub ack_pacing: Option<Span>,
    /// `window-clamp`, written as `ack-pacing` is.
    pub window_clamp: Option<Span>,
    /// Written `oldqueue` (OpenBSD 5.5's name for an ALTQ queue): where.
    pub oldqueue: Option<Span>,
    /// `codel` among ALTQ's scheduler options (FreeBSD), where.
    pub codel: Option<Span>,
    /// `on { IF1 IF2 … }` (or a macro holding the list): every interface
    /// after the first, which is in `on`. `sema` builds one tree per interface.
    pub on_more: Vec<Sp<String>>,
    /// `fairq(buckets N)`.
    pub buckets: Option<Sp<u64>>,
    /// `fairq(hogs BW)`.
    pub hogs: Option<Sp<Bw>>,
    /// `cbq( wrr root )`: the flags `pfctl -nv` prints on the root class
    /// it makes (`queue root_IF …`); only that line may carry them.
    pub pfctl_root: Option<Sp<String>>,
    /// `autorate (…)`, where written.
    pub autorate: Option<AutorateAst>,
}

impl Default for Sp<String> {
    fn default() -> Self {
        Sp::new(String::new(), Span::default())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PipeDecl {
    pub name: Sp<String>,
    pub iface: Option<Sp<String>>,
    pub bandwidth: Option<Sp<Bw>>,
    pub delay: Duration,
    pub loss_ppm: u32,
    pub qlimit: Option<Sp<u64>>,
    pub sched: PipeSched,
    pub span: Span,
    /// `ingress`, where written.
    pub ingress: Option<Span>,
    pub ack_filter: Option<Sp<crate::ir::AckFilterMode>>,
    pub isolate: Option<Sp<crate::ir::HostIsolation>>,
    /// `ack-pacing` and `window-clamp`, where written.
    pub ack_pacing: Option<Span>,
    pub window_clamp: Option<Span>,
    /// `autorate (…)`, where written.
    pub autorate: Option<AutorateAst>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableDecl {
    pub name: Sp<String>,
    pub entries: Vec<(crate::ir::IpNet, bool)>,
    /// Options parsed and not acted on (`counters`).
    pub ignored: Vec<Sp<String>>,
    /// `file "path"`: where `file` was written, and the path.
    pub files: Vec<(Span, Sp<String>)>,
}

/// One address element of `from`/`to`.
#[derive(Clone, Debug, PartialEq)]
pub struct HostAst {
    pub addr: AddrMatch,
    pub negated: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RuleAst {
    pub action: Action,
    pub span: Span,
    pub direction: Option<Direction>,
    pub quick: bool,
    pub log: bool,
    /// Empty: any interface. `(name, negated)`.
    pub ifaces: Vec<Sp<(String, bool)>>,
    pub af: Option<AddrFamily>,
    pub protos: Vec<Sp<u8>>,
    pub from_hosts: Vec<Sp<HostAst>>,
    pub from_ports: Vec<Sp<PortOp>>,
    pub to_hosts: Vec<Sp<HostAst>>,
    pub to_ports: Vec<Sp<PortOp>>,
    pub flags: Option<Sp<Option<(u8, u8)>>>,
    pub tos: Option<u8>,
    pub state: Option<StatePolicy>,
    pub queue: Option<(Sp<String>, Option<Sp<String>>)>,
    pub prio: Option<(u8, Option<u8>)>,
    /// `scrub (max-mss …)` or the bare `max-mss …`.
    pub max_mss: Option<Sp<crate::ir::MaxMss>>,
    /// `icmp-type` / `icmp6-type` items: (type, code).
    pub icmp_types: Vec<Sp<(u8, Option<u8>)>>,
    /// The first match criterion sluice cannot evaluate (`user`, `tagged`,
    /// `icmp-type` …). Such a rule is left out: dropping the criterion would
    /// widen it, and a widened `block` blocks what pf never blocked.
    pub unsupported: Option<Sp<String>>,
    /// `keep state ( … )`.
    pub state_opts: StateOptsAst,
    /// Options parsed and not acted on (`label`, `route-to`, `log`, …).
    pub ignored: Vec<Sp<String>>,
    /// `block drop`: this rule drops whatever `set block-policy` says.
    pub drop: bool,
}

/// In a `Stmt::Ignored`, the entry `set block-policy return` adds (at its
/// value): plain `block` rules then answer as `block return` does in pf.
pub const BLOCK_POLICY_RETURN: &str = "set block-policy return";
