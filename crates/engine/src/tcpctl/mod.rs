//! TCP control: downloads (or any TCP data) held to their share from the
//! other direction, through the ACKs and windows of their receivers
//! (`ack-pacing`, `window-clamp`). docs/tcp-control.md is the reference:
//! what is paced, the window's round trip, the caps, and the defences
//! against hostile peers.
//!
//! # Principles
//!
//! - **Where the backlog goes.** A TCP sender sends when ACKs arrive, so
//!   releasing a flow's ACKs at its share of the class's rate clocks its
//!   data at that share: the excess waits as ACKs held here, which delay
//!   nobody else, not as data in the shared FIFO before sluice.
//! - **One pacer per class** ([`pacer`]): a token bucket at the class's
//!   pace, charged per ACK the wire bytes it newly acknowledges — at most
//!   what the sender sent ([`seq`]) and at most a burst; its debt is
//!   bounded. Held ACKs leave in deficit round robin by flow, or by host
//!   then flow ([`round`]). The pace follows the class's own queue and the
//!   queue before sluice read from the senders' timestamps ([`crate::owd`],
//!   voted by network, [`crate::votes`]).
//! - **Window: what the share needs in flight.** `window-clamp` lowers the
//!   receiver's window to share × (least round trip, slack, two segments'
//!   time and the ACKs' own wait), through [`WindowClamp`]; shares are max-min
//!   fair over the flows' demand ([`share`]), counting connections whose
//!   handshake completed and have yet to move data.
//! - **Nothing reordered, loss recovery never waits, nothing dropped.**
//!   Only pure ACKs that advance the edge are paced; anything else passes
//!   at once behind its flow's held ACKs. Caps release, never drop.
//! - **Only the connection's own segments steer it.** Flows are keyed by
//!   the interface their data comes in on; past the handshake a SYN is
//!   ignored; an ACK of data never sent is neither paced nor charged;
//!   signed segments (TCP-MD5, TCP-AO, IPv6 AH) are never rewritten.

use crate::build::ClassInfo;
use crate::path::owd::Owd;
use crate::report::TcpControlReport;
use crate::votes::{network, tally, Voter};
use sluice_conf::ir;
use sluice_sched::{ClassId, Packet};
use sluice_time::{Duration, Instant, Overhead, Rate};
use sluice_wire::tcp::{rewrite_window, seq_after, Segment};
use sluice_wire::tcpwin::{Verdict as WinVerdict, WindowClamp, MAX_MSS_V4, MAX_MSS_V6};
use sluice_wire::{tcp_flags, Af, PacketInfo};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

mod flow;
mod pacer;
mod roles;
mod round;
mod seq;
mod share;

use flow::{Flow, Held, HeldCount, Key, Release};
use pacer::Pacer;
use seq::{Acked, SeqTrack, Side, Syn};

/// Connections tracked at once; beyond, new ones pass uncontrolled.
pub const MAX_FLOWS: usize = 65_536;
/// ACKs one flow may hold; the oldest is released beyond.
pub const PER_FLOW_CAP: usize = 128;
/// ACKs held in all; a newcomer beyond passes (after its flow's held ones).
pub const TOTAL_CAP: usize = 16_384;
/// Longest an ACK is held.
pub const MAX_HOLD: Duration = Duration::from_secs(1);
/// Forget a flow after this long without a segment.
pub const FLOW_IDLE: Duration = Duration::from_secs(60);
/// Flows active within one to two epochs share the class.
pub const EPOCH: Duration = Duration::from_millis(250);
/// A connection shares its class from its SYN until it moves data, for at
/// most this long (plus up to a second of housekeeping): long enough for
/// 200 connections set up one after another before they all start, short
/// enough that one opened and left idle soon stops taking a share.
pub const PENDING_FOR: Duration = Duration::from_secs(3);
/// Opening flows one host may count in a class's share: connections set up
/// together by one application (iperf3 -P 128, a page's fetches), not a
/// flood of handshakes.
pub const OPENING_PER_HOST: u32 = 256;
/// A connection whose handshake never completed and that moved no data is
/// forgotten after this long without a segment (what a SYN flood leaves).
pub const EMBRYONIC_IDLE: Duration = Duration::from_secs(5);
/// Window beyond share × RTT: room for the sender's bursts and RTT jitter.
pub const SLACK: Duration = Duration::from_millis(10);
/// RTT assumed for the window when neither the state, the handshake nor
/// the class's other flows gave one.
pub const RTT_UNKNOWN: Duration = Duration::from_millis(50);
/// A receiver's SYN advertises at most this many segments.
pub const INITIAL_SEGS: u32 = 4;
/// `Flow::epoch` of a flow that has not moved data yet.
const NEVER_MOVED: u64 = u64::MAX;
const SYN_ACK: u8 = tcp_flags::SYN | tcp_flags::ACK;
/// Deficit round robin quantum (bytes of acknowledged data).
const QUANTUM: i64 = 1514;
/// A single ACK's DRR charge is capped so one huge cumulative ACK cannot
/// make the round spin.
const MAX_CHARGE: i64 = 64 * 1024;
/// Turns of a pacer's round in one poll: far more than one poll releases
/// at any rate, a bound on the loop should a round go wrong.
const MAX_SPINS: u32 = 1_000_000;
/// Each [`STANDING`] window with the class's queue standing above its gate
/// takes this fraction off the pace (down to [`MIN_PACE`] of the rate); a
/// window in which the queue emptied adds [`RAISE`] of the rate back.
const DRAIN: (u64, u64) = (1, 8);
const RAISE: (u64, u64) = (1, 16);
const MIN_PACE: (u64, u64) = (1, 4);
/// A queue before sluice lowers the pace to no less than this of the rate:
/// the link then drains it at a quarter of its rate, and a reading that
/// lags costs no more.
const BEYOND_FLOOR: (u64, u64) = (3, 4);
/// A queue before sluice deep past its gate is drained to the gate within
/// this long: the pace goes under the rate by the excess over it…
const DRAIN_WITHIN: Duration = Duration::from_millis(100);
/// …to no less than this of the rate.
const DEEP_FLOOR: (u64, u64) = (1, 2);
/// A queue before sluice deeper than this past its gate is cut at once, on
/// the reading, not at the end of the [`STANDING`] window.
const DEEP_GATE: Duration = Duration::from_millis(20);
/// A queue before sluice standing above this (and two frames' time at the
/// class's rate) slows the pace. Under CoDel's 5 ms (RFC 8289 §4.4): the
/// reading is a least value over 100 ms in the sender's 1 ms steps, and
/// a ping waits for the queue's mean, not its least (in virtual time a 5 ms
/// gate left a 10 ms mean standing, 3 ms a 5 ms mean for 3 % of the link).
const BEYOND_GATE: Duration = Duration::from_millis(3);
/// How often the queue before sluice is read over the flows.
const PATH_PERIOD: Duration = Duration::from_millis(25);
/// The gate: this long at the class's rate, at least three full frames.
const GATE: Duration = Duration::from_millis(4);
/// A queue stands when its least backlog over this long is above the gate
/// (CoDel's view, RFC 8289 §3: bursts come and go, a standing queue stays).
const STANDING: Duration = Duration::from_millis(100);
/// Bucket depth: this long at the class's rate, at least two full frames.
const BURST: Duration = Duration::from_millis(4);
/// The bucket's debt is at most this many bursts (see [`Pacer::charge`]).
const DEBT_BURSTS: i128 = 2;
/// How often held ACKs are checked against [`MAX_HOLD`].
const HOLD_SCAN: Duration = Duration::from_millis(10);
/// Token units per byte: credit is kept in bit·ns per second (rate × ns),
/// so refills at any rate and any interval are exact.
const UNITS_PER_BYTE: i128 = 8 * 1_000_000_000;

/// What the engine does with a TCP segment after [`TcpCtl::on_segment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Queue it now (earlier held ACKs of its flow, if any, were released
    /// first: drain [`TcpCtl::take_released`] before queueing it).
    Forward,
    /// A pure ACK to pace: hand the built packet to [`TcpCtl::pace`].
    Pace(PaceTicket),
}

/// A paced ACK's flow and charge, from [`TcpCtl::on_segment`] to [`TcpCtl::pace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PaceTicket {
    key: Key,
    cost: u64,
}

/// Every controlled class's pacer and the connections under control.
#[derive(Default)]
pub(crate) struct TcpCtl {
    pacers: Vec<Pacer>,
    /// `index[iface][class]`: the pacer of a class, looked up on every
    /// packet of a controlled interface.
    index: Vec<Vec<Option<usize>>>,
    flows: HashMap<Key, Flow>,
    held: HeldCount,
    released: VecDeque<(usize, Packet)>,
    next_hold_scan: Instant,
    next_sweep: Instant,
    /// When [`TcpCtl::read_paths`] is next due.
    next_path: Instant,
    /// The last look at demand ([`TcpCtl::look_at_demand`]).
    looked: Instant,
    /// Connections refused because [`MAX_FLOWS`] were tracked.
    pub refused_flows: u64,
    /// Turns of the held ACKs' rounds (work per paced byte, for tests).
    pub spins: u64,
}

impl TcpCtl {
    /// Any class under control: the engine skips everything here otherwise.
    pub fn enabled(&self) -> bool {
        !self.pacers.is_empty()
    }

    /// (Re)builds the pacers from the interfaces' trees: `(classes,
    /// overhead)` per interface index. Held ACKs must have been released
    /// ([`TcpCtl::release_all`]) and drained first. Counters of a class that
    /// keeps its name and interface carry over; flows start afresh.
    /// A runtime rate change of interface `iface` from `old` to `new`
    /// (autorate): the pacers that share the interface's rate (none of
    /// their class's own) share the new one; their state is kept.
    pub fn follow_iface_rate(&mut self, iface: usize, old: Rate, new: Rate) {
        for p in self
            .pacers
            .iter_mut()
            .filter(|p| p.iface == iface && p.rate == old)
        {
            p.rate = new;
            p.pace_bps = p.pace_bps.min(new.as_bps()).max(1);
        }
    }

    pub fn configure(&mut self, now: Instant, ifaces: &[(&[ClassInfo], Overhead, bool)]) {
        debug_assert!(self.held.total == 0);
        let old = std::mem::take(&mut self.pacers);
        for (iface, (classes, overhead, lan_side)) in ifaces.iter().enumerate() {
            for c in classes.iter().filter(|c| c.leaf && c.tcp.any()) {
                let report = old
                    .iter()
                    .find(|p| p.iface == iface && p.name == c.name)
                    .map(|p| TcpControlReport {
                        flows: 0,
                        held_now: 0,
                        ..p.report
                    })
                    .unwrap_or_default();
                let burst_bytes = (c.pace_rate.bytes_in(BURST) as i128).max(2 * 1514);
                self.pacers.push(Pacer {
                    iface,
                    class: c.id,
                    name: c.name.clone(),
                    ctl: c.tcp,
                    rate: c.pace_rate,
                    overhead: *overhead,
                    tokens: burst_bytes * UNITS_PER_BYTE,
                    burst: burst_bytes * UNITS_PER_BYTE,
                    refilled: now,
                    round: round::Round::default(),
                    epoch: 0,
                    epoch_start: now,
                    active_cur: 0,
                    active_prev: 0,
                    pending: 0,
                    recent_rtt: None,
                    backlog: 0,
                    gate: c.pace_rate.bytes_in(GATE).max(3 * 1514),
                    window_min: 0,
                    window_start: now,
                    pace_bps: c.pace_rate.as_bps(),
                    report,
                    // Triple isolation is refused with TCP control (conf).
                    by_host: c.isolate.filter(|m| *m != ir::HostIsolation::Both),
                    hosts: HashMap::new(),
                    opening: HashMap::new(),
                    syns: 0,
                    syn_hosts: HashMap::new(),
                    light: (0, 0),
                    light_hosts: (0, 0),
                    hosts_sharing: 0,
                    reads_path: *lan_side,
                    beyond: None,
                    beyond_drained: None,
                    // An ACK releases two segments back to back, so the
                    // second waits a frame by construction; on a slow
                    // line, behind an upload, the ACKs come in pairs.
                    beyond_gate: c.pace_rate.tx_time(2 * 1514).max(BEYOND_GATE),
                });
            }
        }
        self.index.clear();
        for (i, p) in self.pacers.iter().enumerate() {
            if self.index.len() <= p.iface {
                self.index.resize(p.iface + 1, Vec::new());
            }
            let row = &mut self.index[p.iface];
            let c = p.class.0 as usize;
            if row.len() <= c {
                row.resize(c + 1, None);
            }
            row[c] = Some(i);
        }
        self.flows.clear();
    }

    fn pacer_of(&self, iface: usize, class: ClassId) -> Option<usize> {
        *self.index.get(iface)?.get(class.0 as usize)?
    }

    /// The pacer a new connection's data arriving later through `iface` most
    /// likely uses: the default class's if controlled, else the first.
    fn likely_pacer(&self, iface: usize, default: ClassId) -> Option<usize> {
        self.pacer_of(iface, default)
            .or_else(|| self.pacers.iter().position(|p| p.iface == iface))
    }

    /// Looks at a TCP segment (`seg`, read from `frame`) that arrived on `ingress` and leaves through
    /// `egress` in `class` of that interface's tree (`ingress_default`,
    /// `egress_default`: the default classes of the two trees).
    /// `rtt_path`: the connection's least round trip end to end as sluice
    /// sees it (both halves; [`sluice_classify::Decision::rtt_path`]).
    /// May rewrite its window; may release its flow's held ACKs (to be
    /// queued before it). Also returns the standing delay the flow's window
    /// allows its data here ([`TcpCtl::allowance`]; zero unless the segment
    /// carries data of a flow whose window is clamped), for the packet's
    /// [`Packet::allowance_ms`].
    #[allow(clippy::too_many_arguments)]
    pub fn on_segment(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        class: ClassId,
        ingress_default: Option<ClassId>,
        egress_default: Option<ClassId>,
        frame: &mut [u8],
        info: &PacketInfo,
        seg: &Segment,
        rtt_path: Option<Duration>,
    ) -> (Plan, Duration) {
        let (Some(ip), Some((sport, dport))) = (info.ip.as_ref(), info.ip.and_then(|i| i.ports()))
        else {
            return (Plan::Forward, Duration::ZERO);
        };
        // Keyed by the interface the data comes in on: a segment forged
        // into the other port (a LAN host posing as the server) is no
        // segment of the connection.
        let data_key = Key {
            src: ip.src,
            sport,
            dst: ip.dst,
            dport,
            data_in: ingress,
        };
        let ack_key = Key {
            src: ip.dst,
            sport: dport,
            dst: ip.src,
            dport: sport,
            data_in: egress,
        };
        if seg.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN {
            // A connection opens: its data may come back through `ingress`
            // (this SYN's sender receives) or leave through `egress` (it
            // sends). Each direction with a controlled class is tracked from
            // here, so the clamp sees both handshake segments.
            let back = ingress_default.and_then(|d| self.likely_pacer(ingress, d));
            let forth = egress_default.and_then(|d| self.likely_pacer(egress, d));
            // Past its handshake a connection ignores SYNs (seq.rs); a
            // new attempt starts it afresh. It counts among the opening
            // flows only once its handshake completes.
            for (key, p, side) in [
                (ack_key, back, Side::Receiver),
                (data_key, forth, Side::Sender),
            ] {
                let Some(p) = p else { continue };
                let forged = self
                    .flows
                    .get(&key)
                    .is_some_and(|f| f.seq.syn(side, seg) == Syn::Forged);
                if forged {
                    continue;
                }
                self.forget(&key);
                if self.admit(now, key, p, ip.af) {
                    self.pacers[p].refill(now);
                    if let Some(f) = self.flows.get_mut(&key) {
                        f.syn_at = Some(now);
                        f.in_syns = true;
                        self.pacers[p].count_syn(f.host, true);
                    }
                }
            }
        }
        if now.saturating_since(self.looked) >= EPOCH {
            self.look_at_demand(now);
        }
        let allowance = self.data_role(now, egress, class, data_key, seg, ip.af);
        let plan = self.ack_role(now, ack_key, seg, frame, info, rtt_path);
        (plan, allowance)
    }

    /// The standing delay `f`'s window allows beyond its least round trip:
    /// [`SLACK`], two segments' time at the class's rate and the longest
    /// its ACKs recently waited here the other way. Its window is share ×
    /// (least RTT + this), so its data's queue here stays within it; the
    /// AQM takes it as the flow's target ([`sluice_sched::codel`]), and
    /// does not cut the sender's congestion window below that window.
    fn allowance(f: &Flow, p: &Pacer) -> Duration {
        let segment = Self::cost(f, p, Self::mss(f));
        SLACK + p.rate.tx_time(2 * segment) + f.ack_wait(p.epoch)
    }

    fn admit(&mut self, now: Instant, key: Key, pacer: usize, af: Af) -> bool {
        if self.flows.len() >= MAX_FLOWS {
            self.refused_flows += 1;
            return false;
        }
        self.pacers[pacer].report.flows += 1;
        let host = self.pacers[pacer].host_of(&key);
        self.flows.insert(
            key,
            Flow {
                pacer,
                clamp: WindowClamp::new(af),
                af,
                last_ack: None,
                held: VecDeque::new(),
                deficit: 0,
                in_round: false,
                epoch: NEVER_MOVED,
                last: now,
                syn_at: None,
                handshake_rtt: None,
                pending: false,
                opened: None,
                in_syns: false,
                seq: SeqTrack::default(),
                acked: 0,
                host,
                ack_wait: [Duration::ZERO; 2],
                wait_epoch: self.pacers[pacer].epoch,
                owd: Owd::default(),
                recover: None,
            },
        );
        true
    }

    /// Releases a flow's held ACKs and drops its state.
    fn forget(&mut self, key: &Key) {
        if let Some(mut f) = self.flows.remove(key) {
            let p = &mut self.pacers[f.pacer];
            p.report.flows = p.report.flows.saturating_sub(1);
            Self::settle(&mut f, p);
            Self::release_flow(
                &mut f,
                p,
                &mut self.released,
                &mut self.held,
                Release::Flushed,
            );
        }
    }

    /// One held ACK into `released`, charged to the pacer and counted.
    fn release(
        h: Held,
        p: &mut Pacer,
        released: &mut VecDeque<(usize, Packet)>,
        held: &mut HeldCount,
        why: Release,
    ) {
        p.charge(h.cost);
        let r = &mut p.report;
        *match why {
            Release::Paced => &mut r.acks_paced,
            Release::Flushed => &mut r.acks_flushed,
            Release::Capped => &mut r.acks_capped,
        } += 1;
        r.held_now = r.held_now.saturating_sub(1);
        held.dec(h.egress);
        released.push_back((h.egress, h.pkt));
    }

    /// Every ACK `f` holds, in order, into `released`.
    fn release_flow(
        f: &mut Flow,
        p: &mut Pacer,
        released: &mut VecDeque<(usize, Packet)>,
        held: &mut HeldCount,
        why: Release,
    ) {
        for h in f.held.drain(..) {
            Self::release(h, p, released, held, why);
        }
    }

    /// The built packet of a [`Plan::Pace`] segment: `Some` to queue it now,
    /// `None` when held (the engine then owns nothing; it comes back through
    /// [`TcpCtl::take_released`]).
    pub fn pace(
        &mut self,
        now: Instant,
        t: PaceTicket,
        egress: usize,
        pkt: Packet,
    ) -> Option<Packet> {
        let Some(f) = self.flows.get_mut(&t.key) else {
            return Some(pkt);
        };
        let p = &mut self.pacers[f.pacer];
        p.refill(now);
        if f.held.is_empty() && p.tokens >= 0 {
            p.charge(t.cost);
            p.report.acks_passed += 1;
            return Some(pkt);
        }
        if self.held.total >= TOTAL_CAP {
            // Full: this one passes, after its flow's held ones.
            Self::release_flow(f, p, &mut self.released, &mut self.held, Release::Capped);
            p.charge(t.cost);
            p.report.acks_capped += 1;
            return Some(pkt);
        }
        if f.held.len() >= PER_FLOW_CAP {
            if let Some(h) = f.held.pop_front() {
                Self::release(h, p, &mut self.released, &mut self.held, Release::Capped);
            }
        }
        f.held.push_back(Held {
            pkt,
            egress,
            cost: t.cost,
            since: now,
        });
        self.held.inc(egress);
        p.report.acks_held += 1;
        p.report.held_now += 1;
        if !f.in_round {
            f.in_round = true;
            p.round.join(t.key, f.host, f);
        }
        None
    }

    /// Releases what is due at `now` into [`TcpCtl::take_released`].
    pub fn poll(&mut self, now: Instant) {
        if now >= self.next_path && self.reads_paths() {
            self.next_path = now + PATH_PERIOD;
            self.read_paths(now);
        }
        if self.held.total == 0 {
            return;
        }
        for p in &mut self.pacers {
            p.refill(now);
            // Each spin releases an ACK or ends a turn of a quantum (round.rs).
            let mut spins = 0u32;
            while p.tokens >= 0 && spins < MAX_SPINS {
                spins += 1;
                let key = match p.round.next(&mut self.flows) {
                    round::Next::Release(key) => key,
                    round::Next::Again => continue,
                    round::Next::Empty => break,
                };
                let Some(f) = self.flows.get_mut(&key) else {
                    continue;
                };
                let Some(h) = f.held.pop_front() else {
                    continue;
                };
                p.round.released(key, f.host, h.cost, f);
                Self::release(h, p, &mut self.released, &mut self.held, Release::Paced);
            }
            self.spins += u64::from(spins);
        }
        if now >= self.next_hold_scan {
            self.next_hold_scan = now + HOLD_SCAN;
            for p in &mut self.pacers {
                let keys: Vec<Key> = p.round.keys().collect();
                for key in keys {
                    let Some(f) = self.flows.get_mut(&key) else {
                        continue;
                    };
                    while f.held.front().is_some_and(|h| h.since + MAX_HOLD <= now) {
                        let h = f.held.pop_front().expect("checked");
                        Self::release(h, p, &mut self.released, &mut self.held, Release::Capped);
                    }
                }
            }
        }
    }

    /// Forgets idle flows (once a second at most).
    pub fn housekeeping(&mut self, now: Instant) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + Duration::from_secs(1);
        let pacers = &mut self.pacers;
        self.flows.retain(|_, f| {
            let idle = if f.seq.established() || f.epoch != NEVER_MOVED {
                FLOW_IDLE
            } else {
                EMBRYONIC_IDLE
            };
            let keep = !f.held.is_empty() || f.last + idle > now;
            let p = &mut pacers[f.pacer];
            if !keep {
                p.report.flows = p.report.flows.saturating_sub(1);
            }
            if !keep || f.syn_at.is_some_and(|t| t + PENDING_FOR <= now) {
                Self::settle(f, p);
            }
            keep
        });
    }

    /// Every held ACK released now (before a reload, or on demand).
    pub fn release_all(&mut self) {
        self.release_where(|_| true);
    }

    /// Every ACK held by the pacers of interface `iface`'s classes released
    /// now (counted as flushed): a `reconfig` window begins there, and what
    /// the held ACKs let the senders send crosses the link before it
    /// stalls, instead of at the first drop in the stall.
    pub fn release_iface(&mut self, iface: usize) {
        self.release_where(|p| p.iface == iface);
    }

    fn release_where(&mut self, which: impl Fn(&Pacer) -> bool) {
        for f in self.flows.values_mut() {
            let p = &mut self.pacers[f.pacer];
            if which(p) {
                Self::release_flow(f, p, &mut self.released, &mut self.held, Release::Flushed);
                f.in_round = false;
            }
        }
        for p in self.pacers.iter_mut().filter(|p| which(p)) {
            p.round.clear();
        }
    }

    /// `bytes` joined (`true`) or left the queue of `class` on `iface`.
    pub fn on_queue(&mut self, iface: usize, class: ClassId, bytes: u32, joined: bool) {
        if let Some(i) = self.pacer_of(iface, class) {
            let p = &mut self.pacers[i];
            p.backlog = if joined {
                p.backlog + u64::from(bytes)
            } else {
                p.backlog.saturating_sub(u64::from(bytes))
            };
            p.window_min = p.window_min.min(p.backlog);
        }
    }

    /// A TCP segment (`seg` of `info`) left sluice's queue after `wait`
    /// there: if it is a pure ACK of a controlled flow, how long its ACKs
    /// wait here now (part of the flow's round trip, for its window).
    pub fn on_sent(&mut self, egress: usize, info: &PacketInfo, seg: &Segment, wait: Duration) {
        let special = tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST;
        if seg.flags & (special | tcp_flags::ACK) != tcp_flags::ACK || seg.payload_len > 0 {
            return;
        }
        let (Some(ip), Some((sport, dport))) = (info.ip.as_ref(), info.ip.and_then(|i| i.ports()))
        else {
            return;
        };
        let key = Key {
            src: ip.dst,
            sport: dport,
            dst: ip.src,
            dport: sport,
            data_in: egress,
        };
        if let Some(f) = self.flows.get_mut(&key) {
            let epoch = self.pacers[f.pacer].epoch;
            f.note_ack_wait(epoch, wait);
        }
    }

    /// A released ACK: (egress interface, packet), oldest first.
    pub fn take_released(&mut self) -> Option<(usize, Packet)> {
        self.released.pop_front()
    }

    /// Each pacer's light flows (and hosts) since the last look: what
    /// they used keeps the shares max-min fair ([`share`]). One pass over
    /// the flows every [`EPOCH`] (65 536 at most: a bounded sweep four
    /// times a second, not per packet).
    fn look_at_demand(&mut self, now: Instant) {
        let dt = now.saturating_since(self.looked);
        self.looked = now;
        let mut flows: Vec<Vec<u64>> = vec![Vec::new(); self.pacers.len()];
        let mut hosts: Vec<HashMap<IpAddr, u64>> = vec![HashMap::new(); self.pacers.len()];
        for f in self.flows.values_mut() {
            let bytes = std::mem::take(&mut f.acked);
            // Opening flows are not light (they are about to start), and
            // flows idle for two epochs no longer share at all.
            let epoch = self.pacers[f.pacer].epoch;
            if f.epoch == NEVER_MOVED || f.pending || f.epoch.saturating_add(1) < epoch {
                continue;
            }
            flows[f.pacer].push(bytes);
            if let Some(h) = f.host {
                *hosts[f.pacer].entry(h).or_default() += bytes;
            }
        }
        for (i, p) in self.pacers.iter_mut().enumerate() {
            let (eq, eq_host) = (p.equal_bps(false), p.equal_bps(true));
            let f = share::light_use(flows[i].iter().copied(), dt, eq);
            let busy = |h: &IpAddr| p.hosts.get(h).is_some_and(|k| k.pending > 0);
            let h = share::light_use(
                hosts[i].iter().filter(|(h, _)| !busy(h)).map(|(_, b)| *b),
                dt,
                eq_host,
            );
            p.note_demand(f, h);
        }
    }

    /// Each pacer that reads the path before sluice takes the vote of its
    /// flows' standing queues there ([`crate::owd`]) by their senders'
    /// networks ([`crate::votes`]): neither a minority of slow or distant
    /// senders nor one sender's many flows can move it. One network
    /// suffices here: a pacer's cut slows its own class's ACKs, and with
    /// the sender alone in the class, only that sender's data.
    fn read_paths(&mut self, now: Instant) {
        let mut per: Vec<Vec<(Voter, Duration)>> = vec![Vec::new(); self.pacers.len()];
        for (k, f) in &self.flows {
            if let Some(d) = f.owd.standing(now) {
                per[f.pacer].push((network(k.src), d));
            }
        }
        for (p, v) in self.pacers.iter_mut().zip(per) {
            p.beyond = tally(v, 1).delay;
            p.on_path_reading();
        }
    }

    /// Whether some pacer reads the path before sluice and has flows to
    /// read it from.
    fn reads_paths(&self) -> bool {
        !self.flows.is_empty() && self.pacers.iter().any(|p| p.reads_path)
    }

    /// When [`TcpCtl::poll`] next has something to do.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let path = self.reads_paths().then_some(self.next_path);
        if self.held.total == 0 {
            return path;
        }
        let mut t = path.map_or(self.next_hold_scan, |p| p.min(self.next_hold_scan));
        for p in self.pacers.iter().filter(|p| !p.round.is_empty()) {
            t = t.min(p.ready_at());
        }
        Some(t)
    }

    /// ACKs held for interface `iface`.
    pub fn held_for(&self, iface: usize) -> usize {
        self.held.per_iface.get(iface).copied().unwrap_or(0)
    }

    /// The report of class `class` on `iface`, if it is under control.
    pub fn report(&self, iface: usize, class: ClassId) -> Option<TcpControlReport> {
        self.pacer_of(iface, class).map(|i| {
            let p = &self.pacers[i];
            TcpControlReport {
                pace_bps: p.pace_bps,
                path_queue: p.beyond,
                ..p.report
            }
        })
    }
}
