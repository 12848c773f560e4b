//! ns per packet (one enqueue + one dequeue) through HFSC class trees of 1, 10
//! and 100 leaves (two levels: 10 parents of 10 leaves for 100), with every
//! leaf backlogged so each dequeue runs the full selection and update path.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice_sched::hfsc::{ClassParams, Hfsc, ServiceCurve};
use sluice_sched::testing::DropTail;
use sluice_sched::{ClassId, Drops, Packet, Qdisc};
use sluice_time::{Duration, Instant, Rate};
use std::hint::black_box;

/// A boxed drop-tail leaf (the real FIFO would be stored inline).
fn leaf() -> Option<Box<dyn Qdisc>> {
    Some(DropTail::boxed(64))
}

const LINK: Rate = Rate::gbps(1);

/// `leaves` leaf classes with ids 1..=leaves; two levels when above 1.
/// `mixed`: every 4th leaf also has a concave rt curve, every 5th an ul.
fn tree(leaves: u32, mixed: bool) -> Hfsc {
    let mut q = Hfsc::new(LINK);
    let per_parent = if leaves >= 100 {
        10
    } else {
        leaves.div_ceil(2).max(1)
    };
    let parents = leaves.div_ceil(per_parent);
    let share = |n: u32| ServiceCurve::linear(Rate(LINK.as_bps() / n as u64));
    for p in 0..parents {
        if leaves > 1 {
            let params = ClassParams {
                ls: Some(share(parents)),
                ..Default::default()
            };
            q.add_class(ClassId(1000 + p), None, params, None).unwrap();
        }
    }
    for l in 0..leaves {
        let parent = (leaves > 1).then_some(ClassId(1000 + l / per_parent));
        let rt = (mixed && l % 4 == 0).then_some(ServiceCurve {
            m1: Rate(LINK.as_bps() / 50),
            d: Duration::from_millis(5),
            m2: Rate(LINK.as_bps() / 200),
        });
        let ul = (mixed && l % 5 == 0).then_some(ServiceCurve::linear(Rate(LINK.as_bps() / 20)));
        let params = ClassParams {
            rt,
            ls: Some(share(leaves)),
            ul,
        };
        q.add_class(ClassId(l + 1), parent, params, leaf()).unwrap();
    }
    q
}

/// One enqueue + one dequeue with every leaf backlogged. Not inlined so
/// callgrind can attribute instructions to it (`--toggle-collect=*step*`).
#[inline(never)]
fn step(
    q: &mut Hfsc,
    leaves: u32,
    id: &mut u64,
    next_class: &mut u32,
    now: &mut Instant,
    drops: &mut Drops,
) {
    // Refill the class the last packet left from keeps every leaf
    // backlogged; round-robin as a fallback.
    *id += 1;
    let class = ClassId(*next_class % leaves + 1);
    q.enqueue(Packet::synthetic(*id, 1000, 0, class), *now, drops);
    match q.dequeue(*now, drops) {
        Some(p) => {
            *next_class = p.class.0 - 1;
            *now += LINK.tx_time(p.cost as u64);
            black_box(p);
        }
        None => {
            *now = q.next_wakeup().unwrap_or(*now + Duration(1000));
            *next_class += 1;
        }
    }
    drops.clear();
}

/// One packet to an idle leaf and out again (activation and passivation).
#[inline(never)]
fn sparse_step(q: &mut Hfsc, leaves: u32, id: &mut u64, now: &mut Instant, drops: &mut Drops) {
    *id += 1;
    let class = ClassId((*id % leaves as u64) as u32 + 1);
    q.enqueue(Packet::synthetic(*id, 1000, 0, class), *now, drops);
    match q.dequeue(*now, drops) {
        Some(p) => {
            *now += LINK.tx_time(p.cost as u64);
            black_box(p);
        }
        None => *now = q.next_wakeup().unwrap_or(*now + Duration(1000)),
    }
    drops.clear();
}

/// With `SLUICE_BENCH_ROUNDS` set, prints the packets measured, so callgrind
/// totals of `step` turn into instructions per packet.
fn report(name: &str, packets: u64) {
    if std::env::var_os("SLUICE_BENCH_ROUNDS").is_some() {
        eprintln!("{name}: {packets} packets");
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hfsc_enq_deq");
    for (name, mixed) in [("ls", false), ("rt+ls+ul", true)] {
        for leaves in [1u32, 10, 100] {
            let mut q = tree(leaves, mixed);
            let mut drops: Drops = Vec::with_capacity(16);
            let mut now = Instant(1_000_000_000);
            let mut id = 0u64;
            // Every leaf backlogged with 8 packets.
            for l in 0..leaves {
                for _ in 0..8 {
                    id += 1;
                    q.enqueue(
                        Packet::synthetic(id, 1000, 0, ClassId(l + 1)),
                        now,
                        &mut drops,
                    );
                }
            }
            let mut next_class = 0u32;
            let mut packets = 0u64;
            g.bench_function(BenchmarkId::new(name, leaves), |b| {
                b.iter(|| {
                    packets += 1;
                    step(
                        &mut q,
                        leaves,
                        &mut id,
                        &mut next_class,
                        &mut now,
                        &mut drops,
                    );
                })
            });
            report(&format!("hfsc_enq_deq/{name}/{leaves}"), packets);
        }
    }
    // Sparse traffic: every packet finds its leaf empty, so each one runs
    // the activation (init_ed / init_vf) and passivation paths.
    {
        let leaves = 100u32;
        let mut q = tree(leaves, true);
        let mut drops: Drops = Vec::with_capacity(16);
        let mut now = Instant(1_000_000_000);
        let mut id = 0u64;
        let mut packets = 0u64;
        g.bench_function(BenchmarkId::new("sparse", leaves), |b| {
            b.iter(|| {
                packets += 1;
                sparse_step(&mut q, leaves, &mut id, &mut now, &mut drops);
            })
        });
        report("hfsc_enq_deq/sparse/100", packets);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
