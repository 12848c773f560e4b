//! Host isolation through the engine: the LAN's hosts share the upload
//! (`dual-srchost`) and the download (`dual-dsthost`) before their flows
//! do, with the hosts told apart by the engine's keyed address hashes.

mod common;

use sluice_engine::Rx;
use sluice_time::{Duration, Instant};
use sluice_wire::build;
use std::net::Ipv4Addr;

use common::{bridge as engine, LAN, SERVER, WAN};

const HOST_A: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
const HOST_B: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 20);

/// 2 Mbit/s up, 8 Mbit/s down, FQ-CoDel flow queues; `up`/`down` are the
/// words after each queue (an isolation mode, or nothing).
fn conf(up: &str, down: &str) -> String {
    format!(
        "queue up on $ext_if bandwidth 2M\n\
         queue up_q parent up flows 1024 bandwidth 2M qlimit 1024 default {up}\n\
         queue down on $int_if bandwidth 8M\n\
         queue down_q parent down flows 1024 bandwidth 8M qlimit 1024 default {down}\n\
         pass\n"
    )
}

/// Host A sends one UDP flow, host B `b_flows`, each offered faster than
/// the link, from `from` (LAN or WAN side) for 4 s, through a new engine
/// of `text`. Returns host A's share of the bytes delivered after the
/// first second.
fn share_of_a(text: &str, from: usize, b_flows: u16) -> f64 {
    let e = &mut engine(text);
    let to = if from == LAN { WAN } else { LAN };
    let frame = |host: Ipv4Addr, port: u16| {
        if from == LAN {
            build::udp_v4(host, SERVER, port, 5001, 1000)
        } else {
            build::udp_v4(SERVER, host, 5001, port, 1000)
        }
    };
    let mut flows = vec![(HOST_A, 10_000u16)];
    flows.extend((0..b_flows).map(|i| (HOST_B, 20_000 + i)));
    let (mut a, mut total) = (0u64, 0u64);
    let step = Duration::from_micros(500);
    let mut now = Instant::ZERO;
    for tick in 0..8_000u32 {
        // Every 2 ms each flow offers a frame: 4 Mbit/s per flow.
        if tick % 4 == 0 {
            for &(host, port) in &flows {
                let rx = e.handle_rx(now, from, frame(host, port));
                assert!(matches!(rx, Rx::Queued { .. } | Rx::Dropped(_)), "{rx:?}");
            }
        }
        e.handle_timeout(now);
        while let Some(out) = e.poll_tx(now, to) {
            if tick < 2_000 {
                continue;
            }
            let host = if from == LAN {
                &out[26..30]
            } else {
                &out[30..34]
            };
            total += out.len() as u64;
            if host == HOST_A.octets() {
                a += out.len() as u64;
            }
        }
        while e.poll_dropped().is_some() {}
        now += step;
    }
    a as f64 / total as f64
}

#[test]
fn one_flow_against_sixteen_gets_half_with_isolation() {
    // Per flow, host A gets 1/17 of each direction.
    let text = conf("", "");
    let up = share_of_a(&text, LAN, 16);
    let down = share_of_a(&text, WAN, 16);
    assert!(
        up < 0.08 && down < 0.08,
        "per flow: up {up:.3}, down {down:.3}"
    );
    // Isolated by LAN host: half of each, within ±5 points.
    let text = conf("dual-srchost", "dual-dsthost");
    let up = share_of_a(&text, LAN, 16);
    let down = share_of_a(&text, WAN, 16);
    assert!(
        (0.45..=0.55).contains(&up),
        "dual-srchost: host A got {up:.3} of the upload"
    );
    assert!(
        (0.45..=0.55).contains(&down),
        "dual-dsthost: host A got {down:.3} of the download"
    );
}

#[test]
fn the_wrong_end_isolates_nothing() {
    // dual-dsthost on the upload tells hosts by destination: the one
    // server, so per-flow fairness is all that is left.
    let text = conf("dual-dsthost", "dual-srchost");
    let up = share_of_a(&text, LAN, 16);
    let down = share_of_a(&text, WAN, 16);
    assert!(
        up < 0.08 && down < 0.08,
        "wrong end: up {up:.3}, down {down:.3}"
    );
}

#[test]
fn an_fq_codel_pipe_isolates_too() {
    let text = "pipe up on $ext_if bandwidth 2Mb sched fq_codel dual-srchost\n\
                pass\n";
    let up = share_of_a(text, LAN, 16);
    assert!(
        (0.45..=0.55).contains(&up),
        "pipe dual-srchost: host A got {up:.3}"
    );
}
