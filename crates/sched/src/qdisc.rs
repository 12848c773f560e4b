//! The one trait every discipline implements.

use crate::{ClassId, Packet, QueueStats};
use sluice_time::Instant;

/// The time a discipline acts on: `now`, or the latest it has seen if `now`
/// is earlier. The contract lets a caller step time backwards; every
/// discipline keeps its own latest and never runs its clock back.
#[inline]
pub(crate) fn clamp(latest: &mut Instant, now: Instant) -> Instant {
    *latest = (*latest).max(now);
    *latest
}

/// When a parent whose children never wait on each other should next be
/// polled: `None` as soon as one non-empty child can send now (no wake-up
/// needed), else the earliest of the children's wake-ups.
pub(crate) fn earliest_wakeup<'a>(
    children: impl Iterator<Item = &'a dyn Qdisc>,
) -> Option<Instant> {
    let mut best: Option<Instant> = None;
    for q in children {
        match q.next_wakeup() {
            None if !q.is_empty() => return None,
            Some(w) => best = Some(best.map_or(w, |b| b.min(w))),
            None => {}
        }
    }
    best
}

/// The largest packet (by cost) a hold lets by ([`Qdisc::hold`]): a pure
/// ACK with timestamps (66 bytes on Ethernet), an echo request (98), a DNS
/// query, with some framing overhead.
pub const HOLD_PASS_BYTES: u32 = 128;

/// Why a packet was not forwarded. Nothing is freed silently: every packet a
/// discipline gives up goes back to the caller in [`Drops`] with one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The queue was at its limit (qlimit in packets or bytes, FQ-CoDel memory).
    QueueFull,
    /// An active queue manager (CoDel, RED) chose to drop it.
    Aqm,
    /// A pipe's configured random loss.
    Loss,
    /// A classful discipline had no class for it and no default class.
    NoClass,
    /// Removed by `purge` (reconfiguration, shutdown).
    Purge,
    /// A queued pure ACK made redundant by a newer one of its connection
    /// (the ACK filter, [`crate::ack_filter`]).
    AckFilter,
}

impl DropReason {
    pub const ALL: [DropReason; 6] = [
        DropReason::QueueFull,
        DropReason::Aqm,
        DropReason::Loss,
        DropReason::NoClass,
        DropReason::Purge,
        DropReason::AckFilter,
    ];
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue-full",
            DropReason::Aqm => "aqm",
            DropReason::Loss => "loss",
            DropReason::NoClass => "no-class",
            DropReason::Purge => "purge",
            DropReason::AckFilter => "ack-filter",
        }
    }
}

/// A packet given back by a discipline.
#[derive(Debug)]
pub struct Dropped {
    pub pkt: Packet,
    pub reason: DropReason,
}

/// Out-parameter for dropped packets. A `Vec` the caller reuses, so the hot path
/// does not allocate once it has warmed up.
pub type Drops = Vec<Dropped>;

/// Outcome of [`Qdisc::enqueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// The packet is queued; nothing was dropped.
    Queued,
    /// The packet is queued, and to make room other packets were pushed to `drops`.
    QueuedDroppedOthers,
    /// The packet itself was refused; it is in `drops` with the reason.
    Rejected,
}

/// A queueing discipline. Object safe; classful disciplines hold children as
/// `Box<dyn Qdisc>` and route by [`Packet::class`].
///
/// Contract (checked by [`crate::testing`] after every operation):
/// - packets enqueued = dequeued + dropped + resident (`len()`);
/// - `backlog_bytes()` = sum of `len` of resident packets;
/// - packets of one flow in one class leave in the order they came;
/// - `next_wakeup()` is `None` when empty, and `Some` whenever the discipline
///   is non-empty but `dequeue` returned nothing (throttled);
/// - a `now` earlier than one seen before is treated as the latest one seen;
/// - no operation panics, whatever the sequence.
///
/// `Any` lets a classful parent recognize a child it can store inline (see
/// `leaf.rs`); every `'static` type has it.
pub trait Qdisc: Send + std::any::Any {
    /// Offers a packet. A refused packet is pushed to `drops`.
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue;

    /// The next packet to send now, or `None` if empty or throttled. May drop
    /// packets (AQM) into `drops` on the way.
    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet>;

    /// Cost of the packet `dequeue(now)` would return, ignoring any throttling
    /// of this discipline itself (a parent such as HFSC decides when to send).
    /// May run the AQM and hold the chosen packet so the next `dequeue` returns
    /// exactly it, unless an `enqueue` in between brings a packet that goes
    /// first (FQ-CoDel: a new flow's); a parent charges what it dequeues.
    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32>;

    /// Earliest time a throttled, non-empty discipline can send; `None` when
    /// empty or when it can send now.
    fn next_wakeup(&self) -> Option<Instant>;

    /// Resident packets.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of `len` of resident packets.
    fn backlog_bytes(&self) -> u64;

    /// Gives every resident packet back with [`DropReason::Purge`].
    fn purge(&mut self, drops: &mut Drops);

    /// Calls `f` with the statistics of every class, parents before children.
    /// A single-queue discipline reports itself as [`ClassId::ROOT`].
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats));

    /// What the discipline reports as [`ClassId::ROOT`]: its aggregate (a
    /// classful one's inner classes are in it already), as a parent sums
    /// its children's.
    fn root_stats(&self) -> QueueStats {
        let mut s = QueueStats::default();
        self.visit_stats(&mut |cid, st| {
            if cid == ClassId::ROOT {
                s.add(st);
            }
        });
        s
    }

    /// The ingress mode of a shaper (the token bucket, the pipe) and what
    /// it charged ([`crate::ingress`]); `None` for every other discipline.
    fn ingress(&self) -> Option<&crate::ingress::Ingress> {
        None
    }

    /// Changes the rate of a shaper (the token bucket, the pipe) at `now`,
    /// while packets wait: none is dropped or reordered, what was sent
    /// before `now` was paced at the old rate and what leaves after at the
    /// new one. `false` for a discipline without a rate of its own (the
    /// rate then stays as built).
    fn set_rate(&mut self, _rate: sluice_time::Rate, _now: Instant, _drops: &mut Drops) -> bool {
        false
    }

    /// Sends nothing of what waits, or arrives, for `hold` from `now` (on
    /// top of any wait it already owes) but packets of at most
    /// [`HOLD_PASS_BYTES`]: a shaper's output is what enters the link's
    /// queue beyond it (an upload's modem), and while the shaper is silent
    /// that queue drains at the link's full rate. The small ones (pure
    /// ACKs, pings, DNS) still go, at most at the rate, and the hold ends
    /// their time later: held, a download's ACKs come out together at its
    /// end, and its senders answer them with a burst into the modem's
    /// other queue (lab, `step`: 35–48 ms on the way down after each hold
    /// of the upload). Burst credit is spent. Nothing is dropped or
    /// reordered, and the rate is unchanged. `false` for a discipline
    /// without a rate of its own.
    fn hold(&mut self, _hold: sluice_time::Duration, _now: Instant, _drops: &mut Drops) -> bool {
        false
    }
}
