//! Plain per-queue counters, the material of `sluice show queues`.

use crate::{DropReason, Dropped, Drops, Packet};
use sluice_time::{Histogram, Instant};

/// Counters of one queue or class. Disciplines update them; nobody resets them
/// behind the user's back.
///
/// `repr(C)`: the counters every enqueue and dequeue touch come first (72
/// bytes with the histogram's header; a dequeue's own, 40 bytes, first of
/// all), the ones only drops and shapers touch after them, so a queue's hot
/// counters share one or two cache lines.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct QueueStats {
    pub deq_packets: u64,
    pub deq_bytes: u64,
    /// Time from enqueue to dequeue of forwarded packets.
    pub sojourn: Histogram,
    pub enq_packets: u64,
    pub enq_bytes: u64,
    /// Current length, packets and bytes (kept by the discipline).
    pub qlen: u64,
    pub backlog_bytes: u64,
    pub ecn_marks: u64,
    /// CBQ: times a class borrowed from its parent.
    pub borrows: u64,
    /// CBQ/HFSC/shapers: times a class was held back by its rate limit.
    pub overlimits: u64,
    /// Drops by [`DropReason::index`].
    pub drop_packets: [u64; DropReason::ALL.len()],
    pub drop_bytes: [u64; DropReason::ALL.len()],
}

impl QueueStats {
    #[inline]
    pub fn on_enqueue(&mut self, pkt: &Packet) {
        self.enq_packets += 1;
        self.enq_bytes += pkt.len as u64;
        self.qlen += 1;
        self.backlog_bytes += pkt.len as u64;
    }

    #[inline]
    pub fn on_dequeue(&mut self, pkt: &Packet, now: Instant) {
        self.deq_packets += 1;
        self.deq_bytes += pkt.len as u64;
        self.qlen = self.qlen.saturating_sub(1);
        self.backlog_bytes = self.backlog_bytes.saturating_sub(pkt.len as u64);
        self.sojourn.record(now.saturating_since(pkt.enqueued_at));
    }

    /// A packet that was counted in by `on_enqueue` and leaves as a drop.
    pub fn on_drop_resident(&mut self, pkt: &Packet, reason: DropReason) {
        self.qlen = self.qlen.saturating_sub(1);
        self.backlog_bytes = self.backlog_bytes.saturating_sub(pkt.len as u64);
        self.on_drop(pkt, reason);
    }

    /// A packet refused at the door (never counted by `on_enqueue`).
    pub fn on_drop(&mut self, pkt: &Packet, reason: DropReason) {
        self.drop_packets[reason.index()] += 1;
        self.drop_bytes[reason.index()] += pkt.len as u64;
    }

    /// Counts a refused `pkt` (see [`Self::on_drop`]) and hands it to the
    /// caller in `drops`.
    #[inline]
    pub(crate) fn push_drop(&mut self, pkt: Packet, reason: DropReason, drops: &mut Drops) {
        self.on_drop(&pkt, reason);
        drops.push(Dropped { pkt, reason });
    }

    /// Counts a resident `pkt` leaving as a drop (see
    /// [`Self::on_drop_resident`]) and hands it to the caller in `drops`.
    #[inline]
    pub(crate) fn push_drop_resident(
        &mut self,
        pkt: Packet,
        reason: DropReason,
        drops: &mut Drops,
    ) {
        self.on_drop_resident(&pkt, reason);
        drops.push(Dropped { pkt, reason });
    }

    /// Counts `dropped` (what a child or the control law just pushed) as
    /// resident drops.
    #[inline]
    pub(crate) fn on_drops_resident(&mut self, dropped: &[Dropped]) {
        for d in dropped {
            self.on_drop_resident(&d.pkt, d.reason);
        }
    }

    /// Counts `dropped` as drops only (see [`Self::on_drop`]).
    #[inline]
    pub(crate) fn on_drops(&mut self, dropped: &[Dropped]) {
        for d in dropped {
            self.on_drop(&d.pkt, d.reason);
        }
    }

    /// Adds `other`'s counters to these (an aggregate over queues).
    pub fn add(&mut self, other: &QueueStats) {
        self.enq_packets += other.enq_packets;
        self.enq_bytes += other.enq_bytes;
        self.deq_packets += other.deq_packets;
        self.deq_bytes += other.deq_bytes;
        self.qlen += other.qlen;
        self.backlog_bytes += other.backlog_bytes;
        self.sojourn.merge(&other.sojourn);
        self.ecn_marks += other.ecn_marks;
        self.borrows += other.borrows;
        self.overlimits += other.overlimits;
        for (a, b) in self.drop_packets.iter_mut().zip(other.drop_packets) {
            *a += b;
        }
        for (a, b) in self.drop_bytes.iter_mut().zip(other.drop_bytes) {
            *a += b;
        }
    }

    pub fn total_drops(&self) -> u64 {
        self.drop_packets.iter().sum()
    }
}
