//! # Principles
//!
//! A dummynet pipe (Rizzo, "Dummynet: a simple approach to the evaluation of
//! network protocols", CCR 1997; FreeBSD `ip_dn_io.c`): a link with a rate, a
//! propagation delay and a random loss rate, in front of which a scheduler
//! (FIFO, DRR, WF2Q+, FQ-CoDel — any [`Qdisc`]) decides the order. The link is
//! kept apart from the policy, as in dummynet.
//!
//! Path of a packet: random loss on arrival (dummynet's `plr` is applied on
//! input, so a lost packet never takes a queue slot) → queue limit → the
//! scheduler → serialisation at `rate`, one packet at a time → the delay line
//! for `delay` → out. A packet is dequeueable at its serialisation end +
//! `delay`, exactly.
//!
//! Guarantees:
//! - **Rate.** Serialisations never overlap: packet *k* starts at
//!   `max(end of k−1, its arrival)` and lasts `rate.tx_time(cost)` (rounded up
//!   to the ns, so the pipe never exceeds its rate). After the link has been
//!   idle, up to `burst_bytes` (earned at `rate` while idle, dummynet's
//!   `burst`) pass without serialisation time.
//! - **Delay.** Exit time = serialisation end + `delay`; the delay line is FIFO
//!   (ends are non-decreasing), so the scheduler's order is kept.
//! - **Loss.** Each arrival is lost with probability `loss_ppm / 10⁶`, drawn
//!   from a SplitMix64 stream seeded by `seed`: the same seed and the same
//!   arrivals give the same losses.
//! - **Lazy but exact.** Serialisation is computed when we are called
//!   (every enqueue first catches up to `now`), so results do not depend on
//!   how often the caller polls.
//!
//! Counting: packets in the delay line are resident (`len`, `backlog_bytes`).
//! The scheduler is assumed work-conserving; if it holds packets back, the
//! link idles until the scheduler's own wake-up.
//!
//! Ingress mode ([`crate::ingress`], off unless [`Pipe::set_ingress`]): a
//! dropped packet occupies the link as if it had been sent.

use crate::ingress::{max_debt_bytes, Ingress, FAILSAFE_DEN, FAILSAFE_NUM};
use crate::qdisc::{clamp, HOLD_PASS_BYTES};
use crate::{ClassId, DropReason, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant, Rate};
use std::collections::VecDeque;

/// Parameters of a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Link rate; `Rate(0)` = unlimited (no serialisation time).
    pub rate: Rate,
    /// Bytes that may pass at full speed after the link was idle.
    pub burst_bytes: u32,
    /// Propagation delay added after serialisation.
    pub delay: Duration,
    /// Random loss on arrival, in parts per million (0..=1 000 000).
    pub loss_ppm: u32,
    /// Seed of the loss stream.
    pub seed: u64,
    /// Packets waiting for the link (in the scheduler); 0 = only the
    /// scheduler's own limits apply. The delay line is not limited (it holds
    /// at most `rate × delay` worth of bytes).
    pub queue_limit_packets: u32,
}

impl Default for Params {
    /// dummynet's defaults: unlimited rate, no delay, no loss, 50 slots.
    fn default() -> Params {
        Params {
            rate: Rate::ZERO,
            burst_bytes: 0,
            delay: Duration::ZERO,
            loss_ppm: 0,
            seed: 0,
            queue_limit_packets: 50,
        }
    }
}

use sluice_time::random::SplitMix64;
pub use sluice_time::random::PPM;

/// A dummynet-style link: scheduler → serialiser → delay line.
pub struct Pipe {
    params: Params,
    sched: Box<dyn Qdisc>,
    /// End of the last serialisation.
    link_free_at: Instant,
    /// Burst bytes available (earned while idle, up to `burst_bytes`).
    burst_credit_bytes: u64,
    /// Serialised packets with their exit time, in exit order.
    line: VecDeque<(Instant, Packet)>,
    line_bytes: u64,
    rng: SplitMix64,
    last: Instant,
    stats: QueueStats,
    /// Which drops occupy the link (ingress mode) and the counts.
    ingress: Ingress,
    /// Ingress mode's failsafe clock (see the module's principles).
    failsafe_free_at: Instant,
    /// The end of a hold ([`Qdisc::hold`]): until then only packets of at
    /// most [`HOLD_PASS_BYTES`] start, and each moves it by its time.
    held_until: Instant,
    /// The scheduler's head was too large to pass the hold at the last
    /// look: the link waits for `held_until`.
    hold_blocked: bool,
}

impl Pipe {
    pub fn new(params: Params, sched: Box<dyn Qdisc>) -> Pipe {
        Pipe {
            params,
            sched,
            link_free_at: Instant::ZERO,
            burst_credit_bytes: params.burst_bytes as u64,
            line: VecDeque::new(),
            line_bytes: 0,
            rng: SplitMix64::new(params.seed),
            last: Instant::ZERO,
            stats: QueueStats::default(),
            ingress: Ingress::off(),
            failsafe_free_at: Instant::ZERO,
            held_until: Instant::ZERO,
            hold_blocked: false,
        }
    }

    /// Puts the link in ingress mode for the drops `ingress` names (the
    /// engine names every class of the pipe); [`Ingress::off`] restores it.
    ///
    /// A packet the scheduler drops (its AQM at dequeue, its overflow at
    /// enqueue) or the pipe refuses for a full queue then occupies the link
    /// for its serialisation time as if it had been sent: the link's clock
    /// moves on by `rate.tx_time(cost)` after the decision (never more than
    /// the debt bound ahead of it), so the next packet starts that much
    /// later. A failsafe clock, moved on by 3/2 of each sent packet's time
    /// and nothing for drops, may start the next packet too, so the output
    /// never falls below 2/3 of the rate. Serialisations still never
    /// overlap: both clocks are at or after the end of the last one.
    pub fn set_ingress(&mut self, ingress: Ingress) {
        self.ingress = ingress;
        self.failsafe_free_at = self.link_free_at;
    }

    /// When the link may start its next serialisation: its clock, or in
    /// ingress mode the earlier of it and the failsafe clock.
    fn next_start(&self) -> Instant {
        if self.ingress.is_on() {
            self.link_free_at.min(self.failsafe_free_at)
        } else {
            self.link_free_at
        }
    }

    /// Ingress mode: the charged drops among `drops[start..]`, decided at
    /// `at`, occupy the link after whatever it is busy with, up to the
    /// debt bound past `at`.
    fn charge_link(&mut self, at: Instant, drops: &Drops, start: usize) {
        let bytes = self.ingress.charge(drops.get(start..).unwrap_or(&[]));
        let rate = self.params.rate;
        if bytes == 0 || rate.as_bps() == 0 {
            return;
        }
        let want = self.link_free_at.max(at) + rate.tx_time(bytes);
        let cap = at + rate.tx_time(max_debt_bytes(rate));
        let new = want.min(cap).max(self.link_free_at);
        if want > new {
            self.ingress.forgive(rate.bytes_in(want - new));
        }
        self.link_free_at = new;
    }

    pub fn params(&self) -> Params {
        self.params
    }

    /// Changes the link. Packets already serialised keep their exit times; a
    /// new seed restarts the loss stream.
    pub fn set_params(&mut self, params: Params) {
        if params.seed != self.params.seed {
            self.rng = SplitMix64::new(params.seed);
        }
        self.burst_credit_bytes = self.burst_credit_bytes.min(params.burst_bytes as u64);
        self.params = params;
    }

    pub fn sched(&self) -> &dyn Qdisc {
        self.sched.as_ref()
    }

    pub fn sched_mut(&mut self) -> &mut dyn Qdisc {
        self.sched.as_mut()
    }

    /// Packets serialised and still in the delay line.
    pub fn in_flight(&self) -> usize {
        self.line.len()
    }

    /// Counts drops the scheduler pushed at `drops[start..]` (all resident).
    fn count_sched_drops(&mut self, drops: &Drops, start: usize) {
        for d in drops.iter().skip(start) {
            self.stats.on_drop_resident(&d.pkt, d.reason);
        }
    }

    /// Serialises every packet whose turn on the link comes at or before
    /// `now`, moving it to the delay line.
    fn advance(&mut self, now: Instant, drops: &mut Drops) {
        // Bound: each iteration moves one packet out of the scheduler, so at
        // most its length (plus one failed attempt).
        self.hold_blocked = false;
        for _ in 0..=self.sched.len() {
            let mut free = self.next_start();
            if free > now || self.sched.is_empty() {
                return;
            }
            if free < self.held_until {
                let start = drops.len();
                let head = self.sched.peek_len(free, drops);
                self.count_sched_drops(drops, start);
                self.charge_link(free, drops, start);
                match head {
                    None => return,
                    Some(cost) if cost <= HOLD_PASS_BYTES => {
                        self.held_until += self.params.rate.tx_time(cost as u64);
                    }
                    Some(_) if self.held_until > now => {
                        self.hold_blocked = true;
                        return;
                    }
                    Some(_) => {
                        // The hold is over: the link starts again at its
                        // end, with nothing earned while silent.
                        free = self.held_until;
                        self.link_free_at = self.link_free_at.max(free);
                        self.burst_credit_bytes = 0;
                    }
                }
            }
            let start_drops = drops.len();
            // Ask the scheduler at the instant the link freed (it clamps to
            // the latest time it has seen, so this is never in its past).
            let pkt = self.sched.dequeue(free, drops);
            self.count_sched_drops(drops, start_drops);
            let Some(pkt) = pkt else {
                self.charge_link(free, drops, start_drops);
                return;
            };
            let start = free.max(pkt.enqueued_at);
            let tx = self.serialisation_time(start, pkt.cost);
            let end = start + tx;
            // Without ingress `start >= link_free_at`, so this is `end`.
            self.link_free_at = self.link_free_at.max(start) + tx;
            if self.ingress.is_on() {
                let fs = Duration(
                    u64::try_from(
                        u128::from(tx.as_nanos()) * u128::from(FAILSAFE_NUM)
                            / u128::from(FAILSAFE_DEN),
                    )
                    .unwrap_or(u64::MAX),
                );
                self.failsafe_free_at = self.failsafe_free_at.max(start) + fs;
                // The AQM dropped them on the way to this packet, which
                // goes now; the link pays for them after it (as CAKE does).
                self.charge_link(free, drops, start_drops);
            }
            self.line_bytes += pkt.len as u64;
            self.line.push_back((end + self.params.delay, pkt));
        }
    }

    /// Time the link is busy with `cost` bytes starting at `start`, after
    /// spending burst credit earned while it was idle.
    fn serialisation_time(&mut self, start: Instant, cost: u32) -> Duration {
        let rate = self.params.rate;
        if rate.as_bps() == 0 {
            return Duration::ZERO;
        }
        let burst = self.params.burst_bytes as u64;
        if burst > 0 {
            let idle = start - self.link_free_at;
            let earned = rate.bytes_in(idle);
            self.burst_credit_bytes = self.burst_credit_bytes.saturating_add(earned).min(burst);
            if self.burst_credit_bytes >= cost as u64 {
                self.burst_credit_bytes -= cost as u64;
                return Duration::ZERO;
            }
        }
        rate.tx_time(cost as u64)
    }
}

impl Qdisc for Pipe {
    fn ingress(&self) -> Option<&Ingress> {
        Some(&self.ingress)
    }

    /// Packets whose turn on the link came before `now` are serialised at
    /// the old rate first (the lazy link catches up), then the rate
    /// changes: the next serialisation uses the new one; packets in the
    /// delay line keep their exit times.
    fn set_rate(&mut self, rate: Rate, now: Instant, drops: &mut Drops) -> bool {
        let now = clamp(&mut self.last, now);
        self.advance(now, drops);
        self.params.rate = rate;
        true
    }

    /// Packets whose turn came before `now` are serialised first; then
    /// the link's clock moves `hold` past the later of its end and `now`.
    fn hold(&mut self, hold: Duration, now: Instant, drops: &mut Drops) -> bool {
        if self.params.rate.as_bps() == 0 {
            return false;
        }
        let now = clamp(&mut self.last, now);
        self.advance(now, drops);
        self.held_until = self.held_until.max(self.link_free_at).max(now) + hold;
        self.burst_credit_bytes = 0;
        self.advance(now, drops);
        true
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = clamp(&mut self.last, now);
        let first = drops.len();
        self.advance(now, drops);
        if self.rng.chance(self.params.loss_ppm) {
            self.stats.push_drop(pkt, DropReason::Loss, drops);
            return Enqueue::Rejected;
        }
        let limit = self.params.queue_limit_packets as usize;
        if limit > 0 && self.sched.len() >= limit {
            let at = drops.len();
            self.stats.push_drop(pkt, DropReason::QueueFull, drops);
            self.charge_link(now, drops, at);
            return Enqueue::Rejected;
        }
        pkt.enqueued_at = now;
        let id = pkt.id;
        self.stats.on_enqueue(&pkt);
        let start = drops.len();
        let r = self.sched.enqueue(pkt, now, drops);
        for d in drops.iter().skip(start) {
            if d.pkt.id == id && r == Enqueue::Rejected {
                // Refused at the door: undo the count-in.
                let len = d.pkt.len as u64;
                self.stats.enq_packets -= 1;
                self.stats.enq_bytes -= len;
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(len);
                self.stats.on_drop(&d.pkt, d.reason);
            } else {
                self.stats.on_drop_resident(&d.pkt, d.reason);
            }
        }
        self.charge_link(now, drops, start);
        self.advance(now, drops);
        match r {
            Enqueue::Queued if drops.len() > first => Enqueue::QueuedDroppedOthers,
            r => r,
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = clamp(&mut self.last, now);
        self.advance(now, drops);
        match self.line.front() {
            Some((exit, _)) if *exit <= now => {}
            _ => return None,
        }
        let (_, pkt) = self.line.pop_front()?;
        self.line_bytes -= pkt.len as u64;
        self.stats.on_dequeue(&pkt, now);
        Some(pkt)
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = clamp(&mut self.last, now);
        self.advance(now, drops);
        match self.line.front() {
            Some((_, p)) => Some(p.cost),
            None => {
                let start = drops.len();
                let c = self.sched.peek_len(now, drops);
                self.count_sched_drops(drops, start);
                self.charge_link(now, drops, start);
                c
            }
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.is_empty() {
            return None;
        }
        let line = self.line.front().map(|(exit, _)| *exit);
        let link = if self.sched.is_empty() {
            None
        } else if self.next_start() > self.last {
            Some(self.next_start())
        } else if self.hold_blocked {
            Some(self.held_until)
        } else {
            // The link is free: only a scheduler holding packets back waits.
            self.sched.next_wakeup().or(Some(self.last))
        };
        let w = match (line, link) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        if w <= self.last && line.is_some_and(|l| l <= self.last) {
            None // a packet is ready: no need to wait
        } else {
            Some(w)
        }
    }

    fn len(&self) -> usize {
        self.sched.len() + self.line.len()
    }

    fn backlog_bytes(&self) -> u64 {
        self.sched.backlog_bytes() + self.line_bytes
    }

    fn purge(&mut self, drops: &mut Drops) {
        let start = drops.len();
        self.sched.purge(drops);
        self.count_sched_drops(drops, start);
        for (_, pkt) in self.line.drain(..) {
            self.stats.push_drop_resident(pkt, DropReason::Purge, drops);
        }
        self.line_bytes = 0;
    }

    /// The pipe as a whole as [`ClassId::ROOT`], then the scheduler's classes
    /// (a single-queue scheduler's own ROOT entry is the pipe's and is not
    /// repeated).
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats);
        self.sched.visit_stats(&mut |id, s| {
            if id != ClassId::ROOT {
                f(id, s)
            }
        });
    }
}

#[cfg(test)]
mod tests;
