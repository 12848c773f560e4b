//! PRIQ: strict priority queueing, as ALTQ's `priq`.
//!
//! # Principles
//! - Strict priority: `dequeue` serves the highest non-empty priority (15 is
//!   highest, 0 lowest). A packet of a lower priority never leaves while a
//!   packet of a higher priority is queued and sendable (a child that is
//!   throttled is skipped, never waited for — none of the leaves we build
//!   throttle, but a child shaper must not stall the others).
//! - Within a class, the child discipline decides (FIFO for a `Fifo` leaf);
//!   several classes sharing one priority are served packet-by-packet round
//!   robin (ALTQ allows one class per priority; the 5.5+ syntax allows more).
//! - Packets whose class is unknown go to the default class; with no default
//!   they are refused with [`DropReason::NoClass`].
//! - O(1) selection: a 16-bit bitmap of priorities with at least one non-empty
//!   class, and per priority a ring of its non-empty classes. Invariant: bit
//!   `p` is set ⇔ ring `p` is non-empty ⇔ some class of priority `p` is
//!   non-empty (restored after every operation on a child).
//! - PRIQ does not rate-limit; the engine puts a token-bucket regulator above.
//! - Layout: a FIFO child (the usual one) is stored inline in the class
//!   table (`leaf.rs`) and each class's priority and ring flag sit in a
//!   dense side array, so a packet touches its class's FIFO lines and the
//!   packet's own line, not a box, a vtable and scattered metadata.
//! - `peek_len` chooses the class the next `dequeue` serves, until a packet
//!   of a *higher* priority arrives: that one goes next.
//!
//! Statistics: each class reports its leaf's counters under its own id;
//! PRIQ's aggregate (with `NoClass` refusals) is [`ClassId::ROOT`].

use crate::leaf::Leaf;
use crate::qdisc::{clamp, earliest_wakeup};
use crate::{ClassId, DropReason, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::collections::VecDeque;
use std::fmt;

/// Number of priorities (0..=15).
pub const PRIORITIES: usize = 16;

/// Class ids below this are found through a dense table; larger ids through a
/// sorted list (binary search). Engines number classes densely from 1.
const DENSE_IDS: u32 = 1 << 16;

/// Errors of PRIQ configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriqError {
    /// Priority outside 0..=15.
    PriorityOutOfRange { priority: u8 },
    /// The id is already used by another class.
    DuplicateClass(ClassId),
    /// `ClassId::ROOT` names PRIQ itself in statistics.
    ReservedId,
    /// `set_default` named a class that was never added.
    UnknownClass(ClassId),
}

impl fmt::Display for PriqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PriqError::PriorityOutOfRange { priority } => {
                write!(f, "priq: priority {priority} out of range (0..=15)")
            }
            PriqError::DuplicateClass(id) => write!(f, "priq: class {} defined twice", id.0),
            PriqError::ReservedId => write!(f, "priq: class id 0 is reserved for the root"),
            PriqError::UnknownClass(id) => {
                write!(f, "priq: default class {} does not exist", id.0)
            }
        }
    }
}

impl std::error::Error for PriqError {}

/// Per-class scheduling state, apart from the leaves so the ring and bitmap
/// bookkeeping reads a dense array (2 bytes a class) instead of a line of
/// each class.
#[derive(Clone, Copy, Debug)]
struct Meta {
    priority: u8,
    /// In its priority's ring (i.e. non-empty).
    active: bool,
}

/// Strict priority scheduler over child disciplines.
pub struct Priq {
    /// The child of each class, by index (a FIFO inline, see `leaf.rs`).
    leaves: Vec<Leaf>,
    meta: Vec<Meta>,
    ids: Vec<ClassId>,
    /// `dense[id]` = index into `leaves` + 1 (0 = none), for ids < `DENSE_IDS`.
    dense: Vec<u32>,
    /// Sorted (id, index) for ids ≥ `DENSE_IDS`.
    sparse: Vec<(u32, u32)>,
    default: Option<u32>,
    /// Bit p set ⇔ `rings[p]` non-empty.
    nonempty: u16,
    rings: [VecDeque<u32>; PRIORITIES],
    /// Class chosen by the last `peek_len`, served by the next `dequeue`.
    peeked: Option<u32>,
    len: usize,
    backlog_bytes: u64,
    last_now: Instant,
    /// PRIQ's own refusals (`NoClass`). The root's statistics are these plus
    /// the sum of the classes' (see [`Priq::stats`]): every other packet is
    /// counted once, by its class, not a second time here on the packet path.
    own: QueueStats,
}

impl Default for Priq {
    fn default() -> Self {
        Priq::new()
    }
}

impl fmt::Debug for Priq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Priq")
            .field("classes", &self.leaves.len())
            .field("len", &self.len)
            .field("backlog_bytes", &self.backlog_bytes)
            .finish()
    }
}

impl Priq {
    pub fn new() -> Priq {
        Priq {
            leaves: Vec::new(),
            meta: Vec::new(),
            ids: Vec::new(),
            dense: Vec::new(),
            sparse: Vec::new(),
            default: None,
            nonempty: 0,
            rings: Default::default(),
            peeked: None,
            len: 0,
            backlog_bytes: 0,
            last_now: Instant::ZERO,
            own: QueueStats::default(),
        }
    }

    /// Adds a leaf class. `priority` 0..=15, higher served first.
    pub fn add_class(
        &mut self,
        id: ClassId,
        priority: u8,
        leaf: Box<dyn Qdisc>,
    ) -> Result<(), PriqError> {
        if priority as usize >= PRIORITIES {
            return Err(PriqError::PriorityOutOfRange { priority });
        }
        if id == ClassId::ROOT {
            return Err(PriqError::ReservedId);
        }
        if self.index_of(id).is_some() {
            return Err(PriqError::DuplicateClass(id));
        }
        let idx = self.leaves.len() as u32;
        let active = !leaf.is_empty();
        self.len += leaf.len();
        self.backlog_bytes += leaf.backlog_bytes();
        self.leaves.push(Leaf::new(leaf));
        self.meta.push(Meta { priority, active });
        self.ids.push(id);
        if active {
            self.activate(idx);
        }
        if id.0 < DENSE_IDS {
            let slot = id.0 as usize;
            if self.dense.len() <= slot {
                self.dense.resize(slot + 1, 0);
            }
            self.dense[slot] = idx + 1;
        } else {
            let pos = self.sparse.partition_point(|&(k, _)| k < id.0);
            self.sparse.insert(pos, (id.0, idx));
        }
        for r in &mut self.rings {
            // Rings never hold more than all classes; reserve now so the
            // packet path never reallocates.
            r.reserve(self.leaves.len().saturating_sub(r.len()));
        }
        Ok(())
    }

    /// Packets of unknown classes go to `id`.
    pub fn set_default(&mut self, id: ClassId) -> Result<(), PriqError> {
        let idx = self.index_of(id).ok_or(PriqError::UnknownClass(id))?;
        self.default = Some(idx);
        Ok(())
    }

    /// The child of class `id`, for inspection.
    pub fn class(&self, id: ClassId) -> Option<&dyn Qdisc> {
        self.index_of(id).map(|i| self.leaves[i as usize].as_dyn())
    }

    /// PRIQ's aggregate: its own refusals plus every class's counters (what
    /// `visit_stats` reports as [`ClassId::ROOT`]). Built on demand, off the
    /// packet path.
    pub fn stats(&self) -> QueueStats {
        let mut total = self.own.clone();
        for leaf in &self.leaves {
            total.add(&leaf.as_dyn().root_stats());
        }
        total
    }

    #[inline]
    fn index_of(&self, id: ClassId) -> Option<u32> {
        if id.0 < DENSE_IDS {
            match self.dense.get(id.0 as usize) {
                Some(&v) if v != 0 => Some(v - 1),
                _ => None,
            }
        } else {
            self.sparse
                .binary_search_by_key(&id.0, |&(k, _)| k)
                .ok()
                .map(|p| self.sparse[p].1)
        }
    }

    #[inline]
    fn activate(&mut self, idx: u32) {
        let m = &mut self.meta[idx as usize];
        m.active = true;
        let p = m.priority as usize;
        self.rings[p].push_back(idx);
        self.nonempty |= 1 << p;
    }

    /// Takes packets a child dropped out of PRIQ's length and backlog (all
    /// of them were resident, except the refused newcomer `fresh_id` if
    /// present from index `from`). The child counted them in its statistics.
    #[inline]
    fn absorb_drops(&mut self, drops: &Drops, from: usize, fresh_id: Option<u64>) {
        if drops.len() <= from {
            // The common case: the child dropped nothing.
            return;
        }
        for d in drops.iter().skip(from) {
            if Some(d.pkt.id) != fresh_id {
                self.len = self.len.saturating_sub(1);
                self.backlog_bytes = self.backlog_bytes.saturating_sub(d.pkt.len as u64);
            }
        }
    }

    /// Dequeues from class `idx` (already removed from its ring, or the peeked
    /// one), re-inserting it at the ring's tail if it stays non-empty.
    // Inlined: the packet path; out of line it costs a call frame and one
    // more move of the packet through a return slot.
    #[inline(always)]
    fn dequeue_class(&mut self, idx: u32, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let from = drops.len();
        let leaf = &mut self.leaves[idx as usize];
        let pkt = leaf.dequeue(now, drops);
        let still = !leaf.is_empty();
        self.absorb_drops(drops, from, None);
        if let Some(p) = &pkt {
            self.len = self.len.saturating_sub(1);
            self.backlog_bytes = self.backlog_bytes.saturating_sub(p.len as u64);
            self.settle(idx, still);
        }
        pkt
    }

    /// After serving class `idx` (removed from its ring): put it back at the
    /// tail if non-empty, else mark it inactive and fix the bitmap.
    #[inline]
    fn settle(&mut self, idx: u32, nonempty: bool) {
        let m = &mut self.meta[idx as usize];
        let p = m.priority as usize;
        if nonempty {
            self.rings[p].push_back(idx);
        } else {
            m.active = false;
        }
        if self.rings[p].is_empty() {
            self.nonempty &= !(1 << p);
        } else {
            self.nonempty |= 1 << p;
        }
    }

    /// A packet just queued in class `idx`: if a peek chose a class of a
    /// lower priority, that choice is dropped and the class goes back to the
    /// front of its ring, where the next selection finds it again after
    /// `idx`'s priority is served.
    #[cold]
    fn yield_peek_to(&mut self, idx: u32) {
        let Some(held) = self.peeked else { return };
        let p = self.meta[held as usize].priority as usize;
        if self.meta[idx as usize].priority as usize <= p {
            return;
        }
        self.peeked = None;
        self.rings[p].push_front(held);
        self.nonempty |= 1 << p;
    }

    /// The strict-priority walk of `dequeue` and `peek_len`: from the
    /// highest priority down, round robin within one, each class popped
    /// from its ring and offered to `take`, which returns what it got from
    /// the class and leaves the ring as that needs. A class that gives
    /// nothing is settled (back in its ring while it holds packets).
    /// Bounded by the number of classes: at most 16 priorities, each ring
    /// visited at most once per class in it.
    #[inline(always)]
    fn select<T>(&mut self, mut take: impl FnMut(&mut Self, u32, usize) -> Option<T>) -> Option<T> {
        let mut mask = self.nonempty;
        while mask != 0 {
            let p = 15 - mask.leading_zeros() as usize;
            mask &= !(1 << p);
            let tries = self.rings[p].len();
            for _ in 0..tries {
                let Some(idx) = self.rings[p].pop_front() else {
                    break;
                };
                if let Some(r) = take(self, idx, p) {
                    return Some(r);
                }
                let still = !self.leaves[idx as usize].is_empty();
                self.settle(idx, still);
            }
        }
        None
    }

    /// Removes `idx` from its ring wherever it is (peek path; rings are short).
    fn unlink(&mut self, idx: u32) {
        let p = self.meta[idx as usize].priority as usize;
        if let Some(pos) = self.rings[p].iter().position(|&i| i == idx) {
            self.rings[p].remove(pos);
        }
    }
}

impl Qdisc for Priq {
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last_now, now);
        let idx = match self.index_of(pkt.class).or(self.default) {
            Some(i) => i,
            None => {
                self.own.push_drop(pkt, DropReason::NoClass, drops);
                return Enqueue::Rejected;
            }
        };
        let (id, len) = (pkt.id, pkt.len);
        let from = drops.len();
        let leaf = &mut self.leaves[idx as usize];
        let r = leaf.enqueue(pkt, now, drops);
        if r == Enqueue::Queued && drops.len() == from {
            // The common case: the newcomer is resident and nothing left,
            // so the leaf is non-empty without asking it.
            self.len += 1;
            self.backlog_bytes += len as u64;
            if !self.meta[idx as usize].active {
                self.activate(idx);
            }
            if self.peeked.is_some() {
                self.yield_peek_to(idx);
            }
            return r;
        }
        let nonempty = !leaf.is_empty();
        let was_active = self.meta[idx as usize].active;
        // Count the newcomer in first so a drop of it (as part of making
        // room) balances out in `absorb_drops`.
        let refused = drops[from..].iter().any(|d| d.pkt.id == id);
        if !refused {
            self.len += 1;
            self.backlog_bytes += len as u64;
        }
        self.absorb_drops(drops, from, Some(id));
        if nonempty && !was_active {
            self.activate(idx);
        } else if !nonempty && was_active && self.peeked != Some(idx) {
            self.unlink(idx);
            self.settle(idx, false);
        }
        if !refused && nonempty && self.peeked.is_some() {
            self.yield_peek_to(idx);
        }
        r
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last_now, now);
        if let Some(idx) = self.peeked.take() {
            if let Some(p) = self.dequeue_class(idx, now, drops) {
                return Some(p);
            }
            // The peeked child gave nothing after all (emptied by a purge of
            // its own, or throttled): fall through to a normal selection.
            let still = !self.leaves[idx as usize].is_empty();
            self.settle(idx, still);
        }
        self.select(|q, idx, _| {
            if let Some(Leaf::Fifo(f)) = q.leaves.get(idx as usize) {
                if let Some(len) = f.head_len() {
                    // A FIFO drops nothing on dequeue: settle from its
                    // head, then its pop is the return value, so the
                    // packet moves once, slot to return slot.
                    let still = f.len() > 1;
                    q.len = q.len.saturating_sub(1);
                    q.backlog_bytes = q.backlog_bytes.saturating_sub(len as u64);
                    q.settle(idx, still);
                    return q.leaves[idx as usize].dequeue(now, drops);
                }
            }
            q.dequeue_class(idx, now, drops)
        })
    }

    /// The class this peek chooses is the one the next `dequeue` serves (a
    /// parent that sized the packet gets that packet), until a packet of a
    /// higher priority arrives: the token bucket above peeks while it waits
    /// for tokens, and a choice held across that wait would send a bulk
    /// frame ahead of a ping or an ACK that arrived meanwhile, which would
    /// then wait for two frames on the wire instead of one. ALTQ has no
    /// such wait: its `tbr_dequeue` polls only once the tokens are there.
    /// The parent re-reads the head's cost after any enqueue (`tbr.rs`).
    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = clamp(&mut self.last_now, now);
        if let Some(idx) = self.peeked {
            let from = drops.len();
            let r = self.leaves[idx as usize].peek_len(now, drops);
            self.absorb_drops(drops, from, None);
            if r.is_some() {
                return r;
            }
            self.peeked = None;
            let still = !self.leaves[idx as usize].is_empty();
            self.settle(idx, still);
        }
        self.select(|q, idx, p| {
            let from = drops.len();
            let r = q.leaves[idx as usize].peek_len(now, drops);
            q.absorb_drops(drops, from, None);
            if r.is_some() {
                // Held out of its ring until the dequeue that takes it.
                q.peeked = Some(idx);
                if q.rings[p].is_empty() {
                    q.nonempty &= !(1 << p);
                }
            }
            r
        })
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        // Only meaningful when every non-empty child is throttled; classes are
        // few, so a scan over them is acceptable off the packet path.
        earliest_wakeup(
            self.leaves
                .iter()
                .zip(&self.meta)
                .filter(|(_, m)| m.active)
                .map(|(leaf, _)| leaf.as_dyn()),
        )
    }

    fn len(&self) -> usize {
        self.len
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    fn purge(&mut self, drops: &mut Drops) {
        // Bounded by the number of classes.
        for (leaf, m) in self.leaves.iter_mut().zip(&mut self.meta) {
            leaf.purge(drops);
            m.active = false;
        }
        for r in &mut self.rings {
            r.clear();
        }
        self.nonempty = 0;
        self.peeked = None;
        self.len = 0;
        self.backlog_bytes = 0;
    }

    /// [`ClassId::ROOT`] is PRIQ's aggregate, so it is not a valid class
    /// id; it is summed from the classes when asked for, so the packet path
    /// counts each packet once (in its class), not twice.
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats());
        for (leaf, &id) in self.leaves.iter().zip(&self.ids) {
            leaf.visit_stats(&mut |cid, st| f(if cid == ClassId::ROOT { id } else { cid }, st));
        }
    }
}

#[cfg(test)]
mod tests;
