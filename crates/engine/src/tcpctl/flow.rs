//! A connection under TCP control: its key, its held ACKs, what it has
//! sent and had acknowledged.

use super::*;

/// The data direction of a connection: `src` sends the data, `dst` the
/// ACKs; the data comes in through interface `data_in` (and the ACKs leave
/// through it), so one port cannot speak for the other's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) src: IpAddr,
    pub(super) sport: u16,
    pub(super) dst: IpAddr,
    pub(super) dport: u16,
    pub(super) data_in: usize,
}

pub(super) struct Held {
    pub(super) pkt: Packet,
    pub(super) egress: usize,
    pub(super) cost: u64,
    pub(super) since: Instant,
}

/// Why a held ACK leaves (the counter it goes to).
#[derive(Clone, Copy)]
pub(super) enum Release {
    /// At its paced time.
    Paced,
    /// Early, in order, ahead of a segment of its flow that must pass.
    Flushed,
    /// Early, by a cap (per flow, total, hold time).
    Capped,
}

pub(super) struct Flow {
    pub(super) pacer: usize,
    pub(super) clamp: WindowClamp,
    pub(super) af: Af,
    /// Highest acknowledgment the receiver has sent.
    pub(super) last_ack: Option<u32>,
    pub(super) held: VecDeque<Held>,
    pub(super) deficit: i64,
    pub(super) in_round: bool,
    /// The pacer's epoch in which the flow last moved data
    /// ([`NEVER_MOVED`] before its first).
    pub(super) epoch: u64,
    pub(super) last: Instant,
    /// When the receiver's SYN passed, and the handshake's round trip
    /// beyond sluice once the sender's SYN-ACK came back: an RTT for flows
    /// whose rules keep no state to measure one.
    pub(super) syn_at: Option<Instant>,
    pub(super) handshake_rtt: Option<Duration>,
    /// Counted in its pacer's `pending` (handshake completed, no data
    /// moved yet), and in the opening flows of host `opened`.
    pub(super) pending: bool,
    /// The host whose SYN opened the connection, once its handshake
    /// completed.
    pub(super) opened: Option<IpAddr>,
    /// Counted in its pacer's `syns` (SYN passed, handshake not complete).
    pub(super) in_syns: bool,
    /// What both sides have said of the sequence space.
    pub(super) seq: SeqTrack,
    /// Bytes newly acknowledged since the pacer's last look at demand.
    pub(super) acked: u64,
    /// Its host in a pacer that shares by host.
    pub(super) host: Option<IpAddr>,
    /// The longest the flow's ACKs waited in sluice's egress queue, this
    /// epoch of its pacer (`ack_wait[0]`) and the one before; `wait_epoch`:
    /// the pacer's epoch of `ack_wait[0]`.
    pub(super) ack_wait: [Duration; 2],
    pub(super) wait_epoch: u64,
    /// The queue its data met before sluice, from the sender's timestamps.
    pub(super) owd: Owd,
    /// In loss recovery until the receiver acknowledges this (what the
    /// sender had sent when the duplicate ACKs began): its partial ACKs
    /// each clock a retransmission (RFC 6582 §3.2) and are not paced.
    pub(super) recover: Option<u32>,
}

impl Flow {
    /// The longest wait of the flow's ACKs over the last one to two epochs.
    pub(super) fn ack_wait(&self, epoch: u64) -> Duration {
        match epoch.saturating_sub(self.wait_epoch) {
            0 => self.ack_wait[0].max(self.ack_wait[1]),
            1 => self.ack_wait[0],
            _ => Duration::ZERO,
        }
    }

    pub(super) fn note_ack_wait(&mut self, epoch: u64, wait: Duration) {
        if epoch != self.wait_epoch {
            let last = if epoch == self.wait_epoch.wrapping_add(1) {
                self.ack_wait[0]
            } else {
                Duration::ZERO
            };
            self.ack_wait = [Duration::ZERO, last];
            self.wait_epoch = epoch;
        }
        self.ack_wait[0] = self.ack_wait[0].max(wait);
    }
}

/// ACKs held, in all and per egress interface.
#[derive(Default)]
pub(super) struct HeldCount {
    pub(super) total: usize,
    pub(super) per_iface: Vec<usize>,
}

impl HeldCount {
    pub(super) fn inc(&mut self, iface: usize) {
        self.total += 1;
        if self.per_iface.len() <= iface {
            self.per_iface.resize(iface + 1, 0);
        }
        self.per_iface[iface] += 1;
    }

    pub(super) fn dec(&mut self, iface: usize) {
        self.total -= 1;
        self.per_iface[iface] -= 1;
    }
}
