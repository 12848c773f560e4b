use super::*;
use crate::drr::Drr;
use crate::testing::fifo_leaf;
use crate::testing::{check_random, OpSpace, Rng};

fn pkt(id: u64, len: u32) -> Packet {
    Packet::synthetic(id, len, id % 4, ClassId::ROOT)
}

fn params(rate: Rate, delay: Duration) -> Params {
    Params {
        rate,
        delay,
        queue_limit_packets: 0,
        ..Params::default()
    }
}

/// Runs a pipe like the engine would: at each step jump to the earlier of
/// the next arrival and `next_wakeup`, enqueue arrivals due, dequeue all that
/// is ready. Returns (id, exit time) in exit order.
fn drive(p: &mut Pipe, arrivals: &[(Instant, Packet)]) -> Vec<(u64, Instant)> {
    let mut out = Vec::new();
    let mut drops = Vec::new();
    let mut next = 0;
    let mut now = arrivals.first().map(|a| a.0).unwrap_or(Instant::ZERO);
    // Bound: every iteration handles an arrival, a departure or a wake-up;
    // 4 × arrivals covers all of them.
    for _ in 0..4 * arrivals.len() + 4 {
        while next < arrivals.len() && arrivals[next].0 <= now {
            p.enqueue(arrivals[next].1.clone(), now, &mut drops);
            next += 1;
        }
        while let Some(q) = p.dequeue(now, &mut drops) {
            out.push((q.id, now));
        }
        let wake = p.next_wakeup();
        let arr = arrivals.get(next).map(|a| a.0);
        now = match (wake, arr) {
            (Some(w), Some(a)) => w.min(a),
            (Some(w), None) => w,
            (None, Some(a)) => a,
            (None, None) => break,
        };
    }
    assert!(p.is_empty(), "drive: pipe not drained");
    out
}

#[test]
fn back_to_back_packets_leave_at_rate_plus_delay_exactly() {
    // 10 Mbit/s: 1000 B = 800 us. Delay 20 ms.
    let mut p = Pipe::new(
        params(Rate::mbps(10), Duration::from_millis(20)),
        fifo_leaf(10_000),
    );
    let t0 = Instant(1_000_000_000);
    let arrivals: Vec<_> = (0..1000).map(|i| (t0, pkt(i, 1000))).collect();
    let out = drive(&mut p, &arrivals);
    assert_eq!(out.len(), 1000);
    for (k, &(id, t)) in out.iter().enumerate() {
        assert_eq!(id, k as u64, "FIFO order");
        let expect = t0 + Duration::from_micros(800 * (k as u64 + 1)) + Duration::from_millis(20);
        assert_eq!(t, expect, "packet {k}");
    }
}

#[test]
fn random_arrivals_exit_at_serialisation_end_plus_delay() {
    let rate = Rate::kbps(3_000);
    let delay = Duration::from_millis(7);
    let mut p = Pipe::new(params(rate, delay), fifo_leaf(100_000));
    let mut rng = Rng::new(42);
    let mut t = Instant(5_000_000);
    let mut arrivals = Vec::new();
    for i in 0..3000 {
        t += Duration(rng.below(6_000_000)); // 0..6 ms apart: busy and idle periods
        arrivals.push((t, pkt(i, 40 + rng.below(1461) as u32)));
    }
    // Reference: the link serves in arrival order, one at a time.
    let mut free = Instant::ZERO;
    let (mut found_idle, mut found_busy) = (0, 0);
    let expect: Vec<(u64, Instant)> = arrivals
        .iter()
        .map(|(a, q)| {
            if *a >= free {
                found_idle += 1;
            } else {
                found_busy += 1;
            }
            let end = free.max(*a) + rate.tx_time(q.cost as u64);
            free = end;
            (q.id, end + delay)
        })
        .collect();
    let out = drive(&mut p, &arrivals);
    assert_eq!(out, expect);
    let idle_gaps = expect
        .windows(2)
        .filter(|w| w[1].1 - w[0].1 > rate.tx_time(1500))
        .count();
    assert!(
        idle_gaps > 100,
        "the run must include idle periods, had {idle_gaps}"
    );
}

#[test]
fn polling_often_sees_the_same_exit_times_as_waking_exactly() {
    // Lazy evaluation must not change when packets may leave: a pipe polled
    // every 50 us (and fed at the same arrival instants) releases each packet
    // in the first poll at or after the exact exit time found by a pipe that
    // is only woken at `next_wakeup`.
    let rate = Rate::mbps(1);
    let delay = Duration::from_millis(3);
    let mut rng = Rng::new(5);
    let mut t = Instant(1_000_000);
    let mut arrivals = Vec::new();
    for i in 0..300 {
        t += Duration::from_micros(50 * rng.below(200)); // on the poll grid
        arrivals.push((t, pkt(i, 40 + rng.below(1461) as u32)));
    }
    let mut exact = Pipe::new(params(rate, delay), fifo_leaf(10_000));
    let reference = drive(&mut exact, &arrivals);
    let mut polled = Pipe::new(params(rate, delay), fifo_leaf(10_000));
    let mut drops = Vec::new();
    let mut out = Vec::new();
    let mut now = arrivals[0].0;
    let mut next = 0;
    let step = Duration::from_micros(50);
    // Bound: the reference's last exit, in 50 us steps.
    let polls = (reference.last().unwrap().1 - now).as_nanos() / step.as_nanos() + 2;
    for _ in 0..polls {
        while next < arrivals.len() && arrivals[next].0 <= now {
            polled.enqueue(arrivals[next].1.clone(), now, &mut drops);
            next += 1;
        }
        while let Some(q) = polled.dequeue(now, &mut drops) {
            out.push((q.id, now));
        }
        now += step;
    }
    assert_eq!(out.len(), reference.len());
    for (o, r) in out.iter().zip(&reference) {
        assert_eq!(o.0, r.0, "order");
        assert!(o.1 >= r.1 && o.1 - r.1 < step, "{o:?} vs exact {r:?}");
    }
}

#[test]
fn loss_rate_within_binomial_bounds_and_deterministic() {
    // 10 % of 10 000: mean 1000, sd 30; 9–11 % is ±3.3 sd.
    // A 10 % loss pipe of `seed` offered 10 000 packets, and what it dropped.
    let offer = |seed| {
        let mut p = Pipe::new(
            Params {
                loss_ppm: 100_000,
                seed,
                queue_limit_packets: 0,
                ..Params::default()
            },
            fifo_leaf(100_000),
        );
        let mut drops = Vec::new();
        for i in 0..10_000 {
            p.enqueue(pkt(i, 100), Instant(i), &mut drops);
        }
        (p, drops)
    };
    let mut lost_sets = Vec::new();
    for seed in [1u64, 2, 3, 0xdead_beef] {
        let (p, drops) = offer(seed);
        assert!(drops.iter().all(|d| d.reason == DropReason::Loss));
        let lost: Vec<u64> = drops.iter().map(|d| d.pkt.id).collect();
        assert!(
            (900..=1100).contains(&lost.len()),
            "seed {seed}: lost {}",
            lost.len()
        );
        assert_eq!(p.len(), 10_000 - lost.len());
        let mut n = 0;
        p.visit_stats(&mut |id, s| {
            if id == ClassId::ROOT && n == 0 {
                assert_eq!(s.drop_packets[DropReason::Loss.index()], lost.len() as u64);
                n += 1;
            }
        });
        lost_sets.push(lost);
    }
    // Same seed, same losses; another seed, other losses.
    let (_, drops) = offer(1);
    let lost: Vec<u64> = drops.iter().map(|d| d.pkt.id).collect();
    assert_eq!(lost, lost_sets[0]);
    assert_ne!(lost_sets[0], lost_sets[1]);
}

#[test]
fn no_loss_and_full_loss_are_exact() {
    let mut drops = Vec::new();
    let mut never = Pipe::new(
        Params {
            queue_limit_packets: 0,
            ..Params::default()
        },
        fifo_leaf(100_000),
    );
    let mut always = Pipe::new(
        Params {
            loss_ppm: PPM,
            queue_limit_packets: 0,
            ..Params::default()
        },
        fifo_leaf(100_000),
    );
    for i in 0..5_000 {
        never.enqueue(pkt(i, 100), Instant(0), &mut drops);
    }
    assert!(drops.is_empty());
    for i in 0..5_000 {
        always.enqueue(pkt(i, 100), Instant(0), &mut drops);
    }
    assert_eq!(drops.len(), 5_000);
}

#[test]
fn queue_limit_counts_packets_waiting_for_the_link() {
    let mut p = Pipe::new(
        Params {
            rate: Rate::kbps(64),
            queue_limit_packets: 5,
            ..Params::default()
        },
        fifo_leaf(1000),
    );
    let mut drops = Vec::new();
    let mut refused = 0;
    for i in 0..10 {
        if p.enqueue(pkt(i, 1000), Instant(1), &mut drops) == Enqueue::Rejected {
            refused += 1;
        }
    }
    // The first goes straight onto the link; five wait; four are refused.
    assert_eq!(refused, 4);
    assert_eq!(p.in_flight(), 1);
    assert_eq!(p.len(), 6);
    assert!(drops.iter().all(|d| d.reason == DropReason::QueueFull));
}

#[test]
fn burst_after_idle_passes_at_line_speed() {
    // 1 Mbit/s (1000 B = 8 ms), burst 3000 B: after idle three 1000 B
    // packets leave at once, the fourth 8 ms later.
    let mut p = Pipe::new(
        Params {
            rate: Rate::mbps(1),
            burst_bytes: 3000,
            queue_limit_packets: 0,
            ..Params::default()
        },
        fifo_leaf(100),
    );
    let t0 = Instant(10_000_000_000);
    let arrivals: Vec<_> = (0..5).map(|i| (t0, pkt(i, 1000))).collect();
    let out = drive(&mut p, &arrivals);
    let times: Vec<Instant> = out.iter().map(|o| o.1).collect();
    let ms = |m| t0 + Duration::from_millis(m);
    assert_eq!(times, vec![t0, t0, t0, ms(8), ms(16)]);
}

#[test]
fn pipe_over_drr_keeps_weights_at_the_pipe_rate() {
    let mut drr = Drr::new(1500);
    drr.add_class(ClassId(1), 10, fifo_leaf(10_000)).unwrap();
    drr.add_class(ClassId(2), 1, fifo_leaf(10_000)).unwrap();
    let mut p = Pipe::new(
        params(Rate::mbps(8), Duration::from_millis(10)),
        Box::new(drr),
    );
    let t0 = Instant(0);
    let mut arrivals = Vec::new();
    for i in 0..4000u64 {
        let c = 1 + (i % 2) as u32;
        arrivals.push((t0, Packet::synthetic(i, 1000, c as u64, ClassId(c))));
    }
    let out = drive(&mut p, &arrivals);
    // First 2000 departures: both backlogged; ratio 10:1 within 5 %.
    let ones = out[..2000].iter().filter(|o| o.0 % 2 == 0).count() as f64;
    let ratio = ones / (2000.0 - ones);
    assert!((ratio - 10.0).abs() <= 0.5, "ratio {ratio}");
    // 8 Mbit/s: 1000 B per ms; the 4000th exits at 4000 ms + 10 ms.
    assert_eq!(out.last().unwrap().1, t0 + Duration::from_millis(4010));
}

#[test]
fn model_checker_pipe_with_loss_and_delay() {
    let space = OpSpace::default().with_max_advance(Duration::from_millis(10));
    let r = check_random(
        || {
            Box::new(Pipe::new(
                Params {
                    rate: Rate::mbps(4),
                    burst_bytes: 2000,
                    delay: Duration::from_millis(15),
                    loss_ppm: 50_000,
                    seed: 9,
                    queue_limit_packets: 20,
                },
                fifo_leaf(30),
            ))
        },
        &space,
        64,
        400,
    );
    assert!(r.throttled > 0 && r.dropped > 0 && r.dequeued > 1000);
}

#[test]
fn model_checker_pipe_over_drr_unlimited_rate() {
    let space = OpSpace::default().with_classes([1, 2, 3]);
    let r = check_random(
        || {
            let mut drr = Drr::new(600);
            drr.add_class(ClassId(1), 1, fifo_leaf(8)).unwrap();
            drr.add_class(ClassId(2), 7, fifo_leaf(8)).unwrap();
            let p = Params {
                delay: Duration::from_millis(2),
                loss_ppm: 10_000,
                seed: 3,
                ..Params::default()
            };
            Box::new(Pipe::new(p, Box::new(drr)))
        },
        &space,
        48,
        400,
    );
    assert!(r.dropped > 0 && r.dequeued > 1000);
}

/// `n` packets of 1000 B wait in `p` at `t0`; `p` is served at each of its
/// wake-ups, and `event` acts on it once, when time reaches `at`. Returns
/// each packet's id and exit time, and what was dropped.
fn serve_with_event(
    p: &mut Pipe,
    n: u64,
    t0: Instant,
    at: Instant,
    mut event: impl FnMut(&mut Pipe, &mut Drops),
) -> (Vec<(u64, Instant)>, Drops) {
    let mut drops = Vec::new();
    for i in 0..n {
        p.enqueue(pkt(i, 1000), t0, &mut drops);
    }
    let mut out = Vec::new();
    let mut now = t0;
    let mut done = false;
    // Bound: each pass sends or moves to a later wake-up.
    for _ in 0..10_000 {
        if !done && now >= at {
            event(p, &mut drops);
            done = true;
        }
        while let Some(q) = p.dequeue(now, &mut drops) {
            out.push((q.id, now));
        }
        match p.next_wakeup() {
            Some(w) if !done => now = w.min(at),
            Some(w) => now = w,
            None => break,
        }
    }
    (out, drops)
}

#[test]
fn a_rate_step_with_packets_queued_loses_nothing_and_paces_each_side() {
    // 300 packets of 1000 B wait at t0; 8 Mbit/s (1 ms each) until 100 ms,
    // then 2 Mbit/s (4 ms each). No delay, so exits are serialisation ends.
    let mut p = Pipe::new(params(Rate::mbps(8), Duration::ZERO), fifo_leaf(10_000));
    let t0 = Instant(1_000_000_000);
    let step = t0 + Duration::from_millis(100);
    let (out, drops) = serve_with_event(&mut p, 300, t0, step, |p, drops| {
        assert!(p.set_rate(Rate::mbps(2), step, drops));
    });
    assert!(drops.is_empty());
    assert_eq!(out.len(), 300, "nothing lost");
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
    // The first 100 left at 1 ms each, by the step.
    let before = out.iter().filter(|(_, t)| *t <= step).count();
    assert_eq!(before, 100, "{out:?}");
    // Packet 100 started its serialisation at the step, at the old rate
    // (1 ms); the other 199 take 4 ms each.
    let last = out.last().unwrap().1;
    assert_eq!(last - step, Duration::from_millis(1 + 199 * 4));
    assert_eq!(p.params().rate, Rate::mbps(2));
    let mut deq = 0;
    p.visit_stats(&mut |_, st| deq += st.deq_packets);
    assert_eq!(deq, 300, "counters right");
}

#[test]
fn a_hold_keeps_the_link_silent_for_its_length_and_loses_nothing() {
    // 100 packets of 1000 B at 8 Mbit/s (1 ms each), waiting at t0. A hold
    // of 30 ms at 10 ms: the packet in service at 10 ms (its turn came at
    // 10 ms) still goes, then the link is silent until 41 ms, and the rest
    // follows at the rate.
    let mut p = Pipe::new(params(Rate::mbps(8), Duration::ZERO), fifo_leaf(10_000));
    let t0 = Instant(1_000_000_000);
    let at = t0 + Duration::from_millis(10);
    let (out, drops) = serve_with_event(&mut p, 100, t0, at, |p, drops| {
        assert!(p.hold(Duration::from_millis(30), at, drops));
    });
    assert!(drops.is_empty());
    assert_eq!(out.len(), 100, "nothing lost");
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
    // Exits are serialisation ends: 1, 2, … 11 ms (the 11th began at 10).
    let by_hold = out
        .iter()
        .filter(|(_, t)| *t <= at + Duration::from_millis(1))
        .count();
    assert_eq!(by_hold, 11, "{out:?}");
    let next = out[11].1;
    assert_eq!(
        next - t0,
        Duration::from_millis(11 + 30 + 1),
        "silent for the hold"
    );
    let last = out.last().unwrap().1;
    assert_eq!(last - next, Duration::from_millis(88), "then at the rate");
    assert_eq!(p.params().rate, Rate::mbps(8), "the rate is unchanged");
}

#[test]
fn a_hold_lets_small_packets_by_at_the_rate_and_ends_their_time_later() {
    // 8 Mbit/s: 100 B take 0.1 ms, 1000 B 1 ms. A hold of 30 ms at t0;
    // ten ACK-sized packets at 5 ms leave one after the other at the rate
    // (5.1 … 6.0 ms); a full-sized one at 6 ms waits for the hold's end,
    // moved by the small ones' 1 ms, and leaves at 31 + 1 ms.
    let mut p = Pipe::new(params(Rate::mbps(8), Duration::ZERO), fifo_leaf(100));
    let t0 = Instant(1_000_000_000);
    let us = |n: u64| t0 + Duration::from_micros(n);
    assert!(p.hold(Duration::from_millis(30), t0, &mut Vec::new()));
    let mut arrivals: Vec<(Instant, Packet)> = (0..10).map(|i| (us(5_000), pkt(i, 100))).collect();
    arrivals.push((us(6_000), pkt(10, 1000)));
    let out = drive(&mut p, &arrivals);
    let small: Vec<Instant> = out.iter().filter(|(id, _)| *id < 10).map(|o| o.1).collect();
    let want: Vec<Instant> = (1..=10).map(|k| us(5_000 + 100 * k)).collect();
    assert_eq!(small, want);
    assert_eq!(out.last(), Some(&(10, us(32_000))), "{out:?}");
    assert_eq!(out.len(), 11, "nothing lost");
}
