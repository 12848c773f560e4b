//! pf-style classification: rules, tables, the state table, queue selection.
//!
//! Owns: rule evaluation (last match wins, `quick`, `match` rules), address
//! tables, interface addresses, the bounded keyed-hash state table with pf's
//! TCP/UDP/ICMP tracking and timeouts, and the choice between the two queues
//! (or priorities) of a pair. Depends on `sluice-time`, `sluice-conf` (IR
//! types only), `sluice-wire` (the parsed [`IpInfo`]) and `siphasher`.
//!
//! # Principles
//!
//! - **Sans-IO.** Time is an argument; the hash key is supplied by the caller.
//!   No clock, no syscall, no thread, no `unsafe`.
//! - **pf semantics** (pf.conf(5) "PACKET FILTERING", "STATEFUL FILTERING",
//!   "QUEUEING"; DESIGN.md §4):
//!   - Rules are evaluated in order; the last matching `pass`/`block` wins; a
//!     matching `quick` rule (of any action) ends evaluation. `match` rules
//!     contribute `queue`/`prio`; the winning rule overrides only what it sets.
//!     No matching pass/block rule: pass without state.
//!   - `pass` with keep state (the IR default) creates a state; the IR gives
//!     such rules pf's `flags S/SA` unless they say otherwise, and flags are
//!     tested on TCP only, so only a SYN creates a TCP state — or a segment
//!     of a connection that has a state at the other half of the double
//!     evaluation (below): the SYN-ACK leaving a bridge's LAN side creates
//!     the download half of a connection whose SYN created the upload half.
//!     Such a half starts from the other half's protocol state, so it is
//!     established when the connection is. Every packet
//!     first looks for a state and, if one matches, skips the rules and takes
//!     the state's queue pair and priority. A state created at direction D for
//!     A→B matches A→B at D and B→A at the other direction; states float (not
//!     bound to an interface). A router evaluates each forwarded packet twice
//!     (`In` on ingress, `Out` on egress); each half finds its own state.
//!   - A TCP segment that matches a state passes only inside the sequence
//!     window its peer offered (pf's `keep state` window tracking,
//!     `window.rs`); outside it is blocked with [`BlockReason::BadState`]
//!     and counted, the state untouched. `keep state (sloppy)` states skip
//!     the check. A SYN on a connection that is not closed never resets it.
//!   - Queue pair `(q, q_pri)`: `q_pri` for packets with the lowdelay ToS bit
//!     (0x10) and for TCP packets with ACK and no payload; `q` otherwise. The
//!     same for `set prio (a, b)`.
//! - **Bounded.** The state table never exceeds its limit (a packet that would
//!   create one more evicts an unanswered state found by a bounded scan, or
//!   is blocked with [`BlockReason::StateLimit`]; `state.rs`); learned
//!   interface addresses are capped and expire; `expire` does at most `budget` work;
//!   per packet, work is one hash lookup plus at most one pass over the rules.
//! - **Expired never matches**, whether or not `expire` has removed it yet.
//! - Later IP fragments (no ports) neither create nor match states; they are
//!   classified by the rules alone (pf would reassemble them first).

#![forbid(unsafe_code)]

mod addr;
mod hash;
mod matched;
mod reload;
pub mod rtt;
mod rules;
mod state;
mod track;
mod window;

pub use addr::{
    Learn, LearnedAddr, Mac, LEARNED_ADDR_HOLD, LEARNED_ADDR_TTL, MAX_ADDRS_PER_MAC,
    MAX_LEARNED_ADDRS,
};
pub use rtt::{RttEstimate, RttTracker, TcpSeg};
pub use state::{TableCounters, RECLAIM_SCAN_SLOTS};
pub use track::{ProtoState, PseudoPeer, TcpPeer, TimeoutKind, Timeouts};
pub use window::{PeerWindow, MAX_ACK_WINDOW};

use addr::{AddrTable, Iface};
use hash::KeyedSip;
use matched::{Matched, PktFacts};
use rules::{CRule, MatchCtx, Resolve};
use sluice_conf::ir::{self, Action, Direction, IpNet, MaxMss};
use sluice_time::{Duration, Histogram, Instant};
use sluice_wire::{tcp_flags, IpInfo, L4};
use state::{state_ports, State, StateKey, StateTable};
use std::net::IpAddr;

/// Sources `overload` may add to tables in all: one host entry each, so a
/// stream of offending sources cannot grow memory without bound (pf's
/// `set limit table-entries` plays this part).
pub const MAX_OVERLOADED: usize = 65_536;

/// ToS "lowdelay" (RFC 1349 §4): such packets take the second queue of a pair.
pub const IPTOS_LOWDELAY: u8 = 0x10;

/// An interned interface name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfaceId(pub u32);

/// An interned queue name; the engine resolves it per egress interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(pub u32);

/// Construction options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Secret key of the state-table hash and `flow_hash`. The caller must
    /// fill it with random bytes; an all-zero key works but is guessable.
    pub hash_key: [u8; 16],
    /// Overrides the config's `set limit states`.
    pub state_limit: Option<u32>,
    /// Overrides the config's `set timeout` values (also across reloads).
    pub timeouts: Option<Timeouts>,
}

/// Why a packet is blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockReason {
    /// A `block` rule won.
    Rule,
    /// A `pass … keep state` rule won but the state table is full, or the
    /// rule's `max`, `max-src-states`, `max-src-nodes`, `max-src-conn` or
    /// `max-src-conn-rate` is reached.
    StateLimit,
    /// A TCP segment of a tracked connection outside the sequence window
    /// its peer offered (pf's "bad state", `state-mismatch`; `window.rs`).
    BadState,
}

/// How the packet related to the state table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateHit {
    None,
    Created,
    Matched,
}

/// Pass or block: one value, so "passed, blocked by a rule" cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Block(BlockReason),
}

impl Verdict {
    pub fn is_pass(self) -> bool {
        self == Verdict::Pass
    }
}

/// The decision for one packet: the verdict and, for a pass, where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// The queue chosen from the pair (None: the interface's default queue).
    pub queue: Option<QueueName>,
    /// The priority chosen from `set prio` (None: unchanged).
    pub prio: Option<u8>,
    /// `scrub (max-mss …)` from the rules (or the state they made): the
    /// largest MSS a SYN may announce.
    pub max_mss: Option<MaxMss>,
    /// Index in `Config::rules` of the deciding rule (for a state match: the
    /// rule that created the state); None for pf's implicit pass.
    pub rule: Option<u32>,
    pub state: StateHit,
    /// Keyed hash of the directional 5-tuple, or of (src, dst, proto).
    pub flow_hash: u64,
    /// The connection's least round trip end to end as sluice sees it: the
    /// sum of the least of each half (sluice to this packet's destination
    /// and back, and the same toward its source; the state's passive RTT,
    /// [`rtt`]). `None` until both halves have a sample, and for packets
    /// without a state. (One half alone is not a round trip: toward a LAN
    /// host it is a fraction of a millisecond.)
    pub rtt_path: Option<Duration>,
    /// The passive RTT sample this packet completed, if any: sluice → the
    /// packet's sender → sluice (the path it came from), as measured now
    /// (not the minimum). The engine's delay signal reads it.
    pub rtt_sample: Option<Duration>,
}

/// What `match` rules set on the way to the deciding rule (pf: their
/// options stick unless a later matching rule sets its own).
#[derive(Clone, Copy, Default)]
struct Sticky {
    queue: Option<(QueueName, Option<QueueName>)>,
    prio: Option<(u8, Option<u8>)>,
    max_mss: Option<MaxMss>,
}

/// Per-rule counters (`pfctl -vsr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleStats {
    /// Source line of the rule.
    pub line: u32,
    /// Packets the rule was evaluated against.
    pub evaluations: u64,
    /// Evaluations whose criteria all matched.
    pub matches: u64,
    /// Packets decided by this rule or by its states.
    pub packets: u64,
    /// IP bytes of those packets.
    pub bytes: u64,
    pub states_created: u64,
    /// SYNs of its connections whose MSS `scrub (max-mss …)` lowered.
    pub mss_clamped: u64,
}

/// Classifier-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifierStats {
    pub states: usize,
    pub state_limit: usize,
    pub inserts: u64,
    pub removals: u64,
    /// Removals of expired states (part of `removals`).
    pub expired: u64,
    pub state_limit_hits: u64,
    pub lookups: u64,
    pub hits: u64,
    /// Embryonic states evicted to admit new ones into a full table.
    pub states_evicted: u64,
    /// States refused by a rule's `max` or `max-src-states` (not part of
    /// `state_limit_hits`, which counts the table's limit).
    pub rule_limit_hits: u64,
    /// Sources that exceeded a rule's connection limits with `overload`.
    pub overloads: u64,
    /// TCP segments blocked outside their state's sequence window (pf's
    /// `state-mismatch`).
    pub bad_state: u64,
}

/// A read-only view of one state, for `sluice show states`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateView<'a> {
    pub proto: u8,
    /// Initiator address and port (ICMP: echo id; others: 0).
    pub src: (IpAddr, u16),
    /// Responder.
    pub dst: (IpAddr, u16),
    /// Direction at which the initiator's packets are evaluated.
    pub direction: Direction,
    pub proto_state: ProtoState,
    pub queue: Option<&'a str>,
    pub queue_pri: Option<&'a str>,
    pub prio: Option<(u8, Option<u8>)>,
    pub rule: u32,
    /// [initiator→responder, responder→initiator].
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub created: Instant,
    pub last: Instant,
    /// The state no longer matches at or after this instant.
    pub expires: Instant,
    /// Passive RTT from sluice to [the responder, the initiator] and back
    /// (TCP; zero samples when nothing could be timed).
    pub rtt: [RttEstimate; 2],
    /// Sequence windows of [the initiator, the responder] (TCP without
    /// `sloppy`).
    pub windows: Option<[PeerWindow; 2]>,
}

/// The classifier built from a configuration.
pub struct Classifier {
    rules: Vec<CRule>,
    rule_stats: Vec<RuleStats>,
    tables: Vec<AddrTable>,
    table_names: Vec<String>,
    ifaces: Vec<Iface>,
    queues: Vec<String>,
    table: StateTable,
    hasher: KeyedSip,
    timeouts: Timeouts,
    /// `Options::timeouts` was given: reloads keep it.
    timeouts_fixed: bool,
    /// Packets refused a state by a rule's `max` / `max-src-states`.
    per_rule_limit_hits: u64,
    /// Sources added to tables by `overload`, by table name (bounded by
    /// [`MAX_OVERLOADED`]); re-added after a reload rebuilds the tables.
    overloaded: Vec<(String, IpAddr)>,
    /// `overload` events.
    overloads: u64,
    /// The state table's rule-set generation (states of older ones do not
    /// take their rule's own timeouts).
    table_gen: u32,
    lookups: u64,
    hits: u64,
    /// Segments blocked outside their state's window.
    bad_state: u64,
    /// Passive RTT samples taken at direction Out, toward [the responder,
    /// the initiator] (see [`Classifier::classify_seg`]).
    rtt_hist: [Histogram; 2],
}

impl Resolve for Classifier {
    fn iface_id(&mut self, name: &str) -> IfaceId {
        self.iface(name)
    }
    fn queue_id(&mut self, name: &str) -> QueueName {
        self.intern_queue(name)
    }
    fn table_id(&mut self, name: &str) -> usize {
        if let Some(i) = self.table_names.iter().position(|t| t == name) {
            return i;
        }
        self.table_names.push(name.to_string());
        self.tables.push(AddrTable::default());
        self.tables.len() - 1
    }
}

/// The first or second member of a pair.
fn pick<T: Copy>(pair: Option<(T, Option<T>)>, second: bool) -> Option<T> {
    pair.map(|(a, b)| if second { b.unwrap_or(a) } else { a })
}

impl Classifier {
    pub fn new(cfg: &ir::Config, opts: Options) -> Classifier {
        let hasher = KeyedSip::new(&opts.hash_key);
        let limit = opts.state_limit.unwrap_or(cfg.options.state_limit);
        let mut c = Classifier {
            rules: Vec::new(),
            rule_stats: Vec::new(),
            tables: Vec::new(),
            table_names: Vec::new(),
            ifaces: Vec::new(),
            queues: Vec::new(),
            table: StateTable::new(limit, hasher),
            hasher,
            timeouts: opts.timeouts.unwrap_or(cfg.options.timeouts),
            timeouts_fixed: opts.timeouts.is_some(),
            table_gen: 0,
            per_rule_limit_hits: 0,
            overloaded: Vec::new(),
            overloads: 0,
            lookups: 0,
            hits: 0,
            bad_state: 0,
            rtt_hist: [Histogram::new(), Histogram::new()],
        };
        // A fresh classifier is an empty one that loaded `cfg`: one path
        // interns names and compiles rules, at start and on reload.
        c.reload_rules(cfg);
        c
    }

    /// Intern an interface name.
    pub fn iface(&mut self, name: &str) -> IfaceId {
        if let Some(i) = self.ifaces.iter().position(|i| i.name == name) {
            return IfaceId(i as u32);
        }
        self.ifaces.push(Iface::new(name));
        IfaceId((self.ifaces.len() - 1) as u32)
    }

    /// The name of an interned interface.
    pub fn iface_name(&self, ifc: IfaceId) -> &str {
        self.ifaces
            .get(ifc.0 as usize)
            .map_or("", |i| i.name.as_str())
    }

    fn intern_queue(&mut self, name: &str) -> QueueName {
        if let Some(i) = self.queues.iter().position(|q| q == name) {
            return QueueName(i as u32);
        }
        self.queues.push(name.to_string());
        QueueName((self.queues.len() - 1) as u32)
    }

    /// Set what `IF` (its addresses) and `IF:network` (its networks) mean.
    pub fn set_iface_addrs(&mut self, ifc: IfaceId, nets: &[IpNet]) {
        if let Some(i) = self.ifaces.get_mut(ifc.0 as usize) {
            i.set_addrs(nets);
        }
    }

    /// Bridge mode: add or confirm an address `ifc` is known by, claimed
    /// from source MAC `mac` at `now` (see the learned set's principles in
    /// `addr.rs`). `None`: no such interface.
    pub fn learn_iface_addr(
        &mut self,
        ifc: IfaceId,
        addr: IpAddr,
        mac: Mac,
        now: Instant,
    ) -> Option<Learn> {
        self.ifaces
            .get_mut(ifc.0 as usize)
            .map(|i| i.learn(addr, mac, now))
    }

    /// Bridge mode: traffic from `addr` keeps it alive if it is learned
    /// already; never learns it.
    pub fn refresh_iface_addr(&mut self, ifc: IfaceId, addr: IpAddr, now: Instant) {
        if let Some(i) = self.ifaces.get_mut(ifc.0 as usize) {
            i.refresh(addr, now);
        }
    }

    /// Forgets learned addresses not seen for [`LEARNED_ADDR_TTL`]; returns
    /// how many. At most [`MAX_LEARNED_ADDRS`] entries per interface.
    pub fn expire_iface_addrs(&mut self, now: Instant) -> usize {
        self.ifaces.iter_mut().map(|i| i.expire(now)).sum()
    }

    /// What [`Classifier::set_iface_addrs`] gave `ifc`.
    pub fn configured_iface_addrs(&self, ifc: IfaceId) -> Vec<IpNet> {
        self.ifaces
            .get(ifc.0 as usize)
            .map_or(Vec::new(), Iface::configured)
    }

    /// The addresses learned for `ifc`, in address order, and how many
    /// newcomers were refused because the set was held full.
    pub fn learned_iface_addrs(&self, ifc: IfaceId) -> (Vec<LearnedAddr>, u64) {
        self.ifaces
            .get(ifc.0 as usize)
            .map_or((Vec::new(), 0), |i| (i.learned().collect(), i.refused))
    }

    /// The flow hash ([`Decision::flow_hash`]) of the other direction of
    /// `pkt`'s connection: what its peer's packets carry.
    pub fn reverse_flow_hash(&self, pkt: &sluice_wire::IpInfo) -> u64 {
        let ports = pkt.ports().map(|(a, b)| (b, a));
        hash::flow_hash(&self.hasher, pkt.dst, pkt.src, pkt.proto, ports)
    }

    /// Keyed hash of a host's address, for host isolation (the same secret
    /// key as `flow_hash`: a sender cannot choose whom it collides with).
    pub fn host_hash(&self, addr: IpAddr) -> u64 {
        hash::host_hash(&self.hasher, addr)
    }

    pub fn queue_name(&self, q: QueueName) -> &str {
        self.queues.get(q.0 as usize).map_or("", String::as_str)
    }

    pub fn queue_lookup(&self, name: &str) -> Option<QueueName> {
        self.queues
            .iter()
            .position(|q| q == name)
            .map(|i| QueueName(i as u32))
    }

    /// Every interned queue name (from the queue trees and the rules).
    pub fn queue_names(&self) -> impl Iterator<Item = (QueueName, &str)> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| (QueueName(i as u32), q.as_str()))
    }

    /// Classify one packet seen on `ifc` at direction `dir`.
    pub fn classify(
        &mut self,
        now: Instant,
        ifc: IfaceId,
        dir: Direction,
        pkt: &IpInfo,
    ) -> Decision {
        self.classify_seg(now, ifc, dir, pkt, None)
    }

    /// [`Classifier::classify`], with the TCP segment's sequence numbers
    /// and timestamps for the state's passive RTT ([`rtt`]). Samples of
    /// states whose initiator's packets are evaluated Out (one half of a
    /// bridged connection: the other sees the same packets) go to
    /// [`Classifier::rtt_histograms`].
    pub fn classify_seg(
        &mut self,
        now: Instant,
        ifc: IfaceId,
        dir: Direction,
        pkt: &IpInfo,
        seg: Option<&TcpSeg>,
    ) -> Decision {
        let flow_hash = hash::flow_hash(&self.hasher, pkt.src, pkt.dst, pkt.proto, pkt.ports());
        let flags = match pkt.l4 {
            L4::Tcp { flags, .. } => flags,
            _ => 0,
        };
        let second = pkt.tos & IPTOS_LOWDELAY != 0
            || matches!(pkt.l4, L4::Tcp { flags, payload_len: 0, .. } if flags & tcp_flags::ACK != 0);
        let bytes = u64::from(pkt.ip_len);
        let key = state_ports(pkt).map(|(sp, dp)| {
            StateKey::of(
                pkt.proto,
                (pkt.src, sp),
                (pkt.dst, dp),
                dir == Direction::Out,
            )
        });

        if let Some((key, lo_to_hi)) = key {
            self.lookups += 1;
            let p = PktFacts {
                flags,
                second,
                bytes,
                flow_hash,
            };
            match self.match_state(now, &key, lo_to_hi, seg, p) {
                Matched::Decided(d) => return d,
                // A new connection on a finished 4-tuple: drop the old
                // state, evaluate rules.
                Matched::Reuse => {
                    self.table.remove(&key);
                }
                Matched::NoState => {}
            }
        }
        // The other half of a doubly evaluated connection sluice already
        // tracks: (its protocol state seen from this packet's sender, its
        // timeout kind).
        let other_half = key.and_then(|(key, lo_to_hi)| {
            let o = self.table.peek(&key.other_half(), now)?;
            let side = o.side(lo_to_hi);
            Some((
                (o.proto.mirrored(side), o.timeout),
                o.win.map(|w| w.mirrored(side)),
            ))
        });

        let (winner, sticky) = self.evaluate(ifc, dir, pkt, other_half.is_some());
        let (other_half, other_win) = other_half.unzip();
        let Sticky {
            mut queue,
            mut prio,
            mut max_mss,
        } = sticky;
        let mut d = Decision {
            verdict: Verdict::Pass,
            queue: None,
            prio: None,
            max_mss: None,
            rule: winner.map(|w| w as u32),
            state: StateHit::None,
            flow_hash,
            rtt_path: None,
            rtt_sample: None,
        };
        let Some(w) = winner else {
            d.queue = pick(queue, second);
            d.prio = pick(prio, second);
            d.max_mss = max_mss;
            return d;
        };
        let Some(rule) = self.rules.get(w) else {
            return d;
        };
        if rule.queue.is_some() {
            queue = rule.queue;
        }
        if rule.prio.is_some() {
            prio = rule.prio;
        }
        if rule.max_mss.is_some() {
            max_mss = rule.max_mss;
        }
        let (action, keep_state, sloppy) = (rule.action, rule.keep_state, rule.sloppy);
        // pf's per-rule limits (pf.conf(5) `max`, `max-src-states`): a rule at
        // its cap creates no state, and the packet is blocked as at the
        // table's limit (pf: PFRES_MAXSTATES / PFRES_SRCLIMIT).
        let src_tracked = rule.max_src_states.is_some() || rule.max_src_nodes.is_some();
        let src_states = if src_tracked {
            self.table.src_count(w as u32, pkt.src)
        } else {
            0
        };
        let over_max = rule.max.is_some_and(|m| self.table.rule_count(w) >= m)
            || rule.max_src_states.is_some_and(|m| src_states >= m)
            || rule
                .max_src_nodes
                .is_some_and(|m| src_states == 0 && self.table.node_count(w) >= m);
        let timeout_of = |tk| rule.timeouts.as_deref().unwrap_or(&self.timeouts).get(tk);
        if action == Action::Block {
            d.verdict = Verdict::Block(BlockReason::Rule);
        } else if let (true, true, Some(_)) = (keep_state, over_max, key) {
            self.per_rule_limit_hits += 1;
            d.verdict = Verdict::Block(BlockReason::StateLimit);
        } else if let (true, Some((key, lo_to_hi))) = (keep_state, key) {
            // A half whose other half is tracked starts from it, so it is
            // as established (and as safe from eviction) as the connection.
            let (proto, tk) = other_half.unwrap_or_else(|| ProtoState::new(pkt.proto));
            let mut win = (pkt.proto == sluice_wire::proto::TCP && !sloppy)
                .then(|| other_win.flatten().unwrap_or_default());
            let tracked = match (win.as_mut(), seg, proto) {
                (Some(w), Some(g), ProtoState::Tcp(peers)) => w.track(0, g, peers),
                _ => true,
            };
            let mut st = State {
                key,
                init_is_lo: lo_to_hi,
                rule: w as u32,
                queue,
                prio,
                max_mss,
                proto,
                timeout: tk,
                timeout_len: timeout_of(tk),
                created: now,
                last: now,
                gen: self.table_gen,
                src_tracked,
                conn_counted: false,
                packets: [1, 0],
                bytes: [bytes, 0],
                rtt: RttTracker::default(),
                win,
            };
            if let Some(g) = seg {
                st.rtt.observe(0, g, now);
            }
            if !tracked {
                // Out of the window the connection's other half tracks.
                self.bad_state += 1;
                d.verdict = Verdict::Block(BlockReason::BadState);
            } else {
                match self.table.insert(st, now) {
                    Ok(()) => {
                        d.state = StateHit::Created;
                        if let Some(rs) = self.rule_stats.get_mut(w) {
                            rs.states_created += 1;
                        }
                    }
                    Err(state::InsertError::Full) => {
                        d.verdict = Verdict::Block(BlockReason::StateLimit);
                    }
                }
            }
        }
        if d.verdict.is_pass() {
            d.queue = pick(queue, second);
            d.prio = pick(prio, second);
            d.max_mss = max_mss;
        }
        if let Some(rs) = self.rule_stats.get_mut(w) {
            rs.packets += 1;
            rs.bytes += bytes;
        }
        d
    }

    /// `overload <t> [flush [global]]` for `src`: added to table `t`
    /// (at most [`MAX_OVERLOADED`] sources, kept across reloads), its
    /// states flushed as asked.
    fn overload(&mut self, src: IpAddr, t: usize, flush: ir::Flush, rule: u32) {
        let name = self.table_names.get(t).cloned().unwrap_or_default();
        if self.overloaded.len() < MAX_OVERLOADED
            && !self.overloaded.iter().any(|(n, a)| *n == name && *a == src)
        {
            if let Some(tab) = self.tables.get_mut(t) {
                tab.add_host(src);
            }
            self.overloaded.push((name, src));
        }
        self.overloads += 1;
        match flush {
            ir::Flush::No => {}
            ir::Flush::Rule => {
                self.table.flush_src(src, Some(rule));
            }
            ir::Flush::Global => {
                self.table.flush_src(src, None);
            }
        }
    }

    /// Walk the rules: (winning pass/block rule, what `match` rules set).
    fn evaluate(
        &mut self,
        ifc: IfaceId,
        dir: Direction,
        pkt: &IpInfo,
        known_conn: bool,
    ) -> (Option<usize>, Sticky) {
        let ctx = MatchCtx {
            tables: &self.tables,
            ifaces: &self.ifaces,
            known_conn,
        };
        let mut winner = None;
        let mut sticky = Sticky::default();
        // Bounded by the number of rules: one pass, no backtracking.
        for (i, (r, st)) in self
            .rules
            .iter()
            .zip(self.rule_stats.iter_mut())
            .enumerate()
        {
            st.evaluations += 1;
            if !ctx.matches(r, ifc, dir, pkt) {
                continue;
            }
            st.matches += 1;
            if r.action == Action::Match {
                if r.queue.is_some() {
                    sticky.queue = r.queue;
                }
                if r.prio.is_some() {
                    sticky.prio = r.prio;
                }
                if r.max_mss.is_some() {
                    sticky.max_mss = r.max_mss;
                }
            } else {
                winner = Some(i);
            }
            if r.quick {
                break;
            }
        }
        (winner, sticky)
    }

    /// Remove expired states, examining at most `budget` slots; returns how
    /// many were removed. A full sweep takes `ceil(limit / budget)` calls.
    pub fn expire(&mut self, now: Instant, budget: usize) -> usize {
        self.table.expire(now, budget)
    }

    /// A SYN decided by rule `rule` (or its state) had its MSS clamped.
    pub fn note_mss_clamped(&mut self, rule: u32) {
        if let Some(rs) = self.rule_stats.get_mut(rule as usize) {
            rs.mss_clamped += 1;
        }
    }

    pub fn rule_stats(&self) -> &[RuleStats] {
        &self.rule_stats
    }

    /// Resident states, including expired ones not yet purged (compare
    /// `expires` with the current time to tell them apart).
    pub fn states(&self) -> impl Iterator<Item = StateView<'_>> {
        self.table.iter().map(move |s| {
            let (init, resp) = if s.init_is_lo {
                (s.key.lo, s.key.hi)
            } else {
                (s.key.hi, s.key.lo)
            };
            // lo→hi packets travel Out iff lo_out; the initiator sends lo→hi iff init_is_lo.
            let init_out = s.key.lo_out == s.init_is_lo;
            StateView {
                proto: s.key.proto,
                src: init,
                dst: resp,
                direction: if init_out {
                    Direction::Out
                } else {
                    Direction::In
                },
                proto_state: s.proto,
                queue: s.queue.map(|(q, _)| self.queue_name(q)),
                queue_pri: s.queue.and_then(|(_, p)| p).map(|p| self.queue_name(p)),
                prio: s.prio,
                rule: s.rule,
                packets: s.packets,
                bytes: s.bytes,
                created: s.created,
                last: s.last,
                expires: self.table.expires(s),
                rtt: s.rtt.toward,
                windows: s.win.map(|w| w.view()),
            }
        })
    }

    /// Every passive RTT sample since start, toward [the responder, the
    /// initiator] (sluice to that endpoint and back).
    pub fn rtt_histograms(&self) -> &[Histogram; 2] {
        &self.rtt_hist
    }

    pub fn stats(&self) -> ClassifierStats {
        let c = self.table.counters;
        ClassifierStats {
            states: self.table.len(),
            state_limit: self.table.limit(),
            inserts: c.inserts,
            removals: c.removals,
            expired: c.expired,
            state_limit_hits: c.limit_hits,
            lookups: self.lookups,
            hits: self.hits,
            states_evicted: c.evicted,
            rule_limit_hits: self.per_rule_limit_hits,
            overloads: self.overloads,
            bad_state: self.bad_state,
        }
    }

    /// Slab slots the state table has allocated; never above the limit.
    pub fn state_slots_allocated(&self) -> usize {
        self.table.slots_allocated()
    }
}
