//! Per-interface state: its tree, bands and counters (its measurements
//! are the path monitor's, crate::path).

use super::*;

/// Counters of one interface.
#[derive(Clone, Debug, Default)]
pub struct IfaceCounters {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Non-IP frames forwarded (ARP, ND is IP, LLDP …).
    pub non_ip: u64,
    pub malformed: u64,
    pub blocked: u64,
    pub state_limit: u64,
    /// TCP segments outside their state's sequence window.
    pub bad_state: u64,
    pub no_route: u64,
    /// Drops by the egress queue tree, all reasons.
    pub queue_drops: u64,
    pub reload_drops: u64,
    pub ecn_marked: u64,
    /// Frames refused on this egress because queued frames held the
    /// engine's memory cap.
    pub memory_drops: u64,
    /// SYNs that arrived here whose MSS option `scrub (max-mss …)` lowered.
    pub mss_clamped: u64,
    /// SYNs under `max-mss` whose TCP options could not be walked: passed
    /// unmodified.
    pub mss_untouched: u64,
    /// Replies to autorate's probes taken here (not forwarded).
    pub probe_replies: u64,
    /// autorate's echo requests sent here: frames of sluice's own, not in
    /// `tx_frames` (which counts what was forwarded).
    pub probes_sent: u64,
}

pub(super) struct Iface {
    pub(super) name: String,
    pub(super) cid: sluice_classify::IfaceId,
    pub(super) tree: Option<Tree>,
    /// Queue name → class on this interface's tree.
    pub(super) classes: HashMap<QueueName, ClassId>,
    /// Egress queue without a tree: `set prio`'s eight bands (crate::prio).
    pub(super) passthrough: PrioQueue,
    pub(super) overhead: Overhead,
    /// `max-mss auto` for SYNs arriving here (IPv4, IPv6), from this
    /// interface's shaped rate and overhead; `None`: a full frame fits.
    pub(super) auto_mss: [Option<u16>; 2],
    pub(super) learn_addrs: bool,
    /// The LAN side of a bridge pair: sources arriving here are "ours".
    pub(super) lan_side: bool,
    pub(super) counters: IfaceCounters,
    /// `autorate` on this interface's shaper, and its latest reading.
    pub(super) autorate: Option<(Controller, Reading)>,
    /// When the link after this interface will have sent what sluice sent
    /// it, at the shaped rate (token-bucket trees, while TCP control is on;
    /// see `Iface::wire_wait`).
    pub(super) wire_free: Instant,
}

impl Iface {
    /// How long a frame sent now waits on the link after this interface
    /// for the frames sent before it. A token bucket lets a frame go once
    /// its tokens are there, at the start of its time on the modem's wire,
    /// so an ACK that leaves right after an upload frame still waits for
    /// that frame there (49 ms for a 536-byte segment at 120 kbit/s): a
    /// wait its flow's window must allow ([`TcpCtl::on_sent`]) and sluice
    /// does not see. Estimated at the shaped rate, a little under the
    /// modem's, so never short. A pipe releases a packet at the end of its
    /// serialisation: nothing is left on the wire after it.
    pub(super) fn wire_wait(&mut self, now: Instant, cost: u32) -> Duration {
        let Some(t) = self.tree.as_ref() else {
            return Duration::ZERO;
        };
        if t.kind == SchedKind::Pipe || t.bandwidth.as_bps() == 0 {
            return Duration::ZERO;
        }
        let start = self.wire_free.max(now);
        self.wire_free = start + t.bandwidth.tx_time(u64::from(cost));
        start.saturating_since(now)
    }
}

impl Engine {
    /// Bridge mode: a LAN-side host's address is what pf on that host would
    /// call the address of either interface (`from $ext_if`), so addresses
    /// LAN-side hosts claim in ARP/ND (`sluice_wire::neighbor_claim`) are
    /// learned for both interfaces of the pair, and their IP traffic keeps
    /// them alive. A plain source address is never learned: anyone can write
    /// one, and 256 of them used to push every real host out for good.
    /// Never from the WAN side: remote addresses are not ours.
    pub(super) fn learn(&mut self, now: Instant, t: &crate::path::Transit<'_>) {
        let claim = sluice_wire::neighbor_claim(t.frame, t.info);
        for i in [t.iface, t.egress] {
            if !self.ifaces[i].learn_addrs {
                continue;
            }
            let cid = self.ifaces[i].cid;
            match (claim, &t.info.ip) {
                (Some(c), _) => {
                    // The claim counts against its frame's source MAC.
                    let mac = t.frame.get(6..12).and_then(|m| m.try_into().ok());
                    self.classifier
                        .learn_iface_addr(cid, c.addr, mac.unwrap_or_default(), now);
                }
                (None, Some(ip)) => self.classifier.refresh_iface_addr(cid, ip.src, now),
                (None, None) => {}
            }
        }
    }

    /// The addresses configured for interface `iface` (`Options::iface_addrs`).
    pub fn configured_addrs(&self, iface: usize) -> Vec<ir::IpNet> {
        self.ifaces.get(iface).map_or(Vec::new(), |i| {
            self.classifier.configured_iface_addrs(i.cid)
        })
    }

    /// The addresses learned for interface `iface` (bridge mode) and how many
    /// newcomers the full set refused; empty for configured interfaces.
    pub fn learned_addrs(&self, iface: usize) -> (Vec<sluice_classify::LearnedAddr>, u64) {
        self.ifaces.get(iface).map_or((Vec::new(), 0), |i| {
            self.classifier.learned_iface_addrs(i.cid)
        })
    }
}
