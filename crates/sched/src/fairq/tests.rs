use super::*;
use crate::codel::Codel;
use crate::red::Red;
use crate::testing::{check_random, fifo_leaf, ids_served, quick_codel, quick_red, OpSpace, Rng};

fn fifos(limit: u32) -> LeafFactory {
    Box::new(move || fifo_leaf(limit as usize))
}

/// The flow key of connection `c` (its bucket is `c % buckets`).
fn flow(c: u64) -> u64 {
    c << 32
}

fn pkt(id: u64, len: u32, conn: u64, class: u32) -> Packet {
    Packet::synthetic(id, len, flow(conn), ClassId(class))
}

fn params(priority: u8) -> ClassParams {
    ClassParams {
        priority,
        buckets: 16,
        ..ClassParams::default()
    }
}

/// Class 1 with `low` and class 2 with `high`, each bucket a FIFO of
/// `limit` packets.
fn two_classes(low: ClassParams, high: ClassParams, limit: u32) -> Fairq {
    let mut q = Fairq::new();
    q.add_class(ClassId(1), low, fifos(limit)).unwrap();
    q.add_class(ClassId(2), high, fifos(limit)).unwrap();
    q
}

#[test]
fn config_errors() {
    let mut q = Fairq::new();
    assert_eq!(
        q.add_class(ClassId(1), params(8), fifos(1)),
        Err(FairqError::PriorityOutOfRange { priority: 8 })
    );
    for buckets in [0, 3, 100, 4096] {
        let p = ClassParams {
            buckets,
            ..params(1)
        };
        assert_eq!(
            q.add_class(ClassId(1), p, fifos(1)),
            Err(FairqError::BadBuckets { buckets })
        );
    }
    assert_eq!(
        q.add_class(ClassId::ROOT, params(1), fifos(1)),
        Err(FairqError::ReservedId)
    );
    q.add_class(ClassId(1), params(1), fifos(1)).unwrap();
    assert_eq!(
        q.add_class(ClassId(1), params(2), fifos(1)),
        Err(FairqError::DuplicateClass(ClassId(1)))
    );
    assert_eq!(
        q.add_class(ClassId(2), params(1), fifos(1)),
        Err(FairqError::DuplicatePriority { priority: 1 })
    );
    assert_eq!(
        q.set_default(ClassId(9)),
        Err(FairqError::UnknownClass(ClassId(9)))
    );
    assert!(q.set_default(ClassId(1)).is_ok());
    // The default keeps pointing at its class when a higher one is added.
    q.add_class(ClassId(3), params(7), fifos(4)).unwrap();
    let mut drops = Vec::new();
    q.enqueue(pkt(1, 100, 0, 42), Instant(0), &mut drops);
    assert_eq!(q.class_len(ClassId(1)), Some(1));
    assert_eq!(q.class_len(ClassId(3)), Some(0));
}

#[test]
fn strict_priority_between_classes() {
    let mut q = Fairq::new();
    for (c, p) in [(1u32, 0u8), (2, 3), (3, 7)] {
        q.add_class(ClassId(c), params(p), fifos(10_000)).unwrap();
    }
    let prio = [0u8, 0, 3, 7];
    let mut drops = Vec::new();
    let mut rng = Rng::new(11);
    let mut resident = [0usize; 4];
    let mut id = 0;
    for step in 0..6_000u64 {
        if rng.below(3) != 0 {
            let c = 1 + rng.below(3) as u32;
            id += 1;
            let r = q.enqueue(pkt(id, 100, rng.below(40), c), Instant(step), &mut drops);
            assert_eq!(r, Enqueue::Queued);
            resident[c as usize] += 1;
        } else if let Some(p) = q.dequeue(Instant(step), &mut drops) {
            let c = p.class.0 as usize;
            resident[c] -= 1;
            for o in 1..=3 {
                if prio[o] > prio[c] {
                    assert_eq!(resident[o], 0, "step {step}: class {c} served over {o}");
                }
            }
        } else {
            assert_eq!(resident.iter().sum::<usize>(), 0);
        }
    }
    assert!(drops.is_empty());
}

/// Sends at `rate` for `packets` transmissions, keeping every connection of
/// `conns` (class, conn) backlogged with `len`-byte packets; returns the
/// packets each sent, in the order of `conns`.
fn saturate(q: &mut Fairq, conns: &[(u32, u64)], len: u32, rate: Rate, packets: usize) -> Vec<u64> {
    let mut drops = Vec::new();
    let mut sent = vec![0u64; conns.len()];
    let mut queued = vec![0u64; conns.len()];
    let mut id = 0;
    let mut now = Instant(0);
    for _ in 0..packets {
        for (i, &(c, conn)) in conns.iter().enumerate() {
            while queued[i] - sent[i] < 4 {
                id += 1;
                queued[i] += 1;
                assert_eq!(
                    q.enqueue(pkt(id, len, conn, c), now, &mut drops),
                    Enqueue::Queued
                );
            }
        }
        let p = q.dequeue(now, &mut drops).expect("backlogged");
        let i = conns
            .iter()
            .position(|&(c, conn)| ClassId(c) == p.class && flow(conn) == p.flow)
            .unwrap();
        sent[i] += 1;
        now = Instant(now.0 + rate.tx_time(u64::from(p.cost)).0);
    }
    sent
}

#[test]
fn buckets_share_round_robin_within_one_packet() {
    let mut q = Fairq::new();
    q.add_class(ClassId(1), params(1), fifos(1_000)).unwrap();
    let mut drops = Vec::new();
    // Five connections in five buckets, all backlogged from the start,
    // one of them with ten times as many packets.
    let mut id = 0;
    for conn in 0..5u64 {
        for _ in 0..if conn == 0 { 200 } else { 20 } {
            id += 1;
            q.enqueue(pkt(id, 1000, conn, 1), Instant(0), &mut drops);
        }
    }
    assert_eq!(q.active_buckets(ClassId(1)), Some(5));
    let mut sent = [0u64; 5];
    for n in 0..100 {
        let p = q.dequeue(Instant(n), &mut drops).unwrap();
        sent[(p.flow >> 32) as usize] += 1;
        let (lo, hi) = (sent.iter().min().unwrap(), sent.iter().max().unwrap());
        assert!(hi - lo <= 1, "after {n}: {sent:?}");
    }
    assert_eq!(sent, [20; 5]);
}

#[test]
fn connections_in_one_bucket_share_it() {
    // 16 buckets: connections 1 and 17 hash to one bucket, 2 to another.
    let mut q = Fairq::new();
    q.add_class(ClassId(1), params(1), fifos(1_000)).unwrap();
    let sent = saturate(
        &mut q,
        &[(1, 1), (1, 17), (1, 2)],
        1000,
        Rate::mbps(10),
        3_000,
    );
    assert_eq!(sent[0] + sent[1], sent[2], "{sent:?}");
}

/// A sparse connection (one 100-byte packet every 20 ms, 40 kbit/s) beside
/// `bulk` backlogged ones at 10 Mbit/s: the worst wait of its packets.
fn sparse_wait(hogs: Option<Rate>, bulk: u64) -> Duration {
    let rate = Rate::mbps(10);
    let mut q = Fairq::new();
    let p = ClassParams { hogs, ..params(1) };
    q.add_class(ClassId(1), p, fifos(1_000)).unwrap();
    let mut drops = Vec::new();
    let mut now = Instant(0);
    let mut id = 0;
    let mut next_sparse = Instant(0);
    let mut worst = Duration::ZERO;
    let mut sparse_sent = 0;
    while now.0 < Duration::from_secs(2).0 {
        for conn in 1..=bulk {
            id += 1;
            q.enqueue(pkt(id, 1500, conn, 1), now, &mut drops);
        }
        if now >= next_sparse {
            id += 1;
            let mut s = pkt(id, 100, 0, 1);
            s.enqueued_at = now;
            q.enqueue(s, now, &mut drops);
            next_sparse = Instant(next_sparse.0 + Duration::from_millis(20).0);
        }
        let p = q.dequeue(now, &mut drops).expect("backlogged");
        let done = Instant(now.0 + rate.tx_time(u64::from(p.cost)).0);
        if p.flow == flow(0) {
            worst = worst.max(done.saturating_since(p.enqueued_at));
            sparse_sent += 1;
        }
        now = done;
    }
    assert!(sparse_sent >= 95, "{sparse_sent}");
    worst
}

#[test]
fn hogs_serve_a_light_flow_next() {
    let frame = Rate::mbps(10).tx_time(1500);
    let light = Rate::mbps(10).tx_time(100);
    let with = sparse_wait(Some(Rate::kbps(500)), 8);
    let without = sparse_wait(None, 8);
    eprintln!("sparse flow's worst wait: {with:?} with hogs, {without:?} without");
    // With hogs: the bulk frame on the wire, then its own.
    assert!(with.0 <= frame.0 + light.0, "with hogs: {with:?}");
    // Without: a turn behind every bulk bucket.
    assert!(without.0 >= 7 * frame.0, "without hogs: {without:?}");
}

#[test]
fn a_light_bucket_bursts_until_it_reaches_hogs() {
    // Two backlogged connections; hogs at 3 Mbit/s on a 10 Mbit/s link: a
    // bucket keeps the head until its measured rate reaches 3 Mbit/s, so
    // the round still alternates over time and the split stays fair.
    let mut q = Fairq::new();
    let p = ClassParams {
        hogs: Some(Rate::mbps(3)),
        ..params(1)
    };
    q.add_class(ClassId(1), p, fifos(1_000)).unwrap();
    let sent = saturate(&mut q, &[(1, 1), (1, 2)], 1500, Rate::mbps(10), 4_000);
    let share = sent[0] as f64 / (sent[0] + sent[1]) as f64;
    eprintln!("two hogs' packets: {sent:?}");
    assert!((0.45..=0.55).contains(&share), "{sent:?}");
}

/// Class 2 (priority 7, `bandwidth` `hi`) and class 1 (priority 1) both
/// backlogged at 10 Mbit/s: the share of the high class.
fn high_share(hi: Option<Rate>) -> f64 {
    let high = ClassParams {
        bandwidth: hi,
        ..params(7)
    };
    let mut q = two_classes(params(1), high, 1_000);
    let sent = saturate(&mut q, &[(1, 1), (2, 2)], 1500, Rate::mbps(10), 8_000);
    sent[1] as f64 / (sent[0] + sent[1]) as f64
}

#[test]
fn a_class_over_its_bandwidth_yields_to_a_lower_one() {
    // Without a bandwidth the high class takes everything (strict priority).
    assert_eq!(high_share(None), 1.0);
    // With 2 Mbit/s of 10 it yields once over: about its fifth (the meter
    // reads a little over the rate at each decision, hence the margin).
    let s = high_share(Some(Rate::mbps(2)));
    eprintln!("share of the high class with bandwidth 2Mb of 10Mb: {s:.3}");
    assert!((0.17..=0.25).contains(&s), "{s}");
    let high = ClassParams {
        bandwidth: Some(Rate::mbps(2)),
        ..params(7)
    };
    let mut q = two_classes(params(1), high, 1_000);
    saturate(&mut q, &[(1, 1), (2, 2)], 1500, Rate::mbps(10), 1_000);
    let mut over = 0;
    q.visit_stats(&mut |id, st| {
        if id == ClassId(2) {
            over = st.overlimits;
        }
    });
    assert!(over > 0);
}

#[test]
fn an_idle_lower_class_leaves_the_link_to_the_class_over_its_bandwidth() {
    let high = ClassParams {
        bandwidth: Some(Rate::mbps(2)),
        ..params(7)
    };
    let mut q = two_classes(params(1), high, 1_000);
    let sent = saturate(&mut q, &[(2, 2)], 1500, Rate::mbps(10), 500);
    assert_eq!(sent, vec![500]);
}

#[test]
fn peeked_packet_is_the_one_dequeued() {
    let low = ClassParams {
        hogs: Some(Rate::mbps(1)),
        ..params(1)
    };
    let mut q = two_classes(low, params(7), 100);
    let mut drops = Vec::new();
    q.enqueue(pkt(1, 300, 1, 1), Instant(0), &mut drops);
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(300));
    // A light newcomer of the same class arrives between the peek and the
    // dequeue: it does not jump the peek.
    q.enqueue(pkt(2, 500, 2, 1), Instant(0), &mut drops);
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(300));
    assert_eq!(ids_served(&mut q, Instant(0), &mut drops), [1, 2]);
}

#[test]
fn a_higher_class_arriving_after_a_peek_goes_first() {
    // The token bucket peeks a bulk packet and waits for its tokens; a
    // packet of a higher-priority class arriving meanwhile goes first.
    let mut q = two_classes(params(1), params(7), 100);
    let mut drops = Vec::new();
    q.enqueue(pkt(1, 1500, 1, 1), Instant(0), &mut drops);
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(1500));
    q.enqueue(pkt(2, 98, 2, 2), Instant(0), &mut drops);
    assert_eq!(q.peek_len(Instant(0), &mut drops), Some(98));
    assert_eq!(ids_served(&mut q, Instant(0), &mut drops), [2, 1]);
}

#[test]
fn counters_per_class_and_noclass() {
    let mut q = two_classes(params(1), params(2), 2);
    let mut drops = Vec::new();
    // qlimit is per bucket: three packets of one connection drop one,
    // two more of another connection drop none.
    for id in 0..3 {
        q.enqueue(pkt(id, 100, 1, 1), Instant(0), &mut drops);
    }
    for id in 3..5 {
        q.enqueue(pkt(id, 100, 2, 1), Instant(0), &mut drops);
    }
    assert_eq!(drops.len(), 1);
    assert_eq!(
        q.enqueue(pkt(9, 100, 1, 42), Instant(0), &mut drops),
        Enqueue::Rejected
    );
    assert_eq!(drops.last().map(|d| d.reason), Some(DropReason::NoClass));
    assert_eq!((q.len(), q.backlog_bytes()), (4, 400));
    q.dequeue(Instant(1), &mut drops).unwrap();
    let mut seen = Vec::new();
    q.visit_stats(&mut |id, st| {
        seen.push((
            id,
            st.enq_packets,
            st.deq_packets,
            st.total_drops(),
            st.qlen,
        ))
    });
    assert_eq!(
        seen,
        vec![
            (ClassId::ROOT, 4, 1, 2, 3),
            (ClassId(2), 0, 0, 0, 0),
            (ClassId(1), 4, 1, 1, 3),
        ]
    );
}

#[test]
fn model_check_classes_buckets_and_default() {
    // Classes 1..=5 are generated; 1..=3 exist, 2 is the default.
    let space = OpSpace::default().with_classes(1..=5).with_flows(40);
    let r = check_random(
        || {
            let mut q = Fairq::new();
            for (c, prio, hogs, bw) in [
                (1u32, 0u8, None, None),
                (2, 4, Some(Rate::kbps(200)), Some(Rate::mbps(1))),
                (3, 7, Some(Rate::mbps(5)), Some(Rate::kbps(100))),
            ] {
                let p = ClassParams {
                    priority: prio,
                    buckets: 4,
                    bandwidth: bw,
                    hogs,
                };
                q.add_class(ClassId(c), p, fifos(3)).unwrap();
            }
            q.set_default(ClassId(2)).unwrap();
            Box::new(q)
        },
        &space,
        300,
        400,
    );
    assert!(r.dequeued > 0 && r.dropped > 0, "{r:?}");
}

#[test]
fn model_check_aqm_buckets() {
    let space = OpSpace::default().with_classes(1..=2).with_flows(20);
    let r = check_random(
        || {
            let mut q = Fairq::new();
            let aqm = quick_codel();
            let p = ClassParams {
                hogs: Some(Rate::mbps(1)),
                buckets: 8,
                ..params(1)
            };
            q.add_class(
                ClassId(1),
                p,
                Box::new(move || Box::new(Codel::new(aqm, 6))),
            )
            .unwrap();
            let red = quick_red();
            q.add_class(
                ClassId(2),
                params(5),
                Box::new(move || Box::new(Red::new(red))),
            )
            .unwrap();
            Box::new(q)
        },
        &space,
        300,
        400,
    );
    assert!(r.dequeued > 0 && r.dropped > 0 && r.marks > 0, "{r:?}");
}

#[test]
fn under_the_token_bucket_the_link_rate_holds() {
    use crate::tbr::{self, Tbr};
    let mut q = Fairq::new();
    q.add_class(ClassId(1), params(1), fifos(1_000)).unwrap();
    let rate = Rate::mbps(5);
    let mut t = Tbr::new(tbr::Params::for_rate(rate), Box::new(q));
    let mut drops = Vec::new();
    let mut id = 0;
    let mut bytes = 0u64;
    let mut now = Instant(0);
    let end = Instant(Duration::from_secs(2).0);
    while now < end {
        while t.len() < 64 {
            id += 1;
            t.enqueue(pkt(id, 1500, id % 7, 1), now, &mut drops);
        }
        match t.dequeue(now, &mut drops) {
            Some(p) => bytes += u64::from(p.len),
            None => now = t.next_wakeup().expect("throttled"),
        }
    }
    let got = bytes * 8 / 2;
    let want = rate.as_bps();
    assert!(got.abs_diff(want) * 100 <= want * 2, "{got} bit/s");
}

#[test]
// The pair table is written both ways, `diff[b][x]` and `diff[x][b]`.
#[allow(clippy::needless_range_loop)]
fn random_arrivals_keep_backlogged_buckets_within_one_packet() {
    // Without hogs, over any stretch in which two buckets both stay
    // backlogged, the numbers of packets they send differ by at most one.
    const B: usize = 8;
    for seed in 1..=20 {
        let mut rng = Rng::new(seed);
        let mut q = Fairq::new();
        let p = ClassParams {
            buckets: B as u32,
            ..params(1)
        };
        q.add_class(ClassId(1), p, fifos(10_000)).unwrap();
        let mut drops = Vec::new();
        let mut resident = [0usize; B];
        // diff[a][b]: packets a sent minus packets b sent since both last
        // became backlogged.
        let mut diff = [[0i64; B]; B];
        for step in 0..4_000u64 {
            if rng.below(2) == 0 {
                let b = rng.below(B as u64) as usize;
                if resident[b] == 0 {
                    for x in 0..B {
                        diff[b][x] = 0;
                        diff[x][b] = 0;
                    }
                }
                resident[b] += 1;
                q.enqueue(
                    pkt(step, 100 + rng.below(1400) as u32, b as u64, 1),
                    Instant(step),
                    &mut drops,
                );
            } else if let Some(p) = q.dequeue(Instant(step), &mut drops) {
                let b = (p.flow >> 32) as usize;
                resident[b] -= 1;
                for x in 0..B {
                    diff[b][x] += 1;
                    diff[x][b] -= 1;
                }
                for x in 0..B {
                    for y in 0..B {
                        if resident[x] > 0 && resident[y] > 0 {
                            assert!(
                                diff[x][y].abs() <= 1,
                                "seed {seed} step {step}: buckets {x} and {y} apart by {}",
                                diff[x][y]
                            );
                        }
                    }
                }
            }
        }
        assert!(drops.is_empty());
    }
}
