//! A fixed-size log-linear histogram of durations for sojourn percentiles.
//! Recording is O(1) with no allocation, so it can sit on the packet path.
//! Buckets: 8 linear sub-buckets per power of two of microseconds, so any
//! reported percentile is within 12.5 % of the true value.

use crate::Duration;

const SUB: usize = 8;
const OCTAVES: usize = 28; // 2^28 us ~ 268 s: anything longer lands in the last bucket
const BUCKETS: usize = SUB * OCTAVES;

/// Sojourn-time histogram with microsecond resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max_ns: u64,
    sum_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn bucket_of(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // >= 3
    let shift = octave - 3;
    let sub = ((us >> shift) as usize) & (SUB - 1);
    let idx = (octave - 2) * SUB + sub;
    idx.min(BUCKETS - 1)
}

/// Upper edge (exclusive) of a bucket in microseconds.
fn bucket_upper_us(idx: usize) -> u64 {
    if idx < SUB {
        return idx as u64 + 1;
    }
    let octave = idx / SUB + 2;
    let sub = (idx % SUB) as u64;
    let shift = octave - 3;
    ((SUB as u64 + sub) + 1) << shift
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max_ns: 0,
            sum_ns: 0,
        }
    }

    /// On every dequeue of every queue: `#[inline]` so the call (a
    /// cross-crate one, never inlined otherwise without LTO) folds into the
    /// caller's stats update.
    #[inline]
    pub fn record(&mut self, d: Duration) {
        let us = d.0 / 1_000;
        self.counts[bucket_of(us)] += 1;
        self.total += 1;
        self.max_ns = self.max_ns.max(d.0);
        self.sum_ns = self.sum_ns.saturating_add(d.0);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> Duration {
        Duration(self.max_ns)
    }

    /// The sum of every value recorded (saturating).
    pub fn sum(&self) -> Duration {
        Duration(self.sum_ns)
    }

    /// Values known to be at most `bound`: the buckets that end at or
    /// below it (a bucket straddling `bound` is left out, so the count errs
    /// low by at most that bucket: within 12.5 % of `bound`). Cumulative in
    /// `bound`, as a Prometheus histogram's `le` buckets must be.
    pub fn count_at_most(&self, bound: Duration) -> u64 {
        let limit = (bound.0 / 1_000).saturating_add(1);
        self.counts
            .iter()
            .enumerate()
            .take_while(|&(i, _)| bucket_upper_us(i) <= limit)
            .map(|(_, c)| c)
            .sum()
    }

    /// The `q`-quantile (0.0..=1.0), reported as the upper edge of its bucket,
    /// capped by the largest value seen. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let ns = bucket_upper_us(i).saturating_mul(1_000);
                return Some(Duration(ns.min(self.max_ns)));
            }
        }
        Some(Duration(self.max_ns))
    }

    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
        self.max_ns = 0;
        self.sum_ns = 0;
    }

    /// What was recorded after `earlier`, a copy of this histogram taken
    /// before: the bucket-wise difference. `None` when `earlier` is not
    /// one (a bucket holds more there: the counts were restarted). Its max
    /// is not known, only bounded: the upper edge of its highest bucket.
    pub fn since(&self, earlier: &Histogram) -> Option<Histogram> {
        let mut out = Histogram::new();
        for (i, (a, b)) in self.counts.iter().zip(earlier.counts.iter()).enumerate() {
            out.counts[i] = a.checked_sub(*b)?;
        }
        out.total = self.total.checked_sub(earlier.total)?;
        out.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        if let Some(top) = out.counts.iter().rposition(|&c| c > 0) {
            let edge = bucket_upper_us(top).saturating_mul(1_000);
            out.max_ns = edge.min(self.max_ns);
        }
        Some(out)
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn count_at_most_is_cumulative_and_never_over() {
        let mut h = Histogram::new();
        for ms in [1u64, 2, 5, 10, 20, 50, 100, 100, 200] {
            h.record(Duration::from_millis(ms));
        }
        assert_eq!(h.sum(), Duration::from_millis(488));
        let les = [0u64, 1, 2, 5, 10, 25, 50, 100, 250, 1000];
        let counts: Vec<u64> = les
            .iter()
            .map(|&ms| h.count_at_most(Duration::from_millis(ms)))
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        for (&ms, &c) in les.iter().zip(&counts) {
            let truth = [1u64, 2, 5, 10, 20, 50, 100, 100, 200]
                .iter()
                .filter(|&&v| v <= ms)
                .count() as u64;
            assert!(c <= truth, "le {ms} ms: {c} > {truth}");
            // Off by at most the values within 12.5 % below the bound.
            let near = [1u64, 2, 5, 10, 20, 50, 100, 100, 200]
                .iter()
                .filter(|&&v| v <= ms && v * 8 > ms * 7)
                .count() as u64;
            assert!(c + near >= truth, "le {ms} ms: {c} + {near} < {truth}");
        }
        assert_eq!(h.count_at_most(Duration::from_secs(1)), 9);
    }

    /// The difference of two copies holds only what came between them:
    /// its quantiles are the later values', not the whole history's.
    #[test]
    fn since_an_earlier_copy_is_what_came_after() {
        let mut h = Histogram::new();
        for _ in 0..1000 {
            h.record(Duration::from_millis(100));
        }
        let mark = h.clone();
        for ms in 1..=10 {
            h.record(Duration::from_millis(ms));
        }
        let d = h.since(&mark).expect("a later copy");
        assert_eq!(d.count(), 10);
        assert_eq!(d.sum(), Duration::from_millis(55));
        let p99 = d.quantile(0.99).unwrap().as_millis_f64();
        assert!((10.0..=10.0 * 1.125).contains(&p99), "p99 {p99}");
        let p50 = d.quantile(0.5).unwrap().as_millis_f64();
        assert!((5.0..=5.0 * 1.125).contains(&p50), "p50 {p50}");
        // The whole history's p50 is the 100 ms of before.
        assert_eq!(h.quantile(0.5), Some(Duration::from_millis(100)));
        assert_eq!(h.since(&h).map(|e| e.quantile(0.5)), Some(None));
        // Counts restarted (a new queue): not a difference.
        assert_eq!(Histogram::new().since(&mark), None);
    }

    #[test]
    fn empty_has_no_quantile() {
        assert_eq!(Histogram::new().quantile(0.5), None);
    }

    #[test]
    fn percentiles_of_uniform_ms() {
        let mut h = Histogram::new();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let p50 = h.quantile(0.5).unwrap().as_millis_f64();
        let p99 = h.quantile(0.99).unwrap().as_millis_f64();
        assert!((50.0..=50.0 * 1.125).contains(&p50), "p50 {p50}");
        assert!((99.0..=100.0).contains(&p99), "p99 {p99}");
        assert_eq!(h.max(), Duration::from_millis(100));
    }

    proptest! {
        #[test]
        fn bucket_bounds_hold(us in 0u64..(1u64 << 27)) {
            let b = bucket_of(us);
            prop_assert!(us < bucket_upper_us(b));
            prop_assert!(bucket_upper_us(b) as f64 <= (us as f64 + 1.0) * 1.125 + 1.0);
        }
    }
}
