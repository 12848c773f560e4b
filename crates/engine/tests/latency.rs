//! A sparse packet (a ping) behind one bulk flow waits for at most the
//! frame on the wire, whatever tree its flow queue sits in, and whatever
//! class a priority or real-time scheduler gives it: the parents' peeks
//! (HFSC after each send, the token bucket while it waits) must not put a
//! second bulk frame ahead of it.

mod common;

use sluice_engine::Rx;
use sluice_time::{Duration, Instant};
use sluice_wire::build;

use common::{bridge as engine, CLIENT, LAN, SERVER, WAN};

/// The longest a ping waited in sluice (arrival to transmission) while a
/// UDP flow offered 2 Mbit/s to the 950 kbit/s upload of `text`, in 10 s.
fn worst_ping_wait(text: &str) -> Duration {
    let mut e = engine(text);
    let step = Duration::from_micros(100);
    let mut now = Instant::ZERO;
    let mut sent_at: Vec<Instant> = Vec::new();
    let mut worst = Duration::ZERO;
    for tick in 0..100_000u32 {
        // A 1514-byte frame every 6 ms: 2 Mbit/s.
        if tick % 60 == 0 {
            let rx = e.handle_rx(now, LAN, build::udp_v4(CLIENT, SERVER, 4000, 5001, 1472));
            assert!(matches!(rx, Rx::Queued { .. } | Rx::Dropped(_)), "{rx:?}");
        }
        // A ping every 47.3 ms, at every phase of the bulk frames.
        if tick % 473 == 0 && tick >= 10_000 {
            let seq = sent_at.len() as u16;
            e.handle_rx(now, LAN, build::icmp_v4_echo(CLIENT, SERVER, 1, seq, 56));
            sent_at.push(now);
        }
        e.handle_timeout(now);
        while let Some(out) = e.poll_tx(now, WAN) {
            // IPv4 protocol 1 (ICMP): the echo's sequence number.
            if out[23] == 1 {
                let seq = u16::from_be_bytes([out[40], out[41]]);
                worst = worst.max(now.saturating_since(sent_at[seq as usize]));
            }
        }
        while e.poll_dropped().is_some() {}
        now += step;
    }
    assert!(sent_at.len() > 150);
    worst
}

#[test]
fn a_ping_waits_for_one_frame_at_most() {
    // One 1514-byte frame at 950 kbit/s: 12.75 ms; a pipe releases a
    // packet when its own serialisation ends (the ping's 98 bytes: 0.83
    // ms); the step adds 0.1 ms.
    let frame = Duration::from_micros(12_750 + 830 + 200);
    for text in [
        // OpenBSD 5.5+: HFSC with an upper limit, the token bucket above.
        "queue up on $ext_if flows 1024 bandwidth 950K max 950K qlimit 1024 default\npass\n",
        // A child flow queue under a root.
        "queue up on $ext_if bandwidth 950K\n\
         queue up_q parent up flows 1024 bandwidth 950K max 950K qlimit 1024 default\npass\n",
        // dummynet: an fq_codel pipe.
        "pipe up on $ext_if bandwidth 950Kb sched fq_codel\npass\n",
    ] {
        let w = worst_ping_wait(text);
        assert!(w <= frame, "{w} > {frame} with\n{text}");
    }
}

#[test]
fn a_ping_in_a_priority_class_does_not_wait_for_the_bulk_frame_the_bucket_waits_for() {
    // Under the token bucket a frame leaves once the bucket holds its cost,
    // so the bulk frame's time is spent before it leaves; the ping behind
    // it then waits for the frame on the modem's wire, not here. A ping in
    // a higher class needs only its own cost (98 bytes at 950 kbit/s: 0.83
    // ms) and the step (0.1 ms). Held to the bulk frame the bucket peeked
    // before it arrived, it waited up to 13.7 ms (PRIQ, FAIRQ) and 11 ms
    // (HFSC) here, and a frame more on the wire.
    let own = Duration::from_micros(830 + 200);
    for text in [
        // ALTQ PRIQ, the ping in the higher priority: the token bucket
        // peeks the bulk frame while it waits for tokens.
        "altq on $ext_if priq bandwidth 950Kb queue { q_pri, q_def }\n\
         queue q_pri priority 7\nqueue q_def priority 1 priq(default)\n\
         pass\npass out on $ext_if proto icmp queue q_pri\n",
        // ALTQ HFSC, the ping in a real-time class of its own.
        "altq on $ext_if hfsc bandwidth 950Kb queue { q_ping, q_bulk }\n\
         queue q_ping bandwidth 10% hfsc(realtime 100Kb)\n\
         queue q_bulk bandwidth 90% hfsc(default)\n\
         pass\npass out on $ext_if proto icmp queue q_ping\n",
        // FAIRQ: strict priority between classes, as PRIQ.
        "altq on $ext_if fairq bandwidth 950Kb queue { q_pri, q_def }\n\
         queue q_pri priority 7\nqueue q_def priority 1 fairq(default)\n\
         pass\npass out on $ext_if proto icmp queue q_pri\n",
    ] {
        let w = worst_ping_wait(text);
        assert!(w <= own, "{w} > {own} with\n{text}");
    }
}
