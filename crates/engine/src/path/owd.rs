//! The queue before sluice on a flow's way in, from its sender's TCP
//! timestamps: the one-way delay variation of its data (issue #14, the
//! `host_fair` download; used by [`crate::tcpctl`]'s pacer and by
//! [`crate::delay_signal`]'s way in).
//!
//! # Principles
//!
//! - **One direction.** A sender stamps each segment with its clock
//!   (TSval, RFC 7323 §3); arrival time minus TSval is the one-way delay
//!   from the sender to sluice plus an unknown offset (Linux draws one per
//!   connection). The offset is constant, so the *variation* is queueing
//!   on the way in: for a download, the modem's FIFO before sluice. The
//!   round trip ([`crate::delay_signal`]) mixes in the other direction —
//!   on a slow uplink the ACKs' wait behind the upload frame the modem is
//!   sending — which no pace of the download's ACKs can drain.
//! - **Base and standing part.** The flow's least value over
//!   [`BASE_WINDOW`] is its path without a queue; its least value over the
//!   last [`RECENT_WINDOW`] (as CoDel judges a queue by its least sojourn,
//!   RFC 8289 §3) is what stands now. Their difference is the standing
//!   queue before sluice, in the sender's clock's 1 ms steps. Both are
//!   two-half window minima, O(1) per segment, fixed size per flow.
//! - **Stamps read against the previous one, not the first.** Each TSval
//!   counts from the one before it (modulo 2^32, RFC 7323 §5.2's
//!   comparison), and the ticks add up in 64 bits: a connection of 24.8
//!   days or more never wraps into a queue of 49.7 days.
//! - **The clock is the sender's word, checked all the time.** RFC 7323
//!   allows 1 ms to 1 s a tick (Linux, the BSDs and macOS stamp in ms,
//!   Linux can stamp µs per route), and a sender may lie: a clock that
//!   stops reads as a queue growing at one second a second, one that runs
//!   fast hides the queue its segments met. So the highest TSval seen so
//!   far must advance, against arrival time, at
//!   - [`SHORT_RATE`] (¼ to 4×) over every span of 0.5–1 s: a TCP sender
//!     sends no faster than twice its delivery in slow start, so an
//!     honest clock advances at least half as fast as its segments
//!     arrive; a stopped one fails within 0.75 s;
//!   - [`LONG_RATE`] (0.5 to 1.1×) over every span of 4–8 s (from
//!     [`VERIFY_AFTER`], over the flow's first seconds): at 1 kHz the
//!     tick is 0.03 % of 4 s, a clock's drift tens of ppm, so what
//!     remains is the queue's own change: a queue that grows by half the
//!     span or drains by a tenth of it. A clock 1.2× fast fails (a queue
//!     ramping under it would have to drain 0.4 s in 4 s to pass), and so
//!     does a jump of the stamps by a tenth of the span.
//!
//!   A flow failing either has no reading until its clock has passed
//!   every check for [`VERIFY_AFTER`] again, and the failing segments'
//!   values are left out of its windows. Its base is kept: an honest flow
//!   that failed while a queue grew fast reads that queue over the path
//!   it had, not over the queue as a new base. What the
//!   check cannot tell from a queue (a sender adding delay at less than
//!   half a second per second, or a queue it hides by up to a tenth of the
//!   time) is the voting's to bound ([`crate::votes`]): one sender is one
//!   voter however many flows it opens.
//! - **Fresh or nothing.** A flow with no segment in [`FRESH`] has no
//!   reading: an old value says nothing about the queue now.

use super::minmax::WindowMin;
use sluice_time::{Duration, Instant};

/// The window whose least value is a flow's base.
pub const BASE_WINDOW: Duration = Duration::from_secs(30);
/// The window whose least value is what stands now.
pub const RECENT_WINDOW: Duration = Duration::from_millis(100);
/// How long a flow's TSval is watched (again, after a failed check)
/// before its clock is trusted.
pub const VERIFY_AFTER: Duration = Duration::from_secs(2);
/// A reading older than this is none.
pub const FRESH: Duration = Duration::from_secs(1);
/// The short check's spans are this to twice this long.
const SHORT_SPAN: Duration = Duration::from_millis(500);
/// The long check's spans are this to twice this long.
const LONG_SPAN: Duration = Duration::from_secs(4);
/// Ticks per ms of arrival time a clock must keep over a short span: a
/// stopped clock (and one jumping by seconds) fails.
pub const SHORT_RATE: (f64, f64) = (0.25, 4.0);
/// The same over a long span: the tolerance left by a real queue's
/// change, tighter on the side that hides a queue (a drain of a tenth of
/// the span) than on the side that shows one (a growth of half of it).
pub const LONG_RATE: (f64, f64) = (0.5, 1.1);
/// Added to every value so the first sample's neighbours (up to this much
/// less delayed) stay positive.
const BIAS: Duration = Duration::from_secs(1000);

/// Where the clock stood at an arrival: the reference of a rate check.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Instant,
    ticks: i64,
}

/// A rate check over spans of `span` to `2 × span`: the mark it measures
/// from, and the one that takes over once a span has passed.
#[derive(Clone, Copy, Debug)]
struct Check {
    prev: Option<Mark>,
    cur: Mark,
}

impl Check {
    fn new(m: Mark) -> Check {
        Check { prev: None, cur: m }
    }

    /// Whether the clock at `m` advanced within `rate` over the span from
    /// the reference mark, if that span is `min` or longer (a failure
    /// means the flow starts afresh); then moves the marks on.
    fn pass(&mut self, m: Mark, span: Duration, min: Duration, rate: (f64, f64)) -> bool {
        let from = self.prev.unwrap_or(self.cur);
        let real = m.at.saturating_since(from.at);
        let ok = real < min || {
            let r = (m.ticks - from.ticks) as f64 * 1e6 / real.0 as f64;
            (rate.0..=rate.1).contains(&r)
        };
        if m.at.saturating_since(self.cur.at) >= span {
            self.prev = Some(self.cur);
            self.cur = m;
        }
        ok
    }
}

/// What a flow's stamped segments make of it.
#[derive(Clone, Copy, Debug)]
struct Track {
    /// Arrival of the first segment; its stamp counts 0 ticks.
    t0: Instant,
    /// The latest arrival, passing the checks or not.
    heard: Instant,
    /// Read from then on, if every segment until then passes the checks
    /// (each failure moves it [`VERIFY_AFTER`] past itself).
    trusted_from: Instant,
    /// The latest segment's TSval and its ticks since the first.
    ts: u32,
    ticks: i64,
    /// The most ticks any segment carried: what the rate checks read
    /// (a reordered segment or a retransmission stamped earlier is no
    /// evidence against the clock).
    high: i64,
    short: Check,
    long: Check,
    base: WindowMin,
    recent: WindowMin,
    /// The latest segment's value.
    latest: Duration,
}

impl Track {
    fn new(now: Instant, tsval: u32) -> Track {
        let v = WindowMin::new(BIAS, now);
        let m = Mark { at: now, ticks: 0 };
        Track {
            t0: now,
            heard: now,
            trusted_from: now + VERIFY_AFTER,
            ts: tsval,
            ticks: 0,
            high: 0,
            short: Check::new(m),
            long: Check::new(m),
            base: v,
            recent: v,
            latest: BIAS,
        }
    }

    /// Counts a segment in; `false` if its clock failed a check.
    fn add(&mut self, now: Instant, tsval: u32) -> bool {
        // Signed: a segment sent before the previous one's (reordered, or
        // a retransmission) is behind it.
        self.ticks += i64::from(tsval.wrapping_sub(self.ts) as i32);
        self.ts = tsval;
        self.heard = now;
        self.high = self.high.max(self.ticks);
        let m = Mark {
            at: now,
            ticks: self.high,
        };
        let short = self.short.pass(m, SHORT_SPAN, SHORT_SPAN, SHORT_RATE);
        let long = self.long.pass(m, LONG_SPAN, VERIFY_AFTER, LONG_RATE);
        if !(short && long) {
            self.trusted_from = now + VERIFY_AFTER;
            return false;
        }
        let real = i128::from(now.saturating_since(self.t0).0);
        let v = i128::from(BIAS.0) + real - i128::from(self.ticks) * 1_000_000;
        let v = Duration(v.clamp(0, i128::from(u64::MAX)) as u64);
        self.base.add(v, now, BASE_WINDOW);
        self.recent.add(v, now, RECENT_WINDOW);
        self.latest = v;
        true
    }
}

/// One flow's one-way delay tracker.
#[derive(Clone, Copy, Debug, Default)]
pub struct Owd {
    track: Option<Track>,
    /// Segments whose clock failed a check.
    pub failed: u32,
}

impl Owd {
    /// A data segment stamped `tsval` arrived at `now`.
    pub fn on_data(&mut self, now: Instant, tsval: u32) {
        let Some(t) = &mut self.track else {
            self.track = Some(Track::new(now, tsval));
            return;
        };
        if !t.add(now, tsval) {
            self.failed = self.failed.saturating_add(1);
        }
    }

    /// When the flow was last heard from.
    pub fn last(&self) -> Option<Instant> {
        self.track.map(|t| t.heard)
    }

    /// Whether its clock kept its rate over [`VERIFY_AFTER`] since it
    /// was first seen or last failed a check (fresh or not).
    pub fn verified(&self) -> bool {
        self.track
            .is_some_and(|t| t.recent.last() >= t.trusted_from)
    }

    /// The queue the latest segment met on its way in (not the least of a
    /// window: what that one segment waited), under the same conditions
    /// as [`Owd::standing`].
    pub fn latest(&self, now: Instant) -> Option<Duration> {
        let t = self.trusted(now)?;
        Some(t.latest - t.base.get())
    }

    /// The track, if the flow's clock is known to tick in ms and it was
    /// heard from lately.
    fn trusted(&self, now: Instant) -> Option<Track> {
        let t = self.track.filter(|_| self.verified())?;
        (now.saturating_since(t.recent.last()) <= FRESH).then_some(t)
    }

    /// The queue standing before sluice on this flow's way in, if the
    /// flow's clock is known to tick in ms and it was heard from lately.
    pub fn standing(&self, now: Instant) -> Option<Duration> {
        let t = self.trusted(now)?;
        Some(t.recent.get() - t.base.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Instant {
        Instant(5_000 * MS + ms * MS)
    }

    /// Segments every 10 ms for `secs`, sent at `t` by a clock of `hz`
    /// ticks per second with offset `off`, each delayed by `delay(t)` ms.
    fn feed(o: &mut Owd, from_ms: u64, to_ms: u64, hz: f64, off: u32, delay: impl Fn(u64) -> u64) {
        for t in (from_ms..to_ms).step_by(10) {
            let ts = off.wrapping_add((t as f64 * hz / 1000.0) as u32);
            o.on_data(at(t + delay(t)), ts);
        }
    }

    #[test]
    fn a_millisecond_clock_reads_the_standing_queue() {
        let mut o = Owd::default();
        // 3 s without a queue, then one that stands at 20–25 ms.
        feed(&mut o, 0, 3_000, 1000.0, 0xffff_f000, |_| 10);
        assert_eq!(o.standing(at(3_010)), Some(Duration::ZERO));
        feed(&mut o, 3_000, 4_000, 1000.0, 0xffff_f000, |t| 30 + (t % 5));
        let s = o.standing(at(4_010)).unwrap();
        assert!(
            s >= Duration::from_millis(19) && s <= Duration::from_millis(21),
            "{s:?}"
        );
        // The queue goes: the reading follows within the recent window.
        feed(&mut o, 4_000, 4_300, 1000.0, 0xffff_f000, |_| 10);
        assert_eq!(o.standing(at(4_310)), Some(Duration::ZERO));
    }

    #[test]
    fn bursts_that_come_and_go_do_not_stand() {
        let mut o = Owd::default();
        // Every 50 ms one segment waits 40 ms behind a burst; the others
        // see no queue: the least of each 100 ms is the empty queue.
        feed(&mut o, 0, 5_000, 1000.0, 7, |t| {
            if t % 50 == 0 {
                50
            } else {
                10
            }
        });
        assert_eq!(o.standing(at(5_000)), Some(Duration::ZERO));
    }

    #[test]
    fn a_clock_of_another_rate_is_never_used() {
        for hz in [100.0, 10.0, 1_000_000.0, 4000.0] {
            let mut o = Owd::default();
            feed(&mut o, 0, 5_000, hz, 12345, |_| 10);
            assert_eq!(o.standing(at(5_000)), None, "{hz} Hz");
        }
        // Nor before it was watched long enough.
        let mut o = Owd::default();
        feed(&mut o, 0, 1_500, 1000.0, 0, |_| 10);
        assert_eq!(o.standing(at(1_500)), None);
    }

    #[test]
    fn a_clock_that_stops_loses_its_vote_until_it_ticks_again_for_a_window() {
        let mut o = Owd::default();
        feed(&mut o, 0, 3_000, 1000.0, 0, |_| 10);
        assert_eq!(o.standing(at(3_010)), Some(Duration::ZERO));
        // The stamps stop while data keeps coming: read as it was, a
        // queue growing by a second a second.
        for t in (3_000..4_000).step_by(10) {
            o.on_data(at(t + 10), 3_000);
        }
        assert_eq!(o.standing(at(4_000)), None);
        assert!(o.failed >= 1);
        // Ticking again (the stamps had been held back): no vote before a
        // whole verification, then one, over the base it had.
        feed(&mut o, 4_000, 5_500, 1000.0, 0, |_| 10);
        assert_eq!(o.standing(at(5_500)), None);
        feed(&mut o, 5_500, 7_000, 1000.0, 0, |_| 10);
        assert_eq!(o.standing(at(7_000)), Some(Duration::ZERO));
    }

    #[test]
    fn a_clock_running_fast_over_a_growing_queue_is_caught() {
        // 1.2 ticks a ms, while a real queue grows from 20 to 200 ms over
        // 10 s: the stamps read that queue away (and more). Never read.
        let mut o = Owd::default();
        for t in (0..12_000).step_by(10) {
            let q = 20 + 180 * t.min(10_000) / 10_000;
            o.on_data(at(t + q), (t as f64 * 1.2) as u32);
            assert_eq!(o.standing(at(t + q)), None, "at {t} ms");
        }
        // The same clock at 1.0 reads the queue.
        let mut h = Owd::default();
        for t in (0..12_000).step_by(10) {
            let q = 20 + 180 * t.min(10_000) / 10_000;
            h.on_data(at(t + q), t as u32);
        }
        let s = h.standing(at(12_000)).unwrap();
        assert!(s >= Duration::from_millis(150), "{s:?}");
    }

    #[test]
    fn stamps_that_jump_or_a_clock_beyond_the_tolerance_lose_the_vote() {
        // A jump of a second forward (a queue of a second hidden at once;
        // one of a tenth of the span, 0.4-0.8 s, passes).
        let mut o = Owd::default();
        feed(&mut o, 0, 5_000, 1000.0, 0, |_| 10);
        assert_eq!(o.standing(at(5_000)), Some(Duration::ZERO));
        feed(&mut o, 5_000, 6_000, 1000.0, 1_000, |_| 10);
        assert_eq!(o.standing(at(6_000)), None);
        // Clocks at 0.4 and 1.15 ticks a ms, never read.
        for hz in [400.0, 1150.0] {
            let mut o = Owd::default();
            for t in (0..10_000).step_by(10) {
                o.on_data(at(t + 10), (t as f64 * hz / 1000.0) as u32);
                assert_eq!(o.standing(at(t + 10)), None, "{hz} Hz at {t} ms");
            }
        }
    }

    #[test]
    fn a_connection_of_25_days_does_not_wrap_into_a_queue() {
        // One segment a second past ts0 + 2^31 ticks (24.8 days).
        let mut o = Owd::default();
        let cross = 1u64 << 31;
        for t in (0..cross + 60_000).step_by(1_000) {
            o.on_data(at(t), 0x1234_5678u32.wrapping_add(t as u32));
            if t + 10_000 >= cross {
                let s = o.standing(at(t)).unwrap();
                assert!(s <= Duration::from_millis(1), "{s:?} at {t} ms");
            }
        }
    }

    #[test]
    fn a_silent_flow_has_no_reading_and_a_reordered_segment_no_effect() {
        let mut o = Owd::default();
        feed(&mut o, 0, 3_000, 1000.0, 0, |_| 10);
        assert_eq!(o.standing(at(4_500)), None);
        // A retransmission stamped before the anchor reads as less
        // delayed, never as a queue.
        o.on_data(at(3_000), 0u32.wrapping_sub(5));
        assert_eq!(o.standing(at(3_001)), Some(Duration::ZERO));
    }
}
