//! HFSC: the Hierarchical Fair Service Curve scheduler (Stoica, Zhang, Ng,
//! SIGCOMM 1997 / IEEE ToN 2000), as ALTQ and OpenBSD's pf use it.
//!
//! # Principles
//! - Each class may have three two-piece service curves ([`ServiceCurve`]):
//!   real-time `rt` (leaves), link-sharing `ls`, upper limit `ul`.
//! - Real-time criterion (paper §IV): a backlogged leaf with an rt curve has an
//!   eligible time and a deadline; whenever some leaf is eligible, the one with
//!   the smallest deadline is sent. Guarantee: a leaf continuously backlogged
//!   since `t0` has received by `t` at least `rt(t - t0)` minus one maximum
//!   packet (minus what the curve grows during one maximum packet's
//!   transmission, as a packet in flight is not preempted), provided the rt
//!   curves of all leaves fit in the link (checked on `add_class` for the
//!   long-term rates `m2`) and the caller sends at the link rate.
//! - Link-sharing criterion (§V): otherwise, descend from the root choosing the
//!   active child with the smallest virtual time; service from either
//!   criterion counts for link-sharing, so excess bandwidth is split by the ls
//!   curves, parents first. A class whose upper-limit fit time is in the
//!   future is skipped (sent at most `ul(t - t0)` plus one packet); when every
//!   class is held, `dequeue` returns `None` and `next_wakeup` says when the
//!   first one fits (or the first real-time leaf becomes eligible).
//! - HFSC does not pace to the link: a token bucket above it does. `link` is
//!   used for admission control only.
//! - All arithmetic is integer: ns, bytes, scaled slopes (`curve.rs`); the
//!   packet path multiplies and shifts, and divides only to build a runtime
//!   curve when a class becomes active.
//! - Complexity per packet: O(log n) for the real-time heaps and
//!   O(depth · log fan-out) for link-sharing; no scan over classes per
//!   packet, unlike ALTQ's eligible-list and first-fit scans.
//! - Invariants: only leaves hold packets; `len`/`backlog_bytes` are the sums
//!   over the leaves; a leaf is `backlogged` iff its queue was non-empty after
//!   the last HFSC operation on it, and only then sits in the scheduling heaps.
//! - Where this differs from ALTQ, on purpose: real-time curves on interior
//!   classes and upper limits without link-sharing are refused (ALTQ ignores
//!   them silently); `peek_len` returns `None` while every class is held by
//!   an upper limit.
//! - A peek's choice holds until the next `dequeue` or until a class
//!   becomes active (the newcomer may have the earlier deadline).

mod class;
mod curve;
mod heap;
mod linkshare;
mod realtime;
#[cfg(test)]
mod tests;

pub use curve::ServiceCurve;

use crate::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, Qdisc, QueueStats};
use class::{Class, ClassIndex, ROOT};
use curve::Curve;
use linkshare::LinkShare;
use realtime::Eligible;
use sluice_time::{Instant, Rate};
use std::fmt;

/// The curves of one class. pf's `bandwidth` is an `ls` linear curve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassParams {
    pub rt: Option<ServiceCurve>,
    pub ls: Option<ServiceCurve>,
    pub ul: Option<ServiceCurve>,
}

/// Why a class tree was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HfscError {
    /// `ClassId::ROOT` (0) names the link itself.
    ReservedId(ClassId),
    Duplicate(ClassId),
    UnknownParent {
        class: ClassId,
        parent: ClassId,
    },
    /// Only interior classes (added without a leaf queue) can have children.
    ParentIsLeaf {
        class: ClassId,
        parent: ClassId,
    },
    /// A leaf needs a real-time or a link-sharing curve to ever be served.
    NoCurve(ClassId),
    /// An interior class is only ever served by link-sharing.
    InteriorNeedsLinkShare(ClassId),
    /// Real-time curves belong to leaves (the paper's sessions).
    RealTimeOnInterior(ClassId),
    /// An upper limit only restrains link-sharing.
    UpperLimitWithoutLinkShare(ClassId),
    /// A curve whose long-term rate `m2` is zero.
    ZeroRate {
        class: ClassId,
        curve: &'static str,
    },
    /// The real-time rates `m2` of all leaves would exceed the link.
    RealTimeOverbooked {
        class: ClassId,
        sum: Rate,
        link: Rate,
    },
    UnknownClass(ClassId),
    /// The default class must be a leaf.
    DefaultNotLeaf(ClassId),
}

impl fmt::Display for HfscError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use HfscError::*;
        match self {
            ReservedId(c) => write!(f, "hfsc: class id {} is reserved for the root", c.0),
            Duplicate(c) => write!(f, "hfsc: class {} defined twice", c.0),
            UnknownParent { class, parent } => {
                write!(f, "hfsc: class {}: parent {} does not exist (add parents first)", class.0, parent.0)
            }
            ParentIsLeaf { class, parent } => write!(
                f,
                "hfsc: class {}: parent {} is a leaf queue; only classes without a queue can have children",
                class.0, parent.0
            ),
            NoCurve(c) => write!(f, "hfsc: leaf class {} has neither realtime nor linkshare", c.0),
            InteriorNeedsLinkShare(c) => write!(f, "hfsc: class {} has children but no linkshare", c.0),
            RealTimeOnInterior(c) => {
                write!(f, "hfsc: class {} has children; realtime applies to leaf classes only", c.0)
            }
            UpperLimitWithoutLinkShare(c) => {
                write!(f, "hfsc: class {}: upperlimit needs a linkshare curve", c.0)
            }
            ZeroRate { class, curve } => write!(f, "hfsc: class {}: {curve} rate (m2) must be above 0", class.0),
            RealTimeOverbooked { class, sum, link } => write!(
                f,
                "hfsc: class {}: realtime rates sum to {sum}, above the link's {link}",
                class.0
            ),
            UnknownClass(c) => write!(f, "hfsc: no class {}", c.0),
            DefaultNotLeaf(c) => write!(f, "hfsc: default class {} must be a leaf queue", c.0),
        }
    }
}

impl std::error::Error for HfscError {}

/// The HFSC scheduler: a class tree under a root that stands for the link.
/// Per packet: O(log n) for the real-time heaps (eligible leaves by
/// deadline, the others by eligible time) and O(depth · log fan-out) for
/// link-sharing (per class, active children in a `fit` heap by vt and a
/// `held` heap by fit time). The one pass over the active siblings (for
/// their largest vt) happens when a class becomes active.
pub struct Hfsc {
    link: Rate,
    /// Slot 0 is the root; a child's slot is always above its parent's.
    classes: Vec<Class>,
    index: ClassIndex,
    default: Option<u32>,
    rt: Eligible,
    ls: LinkShare,
    rt_sum_bps: u128,
    now_ns: u64,
    len: usize,
    backlog: u64,
    /// The leaf chosen by `peek_len`, and whether by the real-time criterion;
    /// the next `dequeue` sends from it.
    peeked: Option<(u32, bool)>,
}

impl Hfsc {
    pub fn new(link: Rate) -> Hfsc {
        let root_ls = Curve::new(&ServiceCurve::linear(link));
        let mut q = Hfsc {
            link,
            classes: vec![Class::new(
                ClassId::ROOT,
                None,
                None,
                Some(root_ls),
                None,
                None,
            )],
            index: ClassIndex::default(),
            default: None,
            rt: Eligible::default(),
            ls: LinkShare::default(),
            rt_sum_bps: 0,
            now_ns: 0,
            len: 0,
            backlog: 0,
            peeked: None,
        };
        q.rt.grow(1);
        q.ls.grow(1);
        q
    }

    pub fn link(&self) -> Rate {
        self.link
    }

    /// Adds a class under `parent` (`None`: under the root). Leaves come with
    /// their queue; interior classes with `None`. Parents must be added first.
    pub fn add_class(
        &mut self,
        id: ClassId,
        parent: Option<ClassId>,
        params: ClassParams,
        leaf: Option<Box<dyn Qdisc>>,
    ) -> Result<(), HfscError> {
        if id == ClassId::ROOT {
            return Err(HfscError::ReservedId(id));
        }
        if self.index.get(id).is_some() {
            return Err(HfscError::Duplicate(id));
        }
        let parent_slot = match parent {
            None => ROOT,
            Some(p) => {
                let s = self.index.get(p).ok_or(HfscError::UnknownParent {
                    class: id,
                    parent: p,
                })?;
                if self.classes[s as usize].is_leaf() {
                    return Err(HfscError::ParentIsLeaf {
                        class: id,
                        parent: p,
                    });
                }
                s
            }
        };
        let is_leaf = leaf.is_some();
        if is_leaf && params.rt.is_none() && params.ls.is_none() {
            return Err(HfscError::NoCurve(id));
        }
        if !is_leaf && params.ls.is_none() {
            return Err(HfscError::InteriorNeedsLinkShare(id));
        }
        if !is_leaf && params.rt.is_some() {
            return Err(HfscError::RealTimeOnInterior(id));
        }
        if params.ul.is_some() && params.ls.is_none() {
            return Err(HfscError::UpperLimitWithoutLinkShare(id));
        }
        for (name, c) in [
            ("realtime", params.rt),
            ("linkshare", params.ls),
            ("upperlimit", params.ul),
        ] {
            if matches!(c, Some(c) if c.m2 == Rate::ZERO) {
                return Err(HfscError::ZeroRate {
                    class: id,
                    curve: name,
                });
            }
        }
        let rt_sum = self.rt_sum_bps + params.rt.map_or(0, |c| c.m2.as_bps() as u128);
        if rt_sum > self.link.as_bps() as u128 {
            return Err(HfscError::RealTimeOverbooked {
                class: id,
                sum: Rate(u64::try_from(rt_sum).unwrap_or(u64::MAX)),
                link: self.link,
            });
        }
        self.rt_sum_bps = rt_sum;
        let slot = self.classes.len() as u32;
        let curve = |c: Option<ServiceCurve>| c.map(|c| Curve::new(&c));
        self.classes.push(Class::new(
            id,
            Some(parent_slot),
            curve(params.rt),
            curve(params.ls),
            curve(params.ul),
            leaf,
        ));
        self.classes[parent_slot as usize].children.push(slot);
        self.index.insert(id, slot);
        self.rt.grow(self.classes.len());
        self.ls.grow(self.classes.len());
        Ok(())
    }

    /// Packets whose class is unknown (or not a leaf) go to `id`.
    pub fn set_default(&mut self, id: ClassId) -> Result<(), HfscError> {
        let s = self.index.get(id).ok_or(HfscError::UnknownClass(id))?;
        if !self.classes[s as usize].is_leaf() {
            return Err(HfscError::DefaultNotLeaf(id));
        }
        self.default = Some(s);
        Ok(())
    }

    fn clamp(&mut self, now: Instant) -> u64 {
        self.now_ns = self.now_ns.max(now.as_nanos());
        self.now_ns
    }

    fn leaf_slot(&self, id: ClassId) -> Option<u32> {
        match self.index.get(id) {
            Some(s) if self.classes[s as usize].is_leaf() => Some(s),
            _ => self.default,
        }
    }

    /// Accounts for the packets a leaf pushed to `drops[from..]`. `fresh` is
    /// the id of a packet refused at the door (never counted as resident).
    #[inline]
    fn absorb(&mut self, slot: u32, drops: &Drops, from: usize, fresh: Option<u64>) {
        if drops.len() <= from {
            return;
        }
        let stats = &mut self.classes[slot as usize].stats;
        for d in drops.iter().skip(from) {
            if fresh == Some(d.pkt.id) {
                stats.on_drop(&d.pkt, d.reason);
            } else {
                stats.on_drop_resident(&d.pkt, d.reason);
                self.len = self.len.saturating_sub(1);
                self.backlog = self.backlog.saturating_sub(d.pkt.len as u64);
            }
        }
    }

    /// The head of a leaf that just got its first packet: join both criteria.
    fn activate(&mut self, slot: u32, now: u64, drops: &mut Drops) {
        let from = drops.len();
        let cost = match self.classes[slot as usize].leaf.as_mut() {
            Some(leaf) => leaf.peek_len(Instant(now), drops),
            None => None,
        };
        self.absorb(slot, drops, from, None);
        let Some(cost) = cost else { return };
        let c = &mut self.classes[slot as usize];
        c.head_cost = cost;
        c.backlogged = true;
        if c.rt.is_some() {
            self.rt.activate(c, slot, now);
        }
        if c.ls.is_some() {
            self.ls.activate(&mut self.classes, slot, now);
        }
    }

    /// A backlogged leaf turned out empty (its AQM dropped the rest).
    fn deactivate(&mut self, slot: u32) {
        let c = &mut self.classes[slot as usize];
        c.backlogged = false;
        c.head_cost = 0;
        self.rt.deactivate(c, slot);
        self.ls
            .update(&mut self.classes, slot, 0, true, self.now_ns);
    }

    fn pick(&mut self, now: u64) -> Option<(u32, bool)> {
        if let Some(s) = self.rt.min_deadline(&mut self.classes, now) {
            return Some((s, true));
        }
        self.ls.select(&mut self.classes, now).map(|s| (s, false))
    }

    /// Sends the head of `slot`, or deactivates it if it has nothing.
    fn serve(&mut self, slot: u32, realtime: bool, now: u64, drops: &mut Drops) -> Option<Packet> {
        let from = drops.len();
        let pkt = match self.classes[slot as usize].leaf.as_mut() {
            Some(leaf) => leaf.dequeue(Instant(now), drops),
            None => None,
        };
        self.absorb(slot, drops, from, None);
        let Some(pkt) = pkt else {
            self.deactivate(slot);
            return None;
        };
        self.len = self.len.saturating_sub(1);
        self.backlog = self.backlog.saturating_sub(pkt.len as u64);
        let from = drops.len();
        let c = &mut self.classes[slot as usize];
        c.stats.on_dequeue(&pkt, Instant(now));
        let next = match c.leaf.as_mut() {
            Some(leaf) => leaf.peek_len(Instant(now), drops),
            _ => None,
        };
        self.absorb(slot, drops, from, None);
        let cost = pkt.cost as u64;
        let c = &mut self.classes[slot as usize];
        if realtime {
            c.cumul = c.cumul.saturating_add(cost);
        }
        c.head_cost = next.unwrap_or(0);
        c.backlogged = next.is_some();
        if c.rt.is_some() {
            match (next, realtime) {
                (None, _) => self.rt.deactivate(c, slot),
                (Some(_), true) => self.rt.update_ed(c, slot, now),
                (Some(_), false) => self.rt.update_d(c, slot, now),
            }
        }
        self.ls
            .update(&mut self.classes, slot, cost, next.is_none(), now);
        Some(pkt)
    }

    fn root_stats(&mut self) -> &mut QueueStats {
        &mut self.classes[ROOT as usize].stats
    }
}

/// Adds the packet counters of `b` into `a` (not `overlimits`/`borrows`,
/// which belong to the class they happened to).
fn add_counters(a: &mut QueueStats, b: &QueueStats) {
    a.enq_packets += b.enq_packets;
    a.enq_bytes += b.enq_bytes;
    a.deq_packets += b.deq_packets;
    a.deq_bytes += b.deq_bytes;
    for i in 0..a.drop_packets.len() {
        a.drop_packets[i] += b.drop_packets[i];
        a.drop_bytes[i] += b.drop_bytes[i];
    }
    a.ecn_marks += b.ecn_marks;
    a.qlen += b.qlen;
    a.backlog_bytes += b.backlog_bytes;
    a.sojourn.merge(&b.sojourn);
}

impl Qdisc for Hfsc {
    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = self.clamp(now);
        let Some(slot) = self.leaf_slot(pkt.class) else {
            self.root_stats().push_drop(pkt, DropReason::NoClass, drops);
            return Enqueue::Rejected;
        };
        pkt.enqueued_at = Instant(now);
        let (id, len, wire_len) = (pkt.id, pkt.len, pkt.len as u64);
        let from = drops.len();
        let c = &mut self.classes[slot as usize];
        let Some(leaf) = c.leaf.as_mut() else {
            // leaf_slot only returns leaves; kept total for safety.
            drops.push(Dropped {
                pkt,
                reason: DropReason::NoClass,
            });
            return Enqueue::Rejected;
        };
        let r = leaf.enqueue(pkt, Instant(now), drops);
        let refused = r == Enqueue::Rejected;
        if !refused {
            let s = &mut c.stats;
            s.enq_packets += 1;
            s.enq_bytes += wire_len;
            s.qlen += 1;
            s.backlog_bytes += wire_len;
            self.len += 1;
            self.backlog += len as u64;
        }
        self.absorb(slot, drops, from, refused.then_some(id));
        let c = &self.classes[slot as usize];
        if !c.backlogged && c.leaf.as_ref().is_some_and(|l| !l.is_empty()) {
            self.activate(slot, now, drops);
            self.peeked = None;
        }
        if drops.len() > from {
            // The leaf dropped something; a cached pick may name a packet gone.
            self.peeked = None;
            if refused {
                Enqueue::Rejected
            } else {
                Enqueue::QueuedDroppedOthers
            }
        } else {
            r
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = self.clamp(now);
        // Each failed round deactivates one leaf that turned out empty, so
        // there are at most as many rounds as classes.
        for _ in 0..self.classes.len() {
            let pick = match self.peeked.take() {
                Some(p) => Some(p),
                None => self.pick(now),
            };
            let Some((slot, realtime)) = pick else {
                if self.len > 0 {
                    // Held: every backlogged class waits for an upper limit
                    // or an eligible time.
                    self.root_stats().overlimits += 1;
                }
                return None;
            };
            if let Some(p) = self.serve(slot, realtime, now, drops) {
                return Some(p);
            }
        }
        None
    }

    /// The cost of the packet the next `dequeue` will send, or `None` if empty
    /// or every class is held by an upper limit (HFSC's own throttling).
    /// The choice holds until the next `dequeue` or until a class becomes
    /// active: the newcomer may have the earlier deadline (a ping in a
    /// real-time class), and the token bucket above peeks while it waits
    /// for tokens, so a held choice would send one more bulk frame ahead of
    /// it (ALTQ's token bucket polls only once the tokens are there).
    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = self.clamp(now);
        // As in dequeue: each failed round deactivates one empty leaf.
        for _ in 0..self.classes.len() {
            let (slot, realtime) = match self.peeked.take() {
                Some(p) => p,
                None => self.pick(now)?,
            };
            let from = drops.len();
            let cost = match self.classes[slot as usize].leaf.as_mut() {
                Some(leaf) => leaf.peek_len(Instant(now), drops),
                None => None,
            };
            self.absorb(slot, drops, from, None);
            match cost {
                Some(cost) => {
                    self.peeked = Some((slot, realtime));
                    return Some(cost);
                }
                None => self.deactivate(slot),
            }
        }
        None
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.len == 0 || self.peeked.is_some() || self.rt.has_ready() {
            return None;
        }
        let t = match (self.rt.next_eligible(), self.ls.next_fit()) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        (t > self.now_ns).then_some(Instant(t))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }

    fn purge(&mut self, drops: &mut Drops) {
        // One pass over the classes: bounded by the class count.
        for slot in 0..self.classes.len() as u32 {
            let from = drops.len();
            if let Some(leaf) = self.classes[slot as usize].leaf.as_mut() {
                leaf.purge(drops);
            }
            self.absorb(slot, drops, from, None);
        }
        for c in &mut self.classes {
            c.reset_runtime();
        }
        self.rt.clear();
        self.ls.clear();
        self.peeked = None;
        self.len = 0;
        self.backlog = 0;
    }

    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        // Children sit in higher slots than their parents, so one backward
        // pass sums every subtree into its root.
        let mut agg: Vec<QueueStats> = self.classes.iter().map(|c| c.stats.clone()).collect();
        // ECN marks happen inside a leaf's AQM: take them from the leaf.
        for (c, a) in self.classes.iter().zip(agg.iter_mut()) {
            if let Some(leaf) = &c.leaf {
                leaf.visit_stats(&mut |id, ls| {
                    if id == ClassId::ROOT {
                        a.ecn_marks = ls.ecn_marks;
                    }
                });
            }
        }
        for s in (1..self.classes.len()).rev() {
            if let Some(p) = self.classes[s].parent {
                let (lo, hi) = agg.split_at_mut(s);
                add_counters(&mut lo[p as usize], &hi[0]);
            }
        }
        // Pre-order walk; the stack never holds more than the class count.
        let mut stack = vec![ROOT];
        while let Some(s) = stack.pop() {
            let c = &self.classes[s as usize];
            f(c.id, &agg[s as usize]);
            stack.extend(c.children.iter().rev());
        }
    }
}
