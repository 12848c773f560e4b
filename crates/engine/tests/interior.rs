//! Rules naming a queue that has children (issue #15, item 1), through the
//! whole engine: CBQ queues the packets in that class, as ALTQ does; HFSC
//! sends them to the default queue, as pf does.

mod common;

use common::{bridge as engine, LAN, WAN};
use sluice_engine::{Engine, Rx};
use sluice_time::{Duration, Instant};
use std::net::Ipv4Addr;

fn segment(dport: u16) -> Vec<u8> {
    let (c, s) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(192, 0, 2, 1));
    sluice_wire::build::tcp(c, s, 40_000, dport, 0x18, 1460)
}

/// Offers `n` segments to port `dport` at once, then lets the link send
/// for `span`: the bytes that left.
fn offer_and_send(e: &mut Engine, dport: u16, n: usize, span: Duration) -> u64 {
    let start = Instant(1_000_000_000);
    for _ in 0..n {
        let r = e.handle_rx(start, LAN, segment(dport));
        assert!(matches!(r, Rx::Queued { .. }), "{r:?}");
    }
    let mut now = start;
    let mut bytes = 0;
    while now < start + span {
        while let Some(f) = e.poll_tx(now, WAN) {
            bytes += f.len() as u64;
        }
        now = e
            .poll_timeout()
            .unwrap_or(start + span)
            .max(now + Duration(1));
    }
    bytes
}

const CBQ: &str = "
altq on $ext_if cbq bandwidth 2Mb queue { std, web }
queue std bandwidth 10% cbq(default)
queue web bandwidth 80% qlimit 500 { web_in, web_out }
queue web_in  bandwidth 50% cbq(borrow)
queue web_out bandwidth 50% cbq(borrow)
pass out on $ext_if proto tcp to port 80 no state queue web
";

#[test]
fn cbq_queues_in_the_interior_class_at_its_allocation() {
    let mut e = engine(CBQ);
    let span = Duration::from_secs(2);
    let bytes = offer_and_send(&mut e, 80, 400, span);
    let rep = e.report();
    let web = rep[WAN].class("web").expect("web");
    let std = rep[WAN].class("std").expect("std");
    // Queued in web itself, not in the default.
    assert_eq!(std.passed_packets, 0);
    assert!(web.passed_packets > 0 && web.qlen > 0, "{web:?}");
    // At web's 80 % of 2 Mbit/s (no borrow on web): 1.6 Mbit/s.
    let rate = bytes as f64 * 8.0 / span.as_secs_f64();
    eprintln!("web sent {rate:.0} bit/s");
    assert!((rate - 1.6e6).abs() / 1.6e6 < 0.05, "{rate}");
}

const HFSC: &str = "
altq on $ext_if hfsc bandwidth 2Mb queue { bulk, interactive }
queue bulk bandwidth 60% hfsc(default)
queue interactive bandwidth 40% { ssh, dns }
queue ssh bandwidth 50%
queue dns bandwidth 50%
pass out on $ext_if proto tcp to port 22 no state queue interactive
";

#[test]
fn hfsc_sends_an_interior_queues_packets_to_the_default() {
    let mut e = engine(HFSC);
    offer_and_send(&mut e, 22, 20, Duration::from_millis(50));
    let rep = e.report();
    let bulk = rep[WAN].class("bulk").expect("bulk");
    assert_eq!(bulk.passed_packets + bulk.qlen, 20, "{bulk:?}");
    assert_eq!(rep[WAN].class("ssh").expect("ssh").passed_packets, 0);
}
