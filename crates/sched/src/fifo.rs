//! Drop-tail FIFO, ALTQ's default leaf queue.
//!
//! # Principles
//! - Packets leave in exactly the order they arrived (one queue, no reordering).
//! - The queue never holds more than `limit_packets` packets nor, when set, more
//!   than `limit_bytes` bytes of `len`. A packet that would exceed either limit
//!   is the one refused (drop-tail, [`DropReason::QueueFull`]); resident packets
//!   are never pushed out.
//! - Never throttles: `next_wakeup` is always `None`.
//! - A limit of 0 packets is treated as 1 so the queue can always carry traffic
//!   (ALTQ's `qlimit 0` means "default"; the config layer maps it, but a bare 0
//!   here must not black-hole).
//! - With an ACK filter ([`Fifo::with_ack_filter`]), an arriving ACK may
//!   remove one older redundant pure ACK of its connection from the newest
//!   [`SCAN_LIMIT`](crate::ack_filter::SCAN_LIMIT) packets
//!   ([`DropReason::AckFilter`]); the others keep their order. It does so
//!   only when the newcomer is then accepted, so a full queue never trades
//!   an old ACK for nothing.

use crate::ack_filter::{self, AckFilter};
use crate::qdisc::clamp;
use crate::{ClassId, DropReason, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::collections::VecDeque;

/// ALTQ's default `qlimit`, in packets.
pub const DEFAULT_LIMIT_PACKETS: u32 = 50;

/// Configuration of a [`Fifo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Maximum resident packets (`qlimit`).
    pub limit_packets: u32,
    /// Optional maximum resident bytes (sum of `len`).
    pub limit_bytes: Option<u64>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            limit_packets: DEFAULT_LIMIT_PACKETS,
            limit_bytes: None,
        }
    }
}

/// One resident packet on its own aligned cache line: a 64-byte packet at
/// the allocator's 16-byte alignment straddles two lines three times in
/// four, so each cold push or pop cost two misses instead of one.
#[derive(Debug)]
#[repr(align(64))]
struct Slot(Packet);

const _: () = assert!(std::mem::size_of::<Slot>() == 64);

/// A drop-tail FIFO queue.
///
/// Layout (`repr(C)`, line-aligned): the first line holds everything an
/// enqueue touches (the queue, the limits, the clock, the backlog), the
/// second what a dequeue adds (the departure counters and the sojourn
/// histogram's header, see [`QueueStats`]); a cold queue costs one line per
/// enqueue and two per dequeue instead of four or five. The limits are kept
/// without an `Option`, whose tag would otherwise be the niche an enum
/// holding a `Fifo` uses for its discriminant (on a cold line, see
/// `leaf.rs`).
///
/// Counters: a FIFO's packets either leave (`deq_*`), are purged
/// (`drop_*[Purge]`) or are still resident, so the arrival counters and
/// the current length are derived from those when the statistics are read
/// ([`Fifo::stats`]) instead of being kept on the packet path; the
/// figures are the same.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Fifo {
    queue: VecDeque<Slot>,
    limit_packets: u32,
    /// In the padding after `limit_packets`: no line added.
    ack_filter: AckFilter,
    /// `params.limit_bytes`, `u64::MAX` when unset (one compare, no tag).
    limit_bytes: u64,
    last_now: Instant,
    /// Sum of `len` of resident packets.
    backlog_bytes: u64,
    /// Departures, drops, sojourn; `enq_*`, `qlen` and `backlog_bytes` stay
    /// zero here and are filled in by [`Fifo::stats`].
    stats: QueueStats,
}

impl Fifo {
    pub fn new(params: Params) -> Fifo {
        let params = Params {
            limit_packets: params.limit_packets.max(1),
            ..params
        };
        // Preallocate up to a modest bound so small queues never reallocate on
        // the hot path; huge limits grow on demand instead of reserving memory.
        let cap = (params.limit_packets as usize).min(1024);
        Fifo {
            queue: VecDeque::with_capacity(cap),
            limit_packets: params.limit_packets,
            ack_filter: AckFilter::Off,
            limit_bytes: params.limit_bytes.unwrap_or(u64::MAX),
            last_now: Instant::ZERO,
            backlog_bytes: 0,
            stats: QueueStats::default(),
        }
    }

    /// The same queue with an ACK filter (see the module's Principles).
    pub fn with_ack_filter(mut self, mode: AckFilter) -> Fifo {
        self.ack_filter = mode;
        self
    }

    pub fn ack_filter(&self) -> AckFilter {
        self.ack_filter
    }

    /// The limits in force (`limit_packets` at least 1; a byte limit of
    /// `u64::MAX` is no limit and reads back as `None`).
    pub fn params(&self) -> Params {
        Params {
            limit_packets: self.limit_packets,
            limit_bytes: (self.limit_bytes != u64::MAX).then_some(self.limit_bytes),
        }
    }

    /// The queue's statistics, with the counters derived from the others
    /// filled in (see the type's doc). Built when asked, off the packet path.
    pub fn stats(&self) -> QueueStats {
        let mut st = self.stats.clone();
        // Resident packets leave by dequeue, purge or the ACK filter.
        let gone = [DropReason::Purge.index(), DropReason::AckFilter.index()];
        st.qlen = self.queue.len() as u64;
        st.backlog_bytes = self.backlog_bytes;
        st.enq_packets =
            st.deq_packets + gone.iter().map(|&i| st.drop_packets[i]).sum::<u64>() + st.qlen;
        st.enq_bytes =
            st.deq_bytes + gone.iter().map(|&i| st.drop_bytes[i]).sum::<u64>() + st.backlog_bytes;
        st
    }

    /// `len` of the head packet, for a parent's bookkeeping before it
    /// dequeues.
    #[inline]
    pub(crate) fn head_len(&self) -> Option<u32> {
        self.queue.front().map(|s| s.0.len)
    }

    /// Whether `pkt` would fit without exceeding either limit.
    #[inline]
    fn fits(&self, pkt: &Packet) -> bool {
        self.queue.len() < self.limit_packets as usize
            && self.backlog_bytes.saturating_add(pkt.len as u64) <= self.limit_bytes
    }

    /// `enqueue` with the ACK filter on: out of line, so the plain FIFO's
    /// packet path carries only the test of the mode.
    #[inline(never)]
    fn enqueue_filtered(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let skip = self.queue.len().saturating_sub(ack_filter::SCAN_LIMIT);
        let victim = ack_filter::find_redundant(
            self.ack_filter,
            &pkt,
            self.queue.iter().skip(skip).map(|s| &s.0),
        )
        .map(|i| i + skip);
        let freed = victim
            .and_then(|i| self.queue.get(i))
            .map_or(0, |s| u64::from(s.0.len));
        let room = self.queue.len() - usize::from(victim.is_some()) < self.limit_packets as usize
            && (self.backlog_bytes - freed).saturating_add(pkt.len as u64) <= self.limit_bytes;
        if !room {
            self.stats.push_drop(pkt, DropReason::QueueFull, drops);
            return Enqueue::Rejected;
        }
        let mut outcome = Enqueue::Queued;
        if let Some(Slot(old)) = victim.and_then(|i| self.queue.remove(i)) {
            self.backlog_bytes -= old.len as u64;
            // `on_drop`: the resident counts are derived.
            self.stats.push_drop(old, DropReason::AckFilter, drops);
            outcome = Enqueue::QueuedDroppedOthers;
        }
        pkt.enqueued_at = now;
        self.backlog_bytes += pkt.len as u64;
        self.queue.push_back(Slot(pkt));
        outcome
    }
}

// `#[inline]` on the packet path: classful parents that hold a FIFO inline
// (see `leaf.rs`) call these directly, and the calls must fold into
// theirs.
impl Qdisc for Fifo {
    #[inline(always)]
    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last_now, now);
        if self.ack_filter.is_on() {
            return self.enqueue_filtered(pkt, now, drops);
        }
        if !self.fits(&pkt) {
            self.stats.push_drop(pkt, DropReason::QueueFull, drops);
            return Enqueue::Rejected;
        }
        pkt.enqueued_at = now;
        // `on_enqueue`'s counters are derived (see the type's doc).
        self.backlog_bytes += pkt.len as u64;
        self.queue.push_back(Slot(pkt));
        Enqueue::Queued
    }

    #[inline]
    fn dequeue(&mut self, now: Instant, _drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last_now, now);
        // Counted from the head in place, then popped as the result, so the
        // packet moves once (slot to return slot) when this is inlined.
        let head = &self.queue.front()?.0;
        self.backlog_bytes -= head.len as u64;
        // `on_dequeue` without `qlen`/`backlog_bytes`, which are derived.
        self.stats.deq_packets += 1;
        self.stats.deq_bytes += head.len as u64;
        self.stats
            .sojourn
            .record(now.saturating_since(head.enqueued_at));
        self.queue.pop_front().map(|Slot(pkt)| pkt)
    }

    fn peek_len(&mut self, now: Instant, _drops: &mut Drops) -> Option<u32> {
        clamp(&mut self.last_now, now);
        self.queue.front().map(|s| s.0.cost)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    #[inline]
    fn len(&self) -> usize {
        self.queue.len()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    fn purge(&mut self, drops: &mut Drops) {
        // Bounded by the resident count, itself bounded by `limit_packets`.
        for Slot(pkt) in self.queue.drain(..) {
            // `on_drop`, not `on_drop_resident`: the resident counts are
            // derived.
            self.stats.push_drop(pkt, DropReason::Purge, drops);
        }
        self.backlog_bytes = 0;
    }

    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{check_random, OpSpace};

    fn pkt(id: u64, len: u32) -> Packet {
        Packet::synthetic(id, len, 0, ClassId::ROOT)
    }

    fn fifo(limit_packets: u32, limit_bytes: Option<u64>) -> Fifo {
        Fifo::new(Params {
            limit_packets,
            limit_bytes,
        })
    }

    #[test]
    fn limit_in_packets_rejects_newcomer() {
        let mut q = fifo(3, None);
        let mut drops = Vec::new();
        for id in 0..3 {
            assert_eq!(
                q.enqueue(pkt(id, 100), Instant(0), &mut drops),
                Enqueue::Queued
            );
        }
        assert_eq!(
            q.enqueue(pkt(3, 100), Instant(0), &mut drops),
            Enqueue::Rejected
        );
        assert_eq!(drops.len(), 1);
        assert_eq!(drops[0].pkt.id, 3, "the newcomer is the one dropped");
        assert_eq!(drops[0].reason, DropReason::QueueFull);
        assert_eq!(q.len(), 3);
        assert_eq!(q.stats().drop_packets[DropReason::QueueFull.index()], 1);
        assert_eq!(q.stats().drop_bytes[DropReason::QueueFull.index()], 100);
    }

    #[test]
    fn limit_in_bytes_rejects_newcomer() {
        let mut q = fifo(100, Some(1000));
        let mut drops = Vec::new();
        for (id, len) in [(0, 600), (1, 400)] {
            assert_eq!(
                q.enqueue(pkt(id, len), Instant(0), &mut drops),
                Enqueue::Queued
            );
        }
        assert_eq!(
            q.backlog_bytes(),
            1000,
            "exactly at the byte limit is allowed"
        );
        assert_eq!(
            q.enqueue(pkt(2, 1), Instant(0), &mut drops),
            Enqueue::Rejected
        );
        assert_eq!(drops[0].pkt.id, 2);
        // After room is made, the same size fits again.
        assert!(q.dequeue(Instant(1), &mut drops).is_some());
        assert_eq!(
            q.enqueue(pkt(3, 600), Instant(1), &mut drops),
            Enqueue::Queued
        );
        assert_eq!(q.backlog_bytes(), 1000);
    }

    #[test]
    fn zero_limit_still_carries_one_packet() {
        let mut q = fifo(0, None);
        let mut drops = Vec::new();
        for (id, want) in [(0, Enqueue::Queued), (1, Enqueue::Rejected)] {
            assert_eq!(q.enqueue(pkt(id, 60), Instant(0), &mut drops), want);
        }
    }

    #[test]
    fn order_and_sojourn_stamp() {
        let mut q = Fifo::new(Params::default());
        let mut drops = Vec::new();
        for id in 0..10u64 {
            q.enqueue(pkt(id, 64 + id as u32), Instant(id * 10), &mut drops);
        }
        assert_eq!(q.peek_len(Instant(100), &mut drops), Some(64));
        for id in 0..10u64 {
            let p = q.dequeue(Instant(100), &mut drops).expect("resident");
            assert_eq!(p.id, id);
            assert_eq!(p.enqueued_at, Instant(id * 10));
        }
        assert!(q.dequeue(Instant(100), &mut drops).is_none());
        assert_eq!(q.stats().deq_packets, 10);
        assert_eq!(q.stats().sojourn.count(), 10);
        assert!(drops.is_empty());
    }

    #[test]
    fn backwards_time_is_clamped_for_stamps() {
        let mut q = Fifo::new(Params::default());
        let mut drops = Vec::new();
        q.enqueue(pkt(0, 60), Instant(1000), &mut drops);
        q.enqueue(pkt(1, 60), Instant(10), &mut drops);
        q.dequeue(Instant(0), &mut drops);
        let p = q.dequeue(Instant(0), &mut drops).expect("resident");
        assert_eq!(
            p.enqueued_at,
            Instant(1000),
            "earlier now clamped to the latest"
        );
    }

    #[test]
    fn derived_counters_match_an_explicit_count() {
        // Counts kept the plain way beside a random mix of arrivals (some
        // refused), departures and a purge; the FIFO's derived arrival,
        // length and backlog counters must agree at every step.
        let mut q = fifo(8, Some(5_000));
        let mut rng = crate::testing::Rng::new(11);
        let mut drops = Vec::new();
        let (mut enq, mut enq_bytes, mut resident, mut bytes) = (0u64, 0u64, 0u64, 0u64);
        for step in 0..3_000u64 {
            if step % 500 == 499 {
                q.purge(&mut drops);
                (resident, bytes) = (0, 0);
            }
            match rng.below(6) {
                0..=3 => {
                    let len = 100 + rng.below(1400) as u32;
                    if q.enqueue(pkt(step, len), Instant(step), &mut drops) == Enqueue::Queued {
                        enq += 1;
                        enq_bytes += len as u64;
                        resident += 1;
                        bytes += len as u64;
                    }
                }
                _ => {
                    if let Some(p) = q.dequeue(Instant(step), &mut drops) {
                        resident -= 1;
                        bytes -= p.len as u64;
                    }
                }
            }
            let st = q.stats();
            assert_eq!(
                (st.enq_packets, st.enq_bytes, st.qlen, st.backlog_bytes),
                (enq, enq_bytes, resident, bytes),
                "step {step}"
            );
            assert_eq!(q.backlog_bytes(), bytes);
        }
        let st = q.stats();
        assert!(st.drop_packets[DropReason::Purge.index()] > 0, "{st:?}");
        assert!(st.drop_packets[DropReason::QueueFull.index()] > 0, "{st:?}");
        assert!(st.deq_packets > 0);
    }

    #[test]
    fn model_check() {
        let space = OpSpace::default().with_flows(16);
        let r = check_random(|| Box::new(fifo(20, Some(12_000))), &space, 300, 300);
        assert!(r.dequeued > 0 && r.dropped > 0, "{r:?}");
    }
}
