//! Link rates in bit/s. 64-bit throughout: pf's ALTQ stored bandwidth in 32 bits
//! and wrapped above 4.29 Gbit/s; we never do.

use crate::Duration;
use core::fmt;

/// A rate in bits per second. `Rate(0)` means "unlimited" only where a caller
/// says so; the arithmetic here treats it as "nothing ever gets through".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    pub const ZERO: Rate = Rate(0);

    pub const fn bps(b: u64) -> Rate {
        Rate(b)
    }
    pub const fn kbps(k: u64) -> Rate {
        Rate(k.saturating_mul(1_000))
    }
    pub const fn mbps(m: u64) -> Rate {
        Rate(m.saturating_mul(1_000_000))
    }
    pub const fn gbps(g: u64) -> Rate {
        Rate(g.saturating_mul(1_000_000_000))
    }
    pub const fn as_bps(self) -> u64 {
        self.0
    }

    /// Time to serialise `bytes` at this rate, rounded up so a shaper never
    /// sends faster than configured. `Duration::MAX` for a zero rate.
    pub fn tx_time(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        let bits = bytes as u128 * 8 * 1_000_000_000;
        let ns = bits.div_ceil(self.0 as u128);
        Duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Bytes this rate moves in `d`, rounded down.
    pub fn bytes_in(self, d: Duration) -> u64 {
        let b = self.0 as u128 * d.0 as u128 / 8 / 1_000_000_000;
        u64::try_from(b).unwrap_or(u64::MAX)
    }

    /// `pct` percent of this rate (pf's `bandwidth 30%`), rounded down.
    pub fn percent(self, pct: u64) -> Rate {
        Rate((self.0 as u128 * pct as u128 / 100) as u64)
    }
}

impl fmt::Display for Rate {
    /// pf's spelling (`100Kb`, `1Mb`); see [`crate::units::format_rate`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::units::format_rate(*self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_full_packet_at_one_megabit_is_twelve_ms() {
        assert_eq!(Rate::mbps(1).tx_time(1500), Duration::from_millis(12));
    }

    #[test]
    fn above_32_bits_does_not_wrap() {
        let r = Rate::gbps(10);
        assert_eq!(r.as_bps(), 10_000_000_000);
        assert_eq!(r.to_string(), "10Gb");
        assert_eq!(r.tx_time(1250), Duration(1000));
    }

    #[test]
    fn zero_rate_never_sends() {
        assert_eq!(Rate::ZERO.tx_time(1), Duration::MAX);
        assert_eq!(Rate::ZERO.bytes_in(Duration::from_secs(1)), 0);
    }

    #[test]
    fn display_picks_exact_unit() {
        assert_eq!(Rate::kbps(100).to_string(), "100Kb");
        assert_eq!(Rate::bps(1500).to_string(), "1500b");
        assert_eq!(Rate::mbps(1).percent(97).to_string(), "970Kb");
    }

    proptest! {
        #[test]
        fn tx_time_never_undershoots(rate in 1u64..100_000_000_000, bytes in 0u64..1_000_000) {
            let t = Rate(rate).tx_time(bytes);
            // The bytes the rate moves in that time cover at least `bytes`.
            prop_assert!(Rate(rate).bytes_in(t) >= bytes || t == Duration::MAX);
        }
    }
}
