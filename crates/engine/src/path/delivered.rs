//! What the far ends of an interface's connections acknowledge (issue
//! #16): the bytes delivered beyond the link, counted from the ACKs that
//! come back through sluice.
//!
//! # Principles
//!
//! - **A busy link's delivery rate is its rate.** While the queue beyond
//!   sluice (an upload's, in the modem) is not empty the link never idles,
//!   and the data its receivers acknowledge per second is what it carries
//!   per second — the delivery rate BBR measures at the sender
//!   (draft-cheng-iccrg-delivery-rate-estimation). sluice forwards both
//!   directions, so it reads the same from the ACKs it passes. An upload's
//!   own output says nothing of the link (its senders are ACK-clocked);
//!   this does ([`crate::autorate`]'s hold measures the link by it).
//! - **Counted once, never backwards.** Per connection direction the
//!   highest cumulative ACK seen is kept; each ACK that moves it forward
//!   (RFC 9293 sequence arithmetic, [`sluice_wire::tcp::seq_after`]) adds
//!   the advance. Duplicates, reordered and old ACKs add nothing. An
//!   advance beyond [`MAX_ADVANCE`] is not credible (a new connection on a
//!   reused slot, a mangled segment) and only resets the edge; so does a
//!   SYN, which starts a new sequence space; an RST is ignored.
//! - **Fixed memory, O(1).** Direct-mapped on the connection hash
//!   ([`sluice_sched::Packet::flow`]), [`SLOTS`] entries; a colliding
//!   connection takes the slot over and is counted from its next ACK: an
//!   undercount, never an overcount.

use sluice_wire::tcp::seq_after;
use sluice_wire::tcp_flags::{ACK, RST, SYN};

/// Connections counted at once (a power of two).
pub const SLOTS: usize = 1024;
/// The largest advance one ACK may add: more than any window in flight
/// at the rates sluice shapes (64 MiB is a window scale of 10 at most).
pub const MAX_ADVANCE: u32 = 64 << 20;

/// The delivered-bytes counter of one interface's incoming ACKs.
pub struct Delivered {
    /// (connection hash, highest ACK); hash `u64::MAX`: empty.
    slots: Box<[(u64, u32)]>,
    total: u64,
}

impl Default for Delivered {
    fn default() -> Self {
        Delivered {
            slots: vec![(u64::MAX, 0); SLOTS].into_boxed_slice(),
            total: 0,
        }
    }
}

impl Delivered {
    /// A segment of connection direction `flow` with TCP `flags` and
    /// acknowledgment number `ack` arrived.
    pub fn on_segment(&mut self, flow: u64, flags: u8, ack: u32) {
        if flags & ACK == 0 || flags & RST != 0 {
            return;
        }
        let slot = &mut self.slots[(flow >> 32) as usize & (SLOTS - 1)];
        if slot.0 != flow || flags & SYN != 0 {
            *slot = (flow, ack);
            return;
        }
        if !seq_after(ack, slot.1) {
            return;
        }
        let advance = ack.wrapping_sub(slot.1);
        if advance <= MAX_ADVANCE {
            self.total += u64::from(advance);
        }
        slot.1 = ack;
    }

    /// Bytes acknowledged so far (a counter).
    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: u64 = 0x1234_5678_0000_0001;

    #[test]
    fn each_advance_counts_once_and_old_acks_nothing() {
        let mut d = Delivered::default();
        d.on_segment(F, ACK, 1000);
        assert_eq!(d.total(), 0, "the first ACK sets the edge");
        d.on_segment(F, ACK, 2448);
        d.on_segment(F, ACK, 2448);
        d.on_segment(F, ACK, 1500);
        assert_eq!(d.total(), 1448, "duplicate and old ACKs add nothing");
        d.on_segment(F, ACK, 5344);
        assert_eq!(d.total(), 4344);
        // No ACK flag, or an RST: nothing read.
        d.on_segment(F, 0, 9000);
        d.on_segment(F, ACK | RST, 9000);
        assert_eq!(d.total(), 4344);
    }

    #[test]
    fn the_sequence_space_wraps() {
        let mut d = Delivered::default();
        d.on_segment(F, ACK, u32::MAX - 99);
        d.on_segment(F, ACK, 100);
        assert_eq!(d.total(), 200);
    }

    #[test]
    fn a_new_connection_or_an_incredible_jump_resets_the_edge() {
        let mut d = Delivered::default();
        d.on_segment(F, ACK, 1000);
        d.on_segment(F, ACK, 1000 + MAX_ADVANCE + 1);
        assert_eq!(d.total(), 0, "not credible");
        d.on_segment(F, ACK, 2000 + MAX_ADVANCE + 1);
        assert_eq!(d.total(), 1000, "counted from the new edge");
        d.on_segment(F, SYN | ACK, 7);
        d.on_segment(F, ACK, 107);
        assert_eq!(d.total(), 1100, "a SYN starts a new sequence space");
        // Another connection in the same slot takes it over; the first,
        // coming back, starts again from its next ACK.
        let g = F ^ 1;
        d.on_segment(g, ACK, 50);
        d.on_segment(g, ACK, 150);
        d.on_segment(F, ACK, 10_000);
        d.on_segment(F, ACK, 10_500);
        assert_eq!(d.total(), 1700);
    }
}
