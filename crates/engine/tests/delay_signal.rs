//! The delay signal through the engine (issue #16 item 2): a queue that
//! grows beyond sluice on the WAN side reads as its delay on the WAN
//! interface's signal, from the passive RTT of the traffic itself, and
//! not on the LAN side's.

mod common;

use common::{bridge, stamp, Conn, CLIENT, LAN, SERVER, WAN};
use sluice_engine::Engine;
use sluice_time::{Duration, Instant};
use sluice_wire::tcp_flags::{ACK, SYN};
use std::net::Ipv4Addr;

#[allow(clippy::too_many_arguments)]
fn seg(
    e: &mut Engine,
    now: Instant,
    from_lan: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    ts: (u32, u32),
    len: usize,
) {
    seg_to(e, now, SERVER, from_lan, seq, ack, flags, ts, len);
}

/// [`seg`] of the connection to `server`.
#[allow(clippy::too_many_arguments)]
fn seg_to(
    e: &mut Engine,
    now: Instant,
    server: Ipv4Addr,
    from_lan: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    ts: (u32, u32),
    len: usize,
) {
    let conn = Conn {
        client: CLIENT,
        cport: 40000,
        server,
        sport: 5201,
        window: 65535,
    };
    let (iface, out) = if from_lan { (LAN, WAN) } else { (WAN, LAN) };
    let f = conn.seg(from_lan, seq, ack, flags, &stamp(ts), len);
    e.handle_rx(now, iface, f);
    while e.poll_tx(now, out).is_some() {}
}

#[test]
fn a_queue_beyond_the_wan_side_reads_on_the_wan_signal_only() {
    let mut e = bridge("queue up on $ext_if bandwidth 100M default\npass proto tcp\n");
    let ms = |n: u64| Duration::from_millis(n);
    let mut now = Instant(1_000_000_000);
    // Three servers on three networks (three voters, crate::votes), each
    // 30 ms away; the client 1 ms away on the LAN. Handshakes first.
    let servers = [
        SERVER,
        Ipv4Addr::new(198, 51, 101, 1),
        Ipv4Addr::new(198, 51, 102, 1),
    ];
    for s in servers {
        seg_to(&mut e, now, s, true, 1000, 0, SYN, (1, 0), 0);
    }
    now += ms(30);
    for s in servers {
        seg_to(&mut e, now, s, false, 9000, 1001, SYN | ACK, (500, 1), 0);
    }
    now += ms(1);
    let (mut cseq, mut cts, mut sts) = (1001u32, 2u32, 501u32);
    // Uploads: each a data segment, the server's ACK one RTT later, the
    // client's next segment 1 ms after that. 3 s of an idle path, then
    // 40 ms of queue in the modem.
    let mut exchange = |e: &mut Engine, now: &mut Instant, queue: u64| {
        for s in servers {
            seg_to(e, *now, s, true, cseq, 9001, ACK, (cts, sts - 1), 1400);
        }
        cseq = cseq.wrapping_add(1400);
        *now += ms(30 + queue);
        for s in servers {
            seg_to(e, *now, s, false, 9001, cseq, ACK, (sts, cts), 0);
        }
        cts += 1;
        sts += 1;
        *now += ms(1);
    };
    while now < Instant(4_000_000_000) {
        exchange(&mut e, &mut now, 0);
    }
    let (r, n) = e.delay_signal(WAN, now).unwrap();
    assert!(n > 150, "{n} samples");
    assert_eq!(r.flows, 3, "three networks voted");
    assert!(r.delay.unwrap() <= ms(1), "idle path: {r:?}");
    for _ in 0..10 {
        exchange(&mut e, &mut now, 40);
    }
    let (r, _) = e.delay_signal(WAN, now).unwrap();
    let d = r.delay.expect("fresh flows");
    assert!(
        (ms(39)..=ms(41)).contains(&d),
        "40 ms of queue read as {d:?}"
    );
    // The LAN side (client 1 ms away) has none: one network, no reading.
    let (lan, _) = e.delay_signal(LAN, now).unwrap();
    assert!(lan.delay.unwrap_or_default() <= ms(1), "{lan:?}");
    // Nothing for 2 s: no signal rather than a stale one.
    let (r, _) = e.delay_signal(WAN, now + ms(2000)).unwrap();
    assert_eq!(r.delay, None);
}

#[test]
fn the_trace_gives_each_samples_parts() {
    // `sluice run --autorate-trace`: the same upload, every sample's
    // round trip, correction, base and delay, named by the interface.
    let mut e = bridge("queue up on $ext_if bandwidth 100M default\npass proto tcp\n");
    let ms = |n: u64| Duration::from_millis(n);
    let mut now = Instant(1_000_000_000);
    assert!(e.poll_signal_trace().0.is_empty(), "off by default");
    e.set_autorate_trace(true);
    seg(&mut e, now, true, 1000, 0, SYN, (1, 0), 0);
    now += ms(30);
    seg(&mut e, now, false, 9000, 1001, SYN | ACK, (500, 1), 0);
    now += ms(1);
    let (mut cseq, mut cts, mut sts) = (1001u32, 2u32, 501u32);
    for i in 0..20u64 {
        let queue = if i < 10 { 0 } else { 40 };
        seg(&mut e, now, true, cseq, 9001, ACK, (cts, sts - 1), 1400);
        cseq = cseq.wrapping_add(1400);
        now += ms(30 + queue);
        seg(&mut e, now, false, 9001, cseq, ACK, (sts, cts), 0);
        cts += 1;
        sts += 1;
        now += ms(1);
    }
    let (got, lost) = e.poll_signal_trace();
    assert_eq!(lost, 0);
    // The LAN side's: the client's data completes what the server's ACK
    // began (1 ms away); the WAN side's: the server's ACKs, 30 ms away.
    let wan: Vec<_> = got
        .iter()
        .filter(|(i, _)| i == "wan0")
        .map(|(_, t)| t)
        .collect();
    assert_eq!(wan.len(), 21, "the SYN-ACK's, then one per exchange");
    assert!(!wan[0].ack && wan[0].rtt == ms(30), "{:?}", wan[0]);
    assert!(wan[1..].iter().all(|t| t.ack), "completed by pure ACKs");
    assert!(got
        .iter()
        .all(|(i, t)| i == "wan0" || (i == "lan0" && t.rtt == ms(1))));
    let last = wan[wan.len() - 1];
    assert_eq!(last.base, ms(30), "{last:?}");
    assert_eq!(last.rtt, ms(70));
    assert_eq!(last.delay, ms(40));
    assert_eq!(last.out, ms(40), "no way in read: all of it out");
    assert!(e.poll_signal_trace().0.is_empty(), "drained");
    e.set_autorate_trace(false);
    seg(&mut e, now, true, cseq, 9001, ACK, (cts, sts - 1), 1400);
    now += ms(30);
    seg(&mut e, now, false, 9001, cseq + 1400, ACK, (sts, cts), 0);
    assert!(e.poll_signal_trace().0.is_empty(), "off again");
}
