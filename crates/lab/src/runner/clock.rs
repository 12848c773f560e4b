//! Calendar arithmetic for run stamps (no time-zone database: UTC only).

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days_from_civil inverse, in eras of 400 years.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (y, m, d, H, M, S) of a Unix time, UTC.
pub(crate) fn utc(unix_s: f64) -> (i64, u32, u32, u32, u32, u32) {
    let s = unix_s.max(0.0) as i64;
    let (y, m, d) = civil(s.div_euclid(86_400));
    let sod = s.rem_euclid(86_400) as u32;
    (y, m, d, sod / 3600, sod / 60 % 60, sod % 60)
}

/// RFC 3339 UTC, seconds precision.
pub fn rfc3339(unix_s: f64) -> String {
    let (y, m, d, hh, mm, ss) = utc(unix_s);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// `YYYYmmdd-HHMMSS` (UTC), for run directory names.
pub fn dir_stamp(unix_s: f64) -> String {
    let (y, m, d, hh, mm, ss) = utc(unix_s);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
        // 2000-02-29 12:34:56 UTC: a leap day of a century leap year.
        assert_eq!(rfc3339(951_827_696.0), "2000-02-29T12:34:56Z");
        assert_eq!(dir_stamp(1_795_326_444.9), "20261122-054724");
        assert_eq!(rfc3339(4_102_444_800.0), "2100-01-01T00:00:00Z");
    }
}
