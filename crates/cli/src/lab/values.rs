//! Command-line values of `sluice lab`: rates, overheads, congestion
//! controls, socket buffers, ECN, and the overrides they make to a scenario.
//!
//! # Principles
//! - A bad value is refused with what was given, what is allowed and an
//!   example, before anything is built.
//! - Rates are bits per second, as in pf.conf (`Kb` is kilobit); a byte
//!   suffix (`KB`, `MB`) is refused rather than guessed.

use sluice_lab::model::{Dir, FifoKind, Scenario, LINK_MAX_BPS, LINK_MIN_BPS};
use sluice_time::units;

/// Largest base RTT (ms) and modem buffer (packets) accepted.
const MAX_RTT_MS: f64 = 10_000.0;
const MAX_BUFFER_PKTS: u32 = 100_000;
/// Longest phase (s) `--duration` accepts.
const MAX_PHASE_S: f64 = 3600.0;

/// `512k`, `512kbit`, `512Kb`, `5M`, `5Mbit`, `5Mb`, `1.5M`, `1G`, `64000`:
/// sluice_time's rate grammar, with bytes refused and the lab's range.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let hint = "allowed: a number with an optional k/M/G multiplier and an optional \
                bit/b/bps suffix, in bits per second (e.g. 512k, 512kbit, 5Mb, 1G)";
    let t = s.trim();
    if t.ends_with('B') && !t.ends_with("bps") {
        return Err(format!(
            "`{s}`: a capital B means bytes; the lab takes bits per second ({hint})"
        ));
    }
    let bps = units::parse_rate(t)
        .map_err(|e| format!("`{s}` is not a rate: {e} ({hint})"))?
        .as_bps();
    if !(LINK_MIN_BPS..=LINK_MAX_BPS).contains(&bps) {
        return Err(format!(
            "`{s}` is out of range: the lab emulates links from 8 kbit/s to 10 Gbit/s"
        ));
    }
    Ok(bps)
}

/// An overhead: cake's name (`pppoe-llcsnap`, `ethernet`, …) or a byte count.
#[derive(Clone, Debug, PartialEq)]
pub struct OverheadArg {
    pub name: String,
    pub bytes: i32,
    pub atm: bool,
}

pub fn parse_overhead(s: &str) -> Result<OverheadArg, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<i32>() {
        if !(-64..=256).contains(&n) {
            return Err(format!("`{s}`: overhead bytes must be within -64..=256"));
        }
        return Ok(OverheadArg {
            name: n.to_string(),
            bytes: n,
            atm: false,
        });
    }
    if t == "none" {
        return Ok(OverheadArg {
            name: "none".into(),
            bytes: 0,
            atm: false,
        });
    }
    match sluice_conf::overhead_preset(t) {
        Some(o) => Ok(OverheadArg {
            name: t.to_string(),
            bytes: o.bytes,
            atm: o.framing == sluice_time::Framing::Atm,
        }),
        None => Err(format!(
            "`{s}` is not an overhead: give bytes per packet (e.g. 38) or one of cake's \
             names: none, raw, ethernet, docsis, pppoe-ptm, bridged-ptm, pppoe-vcmux, \
             pppoe-llcsnap, pppoa-vcmux, pppoa-llc, bridged-vcmux, bridged-llcsnap, \
             ipoa-vcmux, ipoa-llcsnap, conservative"
        )),
    }
}

/// A number with an optional unit suffix, within `range`; `what` says the
/// unit, the range and an example when it is not.
fn ranged(
    s: &str,
    suffix: &str,
    range: std::ops::RangeInclusive<f64>,
    what: &str,
) -> Result<f64, String> {
    match s.trim().trim_end_matches(suffix).parse::<f64>() {
        Ok(v) if v.is_finite() && range.contains(&v) => Ok(v),
        _ => Err(format!("`{s}`: {what}")),
    }
}

/// Base RTT in milliseconds.
pub fn parse_rtt(s: &str) -> Result<f64, String> {
    ranged(
        s,
        "ms",
        0.0..=MAX_RTT_MS,
        &format!("the base RTT is milliseconds from 0 to {MAX_RTT_MS} (e.g. 20; 0 = none)"),
    )
}

/// Modem buffer in packets.
pub fn parse_buffer(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(v) if (1..=MAX_BUFFER_PKTS).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}`: the modem buffer is packets from 1 to {MAX_BUFFER_PKTS} (e.g. 100)"
        )),
    }
}

/// Most TCP streams one iperf3 client runs (its own limit for `-P`).
pub const MAX_STREAMS: u32 = 128;

/// TCP streams of every bulk flow.
pub fn parse_streams(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(v) if (1..=MAX_STREAMS).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}`: --streams is the TCP connections of each bulk flow, 1 to {MAX_STREAMS} \
             (iperf3 -P's limit; e.g. 30)"
        )),
    }
}

/// Every phase's length in seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    ranged(
        s,
        "s",
        1.0..=MAX_PHASE_S,
        &format!("--duration is each phase's length in seconds, 1 to {MAX_PHASE_S} (e.g. 30)"),
    )
}

/// A congestion control's name as the kernel spells it (`cubic`, `reno`,
/// `bbr`, `htcp`…); whether this kernel has it is checked before a run
/// (`sluice_lab::runner::check_cc`, which loads its module if it can).
pub fn parse_cc(s: &str) -> Result<String, String> {
    let t = s.trim();
    let ok = !t.is_empty()
        && t.len() <= 15
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(t.to_string())
    } else {
        Err(format!(
            "`{s}`: a congestion control's name, e.g. cubic, reno or bbr              (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
        ))
    }
}

/// Smallest and largest socket buffer `--window` accepts: below 4 KiB a
/// TCP connection cannot keep even three full segments in flight; above
/// 64 MiB is no home link's bandwidth-delay product. (The kernel's own cap,
/// `net.core.rmem_max`/`wmem_max`, is checked before a run:
/// `sluice_lab::runner::check_windows`.)
const MIN_WINDOW_BYTES: u64 = 4 << 10;
const MAX_WINDOW_BYTES: u64 = 64 << 20;

/// A flow's socket buffer: a size, or the kernel's autotuning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowArg(pub Option<u64>);

/// `64K`, `64KiB`, `256k`, `1M`, `65536` (powers of 1024, as iperf3 -w
/// reads them) or `auto`.
pub fn parse_window(s: &str) -> Result<WindowArg, String> {
    let t = s.trim();
    if t == "auto" {
        return Ok(WindowArg(None));
    }
    let hint = "a socket buffer size in bytes with an optional K/M multiplier (powers of \
                1024, e.g. 64K, 256KiB, 1M), or `auto` for the kernel's autotuning";
    let n = units::parse_bytes(t).map_err(|e| format!("`{s}` is not a size: {e} ({hint})"))?;
    if !(MIN_WINDOW_BYTES..=MAX_WINDOW_BYTES).contains(&n) {
        return Err(format!(
            "`{s}` is out of range: windows from {} to {} ({hint})",
            units::format_bytes(MIN_WINDOW_BYTES),
            units::format_bytes(MAX_WINDOW_BYTES)
        ));
    }
    Ok(WindowArg(Some(n)))
}

/// `packets` or `bytes`: how the modem's FIFO counts `--buffer`.
pub fn parse_fifo(s: &str) -> Result<FifoKind, String> {
    match s.trim() {
        "packets" => Ok(FifoKind::Packets),
        "bytes" => Ok(FifoKind::Bytes),
        _ => Err(format!(
            "`{s}`: allowed: packets (pfifo, --buffer packets) or bytes (bfifo, --buffer \
             full-size frames' worth of bytes)"
        )),
    }
}

/// `on` or `off`.
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("`{s}`: allowed: on, off")),
    }
}

/// The overrides of `lab run` and `lab compare`.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub down_bps: Option<u64>,
    pub up_bps: Option<u64>,
    pub rtt_ms: Option<f64>,
    pub buffer_pkts: Option<u32>,
    pub overhead: Option<OverheadArg>,
    pub phase_secs: Option<f64>,
    pub cc: Option<String>,
    /// Every flow's window, then (taking precedence) one direction's.
    pub window: Option<WindowArg>,
    pub window_down: Option<WindowArg>,
    pub window_up: Option<WindowArg>,
    pub ecn: Option<bool>,
    pub fifo: Option<FifoKind>,
    /// TCP streams of every bulk flow (iperf3 -P).
    pub streams: Option<u32>,
    /// The modem drops the ICMP it would forward (`--drop-icmp`).
    pub drop_icmp: bool,
    /// Random loss beyond the modem, ppm each way, and its seed.
    pub loss: Option<sluice_lab::model::LinkLoss>,
    /// SACK and timestamps turned off on both hosts.
    pub no_sack: bool,
    pub no_timestamps: bool,
    /// `--attack lying-clock`'s connections and their clock.
    pub liars: Option<u32>,
    pub lie: Option<sluice_lab::attack::Clock>,
}

impl Overrides {
    pub fn apply(&self, s: &mut Scenario) {
        if let Some(v) = self.down_bps {
            s.link.down_bps = v;
        }
        if let Some(v) = self.up_bps {
            s.link.up_bps = v;
        }
        if let Some(v) = self.rtt_ms {
            s.link.rtt_ms = v;
        }
        if let Some(v) = self.buffer_pkts {
            s.link.buffer_pkts = v;
        }
        if let Some(o) = &self.overhead {
            s.link.overhead_bytes = o.bytes;
            s.link.atm = o.atm;
            s.link.overhead_name = o.name.clone();
        }
        if let Some(secs) = self.phase_secs {
            for p in &mut s.phases {
                p.secs = secs;
            }
        }
        if let Some(cc) = &self.cc {
            s.cc = cc.clone();
        }
        if let Some(f) = self.fifo {
            s.link.fifo = f;
        }
        if let Some(on) = self.ecn {
            s.ecn = on;
        }
        s.link.drop_icmp |= self.drop_icmp;
        if let Some(l) = self.loss {
            s.link.loss = (l.ppm > 0).then_some(l);
        }
        s.sack &= !self.no_sack;
        if let Some(n) = self.liars {
            s.lying.liars = n;
        }
        if let Some(c) = self.lie {
            s.lying.clock = c;
        }
        s.timestamps &= !self.no_timestamps;
        for f in &mut s.flows {
            if let Some(n) = self.streams {
                f.streams = n;
            }
            let own = match f.dir {
                Dir::Down => self.window_down,
                Dir::Up => self.window_up,
            };
            if let Some(WindowArg(w)) = own.or(self.window) {
                f.window = w;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_every_spelling() {
        for (s, v) in [
            ("512k", 512_000),
            ("512kbit", 512_000),
            ("512Kb", 512_000),
            ("5M", 5_000_000),
            ("5Mbit", 5_000_000),
            ("5Mb", 5_000_000),
            ("1.5M", 1_500_000),
            ("1G", 1_000_000_000),
            ("64000", 64_000),
            ("100kbps", 100_000),
        ] {
            assert_eq!(parse_rate(s), Ok(v), "{s}");
        }
        for bad in ["", "fast", "5MB", "0", "1k", "20G", "-5M", "5x"] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.contains(bad) || bad.is_empty(), "{bad}: {e}");
        }
        assert!(parse_rate("5MB").unwrap_err().contains("bytes"));
    }

    #[test]
    fn overheads_by_name_or_bytes() {
        let o = parse_overhead("pppoe-llcsnap").unwrap();
        assert_eq!((o.bytes, o.atm), (40, true));
        let o = parse_overhead("ethernet").unwrap();
        assert_eq!((o.bytes, o.atm), (38, false));
        assert_eq!(parse_overhead("18").unwrap().bytes, 18);
        assert_eq!(parse_overhead("none").unwrap().bytes, 0);
        assert!(parse_overhead("adsl")
            .unwrap_err()
            .contains("pppoe-llcsnap"));
        assert!(parse_overhead("999").is_err());
    }

    #[test]
    fn other_values_and_overrides() {
        assert_eq!(parse_rtt("20"), Ok(20.0));
        assert_eq!(parse_rtt("0"), Ok(0.0));
        assert!(parse_rtt("-1").is_err());
        assert_eq!(parse_buffer("100"), Ok(100));
        assert!(parse_buffer("0").is_err());
        assert_eq!(parse_duration("5"), Ok(5.0));
        assert!(parse_duration("0.5").is_err());
        assert_eq!(
            parse_cc("vegas"),
            Ok("vegas".into()),
            "checked against the kernel later"
        );
        for bad in ["", "BBR", "bbr;ls", "a-very-long-cc-name"] {
            assert!(parse_cc(bad).unwrap_err().contains("cubic"), "{bad:?}");
        }
        let mut s = sluice_lab::scenario::ack_priority();
        Overrides {
            up_bps: Some(256_000),
            phase_secs: Some(4.0),
            overhead: Some(parse_overhead("ethernet").unwrap()),
            cc: Some("reno".into()),
            ..Overrides::default()
        }
        .apply(&mut s);
        assert_eq!(s.link.up_bps, 256_000);
        assert_eq!(s.link.down_bps, 512_000, "untouched");
        assert_eq!((s.link.overhead_bytes, s.link.atm), (38, false));
        assert_eq!(s.total_secs(), 20.0);
        assert_eq!(s.cc, "reno");
    }

    #[test]
    fn loss_and_sender_variants_override_the_scenario() {
        use sluice_lab::model::LinkLoss;
        let mut s = sluice_lab::scenario::tcp_1down();
        assert!(s.sack && s.timestamps && s.link.loss.is_none());
        let loss = LinkLoss {
            ppm: 10_000,
            seed: 42,
        };
        Overrides {
            loss: Some(loss),
            no_sack: true,
            no_timestamps: true,
            ..Overrides::default()
        }
        .apply(&mut s);
        assert_eq!(s.link.loss, Some(loss));
        assert!(!s.sack && !s.timestamps);
        // `--loss 0%` is no loss at all (a plain delay line, nothing recorded).
        Overrides {
            loss: Some(LinkLoss { ppm: 0, seed: 1 }),
            ..Overrides::default()
        }
        .apply(&mut s);
        assert_eq!(s.link.loss, None);
        assert!(
            !s.sack,
            "an override left unset leaves the scenario as it was"
        );
    }

    #[test]
    fn windows_are_sizes_in_powers_of_1024_or_auto() {
        for (s, n) in [
            ("64K", 65_536),
            ("64KiB", 65_536),
            ("64k", 65_536),
            ("256K", 262_144),
            ("1M", 1 << 20),
            ("65536", 65_536),
            (" 4K ", 4096),
            ("64M", 64 << 20),
        ] {
            assert_eq!(parse_window(s), Ok(WindowArg(Some(n))), "{s}");
        }
        assert_eq!(parse_window("auto"), Ok(WindowArg(None)));
        for bad in ["", "big", "64Kbit", "-64K", "1K", "100M", "0"] {
            let e = parse_window(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
            assert!(e.contains("auto"), "the hint names auto: {e}");
        }
        assert!(parse_window("1K").unwrap_err().contains("4KiB to 64MiB"));
        assert_eq!(parse_fifo("bytes"), Ok(FifoKind::Bytes));
        assert_eq!(parse_fifo("packets"), Ok(FifoKind::Packets));
        assert!(parse_fifo("pfifo").unwrap_err().contains("packets"));
        assert_eq!(parse_on_off("on"), Ok(true));
        assert_eq!(parse_on_off("off"), Ok(false));
        assert!(parse_on_off("yes").unwrap_err().contains("on, off"));
    }

    #[test]
    fn window_and_ecn_overrides() {
        let base = sluice_lab::scenario::ack_priority();
        let windows = |o: Overrides| {
            let mut s = base.clone();
            o.apply(&mut s);
            let w = |d: Dir| s.flows.iter().find(|f| f.dir == d).unwrap().window;
            (w(Dir::Down), w(Dir::Up), s.ecn)
        };
        let (down, up) = (
            base.flows
                .iter()
                .find(|f| f.dir == Dir::Down)
                .unwrap()
                .window,
            base.flows.iter().find(|f| f.dir == Dir::Up).unwrap().window,
        );
        assert!(!base.ecn);
        assert_eq!(
            windows(Overrides::default()),
            (down, up, false),
            "untouched"
        );
        let all = Overrides {
            window: Some(WindowArg(Some(128 << 10))),
            ecn: Some(true),
            ..Overrides::default()
        };
        assert_eq!(windows(all), (Some(128 << 10), Some(128 << 10), true));
        let mut s = base.clone();
        let flip = match s.link.fifo {
            FifoKind::Packets => FifoKind::Bytes,
            FifoKind::Bytes => FifoKind::Packets,
        };
        Overrides {
            fifo: Some(flip),
            ..Overrides::default()
        }
        .apply(&mut s);
        assert_eq!(s.link.fifo, flip);
        // A direction's own flag wins over --window; `auto` clears.
        let mixed = Overrides {
            window: Some(WindowArg(Some(128 << 10))),
            window_up: Some(WindowArg(None)),
            ..Overrides::default()
        };
        assert_eq!(windows(mixed), (Some(128 << 10), None, false));
        let down_only = Overrides {
            window_down: Some(WindowArg(Some(32 << 10))),
            ecn: Some(false),
            ..Overrides::default()
        };
        assert_eq!(windows(down_only), (Some(32 << 10), up, false));
        // --streams: every bulk flow's connections, in range.
        let mut s = sluice_lab::scenario::rrul_heavy();
        Overrides {
            streams: Some(30),
            ..Overrides::default()
        }
        .apply(&mut s);
        assert!(s.flows.len() == 2 && s.flows.iter().all(|f| f.streams == 30));
        assert_eq!(parse_streams("30"), Ok(30));
        for bad in ["0", "129", "many", ""] {
            assert!(
                parse_streams(bad).unwrap_err().contains("1 to 128"),
                "{bad}"
            );
        }
    }
}
