//! Address matching: prefixes, pf tables, and interface addresses.
//!
//! # Principles
//!
//! - A prefix of one family never matches an address of the other.
//! - Tables follow pf's radix-table semantics (pf.conf(5) "TABLES"): the
//!   **most specific** entry containing the address decides; if that entry is
//!   negated (`!10.1.2.3`) the address is *not* in the table. Lookup walks the
//!   distinct prefix lengths present, longest first: at most 33 (IPv4) or 129
//!   (IPv6) ordered-map probes, whatever the table size.
//! - An interface's addresses (`from $ext_if`) are the host addresses of its
//!   configured networks plus the addresses the engine learned in bridge mode
//!   (capped at [`MAX_LEARNED_ADDRS`], so a flood of spoofed sources cannot grow
//!   memory). Its networks (`$ext_if:network`) are the configured networks;
//!   learned addresses count as host routes.

use sluice_conf::ir::IpNet;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Addresses learned per interface in bridge mode; a real segment rarely has
/// more than a handful, a flood of spoofed sources must not grow memory.
pub const MAX_LEARNED_ADDRS: usize = 256;

/// An address as a 128-bit number plus its family width.
fn bits(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    }
}

/// Mask of the top `len` bits of a `width`-bit address (len clamped to width).
fn mask(len: u8, width: u8) -> u128 {
    let len = u32::from(len.min(width));
    if len == 0 {
        return 0;
    }
    // `len` ones (shift 0..=127), moved to the top of a `width`-bit number.
    (u128::MAX >> (128 - len)) << (u32::from(width) - len)
}

/// A checked prefix: family, masked bits, length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prefix {
    v6: bool,
    net: u128,
    /// Precomputed: matching is one AND and one compare.
    mask: u128,
    len: u8,
}

impl Prefix {
    pub(crate) fn new(n: &IpNet) -> Prefix {
        let (b, width) = bits(n.addr);
        let len = n.prefix.min(width);
        let m = mask(len, width);
        Prefix {
            v6: width == 128,
            net: b & m,
            mask: m,
            len,
        }
    }

    pub(crate) fn is_v6(&self) -> bool {
        self.v6
    }

    pub(crate) fn contains(&self, addr: IpAddr) -> bool {
        let (b, width) = bits(addr);
        (width == 128) == self.v6 && b & self.mask == self.net
    }
}

/// One family's entries of a table, grouped by prefix length (longest first).
#[derive(Clone, Debug, Default)]
struct FamilyTable {
    /// (prefix length, masked address → negated), sorted by length descending.
    by_len: Vec<(u8, BTreeMap<u128, bool>)>,
}

impl FamilyTable {
    fn insert(&mut self, net: u128, len: u8, negated: bool) {
        let pos = self.by_len.iter().position(|(l, _)| *l <= len);
        match pos {
            Some(i) if self.by_len[i].0 == len => {
                self.by_len[i].1.insert(net, negated);
            }
            Some(i) => self
                .by_len
                .insert(i, (len, BTreeMap::from([(net, negated)]))),
            None => self.by_len.push((len, BTreeMap::from([(net, negated)]))),
        }
    }

    /// The negation flag of the most specific entry containing `b`.
    fn lookup(&self, b: u128, width: u8) -> Option<bool> {
        // Bounded by the number of distinct prefix lengths (≤ width + 1).
        self.by_len
            .iter()
            .find_map(|(len, m)| m.get(&(b & mask(*len, width))).copied())
    }
}

/// A pf table: `<name> { 10.0.0.0/8, !10.1.0.0/16 }`.
#[derive(Clone, Debug, Default)]
pub(crate) struct AddrTable {
    v4: FamilyTable,
    v6: FamilyTable,
}

impl AddrTable {
    pub(crate) fn new(entries: &[(IpNet, bool)]) -> AddrTable {
        let mut t = AddrTable::default();
        for (net, negated) in entries {
            let p = Prefix::new(net);
            let fam = if p.v6 { &mut t.v6 } else { &mut t.v4 };
            fam.insert(p.net, p.len, *negated);
        }
        t
    }

    /// Adds `addr` as a host entry (`overload`); an existing entry for
    /// exactly that host is replaced (a negated one included: the source
    /// overloaded).
    pub(crate) fn add_host(&mut self, addr: IpAddr) {
        let (b, width) = bits(addr);
        let fam = if width == 128 {
            &mut self.v6
        } else {
            &mut self.v4
        };
        fam.insert(b, width, false);
    }

    /// Most-specific-match membership.
    pub(crate) fn contains(&self, addr: IpAddr) -> bool {
        let (b, width) = bits(addr);
        let fam = if width == 128 { &self.v6 } else { &self.v4 };
        fam.lookup(b, width) == Some(false)
    }
}

/// What the classifier knows about one interface.
#[derive(Clone, Debug)]
pub(crate) struct Iface {
    pub(crate) name: String,
    configured: Vec<(IpAddr, Prefix)>,
    learned: Vec<IpAddr>,
}

impl Iface {
    pub(crate) fn new(name: &str) -> Iface {
        Iface {
            name: name.to_string(),
            configured: Vec::new(),
            learned: Vec::new(),
        }
    }

    pub(crate) fn set_addrs(&mut self, nets: &[IpNet]) {
        self.configured = nets.iter().map(|n| (n.addr, Prefix::new(n))).collect();
    }

    /// Add a learned address; false if known already or the cap is reached.
    pub(crate) fn learn(&mut self, addr: IpAddr) -> bool {
        if self.has_addr(addr) || self.learned.len() >= MAX_LEARNED_ADDRS {
            return false;
        }
        self.learned.push(addr);
        true
    }

    /// `from IF`: one of the interface's own addresses.
    pub(crate) fn has_addr(&self, addr: IpAddr) -> bool {
        self.configured.iter().any(|(a, _)| *a == addr) || self.learned.contains(&addr)
    }

    /// `from IF:network`: inside one of its networks.
    pub(crate) fn in_network(&self, addr: IpAddr) -> bool {
        self.configured.iter().any(|(_, p)| p.contains(addr)) || self.learned.contains(&addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str, prefix: u8) -> IpNet {
        IpNet {
            addr: s.parse().unwrap(),
            prefix,
        }
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn masks() {
        assert_eq!(mask(0, 32), 0);
        assert_eq!(mask(8, 32), 0xff00_0000);
        assert_eq!(mask(32, 32), 0xffff_ffff);
        assert_eq!(mask(40, 32), 0xffff_ffff);
        assert_eq!(mask(128, 128), u128::MAX);
        assert_eq!(mask(1, 128), 1u128 << 127);
        assert_eq!(mask(0, 128), 0);
    }

    #[test]
    fn prefix_contains_and_families() {
        let p = Prefix::new(&net("10.1.2.3", 16));
        assert!(p.contains(ip("10.1.255.1")));
        assert!(!p.contains(ip("10.2.0.1")));
        assert!(!p.contains(ip("::ffff:10.1.0.1")));
        let any4 = Prefix::new(&net("0.0.0.0", 0));
        assert!(any4.contains(ip("1.2.3.4")));
        assert!(!any4.contains(ip("::1")));
        let p6 = Prefix::new(&net("2001:db8::", 32));
        assert!(p6.contains(ip("2001:db8:ffff::1")));
        assert!(!p6.contains(ip("2001:db9::1")));
    }

    #[test]
    fn table_most_specific_wins() {
        let t = AddrTable::new(&[
            (net("10.0.0.0", 8), false),
            (net("10.1.0.0", 16), true),
            (net("10.1.2.0", 24), false),
            (net("2001:db8::", 32), false),
            (net("2001:db8::1", 128), true),
        ]);
        assert!(t.contains(ip("10.9.9.9")));
        assert!(!t.contains(ip("10.1.9.9")), "negated /16 is more specific");
        assert!(t.contains(ip("10.1.2.9")), "/24 beats the negated /16");
        assert!(!t.contains(ip("11.0.0.1")));
        assert!(t.contains(ip("2001:db8::2")));
        assert!(!t.contains(ip("2001:db8::1")));
        assert!(!AddrTable::new(&[]).contains(ip("1.1.1.1")));
    }

    #[test]
    fn iface_addrs_networks_and_learning_cap() {
        let mut i = Iface::new("em0");
        i.set_addrs(&[net("192.0.2.10", 24)]);
        assert!(i.has_addr(ip("192.0.2.10")));
        assert!(!i.has_addr(ip("192.0.2.11")));
        assert!(i.in_network(ip("192.0.2.11")));
        assert!(!i.in_network(ip("192.0.3.1")));
        assert!(!i.learn(ip("192.0.2.10")), "already known");
        let mut added = 0;
        for n in 0..1000u32 {
            if i.learn(IpAddr::V4((0x0a00_0000 + n).into())) {
                added += 1;
            }
        }
        assert_eq!(added, MAX_LEARNED_ADDRS);
        assert!(i.has_addr(ip("10.0.0.5")));
        assert!(i.in_network(ip("10.0.0.5")));
    }
}
