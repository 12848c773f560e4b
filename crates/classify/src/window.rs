//! pf's TCP sequence-window tracking for a state (`keep state`).
//!
//! # Principles
//!
//! - **What passes** (OpenBSD `pf_tcp_track_full`, Rooij's "Real Stateful
//!   TCP Packet Filtering in IP Filter", 2001). Per peer the tracker keeps
//!   `seqlo` (the highest sequence it sent, plus one), `seqhi` (the right
//!   edge the other peer allowed it: that peer's ACK plus its window) and
//!   `max_win` (its largest window, in bytes). A segment of a tracked
//!   connection passes only if its data ends at or before `seqhi`, starts
//!   no more than the other peer's largest window before `seqlo`
//!   (retransmissions), and its ACK lies between `MAX_ACK_WINDOW` (scaled)
//!   behind and `MAX_ACK_WINDOW` ahead of what the other peer sent: it
//!   cannot acknowledge data that was never sent. A segment without data
//!   is checked on its ACK only; a zero window still admits a one-byte
//!   probe; a RST must carry the expected sequence (±1). Anything else is
//!   pf's "bad state": blocked, counted, and the state is not touched.
//! - **Window scale** only as negotiated: both SYNs carry the option, else
//!   no scaling both ways (RFC 7323 §2.2); SYN windows are never scaled;
//!   the first SYN of a peer fixes its offer, so a later (forged) SYN
//!   cannot change it. A connection whose handshake sluice did not see has
//!   an unknown scale, taken as the largest (14) for every bound: lenient,
//!   never narrower than the truth.
//! - **Loose until both peers are seen.** A state picked up mid-stream
//!   (`flags any`, a reload) passes the first peer's segments unchecked
//!   and the other's first segment sets its view from what it carries
//!   (pf raises the edges from the first packet it sees). While only the
//!   initiator's SYN has been seen, and once either peer is past
//!   FIN_WAIT_2, pf's loose bounds apply (one `MAX_ACK_WINDOW` either side).
//! - **The SYN-ACK answers the SYN.** When the initiator's SYN was seen,
//!   the responder's first SYN-ACK must acknowledge it (ISN + 1, or up to
//!   the SYN's data): stricter than pf, which allows its ackskew there.
//! - O(1) per segment, a few words per state; sequence numbers compare
//!   modulo 2^32 (RFC 1982).

use crate::rtt::TcpSeg;
use crate::track::TcpPeer;
use sluice_wire::tcp::MAX_WINDOW_SCALE;
use sluice_wire::tcp_flags::{ACK, FIN, RST, SYN};

/// How far an ACK may lie beyond what the other peer was seen to send, and
/// (scaled) behind it: pf's `MAXACKWINDOW`, a full unscaled window plus
/// one MTU of slack.
pub const MAX_ACK_WINDOW: u32 = 0xffff + 1500;

/// `a - b` as a signed distance in sequence space.
fn dist(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

/// `a` at or after `b` (RFC 1982).
fn geq(a: u32, b: u32) -> bool {
    dist(a, b) >= 0
}

/// One peer's view, for `show states -v` (pfctl -vss: `[lo + win](+ack)
/// wscale`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerWindow {
    /// Highest sequence sent, plus one.
    pub seqlo: u32,
    /// Right edge the other peer allowed (its ACK plus its window).
    pub seqhi: u32,
    /// Largest window it offered, in bytes.
    pub max_win: u32,
    /// The shift its windows are in: `None` while unknown (handshake not
    /// seen; bounds then assume 14).
    pub wscale: Option<u8>,
    /// A segment of this peer has been seen.
    pub seen: bool,
}

/// One peer's tracking state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Peer {
    seen: bool,
    seqlo: u32,
    seqhi: u32,
    /// `seqhi` was set by the other peer's ACK before this one was seen.
    hi_set: bool,
    max_win: u32,
    /// Sequence number of this peer's SYN, once seen.
    isn: Option<u32>,
    /// The window scale that SYN offered.
    ws: Option<u8>,
}

impl Default for Peer {
    fn default() -> Peer {
        // pf starts an unseen peer's max_win at 1: a retransmitted SYN lies
        // one byte before seqlo.
        Peer {
            seen: false,
            seqlo: 0,
            seqhi: 0,
            hi_set: false,
            max_win: 1,
            isn: None,
            ws: None,
        }
    }
}

/// Both peers of one TCP state; index 0 is the initiator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpWindow {
    peers: [Peer; 2],
}

/// A segment's numbers in sequence space.
struct Span {
    seq: u32,
    /// Past the data and the SYN.
    data_end: u32,
    /// Past the FIN as well.
    end: u32,
}

impl Span {
    fn of(seg: &TcpSeg) -> Span {
        let syn = u32::from(seg.flags & SYN != 0);
        let data_end = seg
            .seq
            .wrapping_add(u32::from(seg.payload_len))
            .wrapping_add(syn);
        let end = data_end.wrapping_add(u32::from(seg.flags & FIN != 0));
        Span {
            seq: seg.seq,
            data_end,
            end,
        }
    }
}

impl TcpWindow {
    /// The shift peer `p`'s windows are in: as negotiated once both SYNs
    /// were seen, `None` (unknown) before or without them.
    fn scale(&self, p: usize) -> Option<u8> {
        let (a, b) = (self.peers[p], self.peers[1 - p]);
        match (a.isn, b.isn) {
            (Some(_), Some(_)) => Some(match (a.ws, b.ws) {
                (Some(s), Some(_)) => s.min(MAX_WINDOW_SCALE),
                _ => 0,
            }),
            _ => None,
        }
    }

    /// The shift bounds use for peer `p`'s numbers: the known one, or the
    /// largest when unknown.
    fn shift(&self, p: usize) -> u8 {
        self.scale(p).unwrap_or(MAX_WINDOW_SCALE)
    }

    /// The segment's window in bytes, from peer `s` (a SYN's is unscaled).
    fn win_bytes(&self, s: usize, seg: &TcpSeg) -> u32 {
        let shift = if seg.flags & SYN != 0 {
            0
        } else {
            self.shift(s)
        };
        u32::from(seg.window) << shift
    }

    /// Track `seg` from peer `s` (0 initiator, 1 responder), `peers` the
    /// connection's protocol states before it. True: it passes and the
    /// view moved; false: pf's bad state, nothing changed.
    pub(crate) fn track(&mut self, s: usize, seg: &TcpSeg, peers: [TcpPeer; 2]) -> bool {
        let d = 1 - s;
        let mut next = *self;
        let first = !self.peers[s].seen;
        if first && !next.first_sight(s, seg) {
            return false;
        }
        let (src, dst) = (next.peers[s], next.peers[d]);
        let sp = Span::of(seg);
        let mut ack = seg.ack;
        if seg.flags & ACK == 0 || (ack == 0 && seg.flags & RST != 0) || !dst.seen {
            // Nothing (meaningful) acknowledged: let it through the ack bound.
            ack = dst.seqlo;
        }
        let (mut seq, mut data_end) = (sp.seq, sp.data_end);
        if sp.seq == sp.end {
            // No data, SYN or FIN: only the ACK is checked.
            seq = src.seqlo;
            data_end = src.seqlo;
        }
        let ackskew = dist(dst.seqlo, ack);
        let ack_back = i64::from(MAX_ACK_WINDOW) << next.shift(s);
        let rst_ok = seg.flags & RST == 0
            || sp.seq == src.seqlo
            || sp.seq == src.seqlo.wrapping_add(1)
            || sp.seq.wrapping_add(1) == src.seqlo;
        let strict = geq(src.seqhi, data_end)
            && geq(seq, src.seqlo.wrapping_sub(dst.max_win))
            && ackskew >= -i64::from(MAX_ACK_WINDOW)
            && ackskew <= ack_back
            && rst_ok;
        // pf's loose bounds: one window either side of the sender.
        let loose_bounds = geq(src.seqhi.wrapping_add(MAX_ACK_WINDOW), data_end)
            && geq(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW));
        let closing = peers[0] >= TcpPeer::FinWait2 || peers[1] >= TcpPeer::FinWait2;
        let ok = if !dst.seen && src.isn.is_none() {
            // Picked up mid-stream, the other side not heard yet.
            true
        } else {
            strict || ((!dst.seen || closing) && loose_bounds)
        };
        if !ok {
            return false;
        }
        next.advance(s, seg, &sp, ack);
        *self = next;
        true
    }

    /// The first segment of peer `s`: its SYN's offer, and its edges from
    /// what the other peer allowed. False: a SYN-ACK that does not answer
    /// the SYN seen.
    fn first_sight(&mut self, s: usize, seg: &TcpSeg) -> bool {
        let d = 1 - s;
        let sp = Span::of(seg);
        let dst = self.peers[d];
        if seg.flags & SYN != 0 {
            if let (true, Some(isn)) = (seg.flags & ACK != 0, dst.isn) {
                if !(geq(seg.ack, isn.wrapping_add(1)) && geq(dst.seqlo, seg.ack)) {
                    return false;
                }
            }
            self.peers[s].isn = Some(seg.seq);
            self.peers[s].ws = seg.wscale;
        } else if dst.seen && dst.isn.is_none() && seg.flags & ACK != 0 {
            // Mid-stream: it may acknowledge what the other peer sent
            // before sluice saw it, up to the largest window there is
            // (beyond, the ACK check refuses it).
            let ahead = dist(seg.ack, dst.seqlo);
            if ahead > 0 && ahead <= i64::from(u16::MAX) << MAX_WINDOW_SCALE {
                self.peers[d].seqlo = seg.ack;
            }
        }
        let dst_win = self.peers[d].max_win.max(1);
        let p = &mut self.peers[s];
        p.seen = true;
        p.seqlo = sp.seq;
        let edge = sp.end.wrapping_add(dst_win);
        if !p.hi_set || geq(edge, p.seqhi) {
            p.seqhi = edge;
        }
        true
    }

    /// Commit a segment that passed: the sender's `seqlo` and largest
    /// window, and the edge it allows the other peer.
    fn advance(&mut self, s: usize, seg: &TcpSeg, sp: &Span, ack: u32) {
        let d = 1 - s;
        let win = self.win_bytes(s, seg);
        let src = &mut self.peers[s];
        src.max_win = src.max_win.max(win);
        if dist(sp.end, src.seqlo) > 0 {
            src.seqlo = sp.end;
        }
        if seg.flags & ACK != 0 {
            let dst = &mut self.peers[d];
            let edge = ack.wrapping_add(win.max(1));
            if !dst.seen && !dst.hi_set {
                dst.seqhi = edge;
                dst.hi_set = true;
            } else if geq(edge, dst.seqhi) {
                dst.seqhi = edge;
            }
        }
    }

    /// The same connection with peer `side` as the initiator (the other
    /// half of a doubly evaluated connection; see `ProtoState::mirrored`).
    pub(crate) fn mirrored(self, side: usize) -> TcpWindow {
        let [a, b] = self.peers;
        TcpWindow {
            peers: if side == 1 { [b, a] } else { [a, b] },
        }
    }

    /// The peers' views, [initiator, responder].
    pub fn view(&self) -> [PeerWindow; 2] {
        [0, 1].map(|p| {
            let x = self.peers[p];
            PeerWindow {
                seqlo: x.seqlo,
                seqhi: x.seqhi,
                max_win: x.max_win,
                wscale: self.scale(p),
                seen: x.seen,
            }
        })
    }
}

#[cfg(test)]
mod tests;
