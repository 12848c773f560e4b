//! [`Monitor`]: the measurements of each interface's side of the path,
//! fed by the engine's stages and read per direction.

use super::delay_signal::{DelaySignal, Reading, SampleTrace};
use super::delivered::Delivered;
use super::probe::{ProbeStats, Prober, MIN_INTERVAL};
use super::sojourn::{FlowSojourn, Own, Sojourn};
use sluice_classify::TcpSeg;
use sluice_sched::Packet;
use sluice_time::{Duration, Instant, Rate};
use sluice_wire::{IpInfo, PacketInfo, L4};
use std::net::IpAddr;

/// What the monitor measured on one interface's side of the path.
#[derive(Default)]
struct Side {
    /// The delay beyond sluice of the path through this interface.
    signal: DelaySignal,
    /// Sluice's own recent wait on the way out here, over all packets and
    /// per connection (the samples' correction).
    sojourn: Sojourn,
    flow_sojourn: FlowSojourn,
    /// What the far ends acknowledge in the segments arriving here (the
    /// WAN side's, read by its upload's autorate).
    delivered: Delivered,
    /// autorate's probe, on the WAN side of a pair whose shaper names one.
    probe: Option<Prober>,
    /// The rate this interface is shaped at (the probe's interval).
    rate: Option<Rate>,
}

/// One direction's measurements, as its shaper reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathReading {
    /// The queueing delay beyond sluice this direction meets: the way out
    /// for an upload, the way in (or the round trip) for a download, the
    /// probe's round trip where no TCP can be read.
    pub beyond: Reading,
    /// Sluice's own recent wait on the way out (an EWMA over packets).
    pub own: Duration,
    /// Bytes the far ends acknowledged so far (a counter), for an upload:
    /// while the modem's queue is not empty, its rate is the link's.
    pub delivered: Option<u64>,
}

/// Counters of the side a direction is read on (`show queues`, metrics).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SideStats {
    /// Delay samples taken, and those left out as unsound.
    pub samples: u64,
    pub unsound: u64,
    /// The probe's target and how it fares, where one is sent.
    pub probe: Option<(IpAddr, ProbeStats)>,
}

/// A frame on its way through the engine: the interface it came in by,
/// the one it leaves by, its bytes and their parse (what the receive
/// stages before the rules, and the monitor's looks at them, read).
#[derive(Clone, Copy, Debug)]
pub struct Transit<'a> {
    pub iface: usize,
    pub egress: usize,
    pub frame: &'a [u8],
    pub info: &'a PacketInfo,
}

/// A packet the rules passed, as the measure stage sees it.
#[derive(Clone, Copy, Debug)]
pub struct RxEvent<'a> {
    pub iface: usize,
    pub egress: usize,
    pub ip: &'a IpInfo,
    pub seg: Option<&'a TcpSeg>,
    /// The connection's hash (outbound), and a round trip this packet
    /// completed (the classifier's passive RTT).
    pub flow_hash: u64,
    pub rtt_sample: Option<Duration>,
}

/// The path monitor of an engine's interfaces (see the module docs).
pub struct Monitor {
    sides: Vec<Side>,
    /// Each interface's bridge peer, and whether it is a pair's LAN side.
    peer: Vec<Option<usize>>,
    lan: Vec<bool>,
    /// Whether something reads the way in and the delivery (autorate
    /// runs): only then are they measured.
    wanted: bool,
    /// The secret the probes are known by.
    probe_key: [u8; 16],
}

impl Monitor {
    /// The monitor of interfaces with bridge peers `peer`; `lan[i]`: `i`
    /// is its pair's LAN side.
    pub fn new(peer: Vec<Option<usize>>, lan: Vec<bool>, probe_key: [u8; 16]) -> Monitor {
        Monitor {
            sides: peer.iter().map(|_| Side::default()).collect(),
            peer,
            lan,
            wanted: false,
            probe_key,
        }
    }

    /// Whether the way in and the delivery are measured (while autorate
    /// runs on some interface).
    pub fn set_wanted(&mut self, on: bool) {
        self.wanted = on;
    }

    /// Interface `iface` is shaped at `rate` now (`None`: no shaper).
    pub fn set_rate(&mut self, iface: usize, rate: Option<Rate>) {
        if let Some(s) = self.sides.get_mut(iface) {
            s.rate = rate;
        }
    }

    /// The probe sent on `iface` goes to `target` (`None`: none). The
    /// same target keeps its base and counters.
    pub fn set_probe(&mut self, iface: usize, target: Option<IpAddr>) {
        let key = self.probe_key;
        let Some(s) = self.sides.get_mut(iface) else {
            return;
        };
        s.probe = match (target, s.probe.take()) {
            (Some(t), Some(p)) if p.target() == t => Some(p),
            (Some(t), _) => Some(Prober::new(t, key)),
            (None, _) => None,
        };
    }

    /// The WAN side of `iface`'s bridge pair: where the link that
    /// `iface`'s shaper stands for lies, whichever direction.
    fn wan_side(&self, iface: usize) -> usize {
        match (self.lan[iface], self.peer[iface]) {
            (true, Some(p)) => p,
            _ => iface,
        }
    }

    /// A frame from the far side arrived on `t.iface` at `now`, before the
    /// rules: who answers there (the probe's template); `true` when it is
    /// a reply to the probe, sluice's own, to be taken out of the traffic.
    #[inline]
    pub fn on_arrival(&mut self, now: Instant, t: &Transit<'_>) -> bool {
        if self.lan[t.iface] {
            return false;
        }
        let Some(p) = self.sides[t.iface].probe.as_mut() else {
            return false;
        };
        p.heard(now, t.frame, t.info);
        let icmp = matches!(
            t.info.ip,
            Some(IpInfo {
                l4: L4::Icmp { .. },
                ..
            })
        );
        icmp && p.on_reply(now, t.frame, t.info)
    }

    /// The rules passed a frame at `now`: one from the LAN side may lend
    /// the probe its name.
    #[inline]
    pub fn on_passed(&mut self, now: Instant, t: &Transit<'_>) {
        if !self.lan[t.iface] {
            return;
        }
        if let Some(p) = self.sides[t.egress].probe.as_mut() {
            p.learn(now, t.frame, t.info);
        }
    }

    /// A packet the rules passed, at `now`: the way in and the delivery
    /// (while wanted), and the round trip it completed, if any.
    /// `reverse` hashes the connection's other direction; it is called
    /// at most once, and only when needed.
    pub fn on_rx(&mut self, now: Instant, rx: RxEvent<'_>, reverse: impl Fn() -> u64) {
        let mut hash = None;
        let mut peer = || *hash.get_or_insert_with(&reverse);
        match (self.lan[rx.iface], self.wanted, rx.seg) {
            // From the far side, the sender's stamp times the way in:
            // what a download's controller reads (only where one may).
            (false, true, Some(g)) => {
                let s = &mut self.sides[rx.iface];
                // Counted only for a conversation the LAN host answers
                // (crate::delay_signal).
                if let Some((tsval, _)) = g.timestamps {
                    s.signal.add_inbound(now, rx.ip.src, rx.flow_hash, tsval);
                }
                // And what it acknowledges of the upload's data.
                s.delivered.on_segment(rx.flow_hash, g.flags, g.ack);
            }
            // The LAN host acknowledges the far end: the connection's
            // stamps from there may count.
            (true, true, Some(g)) => {
                use sluice_wire::tcp_flags::{ACK, RST};
                if g.flags & (ACK | RST) == ACK {
                    let far = peer();
                    self.sides[rx.egress].signal.answered(now, far);
                }
            }
            _ => {}
        }
        // A measurement this packet completed timed the path it came
        // from: the delay signal of its interface.
        let Some(sample) = rx.rtt_sample else {
            return;
        };
        // The measurement began with a packet of this connection's other
        // direction leaving through here.
        let back = peer();
        let s = &mut self.sides[rx.iface];
        // Without the connection's own waits, the mean of everyone's
        // corrects the delay, and nothing the base: no packet of the
        // connection is known to have waited at least that.
        let own = s.flow_sojourn.get(back).unwrap_or(Own {
            wait: s.sojourn.get(),
            floor: Duration::ZERO,
        });
        // A segment with data (or a SYN, FIN) was sent as our packet
        // arrived; a pure ACK may have been delayed.
        let prompt = rx.seg.is_some_and(|g| {
            use sluice_wire::tcp_flags::{FIN, SYN};
            g.payload_len > 0 || g.flags & (SYN | FIN) != 0
        });
        if prompt {
            s.signal.add(now, rx.ip.src, rx.flow_hash, sample, own);
        } else {
            s.signal.add_ack(now, rx.ip.src, rx.flow_hash, sample, own);
        }
    }

    /// Packet `id`, held `held` by TCP control, joins `egress`'s queue:
    /// the hold is part of its connection's wait here (the correction),
    /// counted when it leaves.
    pub fn on_release(&mut self, egress: usize, id: u64, held: Duration) {
        self.sides[egress].flow_sojourn.hold(id, held);
    }

    /// Packet `pkt` leaves `iface` at `now`: its wait in sluice's queue,
    /// into the interface's and its connection's sojourn. Returns the wait.
    pub fn on_tx(&mut self, now: Instant, iface: usize, pkt: &Packet) -> Duration {
        let wait = now.saturating_since(pkt.enqueued_at);
        let s = &mut self.sides[iface];
        s.sojourn.add(wait);
        s.flow_sojourn.add(pkt.flow, pkt.id, wait, now);
        wait
    }

    /// The interval of the probe sent on `iface`: a hundredth of the
    /// slower shaped direction of its pair (crate::probe).
    fn probe_interval(&self, iface: usize) -> Duration {
        let rates = [Some(iface), self.peer.get(iface).copied().flatten()]
            .into_iter()
            .flatten()
            .filter_map(|i| self.sides[i].rate);
        let slow = rates.min().unwrap_or(Rate(0));
        self.sides[iface]
            .probe
            .as_ref()
            .map_or(MIN_INTERVAL, |p| p.interval(slow))
    }

    /// The probe's echo request due on `iface` at `now`, if one is: it
    /// goes out beside the shaped traffic, not behind it.
    pub fn poll_probe(&mut self, now: Instant, iface: usize) -> Option<Vec<u8>> {
        let due = self.sides.get(iface)?.probe.as_ref()?.next_send(now)?;
        if due > now {
            return None;
        }
        // Its interval is worked out only when one is due.
        let interval = self.probe_interval(iface);
        self.sides[iface].probe.as_mut()?.poll(now, interval)
    }

    /// When the next probe is due on any interface (seen at `now`).
    pub fn next_probe(&self, now: Instant) -> Option<Instant> {
        self.sides
            .iter()
            .filter_map(|s| s.probe.as_ref()?.next_send(now))
            .min()
    }

    /// What the direction leaving by `iface` reads at `now`. Each reads
    /// the WAN side of its pair (the link lies beyond it) and its own
    /// queue: an upload (leaving by the WAN side) the way out, a download
    /// the way in. A sender's clock is trusted only after it has been
    /// watched (crate::owd): until the way in is read for at least half
    /// the flows the round trip gives, the round trip stands for it. No
    /// TCP to read: the probe's round trip, where one is sent.
    pub fn reading(&self, now: Instant, iface: usize) -> PathReading {
        let side = self.wan_side(iface);
        let s = &self.sides[side];
        let mut beyond = if side == iface {
            s.signal.read_out(now)
        } else {
            let (way_in, rtt) = (s.signal.read_in(now), s.signal.read(now));
            if way_in.delay.is_some() && way_in.flows * 2 >= rtt.flows {
                way_in
            } else {
                rtt
            }
        };
        if beyond.delay.is_none() {
            if let Some(p) = &s.probe {
                let r = p.reading(now, self.probe_interval(side));
                if r.delay.is_some() {
                    beyond = r;
                }
            }
        }
        PathReading {
            beyond,
            own: self.sides[iface].sojourn.get(),
            delivered: (side == iface).then(|| s.delivered.total()),
        }
    }

    /// The counters of the side the direction leaving by `iface` is read on.
    pub fn stats(&self, iface: usize) -> SideStats {
        let s = &self.sides[self.wan_side(iface)];
        SideStats {
            samples: s.signal.samples,
            unsound: s.signal.unsound,
            probe: s.probe.as_ref().map(|p| (p.target(), p.stats)),
        }
    }

    /// The delay signal of the path through interface `iface` (its round
    /// trip, read at `now`) and the samples it has taken.
    pub fn round_trip(&self, now: Instant, iface: usize) -> Option<(Reading, u64)> {
        let s = self.sides.get(iface)?;
        Some((s.signal.read(now), s.signal.samples))
    }

    /// Forgets what is stale at `now` (housekeeping).
    pub fn expire(&mut self, now: Instant) {
        for s in &mut self.sides {
            s.signal.expire(now);
        }
    }

    /// Keeps each delay sample's parts (or stops).
    pub fn set_trace(&mut self, on: bool) {
        for s in &mut self.sides {
            s.signal.set_trace(on);
        }
    }

    /// The samples traced since the last call, by interface in order, and
    /// how many were dropped for want of room since tracing began.
    pub fn drain_trace(&mut self) -> (Vec<(usize, SampleTrace)>, u64) {
        let mut out = Vec::new();
        let mut lost = 0;
        for (i, s) in self.sides.iter_mut().enumerate() {
            out.extend(s.signal.drain_trace().into_iter().map(|t| (i, t)));
            lost += s.signal.trace_lost;
        }
        (out, lost)
    }
}

#[cfg(test)]
mod tests;
