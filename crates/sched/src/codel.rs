//! CoDel, "Controlled Delay" active queue management (RFC 8289), written once.
//!
//! # Principles
//! - Three pieces, as the RFC's reference code and Linux keep them: immutable
//!   [`Params`], small per-queue [`Vars`], plain [`Stats`]. The control step
//!   ([`dequeue`]) works on any packet [`Source`], so FQ-CoDel runs it per flow
//!   and [`Codel`] runs it over one FIFO.
//! - Sojourn time is measured at dequeue (`now - pkt.enqueued_at`), RFC 8289 §5.
//! - A queue enters the dropping state only after sojourn has stayed at or
//!   above `target` for a full `interval` (§5.3, `first_above_time`), and never
//!   while at most one MTU (`mtu_bytes`) remains queued behind the packet (§5.4:
//!   a single packet cannot be a standing queue).
//! - In the dropping state, the k-th next drop is scheduled `interval /
//!   sqrt(count)` after the previous one (§5.5, the control law). On
//!   re-entering the dropping state within 16 intervals of the last drop
//!   schedule, `count` restarts from the number of drops of the last episode
//!   (`count - last_count`) instead of 1, so a persistent queue is met with the
//!   drop rate that last controlled it.
//! - Leaving the dropping state happens at the first dequeue whose sojourn is
//!   below target (or when the backlog is at most one MTU).
//! - A packet may carry an allowance ([`Packet::allowance_ms`]): the
//!   standing delay a control outside the scheduler (TCP control's window
//!   clamp) leaves its flow on purpose. Above `target`, up to `interval`,
//!   it is the head's target and `interval` grows by the difference (see
//!   `check_head`); packets without one see RFC 8289 unchanged.
//! - ECN (RFC 3168): with `ecn`, an ECT packet the control law picks is marked
//!   CE and delivered instead of dropped; not-ECT packets are still dropped.
//!   With `ce_threshold`, ECT packets whose sojourn exceeds it are marked
//!   (DCTCP-style shallow marking), independent of the control law.
//! - `interval / sqrt(count)` is computed in Q0.32 fixed point, Newton's
//!   step refined, exact below [`EXACT_COUNTS`] (`Vars::rec_inv_sqrt`).

use crate::qdisc::clamp;
use crate::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant};
use std::collections::VecDeque;

/// Counts below this use the exact reciprocal square root (table).
pub const EXACT_COUNTS: u32 = 16;

/// Caps the drops of one `dequeue` call, so a single call's work is bounded
/// even with a huge backlog; the remaining overdue drops happen on the next
/// calls (`drop_next` stays in the past).
pub const MAX_DROPS_PER_DEQUEUE: u32 = 64;

/// Q0.32 value of 1.0, saturated.
const ONE_Q32: u32 = u32::MAX;

/// `1/sqrt(n)` in Q0.32, exact to the last bit (n ≥ 1).
const fn exact_inv_sqrt(n: u32) -> u32 {
    if n <= 1 {
        return ONE_Q32;
    }
    let v = ((1u128 << 64) / n as u128).isqrt();
    if v > u32::MAX as u128 {
        ONE_Q32
    } else {
        v as u32
    }
}

const INV_SQRT_TABLE: [u32; EXACT_COUNTS as usize] = {
    let mut t = [0u32; EXACT_COUNTS as usize];
    let mut i = 0;
    while i < EXACT_COUNTS as usize {
        t[i] = exact_inv_sqrt(i as u32);
        i += 1;
    }
    t
};

/// CoDel's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Acceptable standing queue delay (RFC default 5 ms).
    pub target: Duration,
    /// Sliding window over which sojourn must stay above target before
    /// dropping starts; on the order of a worst-case RTT (default 100 ms).
    pub interval: Duration,
    /// Mark ECT packets CE instead of dropping them.
    pub ecn: bool,
    /// Mark ECT packets whose sojourn exceeds this, regardless of state.
    pub ce_threshold: Option<Duration>,
    /// Backlog at or below which CoDel never drops (one maximum packet).
    pub mtu_bytes: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: false,
            ce_threshold: None,
            mtu_bytes: 1514,
        }
    }
}

/// Per-queue CoDel state. Kept small (32 bytes) because FQ-CoDel has one per flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Vars {
    /// When sojourn will have been above target for an interval; ZERO = not above.
    first_above_time: Instant,
    /// When the next drop is due (dropping state), or when the last one was.
    drop_next: Instant,
    /// Drops since entering the dropping state (plus the reused count).
    count: u32,
    /// `count` when the dropping state was last entered.
    last_count: u32,
    /// 1/sqrt(count) in **Q0.32**: the real value is `rec_inv_sqrt / 2^32`
    /// (1.0 is represented by `u32::MAX`, an error of 2^-32). After each
    /// increment of `count` one Newton–Raphson step refines it:
    /// `x' = x * (3 - count * x²) / 2`, computed in u128 so no product
    /// overflows. Newton's first steps from a poor guess are coarse (from
    /// count 1 to 2 it gives 0.5 instead of 0.707), so counts below
    /// [`EXACT_COUNTS`] and every re-entry into the dropping state (a jump
    /// of `count`) take the exact value `isqrt(2^64 / count)` instead. The
    /// control law is then `t + interval * rec_inv_sqrt >> 32`.
    rec_inv_sqrt: u32,
    dropping: bool,
}

// FQ-CoDel keeps one `Vars` per flow: keep it at 32 bytes.
const _: () = assert!(std::mem::size_of::<Vars>() <= 32);

impl Vars {
    /// Exactly what [`dequeue`] does to the state when the source is empty
    /// (RFC 8289 `dodequeue` on an empty queue): forget when the standing
    /// queue began. A caller that already knows its source is empty calls
    /// this instead of the whole step.
    #[inline(always)]
    pub(crate) fn on_empty(&mut self) {
        self.first_above_time = Instant::ZERO;
    }

    /// The idle state (usable in `const` tables).
    pub const ZERO: Vars = Vars {
        first_above_time: Instant::ZERO,
        drop_next: Instant::ZERO,
        count: 0,
        last_count: 0,
        rec_inv_sqrt: 0,
        dropping: false,
    };

    pub fn new() -> Vars {
        Vars::ZERO
    }
    pub fn dropping(&self) -> bool {
        self.dropping
    }
    pub fn count(&self) -> u32 {
        self.count
    }
    pub fn drop_next(&self) -> Instant {
        self.drop_next
    }
    /// 1/sqrt(count) as Q0.32.
    pub fn rec_inv_sqrt_q32(&self) -> u32 {
        self.rec_inv_sqrt
    }
    /// Forgets the state (queue emptied by purge or reconfiguration).
    pub fn reset(&mut self) {
        *self = Vars::default();
    }

    /// One Newton step towards 1/sqrt(count) after `count` grew by one.
    fn newton_step(&mut self) {
        if self.count < EXACT_COUNTS {
            self.rec_inv_sqrt = INV_SQRT_TABLE[self.count as usize];
            return;
        }
        let x = self.rec_inv_sqrt as u128;
        let x2 = (x * x) >> 32; // Q0.32
        let three = 3u128 << 32;
        let val = three.saturating_sub(self.count as u128 * x2); // Q2.32
        let next = (x * val) >> 33; // Q0.32, halved
        self.rec_inv_sqrt = next.min(ONE_Q32 as u128) as u32;
    }

    /// `t + interval / sqrt(count)`.
    fn control_law(&self, t: Instant, interval: Duration) -> Instant {
        let step = (interval.as_nanos() as u128 * self.rec_inv_sqrt as u128) >> 32;
        t + Duration(step.min(u64::MAX as u128) as u64)
    }
}

/// CoDel's counters (beyond the queue's own [`QueueStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets dropped by the control law.
    pub drops: u64,
    /// Packets marked CE by the control law.
    pub ecn_marks: u64,
    /// Packets marked CE because sojourn exceeded `ce_threshold`.
    pub ce_threshold_marks: u64,
    /// Sojourn of the last packet dequeued.
    pub last_sojourn: Duration,
}

/// What the control step pulls packets from.
///
/// The step inspects the head in place and pops each packet exactly once
/// (to drop or to deliver it), so a packet is not moved more than needed.
pub trait Source {
    /// The head packet, for its timestamp and ECN marking.
    fn head_mut(&mut self) -> Option<&mut Packet>;
    /// Removes the head packet, updating the source's own accounting.
    fn pop(&mut self) -> Option<Packet>;
    /// Bytes queued, including the head.
    fn backlog_bytes(&self) -> u64;
}

/// RFC 8289 `dodequeue`, done on the head in place: `None` when the source
/// is empty, else whether the standing-queue condition has held for an
/// interval (`ok_to_drop`) for the head packet.
#[inline(always)]
fn check_head<S: Source + ?Sized>(
    p: &Params,
    v: &mut Vars,
    st: &mut Stats,
    src: &mut S,
    now: Instant,
) -> Option<bool> {
    let Some(head) = src.head_mut() else {
        v.on_empty();
        return None;
    };
    let (enqueued_at, len) = (head.enqueued_at, head.len as u64);
    let sojourn = now.saturating_since(enqueued_at);
    st.last_sojourn = sojourn;
    // A flow whose window allows a standing delay is judged against it, up
    // to one interval, and the interval grows by as much (as CAKE raises
    // both for a slow link's frame time): TCP control's window clamp bounds
    // the flow's data in flight to its share × its round trip plus the
    // allowance, so drops below that bound would only shrink the sender's
    // congestion window under the window the receiver shows, costing
    // throughput and buying no delay. A queue standing above it is met by
    // the control law as usual. At most `interval`: a standing delay above
    // the worst-case round trip CoDel is set for is not one a window should
    // keep (an ACK path behind a standing queue the other way can make an
    // allowance hundreds of milliseconds), and whatever shares the flow's
    // queue without an allowance waits behind what it lets stand.
    // Duration's subtraction saturates: no allowance, no extra.
    let extra = head.allowance().min(p.interval) - p.target;
    // The RFC measures the backlog once the packet has left.
    let behind = src.backlog_bytes().saturating_sub(len);
    if sojourn < p.target + extra || behind <= p.mtu_bytes as u64 {
        v.first_above_time = Instant::ZERO;
        return Some(false);
    }
    if v.first_above_time == Instant::ZERO {
        // ZERO is the "not above" sentinel; never store it as a deadline.
        v.first_above_time = Instant((now + p.interval + extra).0.max(1));
        Some(false)
    } else {
        Some(now >= v.first_above_time)
    }
}

/// Drops or marks the head by the control law. Returns true if it was
/// marked (it stays at the head, to be delivered), false if it was dropped
/// into `drops`.
#[inline]
fn punish_head<S: Source + ?Sized>(
    p: &Params,
    st: &mut Stats,
    src: &mut S,
    drops: &mut Drops,
) -> bool {
    if p.ecn {
        if let Some(head) = src.head_mut() {
            if head.mark_ce() {
                st.ecn_marks += 1;
                return true;
            }
        }
    }
    if let Some(pkt) = src.pop() {
        st.drops += 1;
        drops.push(Dropped {
            pkt,
            reason: DropReason::Aqm,
        });
    }
    false
}

/// The CoDel dequeue step (RFC 8289 §5.5 `dequeue`): returns the packet to
/// send, or `None` if the source ran dry. Packets dropped by the control law
/// are pushed to `drops` with [`DropReason::Aqm`]; the caller accounts them
/// (they were already popped from `src`). Marks are counted in `st`.
#[inline]
pub fn dequeue<S: Source + ?Sized>(
    p: &Params,
    v: &mut Vars,
    st: &mut Stats,
    src: &mut S,
    now: Instant,
    drops: &mut Drops,
) -> Option<Packet> {
    if select(p, v, st, src, now, drops) {
        src.pop()
    } else {
        None
    }
}

/// The CoDel dequeue step without the final pop: drops (or marks) what the
/// control law says, then leaves the packet to send at the head of `src`
/// and returns true, or returns false if the source ran dry. Exactly
/// [`dequeue`] minus its last `src.pop()`: a caller that pops the packet
/// itself moves it once, straight to where it goes.
#[inline]
pub fn select<S: Source + ?Sized>(
    p: &Params,
    v: &mut Vars,
    st: &mut Stats,
    src: &mut S,
    now: Instant,
    drops: &mut Drops,
) -> bool {
    let Some(ok_to_drop) = check_head(p, v, st, src, now) else {
        return false;
    };
    if !v.dropping && !ok_to_drop {
        // The common case: below target (or not for long enough), the head
        // that was just inspected is sent.
        if p.ce_threshold.is_some() {
            return mark_over_threshold(p, st, src, now);
        }
        return true;
    }
    control(p, v, st, src, now, drops, ok_to_drop)
}

/// The rest of [`select`]: the dropping state and the control law. Out of
/// line so the common step (below target) carries none of its registers.
#[inline(never)]
fn control<S: Source + ?Sized>(
    p: &Params,
    v: &mut Vars,
    st: &mut Stats,
    src: &mut S,
    now: Instant,
    drops: &mut Drops,
    ok_to_drop: bool,
) -> bool {
    if v.dropping {
        if !ok_to_drop {
            v.dropping = false;
        }
        let mut budget = MAX_DROPS_PER_DEQUEUE;
        while v.dropping && now >= v.drop_next && budget > 0 {
            budget -= 1;
            v.count = v.count.saturating_add(1);
            v.newton_step();
            if punish_head(p, st, src, drops) {
                // Marked, not dropped: deliver it and schedule the next
                // signal (Linux does the same; the queue does not shrink).
                v.drop_next = v.control_law(v.drop_next, p.interval);
                return mark_over_threshold(p, st, src, now);
            }
            match check_head(p, v, st, src, now) {
                Some(true) => v.drop_next = v.control_law(v.drop_next, p.interval),
                // Below target, or nothing left: leave the dropping state.
                Some(false) | None => v.dropping = false,
            }
        }
    } else {
        // Not dropping, and the standing queue has lasted an interval.
        if !punish_head(p, st, src, drops) {
            // RFC: dodequeue again; only its first_above_time update matters.
            let _ = check_head(p, v, st, src, now);
        }
        v.dropping = true;
        // Reuse the count of the last episode if it ended recently: the
        // drop rate that controlled the queue then is the best guess now.
        let delta = v.count.wrapping_sub(v.last_count);
        let recent = now.saturating_since(v.drop_next) < Duration(p.interval.0.saturating_mul(16));
        if delta > 1 && delta < u32::MAX / 2 && recent {
            v.count = delta;
            v.rec_inv_sqrt = exact_inv_sqrt(delta);
        } else {
            v.count = 1;
            v.rec_inv_sqrt = ONE_Q32;
        }
        v.last_count = v.count;
        v.drop_next = v.control_law(now, p.interval);
    }
    mark_over_threshold(p, st, src, now)
}

/// Shallow ECN marking by `ce_threshold` on the packet about to be sent (the
/// head). Returns whether there is one.
#[inline(always)]
fn mark_over_threshold<S: Source + ?Sized>(
    p: &Params,
    st: &mut Stats,
    src: &mut S,
    now: Instant,
) -> bool {
    let Some(pkt) = src.head_mut() else {
        return false;
    };
    if let Some(th) = p.ce_threshold {
        if pkt.ecn != crate::Ecn::Ce && now.saturating_since(pkt.enqueued_at) > th && pkt.mark_ce()
        {
            st.ce_threshold_marks += 1;
        }
    }
    true
}

/// A FIFO as a CoDel [`Source`].
struct FifoSource<'a> {
    queue: &'a mut VecDeque<Packet>,
    backlog_bytes: &'a mut u64,
}

impl Source for FifoSource<'_> {
    #[inline]
    fn head_mut(&mut self) -> Option<&mut Packet> {
        self.queue.front_mut()
    }
    #[inline]
    fn pop(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        *self.backlog_bytes -= p.len as u64;
        Some(p)
    }
    fn backlog_bytes(&self) -> u64 {
        *self.backlog_bytes
    }
}

/// Leaf discipline: one FIFO managed by CoDel, with a limit in packets (the
/// newcomer is refused at the limit, [`DropReason::QueueFull`]).
#[derive(Debug)]
pub struct Codel {
    params: Params,
    limit_packets: u32,
    queue: VecDeque<Packet>,
    /// Bytes in `queue` (not counting `held`).
    queue_bytes: u64,
    /// Packet chosen by `peek_len`, returned by the next `dequeue`.
    held: Option<Packet>,
    vars: Vars,
    codel_stats: Stats,
    stats: QueueStats,
    last_now: Instant,
}

impl Codel {
    /// Linux's default limit for sch_codel.
    pub const DEFAULT_LIMIT_PACKETS: u32 = 1000;

    pub fn new(params: Params, limit_packets: u32) -> Codel {
        let limit_packets = limit_packets.max(1);
        Codel {
            params,
            limit_packets,
            queue: VecDeque::with_capacity((limit_packets as usize).min(1024)),
            queue_bytes: 0,
            held: None,
            vars: Vars::new(),
            codel_stats: Stats::default(),
            stats: QueueStats::default(),
            last_now: Instant::ZERO,
        }
    }

    pub fn vars(&self) -> &Vars {
        &self.vars
    }
    pub fn codel_stats(&self) -> &Stats {
        &self.codel_stats
    }
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Runs the control step and accounts its drops and marks; true if a
    /// packet to send is left at the head of the queue.
    // Inlined into `dequeue`, which then pops the packet straight into its
    // return slot.
    #[inline(always)]
    fn pull(&mut self, now: Instant, drops: &mut Drops) -> bool {
        let from = drops.len();
        let marks_before = self.codel_stats.ecn_marks + self.codel_stats.ce_threshold_marks;
        let mut src = FifoSource {
            queue: &mut self.queue,
            backlog_bytes: &mut self.queue_bytes,
        };
        let found = select(
            &self.params,
            &mut self.vars,
            &mut self.codel_stats,
            &mut src,
            now,
            drops,
        );
        self.stats.on_drops_resident(&drops[from..]);
        self.stats.ecn_marks +=
            self.codel_stats.ecn_marks + self.codel_stats.ce_threshold_marks - marks_before;
        found
    }

    /// Removes the head chosen by `pull`.
    #[inline(always)]
    fn take_head(&mut self) -> Option<Packet> {
        let pkt = self.queue.pop_front()?;
        self.queue_bytes -= pkt.len as u64;
        Some(pkt)
    }
}

impl Qdisc for Codel {
    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last_now, now);
        if self.len() >= self.limit_packets as usize {
            self.stats.push_drop(pkt, DropReason::QueueFull, drops);
            return Enqueue::Rejected;
        }
        pkt.enqueued_at = now;
        self.stats.on_enqueue(&pkt);
        self.queue_bytes += pkt.len as u64;
        self.queue.push_back(pkt);
        Enqueue::Queued
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last_now, now);
        let pkt = if self.held.is_some() {
            self.held.take()?
        } else if self.pull(now, drops) {
            self.take_head()?
        } else {
            return None;
        };
        self.stats.on_dequeue(&pkt, now);
        Some(pkt)
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = clamp(&mut self.last_now, now);
        if self.held.is_none() && self.pull(now, drops) {
            self.held = self.take_head();
        }
        self.held.as_ref().map(|p| p.cost)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn len(&self) -> usize {
        self.queue.len() + usize::from(self.held.is_some())
    }

    fn backlog_bytes(&self) -> u64 {
        self.queue_bytes + self.held.as_ref().map_or(0, |p| p.len as u64)
    }

    fn purge(&mut self, drops: &mut Drops) {
        // Bounded by the resident count (≤ limit_packets + 1).
        for pkt in self.held.take().into_iter().chain(self.queue.drain(..)) {
            self.stats.push_drop_resident(pkt, DropReason::Purge, drops);
        }
        self.queue_bytes = 0;
        self.vars.reset();
    }

    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats);
    }
}

#[cfg(test)]
mod tests;
