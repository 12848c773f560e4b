//! CoDel's guarantees, proven in virtual time.

use super::*;
use crate::testing::check_aqm;
use crate::Ecn;

const MS: u64 = 1_000_000;

#[test]
fn vars_stay_small() {
    // FQ-CoDel keeps one per flow.
    assert!(std::mem::size_of::<Vars>() <= 32);
}

#[test]
fn inv_sqrt_exact_and_newton_within_bounds() {
    for n in 1..EXACT_COUNTS {
        let want = (1u64 << 32) as f64 / (n as f64).sqrt();
        let got = INV_SQRT_TABLE[n as usize] as f64;
        assert!(
            (got - want).abs() <= 1.0 + want * 1e-9,
            "n={n}: {got} vs {want}"
        );
    }
    // Newton from the exact table value onwards stays within 0.2 % of the
    // true value for every count up to 100 000.
    let mut v = Vars {
        count: EXACT_COUNTS - 1,
        rec_inv_sqrt: INV_SQRT_TABLE[(EXACT_COUNTS - 1) as usize],
        ..Vars::default()
    };
    for _ in 0..100_000 {
        v.count += 1;
        v.newton_step();
        let want = (1u64 << 32) as f64 / (v.count as f64).sqrt();
        let err = (v.rec_inv_sqrt as f64 - want).abs() / want;
        assert!(err < 0.002, "count {}: error {err}", v.count);
    }
}

/// A link that sends one `len`-byte packet every `tx_ns`, fed with one packet
/// every `arrive_ns` until `stop_at`. Records every dequeue and drop.
struct Sim {
    q: Codel,
    now: Instant,
    drops: Drops,
    /// (time, sojourn) of delivered packets.
    sent: Vec<(Instant, Duration)>,
    /// (time, count after the drop, drop_next after the drop).
    dropped: Vec<(Instant, u32, Instant)>,
    marked: Vec<(Instant, u32, Instant)>,
    /// [`Packet::allowance_ms`] of every arriving packet.
    allowance_ms: u16,
}

impl Sim {
    fn new(params: Params) -> Sim {
        Sim {
            q: Codel::new(params, 100_000),
            now: Instant(0),
            drops: Vec::new(),
            sent: Vec::new(),
            dropped: Vec::new(),
            marked: Vec::new(),
            allowance_ms: 0,
        }
    }

    /// `n` packets of `len` bytes at once: a standing queue to start from.
    fn burst(&mut self, n: u64, len: u32) {
        for id in 0..n {
            let mut p = Packet::synthetic(u64::MAX - id, len, 1, ClassId::ROOT);
            p.allowance_ms = self.allowance_ms;
            self.q.enqueue(p, self.now, &mut self.drops);
        }
    }

    /// Runs from `self.now` for `dur_ns`; arrivals every `arrive_ns` (0 = none).
    fn run(&mut self, dur_ns: u64, arrive_ns: u64, tx_ns: u64, len: u32, ect: bool) {
        let end = self.now.0 + dur_ns;
        let mut next_arrival = self.now.0;
        let mut next_tx = self.now.0;
        let mut id = self.sent.len() as u64 * 1_000_000;
        // Event loop: each iteration advances to the next arrival or
        // transmission, so it runs at most dur/min(arrive, tx) times.
        while self.now.0 < end {
            let t = if arrive_ns > 0 {
                next_arrival.min(next_tx)
            } else {
                next_tx
            };
            self.now = Instant(t);
            if arrive_ns > 0 && t == next_arrival {
                id += 1;
                let mut p = Packet::synthetic(id, len, 1, ClassId::ROOT);
                p.allowance_ms = self.allowance_ms;
                if ect {
                    p.ecn = Ecn::Ect0;
                }
                self.q.enqueue(p, self.now, &mut self.drops);
                next_arrival += arrive_ns;
            }
            if t == next_tx {
                let before = self.q.codel_stats().ecn_marks;
                let pkt = self.q.dequeue(self.now, &mut self.drops);
                let v = *self.q.vars();
                for _ in self.drops.drain(..) {
                    self.dropped.push((self.now, v.count(), v.drop_next()));
                }
                if self.q.codel_stats().ecn_marks > before {
                    self.marked.push((self.now, v.count(), v.drop_next()));
                }
                if let Some(p) = pkt {
                    self.sent
                        .push((self.now, self.now.saturating_since(p.enqueued_at)));
                }
                next_tx += tx_ns;
            }
        }
    }
}

/// 1000-byte packets on a 10 Mbit/s link (0.8 ms each), offered at 2x.
const TX_NS: u64 = 800_000;
const ARRIVE_NS: u64 = 400_000;

#[test]
fn overload_first_drop_after_interval_then_control_law() {
    let params = Params::default();
    let mut sim = Sim::new(params);
    sim.run(3_000 * MS, ARRIVE_NS, TX_NS, 1000, false);
    let above = sim
        .sent
        .iter()
        .find(|(_, s)| *s >= params.target)
        .map(|(t, _)| *t)
        .expect("sojourn exceeded target");
    let (first_drop, c0, _) = sim.dropped[0];
    // The first dequeue with sojourn ≥ target arms the timer; the first drop
    // may come no earlier than one interval later, and (dequeues happen every
    // 0.8 ms) no later than one packet time after that.
    assert!(
        first_drop.0 >= above.0 + params.interval.0,
        "{first_drop:?} vs {above:?}"
    );
    assert!(first_drop.0 <= above.0 + params.interval.0 + TX_NS);
    assert_eq!(c0, 1);
    assert!(sim.dropped.len() > 20, "only {} drops", sim.dropped.len());
    // Successive drops within the episode: each schedule step equals
    // interval/sqrt(count) within 1 %, and each actual drop happens within one
    // packet time of its schedule.
    let mut checked = 0;
    for w in sim.dropped.windows(2) {
        let ((_, _, next_a), (t_b, count_b, next_b)) = (w[0], w[1]);
        if count_b <= 1 {
            continue; // a new episode
        }
        let step = (next_b.0 - next_a.0) as f64;
        let want = params.interval.0 as f64 / (count_b as f64).sqrt();
        assert!(
            (step - want).abs() / want < 0.01,
            "count {count_b}: {step} vs {want}"
        );
        assert!(
            t_b.0 >= next_a.0 && t_b.0 < next_a.0 + TX_NS,
            "drop at {t_b:?}, due {next_a:?}"
        );
        checked += 1;
    }
    assert!(checked > 20);
    assert_eq!(
        sim.q.stats().drop_packets[DropReason::Aqm.index()],
        sim.dropped.len() as u64
    );
}

/// A standing queue of 50 packets (40 ms) that never drains: arrivals at
/// the link's rate. RFC 8289 drops it down to the target; a flow whose
/// packets carry an allowance above that standing delay (TCP control's
/// window bounds it) is left alone; with an allowance below it, CoDel
/// drops, later by the difference, down to about the allowance; an
/// allowance counts up to one interval.
#[test]
fn an_allowance_is_the_flows_target_and_only_that() {
    let params = Params::default();
    let run = |allowance_ms: u16, standing: u64| {
        let mut sim = Sim::new(params);
        sim.allowance_ms = allowance_ms;
        sim.burst(standing, 1000);
        sim.run(3_000 * MS, TX_NS, TX_NS, 1000, false);
        sim
    };
    let plain = run(0, 50);
    assert!(plain.dropped.len() >= 40, "{} drops", plain.dropped.len());
    let last = plain.sent.last().unwrap().1;
    assert!(last < params.target, "standing at {last}");

    let above = run(60, 50);
    assert!(above.dropped.is_empty(), "{} drops", above.dropped.len());
    // Once the burst has gone, each packet waits for the 50 before it.
    assert!(above.sent[50..]
        .iter()
        .all(|(_, s)| s.0 >= 39 * MS && s.0 <= 41 * MS));

    // At most one interval counts: 500 ms is taken as 100, and a 152 ms
    // standing queue (190 packets) is dropped (to just under 100 ms).
    let long = run(500, 190);
    assert!(!long.dropped.is_empty());
    let last = long.sent.last().unwrap().1;
    assert!(
        last.0 < 100 * MS && last.0 >= 99 * MS,
        "standing at {last}: just under one interval"
    );

    let below = run(20, 50);
    // The first drop waits an interval grown by the allowance's excess
    // over the target, from the first sojourn at or above the allowance.
    let armed = below
        .sent
        .iter()
        .find(|(_, s)| s.0 >= 20 * MS)
        .map(|(t, _)| t.0)
        .unwrap();
    let (first, _, _) = below.dropped[0];
    let grown = armed + params.interval.0 + 15 * MS;
    assert!(first.0 >= grown && first.0 <= grown + TX_NS, "{first:?}");
    assert!(below.dropped.len() < plain.dropped.len());
    let last = below.sent.last().unwrap().1;
    assert!(
        last.0 < 20 * MS && last.0 >= 19 * MS,
        "standing at {last}: just under the allowance"
    );
}

#[test]
fn dropping_stops_when_sojourn_falls_below_target() {
    let params = Params::default();
    let mut sim = Sim::new(params);
    sim.run(2_000 * MS, ARRIVE_NS, TX_NS, 1000, false);
    assert!(sim.q.vars().dropping() || !sim.dropped.is_empty());
    // Offered load falls to half the link rate: the queue drains.
    let drops_before = sim.dropped.len();
    let mark = sim.sent.len();
    sim.run(3_000 * MS, 2 * TX_NS, TX_NS, 1000, false);
    let below = sim.sent[mark..]
        .iter()
        .find(|(_, s)| *s < params.target)
        .map(|(t, _)| *t)
        .expect("queue drained below target");
    assert!(
        sim.dropped[drops_before..]
            .iter()
            .all(|(t, _, _)| *t <= below),
        "a drop after sojourn fell below target at {below:?}"
    );
    assert!(!sim.q.vars().dropping());
}

#[test]
fn ecn_marks_ect_instead_of_dropping() {
    let params = Params {
        ecn: true,
        ..Params::default()
    };
    let mut sim = Sim::new(params);
    sim.run(2_000 * MS, ARRIVE_NS, TX_NS, 1000, true);
    assert!(
        sim.dropped.is_empty(),
        "{} drops of ECT packets",
        sim.dropped.len()
    );
    assert!(sim.marked.len() > 10);
    assert_eq!(sim.q.stats().ecn_marks, sim.marked.len() as u64);
    // Marks follow the same control law as drops would.
    for w in sim.marked.windows(2) {
        let ((_, _, next_a), (_, count_b, next_b)) = (w[0], w[1]);
        if count_b > 1 {
            let step = (next_b.0 - next_a.0) as f64;
            let want = params.interval.0 as f64 / (count_b as f64).sqrt();
            assert!((step - want).abs() / want < 0.01);
        }
    }
    // Not-ECT packets are still dropped under ecn.
    let mut sim = Sim::new(params);
    sim.run(2_000 * MS, ARRIVE_NS, TX_NS, 1000, false);
    assert!(!sim.dropped.is_empty() && sim.marked.is_empty());
}

#[test]
fn never_drops_with_at_most_one_mtu_queued() {
    // Bursts of two 1500-byte packets every 300 ms on a link that takes 100
    // ms per packet: sojourn is far above target, but behind the departing
    // packet at most one packet (≤ 1 MTU) remains.
    let mut sim = Sim::new(Params::default());
    let mut t = 0;
    let mut id = 0;
    // 200 bursts: a bounded scenario.
    for _ in 0..200 {
        for _ in 0..2 {
            id += 1;
            sim.q.enqueue(
                Packet::synthetic(id, 1500, 1, ClassId::ROOT),
                Instant(t),
                &mut sim.drops,
            );
        }
        for k in 1..=2 {
            let p = sim
                .q
                .dequeue(Instant(t + k * 100 * MS), &mut sim.drops)
                .expect("packet");
            assert!(p.enqueued_at.0 == t);
        }
        t += 300 * MS;
    }
    assert!(sim.drops.is_empty());
    assert_eq!(sim.q.codel_stats().drops, 0);
    assert!(sim.q.codel_stats().last_sojourn >= Duration::from_millis(200));
}

#[test]
fn count_reused_when_reentering_soon() {
    let params = Params::default();
    let mut sim = Sim::new(params);
    // 1.5x overload for 800 ms.
    sim.run(800 * MS, 533_333, TX_NS, 1000, false);
    let count = sim.q.vars().count();
    assert!(count > 2, "count {count}");
    // A lull (well under 16 intervals) drains the queue, then the overload
    // returns.
    sim.run(600 * MS, 0, TX_NS, 1000, false);
    assert!(sim.q.is_empty());
    assert!(!sim.q.vars().dropping());
    let n = sim.dropped.len();
    sim.run(1_000 * MS, 533_333, TX_NS, 1000, false);
    let (_, c, _) = sim.dropped[n];
    assert!(c > 1, "count restarted from 1 despite a recent episode");
}

#[test]
fn ce_threshold_marks_shallowly() {
    let params = Params {
        ce_threshold: Some(Duration::from_millis(1)),
        ..Params::default()
    };
    let mut q = Codel::new(params, 100);
    let mut drops = Vec::new();
    for id in 0..3 {
        let mut p = Packet::synthetic(id, 100, 1, ClassId::ROOT);
        p.ecn = Ecn::Ect1;
        q.enqueue(p, Instant(0), &mut drops);
    }
    assert_eq!(
        q.dequeue(Instant(MS / 2), &mut drops).map(|p| p.ecn),
        Some(Ecn::Ect1)
    );
    assert_eq!(
        q.dequeue(Instant(2 * MS), &mut drops).map(|p| p.ecn),
        Some(Ecn::Ce)
    );
    assert_eq!(q.codel_stats().ce_threshold_marks, 1);
    assert_eq!(q.stats().ecn_marks, 1);
}

#[test]
fn limit_refuses_newcomer_and_peek_holds() {
    let mut q = Codel::new(Params::default(), 2);
    let mut drops = Vec::new();
    for id in 0..3 {
        q.enqueue(
            Packet::synthetic(id, 100 + id as u32, 1, ClassId::ROOT),
            Instant(0),
            &mut drops,
        );
    }
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].pkt.id, 2);
    assert_eq!(drops[0].reason, DropReason::QueueFull);
    assert_eq!(q.peek_len(Instant(1), &mut drops), Some(100));
    assert_eq!(q.len(), 2);
    assert_eq!(q.backlog_bytes(), 201);
    assert_eq!(q.dequeue(Instant(1), &mut drops).map(|p| p.id), Some(0));
}

#[test]
fn model_check() {
    check_aqm(8, true, |ecn| {
        Box::new(Codel::new(
            Params {
                ecn,
                target: Duration::from_millis(5),
                interval: Duration::from_millis(30),
                ce_threshold: if ecn {
                    Some(Duration::from_millis(20))
                } else {
                    None
                },
                mtu_bytes: 1514,
            },
            30,
        ))
    });
}
