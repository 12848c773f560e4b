//! An upload's hold: at a cut, the shaper sends nothing for the delay read
//! beyond [`Tuning::hold_leaves`] (at most [`Tuning::max_hold`]), so the
//! modem's queue — after sluice — drains at the link's full rate, where a
//! lower rate drains it only at the difference. "Hold" means this pause
//! and nothing else in autorate (the engine's `Engine::hold`,
//! `Qdisc::hold`).
//!
//! Invariants: a queue is held once — the reading lags it, so within
//! [`Tuning::hold_lag`] of a hold's end only what is read beyond that
//! hold's delay is held again. While silent, whatever the far ends
//! acknowledge left the modem at the link's rate
//! ([`crate::delivered`]): the hold measures the link, and a link far
//! under the rate sets it at once. Not on a probe's reading (its round
//! trip holds both directions' queues), not for a download (its queue
//! lies before sluice). docs/autorate.md §3, "An upload's cut holds the
//! shaper".

use super::drain::Drain;
use super::memory::{Cut, Sighting};
use super::tuning::Tuning;
use super::units::{rate_of, RateExt};
use super::{Controller, Reason, Tick};
use sluice_time::{Duration, Instant, Rate};

/// A hold made: when, for how long, on what delay, and the link it
/// measured. Measured from its start to the first tick at or after its
/// end and [`Tuning::hold_measure_span`] after its start, and only if the
/// reading then still shows a queue: a link that came back (an outage's
/// end) empties it before the hold ends, and idles; what it delivered then
/// is less than its rate.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hold {
    pub at: Instant,
    pub length: Duration,
    /// The delay it was made for.
    pub delay: Duration,
    /// Bytes delivered by `at`.
    pub delivered: Option<u64>,
    pub link: Option<Rate>,
    /// Measured already (or not to be).
    pub done: bool,
}

impl Hold {
    /// The link's rate, at the first tick at or after the hold's end (and
    /// only then), if a queue is still read (`queued`).
    fn measure(
        &mut self,
        now: Instant,
        delivered: Option<u64>,
        queued: bool,
        t: &Tuning,
    ) -> Option<Rate> {
        if self.done || now < self.at + self.length.max(t.hold_measure_span) {
            return None;
        }
        self.done = true;
        let (Some(d0), Some(d1), true) = (self.delivered, delivered, queued) else {
            return None;
        };
        let bytes = d1.saturating_sub(d0);
        let span = now.saturating_since(self.at);
        if bytes < t.hold_measure_frames * t.frame_bytes || span == Duration::ZERO {
            return None;
        }
        self.link = Some(rate_of(bytes, span));
        self.link
    }
}

impl Controller {
    /// The latest hold's measure, for this tick. Some queue left (over
    /// [`Tuning::hold_queue`]) says the link was busy through the span: its
    /// delivery caps the way back. Setting the rate by it at once needs a
    /// queue as the cuts see one: at half the target, a frame's noise at
    /// the low rates, a measure read the link the hold had emptied
    /// (docs/autorate.md §3).
    pub(super) fn measure_hold(
        &mut self,
        now: Instant,
        delivered: Option<u64>,
        delay: Option<Duration>,
    ) {
        let t = self.tuning;
        let cut_above = t.cut_above(self.rate);
        if let Some(h) = self.memory.hold.as_mut() {
            let queued = delay.is_some_and(|d| d > t.hold_queue);
            let firm = delay.is_some_and(|d| d > cut_above);
            self.memory.measured = h.measure(now, delivered, queued, &t).filter(|_| firm);
        }
    }

    /// The hold ended with a queue still read, and the link delivered less
    /// than the cut left: the cut was too small for how far the link fell.
    /// A little under the link, probed from there gently as after a cut,
    /// and the queue read now held in turn — all of it, the previous hold's
    /// drain being over. Waiting for the reading instead lets the queue
    /// build again; cutting on it cuts under the link (it lags the queue
    /// the holds drain).
    pub(super) fn cut_to_measured(&mut self, k: Tick, delay: Duration) -> Option<(Rate, Reason)> {
        let t = self.tuning;
        let rate = self.rate;
        let link = self
            .memory
            .measured
            .take()
            .filter(|l| l.under(t.hold_gap, rate))?;
        let new = link.scale(t.hold_under_link).max(self.cfg.min);
        let m = &mut self.memory;
        m.ceiling = Some(Sighting::new(k.now, link));
        m.link_seen = Some(Sighting::new(k.now, link));
        m.last_cut = Some(Cut {
            at: k.now,
            delay,
            from: rate,
            to: new,
        });
        m.drain = Some(Drain::from(k.now, delay, k.sent));
        self.make_hold(k.now, delay, k.delivered, true);
        Some((new, Reason::Delay))
    }

    /// An upload's cut on `delay` holds the shaper for what is read beyond
    /// [`Tuning::hold_leaves`], less what a recent hold already took out.
    /// `anew`: the hold made on a link just measured, which it keeps.
    pub(super) fn make_hold(
        &mut self,
        now: Instant,
        delay: Duration,
        delivered: Option<u64>,
        anew: bool,
    ) {
        let t = self.tuning;
        let leaves = t.hold_leaves;
        let covered = match self.memory.hold {
            Some(h) if !anew && now < h.at + h.length + t.hold_lag => h.delay.max(leaves),
            _ => leaves,
        };
        let length = (delay - covered).min(t.max_hold);
        if length == Duration::ZERO {
            return;
        }
        self.pending_hold = length;
        // Any hold soon after one that measured keeps that link until it
        // measures one itself: a second cut on a step's lagging reading
        // measures nothing, and the way back must still stop at the link
        // (docs/autorate.md §3, `a_second_cut_keeps_the_link_the_first_hold_measured`).
        let link = self
            .memory
            .hold
            .filter(|h| anew || now.saturating_since(h.at) < t.link_memory)
            .and_then(|h| h.link);
        self.memory.hold = Some(Hold {
            at: now,
            length,
            delay,
            delivered,
            link,
            done: anew,
        });
    }
}
