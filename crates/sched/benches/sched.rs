//! ns per packet (enqueue + dequeue) for each discipline. Filled in per discipline.
use criterion::{criterion_group, criterion_main, Criterion};

fn noop(_c: &mut Criterion) {}

criterion_group!(benches, noop);
criterion_main!(benches);
