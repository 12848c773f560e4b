use super::*;
use crate::Packet;

fn dropped(class: u32, cost: u32, reason: DropReason) -> Dropped {
    let mut pkt = Packet::synthetic(0, cost, 0, ClassId(class));
    pkt.cost = cost + 20;
    Dropped { pkt, reason }
}

#[test]
fn charges_aqm_and_overflow_drops_of_its_classes_at_cost() {
    let mut i = Ingress::classes([ClassId(3), ClassId(1), ClassId(3)]);
    let d = [
        dropped(1, 100, DropReason::Aqm),
        dropped(3, 200, DropReason::QueueFull),
        dropped(2, 400, DropReason::Aqm),   // not an ingress class
        dropped(1, 800, DropReason::Loss),  // emulated link loss
        dropped(1, 800, DropReason::Purge), // reconfiguration
    ];
    assert_eq!(i.charge(&d), 120 + 220);
    let c1 = Charged {
        packets: 1,
        bytes: 120,
    };
    assert_eq!(i.charged(ClassId(1)), Some(c1));
    assert_eq!(i.charged(ClassId(2)), None);
    assert_eq!(i.total().bytes, 340);
}

#[test]
fn off_charges_nothing_and_all_charges_every_class() {
    let d = [dropped(7, 100, DropReason::Aqm)];
    assert_eq!(Ingress::off().charge(&d), 0);
    let mut all = Ingress::all();
    assert_eq!(all.charge(&d), 120);
    assert_eq!(all.charged(ClassId(9)).map(|c| c.bytes), Some(120));
}

// ---- Shapers in ingress mode, in virtual time ----

use crate::fq_codel::{self, FqCodel};
use crate::testing::{check_random, serve_at_wakeups, Lossy, OpSpace, Rng};
use crate::{hfsc, pipe, priq, tbr, Qdisc};
use sluice_time::{Instant, Rate};

/// What a saturated shaper did between the first arrival and its last send.
#[derive(Debug)]
struct Run {
    /// Bytes (cost) sent and dropped by the AQM.
    sent: u64,
    dropped: u64,
    /// From the arrivals to the last send.
    elapsed: sluice_time::Duration,
}

/// Puts `n` packets (sizes from `seed`, 40..1500 B, class ROOT) into `q` at
/// `t0` and serves it at its wake-ups until it is empty.
fn saturate(q: &mut dyn Qdisc, n: u64, seed: u64) -> Run {
    let mut rng = Rng::new(seed);
    let mut drops = Vec::new();
    let t0 = Instant(1_000_000_000);
    for id in 1..=n {
        let len = 40 + rng.below(1461) as u32;
        q.enqueue(
            Packet::synthetic(id, len, id % 7, ClassId::ROOT),
            t0,
            &mut drops,
        );
    }
    assert!(drops.is_empty(), "the queue holds every arrival");
    let (mut last, mut sent) = (t0, 0u64);
    // Each step sends, or jumps to a wake-up (at most one per packet, plus
    // the AQM's drops).
    serve_at_wakeups(q, t0, 4 * n + 4, &mut drops, |p, at| {
        sent += u64::from(p.cost);
        last = at;
    });
    assert!(q.is_empty(), "drained");
    let dropped = drops
        .iter()
        .filter(|d| d.reason == DropReason::Aqm)
        .map(|d| u64::from(d.pkt.cost))
        .sum();
    Run {
        sent,
        dropped,
        elapsed: last - t0,
    }
}

fn tbr_over(every: u64, rate: Rate, ingress: Ingress) -> tbr::Tbr {
    let mut t = tbr::Tbr::new(
        tbr::Params {
            rate,
            bucket_bytes: 3000,
        },
        Lossy::boxed(usize::MAX, every, every),
    );
    t.set_ingress(ingress);
    t
}

fn pipe_over(every: u64, rate: Rate, ingress: Ingress) -> pipe::Pipe {
    let mut p = pipe::Pipe::new(
        pipe::Params {
            rate,
            queue_limit_packets: 0,
            ..pipe::Params::default()
        },
        Lossy::boxed(usize::MAX, every, every),
    );
    p.set_ingress(ingress);
    p
}

/// `got` within `pct` percent of `want`.
fn within(got: f64, want: f64, pct: f64) -> bool {
    (got - want).abs() <= want * pct / 100.0
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// The token bucket in ingress mode: what left plus what the AQM
    /// dropped moves at the rate (within 1 %) after the initial bucket,
    /// for any rate and a dropped share up to 1/4; the output itself falls
    /// by the dropped share. Off, the output alone moves at the rate and
    /// the drops come on top, free.
    #[test]
    fn tbr_ingress_sent_plus_dropped_is_the_rate(
        rate_kbps in 500u64..200_000,
        every in 4u64..40,
        seed in 0u64..1_000,
    ) {
        let rate = Rate::kbps(rate_kbps);
        let on = saturate(&mut tbr_over(every, rate, Ingress::all()), 3_000, seed);
        let line = rate.bytes_in(on.elapsed) as f64;
        let moved = (on.sent + on.dropped - 3_000) as f64;
        proptest::prop_assert!(on.dropped > 0);
        proptest::prop_assert!(
            within(moved, line, 1.0),
            "ingress: sent {} + dropped {} vs {} at {}", on.sent, on.dropped, line, rate
        );
        let off = saturate(&mut tbr_over(every, rate, Ingress::off()), 3_000, seed);
        let line = rate.bytes_in(off.elapsed) as f64;
        proptest::prop_assert!(
            within((off.sent - 3_000) as f64, line, 1.0),
            "egress: sent {} vs {} at {}", off.sent, line, rate
        );
        // Same packets, same drops: ingress takes longer by the dropped share.
        proptest::prop_assert_eq!(on.dropped, off.dropped);
        let ratio = off.elapsed.as_secs_f64() / on.elapsed.as_secs_f64();
        let share = off.sent as f64 / (off.sent + off.dropped) as f64;
        proptest::prop_assert!(within(ratio, share, 1.0), "rate ratio {} vs {}", ratio, share);
    }

    /// The same for the dummynet pipe's link.
    #[test]
    fn pipe_ingress_sent_plus_dropped_is_the_rate(
        rate_kbps in 500u64..200_000,
        every in 4u64..40,
        seed in 0u64..1_000,
    ) {
        let rate = Rate::kbps(rate_kbps);
        let on = saturate(&mut pipe_over(every, rate, Ingress::all()), 3_000, seed);
        let line = rate.bytes_in(on.elapsed) as f64;
        proptest::prop_assert!(on.dropped > 0);
        proptest::prop_assert!(
            within((on.sent + on.dropped) as f64, line, 1.0),
            "ingress: sent {} + dropped {} vs {} at {}", on.sent, on.dropped, line, rate
        );
        let off = saturate(&mut pipe_over(every, rate, Ingress::off()), 3_000, seed);
        let line = rate.bytes_in(off.elapsed) as f64;
        proptest::prop_assert!(
            within(off.sent as f64, line, 1.0),
            "egress: sent {} vs {} at {}", off.sent, line, rate
        );
    }
}

#[test]
fn a_dropped_share_above_a_third_meets_the_failsafe_at_two_thirds_of_the_rate() {
    // Every other packet dropped: charging them all would halve the output;
    // the failsafe keeps it at 2/3 of the rate.
    let rate = Rate::mbps(10);
    for (name, run) in [
        (
            "tbr",
            saturate(&mut tbr_over(2, rate, Ingress::all()), 4_000, 7),
        ),
        (
            "pipe",
            saturate(&mut pipe_over(2, rate, Ingress::all()), 4_000, 7),
        ),
    ] {
        let line = rate.bytes_in(run.elapsed) as f64;
        let share = run.sent as f64 / line;
        assert!(
            within(share, 2.0 / 3.0, 1.0),
            "{name}: output {share:.4} of the rate"
        );
    }
}

#[test]
fn the_charge_of_a_burst_of_drops_is_bounded_and_the_failsafe_keeps_sending() {
    // 200 arrivals at once into a 10-packet queue: 190 refused, 285 kB. At
    // 10 Mbit/s the debt bound is 100 ms = 125 kB: the rest is forgiven.
    let rate = Rate::mbps(10);
    let mut t = tbr::Tbr::new(
        tbr::Params {
            rate,
            bucket_bytes: 1500,
        },
        Lossy::boxed(10, 0, 0),
    );
    t.set_ingress(Ingress::all());
    let mut drops = Vec::new();
    let t0 = Instant(1_000_000_000);
    for id in 1..=200 {
        t.enqueue(
            Packet::synthetic(id, 1500, 0, ClassId::ROOT),
            t0,
            &mut drops,
        );
    }
    assert_eq!(drops.len(), 190);
    let all = Charged {
        packets: 190,
        bytes: 285_000,
    };
    assert_eq!(t.ingress().unwrap().total(), all);
    assert_eq!(max_debt_bytes(rate), 125_000);
    assert_eq!(
        t.tokens_bytes(),
        -125_000,
        "a full bucket, less the charge, floored"
    );
    assert_eq!(t.ingress().unwrap().forgiven_bytes(), 285_000 - 126_500);
    // The failsafe bucket (full, charged 3/2 per send) still lets the
    // queue out at 2/3 of the rate: 1500 B every 1.8 ms, the first at once.
    let mut times = Vec::new();
    let mut now = t0;
    for _ in 0..40 {
        match t.dequeue(now, &mut drops) {
            Some(_) => times.push(now - t0),
            None => match t.next_wakeup() {
                Some(w) => now = w,
                None => break,
            },
        }
    }
    let want: Vec<sluice_time::Duration> = (0..10)
        .map(|k| sluice_time::Duration::from_micros(1_800 * k))
        .collect();
    assert_eq!(times, want);
}

/// A TCP-like sender behind the bottleneck: additive increase of one
/// segment per RTT, halving at most once per RTT when it loses a packet.
/// (Enough of TCP to respond to drops; not a model of any one stack.)
struct Aimd {
    cwnd: f64,
    last_cut: Instant,
    next_send: Instant,
}

/// Eight AIMD flows arriving together at up to the bottleneck's rate (5 %
/// above the shaper's) into a token bucket over FQ-CoDel, for 20 s.
/// Returns (bytes forwarded, bytes dropped) during the last 15 s.
fn behind_the_bottleneck(ingress: bool) -> (u64, u64, f64) {
    const MSS: u32 = 1500;
    const RTT: u64 = 20_000_000;
    let rate = Rate::mbps(20);
    let bottleneck = rate.as_bps() as f64 / 0.95 / 8.0; // bytes/s
    let mut q = tbr::Tbr::new(
        tbr::Params::for_rate(rate),
        Box::new(FqCodel::new(fq_codel::Params {
            ecn: false,
            ..fq_codel::Params::default()
        })),
    );
    if ingress {
        q.set_ingress(Ingress::all());
    }
    let mut flows: Vec<Aimd> = (0..8)
        .map(|i| Aimd {
            cwnd: 4.0 + i as f64,
            last_cut: Instant::ZERO,
            next_send: Instant(i * 100_000),
        })
        .collect();
    let mut drops = Vec::new();
    let (mut sent, mut dropped) = (0u64, 0u64);
    let warm = Instant(5_000_000_000);
    let end = Instant(20_000_000_000);
    let mut bottleneck_free = Instant::ZERO;
    let mut id = 0u64;
    let step = sluice_time::Duration::from_micros(100);
    let mut now = Instant::ZERO;
    // Bound: 200 000 steps of 100 us.
    while now < end {
        for (f, fl) in flows.iter_mut().enumerate() {
            // A flow sends a window per RTT, and the bottleneck serialises
            // all of them at its rate: arrivals never exceed it.
            if fl.next_send <= now && bottleneck_free <= now {
                id += 1;
                q.enqueue(
                    Packet::synthetic(id, MSS, f as u64, ClassId::ROOT),
                    now,
                    &mut drops,
                );
                let gap = RTT as f64 / fl.cwnd;
                fl.next_send = now + sluice_time::Duration(gap as u64);
                // Back to back while busy, so the 100 us steps do not
                // round the bottleneck's rate down.
                let from = if bottleneck_free + step > now {
                    bottleneck_free
                } else {
                    now
                };
                bottleneck_free =
                    from + sluice_time::Duration((MSS as f64 / bottleneck * 1e9) as u64);
            }
        }
        while let Some(p) = q.dequeue(now, &mut drops) {
            if now >= warm {
                sent += u64::from(p.cost);
            }
            let fl = &mut flows[p.flow as usize];
            fl.cwnd += 1.0 / fl.cwnd;
        }
        for d in drops.drain(..) {
            if now >= warm {
                dropped += u64::from(d.pkt.cost);
            }
            let fl = &mut flows[d.pkt.flow as usize];
            if now.saturating_since(fl.last_cut).as_nanos() >= RTT {
                fl.cwnd = (fl.cwnd / 2.0).max(2.0);
                fl.last_cut = now;
            }
        }
        now += step;
    }
    let line = rate.bytes_in(end - warm);
    (sent, dropped, line as f64)
}

#[test]
fn behind_the_bottleneck_ingress_slows_the_output_by_the_dropped_share() {
    let (on_sent, on_dropped, line) = behind_the_bottleneck(true);
    let (off_sent, off_dropped, _) = behind_the_bottleneck(false);
    eprintln!(
        "ingress: sent {:.4} + dropped {:.4} of the rate; egress: sent {:.4} + dropped {:.4}",
        on_sent as f64 / line,
        on_dropped as f64 / line,
        off_sent as f64 / line,
        off_dropped as f64 / line
    );
    assert!(on_dropped > 0 && off_dropped > 0, "the AQM had work");
    // Ingress: the bytes that crossed the bottleneck (forwarded and
    // dropped) stay at the rate; the output is below it by the drops.
    assert!(within((on_sent + on_dropped) as f64, line, 1.0));
    assert!(on_sent as f64 <= line - on_dropped as f64 + line * 0.01);
    // Egress: the output is the whole rate and the drops come on top.
    assert!(within(off_sent as f64, line, 1.0));
    assert!((off_sent + off_dropped) as f64 > line * 1.01);
}

// ---- The discipline contract holds in ingress mode ----

fn fq() -> Box<dyn Qdisc> {
    Box::new(FqCodel::new(fq_codel::Params {
        limit_packets: 40,
        target: sluice_time::Duration::from_millis(1),
        interval: sluice_time::Duration::from_millis(5),
        ..fq_codel::Params::default()
    }))
}

#[test]
fn model_checker_tbr_over_fq_codel_in_ingress_mode() {
    let space = OpSpace::default().with_max_advance(sluice_time::Duration::from_millis(20));
    let r = check_random(
        || {
            let mut t = tbr::Tbr::new(
                tbr::Params {
                    rate: Rate::mbps(2),
                    bucket_bytes: 3000,
                },
                fq(),
            );
            t.set_ingress(Ingress::all());
            Box::new(t)
        },
        &space,
        64,
        400,
    );
    assert!(r.throttled > 0 && r.dropped > 0 && r.dequeued > 0);
}

#[test]
fn model_checker_tbr_over_hfsc_and_priq_with_fq_codel_leaves_in_ingress_mode() {
    let space = OpSpace::default()
        .with_classes([1, 2])
        .with_max_advance(sluice_time::Duration::from_millis(20));
    let r = check_random(
        || {
            let mut h = hfsc::Hfsc::new(Rate::mbps(2));
            for c in [1, 2] {
                let p = hfsc::ClassParams {
                    rt: None,
                    ls: Some(hfsc::ServiceCurve::linear(Rate::mbps(1))),
                    ul: None,
                };
                h.add_class(ClassId(c), None, p, Some(fq())).unwrap();
            }
            h.set_default(ClassId(2)).unwrap();
            let mut t = tbr::Tbr::new(tbr::Params::for_rate(Rate::mbps(2)), Box::new(h));
            // One class in ingress mode, one not.
            t.set_ingress(Ingress::classes([ClassId(1)]));
            Box::new(t)
        },
        &space,
        48,
        400,
    );
    assert!(r.throttled > 0 && r.dropped > 0);
    let r = check_random(
        || {
            let mut p = priq::Priq::new();
            p.add_class(ClassId(1), 7, fq()).unwrap();
            p.add_class(ClassId(2), 1, fq()).unwrap();
            p.set_default(ClassId(2)).unwrap();
            let mut t = tbr::Tbr::new(tbr::Params::for_rate(Rate::mbps(1)), Box::new(p));
            t.set_ingress(Ingress::classes([ClassId(1), ClassId(2)]));
            Box::new(t)
        },
        &space,
        48,
        400,
    );
    assert!(r.throttled > 0 && r.dropped > 0);
}

#[test]
fn model_checker_pipe_over_fq_codel_in_ingress_mode() {
    let space = OpSpace::default().with_max_advance(sluice_time::Duration::from_millis(20));
    let r = check_random(
        || {
            let mut p = pipe::Pipe::new(
                pipe::Params {
                    rate: Rate::mbps(2),
                    delay: sluice_time::Duration::from_millis(3),
                    queue_limit_packets: 30,
                    ..pipe::Params::default()
                },
                fq(),
            );
            p.set_ingress(Ingress::all());
            Box::new(p)
        },
        &space,
        64,
        400,
    );
    assert!(r.dropped > 0 && r.dequeued > 0);
}
