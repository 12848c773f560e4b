//! Delay under load: the cut, and what makes it wait.
//!
//! The new rate is the lesser of the rate and the output, times
//! [`Tuning::cut_factor`] of the delay; when a download's output is
//! already under the rate, the link keeps it there, and at least
//! [`Tuning::under_link`] of it is kept (enough to drain). Then a
//! refractory period, and a falling delay within a few of them is the cut
//! draining — unless the delay rose far past the cut's while sluice's
//! output is what enters the queue: that cut was too small for the step.
//! docs/autorate.md §3.

use super::drain::Drain;
use super::memory::{Cut, Sighting};
use super::units::{DurationExt, RateExt};
use super::{Controller, Reason, Tick};
use sluice_time::{Duration, Rate};

/// How the output stood at a cut.
#[derive(Clone, Copy, Debug)]
pub(super) struct Output {
    /// A download's output under the rate: the link keeps it there.
    pub link_limited: bool,
    /// An upload's output fallen under [`super::Tuning::busy`] of the rate:
    /// its senders' ACKs come back at the link's pace, which fell.
    pub collapsed: bool,
}

impl Controller {
    /// The delay is above the target (+ half a frame) and the link not idle.
    pub(super) fn on_delay(&mut self, k: Tick, delay: Duration) -> (Rate, Reason) {
        let t = self.tuning;
        let rate = self.rate;
        let out = Output {
            link_limited: !self.way_out && k.achieved.under(t.link_limited, rate),
            collapsed: self.way_out && k.achieved.under(t.busy, rate),
        };
        if self.cut_held_off(k, delay, out) {
            return (rate, Reason::Refractory);
        }
        let mut factor = t.cut_factor(delay);
        if out.link_limited {
            self.memory.link_seen = Some(Sighting::new(k.now, k.achieved));
            factor = factor.max(t.under_link);
        }
        let new = rate.min(k.achieved).scale(factor).max(self.cfg.min);
        if new >= rate {
            return (rate, Reason::Steady);
        }
        let forced = out.link_limited || delay >= t.dip_delay || out.collapsed;
        self.phase = self.phase_after_cut(k.now, forced, new);
        if self.phase.is_dip() {
            self.dip_peak = self.dip_peak.max(k.achieved);
        }
        let m = &mut self.memory;
        m.last_cut = Some(Cut {
            at: k.now,
            delay,
            from: rate,
            to: new,
        });
        // Only a queue sluice's output enters drains at its pace.
        m.drain = self.way_out.then(|| Drain::from(k.now, delay, k.sent));
        // Only a reading of the way out says the queue is the upload's.
        if self.way_out && !k.probe {
            self.make_hold(k.now, delay, k.delivered, false);
        }
        self.memory.ceiling = Some(Sighting::new(k.now, rate.min(k.achieved)));
        (new, Reason::Delay)
    }

    /// Whether a cut waits: within the refractory period of the last one
    /// (unless the delay escalated), its queue draining, or the rate already
    /// under a link a download's output showed recently.
    fn cut_held_off(&self, k: Tick, delay: Duration, out: Output) -> bool {
        let t = self.tuning;
        let rate = self.rate;
        if let Some(c) = self.memory.last_cut {
            let since = k.now.saturating_since(c.at);
            // A delay well below the cut's is its queue draining, unless
            // the rate rose since: then it is a queue of the raise.
            let draining = since < t.refractory.times(t.drain_periods)
                && t.draining.below(delay, c.delay)
                && rate <= c.to;
            let escalate = !out.link_limited && delay > c.delay.times(t.escalate) + t.target;
            if (since < t.refractory && !escalate) || draining {
                return true;
            }
        }
        // Already under the link rate seen at a recent cut: the queue is
        // the senders' lag, not the rate.
        self.memory.link_seen.is_some_and(|s| {
            k.now.saturating_since(s.at) < t.link_memory
                && !out.link_limited
                && rate.at_most(t.under_link_seen, s.rate)
        })
    }
}
