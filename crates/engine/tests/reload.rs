//! Reload: all or nothing; queues that keep their name keep their packets.

mod common;

use common::{bridge_keyed, config as cfg, udp_burst, WAN};
use sluice_engine::{DropCause, Engine};
use sluice_time::{Duration, Instant};

fn engine(text: &str) -> Engine {
    bridge_keyed(text, [1; 16])
}

const OLD: &str = "
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 priq(default)
pass out on $ext_if proto udp queue (q_def, q_pri)
";

fn fill(e: &mut Engine, n: u16) {
    udp_burst(e, Instant(1_000_000_000), 5000, n, 1000);
}

#[test]
fn surviving_queue_keeps_its_packets_in_order_and_vanished_ones_are_counted() {
    let mut e = engine(OLD);
    fill(&mut e, 20);
    assert_eq!(e.queued(WAN), 20);
    let new = "
altq on $ext_if hfsc bandwidth 1Mb queue { q_def, other }
queue q_def bandwidth 50% qlimit 100 hfsc(default)
queue other bandwidth 50%
pass out on $ext_if proto udp queue q_def
";
    let rep = e.reload(&cfg(new)).expect("valid reload");
    assert_eq!(rep.kept, 20);
    assert_eq!(rep.dropped, 0);
    assert_eq!(e.queued(WAN), 20);
    // They leave in their original order (source ports 5000, 5001, …).
    let mut now = Instant(1_000_000_000);
    let mut ports = Vec::new();
    while ports.len() < 20 {
        match e.poll_tx(now, WAN) {
            Some(f) => {
                let info = sluice_wire::parse(&f).unwrap();
                ports.push(info.ip.unwrap().ports().unwrap().0);
            }
            None => now = e.poll_timeout().unwrap().max(now + Duration(1)),
        }
    }
    assert_eq!(ports, (5000..5020).collect::<Vec<u16>>());

    // A config without q_def: its packets are dropped and counted as reload drops.
    fill(&mut e, 5);
    let rep = e
        .reload(&cfg(
            "altq on $ext_if priq bandwidth 1Mb queue { x }\nqueue x priority 1 priq(default)\n",
        ))
        .unwrap();
    assert_eq!((rep.kept, rep.dropped), (0, 5));
    assert_eq!(e.counters(WAN).unwrap().reload_drops, 5);
    let mut reload_drops = 0;
    while let Some(d) = e.poll_dropped() {
        if d.cause == DropCause::Reload {
            reload_drops += 1;
        }
    }
    assert_eq!(reload_drops, 5);
}

#[test]
fn a_config_that_cannot_be_built_changes_nothing() {
    let mut e = engine(OLD);
    fill(&mut e, 7);
    let mut bad = cfg(OLD);
    bad.interfaces[0].queues[0].priority = 200; // beyond PRIQ's 0..15
    assert!(e.reload(&bad).is_err());
    assert_eq!(e.queued(WAN), 7, "packets untouched");
    let rep = e.report();
    assert!(rep[WAN].class("q_pri").is_some() && rep[WAN].class("q_def").is_some());
}

/// Found by the `engine_ops` fuzz target: frames queued unshaped before a
/// reload gave their interface a tree were never sent, and `poll_timeout`
/// answered "now" forever (a spinning data plane).
#[test]
fn frames_queued_before_a_tree_existed_still_leave() {
    let mut e = engine("pass all\n");
    fill(&mut e, 5);
    assert_eq!(e.queued(WAN), 5);
    e.reload(&cfg(OLD)).expect("valid reload");
    let now = Instant(2_000_000_000);
    let mut sent = 0;
    while e.poll_tx(now, WAN).is_some() {
        sent += 1;
    }
    assert_eq!((sent, e.queued(WAN)), (5, 0));
    assert!(e.poll_timeout().is_none_or(|t| t > now));
}
