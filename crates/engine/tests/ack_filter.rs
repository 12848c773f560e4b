//! The ACK filter through the engine, in virtual time: downloads whose ACKs
//! go up a slow link. With `ack-filter` on the upload queue, the queue holds
//! a few ACKs per flow instead of filling up, nothing is refused at the
//! door, and the newest ACK of every flow always gets through in order (the
//! downloads' ACK clock is thinned, never broken).

mod common;

use sluice_engine::{Engine, Rx};
use sluice_sched::testing::{tcp_opt_timestamps, TcpFrame};
use sluice_time::{Duration, Instant};
use std::net::Ipv4Addr;

const LAN: usize = 0;
const WAN: usize = 1;
const FLOWS: u16 = 8;
const LIMIT: usize = 50;

/// The upload queue `up` in ALTQ, with `filter` among its options.
fn altq(filter: &str) -> String {
    format!(
        "altq on wan0 priq bandwidth 64Kb queue {{ up }}\n\
         queue up qlimit {LIMIT} priq(default {filter})\n"
    )
}

fn engine(text: &str) -> Engine {
    common::bridge(text)
}

/// The ACK of download `flow` acknowledging `ack`, sent at `ms`.
fn ack(flow: u16, ack: u32, ms: u32) -> Vec<u8> {
    let mut f = TcpFrame::ack(
        Ipv4Addr::new(192, 168, 1, 10),
        Ipv4Addr::new(198, 51, 100, 1),
        40_000 + flow,
        443,
        ack,
    );
    f.options = tcp_opt_timestamps(ms, ms / 2);
    f.build()
}

fn read(frame: &[u8]) -> (u16, u32) {
    let l4 = 14 + 20;
    let port = u16::from_be_bytes([frame[l4], frame[l4 + 1]]) - 40_000;
    let ack = u32::from_be_bytes(frame[l4 + 8..l4 + 12].try_into().unwrap());
    (port, ack)
}

struct Run {
    max_queued: usize,
    queue_full: u64,
    filtered: u64,
    /// Per flow, the ACK numbers that left on the WAN side, in order.
    sent: Vec<Vec<u32>>,
    last: Vec<u32>,
}

/// 2 s of 8 downloads each acknowledging two 1448-byte segments every
/// millisecond (8000 ACKs/s offered to a link that carries ~120), then
/// 10 s to drain. ACK numbers start near the top of the sequence space so
/// they wrap during the run.
fn run(text: &str) -> Run {
    let mut e = engine(text);
    let mut sent = vec![Vec::new(); FLOWS as usize];
    let mut last = vec![0u32; FLOWS as usize];
    let mut max_queued = 0;
    let step = Duration::from_micros(100);
    let mut now = Instant::ZERO;
    for tick in 0..120_000u32 {
        if tick < 20_000 && tick % 10 == 0 {
            let ms = tick / 10;
            for f in 0..FLOWS {
                let n = (u32::MAX - 1_000_000).wrapping_add(ms * 2 * 1448 + u32::from(f));
                last[f as usize] = n;
                let rx = e.handle_rx(now, LAN, ack(f, n, ms));
                assert!(
                    matches!(rx, Rx::Queued { egress: WAN } | Rx::Dropped(_)),
                    "{rx:?}"
                );
            }
        }
        e.handle_timeout(now);
        while let Some(frame) = e.poll_tx(now, WAN) {
            let (f, n) = read(&frame);
            sent[f as usize].push(n);
        }
        while e.poll_dropped().is_some() {}
        max_queued = max_queued.max(e.queued(WAN));
        now += step;
    }
    let report = e.report();
    let up = report
        .iter()
        .find(|i| i.name == "wan0")
        // A fifo pipe is one queue, reported as the interface's root.
        .and_then(|i| {
            i.class("up")
                .or_else(|| i.classes.iter().find(|c| c.id.0 == 0))
        })
        .expect("queue up");
    let by = |name: &str| {
        up.drops
            .iter()
            .filter(|d| d.0.name() == name)
            .map(|d| d.1)
            .sum::<u64>()
    };
    Run {
        max_queued,
        queue_full: by("queue-full"),
        filtered: by("ack-filter"),
        sent,
        last,
    }
}

fn serial_before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 1 << 31
}

#[test]
fn a_slow_upload_keeps_few_acks_queued_and_the_newest_of_each_flow() {
    let plain = run(&altq(""));
    let filtered = run(&altq("ack-filter"));
    eprintln!(
        "without: max queued {}, queue-full {}; with: max queued {}, queue-full {}, ack-filter {}",
        plain.max_queued,
        plain.queue_full,
        filtered.max_queued,
        filtered.queue_full,
        filtered.filtered
    );
    // Without the filter the queue sits at its limit and refuses ACKs at
    // the door, the newest among them.
    assert_eq!(plain.max_queued, LIMIT);
    assert!(plain.queue_full > 10_000, "{}", plain.queue_full);
    check_filtered(&filtered);
    // Without the filter the newest ACK of most flows was refused (a slot
    // freed just before the last round may let one in).
    let arrived = (0..FLOWS as usize)
        .filter(|&f| plain.sent[f].last() == Some(&plain.last[f]))
        .count();
    assert!(arrived < FLOWS as usize / 2, "{arrived}");
}

/// The same in the other dialects: a 5.5+ queue, a fifo pipe with the
/// option on the pipe, a queue of a DRR pipe with it on the queue.
#[test]
fn every_dialect_builds_the_filter() {
    for text in [
        format!(
            "queue root on wan0 bandwidth 64K\n\
             queue up parent root bandwidth 64K qlimit {LIMIT} default ack-filter\n"
        ),
        format!("pipe up on wan0 bandwidth 64Kb qlimit {LIMIT} sched fifo ack-filter\n"),
        format!(
            "pipe p on wan0 bandwidth 64Kb sched drr\n\
             queue up pipe p qlimit {LIMIT} ack-filter default\n"
        ),
    ] {
        let r = run(&text);
        eprintln!(
            "{text}: max queued {}, queue-full {}, ack-filter {}",
            r.max_queued, r.queue_full, r.filtered
        );
        check_filtered(&r);
    }
}

/// With the filter: at most two ACKs per flow queued (conservative), no
/// refusals, and every flow's ACKs leave in order, its newest one last.
fn check_filtered(r: &Run) {
    // (+1: a pipe also counts the packet it is sending.)
    assert!(r.max_queued <= 2 * FLOWS as usize + 1, "{}", r.max_queued);
    assert_eq!(r.queue_full, 0);
    assert!(r.filtered > 10_000, "{}", r.filtered);
    for f in 0..FLOWS as usize {
        let s = &r.sent[f];
        assert!(s.windows(2).all(|w| serial_before(w[0], w[1])), "flow {f}");
        assert_eq!(s.last(), Some(&r.last[f]), "flow {f}");
    }
}
