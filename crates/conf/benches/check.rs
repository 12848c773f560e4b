//! How long `check` takes on realistic files: it runs on every `sluice check`
//! and every reload, so it should stay far below a human's notice.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

fn big_ruleset() -> String {
    let mut s =
        String::from("ext_if = \"em0\"\naltq on $ext_if hfsc bandwidth 100Mb queue { std, pri }\n");
    s.push_str(
        "queue std bandwidth 80% qlimit 500 hfsc(default)\nqueue pri bandwidth 20% qlimit 100\n",
    );
    for i in 0..1000 {
        s.push_str(&format!(
            "pass out on $ext_if proto {{ tcp udp }} from 10.{}.{}.0/24 to any port {{ 80 443 }} queue (std, pri) label \"r{i}\"\n",
            i / 256,
            i % 256
        ));
    }
    s
}

fn bench(c: &mut Criterion) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/valid/");
    let files = [
        (
            "pfsense_hfsc",
            std::fs::read_to_string(format!("{dir}06-pfsense-altq-hfsc.conf")).unwrap(),
        ),
        (
            "pfconf5_assorted",
            std::fs::read_to_string(format!("{dir}10-pfconf5-assorted.conf")).unwrap(),
        ),
        ("1000_rules_x4", big_ruleset()),
    ];
    let mut g = c.benchmark_group("check");
    for (name, text) in &files {
        assert!(sluice_conf::check(name, text, &[]).is_ok(), "{name}");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| sluice_conf::check(name, black_box(text), &[]))
        });
    }
    g.finish();
    let cfg = sluice_conf::check("big", &files[2].1, &[]).unwrap().config;
    c.bench_function("print/1000_rules_x4", |b| {
        b.iter(|| sluice_conf::print(black_box(&cfg)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
