//! Each queue's sojourn over the last interval, not since its creation:
//! what `show queues -v` and `sluice top` show as p50 and p99.
//!
//! # Principles
//! - **A difference of two histograms.** The queue keeps one histogram
//!   since its creation (sluice_sched's stats); here a copy of it is kept
//!   as of the start of the current [`SOJOURN_INTERVAL`] and of the one
//!   before. The last interval is the current histogram less the copy of
//!   the previous start: the previous interval and the current one so
//!   far, between one and two intervals of traffic, so a read just after a
//!   boundary is never empty for want of time.
//! - **Exact, without a clock.** The engine calls [`SojournMarks::tick`]
//!   with its `now` before every enqueue and dequeue (its housekeeping): a
//!   histogram changes only on a dequeue, so the copy taken at the first
//!   call after a boundary is the histogram at the boundary. Intervals
//!   with no call had no dequeue: the copy stands for all of them.
//! - **A reload starts again**: the marks belong to a tree, and a new tree
//!   has new counters (a mark that is not an earlier copy is ignored).
//! - Bounded: two histograms (1.8 KB each) per class of the tree, copied
//!   once an interval.

use sluice_sched::{ClassId, Qdisc};
use sluice_time::{Duration, Histogram, Instant};

/// The interval of the last-interval sojourn: pfctl's queue averages and
/// a Prometheus scrape are of this order, and it is the health's minute
/// slot; long enough for a p99 of a few hundred packets at 1 Mbit/s.
pub const SOJOURN_INTERVAL: Duration = Duration::from_secs(10);

/// Copies of a tree's sojourn histograms at interval starts.
#[derive(Clone, Debug, Default)]
pub struct SojournMarks {
    /// The current interval's index (`now / SOJOURN_INTERVAL`), once ticked.
    epoch: Option<u64>,
    /// The next interval's start: the packet path's tick is one compare.
    next: Instant,
    /// Each class's histogram at the start of the previous interval and of
    /// the current one.
    previous: Vec<(ClassId, Histogram)>,
    current: Vec<(ClassId, Histogram)>,
}

fn epoch_of(now: Instant) -> u64 {
    now.0 / SOJOURN_INTERVAL.0
}

fn copies(root: &dyn Qdisc) -> Vec<(ClassId, Histogram)> {
    let mut v = Vec::new();
    root.visit_stats(&mut |id, st| v.push((id, st.sojourn.clone())));
    v
}

fn find(marks: &[(ClassId, Histogram)], id: ClassId) -> Option<&Histogram> {
    marks.iter().find(|(c, _)| *c == id).map(|(_, h)| h)
}

impl SojournMarks {
    /// At `now`, before the tree's next enqueue or dequeue: takes the
    /// copies of a new interval's start.
    #[inline]
    pub fn tick(&mut self, now: Instant, root: &dyn Qdisc) {
        if now < self.next {
            return;
        }
        let e = epoch_of(now);
        self.next = Instant((e + 1).saturating_mul(SOJOURN_INTERVAL.0));
        let now_copies = copies(root);
        // The copy at the previous interval's start: the current one's
        // when that was the interval just before, else (no dequeue since)
        // the histogram as it is.
        self.previous = match self.epoch {
            Some(x) if x + 1 == e => std::mem::take(&mut self.current),
            _ => now_copies.clone(),
        };
        self.current = now_copies;
        self.epoch = Some(e);
    }

    /// Class `id`'s sojourn over the last interval as of `now` (at or after
    /// the last tick), from its histogram since creation `all`.
    pub fn last(&self, id: ClassId, all: &Histogram, now: Instant) -> Histogram {
        let e = epoch_of(now);
        let from = match self.epoch {
            // Before the first interval start: since creation.
            None => None,
            Some(x) if x >= e => find(&self.previous, id),
            Some(x) if x + 1 == e => find(&self.current, id),
            // Two boundaries without a tick: no dequeue since the last.
            Some(_) => Some(all),
        };
        match from {
            Some(h) => all.since(h).unwrap_or_else(|| all.clone()),
            None => all.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sched::fifo::{Fifo, Params};
    use sluice_sched::{Drops, Packet};

    const S: u64 = 1_000_000_000;

    /// A FIFO with one packet of `wait` dequeued at `at`, after the
    /// engine's tick.
    fn forward(q: &mut Fifo, m: &mut SojournMarks, at: Instant, wait: Duration) {
        let mut drops = Drops::new();
        m.tick(at - wait, q);
        q.enqueue(
            Packet::synthetic(1, 100, 1, ClassId::ROOT),
            at - wait,
            &mut drops,
        );
        m.tick(at, q);
        q.dequeue(at, &mut drops).expect("the packet");
    }

    fn fifo() -> Fifo {
        Fifo::new(Params {
            limit_packets: 1000,
            limit_bytes: None,
        })
    }

    fn last(q: &Fifo, m: &SojournMarks, at: Instant) -> Histogram {
        let all = q.stats().sojourn;
        m.last(ClassId::ROOT, &all, at)
    }

    #[test]
    fn the_last_interval_forgets_older_waits() {
        let (mut q, mut m) = (fifo(), SojournMarks::default());
        // 0..10 s: long waits; 10..20 s: short ones; 20..30 s: none.
        for k in 0..9 {
            forward(
                &mut q,
                &mut m,
                Instant((k + 1) * S),
                Duration::from_millis(200),
            );
        }
        for k in 0..9 {
            forward(
                &mut q,
                &mut m,
                Instant((11 + k) * S),
                Duration::from_millis(2),
            );
        }
        // At 15 s: both intervals (10 to 20 s of traffic).
        let h = last(&q, &m, Instant(15 * S));
        assert_eq!(h.count(), 18);
        // At 25 s: only the 10..20 s waits; the 200 ms are gone.
        let h = last(&q, &m, Instant(25 * S));
        assert_eq!(h.count(), 9);
        assert!(
            h.quantile(0.99).unwrap() <= Duration::from_millis(3),
            "{h:?}"
        );
        // Since creation, the p99 is still the 200 ms of the first interval.
        assert!(q.stats().sojourn.quantile(0.99).unwrap() >= Duration::from_millis(200));
        // At 35 s nothing was forwarded for over an interval: no quantile.
        let h = last(&q, &m, Instant(35 * S));
        assert_eq!((h.count(), h.quantile(0.99)), (0, None));
    }

    /// Ticked at 25 s after a quiet 10..20 s: the copy at 25 s stands
    /// for 20 s, and for 10 s too (nothing was dequeued since).
    #[test]
    fn quiet_intervals_need_no_tick() {
        let (mut q, mut m) = (fifo(), SojournMarks::default());
        forward(&mut q, &mut m, Instant(5 * S), Duration::from_millis(50));
        m.tick(Instant(25 * S), &q);
        assert_eq!(last(&q, &m, Instant(25 * S)).count(), 0);
        forward(&mut q, &mut m, Instant(26 * S), Duration::from_millis(1));
        assert_eq!(last(&q, &m, Instant(26 * S)).count(), 1);
        assert_eq!(last(&q, &m, Instant(31 * S)).count(), 1);
        // Untouched, the first interval shows everything since creation.
        let fresh = SojournMarks::default();
        assert_eq!(last(&q, &fresh, Instant(31 * S)).count(), 2);
    }
}
