//! The ACK filter of a leaf queue (CAKE's `ack-filter`, tc-cake(8)).
//!
//! # Principles
//! - **What it does.** When a segment carrying an acknowledgment is
//!   enqueued, the queue looks back over the packets it already holds for
//!   the same connection (bounded: [`SCAN_LIMIT`] packets) for a pure ACK
//!   the newcomer makes redundant, and drops that older ACK
//!   ([`DropReason::AckFilter`](crate::DropReason::AckFilter)). On an
//!   upstream link slower than the download it clocks, ACKs queue up;
//!   keeping only the newest frees the link for everything else and gets
//!   the newest acknowledgment to the sender sooner.
//! - **Never loses information** (RFC 9293 §3.10.7.4, RFC 2018, RFC 2883,
//!   RFC 3168 §6.1, RFC 7323 §4): an older segment is dropped only if it is
//!   a pure ACK the newcomer covers in every respect — cumulative ACK, SACK
//!   blocks (no D-SACK), timestamps, ECN — so duplicate ACKs, the signal of
//!   fast retransmit, are never thinned (the rules: `Trigger::covers`).
//! - **Never touches the newcomer**: the newest ACK of a flow is always
//!   queued, so the ACK clock of a download is thinned, never stopped. At
//!   most one packet is dropped per enqueue; the rest keep their order.
//! - **Modes.** *Conservative* (the default, CAKE's `ack-filter`) drops
//!   only when at least two queued ACKs are redundant, so a flow keeps up
//!   to two ACKs in the queue besides the newest; *aggressive*
//!   (`ack-filter-aggressive`) drops as soon as one is.
//! - **Where**: FIFO ([`crate::fifo`]: the newest packets), RED/RIO
//!   ([`crate::red`]: idem) and FQ-CoDel ([`crate::fq_codel`]: the
//!   newcomer's flow queue) leaves apply it on enqueue.
//! - **Sans-IO and panic-free**: the frame is read through
//!   `sluice_wire::parse` (checked views) and bounds-checked reads; a frame
//!   it cannot read is simply not a candidate.

use crate::Packet;
use sluice_wire::tcp::seq_after as after;
use sluice_wire::tcp::{Options, TcpOption};
use sluice_wire::{tcp_flags, Frag, L4};
use std::net::IpAddr;

/// Most queued packets one enqueue looks at (per flow queue in FQ-CoDel,
/// the newest of a FIFO): bounds the work of every enqueue.
pub const SCAN_LIMIT: usize = 64;

/// Whether and how a queue filters ACKs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AckFilter {
    #[default]
    Off,
    /// Drop a redundant ACK only when two or more are queued.
    Conservative,
    /// Drop a redundant ACK as soon as one is queued.
    Aggressive,
}

impl AckFilter {
    pub fn is_on(self) -> bool {
        self != AckFilter::Off
    }
}

/// Longest frame a pure ACK can be: Ethernet with two VLAN tags and
/// PPPoE (14 + 8 + 8), the longest IPv4 header (60; IPv6's 40 plus short
/// extension headers fit too), the longest TCP header (60). Anything
/// longer carries data (or many IPv6 extension headers: then it is simply
/// kept), so it is not even parsed: a data segment of the same flow costs
/// a comparison, not a parse.
const MAX_PURE_ACK_FRAME: usize = 14 + 8 + 8 + 60 + 60;

/// SACK blocks an option may carry (RFC 2018 §3: at most 4 in 40 bytes).
const MAX_SACK: usize = 4;

/// The TCP options the filter understands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Opts {
    /// TSval, TSecr.
    ts: Option<(u32, u32)>,
    sack: [(u32, u32); MAX_SACK],
    nsack: usize,
}

impl Opts {
    fn sacks(&self) -> &[(u32, u32)] {
        self.sack.get(..self.nsack).unwrap_or(&[])
    }
}

/// What the filter needs of one TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seg {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    flags: u8,
    /// Low nibble of the data-offset byte: three reserved bits and AE
    /// (Accurate ECN's third counter bit).
    reserved: u8,
    ack: u32,
    payload: u16,
    /// `None` when an option is unknown, duplicated or malformed.
    opts: Option<Opts>,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Reads the TCP header of an Ethernet frame; `None` for anything else,
/// IP fragments included.
fn parse(frame: &[u8]) -> Option<Seg> {
    let info = sluice_wire::parse(frame).ok()?;
    let ip = info.ip?;
    if ip.frag != Frag::None {
        return None;
    }
    let L4::Tcp {
        sport,
        dport,
        flags,
        payload_len,
    } = ip.l4
    else {
        return None;
    };
    let th = frame.get(ip.l4_offset..)?;
    let off = *th.get(12)?;
    // wire checked the data offset: 5..=15 words, inside the segment.
    let opts = th.get(20..usize::from(off >> 4) * 4).and_then(options);
    Some(Seg {
        src: ip.src,
        dst: ip.dst,
        sport,
        dport,
        flags,
        reserved: off & 0x0f,
        ack: be32(th, 8)?,
        payload: payload_len,
        opts,
    })
}

/// The options of a TCP header as the filter needs them (wire's walk,
/// RFC 9293 §3.1): `None` if any option is one the filter does not
/// understand (anything but NOP, EOL, timestamps and SACK), malformed, or
/// repeated.
fn options(b: &[u8]) -> Option<Opts> {
    let mut o = Opts::default();
    let mut seen_sack = false;
    for item in Options::new(b) {
        match item.ok()? {
            TcpOption::Timestamps { tsval, tsecr } if o.ts.is_none() => {
                o.ts = Some((tsval, tsecr));
            }
            TcpOption::Sack(blocks) if !seen_sack => {
                seen_sack = true;
                for (slot, blk) in o.sack.iter_mut().zip(blocks.iter()) {
                    *slot = blk;
                }
                o.nsack = blocks.len().min(MAX_SACK);
            }
            _ => return None,
        }
    }
    Some(o)
}

/// `a` is at or before `b`.
fn at_or_before(a: u32, b: u32) -> bool {
    a == b || after(b, a)
}

const ECN_FLAGS: u8 = tcp_flags::ECE | tcp_flags::CWR;

/// The parsed newcomer, if it can make anything redundant: it acknowledges
/// (ACK, no SYN/RST), carries no ECN feedback and only understood options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Trigger {
    seg: Seg,
    opts: Opts,
    flow: u64,
}

impl Trigger {
    pub(crate) fn of(mode: AckFilter, pkt: &Packet) -> Option<Trigger> {
        if !mode.is_on() {
            return None;
        }
        let seg = parse(&pkt.data)?;
        let acks = seg.flags & (tcp_flags::ACK | tcp_flags::SYN | tcp_flags::RST) == tcp_flags::ACK;
        if !acks || seg.flags & ECN_FLAGS != 0 || seg.reserved != 0 {
            return None;
        }
        Some(Trigger {
            seg,
            opts: seg.opts?,
            flow: pkt.flow,
        })
    }

    /// Whether the queued `old` is a pure ACK this one makes redundant.
    ///
    /// Never loses information (RFC 9293 §3.10.7.4, RFC 2018, RFC 2883,
    /// RFC 3168 §6.1, RFC 7323 §4): `old` is redundant only if all of these
    /// hold —
    /// - it is a *pure* ACK: no payload, flags exactly ACK (no SYN, FIN,
    ///   RST, URG, PSH, ECE, CWR, nor a reserved or AE bit), not CE-marked,
    ///   not an IP fragment;
    /// - both it and the newcomer carry only options the filter understands
    ///   (NOP, EOL, timestamps, SACK), well formed;
    /// - same addresses and ports (the flow hash only preselects);
    /// - the newcomer's cumulative ACK is the same or newer in sequence
    ///   space (RFC 1982 serial arithmetic: a difference of 2^31 or more is
    ///   never "newer", so wrap-around is safe);
    /// - every SACK block of the older one is covered by the newcomer (below
    ///   its cumulative ACK, or inside one of its blocks), and the older one
    ///   carries no D-SACK (a block below its own ACK, or a first block
    ///   inside its second); with equal ACK numbers the newcomer must SACK
    ///   strictly more, so duplicate ACKs — the signal of fast retransmit —
    ///   are never thinned;
    /// - its timestamps (TSval, TSecr) are not newer than the newcomer's;
    /// - the newcomer has no ECE/CWR (nor AE) either: ECN feedback keeps
    ///   every ACK it rides on, and the filter never changes which ACKs carry
    ///   it.
    fn covers(&self, old: &Packet) -> bool {
        if old.flow != self.flow || old.ecn == crate::Ecn::Ce || old.data.len() > MAX_PURE_ACK_FRAME
        {
            return false;
        }
        let Some(o) = parse(&old.data) else {
            return false;
        };
        let t = &self.seg;
        if o.flags != tcp_flags::ACK || o.reserved != 0 || o.payload != 0 {
            return false;
        }
        if (o.src, o.dst, o.sport, o.dport) != (t.src, t.dst, t.sport, t.dport) {
            return false;
        }
        let Some(oo) = o.opts else { return false };
        if !at_or_before(o.ack, t.ack) {
            return false;
        }
        match (oo.ts, self.opts.ts) {
            (None, _) => {}
            (Some((val, ecr)), Some((tval, tecr))) => {
                if after(val, tval) || after(ecr, tecr) {
                    return false;
                }
            }
            (Some(_), None) => return false,
        }
        let old_sacks = oo.sacks();
        // D-SACK (RFC 2883 §4): a block below the ACK, or a first block
        // inside the second; it reports a duplicate, news no later ACK has.
        let dsack = old_sacks.iter().any(|&(s, _)| after(o.ack, s))
            || matches!(old_sacks, [(s1, e1), (s2, e2), ..] if at_or_before(*s2, *s1) && at_or_before(*e1, *e2));
        if dsack {
            return false;
        }
        let new_sacks = self.opts.sacks();
        let inside = |(s, e): (u32, u32), blocks: &[(u32, u32)]| {
            blocks
                .iter()
                .any(|&(bs, be)| at_or_before(bs, s) && at_or_before(e, be))
        };
        let covered = old_sacks
            .iter()
            .all(|&(s, e)| at_or_before(e, t.ack) || inside((s, e), new_sacks));
        if !covered {
            return false;
        }
        if o.ack != t.ack {
            return true;
        }
        // Same cumulative ACK: only news in the SACK blocks makes the old
        // one redundant; otherwise it is a duplicate ACK and counts.
        new_sacks.iter().any(|&b| !inside(b, old_sacks))
    }

    /// The position in `queued` (oldest first; the newcomer not among
    /// them) of the ACK to drop, if `mode` drops one. The oldest redundant
    /// ACK goes; at most [`SCAN_LIMIT`] packets are looked at.
    pub(crate) fn pick<'a>(
        &self,
        mode: AckFilter,
        queued: impl Iterator<Item = &'a Packet>,
    ) -> Option<usize> {
        let need = match mode {
            AckFilter::Off => return None,
            AckFilter::Conservative => 2,
            AckFilter::Aggressive => 1,
        };
        let mut first = None;
        let mut found = 0;
        for (i, p) in queued.take(SCAN_LIMIT).enumerate() {
            if self.covers(p) {
                first = first.or(Some(i));
                found += 1;
            }
        }
        (found >= need).then_some(first).flatten()
    }
}

/// The position in `queued` (oldest first) of the packet that enqueueing
/// `new` would drop under `mode`, if any. What the leaves apply on
/// enqueue; public for tests and tools.
pub fn find_redundant<'a>(
    mode: AckFilter,
    new: &Packet,
    queued: impl Iterator<Item = &'a Packet>,
) -> Option<usize> {
    Trigger::of(mode, new)?.pick(mode, queued)
}

#[cfg(test)]
mod tests;
