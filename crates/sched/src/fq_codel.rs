//! FQ-CoDel: flow queueing with CoDel per flow (RFC 8290).
//!
//! # Principles
//! - Packets are bucketed by [`Packet::flow`] (the caller's keyed hash) into
//!   `flows` queues with a multiply-shift reduction (`flow * n >> 64`), which
//!   uses the hash's high bits and needs no modulo (RFC 8290 §4.1.1). The
//!   queues are set-associative, eight to a set (CAKE's answer to the hash
//!   collisions RFC 8290 accepts): a flow whose bucket another holds takes
//!   a free queue of the set and keeps it while it has packets (each queue
//!   remembers the whole hash of its flow), so a ping hashed onto a bulk
//!   flow's bucket is not served behind that flow's backlog. Only with all
//!   eight busy does a flow share its bucket (counted), and then it stays
//!   there until that queue empties, so no packet overtakes another of its
//!   flow.
//! - Scheduling is deficit round robin over two lists (§4.2): a flow that
//!   becomes active joins `new_flows` with one `quantum_bytes` of deficit and is
//!   served before any `old_flows`, until it uses its quantum or empties. A
//!   flow leaves `new_flows` for the tail of `old_flows`, so a flow that keeps
//!   a queue can never stay "new" (no starvation of old flows). Deficits count
//!   [`Packet::cost`] bytes, so bandwidth is shared in bytes, not packets.
//! - Sparse flows stay new (CAKE's sparse set, not RFC 8290): a flow that
//!   empties on the new list having sent at most a quarter of its
//!   quantum, or at most three packets of at most that size each, with
//!   CoDel not dropping from it, leaves the lists instead of joining the
//!   old one, so its next packet is new again and waits only for the
//!   packet on the link. Under RFC 8290's rule a call's packet every 20 ms
//!   found its flow still on the old list whenever a round of the bulk
//!   flows' quanta took longer than that (four full frames at 450 kbit/s:
//!   108 ms) and waited for the round. The three packets: at 450 kbit/s
//!   the frame on the link and the one the shaper took next outlast a
//!   call's interval, and two or three of its packets queue behind them
//!   (a quarter quantum in bytes is one and a half). Bytes, not packets,
//!   bound a train of ACKs: with a quantum's worth of them sparse, every
//!   download's ACKs went ahead of the ping (lab, `rrul` at 29/4.9
//!   Mbit/s: ping p50 + 1.7 ms). The price, as in CAKE: a flow of small
//!   packets that empties within each run goes first however many there
//!   are (a ping, a call, a lone ACK are such flows; a bulk flow never is,
//!   nor one of full frames). With host isolation the run's quantum is a
//!   host's share and RFC 8290's rule stands.
//! - Each flow runs the shared CoDel control step ([`crate::codel::select`])
//!   with its own [`codel::Vars`]; sojourn is measured from enqueue. As in
//!   Linux, the "≤ 1 MTU" test uses the total backlog of the discipline.
//! - Limits: at most `limit_packets` packets and `memory_limit_bytes` bytes of
//!   memory are resident after every enqueue. Memory is each packet's
//!   [`Packet::truesize`] (its buffer's capacity plus a fixed overhead), as
//!   Linux's `memory_limit` counts `skb->truesize` (tc-fq_codel(8)): a flood
//!   of small frames in MTU-sized buffers is bounded by what it really
//!   holds, not by its wire bytes. `backlog_bytes` stays wire length. On overflow packets are dropped
//!   from the head of the flow with the largest backlog (§4.1), in batches of
//!   up to `drop_batch` packets or half that flow's bytes (Linux's amortization
//!   of the fattest-flow scan); the newcomer may be among them if its flow is
//!   the fattest.
//! - Memory: flow tables are allocated once at construction; the packet slab
//!   grows on demand up to `limit_packets` slots and is reused (free list), so
//!   the steady state never allocates. A packet slot and a flow each take
//!   exactly one aligned cache line. Enqueue and dequeue are O(1); only the
//!   overflow path scans the per-flow backlog array (O(flows), amortized over
//!   a batch).
//! - With `ack_filter` on, an arriving ACK may remove one older redundant
//!   pure ACK of its connection from its own flow queue (at most
//!   [`SCAN_LIMIT`](crate::ack_filter::SCAN_LIMIT) packets looked at,
//!   [`DropReason::AckFilter`]); the flow's other packets keep their order
//!   and the newcomer is always queued (see [`crate::ack_filter`]).
//! - Host isolation ([`Isolation`], CAKE's `dual-srchost`, `dual-dsthost`
//!   and `triple-isolate`; docs/host-isolation.md): fairness first between
//!   hosts, then between a host's flows. A flow's quantum is divided by
//!   its host's *load*, the number of the host's flows that were bulk in
//!   the current or the last CoDel interval, so a host with 64 bulk flows
//!   gets per round the bytes a host with one gets. A flow is bulk when it
//!   runs out of credit with packets left (CAKE's rule) or comes back with
//!   its credit used up. It keeps its debt (never its credit) across
//!   absences, and an empty flow out of credit leaves without a fresh
//!   quantum: so flows that send a packet and empty (TCP at a one- or
//!   two-segment window) pay for every packet and come back behind the
//!   others (without this, 32 of them took 97 % from a host with one greedy
//!   flow), while sparse flows (a ping, a call, a download's ACKs), which
//!   never use their credit, neither dilute their host's share nor lose
//!   the new-flow priority. A host's newcomers share one quantum of
//!   first-in-line credit: a flow joining gets its quantum divided by its
//!   host's load plus the host's flows already on the new list, and one
//!   whose credit does not cover its packet waits on the old list, sending
//!   only when its credit covers a packet until it empties. A host opening
//!   64 connections at once thus sends about one frame ahead of another
//!   host's ping, not 64 (390 ms at 2 Mbit/s), while a ping or a call
//!   packet, smaller than its share, still goes first; the 64 start within
//!   one to two quanta's rounds, phases spread. In `triple-isolate` the
//!   load is the larger of the source's and the destination's, so neither
//!   end can take more by opening flows. The hosts are the 16-bit hashes
//!   in [`Packet::flow`]'s low bits ([`Packet::flow_key`]), counted in a
//!   table of 16 384 entries
//!   (allocated only when isolating); two hosts in one entry count as one.
//!   Deficits are kept in 1/65536 bytes so a share of a quantum keeps its
//!   fraction: with 64 flows each gets 1514/64 bytes per round, not 23.
//!   Cost: a host's flow with load L waits about L rounds per packet, so a
//!   dequeue visits up to ~L flows (bounded as every DRR pass is, by
//!   [`MAX_VISITS_PER_DEQUEUE`]).

use crate::ack_filter::{self, AckFilter};
use crate::codel;
use crate::qdisc::clamp;
use crate::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant};
use std::fmt;

mod slab;
use slab::{Slab, NIL};

/// Largest `flows` value (Linux's limit too).
pub const MAX_FLOWS: u32 = 65_536;

/// Configuration of [`FqCodel`]. Defaults are Linux's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Number of flow queues, 1..=65536.
    pub flows: u32,
    /// Bytes of `cost` a flow may send per round.
    pub quantum_bytes: u32,
    /// Maximum resident packets.
    pub limit_packets: u32,
    /// Maximum resident memory (sum of [`Packet::truesize`]).
    pub memory_limit_bytes: u64,
    /// CoDel target (acceptable standing delay).
    pub target: Duration,
    /// CoDel interval.
    pub interval: Duration,
    /// Mark ECT packets instead of dropping them (CoDel decisions only;
    /// overflow always drops).
    pub ecn: bool,
    /// Most packets dropped from the fattest flow per overflow.
    pub drop_batch: u32,
    /// Thin redundant pure ACKs on enqueue (off by default).
    pub ack_filter: AckFilter,
    /// Fairness between hosts before flows (off: per flow only).
    pub isolation: Isolation,
}

/// Which hosts share fairly before their flows do (CAKE's flow modes with
/// per-flow fairness inside a host; see the module's principles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Per-flow fairness only (RFC 8290).
    #[default]
    Flows,
    /// Between source hosts (`dual-srchost`): a LAN's hosts on the upload.
    SrcHost,
    /// Between destination hosts (`dual-dsthost`): a LAN's hosts on the
    /// download.
    DstHost,
    /// Between source and destination hosts at once (`triple-isolate`).
    Both,
}

impl Isolation {
    pub fn is_on(self) -> bool {
        self != Isolation::Flows
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            flows: 1024,
            quantum_bytes: 1514,
            limit_packets: 10_240,
            memory_limit_bytes: 32 << 20,
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: true,
            drop_batch: 64,
            ack_filter: AckFilter::Off,
            isolation: Isolation::Flows,
        }
    }
}

/// A parameter outside its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamError {
    Flows(u32),
    Quantum(u32),
    Limit(u32),
    DropBatch(u32),
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::Flows(v) => write!(f, "fq_codel: flows {v} out of range (1..=65536)"),
            ParamError::Quantum(v) => write!(f, "fq_codel: quantum {v} must be at least 1 byte"),
            ParamError::Limit(v) => write!(f, "fq_codel: limit {v} must be at least 1 packet"),
            ParamError::DropBatch(v) => write!(f, "fq_codel: drop batch {v} must be at least 1"),
        }
    }
}

impl std::error::Error for ParamError {}

impl Params {
    /// Checks the ranges; [`FqCodel::new`] clamps instead of failing.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(ParamError::Flows(self.flows));
        }
        if self.quantum_bytes == 0 {
            return Err(ParamError::Quantum(self.quantum_bytes));
        }
        if self.limit_packets == 0 {
            return Err(ParamError::Limit(self.limit_packets));
        }
        if self.drop_batch == 0 {
            return Err(ParamError::DropBatch(self.drop_batch));
        }
        Ok(())
    }
}

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum OnList {
    None,
    New,
    Old,
}

/// Per-flow state. Small on purpose: there are up to 65536 of them.
#[derive(Clone, Copy, Debug)]
struct Flow {
    /// Packet slab indices of the flow's FIFO (NIL when empty).
    head: u32,
    tail: u32,
    /// Next flow on the same list (NIL at the end).
    next: u32,
    /// What the flow may still send this round, in 1/65536 bytes
    /// ([`FRAC_BITS`]). i64: a quantum or a packet's cost (at most
    /// `u32::MAX` bytes, 48 bits scaled) never overflows it.
    deficit: i64,
    list: OnList,
    /// The interval (of CoDel's `interval`) in which it was last bulk,
    /// counted in its hosts' loads then ([`NEVER`] before; isolation only).
    bulk_epoch: u32,
    /// What this active run has done (cleared when the flow empties).
    run: Run,
    /// A flow without a queue of its own in the set shares this one (its
    /// bucket): it keeps doing so until the queue empties, so that none of
    /// its packets overtakes another.
    shared: bool,
    /// Its hosts (set when it joins a list; isolation only).
    src_host: u16,
    dst_host: u16,
    vars: codel::Vars,
}

/// Marks of a flow's active run (one byte: [`Flow`] fills its cache line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run(u8);

impl Run {
    const EMPTY: Run = Run(0);
    /// Its phase was spread (isolation only).
    const SPREAD: u8 = 1;
    /// A newcomer whose credit did not cover its packet: until it empties
    /// it sends when its credit covers its packet, not as soon as it is
    /// positive (isolation only).
    const WAITS: u8 = 2;
    /// A packet over the sparse size ([`SPARSE_SHARE`]) left: the run is
    /// not sparse ([`FqCodel::sparse_run`]).
    const LARGE: u8 = 4;
    /// Packets sent, saturating at seven (three bits).
    const SENT_SHIFT: u32 = 3;
    const SENT_MASK: u8 = 7 << Self::SENT_SHIFT;

    fn has(self, mark: u8) -> bool {
        self.0 & mark != 0
    }

    fn set(&mut self, mark: u8) {
        self.0 |= mark;
    }

    fn sent(self) -> u8 {
        (self.0 & Self::SENT_MASK) >> Self::SENT_SHIFT
    }

    fn count_sent(&mut self) {
        let n = (self.sent() + 1).min(7);
        self.0 = (self.0 & !Self::SENT_MASK) | (n << Self::SENT_SHIFT);
    }
}

impl Flow {
    const EMPTY: Flow = Flow {
        head: NIL,
        tail: NIL,
        next: NIL,
        deficit: FRESH,
        list: OnList::None,
        bulk_epoch: NEVER,
        run: Run::EMPTY,
        shared: false,
        src_host: 0,
        dst_host: 0,
        vars: codel::Vars::ZERO,
    };
}

// Per-flow state fits its cache line (CoDel vars 32 + links, deficit,
// hosts); checked at compile time.
const _: () = assert!(std::mem::size_of::<Flow>() <= 64);

/// Fraction bits of a deficit: host isolation gives a flow a share of a
/// quantum, and truncating 1514/64 to 23 bytes would cost a loaded host 3 %.
const FRAC_BITS: u32 = 16;

/// The deficit of a flow never served (or purged): one byte of credit.
/// A flow comes back bulk when it has less ([`FqCodel::enqueue`]): it used
/// up what it had, where a fresh flow has not.
const FRESH: i64 = 1 << FRAC_BITS;

/// A run of a flow on the new list that sends at most a quantum over this
/// (378 bytes of the default 1514), or a few packets each at most that
/// size, is sparse ([`FqCodel::sparse_run`]).
const SPARSE_SHARE: i64 = 4;

/// A run of at most this many small packets is sparse whatever their
/// bytes: those of a call that queue behind the frame on the link and the
/// one the shaper has taken to send next (two full frames at 450 kbit/s,
/// 54 ms, against a packet every 20 ms). A train of ACKs is not: three
/// are under a quarter quantum anyway, and more are the bytes' rule.
const SPARSE_PACKETS: u8 = 3;

/// A flow's `bulk_epoch` before it was ever bulk.
const NEVER: u32 = u32::MAX;

/// Host table entries: the low 14 bits of the 16-bit host hashes.
const HOST_BITS: u32 = 14;

/// Bulk flows of one host as a source or as a destination: in the interval
/// `epoch` (`cur`) and the one before (`prev`).
#[derive(Clone, Copy, Debug, Default)]
struct Load {
    epoch: u32,
    cur: u16,
    prev: u16,
}

impl Load {
    /// The host's load in interval `e`: its bulk flows over this interval
    /// and the last, as if rolled to `e`.
    fn at(&self, e: u32) -> u32 {
        if self.epoch == e {
            u32::from(self.cur.max(self.prev))
        } else if self.epoch.wrapping_add(1) == e {
            u32::from(self.cur)
        } else {
            0
        }
    }

    /// Counts one more bulk flow in interval `e`.
    fn add(&mut self, e: u32) {
        if self.epoch != e {
            self.prev = if self.epoch.wrapping_add(1) == e {
                self.cur
            } else {
                0
            };
            self.cur = 0;
            self.epoch = e;
        }
        self.cur = self.cur.saturating_add(1);
    }
}

/// A host's loads as source and as destination, and its flows on the new
/// list as each (isolation only).
#[derive(Clone, Copy, Debug, Default)]
struct HostLoad {
    src: Load,
    dst: Load,
    new_src: u16,
    new_dst: u16,
}

/// A flow padded to one aligned cache line. The pull path reads and writes
/// most of a flow; at a 56-byte stride 7 flows in 8 straddle two lines, so
/// touching a cold flow cost two misses. 1024 flows take 64 KiB instead of 56.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct FlowLine(Flow);

const _: () = assert!(std::mem::size_of::<FlowLine>() == 64);

/// A flow queue's backlog and tag: the flow hash that last took it, folded
/// to 32 bits (set-associative placement; two flows of one set with the
/// same tag share a queue, as two flows of one bucket did without sets).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    backlog: u32,
    tag: u32,
}

/// Intrusive singly linked list of flows; only the head is ever removed.
#[derive(Clone, Copy, Debug)]
struct FlowList {
    head: u32,
    tail: u32,
}

impl FlowList {
    const EMPTY: FlowList = FlowList {
        head: NIL,
        tail: NIL,
    };
}

/// FQ-CoDel's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Control-law decisions, summed over flows.
    pub codel: codel::Stats,
    /// Flows that became active (joined `new_flows`).
    pub new_flows: u64,
    /// Packets dropped by the overflow (limit/memory) path.
    pub overflow_drops: u64,
    /// Overflow events (each drops one batch or more).
    pub overflow_events: u64,
    /// Packets that found every queue of their set taken by other flows
    /// and shared their own with one.
    pub collisions: u64,
}

/// The FQ-CoDel discipline.
pub struct FqCodel {
    params: Params,
    codel: codel::Params,
    flows: Box<[FlowLine]>,
    /// Bytes queued per flow and its tag, apart from `flows` so the
    /// fattest-flow scan reads one dense array (and a set's tags are one
    /// cache line, next to the backlog the enqueue updates anyway).
    slots: Box<[Slot]>,
    new_flows: FlowList,
    old_flows: FlowList,
    /// Indexed by a host hash's low [`HOST_BITS`]; empty unless isolating.
    hosts: Box<[HostLoad]>,
    slab: Slab,
    /// Packets and bytes in flow queues (not counting `held`).
    queued: u32,
    queued_bytes: u64,
    /// Sum of [`Packet::truesize`] of the packets in flow queues.
    queued_mem: u64,
    /// Packet chosen by `peek_len`, returned by the next `dequeue` unless
    /// a new flow arrives first (see [`FqCodel::unhold`]), and its flow.
    held: Option<Packet>,
    held_flow: u32,
    fq_stats: Stats,
    /// Departures, drops, sojourn; the rest is derived in [`FqCodel::stats`].
    stats: QueueStats,
    last_now: Instant,
}

impl fmt::Debug for FqCodel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FqCodel")
            .field("params", &self.params)
            .field("queued", &self.queued)
            .field("queued_bytes", &self.queued_bytes)
            .field("queued_mem", &self.queued_mem)
            .finish()
    }
}

/// One flow's FIFO seen as a CoDel source.
struct FlowSource<'a> {
    flow_head: &'a mut u32,
    flow_tail: &'a mut u32,
    flow_backlog: &'a mut u32,
    slab: &'a mut Slab,
    queued: &'a mut u32,
    queued_bytes: &'a mut u64,
    queued_mem: &'a mut u64,
}

impl codel::Source for FlowSource<'_> {
    #[inline]
    fn head_mut(&mut self) -> Option<&mut Packet> {
        self.slab.get_mut(*self.flow_head)
    }
    #[inline]
    fn pop(&mut self) -> Option<Packet> {
        let pkt = self.slab.pop(self.flow_head, self.flow_tail)?;
        *self.flow_backlog = self.flow_backlog.saturating_sub(pkt.len);
        *self.queued -= 1;
        *self.queued_bytes -= pkt.len as u64;
        *self.queued_mem -= pkt.truesize();
        Some(pkt)
    }
    fn backlog_bytes(&self) -> u64 {
        *self.queued_bytes
    }
}

/// Queues in a set: a flow takes a free queue of its bucket's set when
/// another flow holds its own (CAKE's set-associative hashing), so two
/// flows share a queue only when eight are busy in one set.
const SET_WAYS: u32 = 8;

/// Bounds `dequeue`'s search. Each DRR pass adds a quantum to every visited
/// flow, so a packet is found within `cost/quantum` passes; past this cap the
/// head flow is served regardless of deficit (never reached with sane
/// parameters, but keeps one call's work bounded whatever they are).
const MAX_VISITS_PER_DEQUEUE: u32 = 1 << 16;

impl FqCodel {
    pub fn new(params: Params) -> FqCodel {
        let params = Params {
            flows: params.flows.clamp(1, MAX_FLOWS),
            quantum_bytes: params.quantum_bytes.max(1),
            limit_packets: params.limit_packets.max(1),
            drop_batch: params.drop_batch.max(1),
            ..params
        };
        let n = params.flows as usize;
        FqCodel {
            codel: codel::Params {
                target: params.target,
                interval: params.interval,
                ecn: params.ecn,
                ce_threshold: None,
                mtu_bytes: 1514,
            },
            flows: vec![FlowLine(Flow::EMPTY); n].into_boxed_slice(),
            slots: vec![Slot::default(); n].into_boxed_slice(),
            hosts: if params.isolation.is_on() {
                vec![HostLoad::default(); 1 << HOST_BITS].into_boxed_slice()
            } else {
                Box::default()
            },
            new_flows: FlowList::EMPTY,
            old_flows: FlowList::EMPTY,
            slab: Slab::with_capacity((params.limit_packets as usize).min(16_384)),
            queued: 0,
            queued_bytes: 0,
            queued_mem: 0,
            held: None,
            held_flow: NIL,
            fq_stats: Stats::default(),
            stats: QueueStats::default(),
            last_now: Instant::ZERO,
            params,
        }
    }

    pub fn params(&self) -> &Params {
        &self.params
    }
    pub fn fq_stats(&self) -> &Stats {
        &self.fq_stats
    }
    /// The queue's statistics. Every packet that enters is resident until it
    /// leaves or is dropped (FQ-CoDel refuses none at the door: an overflow
    /// drops residents, the newcomer possibly among them), so the arrival
    /// counters and the current length are derived here from departures,
    /// drops and the queue instead of being kept on the packet path, and
    /// the ECN marks are the control law's. Same figures; built when asked.
    pub fn stats(&self) -> QueueStats {
        let mut st = self.stats.clone();
        st.qlen = self.len() as u64;
        st.backlog_bytes = self.backlog_bytes();
        st.enq_packets = st.deq_packets + st.total_drops() + st.qlen;
        st.enq_bytes = st.deq_bytes + st.drop_bytes.iter().sum::<u64>() + st.backlog_bytes;
        st.ecn_marks = self.fq_stats.codel.ecn_marks;
        st
    }

    /// The flow queue a hash maps to first (multiply-shift, uniform for a
    /// uniform hash); its packets go there unless another flow holds it
    /// ([`FqCodel::place`]).
    #[inline]
    pub fn bucket(&self, flow_hash: u64) -> u32 {
        ((flow_hash as u128 * self.params.flows as u128) >> 64) as u32
    }

    /// The queue a packet of flow `hash` goes to: the queue it holds in
    /// its set, else its own bucket or another free queue of the set
    /// (taken with a fresh state), else its own bucket, shared (`true`).
    /// A busy bucket already shared keeps every flow without a queue of
    /// its own: one of them may have packets there.
    #[inline]
    fn place(&mut self, hash: u64) -> (u32, bool) {
        let b = self.bucket(hash);
        let tag = (hash ^ (hash >> 32)) as u32;
        if self.slots.get(b as usize).map(|s| s.tag) == Some(tag) {
            return (b, false);
        }
        let start = b - b % SET_WAYS;
        let end = (start + SET_WAYS).min(self.params.flows);
        if let Some(i) = (start..end).find(|&i| self.slots[i as usize].tag == tag) {
            return (i, false);
        }
        let free = |i: u32| self.flows[i as usize].0.list == OnList::None;
        let own = &self.flows[b as usize].0;
        let pick = if free(b) {
            Some(b)
        } else if own.shared {
            None
        } else {
            (start..end).find(|&i| free(i))
        };
        let Some(i) = pick else {
            self.fq_stats.collisions += 1;
            return (b, true);
        };
        // Another flow's queue, idle: none of its state is this flow's.
        self.slots[i as usize].tag = tag;
        let f = &mut self.flows[i as usize].0;
        f.deficit = FRESH;
        f.bulk_epoch = NEVER;
        f.run = Run::EMPTY;
        f.vars.reset();
        (i, false)
    }

    /// Bytes queued in flow queue `bucket` (for tests and `show`).
    pub fn flow_backlog(&self, bucket: u32) -> u32 {
        self.slots.get(bucket as usize).map_or(0, |s| s.backlog)
    }

    #[inline]
    fn over_limit(&self) -> bool {
        self.queued > self.params.limit_packets || self.queued_mem > self.params.memory_limit_bytes
    }

    /// The interval `now` falls in: host loads count bulk flows over the
    /// current and the last CoDel `interval` (100 ms by default).
    #[inline]
    fn epoch(&self, now: Instant) -> u32 {
        (now.0 / self.params.interval.0.max(1)) as u32
    }

    #[inline]
    fn host_slot(h: u16) -> usize {
        usize::from(h) & ((1 << HOST_BITS) - 1)
    }

    /// What flow `idx` adds to its deficit per round: a quantum, divided by
    /// its host's load when isolating. Joining (`joining`), the host's flows
    /// already on the new list count too: a host's newcomers share one
    /// quantum of first-in-line credit, however many arrive together.
    #[inline]
    fn flow_quantum(&self, idx: u32, now: Instant, joining: bool) -> i64 {
        let q = i64::from(self.params.quantum_bytes) << FRAC_BITS;
        if !self.params.isolation.is_on() {
            return q;
        }
        let Some(f) = self.flows.get(idx as usize).map(|l| &l.0) else {
            return q;
        };
        let e = self.epoch(now);
        let host = |h: u16| {
            self.hosts
                .get(Self::host_slot(h))
                .copied()
                .unwrap_or_default()
        };
        let (sh, dh) = (host(f.src_host), host(f.dst_host));
        let (mut src, mut dst) = (sh.src.at(e), dh.dst.at(e));
        if joining {
            src = src.max(1) + u32::from(sh.new_src);
            dst = dst.max(1) + u32::from(dh.new_dst);
        }
        let load = match self.params.isolation {
            Isolation::Flows => 1,
            Isolation::SrcHost => src,
            Isolation::DstHost => dst,
            Isolation::Both => src.max(dst),
        };
        q / i64::from(load.max(1))
    }

    /// Flow `idx` is bulk now (out of credit with packets left, or back
    /// with its credit used up): it counts in its hosts' loads for this
    /// interval and the next.
    #[inline]
    fn mark_bulk(&mut self, idx: u32, now: Instant) {
        let e = self.epoch(now);
        let Some(f) = self.flows.get_mut(idx as usize).map(|l| &mut l.0) else {
            return;
        };
        if f.bulk_epoch == e || self.hosts.is_empty() {
            return;
        }
        f.bulk_epoch = e;
        let (s, d) = (Self::host_slot(f.src_host), Self::host_slot(f.dst_host));
        if let Some(h) = self.hosts.get_mut(s) {
            h.src.add(e);
        }
        if let Some(h) = self.hosts.get_mut(d) {
            h.dst.add(e);
        }
    }

    /// Flow `idx` used up its quantum with packets left, the first time
    /// since it last emptied: spread the flows' phases. A host's flows that
    /// start together would otherwise all reach a positive deficit in the
    /// same round, every `load` rounds, and that round would send one
    /// packet of each (a 77 ms burst for 64 flows at 10 Mbit/s) while a
    /// sparse flow waits on the old list. A fraction of one quantum, from
    /// the bucket (a keyed hash: uniform), once per active run.
    #[inline]
    fn spread_phase(&mut self, idx: u32) {
        let Some(f) = self.flows.get_mut(idx as usize).map(|l| &mut l.0) else {
            return;
        };
        if f.run.has(Run::SPREAD) || self.hosts.is_empty() {
            return;
        }
        f.run.set(Run::SPREAD);
        let spread = (u64::from(idx).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as i64;
        f.deficit -= (i64::from(self.params.quantum_bytes) * spread) << (FRAC_BITS - 16);
    }

    /// Hosts with bulk flows over the last interval or two at `now`, as
    /// sources and as destinations (a scan of the host table, for tests).
    pub fn bulk_hosts(&self, now: Instant) -> (u32, u32) {
        let e = self.epoch(now);
        let n =
            |f: &dyn Fn(&HostLoad) -> u32| self.hosts.iter().filter(|h| f(h) > 0).count() as u32;
        (n(&|h| h.src.at(e)), n(&|h| h.dst.at(e)))
    }

    /// Counts flow `idx` on (`+1`) or off (`-1`) the new list in its hosts'
    /// newcomers (isolation only).
    #[inline]
    fn count_new(&mut self, idx: u32, delta: i16) {
        if self.hosts.is_empty() {
            return;
        }
        let f = &self.flows[idx as usize].0;
        let (s, d) = (Self::host_slot(f.src_host), Self::host_slot(f.dst_host));
        if let Some(h) = self.hosts.get_mut(s) {
            h.new_src = h.new_src.saturating_add_signed(delta);
        }
        if let Some(h) = self.hosts.get_mut(d) {
            h.new_dst = h.new_dst.saturating_add_signed(delta);
        }
    }

    #[inline]
    fn push_tail(&mut self, which: OnList, idx: u32) {
        if which == OnList::New {
            self.count_new(idx, 1);
        }
        let list = match which {
            OnList::New => &mut self.new_flows,
            OnList::Old => &mut self.old_flows,
            OnList::None => return,
        };
        self.flows[idx as usize].0.next = NIL;
        self.flows[idx as usize].0.list = which;
        if list.tail == NIL {
            list.head = idx;
        } else {
            self.flows[list.tail as usize].0.next = idx;
        }
        list.tail = idx;
    }

    #[inline]
    fn pop_head(&mut self, which: OnList) -> Option<u32> {
        let list = match which {
            OnList::New => &mut self.new_flows,
            OnList::Old => &mut self.old_flows,
            OnList::None => return None,
        };
        let idx = list.head;
        if idx == NIL {
            return None;
        }
        list.head = self.flows[idx as usize].0.next;
        if list.head == NIL {
            list.tail = NIL;
        }
        self.flows[idx as usize].0.next = NIL;
        self.flows[idx as usize].0.list = OnList::None;
        if which == OnList::New {
            self.count_new(idx, -1);
        }
        Some(idx)
    }

    /// Drops one batch from the head of the fattest flow (RFC 8290 §4.1).
    /// Returns the flow index hit.
    fn drop_batch(&mut self, drops: &mut Drops) -> u32 {
        // The scan reads the dense backlog array once: O(flows), amortized
        // over up to `drop_batch` drops.
        let mut fattest = 0usize;
        let mut max = 0u32;
        for (i, &Slot { backlog: b, .. }) in self.slots.iter().enumerate() {
            if b > max {
                max = b;
                fattest = i;
            }
        }
        let threshold = max / 2;
        let mut dropped_bytes = 0u32;
        let mut n = 0u32;
        let flow = &mut self.flows[fattest].0;
        // Bounded by `drop_batch` and by the flow's packets.
        while n < self.params.drop_batch {
            let Some(pkt) = self.slab.pop(&mut flow.head, &mut flow.tail) else {
                break;
            };
            n += 1;
            dropped_bytes = dropped_bytes.saturating_add(pkt.len);
            self.slots[fattest].backlog = self.slots[fattest].backlog.saturating_sub(pkt.len);
            self.queued -= 1;
            self.queued_bytes -= pkt.len as u64;
            self.queued_mem -= pkt.truesize();
            self.fq_stats.overflow_drops += 1;
            drops.push(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
            if dropped_bytes >= threshold {
                break;
            }
        }
        self.fq_stats.overflow_events += 1;
        fattest as u32
    }

    /// Over a limit after enqueueing packet `id`: drops batches from the
    /// fattest flows until under (RFC 8290 §4.1). Out of line and cold, so
    /// the common enqueue carries none of its registers and stack.
    #[cold]
    #[inline(never)]
    fn overflow(&mut self, id: u64, drops: &mut Drops) -> Enqueue {
        let from = drops.len();
        // Each batch drops at least one packet, so this ends within
        // `queued` iterations.
        while self.over_limit() && self.queued > 0 {
            self.drop_batch(drops);
        }
        self.stats.on_drops(&drops[from..]);
        let refused = drops[from..].iter().any(|d| d.pkt.id == id);
        if refused {
            Enqueue::Rejected
        } else {
            Enqueue::QueuedDroppedOthers
        }
    }

    /// DRR selection plus the CoDel step of the chosen flow (RFC 8290 §4.2).
    /// Returns the flow whose head packet is the one to send, left in place:
    /// the caller takes it with [`FqCodel::take_head`], so the packet moves
    /// once, from its slot to where it goes. Always inlined: out of line
    /// (it has two callers) it costs a frame and its spills on every packet.
    #[inline(always)]
    fn pull(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let mut visits = 0u32;
        loop {
            let (which, idx) = if self.new_flows.head != NIL {
                (OnList::New, self.new_flows.head)
            } else if self.old_flows.head != NIL {
                (OnList::Old, self.old_flows.head)
            } else {
                return None;
            };
            visits += 1;
            let f = &self.flows[idx as usize].0;
            // Isolating, an empty flow out of credit leaves as it is: a
            // quantum added now would come back with its next packet as
            // credit it never earned, and hide that it used all it had.
            let empty_isolated = f.head == NIL && self.params.isolation.is_on();
            // Whether the flow's credit covers its head packet (an empty
            // flow's, trivially); read only where a rule compares the two,
            // not on every visit.
            let covers = |f: &Flow| {
                self.slab
                    .get(f.head)
                    .is_none_or(|p| f.deficit >= i64::from(p.cost) << FRAC_BITS)
            };
            let short = f.deficit <= 0 || (f.run.has(Run::WAITS) && !covers(f));
            if short && !empty_isolated && visits < MAX_VISITS_PER_DEQUEUE {
                // Isolating, this flow is out of credit with packets left:
                // bulk (counted first, so its own quantum is already
                // shared). Both return at once when not isolating.
                self.mark_bulk(idx, now);
                self.spread_phase(idx);
                let quantum = self.flow_quantum(idx, now, false);
                let f = &mut self.flows[idx as usize].0;
                f.deficit = f.deficit.saturating_add(quantum);
                self.pop_head(which);
                self.push_tail(OnList::Old, idx);
                continue;
            }
            // Isolating, a new flow whose share of its host's newcomer
            // credit does not cover its packet waits on the old list until
            // its credit does, as a bulk flow of its host: 32 connections
            // a host opens together would otherwise each send a full
            // frame before another host's ping (200 ms at 2 Mbit/s),
            // ahead of it on the new list or, with their credit kept, on
            // the old one; a ping or a call packet, smaller than its
            // share, still goes first.
            if which == OnList::New
                && self.params.isolation.is_on()
                && visits < MAX_VISITS_PER_DEQUEUE
                && !covers(f)
            {
                self.flows[idx as usize].0.run.set(Run::WAITS);
                self.pop_head(which);
                self.push_tail(OnList::Old, idx);
                continue;
            }
            let f = &mut self.flows[idx as usize].0;
            // An empty flow stays at the head until visited (RFC 8290 §4.2);
            // for it the CoDel step only resets its state and yields
            // nothing, so take that branch directly: every flow that drains
            // costs one such visit.
            let found = if f.head == NIL {
                f.vars.on_empty();
                false
            } else {
                let from = drops.len();
                let mut src = FlowSource {
                    flow_head: &mut f.head,
                    flow_tail: &mut f.tail,
                    flow_backlog: &mut self.slots[idx as usize].backlog,
                    slab: &mut self.slab,
                    queued: &mut self.queued,
                    queued_bytes: &mut self.queued_bytes,
                    queued_mem: &mut self.queued_mem,
                };
                let found = codel::select(
                    &self.codel,
                    &mut f.vars,
                    &mut self.fq_stats.codel,
                    &mut src,
                    now,
                    drops,
                );
                // Resident counts are derived (see `stats`).
                self.stats.on_drops(&drops[from..]);
                found
            };
            if found {
                return Some(idx);
            }
            // Empty: an emptied new flow goes to the old list if that
            // is non-empty (so it cannot re-enter as new right away
            // and starve old flows), else it leaves the lists; a sparse
            // one leaves them either way (see `sparse_run`). Its next
            // packet starts a new run.
            let sparse = which == OnList::New && self.sparse_run(idx);
            self.flows[idx as usize].0.run = Run::EMPTY;
            self.pop_head(which);
            // CoDel state is kept: RFC 8289 reuses `count` when the
            // flow comes back soon.
            if which == OnList::New && self.old_flows.head != NIL && !sparse {
                self.push_tail(OnList::Old, idx);
            }
        }
    }

    /// Whether flow `idx`, emptied on the new list, was sparse in the run
    /// that ends (the module's principles): each packet it sent was at most
    /// a [`SPARSE_SHARE`]th of its quantum, together at most that much or
    /// at most [`SPARSE_PACKETS`] of them, and CoDel is not dropping from
    /// it.
    /// A run's quantum is known only without isolation (with it, it is a
    /// host's share), so there no flow is sparse.
    fn sparse_run(&self, idx: u32) -> bool {
        if self.params.isolation.is_on() {
            return false;
        }
        let Some(f) = self.flows.get(idx as usize).map(|l| &l.0) else {
            return false;
        };
        let q = i64::from(self.params.quantum_bytes) << FRAC_BITS;
        let small = q - f.deficit <= q / SPARSE_SHARE || f.run.sent() <= SPARSE_PACKETS;
        !f.vars.dropping() && !f.run.has(Run::LARGE) && small
    }

    /// Removes the head packet of flow `idx` (chosen by `pull`) and charges
    /// it to the flow's deficit and the backlogs.
    #[inline(always)]
    fn take_head(&mut self, idx: u32) -> Option<Packet> {
        let f = &mut self.flows.get_mut(idx as usize)?.0;
        let pkt = self.slab.pop(&mut f.head, &mut f.tail)?;
        f.deficit = f.deficit.saturating_sub(i64::from(pkt.cost) << FRAC_BITS);
        if i64::from(pkt.cost) * SPARSE_SHARE > i64::from(self.params.quantum_bytes) {
            f.run.set(Run::LARGE);
        }
        f.run.count_sent();
        if let Some(b) = self.slots.get_mut(idx as usize).map(|s| &mut s.backlog) {
            *b = b.saturating_sub(pkt.len);
        }
        self.queued -= 1;
        self.queued_bytes -= pkt.len as u64;
        self.queued_mem -= pkt.truesize();
        Some(pkt)
    }

    /// The ACK filter on the flow queue `idx` whose tail was just
    /// enqueued: drops the older ACK it makes redundant, if any. Returns
    /// whether it dropped one.
    #[inline(never)]
    fn filter_acks(&mut self, idx: u32, drops: &mut Drops) -> bool {
        let mode = self.params.ack_filter;
        let Some(f) = self.flows.get_mut(idx as usize).map(|l| &mut l.0) else {
            return false;
        };
        let Some(trigger) = self
            .slab
            .get(f.tail)
            .and_then(|p| ack_filter::Trigger::of(mode, p))
        else {
            return false;
        };
        let tail = f.tail;
        let older = self
            .slab
            .chain(f.head)
            .take_while(|&(i, _)| i != tail)
            .map(|(_, p)| p);
        let Some(n) = trigger.pick(mode, older) else {
            return false;
        };
        let Some(pkt) = self.slab.remove_nth(&mut f.head, &mut f.tail, n) else {
            return false;
        };
        if let Some(b) = self.slots.get_mut(idx as usize).map(|s| &mut s.backlog) {
            *b = b.saturating_sub(pkt.len);
        }
        self.queued -= 1;
        self.queued_bytes -= pkt.len as u64;
        self.queued_mem -= pkt.truesize();
        // Resident counts are derived (see `stats`).
        self.stats.push_drop(pkt, DropReason::AckFilter, drops);
        true
    }

    /// Puts the packet `peek_len` chose back at the head of its flow, as
    /// if never taken: its deficit, backlog and counts restored. Called
    /// when a new flow arrives, which DRR serves before it. A parent (HFSC
    /// after every send, the token bucket while it waits for tokens) peeks
    /// the next packet long before it sends it; held, a bulk frame would
    /// go before a ping that arrives meanwhile, and the ping would wait for
    /// two frames instead of one (at 950 kbit/s: up to 25 ms instead of
    /// 12.7; `tcp_1up` measured p99 idle + 21 ms). The parent charges what
    /// it finally dequeues, so a stale peeked cost only shifts a decision.
    #[cold]
    fn unhold(&mut self) {
        let Some(pkt) = self.held.take() else { return };
        let idx = std::mem::replace(&mut self.held_flow, NIL);
        let Some(f) = self.flows.get_mut(idx as usize).map(|l| &mut l.0) else {
            // Unreachable: `held_flow` is set with `held`. Keep the packet.
            self.held = Some(pkt);
            return;
        };
        let (len, cost, mem) = (pkt.len, pkt.cost, pkt.truesize());
        self.slab.push_front(&mut f.head, &mut f.tail, pkt);
        f.deficit = f.deficit.saturating_add(i64::from(cost) << FRAC_BITS);
        if let Some(b) = self.slots.get_mut(idx as usize).map(|s| &mut s.backlog) {
            *b = b.saturating_add(len);
        }
        self.queued += 1;
        self.queued_bytes += u64::from(len);
        self.queued_mem += mem;
    }

    /// Memory the flow queues hold (sum of [`Packet::truesize`]), the
    /// figure `memory_limit_bytes` caps.
    pub fn memory_bytes(&self) -> u64 {
        self.queued_mem + self.held.as_ref().map_or(0, Packet::truesize)
    }
}

impl Qdisc for FqCodel {
    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last_now, now);
        let (idx, collided) = self.place(pkt.flow);
        if self.held.is_some() && self.flows[idx as usize].0.list == OnList::None {
            self.unhold();
        }
        let id = pkt.id;
        pkt.enqueued_at = now;
        // `on_enqueue`'s counters are derived (see `stats`).
        let len = pkt.len;
        let mem = pkt.truesize();
        let (src_host, dst_host) = (pkt.src_host(), pkt.dst_host());
        let f = &mut self.flows[idx as usize].0;
        self.slab.push(&mut f.head, &mut f.tail, pkt);
        let joins = f.list == OnList::None;
        // An idle queue holds nobody else's packets; a busy one is shared
        // from the first colliding packet until it empties.
        f.shared = !joins && (f.shared || collided);
        if joins {
            // Its hosts for as long as it stays on a list.
            f.src_host = src_host;
            f.dst_host = dst_host;
            let mut debt = 0;
            if self.params.isolation.is_on() {
                // A flow keeps its debt across absences: a host's flow
                // gets a fraction of a quantum per round, so a flow that
                // sends one packet and empties (TCP at a one- or
                // two-segment window) would otherwise pay that fraction
                // for a whole packet and come back new, first in line: 32
                // such flows took 97 % from a host with one greedy flow.
                // Credit is not kept.
                debt = f.deficit.min(0);
                // Back with its credit used up, it is bulk at once
                // (counted first, so its own quantum is already shared).
                if f.deficit < FRESH {
                    self.mark_bulk(idx, now);
                }
            }
            let q = self.flow_quantum(idx, now, true);
            self.flows[idx as usize].0.deficit = debt.saturating_add(q);
        }
        if let Some(b) = self.slots.get_mut(idx as usize).map(|s| &mut s.backlog) {
            *b = b.saturating_add(len);
        }
        self.queued += 1;
        self.queued_bytes += len as u64;
        self.queued_mem += mem;
        if joins {
            self.push_tail(OnList::New, idx);
            self.fq_stats.new_flows += 1;
        }
        let filtered = self.params.ack_filter.is_on() && self.filter_acks(idx, drops);
        if !self.over_limit() {
            return if filtered {
                Enqueue::QueuedDroppedOthers
            } else {
                Enqueue::Queued
            };
        }
        self.overflow(id, drops)
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last_now, now);
        // Test before taking: `take()` on an empty slot still moves the
        // whole (64-byte) option out, on every dequeue.
        let pkt = if self.held.is_some() {
            self.held.take()?
        } else {
            let idx = self.pull(now, drops)?;
            self.take_head(idx)?
        };
        // `on_dequeue` without `qlen`/`backlog_bytes`, which are derived.
        self.stats.deq_packets += 1;
        self.stats.deq_bytes += pkt.len as u64;
        self.stats
            .sojourn
            .record(now.saturating_since(pkt.enqueued_at));
        Some(pkt)
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = clamp(&mut self.last_now, now);
        if self.held.is_none() {
            if let Some(idx) = self.pull(now, drops) {
                self.held = self.take_head(idx);
                self.held_flow = idx;
            }
        }
        self.held.as_ref().map(|p| p.cost)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn len(&self) -> usize {
        self.queued as usize + usize::from(self.held.is_some())
    }

    fn backlog_bytes(&self) -> u64 {
        self.queued_bytes + self.held.as_ref().map_or(0, |p| p.len as u64)
    }

    fn purge(&mut self, drops: &mut Drops) {
        if let Some(pkt) = self.held.take() {
            self.stats.push_drop(pkt, DropReason::Purge, drops);
        }
        // Only flows on a list can hold packets; walking both lists visits
        // each active flow once.
        for which in [OnList::New, OnList::Old] {
            while let Some(idx) = self.pop_head(which) {
                let f = &mut self.flows[idx as usize].0;
                // Bounded by the flow's packets.
                while let Some(pkt) = self.slab.pop(&mut f.head, &mut f.tail) {
                    self.stats.push_drop(pkt, DropReason::Purge, drops);
                }
                f.vars.reset();
                f.deficit = FRESH;
                self.slots[idx as usize].backlog = 0;
                f.run = Run::EMPTY;
            }
        }
        self.queued = 0;
        self.queued_bytes = 0;
        self.queued_mem = 0;
    }

    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats());
    }
}

#[cfg(test)]
mod tests;
