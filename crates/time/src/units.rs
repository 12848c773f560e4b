//! Rates, durations and memory sizes as people write and read them: the one
//! place they are parsed and formatted (pf.conf, `sluice lab` options,
//! `sluice run --memory-limit`, reports, `show`).
//!
//! # Principles
//! - One grammar for a rate everywhere: a decimal number, an optional
//!   multiplier `k`/`K`, `m`/`M`, `g`/`G` (powers of 1000, as in pf and tc)
//!   and an optional unit `b`, `bit` or `bps` in any case. So pf's `970Kb`,
//!   OpenBSD 5.5's `10M` and the lab's `512kbit` all mean the same. Whether a
//!   capital `B` (bytes, to some readers) is refused is the caller's policy.
//! - Integer arithmetic only (u128 intermediates): `10Gb` and `1.5Mb` are
//!   exact and nothing wraps at 4.29 Gbit/s as pf's 32-bit field did; a
//!   fraction of a bit or nanosecond is dropped, never rounded up.
//! - Errors are values ([`UnitError`]); callers put them into their own
//!   located diagnostics with their own hints.
//! - What a formatter writes, the parser reads back to the same value
//!   (except the `format_measured*` ones, for measured, inexact rates).

use crate::{Duration, Rate};
use core::fmt;

/// Why a rate or duration did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitError {
    /// No number where one was expected (empty, `Kb`, `.`, `fast`).
    NotANumber,
    /// A number with a suffix this quantity does not know.
    UnknownUnit(String),
    /// More than fits in 64 bits (or more than 30 digits).
    TooLarge,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitError::NotANumber => f.write_str("not a number"),
            UnitError::UnknownUnit(u) => write!(f, "unknown unit `{u}`"),
            UnitError::TooLarge => f.write_str("too large"),
        }
    }
}

/// The most digits a number may have: with a giga multiplier and the scale,
/// 30 digits still fit in u128.
const MAX_DIGITS: usize = 30;

/// A decimal number `int[.frac]` as (mantissa, 10^decimals): `1.5` is (15, 10).
pub fn decimal(s: &str) -> Result<(u128, u128), UnitError> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(UnitError::NotANumber);
    }
    if int.len() + frac.len() > MAX_DIGITS {
        return Err(UnitError::TooLarge);
    }
    let m = int
        .bytes()
        .chain(frac.bytes())
        .fold(0u128, |m, b| m * 10 + u128::from(b - b'0'));
    Ok((m, 10u128.pow(frac.len() as u32)))
}

/// Splits `970Kb` into `("970", "Kb")`.
fn split_suffix(s: &str) -> (&str, &str) {
    let at = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s.split_at(at)
}

/// `m / scale × mult` as u64, or `TooLarge`.
fn scaled((m, scale): (u128, u128), mult: u128) -> Result<u64, UnitError> {
    let v = m.checked_mul(mult).ok_or(UnitError::TooLarge)? / scale;
    u64::try_from(v).map_err(|_| UnitError::TooLarge)
}

/// A rate in bits per second: `970Kb`, `10M`, `1.5Gb`, `512kbit`, `100kbps`,
/// `2500000` (see the principles for the grammar).
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    scaled_by_suffix(s, |suffix| {
        let lower = suffix.to_ascii_lowercase();
        let prefix = ["bps", "bit", "b"]
            .iter()
            .find_map(|unit| lower.strip_suffix(unit))
            .unwrap_or(&lower);
        match prefix {
            "" => Some(1),
            "k" => Some(1_000),
            "m" => Some(1_000_000),
            "g" => Some(1_000_000_000),
            _ => None,
        }
    })
    .map(Rate::bps)
}

/// A duration: `20ms`, `1.5s`, `500us`, `100ns`; a bare number is in
/// `bare_unit` (pf's `for 100` is milliseconds, a CoDel `target 5` too).
pub fn parse_duration(s: &str, bare_unit: Duration) -> Result<Duration, UnitError> {
    scaled_by_suffix(s, |suffix| match suffix {
        "" => Some(u128::from(bare_unit.as_nanos())),
        "ns" => Some(1),
        "us" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        _ => None,
    })
    .map(Duration::from_nanos)
}

/// A decimal number and its unit suffix, the number scaled by what
/// `multiplier` says the suffix is worth (`None`: not a unit).
fn scaled_by_suffix(
    s: &str,
    multiplier: impl FnOnce(&str) -> Option<u128>,
) -> Result<u64, UnitError> {
    let (num, suffix) = split_suffix(s);
    let num = decimal(num)?;
    let mult = multiplier(suffix).ok_or_else(|| UnitError::UnknownUnit(suffix.to_string()))?;
    scaled(num, mult)
}

/// pf's spelling: the largest of `Gb`, `Mb`, `Kb` that divides exactly,
/// else bits (`100Kb`, `1Mb`, `1500b`). What `Rate`'s `Display` writes.
pub fn format_rate(r: Rate) -> String {
    largest_exact(
        r.as_bps(),
        &[(1_000_000_000, "Gb"), (1_000_000, "Mb"), (1_000, "Kb")],
        "b",
    )
}

/// `v` in the largest unit that divides it exactly, else in `base`.
fn largest_exact(v: u64, units: &[(u64, &str)], base: &str) -> String {
    match units
        .iter()
        .find(|(unit, _)| v != 0 && v.is_multiple_of(*unit))
    {
        Some((unit, name)) => format!("{}{name}", v / unit),
        None => format!("{v}{base}"),
    }
}

/// The lab's short spelling, exact: the largest of `G`, `M`, `k` the rate
/// reaches that needs at most three decimals (`10M`, `512k`, `1.5M`,
/// `1234.567k`), else bits (`999`).
pub fn format_rate_short(r: Rate) -> String {
    let b = r.as_bps();
    for (unit, name) in [(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")] {
        if b >= unit && b.is_multiple_of(unit / 1_000) {
            let frac = format!("{:03}", b % unit / (unit / 1_000));
            let frac = frac.trim_end_matches('0');
            let dot = if frac.is_empty() { "" } else { "." };
            return format!("{}{dot}{frac}{name}", b / unit);
        }
    }
    b.to_string()
}

/// A measured rate for people: `Gbit/s` from 1 Gbit/s, `Mbit/s` from
/// 1 Mbit/s, `kbit/s` below; `decimals` digits at Mbit/s and Gbit/s, two
/// fewer at kbit/s (the same absolute resolution, roughly). `-` when unknown.
pub fn format_measured(bps: f64, decimals: usize) -> String {
    if !bps.is_finite() {
        return "-".into();
    }
    let (div, unit, d) = if bps >= 1e9 {
        (1e9, "Gbit/s", decimals)
    } else if bps >= 1e6 {
        (1e6, "Mbit/s", decimals)
    } else {
        (1e3, "kbit/s", decimals.saturating_sub(2))
    };
    format!("{:.d$} {unit}", bps / div)
}

/// A measured rate in pfctl's spelling (`pfctl -vvsq`, `sluice show`):
/// `1.00Mb/s`, `12.35Kb/s`, `999.00b/s`.
pub fn format_measured_pf(bps: f64) -> String {
    let (div, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        .find(|(div, _)| bps >= *div)
        .unwrap_or((1.0, ""));
    format!("{:.2}{prefix}b/s", bps / div)
}

/// The largest of `s`, `ms`, `us` that divides exactly, else `ns`
/// (`5ms`, `2s`, `1500us`, `7ns`). What `Duration`'s `Display` writes.
pub fn format_duration(d: Duration) -> String {
    largest_exact(
        d.as_nanos(),
        &[(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")],
        "ns",
    )
}

/// A memory size in bytes: `64MiB`, `64M`, `512KiB`, `1.5G`, `1048576`.
/// Multipliers are powers of 1024 whatever the spelling (`K`/`KB`/`KiB`,
/// `M`…, `G`…, any case), as systemd's `MemoryMax=` and ulimit read them:
/// a memory cap is compared with those, never with a link rate.
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    scaled_by_suffix(s, |suffix| {
        let lower = suffix.to_ascii_lowercase();
        let prefix = ["ib", "b"]
            .iter()
            .find_map(|unit| lower.strip_suffix(unit))
            .unwrap_or(&lower);
        match prefix {
            "" => Some(1),
            "k" => Some(1 << 10),
            "m" => Some(1 << 20),
            "g" => Some(1 << 30),
            _ => None,
        }
    })
}

/// The largest of `GiB`, `MiB`, `KiB` that divides exactly, else bytes
/// (`64MiB`, `1536KiB`, `1000B`); [`parse_bytes`] reads it back.
pub fn format_bytes(n: u64) -> String {
    largest_exact(
        n,
        &[(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")],
        "B",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn byte_sizes() {
        for (s, n) in [
            ("1048576", 1 << 20),
            ("64MiB", 64 << 20),
            ("64M", 64 << 20),
            ("64mb", 64 << 20),
            ("512KiB", 512 << 10),
            ("1.5G", 3 << 29),
            ("100B", 100),
        ] {
            assert_eq!(parse_bytes(s), Ok(n), "{s}");
            assert_eq!(parse_bytes(&format_bytes(n)), Ok(n), "{s}");
        }
        assert_eq!(format_bytes(64 << 20), "64MiB");
        assert_eq!(format_bytes(1000), "1000B");
        assert_eq!(
            parse_bytes("64Mbit"),
            Err(UnitError::UnknownUnit("Mbit".into()))
        );
        assert_eq!(parse_bytes("M"), Err(UnitError::NotANumber));
        assert_eq!(parse_bytes("99999999999G"), Err(UnitError::TooLarge));
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn every_rate_spelling() {
        for (s, bps) in [
            ("970", 970),
            ("970b", 970),
            ("100Kb", 100_000),
            ("100kb", 100_000),
            ("100KB", 100_000),
            ("100K", 100_000),
            ("512k", 512_000),
            ("512kbit", 512_000),
            ("100kbps", 100_000),
            ("1.5Mb", 1_500_000),
            ("1.5M", 1_500_000),
            ("5Mbit", 5_000_000),
            ("10Gb", 10_000_000_000),
            ("5G", 5_000_000_000),
            ("4294967296", 1 << 32),
            ("0.5", 0),
            (".5k", 500),
            ("1.", 1),
        ] {
            assert_eq!(parse_rate(s), Ok(Rate::bps(bps)), "{s}");
        }
    }

    #[test]
    fn bad_rates_say_why() {
        assert_eq!(parse_rate(""), Err(UnitError::NotANumber));
        assert_eq!(parse_rate("Kb"), Err(UnitError::NotANumber));
        assert_eq!(parse_rate("."), Err(UnitError::NotANumber));
        assert_eq!(parse_rate("-5M"), Err(UnitError::NotANumber));
        assert_eq!(parse_rate("1.2.3"), Err(UnitError::NotANumber));
        assert_eq!(parse_rate("10Xb"), Err(UnitError::UnknownUnit("Xb".into())));
        assert_eq!(parse_rate("5x"), Err(UnitError::UnknownUnit("x".into())));
        assert_eq!(parse_rate("5 M"), Err(UnitError::UnknownUnit(" M".into())));
        assert_eq!(parse_rate("18446744073709551616"), Err(UnitError::TooLarge));
        assert_eq!(
            parse_rate("99999999999999999999999Gb"),
            Err(UnitError::TooLarge)
        );
        // 30 digits times giga still fits u128 before the u64 check; 31 do not try.
        assert_eq!(parse_rate(&"9".repeat(30)), Err(UnitError::TooLarge));
        assert_eq!(
            parse_rate(&format!("{}G", "9".repeat(31))),
            Err(UnitError::TooLarge)
        );
        assert_eq!(parse_rate("18446744073709551615"), Ok(Rate::bps(u64::MAX)));
        assert_eq!(
            UnitError::UnknownUnit("Xb".into()).to_string(),
            "unknown unit `Xb`"
        );
    }

    #[test]
    fn every_duration_spelling() {
        assert_eq!(parse_duration("20ms", MS), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("1.5s", MS), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500us", MS), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("7ns", MS), Ok(Duration(7)));
        assert_eq!(parse_duration("100", MS), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("100", Duration(1)), Ok(Duration(100)));
        assert_eq!(parse_duration("0.0000001ms", MS), Ok(Duration(0)));
        assert_eq!(
            parse_duration("5m", MS),
            Err(UnitError::UnknownUnit("m".into()))
        );
        assert_eq!(
            parse_duration("5MS", MS),
            Err(UnitError::UnknownUnit("MS".into()))
        );
        assert_eq!(parse_duration("ms", MS), Err(UnitError::NotANumber));
        assert_eq!(
            parse_duration("999999999999999999999999999999s", MS),
            Err(UnitError::TooLarge)
        );
    }

    #[test]
    fn formats() {
        assert_eq!(format_rate(Rate::kbps(100)), "100Kb");
        assert_eq!(format_rate(Rate::bps(1500)), "1500b");
        assert_eq!(format_rate(Rate::gbps(10)), "10Gb");
        assert_eq!(format_rate(Rate::ZERO), "0b");
        assert_eq!(format_rate_short(Rate::mbps(5)), "5M");
        assert_eq!(format_rate_short(Rate::kbps(512)), "512k");
        assert_eq!(format_rate_short(Rate::kbps(1500)), "1.5M");
        assert_eq!(format_rate_short(Rate::bps(1_050_000)), "1.05M");
        assert_eq!(format_rate_short(Rate::bps(1_234_567)), "1234.567k");
        assert_eq!(format_rate_short(Rate::bps(999)), "999");
        assert_eq!(format_rate_short(Rate::gbps(2)), "2G");
        assert_eq!(format_measured(4_850_000.0, 2), "4.85 Mbit/s");
        assert_eq!(format_measured(999_400.0, 2), "999 kbit/s");
        assert_eq!(format_measured(0.0, 2), "0 kbit/s");
        assert_eq!(format_measured(128_000.0, 3), "128.0 kbit/s");
        assert_eq!(format_measured(9_998_000.0, 3), "9.998 Mbit/s");
        assert_eq!(format_measured(1e9, 3), "1.000 Gbit/s");
        assert_eq!(format_measured(f64::NAN, 2), "-");
        assert_eq!(format_measured_pf(1e6), "1.00Mb/s");
        assert_eq!(format_measured_pf(12_345.0), "12.35Kb/s");
        assert_eq!(format_measured_pf(999.0), "999.00b/s");
        assert_eq!(format_measured_pf(2.5e9), "2.50Gb/s");
        assert_eq!(format_duration(Duration::from_millis(5)), "5ms");
        assert_eq!(format_duration(Duration::ZERO), "0ns");
    }

    proptest! {
        #[test]
        fn rates_read_back_as_written(bps in any::<u64>()) {
            let r = Rate::bps(bps);
            prop_assert_eq!(parse_rate(&format_rate(r)), Ok(r));
            prop_assert_eq!(parse_rate(&format_rate_short(r)), Ok(r));
            prop_assert_eq!(parse_rate(&r.to_string()), Ok(r));
        }

        #[test]
        fn durations_read_back_as_written(ns in any::<u64>()) {
            let d = Duration(ns);
            prop_assert_eq!(parse_duration(&format_duration(d), MS), Ok(d));
        }
    }
}
