//! The receive path: [`Engine::handle_rx`] as named stages, in order:
//!
//! | stage | does | result |
//! |---|---|---|
//! | admit | counts the frame, finds its way out, parses it | [`Admitted`] |
//! | observe | bridge learning (LAN side), autorate's probe (WAN side) | a probe reply is taken |
//! | classify | pf's rules in and out: queue, flow, prio, MSS limit | [`Classified`] |
//! | measure | the path monitor's look at it (crate::path) | — |
//! | rewrite | `scrub (max-mss)` on a SYN | — |
//! | control | TCP control: forward, or hold an ACK (crate::tcpctl) | [`Control`] |
//! | queue | into one of the three waiting places ([`super::waits`]) | [`Rx`] |
//!
//! A stage that refuses the frame returns its [`DropCause`]; `handle_rx`
//! hands the frame back with it ([`Engine::refuse`]).

use super::*;
use crate::path::Transit;
use sluice_classify::Decision;
use sluice_wire::tcp::Segment;
use sluice_wire::PacketInfo;

/// A frame let in: the interface it leaves by, and its parse.
pub(super) struct Admitted {
    egress: usize,
    info: PacketInfo,
}

/// What the rules decided for a packet, and what measurement needs of it.
pub(super) struct Classified {
    /// Its class on the egress tree (the tree's default, or the root).
    class: ClassId,
    /// The scheduler's flow key (with the hosts', where a queue isolates).
    flow: u64,
    ecn: Ecn,
    prio: Option<u8>,
    /// The connection's round trip beyond sluice, for TCP control.
    rtt_path: Option<Duration>,
    /// `scrub (max-mss)` limits in and out, and the rule to credit.
    max_mss: Option<([Option<ir::MaxMss>; 2], Option<u32>)>,
    /// The connection's hash (outbound), and a round trip this packet
    /// completed: the delay signal's inputs.
    flow_hash: u64,
    rtt_sample: Option<Duration>,
}

impl Classified {
    /// A frame that is not IP: no rules, the default class.
    fn non_ip() -> Classified {
        Classified {
            class: ClassId::ROOT,
            flow: 0,
            ecn: Ecn::NotEct,
            prio: None,
            rtt_path: None,
            max_mss: None,
            flow_hash: 0,
            rtt_sample: None,
        }
    }
}

/// TCP control's word on a segment: forward it, or hold it (an ACK), and
/// the wait its window allows it in the queue (the AQM's allowance).
pub(super) struct Control {
    plan: Plan,
    allowance: Duration,
}

impl Engine {
    /// Takes a frame received on interface `iface` at `now`.
    pub fn handle_rx(&mut self, now: Instant, iface: usize, frame: Vec<u8>) -> Rx {
        let now = self.clamp(now);
        self.housekeeping(now);
        if iface >= self.ifaces.len() {
            return Rx::Dropped(DropCause::NoRoute);
        }
        let Admitted { egress, info } = match self.admit(iface, &frame) {
            Ok(a) => a,
            Err(cause) => return self.refuse(iface, frame, cause),
        };
        let t = Transit {
            iface,
            egress,
            frame: &frame,
            info: &info,
        };
        if let Err(cause) = self.observe(now, &t) {
            return self.refuse(iface, frame, cause);
        }
        // One walk of a TCP header and its options, for the classifier's
        // RTT and for TCP control; `None` for whatever is not a whole TCP
        // segment (fragments, bad offsets), which neither reads.
        let mut tcp = TcpHeader::in_frame(&frame, &info).ok().map(|h| h.segment());
        let seg = tcp.as_ref().map(TcpSeg::of);
        let c = match self.classify(now, &t, seg.as_ref()) {
            Ok(c) => c,
            Err(cause) => return self.refuse(iface, frame, cause),
        };
        self.measure(now, iface, egress, &info, seg.as_ref(), &c);
        let mut frame = frame;
        if let (Some(seg), Some((limits, rule))) = (tcp.as_mut(), c.max_mss) {
            self.rewrite(iface, &mut frame, &info, seg, limits, rule);
        }
        let ctl = self.control(now, iface, egress, &c, &mut frame, &info, tcp.as_ref());
        self.queue(now, egress, frame, &c, ctl)
    }

    /// Counts the frame on `iface`, finds the interface it leaves by and
    /// parses it.
    fn admit(&mut self, iface: usize, frame: &[u8]) -> Result<Admitted, DropCause> {
        let ing = &mut self.ifaces[iface].counters;
        ing.rx_frames += 1;
        ing.rx_bytes += frame.len() as u64;
        let egress = self.peer[iface].ok_or(DropCause::NoRoute)?;
        let info = sluice_wire::parse(frame).map_err(|_| DropCause::Malformed)?;
        Ok(Admitted { egress, info })
    }

    /// What sluice learns from the frame before the rules: the LAN side's
    /// addresses (bridge mode), and on the WAN side who answers the probe;
    /// a reply to the probe itself is sluice's own and goes no further.
    fn observe(&mut self, now: Instant, t: &Transit<'_>) -> Result<(), DropCause> {
        if self.ifaces[t.iface].lan_side {
            self.learn(now, t);
        } else if self.path.on_arrival(now, t) {
            return Err(DropCause::ProbeReply);
        }
        Ok(())
    }

    /// pf's rules on the way in (`iface`) and out (`egress`), as on a
    /// router; the outbound pass may override the inbound assignment.
    fn classify(
        &mut self,
        now: Instant,
        t: &Transit<'_>,
        seg: Option<&TcpSeg>,
    ) -> Result<Classified, DropCause> {
        let (iface, egress, info) = (t.iface, t.egress, t.info);
        let default = self.ifaces[egress].tree.as_ref().map(|t| t.default);
        let Some(ip) = &info.ip else {
            self.ifaces[iface].counters.non_ip += 1;
            let class = default.unwrap_or(ClassId::ROOT);
            return Ok(Classified {
                class,
                ..Classified::non_ip()
            });
        };
        let (icid, ecid) = (self.ifaces[iface].cid, self.ifaces[egress].cid);
        let c = &mut self.classifier;
        let din = c.classify_seg(now, icid, Direction::In, ip, seg);
        direction_pass(&din).map_or(Ok(()), Err)?;
        let c = &mut self.classifier;
        let dout = c.classify_seg(now, ecid, Direction::Out, ip, seg);
        direction_pass(&dout).map_or(Ok(()), Err)?;
        // Only a frame the rules passed lends the probe its name.
        self.path.on_passed(now, t);
        let queue = dout.queue.or(din.queue);
        let class = queue.and_then(|q| self.ifaces[egress].classes.get(&q).copied());
        Ok(Classified {
            class: class.or(default).unwrap_or(ClassId::ROOT),
            flow: self.flow_key(egress, ip, &dout, seg),
            ecn: Ecn::from_bits(ip.tos),
            prio: dout.prio.or(din.prio),
            rtt_path: dout.rtt_path.or(din.rtt_path),
            max_mss: (din.max_mss.is_some() || dout.max_mss.is_some()).then(|| {
                let rule = dout.max_mss.and(dout.rule).or(din.rule);
                ([din.max_mss, dout.max_mss], rule)
            }),
            flow_hash: dout.flow_hash,
            rtt_sample: dout.rtt_sample.or(din.rtt_sample),
        })
    }

    /// The scheduler's flow key: the connection's hash, and where a queue
    /// isolates hosts the hosts' too (two SipHash rounds, paid only there),
    /// the router's end replaced by the original host behind NAT where
    /// conntrack said (crate::nat; a TCP SYN asks afresh).
    fn flow_key(
        &mut self,
        egress: usize,
        ip: &IpInfo,
        dout: &Decision,
        seg: Option<&TcpSeg>,
    ) -> u64 {
        let isolating = self.ifaces[egress]
            .tree
            .as_ref()
            .is_some_and(|t| t.isolating);
        if !isolating {
            return dout.flow_hash;
        }
        let syn = seg.is_some_and(|g| {
            use sluice_wire::tcp_flags::{ACK, SYN};
            g.flags & (SYN | ACK) == SYN
        });
        let (src, dst) = self.hosts(ip, egress, syn);
        let c = &self.classifier;
        Packet::flow_key(dout.flow_hash, c.host_hash(src), c.host_hash(dst))
    }

    /// The two hosts of `ip` for host isolation: the router's end replaced
    /// by the original host where conntrack said (crate::nat); `syn`: a
    /// new TCP connection.
    fn hosts(
        &mut self,
        ip: &IpInfo,
        egress: usize,
        syn: bool,
    ) -> (std::net::IpAddr, std::net::IpAddr) {
        let toward_lan = self.ifaces[egress].lan_side;
        let original = crate::nat::NatKey::of(ip, toward_lan).and_then(|k| self.nat.lookup(k, syn));
        match (original, toward_lan) {
            (Some(h), true) => (ip.src, h),
            (Some(h), false) => (h, ip.dst),
            (None, _) => (ip.src, ip.dst),
        }
    }

    /// The path monitor's look at a packet the rules passed
    /// (crate::path): the way in, the delivery and the round trips.
    fn measure(
        &mut self,
        now: Instant,
        iface: usize,
        egress: usize,
        info: &PacketInfo,
        seg: Option<&TcpSeg>,
        c: &Classified,
    ) {
        let Some(ip) = &info.ip else {
            return;
        };
        let rx = RxEvent {
            iface,
            egress,
            ip,
            seg,
            flow_hash: c.flow_hash,
            rtt_sample: c.rtt_sample,
        };
        // The connection's other direction: hashed once, at most.
        let classifier = &self.classifier;
        self.path
            .on_rx(now, rx, || classifier.reverse_flow_hash(ip));
    }

    fn rewrite(
        &mut self,
        iface: usize,
        frame: &mut [u8],
        info: &sluice_wire::PacketInfo,
        seg: &mut sluice_wire::tcp::Segment,
        limits: [Option<ir::MaxMss>; 2],
        rule: Option<u32>,
    ) {
        if seg.flags & sluice_wire::tcp_flags::SYN == 0 {
            return;
        }
        let Some(af) = info.ip.as_ref().map(|ip| ip.af) else {
            return;
        };
        let i = &mut self.ifaces[iface];
        let auto = match af {
            sluice_wire::Af::V4 => i.auto_mss[0],
            sluice_wire::Af::V6 => i.auto_mss[1],
        };
        let Some(limit) = crate::mss::limit(limits, auto, af) else {
            return;
        };
        if seg.options.error.is_some() {
            i.counters.mss_untouched += 1;
            return;
        }
        // Every MSS option is clamped (stacks take the last of several).
        if seg.options.mss_max.is_none_or(|m| m <= limit) {
            return;
        }
        match sluice_wire::tcp::rewrite_mss(frame, info, limit) {
            Ok(_) => {
                i.counters.mss_clamped += 1;
                seg.options.mss = seg.options.mss.map(|m| m.min(limit));
                seg.options.mss_max = Some(limit);
                if let Some(r) = rule {
                    self.classifier.note_mss_clamped(r);
                }
            }
            Err(_) => i.counters.mss_untouched += 1,
        }
    }
    /// TCP control (crate::tcpctl) on a segment of a controlled class: it
    /// may rewrite the window, and decides whether an ACK is held.
    #[allow(clippy::too_many_arguments)]
    fn control(
        &mut self,
        now: Instant,
        iface: usize,
        egress: usize,
        c: &Classified,
        frame: &mut [u8],
        info: &PacketInfo,
        seg: Option<&Segment>,
    ) -> Control {
        let (Some(seg), true) = (seg, self.tcp.enabled()) else {
            return Control {
                plan: Plan::Forward,
                allowance: Duration::ZERO,
            };
        };
        let default_of = |i: usize| self.ifaces[i].tree.as_ref().map(|t| t.default);
        let (back, forth) = (default_of(iface), default_of(egress));
        let (plan, allowance) = self.tcp.on_segment(
            now, iface, egress, c.class, back, forth, frame, info, seg, c.rtt_path,
        );
        // Its flow's held ACKs go first: nothing is reordered.
        self.drain_released(now);
        Control { plan, allowance }
    }

    /// The packet into its waiting place: held by TCP control (an ACK it
    /// paces), else the egress tree or bands.
    fn queue(
        &mut self,
        now: Instant,
        egress: usize,
        frame: Vec<u8>,
        c: &Classified,
        ctl: Control,
    ) -> Rx {
        let frame = if self.queued(egress) > 0 {
            self.right_size(frame)
        } else {
            frame
        };
        let len = frame.len() as u32;
        let pkt = Packet {
            data: frame,
            len,
            cost: self.ifaces[egress].overhead.cost(len),
            flow: c.flow,
            class: c.class,
            ecn: c.ecn,
            enqueued_at: now,
            id: self.next_id,
            // Whole milliseconds, rounded up: the AQM never judges the flow
            // by less than its window allows.
            allowance_ms: u16::try_from(ctl.allowance.as_nanos().div_ceil(1_000_000))
                .unwrap_or(u16::MAX),
        };
        self.next_id += 1;
        let prio = c.prio.unwrap_or(DEFAULT_PRIO);
        match ctl.plan {
            // Over the memory cap: refused by `enqueue`, like any frame.
            Plan::Pace(ticket) if self.memory.fits(pkt.truesize()) => {
                self.hold_ack(now, ticket, egress, pkt, prio)
            }
            _ => self.enqueue(now, egress, pkt, prio),
        }
    }
}
