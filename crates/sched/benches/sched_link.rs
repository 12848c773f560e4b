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
use sluice_sched::testing::DropTail;
use sluice_sched::wf2q::Wf2q;
use sluice_sched::{ClassId, Drops, Packet, Qdisc};
use sluice_time::{Duration, Instant, Rate};

/// A boxed drop-tail leaf (the crate's real FIFO would be stored inline).
fn fifo() -> Box<dyn Qdisc> {
    DropTail::boxed(10_000)
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
            d.add_class(ClassId(k + 1), 1 + k % 100, fifo()).unwrap();
        }
        steady(c, "drr", n, Box::new(d), Duration::ZERO);
    }
}

fn wf2q(c: &mut Criterion) {
    for n in [1u32, 64, 1024] {
        let mut w = Wf2q::new();
        for k in 0..n {
            w.add_class(ClassId(k + 1), 1 + k % 100, fifo()).unwrap();
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
            q.add_class(ClassId(k + 1), Some(root), p, Some(fifo()))
                .unwrap();
        }
        // Time advances by one average packet at the link rate per packet,
        // so the classes stay near their rates and borrowing happens.
        steady(c, "cbq", n, Box::new(q), link.tx_time(835));
    }
}

fn tbr_pipe(c: &mut Criterion) {
    let rate = Rate::gbps(10);
    let t = Tbr::new(tbr::Params::for_rate(rate), fifo());
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
        fifo(),
    );
    steady(c, "pipe_fifo", 1, Box::new(p), rate.tx_time(835));
}

criterion_group!(benches, drr, wf2q, cbq, tbr_pipe);
criterion_main!(benches);
