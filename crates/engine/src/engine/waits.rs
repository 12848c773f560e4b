//! The three places a packet waits between `handle_rx` and `poll_tx`
//! (docs/engine.md, "Where a packet waits"):
//!
//! 1. **the queue tree** of its egress interface (`Iface::tree`, built from
//!    the config by crate::build): where shaping and scheduling happen;
//! 2. **TCP control's held ACKs** (crate::tcpctl): an ACK of a paced flow
//!    waits there until its flow may have it, then joins the tree
//!    ([`Engine::drain_released`]);
//! 3. **the passthrough bands** (`Iface::passthrough`, crate::prio): an
//!    interface without a tree, `set prio`'s eight strict bands.
//!
//! A frame is charged to the one memory account (`memory.rs`) as it
//! begins to wait and released as it leaves or is dropped.

use super::*;

impl Engine {
    /// Queues a classified packet on `egress` (tree, or the priority bands
    /// at `prio` without one), within the memory cap.
    pub(super) fn enqueue(&mut self, now: Instant, egress: usize, pkt: Packet, prio: u8) -> Rx {
        if !self.memory.fits(pkt.truesize()) {
            return self.refuse_over_cap(egress, pkt);
        }
        // Place 1: the egress interface's queue tree.
        let Some(t) = self.ifaces[egress].tree.as_mut() else {
            return self.wait_in_bands(egress, pkt, prio);
        };
        let id = pkt.id;
        self.memory.charge(pkt.truesize());
        if self.tcp.enabled() {
            self.tcp.on_queue(egress, pkt.class, pkt.len, true);
        }
        if t.root.enqueue(pkt, now, &mut self.drops) == Enqueue::Queued {
            return Rx::Queued { egress };
        }
        // Something was dropped: the newcomer itself, or others to make room.
        let own = self.drops.iter().find(|d| d.pkt.id == id).map(|d| d.reason);
        self.absorb_drops(egress);
        match own {
            Some(r) => Rx::Dropped(DropCause::Sched(r)),
            None => Rx::Queued { egress },
        }
    }

    /// Place 3: an interface without a tree, `set prio`'s eight bands
    /// (crate::prio).
    fn wait_in_bands(&mut self, egress: usize, pkt: Packet, prio: u8) -> Rx {
        let size = pkt.truesize();
        let full = DropCause::Sched(DropReason::QueueFull);
        match self.ifaces[egress].passthrough.push(prio, pkt) {
            Push::Refused(pkt) => {
                self.ifaces[egress].counters.queue_drops += 1;
                self.give_back(egress, pkt.data, full);
                return Rx::Dropped(full);
            }
            Push::Queued => {}
            Push::Displaced(out) => {
                self.ifaces[egress].counters.queue_drops += 1;
                self.memory.release(out.truesize());
                self.give_back(egress, out.data, full);
            }
        }
        self.memory.charge(size);
        Rx::Queued { egress }
    }

    /// Place 2: TCP control holds a paced ACK (crate::tcpctl) until its
    /// flow may have it; one it lets pass at once goes to the tree.
    pub(super) fn hold_ack(
        &mut self,
        now: Instant,
        ticket: PaceTicket,
        egress: usize,
        pkt: Packet,
        prio: u8,
    ) -> Rx {
        let size = pkt.truesize();
        let paced = self.tcp.pace(now, ticket, egress, pkt);
        // A cap may have released held ACKs: they go first.
        self.drain_released(now);
        match paced {
            Some(pkt) => self.enqueue(now, egress, pkt, prio),
            None => {
                self.memory.charge(size);
                Rx::Queued { egress }
            }
        }
    }

    /// Held ACKs TCP control released: into their egress queues, now.
    pub(super) fn drain_released(&mut self, now: Instant) {
        while let Some((egress, mut pkt)) = self.tcp.take_released() {
            self.memory.release(pkt.truesize());
            // The hold is part of the connection's wait here (the delay
            // signal's correction), not of the queue's sojourn.
            let held = now.saturating_since(pkt.enqueued_at);
            self.path.on_release(egress, pkt.id, held);
            pkt.enqueued_at = now;
            self.enqueue(now, egress, pkt, DEFAULT_PRIO);
        }
    }

    /// Moves scheduler drops of interface `iface` into the dropped backlog.
    pub(super) fn absorb_drops(&mut self, iface: usize) {
        let mut drops = std::mem::take(&mut self.drops);
        for d in drops.drain(..) {
            self.memory.release(d.pkt.truesize());
            if self.tcp.enabled() {
                self.tcp.on_queue(iface, d.pkt.class, d.pkt.len, false);
            }
            self.ifaces[iface].counters.queue_drops += 1;
            self.give_back(iface, d.pkt.data, DropCause::Sched(d.reason));
        }
        self.drops = drops;
    }
}
