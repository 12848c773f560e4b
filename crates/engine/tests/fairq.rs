//! FAIRQ through the whole engine in virtual time: real frames, flows
//! hashed by connection into buckets, the token bucket at the interface's
//! rate, the classes' counters as `show queues` reads them.

mod common;

use common::{bridge as engine, LAN, WAN};
use sluice_engine::{Engine, Rx};
use sluice_time::{Duration, Instant};
use std::net::Ipv4Addr;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

fn tcp(sport: u16, dport: u16, flags: u8, payload: usize) -> Vec<u8> {
    sluice_wire::build::tcp(CLIENT, SERVER, sport, dport, flags, payload)
}

/// Runs the engine until `WAN` has sent one frame, advancing virtual time
/// to each wake-up.
fn next_out(e: &mut Engine, now: &mut Instant) -> Vec<u8> {
    for _ in 0..10_000 {
        if let Some(f) = e.poll_tx(*now, WAN) {
            return f;
        }
        let wake = e.poll_timeout().expect("queued frames imply a wake-up");
        *now = wake.max(*now + Duration(1));
    }
    panic!("nothing left in 10 000 wake-ups");
}

fn config(hogs: &str) -> String {
    format!(
        "
altq on $ext_if fairq bandwidth 1Mb queue {{ q_bulk, q_top }}
queue q_top priority 7 fairq(buckets 1024)
queue q_bulk priority 1 qlimit 100 fairq(default buckets 1024 {hogs})

pass out on $ext_if proto tcp from any to any port 5201 no state queue q_bulk
pass out on $ext_if proto tcp from any to any port 22 no state queue q_top
pass out on $ext_if proto tcp from any to any port 53 no state queue q_bulk
"
    )
}

/// Four bulk uploads of 10 segments each are queued; one segment leaves,
/// then a small request of a fifth connection arrives (same class). Returns
/// how many frames left before it, and the engine.
fn small_request_position(hogs: &str) -> (usize, Engine) {
    let mut e = engine(&config(hogs));
    let mut now = Instant(1_000_000_000);
    for _ in 0..10 {
        for port in 40_000..40_004 {
            let r = e.handle_rx(now, LAN, tcp(port, 5201, ACK | PSH, 1460));
            assert!(matches!(r, Rx::Queued { .. }), "{r:?}");
        }
    }
    assert_eq!(next_out(&mut e, &mut now).len(), 1514);
    let req = tcp(41_000, 53, ACK | PSH, 40);
    assert!(matches!(
        e.handle_rx(now, LAN, req.clone()),
        Rx::Queued { .. }
    ));
    for n in 0..40 {
        if next_out(&mut e, &mut now) == req {
            return (n, e);
        }
    }
    panic!("the request never left");
}

#[test]
fn hogs_let_a_small_request_pass_the_bulk_flows() {
    let (with, e) = small_request_position("hogs 100Kb");
    let (without, _) = small_request_position("");
    // With hogs it is a light bucket, served next; without, it takes its
    // turn after each of the four bulk buckets (three or four of them,
    // depending on where the round stands).
    eprintln!("frames before the request: {with} with hogs, {without} without");
    assert_eq!(with, 0, "with hogs");
    assert!(without >= 3, "without hogs: {without} frames first");
    let rep = e.report();
    let bulk = rep[WAN].class("q_bulk").expect("q_bulk");
    assert_eq!(bulk.passed_packets, 2);
    assert_eq!(bulk.qlen, 39);
    assert_eq!(rep[WAN].class("q_top").expect("q_top").passed_packets, 0);
}

#[test]
fn a_higher_class_goes_first_and_the_link_rate_holds() {
    let mut e = engine(&config("hogs 100Kb"));
    let start = Instant(1_000_000_000);
    let mut now = start;
    for _ in 0..20 {
        for port in 40_000..40_004 {
            e.handle_rx(now, LAN, tcp(port, 5201, ACK | PSH, 1460));
        }
        // 1400 bytes of payload: told apart from the bulk by length.
        e.handle_rx(now, LAN, tcp(42_000, 22, ACK | PSH, 1400));
    }
    let mut order = Vec::new();
    let mut bytes = 0;
    for _ in 0..100 {
        let f = next_out(&mut e, &mut now);
        bytes += f.len() as u64;
        order.push(f.len());
    }
    // The first frame may be a bulk one (the token bucket's first
    // dequeue finds q_top's too); after it, q_top's 20 all go first.
    let top: Vec<usize> = (0..100).filter(|&i| order[i] == 1454).collect();
    eprintln!("q_top frames at {top:?}");
    assert_eq!(top.len(), 20);
    assert!(*top.last().unwrap() <= 20, "{order:?}");
    let secs = (now - start).as_secs_f64();
    let rate = bytes as f64 * 8.0 / secs;
    assert!((rate - 1e6).abs() / 1e6 < 0.03, "achieved {rate} bit/s");
}

#[test]
fn a_fairq_tree_is_flat_and_a_parent_holds_packets() {
    let mut e = engine(
        "
altq on $ext_if fairq bandwidth 1Mb queue { std, bulk }
queue std priority 3 bandwidth 40% fairq(default)
queue bulk priority 1 bandwidth 50% { p2p }
queue p2p priority 0 bandwidth 50% fairq(buckets 64)
pass out on $ext_if proto tcp to port 873 no state queue bulk
pass out on $ext_if proto tcp to port 6881 no state queue p2p
",
    );
    let now = Instant(1_000_000_000);
    for _ in 0..5 {
        e.handle_rx(now, LAN, tcp(40_000, 6881, ACK | PSH, 1460));
        e.handle_rx(now, LAN, tcp(40_001, 873, ACK | PSH, 1460));
    }
    let rep = e.report();
    let held = |n: &str| {
        let c = rep[WAN].class(n).expect(n);
        c.passed_packets + c.qlen
    };
    assert_eq!((held("bulk"), held("p2p"), held("std")), (5, 5, 0));
}
