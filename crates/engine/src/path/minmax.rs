//! Windowed extremes of a measurement, as Linux's `lib/win_minmax.c`
//! (Kathleen Nichols' algorithm, used by BBR for its min RTT and max
//! bandwidth) keeps them: the least value over a sliding window in O(1)
//! time and fixed space.
//!
//! # Principles
//!
//! - **Two halves, not a list.** The window is kept as the minima of its
//!   current half and the half before; the value read covers the last
//!   `window / 2` to `window`. A sample older than that is forgotten
//!   whole, never averaged in.
//! - **Time is an argument.** Each sample carries its `now`; nothing here
//!   reads a clock.

use sluice_time::{Duration, Instant};

/// The least value of a sliding window, kept as the minima of its two
/// halves: covers the last `window / 2` to `window`.
#[derive(Clone, Copy, Debug)]
pub struct WindowMin {
    cur: Duration,
    cur_start: Instant,
    prev: Option<Duration>,
    last: Instant,
}

impl WindowMin {
    pub fn new(v: Duration, now: Instant) -> Self {
        WindowMin {
            cur: v,
            cur_start: now,
            prev: None,
            last: now,
        }
    }

    pub fn add(&mut self, v: Duration, now: Instant, window: Duration) {
        let half = Duration(window.0 / 2);
        let age = now.saturating_since(self.cur_start);
        if age >= half {
            // The half that ends now becomes the previous one, unless it
            // ended so long ago that it is out of the window altogether.
            self.prev = (age < window).then_some(self.cur);
            self.cur = v;
            self.cur_start = now;
        } else {
            self.cur = self.cur.min(v);
        }
        self.last = now;
    }

    /// When the last value was added.
    pub fn last(&self) -> Instant {
        self.last
    }

    pub fn get(&self) -> Duration {
        self.prev.map_or(self.cur, |p| p.min(self.cur))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::test_time::{at, ms};

    #[test]
    fn the_least_value_is_kept_for_half_to_a_whole_window() {
        let w = ms(100);
        let mut m = WindowMin::new(ms(5), at(0));
        m.add(ms(9), at(10), w);
        assert_eq!(m.get(), ms(5));
        // A new half begins at 50 ms: the 5 is the previous half's.
        m.add(ms(8), at(50), w);
        assert_eq!(m.get(), ms(5));
        // At 100 ms the half with the 5 ends: only 8 and later remain.
        m.add(ms(12), at(100), w);
        assert_eq!(m.get(), ms(8));
        assert_eq!(m.last(), at(100));
    }

    #[test]
    fn a_gap_longer_than_the_window_forgets_everything_before_it() {
        let w = ms(100);
        let mut m = WindowMin::new(ms(1), at(0));
        m.add(ms(30), at(250), w);
        assert_eq!(m.get(), ms(30));
    }
}
