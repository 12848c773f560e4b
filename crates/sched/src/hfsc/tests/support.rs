//! Test support: a FIFO leaf and a link simulator in virtual time.

pub(super) use super::super::*;
pub(super) use crate::testing::{check_random, DropTail, OpSpace};
pub(super) use sluice_time::Duration;

/// The tests' leaf: the shared drop-tail one, marking ECT(0) packets so
/// tests can see marks surface in HFSC's statistics.
pub(super) struct Fifo;

impl Fifo {
    pub(super) fn boxed(limit: usize) -> Option<Box<dyn Qdisc>> {
        Some(Box::new(DropTail::marking(limit)))
    }
}

pub(super) fn lin(r: Rate) -> Option<ServiceCurve> {
    Some(ServiceCurve::linear(r))
}

pub(super) fn ls(r: Rate) -> ClassParams {
    ClassParams {
        ls: lin(r),
        ..Default::default()
    }
}

/// A class with only a real-time curve, linear at `r`.
pub(super) fn rt(r: Rate) -> ClassParams {
    ClassParams {
        rt: lin(r),
        ..Default::default()
    }
}

pub(super) const MTU: u32 = 1500;

/// A tree of link-share classes, each `(id, parent, percent of link)`,
/// parents first; parent 0 ([`ClassId::ROOT`]) is the root. A class no
/// other names as its parent is a leaf with a 50-packet FIFO.
pub(super) fn ls_tree(link: Rate, classes: &[(u32, u32, u64)]) -> Hfsc {
    let mut q = Hfsc::new(link);
    for &(id, parent, pct) in classes {
        let leaf = !classes.iter().any(|&(_, p, _)| p == id);
        let fifo = if leaf { Fifo::boxed(50) } else { None };
        let parent = (parent != ClassId::ROOT.0).then_some(ClassId(parent));
        q.add_class(ClassId(id), parent, ls(link.percent(pct)), fifo)
            .unwrap();
    }
    q
}

/// A link at the scheduler's rate: each step sends one packet and advances
/// time by its transmission time, or idles to the next wakeup.
pub(super) struct Sim {
    pub(super) q: Hfsc,
    pub(super) link: Rate,
    pub(super) now: Instant,
    pub(super) next_id: u64,
    pub(super) drops: Drops,
}

impl Sim {
    pub(super) fn new(q: Hfsc) -> Sim {
        let link = q.link();
        Sim {
            q,
            link,
            now: Instant(1_000_000_000),
            next_id: 1,
            drops: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, class: u32, len: u32) {
        let p = Packet::synthetic(self.next_id, len, 0, ClassId(class));
        self.next_id += 1;
        self.q.enqueue(p, self.now, &mut self.drops);
        self.drops.clear();
    }

    /// One link step: send a packet (time advances by its transmission), or
    /// idle until the next wakeup (or `idle_step` if none).
    pub(super) fn step(&mut self, idle_step: Duration) -> Option<Packet> {
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
    pub(super) fn saturate(&mut self, busy: &[u32], dur: Duration) -> Vec<(u32, u64)> {
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

pub(super) fn share(sent: &[(u32, u64)], class: u32) -> f64 {
    let total: u64 = sent.iter().map(|e| e.1).sum();
    let mine = sent.iter().find(|e| e.0 == class).map_or(0, |e| e.1);
    mine as f64 / total as f64
}

/// Asserts `class` got `want` ± `tol` of the bytes in `sent`; `what` says
/// which run failed.
pub(super) fn assert_share(sent: &[(u32, u64)], class: u32, want: f64, tol: f64, what: &str) {
    let got = share(sent, class);
    assert!(
        (got - want).abs() <= tol,
        "{what}: class {class} got {got}, want {want} ± {tol}"
    );
}

pub(super) fn top_up(sim: &mut Sim, busy: &[u32], depth: usize) {
    for &c in busy {
        let slot = sim.q.index.get(ClassId(c)).unwrap() as usize;
        // At most `depth` pushes per class.
        while sim.q.classes[slot].leaf.as_ref().unwrap().len() < depth {
            sim.push(c, MTU);
        }
    }
}
