//! The Qdisc contract, validation, stats, purge, the FIFO reference.

use super::support::*;
use crate::testing::Lossy;
use std::collections::VecDeque;

#[test]
fn random_ops_keep_the_contract() {
    let link = Rate::mbps(1);
    let make = || -> Box<dyn Qdisc> {
        let mut q = Hfsc::new(link);
        q.add_class(ClassId(1), None, ls(Rate::kbps(500)), None)
            .unwrap();
        let rt_ls = ClassParams {
            rt: Some(ServiceCurve {
                m1: Rate::kbps(400),
                d: Duration::from_millis(20),
                m2: Rate::kbps(100),
            }),
            ls: lin(Rate::kbps(200)),
            ul: None,
        };
        q.add_class(ClassId(2), Some(ClassId(1)), rt_ls, Fifo::boxed(10))
            .unwrap();
        let held = ClassParams {
            ls: lin(Rate::kbps(300)),
            ul: lin(Rate::kbps(50)),
            rt: None,
        };
        q.add_class(ClassId(3), Some(ClassId(1)), held, Fifo::boxed(10))
            .unwrap();
        let rt_only = rt(Rate::kbps(100));
        q.add_class(ClassId(4), None, rt_only, Fifo::boxed(10))
            .unwrap();
        let convex = ClassParams {
            ls: Some(ServiceCurve {
                m1: Rate::ZERO,
                d: Duration::from_millis(10),
                m2: Rate::kbps(300),
            }),
            ul: lin(Rate::kbps(200)),
            rt: None,
        };
        q.add_class(ClassId(5), None, convex, Fifo::boxed(10))
            .unwrap();
        q.set_default(ClassId(5)).unwrap();
        Box::new(q)
    };
    // Class 9 does not exist: those packets go to the default.
    let space = OpSpace::default()
        .with_classes([2, 3, 4, 5, 9])
        .with_flows(10)
        .with_max_advance(Duration::from_millis(5));
    let r = check_random(make, &space, 60, 400);
    assert!(r.dequeued > 1000, "{r:?}");
    assert!(
        r.throttled > 50,
        "the upper-limit path was not exercised: {r:?}"
    );
    assert!(r.dropped > 0, "{r:?}");
}

/// pf's `queue q bandwidth 100% qlimit 9 default` at 1 Mbit/s: a 9-packet
/// drop-tail FIFO served at link rate. Compared step by step with a model.
#[test]
fn one_default_class_is_a_plain_fifo() {
    let link = Rate::mbps(1);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(1), None, ls(link), Fifo::boxed(9))
        .unwrap();
    q.set_default(ClassId(1)).unwrap();
    let mut model: VecDeque<u64> = VecDeque::new();
    let mut drops = Vec::new();
    let mut now = Instant(1_000_000);
    let mut link_free = now;
    let mut next_arrival = now;
    let mut id = 0u64;
    let (mut sent, mut dropped) = (0, 0);
    // 2 s of arrivals at twice the link rate, then drain.
    while now < Instant(2_000_000_000) || !model.is_empty() {
        if now >= next_arrival && now < Instant(2_000_000_000) {
            id += 1;
            // Unknown class 77: goes to the default.
            let len = 200 + (id as u32 * 397) % 1300;
            let r = q.enqueue(Packet::synthetic(id, len, 0, ClassId(77)), now, &mut drops);
            if model.len() < 9 {
                model.push_back(id);
                assert_eq!(r, Enqueue::Queued);
            } else {
                assert_eq!(r, Enqueue::Rejected);
                assert_eq!(
                    drops.pop().map(|d| (d.pkt.id, d.reason)),
                    Some((id, DropReason::QueueFull))
                );
                dropped += 1;
            }
            next_arrival = now + Duration(link.tx_time(len as u64).0 / 2);
        }
        if now >= link_free {
            let p = q.dequeue(now, &mut drops);
            assert_eq!(p.as_ref().map(|p| p.id), model.pop_front(), "at {now:?}");
            if let Some(p) = p {
                link_free = now + link.tx_time(p.cost as u64);
                sent += 1;
            }
            assert!(q.next_wakeup().is_none(), "a plain FIFO is never throttled");
        }
        assert_eq!(q.len(), model.len());
        now = match (now < Instant(2_000_000_000), model.is_empty()) {
            (true, _) => next_arrival.min(link_free.max(now + Duration(1))),
            (false, _) => link_free.max(now + Duration(1)),
        };
    }
    assert!(drops.is_empty());
    assert!(sent > 100 && dropped > 100, "sent {sent} dropped {dropped}");
}

#[test]
fn tree_validation_names_the_problem() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    let e = |r: Result<(), HfscError>| r.unwrap_err();
    assert_eq!(
        e(q.add_class(ClassId::ROOT, None, ls(link), Fifo::boxed(1))),
        HfscError::ReservedId(ClassId::ROOT)
    );
    q.add_class(ClassId(1), None, ls(link.percent(50)), Fifo::boxed(5))
        .unwrap();
    assert_eq!(
        e(q.add_class(ClassId(1), None, ls(link), Fifo::boxed(1))),
        HfscError::Duplicate(ClassId(1))
    );
    assert_eq!(
        e(q.add_class(ClassId(2), Some(ClassId(1)), ls(link), Fifo::boxed(1))),
        HfscError::ParentIsLeaf {
            class: ClassId(2),
            parent: ClassId(1)
        }
    );
    assert_eq!(
        e(q.add_class(ClassId(2), Some(ClassId(9)), ls(link), Fifo::boxed(1))),
        HfscError::UnknownParent {
            class: ClassId(2),
            parent: ClassId(9)
        }
    );
    assert_eq!(
        e(q.add_class(ClassId(2), None, ClassParams::default(), Fifo::boxed(1))),
        HfscError::NoCurve(ClassId(2))
    );
    assert_eq!(
        e(q.add_class(ClassId(2), None, rt(link), None)),
        HfscError::InteriorNeedsLinkShare(ClassId(2))
    );
    let rt_ls = ClassParams {
        ls: lin(link),
        ..rt(link)
    };
    assert_eq!(
        e(q.add_class(ClassId(2), None, rt_ls, None)),
        HfscError::RealTimeOnInterior(ClassId(2))
    );
    let ul = ClassParams {
        ul: lin(link),
        ..rt(link)
    };
    assert_eq!(
        e(q.add_class(ClassId(2), None, ul, Fifo::boxed(1))),
        HfscError::UpperLimitWithoutLinkShare(ClassId(2))
    );
    assert_eq!(
        e(q.add_class(ClassId(2), None, ls(Rate::ZERO), Fifo::boxed(1))),
        HfscError::ZeroRate {
            class: ClassId(2),
            curve: "linkshare"
        }
    );
    q.add_class(ClassId(2), None, rt(link.percent(60)), Fifo::boxed(1))
        .unwrap();
    let err = e(q.add_class(ClassId(3), None, rt(link.percent(50)), Fifo::boxed(1)));
    assert_eq!(
        err,
        HfscError::RealTimeOverbooked {
            class: ClassId(3),
            sum: link.percent(110),
            link
        }
    );
    assert!(err.to_string().contains("11Mb"), "{err}");
    q.add_class(ClassId(4), None, ls(link.percent(10)), None)
        .unwrap();
    assert_eq!(
        q.set_default(ClassId(4)),
        Err(HfscError::DefaultNotLeaf(ClassId(4)))
    );
    assert_eq!(
        q.set_default(ClassId(5)),
        Err(HfscError::UnknownClass(ClassId(5)))
    );
    // A refused class leaves no trace: id 3 can still be added.
    q.add_class(
        ClassId(3),
        Some(ClassId(4)),
        ls(link.percent(10)),
        Fifo::boxed(1),
    )
    .unwrap();
}

#[test]
fn without_default_unknown_class_is_dropped_and_counted() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(10), None, ls(link), None).unwrap();
    q.add_class(ClassId(11), Some(ClassId(10)), ls(link), Fifo::boxed(5))
        .unwrap();
    let mut drops = Vec::new();
    // Unknown, and interior: neither holds packets.
    for (id, class) in [(1, 99), (2, 10)] {
        let r = q.enqueue(
            Packet::synthetic(id, 100, 0, ClassId(class)),
            Instant(0),
            &mut drops,
        );
        assert_eq!(r, Enqueue::Rejected);
        assert_eq!(drops.pop().map(|d| d.reason), Some(DropReason::NoClass));
    }
    let mut ect = Packet::synthetic(3, 100, 0, ClassId(11));
    ect.ecn = crate::Ecn::Ect0;
    assert_eq!(q.enqueue(ect, Instant(0), &mut drops), Enqueue::Queued);
    let mut seen = Vec::new();
    q.visit_stats(&mut |id, s| {
        let no_class = s.drop_packets[DropReason::NoClass.index()];
        seen.push((id.0, s.enq_packets, s.qlen, no_class, s.ecn_marks))
    });
    // Parents first; the root sums its subtree and holds the no-class drops;
    // the leaf's AQM marks show up on the leaf and its ancestors.
    assert_eq!(
        seen,
        vec![(0, 1, 1, 2, 1), (10, 1, 1, 0, 1), (11, 1, 1, 0, 1)]
    );
}

#[test]
fn peek_then_dequeue_gives_the_peeked_packet() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    let rt = ClassParams {
        rt: lin(Rate::mbps(2)),
        ls: lin(Rate::mbps(2)),
        ul: None,
    };
    q.add_class(ClassId(1), None, rt, Fifo::boxed(50)).unwrap();
    q.add_class(ClassId(2), None, ls(Rate::mbps(8)), Fifo::boxed(50))
        .unwrap();
    let mut drops = Vec::new();
    let mut now = Instant(1_000);
    for i in 0..40u64 {
        let class = ClassId(1 + (i % 2) as u32);
        q.enqueue(
            Packet::synthetic(i + 1, 100 + i as u32 * 30, 0, class),
            now,
            &mut drops,
        );
    }
    // Bounded by the 40 packets queued.
    while let Some(cost) = q.peek_len(now, &mut drops) {
        // A packet arriving between peek and dequeue does not change the pick.
        q.enqueue(
            Packet::synthetic(1000 + now.0, 60, 0, ClassId(2)),
            now,
            &mut drops,
        );
        let p = q.dequeue(now, &mut drops).unwrap();
        assert_eq!(p.cost, cost);
        now += link.tx_time(cost as u64);
        if now > Instant(1_000_000_000) {
            break;
        }
    }
    assert!(drops.is_empty());
}

#[test]
fn a_class_becoming_active_after_a_peek_may_take_its_place() {
    // The token bucket above peeks a bulk packet and waits for its tokens;
    // a ping arriving meanwhile in an idle real-time class has the earlier
    // deadline and goes first, as it would have if it had come before.
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(1), None, rt(Rate::mbps(1)), Fifo::boxed(50))
        .unwrap();
    q.add_class(ClassId(2), None, ls(Rate::mbps(9)), Fifo::boxed(50))
        .unwrap();
    let mut drops = Vec::new();
    let now = Instant(1_000);
    for i in 0..3u64 {
        q.enqueue(
            Packet::synthetic(i + 1, 1500, 0, ClassId(2)),
            now,
            &mut drops,
        );
    }
    assert_eq!(q.peek_len(now, &mut drops), Some(1500));
    q.enqueue(Packet::synthetic(9, 98, 0, ClassId(1)), now, &mut drops);
    assert_eq!(q.peek_len(now, &mut drops), Some(98));
    assert_eq!(q.dequeue(now, &mut drops).map(|p| p.id), Some(9));
    assert_eq!(q.dequeue(now, &mut drops).map(|p| p.id), Some(1));
}

#[test]
fn purge_gives_everything_back_and_the_tree_restarts() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    let p = ClassParams {
        ls: lin(link.percent(50)),
        ul: lin(link.percent(10)),
        rt: lin(link.percent(10)),
    };
    q.add_class(ClassId(1), None, p, Fifo::boxed(50)).unwrap();
    q.add_class(ClassId(2), None, ls(link.percent(50)), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    sim.saturate(&[1, 2], Duration::from_millis(300));
    let resident = sim.q.len();
    assert!(resident > 0);
    let mut drops = Vec::new();
    sim.q.purge(&mut drops);
    assert_eq!(drops.len(), resident);
    assert!(drops.iter().all(|d| d.reason == DropReason::Purge));
    assert_eq!(
        (sim.q.len(), sim.q.backlog_bytes(), sim.q.next_wakeup()),
        (0, 0, None)
    );
    // After the purge the shares are those of a fresh tree.
    let sent = sim.saturate(&[1, 2], Duration::from_secs(3));
    assert_share(&sent, 1, 0.10, 0.02, "after the purge");
}

#[test]
fn random_ops_on_a_deep_tree_with_many_upper_limits() {
    let link = Rate::mbps(2);
    let make = || -> Box<dyn Qdisc> {
        let mut q = Hfsc::new(link);
        let mut id = 1;
        for p in 0..3u32 {
            let pid = 100 + p;
            let ul = (p == 1).then(|| ServiceCurve::linear(link.percent(30)));
            q.add_class(
                ClassId(pid),
                None,
                ClassParams {
                    ls: lin(link.percent(30)),
                    ul,
                    rt: None,
                },
                None,
            )
            .unwrap();
            for c in 0..3u32 {
                let conc = ServiceCurve {
                    m1: link.percent(20),
                    d: Duration::from_millis(5),
                    m2: link.percent(5),
                };
                let params = ClassParams {
                    rt: (c == 0).then_some(conc),
                    ls: lin(link.percent(10)),
                    ul: (c == 1).then(|| ServiceCurve::linear(link.percent(5))),
                };
                q.add_class(ClassId(id), Some(ClassId(pid)), params, Fifo::boxed(8))
                    .unwrap();
                id += 1;
            }
        }
        Box::new(q)
    };
    let space = OpSpace::default()
        .with_classes(1..=9)
        .with_flows(18)
        .with_max_advance(Duration::from_millis(3));
    let r = check_random(make, &space, 60, 500);
    assert!(r.dequeued > 1000 && r.throttled > 50, "{r:?}");
}

#[test]
fn extreme_curves_neither_panic_nor_lose_packets() {
    let make = || -> Box<dyn Qdisc> {
        let mut q = Hfsc::new(Rate(u64::MAX));
        let huge = Rate(u64::MAX / 4);
        let params = [
            // A crawling upper limit: one packet every few thousand seconds.
            ClassParams {
                ls: lin(Rate::bps(1)),
                ul: lin(Rate::bps(1)),
                rt: None,
            },
            // Rates near the top of u64 and a near-infinite first segment.
            ClassParams {
                rt: Some(ServiceCurve {
                    m1: huge,
                    d: Duration(u64::MAX / 2),
                    m2: Rate::bps(3),
                }),
                ls: Some(ServiceCurve {
                    m1: Rate::ZERO,
                    d: Duration::MAX,
                    m2: huge,
                }),
                ul: None,
            },
            ClassParams {
                rt: Some(ServiceCurve {
                    m1: Rate::ZERO,
                    d: Duration::from_secs(1),
                    m2: Rate::bps(7),
                }),
                ls: lin(Rate::bps(1)),
                ul: Some(ServiceCurve {
                    m1: huge,
                    d: Duration::from_millis(1),
                    m2: Rate::bps(1),
                }),
            },
        ];
        for (i, p) in params.into_iter().enumerate() {
            q.add_class(ClassId(i as u32 + 1), None, p, Fifo::boxed(6))
                .unwrap();
        }
        Box::new(q)
    };
    let space = OpSpace::default()
        .with_classes([1, 2, 3])
        .with_max_advance(Duration::from_secs(3));
    let r = check_random(make, &space, 30, 300);
    assert!(r.dequeued > 100 && r.throttled > 10, "{r:?}");
}

#[test]
fn leaves_that_drop_on_peek_and_dequeue_keep_the_books_straight() {
    let link = Rate::mbps(1);
    let make = || -> Box<dyn Qdisc> {
        let mut q = Hfsc::new(link);
        let rt = ServiceCurve {
            m1: Rate::kbps(300),
            d: Duration::from_millis(10),
            m2: Rate::kbps(100),
        };
        let classes = [
            ClassParams {
                rt: Some(rt),
                ls: lin(Rate::kbps(300)),
                ul: None,
            },
            ClassParams {
                ls: lin(Rate::kbps(300)),
                ul: lin(Rate::kbps(100)),
                rt: None,
            },
            ClassParams {
                rt: Some(rt),
                ..Default::default()
            },
        ];
        for (i, p) in classes.into_iter().enumerate() {
            q.add_class(ClassId(i as u32 + 1), None, p, Some(Lossy::boxed(8, 3, 5)))
                .unwrap();
        }
        Box::new(q)
    };
    let space = OpSpace::default()
        .with_classes([1, 2, 3])
        .with_max_advance(Duration::from_millis(5));
    let r = check_random(make, &space, 60, 400);
    assert!(
        r.dequeued > 1000 && r.dropped > 500 && r.throttled > 20,
        "{r:?}"
    );
    // And the statistics agree with what the model saw, per reason.
    let mut q = make();
    let mut rng = crate::testing::Rng::new(99);
    let ops = crate::testing::gen_ops(&mut rng, &space, 2000);
    let r = crate::testing::check_ops(q.as_mut(), &space, &ops);
    let mut root = QueueStats::default();
    q.visit_stats(&mut |id, s| {
        if id == ClassId::ROOT {
            root = s.clone();
        }
    });
    assert_eq!(root.deq_packets, r.dequeued);
    assert_eq!(root.total_drops(), r.dropped);
    assert!(root.drop_packets[DropReason::Aqm.index()] > 0);
}
