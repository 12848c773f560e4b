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

pub(crate) struct Leaf {
    pub q: Box<dyn Qdisc>,
    pub stats: QueueStats,
}

impl Leaf {
    pub fn new(q: Box<dyn Qdisc>) -> Leaf {
        Leaf {
            q,
            stats: QueueStats::default(),
        }
    }

    fn snapshot(&self) -> (i64, i64) {
        (self.q.len() as i64, self.q.backlog_bytes() as i64)
    }

    fn delta_since(&self, before: (i64, i64)) -> Delta {
        let after = self.snapshot();
        Delta {
            packets: after.0 - before.0,
            bytes: after.1 - before.1,
        }
    }

    /// Counts the drops the leaf pushed at `drops[start..]` as resident drops,
    /// except a refused newcomer (`fresh`), which never was resident.
    fn count_drops(&mut self, drops: &Drops, start: usize, fresh: Option<u64>) {
        for d in drops.iter().skip(start) {
            if Some(d.pkt.id) == fresh {
                self.stats.on_drop(&d.pkt, d.reason);
            } else {
                self.stats.on_drop_resident(&d.pkt, d.reason);
            }
        }
    }

    pub fn enqueue(
        &mut self,
        mut pkt: Packet,
        now: Instant,
        drops: &mut Drops,
    ) -> (Enqueue, Delta) {
        let before = self.snapshot();
        let start = drops.len();
        pkt.enqueued_at = now;
        let id = pkt.id;
        // Counted in first; a newcomer the leaf then drops is counted out as
        // resident, which keeps enq = deq + drops + qlen per class.
        self.stats.on_enqueue(&pkt);
        let r = self.q.enqueue(pkt, now, drops);
        if r == Enqueue::Rejected {
            // Undo the optimistic count: a refused packet never entered.
            if let Some(d) = drops.iter().skip(start).find(|d| d.pkt.id == id) {
                let len = d.pkt.len as u64;
                self.stats.enq_packets = self.stats.enq_packets.saturating_sub(1);
                self.stats.enq_bytes = self.stats.enq_bytes.saturating_sub(len);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(len);
            }
            self.count_drops(drops, start, Some(id));
        } else {
            self.count_drops(drops, start, None);
        }
        (r, self.delta_since(before))
    }

    pub fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> (Option<Packet>, Delta) {
        let before = self.snapshot();
        let start = drops.len();
        let p = self.q.dequeue(now, drops);
        self.count_drops(drops, start, None);
        if let Some(p) = &p {
            self.stats.on_dequeue(p, now);
        }
        (p, self.delta_since(before))
    }

    pub fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> (Option<u32>, Delta) {
        let before = self.snapshot();
        let start = drops.len();
        let c = self.q.peek_len(now, drops);
        self.count_drops(drops, start, None);
        (c, self.delta_since(before))
    }

    pub fn purge(&mut self, drops: &mut Drops) -> Delta {
        let before = self.snapshot();
        let start = drops.len();
        self.q.purge(drops);
        self.count_drops(drops, start, None);
        self.delta_since(before)
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
