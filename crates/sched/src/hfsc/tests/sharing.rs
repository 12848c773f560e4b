//! Link-sharing: proportions, hierarchy, no credit for idling.

use super::support::*;

#[test]
fn link_share_30_70_within_3_percent() {
    let link = Rate::mbps(10);
    let mut sim = Sim::new(ls_tree(link, &[(1, 0, 30), (2, 0, 70)]));
    let sent = sim.saturate(&[1, 2], Duration::from_secs(5));
    assert_share(&sent, 1, 0.30, 0.03, "30/70");
    let total: u64 = sent.iter().map(|e| e.1).sum();
    // Work conserving: the link is busy all the time (one packet of slack).
    assert!(total + MTU as u64 >= link.bytes_in(Duration::from_secs(5)));
}

#[test]
fn hierarchical_share_parents_first_then_children() {
    // Root splits A 50 % / B 50 %; A's children ask 1 % each (split 1:1),
    // B's 10 % and 30 % (1:3). Hierarchical: A1 25, A2 25, B1 12.5, B2 37.5.
    // A flat split by leaf curves would give 2.4 / 2.4 / 23.8 / 71.4.
    let link = Rate::mbps(10);
    let q = ls_tree(
        link,
        &[
            (10, 0, 50),
            (20, 0, 50),
            (11, 10, 1),
            (12, 10, 1),
            (21, 20, 10),
            (22, 20, 30),
        ],
    );
    let mut sim = Sim::new(q);
    let sent = sim.saturate(&[11, 12, 21, 22], Duration::from_secs(5));
    for (c, want) in [(11, 0.25), (12, 0.25), (21, 0.125), (22, 0.375)] {
        assert_share(&sent, c, want, 0.03, "all busy");
    }
    // With A idle, B's children split the whole link 1:3 (parents split
    // only among active siblings).
    let sent = sim.saturate(&[21, 22], Duration::from_secs(5));
    assert_share(&sent, 21, 0.25, 0.03, "B1 alone with B2");
}

/// A class that was idle while its sibling used the whole link gets no
/// credit for the idle time when it wakes up: from its first packet on, the
/// two split 50/50 (within a few packets), instead of the newcomer taking the
/// link until it "caught up" the second of service it did not use. Two
/// mechanisms ensure it (the vt given on activation, and the lift to the
/// parent's `cvtmin` after a class is served); breaking both fails this test.
#[test]
fn newly_active_class_gets_no_burst_credit() {
    let link = Rate::mbps(10);
    let mut sim = Sim::new(ls_tree(link, &[(1, 0, 50), (2, 0, 50)]));
    sim.saturate(&[1], Duration::from_secs(1));
    // Window of 100 ms (~83 packets); the bound: 3 packets of slack.
    let sent = sim.saturate(&[1, 2], Duration::from_millis(100));
    let total: u64 = sent.iter().map(|e| e.1).sum();
    let slack = 3.0 * MTU as f64 / total as f64;
    for c in [1, 2] {
        assert_share(&sent, c, 0.5, slack, "right after class 2 woke");
    }
    // Same when the newcomer sits under another parent (vt of the parents).
    let q = ls_tree(link, &[(10, 0, 50), (20, 0, 50), (1, 10, 50), (2, 20, 50)]);
    let mut sim = Sim::new(q);
    sim.saturate(&[1], Duration::from_secs(1));
    let sent = sim.saturate(&[1, 2], Duration::from_millis(100));
    for c in [1, 2] {
        assert_share(&sent, c, 0.5, slack, "nested");
    }
}

/// Real-time service counts for link-sharing: a class with rt 5 Mbit/s and
/// ls 30 % of 10 Mbit/s, beside a class with ls 70 %, gets its 50 % by rt and
/// nothing more by ls (its virtual time runs ahead), so both end near 50 %.
/// Were rt service not counted, it would get 5 + 0.3 · 5 = 6.5 Mbit/s (65 %).
#[test]
fn real_time_service_counts_for_link_sharing() {
    let link = Rate::mbps(10);
    let mut q = Hfsc::new(link);
    let p = ClassParams {
        rt: lin(Rate::mbps(5)),
        ls: lin(link.percent(30)),
        ul: None,
    };
    q.add_class(ClassId(1), None, p, Fifo::boxed(50)).unwrap();
    q.add_class(ClassId(2), None, ls(link.percent(70)), Fifo::boxed(50))
        .unwrap();
    let mut sim = Sim::new(q);
    let sent = sim.saturate(&[1, 2], Duration::from_secs(5));
    assert_share(&sent, 1, 0.50, 0.02, "rt counted for ls");
}
