//! Set-associative placement (CAKE's answer to the hash collisions RFC
//! 8290 accepts): a flow takes a free queue of its bucket's set when
//! another flow holds its own, and keeps it while it has packets.

use super::hosts::NEVER;
use super::lists::{OnList, Run};
use super::{FqCodel, FRESH};

/// Queues in a set: a flow takes a free queue of its bucket's set when
/// another flow holds its own (CAKE's set-associative hashing), so two
/// flows share a queue only when eight are busy in one set.
const SET_WAYS: u32 = 8;

impl FqCodel {
    /// The queue a packet of flow `hash` goes to: the queue it holds in
    /// its set, else its own bucket or another free queue of the set
    /// (taken with a fresh state), else its own bucket, shared (`true`).
    /// A busy bucket already shared keeps every flow without a queue of
    /// its own: one of them may have packets there.
    #[inline]
    pub(super) fn place(&mut self, hash: u64) -> (u32, bool) {
        let b = self.bucket(hash);
        let tag = (hash ^ (hash >> 32)) as u32;
        if self.slots.get(b as usize).map(|s| s.tag) == Some(tag) {
            return (b, false);
        }
        let start = b - b % SET_WAYS;
        let end = (start + SET_WAYS).min(self.params.flows);
        if let Some(i) = (start..end).find(|&i| self.slots[i as usize].tag == tag) {
            return (i, false);
        }
        let free = |i: u32| self.flows[i as usize].0.list == OnList::None;
        let own = &self.flows[b as usize].0;
        let pick = if free(b) {
            Some(b)
        } else if own.shared {
            None
        } else {
            (start..end).find(|&i| free(i))
        };
        let Some(i) = pick else {
            self.fq_stats.collisions += 1;
            return (b, true);
        };
        // Another flow's queue, idle: none of its state is this flow's.
        self.slots[i as usize].tag = tag;
        let f = &mut self.flows[i as usize].0;
        f.deficit = FRESH;
        f.bulk_epoch = NEVER;
        f.run = Run::EMPTY;
        f.vars.reset();
        (i, false)
    }
}
