//! Packet storage for FQ-CoDel: one slab of slots linked into per-flow FIFOs.
//!
//! Invariants: every slot is either on exactly one flow's chain or on the free
//! list; chains are acyclic and end in [`NIL`]. Freed slots are reused before
//! the slab grows, so once warmed up no operation allocates.
//!
//! Layout: a slot is exactly one 64-byte cache line (the packet, aligned), and
//! the chain links live in their own dense array. With the link inside the
//! slot a slot took 72 bytes and most packets straddled two lines, so a push
//! or a pop of a cold packet cost two misses instead of one; the link array is
//! 4 bytes per slot and stays cached.

use crate::Packet;

/// "No slot / no flow".
pub(super) const NIL: u32 = u32::MAX;

/// One packet, `None` when free: taking it out writes only the niche, not a
/// whole default packet.
#[repr(align(64))]
struct Slot(Option<Packet>);

// One line per slot: the niche of `Packet` keeps the option at 64 bytes.
const _: () = assert!(std::mem::size_of::<Slot>() == 64);

pub(super) struct Slab {
    slots: Vec<Slot>,
    /// `next[i]`: the slot after `i` on its chain or on the free list.
    next: Vec<u32>,
    free: u32,
}

impl Slab {
    pub(super) fn with_capacity(n: usize) -> Slab {
        Slab {
            slots: Vec::with_capacity(n),
            next: Vec::with_capacity(n),
            free: NIL,
        }
    }

    /// Appends `pkt` to the chain `head..tail`.
    #[inline]
    pub(super) fn push(&mut self, head: &mut u32, tail: &mut u32, pkt: Packet) {
        let idx = if self.free != NIL {
            let idx = self.free;
            self.free = self.next[idx as usize];
            self.slots[idx as usize].0 = Some(pkt);
            self.next[idx as usize] = NIL;
            idx
        } else {
            self.slots.push(Slot(Some(pkt)));
            self.next.push(NIL);
            (self.slots.len() - 1) as u32
        };
        if *tail == NIL {
            *head = idx;
        } else {
            self.next[*tail as usize] = idx;
        }
        *tail = idx;
    }

    /// Puts `pkt` back before the head of the chain `head..tail`.
    pub(super) fn push_front(&mut self, head: &mut u32, tail: &mut u32, pkt: Packet) {
        let (mut h, mut t) = (NIL, NIL);
        self.push(&mut h, &mut t, pkt);
        self.next[h as usize] = *head;
        if *tail == NIL {
            *tail = h;
        }
        *head = h;
    }

    /// The packet in slot `idx` (`None` for NIL or a free slot).
    #[inline]
    pub(super) fn get_mut(&mut self, idx: u32) -> Option<&mut Packet> {
        self.slots.get_mut(idx as usize)?.0.as_mut()
    }

    /// The packet in slot `idx`, if it holds one.
    #[inline]
    pub(super) fn get(&self, idx: u32) -> Option<&Packet> {
        self.slots.get(idx as usize)?.0.as_ref()
    }

    /// The chain from `head`, oldest first, as (slot, packet).
    pub(super) fn chain(&self, head: u32) -> impl Iterator<Item = (u32, &Packet)> + '_ {
        let mut at = head;
        std::iter::from_fn(move || {
            let p = self.get(at)?;
            let here = at;
            at = self.next.get(at as usize).copied().unwrap_or(NIL);
            Some((here, p))
        })
    }

    /// Removes the `n`-th packet (0 = the head) of the chain `head..tail`,
    /// keeping the others in order. O(n).
    pub(super) fn remove_nth(
        &mut self,
        head: &mut u32,
        tail: &mut u32,
        n: usize,
    ) -> Option<Packet> {
        if n == 0 {
            return self.pop(head, tail);
        }
        let mut prev = *head;
        for _ in 1..n {
            prev = *self.next.get(prev as usize)?;
        }
        let idx = *self.next.get(prev as usize)?;
        let pkt = self.slots.get_mut(idx as usize)?.0.take()?;
        let after = self.next[idx as usize];
        self.next[prev as usize] = after;
        if *tail == idx {
            *tail = prev;
        }
        self.next[idx as usize] = self.free;
        self.free = idx;
        Some(pkt)
    }

    /// Removes the head of the chain `head..tail`.
    #[inline]
    pub(super) fn pop(&mut self, head: &mut u32, tail: &mut u32) -> Option<Packet> {
        if *head == NIL {
            return None;
        }
        let idx = *head;
        let pkt = self.slots.get_mut(idx as usize)?.0.take()?;
        let next = self.next.get_mut(idx as usize)?;
        *head = *next;
        if *head == NIL {
            *tail = NIL;
        }
        *next = self.free;
        self.free = idx;
        Some(pkt)
    }
}
