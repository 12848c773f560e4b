//! The packet as a scheduler sees it.

use sluice_time::{Duration, Instant};

/// Identifies a class (queue) inside a classful discipline. Assigned by whoever
/// builds the tree (the engine); `ClassId::ROOT` for single-queue disciplines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassId(pub u32);

impl ClassId {
    pub const ROOT: ClassId = ClassId(0);
}

/// The ECN field of the IP header (RFC 3168).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ecn {
    #[default]
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Ecn {
    /// From the two low bits of the IPv4 ToS / IPv6 traffic class.
    pub fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// A packet waiting in a discipline. The frame bytes travel with it untouched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// The frame as it will be transmitted. Schedulers never read it.
    pub data: Vec<u8>,
    /// Wire length in bytes (what qlimit-in-bytes and backlog count).
    pub len: u32,
    /// `len` plus link overhead (see `sluice_time::Overhead`); all rate
    /// arithmetic uses this. Computed once by the caller.
    pub cost: u32,
    /// Keyed hash of the flow; flow-queueing disciplines bucket by it. Its
    /// high 32 bits identify the connection (5-tuple); the caller may put
    /// the keyed hashes of the source and destination hosts in the low 32
    /// ([`Packet::flow_key`]) for host isolation ([`crate::fq_codel::Isolation`]).
    pub flow: u64,
    /// Leaf class chosen by the classifier; classful disciplines route by it.
    pub class: ClassId,
    /// ECN codepoint; an AQM that marks instead of dropping sets `Ecn::Ce`.
    pub ecn: Ecn,
    /// Set by the discipline that holds the packet, for sojourn time.
    pub enqueued_at: Instant,
    /// Caller's sequence number; carried, never interpreted.
    pub id: u64,
    /// Standing delay in milliseconds that a control outside the scheduler
    /// deliberately leaves this packet's flow (0: none). TCP control's
    /// window lets a flow keep its share × (round trip + an allowance for
    /// the path's jitter) in flight, so up to that allowance of its data
    /// may wait here by design; an AQM that dropped it sooner would only
    /// cut the sender's congestion window below the window the receiver
    /// shows. CoDel takes it as the flow's target when above its own
    /// ([`crate::codel`]).
    pub allowance_ms: u16,
}

// Schedulers store packets by value: keep one on a cache line.
const _: () = assert!(std::mem::size_of::<Packet>() <= 64);

/// Bytes a queued packet costs besides its buffer, the analogue of what
/// Linux adds to an skb's data for `skb->truesize` (the `sk_buff` and its
/// shared info): the [`Packet`] itself, which every discipline stores by
/// value in a slot of its own (one cache line), plus the allocator's
/// header and rounding of the buffer (glibc: 8 bytes of header, chunks in
/// steps of 16). Slots a container keeps spare are not counted.
pub const PACKET_OVERHEAD: u64 = std::mem::size_of::<Packet>() as u64 + 16;

impl Packet {
    /// What holding this packet really costs in memory (Linux's
    /// `skb->truesize`): the capacity of its buffer, which may be far larger
    /// than the frame (a receive buffer sized for the MTU holding a 60-byte
    /// ACK), plus [`PACKET_OVERHEAD`]. A metadata-only packet is charged its
    /// `len`, as if its buffer fitted it exactly. Schedulers never touch
    /// `data`, so the figure is the same at dequeue as at enqueue.
    #[inline]
    pub fn truesize(&self) -> u64 {
        (self.data.capacity() as u64).max(u64::from(self.len)) + PACKET_OVERHEAD
    }

    /// The [`Packet::flow`] of a packet of connection `conn` from host
    /// `src_host` to host `dst_host` (three keyed 64-bit hashes): the
    /// connection's high 32 bits, then 16 bits of each host's. The flow
    /// buckets depend on the high bits only, so the hosts change no bucket
    /// and a caller without isolation may pass the connection hash alone.
    /// The layout keeps [`Packet`] on one cache line.
    #[inline]
    pub fn flow_key(conn: u64, src_host: u64, dst_host: u64) -> u64 {
        (conn & !0xffff_ffff) | ((src_host >> 48) << 16) | (dst_host >> 48)
    }

    /// The source host's 16-bit hash in [`Packet::flow`].
    #[inline]
    pub fn src_host(&self) -> u16 {
        (self.flow >> 16) as u16
    }

    /// The destination host's 16-bit hash in [`Packet::flow`].
    #[inline]
    pub fn dst_host(&self) -> u16 {
        self.flow as u16
    }

    /// A metadata-only packet, for tests and benchmarks.
    pub fn synthetic(id: u64, len: u32, flow: u64, class: ClassId) -> Packet {
        Packet {
            data: Vec::new(),
            len,
            cost: len,
            flow,
            class,
            ecn: Ecn::NotEct,
            enqueued_at: Instant::ZERO,
            id,
            allowance_ms: 0,
        }
    }

    /// The standing delay [`Packet::allowance_ms`] grants.
    #[inline]
    pub fn allowance(&self) -> Duration {
        Duration::from_millis(u64::from(self.allowance_ms))
    }

    /// Marks Congestion Experienced if the packet is ECN-capable. Returns whether
    /// it did; a non-ECT packet must be dropped instead.
    pub fn mark_ce(&mut self) -> bool {
        match self.ecn {
            Ecn::Ect0 | Ecn::Ect1 | Ecn::Ce => {
                self.ecn = Ecn::Ce;
                true
            }
            Ecn::NotEct => false,
        }
    }
}
