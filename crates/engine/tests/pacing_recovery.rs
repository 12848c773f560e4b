//! ACK pacing and a sender in loss recovery (issue #36, item 5): without
//! SACK, a NewReno sender retransmits one hole per partial ACK (RFC 6582
//! §3.2), so holding those ACKs to the class's pace stretches recovery by
//! a paced interval per hole. Duplicate ACKs put the connection in
//! recovery until an ACK covers what was sent when they began; its
//! partial ACKs pass at once, and pacing resumes after.

mod common;

use common::tcp::*;
use sluice_engine::Engine;
use sluice_time::{Duration, Instant};
use sluice_wire::tcp_flags::ACK;

const T0: Instant = Instant(1_000_000_000);

/// The client's pure ACK of flow 0 up to `ack` at `t`: whether it left
/// toward the server at once (not held).
fn passes(e: &mut Engine, t: Instant, ack: u32) -> bool {
    e.handle_rx(t, LAN, seg(0, true, 1, ack, ACK, 32768, &[], 0));
    let out: Vec<_> = std::iter::from_fn(|| e.poll_tx(t, WAN)).collect();
    out.iter().map(|f| read(f)).any(|r| r.0 == 0 && r.2 == ack)
}

/// An engine whose class has just spent its pace on flow 0, and the ACK
/// it holds (the next advancing ACK of flow 0 is held too).
fn drained() -> (Engine, u32) {
    let mut e = engine_rule("10M", "pass keep state", BOTH);
    handshake(&mut e, T0, 0);
    server_data(&mut e, T0, 0, 1, SENT);
    let mut ack = 1;
    for _ in 0..SENT / 2 {
        ack += MSS;
        if !passes(&mut e, T0, ack) {
            return (e, ack);
        }
    }
    panic!("{} ACKs at once all passed: nothing is paced", SENT / 2);
}

/// Segments the server has sent when the loss is seen.
const SENT: u32 = 60;

#[test]
fn partial_acks_of_a_recovery_pass_at_once() {
    let (mut e, hole) = drained();
    // Three duplicates: the segment at `hole` was lost.
    for _ in 0..3 {
        e.handle_rx(T0, LAN, seg(0, true, 1, hole, ACK, 32768, &[], 0));
    }
    while e.poll_tx(T0, WAN).is_some() {}
    // The retransmission filled that hole; the next ones are further on.
    for k in [5, 12] {
        assert!(
            passes(&mut e, T0, hole + k * MSS),
            "a partial ACK clocks the next retransmission: {:?}",
            dl_report(&e)
        );
    }
    // All that was sent is acknowledged: recovery is over.
    let end = 1 + SENT * MSS;
    assert!(passes(&mut e, T0, end), "{:?}", dl_report(&e));
    let t1 = T0 + Duration::from_micros(1);
    server_data(&mut e, t1, 0, end, SENT);
    let held = (1..=SENT).any(|k| !passes(&mut e, t1, end + k * MSS));
    assert!(held, "after recovery the ACKs are paced again");
}

#[test]
fn without_duplicates_an_advancing_ack_is_paced() {
    let (mut e, last) = drained();
    assert!(!passes(&mut e, T0, last + 5 * MSS));
}
