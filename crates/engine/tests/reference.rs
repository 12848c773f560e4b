//! End-to-end runs of the two reference configurations of issue #2 in virtual
//! time: real frames in, the engine's own pacing out, no clock anywhere.

use sluice_engine::{Engine, Options, Rx};
use sluice_time::{Duration, Instant};
use std::net::Ipv4Addr;

const LAN: usize = 0;
const WAN: usize = 1;
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

fn engine(text: &str) -> Engine {
    let defines = vec![("ext_if".to_string(), "wan0".to_string())];
    let checked = sluice_conf::check("test.conf", text, &defines).unwrap_or_else(|d| {
        panic!(
            "{}",
            d.iter()
                .map(|d| d.render("test.conf", text))
                .collect::<String>()
        )
    });
    Engine::new(&checked.config, Options::bridge("lan0", "wan0", [7; 16])).expect("engine builds")
}

/// Initial sequence numbers of the client and the server.
const CLIENT_ISN: u32 = 0x1000_0000;
const SERVER_ISN: u32 = 0x3000_0000;

/// A segment whose numbers fit its connection (the state table checks
/// them): each side's SYN at its ISN, everything after at ISN + 1 and
/// acknowledging the other's SYN (repeats read as retransmissions).
fn tcp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, flags: u8, payload: usize) -> Vec<u8> {
    let (own, other) = if src == CLIENT {
        (CLIENT_ISN, SERVER_ISN)
    } else {
        (SERVER_ISN, CLIENT_ISN)
    };
    let spec = sluice_wire::build::TcpSpec {
        sport,
        dport,
        seq: if flags & SYN != 0 { own } else { own + 1 },
        ack: if flags & ACK != 0 { other + 1 } else { 0 },
        flags,
        window: 0xffff,
        options: &[],
        payload_len: payload,
    };
    sluice_wire::build::tcp_with(src, dst, &spec)
}

/// Sends everything the engine will send on `iface` at `now`.
fn drain(e: &mut Engine, now: Instant, iface: usize) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| e.poll_tx(now, iface)).collect()
}

/// Runs the engine until `iface` has sent one frame, advancing virtual time to
/// each wake-up. Returns the frame and the time it left.
fn next_out(e: &mut Engine, now: &mut Instant, iface: usize) -> Vec<u8> {
    for _ in 0..10_000 {
        if let Some(f) = e.poll_tx(*now, iface) {
            return f;
        }
        let wake = e.poll_timeout().expect("queued frames imply a wake-up");
        *now = wake.max(*now + Duration(1));
    }
    panic!("nothing left {iface} in 10 000 wake-ups");
}

fn handshake(e: &mut Engine, now: Instant, sport: u16, dport: u16) {
    assert!(matches!(
        e.handle_rx(now, LAN, tcp(CLIENT, SERVER, sport, dport, SYN, 0)),
        Rx::Queued { .. }
    ));
    let mut t = now;
    next_out(e, &mut t, WAN);
    assert!(matches!(
        e.handle_rx(t, WAN, tcp(SERVER, CLIENT, dport, sport, SYN | ACK, 0)),
        Rx::Queued { .. }
    ));
    assert_eq!(
        drain(e, t, LAN).len(),
        1,
        "the SYN-ACK crosses the unshaped side at once"
    );
}

const PRIQ: &str = "
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 priq(default)

pass out on $ext_if proto tcp from $ext_if to any flags S/SA \\
        keep state queue (q_def, q_pri)

pass in  on $ext_if proto tcp from any to $ext_if flags S/SA \\
        keep state queue (q_def, q_pri)
";

#[test]
fn priq_empty_acks_overtake_bulk_upload() {
    let mut e = engine(PRIQ);
    let mut now = Instant(1_000_000_000);
    // The client ARPs for its gateway, as any host does: only an address
    // claimed in ARP/ND becomes one of `$ext_if`'s (bridge mode).
    e.handle_rx(
        now,
        LAN,
        sluice_wire::build::arp(CLIENT, Ipv4Addr::new(10, 0, 0, 254)),
    );
    drain(&mut e, now, WAN);
    handshake(&mut e, now, 40_000, 5201); // the upload
    handshake(&mut e, now, 40_001, 80); // the download whose ACKs go up
    now += Duration::from_millis(500);

    // 30 full-size upload segments: 30 × 1514 B at 100 kbit/s is ~3.6 s of queue.
    for _ in 0..30 {
        let r = e.handle_rx(now, LAN, tcp(CLIENT, SERVER, 40_000, 5201, ACK | PSH, 1460));
        assert!(matches!(r, Rx::Queued { .. }), "{r:?}");
    }
    // One segment leaves; then the download's empty ACK arrives behind 29 others.
    let first = next_out(&mut e, &mut now, WAN);
    assert_eq!(first.len(), 1514);
    let ack = tcp(CLIENT, SERVER, 40_001, 80, ACK, 0);
    assert!(matches!(
        e.handle_rx(now, LAN, ack.clone()),
        Rx::Queued { .. }
    ));
    let sent_at = now;
    let out = next_out(&mut e, &mut now, WAN);
    assert_eq!(
        out, ack,
        "the empty ACK leaves next, ahead of the queued bulk data"
    );
    // It waited at most for the segment on the wire plus its own time: 1514 B + 54 B
    // at 100 kbit/s ≈ 125 ms (token bucket of about one MTU).
    assert!(
        now - sent_at <= Duration::from_millis(130),
        "ACK waited {:?}",
        now - sent_at
    );

    let rep = e.report();
    let wan = &rep[WAN];
    // Only the empty ACK qualifies for q_pri: SYNs carry no ACK flag.
    assert_eq!(wan.class("q_pri").expect("q_pri").passed_packets, 1);
    // Two SYNs, one data segment, and the ARP (non-IP: the default queue).
    assert_eq!(wan.class("q_def").expect("q_def").passed_packets, 3 + 1);
    assert_eq!(wan.class("q_def").expect("q_def").qlen, 29);
}

const HFSC: &str = "
altq on $ext_if bandwidth 1Mb hfsc queue { bb }
queue bb bandwidth 100% qlimit 9 hfsc ( default )

pass out on $ext_if keep state queue( bb )
";

#[test]
fn hfsc_qlimit_9_keeps_the_queue_short_at_1mbit() {
    let mut e = engine(HFSC);
    let start = Instant(1_000_000_000);
    let mut now = start;
    handshake(&mut e, now, 40_000, 5201);
    // Offer 2 Mbit/s of full-size segments for 10 s: twice the link.
    let gap = Duration(1514 * 8 * 1_000_000_000 / 2_000_000);
    let end = start + Duration::from_secs(10);
    let mut next_arrival = now;
    let (mut sent_bytes, mut first_tx, mut last_tx) = (0u64, None, now);
    let mut max_qlen = 0;
    while now < end {
        while next_arrival <= now {
            e.handle_rx(
                next_arrival,
                LAN,
                tcp(CLIENT, SERVER, 40_000, 5201, ACK | PSH, 1460),
            );
            next_arrival += gap;
        }
        while let Some(f) = e.poll_tx(now, WAN) {
            sent_bytes += f.len() as u64;
            first_tx.get_or_insert(now);
            last_tx = now;
        }
        let bb = e.report()[WAN].class("bb").expect("bb").qlen;
        max_qlen = max_qlen.max(bb);
        let wake = e.poll_timeout().unwrap_or(Instant::MAX);
        now = wake.min(next_arrival).max(now + Duration(1));
    }
    let rep = e.report();
    let bb = rep[WAN].class("bb").expect("bb");
    assert!(max_qlen <= 9, "queue held {max_qlen} packets");
    assert!(bb.dropped_packets() > 0, "overload must overflow qlimit 9");
    let p99 = bb.sojourn_p99.expect("sojourn recorded");
    let max = bb.sojourn_max.expect("sojourn recorded");
    assert!(
        max <= Duration::from_millis(110),
        "sojourn max {max:?} p99 {p99:?}"
    );
    // The link is kept busy at its rate: within 2 % of 1 Mbit/s.
    let secs = (last_tx - first_tx.unwrap()).as_secs_f64();
    let rate = sent_bytes as f64 * 8.0 / secs;
    assert!((rate - 1e6).abs() / 1e6 < 0.02, "achieved {rate} bit/s");
}
