//! An indexed binary min-heap of `(key, slot)`: O(1) minimum, O(log n) push,
//! remove and re-key of any slot.
//!
//! # Principles
//! - Each slot is in at most one heap of a family at a time, so one position
//!   array per family (`pos[slot]`, `NOT_IN_HEAP` when out) locates it; the
//!   array lives beside the heaps so a heap can move the positions of the
//!   classes it holds without borrowing the classes themselves.
//! - Order is `(key, slot)`: ties go to the lower slot, so runs are
//!   deterministic.
//! - Invariant: `pos[items[i].1] == i` for every item, and the heap property.

pub(crate) const NOT_IN_HEAP: u32 = u32::MAX;

#[derive(Default, Debug)]
pub(crate) struct Heap {
    items: Vec<(u64, u32)>,
}

impl Heap {
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        self.items.first().copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn push(&mut self, key: u64, slot: u32, pos: &mut [u32]) {
        let i = self.items.len();
        self.items.push((key, slot));
        pos[slot as usize] = i as u32;
        self.sift_up(i, pos);
    }

    /// Removes `slot` if it is in this heap (the caller knows it is).
    pub(crate) fn remove(&mut self, slot: u32, pos: &mut [u32]) {
        let i = pos[slot as usize];
        if i == NOT_IN_HEAP || self.items.get(i as usize).map(|e| e.1) != Some(slot) {
            return;
        }
        let i = i as usize;
        pos[slot as usize] = NOT_IN_HEAP;
        self.items.swap_remove(i);
        if i < self.items.len() {
            pos[self.items[i].1 as usize] = i as u32;
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
        if e.1 != slot {
            return;
        }
        let old = e.0;
        e.0 = key;
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
        for &(_, s) in &self.items {
            pos[s as usize] = NOT_IN_HEAP;
        }
        self.items.clear();
    }

    fn sift_up(&mut self, mut i: usize, pos: &mut [u32]) {
        // One level per step: at most log2(len) steps.
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.items[parent] <= self.items[i] {
                break;
            }
            self.items.swap(parent, i);
            pos[self.items[i].1 as usize] = i as u32;
            i = parent;
        }
        pos[self.items[i].1 as usize] = i as u32;
    }

    fn sift_down(&mut self, mut i: usize, pos: &mut [u32]) {
        let n = self.items.len();
        // One level per step: at most log2(len) steps.
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let m = if r < n && self.items[r] < self.items[l] {
                r
            } else {
                l
            };
            if self.items[i] <= self.items[m] {
                break;
            }
            self.items.swap(i, m);
            pos[self.items[i].1 as usize] = i as u32;
            i = m;
        }
        pos[self.items[i].1 as usize] = i as u32;
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
            for (i, &(_, s)) in h.items.iter().enumerate() {
                assert_eq!(pos[s as usize], i as u32);
            }
        }
    }
}
