//! Packet storage for FQ-CoDel: one slab of slots linked into per-flow FIFOs.
//!
//! Invariants: every slot is either on exactly one flow's chain or on the free
//! list; chains are acyclic and end in [`NIL`]. Freed slots are reused before
//! the slab grows, so once warmed up no operation allocates.

use crate::Packet;

/// "No slot / no flow".
pub(super) const NIL: u32 = u32::MAX;

struct Slot {
    /// `None` when free: taking it out writes only the niche, not a whole
    /// default packet.
    pkt: Option<Packet>,
    next: u32,
}

pub(super) struct Slab {
    slots: Vec<Slot>,
    free: u32,
}

impl Slab {
    pub(super) fn with_capacity(n: usize) -> Slab {
        Slab {
            slots: Vec::with_capacity(n),
            free: NIL,
        }
    }

    /// Appends `pkt` to the chain `head..tail`.
    #[inline]
    pub(super) fn push(&mut self, head: &mut u32, tail: &mut u32, pkt: Packet) {
        let idx = if self.free != NIL {
            let idx = self.free;
            let slot = &mut self.slots[idx as usize];
            self.free = slot.next;
            slot.pkt = Some(pkt);
            slot.next = NIL;
            idx
        } else {
            self.slots.push(Slot {
                pkt: Some(pkt),
                next: NIL,
            });
            (self.slots.len() - 1) as u32
        };
        if *tail == NIL {
            *head = idx;
        } else {
            self.slots[*tail as usize].next = idx;
        }
        *tail = idx;
    }

    /// The packet in slot `idx` (`None` for NIL or a free slot).
    #[inline]
    pub(super) fn get_mut(&mut self, idx: u32) -> Option<&mut Packet> {
        self.slots.get_mut(idx as usize)?.pkt.as_mut()
    }

    /// Removes the head of the chain `head..tail`.
    #[inline]
    pub(super) fn pop(&mut self, head: &mut u32, tail: &mut u32) -> Option<Packet> {
        if *head == NIL {
            return None;
        }
        let idx = *head;
        let slot = self.slots.get_mut(idx as usize)?;
        let pkt = slot.pkt.take()?;
        *head = slot.next;
        if *head == NIL {
            *tail = NIL;
        }
        slot.next = self.free;
        self.free = idx;
        Some(pkt)
    }
}
