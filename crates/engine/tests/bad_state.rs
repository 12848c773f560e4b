//! pf's sequence-window check through the engine (classify's `window.rs`):
//! a segment outside its connection's window is not forwarded and is
//! counted as `bad-state`; the honest segments around it pass.

mod common;

use common::{bridge, LAN, WAN};
use sluice_engine::{DropCause, Engine, Rx};
use sluice_time::Instant;
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, PSH, SYN};

/// A segment of the client's connection to the server's port 443 (the
/// SYNs offer window scale 7).
fn seg(from_client: bool, seq: u32, ack: u32, flags: u8, window: u16, len: usize) -> Vec<u8> {
    let mut o = Vec::new();
    if flags & SYN != 0 {
        TcpOption::WindowScale(7).encode(&mut o);
    }
    common::tcp::seg(0, from_client, seq, ack, flags, window, &o, len)
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

/// The ACK filter drops queued ACKs a newer one covers: a forged "newer"
/// ACK would make it drop the real ones and then die at the sender. The
/// window check drops the forgery before the queue, and the newest real
/// ACK leaves.
#[test]
fn a_forged_newer_ack_does_not_make_the_ack_filter_drop_the_real_ones() {
    let mut e = bridge(
        "altq on $ext_if priq bandwidth 64Kb queue { up }\n\
         queue up qlimit 50 priq(default ack-filter)\n\
         pass\n",
    );
    assert!(passes(&mut e, LAN, seg(true, 1000, 0, SYN, 65535, 0)));
    assert!(passes(
        &mut e,
        WAN,
        seg(false, 5000, 1001, SYN | ACK, 65535, 0)
    ));
    assert!(passes(&mut e, LAN, seg(true, 1001, 5001, ACK, 1024, 0)));
    let t = Instant::ZERO;
    for k in 0..10u32 {
        let data = seg(false, 5001 + k * 1448, 1001, ACK, 512, 1448);
        assert!(matches!(e.handle_rx(t, WAN, data), Rx::Queued { .. }));
    }
    while e.poll_tx(t, LAN).is_some() {}
    // The client's ACKs queue behind the 64 kbit/s link.
    let last = 5001 + 10 * 1448;
    for k in 1..=10u32 {
        e.handle_rx(t, LAN, seg(true, 1001, 5001 + k * 1448, ACK, 1024, 0));
    }
    let forged = seg(true, 1001, 5001u32.wrapping_add(0x7fff_ffff), ACK, 1024, 0);
    assert_eq!(
        e.handle_rx(t, LAN, forged),
        Rx::Dropped(DropCause::BadState)
    );
    let mut acks = Vec::new();
    for ms in 0..2_000 {
        let now = t + sluice_time::Duration::from_millis(ms);
        e.handle_timeout(now);
        while let Some(f) = e.poll_tx(now, WAN) {
            acks.push(u32::from_be_bytes(f[14 + 28..14 + 32].try_into().unwrap()));
        }
    }
    assert_eq!(
        acks.last(),
        Some(&last),
        "the newest real ACK, last: {acks:?}"
    );
}
