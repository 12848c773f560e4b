//! A segment's two roles in its connection: as data on its way to the
//! receiver (it joins, moves or leaves a pacer) and as the receiver's
//! answer (its window clamped, its ACK paced); and what they count.

use super::*;

impl TcpCtl {
    /// The flow moved data (sent some, or had some acknowledged): it counts
    /// among the class's active flows for the share.
    pub(super) fn mark_active(f: &mut Flow, p: &mut Pacer) {
        if f.epoch != p.epoch {
            f.epoch = p.epoch;
            p.active_cur += 1;
            if let Some(h) = f.host {
                p.host_mut(h).cur += 1;
            }
        }
        Self::settle(f, p);
    }

    /// A SYN-ACK after the flow's SYN: the handshake's round trip beyond
    /// sluice, the flow's and the class's latest.
    pub(super) fn note_handshake(f: &mut Flow, p: &mut Pacer, now: Instant, seg: &Segment) {
        if seg.flags & SYN_ACK == SYN_ACK && f.handshake_rtt.is_none() {
            f.handshake_rtt = f.syn_at.map(|t| now.saturating_since(t));
            if f.handshake_rtt.is_some() {
                p.recent_rtt = f.handshake_rtt;
            }
        }
    }

    pub(super) fn uncount_syn(f: &mut Flow, p: &mut Pacer) {
        if f.in_syns {
            f.in_syns = false;
            p.count_syn(f.host, false);
        }
    }

    /// The flow no longer counts as opening in its pacer's share.
    pub(super) fn settle(f: &mut Flow, p: &mut Pacer) {
        Self::uncount_syn(f, p);
        if f.pending {
            f.pending = false;
            p.pending = p.pending.saturating_sub(1);
            // The host stops counting at the next epoch if nothing else.
            if let Some(h) = f.host.and_then(|h| p.hosts.get_mut(&h)) {
                h.pending = h.pending.saturating_sub(1);
            }
            if let Some(o) = f.opened {
                if let Some(n) = p.opening.get_mut(&o) {
                    *n -= 1;
                    if *n == 0 {
                        p.opening.remove(&o);
                    }
                }
            }
        }
    }

    /// The segment as data on its way to the receiver: joins, moves or
    /// leaves a pacer by the class its payload is queued in. The flow's
    /// [`TcpCtl::allowance`] when it carries data and its window is clamped.
    pub(super) fn data_role(
        &mut self,
        now: Instant,
        egress: usize,
        class: ClassId,
        key: Key,
        seg: &Segment,
        af: Af,
    ) -> Duration {
        let pacer = self.pacer_of(egress, class);
        let carries = seg.payload_len > 0;
        match (self.flows.contains_key(&key), pacer, carries) {
            (false, Some(p), true) => {
                if !self.admit(now, key, p, af) {
                    return Duration::ZERO;
                }
            }
            (true, None, true) => {
                self.forget(&key);
                return Duration::ZERO;
            }
            (true, Some(p), true) => {
                let f = self.flows.get_mut(&key).expect("checked");
                if f.pacer != p {
                    let old = f.pacer;
                    Self::release_flow(
                        f,
                        &mut self.pacers[old],
                        &mut self.released,
                        &mut self.held,
                        Release::Flushed,
                    );
                    self.pacers[old].report.flows = self.pacers[old].report.flows.saturating_sub(1);
                    Self::settle(f, &mut self.pacers[old]);
                    self.pacers[p].report.flows += 1;
                    f.pacer = p;
                    f.host = self.pacers[p].host_of(&key);
                    f.in_round = false;
                }
            }
            (false, _, _) => return Duration::ZERO,
            (true, _, false) => {}
        }
        let Some(f) = self.flows.get_mut(&key) else {
            return Duration::ZERO;
        };
        let syn = f.seq.syn(Side::Sender, seg);
        if syn == Syn::Forged {
            self.pacers[f.pacer].report.syns_ignored += 1;
            return Duration::ZERO;
        }
        let p = &mut self.pacers[f.pacer];
        if f.seq.record(Side::Sender, seg, syn, f.clamp.right_edge()) {
            f.opened = Some(key.src);
            p.refill(now);
            Self::count_opening(f, p);
        }
        f.clamp.on_sender(seg);
        if let (true, true, Some((tsval, _))) = (p.reads_path, carries, seg.options.timestamps) {
            f.owd.on_data(now, tsval);
        }
        Self::note_handshake(f, p, now, seg);
        p.refill(now);
        f.last = now;
        if carries {
            Self::mark_active(f, p);
        }
        // A window clamped from the handshake on bounds the flow's queue.
        let allowance = if carries && p.ctl.window_clamp && f.clamp.scale().is_some() {
            Self::allowance(f, p)
        } else {
            Duration::ZERO
        };
        if seg.flags & tcp_flags::RST != 0 {
            self.forget(&key);
        }
        allowance
    }

    /// The segment as the receiver's answer: window clamp, then pacing.
    pub(super) fn ack_role(
        &mut self,
        now: Instant,
        key: Key,
        seg: &Segment,
        frame: &mut [u8],
        info: &PacketInfo,
        rtt_path: Option<Duration>,
    ) -> Plan {
        let Some(f) = self.flows.get_mut(&key) else {
            return Plan::Forward;
        };
        let p = &mut self.pacers[f.pacer];
        let syn = f.seq.syn(Side::Receiver, seg);
        if syn == Syn::Forged {
            p.report.syns_ignored += 1;
            return Plan::Forward;
        }
        p.refill(now);
        if f.seq.record(Side::Receiver, seg, syn, None) {
            f.opened = Some(key.dst);
            Self::count_opening(f, p);
        }
        f.last = now;
        // The receiver's SYN-ACK answers the sender's SYN (an upload's).
        Self::note_handshake(f, p, now, seg);
        let signed = info.ip.as_ref().is_some_and(|ip| ip.authenticated);
        if seg.options.error.is_some() || seg.options.authenticated || signed {
            // Unreadable options: nothing is rewritten (what the peer makes
            // of them is unknown); a signed segment would be dropped by
            // its receiver. The segment passes at once.
            f.clamp.on_receiver(seg, None);
            p.report.windows_untouched += 1;
        } else if p.ctl.window_clamp {
            let syn = seg.flags & tcp_flags::SYN != 0;
            let opening = seg.flags & tcp_flags::SYN != 0 || f.epoch == NEVER_MOVED;
            let share = if opening {
                p.opening_share(f.host)
            } else {
                p.share(f.host)
            };
            let rtt = match (rtt_path, f.handshake_rtt) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).or(p.recent_rtt).unwrap_or(RTT_UNKNOWN),
            };
            let round = rtt + Self::allowance(f, p);
            let mut target = u32::try_from(share.bytes_in(round)).unwrap_or(u32::MAX);
            if syn || f.epoch == NEVER_MOVED {
                // The window shown before the first data is the sender's
                // first flight, sent before any ACK can be held.
                let most = match f.af {
                    Af::V4 => MAX_MSS_V4,
                    Af::V6 => MAX_MSS_V6,
                };
                let mss = seg.options.mss.map_or(f.clamp.mss(), |m| m.min(most));
                target = target.min(INITIAL_SEGS * u32::from(mss));
            }
            match f.clamp.on_receiver(seg, Some(target)) {
                WinVerdict::Keep => {}
                WinVerdict::Rewrite(field) => {
                    if rewrite_window(frame, info, field).is_ok() {
                        p.report.windows_clamped += 1;
                    }
                }
                WinVerdict::Pass(_) => p.report.windows_untouched += 1,
            }
        } else {
            f.clamp.on_receiver(seg, None);
        }
        let flags = seg.flags;
        let ack = (flags & tcp_flags::ACK != 0).then_some(seg.ack);
        let mut partial = false;
        let advance = match ack.map(|a| (a, f.seq.acked(a, f.last_ack))) {
            Some((a, Acked::Advance(n))) => {
                partial = f.recover.is_some_and(|r| seq_after(r, a));
                if !partial {
                    f.recover = None;
                }
                f.last_ack = Some(a);
                f.acked += u64::from(n);
                Self::mark_active(f, p);
                Some(n)
            }
            Some((_, Acked::Unsent)) => {
                // Acknowledges data never sent: the sender ignores it, and
                // so does the pacer.
                p.report.acks_unsent += 1;
                None
            }
            Some((a, Acked::Nothing)) => {
                let sent = f.seq.snd_max().is_none_or(|m| !seq_after(a, m));
                if f.last_ack.is_none() && sent {
                    f.last_ack = Some(a);
                } else if f.last_ack == Some(a) && seg.payload_len == 0 && f.recover.is_none() {
                    // A duplicate: the receiver misses a segment.
                    f.recover = f.seq.snd_max();
                }
                None
            }
            None => None,
        };
        let special =
            tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST | tcp_flags::URG | tcp_flags::ECE;
        let pure = flags & special == 0
            && seg.payload_len == 0
            && seg.options.error.is_none()
            && seg.options.sack_blocks().is_empty();
        if flags & tcp_flags::RST != 0 {
            self.forget(&key);
            return Plan::Forward;
        }
        if p.ctl.ack_pacing && !partial {
            if let (true, Some(acked)) = (pure, advance) {
                let cost = Self::cost(f, p, acked);
                return Plan::Pace(PaceTicket { key, cost });
            }
        }
        Self::release_flow(f, p, &mut self.released, &mut self.held, Release::Flushed);
        Plan::Forward
    }

    /// A connection whose handshake just completed counts among its
    /// pacer's opening flows (it shares the class before it moves data),
    /// unless the host that opened it already has [`OPENING_PER_HOST`].
    pub(super) fn count_opening(f: &mut Flow, p: &mut Pacer) {
        Self::uncount_syn(f, p);
        let (Some(opener), NEVER_MOVED, false) = (f.opened, f.epoch, f.pending) else {
            return;
        };
        let n = p.opening.entry(opener).or_default();
        if *n >= OPENING_PER_HOST {
            return;
        }
        *n += 1;
        f.pending = true;
        p.pending += 1;
        if let Some(h) = f.host {
            p.host_mut(h).pending += 1;
        }
    }

    /// Wire bytes of `acked` bytes of data: whole segments of the flow's MSS,
    /// each with its headers and the data link's overhead; no more than the
    /// bucket's depth, so no one ACK (however much it claims) puts the class
    /// in debt beyond a burst.
    pub(super) fn cost(f: &Flow, p: &Pacer, acked: u32) -> u64 {
        let mss = Self::mss(f);
        let hdr = match f.af {
            Af::V4 => 14 + 20 + 32,
            Af::V6 => 14 + 40 + 32,
        };
        let per_seg = u64::from(p.overhead.cost(mss + hdr)) - u64::from(mss);
        let segs = u64::from(acked.div_ceil(mss));
        (u64::from(acked) + segs * per_seg).min(p.burst_bytes())
    }

    /// The flow's MSS from its handshake (at least RFC 9293's default of
    /// its family: a receiver announcing a tiny one would multiply its
    /// ACKs' charge in headers), else the usual one.
    pub(super) fn mss(f: &Flow) -> u32 {
        let (least, usual) = match f.af {
            Af::V4 => (536, 1448),
            Af::V6 => (1220, 1428),
        };
        if f.clamp.scale().is_some() {
            u32::from(f.clamp.mss()).max(least)
        } else {
            usual
        }
    }
}
