//! FQ-CoDel: flow queueing with CoDel per flow (RFC 8290), with CAKE's
//! set-associative queues, sparse flows and host isolation.
//!
//! # Principles
//! - Packets are bucketed by [`Packet::flow`] (the caller's keyed hash) with
//!   a multiply-shift reduction (RFC 8290 §4.1.1). Queues are
//!   set-associative, eight to a set (CAKE): a flow whose bucket another
//!   holds takes a free queue of its set, so a ping hashed onto a bulk
//!   flow's bucket is not served behind it; only with all eight busy does
//!   a flow share its bucket (counted), until that queue empties, so no
//!   packet overtakes another of its flow (`sets.rs`).
//! - Deficit round robin over a new and an old list (§4.2), in
//!   [`Packet::cost`] bytes: a flow that becomes active is served first,
//!   with one quantum, then joins the old list's tail, so no flow stays new
//!   while it keeps a queue. A sparse flow, one that empties having sent
//!   little (CAKE's sparse set, not RFC 8290), leaves the lists instead and
//!   is new again next time (`lists.rs`, [`FqCodel::sparse_run`]).
//! - Each flow runs the shared CoDel step ([`crate::codel::select`]) with
//!   its own [`codel::Vars`]; sojourn is measured from enqueue; the "≤ 1
//!   MTU" test uses the discipline's total backlog, as Linux does.
//! - Limits: after every enqueue at most `limit_packets` packets and
//!   `memory_limit_bytes` of [`Packet::truesize`] (Linux's `memory_limit`,
//!   tc-fq_codel(8)) are resident; `backlog_bytes` stays wire length. On
//!   overflow the fattest flow loses up to `drop_batch` packets or half its
//!   bytes from its head (§4.1), the newcomer possibly among them.
//! - Memory: flow tables are allocated once; the packet slab grows up to
//!   `limit_packets` and is reused, so the steady state never allocates. A
//!   flow and a packet slot each take one cache line. Enqueue and dequeue
//!   are O(1) (a dequeue visits at most [`MAX_VISITS_PER_DEQUEUE`] flows);
//!   only the overflow path scans the backlog array, once per batch.
//! - With `ack_filter`, an arriving ACK may remove one older redundant pure
//!   ACK of its flow queue ([`crate::ack_filter`], [`DropReason::AckFilter`]).
//! - Host isolation ([`Isolation`]): fair between hosts, then between a
//!   host's flows (`hosts.rs`; docs/host-isolation.md).

use crate::ack_filter;
use crate::codel;
use crate::qdisc::clamp;
use crate::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::fmt;

mod hosts;
mod lists;
mod params;
mod sets;
mod slab;
use hosts::{HostLoad, HOST_BITS, NEVER};
use lists::{FlowList, OnList, Run, SPARSE_SHARE};
pub use params::{Isolation, ParamError, Params, MAX_FLOWS};
use slab::{Slab, NIL};

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

    /// Bytes queued in flow queue `bucket` (for tests and `show`).
    pub fn flow_backlog(&self, bucket: u32) -> u32 {
        self.slots.get(bucket as usize).map_or(0, |s| s.backlog)
    }

    #[inline]
    fn over_limit(&self) -> bool {
        self.queued > self.params.limit_packets || self.queued_mem > self.params.memory_limit_bytes
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
    /// 12.7). The parent charges what
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
