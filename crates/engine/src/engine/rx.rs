//! The receive path: `handle_rx` as named stages.

use super::*;

impl Engine {
    /// Takes a frame received on interface `iface` at `now`.
    pub fn handle_rx(&mut self, now: Instant, iface: usize, frame: Vec<u8>) -> Rx {
        let now = self.clamp(now);
        self.housekeeping(now);
        let Some(ing) = self.ifaces.get_mut(iface) else {
            return Rx::Dropped(DropCause::NoRoute);
        };
        ing.counters.rx_frames += 1;
        ing.counters.rx_bytes += frame.len() as u64;
        let Some(egress) = self.peer[iface] else {
            self.ifaces[iface].counters.no_route += 1;
            self.give_back(iface, frame, DropCause::NoRoute);
            return Rx::Dropped(DropCause::NoRoute);
        };
        let info = match sluice_wire::parse(&frame) {
            Ok(info) => info,
            Err(_) => {
                self.ifaces[iface].counters.malformed += 1;
                self.give_back(iface, frame, DropCause::Malformed);
                return Rx::Dropped(DropCause::Malformed);
            }
        };
        if self.ifaces[iface].lan_side {
            self.learn(now, iface, egress, &frame, &info);
        } else if let Some(p) = self.ifaces[iface].probe.as_mut() {
            // Who answers from the far side, for the probe's template.
            p.heard(now, &frame, &info);
            let icmp = matches!(
                info.ip,
                Some(IpInfo {
                    l4: L4::Icmp { .. },
                    ..
                })
            );
            if icmp && p.on_reply(now, &frame, &info) {
                self.ifaces[iface].counters.probe_replies += 1;
                self.give_back(iface, frame, DropCause::ProbeReply);
                return Rx::Dropped(DropCause::ProbeReply);
            }
        }
        // One walk of a TCP header and its options, for the classifier's
        // RTT and for TCP control; `None` for whatever is not a whole TCP
        // segment (fragments, bad offsets), which neither reads.
        let mut tcp = TcpHeader::in_frame(&frame, &info).ok().map(|h| h.segment());
        let (class, flow, ecn, rtt_path, max_mss, prio) = match &info.ip {
            None => {
                self.ifaces[iface].counters.non_ip += 1;
                (None, 0, Ecn::NotEct, None, None, None)
            }
            Some(ip) => {
                let (icid, ecid) = (self.ifaces[iface].cid, self.ifaces[egress].cid);
                // Sequence numbers and timestamps, for the states' passive RTT.
                let seg = tcp.as_ref().map(TcpSeg::of);
                let c = &mut self.classifier;
                let din = c.classify_seg(now, icid, Direction::In, ip, seg.as_ref());
                if let Some(cause) = direction_pass(&din) {
                    return self.refuse(iface, frame, cause);
                }
                let c = &mut self.classifier;
                let dout = c.classify_seg(now, ecid, Direction::Out, ip, seg.as_ref());
                if let Some(cause) = direction_pass(&dout) {
                    return self.refuse(iface, frame, cause);
                }
                // Only a frame the rules passed lends the probe its name.
                if let (true, Some(p)) = (
                    self.ifaces[iface].lan_side,
                    self.ifaces[egress].probe.as_mut(),
                ) {
                    p.learn(now, &frame, &info);
                }
                // pf: the outbound pass may override the inbound assignment.
                let queue = dout.queue.or(din.queue);
                let class = queue.and_then(|q| self.ifaces[egress].classes.get(&q).copied());
                let rtt = dout.rtt_path.or(din.rtt_path);
                // The connection's other direction: hashed once, at most.
                let mut reverse = None;
                // From the far side, the sender's stamp times the way in:
                // what a download's controller reads (only where one may).
                if let (false, true, Some(g)) = (
                    self.ifaces[iface].lan_side,
                    self.next_autorate.is_some(),
                    seg.as_ref(),
                ) {
                    let i = &mut self.ifaces[iface];
                    // Counted only for a conversation the LAN host answers
                    // (crate::delay_signal).
                    if let Some((tsval, _)) = g.timestamps {
                        i.signal.add_inbound(now, ip.src, dout.flow_hash, tsval);
                    }
                    // And what it acknowledges of the upload's data.
                    i.delivered.on_segment(dout.flow_hash, g.flags, g.ack);
                } else if let (true, true, Some(g)) = (
                    self.ifaces[iface].lan_side,
                    self.next_autorate.is_some(),
                    seg.as_ref(),
                ) {
                    // The LAN host acknowledges the far end: the
                    // connection's stamps from there may count.
                    use sluice_wire::tcp_flags::{ACK, RST};
                    if g.flags & (ACK | RST) == ACK {
                        let far =
                            *reverse.get_or_insert_with(|| self.classifier.reverse_flow_hash(ip));
                        self.ifaces[egress].signal.answered(now, far);
                    }
                }
                // A measurement this packet completed timed the path it
                // came from: the delay signal of its interface.
                if let Some(sample) = dout.rtt_sample.or(din.rtt_sample) {
                    // The measurement began with a packet of this
                    // connection's other direction leaving through here.
                    let peer =
                        *reverse.get_or_insert_with(|| self.classifier.reverse_flow_hash(ip));
                    let i = &mut self.ifaces[iface];
                    // Without the connection's own waits, the mean of
                    // everyone's corrects the delay, and nothing the base:
                    // no packet of the connection is known to have waited
                    // at least that.
                    let own = i.flow_sojourn.get(peer).unwrap_or(Own {
                        wait: i.sojourn.get(),
                        floor: Duration::ZERO,
                    });
                    // A segment with data (or a SYN, FIN) was sent as
                    // our packet arrived; a pure ACK may have been delayed.
                    let prompt = seg.as_ref().is_some_and(|g| {
                        use sluice_wire::tcp_flags::{FIN, SYN};
                        g.payload_len > 0 || g.flags & (SYN | FIN) != 0
                    });
                    if prompt {
                        i.signal.add(now, ip.src, dout.flow_hash, sample, own);
                    } else {
                        i.signal.add_ack(now, ip.src, dout.flow_hash, sample, own);
                    }
                }
                let mss = (din.max_mss.is_some() || dout.max_mss.is_some()).then(|| {
                    let rule = dout.max_mss.and(dout.rule).or(din.rule);
                    ([din.max_mss, dout.max_mss], rule)
                });
                let prio = dout.prio.or(din.prio);
                // Host isolation buckets hosts too; the hashes cost two
                // SipHash rounds, paid only where a queue isolates.
                let flow = if self.ifaces[egress]
                    .tree
                    .as_ref()
                    .is_some_and(|t| t.isolating)
                {
                    let c = &self.classifier;
                    Packet::flow_key(dout.flow_hash, c.host_hash(ip.src), c.host_hash(ip.dst))
                } else {
                    dout.flow_hash
                };
                (class, flow, Ecn::from_bits(ip.tos), rtt, mss, prio)
            }
        };
        let class = class.unwrap_or_else(|| {
            let t = self.ifaces[egress].tree.as_ref();
            t.map(|t| t.default).unwrap_or(ClassId::ROOT)
        });
        let mut frame = frame;
        if let (Some(seg), Some((limits, rule))) = (tcp.as_mut(), max_mss) {
            self.clamp_mss(iface, &mut frame, &info, seg, limits, rule);
        }
        let (plan, allowance) = if let (Some(seg), true) = (&tcp, self.tcp.enabled()) {
            let default_of = |i: usize| self.ifaces[i].tree.as_ref().map(|t| t.default);
            let (back, forth) = (default_of(iface), default_of(egress));
            let seen = self.tcp.on_segment(
                now, iface, egress, class, back, forth, &mut frame, &info, seg, rtt_path,
            );
            // Its flow's held ACKs go first: nothing is reordered.
            self.drain_released(now);
            seen
        } else {
            (Plan::Forward, Duration::ZERO)
        };
        let frame = if self.queued(egress) > 0 {
            self.right_size(frame)
        } else {
            frame
        };
        let eg = &mut self.ifaces[egress];
        let len = frame.len() as u32;
        let pkt = Packet {
            data: frame,
            len,
            cost: eg.overhead.cost(len),
            flow,
            class,
            ecn,
            enqueued_at: now,
            id: self.next_id,
            // Whole milliseconds, rounded up: the AQM never judges the flow
            // by less than its window allows.
            allowance_ms: u16::try_from(allowance.as_nanos().div_ceil(1_000_000))
                .unwrap_or(u16::MAX),
        };
        self.next_id += 1;
        let pkt = match plan {
            Plan::Pace(ticket) => {
                let size = pkt.truesize();
                if self.memory.held_bytes.saturating_add(size) > self.memory.limit_bytes {
                    pkt // refused below, like any frame over the cap
                } else {
                    let paced = self.tcp.pace(now, ticket, egress, pkt);
                    // A cap may have released held ACKs: they go first.
                    self.drain_released(now);
                    match paced {
                        Some(pkt) => pkt,
                        None => {
                            self.charge(size);
                            return Rx::Queued { egress };
                        }
                    }
                }
            }
            Plan::Forward => pkt,
        };
        self.enqueue(now, egress, pkt, prio.unwrap_or(DEFAULT_PRIO))
    }

    /// `scrub (max-mss …)` on a SYN or SYN-ACK that arrived on `iface`
    /// (crate::mss): its MSS option lowered to the limit, `seg` kept in
    /// step for TCP control.
    pub(super) fn clamp_mss(
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
}
