//! The per-packet path and its bookkeeping.

use crate::autorate::{Controller, Decision as RateDecision, Reason, Tuning};
use crate::build::{build_tree, BuildError, Tree};
use crate::delay_signal::{DelaySignal, FlowSojourn, Own, Reading, SampleTrace, Sojourn};
use crate::delivered::Delivered;
use crate::prio::{PrioQueue, Push, DEFAULT_PRIO};
use crate::probe::Prober;
use crate::report::{AutorateReport, ClassReport, IfaceReport};
use crate::tcpctl::{Plan, TcpCtl};
use sluice_classify::{Classifier, QueueName, TcpSeg};
use sluice_conf::ir::{self, Direction, SchedKind};
use sluice_sched::{ClassId, DropReason, Drops, Ecn, Enqueue, Packet};
use sluice_time::{Duration, Instant, Overhead, Rate};
use sluice_wire::tcp::TcpHeader;
use sluice_wire::{IpInfo, L4};
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

/// Memory held by queued frames
///
/// # Principles
/// - What is counted is what is held: every queued frame is charged its
///   [`Packet::truesize`] (buffer capacity plus a fixed per-frame overhead,
///   Linux's `skb->truesize`), from the moment it enters a queue (tree or
///   passthrough) until it leaves through `poll_tx` or is handed back. The
///   sum is exact because nothing changes a buffer's capacity meanwhile;
///   with every queue empty it is zero (checked by [`crate::testing`]).
/// - One global cap, [`DEFAULT_MEMORY_LIMIT`] unless set: a frame that
///   would take the held memory over it is refused at the door and counted
///   as [`DropCause::MemoryLimit`] on its egress interface. Per-queue limits
///   (qlimit, FQ-CoDel's `memory_limit`) bound each queue; this one bounds
///   their sum, whatever the configuration. It is a safety net, not an AQM:
///   it refuses the newcomer (tail drop) rather than choosing a victim.
/// - Hold what the frame needs: the I/O layer receives into MTU-sized pool
///   buffers. A frame that must wait behind others (its egress already has
///   a backlog) and whose buffer is mostly empty is copied into a buffer of
///   its own size; the big one goes back to the caller through
///   [`Engine::poll_spare`] for reuse. A frame that finds its queue empty
///   usually leaves in the same turn and is not copied.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 << 20;
/// A queued frame's buffer is right-sized when it wastes at least this many
/// bytes and more than its own length: a 60-byte ACK in a 1518-byte buffer
/// is, a full-sized frame never is.
const SHRINK_MIN_WASTE: usize = 512;
/// Emptied big buffers kept for `poll_spare`; beyond this they are freed.
const SPARE_CAP: usize = 256;

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

/// Counters of one interface.
#[derive(Clone, Debug, Default)]
pub struct IfaceCounters {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Non-IP frames forwarded (ARP, ND is IP, LLDP …).
    pub non_ip: u64,
    pub malformed: u64,
    pub blocked: u64,
    pub state_limit: u64,
    /// TCP segments outside their state's sequence window.
    pub bad_state: u64,
    pub no_route: u64,
    /// Drops by the egress queue tree, all reasons.
    pub queue_drops: u64,
    pub reload_drops: u64,
    pub ecn_marked: u64,
    /// Frames refused on this egress because queued frames held the
    /// engine's memory cap.
    pub memory_drops: u64,
    /// SYNs that arrived here whose MSS option `scrub (max-mss …)` lowered.
    pub mss_clamped: u64,
    /// SYNs under `max-mss` whose TCP options could not be walked: passed
    /// unmodified.
    pub mss_untouched: u64,
    /// Replies to autorate's probes taken here (not forwarded).
    pub probe_replies: u64,
    /// autorate's echo requests sent here: frames of sluice's own, not in
    /// `tx_frames` (which counts what was forwarded).
    pub probes_sent: u64,
}

/// Memory held by queued frames, the engine's cap on it, and how often it
/// was reached (`sluice show info`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// Sum of [`Packet::truesize`] over every queued frame, now.
    pub held_bytes: u64,
    /// Highest `held_bytes` since start.
    pub peak_bytes: u64,
    /// The cap on `held_bytes`.
    pub limit_bytes: u64,
    /// Frames refused because of the cap, all interfaces.
    pub limit_drops: u64,
    /// Queued frames copied into a right-sized buffer.
    pub right_sized: u64,
    /// Frames queued now, all interfaces.
    pub frames: u64,
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

struct Iface {
    name: String,
    cid: sluice_classify::IfaceId,
    tree: Option<Tree>,
    /// Queue name → class on this interface's tree.
    classes: HashMap<QueueName, ClassId>,
    /// Egress queue without a tree: `set prio`'s eight bands (crate::prio).
    passthrough: PrioQueue,
    overhead: Overhead,
    /// `max-mss auto` for SYNs arriving here (IPv4, IPv6), from this
    /// interface's shaped rate and overhead; `None`: a full frame fits.
    auto_mss: [Option<u16>; 2],
    learn_addrs: bool,
    /// The LAN side of a bridge pair: sources arriving here are "ours".
    lan_side: bool,
    counters: IfaceCounters,
    /// The delay beyond sluice on the path through this interface
    /// (crate::delay_signal), and sluice's own recent sojourn on it.
    signal: DelaySignal,
    sojourn: Sojourn,
    /// The same per connection (the samples' correction).
    flow_sojourn: FlowSojourn,
    /// What the far ends acknowledge in the segments arriving here (the
    /// WAN side's, read by its upload's autorate: crate::delivered).
    delivered: Delivered,
    /// `autorate` on this interface's shaper, and its latest reading.
    autorate: Option<(Controller, Reading)>,
    /// autorate's probe, on the WAN side of a pair whose shaper names one
    /// (crate::probe).
    probe: Option<Prober>,
    /// When the link after this interface will have sent what sluice sent
    /// it, at the shaped rate (token-bucket trees, while TCP control is on;
    /// see `Iface::wire_wait`).
    wire_free: Instant,
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
    /// The secret autorate's probes are known by (crate::probe).
    probe_key: [u8; 16],
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

impl Iface {
    /// How long a frame sent now waits on the link after this interface
    /// for the frames sent before it. A token bucket lets a frame go once
    /// its tokens are there, at the start of its time on the modem's wire,
    /// so an ACK that leaves right after an upload frame still waits for
    /// that frame there (49 ms for a 536-byte segment at 120 kbit/s): a
    /// wait its flow's window must allow ([`TcpCtl::on_sent`]) and sluice
    /// does not see. Estimated at the shaped rate, a little under the
    /// modem's, so never short. A pipe releases a packet at the end of its
    /// serialisation: nothing is left on the wire after it.
    fn wire_wait(&mut self, now: Instant, cost: u32) -> Duration {
        let Some(t) = self.tree.as_ref() else {
            return Duration::ZERO;
        };
        if t.kind == SchedKind::Pipe || t.bandwidth.as_bps() == 0 {
            return Duration::ZERO;
        }
        let start = self.wire_free.max(now);
        self.wire_free = start + t.bandwidth.tx_time(u64::from(cost));
        start.saturating_since(now)
    }
}

impl Engine {
    /// Builds the engine. Fails without side effects if any tree cannot be built.
    pub fn new(cfg: &ir::Config, opts: Options) -> Result<Engine, BuildError> {
        let mut classifier = Classifier::new(
            cfg,
            sluice_classify::Options {
                hash_key: opts.hash_key,
                ..Default::default()
            },
        );
        let mut ifaces = Vec::with_capacity(opts.ifaces.len());
        for name in &opts.ifaces {
            let cid = classifier.iface(name);
            ifaces.push(Iface {
                name: name.clone(),
                cid,
                tree: None,
                classes: HashMap::new(),
                passthrough: PrioQueue::default(),
                overhead: Overhead::NONE,
                auto_mss: [None; 2],
                learn_addrs: true,
                lan_side: false,
                counters: IfaceCounters::default(),
                signal: DelaySignal::default(),
                sojourn: Sojourn::default(),
                flow_sojourn: FlowSojourn::default(),
                delivered: Delivered::default(),
                autorate: None,
                probe: None,
                wire_free: Instant::ZERO,
            });
        }
        for (idx, nets) in &opts.iface_addrs {
            if let Some(i) = ifaces.get_mut(*idx) {
                classifier.set_iface_addrs(i.cid, nets);
                i.learn_addrs = false;
            }
        }
        let mut peer = vec![None; ifaces.len()];
        for &(a, b) in &opts.bridge {
            if a < peer.len() && b < peer.len() {
                peer[a] = Some(b);
                peer[b] = Some(a);
                ifaces[a].lan_side = true;
            }
        }
        let mut e = Engine {
            ifaces,
            peer,
            classifier,
            drops: Vec::new(),
            dropped: VecDeque::new(),
            last_now: Instant::ZERO,
            next_housekeeping: Instant::ZERO,
            next_id: 0,
            memory: MemoryReport {
                limit_bytes: DEFAULT_MEMORY_LIMIT,
                ..MemoryReport::default()
            },
            spare: Vec::new(),
            tcp: TcpCtl::default(),
            next_autorate: None,
            autorate_log: VecDeque::new(),
            autorate_trace: false,
            wall: None,
            probe_key: opts.hash_key,
            nat: Default::default(),
        };
        let trees = e.build_trees(cfg)?;
        e.install(cfg, trees);
        Ok(e)
    }

    fn build_trees(&self, cfg: &ir::Config) -> Result<Vec<Option<Tree>>, BuildError> {
        let mut trees: Vec<Option<Tree>> = self.ifaces.iter().map(|_| None).collect();
        for q in &cfg.interfaces {
            if let Some(i) = self.ifaces.iter().position(|f| f.name == q.ifname) {
                trees[i] = Some(build_tree(q)?);
            }
            // A config may name interfaces this engine does not run; pf
            // likewise loads altq for absent interfaces without complaint.
        }
        Ok(trees)
    }

    fn install(&mut self, cfg: &ir::Config, trees: Vec<Option<Tree>>) {
        for (iface, tree) in self.ifaces.iter_mut().zip(trees) {
            iface.classes.clear();
            if let Some(t) = &tree {
                for c in &t.classes {
                    let q = self.classifier.queue_lookup(&c.name);
                    if let Some(q) = q {
                        iface.classes.insert(q, c.id);
                    }
                }
            }
            iface.tree = tree;
            iface.overhead = cfg.options.overhead_of(&iface.name);
            let rate = cfg
                .interfaces
                .iter()
                .find(|q| q.ifname == iface.name)
                .map(ir::IfaceQueueing::shaped_rate);
            iface.auto_mss = [sluice_wire::Af::V4, sluice_wire::Af::V6]
                .map(|af| rate.and_then(|r| crate::mss::auto(r, iface.overhead, af)));
            // A reload with the same bounds keeps the controller and the
            // rate it found; new bounds start again at the bandwidth.
            let want = cfg.options.autorate_of(&iface.name);
            let keep = iface
                .autorate
                .take()
                .filter(|(c, _)| Some(c.config()) == want);
            iface.autorate = match (want, iface.tree.as_mut(), keep) {
                (Some(_), Some(t), Some((c, r))) => {
                    // TCP control's pacers are built from the classes below.
                    if !c.config().dry_run {
                        retune(t, c.rate(), self.last_now, &mut self.drops);
                    }
                    Some((c, r))
                }
                (Some(a), Some(t), None) => {
                    let mut c = Controller::new(a, t.bandwidth, Tuning::default());
                    c.set_wall_clock(self.wall);
                    // The download's root is on the LAN side: its queue
                    // lies before sluice. Any other's lies after it.
                    let c = if iface.lan_side { c } else { c.way_out() };
                    Some((c, Reading::default()))
                }
                _ => None,
            };
        }
        // A probe goes out on the WAN side of a pair (an interface that is
        // not a LAN side) for the autorate of either of its shapers; the
        // upload's names it first. A reload naming the same target keeps
        // its base and counters.
        for idx in 0..self.ifaces.len() {
            let probe_of = |i: usize| {
                cfg.options
                    .autorate_of(&self.ifaces[i].name)
                    .and_then(|a| a.probe)
            };
            let target = if self.ifaces[idx].lan_side {
                None
            } else {
                probe_of(idx).or_else(|| self.peer[idx].and_then(probe_of))
            };
            let i = &mut self.ifaces[idx];
            i.probe = match (target, i.probe.take()) {
                (Some(t), Some(p)) if p.target() == t => Some(p),
                (Some(t), _) => Some(Prober::new(t, self.probe_key)),
                (None, _) => None,
            };
        }
        self.next_autorate = self
            .ifaces
            .iter()
            .filter_map(|i| i.autorate.as_ref().map(|(c, _)| c.next_tick()))
            .min();
        let classes: Vec<(&[crate::build::ClassInfo], Overhead, bool)> = self
            .ifaces
            .iter()
            .map(|i| {
                (
                    i.tree.as_ref().map_or(&[][..], |t| &t.classes[..]),
                    i.overhead,
                    i.lan_side,
                )
            })
            .collect();
        self.tcp.configure(self.last_now, &classes);
    }

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

    fn clamp(&mut self, now: Instant) -> Instant {
        if now > self.last_now {
            self.last_now = now;
        }
        self.last_now
    }

    fn give_back(&mut self, iface: usize, frame: Vec<u8>, cause: DropCause) {
        if self.dropped.len() >= DROPPED_BACKLOG_CAP {
            self.dropped.pop_front();
        }
        self.dropped.push_back(DroppedFrame {
            iface,
            frame,
            cause,
        });
    }

    /// Moves scheduler drops of interface `iface` into the dropped backlog.
    fn absorb_drops(&mut self, iface: usize) {
        let mut drops = std::mem::take(&mut self.drops);
        for d in drops.drain(..) {
            self.release(&d.pkt);
            if self.tcp.enabled() {
                self.tcp.on_queue(iface, d.pkt.class, d.pkt.len, false);
            }
            self.ifaces[iface].counters.queue_drops += 1;
            self.give_back(iface, d.pkt.data, DropCause::Sched(d.reason));
        }
        self.drops = drops;
    }

    /// A queued packet left (sent, dropped): its memory is no longer held.
    #[inline]
    fn release(&mut self, pkt: &Packet) {
        self.memory.held_bytes = self.memory.held_bytes.saturating_sub(pkt.truesize());
    }

    /// The buffer a frame that is about to wait keeps: its own, unless that
    /// is mostly empty (see [`DEFAULT_MEMORY_LIMIT`]'s principles).
    fn right_size(&mut self, mut frame: Vec<u8>) -> Vec<u8> {
        let waste = frame.capacity() - frame.len();
        if waste < SHRINK_MIN_WASTE || waste <= frame.len() {
            return frame;
        }
        let small = frame.as_slice().to_vec();
        self.memory.right_sized += 1;
        if self.spare.len() < SPARE_CAP {
            frame.clear();
            self.spare.push(frame);
        }
        small
    }

    fn housekeeping(&mut self, now: Instant) {
        if self.next_autorate.is_some_and(|t| now >= t) {
            self.autorate(now);
        }
        if now >= self.next_housekeeping {
            self.classifier.expire(now, EXPIRE_BUDGET);
            self.classifier.expire_iface_addrs(now);
            self.tcp.housekeeping(now);
            for i in &mut self.ifaces {
                i.signal.expire(now);
            }
            self.next_housekeeping = now + HOUSEKEEPING_PERIOD;
        }
    }

    /// Runs the autorate controllers that are due (crate::autorate): each
    /// reads the delay signal of the WAN side of its interface's bridge
    /// pair (the link it shapes lies beyond it, whichever direction) and
    /// the bytes its interface sent, and unless in dry-run applies the
    /// rate it chose.
    fn autorate(&mut self, now: Instant) {
        let mut next: Option<Instant> = None;
        for idx in 0..self.ifaces.len() {
            let side = self.wan_side(idx);
            // Each direction reads its own queue: the upload's root (on
            // the WAN side) the way out, the download's the way in.
            // A sender's clock is trusted only after it has been watched
            // (crate::owd): until the way in is read for at least half the
            // flows the round trip gives, the round trip stands for it.
            let signal = &self.ifaces[side].signal;
            let mut reading = if side == idx {
                signal.read_out(now)
            } else {
                let (way_in, rtt) = (signal.read_in(now), signal.read(now));
                if way_in.delay.is_some() && way_in.flows * 2 >= rtt.flows {
                    way_in
                } else {
                    rtt
                }
            };
            // No TCP to read: the probe's round trip, where one is sent.
            if reading.delay.is_none() {
                if let Some(p) = &self.ifaces[side].probe {
                    let r = p.reading(now, self.probe_interval(side));
                    if r.delay.is_some() {
                        reading = r;
                    }
                }
            }
            let i = &mut self.ifaces[idx];
            let Some((ctl, last)) = i.autorate.as_mut() else {
                continue;
            };
            let previous = ctl.last_reason();
            // An upload's link is read from what its far ends acknowledge.
            let delivered = (side == idx).then(|| i.delivered.total());
            let decision = ctl.tick(now, i.counters.tx_bytes, delivered, reading);
            let t = ctl.next_tick();
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
            let Some(d) = decision else {
                continue;
            };
            *last = reading;
            let log = self.autorate_trace || ctl.worth_logging(&d, previous);
            if d.new != d.old && !d.dry_run {
                // The same change as by hand: it cannot fail here (the
                // controller exists only on a tree with a rate).
                let _ = self.set_rate(idx, d.new, now);
            }
            if d.hold > Duration::ZERO && !d.dry_run {
                self.hold(idx, d.hold, now);
            }
            if d.reason == Reason::Reconfig && d.new < d.old && !d.dry_run {
                // A `reconfig` window begins: the ACKs TCP control holds
                // are the senders' leave to send, taken at the first drop
                // in sluice's queue (a loss's ACK passes after its flow's
                // held ones), which comes an AQM interval later, in the
                // stall (lab, `starlink`: 26 ACKs at once, 23 KB in the
                // modem at 2 Mbit/s, a ping at 147 ms). Released now, what
                // they let through crosses the link before it stalls.
                self.tcp.release_iface(idx);
            }
            if log {
                if self.autorate_log.len() >= AUTORATE_LOG_CAP {
                    self.autorate_log.pop_front();
                }
                self.autorate_log.push_back((idx, d));
            }
        }
        self.next_autorate = next;
    }

    /// Where the wall clock is: at the engine's `mono` the Unix time (since
    /// the epoch) was `unix`. The engine's clock is monotonic and has no
    /// date; an autorate `reconfig` schedule is the wall clock's (Starlink
    /// changes at 12, 27, 42 and 57 s past the minute). The daemon calls
    /// this at start and again from time to time, as the clock is adjusted.
    pub fn set_wall_clock(&mut self, mono: Instant, unix: Duration) {
        let offset = Duration(unix.0.saturating_sub(mono.0));
        self.wall = Some(offset);
        for i in &mut self.ifaces {
            if let Some((c, _)) = i.autorate.as_mut() {
                c.set_wall_clock(Some(offset));
            }
        }
    }

    /// Diagnosis (`sluice run --autorate-trace`): every autorate decision
    /// goes to [`Engine::poll_autorate`], not only those worth a line, and
    /// every delay sample's parts to [`Engine::poll_signal_trace`].
    pub fn set_autorate_trace(&mut self, on: bool) {
        self.autorate_trace = on;
        for i in &mut self.ifaces {
            i.signal.set_trace(on);
        }
    }

    /// The delay samples traced since the last call, with the name of the
    /// interface whose signal took each, and how many were dropped for
    /// want of room since tracing began.
    pub fn poll_signal_trace(&mut self) -> (Vec<(String, SampleTrace)>, u64) {
        let mut out = Vec::new();
        let mut lost = 0;
        for i in &mut self.ifaces {
            out.extend(
                i.signal
                    .drain_trace()
                    .into_iter()
                    .map(|t| (i.name.clone(), t)),
            );
            lost += i.signal.trace_lost;
        }
        (out, lost)
    }

    /// The next autorate decision worth logging (the rate moved, or the
    /// reason changed), with the name of its interface; the daemon writes
    /// them to its state directory.
    pub fn poll_autorate(&mut self) -> Option<(String, RateDecision)> {
        let (idx, d) = self.autorate_log.pop_front()?;
        Some((self.ifaces[idx].name.clone(), d))
    }

    /// Takes a frame received on interface `iface` at `now`.
    pub fn handle_rx(&mut self, now: Instant, iface: usize, frame: Vec<u8>) -> Rx {
        let now = self.clamp(now);
        self.housekeeping(now);
        let Some(ing) = self.ifaces.get_mut(iface) else {
            return Rx::Dropped(DropCause::NoRoute);
        };
        ing.counters.rx_frames += 1;
        ing.counters.rx_bytes += frame.len() as u64;
        let Some(egress) = self.peer[iface] else {
            self.ifaces[iface].counters.no_route += 1;
            self.give_back(iface, frame, DropCause::NoRoute);
            return Rx::Dropped(DropCause::NoRoute);
        };
        let info = match sluice_wire::parse(&frame) {
            Ok(info) => info,
            Err(_) => {
                self.ifaces[iface].counters.malformed += 1;
                self.give_back(iface, frame, DropCause::Malformed);
                return Rx::Dropped(DropCause::Malformed);
            }
        };
        if self.ifaces[iface].lan_side {
            self.learn(now, iface, egress, &frame, &info);
        } else if let Some(p) = self.ifaces[iface].probe.as_mut() {
            // Who answers from the far side, for the probe's template.
            p.heard(now, &frame, &info);
            let icmp = matches!(
                info.ip,
                Some(IpInfo {
                    l4: L4::Icmp { .. },
                    ..
                })
            );
            if icmp && p.on_reply(now, &frame, &info) {
                self.ifaces[iface].counters.probe_replies += 1;
                self.give_back(iface, frame, DropCause::ProbeReply);
                return Rx::Dropped(DropCause::ProbeReply);
            }
        }
        // One walk of a TCP header and its options, for the classifier's
        // RTT and for TCP control; `None` for whatever is not a whole TCP
        // segment (fragments, bad offsets), which neither reads.
        let mut tcp = TcpHeader::in_frame(&frame, &info).ok().map(|h| h.segment());
        let (class, flow, ecn, rtt_path, max_mss, prio) = match &info.ip {
            None => {
                self.ifaces[iface].counters.non_ip += 1;
                (None, 0, Ecn::NotEct, None, None, None)
            }
            Some(ip) => {
                let (icid, ecid) = (self.ifaces[iface].cid, self.ifaces[egress].cid);
                // Sequence numbers and timestamps, for the states' passive RTT.
                let seg = tcp.as_ref().map(TcpSeg::of);
                let c = &mut self.classifier;
                let din = c.classify_seg(now, icid, Direction::In, ip, seg.as_ref());
                if let Some(cause) = direction_pass(&din) {
                    return self.refuse(iface, frame, cause);
                }
                let c = &mut self.classifier;
                let dout = c.classify_seg(now, ecid, Direction::Out, ip, seg.as_ref());
                if let Some(cause) = direction_pass(&dout) {
                    return self.refuse(iface, frame, cause);
                }
                // Only a frame the rules passed lends the probe its name.
                if let (true, Some(p)) = (
                    self.ifaces[iface].lan_side,
                    self.ifaces[egress].probe.as_mut(),
                ) {
                    p.learn(now, &frame, &info);
                }
                // pf: the outbound pass may override the inbound assignment.
                let queue = dout.queue.or(din.queue);
                let class = queue.and_then(|q| self.ifaces[egress].classes.get(&q).copied());
                let rtt = dout.rtt_path.or(din.rtt_path);
                // From the far side, the sender's stamp times the way in:
                // what a download's controller reads (only where one may).
                if let (false, true, Some(g)) = (
                    self.ifaces[iface].lan_side,
                    self.next_autorate.is_some(),
                    seg.as_ref(),
                ) {
                    let i = &mut self.ifaces[iface];
                    // Counted only for a conversation the LAN host answers
                    // (crate::delay_signal).
                    if let Some((tsval, _)) = g.timestamps {
                        i.signal.add_inbound(now, ip.src, dout.flow_hash, tsval);
                    }
                    // And what it acknowledges of the upload's data.
                    i.delivered.on_segment(dout.flow_hash, g.flags, g.ack);
                } else if let (true, true, Some(g)) = (
                    self.ifaces[iface].lan_side,
                    self.next_autorate.is_some(),
                    seg.as_ref(),
                ) {
                    // The LAN host acknowledges the far end: the
                    // connection's stamps from there may count.
                    use sluice_wire::tcp_flags::{ACK, RST};
                    if g.flags & (ACK | RST) == ACK {
                        let far = self.classifier.reverse_flow_hash(ip);
                        self.ifaces[egress].signal.answered(now, far);
                    }
                }
                // A measurement this packet completed timed the path it
                // came from: the delay signal of its interface.
                if let Some(sample) = dout.rtt_sample.or(din.rtt_sample) {
                    // The measurement began with a packet of this
                    // connection's other direction leaving through here.
                    let peer = self.classifier.reverse_flow_hash(ip);
                    let i = &mut self.ifaces[iface];
                    // Without the connection's own waits, the mean of
                    // everyone's corrects the delay, and nothing the base:
                    // no packet of the connection is known to have waited
                    // at least that.
                    let own = i.flow_sojourn.get(peer).unwrap_or(Own {
                        wait: i.sojourn.get(),
                        floor: Duration::ZERO,
                    });
                    // A segment with data (or a SYN, FIN) was sent as
                    // our packet arrived; a pure ACK may have been delayed.
                    let prompt = seg.as_ref().is_some_and(|g| {
                        use sluice_wire::tcp_flags::{FIN, SYN};
                        g.payload_len > 0 || g.flags & (SYN | FIN) != 0
                    });
                    if prompt {
                        i.signal.add(now, ip.src, dout.flow_hash, sample, own);
                    } else {
                        i.signal.add_ack(now, ip.src, dout.flow_hash, sample, own);
                    }
                }
                let mss = (din.max_mss.is_some() || dout.max_mss.is_some()).then(|| {
                    let rule = dout.max_mss.and(dout.rule).or(din.rule);
                    ([din.max_mss, dout.max_mss], rule)
                });
                let prio = dout.prio.or(din.prio);
                // Host isolation buckets hosts too; the hashes cost two
                // SipHash rounds, paid only where a queue isolates.
                let flow = if self.ifaces[egress]
                    .tree
                    .as_ref()
                    .is_some_and(|t| t.isolating)
                {
                    let syn = seg.as_ref().is_some_and(|g| {
                        use sluice_wire::tcp_flags::{ACK, SYN};
                        g.flags & (SYN | ACK) == SYN
                    });
                    let (src, dst) = self.hosts(ip, egress, syn);
                    let c = &self.classifier;
                    Packet::flow_key(dout.flow_hash, c.host_hash(src), c.host_hash(dst))
                } else {
                    dout.flow_hash
                };
                (class, flow, Ecn::from_bits(ip.tos), rtt, mss, prio)
            }
        };
        let class = class.unwrap_or_else(|| {
            let t = self.ifaces[egress].tree.as_ref();
            t.map(|t| t.default).unwrap_or(ClassId::ROOT)
        });
        let mut frame = frame;
        if let (Some(seg), Some((limits, rule))) = (tcp.as_mut(), max_mss) {
            self.clamp_mss(iface, &mut frame, &info, seg, limits, rule);
        }
        let (plan, allowance) = if let (Some(seg), true) = (&tcp, self.tcp.enabled()) {
            let default_of = |i: usize| self.ifaces[i].tree.as_ref().map(|t| t.default);
            let (back, forth) = (default_of(iface), default_of(egress));
            let seen = self.tcp.on_segment(
                now, iface, egress, class, back, forth, &mut frame, &info, seg, rtt_path,
            );
            // Its flow's held ACKs go first: nothing is reordered.
            self.drain_released(now);
            seen
        } else {
            (Plan::Forward, Duration::ZERO)
        };
        let frame = if self.queued(egress) > 0 {
            self.right_size(frame)
        } else {
            frame
        };
        let eg = &mut self.ifaces[egress];
        let len = frame.len() as u32;
        let pkt = Packet {
            data: frame,
            len,
            cost: eg.overhead.cost(len),
            flow,
            class,
            ecn,
            enqueued_at: now,
            id: self.next_id,
            // Whole milliseconds, rounded up: the AQM never judges the flow
            // by less than its window allows.
            allowance_ms: u16::try_from(allowance.as_nanos().div_ceil(1_000_000))
                .unwrap_or(u16::MAX),
        };
        self.next_id += 1;
        let pkt = match plan {
            Plan::Pace(ticket) => {
                let size = pkt.truesize();
                if self.memory.held_bytes.saturating_add(size) > self.memory.limit_bytes {
                    pkt // refused below, like any frame over the cap
                } else {
                    let paced = self.tcp.pace(now, ticket, egress, pkt);
                    // A cap may have released held ACKs: they go first.
                    self.drain_released(now);
                    match paced {
                        Some(pkt) => pkt,
                        None => {
                            self.charge(size);
                            return Rx::Queued { egress };
                        }
                    }
                }
            }
            Plan::Forward => pkt,
        };
        self.enqueue(now, egress, pkt, prio.unwrap_or(DEFAULT_PRIO))
    }

    /// `scrub (max-mss …)` on a SYN or SYN-ACK that arrived on `iface`
    /// (crate::mss): its MSS option lowered to the limit, `seg` kept in
    /// step for TCP control.
    fn clamp_mss(
        &mut self,
        iface: usize,
        frame: &mut [u8],
        info: &sluice_wire::PacketInfo,
        seg: &mut sluice_wire::tcp::Segment,
        limits: [Option<ir::MaxMss>; 2],
        rule: Option<u32>,
    ) {
        if seg.flags & sluice_wire::tcp_flags::SYN == 0 {
            return;
        }
        let Some(af) = info.ip.as_ref().map(|ip| ip.af) else {
            return;
        };
        let i = &mut self.ifaces[iface];
        let auto = match af {
            sluice_wire::Af::V4 => i.auto_mss[0],
            sluice_wire::Af::V6 => i.auto_mss[1],
        };
        let Some(limit) = crate::mss::limit(limits, auto, af) else {
            return;
        };
        if seg.options.error.is_some() {
            i.counters.mss_untouched += 1;
            return;
        }
        // Every MSS option is clamped (stacks take the last of several).
        if seg.options.mss_max.is_none_or(|m| m <= limit) {
            return;
        }
        match sluice_wire::tcp::rewrite_mss(frame, info, limit) {
            Ok(_) => {
                i.counters.mss_clamped += 1;
                seg.options.mss = seg.options.mss.map(|m| m.min(limit));
                seg.options.mss_max = Some(limit);
                if let Some(r) = rule {
                    self.classifier.note_mss_clamped(r);
                }
            }
            Err(_) => i.counters.mss_untouched += 1,
        }
    }

    fn charge(&mut self, size: u64) {
        let mem = &mut self.memory;
        mem.held_bytes += size;
        mem.peak_bytes = mem.peak_bytes.max(mem.held_bytes);
    }

    /// Held ACKs TCP control released: into their egress queues, now.
    fn drain_released(&mut self, now: Instant) {
        while let Some((egress, mut pkt)) = self.tcp.take_released() {
            self.release(&pkt);
            // The hold is part of the connection's wait here (the delay
            // signal's correction), not of the queue's sojourn.
            let held = now.saturating_since(pkt.enqueued_at);
            self.ifaces[egress].flow_sojourn.hold(pkt.id, held);
            pkt.enqueued_at = now;
            self.enqueue(now, egress, pkt, DEFAULT_PRIO);
        }
    }

    /// Queues a classified packet on `egress` (tree, or the priority bands
    /// at `prio` without one), within the memory cap.
    fn enqueue(&mut self, now: Instant, egress: usize, pkt: Packet, prio: u8) -> Rx {
        let eg = &mut self.ifaces[egress];
        let id = pkt.id;
        let size = pkt.truesize();
        let mem = &mut self.memory;
        if mem.held_bytes.saturating_add(size) > mem.limit_bytes {
            mem.limit_drops += 1;
            eg.counters.memory_drops += 1;
            self.give_back(egress, pkt.data, DropCause::MemoryLimit);
            return Rx::Dropped(DropCause::MemoryLimit);
        }
        match eg.tree.as_mut() {
            Some(t) => {
                mem.held_bytes += size;
                mem.peak_bytes = mem.peak_bytes.max(mem.held_bytes);
                if self.tcp.enabled() {
                    self.tcp.on_queue(egress, pkt.class, pkt.len, true);
                }
                if t.root.enqueue(pkt, now, &mut self.drops) == Enqueue::Queued {
                    return Rx::Queued { egress };
                }
            }
            None => {
                let full = DropCause::Sched(DropReason::QueueFull);
                match eg.passthrough.push(prio, pkt) {
                    Push::Refused(pkt) => {
                        eg.counters.queue_drops += 1;
                        self.give_back(egress, pkt.data, full);
                        return Rx::Dropped(full);
                    }
                    Push::Queued => {}
                    Push::Displaced(out) => {
                        eg.counters.queue_drops += 1;
                        mem.held_bytes = mem.held_bytes.saturating_sub(out.truesize());
                        self.give_back(egress, out.data, full);
                    }
                }
                let mem = &mut self.memory;
                mem.held_bytes += size;
                mem.peak_bytes = mem.peak_bytes.max(mem.held_bytes);
                return Rx::Queued { egress };
            }
        }
        // Something was dropped: the newcomer itself, or others to make room.
        let own = self.drops.iter().find(|d| d.pkt.id == id).map(|d| d.reason);
        self.absorb_drops(egress);
        match own {
            Some(r) => Rx::Dropped(DropCause::Sched(r)),
            None => Rx::Queued { egress },
        }
    }

    fn refuse(&mut self, iface: usize, frame: Vec<u8>, cause: DropCause) -> Rx {
        let c = &mut self.ifaces[iface].counters;
        match cause {
            DropCause::StateLimit => c.state_limit += 1,
            DropCause::BadState => c.bad_state += 1,
            _ => c.blocked += 1,
        }
        self.give_back(iface, frame, cause);
        Rx::Dropped(cause)
    }

    /// Bridge mode: a LAN-side host's address is what pf on that host would
    /// call the address of either interface (`from $ext_if`), so addresses
    /// LAN-side hosts claim in ARP/ND (`sluice_wire::neighbor_claim`) are
    /// learned for both interfaces of the pair, and their IP traffic keeps
    /// them alive. A plain source address is never learned: anyone can write
    /// one, and 256 of them used to push every real host out for good.
    /// Never from the WAN side: remote addresses are not ours.
    fn learn(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        frame: &[u8],
        info: &sluice_wire::PacketInfo,
    ) {
        let claim = sluice_wire::neighbor_claim(frame, info);
        for i in [ingress, egress] {
            if !self.ifaces[i].learn_addrs {
                continue;
            }
            let cid = self.ifaces[i].cid;
            match (claim, &info.ip) {
                (Some(c), _) => {
                    // The claim counts against its frame's source MAC.
                    let mac = frame.get(6..12).and_then(|m| m.try_into().ok());
                    self.classifier
                        .learn_iface_addr(cid, c.addr, mac.unwrap_or_default(), now);
                }
                (None, Some(ip)) => self.classifier.refresh_iface_addr(cid, ip.src, now),
                (None, None) => {}
            }
        }
    }

    /// The addresses configured for interface `iface` (`Options::iface_addrs`).
    pub fn configured_addrs(&self, iface: usize) -> Vec<ir::IpNet> {
        self.ifaces.get(iface).map_or(Vec::new(), |i| {
            self.classifier.configured_iface_addrs(i.cid)
        })
    }

    /// The addresses learned for interface `iface` (bridge mode) and how many
    /// newcomers the full set refused; empty for configured interfaces.
    pub fn learned_addrs(&self, iface: usize) -> (Vec<sluice_classify::LearnedAddr>, u64) {
        self.ifaces.get(iface).map_or((Vec::new(), 0), |i| {
            self.classifier.learned_iface_addrs(i.cid)
        })
    }

    /// The next frame to transmit on `iface` now, if any; ECN marks applied.
    pub fn poll_tx(&mut self, now: Instant, iface: usize) -> Option<Vec<u8>> {
        let now = self.clamp(now);
        self.housekeeping(now);
        if self.tcp.enabled() {
            self.tcp.poll(now);
            self.drain_released(now);
        }
        // autorate's probe goes out beside the shaped traffic, not behind
        // it; its interval is worked out only when one is due.
        let due = self.ifaces.get(iface)?.probe.as_ref();
        if due.and_then(|p| p.next_send(now)).is_some_and(|t| t <= now) {
            let interval = self.probe_interval(iface);
            if let Some(f) = self.ifaces[iface]
                .probe
                .as_mut()
                .and_then(|p| p.poll(now, interval))
            {
                self.ifaces[iface].counters.probes_sent += 1;
                return Some(f);
            }
        }
        let eg = self.ifaces.get_mut(iface)?;
        // Frames that arrived before a reload gave this interface a tree
        // leave first: left behind, they would wait forever while
        // `poll_timeout` keeps answering "now".
        let pkt = match (eg.passthrough.pop(), eg.tree.as_mut()) {
            (Some(p), _) => Some(p),
            (None, Some(t)) => t.root.dequeue(now, &mut self.drops),
            (None, None) => None,
        };
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        let mut pkt = pkt?;
        self.release(&pkt);
        let wait = now.saturating_since(pkt.enqueued_at);
        self.ifaces[iface].sojourn.add(wait);
        self.ifaces[iface]
            .flow_sojourn
            .add(pkt.flow, pkt.id, wait, now);
        // Only TCP control reads it (an ACK's wait); a stale `wire_free`
        // after it was off is in the past and counts as a free wire.
        let on_wire = if self.tcp.enabled() {
            self.ifaces[iface].wire_wait(now, pkt.cost)
        } else {
            Duration::ZERO
        };
        // A controlled flow's ACKs' wait here is part of its round trip (its
        // window's): frames small enough to be pure ACKs are read, once,
        // for that and for a CE mark.
        let may_be_ack = self.tcp.enabled() && pkt.data.len() <= ACK_FRAME_MAX;
        let info = (may_be_ack || pkt.ecn == Ecn::Ce)
            .then(|| sluice_wire::parse(&pkt.data).ok())
            .flatten();
        if self.tcp.enabled() {
            self.tcp.on_queue(iface, pkt.class, pkt.len, false);
            if let (true, Some(info)) = (may_be_ack, &info) {
                if let Ok(h) = TcpHeader::in_frame(&pkt.data, info) {
                    self.tcp.on_sent(iface, info, &h.segment(), wait + on_wire);
                }
            }
        }
        if pkt.ecn == Ecn::Ce {
            if let Some(info) = info {
                let already = info.ip.as_ref().map(|ip| ip.tos & 3 == 3).unwrap_or(true);
                if !already && sluice_wire::set_ecn(&mut pkt.data, &info, Ecn::Ce.bits()).is_ok() {
                    self.ifaces[iface].counters.ecn_marked += 1;
                }
            }
        }
        let c = &mut self.ifaces[iface].counters;
        c.tx_frames += 1;
        c.tx_bytes += pkt.data.len() as u64;
        Some(pkt.data)
    }

    /// Runs what is due at `now` without input (state expiry). The I/O layer
    /// calls it when the timer armed from `poll_timeout` fires, then drains
    /// `poll_tx` on every interface.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clamp(now);
        self.housekeeping(now);
        if self.tcp.enabled() {
            self.tcp.poll(now);
            self.drain_released(now);
        }
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
        for p in self.ifaces.iter().filter_map(|i| i.probe.as_ref()) {
            if let Some(w) = p.next_send(self.last_now) {
                at(w);
            }
        }
        t
    }

    /// The WAN side of `idx`'s bridge pair: where the link that `idx`'s
    /// shaper stands for lies, whichever direction.
    fn wan_side(&self, idx: usize) -> usize {
        match (self.ifaces[idx].lan_side, self.peer[idx]) {
            (true, Some(p)) => p,
            _ => idx,
        }
    }

    /// The interval of the probe sent on `iface`: a hundredth of the
    /// slower shaped direction of its pair (crate::probe).
    fn probe_interval(&self, iface: usize) -> Duration {
        let rates = [Some(iface), self.peer.get(iface).copied().flatten()]
            .into_iter()
            .flatten()
            .filter_map(|i| self.rate(i));
        let slow = rates.min().unwrap_or(Rate(0));
        self.ifaces[iface]
            .probe
            .as_ref()
            .map_or(crate::probe::MIN_INTERVAL, |p| p.interval(slow))
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

    /// Caps the memory queued frames may hold (bytes of
    /// [`Packet::truesize`]); [`DEFAULT_MEMORY_LIMIT`] until set. Frames
    /// already queued stay; new ones are refused while over.
    /// NAT-aware hosts (crate::nat): the engine records the connections
    /// whose original host it needs ([`Engine::take_nat_lookups`]) and
    /// uses the answers ([`Engine::answer_nat_lookup`]) in host isolation.
    pub fn set_nat_hosts(&mut self, on: bool) {
        self.nat.set_on(on);
    }

    pub fn take_nat_lookups(&mut self) -> Vec<crate::nat::NatKey> {
        self.nat.take_lookups()
    }

    pub fn answer_nat_lookup(
        &mut self,
        key: crate::nat::NatKey,
        original: Option<std::net::IpAddr>,
    ) {
        self.nat.answer(key, original);
    }

    /// The two hosts of `ip` for host isolation: the router's end replaced
    /// by the original host where conntrack said (crate::nat); `syn`: a
    /// new TCP connection.
    fn hosts(
        &mut self,
        ip: &sluice_wire::IpInfo,
        egress: usize,
        syn: bool,
    ) -> (std::net::IpAddr, std::net::IpAddr) {
        let toward_lan = self.ifaces[egress].lan_side;
        let original = crate::nat::NatKey::of(ip, toward_lan).and_then(|k| self.nat.lookup(k, syn));
        match (original, toward_lan) {
            (Some(h), true) => (ip.src, h),
            (Some(h), false) => (h, ip.dst),
            (None, _) => (ip.src, ip.dst),
        }
    }

    pub fn set_memory_limit(&mut self, bytes: u64) {
        self.memory.limit_bytes = bytes;
    }

    /// Memory held by queued frames and its cap.
    pub fn memory(&self) -> MemoryReport {
        MemoryReport {
            frames: (0..self.ifaces.len()).map(|i| self.queued(i) as u64).sum(),
            ..self.memory
        }
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

    /// Swaps in a new configuration. Every tree is built first; on any error
    /// nothing changes. Queues that keep their name keep their packets.
    pub fn reload(&mut self, cfg: &ir::Config) -> Result<ReloadReport, BuildError> {
        let mut trees = self.build_trees(cfg)?;
        let now = self.last_now;
        // Held ACKs join their queues first, so the move below keeps them.
        self.tcp.release_all();
        self.drain_released(now);
        let mut report = ReloadReport::default();
        self.classifier.reload_rules(cfg);
        for (idx, new_tree) in trees.iter_mut().enumerate() {
            let mut old: Vec<Packet> = Vec::new();
            let mut old_names: HashMap<ClassId, String> = HashMap::new();
            if let Some(t) = self.ifaces[idx].tree.as_mut() {
                t.root.purge(&mut self.drops);
                old.extend(self.drops.drain(..).map(|d| d.pkt));
                old_names = t.classes.iter().map(|c| (c.id, c.name.clone())).collect();
            }
            for mut pkt in old {
                let target = new_tree.as_ref().and_then(|t| {
                    let name = old_names.get(&pkt.class)?;
                    t.classes.iter().find(|c| &c.name == name).map(|c| c.id)
                });
                match (target, new_tree.as_mut()) {
                    (Some(class), Some(t)) => {
                        pkt.class = class;
                        t.root.enqueue(pkt, now, &mut self.drops);
                        report.kept += 1;
                    }
                    _ => {
                        report.dropped += 1;
                        self.memory.held_bytes =
                            self.memory.held_bytes.saturating_sub(pkt.truesize());
                        self.ifaces[idx].counters.reload_drops += 1;
                        if self.dropped.len() >= DROPPED_BACKLOG_CAP {
                            self.dropped.pop_front();
                        }
                        self.dropped.push_back(DroppedFrame {
                            iface: idx,
                            frame: pkt.data,
                            cause: DropCause::Reload,
                        });
                    }
                }
            }
            // Moving may overflow a smaller new queue: those count as drops.
            let overflow = self.drops.len() as u64;
            report.kept -= overflow.min(report.kept);
            report.dropped += overflow;
            self.absorb_drops(idx);
        }
        self.install(cfg, trees);
        Ok(report)
    }

    /// Changes the rate of interface `iface`'s shaper (the root token
    /// bucket or the pipe) at `now`, with packets waiting: none is lost,
    /// those sent before `now` were paced at the old rate. The root
    /// queue's bandwidth and TCP control's shares that followed it follow;
    /// child classes keep the rates they were built with (docs/autorate.md).
    /// Returns the previous rate. A reload rebuilds the tree at the
    /// configured bandwidth.
    pub fn set_rate(&mut self, iface: usize, rate: Rate, now: Instant) -> Result<Rate, String> {
        let now = self.clamp(now);
        let Some(i) = self.ifaces.get_mut(iface) else {
            return Err(format!("no interface {iface}"));
        };
        let Some(t) = i.tree.as_mut() else {
            return Err(format!(
                "interface {}: no queues to change the rate of",
                i.name
            ));
        };
        if rate == Rate::ZERO {
            return Err(format!(
                "interface {}: rate 0 (a shaper needs a rate)",
                i.name
            ));
        }
        let Some(old) = retune(t, rate, now, &mut self.drops) else {
            return Err(format!("interface {}: its root has no rate", i.name));
        };
        self.tcp.follow_iface_rate(iface, old, rate);
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        Ok(old)
    }

    /// Interface `iface`'s shaper (the root token bucket or the pipe)
    /// sends nothing for `hold` from `now` ([`sluice_sched::Qdisc::hold`]):
    /// autorate's cut of an upload, which lets the queue beyond drain at
    /// the link's rate. Nothing waiting is lost; `false` where the root
    /// has no rate.
    pub fn hold(&mut self, iface: usize, hold: Duration, now: Instant) -> bool {
        let now = self.clamp(now);
        let Some(t) = self.ifaces.get_mut(iface).and_then(|i| i.tree.as_mut()) else {
            return false;
        };
        let held = t.root.hold(hold, now, &mut self.drops);
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        held
    }

    /// The rate interface `iface` is shaped at now (its configured
    /// bandwidth, or the latest [`Engine::set_rate`]).
    pub fn rate(&self, iface: usize) -> Option<Rate> {
        self.ifaces.get(iface)?.tree.as_ref().map(|t| t.bandwidth)
    }

    /// The delay signal of the path through interface `iface` at `now`
    /// (crate::delay_signal) and the samples it has taken.
    pub fn delay_signal(&self, iface: usize, now: Instant) -> Option<(Reading, u64)> {
        let i = self.ifaces.get(iface)?;
        Some((i.signal.read(now), i.signal.samples))
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
                            samples: self.ifaces[self.wan_side(idx)].signal.samples,
                            samples_unsound: self.ifaces[self.wan_side(idx)].signal.unsound,
                            holds: c.holds,
                            held: c.held_for,
                            probe: self.ifaces[self.wan_side(idx)].probe.as_ref().map(|p| {
                                crate::ProbeReport {
                                    target: p.target(),
                                    stats: p.stats,
                                }
                            }),
                            reconfig: a.reconfig,
                            wall_clock: self.wall.is_some(),
                        }
                    }),
                }
            })
            .collect()
    }
}

/// Moves the rate of tree `t`'s root to `rate` at `now` (packets keep
/// waiting), with what follows the interface's rate: the root classes
/// shown at it and the classes paced at it. The old rate, or `None` when
/// the root has none.
fn retune(t: &mut Tree, rate: Rate, now: Instant, drops: &mut Drops) -> Option<Rate> {
    let old = t.bandwidth;
    if !t.root.set_rate(rate, now, drops) {
        return None;
    }
    t.bandwidth = rate;
    for c in t.classes.iter_mut() {
        if c.parent.is_none() && c.bandwidth == Some(old) {
            c.bandwidth = Some(rate);
        }
        if c.pace_rate == old {
            c.pace_rate = rate;
        }
    }
    Some(old)
}
