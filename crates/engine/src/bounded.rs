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

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

#[derive(Clone)]
struct Slot<V> {
    value: V,
    used: bool,
    settled: bool,
}

/// A map of at most `cap` entries (see the module's Principles).
#[derive(Clone)]
pub struct Bounded<K, V> {
    map: HashMap<K, Slot<V>>,
    fresh: VecDeque<K>,
    hand: VecDeque<K>,
    cap: usize,
    /// Keys taken from a queue while making room (counter): the work
    /// eviction did.
    pops: u64,
}

impl<K: std::fmt::Debug, V> std::fmt::Debug for Bounded<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bounded")
            .field("len", &self.map.len())
            .field("cap", &self.cap)
            .finish()
    }
}

impl<K: Copy + Eq + Hash, V> Bounded<K, V> {
    pub fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::new(),
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
        if !self.map.contains_key(&k) {
            if self.map.len() >= self.cap {
                self.evict(&settled);
            }
            self.map.insert(
                k,
                Slot {
                    value: make(),
                    used: false,
                    settled: false,
                },
            );
            self.fresh.push_back(k);
        }
        let s = self.map.get_mut(&k).expect("present or just inserted");
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
