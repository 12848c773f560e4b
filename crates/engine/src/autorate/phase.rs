//! The controller's phases, each with only the state it needs, and their
//! transitions (the table is in the module doc of [`super`]).
//!
//! - **Steady**: the ordinary rules.
//! - **Dip**: the link fell for a moment (a cell hand-over, a satellite's
//!   reconfiguration), forcing cuts; once load without delay returns the
//!   rate climbs back fast ([`super::Tuning::fast`]) towards the rate
//!   before, until it is near it or delay appears on the way.
//! - **Fade**: an upload's dip that ended under half the rate before (a
//!   tunnel); its end is watched for, and the way back resumes then.
//! - **Reconfig**: inside a scheduled drop's window ([`super::reconfig`]).

use super::units::RateExt;
use super::Controller;
use sluice_time::{Instant, Rate};

#[derive(Clone, Debug)]
pub(super) enum Phase {
    Steady,
    Dip(Dip),
    Fade(Fade),
    Reconfig(Window),
}

impl Phase {
    pub fn is_dip(&self) -> bool {
        matches!(self, Phase::Dip(_))
    }
}

/// The way back from a dip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dip {
    /// The rate before the first cut the link forced.
    pub before: Rate,
    /// When the dip began.
    pub since: Instant,
    /// The rate has been raised since (the way back is under way).
    pub raised: bool,
    /// A `reconfig` window's way back, no delay read on it yet: what a
    /// download delivers then is its senders' climb from `min`, not the
    /// link's rate.
    pub after_reconfig: bool,
}

impl Dip {
    pub fn new(before: Rate, since: Instant) -> Dip {
        Dip {
            before,
            since,
            raised: false,
            after_reconfig: false,
        }
    }
}

/// An upload's dip that ended at a link under half the rate before it,
/// and its end watched for: once the rate, climbing at the gentle probe's
/// pace, is [`super::Tuning::fade_past`] past the link found with nothing
/// read since it reached it, for [`super::Tuning::fade_quiet`] at least,
/// the way back from the dip resumes. Not a download's: its reading lags
/// its senders, and its way back stops where their output does
/// (docs/autorate.md §3, "The end of an upload's fade").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Fade {
    pub before: Rate,
    pub since: Instant,
    /// Since when nothing has been read with the rate at or past the
    /// fade's link.
    pub past: Option<Instant>,
}

/// A `reconfig` window: the rate before it, when it began and the bytes
/// sent until then (its mean output at the end), and the phase it
/// interrupted (an idle link goes back to it).
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub before: Rate,
    pub since: Instant,
    pub sent: u64,
    pub prior: Box<Phase>,
}

impl Controller {
    /// The phase after a cut from the rate to `new`; `forced`: the link
    /// forced it (a download's output under the rate, a delay of
    /// [`super::Tuning::dip_delay`], an upload's output collapsed).
    pub(super) fn phase_after_cut(&mut self, now: Instant, forced: bool, new: Rate) -> Phase {
        let t = self.tuning;
        let rate = self.rate;
        match std::mem::replace(&mut self.phase, Phase::Steady) {
            // Delay on the way back, still under half the rate before and
            // soon after the dip began: the link is still down (a fade of
            // 1-3 s), and the way back starts again from here.
            Phase::Dip(d)
                if d.raised
                    && now.saturating_since(d.since) < t.ceiling_memory
                    && rate.under(t.fade_depth, d.before) =>
            {
                Phase::Dip(Dip::new(d.before, d.since))
            }
            // Delay on the way back: the link is found, and from here the
            // ordinary rules go on.
            Phase::Dip(d) if d.raised => self.dip_ended(d.before, d.since, new),
            Phase::Dip(d) => Phase::Dip(Dip {
                after_reconfig: false,
                ..d
            }),
            // The rate before the first forced cut is remembered. (A
            // fade's watch gives way to the new dip, which ends in a fade
            // of its own or none.)
            Phase::Steady | Phase::Fade(_) if forced => Phase::Dip(Dip::new(rate, now)),
            other => other,
        }
    }

    /// A dip that began at `since` from `before` ended with the rate at
    /// `at`: under [`super::Tuning::fade_depth`] of `before`, an upload's
    /// fade, whose end is watched for.
    pub(super) fn dip_ended(&self, before: Rate, since: Instant, at: Rate) -> Phase {
        if self.way_out && at.under(self.tuning.fade_depth, before) {
            Phase::Fade(Fade {
                before,
                since,
                past: None,
            })
        } else {
            Phase::Steady
        }
    }

    /// A calm, loaded tick in a fade: past its memory it is forgotten;
    /// past its link with nothing read for long enough it is over, and the
    /// way back from the dip resumes, what was learnt in it (the hold's
    /// measure, the drain, where the link was found) forgotten.
    pub(super) fn watch_fade(&mut self, mut f: Fade, now: Instant, empty: bool) -> Phase {
        let t = self.tuning;
        if now.saturating_since(f.since) >= t.fade_memory {
            return Phase::Steady;
        }
        let Some(found) = self.memory.ceiling.map(|c| c.rate) else {
            return Phase::Fade(f);
        };
        // A cut in the fade (under half the rate before) from a little
        // above the link found says where the link is: a hold's measure
        // reads under it by up to a tenth. One far above was an overshoot
        // of the way back, and says nothing of it.
        let fade_cut = self
            .memory
            .last_cut
            .filter(|c| c.at >= f.since && c.from.under(t.fade_depth, f.before))
            .map_or(Rate(0), |c| c.from);
        let link = if fade_cut.at_most(t.fade_near, found) {
            found.max(fade_cut)
        } else {
            found
        };
        let rate = self.rate;
        if empty && rate >= link && f.past.is_none() {
            f.past = Some(now);
        }
        let over = f.past.is_some_and(|at| {
            rate.at_least(t.fade_past, link) && now.saturating_since(at) >= t.fade_quiet
        });
        if !over {
            return Phase::Fade(f);
        }
        let m = &mut self.memory;
        m.drain = None;
        m.ceiling = None;
        if let Some(h) = m.hold.as_mut() {
            h.link = None;
        }
        // Fades are an upload's, and the exemption of a window's way back
        // is for a download's rule: `after_reconfig` does not apply.
        Phase::Dip(Dip::new(f.before, now))
    }
}

#[cfg(test)]
#[path = "phase_tests.rs"]
mod tests;
