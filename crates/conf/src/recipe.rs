//! `sluice init`'s recipe: a line's few knobs in (rates, link type, host
//! isolation, autorate), a commented pf.conf out. A pure function; the CLI
//! only parses the flags and writes the text.
//!
//! # Principles
//! - The best the lab has measured (examples/lab/rrul-paced.conf,
//!   voip-fqcodel.conf, host-fair.conf, rrul-autorate.conf,
//!   ack-priority-mss.conf): an FQ-CoDel pipe per direction at 95 % of the
//!   line (sqm-scripts' and CAKE's habit), the download in ingress mode,
//!   `ack-pacing window-clamp` on both, empty ACKs, DNS and ping in a
//!   weight-10 queue on the upload.
//! - The link's framing from CAKE's presets (tc-cake(8)); ADSL's ATM cells
//!   through the presets' `atm`. VDSL2's 64/65 PTM encoding (1.5 %) is not
//!   modelled by the dialect: the 5 % margin covers it.
//! - What only matters on slow lines is written only there: `max-mss
//!   auto` when one full frame takes longer than the 20 ms budget `check`
//!   warns about, and a CoDel target of 1.5 frame times (sqm-scripts'
//!   rule) when that is above 5 ms.
//! - Every comment in the output is one line and says why.
//! - The output checks with no warning (tests: every link type at
//!   1M/256k, 30M/5M, 500M/50M); rates out of range are refused here with
//!   the range and a hint, not by the checker later.

use crate::sema::FRAME_WARN_NS;
use sluice_time::units::{format_rate, parse_rate, UnitError};
use sluice_time::{Overhead, Rate};
use std::fmt::Write as _;

/// The line's framing, as `--link` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Raw,
    Ethernet,
    Docsis,
    Vdsl,
    Adsl,
    Pppoe,
    Lte,
    Starlink,
}

impl Link {
    pub const ALL: [Link; 8] = [
        Link::Raw,
        Link::Ethernet,
        Link::Docsis,
        Link::Vdsl,
        Link::Adsl,
        Link::Pppoe,
        Link::Lte,
        Link::Starlink,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Link::Raw => "raw",
            Link::Ethernet => "ethernet",
            Link::Docsis => "docsis",
            Link::Vdsl => "vdsl",
            Link::Adsl => "adsl",
            Link::Pppoe => "pppoe",
            Link::Lte => "lte",
            Link::Starlink => "starlink",
        }
    }

    pub fn from_name(s: &str) -> Option<Link> {
        Link::ALL.into_iter().find(|l| l.name() == s)
    }

    /// The `set overhead` value and the one-line reason for it.
    fn overhead(self) -> (&'static str, &'static str) {
        match self {
            Link::Raw => ("raw", "Raw: the frame as Linux counts it, header included, nothing added (CAKE's `raw`): a shaper upstream that counts Ethernet frames"),
            Link::Ethernet => ("ethernet", "Ethernet: preamble, header, FCS and gap, 38 bytes a frame (CAKE's `ethernet`)"),
            Link::Docsis => ("docsis", "DOCSIS cable: the modem shapes Ethernet frames plus 18 bytes (CAKE's `docsis`)"),
            Link::Vdsl => ("34", "VDSL2 (PTM) with PPPoE and a VLAN: 34 bytes a frame (sqm-scripts' advice); the 5 % margin covers PTM's 64/65"),
            Link::Adsl => ("bridged-llcsnap", "ADSL (RFC 2684 bridged, LLC/SNAP): 32 bytes, then padded into 53-byte ATM cells"),
            Link::Pppoe => ("pppoe-llcsnap", "PPPoE over ADSL (LLC/SNAP): 40 bytes, then padded into 53-byte ATM cells"),
            Link::Lte => ("ethernet", "LTE's radio framing varies: charge at least Ethernet's 38 bytes; autorate follows the rest"),
            Link::Starlink => ("ethernet", "Starlink's framing is not published: charge at least Ethernet's 38 bytes; autorate follows the rest"),
        }
    }

    /// Links whose rate moves: autorate unless asked otherwise.
    pub fn variable(self) -> bool {
        matches!(self, Link::Lte | Link::Starlink)
    }
}

/// The knobs of `sluice init`.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// The line's rates, as measured (the shaper takes 95 %).
    pub down: Rate,
    pub up: Rate,
    pub link: Link,
    /// Follow a moving rate (default on for lte and starlink).
    pub autorate: bool,
    /// Fair between LAN hosts first, then between each host's flows.
    pub hosts: bool,
    pub wan: String,
    pub lan: String,
}

impl Knobs {
    /// The knobs of a line at `down`/`up` over `link` with every flag of
    /// `sluice init` at its default: no `--autorate`, no `--hosts`, the
    /// interfaces `wan0` and `lan0`.
    pub fn new(down: Rate, up: Rate, link: Link) -> Knobs {
        Knobs {
            down,
            up,
            link,
            autorate: false,
            hosts: false,
            wan: "wan0".into(),
            lan: "lan0".into(),
        }
    }
}

/// The slowest line the recipe shapes: below it one frame takes longer
/// than a call can wait, whatever the shaper does.
pub const MIN_RATE: Rate = Rate::kbps(64);
/// The fastest: beyond what one core forwards by a wide margin.
pub const MAX_RATE: Rate = Rate::gbps(100);
/// An upload more than this many times the download is a swap of the two.
pub const MAX_UP_OVER_DOWN: u64 = 100;

/// `--down`/`--up`'s value, through the one rate grammar of
/// `sluice_time::units`, in range. The error names the flag, the value,
/// the allowed range and a hint.
pub fn line_rate(flag: &str, s: &str) -> Result<Rate, String> {
    let range = format!(
        "allowed {}..{}",
        format_rate(MIN_RATE),
        format_rate(MAX_RATE)
    );
    let unit = s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    // pf reads `5MB` as megabits; on a command line it is a guess either way.
    let bytes = unit.ends_with('B') || unit.to_ascii_lowercase().contains("byte");
    let r = match parse_rate(s) {
        _ if bytes => {
            return Err(format!(
                "{flag} {s}: rates are in bits per second ({range}); hint: for megabytes per second multiply by 8 (1 MB/s is 8M)"
            ))
        }
        Ok(r) => r,
        Err(UnitError::TooLarge) => return Err(format!("{flag} {s}: too large ({range})")),
        Err(_) => {
            return Err(format!(
                "{flag} `{s}` is not a rate ({range}); hint: a number of bits per second with k, M or G, e.g. 30M, 512k, 1.5G — measure the line with a speed test first"
            ))
        }
    };
    if r < MIN_RATE {
        return Err(format!(
            "{flag} {s} is below the slowest line sluice init shapes ({range}); hint: rates are bits per second, so 1M is a megabit"
        ));
    }
    if r > MAX_RATE {
        return Err(format!(
            "{flag} {s} is above the fastest line sluice init shapes ({range})"
        ));
    }
    Ok(r)
}

/// The knobs that make no line: an upload far above the download.
pub fn validate(k: &Knobs) -> Result<(), String> {
    for (flag, r) in [("--down", k.down), ("--up", k.up)] {
        if r < MIN_RATE || r > MAX_RATE {
            return Err(format!(
                "{flag} {} is out of range (allowed {}..{})",
                format_rate(r),
                format_rate(MIN_RATE),
                format_rate(MAX_RATE)
            ));
        }
    }
    if k.up.as_bps() / MAX_UP_OVER_DOWN > k.down.as_bps() {
        return Err(format!(
            "--up {} is more than {MAX_UP_OVER_DOWN} times --down {}; hint: were the two swapped? --down is what the line delivers to you",
            format_rate(k.up),
            format_rate(k.down)
        ));
    }
    for (flag, name) in [("--wan", &k.wan), ("--lan", &k.lan)] {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            return Err(format!(
                "{flag} `{name}` is not an interface name (letters, digits, `_`, `-` and `.` only)"
            ));
        }
    }
    if k.wan == k.lan {
        return Err(format!(
            "--wan and --lan are both `{}`: sluice bridges two interfaces",
            k.wan
        ));
    }
    Ok(())
}

/// 95 % of a line rate, to the kbit below (an exact pf spelling).
fn shaped(r: Rate) -> Rate {
    Rate::kbps(r.as_bps() * 95 / 100 / 1000)
}

/// Nanoseconds one frame of `bytes` on the wire takes at `rate`.
fn frame_ns(bytes: u32, rate: Rate) -> u128 {
    u128::from(bytes) * 8 * 1_000_000_000 / u128::from(rate.as_bps().max(1))
}

/// The fq_codel parameters for a pipe at `rate`: the defaults (5 ms,
/// 100 ms) unless 1.5 frame times exceed 5 ms; then target is that and the
/// interval grows by as much (sqm-scripts' adjustment for slow links).
fn fq_codel_opts(frame: u128) -> String {
    let frame = frame.min(FRAME_WARN_NS);
    let target_ms = (frame * 3 / 2).div_ceil(1_000_000) as u64;
    if target_ms <= 5 {
        return "(ecn)".into();
    }
    format!("(target {target_ms}ms, interval {}ms, ecn)", 95 + target_ms)
}

/// The rate in words: `30 Mbit/s`, `256 kbit/s`.
fn words(r: Rate) -> String {
    format!("{}bit/s", sluice_time::units::format_rate_short(r))
}

/// The commented pf.conf for `k`, or why there is none.
pub fn recipe(k: &Knobs) -> Result<String, String> {
    validate(k)?;
    let (ov_word, ov_why) = k.link.overhead();
    let ov: Overhead = crate::units::overhead_preset(ov_word)
        .or_else(|| ov_word.parse().ok().map(Overhead::plain))
        .unwrap_or(Overhead::NONE);
    let (up, down) = (shaped(k.up), shaped(k.down));
    let frame = |r| frame_ns(ov.cost(1514), r);
    let clamp = frame(up) > FRAME_WARN_NS || frame(down) > FRAME_WARN_NS;
    let autorate = k.autorate || k.link.variable();

    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "# sluice init --down {} --up {} --link {}{}{}",
        format_rate(k.down),
        format_rate(k.up),
        k.link.name(),
        if k.autorate && !k.link.variable() {
            " --autorate"
        } else {
            ""
        },
        if k.hosts { " --hosts" } else { "" }
    );
    let _ = writeln!(
        w,
        "# A {} down / {} up {} line. See what it does: `sluice check --explain -f FILE`.",
        words(k.down),
        words(k.up),
        k.link.name()
    );
    let _ = writeln!(
        w,
        "# Shape with it: `sluice run -f FILE --bridge {},{}`.",
        k.lan, k.wan
    );
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "# The bridge's WAN side (toward the modem) and LAN side; -D ext_if=… overrides."
    );
    let _ = writeln!(w, "ext_if = \"{}\"", k.wan);
    let _ = writeln!(w, "int_if = \"{}\"", k.lan);
    let _ = writeln!(w);
    let _ = writeln!(w, "# {ov_why}.");
    let _ = writeln!(w, "set overhead on $ext_if {ov_word}");
    let _ = writeln!(w, "set overhead on $int_if {ov_word}");
    let _ = writeln!(w);
    write_pipes(w, k, up, down, &frame, autorate);
    write_queues_and_rules(w, clamp, autorate);
    Ok(o)
}

fn write_pipes(
    w: &mut String,
    k: &Knobs,
    up: Rate,
    down: Rate,
    frame: &dyn Fn(Rate) -> u128,
    autorate: bool,
) {
    // ` autorate (…)` when the rate follows the link, else nothing.
    let bounds = |line: Rate, start: Rate| {
        if !autorate {
            return String::new();
        }
        // min: a quarter of the line, as autorate's own default; max: the
        // rate given, the best the line was measured to do.
        let min = Rate::kbps((line.as_bps() / 4 / 1000).max(MIN_RATE.as_bps() / 1000));
        let reconfig = if k.link == Link::Starlink {
            ", reconfig starlink"
        } else {
            ""
        };
        format!(
            " autorate (min {}, max {}{reconfig})",
            format_rate(min.min(start)),
            format_rate(Rate::kbps(line.as_bps() / 1000).max(start))
        )
    };
    let (iso_up, iso_down) = if k.hosts {
        (" dual-srchost", " dual-dsthost")
    } else {
        ("", "")
    };
    let _ = writeln!(w, "# Upload: FQ-CoDel at 95 % of the line, so the queue forms here, where CoDel keeps it short, not in the modem.");
    let _ = writeln!(w, "# ack-pacing window-clamp: the uploads are held to their share through the ACKs coming back from the WAN.");
    if autorate {
        let _ = writeln!(w, "# autorate: the rate follows the link between min and max, read from the delay TCP shows beyond sluice.");
    }
    if k.link == Link::Starlink {
        let _ = writeln!(w, "# reconfig starlink: the dish re-plans every 15 s (12, 27, 42, 57 s past the minute); autorate steps aside then.");
    }
    if k.hosts {
        let _ = writeln!(w, "# dual-srchost: each LAN host gets a fair share first, then its flows share it (needs sluice between the LAN and a NAT router).");
    }
    let _ = writeln!(
        w,
        "pipe up   on $ext_if bandwidth {} sched fq_codel {}{iso_up} ack-pacing window-clamp{}",
        format_rate(up),
        fq_codel_opts(frame(up)),
        bounds(k.up, up)
    );
    let _ = writeln!(w, "# Download: 95 % on the LAN side; ingress counts what CoDel drops as sent, since it already crossed the line.");
    let _ = writeln!(w, "# ack-pacing window-clamp: each download's data is clocked at its share from its ACKs, so it waits here, not at the ISP.");
    if k.hosts {
        let _ = writeln!(w, "# dual-dsthost: fair between LAN hosts first, so one host's many downloads cannot crowd out another's call.");
    }
    let _ = writeln!(
        w,
        "pipe down on $int_if bandwidth {} sched fq_codel {} ingress{iso_down} ack-pacing window-clamp{}",
        format_rate(down),
        fq_codel_opts(frame(down)),
        bounds(k.down, down)
    );
    let _ = writeln!(w);
}

fn write_queues_and_rules(w: &mut String, clamp: bool, autorate: bool) {
    let _ = writeln!(w, "# Empty ACKs, DNS and ping first (weight 10): they are small, and downloads and lookups wait on them.");
    let _ = writeln!(w, "queue up_ack    pipe up   weight 10");
    let _ = writeln!(w, "# Everything else shares the upload by flow (weight 1).");
    let _ = writeln!(w, "queue up_bulk   pipe up   weight 1 default");
    let _ = writeln!(w, "# Every download in one FQ-CoDel: each flow its own queue, sparse ones (calls, games) first.");
    let _ = writeln!(w, "queue down_bulk pipe down weight 1 default");
    let _ = writeln!(w);
    if clamp {
        let _ = writeln!(w, "# max-mss auto: one full frame takes over 20 ms at this rate, so smaller segments keep calls and ACKs from waiting behind it.");
        let _ = writeln!(w, "match scrub (max-mss auto)");
    }
    let _ = writeln!(w, "# TCP to the WAN: data to up_bulk, empty ACKs and lowdelay (SSH) packets to up_ack; a state per connection.");
    let _ = writeln!(
        w,
        "pass out on $ext_if proto tcp keep state queue (up_bulk, up_ack)"
    );
    let _ = writeln!(w, "# DNS lookups first: every page load waits on them.");
    let _ = writeln!(
        w,
        "pass out on $ext_if proto udp to any port domain queue up_ack"
    );
    let _ = writeln!(
        w,
        "# Ping first, so a ping measures the line, not the upload's queue."
    );
    let _ = writeln!(w, "pass out on $ext_if proto icmp queue up_ack");
    if autorate {
        let _ = writeln!(w, "# Everything to the LAN; the states give TCP control and autorate both directions of each connection.");
    } else {
        let _ = writeln!(w, "# Everything to the LAN; the states give TCP control both directions of each connection.");
    }
    let _ = writeln!(w, "pass out on $int_if keep state queue down_bulk");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(down: &str, up: &str, link: Link) -> Knobs {
        let rate = |flag, s| line_rate(flag, s).unwrap();
        Knobs::new(rate("--down", down), rate("--up", up), link)
    }

    #[test]
    fn nonsense_rates_are_refused_with_the_range() {
        for bad in [
            "0",
            "fast",
            "63k",
            "101G",
            "",
            "-5M",
            "99999999999999999999999G",
        ] {
            let e = line_rate("--down", bad).unwrap_err();
            assert!(e.contains("--down"), "{bad}: {e}");
            assert!(e.contains("64Kb..100Gb"), "{bad}: {e}");
        }
        assert!(line_rate("--up", "5MB")
            .unwrap_err()
            .contains("multiply by 8"));
        assert_eq!(line_rate("--up", "512k"), Ok(Rate::kbps(512)));
        let mut k = knobs("1M", "200M", Link::Ethernet);
        assert!(recipe(&k).unwrap_err().contains("swapped"));
        k.up = Rate::mbps(1);
        k.lan = "wan0".into();
        assert!(recipe(&k).unwrap_err().contains("two interfaces"));
        k.lan = "lan 0".into();
        assert!(recipe(&k).unwrap_err().contains("not an interface name"));
    }

    #[test]
    fn slow_uplinks_get_mss_clamping_and_a_longer_target() {
        let slow = recipe(&knobs("1M", "256k", Link::Adsl)).unwrap();
        assert!(slow.contains("match scrub (max-mss auto)"), "{slow}");
        assert!(slow.contains("target 30ms, interval 125ms"), "{slow}");
        let fast = recipe(&knobs("30M", "5M", Link::Docsis)).unwrap();
        assert!(!fast.contains("max-mss"), "{fast}");
        assert!(!fast.contains("target"), "{fast}");
        assert!(fast.contains("bandwidth 4750Kb"), "{fast}");
        assert!(fast.contains("bandwidth 28500Kb"), "{fast}");
    }

    #[test]
    fn variable_links_get_autorate_and_starlink_its_schedule() {
        let lte = recipe(&knobs("30M", "5M", Link::Lte)).unwrap();
        assert!(lte.contains("autorate (min 7500Kb, max 30Mb)"), "{lte}");
        assert!(!lte.contains("reconfig"), "{lte}");
        let sl = recipe(&knobs("200M", "20M", Link::Starlink)).unwrap();
        assert!(sl.contains("reconfig starlink"), "{sl}");
        let eth = recipe(&knobs("30M", "5M", Link::Ethernet)).unwrap();
        assert!(!eth.contains("autorate ("), "{eth}");
    }

    #[test]
    fn every_comment_is_one_line_that_says_why() {
        let mut k = knobs("30M", "5M", Link::Starlink);
        k.hosts = true;
        for line in recipe(&k).unwrap().lines() {
            assert!(line.chars().count() <= 160, "{line}");
        }
    }
}
