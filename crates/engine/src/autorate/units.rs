//! Unit-safe arithmetic for the controller: rates scaled and compared by
//! factors, durations multiplied and compared by fractions, a rate from
//! bytes over a span — so that no rule takes `.0` of a rate or a
//! duration. Each operation is written once, in the exact form the
//! decisions depend on (the products in f64, or in saturating integers).

use sluice_time::{Duration, Rate};

/// A fraction `num / den` of a duration or a rate, applied in integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub num: u64,
    pub den: u64,
}

impl Share {
    pub const fn new(num: u64, den: u64) -> Share {
        Share { num, den }
    }

    /// `a < num/den × b`, without rounding: `a × den < b × num`.
    pub fn below(self, a: Duration, b: Duration) -> bool {
        a.0.saturating_mul(self.den) < b.0.saturating_mul(self.num)
    }

    /// `a ≤ num/den × b`, without rounding.
    pub fn at_most(self, a: Duration, b: Duration) -> bool {
        a.0.saturating_mul(self.den) <= b.0.saturating_mul(self.num)
    }

    /// `num/den` of `r`, rounded down.
    pub fn of_rate(self, r: Rate) -> Rate {
        Rate(r.0.saturating_mul(self.num) / self.den.max(1))
    }
}

/// Rates against factors.
pub trait RateExt {
    /// `self × f`, rounded down.
    fn scale(self, f: f64) -> Rate;
    /// `self < f × of`.
    fn under(self, f: f64, of: Rate) -> bool;
    /// `self ≤ f × of`.
    fn at_most(self, f: f64, of: Rate) -> bool;
    /// `self ≥ f × of`.
    fn at_least(self, f: f64, of: Rate) -> bool;
    /// `self / of` (`of` taken as at least 1 bit/s).
    fn ratio(self, of: Rate) -> f64;
    /// In bit/s, for a bound that is kept unrounded.
    fn bps_f64(self) -> f64;
}

impl RateExt for Rate {
    fn scale(self, f: f64) -> Rate {
        Rate((self.0 as f64 * f) as u64)
    }
    fn under(self, f: f64, of: Rate) -> bool {
        (self.0 as f64) < of.0 as f64 * f
    }
    fn at_most(self, f: f64, of: Rate) -> bool {
        (self.0 as f64) <= of.0 as f64 * f
    }
    fn at_least(self, f: f64, of: Rate) -> bool {
        (self.0 as f64) >= of.0 as f64 * f
    }
    fn ratio(self, of: Rate) -> f64 {
        self.0 as f64 / of.0.max(1) as f64
    }
    fn bps_f64(self) -> f64 {
        self.0 as f64
    }
}

/// Durations times whole numbers.
pub trait DurationExt {
    /// `self × n`, saturating.
    fn times(self, n: u64) -> Duration;
    /// `self / n`, rounded down.
    fn div(self, n: u64) -> Duration;
}

impl DurationExt for Duration {
    fn times(self, n: u64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
    fn div(self, n: u64) -> Duration {
        Duration(self.0 / n.max(1))
    }
}

/// The rate of `bytes` moved over `span` (non-zero), rounded down.
pub fn rate_of(bytes: u64, span: Duration) -> Rate {
    let bits = u128::from(bytes) * 8 * 1_000_000_000;
    Rate(u64::try_from(bits / u128::from(span.as_nanos().max(1))).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_compare_without_rounding() {
        let three_quarters = Share::new(3, 4);
        // 3/4 of 7 ns is 5.25 ns: 5 is below it, 6 is not.
        assert!(three_quarters.below(Duration(5), Duration(7)));
        assert!(!three_quarters.below(Duration(6), Duration(7)));
        assert!(Share::new(1, 4).at_most(Duration(2), Duration(8)));
        assert!(!Share::new(1, 4).at_most(Duration(3), Duration(8)));
        assert_eq!(Share::new(1, 2).of_rate(Rate(5)), Rate(2));
    }

    #[test]
    fn rates_scale_and_compare_by_factors() {
        assert_eq!(Rate(1_000).scale(0.95), Rate(950));
        assert!(Rate(899).under(0.9, Rate(1_000)));
        assert!(!Rate(900).under(0.9, Rate(1_000)));
        assert!(Rate(900).at_most(0.9, Rate(1_000)));
        assert!(Rate(900).at_least(0.9, Rate(1_000)));
        assert_eq!(Rate(5).ratio(Rate(0)), 5.0);
        assert_eq!(rate_of(1_250, Duration::from_millis(10)), Rate(1_000_000));
        assert_eq!(Duration(7).times(3), Duration(21));
        assert_eq!(Duration(7).div(2), Duration(3));
    }
}
