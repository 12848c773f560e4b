//! # Principles
//!
//! WF2Q+ (Bennett & Zhang, "Hierarchical Packet Fair Queueing Algorithms",
//! IEEE/ACM ToN 1997, §IV; the shape of FreeBSD dummynet's `dn_sched_wf2q.c`).
//! Each backlogged class *i* of weight `wᵢ` carries a virtual start `Sᵢ` and
//! finish `Fᵢ = Sᵢ + Lᵢ/wᵢ` of its head packet; the system virtual time `V`
//! advances by `L/W` per packet sent (`W` = sum of weights of backlogged
//! classes, plus idle classes whose `F` is still ahead of `V`, as in dummynet)
//! and jumps to the smallest `S` when nothing is eligible. Among the eligible
//! classes (`S ≤ V`) the smallest `F` is served.
//!
//! Guarantees, for classes continuously backlogged over the measured span:
//! - **Worst-case fairness.** Comparing bytes sent by class *i* with its fluid
//!   (GPS) share `W_total · wᵢ / W` at every packet boundary, the class is never
//!   behind by more than one maximum packet, and never ahead by more than one
//!   maximum packet (WF2Q's eligibility test is what bounds the lead; plain WFQ
//!   can run ahead by many packets). The tests check both with `L_max`.
//! - **No credit for idleness.** A class that becomes backlogged starts at
//!   `S = max(F_old, V)`: the service it did not use while idle is gone.
//!
//! Complexity: three binary heaps (eligible by `F`, waiting by `S`, idle by
//! `F`) give O(log n) per packet. Entries carry a generation so a class that
//! leaves the idle heap early (it got a packet) leaves a stale entry that is
//! skipped when it surfaces; each operation adds at most one entry.
//!
//! Fixed point: tags are `u128` in units of 2⁻³² byte per weight unit; a tag
//! grows by `(cost << 32) / w`, so `u128` cannot wrap in any realistic uptime.
//!
//! Leaves are expected to be work-conserving (FIFO, RED, CoDel): a leaf that
//! holds a packet back stalls its class until the leaf's own wake-up.

use crate::class::{check_weight, ClassIndex};
use crate::class::{resident_from_totals, Counted, Totals};
use crate::qdisc::clamp;
use crate::{ClassId, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub use crate::class::ClassError;

/// Fractional bits of the virtual-time tags.
const TAG_SHIFT: u32 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Empty and not counted in `W`.
    Idle,
    /// Backlogged, `S ≤ V`, in the eligible heap.
    Eligible,
    /// Backlogged, `S > V`, in the waiting heap.
    Waiting,
    /// Empty but `F > V`: still counted in `W` until `V` reaches `F`.
    Lingering,
}

struct Flow {
    id: ClassId,
    weight: u32,
    start: u128,
    finish: u128,
    state: State,
    /// Bumped on every heap insertion; older heap entries are stale.
    gen: u64,
    leaf: Counted,
}

type Heap = BinaryHeap<Reverse<(u128, usize, u64)>>;

/// Worst-case fair weighted fair queueing over weighted classes.
pub struct Wf2q {
    flows: Vec<Flow>,
    index: ClassIndex,
    eligible: Heap,
    waiting: Heap,
    lingering: Heap,
    /// System virtual time.
    vtime: u128,
    /// Sum of weights of backlogged and lingering classes.
    weight_sum: u64,
    /// Classes in state Eligible or Waiting.
    backlogged: usize,
    totals: Totals,
    last: Instant,
    stalled: Option<Instant>,
}

impl Default for Wf2q {
    fn default() -> Self {
        Wf2q::new()
    }
}

impl Wf2q {
    pub fn new() -> Wf2q {
        Wf2q {
            flows: Vec::new(),
            index: ClassIndex::default(),
            eligible: BinaryHeap::new(),
            waiting: BinaryHeap::new(),
            lingering: BinaryHeap::new(),
            vtime: 0,
            weight_sum: 0,
            backlogged: 0,
            totals: Totals::default(),
            last: Instant::ZERO,
            stalled: None,
        }
    }

    /// Adds a class with `weight` in 1..=100 and its leaf queue.
    pub fn add_class(
        &mut self,
        id: ClassId,
        weight: u32,
        leaf: Box<dyn Qdisc>,
    ) -> Result<(), ClassError> {
        self.index.admit(id, weight, self.flows.len())?;
        self.flows.push(Flow {
            id,
            weight,
            start: 0,
            finish: 0,
            state: State::Idle,
            gen: 0,
            leaf: Counted::new(leaf),
        });
        Ok(())
    }

    /// Packets whose class is unknown go to `id`.
    pub fn set_default(&mut self, id: ClassId) -> Result<(), ClassError> {
        self.index.set_default(id)
    }

    /// Changes a class's weight; tags already computed keep the old one, the
    /// next packet's tags use the new one.
    pub fn set_weight(&mut self, id: ClassId, weight: u32) -> Result<(), ClassError> {
        check_weight(weight)?;
        let i = self.index.slot(id)?;
        let f = &mut self.flows[i];
        if f.state != State::Idle {
            self.weight_sum = self.weight_sum - f.weight as u64 + weight as u64;
        }
        f.weight = weight;
        Ok(())
    }

    pub fn weight(&self, id: ClassId) -> Option<u32> {
        self.index.slot(id).ok().map(|i| self.flows[i].weight)
    }

    pub fn leaf(&self, id: ClassId) -> Option<&dyn Qdisc> {
        self.index
            .slot(id)
            .ok()
            .map(|i| self.flows[i].leaf.q.as_ref())
    }

    /// Packets refused for want of a class (no default set).
    pub fn unclassified(&self) -> &QueueStats {
        self.index.refused()
    }

    fn tag_len(cost: u32, weight: u64) -> u128 {
        ((cost as u128) << TAG_SHIFT) / weight.max(1) as u128
    }

    /// Puts a backlogged flow in the eligible or waiting heap by its tags.
    fn schedule(&mut self, i: usize) {
        let f = &mut self.flows[i];
        f.gen += 1;
        if f.start <= self.vtime {
            f.state = State::Eligible;
            self.eligible.push(Reverse((f.finish, i, f.gen)));
        } else {
            f.state = State::Waiting;
            self.waiting.push(Reverse((f.start, i, f.gen)));
        }
    }

    /// Head cost of flow `i`'s leaf (peeking may let an AQM drop).
    fn head_cost(&mut self, i: usize, now: Instant, drops: &mut Drops) -> Option<u32> {
        let (c, d) = self.flows[i].leaf.peek_len(now, drops);
        self.totals.apply(d);
        c
    }

    /// Flow `i` got its first packet: tag it and join the schedule.
    fn activate(&mut self, i: usize, cost: u32) {
        let f = &mut self.flows[i];
        if f.state != State::Lingering {
            self.weight_sum += f.weight as u64;
        }
        f.start = f.finish.max(self.vtime);
        f.finish = f.start + Self::tag_len(cost, f.weight as u64);
        self.backlogged += 1;
        self.schedule(i);
    }

    /// Flow `i` emptied: linger in `W` until `V` passes its finish tag.
    fn deactivate(&mut self, i: usize) {
        self.backlogged = self.backlogged.saturating_sub(1);
        let f = &mut self.flows[i];
        f.gen += 1;
        if f.finish > self.vtime {
            f.state = State::Lingering;
            self.lingering.push(Reverse((f.finish, i, f.gen)));
        } else {
            f.state = State::Idle;
            self.weight_sum = self.weight_sum.saturating_sub(f.weight as u64);
        }
        if self.backlogged == 0 {
            self.drain_lingering(u128::MAX);
        }
    }

    /// Releases lingering flows whose finish tag is ≤ `upto` (all of them when
    /// the system empties: in the fluid system they would all have finished,
    /// so `V` moves to the largest finish tag).
    fn drain_lingering(&mut self, upto: u128) {
        // Bound: each iteration pops one heap entry.
        while let Some(&Reverse((key, i, gen))) = self.lingering.peek() {
            if key > upto {
                break;
            }
            self.lingering.pop();
            let f = &mut self.flows[i];
            if f.gen != gen || f.state != State::Lingering {
                continue; // stale: the flow came back before V reached F
            }
            f.state = State::Idle;
            self.weight_sum = self.weight_sum.saturating_sub(f.weight as u64);
            if upto == u128::MAX {
                self.vtime = self.vtime.max(f.finish);
            }
        }
    }

    /// Moves waiting flows that became eligible; if none is eligible, jumps
    /// `V` to the smallest start tag first (WF2Q+'s `V = max(V, min S)`).
    fn refresh_eligible(&mut self) {
        self.drop_stale_tops();
        if self.eligible.is_empty() {
            if let Some(&Reverse((s, _, _))) = self.waiting.peek() {
                self.vtime = self.vtime.max(s);
            }
        }
        self.drain_lingering(self.vtime);
        // Bound: each iteration moves one flow between heaps.
        while let Some(&Reverse((s, i, gen))) = self.waiting.peek() {
            if s > self.vtime {
                break;
            }
            self.waiting.pop();
            if self.flows[i].gen == gen && self.flows[i].state == State::Waiting {
                self.schedule(i);
            }
        }
        self.drop_stale_tops();
    }

    fn drop_stale_tops(&mut self) {
        for heap in [&mut self.eligible, &mut self.waiting] {
            // Bound: each iteration pops one stale entry.
            while let Some(&Reverse((_, i, gen))) = heap.peek() {
                if self.flows[i].gen == gen {
                    break;
                }
                heap.pop();
            }
        }
    }
}

impl Qdisc for Wf2q {
    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last, now);
        let Some(i) = self.index.route(pkt.class) else {
            return self.index.refuse(pkt, drops);
        };
        let cost = pkt.cost;
        let was_backlogged = matches!(self.flows[i].state, State::Eligible | State::Waiting);
        let (r, delta) = self.flows[i].leaf.enqueue(pkt, now, drops);
        self.totals.apply(delta);
        if !was_backlogged && !self.flows[i].leaf.q.is_empty() {
            let head = self.head_cost(i, now, drops).unwrap_or(cost);
            if !self.flows[i].leaf.q.is_empty() {
                self.activate(i, head);
            }
        }
        r
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last, now);
        self.stalled = None;
        // Bound: each iteration either returns or retires one flow that the
        // leaf reports empty (AQM dropped its last packets), so at most
        // `flows + 1` iterations.
        for _ in 0..=self.flows.len() {
            if self.backlogged == 0 {
                return None;
            }
            self.refresh_eligible();
            let Some(Reverse((_, i, _))) = self.eligible.pop() else {
                return None; // unreachable while backlogged > 0; be safe
            };
            let (pkt, delta) = self.flows[i].leaf.dequeue(now, drops);
            self.totals.apply(delta);
            let Some(pkt) = pkt else {
                if self.flows[i].leaf.q.is_empty() {
                    self.deactivate(i);
                    continue;
                }
                self.flows[i].leaf.note_stall(&mut self.stalled, self.last);
                self.schedule(i);
                return None;
            };
            self.vtime += Self::tag_len(pkt.cost, self.weight_sum);
            match self.head_cost(i, now, drops) {
                Some(next) => {
                    let f = &mut self.flows[i];
                    f.start = f.finish;
                    f.finish = f.start + Self::tag_len(next, f.weight as u64);
                    self.schedule(i);
                }
                None if self.flows[i].leaf.q.is_empty() => self.deactivate(i),
                None => {
                    self.flows[i].leaf.note_stall(&mut self.stalled, self.last);
                    self.schedule(i);
                }
            }
            return Some(pkt);
        }
        None
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = clamp(&mut self.last, now);
        // Bound: as in dequeue, one retirement per iteration.
        for _ in 0..=self.flows.len() {
            if self.backlogged == 0 {
                return None;
            }
            self.refresh_eligible();
            let &Reverse((_, i, _)) = self.eligible.peek()?;
            match self.head_cost(i, now, drops) {
                Some(c) => return Some(c),
                None if self.flows[i].leaf.q.is_empty() => {
                    self.eligible.pop();
                    self.deactivate(i);
                }
                None => return None,
            }
        }
        None
    }

    resident_from_totals!(stalled);

    fn purge(&mut self, drops: &mut Drops) {
        for f in &mut self.flows {
            self.totals.apply(f.leaf.purge(drops));
            // The fluid system would have finished them all.
            self.vtime = self.vtime.max(f.finish);
            f.state = State::Idle;
            f.gen += 1;
        }
        self.eligible.clear();
        self.waiting.clear();
        self.lingering.clear();
        self.weight_sum = 0;
        self.backlogged = 0;
        self.stalled = None;
    }

    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        for fl in &self.flows {
            f(fl.id, &fl.leaf.stats);
        }
    }
}

#[cfg(test)]
mod tests;
