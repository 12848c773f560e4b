//! MSS clamping: `scrub (max-mss N|auto)` (pf.conf(5), "Scrub").
//!
//! # Principles
//!
//! - **What it changes.** The MSS option of a TCP SYN or SYN-ACK whose rules
//!   (or whose state's rules) carry `max-mss` is lowered to the limit when it
//!   announces more; a smaller one passes as it is (never raised), and a SYN
//!   without the option gets none (pf's `pf_normalize_mss` does the same).
//!   The MSS a SYN announces bounds the segments that travel *towards* its
//!   sender, so both ends' SYNs are clamped: the client's for the download,
//!   the server's SYN-ACK for the upload. The checksum is updated
//!   incrementally (RFC 1624, [`sluice_wire::tcp::rewrite_mss`]).
//! - **`auto`: one frame within a time budget.** On a slow line one
//!   full-sized frame is a long wait for whatever comes after it (1514 bytes
//!   in PPPoE over ATM take 109 ms at 128 kbit/s), and no scheduler can
//!   preempt a frame on the wire. `auto` picks, per interface, the largest
//!   MSS whose frame — Ethernet, IP and TCP headers, plus the interface's
//!   `set overhead` and ATM cell padding — takes at most [`AUTO_BUDGET`] at
//!   the interface's shaped rate. A SYN arriving on an interface announces
//!   what the peer may send *back through it*, so that interface's rate
//!   counts. Never below RFC 9293's defaults (536 bytes over IPv4, 1220 over
//!   IPv6): smaller segments cost more in headers than they save in delay.
//! - **Bad input.** A segment whose options cannot be walked passes
//!   unmodified (counted by the caller).

use sluice_conf::ir::MaxMss;
use sluice_time::{Duration, Overhead, Rate};
use sluice_wire::Af;

/// The time one frame may take on the wire with `max-mss auto`.
pub const AUTO_BUDGET: Duration = Duration::from_millis(20);

/// The least MSS of each family (RFC 9293 §3.7.1, RFC 8200 §5).
pub fn floor(af: Af) -> u16 {
    match af {
        Af::V4 => 536,
        Af::V6 => 1220,
    }
}

/// Bytes around a segment's MSS worth of payload and options: Ethernet,
/// IP and the TCP header without options.
fn headers(af: Af) -> u32 {
    match af {
        Af::V4 => 14 + 20 + 20,
        Af::V6 => 14 + 40 + 20,
    }
}

/// `max-mss auto` for an interface shaped at `rate` with `overhead`: the
/// largest MSS whose frame takes at most [`AUTO_BUDGET`], at least
/// [`floor`]; `None` when a full-sized frame already fits (or no rate).
pub fn auto(rate: Rate, overhead: Overhead, af: Af) -> Option<u16> {
    if rate == Rate::ZERO {
        return None;
    }
    let budget = rate.bytes_in(AUTO_BUDGET);
    let fits = |mss: u32| u64::from(overhead.cost(mss + headers(af))) <= budget;
    let full = 1500 - (headers(af) - 14);
    if fits(full) {
        return None;
    }
    let lo = u32::from(floor(af));
    // The cost grows with the length: the largest fitting MSS by bisection.
    let (mut ok, mut bad) = (lo, full);
    if !fits(lo) {
        return Some(floor(af));
    }
    while bad - ok > 1 {
        let mid = (ok + bad) / 2;
        if fits(mid) {
            ok = mid;
        } else {
            bad = mid;
        }
    }
    u16::try_from(ok).ok()
}

/// The MSS a SYN of family `af` may announce under `limits` (the rules'
/// `max-mss` of each direction, the strictest wins), with `auto` resolved
/// to `auto_mss`; `None`: no limit.
pub fn limit(limits: [Option<MaxMss>; 2], auto_mss: Option<u16>, af: Af) -> Option<u16> {
    limits
        .into_iter()
        .flatten()
        .filter_map(|m| match m {
            MaxMss::Bytes(n) => Some(n),
            MaxMss::Auto => auto_mss,
        })
        .min()
        .map(|n| n.max(floor(af)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_time::Framing;

    fn atm(bytes: i32) -> Overhead {
        Overhead {
            bytes,
            framing: Framing::Atm,
        }
    }

    #[test]
    fn auto_keeps_one_frame_within_the_budget() {
        // 1 Mbit/s: 2500 bytes in 20 ms, a full frame fits: no clamp.
        assert_eq!(auto(Rate::kbps(1000), Overhead::NONE, Af::V4), None);
        // 490 kbit/s plain: 1225 bytes → MSS 1225 − 54.
        assert_eq!(auto(Rate::kbps(490), Overhead::NONE, Af::V4), Some(1171));
        // PPPoE over ATM (40 bytes, cells of 48 in 53) at 490 kbit/s: the
        // frame of the MSS found fits, one byte more does not.
        let o = atm(40);
        let m = auto(Rate::kbps(490), o, Af::V4).unwrap();
        let budget = Rate::kbps(490).bytes_in(AUTO_BUDGET);
        assert!(u64::from(o.cost(u32::from(m) + 54)) <= budget);
        assert!(u64::from(o.cost(u32::from(m) + 54 + 48)) > budget);
        // 128 kbit/s: 320 bytes; even 536 does not fit: the floor.
        assert_eq!(auto(Rate::kbps(120), o, Af::V4), Some(536));
        assert_eq!(auto(Rate::kbps(120), o, Af::V6), Some(1220));
        assert_eq!(auto(Rate::ZERO, o, Af::V4), None);
    }

    #[test]
    fn the_strictest_limit_wins_and_never_below_the_floor() {
        let b = |n| Some(MaxMss::Bytes(n));
        assert_eq!(limit([b(1400), b(1300)], None, Af::V4), Some(1300));
        assert_eq!(
            limit([b(1400), Some(MaxMss::Auto)], Some(600), Af::V4),
            Some(600)
        );
        // `auto` where a full frame fits: only the other limit.
        assert_eq!(
            limit([Some(MaxMss::Auto), b(1400)], None, Af::V4),
            Some(1400)
        );
        assert_eq!(limit([Some(MaxMss::Auto), None], None, Af::V4), None);
        assert_eq!(limit([None, None], Some(600), Af::V4), None);
        // An IPv6 SYN is never lowered below 1220.
        assert_eq!(limit([b(600), None], None, Af::V6), Some(1220));
    }
}
