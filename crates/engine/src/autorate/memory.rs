//! What the controller has learnt of the link, whatever the phase: the
//! last cut, where the link was last found, the link a download's output
//! showed, how the queue drained after a cut, and the latest hold. A
//! scheduled drop (`reconfig`) forgets all of it: it is about another link.

use super::drain::Drain;
use super::hold::Hold;
use super::tuning::Tuning;
use sluice_time::{Duration, Instant, Rate};

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Memory {
    pub last_cut: Option<Cut>,
    /// The rate at which delay last appeared (a cut, or the end of a way
    /// back from a dip), and since when it stands for the link.
    pub ceiling: Option<Sighting>,
    /// The output at the last cut made while the link kept the output
    /// below the rate (a download's): the link's rate then.
    pub link_seen: Option<Sighting>,
    /// How the queue drained after the last cut (an upload's).
    pub drain: Option<Drain>,
    /// The latest hold (an upload's cut) and the link it measured.
    pub hold: Option<Hold>,
    /// The link a hold has just measured, for this tick's decision.
    pub measured: Option<Rate>,
}

/// A cut: when, the delay it was made on, the rate it was made from and
/// the rate it set.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cut {
    pub at: Instant,
    pub delay: Duration,
    pub from: Rate,
    pub to: Rate,
}

/// A rate the link was seen at, and when.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sighting {
    pub at: Instant,
    pub rate: Rate,
}

impl Sighting {
    pub fn new(at: Instant, rate: Rate) -> Sighting {
        Sighting { at, rate }
    }
}

impl Memory {
    /// The drain after a cut runs from the highest delay read after it to
    /// the first reading that is `calm` or [`Tuning::drain_over`] of it
    /// (what is left may be a standing few milliseconds, or noise).
    pub fn track_drain(
        &mut self,
        now: Instant,
        delay: Duration,
        sent: u64,
        calm: bool,
        t: &Tuning,
    ) {
        let Some(d) = self.drain.as_mut().filter(|d| d.empty.is_none()) else {
            return;
        };
        if calm || t.drain_over.at_most(delay, d.delay) {
            d.empty = Some((now, delay, sent));
        } else if delay > d.delay {
            *d = Drain::from(now, delay, sent);
        }
    }

    /// Whether a cut is made within `span` of `now`.
    pub fn cut_within(&self, now: Instant, span: Duration) -> bool {
        self.last_cut
            .is_some_and(|c| now.saturating_since(c.at) < span)
    }
}
