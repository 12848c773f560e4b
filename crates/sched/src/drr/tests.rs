use super::*;
use crate::testing::fifo_leaf;
use crate::testing::{check_random, OpSpace};
use crate::DropReason;

const SIZES: [u32; 7] = [1500, 64, 576, 1200, 40, 900, 1500];

fn drr(base: u32, weights: &[u32]) -> Drr {
    let mut d = Drr::new(base);
    for (n, &w) in weights.iter().enumerate() {
        d.add_class(ClassId(n as u32 + 1), w, fifo_leaf(100_000))
            .unwrap();
    }
    d
}

fn fill(d: &mut Drr, class: u32, n: u64, id0: u64) {
    let mut drops = Vec::new();
    for k in 0..n {
        let len = SIZES[((k + class as u64) % SIZES.len() as u64) as usize];
        let p = Packet::synthetic(id0 + k, len, class as u64, ClassId(class));
        assert_eq!(d.enqueue(p, Instant(0), &mut drops), Enqueue::Queued);
    }
}

#[test]
fn weights_10_to_1_share_bytes_10_to_1() {
    let mut d = drr(1514, &[10, 1]);
    fill(&mut d, 1, 20_000, 0);
    fill(&mut d, 2, 20_000, 1_000_000);
    let mut bytes = [0u64; 3];
    let mut drops = Vec::new();
    // Serve while both are backlogged (class 2 cannot run dry: it needs
    // 10x fewer packets than class 1 sends).
    for _ in 0..15_000 {
        let p = d.dequeue(Instant(0), &mut drops).unwrap();
        bytes[p.class.0 as usize] += p.cost as u64;
    }
    let ratio = bytes[1] as f64 / bytes[2] as f64;
    assert!(
        (ratio - 10.0).abs() <= 0.5,
        "byte ratio {ratio:.3}, want 10 ± 5 %"
    );
}

#[test]
fn normalised_service_differs_by_at_most_one_quantum_plus_one_packet() {
    // Lemma 1 (Shreedhar & Varghese): after k laps a backlogged class has
    // sent k·Q − deficit with 0 ≤ deficit < max_cost; in the middle of a lap
    // some classes are one quantum ahead. So at every instant
    // |sent_i/w_i − sent_j/w_j| ≤ base + max_cost / min_weight.
    let weights = [1u32, 2, 5, 3];
    let base = 1500u64;
    let mut d = drr(base as u32, &weights);
    for c in 1..=4u32 {
        fill(&mut d, c, 5_000, c as u64 * 1_000_000);
    }
    let mut sent = [0u64; 5];
    let mut drops = Vec::new();
    for _ in 0..5_000 {
        let p = d.dequeue(Instant(0), &mut drops).unwrap();
        sent[p.class.0 as usize] += p.cost as u64;
        let norm: Vec<f64> = (1..=4)
            .map(|c| sent[c] as f64 / weights[c - 1] as f64)
            .collect();
        let spread = norm.iter().cloned().fold(f64::MIN, f64::max)
            - norm.iter().cloned().fold(f64::MAX, f64::min);
        assert!(spread <= (base + 1500) as f64, "spread {spread}");
    }
}

#[test]
fn an_idle_class_banks_no_credit() {
    // Quantum 3000. Class 1 sends one 100-byte packet and empties with 2900
    // bytes of unused deficit; class 2 then runs alone for many laps. When
    // class 1 comes back its first turn must be one quantum (two 1500-byte
    // packets), not quantum + leftover (three), nor anything "missed".
    let mut d = drr(3000, &[1, 1]);
    let mut drops = Vec::new();
    d.enqueue(
        Packet::synthetic(1, 100, 1, ClassId(1)),
        Instant(0),
        &mut drops,
    );
    for k in 0..2_000u64 {
        let p = Packet::synthetic(1_000_000 + k, 1500, 2, ClassId(2));
        d.enqueue(p, Instant(0), &mut drops);
    }
    assert_eq!(d.dequeue(Instant(0), &mut drops).unwrap().id, 1);
    for _ in 0..500 {
        assert_eq!(d.dequeue(Instant(0), &mut drops).unwrap().class, ClassId(2));
    }
    for k in 0..100u64 {
        let p = Packet::synthetic(10 + k, 1500, 1, ClassId(1));
        d.enqueue(p, Instant(0), &mut drops);
    }
    // Runs of consecutive class-1 packets from now on: never above a quantum.
    let (mut run_bytes, mut max_run) = (0u64, 0u64);
    for _ in 0..200 {
        let p = d.dequeue(Instant(0), &mut drops).unwrap();
        if p.class == ClassId(1) {
            run_bytes += p.cost as u64;
            max_run = max_run.max(run_bytes);
        } else {
            run_bytes = 0;
        }
    }
    assert_eq!(
        max_run, 3000,
        "a turn is exactly one quantum of 1500-byte packets"
    );
}

#[test]
fn unknown_class_goes_to_default_or_is_refused() {
    let mut d = drr(1500, &[1, 1]);
    let mut drops = Vec::new();
    let stray = Packet::synthetic(1, 100, 0, ClassId(99));
    assert_eq!(
        d.enqueue(stray.clone(), Instant(0), &mut drops),
        Enqueue::Rejected
    );
    assert_eq!(drops.pop().unwrap().reason, DropReason::NoClass);
    assert_eq!(
        d.unclassified().drop_packets[DropReason::NoClass.index()],
        1
    );
    d.set_default(ClassId(2)).unwrap();
    assert_eq!(d.enqueue(stray, Instant(0), &mut drops), Enqueue::Queued);
    let mut got = None;
    d.visit_stats(&mut |id, s| {
        if id == ClassId(2) {
            got = Some(s.enq_packets);
        }
    });
    assert_eq!(got, Some(1));
}

#[test]
fn configuration_errors_are_reported() {
    let mut d = drr(1500, &[1]);
    assert_eq!(
        d.add_class(ClassId(5), 0, fifo_leaf(1)),
        Err(ClassError::Weight(0))
    );
    assert_eq!(
        d.add_class(ClassId(5), 101, fifo_leaf(1)),
        Err(ClassError::Weight(101))
    );
    assert_eq!(
        d.add_class(ClassId(1), 1, fifo_leaf(1)),
        Err(ClassError::Duplicate(ClassId(1)))
    );
    assert_eq!(
        d.set_default(ClassId(7)),
        Err(ClassError::Unknown(ClassId(7)))
    );
}

#[test]
fn leaf_refusals_are_counted_against_the_class() {
    let mut d = Drr::new(1500);
    d.add_class(ClassId(1), 1, fifo_leaf(2)).unwrap();
    let mut drops = Vec::new();
    for id in 0..3 {
        d.enqueue(
            Packet::synthetic(id, 100, 0, ClassId(1)),
            Instant(0),
            &mut drops,
        );
    }
    assert_eq!(drops.len(), 1);
    assert_eq!(d.len(), 2);
    d.visit_stats(&mut |_, s| {
        assert_eq!(s.enq_packets, 2);
        assert_eq!(s.qlen, 2);
        assert_eq!(s.drop_packets[DropReason::QueueFull.index()], 1);
    });
}

/// Three classes and a small default one, model-checked; `wake` is the
/// credit a waking class goes first on (0: the paper's rule).
fn model_check_three_classes(wake: u32) {
    let space = OpSpace::default().with_classes([1, 2, 3]);
    let r = check_random(
        || {
            let mut d = drr(300, &[1, 4, 100]).wake_first(wake);
            d.add_class(ClassId(9), 2, fifo_leaf(3)).unwrap();
            d.set_default(ClassId(9)).unwrap();
            Box::new(d)
        },
        &space,
        64,
        400,
    );
    assert!(r.dequeued > 1000 && r.dropped > 0);
}

#[test]
fn model_checker_three_classes() {
    model_check_three_classes(0);
}

#[test]
fn model_checker_with_unknown_classes_and_tiny_quantum() {
    // Class 7 does not exist (no default): refused. A 1-byte quantum makes
    // dequeue hit its visit guard and return "call again now".
    let space = OpSpace::default().with_classes([1, 2, 7]);
    let r = check_random(|| Box::new(drr(1, &[1, 3])), &space, 16, 300);
    assert!(r.dropped > 0 && r.dequeued > 0);
}

/// `wake_first`: a small packet waking its class goes before the rest of
/// the turn of the class being served; a large one does not, and the waker
/// then takes its place at the tail.
#[test]
fn a_waking_class_goes_first_on_its_small_credit() {
    let order = |wake: u32, len: u32| {
        let mut d = drr(3000, &[1, 10]).wake_first(wake);
        let mut drops = Vec::new();
        for k in 0..10u64 {
            let p = Packet::synthetic(k, 1500, 1, ClassId(1));
            d.enqueue(p, Instant(0), &mut drops);
        }
        // Class 1's turn is two frames: one gone, one left.
        assert_eq!(d.dequeue(Instant(0), &mut drops).unwrap().id, 0);
        let p = Packet::synthetic(100, len, 2, ClassId(2));
        d.enqueue(p, Instant(0), &mut drops);
        (0..4)
            .map(|_| d.dequeue(Instant(0), &mut drops).unwrap().id)
            .collect::<Vec<_>>()
    };
    // The paper's rule: the rest of class 1's turn, then the waker.
    assert_eq!(order(0, 98), [1, 100, 2, 3]);
    // On a quarter quantum the ping goes at once, and class 1's turn goes on.
    assert_eq!(order(378, 98), [100, 1, 2, 3]);
    // A frame over the credit waits at the tail, as without it.
    assert_eq!(order(378, 1500), [1, 100, 2, 3]);
}

#[test]
fn model_checker_three_classes_waking_first() {
    model_check_three_classes(75);
}
