//! Passive round-trip times of a TCP connection, from the traffic that
//! crosses sluice (issue #13 item 4).
//!
//! # Principles
//!
//! - sluice sits between the two endpoints, so what it can time is a
//!   *half* round trip from its own position: from a packet of one peer
//!   passing sluice to the other peer's answer passing sluice. Estimate
//!   `toward[d]` is sluice → the receiver of direction `d` → sluice
//!   (`d` = 0: initiator→responder packets, so `toward[0]` is the path to
//!   the responder and back). The endpoints' RTT is the sum of the two; on
//!   a shaper in front of a modem the interesting one is the half toward
//!   the WAN endpoint: it includes the modem's queue.
//! - Timestamps first (RFC 7323 §4.3, as `pping` does): the first packet
//!   carrying a new TSval from peer A is remembered with its time; the
//!   first packet from B whose TSecr echoes exactly that TSval gives a
//!   sample. An echo of a later TSval (the remembered one was never
//!   echoed) discards it without a sample, so a sample never spans more
//!   than one exchange.
//! - Without timestamps, sequence/ACK timing with Karn's rule (RFC 6298
//!   §3): the end of a new data segment (SYN and FIN count one) is
//!   remembered; an ACK from the other peer that covers it gives a sample.
//!   A retransmission (a segment that does not extend what the peer has
//!   sent) cancels a pending measurement: its ACK could be for either copy.
//! - One measurement per direction in flight at a time: a few bytes per
//!   connection, one sample per round trip at most, O(1) per packet.
//! - Estimates per direction: the latest sample, the minimum, and a
//!   smoothed value (RFC 6298 §2, α = 1/8). Sequence numbers compare
//!   modulo 2^32 (RFC 1982).

use sluice_time::{Duration, Instant};
use sluice_wire::tcp::seq_after as after;
use sluice_wire::tcp_flags;

/// What the RTT tracker and the state's window tracking (`window.rs`)
/// need of one TCP segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSeg {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload_len: u16,
    /// The window field as sent (unscaled).
    pub window: u16,
    /// The window-scale shift a SYN offers (clamped to 14).
    pub wscale: Option<u8>,
    /// (TSval, TSecr) when the segment carries the timestamps option.
    pub timestamps: Option<(u32, u32)>,
}

impl TcpSeg {
    /// The TCP segment of a parsed frame; `None` for anything else (not
    /// TCP, a fragment, a header the parser refuses). A malformed option
    /// list only hides the timestamps that follow it.
    pub fn from_frame(frame: &[u8], info: &sluice_wire::PacketInfo) -> Option<TcpSeg> {
        let h = sluice_wire::tcp::TcpHeader::in_frame(frame, info).ok()?;
        Some(TcpSeg::of(&h.segment()))
    }

    /// The fields of a segment the caller has already read (one header and
    /// option walk per frame serves every reader).
    pub fn of(s: &sluice_wire::tcp::Segment) -> TcpSeg {
        TcpSeg {
            seq: s.seq,
            ack: s.ack,
            flags: s.flags,
            payload_len: u16::try_from(s.payload_len).unwrap_or(u16::MAX),
            window: s.window,
            wscale: s.options.window_scale,
            timestamps: s.options.timestamps,
        }
    }
}

/// One direction's estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimate {
    pub last: Duration,
    pub min: Duration,
    pub smoothed: Duration,
    pub samples: u32,
}

impl RttEstimate {
    fn add(&mut self, s: Duration) {
        self.last = s;
        if self.samples == 0 {
            self.min = s;
            self.smoothed = s;
        } else {
            self.min = Duration(self.min.0.min(s.0));
            // srtt += (s - srtt) / 8, in signed arithmetic.
            let d = (s.0 as i128 - self.smoothed.0 as i128) / 8;
            self.smoothed = Duration((self.smoothed.0 as i128 + d).max(0) as u64);
        }
        self.samples = self.samples.saturating_add(1);
    }
}

/// A measurement in flight in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    /// The TSval sent, awaiting its echo.
    Ts(u32, Instant),
    /// The sequence number just after the segment, awaiting its ACK.
    Seq(u32, Instant),
}

/// Per-connection tracker; index 0 is the initiator's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttTracker {
    pending: [Pending; 2],
    /// The newest TSval seen from each peer (only its first packet counts).
    last_tsval: [Option<u32>; 2],
    /// The highest sequence end each peer has sent (Karn's rule).
    high_seq: [Option<u32>; 2],
    /// `toward[d]`: sluice → the receiver of direction `d` → sluice.
    pub toward: [RttEstimate; 2],
}

impl Default for RttTracker {
    fn default() -> Self {
        RttTracker {
            pending: [Pending::None; 2],
            last_tsval: [None; 2],
            high_seq: [None; 2],
            toward: [RttEstimate::default(); 2],
        }
    }
}

impl RttTracker {
    /// Account segment `s` sent by peer `from` (0 initiator, 1 responder)
    /// passing sluice at `now`; a sample, as `(d, rtt)` for `toward[d]`,
    /// when it completes a measurement.
    pub fn observe(&mut self, from: usize, s: &TcpSeg, now: Instant) -> Option<(usize, Duration)> {
        let (me, other) = (from & 1, (from & 1) ^ 1);
        if s.flags & tcp_flags::RST != 0 {
            self.pending = [Pending::None; 2];
            return None;
        }
        let mut sample = None;
        // The answer to the other peer's pending measurement.
        match (self.pending[other], s.timestamps) {
            (Pending::Ts(v, t0), Some((_, ecr))) if s.flags & tcp_flags::ACK != 0 => {
                if ecr == v {
                    sample = Some((other, now.saturating_since(t0)));
                    self.pending[other] = Pending::None;
                } else if after(ecr, v) {
                    self.pending[other] = Pending::None;
                }
            }
            (Pending::Seq(end, t0), _) if s.flags & tcp_flags::ACK != 0 && !after(end, s.ack) => {
                sample = Some((other, now.saturating_since(t0)));
                self.pending[other] = Pending::None;
            }
            _ => {}
        }
        if let Some((d, rtt)) = sample {
            self.toward[d].add(rtt);
        }
        // A measurement of our own.
        let syn_fin = u32::from(s.flags & (tcp_flags::SYN | tcp_flags::FIN) != 0);
        let len = u32::from(s.payload_len) + syn_fin;
        let end = s.seq.wrapping_add(len);
        let new_data = len > 0 && self.high_seq[me].is_none_or(|h| after(end, h));
        if len > 0 && !new_data {
            // Karn: a retransmission makes a pending sequence sample ambiguous.
            if matches!(self.pending[me], Pending::Seq(..)) {
                self.pending[me] = Pending::None;
            }
        }
        if new_data {
            self.high_seq[me] = Some(end);
        }
        match s.timestamps {
            Some((val, _)) => {
                let fresh = self.last_tsval[me] != Some(val);
                self.last_tsval[me] = Some(val);
                if fresh && self.pending[me] == Pending::None {
                    self.pending[me] = Pending::Ts(val, now);
                }
            }
            None => {
                if new_data && self.pending[me] == Pending::None {
                    self.pending[me] = Pending::Seq(end, now);
                }
            }
        }
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcp_flags::{ACK, FIN, RST, SYN};

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    fn seg(seq: u32, ack: u32, flags: u8, len: u16, ts: Option<(u32, u32)>) -> TcpSeg {
        TcpSeg {
            seq,
            ack,
            flags,
            payload_len: len,
            timestamps: ts,
            ..TcpSeg::default()
        }
    }

    /// A bulk transfer from the responder (a download), sluice 2 ms from
    /// the initiator and 40 ms from the responder: data every 10 ms, each
    /// acknowledged by the initiator 2 ms after sluice forwarded it.
    fn download(ts: bool) -> RttTracker {
        let mut t = RttTracker::default();
        let (mut seq, mut now) = (1000u32, 0u64);
        let mut tsval = [100u32, 5000u32];
        for i in 0..50u32 {
            // Server data passes sluice; it echoes the client's last TSval.
            let data_ts = ts.then_some((tsval[1], tsval[0]));
            t.observe(1, &seg(seq, 1, ACK, 1448, data_ts), ms(now));
            // The client's ACK, 2 ms later.
            now += 2;
            tsval[0] += 1;
            seq = seq.wrapping_add(1448);
            let ack_ts = ts.then_some((tsval[0], tsval[1]));
            t.observe(0, &seg(1, seq, ACK, 0, ack_ts), ms(now));
            // The next data segment answers that ACK after 40 ms on the WAN
            // side only for the first ones; a pipelined sender keeps 4 in
            // flight, so its data arrives every 10 ms.
            now += if i % 4 == 0 { 40 } else { 8 };
            tsval[1] += 1;
        }
        t
    }

    #[test]
    fn timestamps_time_both_halves() {
        let t = download(true);
        // toward[1]: sluice → the initiator (the client) → sluice: the
        // responder's data, echoed by the client's ACK, 2 ms.
        let lan = t.toward[1];
        assert_eq!(lan.min, Duration::from_millis(2), "{t:?}");
        assert!(lan.samples >= 40, "{t:?}");
        // toward[0]: sluice → the responder → sluice: the client's ACK,
        // echoed by the server's next data segment.
        let wan = t.toward[0];
        assert_eq!(wan.min, Duration::from_millis(8), "{t:?}");
        // The last exchange (i = 48) waited the full 40 ms.
        assert_eq!(wan.last, Duration::from_millis(40), "{t:?}");
        assert!(wan.samples > 10);
    }

    #[test]
    fn sequence_timing_without_timestamps() {
        let t = download(false);
        assert_eq!(t.toward[1].min, Duration::from_millis(2), "{t:?}");
        assert_eq!(t.toward[1].last, Duration::from_millis(2));
        assert!(t.toward[1].samples >= 40);
        // Pure ACKs carry no data: nothing to time toward the responder.
        assert_eq!(t.toward[0].samples, 0);
    }

    #[test]
    fn a_retransmission_cancels_the_pending_sample() {
        let mut t = RttTracker::default();
        t.observe(0, &seg(100, 0, SYN, 0, None), ms(0));
        t.observe(1, &seg(500, 101, SYN | ACK, 0, None), ms(30));
        assert_eq!(t.toward[0].last, Duration::from_millis(30), "SYN timed");
        t.observe(0, &seg(101, 501, ACK, 1000, None), ms(31));
        // The same segment again (a retransmission), then its ACK: ambiguous.
        t.observe(0, &seg(101, 501, ACK, 1000, None), ms(300));
        let s = t.observe(1, &seg(501, 1101, ACK, 0, None), ms(330));
        assert_eq!(s, None, "Karn: no sample after a retransmission");
        assert_eq!(t.toward[0].samples, 1);
        // New data is timed again.
        t.observe(0, &seg(1101, 501, ACK, 100, None), ms(400));
        let s = t.observe(1, &seg(501, 1201, ACK, 0, None), ms(425));
        assert_eq!(s, Some((0, Duration::from_millis(25))));
    }

    #[test]
    fn a_later_echo_discards_without_a_sample_and_rst_clears() {
        let mut t = RttTracker::default();
        t.observe(0, &seg(1, 1, ACK, 10, Some((7, 0))), ms(0));
        t.observe(0, &seg(11, 1, ACK, 10, Some((8, 0))), ms(5));
        // The peer echoes 8: the pending 7 is dropped, no inflated sample.
        assert_eq!(
            t.observe(1, &seg(1, 21, ACK, 0, Some((90, 8))), ms(50)),
            None
        );
        t.observe(0, &seg(21, 1, ACK, 10, Some((9, 90))), ms(60));
        t.observe(1, &seg(1, 1, RST, 0, None), ms(61));
        assert_eq!(
            t.observe(1, &seg(1, 31, ACK, 0, Some((91, 9))), ms(70)),
            None
        );
    }

    #[test]
    fn sequence_numbers_wrap_and_fin_counts_one() {
        let mut t = RttTracker::default();
        let seq = u32::MAX - 99;
        t.observe(0, &seg(seq, 0, ACK, 100, None), ms(0));
        // ack = seq + 100 wraps to 0.
        let s = t.observe(1, &seg(0, 0, ACK, 0, None), ms(12));
        assert_eq!(s, Some((0, Duration::from_millis(12))));
        t.observe(0, &seg(0, 0, ACK | FIN, 0, None), ms(20));
        let s = t.observe(1, &seg(0, 1, ACK, 0, None), ms(27));
        assert_eq!(s, Some((0, Duration::from_millis(7))), "FIN occupies one");
    }

    #[test]
    fn smoothed_follows_rfc6298() {
        let mut e = RttEstimate::default();
        e.add(Duration::from_millis(80));
        e.add(Duration::from_millis(0));
        assert_eq!(e.smoothed, Duration::from_millis(70));
        assert_eq!(e.min, Duration::ZERO);
        assert_eq!(e.samples, 2);
    }
}
