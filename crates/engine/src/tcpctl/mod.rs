//! TCP control: downloads (or any TCP data) held to their share from the
//! other direction, through the ACKs and windows of their receivers
//! (`ack-pacing`, `window-clamp`; docs/tcp-control.md).
//!
//! # Principles
//!
//! - **Where the backlog goes.** Behind a bottleneck (the modem before
//!   sluice on a download) a shaper can only drop what already crossed it.
//!   A TCP sender sends when ACKs arrive, so releasing a flow's ACKs at the
//!   pace that acknowledges its share of the class's rate clocks its data at
//!   that share: the excess of its window waits as ACKs held here, which
//!   delay nobody else, instead of as data in the shared FIFO before sluice.
//! - **A class's rate, shared fairly.** Each controlled class has one pacer:
//!   a token bucket at the class's rate ([`crate::build::ClassInfo::pace_rate`])
//!   charged, per ACK, with the wire bytes of the data it newly acknowledges
//!   (segments estimated from the MSS, each charged the egress link's
//!   overhead). A pure ACK passes on arrival while its flow has none held and
//!   the bucket is not in debt; otherwise it is held, and held ACKs leave in
//!   deficit round robin between flows (Shreedhar & Varghese 1996), so
//!   backlogged flows get equal shares in bytes.
//! - **The pace follows what the class can send.** Pacing at the class's
//!   configured rate keeps whatever queue the class has, and overfills it
//!   when other traffic (ACKs, UDP) takes part of the rate. So the pace is
//!   adjusted every [`STANDING`]: down by [`DRAIN`] while the class's own
//!   queue *stands* above [`GATE`] (its least backlog over the window —
//!   CoDel's test, RFC 8289 §3: bursts come and go, a standing queue stays),
//!   up by [`RAISE`] of the rate when the queue emptied (the pace was
//!   holding the class back), never above the rate nor below [`MIN_PACE`]
//!   of it. The excess moves into held ACKs.
//! - **And what stands before sluice.** On a download the link's own FIFO
//!   (the modem's) lies before sluice; a pace at the class's rate, a few
//!   per cent under the link, drains a burst there only at that few per
//!   cent, and with many flows their window growth refills it as fast:
//!   it stands, and every host's packets wait in it, isolated or not. On
//!   a LAN-side interface the pacer therefore also reads the queue its
//!   flows' data met on the way in, from their senders' timestamps
//!   ([`crate::owd`], the median over its flows every [`PATH_PERIOD`]):
//!   above [`BEYOND_GATE`] (and two frames' time) it lowers the pace by
//!   [`DRAIN`] per window, no lower than [`BEYOND_FLOOR`] of the rate and
//!   not while the queue is already falling, and raises it again once
//!   that queue is gone (by host too, where its own queue never empties).
//!   A queue [`DEEP_GATE`] past that gate (a host's 32 downloads starting
//!   together put 70 ms there) is cut at once, on the reading, to the pace
//!   that drains it to the gate within [`DRAIN_WITHIN`] (no lower than
//!   [`DEEP_FLOOR`]), and once it is gone the pace is back at
//!   [`BEYOND_FLOOR`] at once: steps of an eighth per window left it
//!   standing 400 ms.
//!   The round trip would not do: it mixes in the wait of the ACKs on the
//!   uplink, which no pace of a download drains.
//! - **Nothing reordered, loss recovery never waits.** Only pure cumulative
//!   ACKs that advance the flow's acknowledged edge are paced. A duplicate
//!   ACK, one with SACK blocks, ECE, data, SYN, FIN, RST or URG, a window
//!   update, or options that cannot be read passes at once — after every ACK
//!   its flow holds, in order (counted as flushed).
//! - **Holding, never dropping.** Held ACKs have a per-flow cap
//!   ([`PER_FLOW_CAP`]), a total cap ([`TOTAL_CAP`]) and a hold limit
//!   ([`MAX_HOLD`]): what reaches one is released (counted as capped), never
//!   lost; where autorate's `reconfig` window begins on the interface,
//!   everything held is released at once (the link stalls 100 ms later:
//!   what the held ACKs let the senders send crosses it first, not at the
//!   first loss in the stall; docs/autorate.md). A steady hold is part of
//!   the sender's RTT, so its RTO (RFC 6298:
//!   SRTT + 4·RTTVAR, at least 200 ms in Linux) grows with it; the limit is
//!   long enough for a flow at its two-segment floor on a slow share (100
//!   uploads on 5 Mbit/s hold each ACK ~0.5 s) and catches ACKs stuck for
//!   any other reason. The engine charges held ACKs to its memory cap like
//!   queued frames.
//! - **Window: what the share needs in flight.** With `window-clamp`, the
//!   window the receiver advertises is lowered to the flow's share × its
//!   round trip without a standing queue, through
//!   [`sluice_wire::tcpwin::WindowClamp`]. That round trip is the sum of
//!   the connection's least RTT (the state's passive RTT of both halves,
//!   sluice to the receiver and back plus sluice to the sender and back, or
//!   the handshake's, the lesser — one half alone is no round trip: an
//!   upload's receiver-side ACKs go to a LAN host a fraction of a
//!   millisecond away), [`SLACK`], two segments' time at the class's
//!   rate (a segment is stored and forwarded by the modem and by sluice: at
//!   490 kbit/s that is 25 ms each, more than the line's RTT) and the
//!   longest the flow's own ACKs recently waited in sluice's queue the
//!   other way (over the last one to two [`EPOCH`]s; behind an upload on a
//!   128 kbit/s line, up to a frame's 100 ms). A window short of that round
//!   trip holds the flow below its share whatever the pace; holding an ACK
//!   is not part of it, so the window cannot grow with the hold. The
//!   clamp's own rules hold (scale from the handshake, right edge never
//!   moves left, at least two segments, unknown flows untouched). Until the
//!   flow's first data the receiver shows at most [`INITIAL_SEGS`] segments
//!   (the SYN included), so flows that start together cannot overrun the
//!   modem with their first flights. The share is the class's rate over
//!   the flows active in the last [`EPOCH`]–2×[`EPOCH`] plus those opened
//!   and not yet moving data (for up to [`PENDING_FOR`]):
//!   connections set up one by one and started together get the share of
//!   all of them before their first flight.
//! - **By host, where the queue isolates hosts.** On a class with
//!   `dual-srchost` or `dual-dsthost` (docs/host-isolation.md) the rate is
//!   shared as its flow queues share it: equally between the hosts with
//!   active or opening flows (the data's source or destination address),
//!   then equally between each host's flows. The window's share is the
//!   class's pace over the hosts, over the host's flows; the held ACKs'
//!   round gives each flow a quantum divided by its host's flows. Host
//!   counts follow the same epochs as the flow counts.
//! - **A flow's class is its data's.** A connection joins the pacer of the
//!   class its data segments are queued in on the way to the receiver; a
//!   receiver's SYN joins it tentatively to the class its data will most
//!   likely use (the interface's default class if controlled, else its first
//!   controlled one), corrected by the first data segment. State per flow
//!   is bounded ([`MAX_FLOWS`]); flows idle for [`FLOW_IDLE`] or reset are
//!   forgotten. Segments this module cannot read pass unmodified.

use crate::build::ClassInfo;
use crate::owd::Owd;
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

    /// The flow moved data (sent some, or had some acknowledged): it counts
    /// among the class's active flows for the share.
    fn mark_active(f: &mut Flow, p: &mut Pacer) {
        if f.epoch != p.epoch {
            f.epoch = p.epoch;
            p.active_cur += 1;
            if let Some(h) = f.host {
                p.host_mut(h).cur += 1;
            }
        }
        Self::settle(f, p);
    }

    /// A SYN-ACK after the flow's SYN: the handshake's round trip beyond
    /// sluice, the flow's and the class's latest.
    fn note_handshake(f: &mut Flow, p: &mut Pacer, now: Instant, seg: &Segment) {
        if seg.flags & SYN_ACK == SYN_ACK && f.handshake_rtt.is_none() {
            f.handshake_rtt = f.syn_at.map(|t| now.saturating_since(t));
            if f.handshake_rtt.is_some() {
                p.recent_rtt = f.handshake_rtt;
            }
        }
    }

    fn uncount_syn(f: &mut Flow, p: &mut Pacer) {
        if f.in_syns {
            f.in_syns = false;
            p.count_syn(f.host, false);
        }
    }

    /// The flow no longer counts as opening in its pacer's share.
    fn settle(f: &mut Flow, p: &mut Pacer) {
        Self::uncount_syn(f, p);
        if f.pending {
            f.pending = false;
            p.pending = p.pending.saturating_sub(1);
            // The host stops counting at the next epoch if nothing else.
            if let Some(h) = f.host.and_then(|h| p.hosts.get_mut(&h)) {
                h.pending = h.pending.saturating_sub(1);
            }
            if let Some(o) = f.opened {
                if let Some(n) = p.opening.get_mut(&o) {
                    *n -= 1;
                    if *n == 0 {
                        p.opening.remove(&o);
                    }
                }
            }
        }
    }

    /// The segment as data on its way to the receiver: joins, moves or
    /// leaves a pacer by the class its payload is queued in. The flow's
    /// [`TcpCtl::allowance`] when it carries data and its window is clamped.
    fn data_role(
        &mut self,
        now: Instant,
        egress: usize,
        class: ClassId,
        key: Key,
        seg: &Segment,
        af: Af,
    ) -> Duration {
        let pacer = self.pacer_of(egress, class);
        let carries = seg.payload_len > 0;
        match (self.flows.contains_key(&key), pacer, carries) {
            (false, Some(p), true) => {
                if !self.admit(now, key, p, af) {
                    return Duration::ZERO;
                }
            }
            (true, None, true) => {
                self.forget(&key);
                return Duration::ZERO;
            }
            (true, Some(p), true) => {
                let f = self.flows.get_mut(&key).expect("checked");
                if f.pacer != p {
                    let old = f.pacer;
                    Self::release_flow(
                        f,
                        &mut self.pacers[old],
                        &mut self.released,
                        &mut self.held,
                        Release::Flushed,
                    );
                    self.pacers[old].report.flows = self.pacers[old].report.flows.saturating_sub(1);
                    Self::settle(f, &mut self.pacers[old]);
                    self.pacers[p].report.flows += 1;
                    f.pacer = p;
                    f.host = self.pacers[p].host_of(&key);
                    f.in_round = false;
                }
            }
            (false, _, _) => return Duration::ZERO,
            (true, _, false) => {}
        }
        let Some(f) = self.flows.get_mut(&key) else {
            return Duration::ZERO;
        };
        let syn = f.seq.syn(Side::Sender, seg);
        if syn == Syn::Forged {
            self.pacers[f.pacer].report.syns_ignored += 1;
            return Duration::ZERO;
        }
        let p = &mut self.pacers[f.pacer];
        if f.seq.record(Side::Sender, seg, syn, f.clamp.right_edge()) {
            f.opened = Some(key.src);
            p.refill(now);
            Self::count_opening(f, p);
        }
        f.clamp.on_sender(seg);
        if let (true, true, Some((tsval, _))) = (p.reads_path, carries, seg.options.timestamps) {
            f.owd.on_data(now, tsval);
        }
        Self::note_handshake(f, p, now, seg);
        p.refill(now);
        f.last = now;
        if carries {
            Self::mark_active(f, p);
        }
        // A window clamped from the handshake on bounds the flow's queue.
        let allowance = if carries && p.ctl.window_clamp && f.clamp.scale().is_some() {
            Self::allowance(f, p)
        } else {
            Duration::ZERO
        };
        if seg.flags & tcp_flags::RST != 0 {
            self.forget(&key);
        }
        allowance
    }

    /// The segment as the receiver's answer: window clamp, then pacing.
    fn ack_role(
        &mut self,
        now: Instant,
        key: Key,
        seg: &Segment,
        frame: &mut [u8],
        info: &PacketInfo,
        rtt_path: Option<Duration>,
    ) -> Plan {
        let Some(f) = self.flows.get_mut(&key) else {
            return Plan::Forward;
        };
        let p = &mut self.pacers[f.pacer];
        let syn = f.seq.syn(Side::Receiver, seg);
        if syn == Syn::Forged {
            p.report.syns_ignored += 1;
            return Plan::Forward;
        }
        p.refill(now);
        if f.seq.record(Side::Receiver, seg, syn, None) {
            f.opened = Some(key.dst);
            Self::count_opening(f, p);
        }
        f.last = now;
        // The receiver's SYN-ACK answers the sender's SYN (an upload's).
        Self::note_handshake(f, p, now, seg);
        let signed = info.ip.as_ref().is_some_and(|ip| ip.authenticated);
        if seg.options.error.is_some() || seg.options.authenticated || signed {
            // Unreadable options: nothing is rewritten (what the peer makes
            // of them is unknown); a signed segment would be dropped by
            // its receiver. The segment passes at once.
            f.clamp.on_receiver(seg, None);
            p.report.windows_untouched += 1;
        } else if p.ctl.window_clamp {
            let syn = seg.flags & tcp_flags::SYN != 0;
            let opening = seg.flags & tcp_flags::SYN != 0 || f.epoch == NEVER_MOVED;
            let share = if opening {
                p.opening_share(f.host)
            } else {
                p.share(f.host)
            };
            let rtt = match (rtt_path, f.handshake_rtt) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).or(p.recent_rtt).unwrap_or(RTT_UNKNOWN),
            };
            let round = rtt + Self::allowance(f, p);
            let mut target = u32::try_from(share.bytes_in(round)).unwrap_or(u32::MAX);
            if syn || f.epoch == NEVER_MOVED {
                // The window shown before the first data is the sender's
                // first flight, sent before any ACK can be held.
                let most = match f.af {
                    Af::V4 => MAX_MSS_V4,
                    Af::V6 => MAX_MSS_V6,
                };
                let mss = seg.options.mss.map_or(f.clamp.mss(), |m| m.min(most));
                target = target.min(INITIAL_SEGS * u32::from(mss));
            }
            match f.clamp.on_receiver(seg, Some(target)) {
                WinVerdict::Keep => {}
                WinVerdict::Rewrite(field) => {
                    if rewrite_window(frame, info, field).is_ok() {
                        p.report.windows_clamped += 1;
                    }
                }
                WinVerdict::Pass(_) => p.report.windows_untouched += 1,
            }
        } else {
            f.clamp.on_receiver(seg, None);
        }
        let flags = seg.flags;
        let ack = (flags & tcp_flags::ACK != 0).then_some(seg.ack);
        let advance = match ack.map(|a| (a, f.seq.acked(a, f.last_ack))) {
            Some((a, Acked::Advance(n))) => {
                f.last_ack = Some(a);
                f.acked += u64::from(n);
                Self::mark_active(f, p);
                Some(n)
            }
            Some((_, Acked::Unsent)) => {
                // Acknowledges data never sent: the sender ignores it, and
                // so does the pacer.
                p.report.acks_unsent += 1;
                None
            }
            Some((a, Acked::Nothing)) => {
                let sent = f.seq.snd_max().is_none_or(|m| !seq_after(a, m));
                if f.last_ack.is_none() && sent {
                    f.last_ack = Some(a);
                }
                None
            }
            None => None,
        };
        let special =
            tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST | tcp_flags::URG | tcp_flags::ECE;
        let pure = flags & special == 0
            && seg.payload_len == 0
            && seg.options.error.is_none()
            && seg.options.sack_blocks().is_empty();
        if flags & tcp_flags::RST != 0 {
            self.forget(&key);
            return Plan::Forward;
        }
        if p.ctl.ack_pacing {
            if let (true, Some(acked)) = (pure, advance) {
                let cost = Self::cost(f, p, acked);
                return Plan::Pace(PaceTicket { key, cost });
            }
        }
        Self::release_flow(f, p, &mut self.released, &mut self.held, Release::Flushed);
        Plan::Forward
    }

    /// A connection whose handshake just completed counts among its
    /// pacer's opening flows (it shares the class before it moves data),
    /// unless the host that opened it already has [`OPENING_PER_HOST`].
    fn count_opening(f: &mut Flow, p: &mut Pacer) {
        Self::uncount_syn(f, p);
        let (Some(opener), NEVER_MOVED, false) = (f.opened, f.epoch, f.pending) else {
            return;
        };
        let n = p.opening.entry(opener).or_default();
        if *n >= OPENING_PER_HOST {
            return;
        }
        *n += 1;
        f.pending = true;
        p.pending += 1;
        if let Some(h) = f.host {
            p.host_mut(h).pending += 1;
        }
    }

    /// Wire bytes of `acked` bytes of data: whole segments of the flow's MSS,
    /// each with its headers and the data link's overhead; no more than the
    /// bucket's depth, so no one ACK (however much it claims) puts the class
    /// in debt beyond a burst.
    fn cost(f: &Flow, p: &Pacer, acked: u32) -> u64 {
        let mss = Self::mss(f);
        let hdr = match f.af {
            Af::V4 => 14 + 20 + 32,
            Af::V6 => 14 + 40 + 32,
        };
        let per_seg = u64::from(p.overhead.cost(mss + hdr)) - u64::from(mss);
        let segs = u64::from(acked.div_ceil(mss));
        (u64::from(acked) + segs * per_seg).min(p.burst_bytes())
    }

    /// The flow's MSS from its handshake (at least RFC 9293's default of
    /// its family: a receiver announcing a tiny one would multiply its
    /// ACKs' charge in headers), else the usual one.
    fn mss(f: &Flow) -> u32 {
        let (least, usual) = match f.af {
            Af::V4 => (536, 1448),
            Af::V6 => (1220, 1428),
        };
        if f.clamp.scale().is_some() {
            u32::from(f.clamp.mss()).max(least)
        } else {
            usual
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
