//! HFSC guarantees in virtual time: the link is simulated by sending one
//! packet, advancing time by its transmission time at the link rate, repeat.

use super::*;
use crate::testing::{check_random, OpSpace};
use sluice_time::Duration;
use std::collections::VecDeque;

/// A tiny drop-tail leaf, private to these tests.
struct Fifo {
    q: VecDeque<Packet>,
    limit: usize,
    bytes: u64,
}

impl Fifo {
    fn boxed(limit: usize) -> Option<Box<dyn Qdisc>> {
        Some(Box::new(Fifo {
            q: VecDeque::new(),
            limit,
            bytes: 0,
        }))
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, pkt: Packet, _now: Instant, drops: &mut Drops) -> Enqueue {
        if self.q.len() >= self.limit {
            drops.push(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
            return Enqueue::Rejected;
        }
        self.bytes += pkt.len as u64;
        self.q.push_back(pkt);
        Enqueue::Queued
    }
    fn dequeue(&mut self, _now: Instant, _drops: &mut Drops) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len as u64;
        Some(p)
    }
    fn peek_len(&mut self, _now: Instant, _drops: &mut Drops) -> Option<u32> {
        self.q.front().map(|p| p.cost)
    }
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn purge(&mut self, drops: &mut Drops) {
        self.bytes = 0;
        drops.extend(self.q.drain(..).map(|pkt| Dropped {
            pkt,
            reason: DropReason::Purge,
        }));
    }
    fn visit_stats(&self, _f: &mut dyn FnMut(ClassId, &QueueStats)) {}
}

fn lin(r: Rate) -> Option<ServiceCurve> {
    Some(ServiceCurve::linear(r))
}

fn ls(r: Rate) -> ClassParams {
    ClassParams {
        ls: lin(r),
        ..Default::default()
    }
}

const MTU: u32 = 1500;

/// Sends packets back to back at `link` until `end`, keeping the classes in
/// `busy` backlogged (topped up to `depth` packets of `MTU` bytes) and calling
/// `each(now, pkt)` for every packet sent.
struct Sim {
    q: Hfsc,
    link: Rate,
    now: Instant,
    next_id: u64,
    drops: Drops,
}

impl Sim {
    fn new(q: Hfsc) -> Sim {
        let link = q.link();
        Sim {
            q,
            link,
            now: Instant(1_000_000_000),
            next_id: 1,
            drops: Vec::new(),
        }
    }

    fn push(&mut self, class: u32, len: u32) {
        let p = Packet::synthetic(self.next_id, len, 0, ClassId(class));
        self.next_id += 1;
        self.q.enqueue(p, self.now, &mut self.drops);
        self.drops.clear();
    }

    /// One link step: send a packet (time advances by its transmission), or
    /// idle until the next wakeup (or `idle_step` if none).
    fn step(&mut self, idle_step: Duration) -> Option<Packet> {
        match self.q.dequeue(self.now, &mut self.drops) {
            Some(p) => {
                self.now += self.link.tx_time(p.cost as u64);
                Some(p)
            }
            None => {
                self.now = match self.q.next_wakeup() {
                    Some(w) if w > self.now => w,
                    _ => self.now + idle_step,
                };
                None
            }
        }
    }

    /// Runs until `dur` has passed, keeping `busy` classes backlogged.
    /// Returns bytes sent per class over the run.
    fn saturate(&mut self, busy: &[u32], dur: Duration) -> Vec<(u32, u64)> {
        let end = self.now + dur;
        let mut sent: Vec<(u32, u64)> = busy.iter().map(|&c| (c, 0)).collect();
        // Bounded by the virtual duration: each step moves time forward.
        while self.now < end {
            for &c in busy {
                let slot = self.q.index.get(ClassId(c)).unwrap() as usize;
                while self.q.classes[slot].leaf.as_ref().unwrap().len() < 4 {
                    self.push(c, MTU);
                }
            }
            if let Some(p) = self.step(Duration::from_micros(100)) {
                if let Some(e) = sent.iter_mut().find(|e| e.0 == p.class.0) {
                    e.1 += p.len as u64;
                }
            }
        }
        sent
    }
}

fn share(sent: &[(u32, u64)], class: u32) -> f64 {
    let total: u64 = sent.iter().map(|e| e.1).sum();
    let mine = sent.iter().find(|e| e.0 == class).map_or(0, |e| e.1);
    mine as f64 / total as f64
}

#[test]
fn link_share_30_70_within_3_percent() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(1), None, ls(link.percent(30)), Fifo::boxed(50))
        .unwrap();
    q.add_class(ClassId(2), None, ls(link.percent(70)), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    let sent = sim.saturate(&[1, 2], Duration::from_secs(5));
    let s1 = share(&sent, 1);
    assert!((s1 - 0.30).abs() <= 0.03, "class 1 got {s1}");
    let total: u64 = sent.iter().map(|e| e.1).sum();
    // Work conserving: the link is busy all the time (one packet of slack).
    assert!(total + MTU as u64 >= link.bytes_in(Duration::from_secs(5)));
}

#[test]
fn hierarchical_share_parents_first_then_children() {
    // Root splits A 50 % / B 50 %; A's children ask 1 % each (split 1:1),
    // B's 10 % and 30 % (1:3). Hierarchical: A1 25, A2 25, B1 12.5, B2 37.5.
    // A flat split by leaf curves would give 2.4 / 2.4 / 23.8 / 71.4.
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(10), None, ls(link.percent(50)), None)
        .unwrap();
    q.add_class(ClassId(20), None, ls(link.percent(50)), None)
        .unwrap();
    for (id, parent, pct) in [(11, 10, 1), (12, 10, 1), (21, 20, 10), (22, 20, 30)] {
        let p = ls(link.percent(pct));
        q.add_class(ClassId(id), Some(ClassId(parent)), p, Fifo::boxed(50))
            .unwrap();
    }
    let mut sim = Sim::new(q);
    let sent = sim.saturate(&[11, 12, 21, 22], Duration::from_secs(5));
    for (c, want) in [(11, 0.25), (12, 0.25), (21, 0.125), (22, 0.375)] {
        let got = share(&sent, c);
        assert!((got - want).abs() <= 0.03, "class {c}: {got} vs {want}");
    }
    // With A idle, B's children split the whole link 1:3 (parents split
    // only among active siblings).
    let sent = sim.saturate(&[21, 22], Duration::from_secs(5));
    let got = share(&sent, 21);
    assert!((got - 0.25).abs() <= 0.03, "B1 alone with B2: {got}");
}

#[test]
fn random_ops_keep_the_contract() {
    let link = Rate::mbps(1);
    let make = || -> Box<dyn Qdisc> {
        let mut q = Hfsc::new(link);
        q.add_class(ClassId(1), None, ls(Rate::kbps(500)), None)
            .unwrap();
        let rt = ClassParams {
            rt: Some(ServiceCurve {
                m1: Rate::kbps(400),
                d: Duration::from_millis(20),
                m2: Rate::kbps(100),
            }),
            ls: lin(Rate::kbps(200)),
            ul: None,
        };
        q.add_class(ClassId(2), Some(ClassId(1)), rt, Fifo::boxed(10))
            .unwrap();
        let held = ClassParams {
            ls: lin(Rate::kbps(300)),
            ul: lin(Rate::kbps(50)),
            rt: None,
        };
        q.add_class(ClassId(3), Some(ClassId(1)), held, Fifo::boxed(10))
            .unwrap();
        let rt_only = ClassParams {
            rt: lin(Rate::kbps(100)),
            ..Default::default()
        };
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
    let space = OpSpace {
        classes: vec![ClassId(2), ClassId(3), ClassId(4), ClassId(5), ClassId(9)],
        flows: 10,
        max_advance: Duration::from_millis(5),
        ..Default::default()
    };
    let r = check_random(make, &space, 60, 400);
    assert!(r.dequeued > 1000, "{r:?}");
    assert!(
        r.throttled > 50,
        "the upper-limit path was not exercised: {r:?}"
    );
    assert!(r.dropped > 0, "{r:?}");
}

fn top_up(sim: &mut Sim, busy: &[u32], depth: usize) {
    for &c in busy {
        let slot = sim.q.index.get(ClassId(c)).unwrap() as usize;
        // At most `depth` pushes per class.
        while sim.q.classes[slot].leaf.as_ref().unwrap().len() < depth {
            sim.push(c, MTU);
        }
    }
}

/// A real-time-only leaf, continuously backlogged from `t0` while two
/// link-sharing classes saturate the link, has received at every dequeue
/// instant `t` at least `rt(t - t0)` minus the paper's bound: one maximum
/// packet (the one in service by its deadline) plus what the curve grows while
/// a packet of another class holds the link (non-preemption, `m1 · L/C`).
#[test]
fn real_time_curve_is_guaranteed_under_contention() {
    let link = Rate::mbps(10);
    for rt in [
        ServiceCurve {
            m1: Rate::mbps(4),
            d: Duration::from_millis(20),
            m2: Rate::mbps(2),
        },
        ServiceCurve {
            m1: Rate::mbps(1),
            d: Duration::from_millis(30),
            m2: Rate::mbps(3),
        },
        ServiceCurve::linear(Rate::mbps(5)),
    ] {
        let mut q = Hfsc::new(link);
        let p = ClassParams {
            rt: Some(rt),
            ..Default::default()
        };
        q.add_class(ClassId(1), None, p, Fifo::boxed(1000)).unwrap();
        q.add_class(ClassId(2), None, ls(link.percent(50)), Fifo::boxed(50))
            .unwrap();
        q.add_class(ClassId(3), None, ls(link.percent(50)), Fifo::boxed(50))
            .unwrap();
        let mut sim = Sim::new(q);
        sim.saturate(&[2, 3], Duration::from_millis(100));
        let t0 = sim.now;
        let l_max = MTU as u64;
        let bound = l_max + rt.m1.max(rt.m2).bytes_in(link.tx_time(l_max));
        let mut served = 0u64;
        let mut worst = 0i64;
        // 3 s of virtual time: bounded by the step count.
        for _ in 0..10_000 {
            top_up(&mut sim, &[1, 2, 3], 4);
            if let Some(p) = sim.step(Duration::from_micros(100)) {
                if p.class == ClassId(1) {
                    served += p.len as u64;
                }
            }
            let owed = rt.bytes_at(sim.now.saturating_since(t0));
            worst = worst.max(owed as i64 - served as i64);
            assert!(
                served + bound >= owed,
                "{rt:?}: at {:?} served {served} < curve {owed} - {bound}",
                sim.now - t0
            );
        }
        // Not served ahead of its eligible curve either (it has no link-share
        // curve): the rt curve itself when concave, the line of slope m2 when
        // convex (which may run ahead by (m2 - m1) · d).
        let el = if rt.m1 > rt.m2 {
            rt
        } else {
            ServiceCurve::linear(rt.m2)
        };
        let ahead = el.bytes_at(sim.now.saturating_since(t0));
        assert!(
            served <= ahead + l_max,
            "{rt:?}: rt-only class got {served} > {ahead}"
        );
        // A concave curve is served by deadline, so the class does lag its
        // curve at times: the bound was exercised. (Linear and convex ones
        // become eligible on their m2 line, ahead of the curve.)
        if rt.m1 > rt.m2 {
            assert!(worst > 0, "{rt:?}: the test never pressed the bound");
        }
        eprintln!("{rt:?}: worst lag {worst} bytes, bound {bound}");
    }
}

/// Time for a burst of `n` packets, arriving at once at an rt-only leaf while
/// another class saturates the link, to leave.
fn burst_delay(rt: ServiceCurve, n: u32) -> Duration {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(
        ClassId(1),
        None,
        ClassParams {
            rt: Some(rt),
            ..Default::default()
        },
        Fifo::boxed(100),
    )
    .unwrap();
    q.add_class(ClassId(2), None, ls(link), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    sim.saturate(&[2], Duration::from_millis(50));
    let t0 = sim.now;
    for _ in 0..n {
        sim.push(1, MTU);
    }
    let mut left = n;
    // Bounded: the burst leaves within its curve's time (asserted by callers).
    for _ in 0..100_000 {
        top_up(&mut sim, &[2], 4);
        if let Some(p) = sim.step(Duration::from_micros(100)) {
            if p.class == ClassId(1) {
                left -= 1;
                if left == 0 {
                    return sim.now - t0;
                }
            }
        }
    }
    panic!("burst never left");
}

#[test]
fn concave_curve_gives_the_first_packets_lower_delay() {
    // Same long-term rate (1 Mbit/s); the concave one promises 5 Mbit/s for
    // the first 20 ms. Five 1500-byte packets: 7500 bytes.
    let linear = burst_delay(ServiceCurve::linear(Rate::mbps(1)), 5);
    let concave = burst_delay(
        ServiceCurve {
            m1: Rate::mbps(5),
            d: Duration::from_millis(20),
            m2: Rate::mbps(1),
        },
        5,
    );
    let pkt_time = Rate::mbps(10).tx_time(MTU as u64);
    // Concave: 7500 bytes at 5 Mbit/s = 12 ms, plus one packet of blocking.
    assert!(
        concave <= Duration::from_millis(12) + pkt_time + pkt_time,
        "concave: {concave}"
    );
    // Linear: the 5th packet is not even eligible before 4 · 12 ms.
    assert!(linear >= Duration::from_millis(48), "linear: {linear}");
    assert!(
        linear <= Duration::from_millis(60) + pkt_time + pkt_time,
        "linear: {linear}"
    );
}

#[test]
fn upper_limit_holds_even_on_an_idle_link() {
    let link = Rate::mbps(10);
    let ul = link.percent(20);
    let mut q = Hfsc::new(link);
    let p = ClassParams {
        ls: lin(link.percent(50)),
        ul: lin(ul),
        rt: None,
    };
    q.add_class(ClassId(1), None, p, Fifo::boxed(50)).unwrap();
    q.add_class(ClassId(2), None, ls(link.percent(50)), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    top_up(&mut sim, &[1], 4);
    let t0 = sim.now;
    let mut served = 0u64;
    let mut wakeups = 0;
    let mut starts: Vec<(Instant, u64)> = Vec::new();
    // 2 s of virtual time; each step sends or jumps to the next wakeup.
    for _ in 0..20_000 {
        top_up(&mut sim, &[1], 4);
        let before = sim.now;
        match sim.q.dequeue(sim.now, &mut sim.drops) {
            Some(p) => {
                // Bytes counted when a packet starts: at most the curve up to
                // now plus the one packet that fit.
                served += p.len as u64;
                starts.push((before, p.len as u64));
                let allowed = ul.bytes_in(before.saturating_since(t0));
                assert!(
                    served <= allowed + MTU as u64,
                    "at {:?}: {served} > {allowed} + MTU",
                    before - t0
                );
                sim.now += link.tx_time(p.cost as u64);
            }
            None => {
                let w = sim
                    .q
                    .next_wakeup()
                    .expect("held by ul with packets: needs a wakeup");
                assert!(w > sim.now);
                // Held until exactly then: one ns earlier is still too early.
                assert!(sim.q.dequeue(w - Duration(1), &mut sim.drops).is_none());
                sim.now = w;
                wakeups += 1;
            }
        }
    }
    let elapsed = sim.now.saturating_since(t0);
    // And the upper limit does not throttle below itself.
    assert!(
        served + 2 * MTU as u64 >= ul.bytes_in(elapsed),
        "{served} in {elapsed}"
    );
    assert!(wakeups > 100);
    // Any run of w consecutive packets: the bytes they carry are at most what
    // the ul curve allows between the first and the last start, plus the one
    // packet that fit at the end (and a byte of integer rounding).
    for w in [3, 10, 50] {
        for run in starts.windows(w) {
            let bytes: u64 = run.iter().map(|r| r.1).sum();
            let span = run[w - 1].0.saturating_since(run[0].0);
            let allowed = ul.bytes_in(span) + MTU as u64 + 1;
            assert!(
                bytes <= allowed,
                "{w} packets: {bytes} bytes in {span} > {allowed}"
            );
        }
    }
    let mut over = 0;
    sim.q.visit_stats(&mut |id, s| {
        if id == ClassId(1) {
            over = s.overlimits;
        }
    });
    assert!(
        over >= wakeups,
        "overlimits {over} < held dequeues {wakeups}"
    );

    // With a competitor busy too, class 1 still gets 20 % and the rest goes
    // to class 2 (link-sharing alone would split 50/50).
    let sent = sim.saturate(&[1, 2], Duration::from_secs(5));
    let s1 = share(&sent, 1);
    assert!((s1 - 0.20).abs() <= 0.01, "class 1 got {s1}");
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
    let rt = ClassParams {
        rt: lin(link),
        ..Default::default()
    };
    assert_eq!(
        e(q.add_class(ClassId(2), None, rt, None)),
        HfscError::InteriorNeedsLinkShare(ClassId(2))
    );
    let rt_ls = ClassParams {
        rt: lin(link),
        ls: lin(link),
        ul: None,
    };
    assert_eq!(
        e(q.add_class(ClassId(2), None, rt_ls, None)),
        HfscError::RealTimeOnInterior(ClassId(2))
    );
    let ul = ClassParams {
        rt: lin(link),
        ul: lin(link),
        ls: None,
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
    q.add_class(
        ClassId(2),
        None,
        ClassParams {
            rt: lin(link.percent(60)),
            ..Default::default()
        },
        Fifo::boxed(1),
    )
    .unwrap();
    let err = e(q.add_class(
        ClassId(3),
        None,
        ClassParams {
            rt: lin(link.percent(50)),
            ..Default::default()
        },
        Fifo::boxed(1),
    ));
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
    assert_eq!(
        q.enqueue(
            Packet::synthetic(3, 100, 0, ClassId(11)),
            Instant(0),
            &mut drops
        ),
        Enqueue::Queued
    );
    let mut seen = Vec::new();
    q.visit_stats(&mut |id, s| {
        seen.push((
            id.0,
            s.enq_packets,
            s.qlen,
            s.drop_packets[DropReason::NoClass.index()],
        ))
    });
    // Parents first; the root sums its subtree and holds the no-class drops.
    assert_eq!(seen, vec![(0, 1, 1, 2), (10, 1, 1, 0), (11, 1, 1, 0)]);
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
    let s1 = share(&sent, 1);
    assert!((s1 - 0.10).abs() <= 0.02, "class 1 got {s1}");
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
    let space = OpSpace {
        classes: (1..=9).map(ClassId).collect(),
        flows: 18,
        max_advance: Duration::from_millis(3),
        ..Default::default()
    };
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
    let space = OpSpace {
        classes: vec![ClassId(1), ClassId(2), ClassId(3)],
        max_advance: Duration::from_secs(3),
        ..Default::default()
    };
    let r = check_random(make, &space, 30, 300);
    assert!(r.dequeued > 100 && r.throttled > 10, "{r:?}");
}

/// A class that was idle while its sibling used the whole link gets no
/// credit for the idle time when it wakes up: from its first packet on, the
/// two split 50/50 (within a few packets), instead of the newcomer taking the
/// link until it "caught up" the second of service it did not use. Two
/// mechanisms ensure it (the vt given on activation, and the lift to the
/// parent's `cvtmin` after a class is served); breaking both fails this test.
#[test]
fn newly_active_class_gets_no_burst_credit() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(1), None, ls(link.percent(50)), Fifo::boxed(50))
        .unwrap();
    q.add_class(ClassId(2), None, ls(link.percent(50)), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    sim.saturate(&[1], Duration::from_secs(1));
    // Window of 100 ms (~83 packets); the bound: 3 packets of slack.
    let sent = sim.saturate(&[1, 2], Duration::from_millis(100));
    let total: u64 = sent.iter().map(|e| e.1).sum();
    let slack = 3.0 * MTU as f64 / total as f64;
    for c in [1, 2] {
        let got = share(&sent, c);
        assert!(
            (got - 0.5).abs() <= slack,
            "class {c} got {got} right after class 2 woke"
        );
    }
    // Same when the newcomer sits under another parent (vt of the parents).
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(10), None, ls(link.percent(50)), None)
        .unwrap();
    q.add_class(ClassId(20), None, ls(link.percent(50)), None)
        .unwrap();
    q.add_class(
        ClassId(1),
        Some(ClassId(10)),
        ls(link.percent(50)),
        Fifo::boxed(50),
    )
    .unwrap();
    q.add_class(
        ClassId(2),
        Some(ClassId(20)),
        ls(link.percent(50)),
        Fifo::boxed(50),
    )
    .unwrap();
    let mut sim = Sim::new(q);
    sim.saturate(&[1], Duration::from_secs(1));
    let sent = sim.saturate(&[1, 2], Duration::from_millis(100));
    for c in [1, 2] {
        let got = share(&sent, c);
        assert!((got - 0.5).abs() <= slack, "nested: class {c} got {got}");
    }
}

/// Real-time service counts for link-sharing: a class with rt 5 Mbit/s and
/// ls 30 % of 10 Mbit/s, beside a class with ls 70 %, gets its 50 % by rt and
/// nothing more by ls (its virtual time runs ahead), so both end near 50 %.
/// Were rt service not counted, it would get 5 + 0.3 · 5 = 6.5 Mbit/s (65 %).
#[test]
fn real_time_service_counts_for_link_sharing() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    let p = ClassParams {
        rt: lin(Rate::mbps(5)),
        ls: lin(link.percent(30)),
        ul: None,
    };
    q.add_class(ClassId(1), None, p, Fifo::boxed(50)).unwrap();
    q.add_class(ClassId(2), None, ls(link.percent(70)), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    let sent = sim.saturate(&[1, 2], Duration::from_secs(5));
    let s1 = share(&sent, 1);
    assert!((s1 - 0.50).abs() <= 0.02, "class 1 got {s1}");
}
