//! The three places a packet waits (see docs/engine.md).

use super::*;

impl Engine {
    /// Queues a classified packet on `egress` (tree, or the priority bands
    /// at `prio` without one), within the memory cap.
    pub(super) fn enqueue(&mut self, now: Instant, egress: usize, pkt: Packet, prio: u8) -> Rx {
        let eg = &mut self.ifaces[egress];
        let id = pkt.id;
        let size = pkt.truesize();
        let mem = &mut self.memory;
        if mem.held_bytes.saturating_add(size) > mem.limit_bytes {
            mem.limit_drops += 1;
            eg.counters.memory_drops += 1;
            self.give_back(egress, pkt.data, DropCause::MemoryLimit);
            return Rx::Dropped(DropCause::MemoryLimit);
        }
        match eg.tree.as_mut() {
            Some(t) => {
                mem.held_bytes += size;
                mem.peak_bytes = mem.peak_bytes.max(mem.held_bytes);
                if self.tcp.enabled() {
                    self.tcp.on_queue(egress, pkt.class, pkt.len, true);
                }
                if t.root.enqueue(pkt, now, &mut self.drops) == Enqueue::Queued {
                    return Rx::Queued { egress };
                }
            }
            None => {
                let full = DropCause::Sched(DropReason::QueueFull);
                match eg.passthrough.push(prio, pkt) {
                    Push::Refused(pkt) => {
                        eg.counters.queue_drops += 1;
                        self.give_back(egress, pkt.data, full);
                        return Rx::Dropped(full);
                    }
                    Push::Queued => {}
                    Push::Displaced(out) => {
                        eg.counters.queue_drops += 1;
                        mem.held_bytes = mem.held_bytes.saturating_sub(out.truesize());
                        self.give_back(egress, out.data, full);
                    }
                }
                let mem = &mut self.memory;
                mem.held_bytes += size;
                mem.peak_bytes = mem.peak_bytes.max(mem.held_bytes);
                return Rx::Queued { egress };
            }
        }
        // Something was dropped: the newcomer itself, or others to make room.
        let own = self.drops.iter().find(|d| d.pkt.id == id).map(|d| d.reason);
        self.absorb_drops(egress);
        match own {
            Some(r) => Rx::Dropped(DropCause::Sched(r)),
            None => Rx::Queued { egress },
        }
    }

    /// Held ACKs TCP control released: into their egress queues, now.
    pub(super) fn drain_released(&mut self, now: Instant) {
        while let Some((egress, mut pkt)) = self.tcp.take_released() {
            self.release(&pkt);
            // The hold is part of the connection's wait here (the delay
            // signal's correction), not of the queue's sojourn.
            let held = now.saturating_since(pkt.enqueued_at);
            self.ifaces[egress].flow_sojourn.hold(pkt.id, held);
            pkt.enqueued_at = now;
            self.enqueue(now, egress, pkt, DEFAULT_PRIO);
        }
    }

    /// Moves scheduler drops of interface `iface` into the dropped backlog.
    pub(super) fn absorb_drops(&mut self, iface: usize) {
        let mut drops = std::mem::take(&mut self.drops);
        for d in drops.drain(..) {
            self.release(&d.pkt);
            if self.tcp.enabled() {
                self.tcp.on_queue(iface, d.pkt.class, d.pkt.len, false);
            }
            self.ifaces[iface].counters.queue_drops += 1;
            self.give_back(iface, d.pkt.data, DropCause::Sched(d.reason));
        }
        self.drops = drops;
    }
}
