//! FAIRQ: fair queueing inside strict-priority classes, as ALTQ's `fairq`
//! (DragonFly BSD 2008, FreeBSD's ALTQ, pfSense's "FAIRQ" shaper).
//!
//! # Principles
//! - Classes are served by strict priority (0..=7, 7 highest; one class per
//!   priority, as ALTQ refuses a second one with `EBUSY`), except that a
//!   class whose measured rate is above its `bandwidth` yields to the
//!   highest lower-priority class that is below its own. When every
//!   non-empty class is over, the highest is served: FAIRQ is
//!   work-conserving; `bandwidth` is a threshold, not a cap (ALTQ's
//!   `fairq_dequeue`: `hit_limit` only lets a lower class go first). A
//!   class with no `bandwidth` is never over.
//! - Within a class, packets are hashed by flow ([`Packet::flow`]'s
//!   connection bits) into `buckets` buckets and the non-empty buckets are
//!   served one packet each, round robin: a flow's packets leave in order,
//!   and while `k` buckets stay backlogged the numbers of packets any two
//!   of them send differ by at most one (fairness in packets, as ALTQ).
//! - `hogs R`: a bucket below `R` is *light* and goes to the head of the
//!   round, so a sparse flow waits for at most the packet being sent,
//!   whatever the number of bulk flows ([`ClassParams::hogs`]).
//! - Rates are ALTQ's decaying measure, charged on dequeue in
//!   [`Packet::cost`] bytes (`Meter`).
//! - `qlimit` (and RED, RIO, CoDel) is per bucket, as in ALTQ: each bucket
//!   holds its own child discipline, made on first use by the class's
//!   factory. `linkshare` is accepted and ignored ("NOT YET USED").
//! - FAIRQ does not rate-limit; the engine puts the token-bucket regulator
//!   (`tbr.rs`) above it, as for PRIQ. `peek_len` follows the peeked-packet
//!   rule of PRIQ (see `peek_len` below).
//!
//! Learned from FreeBSD's `sys/net/altq/altq_fairq.c` (`fairq_dequeue`,
//! `fairq_addq`, `fairq_selectq`, `fairq_getq`) and pfctl's `parse.y`
//! (`fairqopts_item`); written anew for sluice's `Qdisc` contract.

use crate::qdisc::{clamp, earliest_wakeup};
use crate::{ClassId, DropReason, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant, Rate};
use std::collections::VecDeque;
use std::fmt;

/// Priorities 0..=7 (ALTQ's `RM_MAXPRIO`).
pub const PRIORITIES: u8 = 8;
/// ALTQ's `FAIRQ_MAX_BUCKETS`.
pub const MAX_BUCKETS: u32 = 2048;
/// ALTQ's default when `buckets` is not given.
pub const DEFAULT_BUCKETS: u32 = 256;
/// Longest idle gap one charge of a meter counts (ALTQ caps it at 8 s).
pub const METER_GAP_CAP: Duration = Duration::from_secs(8);

/// Makes the child discipline of a bucket (FIFO, RED, RIO, CoDel).
pub type LeafFactory = Box<dyn Fn() -> Box<dyn Qdisc> + Send>;

/// A class's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassParams {
    /// 0..=7, higher served first.
    pub priority: u8,
    /// Power of two, 1..=[`MAX_BUCKETS`].
    pub buckets: u32,
    /// Above this measured rate the class yields to lower ones under theirs.
    /// `None` is never over (pfctl's default is 100 % of the interface,
    /// which the token bucket above keeps it under).
    pub bandwidth: Option<Rate>,
    /// Buckets below this measured rate are light. A light bucket that
    /// becomes non-empty goes to the head of the round (served next), and
    /// keeps the head after it is served (it may burst) until its rate
    /// reaches this; then it takes round-robin turns like every other hog.
    /// So a sparse flow (a ping, a DNS query, a game's updates) waits for at
    /// most the packet being sent. `None`: every bucket takes turns. ALTQ
    /// puts a bucket with no history at the tail; here a bucket with no
    /// history is light (it has sent nothing, so it is no hog).
    pub hogs: Option<Rate>,
}

impl Default for ClassParams {
    fn default() -> Self {
        ClassParams {
            priority: 1,
            buckets: DEFAULT_BUCKETS,
            bandwidth: None,
            hogs: None,
        }
    }
}

/// Errors of FAIRQ configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairqError {
    PriorityOutOfRange {
        priority: u8,
    },
    /// Another class already has this priority.
    DuplicatePriority {
        priority: u8,
    },
    BadBuckets {
        buckets: u32,
    },
    DuplicateClass(ClassId),
    ReservedId,
    UnknownClass(ClassId),
}

impl fmt::Display for FairqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FairqError::PriorityOutOfRange { priority } => {
                write!(f, "fairq: priority {priority} out of range (0..=7)")
            }
            FairqError::DuplicatePriority { priority } => {
                write!(f, "fairq: two classes with priority {priority}")
            }
            FairqError::BadBuckets { buckets } => write!(
                f,
                "fairq: {buckets} buckets (a power of two, 1..={MAX_BUCKETS})"
            ),
            FairqError::DuplicateClass(id) => write!(f, "fairq: class {} defined twice", id.0),
            FairqError::ReservedId => write!(f, "fairq: class id 0 is reserved for the root"),
            FairqError::UnknownClass(id) => {
                write!(f, "fairq: default class {} does not exist", id.0)
            }
        }
    }
}

impl std::error::Error for FairqError {}

/// A decaying measure of a rate (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
struct Meter {
    bytes: u64,
    span_ns: u64,
    last: Instant,
}

impl Meter {
    fn gap(&self, now: Instant) -> u64 {
        now.saturating_since(self.last)
            .as_nanos()
            .min(METER_GAP_CAP.as_nanos())
    }

    fn charge(&mut self, now: Instant, cost: u32) {
        if self.bytes == 0 && self.span_ns == 0 {
            // No history: the first charge starts the clock.
            self.last = now;
        }
        self.span_ns += self.gap(now);
        self.bytes += u64::from(cost);
        self.last = now;
        self.span_ns -= self.span_ns >> 3;
        self.bytes -= self.bytes >> 3;
    }

    /// Whether the measured rate at `now` is at least `r`. Nothing sent
    /// means rate zero; something sent in no time, an unbounded rate.
    fn at_least(&self, now: Instant, r: Rate) -> bool {
        if self.bytes == 0 {
            return r.as_bps() == 0;
        }
        let span = u128::from(self.span_ns + self.gap(now));
        u128::from(self.bytes) * 8 * 1_000_000_000 >= u128::from(r.as_bps()) * span
    }

    /// Whether the measured rate at `now` is above `r`.
    fn above(&self, now: Instant, r: Rate) -> bool {
        if self.bytes == 0 {
            return false;
        }
        let span = u128::from(self.span_ns + self.gap(now));
        u128::from(self.bytes) * 8 * 1_000_000_000 > u128::from(r.as_bps()) * span
    }
}

struct Bucket {
    /// Made on first use.
    q: Option<Box<dyn Qdisc>>,
    meter: Meter,
    /// In its class's round (non-empty, or the peeked one).
    in_round: bool,
}

struct Class {
    id: ClassId,
    params: ClassParams,
    make: LeafFactory,
    buckets: Vec<Bucket>,
    /// The non-empty buckets; the front is served next.
    round: VecDeque<u32>,
    meter: Meter,
    len: usize,
    /// Times it yielded to a lower class for being over its bandwidth.
    overlimits: u64,
}

impl Class {
    fn bucket_of(&self, pkt: &Packet) -> u32 {
        // The high 32 bits identify the connection (`Packet::flow_key`).
        ((pkt.flow >> 32) as u32) & (self.params.buckets - 1)
    }

    fn light(&self, b: u32, now: Instant) -> bool {
        match self.params.hogs {
            Some(h) => !self.buckets[b as usize].meter.at_least(now, h),
            None => false,
        }
    }

    fn over(&self, now: Instant) -> bool {
        self.params
            .bandwidth
            .is_some_and(|r| self.meter.above(now, r))
    }
}

/// FAIRQ over per-bucket child disciplines.
pub struct Fairq {
    /// By priority, highest first.
    classes: Vec<Class>,
    default: Option<usize>,
    /// (class, bucket) chosen by the last `peek_len`.
    peeked: Option<(usize, u32)>,
    len: usize,
    backlog_bytes: u64,
    last_now: Instant,
    own: QueueStats,
}

impl Default for Fairq {
    fn default() -> Self {
        Fairq::new()
    }
}

impl fmt::Debug for Fairq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fairq")
            .field("classes", &self.classes.len())
            .field("len", &self.len)
            .field("backlog_bytes", &self.backlog_bytes)
            .finish()
    }
}

impl Fairq {
    pub fn new() -> Fairq {
        Fairq {
            classes: Vec::new(),
            default: None,
            peeked: None,
            len: 0,
            backlog_bytes: 0,
            last_now: Instant::ZERO,
            own: QueueStats::default(),
        }
    }

    /// Adds a class whose buckets each hold a child made by `make`.
    pub fn add_class(
        &mut self,
        id: ClassId,
        params: ClassParams,
        make: LeafFactory,
    ) -> Result<(), FairqError> {
        if params.priority >= PRIORITIES {
            return Err(FairqError::PriorityOutOfRange {
                priority: params.priority,
            });
        }
        if !params.buckets.is_power_of_two() || params.buckets > MAX_BUCKETS {
            return Err(FairqError::BadBuckets {
                buckets: params.buckets,
            });
        }
        if id == ClassId::ROOT {
            return Err(FairqError::ReservedId);
        }
        if self.index_of(id).is_some() {
            return Err(FairqError::DuplicateClass(id));
        }
        if self
            .classes
            .iter()
            .any(|c| c.params.priority == params.priority)
        {
            return Err(FairqError::DuplicatePriority {
                priority: params.priority,
            });
        }
        let buckets = (0..params.buckets)
            .map(|_| Bucket {
                q: None,
                meter: Meter::default(),
                in_round: false,
            })
            .collect();
        let pos = self
            .classes
            .partition_point(|c| c.params.priority > params.priority);
        self.classes.insert(
            pos,
            Class {
                id,
                params,
                make,
                buckets,
                round: VecDeque::with_capacity(params.buckets as usize),
                meter: Meter::default(),
                len: 0,
                overlimits: 0,
            },
        );
        if let Some(d) = self.default.as_mut() {
            if *d >= pos {
                *d += 1;
            }
        }
        Ok(())
    }

    /// Packets of unknown classes go to `id`.
    pub fn set_default(&mut self, id: ClassId) -> Result<(), FairqError> {
        self.default = Some(self.index_of(id).ok_or(FairqError::UnknownClass(id))?);
        Ok(())
    }

    /// Packets resident in class `id`.
    pub fn class_len(&self, id: ClassId) -> Option<usize> {
        self.index_of(id).map(|i| self.classes[i].len)
    }

    /// Non-empty buckets of class `id`.
    pub fn active_buckets(&self, id: ClassId) -> Option<usize> {
        self.index_of(id).map(|i| self.classes[i].round.len())
    }

    fn in_rounds(&self) -> usize {
        self.classes.iter().map(|c| c.round.len()).sum()
    }

    fn index_of(&self, id: ClassId) -> Option<usize> {
        self.classes.iter().position(|c| c.id == id)
    }

    /// Counters of class `ci`: its buckets' plus its own.
    fn class_stats(&self, ci: usize) -> QueueStats {
        let c = &self.classes[ci];
        let mut s = QueueStats {
            overlimits: c.overlimits,
            ..QueueStats::default()
        };
        for q in c.buckets.iter().filter_map(|b| b.q.as_ref()) {
            s.add(&q.root_stats());
        }
        s
    }

    /// FAIRQ's aggregate, as `visit_stats` reports it for the root.
    pub fn stats(&self) -> QueueStats {
        let mut total = self.own.clone();
        for ci in 0..self.classes.len() {
            total.add(&self.class_stats(ci));
        }
        total
    }

    /// Runs `f` on bucket `b` of class `ci` and keeps the lengths right by
    /// what the child reports before and after.
    fn with_bucket<R>(&mut self, ci: usize, b: u32, f: impl FnOnce(&mut dyn Qdisc) -> R) -> R {
        let c = &mut self.classes[ci];
        let bucket = &mut c.buckets[b as usize];
        let q = bucket.q.get_or_insert_with(|| (c.make)());
        let (l0, b0) = (q.len(), q.backlog_bytes());
        let r = f(q.as_mut());
        let (l1, b1) = (q.len(), q.backlog_bytes());
        c.len = (c.len + l1).saturating_sub(l0);
        self.len = (self.len + l1).saturating_sub(l0);
        self.backlog_bytes = (self.backlog_bytes + b1).saturating_sub(b0);
        r
    }

    fn bucket_empty(&self, ci: usize, b: u32) -> bool {
        self.classes[ci].buckets[b as usize]
            .q
            .as_ref()
            .is_none_or(|q| q.is_empty())
    }

    /// The class to serve: the highest non-empty one under its bandwidth,
    /// else the highest non-empty one.
    fn choose_class(&mut self, now: Instant) -> Option<usize> {
        let mut best: Option<usize> = None;
        for ci in 0..self.classes.len() {
            if self.classes[ci].round.is_empty() {
                continue;
            }
            if !self.classes[ci].over(now) {
                if let Some(b) = best {
                    self.classes[b].overlimits += 1;
                }
                return Some(ci);
            }
            best.get_or_insert(ci);
        }
        best
    }

    /// The front bucket of class `ci` that holds a packet, dropping empty
    /// ones from the round (a child's AQM may empty a bucket).
    fn front_bucket(&mut self, ci: usize) -> Option<u32> {
        while let Some(&b) = self.classes[ci].round.front() {
            if !self.bucket_empty(ci, b) {
                return Some(b);
            }
            self.classes[ci].round.pop_front();
            self.classes[ci].buckets[b as usize].in_round = false;
        }
        None
    }

    /// After serving bucket `b` (the front of class `ci`'s round): a hog
    /// goes to the back, a light bucket keeps the front, an empty one
    /// leaves the round.
    fn after_serve(&mut self, ci: usize, b: u32, now: Instant) {
        let empty = self.bucket_empty(ci, b);
        let light = self.classes[ci].light(b, now);
        let c = &mut self.classes[ci];
        if c.round.front() != Some(&b) {
            return;
        }
        if empty {
            c.round.pop_front();
            c.buckets[b as usize].in_round = false;
        } else if !light {
            c.round.rotate_left(1);
        }
    }

    /// Offers `turn` the front bucket of the class to serve until it takes
    /// it. Each pass serves a packet, empties a bucket or finds a child that
    /// gives nothing now: bounded by the buckets in the rounds.
    fn take_turns<T>(
        &mut self,
        now: Instant,
        mut turn: impl FnMut(&mut Self, usize, u32) -> Option<T>,
    ) -> Option<T> {
        for _ in 0..=self.in_rounds() {
            if self.len == 0 {
                break;
            }
            let ci = self.choose_class(now)?;
            let Some(b) = self.front_bucket(ci) else {
                continue;
            };
            if let Some(t) = turn(self, ci, b) {
                return Some(t);
            }
        }
        None
    }

    fn serve(&mut self, ci: usize, b: u32, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let pkt = self.with_bucket(ci, b, |q| q.dequeue(now, drops));
        if let Some(p) = &pkt {
            let c = &mut self.classes[ci];
            c.meter.charge(now, p.cost);
            c.buckets[b as usize].meter.charge(now, p.cost);
        }
        self.after_serve(ci, b, now);
        pkt
    }
}

impl Qdisc for Fairq {
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last_now, now);
        let Some(ci) = self.index_of(pkt.class).or(self.default) else {
            self.own.push_drop(pkt, DropReason::NoClass, drops);
            return Enqueue::Rejected;
        };
        let b = self.classes[ci].bucket_of(&pkt);
        // Classes are sorted by priority, highest first.
        if matches!(self.peeked, Some((pc, _)) if ci < pc) {
            self.peeked = None;
        }
        let r = self.with_bucket(ci, b, |q| q.enqueue(pkt, now, drops));
        if !self.classes[ci].buckets[b as usize].in_round && !self.bucket_empty(ci, b) {
            let light = self.classes[ci].light(b, now);
            let c = &mut self.classes[ci];
            c.buckets[b as usize].in_round = true;
            // A light newcomer goes first, but never ahead of the bucket a
            // peek promised to the next dequeue.
            let promised = matches!(self.peeked, Some((pc, _)) if pc == ci);
            if light && !promised {
                c.round.push_front(b);
            } else if light && !c.round.is_empty() {
                c.round.insert(1, b);
            } else {
                c.round.push_back(b);
            }
        }
        r
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last_now, now);
        if let Some((ci, b)) = self.peeked.take() {
            if self.classes[ci].round.front() == Some(&b) && !self.bucket_empty(ci, b) {
                if let Some(p) = self.serve(ci, b, now, drops) {
                    return Some(p);
                }
            }
        }
        self.take_turns(now, |q, ci, b| q.serve(ci, b, now, drops))
    }

    /// The peeked-packet rule: the class and bucket a peek chose are the
    /// ones the next `dequeue` serves (ALTQ's `pif_poll_cache` and
    /// `cl_polled`), unless a packet of a higher-priority class arrives
    /// first: the token bucket above peeks while it waits for tokens, and a
    /// choice held across that wait would put a bulk frame ahead of it (as
    /// in PRIQ, `priq.rs`).
    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = clamp(&mut self.last_now, now);
        if let Some((ci, b)) = self.peeked {
            if self.classes[ci].round.front() == Some(&b) {
                if let Some(l) = self.with_bucket(ci, b, |q| q.peek_len(now, drops)) {
                    return Some(l);
                }
            }
            self.peeked = None;
        }
        self.take_turns(now, |q, ci, b| {
            if let Some(l) = q.with_bucket(ci, b, |c| c.peek_len(now, drops)) {
                q.peeked = Some((ci, b));
                return Some(l);
            }
            // Its AQM emptied it, or it cannot send now: next turn.
            if q.front_bucket(ci) == Some(b) {
                q.classes[ci].round.rotate_left(1);
            }
            None
        })
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        // The children (FIFO, RED, CoDel) never throttle: the first
        // non-empty bucket found ends the scan.
        earliest_wakeup(self.classes.iter().flat_map(|c| {
            c.round
                .iter()
                .filter_map(|&b| c.buckets[b as usize].q.as_deref())
        }))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    fn purge(&mut self, drops: &mut Drops) {
        for c in &mut self.classes {
            for b in &mut c.buckets {
                if let Some(q) = &mut b.q {
                    q.purge(drops);
                }
                b.in_round = false;
            }
            c.round.clear();
            c.len = 0;
        }
        self.peeked = None;
        self.len = 0;
        self.backlog_bytes = 0;
    }

    /// Each class reports the sum of its buckets' counters plus its own
    /// `overlimits` (times it yielded for being over its bandwidth); FAIRQ's
    /// aggregate, with its `NoClass` refusals, is [`ClassId::ROOT`].
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats());
        for ci in 0..self.classes.len() {
            f(self.classes[ci].id, &self.class_stats(ci));
        }
    }
}

#[cfg(test)]
mod tests;
