//! The real-time criterion: eligible times and deadlines of leaves (paper §IV).
//!
//! # Principles
//! - A backlogged real-time leaf has an eligible time `e` (from the eligible
//!   curve and the bytes it got by this criterion, `cumul`) and a deadline `d`
//!   (when the deadline curve reaches `cumul + head_cost`).
//! - Among leaves with `e <= now` the smallest `d` is sent first.
//! - Instead of ALTQ's scan of the eligible list (O(eligible leaves) per
//!   packet) the leaves live in two indexed heaps: `pending` by `e` and
//!   `ready` by `d`. A dequeue first moves the pending leaves whose `e`
//!   has come to `ready`; each leaf moves at most once per update of its
//!   times, so selection is O(log n) amortised.
//! - Invariant: a leaf is in exactly the heap its `rt_slot` names, under the
//!   key its `e` (pending) or `d` (ready) holds now.

use super::class::{Class, RtSlot};
use super::heap::{Heap, NOT_IN_HEAP};

#[derive(Default)]
pub(crate) struct Eligible {
    /// Backlogged leaves not yet eligible, by eligible time.
    pending: Heap,
    /// Eligible leaves, by deadline.
    ready: Heap,
    /// Position of each slot in whichever of the two heaps holds it.
    pos: Vec<u32>,
}

impl Eligible {
    /// Room for `slots` classes.
    pub(crate) fn grow(&mut self, slots: usize) {
        self.pos.resize(slots, NOT_IN_HEAP);
    }

    fn remove(&mut self, c: &mut Class, slot: u32) {
        match c.rt_slot {
            RtSlot::Out => {}
            RtSlot::Pending => self.pending.remove(slot, &mut self.pos),
            RtSlot::Ready => self.ready.remove(slot, &mut self.pos),
        }
        c.rt_slot = RtSlot::Out;
    }

    /// Puts `c` where its times say, re-keying in place when it stays in the
    /// same heap.
    fn place(&mut self, c: &mut Class, slot: u32, now: u64) {
        let want = if c.e <= now {
            RtSlot::Ready
        } else {
            RtSlot::Pending
        };
        if want != c.rt_slot {
            self.remove(c, slot);
            match want {
                RtSlot::Ready => self.ready.push(c.d, slot, &mut self.pos),
                _ => self.pending.push(c.e, slot, &mut self.pos),
            }
            c.rt_slot = want;
        } else if want == RtSlot::Ready {
            self.ready.rekey(slot, c.d, &mut self.pos);
        } else {
            self.pending.rekey(slot, c.e, &mut self.pos);
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
        self.update_ed(c, slot, now);
    }

    /// After a real-time dequeue: new eligible time and deadline.
    pub(crate) fn update_ed(&mut self, c: &mut Class, slot: u32, now: u64) {
        let Some(rt) = c.rt else { return };
        c.e = c.eligible.y2x(&rt, c.cumul);
        self.update_d(c, slot, now);
    }

    /// After a link-sharing dequeue: `cumul` did not move, only the head
    /// packet (and so the deadline) changed.
    pub(crate) fn update_d(&mut self, c: &mut Class, slot: u32, now: u64) {
        let Some(rt) = c.rt else { return };
        c.d = c
            .deadline
            .y2x(&rt, c.cumul.saturating_add(c.head_cost as u64));
        self.place(c, slot, now);
    }

    pub(crate) fn deactivate(&mut self, c: &mut Class, slot: u32) {
        self.remove(c, slot);
    }

    /// The eligible leaf with the smallest deadline, after promoting the
    /// leaves whose eligible time has come.
    pub(crate) fn min_deadline(&mut self, classes: &mut [Class], now: u64) -> Option<u32> {
        // Bounded by the number of leaves: each pending entry moves once.
        while let Some((e, slot)) = self.pending.peek() {
            if e > now {
                break;
            }
            self.pending.pop(&mut self.pos);
            if let Some(c) = classes.get_mut(slot as usize) {
                self.ready.push(c.d, slot, &mut self.pos);
                c.rt_slot = RtSlot::Ready;
            }
        }
        self.ready.peek().map(|(_, slot)| slot)
    }

    /// Earliest eligible time among the leaves not yet eligible.
    pub(crate) fn next_eligible(&self) -> Option<u64> {
        self.pending.peek().map(|(e, _)| e)
    }

    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.pending.clear(&mut self.pos);
        self.ready.clear(&mut self.pos);
    }
}
