//! The simulated hosts' TCP: an ACK-clocked Reno sender and a receiver with
//! delayed ACKs, over whole segments of [`MSS`] bytes.
//!
//! # Principles
//! - The sender is Reno (RFC 5681) with SACK loss recovery (RFC 6675,
//!   simplified), as Linux runs by default: slow start from an initial
//!   window of 10 (RFC 6928) counting at most two segments per ACK
//!   (RFC 3465), AIMD after it, recovery on the third
//!   duplicate ACK (a duplicate only if its window is unchanged or it
//!   carries SACK: a rewritten window alone is no loss signal), in which
//!   every hole below the highest SACKed segment is sent again once and
//!   the pipe (in flight less SACKed) is held to the halved window; a
//!   fixed 1 s retransmission timeout (RFC 6298's floor) that goes back N.
//!   It never sends beyond the receiver's window, so sluice's window clamp
//!   acts on it as on a real stack.
//! - The receiver ACKs every second in-order segment or after 40 ms
//!   (Linux's delayed ACK), at once on a segment out of order or one that
//!   fills a hole (RFC 5681 §4.2), keeps what arrives out of order and
//!   reports it in up to three SACK blocks (RFC 2018), highest first.
//! - Sequence numbers are 64-bit inside (no wrap in a run: a run moves far
//!   less than 4 GiB per flow) and cut to 32 bits on the wire.

use sluice_time::Instant;
use std::collections::BTreeSet;

/// A SACK block: [left, right) in 32-bit wire sequence numbers.
pub type Block = (u32, u32);

/// Payload of every data segment.
pub const MSS: u64 = 1448;
/// The window scale both ends announce.
pub const WSCALE: u8 = 7;
/// The window every receiver announces (scaled: 8 MiB, beyond any path's
/// BDP here, so the sender's own window or sluice's clamp decides).
pub const RWND_FIELD: u16 = 65535;
/// Segments in the initial window.
const IW: f64 = 10.0;
/// Duplicate ACKs that mean a loss.
const DUPTHRESH: u32 = 3;

/// The data sender of one flow.
#[derive(Debug)]
pub struct Sender {
    pub una: u64,
    pub nxt: u64,
    /// The highest sequence sent: after a timeout `nxt` goes back, and an
    /// ACK up to here is still news.
    high: u64,
    /// Congestion window, in segments.
    pub cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    last_win: u16,
    /// The recovery point: the `nxt` when the loss was found.
    recover: Option<u64>,
    /// Segments above `una` the receiver reported holding.
    sacked: BTreeSet<u64>,
    /// In recovery, the next segment that may be a hole to send again.
    rexmit_next: u64,
    /// The receiver's window (bytes, scaled).
    rwnd: u64,
    /// The last time `una` moved, or a (re)transmission after a timeout.
    pub progress: Instant,
    /// Established: data may flow.
    pub open: bool,
    pub retransmits: u64,
    pub timeouts: u64,
}

impl Sender {
    pub fn new() -> Sender {
        Sender {
            una: 1,
            nxt: 1,
            high: 1,
            cwnd: IW,
            ssthresh: f64::INFINITY,
            dupacks: 0,
            last_win: 0,
            recover: None,
            sacked: BTreeSet::new(),
            rexmit_next: 1,
            rwnd: u64::from(RWND_FIELD),
            progress: Instant::ZERO,
            open: false,
            retransmits: 0,
            timeouts: 0,
        }
    }

    /// The connection is established at `now`; the peer's window so far is
    /// `rwnd` bytes.
    pub fn establish(&mut self, now: Instant, rwnd: u64) {
        self.open = true;
        self.rwnd = rwnd;
        self.progress = now;
    }

    fn flight(&self) -> u64 {
        self.nxt - self.una
    }

    /// What is in the network: in flight less what the receiver holds.
    fn pipe(&self) -> u64 {
        self.flight().saturating_sub(self.sacked.len() as u64 * MSS)
    }

    /// The next new segment's sequence number, if the windows allow one.
    pub fn next_new(&mut self) -> Option<u64> {
        let cwnd = (self.cwnd.max(1.0) as u64) * MSS;
        if !self.open || self.pipe() + MSS > cwnd || self.flight() + MSS > self.rwnd.max(MSS) {
            return None;
        }
        // After a timeout, what the receiver holds is not sent again.
        while self.sacked.contains(&self.nxt) {
            self.nxt += MSS;
        }
        let s = self.nxt;
        self.nxt += MSS;
        self.high = self.high.max(self.nxt);
        Some(s)
    }

    /// Widens a 32-bit wire sequence number against `una` (never 2 GiB
    /// away from it).
    fn widen(&self, v: u32) -> u64 {
        self.una
            .wrapping_add(i64::from(v.wrapping_sub(self.una as u32) as i32) as u64)
    }

    /// An ACK of `ack` (32-bit wire value) with window field `win` and
    /// SACK blocks `sack`: the segments to send again.
    pub fn on_ack(&mut self, now: Instant, ack: u32, win: u16, sack: &[Block]) -> Vec<u64> {
        let ack = self.widen(ack);
        for &(l, r) in sack {
            let (l, r) = (self.widen(l), self.widen(r));
            let mut q = l;
            while q + MSS <= r && q < self.high {
                self.sacked.insert(q);
                q += MSS;
            }
        }
        self.rwnd = u64::from(win) << WSCALE;
        let same_win = win == self.last_win;
        self.last_win = win;
        if ack > self.una && ack <= self.high {
            let acked = (ack - self.una) as f64 / MSS as f64;
            self.una = ack;
            self.nxt = self.nxt.max(ack);
            self.sacked = self.sacked.split_off(&ack);
            self.dupacks = 0;
            self.progress = now;
            match self.recover {
                Some(r) if ack >= r => {
                    self.recover = None;
                    self.cwnd = self.ssthresh;
                }
                Some(_) => return self.holes(),
                // Appropriate byte counting (RFC 3465, L = 2): an ACK of much,
                // after a timeout, is no leave to burst.
                None if self.cwnd < self.ssthresh => self.cwnd += acked.min(2.0),
                None => self.cwnd += acked / self.cwnd,
            }
            return Vec::new();
        }
        if ack == self.una && self.flight() > 0 && (same_win || !sack.is_empty()) {
            self.dupacks += 1;
            if self.dupacks == DUPTHRESH && self.recover.is_none() {
                self.ssthresh = (self.cwnd / 2.0).max(2.0);
                self.cwnd = self.ssthresh;
                self.recover = Some(self.nxt);
                self.rexmit_next = self.una;
            }
        }
        if self.recover.is_some() {
            return self.holes();
        }
        Vec::new()
    }

    /// In recovery: the holes below the highest SACKed segment not yet
    /// sent again, one per ACK (a segment left the network) and more while
    /// the pipe is below the window.
    fn holes(&mut self) -> Vec<u64> {
        let top = self.sacked.last().copied().unwrap_or(self.una + MSS);
        let cwnd = (self.cwnd.max(1.0) as u64) * MSS;
        self.rexmit_next = self.rexmit_next.max(self.una);
        let mut out = Vec::new();
        while self.rexmit_next < top && self.rexmit_next < self.nxt {
            let q = self.rexmit_next;
            if !self.sacked.contains(&q) {
                if !out.is_empty() && self.pipe() + out.len() as u64 * MSS >= cwnd {
                    break;
                }
                out.push(q);
            }
            self.rexmit_next += MSS;
        }
        self.retransmits += out.len() as u64;
        out
    }

    /// No progress for the retransmission timeout: back to one segment,
    /// and everything after `una` the receiver does not hold again.
    pub fn on_timeout(&mut self, now: Instant) {
        self.ssthresh = (self.flight() as f64 / MSS as f64 / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.nxt = self.una;
        self.recover = None;
        self.dupacks = 0;
        self.progress = now;
        self.timeouts += 1;
    }
}

impl Default for Sender {
    fn default() -> Self {
        Sender::new()
    }
}

/// What a receiver does after a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum AckNow {
    /// Send an ACK of `ack` now.
    Yes,
    /// Nothing yet; a delayed ACK is due unless one is already armed.
    Delay,
}

/// The data receiver of one flow.
#[derive(Debug)]
pub struct Receiver {
    pub nxt: u64,
    ooo: BTreeSet<u64>,
    unacked: u32,
    /// A delayed ACK is armed.
    pub delack_armed: bool,
    /// Bytes delivered in order since counting began.
    pub delivered: u64,
}

impl Receiver {
    pub fn new() -> Receiver {
        Receiver {
            nxt: 1,
            ooo: BTreeSet::new(),
            unacked: 0,
            delack_armed: false,
            delivered: 0,
        }
    }

    /// A data segment at `seq` (32-bit wire value); `count` says whether
    /// the bytes it delivers are counted.
    pub fn on_data(&mut self, seq: u32, count: bool) -> AckNow {
        let seq = self
            .nxt
            .wrapping_add(i64::from(seq.wrapping_sub(self.nxt as u32) as i32) as u64);
        if seq < self.nxt {
            self.unacked = 0;
            return AckNow::Yes;
        }
        if seq > self.nxt {
            self.ooo.insert(seq);
            self.unacked = 0;
            return AckNow::Yes;
        }
        let had_holes = !self.ooo.is_empty();
        let before = self.nxt;
        self.nxt += MSS;
        while self.ooo.remove(&self.nxt) {
            self.nxt += MSS;
        }
        if count {
            self.delivered += self.nxt - before;
        }
        self.unacked += 1;
        if had_holes || self.unacked >= 2 {
            self.unacked = 0;
            AckNow::Yes
        } else {
            AckNow::Delay
        }
    }

    /// What arrived beyond a hole, as up to three blocks, highest first.
    pub fn sack_blocks(&self) -> Vec<Block> {
        let mut out: Vec<Block> = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        for &q in self.ooo.iter().rev() {
            run = match run {
                Some((l, r)) if q + MSS == l => Some((q, r)),
                Some((l, r)) => {
                    out.push((l as u32, r as u32));
                    Some((q, q + MSS))
                }
                None => Some((q, q + MSS)),
            };
            if out.len() == 3 {
                return out;
            }
        }
        if let Some((l, r)) = run {
            out.push((l as u32, r as u32));
        }
        out
    }

    /// The delayed ACK's timer fired: whether an ACK is still owed.
    pub fn on_delack(&mut self) -> bool {
        self.delack_armed = false;
        let owed = self.unacked > 0;
        self.unacked = 0;
        owed
    }
}

impl Default for Receiver {
    fn default() -> Self {
        Receiver::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender at time zero with its initial window sent, none of it
    /// acknowledged yet.
    fn window_out() -> Sender {
        let mut s = Sender::new();
        s.establish(Instant::ZERO, 1 << 30);
        while s.next_new().is_some() {}
        s
    }

    #[test]
    fn slow_start_doubles_and_sack_recovery_sends_each_hole_once() {
        let now = Instant::ZERO;
        let mut s = Sender::new();
        s.establish(now, 1 << 30);
        let mut sent = 0;
        while s.next_new().is_some() {
            sent += 1;
        }
        assert_eq!(sent, 10);
        // One ACK of all ten counts two (RFC 3465); one per two, each.
        let mut t = window_out();
        t.on_ack(now, (1 + 10 * MSS) as u32, 1000, &[]);
        assert_eq!(t.cwnd, 12.0);
        for k in 1..=5 {
            s.on_ack(now, (1 + 2 * k * MSS) as u32, 1000, &[]);
        }
        assert_eq!(s.cwnd, 20.0);
        while s.next_new().is_some() {}
        let una = s.una as u32;
        let m = MSS as u32;
        // Segments 0 and 2 of the round are lost; 1 and 3.. arrive.
        let sack = |k: u32| [(una + 3 * m, una + k * m), (una + m, una + 2 * m)];
        assert!(s.on_ack(now, una, 1000, &sack(4)).is_empty());
        assert!(s.on_ack(now, una, 1000, &sack(5)).is_empty());
        assert_eq!(s.on_ack(now, una, 1000, &sack(6)), vec![s.una]);
        assert_eq!(s.cwnd, 10.0);
        // The pipe (20 out, 4 held) is over the window: one hole per ACK.
        assert_eq!(s.on_ack(now, una, 1000, &sack(7)), vec![s.una + 2 * MSS]);
        // Each hole once.
        assert!(s.on_ack(now, una, 1000, &sack(8)).is_empty());
    }

    #[test]
    fn after_a_timeout_an_ack_beyond_the_resent_is_taken() {
        let now = Instant::ZERO;
        let mut s = window_out();
        s.on_timeout(now);
        assert_eq!(s.next_new(), Some(1));
        // The receiver had all but the first: it ACKs everything.
        s.on_ack(now, (1 + 10 * MSS) as u32, 1000, &[]);
        assert_eq!((s.una, s.nxt), (1 + 10 * MSS, 1 + 10 * MSS));
    }

    #[test]
    fn a_changed_window_is_no_duplicate() {
        let now = Instant::ZERO;
        let mut s = window_out();
        for w in [1000, 900, 800, 700] {
            assert!(s.on_ack(now, 1, w, &[]).is_empty());
        }
    }

    #[test]
    fn the_receiver_acks_every_second_segment_and_holes_at_once() {
        let mut r = Receiver::new();
        assert_eq!(r.on_data(1, true), AckNow::Delay);
        assert_eq!(r.on_data(1 + MSS as u32, true), AckNow::Yes);
        assert_eq!(r.on_data(1 + 3 * MSS as u32, true), AckNow::Yes);
        assert_eq!(r.on_data(1 + 5 * MSS as u32, true), AckNow::Yes);
        let m = MSS as u32;
        assert_eq!(
            r.sack_blocks(),
            vec![(1 + 5 * m, 1 + 6 * m), (1 + 3 * m, 1 + 4 * m)]
        );
        assert_eq!(r.on_data(1 + 2 * MSS as u32, true), AckNow::Yes);
        assert_eq!(r.sack_blocks(), vec![(1 + 5 * m, 1 + 6 * m)]);
        assert_eq!(r.nxt, 1 + 4 * MSS);
        assert_eq!(r.delivered, 4 * MSS);
    }
}
