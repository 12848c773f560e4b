//! Runtime rate changes of an interface's shaper (issue #16 item 1):
//! packets waiting when the rate changes are all forwarded, in order,
//! each side of the step at its own rate, and the reports show the rate
//! that runs.

mod common;

use common::{bridge_keyed, udp_burst, LAN, WAN};
use sluice_engine::Engine;
use sluice_time::{Duration, Instant, Rate};

fn engine(text: &str) -> Engine {
    bridge_keyed(text, [1; 16])
}

/// Drains WAN every 50 µs from `*now` up to `until` (excluded); returns
/// the frames' bytes and source ports.
fn drain(e: &mut Engine, now: &mut Instant, until: Instant, ports: &mut Vec<u16>) -> u64 {
    let mut bytes = 0;
    while *now < until {
        e.handle_timeout(*now);
        while let Some(f) = e.poll_tx(*now, WAN) {
            bytes += f.len() as u64;
            ports.push(u16::from_be_bytes([f[34], f[35]]));
        }
        *now += Duration::from_micros(50);
    }
    bytes
}

fn step_with_packets_queued(conf: &str) {
    let mut e = engine(conf);
    let t0 = Instant(1_000_000_000);
    // 1000 bytes of payload, 1042 on the wire.
    udp_burst(&mut e, t0, 5000, 1000, 1000);
    assert_eq!(e.queued(WAN), 1000);
    let (mut now, mut ports) = (t0, Vec::new());
    let ms = |n: u64| t0 + Duration::from_millis(n);
    // 8 Mbit/s for 500 ms, then 2 Mbit/s for 1 s, then 16 Mbit/s.
    let b1 = drain(&mut e, &mut now, ms(500), &mut ports);
    assert_eq!(e.set_rate(WAN, Rate::mbps(2), ms(500)), Ok(Rate::mbps(8)));
    let b2 = drain(&mut e, &mut now, ms(1500), &mut ports);
    assert_eq!(e.set_rate(WAN, Rate::mbps(16), ms(1500)), Ok(Rate::mbps(2)));
    let b3 = drain(&mut e, &mut now, ms(5000), &mut ports);
    let per_s = |b: u64, ms: u64| b * 8 * 1000 / ms;
    let (r1, r2) = (per_s(b1, 500), per_s(b2, 1000));
    eprintln!("{conf:?}: {r1} bit/s, then {r2} bit/s");
    // Within 3 % (a bucket or one frame at the edges) of each rate.
    assert!(
        r1.abs_diff(8_000_000) < 240_000,
        "before the step: {r1} bit/s"
    );
    assert!(
        r2.abs_diff(2_000_000) < 60_000,
        "after the step: {r2} bit/s"
    );
    assert_eq!(ports.len(), 1000, "nothing lost ({b1} + {b2} + {b3} bytes)");
    assert!(ports.windows(2).all(|w| w[0] < w[1]), "order kept");
    let c = e.counters(WAN).unwrap();
    assert_eq!(c.tx_frames, 1000);
    assert_eq!(c.queue_drops + c.memory_drops, 0);
    assert_eq!(e.memory().held_bytes, 0, "memory accounting follows");
    // The reports show the rate that runs.
    assert_eq!(e.rate(WAN), Some(Rate::mbps(16)));
    let rep = e.report();
    let wan = rep.iter().find(|i| i.name == "wan0").unwrap();
    assert_eq!(wan.bandwidth, Some(Rate::mbps(16)));
}

#[test]
fn token_bucket_rate_step_with_packets_queued() {
    step_with_packets_queued(
        "altq on $ext_if priq bandwidth 8Mb qlimit 2000 queue { q }\n\
         queue q priority 1 qlimit 2000 priq(default)\n",
    );
}

#[test]
fn pipe_rate_step_with_packets_queued() {
    step_with_packets_queued("pipe up on $ext_if bandwidth 8Mb qlimit 2000\n");
}

#[test]
fn root_queue_shows_the_new_rate_and_children_keep_theirs() {
    let mut e = engine(
        "queue up on $ext_if bandwidth 20M\n\
         queue bulk parent up bandwidth 10M default\n\
         queue voip parent up bandwidth 2M\n",
    );
    e.set_rate(WAN, Rate::mbps(12), Instant(5)).unwrap();
    let rep = e.report();
    let wan = rep.iter().find(|i| i.name == "wan0").unwrap();
    let bw = |n: &str| {
        wan.classes
            .iter()
            .find(|c| c.name.as_deref() == Some(n))
            .and_then(|c| c.bandwidth)
    };
    assert_eq!(bw("up"), Some(Rate::mbps(12)));
    assert_eq!(bw("bulk"), Some(Rate::mbps(10)));
    assert_eq!(bw("voip"), Some(Rate::mbps(2)));
    assert!(e.set_rate(WAN, Rate::ZERO, Instant(6)).is_err());
    assert!(
        e.set_rate(LAN, Rate::mbps(1), Instant(6)).is_err(),
        "no queues on lan0"
    );
}
