//! How the queue beyond sluice drained after an upload's cut, and the
//! link's rate a slow drain shows.
//!
//! A queue that sluice's output enters drains at (link − output) / link
//! seconds of delay per second, so a slow drain at a known output gives
//! link = output / (1 − fall). The way back from a dip stops there
//! (docs/autorate.md §3, "The drain says where the link is").

use super::tuning::Tuning;
use sluice_time::{Duration, Instant, Rate};

/// The highest delay read since a cut (when, the delay, the bytes sent so
/// far) and the first tick after it that read the queue gone.
#[derive(Clone, Copy, Debug)]
pub(super) struct Drain {
    pub at: Instant,
    pub delay: Duration,
    pub sent: u64,
    pub empty: Option<(Instant, Duration, u64)>,
}

impl Drain {
    pub fn from(at: Instant, delay: Duration, sent: u64) -> Drain {
        Drain {
            at,
            delay,
            sent,
            empty: None,
        }
    }

    /// The link's rate the drain shows, when it was slow. The reading lags
    /// the queue by the queue's own delay (a sample completes a round trip
    /// through it), so the drain began that much before the cut's reading.
    /// A fast drain (at least half a second per second: the link is at
    /// least twice the output) says only that the link came back; the lag
    /// and the ticks blur its rate, so it gives none.
    pub fn link(&self, t: &Tuning) -> Option<Rate> {
        let (t1, d1, b1) = self.empty?;
        let fell = self.delay - d1;
        let ticks = t1.saturating_since(self.at);
        if ticks < t.slow_drain || fell < t.drain_depth {
            return None;
        }
        let span = ticks + fell;
        let fall = fell.as_nanos() as f64 / span.as_nanos() as f64;
        if fall >= 0.5 {
            return None;
        }
        let out = b1.saturating_sub(self.sent) as f64 * 8e9 / ticks.as_nanos() as f64;
        Some(Rate((out / (1.0 - fall)) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    #[test]
    fn a_slow_drain_gives_the_link_and_a_fast_or_shallow_one_none() {
        let t = Tuning::default();
        // 60 ms read at the cut, 10 ms a second later, 1 Mbit/s sent
        // meanwhile: 50 ms fell over 1.05 s, link = 1 / (1 − 0.0476).
        let mut d = Drain::from(ms(0), Duration::from_millis(60), 0);
        d.empty = Some((ms(1_000), Duration::from_millis(10), 125_000));
        assert_eq!(d.link(&t), Some(Rate(1_050_000)));
        // Over in 400 ms: too fast to tell the lag from the drain.
        d.empty = Some((ms(400), Duration::from_millis(10), 50_000));
        assert_eq!(d.link(&t), None);
        // Only 15 ms fell: a few frames' noise.
        let mut d = Drain::from(ms(0), Duration::from_millis(25), 0);
        d.empty = Some((ms(1_000), Duration::from_millis(10), 125_000));
        assert_eq!(d.link(&t), None);
        // Still draining: nothing yet.
        assert_eq!(
            Drain::from(ms(0), Duration::from_millis(60), 0).link(&t),
            None
        );
    }
}
