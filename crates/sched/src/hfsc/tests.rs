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
    // Root splits A 40 % / B 60 %; A splits 25/75, B 50/50. With all four
    // leaves busy: A1 10 %, A2 30 %, B1 30 %, B2 30 %.
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    q.add_class(ClassId(10), None, ls(link.percent(40)), None)
        .unwrap();
    q.add_class(ClassId(20), None, ls(link.percent(60)), None)
        .unwrap();
    q.add_class(
        ClassId(11),
        Some(ClassId(10)),
        ls(link.percent(10)),
        Fifo::boxed(50),
    )
    .unwrap();
    q.add_class(
        ClassId(12),
        Some(ClassId(10)),
        ls(link.percent(30)),
        Fifo::boxed(50),
    )
    .unwrap();
    q.add_class(
        ClassId(21),
        Some(ClassId(20)),
        ls(link.percent(30)),
        Fifo::boxed(50),
    )
    .unwrap();
    q.add_class(
        ClassId(22),
        Some(ClassId(20)),
        ls(link.percent(30)),
        Fifo::boxed(50),
    )
    .unwrap();
    let mut sim = Sim::new(q);
    let sent = sim.saturate(&[11, 12, 21, 22], Duration::from_secs(5));
    for (c, want) in [(11, 0.10), (12, 0.30), (21, 0.30), (22, 0.30)] {
        let got = share(&sent, c);
        assert!((got - want).abs() <= 0.03, "class {c}: {got} vs {want}");
    }
    // With B idle, A's children split the whole link 25/75 (parents split
    // only among active siblings).
    let sent = sim.saturate(&[11, 12], Duration::from_secs(5));
    let got = share(&sent, 11);
    assert!((got - 0.25).abs() <= 0.03, "A1 alone with A2: {got}");
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
