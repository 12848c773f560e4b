//! An indexed 4-ary min-heap of `(key, slot)`: O(1) minimum, O(log n) push,
//! remove and re-key of any slot. Four 16-byte children fill one cache line,
//! and the tree is half as deep as a binary one: re-keying the minimum (what
//! every dequeue does) walks fewer levels.
//!
//! # Principles
//! - Each slot is in at most one heap of a family at a time, so one position
//!   array per family (`pos[slot]`, `NOT_IN_HEAP` when out) locates it; the
//!   array lives beside the heaps so a heap can move the positions of the
//!   classes it holds without borrowing the classes themselves.
//! - Order is `(key, slot)`, packed in one `u128` so a single comparison
//!   decides: ties go to the lower slot, so runs are deterministic.
//! - Invariant: `pos[items[i].1] == i` for every item, and the heap property.

pub(crate) const NOT_IN_HEAP: u32 = u32::MAX;
const ARITY: usize = 4;

/// `(key, slot)` packed so that one integer comparison orders both.
fn pack(key: u64, slot: u32) -> u128 {
    ((key as u128) << 32) | slot as u128
}

fn slot_of(e: u128) -> u32 {
    e as u32
}

fn key_of(e: u128) -> u64 {
    (e >> 32) as u64
}

#[derive(Default, Debug)]
pub(crate) struct Heap {
    items: Vec<u128>,
}

impl Heap {
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        self.items.first().map(|&e| (key_of(e), slot_of(e)))
    }

    /// The items in heap order (not sorted).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.items.iter().map(|&e| (key_of(e), slot_of(e)))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn push(&mut self, key: u64, slot: u32, pos: &mut [u32]) {
        let i = self.items.len();
        self.items.push(pack(key, slot));
        pos[slot as usize] = i as u32;
        self.sift_up(i, pos);
    }

    /// Removes `slot` if it is in this heap (the caller knows it is).
    pub(crate) fn remove(&mut self, slot: u32, pos: &mut [u32]) {
        let i = pos[slot as usize];
        if i == NOT_IN_HEAP || self.items.get(i as usize).map(|&e| slot_of(e)) != Some(slot) {
            return;
        }
        let i = i as usize;
        pos[slot as usize] = NOT_IN_HEAP;
        self.items.swap_remove(i);
        if i < self.items.len() {
            pos[slot_of(self.items[i]) as usize] = i as u32;
            self.sift_down(i, pos);
            self.sift_up(i, pos);
        }
    }

    /// Changes the key of `slot`, which is in this heap.
    pub(crate) fn rekey(&mut self, slot: u32, key: u64, pos: &mut [u32]) {
        let i = pos[slot as usize] as usize;
        let Some(e) = self.items.get_mut(i) else {
            return;
        };
        if slot_of(*e) != slot {
            return;
        }
        let old = key_of(*e);
        *e = pack(key, slot);
        if key > old {
            self.sift_down(i, pos);
        } else {
            self.sift_up(i, pos);
        }
    }

    pub(crate) fn pop(&mut self, pos: &mut [u32]) -> Option<(u64, u32)> {
        let top = self.peek()?;
        self.remove(top.1, pos);
        Some(top)
    }

    pub(crate) fn clear(&mut self, pos: &mut [u32]) {
        for &e in &self.items {
            pos[slot_of(e) as usize] = NOT_IN_HEAP;
        }
        self.items.clear();
    }

    /// Puts `item` at `i` and records where it is.
    #[inline(always)]
    fn place(&mut self, i: usize, item: u128, pos: &mut [u32]) {
        self.items[i] = item;
        pos[slot_of(item) as usize] = i as u32;
    }

    /// Moves the item at `i` up to its place (a hole walks up; the item is
    /// written once at the end).
    fn sift_up(&mut self, mut i: usize, pos: &mut [u32]) {
        let Some(&item) = self.items.get(i) else {
            return;
        };
        // One level per step: at most log4(len) steps.
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pe = self.items[parent];
            if pe <= item {
                break;
            }
            self.place(i, pe, pos);
            i = parent;
        }
        self.place(i, item, pos);
    }

    /// Moves the item at `i` down to its place.
    fn sift_down(&mut self, mut i: usize, pos: &mut [u32]) {
        let n = self.items.len();
        let Some(&item) = self.items.get(i) else {
            return;
        };
        // One level per step: at most log4(len) steps.
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let last = (first + ARITY).min(n);
            let children = &self.items[first..last];
            let (m, me) = if let Ok(c) = <&[u128; ARITY]>::try_from(children) {
                // All four children present (every level but the last): a
                // fixed tournament the compiler turns into conditional
                // moves, instead of a loop with a data-dependent branch.
                // Items are distinct (slots are), so the minimum is the
                // same whichever order finds it.
                let (l, lk) = if c[1] < c[0] { (c[1], 1) } else { (c[0], 0) };
                let (r, rk) = if c[3] < c[2] { (c[3], 3) } else { (c[2], 2) };
                if r < l {
                    (first + rk, r)
                } else {
                    (first + lk, l)
                }
            } else {
                // The last level: fewer than ARITY children, at least one.
                let (mut m, mut me) = (first, children[0]);
                for (k, &e) in children.iter().enumerate().skip(1) {
                    if e < me {
                        (m, me) = (first + k, e);
                    }
                }
                (m, me)
            };
            if item <= me {
                break;
            }
            self.place(i, me, pos);
            i = m;
        }
        self.place(i, item, pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// Random push / remove / rekey / pop against a sorted model.
    #[test]
    fn agrees_with_a_sorted_model() {
        let mut rng = Rng::new(7);
        let mut h = Heap::default();
        let mut pos = vec![NOT_IN_HEAP; 64];
        let mut model: Vec<(u64, u32)> = Vec::new();
        for _ in 0..20_000 {
            let slot = rng.below(64) as u32;
            let key = rng.below(1000);
            let present = model.iter().position(|e| e.1 == slot);
            match (rng.below(4), present) {
                (0, None) => {
                    h.push(key, slot, &mut pos);
                    model.push((key, slot));
                }
                (1, Some(i)) => {
                    h.remove(slot, &mut pos);
                    model.remove(i);
                }
                (2, Some(i)) => {
                    h.rekey(slot, key, &mut pos);
                    model[i].0 = key;
                }
                (3, _) => {
                    model.sort();
                    let want = (!model.is_empty()).then(|| model.remove(0));
                    assert_eq!(h.pop(&mut pos), want);
                }
                _ => {}
            }
            model.sort();
            assert_eq!(h.peek(), model.first().copied());
            for (i, &e) in h.items.iter().enumerate() {
                assert_eq!(pos[slot_of(e) as usize], i as u32);
            }
        }
    }
}
