//! pf's sequence-window check through the engine (classify's `window.rs`):
//! a segment outside its connection's window is not forwarded and is
//! counted as `bad-state`; the honest segments around it pass.

mod common;

use common::{bridge, CLIENT, LAN, SERVER, WAN};
use sluice_engine::{DropCause, Engine, Rx};
use sluice_time::Instant;
use sluice_wire::build::{tcp_with, TcpSpec};
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, PSH, SYN};

/// A segment of the client's connection to the server's port 443.
fn seg(from_client: bool, seq: u32, ack: u32, flags: u8, window: u16, len: usize) -> Vec<u8> {
    let mut o = Vec::new();
    if flags & SYN != 0 {
        TcpOption::WindowScale(7).encode(&mut o);
    }
    let (src, dst, sport, dport) = if from_client {
        (CLIENT, SERVER, 40_000, 443)
    } else {
        (SERVER, CLIENT, 443, 40_000)
    };
    tcp_with(
        src,
        dst,
        &TcpSpec {
            sport,
            dport,
            seq,
            ack,
            flags,
            window,
            options: &o,
            payload_len: len,
        },
    )
}

fn passes(e: &mut Engine, iface: usize, f: Vec<u8>) -> bool {
    let t = Instant::ZERO;
    let r = e.handle_rx(t, iface, f);
    while e.poll_tx(t, 1 - iface).is_some() {}
    matches!(r, Rx::Queued { .. })
}

/// The review's forged pure ACK (ack = real + 0x7fffffff) on an
/// established connection under `pass … keep state` is dropped and
/// counted; the connection's honest traffic passes before and after.
#[test]
fn a_forged_ack_is_dropped_as_bad_state() {
    let mut e = bridge(
        "queue down on $int_if bandwidth 100M\n\
         queue dl parent down bandwidth 100M default\n\
         pass out on $ext_if keep state\n\
         pass in on $int_if keep state\n",
    );
    assert!(passes(&mut e, LAN, seg(true, 1000, 0, SYN, 65535, 0)));
    assert!(passes(
        &mut e,
        WAN,
        seg(false, 5000, 1001, SYN | ACK, 65535, 0)
    ));
    assert!(passes(&mut e, LAN, seg(true, 1001, 5001, ACK, 1000, 0)));
    let mut next = 5001u32;
    for _ in 0..10 {
        assert!(passes(
            &mut e,
            WAN,
            seg(false, next, 1001, ACK | PSH, 512, 1448)
        ));
        next += 1448;
    }
    let forged = seg(true, 1001, next.wrapping_add(0x7fff_ffff), ACK, 1000, 0);
    let r = e.handle_rx(Instant::ZERO, LAN, forged);
    assert_eq!(r, Rx::Dropped(DropCause::BadState));
    assert_eq!(e.counters(LAN).map(|c| c.bad_state), Some(1));
    assert!(passes(&mut e, LAN, seg(true, 1001, next, ACK, 1000, 0)));
    assert!(passes(&mut e, WAN, seg(false, next, 1001, ACK, 512, 1448)));
    assert_eq!(
        e.counters(LAN).map(|c| (c.bad_state, c.blocked)),
        Some((1, 0))
    );
    assert_eq!(e.counters(WAN).map(|c| c.bad_state), Some(0));
}
