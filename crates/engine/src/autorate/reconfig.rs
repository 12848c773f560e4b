//! A link that drops on a schedule: make way before it.
//!
//! With `reconfig` ([`sluice_conf::ir::Reconfig`]) the link is known to
//! drop for a moment at set times of the wall clock (Starlink: every 15 s,
//! at 12 s). A controller that learns of a drop from the delay it causes
//! learns a round trip late, when the modem already has that round
//! trip's worth of the old rate. Knowing when, the rate goes to `min` from
//! `lead` before the moment to `hold` after it (pf.conf's word; nothing to
//! do with an upload's hold), the signal unread meanwhile. Then it starts
//! at half the rate before and climbs back as from a dip; an idle link
//! gets the rate before back at once. Without a wall clock
//! ([`Controller::set_wall_clock`]) nothing is scheduled.
//! docs/autorate.md, "A link that drops on a schedule".

use super::memory::Memory;
use super::phase::{Dip, Phase, Window};
use super::units::RateExt;
use super::{Controller, Reason};
use sluice_time::{Instant, Rate};

impl Controller {
    /// Whether `now` lies in a `reconfig` window: from `lead` before a
    /// scheduled moment to `hold` after it.
    pub fn in_reconfig(&self, now: Instant) -> bool {
        let (Some(r), Some(off)) = (self.cfg.reconfig, self.wall) else {
            return false;
        };
        let every = r.every.0.max(1);
        // Time since the latest scheduled moment (Unix time `at` past a
        // multiple of `every`).
        let since = now
            .0
            .wrapping_add(off.0)
            .wrapping_add(every - r.at.0 % every)
            % every;
        let after = r.hold;
        since < after.0 || since >= every.saturating_sub(r.lead.0)
    }

    /// The window's decision, if `now` is in one or has just left it.
    pub(super) fn scheduled(&mut self, now: Instant, sent: u64) -> Option<(Rate, Reason)> {
        if self.in_reconfig(now) {
            if !matches!(self.phase, Phase::Reconfig(_)) {
                let prior = std::mem::replace(&mut self.phase, Phase::Steady);
                self.phase = Phase::Reconfig(Window {
                    before: self.rate,
                    since: now,
                    sent,
                    prior: Box::new(prior),
                });
            }
            return Some((self.cfg.min, Reason::Reconfig));
        }
        if !matches!(self.phase, Phase::Reconfig(_)) {
            return None;
        }
        match std::mem::replace(&mut self.phase, Phase::Steady) {
            Phase::Reconfig(w) => Some(self.leave_window(now, sent, w)),
            other => {
                self.phase = other;
                None
            }
        }
    }

    /// Out of the window with nothing sent through it (less than
    /// [`super::Tuning::busy`] of `min` over the whole window: its mean, as
    /// a download's output in the link's stall falls low for a tick while
    /// its senders still send): nothing waits to meet the new schedule,
    /// and the rate and phase before stand. Loaded: the link has a new
    /// schedule, maybe a lower rate; half the rate before, then the way
    /// back from a dip, and what was learnt before is about another link.
    fn leave_window(&mut self, now: Instant, sent: u64, w: Window) -> (Rate, Reason) {
        let t = self.tuning;
        let span = now.saturating_since(w.since);
        let out = sent.saturating_sub(w.sent) as f64 * 8.0 / span.as_secs_f64().max(1e-9);
        if out < self.cfg.min.bps_f64() * t.busy {
            self.phase = *w.prior;
            return (w.before, Reason::Reconfig);
        }
        self.phase = Phase::Dip(Dip {
            after_reconfig: true,
            ..Dip::new(w.before, now)
        });
        self.memory = Memory::default();
        let new = t.reconfig_restart.of_rate(w.before).max(self.cfg.min);
        (new, Reason::Reconfig)
    }
}
