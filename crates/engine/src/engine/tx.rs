//! The transmit path: [`Engine::poll_tx`] as named stages, in order:
//!
//! | stage | does |
//! |---|---|
//! | release held ACKs | TCP control's ACKs whose time came join their trees |
//! | probe | autorate's echo request, sluice's own frame, beside the queues |
//! | dequeue | the next frame of the bands (left from before a reload), else the tree |
//! | measure | its sojourn here, into the path monitor (crate::path) |
//! | control | TCP control reads an ACK's wait here (crate::tcpctl) |
//! | mark | a CE mark the AQM chose, written into the header |
//! | count | the interface's transmit counters |

use super::*;
use sluice_wire::PacketInfo;

impl Engine {
    /// The next frame to transmit on `iface` now, if any; ECN marks applied.
    pub fn poll_tx(&mut self, now: Instant, iface: usize) -> Option<Vec<u8>> {
        let now = self.clamp(now);
        self.housekeeping(now);
        self.release_held_acks(now);
        if let Some(f) = self.send_probe(now, iface)? {
            return Some(f);
        }
        let mut pkt = self.dequeue(now, iface)?;
        let wait = self.path.on_tx(now, iface, &pkt);
        // Read once, for TCP control and for a CE mark.
        let info = self.read_sent(&pkt);
        self.control_tx(now, iface, &pkt, info.as_ref(), wait);
        if pkt.ecn == Ecn::Ce {
            self.mark_ce(iface, &mut pkt.data, info);
        }
        let c = &mut self.ifaces[iface].counters;
        c.tx_frames += 1;
        c.tx_bytes += pkt.data.len() as u64;
        Some(pkt.data)
    }

    /// TCP control's held ACKs whose time has come, into their trees.
    pub(super) fn release_held_acks(&mut self, now: Instant) {
        if self.tcp.enabled() {
            self.tcp.poll(now);
            self.drain_released(now);
        }
    }

    /// autorate's probe, when one is due on `iface`: it goes out beside the
    /// shaped traffic, not behind it, and is the one frame `poll_tx` emits
    /// that never came in (crate::probe). `None`: no such interface.
    fn send_probe(&mut self, now: Instant, iface: usize) -> Option<Option<Vec<u8>>> {
        let i = self.ifaces.get_mut(iface)?;
        let f = self.path.poll_probe(now, iface);
        if f.is_some() {
            i.counters.probes_sent += 1;
        }
        Some(f)
    }

    /// The next packet to leave `iface`: frames that arrived before a
    /// reload gave it a tree leave first (left behind, they would wait
    /// forever while `poll_timeout` keeps answering "now"), then the tree.
    fn dequeue(&mut self, now: Instant, iface: usize) -> Option<Packet> {
        let eg = self.ifaces.get_mut(iface)?;
        let pkt = match (eg.passthrough.pop(), eg.tree.as_mut()) {
            (Some(p), _) => Some(p),
            (None, Some(t)) => t.root.dequeue(now, &mut self.drops),
            (None, None) => None,
        };
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        let pkt = pkt?;
        self.memory.release(pkt.truesize());
        Some(pkt)
    }

    /// A controlled flow's ACKs' wait here is part of its round trip (its
    /// window's): frames small enough to be pure ACKs are parsed, once, for
    /// that and for a CE mark.
    fn read_sent(&self, pkt: &Packet) -> Option<PacketInfo> {
        let may_be_ack = self.tcp.enabled() && pkt.data.len() <= ACK_FRAME_MAX;
        (may_be_ack || pkt.ecn == Ecn::Ce)
            .then(|| sluice_wire::parse(&pkt.data).ok())
            .flatten()
    }

    /// TCP control sees the packet leave: its class's backlog, and an ACK's
    /// wait here plus on the link after (crate::tcpctl).
    fn control_tx(
        &mut self,
        now: Instant,
        iface: usize,
        pkt: &Packet,
        info: Option<&PacketInfo>,
        wait: Duration,
    ) {
        if !self.tcp.enabled() {
            return;
        }
        // A stale `wire_free` after control was off is in the past and
        // counts as a free wire.
        let on_wire = self.ifaces[iface].wire_wait(now, pkt.cost);
        self.tcp.on_queue(iface, pkt.class, pkt.len, false);
        let Some(info) = info.filter(|_| pkt.data.len() <= ACK_FRAME_MAX) else {
            return;
        };
        if let Ok(h) = TcpHeader::in_frame(&pkt.data, info) {
            self.tcp.on_sent(iface, info, &h.segment(), wait + on_wire);
        }
    }

    /// The AQM's CE mark into the header, unless already there.
    fn mark_ce(&mut self, iface: usize, data: &mut [u8], info: Option<PacketInfo>) {
        let Some(info) = info else {
            return;
        };
        let already = info.ip.as_ref().map(|ip| ip.tos & 3 == 3).unwrap_or(true);
        if !already && sluice_wire::set_ecn(data, &info, Ecn::Ce.bits()).is_ok() {
            self.ifaces[iface].counters.ecn_marked += 1;
        }
    }
}
