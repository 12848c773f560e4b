//! `set prio` on an interface without queues: OpenBSD's eight priority
//! bands decide the order while frames wait for the transmit ring.

mod common;

use sluice_engine::{Engine, Rx};
use sluice_time::Instant;
use sluice_wire::build;
use sluice_wire::tcp_flags::ACK;

use common::{bridge as engine, CLIENT, LAN, SERVER, WAN};

/// (name, frame) pairs offered in this order, all before the ring frees.
fn offered() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("data", build::tcp(CLIENT, SERVER, 40_000, 443, ACK, 1000)),
        ("udp", build::udp_v4(CLIENT, SERVER, 5000, 5001, 500)),
        ("ack", build::tcp(CLIENT, SERVER, 40_000, 443, ACK, 0)),
        ("ping", build::icmp_v4_echo(CLIENT, SERVER, 1, 1, 56)),
        ("data2", build::tcp(CLIENT, SERVER, 40_000, 443, ACK, 900)),
    ]
}

fn order(e: &mut Engine) -> Vec<&'static str> {
    let t = Instant::ZERO;
    let frames = offered();
    for (_, f) in &frames {
        assert!(matches!(e.handle_rx(t, LAN, f.clone()), Rx::Queued { .. }));
    }
    std::iter::from_fn(|| e.poll_tx(t, WAN))
        .map(|out| {
            frames
                .iter()
                .find(|(_, f)| *f == out)
                .expect("a frame offered")
                .0
        })
        .collect()
}

#[test]
fn bands_by_set_prio_and_the_pair_for_empty_acks() {
    let mut e = engine(
        "pass\n\
         pass proto icmp set prio 7\n\
         pass proto tcp no state set prio (1, 6)\n",
    );
    // ping 7; the empty ACK 6 (the pair's second); UDP the default 3;
    // TCP data 1, in arrival order.
    assert_eq!(order(&mut e), ["ping", "ack", "udp", "data", "data2"]);
}

#[test]
fn without_set_prio_arrival_order() {
    let mut e = engine("pass\n");
    assert_eq!(order(&mut e), ["data", "udp", "ack", "ping", "data2"]);
}
