//! Load without delay: the raise, by a step that depends on where the
//! link was last found and on the phase, and a download's way back that
//! its output stopped following.
//!
//! The rate grows by [`super::Tuning::raise`] a tick (multiplicative: the time to
//! find a higher link is logarithmic in the ratio), by [`super::Tuning::probe`]
//! near where the link was last found while that is recent (a rate a few
//! per cent past a link grows its queue by tens of milliseconds a second,
//! and the reading lags by a few ticks), and by [`super::Tuning::fast`] on the
//! way back from a dip. docs/autorate.md §3, "Near the link, gently".

use super::memory::Sighting;
use super::phase::{Dip, Phase};
use super::units::RateExt;
use super::{Controller, Reason};
use sluice_time::{Instant, Rate};

/// A way back from a dip: towards [`super::Tuning::probe_zone`] of the rate
/// before (`full`), but not past the link a hold or the drain showed
/// (`to`). In bit/s, unrounded: the raise is rounded up once, capped here.
#[derive(Clone, Copy, Debug)]
struct WayBack {
    to: f64,
    full: f64,
}

impl Controller {
    /// The reading is at or under the cut's threshold (`calm`: at or under
    /// the raise's; `empty`: nothing read), `load` the output / rate.
    pub(super) fn on_calm(
        &mut self,
        now: Instant,
        calm: bool,
        empty: bool,
        load: f64,
    ) -> (Rate, Reason) {
        let t = self.tuning;
        let rate = self.rate;
        if let (Phase::Dip(d), true) = (&self.phase, calm) {
            if let Some(d) = self.link_found(*d, now, load) {
                return d;
            }
        }
        if !calm || load < t.loaded || self.memory.cut_within(now, t.raise_after_cut) {
            return (rate, Reason::Steady);
        }
        if let Phase::Fade(f) = self.phase {
            self.phase = self.watch_fade(f, now, empty);
        }
        let near = self.near_ceiling(now, empty);
        let step = match self.phase {
            Phase::Dip(d) => self.way_back(d, now, near),
            _ => (if near { t.probe } else { t.raise }, None),
        };
        let new = grow(rate, step).min(self.cfg.max);
        if new > rate {
            return (new, Reason::Load);
        }
        (rate, Reason::Steady)
    }

    /// A download's way back that its output no longer follows: its queue
    /// lies before sluice, and a rate above the link shows as delay only
    /// once the modem's queue has grown. The link is what it let through
    /// since the dip began, probed gently. Not on a `reconfig` window's way
    /// back before any delay: its senders, kept at `min`, take a few round
    /// trips to follow (docs/autorate.md §3, "A download's way back stops
    /// where its output stops").
    fn link_found(&mut self, d: Dip, now: Instant, load: f64) -> Option<(Rate, Reason)> {
        if self.way_out || !d.raised {
            return None;
        }
        let link = self.dip_peak.max(self.cfg.min);
        if load < self.tuning.loaded && link < self.rate && !d.after_reconfig {
            self.phase = Phase::Steady;
            self.memory.ceiling = Some(Sighting::new(now, link));
            return Some((link, Reason::Link));
        }
        None
    }

    /// Near where the link was last found, while that is recent, the raise
    /// is gentle. Once that is old the link may have grown — unless an
    /// upload's reading, though calm, shows a few milliseconds (not
    /// `empty`) while the rate is still about the cut's (within two
    /// [`super::Tuning::probe_zone`]s above it: over a tick, a few frames at a
    /// slow rate jitter by ±15 %): that is the link, met again.
    fn near_ceiling(&self, now: Instant, empty: bool) -> bool {
        let t = self.tuning;
        let stirring = self.way_out && !empty;
        self.memory.ceiling.is_some_and(|c| {
            let band = c.rate.bps_f64() / (t.probe_zone * t.probe_zone);
            self.rate.at_least(t.probe_zone, c.rate)
                && (now.saturating_since(c.at) < t.ceiling_memory
                    || (stirring && self.rate.bps_f64() < band))
        })
    }

    /// The step on a dip's way back, and its cap; where the way back ends,
    /// the dip does, and the link is probed from there.
    fn way_back(&mut self, d: Dip, now: Instant, near: bool) -> (f64, Option<f64>) {
        let t = self.tuning;
        let rate = self.rate;
        // The link a hold or the drain showed (an upload's only: a
        // download's queue drains at its senders' pace, not sluice's
        // output's).
        let measured = self.memory.hold.and_then(|h| h.link);
        let drained = measured.or_else(|| self.memory.drain.and_then(|d| d.link(&t)));
        let full = d.before.bps_f64() * t.probe_zone;
        let back = WayBack {
            to: drained.map_or(full, |l| full.min(l.bps_f64())),
            full,
        };
        if rate.bps_f64() < back.to {
            self.phase = Phase::Dip(Dip { raised: true, ..d });
            return (t.fast, Some(back.to));
        }
        self.memory.ceiling = match measured {
            // Stopped at the link a hold measured: probed there gently.
            Some(l) if l.under(t.probe_zone, d.before) => Some(Sighting::new(now, l)),
            // Stopped where the drain put the link: it may have moved
            // since (a fade that ends), and the ordinary raise goes on.
            _ if back.to < back.full => None,
            // Back where the link was before the dip: probed gently.
            _ => Some(Sighting::new(now, d.before)),
        };
        self.phase = self.dip_ended(d.before, d.since, rate);
        (if near { t.probe } else { t.raise }, None)
    }
}

/// `rate` grown by `step`, capped (a way back's end), rounded up.
fn grow(rate: Rate, (step, cap): (f64, Option<f64>)) -> Rate {
    let mut new = rate.bps_f64() * (1.0 + step);
    if let Some(to) = cap {
        new = new.min(to);
    }
    Rate(new.ceil() as u64)
}
