use super::*;
use crate::testing::{check_random, fifo_leaf, ids_served, quick_codel, quick_red, OpSpace};

fn fifo(limit: u32) -> Box<dyn Qdisc> {
    fifo_leaf(limit as usize)
}

fn pkt(id: u64, class: u32) -> Packet {
    Packet::synthetic(id, 100, id, ClassId(class))
}

fn three() -> Priq {
    let mut q = Priq::new();
    q.add_class(ClassId(1), 1, fifo(10_000)).unwrap();
    q.add_class(ClassId(2), 7, fifo(10_000)).unwrap();
    q.add_class(ClassId(3), 15, fifo(10_000)).unwrap();
    q
}

#[test]
fn config_errors() {
    let mut q = Priq::new();
    assert_eq!(
        q.add_class(ClassId(1), 16, fifo(1)),
        Err(PriqError::PriorityOutOfRange { priority: 16 })
    );
    assert_eq!(
        q.add_class(ClassId::ROOT, 1, fifo(1)),
        Err(PriqError::ReservedId)
    );
    q.add_class(ClassId(1), 1, fifo(1)).unwrap();
    assert_eq!(
        q.add_class(ClassId(1), 2, fifo(1)),
        Err(PriqError::DuplicateClass(ClassId(1)))
    );
    assert_eq!(
        q.set_default(ClassId(9)),
        Err(PriqError::UnknownClass(ClassId(9)))
    );
    q.add_class(ClassId(1 << 20), 3, fifo(1)).unwrap();
    assert!(q.class(ClassId(1 << 20)).is_some());
    assert!(q.set_default(ClassId(1 << 20)).is_ok());
}

#[test]
fn strict_order_never_serves_lower_while_higher_queued() {
    let mut q = three();
    let mut drops = Vec::new();
    let mut rng = crate::testing::Rng::new(7);
    let prio = |c: ClassId| match c.0 {
        1 => 1u8,
        2 => 7,
        _ => 15,
    };
    let mut resident = [0usize; 4];
    let mut id = 0;
    // Random interleaving of arrivals and departures; after each
    // departure, no class of higher priority may still hold packets.
    for step in 0..5_000 {
        if rng.below(3) != 0 {
            let c = 1 + rng.below(3) as u32;
            id += 1;
            assert_eq!(
                q.enqueue(pkt(id, c), Instant(step), &mut drops),
                Enqueue::Queued
            );
            resident[c as usize] += 1;
        } else if let Some(p) = q.dequeue(Instant(step), &mut drops) {
            resident[p.class.0 as usize] -= 1;
            for c in 1..=3u32 {
                if prio(ClassId(c)) > prio(p.class) {
                    assert_eq!(
                        resident[c as usize], 0,
                        "step {step}: served {:?} over {c}",
                        p.class
                    );
                }
            }
        } else {
            assert_eq!(resident.iter().sum::<usize>(), 0);
        }
    }
    assert!(drops.is_empty());
}

#[test]
fn fifo_inside_a_class_and_round_robin_within_priority() {
    let mut q = Priq::new();
    q.add_class(ClassId(1), 4, fifo(10_000)).unwrap();
    q.add_class(ClassId(2), 4, fifo(10_000)).unwrap();
    let mut drops = Vec::new();
    for id in 0..6 {
        q.enqueue(pkt(id, 1), Instant(0), &mut drops);
    }
    for id in 6..9 {
        q.enqueue(pkt(id, 2), Instant(0), &mut drops);
    }
    let order = ids_served(&mut q, Instant(1), &mut drops);
    assert_eq!(order, vec![0, 6, 1, 7, 2, 8, 3, 4, 5]);
}

#[test]
fn default_class_routing_and_noclass() {
    let mut q = three();
    let mut drops = Vec::new();
    assert_eq!(
        q.enqueue(pkt(1, 42), Instant(0), &mut drops),
        Enqueue::Rejected
    );
    assert_eq!(drops.pop().map(|d| d.reason), Some(DropReason::NoClass));
    assert_eq!(q.stats().drop_packets[DropReason::NoClass.index()], 1);
    q.set_default(ClassId(1)).unwrap();
    assert_eq!(
        q.enqueue(pkt(2, 42), Instant(0), &mut drops),
        Enqueue::Queued
    );
    assert_eq!(q.class(ClassId(1)).map(|c| c.len()), Some(1));
    assert_eq!(q.len(), 1);
}

#[test]
fn child_drops_are_accounted() {
    let mut q = Priq::new();
    q.add_class(ClassId(1), 0, fifo(2)).unwrap();
    let mut drops = Vec::new();
    for id in 0..3 {
        q.enqueue(pkt(id, 1), Instant(0), &mut drops);
    }
    assert_eq!(drops.len(), 1);
    assert_eq!(q.len(), 2);
    assert_eq!(q.backlog_bytes(), 200);
    let mut seen = Vec::new();
    q.visit_stats(&mut |id, st| seen.push((id, st.enq_packets, st.total_drops())));
    assert_eq!(seen, vec![(ClassId::ROOT, 2, 1), (ClassId(1), 2, 1)]);
}

#[test]
fn peeked_packet_is_the_one_dequeued() {
    let mut q = three();
    let mut drops = Vec::new();
    q.enqueue(
        Packet::synthetic(1, 300, 1, ClassId(1)),
        Instant(0),
        &mut drops,
    );
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(300));
    // Same priority as the peeked class (a second class at 1 would be
    // served after it anyway): the peek stands.
    q.enqueue(
        Packet::synthetic(2, 500, 2, ClassId(1)),
        Instant(0),
        &mut drops,
    );
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(300));
    assert_eq!(ids_served(&mut q, Instant(0), &mut drops), [1, 2]);
}

#[test]
fn a_higher_priority_arrival_goes_before_a_peeked_packet() {
    // The token bucket peeks a bulk frame and waits for its tokens; a
    // ping (class 3, priority 15) arriving meanwhile must leave first.
    let mut q = three();
    let mut drops = Vec::new();
    for id in [1, 2] {
        q.enqueue(
            Packet::synthetic(id, 1500, 1, ClassId(1)),
            Instant(0),
            &mut drops,
        );
    }
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(1500));
    q.enqueue(
        Packet::synthetic(3, 98, 2, ClassId(3)),
        Instant(0),
        &mut drops,
    );
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(98));
    // A lower priority than the new peek's does not take it back.
    q.enqueue(
        Packet::synthetic(4, 60, 3, ClassId(2)),
        Instant(0),
        &mut drops,
    );
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(98));
    let order = ids_served(&mut q, Instant(0), &mut drops);
    assert_eq!(order, vec![3, 4, 1, 2]);
    assert_eq!(q.len(), 0);
}

#[test]
fn model_check_many_classes() {
    let space = OpSpace::default().with_classes(1..=6).with_flows(24);
    let r = check_random(
        || {
            let mut q = Priq::new();
            for c in 1..=6u32 {
                // Two classes share each of priorities 0, 5 and 15.
                q.add_class(ClassId(c), [0, 5, 15][(c % 3) as usize], fifo(8))
                    .unwrap();
            }
            Box::new(q)
        },
        &space,
        300,
        300,
    );
    assert!(r.dequeued > 0 && r.dropped > 0, "{r:?}");
}

#[test]
fn model_check_default_routing() {
    // Classes 1..=4 are generated; only 1 and 2 exist, 2 is the default.
    let space = OpSpace::default().with_classes(1..=4).with_flows(16);
    let r = check_random(
        || {
            let mut q = Priq::new();
            q.add_class(ClassId(1), 3, fifo(10)).unwrap();
            q.add_class(ClassId(2), 9, fifo(10)).unwrap();
            q.set_default(ClassId(2)).unwrap();
            Box::new(q)
        },
        &space,
        200,
        300,
    );
    assert!(r.dequeued > 0, "{r:?}");
}

#[test]
fn model_check_every_leaf_kind_as_child() {
    use crate::codel::Codel;
    use crate::fq_codel::{self, FqCodel};
    use crate::red::{self, Red, Rio};
    use sluice_time::Duration;
    let space = OpSpace::default().with_classes(1..=5).with_flows(20);
    let r = check_random(
        || {
            let aqm = quick_codel();
            let mut q = Priq::new();
            q.add_class(ClassId(1), 2, fifo(6)).unwrap();
            q.add_class(ClassId(2), 9, Box::new(Codel::new(aqm, 8)))
                .unwrap();
            let fq = FqCodel::new(fq_codel::Params {
                flows: 4,
                limit_packets: 10,
                interval: Duration::from_millis(20),
                ..fq_codel::Params::default()
            });
            q.add_class(ClassId(3), 9, Box::new(fq)).unwrap();
            let red = Red::new(quick_red());
            q.add_class(ClassId(4), 15, Box::new(red)).unwrap();
            let rio = Rio::new(red::RioParams {
                limit_packets: 10,
                weight: 1,
                ..red::RioParams::default()
            });
            q.add_class(ClassId(5), 0, Box::new(rio)).unwrap();
            Box::new(q)
        },
        &space,
        300,
        400,
    );
    assert!(r.dequeued > 0 && r.dropped > 0 && r.marks > 0, "{r:?}");
}

#[test]
fn a_classful_childs_packets_count_once_in_the_root() {
    // A PRIQ under a PRIQ's class 1 (both sort by the packet's class):
    // the inner one reports its root and its classes; the outer root
    // takes the inner root's figures alone, not its class 1's again.
    let mut outer = Priq::new();
    outer.add_class(ClassId(1), 1, Box::new(three())).unwrap();
    outer.add_class(ClassId(2), 2, fifo(10)).unwrap();
    let mut drops = Vec::new();
    for (id, class) in [(0, 1), (1, 1), (2, 2)] {
        outer.enqueue(pkt(id, class), Instant::ZERO, &mut drops);
    }
    assert_eq!(outer.class(ClassId(1)).unwrap().root_stats().enq_packets, 2);
    assert_eq!(outer.root_stats().enq_packets, 3);
    assert_eq!(outer.stats().enq_packets, 3);
}
