//! ns per packet (one enqueue + one dequeue, steady backlog) for the link and
//! weighted disciplines: DRR and WF2Q+ at 1/64/1024 classes, CBQ at 1/10/64
//! classes, the token-bucket regulator and the pipe over a FIFO.
//!
//! Run: `cargo bench -p sluice-sched --bench sched_link -- --warm-up-time 1
//! --measurement-time 3`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice_sched::cbq::{Cbq, ClassParams};
use sluice_sched::drr::Drr;
use sluice_sched::pipe::{self, Pipe};
use sluice_sched::tbr::{self, Tbr};
use sluice_sched::wf2q::Wf2q;
use sluice_sched::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::{Duration, Instant, Rate};
use std::collections::VecDeque;

/// A bare FIFO leaf (the crate's real FIFO lives in another module).
struct Fifo {
    q: VecDeque<Packet>,
    bytes: u64,
    stats: QueueStats,
}

impl Fifo {
    fn boxed() -> Box<dyn Qdisc> {
        Box::new(Fifo {
            q: VecDeque::new(),
            bytes: 0,
            stats: QueueStats::default(),
        })
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, pkt: Packet, _now: Instant, drops: &mut Drops) -> Enqueue {
        if self.q.len() >= 10_000 {
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
        for pkt in self.q.drain(..) {
            drops.push(Dropped {
                pkt,
                reason: DropReason::Purge,
            });
        }
        self.bytes = 0;
    }
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats);
    }
}

const SIZES: [u32; 4] = [1500, 64, 576, 1200];

/// Pre-fills `backlog` packets per class, then measures one enqueue + one
/// dequeue per iteration. `tick` is the time a packet takes on the link
/// (zero for work-conserving schedulers).
fn steady(c: &mut Criterion, group: &str, n: u32, mut q: Box<dyn Qdisc>, tick: Duration) {
    let mut drops: Drops = Vec::with_capacity(64);
    let mut now = Instant(1_000_000_000);
    let mut id = 0u64;
    for _ in 0..4 {
        for k in 0..n {
            id += 1;
            let p = Packet::synthetic(id, SIZES[(id % 4) as usize], k as u64, ClassId(k + 1));
            q.enqueue(p, now, &mut drops);
        }
    }
    c.bench_with_input(BenchmarkId::new(group, n), &n, |b, &n| {
        b.iter(|| {
            id += 1;
            let class = ClassId((id % n as u64) as u32 + 1);
            let p = Packet::synthetic(id, SIZES[(id % 4) as usize], id, class);
            q.enqueue(p, now, &mut drops);
            now += tick;
            let out = q.dequeue(now, &mut drops);
            drops.clear();
            black_box(out)
        })
    });
}

fn drr(c: &mut Criterion) {
    for n in [1u32, 64, 1024] {
        let mut d = Drr::new(1514);
        for k in 0..n {
            d.add_class(ClassId(k + 1), 1 + k % 100, Fifo::boxed())
                .unwrap();
        }
        steady(c, "drr", n, Box::new(d), Duration::ZERO);
    }
}

fn wf2q(c: &mut Criterion) {
    for n in [1u32, 64, 1024] {
        let mut w = Wf2q::new();
        for k in 0..n {
            w.add_class(ClassId(k + 1), 1 + k % 100, Fifo::boxed())
                .unwrap();
        }
        steady(c, "wf2q", n, Box::new(w), Duration::ZERO);
    }
}

fn cbq(c: &mut Criterion) {
    let link = Rate::gbps(10);
    for n in [1u32, 10, 64] {
        let mut q = Cbq::new(link);
        let root = ClassId(100_000);
        let rp = ClassParams {
            rate: link,
            priority: 0,
            borrow: false,
        };
        q.add_class(root, None, rp, None).unwrap();
        for k in 0..n {
            let p = ClassParams {
                rate: Rate(link.as_bps() / n as u64),
                priority: (k % 8) as u8,
                borrow: true,
            };
            q.add_class(ClassId(k + 1), Some(root), p, Some(Fifo::boxed()))
                .unwrap();
        }
        // Time advances by one average packet at the link rate per packet,
        // so the classes stay near their rates and borrowing happens.
        steady(c, "cbq", n, Box::new(q), link.tx_time(835));
    }
}

fn tbr_pipe(c: &mut Criterion) {
    let rate = Rate::gbps(10);
    let t = Tbr::new(tbr::Params::for_rate(rate), Fifo::boxed());
    steady(c, "tbr_fifo", 1, Box::new(t), rate.tx_time(835));
    let p = Pipe::new(
        pipe::Params {
            rate,
            delay: Duration::from_micros(100),
            loss_ppm: 1_000,
            seed: 1,
            queue_limit_packets: 0,
            ..pipe::Params::default()
        },
        Fifo::boxed(),
    );
    steady(c, "pipe_fifo", 1, Box::new(p), rate.tx_time(835));
}

criterion_group!(benches, drr, wf2q, cbq, tbr_pipe);
criterion_main!(benches);
