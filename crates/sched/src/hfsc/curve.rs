//! Service curves in fixed point, and the runtime curves HFSC keeps per class.
//!
//! # Principles
//! - A two-piece curve is slope `m1` for `d`, then slope `m2` (Stoica et al.,
//!   ToN 2000, §III). Time is nanoseconds, service is bytes, both `u64`.
//! - Slopes are kept as scaled multipliers so the packet path multiplies and
//!   shifts instead of dividing: `sm = bytes/ns << SM_SHIFT` (service from a
//!   time span) and `ism = ns/byte << ISM_SHIFT` (time from a service amount).
//!   With `SM_SHIFT = 48` a 1 kbit/s slope is exact to 3e-8; with
//!   `ISM_SHIFT = 30` a 1 Tbit/s one to 1.2e-7 (and 1 bit/s still fits in
//!   `u64`). Products are taken in `u128`, so nothing overflows before the
//!   final saturation to `u64`. The error is relative to the service since the
//!   anchor, so it stays under a byte per 8 MB served.
//! - Rounding favours the guarantee: service from time rounds down, time from
//!   service rounds up, so a deadline is never earlier than exact arithmetic
//!   would put it by more than 1 ns per call.
//! - A runtime curve is a service curve anchored at `(x, y)` whose first segment
//!   may be shortened (`dx`, `dy`): that is how "the minimum of the old curve
//!   and the new one shifted to (now, served)" stays a two-piece curve (§IV-B).

use sluice_time::{Duration, Rate};

const SM_SHIFT: u32 = 48;
const ISM_SHIFT: u32 = 30;
const NS_PER_SEC_BITS: u128 = 8 * 1_000_000_000;

/// A two-piece service curve: `m1` for `d`, then `m2`. Concave when `m1 > m2`
/// (burst first: lower delay for the first packets), convex when `m1 < m2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceCurve {
    pub m1: Rate,
    pub d: Duration,
    pub m2: Rate,
}

impl ServiceCurve {
    /// A one-piece curve of slope `r` (pf's `realtime 1Mb`).
    pub const fn linear(r: Rate) -> ServiceCurve {
        ServiceCurve {
            m1: r,
            d: Duration::ZERO,
            m2: r,
        }
    }

    /// Bytes the curve guarantees within `t` of the start of a backlog period,
    /// exact (u128), for tests and admission checks.
    pub fn bytes_at(&self, t: Duration) -> u64 {
        if t <= self.d {
            self.m1.bytes_in(t)
        } else {
            self.m1
                .bytes_in(self.d)
                .saturating_add(self.m2.bytes_in(t - self.d))
        }
    }
}

/// A service curve in the scaled form the packet path uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Curve {
    sm1: u64,
    ism1: u64,
    dx: u64,
    dy: u64,
    sm2: u64,
    ism2: u64,
}

fn sat_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn scale_sm(r: Rate) -> u64 {
    // Rounded to nearest, so exact rates (1 Mbit/s = 125 bytes/ms) stay exact.
    sat_u64((((r.as_bps() as u128) << SM_SHIFT) + NS_PER_SEC_BITS / 2) / NS_PER_SEC_BITS)
}

fn scale_ism(r: Rate) -> u64 {
    if r.as_bps() == 0 {
        return u64::MAX;
    }
    sat_u64((NS_PER_SEC_BITS << ISM_SHIFT).div_ceil(r.as_bps() as u128))
}

/// Service in bytes over `dx_ns` at scaled slope `sm`, rounded down.
fn seg_x2y(dx_ns: u64, sm: u64) -> u64 {
    sat_u64((dx_ns as u128 * sm as u128) >> SM_SHIFT)
}

/// Time in ns to serve `dy_bytes` at scaled inverse slope `ism`, rounded up.
/// `u64::MAX` ("never") for a zero slope.
fn seg_y2x(dy_bytes: u64, ism: u64) -> u64 {
    if dy_bytes == 0 {
        return 0;
    }
    if ism == u64::MAX {
        return u64::MAX;
    }
    sat_u64((dy_bytes as u128 * ism as u128).div_ceil(1u128 << ISM_SHIFT))
}

impl Curve {
    pub(crate) fn new(sc: &ServiceCurve) -> Curve {
        // A zero-length first segment is a linear curve whatever m1 says.
        let m1 = if sc.d.as_nanos() == 0 { sc.m2 } else { sc.m1 };
        Curve {
            sm1: scale_sm(m1),
            ism1: scale_ism(m1),
            dx: sc.d.as_nanos(),
            dy: m1.bytes_in(sc.d),
            sm2: scale_sm(sc.m2),
            ism2: scale_ism(sc.m2),
        }
    }

    /// Convex (or linear): the first slope is not above the second.
    pub(crate) fn is_convex(&self) -> bool {
        self.sm1 <= self.sm2
    }
}

/// A service curve anchored at `(x ns, y bytes)` with a first segment of
/// `dx` ns / `dy` bytes at the curve's `m1`, then `m2` for ever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Runtime {
    pub(crate) x: u64,
    pub(crate) y: u64,
    pub(crate) dx: u64,
    pub(crate) dy: u64,
}

impl Runtime {
    pub(crate) fn new(c: &Curve, x: u64, y: u64) -> Runtime {
        Runtime {
            x,
            y,
            dx: c.dx,
            dy: c.dy,
        }
    }

    /// Service the curve reaches at time `x`.
    pub(crate) fn x2y(&self, c: &Curve, x: u64) -> u64 {
        if x <= self.x {
            self.y
        } else if x < self.x.saturating_add(self.dx) {
            self.y.saturating_add(seg_x2y(x - self.x, c.sm1))
        } else {
            let past = x - self.x.saturating_add(self.dx);
            self.y
                .saturating_add(self.dy)
                .saturating_add(seg_x2y(past, c.sm2))
        }
    }

    /// Earliest time the curve reaches service `y`.
    pub(crate) fn y2x(&self, c: &Curve, y: u64) -> u64 {
        if y < self.y {
            self.x
        } else if y <= self.y.saturating_add(self.dy) {
            if self.dy == 0 {
                self.x.saturating_add(self.dx)
            } else {
                self.x.saturating_add(seg_y2x(y - self.y, c.ism1))
            }
        } else {
            let rest = y - self.y.saturating_add(self.dy);
            self.x
                .saturating_add(self.dx)
                .saturating_add(seg_y2x(rest, c.ism2))
        }
    }

    /// Replaces `self` by (a two-piece bound of) the minimum of `self` and the
    /// curve `c` anchored at `(x, y)`, for `t >= x` (paper §IV-B, the update of
    /// the deadline curve when a session becomes active again).
    ///
    /// Convex curve: the minimum of two shifted convex curves is not two-piece;
    /// as ALTQ does, keep the old one if it is below at `x`, else the new one.
    /// Concave curve: the new curve (steep first) meets the old one at most
    /// once; its first segment is cut where it does.
    pub(crate) fn min_with(&mut self, c: &Curve, x: u64, y: u64) {
        let y1 = self.x2y(c, x);
        if c.is_convex() {
            if y1 < y {
                return;
            }
            *self = Runtime::new(c, x, y);
            return;
        }
        if y1 <= y {
            // The old curve is already below the new one at x, and both end at
            // slope m2, so it stays below.
            return;
        }
        let y2 = self.x2y(c, x.saturating_add(c.dx));
        if y2 >= y.saturating_add(c.dy) {
            // The old curve is above the whole first segment: take the new one.
            *self = Runtime::new(c, x, y);
            return;
        }
        // They cross. The new curve gains (m1 - m2) per ns on the old one once
        // the old one runs at m2; that closes the gap (y1 - y) after
        // (y1 - y) / (m1 - m2). If the old one is still in its first segment at
        // x it runs at m1 too, so the closing starts only at its breakpoint.
        let dsm = (c.sm1 - c.sm2) as u128; // > 0: concave
        let mut dx = sat_u64((((y1 - y) as u128) << SM_SHIFT).div_ceil(dsm));
        let old_break = self.x.saturating_add(self.dx);
        if old_break > x {
            dx = dx.saturating_add(old_break - x);
        }
        let dx = dx.min(c.dx);
        *self = Runtime {
            x,
            y,
            dx,
            dy: seg_x2y(dx, c.sm1),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sc(m1: u64, d_ms: u64, m2: u64) -> ServiceCurve {
        ServiceCurve {
            m1: Rate::bps(m1),
            d: Duration::from_millis(d_ms),
            m2: Rate::bps(m2),
        }
    }

    #[test]
    fn linear_one_megabit_moves_125_bytes_per_ms() {
        let c = Curve::new(&ServiceCurve::linear(Rate::mbps(1)));
        let r = Runtime::new(&c, 1_000, 0);
        assert_eq!(r.x2y(&c, 1_000 + 1_000_000), 125);
        assert_eq!(r.y2x(&c, 125), 1_000 + 1_000_000);
        assert_eq!(r.y2x(&c, 1500), 1_000 + 12_000_000);
    }

    #[test]
    fn two_piece_breaks_at_d() {
        // 8 Mbit/s for 10 ms (10_000 bytes), then 1 Mbit/s.
        let c = Curve::new(&sc(8_000_000, 10, 1_000_000));
        let r = Runtime::new(&c, 0, 0);
        assert_eq!(r.x2y(&c, 10_000_000), 10_000);
        assert_eq!(r.x2y(&c, 20_000_000), 11_250);
        assert_eq!(r.y2x(&c, 10_000), 10_000_000);
        assert_eq!(r.y2x(&c, 11_250), 20_000_000);
    }

    #[test]
    fn zero_slope_never_reaches_more() {
        let c = Curve::new(&sc(0, 10, 1_000_000));
        let r = Runtime::new(&c, 0, 0);
        assert_eq!(r.x2y(&c, 5_000_000), 0);
        // Any service needs the delay first.
        assert_eq!(r.y2x(&c, 0), 10_000_000);
        assert_eq!(r.y2x(&c, 125), 11_000_000);
    }

    #[test]
    fn concave_min_cuts_first_segment_where_curves_cross() {
        // 8 Mbit/s for 10 ms then 1 Mbit/s. Old anchored at 0, new at
        // (20 ms, 10_000 bytes): old there is 11_250, 1_250 above. The gap
        // closes at 7 Mbit/s = 875 bytes/ms: after 1.428.. ms.
        let c = Curve::new(&sc(8_000_000, 10, 1_000_000));
        let mut r = Runtime::new(&c, 0, 0);
        r.min_with(&c, 20_000_000, 10_000);
        assert_eq!((r.x, r.y), (20_000_000, 10_000));
        assert!((1_428_571..=1_428_573).contains(&r.dx), "dx {}", r.dx);
        // After the crossing it follows the old curve.
        let t = 30_000_000;
        let old = Runtime::new(&c, 0, 0).x2y(&c, t);
        assert!(r.x2y(&c, t).abs_diff(old) <= 1);
    }

    proptest! {
        /// y2x is the (rounded up) inverse of x2y.
        #[test]
        fn y2x_inverts_x2y(m1 in 1u64..10_000_000_000, m2 in 1u64..10_000_000_000,
                           d_us in 0u64..100_000, x0 in 0u64..1u64<<40, y0 in 0u64..1u64<<30,
                           y in 0u64..1u64<<32) {
            let s = ServiceCurve { m1: Rate(m1), d: Duration::from_micros(d_us), m2: Rate(m2) };
            let c = Curve::new(&s);
            let r = Runtime::new(&c, x0, y0);
            let x = r.y2x(&c, y);
            // Fixed-point slack: a byte plus 1 ppm of the service since the anchor.
            let slack = 1 + y.saturating_sub(y0) / 1_000_000;
            // Reaching y: the curve at x covers y.
            if y >= y0 { prop_assert!(r.x2y(&c, x) + slack >= y); }
            // And not much earlier: one ns before, it had not.
            if x > x0 && x < u64::MAX { prop_assert!(r.x2y(&c, x - 1) <= y + slack); }
        }

        /// The result of `min_with` is never above either curve (within
        /// rounding) after the new anchor, for concave and convex curves alike
        /// where the construction is exact (concave) and never above the new
        /// curve for convex ones.
        #[test]
        fn min_is_below_new_curve(m1 in 1u64..1_000_000_000, m2 in 1u64..1_000_000_000,
                                  d_us in 0u64..100_000, x1 in 0u64..1u64<<36,
                                  dxn in 0u64..1u64<<34, y1 in 0u64..1u64<<28, dyn_ in 0u64..1u64<<20,
                                  probe in 0u64..1u64<<36) {
            let s = ServiceCurve { m1: Rate(m1), d: Duration::from_micros(d_us), m2: Rate(m2) };
            let c = Curve::new(&s);
            let old = Runtime::new(&c, x1, y1);
            let mut r = old;
            let (x, y) = (x1 + dxn, y1 + dyn_);
            r.min_with(&c, x, y);
            let fresh = Runtime::new(&c, x, y);
            let t = x + probe;
            if c.is_convex() {
                prop_assert!(r == old || r == fresh);
            } else {
                prop_assert!(r.x2y(&c, t) <= fresh.x2y(&c, t) + 1);
                prop_assert!(r.x2y(&c, t) <= old.x2y(&c, t) + 2);
            }
        }
    }
}
