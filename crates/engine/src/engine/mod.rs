//! The per-packet path and its bookkeeping.

mod control;
mod iface;
mod memory;
mod rx;
mod setup;
mod tx;
mod waits;

use iface::Iface;
pub use iface::IfaceCounters;
pub use memory::{MemoryReport, DEFAULT_MEMORY_LIMIT};

use crate::autorate::{Controller, Decision as RateDecision, Reason, Tuning};
use crate::build::{build_tree, BuildError, Tree};
use crate::health::{Health, HealthChange, HealthReport};
use crate::path::delay_signal::{Reading, SampleTrace};
use crate::path::{Monitor, RxEvent};
use crate::prio::{PrioQueue, Push, DEFAULT_PRIO};
use crate::report::{AutorateReport, ClassReport, IfaceReport};
use crate::tcpctl::{PaceTicket, Plan, TcpCtl};
use sluice_classify::{Classifier, QueueName, TcpSeg};
use sluice_conf::ir::{self, Direction, SchedKind};
use sluice_sched::{ClassId, DropReason, Drops, Ecn, Enqueue, Packet};
use sluice_time::{Duration, Instant, Overhead, Rate};
use sluice_wire::tcp::TcpHeader;
use sluice_wire::IpInfo;
use std::collections::{HashMap, VecDeque};

/// Frames kept for `poll_dropped` when the caller does not collect them;
/// beyond this they are still counted, only their bytes are released.
const DROPPED_BACKLOG_CAP: usize = 4096;
/// States examined per housekeeping pass, so expiry never stalls the path.
const EXPIRE_BUDGET: usize = 1024;
/// Largest frame that can be a pure TCP ACK: Ethernet with two VLAN tags,
/// IPv6 and a TCP header with 40 bytes of options.
const ACK_FRAME_MAX: usize = 14 + 8 + 40 + 60;
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(1);

/// Why the engine did not forward a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// A discipline dropped it (queue full, AQM, pipe loss, purge).
    Sched(DropReason),
    /// The frame could not be parsed (truncated, bad header lengths …).
    Malformed,
    /// A `block` rule matched.
    Blocked,
    /// It would have created a state, and the state table is full.
    StateLimit,
    /// A TCP segment outside its state's sequence window (pf's "bad state").
    BadState,
    /// It arrived on an interface with no peer to forward to.
    NoRoute,
    /// Its queue disappeared in a reload.
    Reload,
    /// Queued frames already hold the engine's memory cap (see
    /// [`Engine::set_memory_limit`]).
    MemoryLimit,
    /// A reply to autorate's probe (crate::probe): sluice's own, taken out
    /// of the traffic.
    ProbeReply,
}

impl DropCause {
    pub fn name(self) -> &'static str {
        match self {
            DropCause::Sched(r) => r.name(),
            DropCause::Malformed => "malformed",
            DropCause::Blocked => "blocked",
            DropCause::StateLimit => "state-limit",
            DropCause::BadState => "bad-state",
            DropCause::NoRoute => "no-route",
            DropCause::Reload => "reload",
            DropCause::MemoryLimit => "memory-limit",
            DropCause::ProbeReply => "probe-reply",
        }
    }
}

/// A frame handed back to the caller.
#[derive(Debug)]
pub struct DroppedFrame {
    pub iface: usize,
    pub frame: Vec<u8>,
    pub cause: DropCause,
}

/// Outcome of [`Engine::handle_rx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rx {
    /// Queued for transmission on this interface.
    Queued {
        egress: usize,
    },
    Dropped(DropCause),
}

/// How the engine is set up besides the config.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Interface names; the engine refers to them by index in this list.
    pub ifaces: Vec<String>,
    /// Bridge pairs by index, `(lan, wan)`: a frame received on one leaves
    /// through the other. The first is the LAN side, whose hosts' addresses
    /// the engine learns (see `iface_addrs`).
    pub bridge: Vec<(usize, usize)>,
    /// Key of the classifier's hash; the caller supplies randomness.
    pub hash_key: [u8; 16],
    /// Fixed addresses per interface index (what `$ext_if` means in rules).
    /// Interfaces without any learn them from the bridge (see `handle_rx`).
    pub iface_addrs: Vec<(usize, Vec<ir::IpNet>)>,
}

impl Options {
    /// `lan` and `wan` bridged (engine interfaces 0 and 1, as `sluice run
    /// --bridge LAN,WAN` sets them up), no fixed addresses: the LAN side's
    /// are learned.
    pub fn bridge(lan: &str, wan: &str, hash_key: [u8; 16]) -> Options {
        Options {
            ifaces: vec![lan.to_string(), wan.to_string()],
            bridge: vec![(0, 1)],
            hash_key,
            iface_addrs: Vec::new(),
        }
    }
}

/// What a reload did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// Packets moved into a queue of the same name in the new tree.
    pub kept: u64,
    /// Packets whose queue no longer exists (counted as reload drops).
    pub dropped: u64,
}

/// Decisions kept for [`Engine::poll_autorate`] when nobody collects them.
const AUTORATE_LOG_CAP: usize = 4096;

/// The sans-IO engine. See the crate docs.
pub struct Engine {
    ifaces: Vec<Iface>,
    peer: Vec<Option<usize>>,
    classifier: Classifier,
    drops: Drops,
    dropped: VecDeque<DroppedFrame>,
    last_now: Instant,
    next_housekeeping: Instant,
    next_id: u64,
    memory: MemoryReport,
    spare: Vec<Vec<u8>>,
    /// `ack-pacing` / `window-clamp` (crate::tcpctl).
    tcp: TcpCtl,
    /// Earliest tick of any autorate controller; the decisions to log.
    next_autorate: Option<Instant>,
    autorate_log: VecDeque<(usize, RateDecision)>,
    /// Every decision logged, not only those worth a line, and each delay
    /// sample kept ([`Engine::set_autorate_trace`]).
    autorate_trace: bool,
    /// Unix time = the engine's `now` + this, where the daemon has said
    /// ([`Engine::set_wall_clock`]); for `reconfig` schedules.
    wall: Option<Duration>,
    /// Every measurement of the path beyond sluice (crate::path).
    path: Monitor,
    /// Each shaped interface's health (crate::health), its next tick, and
    /// the verdict changes not yet collected.
    health: Vec<Option<Health>>,
    next_health: Instant,
    health_log: VecDeque<(usize, HealthChange)>,
    /// Original hosts behind a masquerading router (crate::nat).
    nat: crate::nat::NatHosts,
}

fn direction_pass(d: &sluice_classify::Decision) -> Option<DropCause> {
    use sluice_classify::{BlockReason, Verdict};
    match d.verdict {
        Verdict::Pass => None,
        Verdict::Block(BlockReason::StateLimit) => Some(DropCause::StateLimit),
        Verdict::Block(BlockReason::BadState) => Some(DropCause::BadState),
        Verdict::Block(BlockReason::Rule) => Some(DropCause::Blocked),
    }
}

impl Engine {
    /// Index of an interface by name.
    pub fn iface_index(&self, name: &str) -> Option<usize> {
        self.ifaces.iter().position(|i| i.name == name)
    }

    pub fn iface_name(&self, idx: usize) -> Option<&str> {
        self.ifaces.get(idx).map(|i| i.name.as_str())
    }

    pub fn iface_count(&self) -> usize {
        self.ifaces.len()
    }

    pub(super) fn clamp(&mut self, now: Instant) -> Instant {
        if now > self.last_now {
            self.last_now = now;
        }
        self.last_now
    }

    pub(super) fn give_back(&mut self, iface: usize, frame: Vec<u8>, cause: DropCause) {
        if self.dropped.len() >= DROPPED_BACKLOG_CAP {
            self.dropped.pop_front();
        }
        self.dropped.push_back(DroppedFrame {
            iface,
            frame,
            cause,
        });
    }

    pub(super) fn refuse(&mut self, iface: usize, frame: Vec<u8>, cause: DropCause) -> Rx {
        let c = &mut self.ifaces[iface].counters;
        match cause {
            DropCause::NoRoute => c.no_route += 1,
            DropCause::Malformed => c.malformed += 1,
            DropCause::ProbeReply => c.probe_replies += 1,
            DropCause::StateLimit => c.state_limit += 1,
            DropCause::BadState => c.bad_state += 1,
            _ => c.blocked += 1,
        }
        self.give_back(iface, frame, cause);
        Rx::Dropped(cause)
    }

    pub(super) fn housekeeping(&mut self, now: Instant) {
        if self.next_autorate.is_some_and(|t| now >= t) {
            self.autorate(now);
        }
        if now >= self.next_health {
            self.health_tick(now);
        }
        // Before any dequeue at `now`, so an interval's copy is exact.
        for t in self.ifaces.iter_mut().filter_map(|i| i.tree.as_mut()) {
            t.sojourn_marks.tick(now, t.root.as_ref());
        }
        if now >= self.next_housekeeping {
            self.classifier.expire(now, EXPIRE_BUDGET);
            self.classifier.expire_iface_addrs(now);
            self.tcp.housekeeping(now);
            self.path.expire(now);
            self.next_housekeeping = now + HOUSEKEEPING_PERIOD;
        }
    }

    /// Runs what is due at `now` without input (state expiry). The I/O layer
    /// calls it when the timer armed from `poll_timeout` fires, then drains
    /// `poll_tx` on every interface.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clamp(now);
        self.housekeeping(now);
        self.release_held_acks(now);
    }

    /// When the engine next needs `poll_tx`/housekeeping without new input.
    /// `None`: nothing pending. A time at or before the last `now` means "now".
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |y: Instant| y.min(x)));
        for i in &self.ifaces {
            if !i.passthrough.is_empty() {
                at(self.last_now);
            }
            if let Some(tree) = &i.tree {
                if !tree.root.is_empty() {
                    at(tree.root.next_wakeup().unwrap_or(self.last_now));
                }
            }
        }
        if self.classifier.stats().states > 0 {
            at(self.next_housekeeping);
        }
        if let Some(w) = self.tcp.next_wakeup() {
            at(w);
        }
        if let Some(w) = self.next_autorate {
            at(w);
        }
        // Health ticks while idle too: its verdict ages into "not enough
        // traffic" without a packet to carry it.
        if self.health.iter().any(Option::is_some) {
            at(self.next_health);
        }
        if let Some(w) = self.path.next_probe(self.last_now) {
            at(w);
        }
        t
    }

    /// Frames the engine did not forward, with their cause.
    pub fn poll_dropped(&mut self) -> Option<DroppedFrame> {
        self.dropped.pop_front()
    }

    /// An empty buffer the engine no longer needs (a queued frame moved to
    /// a right-sized one), for the caller's pool. Not a frame: nothing to
    /// count.
    pub fn poll_spare(&mut self) -> Option<Vec<u8>> {
        self.spare.pop()
    }

    /// Packets waiting to leave through `iface` (whole tree, delay lines included).
    pub fn queued(&self, iface: usize) -> usize {
        self.ifaces.get(iface).map_or(0, |i| {
            i.passthrough.len()
                + i.tree.as_ref().map_or(0, |t| t.root.len())
                + self.tcp.held_for(iface)
        })
    }

    pub fn counters(&self, iface: usize) -> Option<&IfaceCounters> {
        self.ifaces.get(iface).map(|i| &i.counters)
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// Turns TCP control's rounds of held ACKs took so far: the work behind
    /// each paced byte, which tests bound.
    pub fn tcp_round_turns(&self) -> u64 {
        self.tcp.spins
    }

    /// Per-interface, per-class statistics (`sluice show queues`).
    pub fn report(&self) -> Vec<IfaceReport> {
        self.ifaces
            .iter()
            .enumerate()
            .map(|(idx, i)| {
                let mut classes = Vec::new();
                if let Some(t) = &i.tree {
                    t.root.visit_stats(&mut |id, st| {
                        let info = t.classes.iter().find(|c| c.id == id);
                        let mut c = ClassReport::new(id, info, st);
                        c.sojourn_last = t.sojourn_marks.last(id, &st.sojourn, self.last_now);
                        c.ingress_charged = crate::build::ingress_charged(t.root.as_ref(), id);
                        c.tcp = self.tcp.report(idx, id);
                        classes.push(c);
                    });
                    // A pipe with one queue shows only its root: the root
                    // speaks for the controlled classes it does not list.
                    for info in t.classes.iter().filter(|c| c.tcp.any()) {
                        if classes.iter().any(|c| c.id == info.id) {
                            continue;
                        }
                        let (Some(r), Some(root)) = (
                            self.tcp.report(idx, info.id),
                            classes.iter_mut().find(|c| c.id == ClassId::ROOT),
                        ) else {
                            continue;
                        };
                        root.tcp.get_or_insert_with(Default::default).add(&r);
                    }
                }
                IfaceReport {
                    name: i.name.clone(),
                    sched: i.tree.as_ref().map(|t| t.kind),
                    bandwidth: i.tree.as_ref().map(|t| t.bandwidth),
                    counters: i.counters.clone(),
                    classes,
                    autorate: i.autorate.as_ref().map(|(c, r)| {
                        let a = c.config();
                        let side = self.path.stats(idx);
                        AutorateReport {
                            min: a.min,
                            max: a.max,
                            dry_run: a.dry_run,
                            rate: c.rate(),
                            delay: r.delay,
                            flows: r.flows,
                            newest_age: r.newest_age,
                            decisions: crate::autorate::Reason::ALL
                                .iter()
                                .map(|r| (r.name(), c.counts[r.index()]))
                                .collect(),
                            delay_from_probe: r.probe,
                            samples: side.samples,
                            samples_unsound: side.unsound,
                            holds: c.holds,
                            held: c.held_for,
                            probe: side
                                .probe
                                .map(|(target, stats)| crate::ProbeReport { target, stats }),
                            reconfig: a.reconfig,
                            wall_clock: self.wall.is_some(),
                        }
                    }),
                }
            })
            .collect()
    }
}
