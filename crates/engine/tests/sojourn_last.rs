//! A queue's sojourn over the last interval (`show queues -v`) forgets a
//! congested past that its sojourn since creation keeps, and is empty
//! once the queue has been idle for longer than an interval.

mod common;

use sluice_engine::{ClassReport, Engine, SOJOURN_INTERVAL};
use sluice_time::{Duration, Instant};
use sluice_wire::build;

use common::{bridge, CLIENT, LAN, SERVER, WAN};

/// Offers a 1514-byte frame every `gap` from `from` for `len`, the upload
/// shaped at 950 kbit/s; returns the time reached.
fn offer(e: &mut Engine, from: Instant, len: Duration, gap: Duration) -> Instant {
    let step = Duration::from_millis(1);
    let mut now = from;
    let mut next = from;
    while now < from + len {
        if now >= next {
            e.handle_rx(now, LAN, build::udp_v4(CLIENT, SERVER, 4000, 5001, 1472));
            next += gap;
        }
        e.handle_timeout(now);
        while e.poll_tx(now, WAN).is_some() {}
        while e.poll_dropped().is_some() {}
        now += step;
    }
    now
}

fn up(e: &Engine) -> ClassReport {
    let wan = &e.report()[WAN];
    wan.class("up").expect("the queue").clone()
}

#[test]
fn the_last_interval_forgets_a_congested_past() {
    let mut e = bridge("queue up on $ext_if bandwidth 950K qlimit 100 default\npass\n");
    // 20 s at 2 Mbit/s: a full queue of 100 frames, over a second each.
    let now = offer(
        &mut e,
        Instant::ZERO,
        Duration::from_secs(20),
        Duration::from_millis(6),
    );
    // Then 30 s at a tenth of the rate: nothing waits.
    let now = offer(
        &mut e,
        now,
        Duration::from_secs(30),
        Duration::from_millis(130),
    );
    let q = up(&e);
    assert!(q.sojourn_p99.unwrap() > Duration::from_millis(500), "{q:?}");
    let last = q
        .sojourn_last
        .quantile(0.99)
        .expect("packets in the last interval");
    assert!(last < Duration::from_millis(20), "last p99 {last:?}");
    assert!(q.sojourn_last.count() < q.sojourn.count() / 4);
    // Over two intervals idle (one frame at its start): nothing in the
    // last one.
    let idle = Duration(SOJOURN_INTERVAL.0 * 5 / 2);
    offer(&mut e, now, idle, Duration::from_secs(3600));
    let q = up(&e);
    assert_eq!(q.sojourn_last.quantile(0.99), None, "{:?}", q.sojourn_last);
    assert!(q.sojourn_p99.is_some());
}
