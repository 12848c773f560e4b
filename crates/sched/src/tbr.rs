//! # Principles
//!
//! The token-bucket regulator of ALTQ (`altq_subr.c`, `tbr_dequeue`): the root
//! of every interface tree, pacing whatever discipline it wraps (PRIQ, HFSC,
//! CBQ, …) to the interface bandwidth, so that the queue builds here, where we
//! choose who goes first, and not in the modem.
//!
//! Guarantees:
//! - **Long-run rate.** Tokens are kept exactly, in units of 1/(8·10⁹) byte
//!   (one bit·ns per bit/s of rate), so `rate × Δt` adds without rounding and no
//!   error accumulates: over any busy interval the bytes sent (by `pkt.cost`) are
//!   at most `rate × Δt + bucket` and, for a wrapped queue that never runs dry,
//!   at least `rate × Δt − max cost`.
//! - **Burst.** A packet leaves only when the bucket holds at least its cost
//!   (capped at the bucket size, so a packet larger than the bucket still
//!   leaves, from a full bucket, and leaves a debt). After idle, at most
//!   `bucket_bytes` (plus, with an oversized packet, that one packet) leave
//!   back-to-back.
//! - **Wake-up.** When throttled, `next_wakeup` is the exact nanosecond (rounded
//!   up) at which the bucket will hold the head packet's cost.
//!
//! Invariants: `tokens ≤ bucket`; `last` is the latest `now` seen (earlier
//! times are clamped to it). `Rate(0)` means "no regulator": packets pass as
//! the inner discipline releases them.
//!
//! Differences from ALTQ: ALTQ sends while the token count is positive and
//! lets it go negative by one packet; we check the head's cost (via
//! `peek_len`) so the burst bound is the bucket itself, as the brief asks.
//!
//! Ingress mode ([`crate::ingress`], off unless [`Tbr::set_ingress`]): drops
//! take their cost out of the bucket as a send would.

use crate::ingress::{max_debt_bytes, Ingress, FAILSAFE_DEN, FAILSAFE_NUM};
use crate::qdisc::HOLD_PASS_BYTES;
use crate::{ClassId, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Instant, Rate};

/// One byte in token units: tokens accrue `rate_bps` units per ns.
const UNITS_PER_BYTE: i128 = 8 * 1_000_000_000;

/// pf's assumed interface MTU when it sizes the bucket (`getifmtu`).
pub const DEFAULT_MTU_BYTES: u32 = 1500;

/// Parameters of the regulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The interface bandwidth; `Rate(0)` disables regulation.
    pub rate: Rate,
    /// Bucket depth: the largest back-to-back burst after idle.
    pub bucket_bytes: u32,
}

impl Params {
    /// pf's `tbrsize` heuristic (pfctl `eval_pfaltq`): a few MTUs, more at
    /// higher rates so that a coarse timer can still fill the link.
    pub fn for_rate(rate: Rate) -> Params {
        Params::for_rate_mtu(rate, DEFAULT_MTU_BYTES)
    }

    /// As [`Params::for_rate`] with the interface MTU given.
    pub fn for_rate_mtu(rate: Rate, mtu_bytes: u32) -> Params {
        let bps = rate.as_bps();
        let mtus: u32 = if bps <= 1_000_000 {
            1
        } else if bps <= 10_000_000 {
            4
        } else if bps <= 200_000_000 {
            8
        } else if bps <= 2_500_000_000 {
            24
        } else {
            128
        };
        Params {
            rate,
            bucket_bytes: mtus.saturating_mul(mtu_bytes.max(1)),
        }
    }
}

/// The token-bucket regulator wrapping an interface's discipline.
pub struct Tbr {
    params: Params,
    inner: Box<dyn Qdisc>,
    /// Token units (see [`UNITS_PER_BYTE`]); may be negative after a packet
    /// larger than the bucket.
    tokens: i128,
    bucket: i128,
    /// Latest `now` seen; tokens are up to date as of this time.
    last: Instant,
    /// Cost of the inner head as last peeked, while it is known to be the
    /// head (cleared by enqueue, which may put a new packet in front).
    head_cost: Option<u32>,
    /// Times a dequeue was held back for tokens.
    throttles: u64,
    /// Which drops are charged (ingress mode) and the counts.
    ingress: Ingress,
    /// The failsafe bucket of ingress mode, in token units: charged
    /// `FAILSAFE_NUM/FAILSAFE_DEN` of each send, nothing for drops.
    failsafe: i128,
    /// The debt a hold left, while it is not paid: packets of at most
    /// [`HOLD_PASS_BYTES`] may spend what is earned above it.
    hold_floor: Option<i128>,
}

impl Tbr {
    pub fn new(params: Params, inner: Box<dyn Qdisc>) -> Tbr {
        let bucket = params.bucket_bytes.max(1) as i128 * UNITS_PER_BYTE;
        Tbr {
            params,
            inner,
            tokens: bucket,
            bucket,
            last: Instant::ZERO,
            head_cost: None,
            throttles: 0,
            ingress: Ingress::off(),
            failsafe: bucket,
            hold_floor: None,
        }
    }

    /// Puts the regulator in ingress mode for the classes `ingress` names
    /// (see [`crate::ingress`]); [`Ingress::off`] restores egress shaping.
    ///
    /// In ingress mode the drops of the chosen classes, wherever in the tree
    /// they happen (at enqueue or during the AQM's dequeue), take their cost
    /// out of the bucket as a send would, down to a debt of
    /// [`crate::ingress::MAX_DEBT`] at the rate (at least four full-size
    /// frames); a second bucket charged 3/2 of every send and nothing for drops
    /// may release the head too (the failsafe), so the output stays at or above
    /// 2/3 of the rate. With ingress off, or on without drops, the failsafe
    /// bucket never holds more than the main one and nothing changes.
    pub fn set_ingress(&mut self, ingress: Ingress) {
        self.ingress = ingress;
        self.failsafe = self.tokens;
    }

    pub fn params(&self) -> Params {
        self.params
    }

    /// Changes rate and bucket; tokens are kept (capped at the new bucket) so
    /// a reconfiguration does not hand out a fresh burst.
    pub fn set_params(&mut self, params: Params, now: Instant) {
        self.refill(now);
        self.params = params;
        self.bucket = params.bucket_bytes.max(1) as i128 * UNITS_PER_BYTE;
        self.tokens = self.tokens.min(self.bucket);
        self.failsafe = self.failsafe.min(self.bucket);
    }

    pub fn inner(&self) -> &dyn Qdisc {
        self.inner.as_ref()
    }

    pub fn inner_mut(&mut self) -> &mut dyn Qdisc {
        self.inner.as_mut()
    }

    /// Times a dequeue found the bucket short of the head packet's cost.
    pub fn throttles(&self) -> u64 {
        self.throttles
    }

    /// Current tokens in whole bytes (rounded towards zero), for `show`.
    pub fn tokens_bytes(&self) -> i64 {
        i64::try_from(self.tokens / UNITS_PER_BYTE).unwrap_or(0)
    }

    fn unlimited(&self) -> bool {
        self.params.rate.as_bps() == 0
    }

    /// Clamps `now` and adds the tokens earned since the last call.
    fn refill(&mut self, now: Instant) -> Instant {
        if now > self.last {
            let dt_ns = (now - self.last).as_nanos() as i128;
            let earned = dt_ns.saturating_mul(self.params.rate.as_bps() as i128);
            self.tokens = self.tokens.saturating_add(earned).min(self.bucket);
            if self.ingress.is_on() {
                self.failsafe = self.failsafe.saturating_add(earned).min(self.bucket);
            }
            self.last = now;
        }
        if self.tokens >= 0 {
            self.hold_floor = None;
        }
        self.last
    }

    /// Ingress mode: takes the cost of the charged drops among
    /// `drops[start..]` out of the bucket, no deeper than the debt bound
    /// ([`max_debt_bytes`]; a debt already deeper than that stays).
    fn charge_drops(&mut self, drops: &Drops, start: usize) {
        let bytes = self.ingress.charge(drops.get(start..).unwrap_or(&[]));
        if bytes == 0 {
            return;
        }
        let want = bytes as i128 * UNITS_PER_BYTE;
        let floor = -(max_debt_bytes(self.params.rate) as i128 * UNITS_PER_BYTE);
        let after = self.tokens.saturating_sub(want).max(floor).min(self.tokens);
        let forgiven = want - (self.tokens - after);
        self.tokens = after;
        if forgiven > 0 {
            self.ingress
                .forgive(u64::try_from(forgiven / UNITS_PER_BYTE).unwrap_or(u64::MAX));
        }
    }

    /// Whether a packet needing `need` units may leave now: the bucket
    /// holds it, or (ingress mode) the failsafe bucket does.
    fn may_send(&self, need: i128) -> bool {
        self.tokens >= need || (self.ingress.is_on() && self.failsafe >= need)
    }

    /// Tokens a packet of `cost` needs: its cost, or a full bucket when it is
    /// larger than the bucket (otherwise it could never leave). During a
    /// hold a small one needs its cost above the hold's debt: it goes at
    /// the rate, and the hold ends its time later.
    fn need(&self, cost: u32) -> i128 {
        let need = (cost as i128 * UNITS_PER_BYTE).min(self.bucket);
        match self.hold_floor {
            Some(floor) if cost <= HOLD_PASS_BYTES => need.min(floor.saturating_add(need)),
            _ => need,
        }
    }

    /// When the bucket (or, in ingress mode, the failsafe bucket) will
    /// hold `need` units, rounded up to the ns.
    fn time_for(&self, need: i128) -> Instant {
        let have = if self.ingress.is_on() {
            self.tokens.max(self.failsafe)
        } else {
            self.tokens
        };
        let short = need - have;
        if short <= 0 {
            return self.last;
        }
        let rate = self.params.rate.as_bps() as i128;
        if rate == 0 {
            return self.last;
        }
        let ns = (short + rate - 1) / rate;
        self.last + sluice_time::Duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

impl Qdisc for Tbr {
    fn ingress(&self) -> Option<&Ingress> {
        Some(&self.ingress)
    }

    fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        let now = self.refill(now);
        // A new arrival may become the head (PRIQ, HFSC): forget the peeked cost.
        self.head_cost = None;
        let start = drops.len();
        let r = self.inner.enqueue(pkt, now, drops);
        self.charge_drops(drops, start);
        r
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        let now = self.refill(now);
        if self.unlimited() {
            self.head_cost = None;
            let start = drops.len();
            let pkt = self.inner.dequeue(now, drops);
            self.charge_drops(drops, start);
            return pkt;
        }
        let start = drops.len();
        let peeked = self.inner.peek_len(now, drops);
        self.charge_drops(drops, start);
        let Some(cost) = peeked else {
            self.head_cost = None;
            return None;
        };
        if !self.may_send(self.need(cost)) {
            self.head_cost = Some(cost);
            self.throttles += 1;
            return None;
        }
        self.head_cost = None;
        let start = drops.len();
        let pkt = self.inner.dequeue(now, drops);
        self.charge_drops(drops, start);
        let pkt = pkt?;
        // Charge what actually left (peek holds the packet, so it is the same
        // one; charging `pkt.cost` keeps the rate exact even if it is not).
        let units = pkt.cost as i128 * UNITS_PER_BYTE;
        self.tokens -= units;
        if self.ingress.is_on() {
            self.failsafe -= units * FAILSAFE_NUM as i128 / FAILSAFE_DEN as i128;
        }
        Some(pkt)
    }

    fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        let now = self.refill(now);
        let start = drops.len();
        let c = self.inner.peek_len(now, drops);
        self.charge_drops(drops, start);
        c
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.inner.is_empty() {
            return None;
        }
        if self.unlimited() {
            return self.inner.next_wakeup();
        }
        // Unknown head (something arrived since the last peek): the earliest
        // possible time is when one byte's worth is there; waking early only
        // costs a dequeue that peeks and computes the exact time.
        let need = self.need(self.head_cost.unwrap_or(1));
        if !self.may_send(need) {
            Some(self.time_for(need))
        } else {
            self.inner.next_wakeup()
        }
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn backlog_bytes(&self) -> u64 {
        self.inner.backlog_bytes()
    }

    fn purge(&mut self, drops: &mut Drops) {
        self.head_cost = None;
        self.inner.purge(drops);
    }

    /// The regulator has no queue of its own: the inner tree's classes.
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        self.inner.visit_stats(f);
    }

    /// Tokens earned up to `now` were earned at the old rate; the bucket
    /// keeps its size (a rate change is not a reconfiguration of the
    /// burst), and the queue is untouched.
    fn set_rate(&mut self, rate: Rate, now: Instant, _drops: &mut Drops) -> bool {
        let params = Params {
            rate,
            ..self.params
        };
        self.set_params(params, now);
        true
    }

    /// A debt of `hold` at the rate, from an empty bucket: the next packet
    /// may leave `hold` later than it could have from an empty one (a
    /// small one: its own time after `now`).
    fn hold(&mut self, hold: sluice_time::Duration, now: Instant, _drops: &mut Drops) -> bool {
        if self.unlimited() {
            return false;
        }
        self.refill(now);
        let owed = (hold.as_nanos() as i128).saturating_mul(self.params.rate.as_bps() as i128);
        self.tokens = self.tokens.min(0).saturating_sub(owed);
        self.failsafe = self.failsafe.min(0).saturating_sub(owed);
        self.hold_floor = Some(self.tokens);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fifo_leaf;
    use crate::testing::{check_random, serve_at_wakeups, OpSpace};
    use sluice_time::Duration;

    fn pkt(id: u64, len: u32) -> Packet {
        Packet::synthetic(id, len, 0, ClassId::ROOT)
    }

    /// A regulator of `rate` and `bucket_bytes` over a FIFO of `limit` packets.
    fn tbr(rate: Rate, bucket_bytes: u32, limit: usize) -> Tbr {
        Tbr::new(Params { rate, bucket_bytes }, fifo_leaf(limit))
    }

    /// Keeps the regulator backlogged from `start` and serves it exactly at
    /// its wake-ups; returns (time of the last send, total bytes sent, packets).
    fn saturate(rate: Rate, start: Instant, n: u64) -> (Instant, u64, u64) {
        let mut t = Tbr::new(Params::for_rate(rate), fifo_leaf(100_000));
        let mut drops = Vec::new();
        let lens = [1500u32, 64, 576, 1200, 40];
        let now = start;
        for i in 0..n {
            t.enqueue(pkt(i, lens[(i % 5) as usize]), now, &mut drops);
        }
        let (mut last, mut bytes, mut sent) = (now, 0u64, 0u64);
        // Each step sends or jumps to a wake-up: 2n + 2 suffice.
        serve_at_wakeups(&mut t, now, 2 * n + 2, &mut drops, |p, at| {
            sent += 1;
            bytes += p.cost as u64;
            last = at;
        });
        assert!(drops.is_empty());
        (last, bytes, sent)
    }

    fn assert_rate_within_0_1_pct(rate: Rate) {
        let n = 20_000;
        let start = Instant(1_000_000_000);
        let (last, bytes, sent) = saturate(rate, start, n);
        assert_eq!(sent, n);
        // A full bucket leaves at `start`; everything after is paced. Never
        // faster than the rate (hard bound), and within 0.1 % of it.
        let bucket = Params::for_rate(rate).bucket_bytes as u64;
        let paced_bytes = bytes - bucket;
        let elapsed = last - start;
        assert!(
            paced_bytes <= rate.bytes_in(elapsed) + 1,
            "faster than {rate}"
        );
        let achieved = paced_bytes as f64 * 8.0 / elapsed.as_secs_f64();
        let err = (achieved - rate.as_bps() as f64).abs() / rate.as_bps() as f64;
        assert!(
            err < 0.001,
            "rate {rate}: achieved {achieved:.1} bit/s, error {err:.5}"
        );
    }

    /// A regulator of `rate` and `bucket_bytes` (over a FIFO of 10 000)
    /// holding `n` packets of 1000 bytes since time zero.
    fn backlogged(rate: Rate, bucket_bytes: u32, n: u64) -> (Tbr, Drops) {
        let mut t = tbr(rate, bucket_bytes, 10_000);
        let mut drops = Vec::new();
        for i in 0..n {
            t.enqueue(pkt(i, 1000), Instant::ZERO, &mut drops);
        }
        (t, drops)
    }

    /// `n` ms after time zero.
    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    /// Serves `t` exactly at its wake-ups from `now` until `until`; returns
    /// the bytes (by cost) sent and the time of the last send.
    fn serve(t: &mut Tbr, now: &mut Instant, until: Instant, drops: &mut Drops) -> (u64, Instant) {
        let (mut bytes, mut last) = (0u64, *now);
        for _ in 0..1_000_000 {
            if *now > until {
                break;
            }
            match t.dequeue(*now, drops) {
                Some(p) => {
                    bytes += p.cost as u64;
                    last = *now;
                }
                None => match t.next_wakeup() {
                    Some(w) => *now = w,
                    None => break,
                },
            }
        }
        (bytes, last)
    }

    #[test]
    fn a_rate_step_with_packets_queued_loses_nothing_and_paces_each_side() {
        // 1000 packets of 1000 bytes wait; 8 Mbit/s (1 ms a packet) for
        // 200 ms, then 2 Mbit/s (4 ms a packet) for 400 ms, then 16 Mbit/s.
        let (mut t, mut drops) = backlogged(Rate::mbps(8), 1000, 1000);
        let mut now = Instant::ZERO;
        let (b1, _) = serve(&mut t, &mut now, ms(200) - Duration(1), &mut drops);
        assert!(t.set_rate(Rate::mbps(2), ms(200), &mut drops));
        now = now.max(ms(200));
        let (b2, _) = serve(&mut t, &mut now, ms(600) - Duration(1), &mut drops);
        assert!(t.set_rate(Rate::mbps(16), ms(600), &mut drops));
        now = now.max(ms(600));
        let (b3, last) = serve(&mut t, &mut now, ms(10_000), &mut drops);
        // Each phase within one packet (plus the bucket at the start) of
        // rate × time.
        assert!((200_000..=201_000).contains(&b1), "8M phase: {b1}");
        assert!((99_000..=101_000).contains(&b2), "2M phase: {b2}");
        // The rest (1000 - 300 packets) at 16 Mbit/s: 0.5 ms each.
        assert_eq!(b1 + b2 + b3, 1_000_000, "nothing lost");
        let rest = last - ms(600);
        let want = Duration::from_micros(500 * (1_000_000 - b1 - b2) / 1000);
        assert!(
            rest.as_nanos().abs_diff(want.as_nanos()) <= 1_000_000,
            "16M phase took {rest:?}, want {want:?}"
        );
        assert!(drops.is_empty());
        assert!(t.is_empty());
        assert_eq!(t.params().rate, Rate::mbps(16));
        assert_eq!(t.params().bucket_bytes, 1000, "bucket kept");
    }

    #[test]
    fn a_hold_sends_nothing_for_its_length_then_the_rate_goes_on() {
        // 8 Mbit/s, 1000-byte packets (1 ms each), a full bucket of 4000 B.
        // A hold of 50 ms at 100 ms: the bucket's credit is spent with it,
        // nothing leaves before 150 ms + one packet's time, and the rate
        // after is the rate; nothing is lost.
        let (mut t, mut drops) = backlogged(Rate::mbps(8), 4000, 500);
        let mut now = Instant::ZERO;
        let (b1, _) = serve(&mut t, &mut now, ms(100) - Duration(1), &mut drops);
        assert!(t.hold(Duration::from_millis(50), ms(100), &mut drops));
        assert!(t.dequeue(ms(150), &mut drops).is_none(), "held");
        assert_eq!(t.next_wakeup(), Some(ms(151)));
        now = ms(151);
        let (b2, _) = serve(&mut t, &mut now, ms(251) - Duration(1), &mut drops);
        assert!((103_000..=104_000).contains(&b1), "before: {b1}");
        assert!((99_000..=101_000).contains(&b2), "after: {b2}");
        assert!(drops.is_empty());
        assert_eq!(t.params().rate, Rate::mbps(8), "the rate is unchanged");
        // A regulator without a rate has nothing to hold.
        let mut open = tbr(Rate::ZERO, 1000, 10);
        assert!(!open.hold(Duration::from_millis(50), ms(0), &mut drops));
    }

    #[test]
    fn a_hold_lets_small_packets_by_and_ends_their_time_later() {
        // 8 Mbit/s, a hold of 30 ms at 0 (from a full bucket: its credit is
        // spent). Ten ACK-sized packets (100 B) at 5 ms spend what was
        // earned since the hold began and leave at once; a full-sized one
        // waits until the hold's debt, the small ones' 1000 B and its own
        // are earned: 30 + 1 + 1 ms.
        let mut t = tbr(Rate::mbps(8), 4000, 100);
        let mut drops = Vec::new();
        assert!(t.hold(Duration::from_millis(30), ms(0), &mut drops));
        for i in 0..10 {
            t.enqueue(pkt(i, 100), ms(5), &mut drops);
        }
        for i in 0..10 {
            assert_eq!(t.dequeue(ms(5), &mut drops).map(|p| p.id), Some(i));
        }
        t.enqueue(pkt(10, 1000), ms(6), &mut drops);
        assert!(t.dequeue(ms(6), &mut drops).is_none(), "held");
        assert_eq!(t.next_wakeup(), Some(ms(32)));
        assert!(t.dequeue(ms(32) - Duration(1), &mut drops).is_none());
        assert_eq!(t.dequeue(ms(32), &mut drops).map(|p| p.id), Some(10));
        // Once the debt is paid a small packet needs its cost, as before.
        t.enqueue(pkt(11, 100), ms(32), &mut drops);
        assert!(t.dequeue(ms(32), &mut drops).is_none());
        assert!(drops.is_empty());
    }

    #[test]
    fn rate_accuracy_128k() {
        assert_rate_within_0_1_pct(Rate::kbps(128));
    }

    #[test]
    fn rate_accuracy_10m() {
        assert_rate_within_0_1_pct(Rate::mbps(10));
    }

    #[test]
    fn rate_accuracy_1g() {
        assert_rate_within_0_1_pct(Rate::gbps(1));
    }

    #[test]
    fn burst_after_idle_is_bounded_by_bucket() {
        let mut t = tbr(Rate::mbps(10), 6000, 1000);
        let mut drops = Vec::new();
        let now = Instant(5_000_000_000);
        for i in 0..100 {
            t.enqueue(pkt(i, 1000), now, &mut drops);
        }
        let mut burst = 0u64;
        while let Some(p) = t.dequeue(now, &mut drops) {
            burst += p.cost as u64;
        }
        assert_eq!(
            burst, 6000,
            "a full 6000-byte bucket sends exactly six 1000-byte packets"
        );
        // The bucket is empty now; exactly one packet's worth of time later
        // (1000 B at 10 Mbit/s = 800 us) one more may leave, not before.
        let w = t.next_wakeup().unwrap();
        assert_eq!(w, now + Duration::from_micros(800));
        assert!(t.dequeue(w - Duration(1), &mut drops).is_none());
        assert!(t.dequeue(w, &mut drops).is_some());
    }

    #[test]
    fn next_wakeup_is_exact_to_the_nanosecond() {
        // 1 Mbit/s: 1 byte = 8 us. Bucket 100 B, packet 300 B > bucket: it
        // needs a full bucket and leaves a 200 B debt.
        let mut t = tbr(Rate::mbps(1), 100, 10);
        let mut drops = Vec::new();
        let t0 = Instant(1_000);
        t.enqueue(pkt(1, 300), t0, &mut drops);
        t.enqueue(pkt(2, 50), t0, &mut drops);
        assert_eq!(t.dequeue(t0, &mut drops).map(|p| p.id), Some(1));
        // tokens = 100 - 300 = -200 B; 50 B needs 250 B more = 2000 us.
        assert!(t.dequeue(t0, &mut drops).is_none());
        assert_eq!(t.next_wakeup(), Some(t0 + Duration::from_micros(2000)));
        assert!(t
            .dequeue(t0 + Duration::from_micros(2000) - Duration(1), &mut drops)
            .is_none());
        assert_eq!(
            t.dequeue(t0 + Duration::from_micros(2000), &mut drops)
                .map(|p| p.id),
            Some(2)
        );
        assert_eq!(t.next_wakeup(), None, "empty");
    }

    #[test]
    fn a_packet_larger_than_the_bucket_still_leaves() {
        let mut t = Tbr::new(Params::for_rate(Rate::kbps(128)), fifo_leaf(10));
        assert_eq!(t.params().bucket_bytes, 1500);
        let mut drops = Vec::new();
        t.enqueue(pkt(1, 9000), Instant(0), &mut drops);
        assert!(t.dequeue(Instant(0), &mut drops).is_some());
    }

    #[test]
    fn for_rate_follows_pfs_tbrsize() {
        assert_eq!(Params::for_rate(Rate::kbps(512)).bucket_bytes, 1500);
        assert_eq!(Params::for_rate(Rate::mbps(10)).bucket_bytes, 6000);
        assert_eq!(Params::for_rate(Rate::mbps(100)).bucket_bytes, 12000);
        assert_eq!(Params::for_rate(Rate::gbps(1)).bucket_bytes, 36000);
        assert_eq!(Params::for_rate(Rate::gbps(10)).bucket_bytes, 192000);
    }

    #[test]
    fn zero_rate_is_pass_through() {
        let mut t = Tbr::new(
            Params {
                rate: Rate::ZERO,
                bucket_bytes: 0,
            },
            fifo_leaf(10),
        );
        let mut drops = Vec::new();
        for i in 0..5 {
            t.enqueue(pkt(i, 1500), Instant(0), &mut drops);
        }
        assert_eq!(
            std::iter::from_fn(|| t.dequeue(Instant(0), &mut drops)).count(),
            5
        );
    }

    proptest::proptest! {
        /// Over every window of consecutive sends (not only after idle), the
        /// bytes sent are at most `bucket + rate × window`: the token-bucket
        /// envelope. Random rates, buckets ≥ the largest packet, arrivals.
        #[test]
        fn every_window_fits_the_token_bucket_envelope(
            rate_kbps in 64u64..2_000_000,
            bucket_bytes in 1500u32..20_000,
            gaps_us in proptest::collection::vec(0u64..3_000, 1..150),
            lens in proptest::collection::vec(40u32..1500, 150),
        ) {
            let rate = Rate::kbps(rate_kbps);
            let mut t = tbr(rate, bucket_bytes, 1_000);
            let mut drops = Vec::new();
            let mut now = Instant(1_000_000_000);
            let mut sends: Vec<(Instant, u64)> = Vec::new();
            for (k, gap) in gaps_us.iter().enumerate() {
                // Half the arrivals come back-to-back, so bursts build up.
                now += Duration::from_micros(gap.saturating_sub(1_500));
                t.enqueue(pkt(k as u64, lens[k]), now, &mut drops);
                while let Some(p) = t.dequeue(now, &mut drops) {
                    sends.push((now, p.cost as u64));
                }
            }
            // Drain at the wake-ups (bound: one packet per wake-up).
            for _ in 0..=lens.len() {
                match t.next_wakeup() {
                    Some(w) => {
                        now = w;
                        while let Some(p) = t.dequeue(now, &mut drops) {
                            sends.push((now, p.cost as u64));
                        }
                    }
                    None => break,
                }
            }
            proptest::prop_assert!(t.is_empty());
            proptest::prop_assert_eq!(sends.len(), gaps_us.len());
            for i in 0..sends.len() {
                let mut bytes = 0u64;
                for j in i..sends.len() {
                    bytes += sends[j].1;
                    let window = sends[j].0 - sends[i].0;
                    let allowed = bucket_bytes as u64 + rate.bytes_in(window) + 1;
                    proptest::prop_assert!(
                        bytes <= allowed,
                        "sends {}..={}: {} bytes in {:?}, envelope {}", i, j, bytes, window, allowed
                    );
                }
            }
        }
    }

    #[test]
    fn model_checker_tbr_over_fifo() {
        let space = OpSpace::default().with_max_advance(Duration::from_millis(5));
        let r = check_random(
            || {
                Box::new(Tbr::new(
                    Params {
                        rate: Rate::mbps(2),
                        bucket_bytes: 3000,
                    },
                    fifo_leaf(20),
                ))
            },
            &space,
            64,
            400,
        );
        assert!(
            r.throttled > 0,
            "the regulator must have throttled sometimes"
        );
        assert!(r.dequeued > 0 && r.dropped > 0);
    }
}
