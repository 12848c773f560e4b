//! The `engine_ops` fuzz target's seed corpus, run as a unit test: every file
//! in `tests/seeds/engine_ops` goes through the same checker as the fuzzer
//! (`sluice_engine::testing`). The corpus is generated here, deterministically;
//! `UPDATE_SEEDS=1 cargo test -p sluice-engine --test fuzz_seeds` rewrites it.
//! An input the fuzzer found goes in the same directory under a name of its
//! own (`regress_…`) and runs with the rest.

use sluice_engine::testing::{check_bytes, Damage, Frame, Op, Script, L4};
use sluice_sched::testing::Rng;
use std::collections::BTreeMap;
use std::path::PathBuf;

const CONFIGS: u8 = 7;
/// The index of examples/fairq.conf in `sluice_engine::testing`'s list.
const FAIRQ: u8 = 8;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/seeds/engine_ops")
}

fn tcp(v6: bool, flags: u8, payload: u8) -> Frame {
    Frame {
        v6,
        l4: L4::Tcp,
        flags,
        payload,
        ..Frame::default()
    }
}

fn rx(iface: u8, frame: Frame) -> Op {
    Op::Rx {
        iface,
        frame,
        damage: None,
    }
}

/// A TCP connection opened from the LAN, a few segments each way, closed.
fn tcp_session(v6: bool) -> Vec<Op> {
    let (syn, synack, ack, psh, fin) = (0, 1, 2, 3, 4);
    let mut ops = vec![
        rx(0, tcp(v6, syn, 0)),
        rx(1, tcp(v6, synack, 0)),
        rx(0, tcp(v6, ack, 0)),
    ];
    for i in 0..6 {
        ops.push(rx(0, tcp(v6, psh, 250)));
        ops.push(rx(1, tcp(v6, ack, 0)));
        ops.push(Op::Step {
            step: 4 + i % 3,
            back: false,
        });
        ops.push(Op::PollTx { iface: 1, max: 2 });
    }
    ops.extend([rx(0, tcp(v6, fin, 0)), rx(1, tcp(v6, fin, 0)), Op::Service]);
    ops
}

/// Issue #36's forgeries amid an honest session (ACK pacing and window
/// clamping in `lab-rrul-paced`): ACKs whose acknowledgement or sequence
/// number is flipped (byte 42.. of an untagged IPv4 frame is the ACK
/// field, 38.. the sequence), SYNs and SYN-ACKs on the established
/// connection, a SYN flood from every LAN host and port; then the honest
/// session goes on and everything drains.
fn forged() -> Vec<Op> {
    let (syn, synack, ack, psh) = (0, 1, 2, 3);
    let mut ops = tcp_session(false);
    ops.truncate(3 + 4 * 3);
    let forge = |iface: u8, flags: u8, at: u8, x: u8| Op::Rx {
        iface,
        frame: tcp(false, flags, 0),
        damage: Some(Damage::Xor(at, x)),
    };
    for (at, x) in [(42, 0x80), (43, 0x7f), (44, 0x01), (38, 0x40), (45, 0xff)] {
        ops.push(forge(0, ack, at, x));
        ops.push(forge(1, ack, at, x));
    }
    ops.extend([rx(0, tcp(false, syn, 0)), rx(0, tcp(false, synack, 0))]);
    for i in 0..64u8 {
        let frame = Frame {
            host: i % 4,
            port: i % 8,
            alt_sport: i % 2 == 0,
            ..tcp(false, syn, 0)
        };
        ops.push(rx(0, frame));
    }
    for _ in 0..4 {
        ops.push(rx(1, tcp(false, psh, 250)));
        ops.push(rx(0, tcp(false, ack, 0)));
        ops.push(Op::Step {
            step: 5,
            back: false,
        });
    }
    ops.push(Op::Service);
    ops
}

/// A UDP burst to several ports (the shipped rules queue by port), then drained.
fn udp_burst(v6: bool, iface: u8) -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..24u8 {
        let frame = Frame {
            v6,
            l4: L4::Udp,
            port: i % 8,
            host: i % 4,
            remote: i / 8,
            payload: 200 + i,
            tos: i % 8,
            ..Frame::default()
        };
        ops.push(rx(iface, frame));
    }
    ops.extend([
        Op::Service,
        Op::Step {
            step: 7,
            back: false,
        },
        Op::Service,
        Op::Service,
    ]);
    ops
}

/// One valid segment, damaged forty ways: cut short or with a byte flipped.
fn damaged_run(v6: bool, stride: u8, xor: u8) -> Vec<Op> {
    let damage = |i: u8| match i % 2 {
        0 => Damage::Truncate(i * stride),
        _ => Damage::Xor(i * stride, xor),
    };
    (0..40)
        .map(|i| Op::Rx {
            iface: 0,
            frame: tcp(v6, 3, 40),
            damage: Some(damage(i)),
        })
        .chain([Op::Service])
        .collect()
}

fn malformed() -> Vec<(String, Vec<Op>)> {
    let raw = |bytes: Vec<u8>| Op::RxRaw { iface: 0, bytes };
    let mut ipv4_header_only = vec![0xff; 12];
    ipv4_header_only.extend([0x08, 0x00, 0x45, 0x00, 0x00, 0x14]);
    let mut ipv6_bad_len = vec![0xff; 12];
    ipv6_bad_len.extend([0x86, 0xdd, 0x60, 0, 0, 0, 0xff, 0xff, 17, 64]);
    vec![
        (
            "raw_empty_and_short".into(),
            vec![raw(vec![]), raw(vec![0]), raw(vec![0; 13]), Op::Service],
        ),
        (
            "raw_ipv4_header_only".into(),
            vec![raw(ipv4_header_only), Op::PollTx { iface: 1, max: 4 }],
        ),
        (
            "raw_ipv6_bad_payload_len".into(),
            vec![raw(ipv6_bad_len), Op::Service],
        ),
        ("damaged_ipv4".into(), damaged_run(false, 3, 0xa5)),
        ("damaged_ipv6".into(), damaged_run(true, 2, 0x0f)),
        (
            "vlan_arp_icmp".into(),
            [L4::Arp, L4::Icmp, L4::Icmp]
                .iter()
                .enumerate()
                .map(|(i, &l4)| {
                    rx(
                        i as u8 % 2,
                        Frame {
                            l4,
                            v6: i == 2,
                            vlan: true,
                            payload: 10,
                            ..Frame::default()
                        },
                    )
                })
                .chain([Op::Service])
                .collect(),
        ),
    ]
}

/// Fill, then jump the clock by an hour, a year, a century; step backwards.
fn clock_jumps() -> Vec<Op> {
    let mut ops = udp_burst(false, 0);
    ops.extend(tcp_session(true));
    for step in [11, 14, 15, 15] {
        ops.extend([
            rx(0, tcp(false, 3, 100)),
            Op::Step { step, back: false },
            Op::Timeout,
            Op::Service,
        ]);
    }
    ops.extend([
        Op::Step {
            step: 15,
            back: true,
        },
        Op::Step {
            step: 3,
            back: true,
        },
        Op::Service,
    ]);
    ops
}

fn reloads(from: u8) -> Vec<Op> {
    let mut ops = udp_burst(false, 0);
    for to in 0..CONFIGS {
        ops.push(Op::Reload {
            config: (from + to) % CONFIGS,
        });
        ops.extend(udp_burst(true, to % 2).into_iter().take(6));
    }
    ops.push(Op::Service);
    ops
}

/// Random op sequences, so the corpus reaches past what the hand-written seeds do.
fn random(seed: u64) -> (u8, Vec<u8>) {
    let mut rng = Rng::new(seed);
    let config = rng.below(u64::from(CONFIGS)) as u8;
    let mut bytes = Script::new(config, rng.below(2) == 0).bytes();
    for _ in 0..rng.below(300) + 50 {
        bytes.push(rng.next_u64() as u8);
    }
    (config, bytes)
}

fn corpus() -> BTreeMap<String, Vec<u8>> {
    let mut c = BTreeMap::new();
    for config in 0..CONFIGS {
        let fixed = config % 2 == 1;
        c.insert(
            format!("c{config}_tcp4_session"),
            Script::new(config, fixed).ops(&tcp_session(false)).bytes(),
        );
        c.insert(
            format!("c{config}_tcp6_session"),
            Script::new(config, !fixed).ops(&tcp_session(true)).bytes(),
        );
        c.insert(
            format!("c{config}_udp4_burst"),
            Script::new(config, fixed).ops(&udp_burst(false, 0)).bytes(),
        );
        c.insert(
            format!("c{config}_udp6_burst_wan"),
            Script::new(config, fixed).ops(&udp_burst(true, 1)).bytes(),
        );
        c.insert(
            format!("c{config}_reloads"),
            Script::new(config, fixed).ops(&reloads(config)).bytes(),
        );
    }
    for (name, ops) in malformed() {
        c.insert(name, Script::new(2, false).ops(&ops).bytes());
    }
    for config in [1, 3, 4] {
        c.insert(
            format!("c{config}_clock_jumps"),
            Script::new(config, false).ops(&clock_jumps()).bytes(),
        );
    }
    for seed in 1..=12 {
        let (config, bytes) = random(seed);
        c.insert(format!("c{config}_random_{seed:02}"), bytes);
    }
    // lab-rrul-paced, the eighth: TCP control against forgeries.
    c.insert(
        "c7_forged".into(),
        Script::new(7, false).ops(&forged()).bytes(),
    );
    // FAIRQ (examples/fairq.conf), the ninth configuration: sessions and
    // bursts through its buckets, and reloads to and from it.
    c.insert(
        format!("c{FAIRQ}_tcp4_session"),
        Script::new(FAIRQ, false).ops(&tcp_session(false)).bytes(),
    );
    c.insert(
        format!("c{FAIRQ}_udp6_burst_wan"),
        Script::new(FAIRQ, true).ops(&udp_burst(true, 1)).bytes(),
    );
    let mut ops = reloads(0);
    ops.insert(1, Op::Reload { config: FAIRQ });
    c.insert(
        format!("c{FAIRQ}_reloads"),
        Script::new(FAIRQ, false).ops(&ops).bytes(),
    );
    c
}

fn checked_in() -> BTreeMap<String, Vec<u8>> {
    let mut c = BTreeMap::new();
    for e in std::fs::read_dir(dir()).expect("tests/seeds/engine_ops") {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        c.insert(name, std::fs::read(&p).unwrap());
    }
    c
}

/// Every generated seed is checked in as generated. Other files may sit
/// beside them: inputs a fuzzer found, kept as regression tests.
#[test]
fn the_seed_corpus_is_what_its_generator_writes() {
    let want = corpus();
    if std::env::var_os("UPDATE_SEEDS").is_some() {
        std::fs::create_dir_all(dir()).unwrap();
        for (name, bytes) in &want {
            std::fs::write(dir().join(name), bytes).unwrap();
        }
    }
    let have = checked_in();
    for (name, bytes) in &want {
        assert_eq!(
            have.get(name),
            Some(bytes),
            "{name}: UPDATE_SEEDS=1 rewrites the corpus"
        );
    }
}

#[test]
fn every_seed_keeps_the_engine_contract() {
    let seeds = checked_in();
    assert!(seeds.len() >= 24, "only {} seeds", seeds.len());
    for (name, bytes) in seeds {
        if let Err(e) = std::panic::catch_unwind(|| check_bytes(&bytes)) {
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            panic!("seed {name}: {msg}");
        }
    }
}
