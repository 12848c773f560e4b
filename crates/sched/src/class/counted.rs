//! A child queue of a classful discipline (DRR, WF2Q+, CBQ) together with the
//! class's counters, so that every parent keeps `QueueStats` and its resident
//! totals the same way.
//!
//! The leaf is any `Box<dyn Qdisc>`; it may refuse, drop on enqueue (to make
//! room) and drop on dequeue or peek (AQM). Every such drop is already in
//! `drops` when the leaf returns; this wrapper counts it against the class and
//! reports how the resident totals changed, so the parent never walks its
//! classes to answer `len()` / `backlog_bytes()`.

use crate::{Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;

/// Change of the resident packets and bytes caused by one leaf operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    pub packets: i64,
    pub bytes: i64,
}

/// A class's child queue and the class's counters (the child alone, with
/// a FIFO kept unboxed, is [`crate::leaf::Leaf`], which PRIQ uses).
pub(crate) struct Counted {
    pub q: Box<dyn Qdisc>,
    pub stats: QueueStats,
}

impl Counted {
    /// This leaf holds packets but gave none: `stalled`, the parent's
    /// earliest wake-up, takes the leaf's (or `last`, the parent's latest
    /// time, when the leaf names none).
    pub fn note_stall(&self, stalled: &mut Option<Instant>, last: Instant) {
        let w = self.q.next_wakeup().unwrap_or(last);
        *stalled = Some(stalled.map_or(w, |s| s.min(w)));
    }

    pub fn new(q: Box<dyn Qdisc>) -> Counted {
        Counted {
            q,
            stats: QueueStats::default(),
        }
    }

    /// Counts the drops the leaf pushed at `drops[start..]` as resident drops,
    /// except a refused newcomer (`fresh`), which never was resident, and
    /// returns the change of the resident totals they make.
    fn count_drops(&mut self, drops: &Drops, start: usize, fresh: Option<u64>) -> Delta {
        let mut delta = Delta::default();
        for d in drops.iter().skip(start) {
            if Some(d.pkt.id) == fresh {
                self.stats.on_drop(&d.pkt, d.reason);
            } else {
                self.stats.on_drop_resident(&d.pkt, d.reason);
                delta.packets -= 1;
                delta.bytes -= d.pkt.len as i64;
            }
        }
        delta
    }

    // The deltas are derived from what the leaf returned (the packet in or
    // out, and every drop it reported) rather than by asking it for its
    // length before and after: the contract says nothing leaves silently,
    // and this keeps virtual calls off the packet path.

    pub fn enqueue(
        &mut self,
        mut pkt: Packet,
        now: Instant,
        drops: &mut Drops,
    ) -> (Enqueue, Delta) {
        let start = drops.len();
        pkt.enqueued_at = now;
        let id = pkt.id;
        let len = pkt.len as i64;
        // Counted in first; a newcomer the leaf then drops is counted out as
        // resident, which keeps enq = deq + drops + qlen per class.
        self.stats.on_enqueue(&pkt);
        let r = self.q.enqueue(pkt, now, drops);
        let mut delta = Delta {
            packets: 1,
            bytes: len,
        };
        if r == Enqueue::Rejected {
            // Undo the optimistic count: a refused packet never entered.
            let refused = drops.iter().skip(start).any(|d| d.pkt.id == id);
            if refused {
                let len = len as u64;
                self.stats.enq_packets = self.stats.enq_packets.saturating_sub(1);
                self.stats.enq_bytes = self.stats.enq_bytes.saturating_sub(len);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(len);
            }
            delta = Delta::default();
            let d = self.count_drops(drops, start, Some(id));
            delta.packets += d.packets;
            delta.bytes += d.bytes;
        } else {
            let d = self.count_drops(drops, start, None);
            delta.packets += d.packets;
            delta.bytes += d.bytes;
        }
        (r, delta)
    }

    pub fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> (Option<Packet>, Delta) {
        let start = drops.len();
        let p = self.q.dequeue(now, drops);
        let mut delta = self.count_drops(drops, start, None);
        if let Some(p) = &p {
            self.stats.on_dequeue(p, now);
            delta.packets -= 1;
            delta.bytes -= p.len as i64;
        }
        (p, delta)
    }

    pub fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> (Option<u32>, Delta) {
        let start = drops.len();
        let c = self.q.peek_len(now, drops);
        (c, self.count_drops(drops, start, None))
    }

    pub fn purge(&mut self, drops: &mut Drops) -> Delta {
        let start = drops.len();
        self.q.purge(drops);
        self.count_drops(drops, start, None)
    }
}

/// Resident totals of a classful discipline, updated from leaf deltas.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Totals {
    pub packets: u64,
    pub bytes: u64,
}

impl Totals {
    pub fn apply(&mut self, d: Delta) {
        self.packets = self.packets.saturating_add_signed(d.packets);
        self.bytes = self.bytes.saturating_add_signed(d.bytes);
    }
}

/// `next_wakeup`, `len` and `backlog_bytes` of a classful parent that keeps
/// `totals: Totals` from its leaves' deltas (DRR, WF2Q+, CBQ), written once.
/// `$wakeup` names the parent's `Option<Instant>` field of its pending
/// wake-up, which only counts while something is resident.
macro_rules! resident_from_totals {
    ($wakeup:ident) => {
        fn next_wakeup(&self) -> Option<Instant> {
            if self.totals.packets == 0 {
                None
            } else {
                self.$wakeup
            }
        }

        fn len(&self) -> usize {
            self.totals.packets as usize
        }

        fn backlog_bytes(&self) -> u64 {
            self.totals.bytes
        }
    };
}
pub(crate) use resident_from_totals;
