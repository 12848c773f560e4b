//! A map of bounded size whose eviction costs O(1) amortised (the delay
//! signal's flows, bases and inbound clocks; issue #36, review M6).
//!
//! # Principles
//!
//! - **Room without a scan.** A full map makes room by the CLOCK policy
//!   (second chance, Corbató 1968): keys wait in insertion order; the one
//!   at the hand leaves unless it was used since the hand last passed,
//!   in which case it is passed over once. Each use buys at most one pass,
//!   so an insertion costs O(1) amortised, whatever the map's size.
//! - **The unproven go first.** A new entry waits in a queue of its own
//!   until it is *settled* (for an inbound flow: its sender's clock
//!   verified): a flood of new keys evicts new keys, never the settled
//!   entries the readings stand on. Each key moves from that queue to the
//!   clock at most once.
//! - **The queues never outgrow the map for long.** A key removed by
//!   [`Bounded::retain`] leaves its queue at the same time (housekeeping,
//!   not the packet path); one evicted leaves it as the hand takes it.
//! - **One lookup per use.** [`Bounded::entry`] hashes its key once while
//!   the map has room (a second time only to make room in a full one);
//!   keys that are keyed hashes already (a connection's SipHash under the
//!   engine's secret) are not hashed again ([`PreHashed`]).

use std::collections::hash_map::{Entry, RandomState};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};

#[derive(Clone)]
struct Slot<V> {
    value: V,
    used: bool,
    settled: bool,
}

/// A map of at most `cap` entries (see the module's Principles).
#[derive(Clone)]
pub struct Bounded<K, V, S = RandomState> {
    map: HashMap<K, Slot<V>, S>,
    fresh: VecDeque<K>,
    hand: VecDeque<K>,
    cap: usize,
    /// Keys taken from a queue while making room (counter): the work
    /// eviction did.
    pops: u64,
}

impl<K: std::fmt::Debug, V, S> std::fmt::Debug for Bounded<K, V, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bounded")
            .field("len", &self.map.len())
            .field("cap", &self.cap)
            .finish()
    }
}

impl<K: Copy + Eq + Hash, V, S: BuildHasher + Default> Bounded<K, V, S> {
    pub fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::default(),
            fresh: VecDeque::new(),
            hand: VecDeque::new(),
            cap: cap.max(1),
            pops: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|s| &s.value)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.map.values().map(|s| &s.value)
    }

    /// The entry of `k`, marked used, made by `make` if there is none
    /// (room made first if the map is full); `settled` tells whether an
    /// entry has proven itself (see the Principles).
    pub fn entry(
        &mut self,
        k: K,
        make: impl FnOnce() -> V,
        settled: impl Fn(&V) -> bool,
    ) -> &mut V {
        if self.map.len() >= self.cap && !self.map.contains_key(&k) {
            self.evict(&settled);
        }
        let s = match self.map.entry(k) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                self.fresh.push_back(k);
                v.insert(Slot {
                    value: make(),
                    used: false,
                    settled: false,
                })
            }
        };
        s.used = true;
        &mut s.value
    }

    /// Keeps the entries `keep` says to keep.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        self.map.retain(|_, s| keep(&s.value));
        let map = &self.map;
        self.fresh
            .retain(|k| map.get(k).is_some_and(|s| !s.settled));
        self.hand.retain(|k| map.get(k).is_some_and(|s| s.settled));
    }

    /// Removes one entry: the oldest unsettled one, else the clock's.
    fn evict(&mut self, settled: &impl Fn(&V) -> bool) {
        while let Some(k) = self.fresh.pop_front() {
            self.pops += 1;
            let Some(s) = self.map.get_mut(&k) else {
                continue;
            };
            if !settled(&s.value) {
                self.map.remove(&k);
                return;
            }
            s.settled = true;
            s.used = false;
            self.hand.push_back(k);
        }
        while let Some(k) = self.hand.pop_front() {
            self.pops += 1;
            let Some(s) = self.map.get_mut(&k) else {
                continue;
            };
            if !s.used {
                self.map.remove(&k);
                return;
            }
            s.used = false;
            self.hand.push_back(k);
        }
    }
}

/// The hasher of keys that are uniform keyed hashes already (a
/// connection's flow hash, SipHash-1-3 under the engine's secret,
/// `sluice_classify`): the key is its own hash. Not for keys a sender
/// chooses (an address, a prefix): those keep `std`'s SipHash.
#[derive(Clone, Copy, Debug, Default)]
pub struct PreHashed;

impl BuildHasher for PreHashed {
    type Hasher = KeyAsHash;
    fn build_hasher(&self) -> KeyAsHash {
        KeyAsHash(0)
    }
}

/// [`PreHashed`]'s hasher: a `u64` key is the hash.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyAsHash(u64);

impl Hasher for KeyAsHash {
    fn write(&mut self, bytes: &[u8]) {
        // Not reached by `u64` keys; any other key still spreads.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_new_keys_evicts_new_keys_not_settled_ones() {
        // Values: whether the entry has proven itself.
        let mut b: Bounded<u64, bool> = Bounded::new(8);
        for k in 0..4 {
            *b.entry(k, || false, |v| *v) = true;
        }
        for k in 100..10_000 {
            b.entry(k, || false, |v| *v);
            assert!(b.len() <= 8);
        }
        for k in 0..4 {
            assert_eq!(b.get(&k), Some(&true), "settled {k} kept");
        }
    }

    #[test]
    fn the_clock_passes_over_an_entry_used_since_its_last_turn() {
        let mut b: Bounded<u64, ()> = Bounded::new(3);
        let all = |_: &()| true;
        for k in 0..3 {
            b.entry(k, || (), all);
        }
        // Full: 0, 1, 2 move to the clock, all used once; the hand clears
        // them and takes 0. Then 1 is used again: 2 goes next.
        b.entry(3, || (), all);
        assert_eq!(b.get(&0), None);
        b.entry(1, || (), all);
        b.entry(4, || (), all);
        assert!(b.get(&1).is_some() && b.get(&2).is_none());
    }

    #[test]
    fn making_room_costs_a_few_steps_an_insertion_not_a_scan() {
        // A full map of 1024 settled, busy entries, then 100 000 new keys
        // while the settled ones keep being used: a scan would look at
        // 1024 entries for each.
        let mut b: Bounded<u64, bool> = Bounded::new(1024);
        for k in 0..1024 {
            *b.entry(k, || false, |v| *v) = true;
        }
        for k in 10_000..110_000u64 {
            b.entry(k, || false, |v| *v);
            b.entry(k % 1024, || true, |v| *v);
        }
        assert!(b.pops <= 3 * 100_000 + 2 * 1024, "{} steps", b.pops);
        assert_eq!(b.len(), 1024);
    }

    thread_local! {
        static HASHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// [`PreHashed`], counting the hashes it makes.
    #[derive(Clone, Default)]
    struct Counting;

    impl BuildHasher for Counting {
        type Hasher = KeyAsHash;
        fn build_hasher(&self) -> KeyAsHash {
            HASHES.with(|h| h.set(h.get() + 1));
            KeyAsHash(0)
        }
    }

    #[test]
    fn a_use_hashes_its_key_once_while_there_is_room() {
        let hashes = || HASHES.with(|h| h.get());
        let mut b: Bounded<u64, u64, Counting> = Bounded::new(8);
        b.entry(1, || 0, |_| true);
        let before = hashes();
        for _ in 0..10 {
            *b.entry(1, || 0, |_| true) += 1;
        }
        assert_eq!(hashes() - before, 10);
        assert_eq!(b.get(&1), Some(&10));
    }

    #[test]
    fn a_flow_hash_is_its_own_hash() {
        let k = 0x9e37_79b9_7f4a_7c15u64;
        assert_eq!(PreHashed.hash_one(k), k);
    }

    #[test]
    fn queues_stay_the_maps_size_after_retain() {
        let mut b: Bounded<u64, u64> = Bounded::new(1024);
        for k in 0..1024 {
            b.entry(k, || k, |_| true);
        }
        b.retain(|v| v % 2 == 0);
        assert_eq!(b.len(), 512);
        assert_eq!(b.fresh.len() + b.hand.len(), 512);
    }
}
