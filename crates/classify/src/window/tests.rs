//! pf's regress cases for the window check (in-window, retransmission,
//! window probe, beyond the right edge, old ACK, ACK of unsent data, RST),
//! with and without window scaling, in both directions.

use super::*;
use crate::track::ProtoState;
use sluice_wire::tcp_flags::PSH;

const C_ISN: u32 = 1000;
const S_ISN: u32 = 5000;

fn seg(seq: u32, ack: u32, flags: u8, len: u16, window: u16) -> TcpSeg {
    TcpSeg {
        seq,
        ack,
        flags,
        payload_len: len,
        window,
        ..TcpSeg::default()
    }
}

/// A connection as the state table tracks it.
struct Conn {
    w: TcpWindow,
    proto: ProtoState,
}

impl Conn {
    fn new(proto: ProtoState) -> Conn {
        Conn {
            w: TcpWindow::default(),
            proto,
        }
    }

    fn send(&mut self, side: usize, g: TcpSeg) -> bool {
        let ProtoState::Tcp(peers) = self.proto else {
            return false;
        };
        let ok = self.w.track(side, &g, peers);
        if ok {
            self.proto.update(side, g.flags);
        }
        ok
    }

    /// True if the segment is refused; a refused one leaves the view as
    /// it was.
    fn bad(&mut self, side: usize, g: TcpSeg) -> bool {
        let before = self.w;
        let ok = self.send(side, g);
        assert!(ok || self.w == before, "a bad segment moved the view");
        !ok
    }
}

/// SYN (client, window `cwin`, WS `ws.0`), SYN-ACK (server, window
/// 65535, WS `ws.1`), then the client's ACK with window field `cwin`.
/// Client seqlo `C_ISN + 1`, server seqlo `S_ISN + 1`. (An edge never
/// retracts: a smaller SYN window keeps the ACK's the right edge.)
fn handshake(ws: (Option<u8>, Option<u8>), cwin: u16) -> Conn {
    let mut c = Conn::new(ProtoState::new(6).0);
    let mut syn = seg(C_ISN, 0, SYN, 0, cwin);
    syn.wscale = ws.0;
    assert!(c.send(0, syn));
    let mut sa = seg(S_ISN, C_ISN + 1, SYN | ACK, 0, 65535);
    sa.wscale = ws.1;
    assert!(c.send(1, sa));
    assert!(c.send(0, seg(C_ISN + 1, S_ISN + 1, ACK, 0, cwin)));
    c
}

#[test]
fn in_window_data_passes_both_ways() {
    for ws in [(None, None), (Some(7), Some(2))] {
        let mut c = handshake(ws, 1000);
        // Server → client: the client's window is 1000 << 7 (or 1000).
        let shift = if ws.0.is_some() { 7 } else { 0 };
        let room = 1000u32 << shift;
        let len = 1448.min(room) as u16;
        let mut seq = S_ISN + 1;
        while seq + u32::from(len) <= S_ISN + 1 + room {
            assert!(
                c.send(1, seg(seq, C_ISN + 1, ACK | PSH, len, 500)),
                "{ws:?}"
            );
            seq += u32::from(len);
        }
        // The client acks it all and sends data inside the server's window.
        assert!(c.send(0, seg(C_ISN + 1, seq, ACK, 100, 1000)));
        assert!(c.send(1, seg(seq, C_ISN + 101, ACK, 0, 500)));
    }
}

#[test]
fn data_beyond_the_right_edge_is_blocked() {
    for (ws, room) in [((None, None), 1000u32), ((Some(7), Some(2)), 1000 << 7)] {
        let mut c = handshake(ws, 1000);
        let edge = S_ISN + 1 + room;
        assert!(c.send(1, seg(edge - 100, C_ISN + 1, ACK, 100, 500)));
        assert!(
            c.bad(1, seg(edge - 100, C_ISN + 1, ACK, 101, 500)),
            "{ws:?}"
        );
        assert!(c.bad(1, seg(edge + 50_000, C_ISN + 1, ACK, 10, 500)));
    }
    // Only one side offered WS: no scaling either way (the client's 1000
    // is 1000 bytes, not 128 000).
    let mut c = handshake((Some(7), None), 1000);
    assert!(c.bad(1, seg(S_ISN + 1, C_ISN + 1, ACK, 1001, 500)));
    assert!(c.send(1, seg(S_ISN + 1, C_ISN + 1, ACK, 1000, 500)));
}

#[test]
fn retransmissions_pass_but_not_older_than_a_window() {
    let mut c = handshake((Some(7), Some(7)), 1000);
    let mut seq = S_ISN + 1;
    for _ in 0..100 {
        assert!(c.send(1, seg(seq, C_ISN + 1, ACK, 1448, 1000)));
        seq += 1448;
        assert!(c.send(0, seg(C_ISN + 1, seq, ACK, 0, 1000)));
    }
    // Far behind, but within the client's largest window (1000 << 7) of
    // the highest sent.
    let back = seq - 1000 * 128;
    assert!(c.send(1, seg(back, C_ISN + 1, ACK, 1448, 1000)));
    assert!(c.bad(1, seg(back - 1, C_ISN + 1, ACK, 1448, 1000)));
}

#[test]
fn a_zero_window_admits_a_one_byte_probe() {
    let mut c = handshake((None, None), 0);
    assert!(c.bad(1, seg(S_ISN + 1, C_ISN + 1, ACK, 2, 500)));
    assert!(c.send(1, seg(S_ISN + 1, C_ISN + 1, ACK, 1, 500)));
    // Linux's probe: no data, one below snd_una.
    assert!(c.send(1, seg(S_ISN, C_ISN + 1, ACK, 0, 500)));
}

#[test]
fn acks_old_by_up_to_a_window_pass_and_acks_of_unsent_data_do_not() {
    for ws in [(None, None), (Some(3), Some(3))] {
        let shift = if ws.0.is_some() { 3 } else { 0 };
        let mut c = handshake(ws, 65535);
        let mut seq = S_ISN + 1;
        for _ in 0..40 {
            assert!(c.send(1, seg(seq, C_ISN + 1, ACK, 1448, 1000)));
            seq += 1448;
        }
        // Up to MAX_ACK_WINDOW beyond what the server sent: pf's slack.
        assert!(c.send(0, seg(C_ISN + 1, seq + MAX_ACK_WINDOW, ACK, 0, 65535)));
        assert!(c.bad(0, seg(C_ISN + 1, seq + MAX_ACK_WINDOW + 1, ACK, 0, 65535)));
        assert!(c.bad(
            0,
            seg(C_ISN + 1, seq.wrapping_add(0x7fff_ffff), ACK, 0, 65535)
        ));
        assert!(c.bad(
            0,
            seg(C_ISN + 1, seq.wrapping_add(0x8000_0000), ACK, 0, 65535)
        ));
        // Old: up to MAX_ACK_WINDOW (in the sender's scale) behind.
        let oldest = seq.wrapping_sub(MAX_ACK_WINDOW << shift);
        assert!(c.send(0, seg(C_ISN + 1, oldest, ACK, 0, 65535)), "{ws:?}");
        assert!(c.bad(0, seg(C_ISN + 1, oldest.wrapping_sub(1), ACK, 0, 65535)));
    }
}

#[test]
fn a_rst_must_carry_the_expected_sequence() {
    let mut c = handshake((Some(7), Some(7)), 1000);
    assert!(c.send(1, seg(S_ISN + 1, C_ISN + 1, ACK, 1000, 1000)));
    assert!(c.bad(0, seg(C_ISN + 1 + 100_000, 0, RST, 0, 0)));
    assert!(c.bad(0, seg(C_ISN + 1 + 500, S_ISN + 1001, RST | ACK, 0, 0)));
    assert!(c.bad(0, seg(C_ISN.wrapping_add(0x8000_0000), 0, RST, 0, 0)));
    assert!(c.send(0, seg(C_ISN + 1, S_ISN + 1001, RST | ACK, 0, 0)));
}

#[test]
fn the_syn_ack_must_acknowledge_the_syn() {
    for ack in [C_ISN, C_ISN + 2, C_ISN + 0x4000_0000, 0] {
        let mut c = Conn::new(ProtoState::new(6).0);
        assert!(c.send(0, seg(C_ISN, 0, SYN, 0, 65535)));
        assert!(c.bad(1, seg(S_ISN, ack, SYN | ACK, 0, 65535)), "{ack}");
        assert!(c.send(1, seg(S_ISN, C_ISN + 1, SYN | ACK, 0, 65535)));
        // Retransmitted SYN-ACK and SYN pass.
        assert!(c.send(1, seg(S_ISN, C_ISN + 1, SYN | ACK, 0, 65535)));
        assert!(c.send(0, seg(C_ISN, 0, SYN, 0, 65535)));
    }
}

/// A SYN on an established connection does not re-arm the window scale:
/// out of the window it is bad; in it, the offer it carries is ignored.
#[test]
fn a_later_syn_changes_nothing() {
    let mut c = handshake((Some(7), Some(7)), 1000);
    let mut forged = seg(C_ISN + 0x4000_0000, 0, SYN, 0, 65535);
    forged.wscale = Some(14);
    assert!(c.bad(0, forged));
    forged.seq = C_ISN;
    assert!(c.send(0, forged));
    assert_eq!(c.w.view()[0].wscale, Some(7));
    // The client's 1000 still means 1000 << 7 to the server.
    assert!(c.send(1, seg(S_ISN + 1, C_ISN + 1, ACK, 1000, 1000)));
    assert!(c.bad(1, seg(S_ISN + 1 + 128_000, C_ISN + 1, ACK, 1, 1000)));
}

/// A state created by a data segment (no SYN seen): the scale is unknown,
/// so bounds assume 14 and an honest, scaled transfer keeps flowing.
#[test]
fn a_mid_stream_pickup_keeps_working() {
    let mut c = Conn::new(ProtoState::Tcp([TcpPeer::SynSent, TcpPeer::Closed]));
    let (mut cs, mut ss) = (7_000_000u32, 3_000_000_000u32);
    // The client sends a full window (500 << 9 = 256 000 bytes) before the
    // first reply: loose until both peers are seen.
    for _ in 0..150 {
        assert!(c.send(0, seg(cs, ss, ACK, 1448, 500)));
        cs += 1448;
    }
    // A forged first segment from the server side acknowledging half the
    // sequence space ahead is refused and leaves the pickup as it was.
    assert!(c.bad(1, seg(ss, cs.wrapping_add(0x7fff_0000), ACK, 0, 500)));
    // The server acknowledges more than sluice saw sent (the client's
    // first segments here were retransmissions); then both ways.
    assert!(c.send(1, seg(ss, cs + 5000, ACK, 0, 500)));
    cs += 5000;
    for _ in 0..150 {
        assert!(c.send(0, seg(cs, ss, ACK, 1448, 500)));
        cs += 1448;
        assert!(c.send(1, seg(ss, cs, ACK, 1000, 500)));
        ss += 1000;
    }
    assert_eq!(c.w.view()[0].wscale, None);
    // A forged ACK is still caught.
    assert!(c.bad(0, seg(cs, ss.wrapping_add(0x7fff_ffff), ACK, 0, 500)));
}

#[test]
fn sequence_numbers_wrap() {
    let mut c = Conn::new(ProtoState::new(6).0);
    let (ci, si) = (u32::MAX - 10, u32::MAX - 3000);
    assert!(c.send(0, seg(ci, 0, SYN, 0, 65535)));
    assert!(c.send(1, seg(si, ci.wrapping_add(1), SYN | ACK, 0, 65535)));
    assert!(c.send(
        0,
        seg(ci.wrapping_add(1), si.wrapping_add(1), ACK, 0, 65535)
    ));
    let mut seq = si.wrapping_add(1);
    for _ in 0..40 {
        assert!(c.send(1, seg(seq, ci.wrapping_add(1), ACK, 1448, 1000)));
        seq = seq.wrapping_add(1448);
        assert!(c.send(0, seg(ci.wrapping_add(1), seq, ACK, 0, 65535)));
    }
    assert!(c.bad(
        0,
        seg(ci.wrapping_add(1), seq.wrapping_add(70_000), ACK, 0, 65535)
    ));
}
