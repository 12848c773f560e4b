//! What `sluice check` accepts, the engine must be able to run; and whatever
//! traffic arrives, the engine keeps its contract: no panic, every frame
//! accounted for, and a `poll_timeout` that never asks to be woken in the past
//! (a data plane arming its timer from it would spin).

use sluice_engine::{Engine, Options, Rx};
use sluice_sched::testing::Rng;
use sluice_time::{Duration, Instant};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

fn conf_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut v = Vec::new();
    for dir in ["examples", "crates/conf/tests/golden/valid"] {
        for e in std::fs::read_dir(root.join(dir)).expect("dir") {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "conf") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

fn defines() -> Vec<(String, String)> {
    vec![
        ("ext_if".to_string(), "wan0".to_string()),
        ("int_if".to_string(), "lan0".to_string()),
    ]
}

/// Interfaces named in the file, with wan0/lan0 first so the bridge shapes
/// whatever the config puts on them.
fn engine_for(name: &str, cfg: &sluice_conf::ir::Config) -> Engine {
    let mut names = vec!["lan0".to_string(), "wan0".to_string()];
    for q in &cfg.interfaces {
        if !names.contains(&q.ifname) {
            names.push(q.ifname.clone());
        }
    }
    // Bridge lan0 with wan0, and every other shaped interface with the next
    // one, so each tree receives traffic.
    let mut bridge = vec![(0, 1)];
    let mut i = 2;
    while i + 1 < names.len() {
        bridge.push((i, i + 1));
        i += 2;
    }
    if i < names.len() {
        bridge.push((i, 0)); // odd one out shares lan0's peer slot: still fed
    }
    Engine::new(
        cfg,
        Options {
            ifaces: names,
            bridge,
            hash_key: [3; 16],
            iface_addrs: vec![],
        },
    )
    .unwrap_or_else(|e| panic!("{name}: check accepted a config the engine cannot build: {e}"))
}

fn random_frame(rng: &mut Rng) -> Vec<u8> {
    use sluice_wire::build;
    let host = |rng: &mut Rng, v6: bool| -> IpAddr {
        let h = rng.below(6) as u8;
        if v6 {
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, h as u16 + 1))
        } else {
            IpAddr::V4(Ipv4Addr::new(192, 168, 1, h + 1))
        }
    };
    let v6 = rng.below(4) == 0;
    let (s, d) = (host(rng, v6), host(rng, v6));
    let sport = [22u16, 53, 80, 443, 5060, 40_000][rng.below(6) as usize];
    let dport = [22u16, 53, 80, 443, 5060, 40_001][rng.below(6) as usize];
    let mut f = match rng.below(10) {
        0..=5 => {
            let flags = [0x02u8, 0x12, 0x10, 0x18, 0x11, 0x04][rng.below(6) as usize];
            let payload = [0usize, 0, 100, 1400][rng.below(4) as usize];
            build::tcp(s, d, sport, dport, flags, payload)
        }
        6..=7 => build::udp(s, d, sport, dport, rng.below(1200) as usize),
        8 => build::arp(Ipv4Addr::new(192, 168, 1, 1), Ipv4Addr::new(192, 168, 1, 2)),
        _ => {
            // A valid frame, damaged: truncated or with random bytes.
            let mut f = build::tcp(s, d, sport, dport, 0x10, 200);
            let cut = rng.below(f.len() as u64) as usize;
            if rng.below(2) == 0 {
                f.truncate(cut);
            } else if let Some(b) = f.get_mut(cut) {
                *b = rng.next_u64() as u8;
            }
            f
        }
    };
    if rng.below(8) == 0 {
        f = build::vlan_wrap(&f, 0x8100, 42);
    }
    f
}

#[test]
fn every_accepted_config_builds_and_survives_random_traffic() {
    for path in conf_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let checked = sluice_conf::check(&name, &text, &defines())
            .unwrap_or_else(|d| panic!("{name}: {}", d[0].render(&name, &text)));
        let mut e = engine_for(&name, &checked.config);
        let mut rng = Rng::new(name.len() as u64);
        let mut now = Instant(1_000_000_000);
        let n = e.iface_count();
        let (mut rx, mut refused, mut sent) = (0u64, 0u64, 0u64);
        for step in 0..3000u32 {
            let iface = rng.below(n as u64) as usize;
            rx += 1;
            if let Rx::Dropped(_) = e.handle_rx(now, iface, random_frame(&mut rng)) {
                refused += 1;
            }
            if step % 7 == 0 {
                now += Duration(rng.below(20_000_000));
                e.handle_timeout(now);
                for i in 0..n {
                    while e.poll_tx(now, i).is_some() {
                        sent += 1;
                    }
                }
                if let Some(t) = e.poll_timeout() {
                    assert!(
                        t > now,
                        "{name}: poll_timeout {t:?} not after {now:?} with nothing sendable"
                    );
                }
            }
        }
        // Drain to the end: everything received is sent or dropped.
        for _ in 0..100_000 {
            for i in 0..n {
                while e.poll_tx(now, i).is_some() {
                    sent += 1;
                }
            }
            let queued: usize = (0..n).map(|i| e.queued(i)).sum();
            match e.poll_timeout() {
                Some(t) if queued > 0 => now = t.max(now + Duration(1)),
                _ => break,
            }
            e.handle_timeout(now);
        }
        let mut handed_back = 0u64;
        while e.poll_dropped().is_some() {
            handed_back += 1;
        }
        assert_eq!(
            (0..n).map(|i| e.queued(i)).sum::<usize>(),
            0,
            "{name}: drain"
        );
        let queue_drops: u64 = (0..n).map(|i| e.counters(i).unwrap().queue_drops).sum();
        let tx: u64 = (0..n).map(|i| e.counters(i).unwrap().tx_frames).sum();
        let rx_drops: u64 = (0..n)
            .map(|i| {
                let c = e.counters(i).unwrap();
                c.malformed + c.blocked + c.state_limit + c.bad_state + c.no_route + c.probe_replies
            })
            .sum();
        assert_eq!(
            rx,
            tx + rx_drops + queue_drops,
            "{name}: frames unaccounted for"
        );
        assert_eq!(
            handed_back,
            rx_drops + queue_drops,
            "{name}: drops not handed back"
        );
        // autorate's probes are sluice's own frames, not forwarded ones.
        let probes: u64 = (0..n).map(|i| e.counters(i).unwrap().probes_sent).sum();
        assert_eq!(sent, tx + probes, "{name}");
        assert!(refused <= rx_drops + queue_drops, "{name}");
        assert!(
            sent > 0 && rx_drops > 0,
            "{name}: the run exercised both paths"
        );
    }
}
