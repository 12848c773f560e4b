//! What the two sides of a controlled connection have said of its sequence
//! space: enough to tell an ACK of data that was sent from one of data never
//! sent, and the handshake from a forged SYN.
//!
//! # Principles
//!
//! - **An ACK acknowledges at most what was sent** (RFC 9293 §3.10.7.4: a
//!   receiver's ACK of data not yet sent is answered and dropped by the
//!   sender). `snd_max` is one past the highest sequence number the data
//!   sender has sent (its SYN and FIN count one each); an ACK beyond it
//!   advances nothing here, so it charges nothing and paces nothing.
//! - **The data sent stays within the window shown.** A segment ending
//!   more than [`SEND_SLACK`] past the right edge sluice last showed the
//!   sender does not move `snd_max`: one forged segment of the sender's
//!   cannot open room for a forged ACK of gigabytes.
//! - **A handshake is the three segments that answer each other**
//!   (§3.5): a SYN, a SYN-ACK whose ACK is that SYN's ISN + 1, and the
//!   opener's ACK of the SYN-ACK's ISN + 1. Only then is the connection
//!   *established*: what counts it among the class's opening flows.
//! - **Established means no SYN moves it.** Past the handshake a SYN or
//!   SYN-ACK of either side is ignored until the connection closes (both
//!   FINs, or a RST): a forged one cannot reset its window scale, MSS or
//!   edge. Before it, a SYN with a new ISN starts the attempt afresh.
//! - Sequence numbers compare mod 2^32 (RFC 1982 serial arithmetic).

use sluice_wire::tcp::{seq_after, Segment};
use sluice_wire::tcp_flags::{ACK, FIN, RST, SYN};

/// A segment may end this far past the right edge shown to its sender and
/// still count as sent: a window probe, a receiver that opened its window
/// in a segment sluice has not seen yet (one 64 KiB unscaled window).
pub(super) const SEND_SLACK: u32 = 65_535;

/// One side of the connection: the data's sender or its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Sender,
    Receiver,
}

impl Side {
    fn i(self) -> usize {
        self as usize
    }

    fn other(self) -> Side {
        match self {
            Side::Sender => Side::Receiver,
            Side::Receiver => Side::Sender,
        }
    }
}

/// What a segment's SYN flag means for the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Syn {
    /// No SYN.
    None,
    /// An opening SYN (first, retransmitted, or a new attempt before the
    /// handshake completed).
    Open,
    /// A SYN-ACK answering the other side's SYN.
    Answer,
    /// A SYN that answers nothing or comes after the handshake: ignore it.
    Forged,
}

/// What an ACK acknowledges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Acked {
    /// New data, this many bytes (at most up to `snd_max`).
    Advance(u32),
    /// Nothing new (a duplicate, an old ACK, or no ACK flag).
    Nothing,
    /// Data the sender never sent.
    Unsent,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SeqTrack {
    /// Each side's ISN, from its SYN ([`Side`] order).
    isn: [Option<u32>; 2],
    /// The side whose SYN opened the connection.
    opener: Option<Side>,
    /// One past the highest sequence number each side has sent.
    max: [Option<u32>; 2],
    established: bool,
    fin: [bool; 2],
    reset: bool,
}

impl SeqTrack {
    pub(super) fn established(&self) -> bool {
        self.established
    }

    /// Both FINs or a RST seen: a new SYN on the 4-tuple is a new connection.
    pub(super) fn closed(&self) -> bool {
        self.reset || (self.fin[0] && self.fin[1])
    }

    /// One past the highest sequence number the data sender has sent.
    pub(super) fn snd_max(&self) -> Option<u32> {
        self.max[Side::Sender.i()]
    }

    /// Classifies a segment's SYN (without recording anything).
    pub(super) fn syn(&self, from: Side, seg: &Segment) -> Syn {
        if seg.flags & SYN == 0 {
            return Syn::None;
        }
        if self.established && !self.closed() {
            return Syn::Forged;
        }
        if seg.flags & ACK == 0 {
            return Syn::Open;
        }
        let answers = self.opener == Some(from.other())
            && self.isn[from.other().i()].is_some_and(|isn| seg.ack == isn.wrapping_add(1));
        if answers {
            Syn::Answer
        } else {
            Syn::Forged
        }
    }

    /// Records a segment `from` a side whose SYN is `syn` (from
    /// [`SeqTrack::syn`]; a forged one must not be recorded). `edge`: the
    /// right edge last shown to the sender, if any. Returns whether this
    /// segment completed the handshake.
    pub(super) fn record(
        &mut self,
        from: Side,
        seg: &Segment,
        syn: Syn,
        edge: Option<u32>,
    ) -> bool {
        let s = from.i();
        match syn {
            Syn::Forged => return false,
            Syn::Open if self.closed() || self.established => *self = SeqTrack::default(),
            _ => {}
        }
        if matches!(syn, Syn::Open | Syn::Answer) {
            if syn == Syn::Open {
                self.opener = Some(from);
            }
            self.isn[s] = Some(seg.seq);
            self.max[s] = Some(seg.seq.wrapping_add(1));
        }
        let fin = u32::from(seg.flags & FIN != 0);
        let end = seg
            .seq
            .wrapping_add(u32::from(seg.flags & SYN != 0))
            .wrapping_add(seg.payload_len)
            .wrapping_add(fin);
        let within = match (from, edge) {
            (Side::Sender, Some(e)) => !seq_after(end, e.wrapping_add(SEND_SLACK)),
            _ => true,
        };
        if within && self.max[s].is_none_or(|m| seq_after(end, m)) {
            self.max[s] = Some(end);
        }
        self.fin[s] |= fin != 0;
        self.reset |= seg.flags & RST != 0;
        let completes = !self.established
            && syn == Syn::None
            && seg.flags & ACK != 0
            && self.opener == Some(from)
            && self.isn[from.other().i()].is_some_and(|i| seg.ack == i.wrapping_add(1));
        if completes {
            self.established = true;
        }
        completes
    }

    /// What the receiver's ACK `ack` acknowledges beyond `last_ack`.
    pub(super) fn acked(&self, ack: u32, last_ack: Option<u32>) -> Acked {
        let Some(last) = last_ack else {
            return Acked::Nothing;
        };
        if !seq_after(ack, last) {
            return Acked::Nothing;
        }
        match self.snd_max() {
            Some(m) if !seq_after(ack, m) => Acked::Advance(ack.wrapping_sub(last)),
            _ => Acked::Unsent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::tcp::TcpOptions;

    fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> Segment {
        Segment {
            flags,
            seq,
            ack,
            window: 65535,
            payload_len: len,
            options: TcpOptions::default(),
        }
    }

    /// A download's handshake: the receiver opens (ISN `r`), the sender
    /// answers (ISN `s`).
    fn open(r: u32, s: u32) -> SeqTrack {
        let mut t = SeqTrack::default();
        let syn = seg(SYN, r, 0, 0);
        assert_eq!(t.syn(Side::Receiver, &syn), Syn::Open);
        assert!(!t.record(Side::Receiver, &syn, Syn::Open, None));
        let sa = seg(SYN | ACK, s, r.wrapping_add(1), 0);
        assert_eq!(t.syn(Side::Sender, &sa), Syn::Answer);
        assert!(!t.record(Side::Sender, &sa, Syn::Answer, None));
        let ack = seg(ACK, r.wrapping_add(1), s.wrapping_add(1), 0);
        assert!(t.record(Side::Receiver, &ack, Syn::None, None));
        assert!(t.established());
        t
    }

    #[test]
    fn an_ack_acknowledges_at_most_what_was_sent() {
        let mut t = open(100, u32::MAX - 10);
        let first = 0u32.wrapping_sub(10);
        t.record(Side::Sender, &seg(ACK, first, 101, 1000), Syn::None, None);
        let last = Some(first);
        assert_eq!(
            t.acked(first.wrapping_add(1000), last),
            Acked::Advance(1000)
        );
        assert_eq!(t.acked(first.wrapping_add(1001), last), Acked::Unsent);
        assert_eq!(
            t.acked(first.wrapping_add(0x7fff_ffff), last),
            Acked::Unsent
        );
        assert_eq!(t.acked(first, last), Acked::Nothing, "a duplicate");
        assert_eq!(t.acked(first.wrapping_sub(5), last), Acked::Nothing, "old");
        assert_eq!(t.acked(first, None), Acked::Nothing);
    }

    #[test]
    fn a_sender_segment_far_beyond_the_edge_shown_is_not_counted_sent() {
        let mut t = open(0, 0);
        let edge = Some(1 + 20_000);
        t.record(Side::Sender, &seg(ACK, 1, 1, 1448), Syn::None, edge);
        let far = 1 + 20_000 + SEND_SLACK;
        t.record(Side::Sender, &seg(ACK, far, 1, 1448), Syn::None, edge);
        assert_eq!(t.snd_max(), Some(1 + 1448));
        t.record(Side::Sender, &seg(ACK, 20_001, 1, 100), Syn::None, edge);
        assert_eq!(t.snd_max(), Some(20_101), "a probe past the edge counts");
    }

    #[test]
    fn past_the_handshake_no_syn_answers_until_the_connection_closes() {
        let mut t = open(7, 9);
        assert_eq!(t.syn(Side::Receiver, &seg(SYN, 7, 0, 0)), Syn::Forged);
        assert_eq!(t.syn(Side::Sender, &seg(SYN | ACK, 1, 8, 0)), Syn::Forged);
        t.record(Side::Sender, &seg(FIN | ACK, 10, 8, 0), Syn::None, None);
        assert_eq!(t.syn(Side::Receiver, &seg(SYN, 500, 0, 0)), Syn::Forged);
        t.record(Side::Receiver, &seg(FIN | ACK, 8, 11, 0), Syn::None, None);
        assert!(t.closed());
        let again = seg(SYN, 500, 0, 0);
        assert_eq!(t.syn(Side::Receiver, &again), Syn::Open);
        t.record(Side::Receiver, &again, Syn::Open, None);
        assert!(!t.established() && !t.closed(), "a new connection");
    }

    #[test]
    fn a_syn_ack_that_answers_no_syn_is_forged_and_a_bare_ack_completes_nothing() {
        let mut t = SeqTrack::default();
        let syn = seg(SYN, 1000, 0, 0);
        t.record(Side::Receiver, &syn, Syn::Open, None);
        assert_eq!(t.syn(Side::Sender, &seg(SYN | ACK, 5, 999, 0)), Syn::Forged);
        assert_eq!(
            t.syn(Side::Receiver, &seg(SYN | ACK, 5, 1001, 0)),
            Syn::Forged
        );
        // The opener's ACK before any answer completes nothing.
        assert!(!t.record(Side::Receiver, &seg(ACK, 1001, 6, 0), Syn::None, None));
        // A retransmitted SYN, then a new attempt with another ISN.
        assert_eq!(t.syn(Side::Receiver, &syn), Syn::Open);
        t.record(Side::Receiver, &seg(SYN, 2000, 0, 0), Syn::Open, None);
        assert_eq!(
            t.syn(Side::Sender, &seg(SYN | ACK, 5, 1001, 0)),
            Syn::Forged
        );
        assert_eq!(
            t.syn(Side::Sender, &seg(SYN | ACK, 5, 2001, 0)),
            Syn::Answer
        );
    }

    #[test]
    fn an_upload_opened_by_its_sender_completes_on_the_senders_ack() {
        let mut t = SeqTrack::default();
        t.record(Side::Sender, &seg(SYN, 50, 0, 0), Syn::Open, None);
        let sa = seg(SYN | ACK, 70, 51, 0);
        assert_eq!(t.syn(Side::Receiver, &sa), Syn::Answer);
        t.record(Side::Receiver, &sa, Syn::Answer, None);
        assert!(t.record(Side::Sender, &seg(ACK, 51, 71, 0), Syn::None, None));
        assert_eq!(t.snd_max(), Some(51));
        t.record(Side::Sender, &seg(ACK, 51, 71, 500), Syn::None, None);
        assert_eq!(t.acked(551, Some(51)), Acked::Advance(500));
    }

    #[test]
    fn a_rst_closes() {
        let mut t = open(1, 1);
        t.record(Side::Sender, &seg(RST, 2, 0, 0), Syn::None, None);
        assert!(t.closed());
        assert_eq!(t.syn(Side::Receiver, &seg(SYN, 9, 0, 0)), Syn::Open);
    }
}
