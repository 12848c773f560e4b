//! # Principles
//!
//! Deficit Round Robin (Shreedhar & Varghese, "Efficient Fair Queueing using
//! Deficit Round Robin", SIGCOMM 1995, §3, the `DRR` pseudo-code), with the
//! quantum of a class = `weight × base_quantum_bytes` as dummynet's DRR.
//!
//! Guarantees (all classes continuously backlogged): over any interval in
//! which class *i* is visited *k* times it sends between `k·Qᵢ − max_cost` and
//! `k·Qᵢ + max_cost` bytes (Lemma 1 of the paper), so byte shares converge to
//! the ratio of weights whatever the packet sizes. An idle class earns no
//! credit: its deficit is zeroed when it empties (the paper's rule), so it
//! cannot bank service while it has nothing to send.
//!
//! A class that wakes (its leaf was empty) may go first on a small credit
//! ([`Drr::wake_first`], off unless set; sluice's FQ-CoDel pipes set it):
//! it is put at the front with that credit, not its quantum, and sends
//! while its head fits; then it takes its place at the tail as any other.
//! A ping or a call's packet waking its class then waits for the packet on
//! the link, not also for the turn of the class being served (a full frame
//! at weight 1: 27 ms at 450 kbit/s). The bound of Lemma 1 moves by at
//! most that credit per wake, and a class that never empties never wakes.
//!
//! Invariants: a class is in the active list iff its leaf is non-empty;
//! `0 ≤ deficit`; the resident totals equal the sum over leaves.
//!
//! Work per dequeue: a class that cannot send its head rotates to the tail and
//! earns one quantum per lap, so a dequeue visits at most
//! `active × (⌈max_cost / min_quantum⌉ + 1)` classes — with quanta of an MTU or
//! more (the usual configuration), at most two laps.

use crate::qdisc::clamp;
use crate::{ClassId, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::collections::VecDeque;

use crate::class::{check_weight, resident_from_totals, ClassIndex, Counted, Totals};
pub use crate::class::{ClassError, MAX_WEIGHT};

struct Class {
    id: ClassId,
    weight: u32,
    quantum_bytes: u64,
    deficit_bytes: u64,
    /// The class at the head of the active list already got this lap's quantum.
    credited: bool,
    active: bool,
    leaf: Counted,
}

/// Deficit Round Robin over weighted classes.
pub struct Drr {
    base_quantum_bytes: u32,
    /// The credit a waking class goes first on (0: it joins the tail).
    wake_credit_bytes: u64,
    classes: Vec<Class>,
    index: ClassIndex,
    /// Backlogged classes in round-robin order; the front is being served.
    active: VecDeque<usize>,
    totals: Totals,
    last: Instant,
    /// Set when a leaf is non-empty but would not release a packet (a leaf
    /// with its own shaper); the earliest of their wake-ups.
    stalled: Option<Instant>,
}

impl Drr {
    /// `base_quantum_bytes` is the quantum of a weight-1 class (dummynet's
    /// `quantum`, typically an MTU); 0 is taken as 1.
    pub fn new(base_quantum_bytes: u32) -> Drr {
        Drr {
            base_quantum_bytes: base_quantum_bytes.max(1),
            wake_credit_bytes: 0,
            classes: Vec::new(),
            index: ClassIndex::default(),
            active: VecDeque::new(),
            totals: Totals::default(),
            last: Instant::ZERO,
            stalled: None,
        }
    }

    /// A class that wakes goes first on `credit_bytes` (the module's
    /// principles); 0 keeps the paper's rule.
    pub fn wake_first(mut self, credit_bytes: u32) -> Drr {
        self.wake_credit_bytes = u64::from(credit_bytes);
        self
    }

    /// Adds a class with `weight` in 1..=100 and its leaf queue.
    pub fn add_class(
        &mut self,
        id: ClassId,
        weight: u32,
        leaf: Box<dyn Qdisc>,
    ) -> Result<(), ClassError> {
        self.index.admit(id, weight, self.classes.len())?;
        self.classes.push(Class {
            id,
            weight,
            quantum_bytes: weight as u64 * self.base_quantum_bytes as u64,
            deficit_bytes: 0,
            credited: false,
            active: false,
            leaf: Counted::new(leaf),
        });
        Ok(())
    }

    /// Packets whose class is unknown go to `id`.
    pub fn set_default(&mut self, id: ClassId) -> Result<(), ClassError> {
        self.index.set_default(id)
    }

    /// Changes a class's weight; takes effect from its next quantum.
    pub fn set_weight(&mut self, id: ClassId, weight: u32) -> Result<(), ClassError> {
        check_weight(weight)?;
        let i = self.index.slot(id)?;
        let c = &mut self.classes[i];
        c.weight = weight;
        c.quantum_bytes = weight as u64 * self.base_quantum_bytes as u64;
        Ok(())
    }

    pub fn weight(&self, id: ClassId) -> Option<u32> {
        self.index.slot(id).ok().map(|i| self.classes[i].weight)
    }

    /// The leaf of a class, for the engine's `show` and reconfiguration.
    pub fn leaf(&self, id: ClassId) -> Option<&dyn Qdisc> {
        self.index
            .slot(id)
            .ok()
            .map(|i| self.classes[i].leaf.q.as_ref())
    }

    /// Packets refused for want of a class (no default set).
    pub fn unclassified(&self) -> &QueueStats {
        self.index.refused()
    }

    /// Removes the front class from the round (it emptied): no banked credit.
    fn retire_front(&mut self) {
        if let Some(i) = self.active.pop_front() {
            let c = &mut self.classes[i];
            c.active = false;
            c.deficit_bytes = 0;
            c.credited = false;
        }
    }

    fn rotate_front(&mut self) {
        if let Some(i) = self.active.pop_front() {
            self.classes[i].credited = false;
            self.active.push_back(i);
        }
    }
}

impl Qdisc for Drr {
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last, now);
        let Some(i) = self.index.route(pkt.class) else {
            return self.index.refuse(pkt, drops);
        };
        let (r, delta) = self.classes[i].leaf.enqueue(pkt, now, drops);
        self.totals.apply(delta);
        let c = &mut self.classes[i];
        if !c.active && !c.leaf.q.is_empty() {
            c.active = true;
            if self.wake_credit_bytes > 0 {
                // Credited already: the front's quantum is not added to
                // the wake credit; once its head does not fit it rotates
                // to the tail and earns its quantum there.
                c.deficit_bytes = self.wake_credit_bytes;
                c.credited = true;
                self.active.push_front(i);
            } else {
                c.deficit_bytes = 0;
                c.credited = false;
                self.active.push_back(i);
            }
        }
        r
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last, now);
        self.stalled = None;
        // Consecutive classes skipped because their leaf held back a packet;
        // a full lap of those means nothing can be sent now.
        let mut stalled_run = 0usize;
        // Bound: see the module doc (laps × active classes); the guard turns
        // a pathological quantum into a stall instead of a long spin.
        let max_visits = self.active.len().saturating_mul(MAX_LAPS_PER_DEQUEUE);
        for _ in 0..max_visits.max(1) {
            let &i = self.active.front()?;
            let (cost, delta) = self.classes[i].leaf.peek_len(now, drops);
            self.totals.apply(delta);
            let Some(cost) = cost else {
                if self.classes[i].leaf.q.is_empty() {
                    self.retire_front();
                    stalled_run = 0;
                } else {
                    self.classes[i]
                        .leaf
                        .note_stall(&mut self.stalled, self.last);
                    self.rotate_front();
                    stalled_run += 1;
                    if stalled_run >= self.active.len() {
                        return None;
                    }
                }
                continue;
            };
            let c = &mut self.classes[i];
            if !c.credited {
                c.credited = true;
                c.deficit_bytes += c.quantum_bytes;
            }
            if (cost as u64) > c.deficit_bytes {
                self.rotate_front();
                continue;
            }
            let (pkt, delta) = c.leaf.dequeue(now, drops);
            self.totals.apply(delta);
            let Some(pkt) = pkt else {
                // Peeked but not released: treat as a stall of this leaf.
                self.classes[i]
                    .leaf
                    .note_stall(&mut self.stalled, self.last);
                self.rotate_front();
                continue;
            };
            c.deficit_bytes = c.deficit_bytes.saturating_sub(pkt.cost as u64);
            if c.leaf.q.is_empty() {
                self.retire_front();
            }
            return Some(pkt);
        }
        if !self.active.is_empty() && self.stalled.is_none() {
            // The visit guard ran out (quanta far below packet sizes): ask to
            // be called again at once rather than spin here.
            self.stalled = Some(now);
        }
        None
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        // The packet dequeue would pick depends on deficits; report the head
        // of the class being served, the common parent's need (a size
        // estimate for a shaper above).
        let now = clamp(&mut self.last, now);
        let cap = self.active.len();
        for _ in 0..cap {
            let &i = self.active.front()?;
            let (cost, delta) = self.classes[i].leaf.peek_len(now, drops);
            self.totals.apply(delta);
            match cost {
                Some(c) => return Some(c),
                None if self.classes[i].leaf.q.is_empty() => self.retire_front(),
                None => return None,
            }
        }
        None
    }

    resident_from_totals!(stalled);

    fn purge(&mut self, drops: &mut Drops) {
        for c in &mut self.classes {
            self.totals.apply(c.leaf.purge(drops));
            c.active = false;
            c.deficit_bytes = 0;
            c.credited = false;
        }
        self.active.clear();
        self.stalled = None;
    }

    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        for c in &self.classes {
            f(c.id, &c.leaf.stats);
        }
    }
}

/// Laps of the active list one dequeue may make before giving up (see the
/// module doc: two suffice when quanta are at least the largest packet).
const MAX_LAPS_PER_DEQUEUE: usize = 128;

#[cfg(test)]
mod tests;
