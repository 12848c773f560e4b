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
//!   configured networks plus the addresses the engine learned in bridge mode.
//!   Its networks (`$ext_if:network`) are the configured networks; learned
//!   addresses count as host routes.
//!
//! # Principles of the learned set
//!
//! - **Only what the caller vouches for is added** ([`Iface::learn`]: the
//!   engine passes addresses claimed in ARP/ND, see `sluice_wire::neighbor_claim`);
//!   ordinary traffic may only keep a known entry alive ([`Iface::refresh`]).
//! - **Bounded:** at most [`MAX_LEARNED_ADDRS`] entries per interface; a
//!   lookup is one ordered-map probe.
//! - **Forgotten:** an entry not confirmed or refreshed for
//!   [`LEARNED_ADDR_TTL`] is removed by [`Iface::expire`] (the BSD ARP cache
//!   lifetime: FreeBSD `net.link.ether.inet.max_age` = 1200 s, OpenBSD
//!   `arpt_keep` 20 min — a host silent that long would have left a router's
//!   neighbour cache too).
//! - **Full:** a newcomer replaces the least recently seen entry, unless even
//!   that one was seen within [`LEARNED_ADDR_HOLD`]: then the newcomer is
//!   refused and counted. Slow churn (DHCP leases, IPv6 temporary addresses)
//!   rotates through; a flood of claims can take free and idle slots but never
//!   displaces a host that is talking.

use sluice_conf::ir::IpNet;
use sluice_time::{Duration, Instant};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Addresses learned per interface in bridge mode; a real segment rarely has
/// more than a handful, a flood of spoofed sources must not grow memory.
pub const MAX_LEARNED_ADDRS: usize = 256;
/// A learned address neither confirmed nor seen sending for this long is forgotten.
pub const LEARNED_ADDR_TTL: Duration = Duration::from_secs(20 * 60);
/// A learned address seen this recently is never displaced by a newcomer.
pub const LEARNED_ADDR_HOLD: Duration = Duration::from_secs(60);

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

/// What [`Iface::learn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learn {
    /// A new entry (possibly replacing the least recently seen one).
    Added,
    /// A known entry, confirmed again.
    Refreshed,
    /// A configured address: nothing to learn.
    Configured,
    /// The set is full of entries seen within [`LEARNED_ADDR_HOLD`].
    Refused,
}

/// A learned address: when it was first learned and last confirmed or seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnedAddr {
    pub addr: IpAddr,
    pub since: Instant,
    pub seen: Instant,
}

/// What the classifier knows about one interface.
#[derive(Clone, Debug)]
pub(crate) struct Iface {
    pub(crate) name: String,
    configured: Vec<(IpAddr, Prefix)>,
    /// Address → (first learned, last confirmed or seen).
    learned: BTreeMap<IpAddr, (Instant, Instant)>,
    /// Newcomers refused because every slot was held.
    pub(crate) refused: u64,
}

impl Iface {
    pub(crate) fn new(name: &str) -> Iface {
        Iface {
            name: name.to_string(),
            configured: Vec::new(),
            learned: BTreeMap::new(),
            refused: 0,
        }
    }

    pub(crate) fn set_addrs(&mut self, nets: &[IpNet]) {
        self.configured = nets.iter().map(|n| (n.addr, Prefix::new(n))).collect();
    }

    /// Adds or confirms an address the caller vouches for, seen at `now`.
    pub(crate) fn learn(&mut self, addr: IpAddr, now: Instant) -> Learn {
        if self.configured.iter().any(|(a, _)| *a == addr) {
            return Learn::Configured;
        }
        if let Some(e) = self.learned.get_mut(&addr) {
            e.1 = e.1.max(now);
            return Learn::Refreshed;
        }
        if self.learned.len() >= MAX_LEARNED_ADDRS {
            // Only when full, only for a new address: ≤ MAX_LEARNED_ADDRS steps.
            let oldest = self
                .learned
                .iter()
                .min_by_key(|(_, (_, seen))| *seen)
                .map(|(a, (_, seen))| (*a, *seen));
            match oldest {
                Some((a, seen)) if now.saturating_since(seen) >= LEARNED_ADDR_HOLD => {
                    self.learned.remove(&a);
                }
                _ => {
                    self.refused += 1;
                    return Learn::Refused;
                }
            }
        }
        self.learned.insert(addr, (now, now));
        Learn::Added
    }

    /// Traffic from a learned address keeps it alive; never adds one.
    pub(crate) fn refresh(&mut self, addr: IpAddr, now: Instant) {
        if let Some(e) = self.learned.get_mut(&addr) {
            e.1 = e.1.max(now);
        }
    }

    /// Forgets entries not seen for [`LEARNED_ADDR_TTL`]; returns how many.
    pub(crate) fn expire(&mut self, now: Instant) -> usize {
        let before = self.learned.len();
        self.learned
            .retain(|_, (_, seen)| now.saturating_since(*seen) < LEARNED_ADDR_TTL);
        before - self.learned.len()
    }

    /// The configured networks, as given.
    pub(crate) fn configured(&self) -> Vec<IpNet> {
        self.configured
            .iter()
            .map(|(addr, p)| IpNet {
                addr: *addr,
                prefix: p.len,
            })
            .collect()
    }

    pub(crate) fn learned(&self) -> impl Iterator<Item = LearnedAddr> + '_ {
        self.learned.iter().map(|(a, (since, seen))| LearnedAddr {
            addr: *a,
            since: *since,
            seen: *seen,
        })
    }

    /// `from IF`: one of the interface's own addresses.
    pub(crate) fn has_addr(&self, addr: IpAddr) -> bool {
        self.configured.iter().any(|(a, _)| *a == addr) || self.learned.contains_key(&addr)
    }

    /// `from IF:network`: inside one of its networks.
    pub(crate) fn in_network(&self, addr: IpAddr) -> bool {
        self.configured.iter().any(|(_, p)| p.contains(addr)) || self.learned.contains_key(&addr)
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

    fn secs(s: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(s)
    }
    fn v4(n: u32) -> IpAddr {
        IpAddr::V4((0x0a00_0000 + n).into())
    }

    #[test]
    fn iface_addrs_networks_and_learning_cap() {
        let mut i = Iface::new("em0");
        i.set_addrs(&[net("192.0.2.10", 24)]);
        assert!(i.has_addr(ip("192.0.2.10")));
        assert!(!i.has_addr(ip("192.0.2.11")));
        assert!(i.in_network(ip("192.0.2.11")));
        assert!(!i.in_network(ip("192.0.3.1")));
        assert_eq!(i.configured(), [net("192.0.2.10", 24)]);
        assert_eq!(i.learn(ip("192.0.2.10"), secs(1)), Learn::Configured);
        let t = secs(1);
        let added = (0..1000u32)
            .filter(|n| i.learn(v4(*n), t) == Learn::Added)
            .count();
        assert_eq!(added, MAX_LEARNED_ADDRS);
        assert_eq!(i.refused, 1000 - MAX_LEARNED_ADDRS as u64);
        assert!(i.has_addr(ip("10.0.0.5")));
        assert!(i.in_network(ip("10.0.0.5")));
        assert_eq!(i.learn(ip("10.0.0.5"), t), Learn::Refreshed);
        assert_eq!(i.learned().count(), MAX_LEARNED_ADDRS);
    }

    #[test]
    fn refresh_never_adds() {
        let mut i = Iface::new("em0");
        i.refresh(ip("10.0.0.1"), secs(1));
        assert!(!i.has_addr(ip("10.0.0.1")));
        assert_eq!(i.learned().count(), 0);
    }

    #[test]
    fn entries_expire_after_the_ttl_unless_seen() {
        let mut i = Iface::new("em0");
        let ttl = LEARNED_ADDR_TTL.as_nanos() / 1_000_000_000;
        i.learn(ip("10.0.0.1"), secs(0));
        i.learn(ip("10.0.0.2"), secs(0));
        // Traffic keeps .2 alive; .1 stays silent.
        i.refresh(ip("10.0.0.2"), secs(ttl - 1));
        assert_eq!(i.expire(secs(ttl - 1)), 0);
        assert_eq!(i.expire(secs(ttl)), 1);
        assert!(!i.has_addr(ip("10.0.0.1")));
        assert!(i.has_addr(ip("10.0.0.2")));
        let e = i.learned().next().unwrap();
        assert_eq!((e.since, e.seen), (secs(0), secs(ttl - 1)));
        assert_eq!(i.expire(secs(2 * ttl - 1)), 1);
        assert_eq!(i.learned().count(), 0);
    }

    #[test]
    fn full_set_replaces_the_least_recently_seen_idle_entry() {
        let mut i = Iface::new("em0");
        let n = MAX_LEARNED_ADDRS as u32;
        // Churn: one new address a minute, as DHCP or IPv6 privacy addresses.
        for k in 0..n {
            assert_eq!(i.learn(v4(k), secs(60 * u64::from(k))), Learn::Added);
        }
        let t = secs(60 * u64::from(n));
        // Entry 0 talks; entry 1 is now the least recently seen.
        i.refresh(v4(0), t);
        assert_eq!(i.learn(v4(n), t), Learn::Added);
        assert!(i.has_addr(v4(0)) && !i.has_addr(v4(1)) && i.has_addr(v4(n)));
        // Churn goes on for twice the set's size: always the oldest goes.
        for k in n + 1..3 * n {
            let now = secs(60 * u64::from(k));
            assert_eq!(i.learn(v4(k), now), Learn::Added, "{k}");
            assert_eq!(i.learned().count(), MAX_LEARNED_ADDRS);
        }
        // The last MAX_LEARNED_ADDRS newcomers; entry 0 went too once idle.
        assert!(!i.has_addr(v4(0)) && !i.has_addr(v4(2 * n - 1)) && i.has_addr(v4(2 * n)));
    }

    #[test]
    fn a_flood_never_displaces_a_host_seen_within_the_hold() {
        let mut i = Iface::new("em0");
        i.learn(ip("192.168.1.1"), secs(0));
        // 10 000 spoofed claims, one every 60 ms (ten minutes); the real host
        // talks a little more often than the hold (every 980 claims: 58.8 s).
        assert!(Duration::from_millis(60 * 980) < LEARNED_ADDR_HOLD);
        for k in 0..10_000u32 {
            let now = Instant::ZERO + Duration::from_millis(60 * u64::from(k));
            if k.is_multiple_of(980) {
                i.refresh(ip("192.168.1.1"), now);
            }
            i.learn(v4(k), now);
            assert!(i.has_addr(ip("192.168.1.1")), "displaced at claim {k}");
        }
        assert!(i.refused > 0);
        assert_eq!(i.learned().count(), MAX_LEARNED_ADDRS);
    }
}
