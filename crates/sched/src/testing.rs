//! Op-sequence model checking for any [`Qdisc`].
//!
//! A random sequence of operations (enqueue, dequeue, peek, advance time, step
//! time backwards, purge) is applied to a discipline while a simple model keeps
//! the set of resident packets. After every step the contract of [`Qdisc`] is
//! asserted. Runs as a unit/property test (seeded, deterministic) and can be
//! driven from a fuzz target with raw bytes via [`check_bytes`].
//!
//! Also home of the leaves that tests and benches put under classful
//! disciplines: [`fifo_leaf`] (the real FIFO), [`DropTail`] (a bare one) and
//! [`Lossy`] (one that drops at dequeue and peek, as an AQM does).

// The model checks `len()` itself: `is_empty()` is derived from it and may be
// overridden, so comparing `len()` with zero is the point here.
#![allow(clippy::len_zero)]

use crate::{ClassId, DropReason, Dropped, Drops, Ecn, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant};
use std::collections::{HashMap, HashSet, VecDeque};

/// What the generator may produce; tune per discipline.
#[derive(Clone, Debug)]
pub struct OpSpace {
    /// Classes packets may be sent to (a flow always maps to one class).
    pub classes: Vec<ClassId>,
    pub flows: u64,
    pub min_len: u32,
    pub max_len: u32,
    /// Largest forward time step.
    pub max_advance: Duration,
}

impl Default for OpSpace {
    fn default() -> Self {
        OpSpace {
            classes: vec![ClassId::ROOT],
            flows: 8,
            min_len: 40,
            max_len: 1514,
            max_advance: Duration::from_millis(50),
        }
    }
}

impl OpSpace {
    /// Packets go to these classes (by id).
    pub fn with_classes(self, ids: impl IntoIterator<Item = u32>) -> OpSpace {
        OpSpace {
            classes: ids.into_iter().map(ClassId).collect(),
            ..self
        }
    }
    pub fn with_flows(self, flows: u64) -> OpSpace {
        OpSpace { flows, ..self }
    }
    pub fn with_max_advance(self, max_advance: Duration) -> OpSpace {
        OpSpace {
            max_advance,
            ..self
        }
    }
}

/// One operation of a sequence.
#[derive(Clone, Debug)]
pub enum Op {
    Enqueue {
        flow: u64,
        len: u32,
        ect: bool,
    },
    Dequeue,
    Peek,
    Advance(Duration),
    /// Offer a time earlier than the latest; the discipline must clamp.
    Backwards(Duration),
    Purge,
    /// [`Qdisc::hold`] for this long: nothing may be lost or reordered.
    Hold(Duration),
}

/// Small deterministic generator (xorshift64*), so failures replay from a seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// Generates a random op sequence. Weighted towards enqueue/dequeue so queues
/// both fill and drain.
pub fn gen_ops(rng: &mut Rng, space: &OpSpace, n: usize) -> Vec<Op> {
    (0..n)
        .map(|_| match rng.below(102) {
            0..=44 => Op::Enqueue {
                flow: rng.below(space.flows.max(1)),
                len: space.min_len + rng.below((space.max_len - space.min_len) as u64 + 1) as u32,
                ect: rng.below(2) == 0,
            },
            45..=79 => Op::Dequeue,
            80..=84 => Op::Peek,
            85..=96 => Op::Advance(Duration(rng.below(space.max_advance.0 + 1))),
            97..=98 => Op::Backwards(Duration(rng.below(space.max_advance.0 + 1))),
            99 => Op::Purge,
            _ => Op::Hold(Duration(
                rng.below(space.max_advance.0.saturating_mul(4) + 1),
            )),
        })
        .collect()
}

/// Decodes ops from fuzzer bytes (4 bytes per op).
pub fn ops_from_bytes(bytes: &[u8], space: &OpSpace) -> Vec<Op> {
    bytes
        .chunks_exact(4)
        .map(|c| {
            let arg = u16::from_le_bytes([c[1], c[2]]) as u64;
            match c[0] % 8 {
                0..=2 => Op::Enqueue {
                    flow: c[3] as u64 % space.flows.max(1),
                    len: space.min_len + (arg as u32 % (space.max_len - space.min_len + 1)),
                    ect: c[3] & 0x80 != 0,
                },
                3 | 4 => Op::Dequeue,
                5 => Op::Peek,
                6 => Op::Advance(Duration(arg * 10_000)),
                _ => {
                    if c[3] & 1 == 0 {
                        Op::Backwards(Duration(arg * 1_000))
                    } else {
                        Op::Purge
                    }
                }
            }
        })
        .collect()
}

/// Outcome counters, so tests can also check that a run exercised something.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub enqueued: u64,
    pub dequeued: u64,
    pub dropped: u64,
    pub throttled: u64,
    pub marks: u64,
}

struct Model {
    resident: HashMap<u64, (u64, ClassId, u32)>, // id -> (flow, class, len)
    last_out: HashMap<(u64, ClassId), u64>,
    gone: HashSet<u64>,
    report: Report,
}

impl Model {
    fn take(&mut self, id: u64, what: &str) -> (u64, ClassId, u32) {
        match self.resident.remove(&id) {
            Some(v) => {
                self.gone.insert(id);
                v
            }
            None if self.gone.contains(&id) => panic!("{what}: packet {id} left twice"),
            None => panic!("{what}: packet {id} was never enqueued"),
        }
    }

    fn absorb_drops(&mut self, drops: &mut Drops, fresh: Option<u64>) {
        for d in drops.drain(..) {
            if Some(d.pkt.id) == fresh && !self.resident.contains_key(&d.pkt.id) {
                // The packet just offered, refused at the door.
                self.gone.insert(d.pkt.id);
            } else {
                self.take(d.pkt.id, "drop");
            }
            self.report.dropped += 1;
        }
    }
}

/// Applies `ops` to `q`, asserting the [`Qdisc`] contract after every step.
/// `class_of(flow)` picks the class of a flow from `space.classes`.
pub fn check_ops(q: &mut dyn Qdisc, space: &OpSpace, ops: &[Op]) -> Report {
    let mut m = Model {
        resident: HashMap::new(),
        last_out: HashMap::new(),
        gone: HashSet::new(),
        report: Report::default(),
    };
    let mut drops: Drops = Vec::new();
    let mut now = Instant(1_000_000_000);
    let mut next_id = 1u64;
    let class_of = |flow: u64| space.classes[(flow % space.classes.len() as u64) as usize];

    for (step, op) in ops.iter().enumerate() {
        let mut offered_now = now;
        match *op {
            Op::Enqueue { flow, len, ect } => {
                let id = next_id;
                next_id += 1;
                let mut p = Packet::synthetic(id, len, flow, class_of(flow));
                if ect {
                    p.ecn = crate::Ecn::Ect0;
                }
                m.resident.insert(id, (flow, p.class, len));
                let r = q.enqueue(p, now, &mut drops);
                m.report.enqueued += 1;
                let refused = drops.iter().any(|d| d.pkt.id == id);
                match r {
                    Enqueue::Rejected => {
                        assert!(refused, "step {step}: Rejected but packet not in drops");
                        m.resident.remove(&id);
                    }
                    Enqueue::Queued => {
                        assert!(drops.is_empty(), "step {step}: Queued but drops given");
                    }
                    Enqueue::QueuedDroppedOthers => {
                        assert!(!drops.is_empty(), "step {step}: claimed drops, gave none");
                    }
                }
                if refused && r != Enqueue::Rejected {
                    // Dropped the newcomer as part of making room: allowed
                    // (e.g. FQ-CoDel's fattest flow was its own).
                    m.resident.remove(&id);
                }
                m.absorb_drops(&mut drops, Some(id));
            }
            Op::Dequeue => {
                let before = q.len();
                match q.dequeue(now, &mut drops) {
                    Some(p) => {
                        if p.ecn == crate::Ecn::Ce {
                            m.report.marks += 1;
                        }
                        let (flow, class, len) = m.take(p.id, "dequeue");
                        assert_eq!(p.len, len, "step {step}: length changed");
                        let key = (flow, class);
                        if let Some(&last) = m.last_out.get(&key) {
                            assert!(
                                p.id > last,
                                "step {step}: flow {flow} reordered ({} after {last})",
                                p.id
                            );
                        }
                        m.last_out.insert(key, p.id);
                        m.report.dequeued += 1;
                    }
                    None => {
                        m.absorb_drops(&mut drops, None);
                        if q.len() > 0 {
                            m.report.throttled += 1;
                            assert!(
                                q.next_wakeup().is_some(),
                                "step {step}: non-empty ({} of {before}), dequeue gave nothing, no wakeup",
                                q.len()
                            );
                        }
                    }
                }
                m.absorb_drops(&mut drops, None);
            }
            Op::Peek => {
                let _ = q.peek_len(now, &mut drops);
                m.absorb_drops(&mut drops, None);
            }
            Op::Advance(d) => now += d,
            Op::Backwards(d) => offered_now = now - d,
            Op::Purge => {
                q.purge(&mut drops);
                for d in &drops {
                    assert_eq!(d.reason, DropReason::Purge, "step {step}: purge reason");
                }
                m.absorb_drops(&mut drops, None);
                assert_eq!(q.len(), 0, "step {step}: purge left packets");
            }
            Op::Hold(d) => {
                let before = q.len();
                q.hold(d, now, &mut drops);
                m.absorb_drops(&mut drops, None);
                assert!(q.len() <= before, "step {step}: a hold added packets");
            }
        }
        if let Op::Backwards(_) = op {
            // Exercise clamping: a dequeue at an earlier time must not panic or
            // lose packets.
            if let Some(p) = q.dequeue(offered_now, &mut drops) {
                let (flow, class, _) = m.take(p.id, "dequeue(backwards)");
                if let Some(&last) = m.last_out.get(&(flow, class)) {
                    assert!(p.id > last, "step {step}: reordered after backwards time");
                }
                m.last_out.insert((flow, class), p.id);
                m.report.dequeued += 1;
            }
            m.absorb_drops(&mut drops, None);
        }
        // Invariants.
        assert_eq!(
            q.len(),
            m.resident.len(),
            "step {step} ({op:?}): len() disagrees with model"
        );
        let bytes: u64 = m.resident.values().map(|v| v.2 as u64).sum();
        assert_eq!(
            q.backlog_bytes(),
            bytes,
            "step {step} ({op:?}): backlog_bytes disagrees"
        );
        if q.len() == 0 {
            assert!(
                q.next_wakeup().is_none(),
                "step {step}: empty but next_wakeup is set"
            );
        }
        assert_eq!(
            m.report.enqueued,
            m.report.dequeued + m.report.dropped + m.resident.len() as u64,
            "step {step}: conservation"
        );
    }
    // Drain: everything resident must come out (or be dropped) given time.
    let mut guard = 0u32; // bounded so a stuck discipline fails instead of hanging
    while q.len() > 0 && guard < 1_000_000 {
        guard += 1;
        match q.dequeue(now, &mut drops) {
            Some(p) => {
                m.take(p.id, "drain");
                m.report.dequeued += 1;
            }
            None => {
                m.absorb_drops(&mut drops, None);
                if q.len() == 0 {
                    break;
                }
                let w = q.next_wakeup().expect("drain: throttled without wakeup");
                now = if w > now { w } else { now + Duration(1) };
            }
        }
        m.absorb_drops(&mut drops, None);
    }
    assert_eq!(q.len(), 0, "drain did not finish");
    assert!(m.resident.is_empty(), "drain: model still holds packets");
    m.report
}

/// Runs `cases` seeded random sequences of `n` ops against fresh disciplines.
pub fn check_random(
    mut make: impl FnMut() -> Box<dyn Qdisc>,
    space: &OpSpace,
    cases: u64,
    n: usize,
) -> Report {
    let mut total = Report::default();
    for seed in 0..cases {
        let mut rng = Rng::new(seed + 1);
        let ops = gen_ops(&mut rng, space, n);
        let mut q = make();
        let r = check_ops(q.as_mut(), space, &ops);
        total.enqueued += r.enqueued;
        total.dequeued += r.dequeued;
        total.dropped += r.dropped;
        total.throttled += r.throttled;
        total.marks += r.marks;
    }
    total
}

/// The model check of an AQM: `make(ecn)` with ECN off, then on, through
/// 300 seeded sequences of 300 ops over `flows` flows. Each run must both
/// forward and drop; with ECN on and `marks`, it must also mark.
pub fn check_aqm(flows: u64, marks: bool, mut make: impl FnMut(bool) -> Box<dyn Qdisc>) {
    let space = OpSpace::default().with_flows(flows);
    for ecn in [false, true] {
        let r = check_random(|| make(ecn), &space, 300, 300);
        assert!(r.dequeued > 0 && r.dropped > 0, "{r:?}");
        if ecn && marks {
            assert!(r.marks > 0, "{r:?}");
        }
    }
}

/// Entry point for fuzz targets: raw bytes to ops, then [`check_ops`].
pub fn check_bytes(q: &mut dyn Qdisc, space: &OpSpace, bytes: &[u8]) -> Report {
    let ops = ops_from_bytes(bytes, space);
    check_ops(q, space, &ops)
}

/// The real drop-tail FIFO ([`crate::fifo::Fifo`]) of at most
/// `limit_packets` packets, boxed: the leaf of the classful disciplines'
/// tests.
pub fn fifo_leaf(limit_packets: usize) -> Box<dyn Qdisc> {
    Box::new(crate::fifo::Fifo::new(crate::fifo::Params {
        limit_packets: u32::try_from(limit_packets).unwrap_or(u32::MAX),
        limit_bytes: None,
    }))
}

/// CoDel that acts within a short test: a 20 ms interval, marking ECN
/// (the AQM leaf of the classful disciplines' model checks).
pub fn quick_codel() -> crate::codel::Params {
    crate::codel::Params {
        interval: Duration::from_millis(20),
        ecn: true,
        ..crate::codel::Params::default()
    }
}

/// RED that acts within a few packets: at most 10, early drops (marks)
/// between 2 and 6, the average following each packet.
pub fn quick_red() -> crate::red::Params {
    crate::red::Params {
        limit_packets: 10,
        min_th: 2,
        max_th: 6,
        weight: 1,
        ecn: true,
        ..crate::red::Params::default()
    }
}

/// A bare drop-tail leaf for tests and benches of the classful disciplines.
///
/// Unlike [`crate::fifo::Fifo`], a parent cannot store it inline, so a bench
/// built on it measures the boxed-leaf path, and its behaviour is all here:
/// no byte limit, no statistics of its own beyond ECN marks.
pub struct DropTail {
    q: VecDeque<Packet>,
    limit: usize,
    bytes: u64,
    mark_ect: bool,
    marks: u64,
}

impl DropTail {
    /// Holds at most `limit` packets; refuses the newcomer beyond.
    pub fn new(limit: usize) -> DropTail {
        DropTail {
            q: VecDeque::new(),
            limit,
            bytes: 0,
            mark_ect: false,
            marks: 0,
        }
    }

    /// Also marks every ECT(0) packet it accepts (a stand-in for an AQM), so
    /// tests can see marks surface in the parent's statistics.
    pub fn marking(limit: usize) -> DropTail {
        DropTail {
            mark_ect: true,
            ..DropTail::new(limit)
        }
    }

    pub fn boxed(limit: usize) -> Box<dyn Qdisc> {
        Box::new(DropTail::new(limit))
    }

    /// Drops the heads `doomed` picks (as an AQM would, with reason `Aqm`);
    /// bounded by the queue length.
    pub fn drop_heads(&mut self, doomed: impl Fn(&Packet) -> bool, drops: &mut Drops) {
        while self.q.front().is_some_and(&doomed) {
            if let Some(pkt) = self.q.pop_front() {
                self.bytes -= pkt.len as u64;
                drops.push(Dropped {
                    pkt,
                    reason: DropReason::Aqm,
                });
            }
        }
    }
}

impl Qdisc for DropTail {
    fn enqueue(&mut self, mut pkt: Packet, _now: Instant, drops: &mut Drops) -> Enqueue {
        if self.q.len() >= self.limit {
            drops.push(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
            return Enqueue::Rejected;
        }
        self.bytes += pkt.len as u64;
        if self.mark_ect && pkt.ecn == Ecn::Ect0 && pkt.mark_ce() {
            self.marks += 1;
        }
        self.q.push_back(pkt);
        Enqueue::Queued
    }
    fn dequeue(&mut self, _now: Instant, _drops: &mut Drops) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len as u64;
        Some(p)
    }
    fn peek_len(&mut self, _now: Instant, _drops: &mut Drops) -> Option<u32> {
        self.q.front().map(|p| p.cost)
    }
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn purge(&mut self, drops: &mut Drops) {
        self.bytes = 0;
        drops.extend(self.q.drain(..).map(|pkt| Dropped {
            pkt,
            reason: DropReason::Purge,
        }));
    }
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        let s = QueueStats {
            ecn_marks: self.marks,
            ..Default::default()
        };
        f(ClassId::ROOT, &s);
    }
}

/// A FIFO leaf with an AQM's habits, for tests of the parents: `dequeue`
/// first drops every head whose id is a multiple of `dequeue_every`,
/// `peek_len` every head whose id is a multiple of `peek_every` (0: never;
/// reason `Aqm`), so either may find the queue empty after dropping, and a
/// drop share is known in advance. Refuses arrivals beyond `limit` packets
/// (`QueueFull`) and keeps its own statistics.
pub struct Lossy {
    q: VecDeque<Packet>,
    dequeue_every: u64,
    peek_every: u64,
    limit: usize,
    bytes: u64,
    stats: QueueStats,
}

impl Lossy {
    pub fn boxed(limit: usize, dequeue_every: u64, peek_every: u64) -> Box<dyn Qdisc> {
        Box::new(Lossy {
            q: VecDeque::new(),
            dequeue_every,
            peek_every,
            limit,
            bytes: 0,
            stats: QueueStats::default(),
        })
    }

    fn cull(&mut self, every: u64, drops: &mut Drops) {
        // Bound: each iteration removes a packet.
        while let Some(h) = self.q.front() {
            if every == 0 || h.id % every != 0 {
                return;
            }
            let Some(p) = self.q.pop_front() else { return };
            self.bytes -= u64::from(p.len);
            self.stats.push_drop_resident(p, DropReason::Aqm, drops);
        }
    }
}

impl Qdisc for Lossy {
    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        if self.q.len() >= self.limit {
            self.stats.push_drop(pkt, DropReason::QueueFull, drops);
            return Enqueue::Rejected;
        }
        pkt.enqueued_at = now;
        self.stats.on_enqueue(&pkt);
        self.bytes += u64::from(pkt.len);
        self.q.push_back(pkt);
        Enqueue::Queued
    }
    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        self.cull(self.dequeue_every, drops);
        let p = self.q.pop_front()?;
        self.bytes -= u64::from(p.len);
        self.stats.on_dequeue(&p, now);
        Some(p)
    }
    fn peek_len(&mut self, _now: Instant, drops: &mut Drops) -> Option<u32> {
        self.cull(self.peek_every, drops);
        self.q.front().map(|p| p.cost)
    }
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn purge(&mut self, drops: &mut Drops) {
        while let Some(p) = self.q.pop_front() {
            self.stats.push_drop_resident(p, DropReason::Purge, drops);
        }
        self.bytes = 0;
    }
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats);
    }
}

/// The ids of the packets `q` sends at `now` until it gives nothing.
pub fn ids_served(q: &mut dyn Qdisc, now: Instant, drops: &mut Drops) -> Vec<u64> {
    std::iter::from_fn(|| q.dequeue(now, drops))
        .map(|p| p.id)
        .collect()
}

/// Serves `q` from `now` at its own pace: each packet it gives goes to
/// `sent` with the time it left; when it gives nothing, time jumps to its
/// wake-up, which must lie ahead. Ends when it names none, or after
/// `bound` steps (each sends or jumps).
pub fn serve_at_wakeups(
    q: &mut dyn Qdisc,
    mut now: Instant,
    bound: u64,
    drops: &mut Drops,
    mut sent: impl FnMut(&Packet, Instant),
) {
    for _ in 0..bound {
        match q.dequeue(now, drops) {
            Some(p) => sent(&p, now),
            None => match q.next_wakeup() {
                Some(w) => {
                    assert!(w > now, "a throttled discipline wakes up later");
                    now = w;
                }
                None => break,
            },
        }
    }
}

/// A TCP segment in an Ethernet frame, for tests of what reads packet
/// bytes (the ACK filter, [`crate::ack_filter`]): wire's builder
/// (`sluice_wire::build::tcp_with`) plus the two fields it leaves at zero,
/// the reserved/AE bits and the ECN codepoint (checksums are not refreshed
/// after those: nothing in sluice's queues checks them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpFrame {
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    /// `sluice_wire::tcp_flags` bits.
    pub flags: u8,
    /// Low nibble of the data-offset byte (reserved bits and AE).
    pub reserved: u8,
    /// Raw option bytes; padded with EOL to a multiple of 4.
    pub options: Vec<u8>,
    pub payload: usize,
    /// The IP header's ECN bits.
    pub ecn: Ecn,
}

impl TcpFrame {
    /// A pure ACK (flags ACK, no options, no payload) acknowledging `ack`.
    pub fn ack(
        src: impl Into<std::net::IpAddr>,
        dst: impl Into<std::net::IpAddr>,
        sport: u16,
        dport: u16,
        ack: u32,
    ) -> TcpFrame {
        TcpFrame {
            src: src.into(),
            dst: dst.into(),
            sport,
            dport,
            seq: 1,
            ack,
            flags: sluice_wire::tcp_flags::ACK,
            reserved: 0,
            options: Vec::new(),
            payload: 0,
            ecn: Ecn::NotEct,
        }
    }

    /// The Ethernet frame. Panics on mixed address families (a test
    /// mistake) or more than 40 bytes of options.
    pub fn build(&self) -> Vec<u8> {
        assert!(self.options.len() <= 40, "TCP options longer than 40 bytes");
        let spec = sluice_wire::build::TcpSpec {
            sport: self.sport,
            dport: self.dport,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: 0xffff,
            options: &self.options,
            payload_len: self.payload,
        };
        let mut f = sluice_wire::build::tcp_with(self.src, self.dst, &spec);
        let info = sluice_wire::parse(&f).expect("a frame wire built");
        let ip = info.ip.expect("an IP frame");
        f[ip.l4_offset + 12] |= self.reserved & 0x0f;
        let ecn = self.ecn.bits();
        match ip.af {
            sluice_wire::Af::V4 => f[info.l3_offset + 1] |= ecn,
            sluice_wire::Af::V6 => f[info.l3_offset + 1] |= ecn << 4,
        }
        f
    }

    /// The frame as a queued [`Packet`] of flow `flow` (its length is the
    /// frame's, its ECN the header's).
    pub fn packet(&self, id: u64, flow: u64) -> Packet {
        let data = self.build();
        let len = data.len() as u32;
        Packet {
            data,
            len,
            cost: len,
            flow,
            class: ClassId::ROOT,
            ecn: self.ecn,
            enqueued_at: Instant::ZERO,
            id,
            allowance_ms: 0,
        }
    }
}

/// The timestamps option (RFC 7323 §3.2), NOP-aligned as stacks send it.
pub fn tcp_opt_timestamps(tsval: u32, tsecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&tsval.to_be_bytes());
    o.extend_from_slice(&tsecr.to_be_bytes());
    o
}

/// The SACK option (RFC 2018 §3) with `blocks` (left, right edges),
/// NOP-aligned.
pub fn tcp_opt_sack(blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut o = vec![1, 1, 5, (2 + 8 * blocks.len()) as u8];
    for (l, r) in blocks {
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
    }
    o
}
