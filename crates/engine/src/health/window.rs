//! Latency over the last minute, hour and day: rings of fixed-size
//! histograms, one per slot of time.
//!
//! # Principles
//! - Bounded memory: a window is `n` log-bucket histograms
//!   ([`sluice_time::Histogram`], within 12.5 % of any quantile) of one
//!   slot each; recording is O(1) and allocates nothing. A slot is reused
//!   once its time has left the window (its epoch says whose it is).
//! - A window read at `now` merges the slots of the last `n` slot times,
//!   the current one included: it spans between `n - 1` and `n` slots.

use sluice_time::{Duration, Histogram, Instant};

/// One quantity's histograms over a sliding window of `slots` × `slot`.
#[derive(Clone, Debug)]
pub struct Window {
    slot: Duration,
    /// Each slot's epoch (`now / slot`) and what was recorded in it.
    slots: Vec<(Option<u64>, Histogram)>,
}

impl Window {
    /// A window of `n` slots of `slot` (both at least 1).
    pub fn new(slot: Duration, n: usize) -> Window {
        Window {
            slot: Duration(slot.0.max(1)),
            slots: (0..n.max(1)).map(|_| (None, Histogram::new())).collect(),
        }
    }

    /// The last minute, in 10 s slots.
    pub fn minute() -> Window {
        Window::new(Duration::from_secs(10), 6)
    }

    fn epoch(&self, now: Instant) -> u64 {
        now.0 / self.slot.0
    }

    /// Records `d`, seen at `now`.
    pub fn record(&mut self, now: Instant, d: Duration) {
        let e = self.epoch(now);
        let n = self.slots.len() as u64;
        let (epoch, h) = &mut self.slots[(e % n) as usize];
        if *epoch != Some(e) {
            h.clear();
            *epoch = Some(e);
        }
        h.record(d);
    }

    /// What the window holds at `now`: the slots of the last `n` epochs.
    pub fn read(&self, now: Instant) -> Histogram {
        let e = self.epoch(now);
        let n = self.slots.len() as u64;
        let mut out = Histogram::new();
        for (epoch, h) in &self.slots {
            if epoch.is_some_and(|x| x <= e && x + n > e) {
                out.merge(h);
            }
        }
        out
    }
}

/// The same quantity over the last minute, hour and day.
#[derive(Clone, Debug)]
pub struct Windows {
    minute: Window,
    hour: Window,
    day: Window,
}

impl Default for Windows {
    /// A minute of 10 s slots, an hour of 5 min, a day of hours: 42
    /// histograms of 1.8 KB.
    fn default() -> Windows {
        Windows {
            minute: Window::minute(),
            hour: Window::new(Duration::from_secs(300), 12),
            day: Window::new(Duration::from_secs(3600), 24),
        }
    }
}

/// A quantity's p50 and p99 over one window, and its samples (one per
/// loaded control tick).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    pub mean: Option<Duration>,
    pub samples: u64,
}

impl Latency {
    pub fn of(h: &Histogram) -> Latency {
        let n = h.count();
        Latency {
            p50: h.quantile(0.5),
            p99: h.quantile(0.99),
            mean: (n > 0).then(|| Duration(h.sum().0 / n)),
            samples: n,
        }
    }
}

/// [`Latency`] over the last minute, hour and day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByWindow {
    pub minute: Latency,
    pub hour: Latency,
    pub day: Latency,
}

impl Windows {
    pub fn record(&mut self, now: Instant, d: Duration) {
        self.minute.record(now, d);
        self.hour.record(now, d);
        self.day.record(now, d);
    }

    pub fn read(&self, now: Instant) -> ByWindow {
        ByWindow {
            minute: Latency::of(&self.minute.read(now)),
            hour: Latency::of(&self.hour.read(now)),
            day: Latency::of(&self.day.read(now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn at(s: u64) -> Instant {
        Instant(s * S)
    }

    #[test]
    fn a_window_forgets_what_left_it() {
        let mut w = Window::new(Duration::from_secs(10), 6);
        w.record(at(5), Duration::from_millis(100));
        w.record(at(15), Duration::from_millis(1));
        assert_eq!(w.read(at(15)).count(), 2);
        // At 65 s the slot of 0..10 s is out (epochs 1..=6 are in).
        assert_eq!(w.read(at(65)).count(), 1);
        assert_eq!(w.read(at(75)).count(), 0);
        // A slot reused for a later epoch starts empty: the 100 ms of
        // epoch 0 is gone, the 1 ms of epoch 1 is still in.
        w.record(at(65), Duration::from_millis(2));
        assert_eq!(w.read(at(65)).count(), 2);
        assert_eq!(w.read(at(65)).max(), Duration::from_millis(2));
    }

    #[test]
    fn the_windows_keep_their_own_spans() {
        let mut w = Windows::default();
        for s in 0..120 {
            w.record(at(s), Duration::from_millis(if s < 60 { 100 } else { 1 }));
        }
        let r = w.read(at(119));
        // The minute sees only the last 60 s (its six slots: 60..120).
        assert_eq!(r.minute.samples, 60);
        assert!(r.minute.p99.unwrap() <= Duration::from_millis(2));
        assert_eq!(r.hour.samples, 120);
        assert_eq!(r.day.samples, 120);
        // Half at 100 ms, half at 1 ms: the p99 is the high half's.
        let p99 = r.hour.p99.unwrap();
        assert!(p99 >= Duration::from_millis(90) && p99 <= Duration::from_millis(100));
        assert!(r.hour.p50.unwrap() <= Duration::from_millis(2));
        assert_eq!(w.read(at(3600 + 300 + 119)).hour.samples, 0);
        assert_eq!(w.read(at(3600 + 119)).day.samples, 120);
    }

    #[test]
    fn quantiles_are_within_a_bucket() {
        let mut w = Windows::default();
        for ms in 1..=100 {
            w.record(at(1), Duration::from_millis(ms));
        }
        let m = w.read(at(1)).minute;
        let p50 = m.p50.unwrap().as_millis_f64();
        let p99 = m.p99.unwrap().as_millis_f64();
        assert!((50.0..=50.0 * 1.125).contains(&p50), "{p50}");
        assert!((99.0..=100.0).contains(&p99), "{p99}");
        assert_eq!(m.mean, Some(Duration::from_micros(50_500)));
        assert_eq!(Windows::default().read(at(1)).minute, Latency::default());
    }
}
