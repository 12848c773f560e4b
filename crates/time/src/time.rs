//! Monotonic time in nanoseconds. The origin is whatever the caller's clock uses;
//! only differences matter. Arithmetic saturates so that a clamped or far-future
//! time never panics on the packet path.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in monotonic time, nanoseconds since an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    /// Used as "never" by wake-up computations.
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: a "later" value that is actually earlier gives zero.
    fn sub(self, o: Instant) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
}

impl fmt::Display for Duration {
    /// `5ms`, `2s`, `1500us`; see [`crate::units::format_duration`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::units::format_duration(*self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_arithmetic() {
        assert_eq!(Instant(5) - Instant(9), Duration::ZERO);
        assert_eq!(Instant::MAX + Duration(1), Instant::MAX);
        assert_eq!(Instant(10) - Duration(20), Instant(0));
    }

    #[test]
    fn display() {
        assert_eq!(Duration::from_millis(5).to_string(), "5ms");
        assert_eq!(Duration::from_secs(2).to_string(), "2s");
        assert_eq!(Duration::from_micros(1500).to_string(), "1500us");
        assert_eq!(Duration(7).to_string(), "7ns");
    }
}
