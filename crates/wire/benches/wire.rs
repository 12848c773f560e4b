use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_wire::{build, parse};

fn bench_parse(c: &mut Criterion) {
    let tcp4 = build::tcp(build::V4_SRC, build::V4_DST, 40000, 443, 0x10, 1400);
    let tcp6 = build::tcp(build::V6_SRC, build::V6_DST, 40000, 443, 0x10, 1400);
    let qinq = build::vlan_wrap(&build::vlan_wrap(&tcp4, 0x8100, 10), 0x88a8, 20);
    c.bench_function("parse/tcp_v4", |b| b.iter(|| parse(black_box(&tcp4))));
    c.bench_function("parse/tcp_v6", |b| b.iter(|| parse(black_box(&tcp6))));
    c.bench_function("parse/qinq_tcp_v4", |b| b.iter(|| parse(black_box(&qinq))));
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
