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
//! - **Only local addresses** (review M4): a claim is learned only inside
//!   the interface's configured networks; with none configured, only in the
//!   private (RFC 1918), shared (RFC 6598), link-local and ULA (RFC 4193)
//!   ranges. A LAN host claiming 8.8.8.8 is refused and counted. (So in
//!   bridge mode without `--iface-addr`, global IPv6 addresses of LAN hosts
//!   are not learned.)
//! - **Fair when full.** Each claim is tied to the source MAC of its frame.
//!   One MAC holds at most [`MAX_ADDRS_PER_MAC`] (1/8 of the set); beyond
//!   that its claim replaces its own least recently refreshed entry if that
//!   one has been idle for [`LEARNED_ADDR_HOLD`], else it is refused and
//!   counted. A newcomer to a full set takes the least recently refreshed
//!   entry of the MAC holding the most, if that entry is idle or that MAC
//!   holds more than a quarter of its quota (a bulk claimer); else it is
//!   refused. So one host keeping hundreds of claims fresh holds 32 slots
//!   and cannot shut out a newcomer, and a host that is talking is never
//!   displaced by a flood (spoofing many MACs takes only free and idle
//!   slots).
//! - **O(1) amortised per claim** (review M6): each MAC keeps a lazy
//!   recency queue (an entry is queued when added and at most once a second
//!   when refreshed; stale items are skipped when popped and compacted when
//!   they outnumber the live ones), and the MAC with the most entries is
//!   the last of an ordered set (O(log MACs)). No scan of the set.

use sluice_conf::ir::IpNet;
use sluice_time::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;

/// Addresses learned per interface in bridge mode; a real segment rarely has
/// more than a handful, a flood of spoofed sources must not grow memory.
pub const MAX_LEARNED_ADDRS: usize = 256;
/// A learned address neither confirmed nor seen sending for this long is forgotten.
pub const LEARNED_ADDR_TTL: Duration = Duration::from_secs(20 * 60);

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
    /// A new entry (possibly replacing another: see the principles).
    Added,
    /// A known entry, confirmed again.
    Refreshed,
    /// A configured address: nothing to learn.
    Configured,
    /// Outside the interface's networks (or, with none configured, outside
    /// the private, ULA and link-local ranges): refused and counted.
    Refused,
}

/// A learned address: when it was first learned and last confirmed or seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnedAddr {
    pub addr: IpAddr,
    pub since: Instant,
    pub seen: Instant,
}

/// The Ethernet address a claim came from.
pub type Mac = [u8; 6];

/// One learned address.
#[derive(Clone, Copy, Debug)]
struct Entry {
    since: Instant,
    seen: Instant,
    mac: Mac,
    /// The instant of its newest place in its MAC's recency queue.
    queued: Instant,
}

/// A lazy recency queue: an address is pushed when added and when
/// refreshed (at most once per [`REQUEUE`]); an item is live while its
/// instant is the entry's `queued`, stale items are skipped when met and
/// dropped, in order, when they outnumber the live ones.
#[derive(Clone, Debug, Default)]
struct Lazy(VecDeque<(IpAddr, Instant)>);

impl Lazy {
    fn live(learned: &BTreeMap<IpAddr, Entry>, a: IpAddr, at: Instant) -> Option<&Entry> {
        learned.get(&a).filter(|e| e.queued == at)
    }

    /// Queue `a` at `at`; compacts when more than `4 live + 16` items.
    fn push(&mut self, a: IpAddr, at: Instant, live: usize, learned: &BTreeMap<IpAddr, Entry>) {
        self.0.push_back((a, at));
        if self.0.len() > 4 * live + 16 {
            self.0
                .retain(|&(a, at)| Lazy::live(learned, a, at).is_some());
        }
    }

    /// The least recently queued live entry: (address, last seen). Each
    /// stale item met is dropped (and counted in `work`).
    fn front(
        &mut self,
        learned: &BTreeMap<IpAddr, Entry>,
        work: &mut u64,
    ) -> Option<(IpAddr, Instant)> {
        while let Some(&(a, at)) = self.0.front() {
            *work += 1;
            if let Some(e) = Lazy::live(learned, a, at) {
                return Some((a, e.seen));
            }
            self.0.pop_front();
        }
        None
    }
}

/// One MAC's entries: how many, and their recency.
#[derive(Clone, Debug, Default)]
struct MacSlots {
    count: u32,
    lru: Lazy,
}

/// Entries one MAC may hold: a host flooding claims churns its own slots.
pub const MAX_ADDRS_PER_MAC: u32 = (MAX_LEARNED_ADDRS / 8) as u32;

/// A MAC holding more than this many entries is claiming in bulk: when the
/// set is full, its stalest entry goes even if fresh.
const BULK: u32 = MAX_ADDRS_PER_MAC / 4;

/// A learned address refreshed this recently is displaced only by a
/// claim of a bulk claimer (see the principles).
pub const LEARNED_ADDR_HOLD: Duration = Duration::from_secs(60);

/// A refreshed entry takes a new place in its recency queue at most this
/// often: traffic refreshes per packet, the queue grows per second at most.
const REQUEUE: Duration = Duration::from_secs(1);

/// What the classifier knows about one interface.
#[derive(Clone, Debug)]
pub(crate) struct Iface {
    pub(crate) name: String,
    configured: Vec<(IpAddr, Prefix)>,
    learned: BTreeMap<IpAddr, Entry>,
    macs: HashMap<Mac, MacSlots>,
    /// (entries, MAC) of every MAC with entries: the last one has the most.
    by_count: BTreeSet<(u32, Mac)>,
    /// Every entry's recency.
    recent: Lazy,
    /// Claims refused (outside the networks it may learn, or no slot).
    pub(crate) refused: u64,
    /// Queue items examined by evictions (the O(1) amortised bound, made
    /// observable).
    work: u64,
}

/// Private (RFC 1918), shared (RFC 6598), IPv4 link-local, ULA (RFC 4193)
/// and IPv6 link-local: what a LAN may claim when no network is configured.
fn local_range(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(a) => {
            let o = a.octets();
            a.is_private() || a.is_link_local() || (o[0] == 100 && o[1] & 0xc0 == 64)
        }
        IpAddr::V6(a) => {
            let s = a.segments()[0];
            s & 0xfe00 == 0xfc00 || s & 0xffc0 == 0xfe80
        }
    }
}

impl Iface {
    pub(crate) fn new(name: &str) -> Iface {
        Iface {
            name: name.to_string(),
            configured: Vec::new(),
            learned: BTreeMap::new(),
            macs: HashMap::new(),
            by_count: BTreeSet::new(),
            recent: Lazy::default(),
            refused: 0,
            work: 0,
        }
    }

    pub(crate) fn set_addrs(&mut self, nets: &[IpNet]) {
        self.configured = nets.iter().map(|n| (n.addr, Prefix::new(n))).collect();
    }

    /// May `addr` be learned: inside a configured network, or with none
    /// configured, in a local range.
    fn may_learn(&self, addr: IpAddr) -> bool {
        if self.configured.is_empty() {
            local_range(addr)
        } else {
            self.configured.iter().any(|(_, p)| p.contains(addr))
        }
    }

    /// Adds or confirms an address the caller vouches for, claimed from
    /// `mac` at `now`.
    pub(crate) fn learn(&mut self, addr: IpAddr, mac: Mac, now: Instant) -> Learn {
        if self.configured.iter().any(|(a, _)| *a == addr) {
            return Learn::Configured;
        }
        if self.learned.contains_key(&addr) {
            self.refresh(addr, now);
            return Learn::Refreshed;
        }
        if !self.may_learn(addr) {
            self.refused += 1;
            return Learn::Refused;
        }
        if !self.make_room(mac, now) {
            self.refused += 1;
            return Learn::Refused;
        }
        self.learned.insert(
            addr,
            Entry {
                since: now,
                seen: now,
                mac,
                queued: now,
            },
        );
        self.recount(mac, 1);
        self.queue(addr, mac, now);
        Learn::Added
    }

    /// Frees a slot for a claim from `mac` if the principles allow: true
    /// if there is room now.
    fn make_room(&mut self, mac: Mac, now: Instant) -> bool {
        let idle = |seen: Instant| now.saturating_since(seen) >= LEARNED_ADDR_HOLD;
        let own = self.macs.get(&mac).map_or(0, |m| m.count);
        if own >= MAX_ADDRS_PER_MAC {
            // A host claiming in bulk churns (or waits for) its own slots.
            let front = self
                .macs
                .get_mut(&mac)
                .and_then(|m| m.lru.front(&self.learned, &mut self.work));
            return match front {
                Some((a, seen)) if idle(seen) => self.remove(a),
                _ => false,
            };
        }
        if self.learned.len() < MAX_LEARNED_ADDRS {
            return true;
        }
        // The stalest entry of the MAC holding the most, if idle or a bulk
        // claimer's; else the stalest of all, if idle.
        if let Some(&(n, top)) = self.by_count.last() {
            let front = self
                .macs
                .get_mut(&top)
                .and_then(|m| m.lru.front(&self.learned, &mut self.work));
            if let Some((a, seen)) = front {
                if n > BULK || idle(seen) {
                    return self.remove(a);
                }
            }
        }
        match self.recent.front(&self.learned, &mut self.work) {
            Some((a, seen)) if idle(seen) => self.remove(a),
            _ => false,
        }
    }

    /// Queues `addr` (of `mac`) as refreshed at `at`.
    fn queue(&mut self, addr: IpAddr, mac: Mac, at: Instant) {
        let n = self.learned.len();
        self.recent.push(addr, at, n, &self.learned);
        if let Some(m) = self.macs.get_mut(&mac) {
            m.lru.push(addr, at, m.count as usize, &self.learned);
        }
    }

    /// Moves `mac`'s count by `delta` (±1), keeping `by_count` in step.
    fn recount(&mut self, mac: Mac, delta: i32) {
        let slots = self.macs.entry(mac).or_default();
        self.by_count.remove(&(slots.count, mac));
        slots.count = slots.count.saturating_add_signed(delta);
        if slots.count > 0 {
            self.by_count.insert((slots.count, mac));
        } else {
            self.macs.remove(&mac);
        }
    }

    /// Forgets `addr`; true (a slot is free).
    fn remove(&mut self, addr: IpAddr) -> bool {
        if let Some(e) = self.learned.remove(&addr) {
            self.recount(e.mac, -1);
        }
        true
    }

    /// Traffic from a learned address keeps it alive; never adds one.
    pub(crate) fn refresh(&mut self, addr: IpAddr, now: Instant) {
        let Some(e) = self.learned.get_mut(&addr) else {
            return;
        };
        e.seen = e.seen.max(now);
        if now.saturating_since(e.queued) < REQUEUE {
            return;
        }
        e.queued = now;
        let mac = e.mac;
        self.queue(addr, mac, now);
    }

    /// Forgets entries not seen for [`LEARNED_ADDR_TTL`]; returns how many.
    pub(crate) fn expire(&mut self, now: Instant) -> usize {
        let dead: Vec<IpAddr> = self
            .learned
            .iter()
            .filter(|(_, e)| now.saturating_since(e.seen) >= LEARNED_ADDR_TTL)
            .map(|(a, _)| *a)
            .collect();
        for &a in &dead {
            self.remove(a);
        }
        dead.len()
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
        self.learned.iter().map(|(a, e)| LearnedAddr {
            addr: *a,
            since: e.since,
            seen: e.seen,
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

    const M: Mac = [2, 0, 0, 0, 0, 1];
    fn mac(n: u32) -> Mac {
        let b = n.to_be_bytes();
        [2, 0xaa, b[0], b[1], b[2], b[3]]
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
        assert_eq!(i.learn(ip("192.0.2.10"), M, secs(1)), Learn::Configured);
        assert_eq!(i.learn(ip("192.0.2.11"), M, secs(1)), Learn::Added);
        assert_eq!(
            i.learn(ip("10.0.0.5"), M, secs(1)),
            Learn::Refused,
            "outside"
        );
        // 250 MACs of 4 fresh claims each: the first 256 fill the set, the
        // rest are refused (no bulk claimer, nothing idle).
        let mut j = Iface::new("em1");
        let t = secs(1);
        let added = (0..1000u32)
            .filter(|&n| j.learn(v4(n), mac(n / 4), t) == Learn::Added)
            .count();
        assert_eq!((added, j.refused), (MAX_LEARNED_ADDRS, 744));
        assert_eq!(j.learned().count(), MAX_LEARNED_ADDRS);
        assert!(j.has_addr(v4(255)) && j.in_network(v4(255)));
        assert_eq!(j.learn(v4(255), M, t), Learn::Refreshed);
    }

    /// Review M4: without a configured network only local ranges are
    /// learned; 8.8.8.8 is refused.
    #[test]
    fn only_local_ranges_without_a_configured_network() {
        let mut i = Iface::new("em0");
        for a in ["8.8.8.8", "203.0.113.9", "2001:db8::1", "2a00:1450::1"] {
            assert_eq!(i.learn(ip(a), M, secs(1)), Learn::Refused, "{a}");
        }
        for a in ["192.168.1.2", "10.1.2.3", "172.16.0.1", "100.64.0.1"] {
            assert_eq!(i.learn(ip(a), M, secs(1)), Learn::Added, "{a}");
        }
        for a in ["169.254.1.1", "fd00::1", "fe80::1"] {
            assert_eq!(i.learn(ip(a), M, secs(1)), Learn::Added, "{a}");
        }
        assert_eq!(i.refused, 4);
        assert!(!i.has_addr(ip("8.8.8.8")));
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
        i.learn(ip("10.0.0.1"), M, secs(0));
        i.learn(ip("10.0.0.2"), M, secs(0));
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
        assert!(i.macs.is_empty() && i.by_count.is_empty());
    }

    /// Review M4: one host claims 256 addresses and refreshes each every
    /// 59 s; a real host's claim at t + 61 s is added (the flood churns its
    /// own MAX_ADDRS_PER_MAC slots).
    #[test]
    fn a_host_keeping_256_claims_fresh_does_not_shut_out_a_newcomer() {
        let mut i = Iface::new("em0");
        let n = MAX_LEARNED_ADDRS as u32;
        for round in 0..3u64 {
            for k in 0..n {
                i.learn(v4(k), M, secs(round * 59));
            }
        }
        assert_eq!(i.learned().count(), MAX_ADDRS_PER_MAC as usize);
        assert_eq!(
            i.learn(ip("192.168.1.10"), mac(7), secs(61 + 118)),
            Learn::Added
        );
        assert!(i.has_addr(ip("192.168.1.10")));
    }

    /// Many MACs fill the set: a newcomer takes the least recently
    /// refreshed slot of the MAC with the most entries, not a lone host's.
    #[test]
    fn a_full_set_takes_from_the_mac_with_the_most() {
        let mut i = Iface::new("em0");
        // A lone host, then 8 MACs of 28 and one of 31 (256 in all).
        assert_eq!(i.learn(ip("192.168.1.10"), mac(999), secs(0)), Learn::Added);
        let mut k = 0;
        for m in 0..9u32 {
            let count = if m == 8 { 31 } else { 28 };
            for _ in 0..count {
                i.learn(v4(k), mac(m), secs(1 + u64::from(k)));
                k += 1;
            }
        }
        assert_eq!(i.learned().count(), MAX_LEARNED_ADDRS);
        let first_of_8 = v4(8 * 28);
        assert_eq!(
            i.learn(ip("192.168.1.11"), mac(1000), secs(400)),
            Learn::Added
        );
        assert!(i.has_addr(ip("192.168.1.10")), "the lone host stays");
        assert!(!i.has_addr(first_of_8), "the largest MAC's oldest went");
        // Refreshed entries go last.
        i.refresh(v4(8 * 28 + 1), secs(401));
        assert_eq!(
            i.learn(ip("192.168.1.12"), mac(1001), secs(402)),
            Learn::Added
        );
        assert!(i.has_addr(v4(8 * 28 + 1)) && !i.has_addr(v4(8 * 28 + 2)));
    }

    /// A flood spoofing a new MAC per claim takes free and idle slots but
    /// never the slot of a host seen within the hold.
    #[test]
    fn a_many_mac_flood_never_displaces_a_talking_host() {
        let mut i = Iface::new("em0");
        i.learn(ip("192.168.1.1"), M, secs(0));
        for k in 0..10_000u32 {
            let now = Instant::ZERO + Duration::from_millis(60 * u64::from(k));
            if k.is_multiple_of(980) {
                i.refresh(ip("192.168.1.1"), now);
            }
            i.learn(v4(k), mac(k), now);
            assert!(i.has_addr(ip("192.168.1.1")), "displaced at claim {k}");
        }
        assert!(i.refused > 0);
        assert_eq!(i.learned().count(), MAX_LEARNED_ADDRS);
    }

    /// Review M6: a flood of claims costs O(1) amortised queue work per
    /// claim however full the set and however often entries are refreshed.
    #[test]
    fn eviction_work_is_constant_per_claim() {
        let mut i = Iface::new("em0");
        let claims = 100_000u64;
        for k in 0..claims {
            let now = Instant::ZERO + Duration::from_millis(10 * k);
            i.learn(v4(k as u32 % 50_000), mac(k as u32 % 64), now);
            // Every learned address also talks each time.
            if k % 7 == 0 {
                for a in 0..40u32 {
                    i.refresh(v4(a), now);
                }
            }
        }
        assert_eq!(i.learned().count(), MAX_LEARNED_ADDRS);
        assert!(
            i.work <= 3 * claims,
            "{} queue items for {claims} claims",
            i.work
        );
        let queued: usize =
            i.macs.values().map(|m| m.lru.0.len()).sum::<usize>() + i.recent.0.len();
        assert!(queued <= 8 * MAX_LEARNED_ADDRS + 16 * (i.macs.len() + 1));
    }
}
