//! Classification cost per packet with 10 000 states and 100 rules:
//! state hits, and misses that walk every rule.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_classify::{Classifier, Options, StateHit};
use sluice_conf::ir::*;
use sluice_time::{Duration, Instant};
use sluice_wire::{build, parse, tcp_flags, IpInfo};
use std::net::{IpAddr, Ipv4Addr};

const RULES: usize = 100;
const STATES: usize = 10_000;

fn rule(i: usize) -> Rule {
    Rule {
        action: Action::Pass,
        direction: Some(Direction::Out),
        quick: false,
        log: false,
        iface: Some(("ext".into(), false)),
        af: Some(AddrFamily::Inet),
        proto: Some(6),
        from: Endpoint {
            addr: AddrMatch::Net(IpNet {
                addr: IpAddr::V4(Ipv4Addr::new(10, i as u8, 0, 0)),
                prefix: 16,
            }),
            negated: false,
            port: None,
        },
        to: Endpoint {
            addr: AddrMatch::Any,
            negated: false,
            port: Some(PortOp::Range(1, 65535)),
        },
        flags: Some((tcp_flags::SYN, tcp_flags::SYN | tcp_flags::ACK)),
        tos: None,
        icmp_type: None,
        state: StatePolicy::Keep,
        state_opts: Default::default(),
        queue: Some((format!("q{i}"), Some("ack".into()))),
        prio: None,
        max_mss: None,
        line: i as u32 + 1,
    }
}

fn info(src: Ipv4Addr, sport: u16, flags: u8, len: usize) -> IpInfo {
    let f = build::tcp(src, Ipv4Addr::new(198, 51, 100, 1), sport, 443, flags, len);
    parse(&f).unwrap().ip.unwrap()
}

fn bench_classify(c: &mut Criterion) {
    let cfg = Config {
        rules: (0..RULES).map(rule).collect(),
        ..Config::default()
    };
    let mut cl = Classifier::new(
        &cfg,
        Options {
            hash_key: [9; 16],
            ..Options::default()
        },
    );
    let ext = cl.iface("ext");
    let now = Instant::from_nanos(1);
    // 10 000 connections from the last rule's network: every SYN walks all rules.
    let mut data = Vec::with_capacity(STATES);
    for i in 0..STATES {
        let src = Ipv4Addr::new(10, (RULES - 1) as u8, (i / 250) as u8, (i % 250) as u8 + 1);
        let d = cl.classify(
            now,
            ext,
            Direction::Out,
            &info(src, 20_000 + i as u16, tcp_flags::SYN, 0),
        );
        assert_eq!(d.state, StateHit::Created);
        data.push(info(src, 20_000 + i as u16, tcp_flags::ACK, 1200));
    }
    assert_eq!(cl.stats().states, STATES);
    let t = now + Duration::from_secs(1);

    let mut i = 0;
    c.bench_function("classify/state_hit_10k_states", |b| {
        b.iter(|| {
            i = (i + 1) % STATES;
            black_box(cl.classify(t, ext, Direction::Out, &data[i]))
        })
    });

    // Sources outside every rule's network: all 100 rules evaluated, no state created.
    let misses: Vec<IpInfo> = (0..1024)
        .map(|i| {
            info(
                Ipv4Addr::new(172, 16, (i / 250) as u8, (i % 250) as u8 + 1),
                30_000,
                tcp_flags::SYN,
                0,
            )
        })
        .collect();
    let mut j = 0;
    c.bench_function("classify/miss_walks_100_rules", |b| {
        b.iter(|| {
            j = (j + 1) % misses.len();
            black_box(cl.classify(t, ext, Direction::Out, &misses[j]))
        })
    });
    assert_eq!(cl.stats().states, STATES);
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3))
}

criterion_group! { name = benches; config = config(); targets = bench_classify }
criterion_main!(benches);
