//! # Principles
//!
//! Class-based queueing (Floyd & Jacobson, "Link-sharing and Resource
//! Management Models for Packet Networks", ToN 1995; ALTQ's `altq_rmclass.c`).
//! A tree of classes, each with a rate; leaves hold queues, and so may an
//! interior class ([`Cbq::add_queue`]): as in ALTQ, where every class has a
//! queue (`rmc_queue_packet` takes any class), the packets an interior class
//! holds are scheduled like a leaf's at its priority, and they and its
//! descendants' all draw on its one allocation — each sent packet is charged
//! to its class and every ancestor, so an interior class's own traffic and
//! its children's together stay within its rate (plus what it may borrow).
//!
//! Rate estimator: each class has a token bucket at its rate instead of
//! ALTQ's `avgidle`; a class is *underlimit* while its tokens are positive
//! (`Class::tokens`).
//!
//! Scheduling, per dequeue:
//! 1. Among backlogged classes that are underlimit, the highest priority (7
//!    first) sends; within a priority, deficit round robin with quanta
//!    proportional to the class rates (ALTQ's weighted round robin).
//! 2. Only if none can: a backlogged overlimit class with `borrow` may send if
//!    an ancestor reachable through `borrow` links (ALTQ's `borrow_` chain:
//!    the parent, then the parent's parent if the parent borrows, …) is
//!    underlimit; again by priority, then round robin.
//! 3. Otherwise nothing is sent and `next_wakeup` is the earliest time any
//!    backlogged leaf or one of its lenders becomes underlimit.
//!
//! Guarantees: an underlimit class is never kept waiting by a borrowing one
//! (pass 1 before pass 2: Floyd & Jacobson's formal link-sharing condition;
//! ALTQ approximates it with its "top-level" cutoff); a class without
//! `borrow` never exceeds its rate by more than its bucket over any interval;
//! with `borrow`, idle bandwidth of an underlimit ancestor is used.
//!
//! Work per dequeue: 2 passes × 8 priorities × a DRR scan of the backlogged
//! leaves (bounded like [`crate::drr`]), plus one walk up the tree per check.

use crate::class::{reject_no_class, route};
use crate::class::{resident_from_totals, Counted, Totals};
use crate::qdisc::clamp;
use crate::{ClassId, DropReason, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant, Rate};
use std::collections::{HashMap, VecDeque};

pub use crate::class::ClassError;

/// Highest CBQ priority (pf: 0..=7, higher first).
pub const MAX_PRIORITY: u8 = 7;
const PRIORITIES: usize = MAX_PRIORITY as usize + 1;

/// Token units per byte: tokens accrue `rate_bps` units per ns.
const UNITS_PER_BYTE: i128 = 8 * 1_000_000_000;
/// Burst a class may send above its rate after idling (bucket depth in time).
const BUCKET_TIME: Duration = Duration::from_millis(10);
/// Bucket floor, so a slow class still holds a full frame or two.
const MIN_BUCKET_BYTES: u64 = 2 * 1514;
/// The quantum of the fastest class of a priority; others get theirs in
/// proportion to their rate.
const MAX_QUANTUM_BYTES: u64 = 1514;
/// Smallest quantum, which bounds the DRR laps per dequeue.
const MIN_QUANTUM_BYTES: u64 = 64;
/// Laps of one priority's round a dequeue may make (⌈max cost / min quantum⌉
/// for frames up to 8 KiB); beyond, it asks to be called again at once.
const MAX_LAPS_PER_DEQUEUE: usize = 128;

/// Configuration of one CBQ class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassParams {
    pub rate: Rate,
    /// 0..=7, higher is served first.
    pub priority: u8,
    /// May send above its rate while an ancestor is underlimit.
    pub borrow: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Underlimit,
    Borrow,
}

struct Class {
    id: ClassId,
    parent: Option<usize>,
    params: ClassParams,
    /// Rate estimator: instead of ALTQ's exponentially weighted `avgidle`, each
    /// class has a token bucket at its rate, depth `max(2 MTU, rate × 10 ms)`,
    /// charged with `pkt.cost` for every packet sent by the class or a descendant.
    /// A class is *underlimit* while its tokens are positive — the same test as
    /// `avgidle > 0` (the class has recently sent below its rate), with the bucket
    /// depth playing the role of `maxidle`, and a floor of minus one bucket playing
    /// `minidle` (so a class that borrowed heavily is not punished forever).
    /// Tokens are exact integers (1/(8·10⁹) byte), so a class never drifts.
    tokens: i128,
    bucket: i128,
    updated: Instant,
    quantum_bytes: u64,
    deficit_bytes: u64,
    credited: bool,
    active: bool,
    leaf: Option<Counted>,
    /// Counters of an interior class (a leaf keeps them in its `Counted`).
    interior: QueueStats,
}

impl Class {
    fn stats_mut(&mut self) -> &mut QueueStats {
        match &mut self.leaf {
            Some(l) => &mut l.stats,
            None => &mut self.interior,
        }
    }

    fn refresh(&mut self, now: Instant) {
        if now > self.updated {
            let dt = (now - self.updated).as_nanos() as i128;
            let earned = dt.saturating_mul(self.params.rate.as_bps() as i128);
            self.tokens = self.tokens.saturating_add(earned).min(self.bucket);
            self.updated = now;
        }
    }

    /// When the tokens will be positive again (they are ≤ 0).
    fn underlimit_at(&self) -> Instant {
        let rate = self.params.rate.as_bps() as i128;
        if self.tokens > 0 {
            return self.updated;
        }
        if rate == 0 {
            return Instant::MAX;
        }
        let need = 1 - self.tokens; // reach +1 unit
        let ns = (need + rate - 1) / rate;
        self.updated + Duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

/// Class-based queueing over a tree of rate-limited classes.
pub struct Cbq {
    link: Rate,
    classes: Vec<Class>,
    index: HashMap<ClassId, usize>,
    default: Option<usize>,
    /// Backlogged leaves per priority, in round-robin order.
    active: [VecDeque<usize>; PRIORITIES],
    totals: Totals,
    last: Instant,
    wakeup: Option<Instant>,
    no_class: QueueStats,
}

impl Cbq {
    /// `link` is the interface bandwidth (the rate a root class usually has).
    pub fn new(link: Rate) -> Cbq {
        Cbq {
            link,
            classes: Vec::new(),
            index: HashMap::new(),
            default: None,
            active: Default::default(),
            totals: Totals::default(),
            last: Instant::ZERO,
            wakeup: None,
            no_class: QueueStats::default(),
        }
    }

    pub fn link(&self) -> Rate {
        self.link
    }

    /// Adds a class under `parent` (which must exist and have no queue).
    /// `leaf` is the class's queue; `None` makes an interior class.
    pub fn add_class(
        &mut self,
        id: ClassId,
        parent: Option<ClassId>,
        params: ClassParams,
        leaf: Option<Box<dyn Qdisc>>,
    ) -> Result<(), ClassError> {
        if params.priority > MAX_PRIORITY {
            return Err(ClassError::Priority(params.priority));
        }
        if self.index.contains_key(&id) {
            return Err(ClassError::Duplicate(id));
        }
        let parent = match parent {
            None => None,
            Some(p) => {
                let pi = *self.index.get(&p).ok_or(ClassError::Unknown(p))?;
                if self.classes[pi].leaf.is_some() {
                    return Err(ClassError::HasQueue(p));
                }
                Some(pi)
            }
        };
        let bucket_bytes = params.rate.bytes_in(BUCKET_TIME).max(MIN_BUCKET_BYTES);
        let bucket = bucket_bytes as i128 * UNITS_PER_BYTE;
        self.index.insert(id, self.classes.len());
        self.classes.push(Class {
            id,
            parent,
            params,
            tokens: bucket,
            bucket,
            updated: self.last,
            quantum_bytes: MIN_QUANTUM_BYTES,
            deficit_bytes: 0,
            credited: false,
            active: false,
            leaf: leaf.map(Counted::new),
            interior: QueueStats::default(),
        });
        self.recompute_quanta();
        Ok(())
    }

    /// Gives class `id`, which has (or will have) children, a queue of its
    /// own; call it once the children are added (a class with a queue
    /// takes no new children). Errors: unknown class, or one that already
    /// has a queue.
    pub fn add_queue(&mut self, id: ClassId, leaf: Box<dyn Qdisc>) -> Result<(), ClassError> {
        let i = *self.index.get(&id).ok_or(ClassError::Unknown(id))?;
        let c = &mut self.classes[i];
        if c.leaf.is_some() {
            return Err(ClassError::HasQueue(id));
        }
        // As `add_class`: the queue is expected empty.
        c.leaf = Some(Counted::new(leaf));
        Ok(())
    }

    /// Packets whose class is unknown (or has no queue) go to `id`, a
    /// class with a queue.
    pub fn set_default(&mut self, id: ClassId) -> Result<(), ClassError> {
        let i = *self.index.get(&id).ok_or(ClassError::Unknown(id))?;
        if self.classes[i].leaf.is_none() {
            return Err(ClassError::NotALeaf(id));
        }
        self.default = Some(i);
        Ok(())
    }

    /// Changes a class's rate, priority or borrowing. Tokens earned so far
    /// are kept (capped at the new bucket), so a reload hands out no burst.
    pub fn set_class_params(
        &mut self,
        id: ClassId,
        params: ClassParams,
        now: Instant,
    ) -> Result<(), ClassError> {
        if params.priority > MAX_PRIORITY {
            return Err(ClassError::Priority(params.priority));
        }
        let i = *self.index.get(&id).ok_or(ClassError::Unknown(id))?;
        let now = clamp(&mut self.last, now);
        let old_prio = self.classes[i].params.priority as usize;
        let c = &mut self.classes[i];
        c.refresh(now);
        let bucket_bytes = params.rate.bytes_in(BUCKET_TIME).max(MIN_BUCKET_BYTES);
        c.bucket = bucket_bytes as i128 * UNITS_PER_BYTE;
        c.tokens = c.tokens.min(c.bucket);
        c.params = params;
        if c.active && old_prio != params.priority as usize {
            c.credited = false;
            self.active[old_prio].retain(|&k| k != i);
            self.active[params.priority as usize].push_back(i);
        }
        self.recompute_quanta();
        self.wakeup = Some(now);
        Ok(())
    }

    pub fn class_params(&self, id: ClassId) -> Option<ClassParams> {
        self.index.get(&id).map(|&i| self.classes[i].params)
    }

    pub fn leaf(&self, id: ClassId) -> Option<&dyn Qdisc> {
        let &i = self.index.get(&id)?;
        self.classes[i].leaf.as_ref().map(|l| l.q.as_ref())
    }

    /// Packets refused for want of a class (no default set).
    pub fn unclassified(&self) -> &QueueStats {
        &self.no_class
    }

    /// Quanta ∝ rate within each priority, the fastest getting an MTU.
    fn recompute_quanta(&mut self) {
        let mut max_rate = [0u64; PRIORITIES];
        for c in &self.classes {
            let p = c.params.priority as usize;
            max_rate[p] = max_rate[p].max(c.params.rate.as_bps());
        }
        for c in &mut self.classes {
            let top = max_rate[c.params.priority as usize].max(1) as u128;
            let q = MAX_QUANTUM_BYTES as u128 * c.params.rate.as_bps() as u128 / top;
            c.quantum_bytes = (q as u64).max(MIN_QUANTUM_BYTES);
        }
    }

    /// The ancestor `i` may borrow from now, following `borrow` links.
    fn lender(&mut self, i: usize, now: Instant) -> Option<usize> {
        let mut c = i;
        // Bound: one step up the tree per iteration (depth ≤ classes).
        for _ in 0..self.classes.len() {
            if !self.classes[c].params.borrow {
                return None;
            }
            let p = self.classes[c].parent?;
            self.classes[p].refresh(now);
            if self.classes[p].tokens > 0 {
                return Some(p);
            }
            c = p;
        }
        None
    }

    /// Charges a sent packet to the class and every ancestor.
    fn charge(&mut self, i: usize, pkt: &Packet, now: Instant) {
        let cost = pkt.cost as i128 * UNITS_PER_BYTE;
        let mut c = Some(i);
        // Bound: one step up the tree per iteration.
        for _ in 0..self.classes.len() {
            let Some(k) = c else { break };
            let cl = &mut self.classes[k];
            cl.refresh(now);
            cl.tokens = if cl.tokens > 0 {
                cl.tokens - cost
            } else {
                // Already over: cap the debt at one bucket (ALTQ's minidle).
                (cl.tokens - cost).max(-cl.bucket)
            };
            if k != i {
                cl.interior.deq_packets += 1;
                cl.interior.deq_bytes += pkt.len as u64;
            }
            c = cl.parent;
        }
    }

    fn retire_front(&mut self, prio: usize) {
        if let Some(i) = self.active[prio].pop_front() {
            let c = &mut self.classes[i];
            c.active = false;
            c.deficit_bytes = 0;
            c.credited = false;
        }
    }

    fn rotate_front(&mut self, prio: usize) {
        if let Some(i) = self.active[prio].pop_front() {
            self.classes[i].credited = false;
            self.active[prio].push_back(i);
        }
    }

    /// Moves the front class to the back without ending its DRR turn.
    fn skip_front(&mut self, prio: usize) {
        if let Some(i) = self.active[prio].pop_front() {
            self.active[prio].push_back(i);
        }
    }

    /// Deficit round robin over one priority's backlogged classes,
    /// restricted to those `pass` allows to send now. The underlimit pass
    /// passes over an ineligible class without ending its turn: a lap of
    /// it leaves the round and the credits as they were, so it does not
    /// choose who borrows next (else the class behind an often-underlimit
    /// one — an interior class whose children draw on its tokens — lost
    /// every borrowing turn to it).
    fn serve(
        &mut self,
        prio: usize,
        pass: Pass,
        now: Instant,
        drops: &mut Drops,
    ) -> Option<Packet> {
        let mut ineligible_run = 0usize;
        // Bound: see MAX_LAPS_PER_DEQUEUE; a lap of only ineligible classes
        // ends the scan early.
        let visits = self.active[prio].len().saturating_mul(MAX_LAPS_PER_DEQUEUE);
        for _ in 0..visits {
            let &i = self.active[prio].front()?;
            let Some(leaf) = self.classes[i].leaf.as_mut() else {
                self.retire_front(prio); // unreachable: only classes with a queue are active
                continue;
            };
            let (cost, delta) = leaf.peek_len(now, drops);
            self.totals.apply(delta);
            let Some(cost) = cost else {
                if leaf.q.is_empty() {
                    self.retire_front(prio);
                } else {
                    // The leaf holds its packet back (its own shaper).
                    let w = leaf.q.next_wakeup().unwrap_or(now);
                    self.wakeup = Some(self.wakeup.map_or(w, |x| x.min(w)));
                    self.rotate_front(prio);
                    ineligible_run += 1;
                }
                if ineligible_run >= self.active[prio].len() {
                    return None;
                }
                continue;
            };
            self.classes[i].refresh(now);
            let allowed = match pass {
                Pass::Underlimit => self.classes[i].tokens > 0,
                Pass::Borrow => self.lender(i, now).is_some(),
            };
            if !allowed {
                if pass == Pass::Borrow {
                    self.classes[i].stats_mut().overlimits += 1;
                    self.rotate_front(prio);
                } else {
                    // Passed over, not served: its turn (and credit) in
                    // the borrowing pass is kept.
                    self.skip_front(prio);
                }
                ineligible_run += 1;
                if ineligible_run >= self.active[prio].len() {
                    return None;
                }
                continue;
            }
            ineligible_run = 0;
            let c = &mut self.classes[i];
            if !c.credited {
                c.credited = true;
                c.deficit_bytes += c.quantum_bytes;
            }
            if cost as u64 > c.deficit_bytes {
                self.rotate_front(prio);
                continue;
            }
            let leaf = c.leaf.as_mut()?;
            let (pkt, delta) = leaf.dequeue(now, drops);
            self.totals.apply(delta);
            let emptied = leaf.q.is_empty();
            let Some(pkt) = pkt else {
                if emptied {
                    self.retire_front(prio);
                } else {
                    self.rotate_front(prio);
                }
                continue;
            };
            c.deficit_bytes = c.deficit_bytes.saturating_sub(pkt.cost as u64);
            if pass == Pass::Borrow {
                c.stats_mut().borrows += 1;
            }
            self.charge(i, &pkt, now);
            if emptied {
                self.retire_front(prio);
            }
            return Some(pkt);
        }
        // Visit budget spent (tiny quanta): have the caller come back now.
        if !self.active[prio].is_empty() {
            self.wakeup = Some(self.wakeup.map_or(now, |x| x.min(now)));
        }
        None
    }

    /// Earliest time a backlogged leaf, or a lender of it, is underlimit.
    fn compute_wakeup(&mut self, now: Instant) {
        let mut best = self.wakeup.unwrap_or(Instant::MAX);
        for prio in 0..PRIORITIES {
            for k in 0..self.active[prio].len() {
                let mut c = self.active[prio][k];
                // Bound: one step up the tree per iteration.
                for _ in 0..self.classes.len() {
                    self.classes[c].refresh(now);
                    best = best.min(self.classes[c].underlimit_at());
                    if !self.classes[c].params.borrow {
                        break;
                    }
                    match self.classes[c].parent {
                        Some(p) => c = p,
                        None => break,
                    }
                }
            }
        }
        self.wakeup = Some(best);
    }
}

impl Qdisc for Cbq {
    /// Wake-ups: after an enqueue `next_wakeup` is `now` (the new packet may be
    /// sendable at once; the caller's next dequeue either sends it or computes the
    /// exact time), so a caller that sleeps until `next_wakeup` never misses one.
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last, now);
        let target = route(&self.index, None, pkt.class)
            .filter(|&i| self.classes[i].leaf.is_some())
            .or(self.default);
        let Some(i) = target else {
            self.no_class.on_drop(&pkt, DropReason::NoClass);
            return reject_no_class(pkt, drops);
        };
        let c = &mut self.classes[i];
        let Some(leaf) = c.leaf.as_mut() else {
            self.no_class.on_drop(&pkt, DropReason::NoClass);
            return reject_no_class(pkt, drops);
        };
        let (r, delta) = leaf.enqueue(pkt, now, drops);
        let nonempty = !leaf.q.is_empty();
        self.totals.apply(delta);
        if !c.active && nonempty {
            c.active = true;
            c.deficit_bytes = 0;
            c.credited = false;
            self.active[c.params.priority as usize].push_back(i);
        }
        // Something new may be sendable at once: have the caller look now
        // (the next dequeue computes the exact wake-up if it is not).
        self.wakeup = Some(now);
        r
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last, now);
        self.wakeup = None;
        if self.totals.packets == 0 {
            return None;
        }
        for pass in [Pass::Underlimit, Pass::Borrow] {
            for prio in (0..PRIORITIES).rev() {
                if let Some(p) = self.serve(prio, pass, now, drops) {
                    self.wakeup = None;
                    return Some(p);
                }
            }
        }
        if self.totals.packets > 0 {
            self.compute_wakeup(now);
        }
        None
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        // The head of the highest-priority backlogged leaf: a size estimate
        // for a parent (CBQ is normally the root under a token bucket).
        let now = clamp(&mut self.last, now);
        for prio in (0..PRIORITIES).rev() {
            // Bound: each iteration retires an emptied class or returns.
            for _ in 0..self.active[prio].len() {
                let &i = self.active[prio].front()?;
                let leaf = self.classes[i].leaf.as_mut()?;
                let (c, delta) = leaf.peek_len(now, drops);
                let empty = leaf.q.is_empty();
                self.totals.apply(delta);
                match c {
                    Some(c) => return Some(c),
                    None if empty => self.retire_front(prio),
                    None => break,
                }
            }
        }
        None
    }

    resident_from_totals!(wakeup);

    fn purge(&mut self, drops: &mut Drops) {
        for c in &mut self.classes {
            if let Some(leaf) = c.leaf.as_mut() {
                self.totals.apply(leaf.purge(drops));
            }
            c.active = false;
            c.deficit_bytes = 0;
            c.credited = false;
        }
        for a in &mut self.active {
            a.clear();
        }
        self.wakeup = None;
    }

    /// Parents before children (classes are added parent first). An
    /// interior class with a queue reports its queue's counters plus what
    /// its descendants sent.
    /// Per class, `borrows` counts packets sent through pass 2 and
    /// `overlimits` dequeues in which the class had a packet but neither its
    /// rate nor a lender allowed it.
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        for c in &self.classes {
            match &c.leaf {
                Some(l) if c.interior.deq_packets > 0 => {
                    let mut s = l.stats.clone();
                    s.deq_packets += c.interior.deq_packets;
                    s.deq_bytes += c.interior.deq_bytes;
                    f(c.id, &s)
                }
                Some(l) => f(c.id, &l.stats),
                None => f(c.id, &c.interior),
            }
        }
    }
}

#[cfg(test)]
mod tests;
