//! NAT-aware host isolation through the engine (crate::nat, CAKE's
//! `nat`): behind a masquerading router every LAN host has the router's
//! address; with the original hosts told (as conntrack would), the light
//! host gets its half again, and without them per-flow fairness is all
//! there is.

mod common;

use sluice_engine::Rx;
use sluice_time::{Duration, Instant};
use sluice_wire::build;
use std::net::{IpAddr, Ipv4Addr};

use common::{bridge as engine, LAN, SERVER, WAN};

/// The router's WAN address: every LAN host's, after masquerading.
const ROUTER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const HOST_A: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
const HOST_B: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 20);
/// Host A's one (masqueraded) port; host B's start here.
const PORT_A: u16 = 10_000;

const CONF: &str = "queue up on $ext_if bandwidth 2M\n\
     queue up_q parent up flows 1024 bandwidth 2M qlimit 1024 default dual-srchost\n\
     queue down on $int_if bandwidth 8M\n\
     queue down_q parent down flows 1024 bandwidth 8M qlimit 1024 default dual-dsthost\n\
     pass\n";

/// What conntrack would answer for the router's `port`.
fn original(port: u16) -> IpAddr {
    IpAddr::V4(if port == PORT_A { HOST_A } else { HOST_B })
}

/// Host A's share, as in hosts.rs, with every LAN address masqueraded to
/// [`ROUTER`]; `nat`: the engine asks and is answered each tick.
fn share_of_a(from: usize, nat: bool) -> f64 {
    let e = &mut engine(CONF);
    e.set_nat_hosts(nat);
    let to = if from == LAN { WAN } else { LAN };
    let frame = |port: u16| {
        if from == LAN {
            build::udp_v4(ROUTER, SERVER, port, 5001, 1000)
        } else {
            build::udp_v4(SERVER, ROUTER, 5001, port, 1000)
        }
    };
    let mut ports = vec![PORT_A];
    ports.extend((0..16).map(|i| 20_000 + i));
    let (mut a, mut total, mut asked) = (0u64, 0u64, 0usize);
    let step = Duration::from_micros(500);
    let mut now = Instant::ZERO;
    for tick in 0..8_000u32 {
        if tick % 4 == 0 {
            for &port in &ports {
                let rx = e.handle_rx(now, from, frame(port));
                assert!(matches!(rx, Rx::Queued { .. } | Rx::Dropped(_)), "{rx:?}");
            }
        }
        for k in e.take_nat_lookups() {
            asked += 1;
            assert_eq!(
                k.local,
                IpAddr::V4(ROUTER),
                "the router's end is the local one"
            );
            e.answer_nat_lookup(k, Some(original(k.local_port)));
        }
        e.handle_timeout(now);
        while let Some(out) = e.poll_tx(now, to) {
            let port = u16::from_be_bytes(if from == LAN {
                [out[34], out[35]]
            } else {
                [out[36], out[37]]
            });
            if tick >= 2_000 {
                total += out.len() as u64;
                if port == PORT_A {
                    a += out.len() as u64;
                }
            }
        }
        while e.poll_dropped().is_some() {}
        now += step;
    }
    assert_eq!(
        asked,
        if nat { ports.len() } else { 0 },
        "one question per connection"
    );
    a as f64 / total as f64
}

#[test]
fn masqueraded_hosts_are_told_apart_by_their_original_address() {
    for (from, way) in [(LAN, "upload"), (WAN, "download")] {
        let without = share_of_a(from, false);
        assert!(without < 0.08, "{way} without NAT lookups: {without:.3}");
        let with = share_of_a(from, true);
        assert!(
            (0.45..=0.55).contains(&with),
            "{way} with NAT lookups: host A got {with:.3}"
        );
    }
}
