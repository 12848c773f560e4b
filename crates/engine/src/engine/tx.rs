//! The transmit path: `poll_tx` as named stages.

use super::*;

impl Engine {
    /// The next frame to transmit on `iface` now, if any; ECN marks applied.
    pub fn poll_tx(&mut self, now: Instant, iface: usize) -> Option<Vec<u8>> {
        let now = self.clamp(now);
        self.housekeeping(now);
        if self.tcp.enabled() {
            self.tcp.poll(now);
            self.drain_released(now);
        }
        // autorate's probe goes out beside the shaped traffic, not behind
        // it; its interval is worked out only when one is due.
        let due = self.ifaces.get(iface)?.probe.as_ref();
        if due.and_then(|p| p.next_send(now)).is_some_and(|t| t <= now) {
            let interval = self.probe_interval(iface);
            if let Some(f) = self.ifaces[iface]
                .probe
                .as_mut()
                .and_then(|p| p.poll(now, interval))
            {
                self.ifaces[iface].counters.probes_sent += 1;
                return Some(f);
            }
        }
        let eg = self.ifaces.get_mut(iface)?;
        // Frames that arrived before a reload gave this interface a tree
        // leave first: left behind, they would wait forever while
        // `poll_timeout` keeps answering "now".
        let pkt = match (eg.passthrough.pop(), eg.tree.as_mut()) {
            (Some(p), _) => Some(p),
            (None, Some(t)) => t.root.dequeue(now, &mut self.drops),
            (None, None) => None,
        };
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        let mut pkt = pkt?;
        self.release(&pkt);
        let wait = now.saturating_since(pkt.enqueued_at);
        self.ifaces[iface].sojourn.add(wait);
        self.ifaces[iface]
            .flow_sojourn
            .add(pkt.flow, pkt.id, wait, now);
        // Only TCP control reads it (an ACK's wait); a stale `wire_free`
        // after it was off is in the past and counts as a free wire.
        let on_wire = if self.tcp.enabled() {
            self.ifaces[iface].wire_wait(now, pkt.cost)
        } else {
            Duration::ZERO
        };
        // A controlled flow's ACKs' wait here is part of its round trip (its
        // window's): frames small enough to be pure ACKs are read, once,
        // for that and for a CE mark.
        let may_be_ack = self.tcp.enabled() && pkt.data.len() <= ACK_FRAME_MAX;
        let info = (may_be_ack || pkt.ecn == Ecn::Ce)
            .then(|| sluice_wire::parse(&pkt.data).ok())
            .flatten();
        if self.tcp.enabled() {
            self.tcp.on_queue(iface, pkt.class, pkt.len, false);
            if let (true, Some(info)) = (may_be_ack, &info) {
                if let Ok(h) = TcpHeader::in_frame(&pkt.data, info) {
                    self.tcp.on_sent(iface, info, &h.segment(), wait + on_wire);
                }
            }
        }
        if pkt.ecn == Ecn::Ce {
            if let Some(info) = info {
                let already = info.ip.as_ref().map(|ip| ip.tos & 3 == 3).unwrap_or(true);
                if !already && sluice_wire::set_ecn(&mut pkt.data, &info, Ecn::Ce.bits()).is_ok() {
                    self.ifaces[iface].counters.ecn_marked += 1;
                }
            }
        }
        let c = &mut self.ifaces[iface].counters;
        c.tx_frames += 1;
        c.tx_bytes += pkt.data.len() as u64;
        Some(pkt.data)
    }
}
