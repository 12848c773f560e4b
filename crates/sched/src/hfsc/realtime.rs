//! The real-time criterion: eligible times and deadlines of leaves (paper §IV).
//!
//! # Principles
//! - A backlogged real-time leaf has an eligible time `e` (from the eligible
//!   curve and the bytes it got by this criterion, `cumul`) and a deadline `d`
//!   (when the deadline curve reaches `cumul + head_cost`).
//! - Among leaves with `e <= now` the smallest `d` is sent first.
//! - Instead of ALTQ's scan of the eligible list (O(eligible leaves) per
//!   packet) the leaves live in two ordered sets: `pending` by `(e, slot)` and
//!   `ready` by `(d, slot)`. A dequeue first moves the pending leaves whose `e`
//!   has come to `ready`; each leaf moves at most once per update of its
//!   times, so selection is O(log n) amortised.
//! - Invariant: a leaf is in exactly the set its `rt_slot` names, under the key
//!   its `e` (pending) or `d` (ready) holds now.

use super::class::{Class, RtSlot};
use std::collections::BTreeSet;

#[derive(Default)]
pub(crate) struct Eligible {
    pending: BTreeSet<(u64, u32)>,
    ready: BTreeSet<(u64, u32)>,
}

impl Eligible {
    fn remove(&mut self, c: &mut Class, slot: u32) {
        match c.rt_slot {
            RtSlot::Out => {}
            RtSlot::Pending => {
                self.pending.remove(&(c.e, slot));
            }
            RtSlot::Ready => {
                self.ready.remove(&(c.d, slot));
            }
        }
        c.rt_slot = RtSlot::Out;
    }

    fn insert(&mut self, c: &mut Class, slot: u32, now: u64) {
        if c.e <= now {
            self.ready.insert((c.d, slot));
            c.rt_slot = RtSlot::Ready;
        } else {
            self.pending.insert((c.e, slot));
            c.rt_slot = RtSlot::Pending;
        }
    }

    /// A leaf became backlogged: the deadline curve becomes the minimum of
    /// the old one and the curve anchored at (now, cumul) (`init_ed`).
    pub(crate) fn activate(&mut self, c: &mut Class, slot: u32, now: u64) {
        let Some(rt) = c.rt else { return };
        c.deadline.min_with(&rt, now, c.cumul);
        c.eligible = c.deadline;
        if rt.is_convex() {
            // For a convex curve the eligible curve is the line of slope m2
            // from the anchor: service the class may take early because the
            // curve promises more later (paper §IV-A).
            c.eligible.dx = 0;
            c.eligible.dy = 0;
        }
        c.e = c.eligible.y2x(&rt, c.cumul);
        c.d = c
            .deadline
            .y2x(&rt, c.cumul.saturating_add(c.head_cost as u64));
        self.remove(c, slot);
        self.insert(c, slot, now);
    }

    /// After a real-time dequeue: new eligible time and deadline.
    pub(crate) fn update_ed(&mut self, c: &mut Class, slot: u32, now: u64) {
        let Some(rt) = c.rt else { return };
        self.remove(c, slot);
        c.e = c.eligible.y2x(&rt, c.cumul);
        c.d = c
            .deadline
            .y2x(&rt, c.cumul.saturating_add(c.head_cost as u64));
        self.insert(c, slot, now);
    }

    /// After a link-sharing dequeue: `cumul` did not move, only the head
    /// packet (and so the deadline) changed.
    pub(crate) fn update_d(&mut self, c: &mut Class, slot: u32, now: u64) {
        let Some(rt) = c.rt else { return };
        self.remove(c, slot);
        c.d = c
            .deadline
            .y2x(&rt, c.cumul.saturating_add(c.head_cost as u64));
        self.insert(c, slot, now);
    }

    pub(crate) fn deactivate(&mut self, c: &mut Class, slot: u32) {
        self.remove(c, slot);
    }

    /// The eligible leaf with the smallest deadline, after promoting the
    /// leaves whose eligible time has come.
    pub(crate) fn min_deadline(&mut self, classes: &mut [Class], now: u64) -> Option<u32> {
        // Bounded by the number of leaves: each pending entry moves once.
        while let Some(&(e, slot)) = self.pending.first() {
            if e > now {
                break;
            }
            self.pending.pop_first();
            if let Some(c) = classes.get_mut(slot as usize) {
                self.ready.insert((c.d, slot));
                c.rt_slot = RtSlot::Ready;
            }
        }
        self.ready.first().map(|&(_, slot)| slot)
    }

    /// Earliest eligible time among the leaves not yet eligible.
    pub(crate) fn next_eligible(&self) -> Option<u64> {
        self.pending.first().map(|&(e, _)| e)
    }

    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.pending.clear();
        self.ready.clear();
    }
}
