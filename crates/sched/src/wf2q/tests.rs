use super::*;
use crate::testing::fifo_leaf;
use crate::testing::{check_random, OpSpace, Rng};

const L_MAX: i64 = 1500;

fn wf2q(weights: &[u32]) -> Wf2q {
    let mut q = Wf2q::new();
    for (n, &w) in weights.iter().enumerate() {
        q.add_class(ClassId(n as u32 + 1), w, fifo_leaf(1_000_000))
            .unwrap();
    }
    q
}

/// Fills every class with `n` packets of random sizes in 40..=1500.
fn fill_random(q: &mut Wf2q, classes: u32, n: u64, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut drops = Vec::new();
    for k in 0..n {
        for c in 1..=classes {
            let len = 40 + rng.below(1461) as u32;
            let p = Packet::synthetic(k * 100 + c as u64, len, c as u64, ClassId(c));
            assert_eq!(q.enqueue(p, Instant(0), &mut drops), Enqueue::Queued);
        }
    }
}

/// Bytes of class 1 over bytes of class 2 in the next `packets` dequeued
/// (every class stays backlogged).
fn byte_ratio(q: &mut Wf2q, packets: u32) -> f64 {
    let mut bytes = [0u64; 3];
    let mut drops = Vec::new();
    for _ in 0..packets {
        let p = q.dequeue(Instant(0), &mut drops).unwrap();
        bytes[p.class.0 as usize] += p.cost as u64;
    }
    bytes[1] as f64 / bytes[2] as f64
}

#[test]
fn weights_10_to_1_share_bytes_10_to_1() {
    let mut q = wf2q(&[10, 1]);
    fill_random(&mut q, 2, 30_000, 7);
    let ratio = byte_ratio(&mut q, 20_000);
    assert!(
        (ratio - 10.0).abs() <= 0.5,
        "byte ratio {ratio:.3}, want 10 ± 5 %"
    );
}

/// Checks, after every packet, while every class is backlogged (so the
/// fluid GPS share of class i is exactly `total·wᵢ/W`):
/// `|sent_i − total·wᵢ/W| ≤ L_max` — neither lag nor lead beyond one maximum
/// packet (WF2Q's worst-case fairness; WF2Q+ keeps it, its `V` never running
/// ahead of the GPS virtual time because `Σ wᵢ·Sᵢ` = bytes sent).
/// Returns (worst lag, worst lead) in bytes.
fn assert_fluid_bounds(weights: &[u32], seed: u64) -> (f64, f64) {
    let n = weights.len() as u32;
    let mut q = wf2q(weights);
    fill_random(&mut q, n, 4_000, seed);
    let w_total: i64 = weights.iter().map(|&w| w as i64).sum();
    let mut sent = vec![0i64; n as usize + 1];
    let mut total = 0i64;
    let mut drops = Vec::new();
    let (mut worst_lag, mut worst_lead) = (0f64, 0f64);
    let mut served = 0u32;
    // Bound: 4000 packets per class; stops at the first class to run dry.
    while (1..=n).all(|c| !q.leaf(ClassId(c)).unwrap().is_empty()) {
        served += 1;
        let p = q.dequeue(Instant(0), &mut drops).unwrap();
        sent[p.class.0 as usize] += p.cost as i64;
        total += p.cost as i64;
        for c in 1..=n as usize {
            let w = weights[c - 1] as i64;
            // Everything scaled by W to stay in integers.
            let diff = sent[c] * w_total - total * w;
            assert!(
                diff <= L_MAX * w_total,
                "class {c} leads: sent {} vs fluid {}",
                sent[c],
                total * w / w_total
            );
            assert!(
                -diff <= L_MAX * w_total,
                "class {c} lags: sent {} vs fluid {}",
                sent[c],
                total * w / w_total
            );
            worst_lag = worst_lag.max(-diff as f64 / w_total as f64);
            worst_lead = worst_lead.max(diff as f64 / w_total as f64);
        }
    }
    assert!(served >= 4_000, "too short a run: {served}");
    assert!(
        worst_lag > 0.0 && worst_lead > 0.0,
        "the check saw no deviation at all"
    );
    (worst_lag, worst_lead)
}

#[test]
fn fluid_bounds_two_classes() {
    for seed in 1..=8 {
        let (lag, lead) = assert_fluid_bounds(&[10, 1], seed);
        eprintln!("10:1 seed {seed}: worst lag {lag:.0} B, lead {lead:.0} B");
    }
}

#[test]
fn fluid_bounds_mixed_weights() {
    for seed in 1..=4 {
        let (lag, lead) = assert_fluid_bounds(&[1, 2, 3, 5, 8, 13, 21, 34, 55, 89], seed);
        eprintln!("fib seed {seed}: worst lag {lag:.0} B, lead {lead:.0} B");
    }
}

#[test]
fn fluid_bounds_equal_weights() {
    // Equal weights: every class's lag stays within one max packet plus 1/16.
    for seed in 1..=4 {
        let (lag, lead) = assert_fluid_bounds(&[7; 16], seed);
        eprintln!("equal seed {seed}: worst lag {lag:.0} B, lead {lead:.0} B");
    }
}

#[test]
fn an_idle_class_banks_no_credit() {
    // Class 2 runs alone for a long time; when class 1 (same weight) comes
    // back it must not catch up on what it "missed": from its return on it
    // leads class 2 by at most one packet.
    let mut q = wf2q(&[1, 1]);
    let mut drops = Vec::new();
    for k in 0..5_000u64 {
        let p = Packet::synthetic(1_000_000 + k, 1000, 2, ClassId(2));
        q.enqueue(p, Instant(0), &mut drops);
    }
    for _ in 0..2_000 {
        assert_eq!(q.dequeue(Instant(0), &mut drops).unwrap().class, ClassId(2));
    }
    for k in 0..1_000u64 {
        let p = Packet::synthetic(k, 1000, 1, ClassId(1));
        q.enqueue(p, Instant(0), &mut drops);
    }
    let mut sent = [0i64; 3];
    for _ in 0..1_000 {
        let p = q.dequeue(Instant(0), &mut drops).unwrap();
        sent[p.class.0 as usize] += p.cost as i64;
        assert!(sent[1] - sent[2] <= 1000, "class 1 ran ahead: {sent:?}");
    }
    assert!((sent[1] - sent[2]).abs() <= 1000);
}

#[test]
fn a_class_that_just_emptied_cannot_reenter_ahead_of_its_finish_tag() {
    // Weight 1 vs 1: class 1 sends one packet, empties and immediately gets
    // another; it lingers with F ahead of V, so its next packet starts at F
    // and class 2 goes first: strict alternation, not two in a row.
    let mut q = wf2q(&[1, 1]);
    let mut drops = Vec::new();
    for k in 0..10u64 {
        q.enqueue(
            Packet::synthetic(100 + k, 1000, 2, ClassId(2)),
            Instant(0),
            &mut drops,
        );
    }
    let mut order = Vec::new();
    for k in 0..6u64 {
        q.enqueue(
            Packet::synthetic(k, 1000, 1, ClassId(1)),
            Instant(0),
            &mut drops,
        );
        order.push(q.dequeue(Instant(0), &mut drops).unwrap().class.0);
        order.push(q.dequeue(Instant(0), &mut drops).unwrap().class.0);
    }
    let ones = order.iter().filter(|&&c| c == 1).count();
    assert_eq!(ones, 6, "{order:?}");
    assert!(
        order.windows(3).all(|w| !(w[0] == w[1] && w[1] == w[2])),
        "{order:?}"
    );
}

#[test]
fn configuration_errors_are_reported() {
    let mut q = wf2q(&[1]);
    assert_eq!(
        q.add_class(ClassId(2), 0, fifo_leaf(1)),
        Err(ClassError::Weight(0))
    );
    assert_eq!(
        q.add_class(ClassId(1), 5, fifo_leaf(1)),
        Err(ClassError::Duplicate(ClassId(1)))
    );
    assert_eq!(
        q.set_default(ClassId(3)),
        Err(ClassError::Unknown(ClassId(3)))
    );
}

#[test]
fn model_checker_three_classes_and_default() {
    let space = OpSpace::default().with_classes([1, 2, 3, 42]);
    let r = check_random(
        || {
            let mut q = Wf2q::new();
            q.add_class(ClassId(1), 1, fifo_leaf(50)).unwrap();
            q.add_class(ClassId(2), 10, fifo_leaf(50)).unwrap();
            q.add_class(ClassId(3), 100, fifo_leaf(3)).unwrap();
            q.set_default(ClassId(1)).unwrap();
            Box::new(q)
        },
        &space,
        64,
        400,
    );
    assert!(r.dequeued > 1000 && r.dropped > 0);
}

#[test]
fn model_checker_without_default() {
    let space = OpSpace::default().with_classes([1, 2, 9]);
    let r = check_random(|| Box::new(wf2q(&[3, 1])), &space, 32, 400);
    assert!(r.dropped > 0 && r.dequeued > 0);
}

#[test]
fn changing_a_weight_changes_the_share() {
    let mut q = wf2q(&[1, 1]);
    fill_random(&mut q, 2, 20_000, 4);
    q.set_weight(ClassId(1), 4).unwrap();
    assert_eq!(q.set_weight(ClassId(1), 0), Err(ClassError::Weight(0)));
    let ratio = byte_ratio(&mut q, 10_000);
    assert!((ratio - 4.0).abs() <= 0.2, "ratio {ratio:.3}, want 4 ± 5 %");
}
