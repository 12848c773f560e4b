//! The queue before sluice on a flow's way in, from its sender's TCP
//! timestamps: the one-way delay variation of its data (issue #14, the
//! `host_fair` download; used by [`crate::tcpctl`]'s pacer).
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
//! - **Only a clock known to tick in milliseconds.** Linux, the BSDs and
//!   macOS stamp in ms, but RFC 7323 allows 1 ms to 1 s (and Linux can
//!   stamp µs per route). A clock of another rate would read as a queue
//!   growing or shrinking forever, so a flow's reading is used only after
//!   its TSval advanced at 0.8–1.25× real time over its first
//!   [`VERIFY_AFTER`]; a flow failing that check is never used. Over the
//!   base window a clock's drift (tens of ppm) is well under a millisecond.
//! - **Fresh or nothing.** A flow with no segment in [`FRESH`] has no
//!   reading: an old value says nothing about the queue now.

use crate::delay_signal::WindowMin;
use sluice_time::{Duration, Instant};

/// The window whose least value is a flow's base.
pub const BASE_WINDOW: Duration = Duration::from_secs(30);
/// The window whose least value is what stands now.
pub const RECENT_WINDOW: Duration = Duration::from_millis(100);
/// How long a flow's TSval is watched before its clock is trusted.
pub const VERIFY_AFTER: Duration = Duration::from_secs(2);
/// A reading older than this is none.
pub const FRESH: Duration = Duration::from_secs(1);
/// Added to every value so the first sample's neighbours (up to this much
/// less delayed) stay positive.
const BIAS: Duration = Duration::from_secs(1000);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clock {
    Unverified,
    Millis,
    Other,
}

/// What a flow's first stamped segment started.
#[derive(Clone, Copy, Debug)]
struct Track {
    /// Arrival time and TSval of the first stamped segment.
    t0: Instant,
    ts0: u32,
    base: WindowMin,
    recent: WindowMin,
    /// The latest segment's value.
    latest: Duration,
}

/// One flow's one-way delay tracker.
#[derive(Clone, Copy, Debug)]
pub struct Owd {
    clock: Clock,
    track: Option<Track>,
}

impl Default for Owd {
    fn default() -> Self {
        Owd {
            clock: Clock::Unverified,
            track: None,
        }
    }
}

impl Owd {
    /// A data segment stamped `tsval` arrived at `now`.
    pub fn on_data(&mut self, now: Instant, tsval: u32) {
        if self.clock == Clock::Other {
            return;
        }
        let Some(t) = &mut self.track else {
            let v = WindowMin::new(BIAS, now);
            self.track = Some(Track {
                t0: now,
                ts0: tsval,
                base: v,
                recent: v,
                latest: BIAS,
            });
            return;
        };
        let real = now.saturating_since(t.t0).0 as i128;
        // Signed: a segment sent before the first one's (reordered, or a
        // retransmission) is behind it.
        let ticks_ms = i128::from(tsval.wrapping_sub(t.ts0) as i32);
        if self.clock == Clock::Unverified && real >= VERIFY_AFTER.0 as i128 {
            let ratio = ticks_ms as f64 * 1e6 / real as f64;
            self.clock = if (0.8..=1.25).contains(&ratio) {
                Clock::Millis
            } else {
                Clock::Other
            };
        }
        let v = BIAS.0 as i128 + real - ticks_ms * 1_000_000;
        let v = Duration(v.clamp(0, u64::MAX as i128) as u64);
        t.base.add(v, now, BASE_WINDOW);
        t.recent.add(v, now, RECENT_WINDOW);
        t.latest = v;
    }

    /// When the flow was last heard from.
    pub fn last(&self) -> Option<Instant> {
        self.track.map(|t| t.recent.last())
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
        let t = self.track.filter(|_| self.clock == Clock::Millis)?;
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
