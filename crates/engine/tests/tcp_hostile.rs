//! TCP control against hostile peers (issue #36), in virtual time: what
//! one host writes into its own segments — an ACK of data never sent, a
//! tiny MSS, a flood of SYNs, trickling connections, forged handshakes —
//! must not take the class's pace or windows from the other flows. The
//! rules keep `sloppy` states: TCP control must hold on its own, without
//! the state table's window check in front of it (bad_state.rs).

mod common;

use common::tcp::*;
use sluice_engine::Engine;
use sluice_time::{Duration, Instant};
use sluice_wire::build::{tcp_with, TcpSpec};
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, SYN};
use std::net::Ipv4Addr;

const T0: Instant = Instant(1_000_000_000);
const SLOPPY: &str = "pass keep state (sloppy)";

fn drain(e: &mut Engine, t: Instant) {
    while e.poll_tx(t, WAN).is_some() {}
    while e.poll_tx(t, LAN).is_some() {}
}

/// The client's ACK of flow `i` up to `ack`: what leaves toward the server
/// at `t` (the ACK if it passed, `None` if held), and its window field.
fn client_ack(e: &mut Engine, t: Instant, i: usize, ack: u32) -> Option<u16> {
    e.handle_rx(t, LAN, seg(i, true, 1, ack, ACK, 32768, &[], 0));
    let out: Vec<_> = std::iter::from_fn(|| e.poll_tx(t, WAN)).collect();
    out.iter().map(|f| read(f)).find(|r| r.0 == i).map(|r| r.3)
}

#[test]
fn an_ack_of_data_never_sent_does_not_hold_a_neighbours_acks() {
    let mut e = engine_rule("10M", SLOPPY, BOTH);
    handshake(&mut e, T0, 0);
    handshake(&mut e, T0, 1);
    server_data(&mut e, T0, 0, 1, 2);
    // The attacker acknowledges 2 GB it was never sent.
    let forged = 1u32.wrapping_add(0x7fff_ffff);
    e.handle_rx(T0, LAN, seg(0, true, 1, forged, ACK, 32768, &[], 0));
    drain(&mut e, T0);
    let t1 = T0 + Duration::from_secs(10);
    server_data(&mut e, t1, 1, 1, 1);
    assert!(
        client_ack(&mut e, t1, 1, 1 + MSS).is_some(),
        "the victim's ACK passes at once: {:?}",
        dl_report(&e)
    );
    assert_eq!(dl_report(&e).held_now, 0);
}

#[test]
fn a_tiny_mss_does_not_multiply_what_its_acks_cost_the_class() {
    let mut e = engine_rule("10M", SLOPPY, BOTH);
    // The attacker's SYN announces MSS 1 (scale 7); its server sends
    // 45 full segments anyway, and the attacker ACKs them at once.
    let mut o = Vec::new();
    TcpOption::Mss(1).encode(&mut o);
    TcpOption::WindowScale(WS).encode(&mut o);
    e.handle_rx(T0, LAN, seg(0, true, 0, 0, SYN, 65535, &o, 0));
    e.handle_rx(
        T0,
        WAN,
        seg(0, false, 0, 1, SYN | ACK, 65535, &syn_opts(), 0),
    );
    e.handle_rx(T0, LAN, seg(0, true, 1, 1, ACK, 32768, &[], 0));
    drain(&mut e, T0);
    handshake(&mut e, T0, 1);
    server_data(&mut e, T0, 0, 1, 45);
    client_ack(&mut e, T0, 0, 1 + 45 * MSS);
    let t1 = T0 + Duration::from_millis(100);
    server_data(&mut e, t1, 1, 1, 1);
    assert!(
        client_ack(&mut e, t1, 1, 1 + MSS).is_some(),
        "100 ms later the class owes no more than a burst: {:?}",
        dl_report(&e)
    );
}

/// Segments the victim's server sends before each reading of its window:
/// more than any window here, so the right edge (which never moves left)
/// does not hide a smaller target.
const BULK: u32 = 100;

/// The victim's clamped window (bytes) after [`BULK`] more segments from
/// `seq` and their ACK.
fn victim_window(e: &mut Engine, t: Instant, seq: u32) -> u64 {
    server_data(e, t, 0, seq, BULK);
    let field = client_ack(e, t, 0, seq + BULK * MSS).expect("the victim's ACK passes");
    u64::from(field) << WS
}

#[test]
fn a_syn_flood_from_spoofed_lan_hosts_leaves_the_victims_window() {
    let mut e = engine_rule("10M", SLOPPY, BOTH);
    handshake(&mut e, T0, 0);
    let w0 = victim_window(&mut e, T0, 1);
    for k in 0..3000u32 {
        let t = T0 + Duration::from_micros(u64::from(k) * 300);
        let src = Ipv4Addr::new(10, 77, (k >> 8) as u8, k as u8);
        let spec = TcpSpec {
            sport: 1024 + (k % 60_000) as u16,
            dport: 80,
            seq: k,
            ack: 0,
            flags: SYN,
            window: 65535,
            options: &syn_opts(),
            payload_len: 0,
        };
        e.handle_rx(t, LAN, tcp_with(src, SERVER, &spec));
        drain(&mut e, t);
    }
    let w1 = victim_window(&mut e, T0 + Duration::from_secs(1), 1 + BULK * MSS);
    assert!(w1 >= w0 / 2, "window {w0} before the flood, {w1} during it");
}

/// An upload queue `ul` at 10 Mbit/s on wan0 under pacing and clamping.
fn upload_engine() -> Engine {
    engine_ctl(
        "queue down on lan0 bandwidth 100M\n\
         queue dl parent down bandwidth 100M qlimit 4000 default\n\
         queue up on wan0 bandwidth 10M\n\
         queue ul parent up bandwidth 10M qlimit 4000 default\n\
         pass keep state (sloppy)\n",
        "wan0",
        "ul",
        BOTH,
    )
}

/// Flow `i`'s upload: the client opens, the server answers, the client
/// ACKs and sends `n` segments; all drained.
fn upload(e: &mut Engine, t: Instant, i: usize, n: u32) {
    let o = syn_opts();
    e.handle_rx(t, LAN, seg(i, true, 0, 0, SYN, 65535, &o, 0));
    e.handle_rx(t, WAN, seg(i, false, 0, 1, SYN | ACK, 65535, &o, 0));
    e.handle_rx(t, LAN, seg(i, true, 1, 1, ACK, 65535, &[], 0));
    for k in 0..n {
        let data = seg(i, true, 1 + k * MSS, 1, ACK, 65535, &[], MSS as usize);
        e.handle_rx(t, LAN, data);
    }
    drain(e, t);
}

#[test]
fn a_servers_ack_of_data_never_sent_does_not_hold_another_uploads_acks() {
    let mut e = upload_engine();
    upload(&mut e, T0, 0, 2);
    upload(&mut e, T0, 1, 0);
    let forged = 1u32.wrapping_add(0x7fff_ffff);
    e.handle_rx(T0, WAN, seg(0, false, 1, forged, ACK, 32768, &[], 0));
    drain(&mut e, T0);
    let t1 = T0 + Duration::from_secs(10);
    let data = seg(1, true, 1, 1, ACK, 65535, &[], MSS as usize);
    e.handle_rx(t1, LAN, data);
    drain(&mut e, t1);
    e.handle_rx(t1, WAN, seg(1, false, 1, 1 + MSS, ACK, 32768, &[], 0));
    let out: Vec<_> = std::iter::from_fn(|| e.poll_tx(t1, LAN)).collect();
    let r = e.report()[WAN].class("ul").and_then(|c| c.tcp).unwrap();
    assert!(out.iter().any(|f| read(f).0 == 1), "held: {r:?}");
    assert_eq!(r.acks_unsent, 1, "{r:?}");
}

#[test]
fn a_forged_syn_and_syn_ack_leave_an_established_flows_window_alone() {
    let mut e = engine_rule("10M", SLOPPY, BOTH);
    handshake(&mut e, T0, 0);
    let w0 = victim_window(&mut e, T0, 1);
    // From the LAN: a SYN as the client (scale 14, MSS 1), and a SYN-ACK
    // as the server whose sequence puts the edge far behind.
    let mut o = Vec::new();
    TcpOption::Mss(1).encode(&mut o);
    TcpOption::WindowScale(14).encode(&mut o);
    e.handle_rx(T0, LAN, seg(0, true, 0, 0, SYN, 65535, &o, 0));
    let behind = (1 + BULK * MSS).wrapping_sub(1 << 30);
    let sa = seg(0, false, behind, 1, SYN | ACK, 65535, &o, 0);
    e.handle_rx(T0, LAN, sa);
    drain(&mut e, T0);
    let t1 = T0 + Duration::from_secs(1);
    let w1 = victim_window(&mut e, t1, 1 + BULK * MSS);
    assert!(
        w1 >= w0 / 2 && w1 <= w0 * 2,
        "window {w0} before, {w1} after: {:?}",
        dl_report(&e)
    );
}

#[test]
fn a_signed_acks_window_is_not_rewritten() {
    let mut e = engine_rule("10M", SLOPPY, BOTH);
    handshake(&mut e, T0, 0);
    server_data(&mut e, T0, 0, 1, 10);
    let mut o = Vec::new();
    TcpOption::Unknown {
        kind: 19,
        data: &[0x11; 16],
    }
    .encode(&mut o);
    let ack = seg(0, true, 1, 1 + 10 * MSS, ACK, 32768, &o, 0);
    e.handle_rx(T0, LAN, ack.clone());
    let out = e.poll_tx(T0, WAN).expect("forwarded");
    assert_eq!(out, ack, "untouched");
    assert_eq!(dl_report(&e).windows_untouched, 1);
}

#[test]
fn trickling_connections_leave_a_download_its_window() {
    // 200 connections (their handshakes complete) that each move a byte
    // every 100 ms take almost nothing of the class: the victim's window
    // beside them is at least half what it is without them.
    let run = |trickles: usize| {
        let mut e = engine_rule("10M", SLOPPY, BOTH);
        handshake(&mut e, T0, 0);
        victim_window(&mut e, T0, 1);
        let mut t = T0;
        for step in 0..10u32 {
            t = T0 + Duration::from_millis(100 * u64::from(step + 1));
            for i in 1..=trickles {
                if step == 0 {
                    handshake(&mut e, t, i);
                }
                e.handle_rx(t, WAN, seg(i, false, 1 + step, 1, ACK, 65535, &[], 1));
                e.handle_rx(t, LAN, seg(i, true, 1, 2 + step, ACK, 32768, &[], 0));
            }
            // The queue drains as the link sends, not at once.
            for ms in 0..50 {
                let tk = t + Duration::from_millis(ms);
                e.handle_timeout(tk);
                drain(&mut e, tk);
            }
        }
        victim_window(&mut e, t, 1 + BULK * MSS)
    };
    let (alone, beside) = (run(0), run(200));
    assert!(
        beside >= alone / 2,
        "window {alone} alone, {beside} beside the trickles"
    );
}

#[test]
fn a_host_with_many_flows_costs_the_round_no_more_per_ack() {
    // By host, one host holds ACKs on 2000 flows and another on one: each
    // turn of the round releases an ACK or ends a host's quantum, however
    // many flows the host has (a quantum divided by the host's flows took
    // 6.8 turns per paced ACK here, 3 with the nested round).
    let text = "pipe dl on lan0 bandwidth 10Mb sched fq_codel dual-dsthost\n\
                queue up on wan0 bandwidth 100M\n\
                queue ul parent up bandwidth 100M qlimit 4000 default\n\
                pass keep state (sloppy)\n";
    let mut e = engine_with(text, BOTH);
    let flows = 2001usize;
    // Flow 0 is one host's, every other flow the second host's.
    ONE_HOST_FROM.with(|c| c.set(1));
    let tcp = |i: usize, from_client: bool, seq: u32, ack: u32, flags: u8, len: usize| {
        let opts = if flags & SYN != 0 {
            syn_opts()
        } else {
            Vec::new()
        };
        let window = if from_client { 32768 } else { 65535 };
        seg(i, from_client, seq, ack, flags, window, &opts, len)
    };
    for i in 0..flows {
        e.handle_rx(T0, LAN, tcp(i, true, 0, 0, SYN, 0));
        e.handle_rx(T0, WAN, tcp(i, false, 0, 1, SYN | ACK, 0));
        e.handle_rx(T0, LAN, tcp(i, true, 1, 1, ACK, 0));
        for k in 0..4 {
            e.handle_rx(T0, WAN, tcp(i, false, 1 + k * MSS, 1, ACK, MSS as usize));
        }
        drain(&mut e, T0);
    }
    // Each flow ACKs its four segments two at a time: most are held.
    for k in 1..=2 {
        for i in 0..flows {
            e.handle_rx(T0, LAN, tcp(i, true, 1, 1 + 2 * k * MSS, ACK, 0));
        }
    }
    let report = |e: &Engine| {
        let r = &e.report()[LAN];
        let names: Vec<_> = r
            .classes
            .iter()
            .map(|c| (c.name.clone(), c.tcp.is_some()))
            .collect();
        r.classes
            .iter()
            .find_map(|c| c.tcp)
            .unwrap_or_else(|| panic!("{names:?}"))
    };
    let held = report(&e).acks_held;
    assert!(held > 2000, "{:?}", report(&e));
    let turns0 = e.tcp_round_turns();
    for ms in 0..2000 {
        let t = T0 + Duration::from_millis(ms);
        e.handle_timeout(t);
        drain(&mut e, t);
    }
    let r = report(&e);
    let paced = r.acks_paced;
    let turns = e.tcp_round_turns() - turns0;
    assert!(paced > 300, "{r:?}");
    ONE_HOST_FROM.with(|c| c.set(usize::MAX));
    assert!(turns <= 4 * paced, "{turns} turns for {paced} paced ACKs");
}
