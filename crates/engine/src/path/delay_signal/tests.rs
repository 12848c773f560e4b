//! The delay signal's unit tests.

use super::*;
use crate::path::test_time::{at, ms};
use std::net::Ipv4Addr;

#[test]
fn pure_ack_samples_count_only_without_data_samples() {
    // Two downloads give data samples on an empty path (20 ms); four
    // uploads' ACKs were prompt at first, then (their segments coming
    // one at a time) all 40 ms late: the receiver's delayed-ACK timer.
    let mut s = DelaySignal::default();
    let far = host(1);
    for t in (0..3000).step_by(10) {
        for f in 0..2 {
            s.add(at(t), far, f, ms(20), ms(0));
        }
        let late = if t < 1000 { 0 } else { 40 };
        for f in 10..14 {
            s.add_ack(at(t), far, f, ms(20 + late), ms(0));
        }
    }
    let r = s.read(at(3000));
    assert_eq!((r.delay, r.flows), (Some(ms(0)), 1), "the data flows only");
    // Without data samples the ACKs' are the signal (with a window of
    // their own): a real queue still shows.
    let mut u = DelaySignal::default();
    for t in (0..3000).step_by(10) {
        let q = if t < 2000 { 0 } else { 30 };
        for f in 10..14 {
            u.add_ack(at(t), far, f, ms(20 + q), ms(0));
        }
    }
    let r = u.read(at(3000));
    assert_eq!((r.delay, r.flows), (Some(ms(30)), 1));
}

#[test]
fn each_direction_reads_its_own_queue() {
    // Four downloads: each data segment arrives stamped by its
    // sender's clock (its own offset) and completes a round trip of
    // 20 ms plus the queues both ways. The way in is read from the
    // stamps, the way out is the round trip less it.
    let mut s = DelaySignal::default();
    let far = host(1);
    let queues = |t: u64| match t {
        0..3000 => (0, 0),
        3000..4000 => (30, 0),
        _ => (0, 20),
    };
    let at_ms = |s: &mut DelaySignal, from: u64, to: u64| {
        for t in (from..to).step_by(10) {
            let (q_in, q_out) = queues(t);
            for f in 0..4u64 {
                let tsval = (7_000 * f + 100 + t - 10 - q_in) as u32;
                stamp(s, at(t), host(f as u8), f, tsval);
                s.add(at(t), host(f as u8), f, ms(20 + q_in + q_out), ms(0));
            }
        }
    };
    let read = |s: &DelaySignal, t: u64| {
        let now = at(t);
        let (r, o, i) = (s.read(now), s.read_out(now), s.read_in(now));
        (
            r.delay.unwrap(),
            o.delay.unwrap(),
            i.delay.unwrap(),
            i.flows,
        )
    };
    at_ms(&mut s, 0, 3000);
    assert_eq!(read(&s, 3000), (ms(0), ms(0), ms(0), 4));
    at_ms(&mut s, 3000, 4000);
    assert_eq!(
        read(&s, 4000),
        (ms(30), ms(0), ms(30), 4),
        "a queue on the way in"
    );
    at_ms(&mut s, 4000, 5000);
    assert_eq!(
        read(&s, 5000),
        (ms(20), ms(20), ms(0), 4),
        "a queue on the way out"
    );
    // Without stamps there is no way in, and the way out is the whole
    // round trip: it may all be that way.
    let mut n = DelaySignal::default();
    for t in (0..3000).step_by(10) {
        n.add(at(t), far, 1, ms(if t < 2000 { 20 } else { 45 }), ms(0));
    }
    assert_eq!(n.read_in(at(3000)).delay, None);
    assert_eq!(n.read_out(at(3000)).delay, Some(ms(25)));
}

#[test]
fn noisy_corrections_do_not_sink_the_base() {
    // A download's ACKs leave behind frames on the wire, waiting 0 to
    // 8 ms (one 1514-byte frame at 1.5 Mbit/s); each measurement began
    // with one of them, and is corrected by the connection's recent
    // wait, which errs both ways. The path: 20 ms, no queue beyond.
    let mut s = DelaySignal::default();
    let mut f = FlowSojourn::default();
    let far = host(1);
    let mut x = 7u64;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % 9
    };
    // Each connection's packets, one every 2 ms, and their waits; a
    // sample at t completes the measurement its packet of t - 20 began.
    let mut waits = vec![[0u64; 4]; 10_000];
    for (i, t) in (0..20_000).step_by(2).enumerate() {
        for c in 0..4u64 {
            let flow = (c + 1) << 40;
            waits[i][c as usize] = next();
            f.add(flow, 0, ms(waits[i][c as usize]), at(t));
            if t % 10 == 0 && t >= 20 {
                let began = waits[i - 10][c as usize];
                let own = f.get(flow).unwrap();
                s.add(at(t), far, flow, ms(20 + began), own);
            }
        }
    }
    // Corrected by the recent wait alone, the base took the worst
    // over-correction (8 ms under the path) and read 3 ms of delay on
    // an empty path (each flow's least over 100 ms takes some back).
    let r = s.read(at(20_000));
    assert_eq!(r.flows, 1, "one far network");
    assert!(r.delay.unwrap() <= ms(1), "{r:?}");
}

#[test]
fn a_correction_longer_than_the_round_trip_is_no_evidence() {
    // Two downloads on a 20 ms path, sluice's queue 5 ms. Then one
    // sample of each comes corrected by more than it measured (the
    // lab's `rtt 23.5 ms, own 48.3`, and an upload's `rtt 45.1, own
    // 34.9`, whose floor was as long): left out, the base stays at
    // the path and the reading at the queue beyond.
    let mut s = DelaySignal::default();
    let far = host(1);
    for t in (0..2000).step_by(10) {
        for f in 0..2 {
            s.add(at(t), far, f, ms(25 + t / 200), ms(5));
        }
    }
    let before = s.read(at(2000));
    assert_eq!(before.delay, Some(ms(9)), "the queue beyond, 9 ms");
    let unsound = Own {
        wait: ms(48),
        floor: ms(48),
    };
    s.add(at(2000), far, 0, Duration::from_micros(23_500), unsound);
    s.add_ack(at(2000), far, 1, ms(45), unsound);
    for t in (2010..2200).step_by(10) {
        for f in 0..2 {
            s.add(at(t), far, f, ms(34), ms(5));
        }
    }
    let r = s.read(at(2200));
    assert_eq!(r.delay, Some(ms(9)), "{r:?}");
    assert_eq!(s.unsound, 2);
    // Corrected by no more than it measured, a sample counts.
    s.add(at(2200), far, 0, ms(30), ms(30));
    assert_eq!(s.unsound, 2);
}

/// A signal that reads one far network alone (the tests of what one
/// network's flows read; the vote is tested on its own).
/// A stamp from the far end of a conversation the LAN host answers.
fn stamp(s: &mut DelaySignal, t: Instant, far: IpAddr, flow: u64, tsval: u32) {
    s.answered(t, flow);
    s.add_inbound(t, far, flow, tsval);
}

#[test]
fn stamps_of_a_connection_the_lan_host_does_not_answer_count_nothing() {
    // Three far networks stamp for 3 s, then their stamps lag: a queue
    // read on the way in, unless nobody on the LAN ever answered them.
    let feed = |s: &mut DelaySignal, answer: bool| {
        for t in (0..6_000u64).step_by(10) {
            let lag = t.saturating_sub(3_000) / 2;
            for f in 0..3u64 {
                if answer {
                    s.answered(at(t), f);
                }
                s.add_inbound(at(t), host(f as u8), f, (t - lag) as u32);
            }
        }
    };
    let mut answered = DelaySignal::default();
    feed(&mut answered, true);
    assert!(answered
        .read_in(at(6_000))
        .delay
        .is_some_and(|d| d > ms(500)));
    let mut unsolicited = DelaySignal::default();
    feed(&mut unsolicited, false);
    assert_eq!(unsolicited.read_in(at(6_000)).delay, None);
}

fn host(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 51, i, 10))
}

/// `flows` flows to distinct networks with base RTTs 20 + 5·i ms, one
/// sample each per 10 ms from `from` to `to`, each `extra(flow, t)`
/// above its base; sluice's own sojourn `own`.
fn feed(
    s: &mut DelaySignal,
    flows: u64,
    from: u64,
    to: u64,
    own: Duration,
    extra: impl Fn(u64, u64) -> Duration,
) {
    let mut t = from;
    while t < to {
        for f in 0..flows {
            let rtt = ms(20 + 5 * f) + own + extra(f, t);
            s.add(at(t), host(f as u8), f, rtt, own);
        }
        t += 10;
    }
}

#[test]
fn a_queue_beyond_sluice_reads_as_its_delay_over_each_base() {
    let mut s = DelaySignal::default();
    // 2 s idle path (only the base), then 30 ms of queue for everyone.
    feed(&mut s, 5, 0, 2000, ms(0), |_, _| ms(0));
    assert_eq!(s.read(at(2000)).delay, Some(ms(0)));
    feed(&mut s, 5, 2000, 2500, ms(0), |_, _| ms(30));
    let r = s.read(at(2500));
    assert_eq!(r.delay, Some(ms(30)), "{r:?}");
    assert_eq!(r.flows, 5);
    assert!(r.newest_age.unwrap() <= ms(10));
}

#[test]
fn sluices_own_sojourn_is_not_read_as_the_links() {
    let mut s = DelaySignal::default();
    feed(&mut s, 3, 0, 1000, ms(0), |_, _| ms(0));
    // Sluice's own queue grows to 25 ms: the link has none.
    feed(&mut s, 3, 1000, 2000, ms(25), |_, _| ms(0));
    assert_eq!(s.read(at(2000)).delay, Some(ms(0)));
}

#[test]
fn a_few_noisy_flows_and_delayed_acks_do_not_move_the_median() {
    let mut s = DelaySignal::default();
    // 7 flows; flows 0 and 1 jump by up to 150 ms on every sample
    // (a slow server, a bad Wi-Fi), every flow has a delayed ACK
    // (+40 ms) on one sample in three.
    let noise = |f: u64, t: u64| {
        let h = (f * 7919 + t * 104_729) % 151;
        let mut d = if f < 2 { ms(h) } else { ms(0) };
        if (t / 10 + f).is_multiple_of(3) {
            d = d + ms(40);
        }
        d
    };
    feed(&mut s, 7, 0, 5000, ms(0), noise);
    let r = s.read(at(5000));
    assert_eq!(r.flows, 7);
    assert!(r.delay.unwrap() <= ms(2), "{r:?}");
    // The same noise on top of a real 40 ms queue reads about 40 ms.
    feed(&mut s, 7, 5000, 5500, ms(0), |f, t| noise(f, t) + ms(40));
    let d = s.read(at(5500)).delay.unwrap();
    assert!((ms(38)..=ms(45)).contains(&d), "{d:?}");
}

#[test]
fn missing_signal_is_none_not_zero_and_ages() {
    let mut s = DelaySignal::default();
    assert_eq!(s.read(at(0)), Reading::default());
    feed(&mut s, 2, 0, 500, ms(0), |_, _| ms(0));
    let r = s.read(at(3000));
    assert_eq!(r.delay, None, "no flow heard from in the last second");
    assert_eq!(r.flows, 0);
    assert_eq!(r.newest_age, Some(ms(3000 - 490)));
    s.expire(at(3000));
    assert_eq!(s.sizes().1, 2, "kept four freshness periods");
    s.expire(at(5000));
    assert_eq!(s.sizes().1, 0, "stale flows leave");
    s.expire(at(70_000));
    assert_eq!(s.sizes(), (0, 0), "stale bases leave");
}

#[test]
fn the_base_forgets_a_path_it_no_longer_has() {
    let mut s = DelaySignal::default();
    feed(&mut s, 1, 0, 1000, ms(0), |_, _| ms(0));
    // The path gets 15 ms longer for good (a route change): after at
    // most a base window it no longer reads as queueing.
    feed(&mut s, 1, 1000, 62_000, ms(0), |_, _| ms(15));
    assert_eq!(s.read(at(62_000)).delay, Some(ms(0)));
}

#[test]
fn a_liar_beside_an_honest_sender_does_not_read_as_a_queue() {
    // Two downloads from two servers, both clocks verified; from 3 s
    // on, one server's stamps fall behind by 0.4 s a second (slow
    // enough to pass the clock checks) up to 10 s: a growing queue
    // that is not there. The honest one reads none.
    let lag = |t: u64| t.saturating_sub(3_000).min(25_000) * 2 / 5;
    let feed = |s: &mut DelaySignal| {
        for t in (0..30_000).step_by(10) {
            stamp(s, at(t), host(1), 1, (t + 500) as u32);
            stamp(s, at(t), host(2), 2, (t + 900 - lag(t)) as u32);
        }
    };
    // The lesser of two is the honest one (the mean read 5 s).
    let mut s = DelaySignal::default();
    feed(&mut s);
    let r = s.read_in(at(30_000));
    assert_eq!((r.delay, r.flows), (Some(ms(0)), 2), "{r:?}");
}

#[test]
fn fifty_flows_of_one_server_are_one_vote_against_three_honest_ones() {
    // Three servers on their own networks, a 30 ms queue beyond sluice
    // from 2 s on; one more server with 50 connections whose answers
    // it delays by 10 s after the first second.
    let mut s = DelaySignal::default();
    let liar = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 66));
    for t in (0..3_000).step_by(10) {
        let q = if t < 2_000 { 0 } else { 30 };
        for f in 0..3u64 {
            s.add(at(t), host(f as u8), f, ms(20 + q), ms(0));
        }
        for f in 100..150 {
            let lie = if t < 1_000 { 0 } else { 10_000 };
            s.add(at(t), liar, f, ms(20 + lie), ms(0));
        }
    }
    let r = s.read(at(3_000));
    assert_eq!((r.delay, r.flows), (Some(ms(30)), 4), "{r:?}");
}

#[test]
fn a_flood_of_new_inbound_flows_leaves_the_verified_ones() {
    // Three servers' verified downloads, then a flood of new flow
    // hashes, ten times the room: the three still vote.
    let mut s = DelaySignal::new(Params {
        max_flows: 64,
        ..Params::default()
    });
    for t in (0..3_000).step_by(10) {
        for f in 0..3u64 {
            stamp(&mut s, at(t), host(f as u8), f, t as u32);
        }
    }
    for (i, f) in (1_000..1_640u64).enumerate() {
        stamp(&mut s, at(3_000) + Duration(i as u64), host(9), f, 5);
    }
    for t in (3_000..3_200).step_by(10) {
        for f in 0..3u64 {
            stamp(&mut s, at(t), host(f as u8), f, t as u32);
        }
    }
    let r = s.read_in(at(3_200));
    assert_eq!((r.delay, r.flows), (Some(ms(0)), 3), "{r:?}");
}

#[test]
fn memory_is_bounded() {
    let mut s = DelaySignal::new(Params {
        max_prefixes: 8,
        max_flows: 8,
        ..Params::default()
    });
    feed(&mut s, 50, 0, 100, ms(0), |_, _| ms(0));
    assert_eq!(s.sizes(), (8, 8));
}
