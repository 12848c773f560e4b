//! The state table's sequence-window check through the classifier: both
//! address families, `sloppy`, a mid-stream pickup, and honest random
//! conversations (model-checked) that never meet a bad state.

mod common;
use common::*;
use proptest::prelude::*;
use sluice_classify::{BlockReason, Classifier, TcpSeg, Verdict};
use sluice_conf::ir::Direction;
use sluice_wire::tcp_flags::{ACK, FIN, RST, SYN};
use sluice_wire::IpInfo;
use std::collections::VecDeque;

/// `pass out keep state` with pf's `flags S/SA` (or any flags), sloppy or not.
fn tracker(sloppy: bool, flags_any: bool) -> (Classifier, sluice_classify::IfaceId) {
    let mut r = pass();
    r.direction = Some(Direction::Out);
    r.flags = (!flags_any).then_some((SYN, SYN | ACK));
    r.state_opts.sloppy = sloppy;
    let mut c = classifier(&config(vec![r]));
    let e = c.iface("ext");
    (c, e)
}

/// One end of the conversation: its address and port.
#[derive(Clone, Copy)]
struct End {
    addr: &'static str,
    port: u16,
}

const V4: [End; 2] = [
    End {
        addr: "192.168.1.2",
        port: 40_000,
    },
    End {
        addr: "198.51.100.7",
        port: 443,
    },
];
const V6: [End; 2] = [
    End {
        addr: "2001:db8::2",
        port: 40_000,
    },
    End {
        addr: "2001:db8:1::7",
        port: 443,
    },
];

/// The frame of `g` from `s` to `d` (its flags and payload length).
fn segment(s: End, d: End, g: &TcpSeg) -> IpInfo {
    tcp(
        s.addr,
        d.addr,
        s.port,
        d.port,
        g.flags,
        usize::from(g.payload_len),
    )
}

/// Classify a segment from `ends[side]` (the initiator's go Out).
fn send(
    c: &mut Classifier,
    e: sluice_classify::IfaceId,
    ends: [End; 2],
    side: usize,
    g: TcpSeg,
) -> Verdict {
    let pkt = segment(ends[side], ends[1 - side], &g);
    let dir = if side == 0 {
        Direction::Out
    } else {
        Direction::In
    };
    c.classify_seg(secs(1), e, dir, &pkt, Some(&g)).verdict
}

/// A segment from `ends[side]` passes.
#[track_caller]
fn passes(c: &mut Classifier, e: sluice_classify::IfaceId, ends: [End; 2], side: usize, g: TcpSeg) {
    assert_eq!(send(c, e, ends, side, g), Verdict::Pass);
}

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

const BAD: Verdict = Verdict::Block(BlockReason::BadState);

/// Handshake with WS 7 both ways, client window 1000 (<< 7), then the
/// review's forged ACK (ack = real + 0x7fffffff), an ACK of unsent data,
/// data past the edge and an out-of-window RST: all bad, counted; the
/// honest segments around them pass. Both address families.
#[test]
fn out_of_window_segments_are_bad_state_in_both_families() {
    for ends in [V4, V6] {
        let (mut c, e) = tracker(false, false);
        let mut syn = seg(100, 0, SYN, 0, 65535);
        syn.wscale = Some(7);
        let mut sa = seg(9000, 101, SYN | ACK, 0, 65535);
        sa.wscale = Some(7);
        passes(&mut c, e, ends, 0, syn);
        passes(&mut c, e, ends, 1, sa);
        passes(&mut c, e, ends, 0, seg(101, 9001, ACK, 0, 1000));
        passes(&mut c, e, ends, 1, seg(9001, 101, ACK, 1448, 512));
        let forged = seg(101, 10_449u32.wrapping_add(0x7fff_ffff), ACK, 0, 1000);
        assert_eq!(send(&mut c, e, ends, 0, forged), BAD);
        assert_eq!(
            send(&mut c, e, ends, 0, seg(101, 10_449 + 70_000, ACK, 0, 1000)),
            BAD
        );
        assert_eq!(
            send(&mut c, e, ends, 1, seg(9001 + 128_000, 101, ACK, 1, 512)),
            BAD
        );
        assert_eq!(
            send(&mut c, e, ends, 1, seg(9001 + 50_000, 101, RST, 0, 0)),
            BAD
        );
        passes(&mut c, e, ends, 0, seg(101, 10_449, ACK, 0, 1000));
        assert_eq!(c.stats().bad_state, 4);
        let v = c.states().next().and_then(|s| s.windows).unwrap();
        assert_eq!(
            (v[0].seqlo, v[0].wscale, v[1].seqlo),
            (101, Some(7), 10_449)
        );
        // The RST at the expected sequence closes it.
        passes(&mut c, e, ends, 1, seg(10_449, 101, RST | ACK, 0, 0));
    }
}

#[test]
fn sloppy_states_pass_all() {
    let (mut c, e) = tracker(true, false);
    passes(&mut c, e, V4, 0, seg(100, 0, SYN, 0, 65535));
    passes(&mut c, e, V4, 1, seg(9000, 7, SYN | ACK, 0, 65535));
    for ack in [0x7fff_ffffu32, 0x8000_0000, 12] {
        let g = seg(ack.wrapping_mul(3), ack, ACK, 100, 0);
        passes(&mut c, e, V4, 0, g);
        passes(&mut c, e, V4, 1, g);
    }
    assert_eq!(c.stats().bad_state, 0);
    assert_eq!(c.states().next().map(|s| s.windows), Some(None));
}

/// `flags any`: the state starts from a data segment of a scaled
/// connection already running (window 300 means 300 << 8 bytes); the
/// transfer keeps flowing both ways.
#[test]
fn a_mid_stream_pickup_keeps_working() {
    let (mut c, e) = tracker(false, true);
    let (mut cs, mut ss) = (5_000_000u32, 77u32);
    for _ in 0..100 {
        let d = send(&mut c, e, V6, 0, seg(cs, ss, ACK, 1448, 300));
        assert_eq!(d, Verdict::Pass);
        cs += 1448;
    }
    assert_eq!(c.states().count(), 1);
    for _ in 0..300 {
        passes(&mut c, e, V6, 1, seg(ss, cs, ACK, 1400, 300));
        ss += 1400;
        passes(&mut c, e, V6, 0, seg(cs, ss, ACK, 1448, 300));
        cs += 1448;
    }
    assert_eq!(c.stats().bad_state, 0);
}

/// A SYN for a connection that is not closed does not replace its state.
#[test]
fn a_syn_on_a_live_state_does_not_reset_it() {
    let (mut c, e) = tracker(false, false);
    passes(&mut c, e, V4, 0, seg(100, 0, SYN, 0, 65535));
    passes(&mut c, e, V4, 1, seg(9000, 101, SYN | ACK, 0, 65535));
    passes(&mut c, e, V4, 0, seg(101, 9001, ACK, 0, 65535));
    let mut forged = seg(3_000_000_000, 0, SYN, 0, 65535);
    forged.wscale = Some(14);
    assert_eq!(send(&mut c, e, V4, 0, forged), BAD);
    let s = c.states().next().unwrap();
    assert_eq!(c.stats().inserts, 1);
    assert_eq!(s.windows.map(|w| w[0].wscale), Some(Some(0)));
}

/// One end of an honest TCP connection, as simple as correctness allows:
/// sends only inside the window it was offered, acknowledges only what it
/// received in order, never shrinks the window it offers.
#[derive(Clone, Copy, Debug)]
struct Host {
    snd_una: u32,
    snd_nxt: u32,
    /// Right edge the peer offered, as this host last heard.
    snd_edge: u32,
    rcv_nxt: u32,
    /// Right edge this host offered.
    rcv_edge: u32,
    /// The shift of the windows this host sends.
    shift: u8,
}

impl Host {
    fn window_field(&mut self, want: u16) -> u16 {
        // Never retract the edge offered (RFC 9293 §3.8.6).
        let min = self.rcv_edge.wrapping_sub(self.rcv_nxt);
        let want_bytes = u32::from(want) << self.shift;
        let field = if want_bytes >= min {
            want
        } else {
            u16::try_from(min.div_ceil(1 << self.shift)).unwrap_or(u16::MAX)
        };
        let edge = self.rcv_nxt.wrapping_add(u32::from(field) << self.shift);
        if edge.wrapping_sub(self.rcv_edge) < 1 << 31 {
            self.rcv_edge = edge;
        }
        field
    }
}

fn after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < 1 << 31
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Side sends up to `len` new bytes (a window probe when it has no room).
    Send(usize, u16, u16),
    /// Side sends a pure ACK with this window.
    Ack(usize, u16),
    /// Side retransmits from its oldest unacknowledged byte.
    Retransmit(usize, u16),
    /// One of the first two queued segments from side crosses sluice and
    /// reaches the peer (`lost`: lost after sluice); segments reorder only
    /// that far.
    Deliver(usize, bool, bool),
    /// The oldest queued segment from side is lost before sluice.
    LoseBefore(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let side = 0usize..2;
    prop_oneof![
        4 => (side.clone(), 1u16..3000, 0u16..30_000).prop_map(|(s, l, w)| Op::Send(s, l, w)),
        2 => (side.clone(), 0u16..30_000).prop_map(|(s, w)| Op::Ack(s, w)),
        1 => (side.clone(), 1u16..3000).prop_map(|(s, l)| Op::Retransmit(s, l)),
        6 => (side.clone(), any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(s, r, l)| Op::Deliver(s, r, l)),
        1 => side.prop_map(Op::LoseBefore),
    ]
}

/// Runs an honest conversation; every segment must pass.
fn converse(v6: bool, isn: (u32, u32), ws: (Option<u8>, Option<u8>), ops: &[Op]) {
    let ends = if v6 { V6 } else { V4 };
    let (mut c, e) = tracker(false, false);
    let scaled = ws.0.is_some() && ws.1.is_some();
    let shift = |w: Option<u8>| if scaled { w.unwrap_or(0).min(14) } else { 0 };
    let mut h = [isn.0, isn.1].map(|i| Host {
        snd_una: i.wrapping_add(1),
        snd_nxt: i.wrapping_add(1),
        snd_edge: i.wrapping_add(1),
        rcv_nxt: 0,
        rcv_edge: 0,
        shift: 0,
    });
    h[0].shift = shift(ws.0);
    h[1].shift = shift(ws.1);
    // The handshake: SYN windows are unscaled.
    let mut syn = seg(isn.0, 0, SYN, 0, 20_000);
    syn.wscale = ws.0;
    let mut sa = seg(isn.1, isn.0.wrapping_add(1), SYN | ACK, 0, 20_000);
    sa.wscale = ws.1;
    passes(&mut c, e, ends, 0, syn);
    passes(&mut c, e, ends, 1, sa);
    h[0].rcv_nxt = isn.1.wrapping_add(1);
    h[1].rcv_nxt = isn.0.wrapping_add(1);
    h[0].snd_edge = h[0].snd_una.wrapping_add(20_000);
    h[1].snd_edge = h[1].snd_una.wrapping_add(20_000);
    h[0].rcv_edge = h[0].rcv_nxt.wrapping_add(20_000);
    h[1].rcv_edge = h[1].rcv_nxt.wrapping_add(20_000);
    // Queued segments, and whether each is a retransmission.
    let mut q: [VecDeque<(TcpSeg, bool)>; 2] = [VecDeque::new(), VecDeque::new()];
    let ack = seg(h[0].snd_nxt, h[0].rcv_nxt, ACK, 0, 20_000 >> h[0].shift);
    q[0].push_back((ack, false));
    for (step, &o) in ops.iter().enumerate() {
        match o {
            Op::Send(s, len, w) => {
                let room = h[s].snd_edge.wrapping_sub(h[s].snd_nxt);
                let win = h[s].window_field(w);
                if room == 0 || room >= 1 << 31 {
                    // No room: Linux's window probe (no data, below snd_una).
                    let seq = h[s].snd_una.wrapping_sub(1);
                    q[s].push_back((seg(seq, h[s].rcv_nxt, ACK, 0, win), false));
                } else {
                    let n = u32::from(len).min(room);
                    q[s].push_back((seg(h[s].snd_nxt, h[s].rcv_nxt, ACK, n as u16, win), false));
                    h[s].snd_nxt = h[s].snd_nxt.wrapping_add(n);
                }
            }
            Op::Ack(s, w) => {
                let win = h[s].window_field(w);
                q[s].push_back((seg(h[s].snd_nxt, h[s].rcv_nxt, ACK, 0, win), false));
            }
            Op::Retransmit(s, len) => {
                let out = h[s].snd_nxt.wrapping_sub(h[s].snd_una);
                let n = u32::from(len).min(out);
                if n > 0 {
                    let win = h[s].window_field(0);
                    q[s].push_back((seg(h[s].snd_una, h[s].rcv_nxt, ACK, n as u16, win), true));
                }
            }
            Op::LoseBefore(s) => {
                q[s].pop_front();
            }
            Op::Deliver(s, second, lost) => {
                // New segments reorder within the window; a retransmission
                // is not overtaken (new data sent after its original was
                // acknowledged would put it more than a window behind,
                // which pf refuses as a stale duplicate).
                let front_new = q[s].front().is_some_and(|&(_, re)| !re);
                let i = usize::from(second && front_new && q[s].len() > 1);
                let Some((g, _)) = q[s].remove(i) else {
                    continue;
                };
                let v = send(&mut c, e, ends, s, g);
                assert_eq!(v, Verdict::Pass, "step {step} {o:?}: {g:?} {h:?}");
                if lost {
                    continue;
                }
                let r = &mut h[1 - s];
                let end = g.seq.wrapping_add(u32::from(g.payload_len));
                if !after(g.seq, r.rcv_nxt) && after(end, r.rcv_nxt) {
                    r.rcv_nxt = end;
                }
                if after(g.ack, r.snd_una) && !after(g.ack, r.snd_nxt) {
                    r.snd_una = g.ack;
                }
                let edge = g.ack.wrapping_add(u32::from(g.window) << h[s].shift);
                let r = &mut h[1 - s];
                if after(edge, r.snd_edge) {
                    r.snd_edge = edge;
                }
            }
        }
    }
    // The close: FIN from each side, each acknowledged.
    let fin0 = seg(
        h[0].snd_nxt,
        h[0].rcv_nxt,
        FIN | ACK,
        0,
        h[0].window_field(0),
    );
    passes(&mut c, e, ends, 0, fin0);
    assert_eq!(c.stats().bad_state, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn honest_conversations_never_meet_a_bad_state(
        v6 in any::<bool>(),
        isn in (any::<u32>(), any::<u32>()),
        ws in (proptest::option::of(0u8..16), proptest::option::of(0u8..16)),
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        converse(v6, isn, ws, &ops);
    }
}

/// A bridged connection whose download half is created by the SYN-ACK
/// (`pass out on lan` matches no SYN) starts from the upload half's
/// windows, mirrored: the SYN-ACK it has already seen passes again, honest
/// data passes both halves, and a forged ACK is refused by the new half
/// as well.
#[test]
fn the_second_half_of_a_bridged_connection_tracks_from_the_first() {
    let text = "pass out on lan proto tcp keep state\npass out on wan keep state\n";
    let cfg = sluice_conf::check("t.conf", text, &[]).unwrap().config;
    let mut c = classifier(&cfg);
    let (lan, wan) = (c.iface("lan"), c.iface("wan"));
    let (a, b) = (V4[0], V4[1]);
    let mut go = |ifc, dir, up: bool, g: TcpSeg| {
        let (s, d) = if up { (a, b) } else { (b, a) };
        let pkt = segment(s, d, &g);
        c.classify_seg(secs(1), ifc, dir, &pkt, Some(&g))
    };
    let (i, o) = (Direction::In, Direction::Out);
    let mut syn = seg(100, 0, SYN, 0, 65535);
    syn.wscale = Some(6);
    let mut sa = seg(7000, 101, SYN | ACK, 0, 65535);
    sa.wscale = Some(6);
    go(lan, i, true, syn);
    assert_eq!(go(wan, o, true, syn).verdict, Verdict::Pass);
    assert_eq!(go(wan, i, false, sa).verdict, Verdict::Pass);
    let d = go(lan, o, false, sa);
    assert_eq!(
        (d.verdict, d.state),
        (Verdict::Pass, sluice_classify::StateHit::Created)
    );
    for (ifc, dir) in [(lan, i), (wan, o)] {
        assert_eq!(
            go(ifc, dir, true, seg(101, 7001, ACK, 0, 2000)).verdict,
            Verdict::Pass
        );
    }
    for (ifc, dir) in [(wan, i), (lan, o)] {
        let g = seg(7001, 101, ACK, 1400, 1000);
        assert_eq!(go(ifc, dir, false, g).verdict, Verdict::Pass);
    }
    // The download half knows the scale (6) and the edge: 2000 << 6.
    let forged = seg(7001 + 2000 * 64, 101, ACK, 1, 1000);
    assert_eq!(go(lan, o, false, forged).verdict, BAD);
    let windows: Vec<_> = c.states().filter_map(|s| s.windows).collect();
    assert_eq!(windows.len(), 2);
    assert!(windows
        .iter()
        .all(|w| w[0].wscale == Some(6) && w[1].wscale == Some(6)));
}
