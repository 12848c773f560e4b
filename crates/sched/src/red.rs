//! RED (Random Early Detection) and RIO (RED with In/Out, three drop
//! precedences), as ALTQ's `red` and `rio`.
//!
//! # Principles
//! Floyd & Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance", 1993, §4 and §7:
//! - The average queue `avg` is an EWMA of the instantaneous queue length in
//!   packets, updated at each arrival: `avg += (q - avg) * 2^-weight`. It is
//!   kept in **Q.16** fixed point (`avg_q16 = avg * 65536`).
//! - After an idle period, `avg` decays as if `m` empty-queue arrivals had
//!   happened, `m = idle / idle_pkt_time`: `avg *= (1 - 2^-weight)^m`
//!   (computed by square-and-multiply, so any idle time costs ≤ 64 steps).
//! - `avg < min_th`: never drop. `avg ≥ max_th`: drop every arrival (forced
//!   drop, even ECT packets). In between,
//!   `pb = max_p (avg - min_th) / (max_th - min_th)` and the arrival is
//!   dropped with `pa = pb / (1 - count·pb)`, `count` being arrivals since
//!   the last drop: this spaces drops uniformly instead of geometrically.
//! - With `ecn`, an ECT packet picked in the probabilistic region is marked CE
//!   and queued instead of dropped (RFC 3168 §7); marks count in
//!   `QueueStats::ecn_marks`.
//! - The physical `limit_packets` still refuses newcomers (`QueueFull`).
//! - An ACK filter (`with_ack_filter`) works as in [`crate::fifo`], after
//!   RED's verdict on the newcomer.
//! - Randomness comes from a seeded xorshift generator in the state: runs are
//!   reproducible and the core stays sans-IO.
//!
//! `max_p` is **Q16.16**: [`MAX_P_ONE`] (65536) is probability 1; ALTQ's
//! `inv_pmax = 10` is `MAX_P_ONE / 10`.
//!
//! RIO (ALTQ `rio`): three drop precedences (0 = keep longest, 2 = drop
//! first), each with its own thresholds. Precedence `i`'s average counts the
//! packets of precedence ≤ `i`, so packets of high drop precedence feel the
//! whole queue while low drop precedence only feels its own kind.

use crate::ack_filter::{self, AckFilter};
use crate::qdisc::clamp;
use crate::{ClassId, DropReason, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant};
use std::collections::VecDeque;

/// Probability 1.0 in `max_p`'s Q16.16.
pub const MAX_P_ONE: u32 = 1 << 16;

/// Number of RIO drop precedences.
pub const PRECEDENCES: usize = 3;

/// Thresholds of one RED instance (packets) and its maximum probability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub min_th: u32,
    pub max_th: u32,
    /// Q16.16, see [`MAX_P_ONE`].
    pub max_p: u32,
}

/// ALTQ's defaults: th_min 5, th_max 15, inv_pmax 10.
pub const DEFAULT_THRESHOLDS: Thresholds = Thresholds {
    min_th: 5,
    max_th: 15,
    max_p: MAX_P_ONE / 10,
};

/// Configuration of [`Red`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub limit_packets: u32,
    pub min_th: u32,
    pub max_th: u32,
    /// Q16.16 maximum drop probability (at `avg = max_th`).
    pub max_p: u32,
    /// EWMA weight as a shift: `w_q = 2^-weight` (ALTQ's 512 is 9).
    pub weight: u8,
    pub ecn: bool,
    /// Transmission time of a typical packet, for the idle decay.
    pub idle_pkt_time: Duration,
    /// Seed of the drop decisions' generator.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            limit_packets: 50,
            min_th: DEFAULT_THRESHOLDS.min_th,
            max_th: DEFAULT_THRESHOLDS.max_th,
            max_p: DEFAULT_THRESHOLDS.max_p,
            weight: 9,
            ecn: false,
            // 1000 bytes at 10 Mbit/s, ALTQ's assumption.
            idle_pkt_time: Duration::from_micros(800),
            seed: 0x5eed,
        }
    }
}

/// The EWMA and drop-spacing state of one RED instance.
#[derive(Clone, Copy, Debug)]
struct Core {
    th: Thresholds,
    /// Average queue, Q.16 packets.
    avg_q16: u64,
    /// Arrivals since the last drop/mark in the probabilistic region; -1
    /// below min_th (Floyd's initialization).
    count: i64,
    /// When the queue this core measures became empty.
    idle_since: Option<Instant>,
}

/// What RED decided for an arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    /// Probabilistic drop: may be converted to a mark.
    Early,
    /// avg ≥ max_th: drop whatever the ECN field.
    Forced,
}

/// Q0.32 power `(1 - 2^-w)^m` by square-and-multiply.
fn decay_q32(weight: u8, m: u64) -> u64 {
    let one = 1u64 << 32;
    let mut base = one - (one >> weight.min(31));
    let mut acc = one;
    let mut e = m;
    // At most 64 rounds (bits of `m`).
    while e > 0 {
        if e & 1 == 1 {
            acc = (acc * base) >> 32;
        }
        base = (base * base) >> 32;
        e >>= 1;
        if acc == 0 {
            break;
        }
    }
    acc
}

impl Core {
    fn new(th: Thresholds) -> Core {
        Core {
            th,
            avg_q16: 0,
            count: -1,
            idle_since: None,
        }
    }

    /// Updates `avg` for an arrival seeing `qlen` packets, then decides.
    fn arrival(&mut self, qlen: u32, now: Instant, shared: &Shared, rng: &mut u64) -> Verdict {
        let w = shared.weight.min(31);
        if let Some(since) = self.idle_since.take() {
            let pt = shared.idle_pkt_time.as_nanos().max(1);
            let m = now.saturating_since(since).as_nanos() / pt;
            self.avg_q16 = ((self.avg_q16 as u128 * decay_q32(w, m) as u128) >> 32) as u64;
        }
        let q = (qlen as i64) << 16;
        let avg = self.avg_q16 as i64;
        self.avg_q16 = (avg + ((q - avg) >> w)).max(0) as u64;

        let min = (self.th.min_th as u64) << 16;
        let max = (self.th.max_th as u64) << 16;
        if self.avg_q16 < min {
            self.count = -1;
            return Verdict::Pass;
        }
        if self.avg_q16 >= max {
            self.count = 0;
            return Verdict::Forced;
        }
        self.count += 1;
        // pb in Q0.32: max_p (Q16) * (avg - min) / (max - min), avg in Q16.
        let span = (max - min).max(1) as u128;
        let pb = ((self.th.max_p as u128) << 16) * (self.avg_q16 - min) as u128 / span;
        let pb = pb.min(1u128 << 32);
        // pa = pb / (1 - count * pb); drop when count * pb ≥ 1.
        let cpb = pb * self.count.max(0) as u128;
        let one = 1u128 << 32;
        let drop = if cpb >= one {
            true
        } else {
            let r = next_u32(rng) as u128;
            // r / 2^32 < pb / (1 - count·pb)  ⇔  r·(one - cpb) < pb·2^32
            r * (one - cpb) < pb << 32
        };
        if drop {
            self.count = 0;
            Verdict::Early
        } else {
            Verdict::Pass
        }
    }
}

fn next_u32(s: &mut u64) -> u32 {
    let mut x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
}

/// Parameters shared by all precedences.
#[derive(Clone, Copy, Debug)]
struct Shared {
    limit_packets: u32,
    weight: u8,
    ecn: bool,
    idle_pkt_time: Duration,
}

/// Common queue machinery of RED and RIO: FIFO of (packet, precedence).
#[derive(Debug)]
struct Base {
    shared: Shared,
    queue: VecDeque<(Packet, u8)>,
    backlog_bytes: u64,
    rng: u64,
    stats: QueueStats,
    last_now: Instant,
    ack_filter: AckFilter,
}

impl Base {
    fn new(shared: Shared, seed: u64) -> Base {
        let shared = Shared {
            limit_packets: shared.limit_packets.max(1),
            ..shared
        };
        Base {
            queue: VecDeque::with_capacity((shared.limit_packets as usize).min(1024)),
            shared,
            backlog_bytes: 0,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            stats: QueueStats::default(),
            last_now: Instant::ZERO,
            ack_filter: AckFilter::Off,
        }
    }

    fn refuse(&mut self, pkt: Packet, reason: DropReason, drops: &mut Drops) -> Enqueue {
        self.stats.push_drop(pkt, reason, drops);
        Enqueue::Rejected
    }

    /// Applies a verdict to an arriving packet of precedence `prec`. The
    /// precedence of a packet the ACK filter removed goes to `removed`.
    fn admit(
        &mut self,
        mut pkt: Packet,
        prec: u8,
        v: Verdict,
        now: Instant,
        drops: &mut Drops,
        removed: &mut Option<u8>,
    ) -> Enqueue {
        match v {
            Verdict::Forced => return self.refuse(pkt, DropReason::Aqm, drops),
            Verdict::Early => {
                if self.shared.ecn && pkt.mark_ce() {
                    self.stats.ecn_marks += 1;
                } else {
                    return self.refuse(pkt, DropReason::Aqm, drops);
                }
            }
            Verdict::Pass => {}
        }
        let victim = if self.ack_filter.is_on() {
            let skip = self.queue.len().saturating_sub(ack_filter::SCAN_LIMIT);
            let older = self.queue.iter().skip(skip).map(|(p, _)| p);
            ack_filter::find_redundant(self.ack_filter, &pkt, older).map(|i| i + skip)
        } else {
            None
        };
        if self.queue.len() - usize::from(victim.is_some()) >= self.shared.limit_packets as usize {
            return self.refuse(pkt, DropReason::QueueFull, drops);
        }
        let mut outcome = Enqueue::Queued;
        if let Some((old, p)) = victim.and_then(|i| self.queue.remove(i)) {
            self.backlog_bytes -= old.len as u64;
            self.stats
                .push_drop_resident(old, DropReason::AckFilter, drops);
            *removed = Some(p);
            outcome = Enqueue::QueuedDroppedOthers;
        }
        pkt.enqueued_at = now;
        self.stats.on_enqueue(&pkt);
        self.backlog_bytes += pkt.len as u64;
        self.queue.push_back((pkt, prec));
        outcome
    }

    fn pop(&mut self, now: Instant) -> Option<(Packet, u8)> {
        let (pkt, prec) = self.queue.pop_front()?;
        self.backlog_bytes -= pkt.len as u64;
        self.stats.on_dequeue(&pkt, now);
        Some((pkt, prec))
    }

    fn purge(&mut self, drops: &mut Drops) {
        // Bounded by the resident count (≤ limit_packets).
        for (pkt, _) in self.queue.drain(..) {
            self.stats.push_drop_resident(pkt, DropReason::Purge, drops);
        }
        self.backlog_bytes = 0;
    }
}

/// RED over one FIFO.
#[derive(Debug)]
pub struct Red {
    base: Base,
    core: Core,
}

impl Red {
    pub fn new(p: Params) -> Red {
        let shared = Shared {
            limit_packets: p.limit_packets,
            weight: p.weight,
            ecn: p.ecn,
            idle_pkt_time: p.idle_pkt_time,
        };
        Red {
            base: Base::new(shared, p.seed),
            core: Core::new(Thresholds {
                min_th: p.min_th,
                max_th: p.max_th.max(p.min_th.saturating_add(1)),
                max_p: p.max_p.min(MAX_P_ONE),
            }),
        }
    }

    /// The same queue with an ACK filter: an admitted ACK may remove one
    /// older redundant pure ACK of its connection from the newest
    /// [`SCAN_LIMIT`](crate::ack_filter::SCAN_LIMIT) packets
    /// ([`DropReason::AckFilter`]), as in [`crate::fifo`]; RED's verdict on
    /// the newcomer comes first.
    pub fn with_ack_filter(mut self, mode: AckFilter) -> Red {
        self.base.ack_filter = mode;
        self
    }

    /// The average queue in packets (Q.16).
    pub fn avg_q16(&self) -> u64 {
        self.core.avg_q16
    }
    pub fn stats(&self) -> &QueueStats {
        &self.base.stats
    }
}

/// The [`Qdisc`] methods RED and RIO answer alike, from their shared queue
/// (`self.base`): written once here.
macro_rules! answered_by_base {
    () => {
        fn peek_len(&mut self, now: Instant, _drops: &mut Drops) -> Option<u32> {
            clamp(&mut self.base.last_now, now);
            self.base.queue.front().map(|(p, _)| p.cost)
        }

        fn next_wakeup(&self) -> Option<Instant> {
            None
        }

        fn len(&self) -> usize {
            self.base.queue.len()
        }

        fn backlog_bytes(&self) -> u64 {
            self.base.backlog_bytes
        }

        fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
            f(ClassId::ROOT, &self.base.stats);
        }
    };
}

impl Qdisc for Red {
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.base.last_now, now);
        let qlen = self.base.queue.len() as u32;
        let v = self
            .core
            .arrival(qlen, now, &self.base.shared, &mut self.base.rng);
        self.base.admit(pkt, 0, v, now, drops, &mut None)
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.base.last_now, now);
        let (pkt, _) = self.base.pop(now)?;
        if self.base.queue.is_empty() {
            self.core.idle_since = Some(now);
        }
        Some(pkt)
    }

    answered_by_base!();

    fn purge(&mut self, drops: &mut Drops) {
        self.base.purge(drops);
        self.core.idle_since = Some(self.base.last_now);
    }
}

/// Picks a packet's drop precedence (0..=2; larger values count as 2).
pub type PrecedenceFn = fn(&Packet) -> u8;

fn precedence_zero(_: &Packet) -> u8 {
    0
}

/// Configuration of [`Rio`].
#[derive(Clone, Copy, Debug)]
pub struct RioParams {
    pub limit_packets: u32,
    /// Index = drop precedence (0 = low drop, 2 = high drop).
    pub thresholds: [Thresholds; PRECEDENCES],
    pub weight: u8,
    pub ecn: bool,
    pub idle_pkt_time: Duration,
    pub seed: u64,
    /// The engine supplies a DSCP-based one; the default puts everything at 0.
    pub precedence: PrecedenceFn,
}

impl Default for RioParams {
    /// ALTQ's `default_rio_params`: low 35/45, medium 20/30, high 5/15.
    fn default() -> Self {
        let t = |min_th, max_th| Thresholds {
            min_th,
            max_th,
            max_p: MAX_P_ONE / 10,
        };
        RioParams {
            limit_packets: 60,
            thresholds: [t(35, 45), t(20, 30), t(5, 15)],
            weight: 9,
            ecn: false,
            idle_pkt_time: Duration::from_micros(800),
            seed: 0x5eed,
            precedence: precedence_zero,
        }
    }
}

/// RED with three drop precedences.
#[derive(Debug)]
pub struct Rio {
    base: Base,
    cores: [Core; PRECEDENCES],
    /// `qlen[i]` = resident packets of precedence ≤ i.
    qlen: [u32; PRECEDENCES],
    precedence: PrecedenceFn,
}

impl Rio {
    pub fn new(p: RioParams) -> Rio {
        let shared = Shared {
            limit_packets: p.limit_packets,
            weight: p.weight,
            ecn: p.ecn,
            idle_pkt_time: p.idle_pkt_time,
        };
        let core = |t: Thresholds| {
            Core::new(Thresholds {
                min_th: t.min_th,
                max_th: t.max_th.max(t.min_th.saturating_add(1)),
                max_p: t.max_p.min(MAX_P_ONE),
            })
        };
        Rio {
            base: Base::new(shared, p.seed),
            cores: p.thresholds.map(core),
            qlen: [0; PRECEDENCES],
            precedence: p.precedence,
        }
    }

    /// The same queue with an ACK filter: an admitted ACK may remove one
    /// older redundant pure ACK of its connection from the newest
    /// [`SCAN_LIMIT`](crate::ack_filter::SCAN_LIMIT) packets
    /// ([`DropReason::AckFilter`]), as in [`crate::fifo`]; RED's verdict on
    /// the newcomer comes first.
    pub fn with_ack_filter(mut self, mode: AckFilter) -> Rio {
        self.base.ack_filter = mode;
        self
    }

    /// Average queue of precedence `prec` (Q.16 packets).
    pub fn avg_q16(&self, prec: usize) -> u64 {
        self.cores.get(prec).map_or(0, |c| c.avg_q16)
    }
    pub fn stats(&self) -> &QueueStats {
        &self.base.stats
    }
}

impl Qdisc for Rio {
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.base.last_now, now);
        let dp = ((self.precedence)(&pkt) as usize).min(PRECEDENCES - 1);
        // Every precedence that counts this packet updates its average (as
        // ALTQ's rio); the packet's own precedence decides.
        let mut verdict = Verdict::Pass;
        for i in dp..PRECEDENCES {
            let v = self.cores[i].arrival(self.qlen[i], now, &self.base.shared, &mut self.base.rng);
            if i == dp {
                verdict = v;
            }
        }
        let mut removed = None;
        let r = self
            .base
            .admit(pkt, dp as u8, verdict, now, drops, &mut removed);
        if r != Enqueue::Rejected {
            for q in &mut self.qlen[dp..] {
                *q += 1;
            }
        }
        if let Some(p) = removed {
            for q in &mut self.qlen[p as usize..] {
                *q = q.saturating_sub(1);
            }
        }
        r
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.base.last_now, now);
        let (pkt, dp) = self.base.pop(now)?;
        for i in dp as usize..PRECEDENCES {
            self.qlen[i] = self.qlen[i].saturating_sub(1);
            if self.qlen[i] == 0 {
                self.cores[i].idle_since = Some(now);
            }
        }
        Some(pkt)
    }

    answered_by_base!();

    fn purge(&mut self, drops: &mut Drops) {
        self.base.purge(drops);
        self.qlen = [0; PRECEDENCES];
        let now = self.base.last_now;
        for c in &mut self.cores {
            c.idle_since = Some(now);
        }
    }
}

#[cfg(test)]
mod tests;
