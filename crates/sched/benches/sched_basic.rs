//! ns per packet (one enqueue + one dequeue) for FIFO, CoDel, FQ-CoDel and PRIQ
//! at 1, 64 and 1024 flows/classes.
//!
//! Steady state: each discipline is pre-filled (64 packets, or one per flow /
//! class), then every measured round enqueues one packet to each of the N
//! flows/classes and dequeues N packets, so the depth oscillates between the
//! base and base + N and every flow or class is touched once per round. The
//! reported time is per packet (round time / N). Virtual time advances 100 ns
//! per packet, far below CoDel's target, so no AQM drops interfere.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice_sched::codel::{self, Codel};
use sluice_sched::fifo::{self, Fifo};
use sluice_sched::fq_codel::{self, FqCodel};
use sluice_sched::priq::Priq;
use sluice_sched::{ClassId, Drops, Packet, Qdisc};
use sluice_time::Instant;
use std::hint::black_box;

const COUNTS: [u32; 3] = [1, 64, 1024];

/// Spreads flow `i` over the hash space so multiply-shift puts flows in
/// distinct buckets (a keyed hash would do the same on average).
fn flow_hash(i: u32) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

struct Rig {
    q: Box<dyn Qdisc>,
    n: u32,
    /// Class of packet i in a round (PRIQ); ROOT otherwise.
    classes: Vec<ClassId>,
    now: u64,
    id: u64,
    drops: Drops,
    /// Measured rounds, for instruction counts per packet under callgrind.
    rounds: u64,
}

impl Rig {
    fn new(q: Box<dyn Qdisc>, n: u32, classes: Vec<ClassId>, prefill: u32) -> Rig {
        let mut r = Rig {
            q,
            n,
            classes,
            now: 1_000_000,
            id: 0,
            drops: Vec::with_capacity(1024),
            rounds: 0,
        };
        for i in 0..prefill {
            r.enqueue(i % n.max(1));
        }
        r
    }

    #[inline]
    fn enqueue(&mut self, i: u32) {
        self.id += 1;
        self.now += 100;
        let class = self
            .classes
            .get(i as usize)
            .copied()
            .unwrap_or(ClassId::ROOT);
        let p = Packet::synthetic(self.id, 1000, flow_hash(i), class);
        black_box(self.q.enqueue(p, Instant(self.now), &mut self.drops));
    }

    /// Not inlined so callgrind can attribute instructions to one round.
    #[inline(never)]
    fn round(&mut self) {
        self.rounds += 1;
        for i in 0..self.n {
            self.enqueue(i);
        }
        for _ in 0..self.n {
            black_box(self.q.dequeue(Instant(self.now), &mut self.drops));
        }
        self.drops.clear();
    }
}

fn bench(c: &mut Criterion, name: &str, mut make: impl FnMut(u32) -> Rig) {
    let mut g = c.benchmark_group(name);
    for n in COUNTS {
        let mut rig = make(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| {
                // A benchmark measures wall time; the library itself never reads a clock.
                #[allow(clippy::disallowed_methods)]
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    rig.round();
                }
                start.elapsed() / n
            })
        });
        if std::env::var_os("SLUICE_BENCH_ROUNDS").is_some() {
            // Packets measured, so `callgrind --toggle-collect=*round*` totals
            // can be turned into instructions per packet.
            eprintln!("{name}/{n}: {} packets", rig.rounds * n as u64);
        }
    }
    g.finish();
}

fn all(c: &mut Criterion) {
    bench(c, "fifo", |n| {
        let q = Fifo::new(fifo::Params {
            limit_packets: 4096,
            limit_bytes: None,
        });
        Rig::new(Box::new(q), n, Vec::new(), 64)
    });
    bench(c, "codel", |n| {
        let q = Codel::new(codel::Params::default(), 4096);
        Rig::new(Box::new(q), n, Vec::new(), 64)
    });
    bench(c, "fq_codel", |n| {
        let q = FqCodel::new(fq_codel::Params {
            flows: 1024,
            ..fq_codel::Params::default()
        });
        Rig::new(Box::new(q), n, Vec::new(), n)
    });
    bench(c, "priq", |n| {
        let mut q = Priq::new();
        let classes: Vec<ClassId> = (1..=n).map(ClassId).collect();
        for (i, &id) in classes.iter().enumerate() {
            let leaf = Fifo::new(fifo::Params {
                limit_packets: 64,
                limit_bytes: None,
            });
            q.add_class(id, (i % 16) as u8, Box::new(leaf))
                .expect("class");
        }
        Rig::new(Box::new(q), n, classes, n)
    });
}

criterion_group!(benches, all);
criterion_main!(benches);
