//! Numbers with units, and the small name tables pf.conf users rely on.
//!
//! # Principles
//! - Rates and durations are read by `sluice_time::units`, the one grammar
//!   shared with the lab and `show`; this module adds pf's percentages.
//! - Every parser returns `None` on anything it does not understand; the
//!   caller turns that into a located diagnostic.

use sluice_time::units::{self as tu, decimal};
use sluice_time::{Duration, Overhead, Rate};

/// A bandwidth value: absolute or percent of the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bw {
    Abs(Rate),
    /// Hundredths of a percent (`12.5%` = 1250).
    Pct(u32),
}

/// `100Kb`, `1Mb`, `10Gb`, `2500000` (bits), `10K`/`5M`/`1G` (OpenBSD 5.5+), `50%`.
pub fn bandwidth(s: &str) -> Option<Bw> {
    if let Some(pct) = s.strip_suffix('%') {
        let (m, scale) = decimal(pct).ok()?;
        let bp = m.checked_mul(100)? / scale;
        return u32::try_from(bp).ok().map(Bw::Pct);
    }
    tu::parse_rate(s).ok().map(Bw::Abs)
}

/// `20ms`, `1s`, `500us`, `100` (bare number = `default_unit_ns`).
pub fn duration(s: &str, default_unit_ns: u64) -> Option<Duration> {
    tu::parse_duration(s, Duration::from_nanos(default_unit_ns)).ok()
}

/// A plain unsigned integer, decimal or `0x` hex.
pub fn number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok();
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A probability `0.01`, `1%` or `0` as parts per million.
pub fn probability_ppm(s: &str) -> Option<u32> {
    let (num, pct) = match s.strip_suffix('%') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let (m, scale) = decimal(num).ok()?;
    let ppm = if pct {
        m.checked_mul(10_000)? / scale
    } else {
        m.checked_mul(1_000_000)? / scale
    };
    if ppm > 1_000_000 {
        return None;
    }
    u32::try_from(ppm).ok()
}

/// TCP flags letters of pf.conf(5): F S R P A U E W.
pub fn tcp_flags(s: &str) -> Option<u8> {
    let mut v = 0u8;
    for c in s.chars() {
        v |= match c {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            'A' => 0x10,
            'U' => 0x20,
            'E' => 0x40,
            'W' => 0x80,
            _ => return None,
        };
    }
    Some(v)
}

pub fn tcp_flags_str(v: u8) -> String {
    "FSRPAUEW"
        .chars()
        .enumerate()
        .filter(|(i, _)| v & (1 << i) != 0)
        .map(|(_, c)| c)
        .collect()
}

const PROTOS: &[(&str, u8)] = &[
    ("icmp", 1),
    ("igmp", 2),
    ("ipencap", 4),
    ("ipip", 4),
    ("tcp", 6),
    ("egp", 8),
    ("udp", 17),
    ("ipv6", 41),
    ("rsvp", 46),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmp6", 58),
    ("ipv6-icmp", 58),
    ("eigrp", 88),
    ("ospf", 89),
    ("etherip", 97),
    ("pim", 103),
    ("ipcomp", 108),
    ("vrrp", 112),
    ("carp", 112),
    ("l2tp", 115),
    ("sctp", 132),
    ("udplite", 136),
    ("pfsync", 240),
];

pub fn proto(s: &str) -> Option<u8> {
    number_or_name(s, PROTOS)
}

/// A number that fits `T`, or a name of `table` (/etc/protocols and
/// /etc/services style).
fn number_or_name<T: Copy + TryFrom<u64>>(s: &str, table: &[(&str, T)]) -> Option<T> {
    if let Some(n) = number(s) {
        return T::try_from(n).ok();
    }
    table.iter().find(|(n, _)| *n == s).map(|&(_, v)| v)
}

/// The canonical name of a protocol number, if it has one.
pub fn proto_name(p: u8) -> Option<&'static str> {
    match p {
        // `carp` and `vrrp` share 112; prefer the pf spelling.
        112 => Some("carp"),
        4 => Some("ipencap"),
        58 => Some("icmp6"),
        _ => PROTOS.iter().find(|(_, v)| *v == p).map(|&(n, _)| n),
    }
}

/// ICMP type names of pf.conf(5) (`icmp-type`).
const ICMP_TYPES: &[(&str, u8)] = &[
    ("echorep", 0),
    ("unreach", 3),
    ("squench", 4),
    ("redir", 5),
    ("althost", 6),
    ("echoreq", 8),
    ("routeradv", 9),
    ("routersol", 10),
    ("timex", 11),
    ("paramprob", 12),
    ("timereq", 13),
    ("timerep", 14),
    ("inforeq", 15),
    ("inforep", 16),
    ("maskreq", 17),
    ("maskrep", 18),
    ("trace", 30),
    ("dataconv", 31),
    ("mobredir", 32),
    ("ipv6-where", 33),
    ("ipv6-here", 34),
    ("mobregreq", 35),
    ("mobregrep", 36),
    ("skip", 39),
    ("photuris", 40),
];

/// ICMPv6 type names of pf.conf(5) (`icmp6-type`).
const ICMP6_TYPES: &[(&str, u8)] = &[
    ("unreach", 1),
    ("toobig", 2),
    ("timex", 3),
    ("paramprob", 4),
    ("echoreq", 128),
    ("echorep", 129),
    ("groupqry", 130),
    ("listqry", 130),
    ("grouprep", 131),
    ("listenrep", 131),
    ("groupterm", 132),
    ("listendone", 132),
    ("routersol", 133),
    ("routeradv", 134),
    ("neighbrsol", 135),
    ("neighbradv", 136),
    ("redir", 137),
    ("routrrenum", 138),
    ("wrureq", 139),
    ("fqdnreq", 139),
    ("niqry", 139),
    ("wrurep", 140),
    ("fqdnrep", 140),
    ("nirep", 140),
    ("mtraceresp", 200),
    ("mtrace", 201),
];

/// An ICMP (`v6 = false`) or ICMPv6 type by name or number.
pub fn icmp_type(s: &str, v6: bool) -> Option<u8> {
    if let Some(n) = number(s) {
        return u8::try_from(n).ok();
    }
    let table = if v6 { ICMP6_TYPES } else { ICMP_TYPES };
    table.iter().find(|(n, _)| *n == s).map(|&(_, v)| v)
}

/// A small /etc/services: the names people write in pf.conf.
const SERVICES: &[(&str, u16)] = &[
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("time", 37),
    ("whois", 43),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("gopher", 70),
    ("finger", 79),
    ("http", 80),
    ("www", 80),
    ("kerberos", 88),
    ("pop3", 110),
    ("sunrpc", 111),
    ("auth", 113),
    ("ident", 113),
    ("nntp", 119),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ssn", 139),
    ("imap", 143),
    ("snmp", 161),
    ("snmptrap", 162),
    ("bgp", 179),
    ("ldap", 389),
    ("https", 443),
    ("microsoft-ds", 445),
    ("isakmp", 500),
    ("syslog", 514),
    ("submission", 587),
    ("ldaps", 636),
    ("domain-s", 853),
    ("rsync", 873),
    ("imaps", 993),
    ("pop3s", 995),
    ("socks", 1080),
    ("openvpn", 1194),
    ("ms-sql-s", 1433),
    ("l2tp", 1701),
    ("pptp", 1723),
    ("nfsd", 2049),
    ("mysql", 3306),
    ("ms-wbt-server", 3389),
    ("ipsec-nat-t", 4500),
    ("sip", 5060),
    ("xmpp-client", 5222),
    ("postgresql", 5432),
    ("spamd", 8025),
    ("spamd-cfg", 8026),
    ("x11", 6000),
    ("irc", 6667),
    ("http-alt", 8080),
];

pub fn port(s: &str) -> Option<u16> {
    number_or_name(s, SERVICES)
}

/// cake's overhead keywords (tc-cake(8)), byte counts and ATM framing.
pub fn overhead_preset(name: &str) -> Option<Overhead> {
    Some(match name {
        "raw" => Overhead::plain(0),
        "ethernet" => Overhead::plain(38),
        "docsis" => Overhead::plain(18),
        "pppoe-ptm" => Overhead::plain(30),
        "bridged-ptm" => Overhead::plain(22),
        "pppoe-vcmux" => Overhead::atm(32),
        "pppoe-llcsnap" => Overhead::atm(40),
        "pppoa-vcmux" => Overhead::atm(10),
        "pppoa-llc" => Overhead::atm(14),
        "bridged-vcmux" => Overhead::atm(24),
        "bridged-llcsnap" => Overhead::atm(32),
        "ipoa-vcmux" => Overhead::atm(8),
        "ipoa-llcsnap" => Overhead::atm(16),
        "conservative" => Overhead::atm(48),
        _ => return None,
    })
}

/// `10.0.0.0/8`, `192.0.2.1`, `2001:db8::/32`.
pub fn ipnet(s: &str) -> Option<crate::ir::IpNet> {
    let (a, pfx) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let addr: std::net::IpAddr = match a.parse() {
        Ok(a) => a,
        // pf's shorthand `10/8`, `192.168/16`: missing IPv4 octets are zero.
        Err(_) if pfx.is_some() && a.split('.').count() < 4 => {
            let parts: Vec<&str> = a.split('.').collect();
            let mut full = parts.join(".");
            for _ in parts.len()..4 {
                full.push_str(".0");
            }
            full.parse().ok()?
        }
        Err(_) => return None,
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match pfx {
        Some(p) => {
            let n: u8 = p.parse().ok()?;
            if n > max {
                return None;
            }
            n
        }
        None => max,
    };
    Some(crate::ir::IpNet { addr, prefix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_units_do_not_wrap() {
        assert_eq!(bandwidth("10Gb"), Some(Bw::Abs(Rate::gbps(10))));
        assert_eq!(bandwidth("5G"), Some(Bw::Abs(Rate::gbps(5))));
        assert_eq!(bandwidth("4294967296"), Some(Bw::Abs(Rate::bps(1 << 32))));
        assert_eq!(bandwidth("100Kb"), Some(Bw::Abs(Rate::kbps(100))));
        assert_eq!(bandwidth("1.5Mb"), Some(Bw::Abs(Rate::kbps(1500))));
        assert_eq!(bandwidth("970"), Some(Bw::Abs(Rate::bps(970))));
        assert_eq!(bandwidth("12.5%"), Some(Bw::Pct(1250)));
        assert_eq!(bandwidth("100%"), Some(Bw::Pct(10000)));
        assert_eq!(bandwidth("99999999999999999999999Gb"), None);
        assert_eq!(bandwidth("10Xb"), None);
        // 30 digits times a giga unit overflows u128: refused, never a panic.
        assert_eq!(bandwidth("999999999999999999999999999999Gb"), None);
        assert_eq!(duration("999999999999999999999999999999s", 1), None);
        assert_eq!(probability_ppm("999999999999999999999999999999"), None);
        assert_eq!(bandwidth("Kb"), None);
        assert_eq!(bandwidth("."), None);
    }

    #[test]
    fn durations_and_probabilities() {
        assert_eq!(duration("20ms", 1), Some(Duration::from_millis(20)));
        assert_eq!(duration("100", 1_000_000), Some(Duration::from_millis(100)));
        assert_eq!(duration("1.5s", 1), Some(Duration::from_millis(1500)));
        assert_eq!(probability_ppm("0.01"), Some(10_000));
        assert_eq!(probability_ppm("1%"), Some(10_000));
        assert_eq!(probability_ppm("1.5"), None);
    }

    #[test]
    fn flags_and_names() {
        assert_eq!(tcp_flags("SA"), Some(0x12));
        assert_eq!(tcp_flags_str(0x12), "SA");
        assert_eq!(tcp_flags("X"), None);
        assert_eq!(port("www"), Some(80));
        assert_eq!(port("65536"), None);
        assert_eq!(proto("udp"), Some(17));
        assert_eq!(proto_name(6), Some("tcp"));
        assert_eq!(overhead_preset("pppoe-vcmux"), Some(Overhead::atm(32)));
        assert_eq!(number("0x10"), Some(16));
    }
}
