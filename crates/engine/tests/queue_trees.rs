//! OpenBSD 5.5+ trees on interface lists and child names shared across
//! roots: a rule's `set queue (std, ack)` resolves in the tree of the
//! interface the packet leaves through.

mod common;

use sluice_engine::{Engine, Rx};
use sluice_time::Instant;
use sluice_wire::build;
use sluice_wire::tcp_flags::ACK;

use common::{bridge, CLIENT, LAN, SERVER, WAN};

/// Offers one frame of each kind in each direction before anything is
/// sent; returns (interface, leaf queue, packets queued there).
fn queued(e: &mut Engine) -> Vec<(usize, String, u64)> {
    let t = Instant::ZERO;
    let frames = [
        (LAN, build::tcp(CLIENT, SERVER, 40_000, 443, ACK, 1000)),
        (LAN, build::tcp(CLIENT, SERVER, 40_000, 443, ACK, 0)),
        (WAN, build::tcp(SERVER, CLIENT, 443, 40_000, ACK, 1000)),
        (WAN, build::tcp(SERVER, CLIENT, 443, 40_000, ACK, 1200)),
        (WAN, build::udp_v4(SERVER, CLIENT, 53, 5000, 100)),
    ];
    for (i, f) in frames {
        assert!(matches!(e.handle_rx(t, i, f), Rx::Queued { .. }));
    }
    let mut out = Vec::new();
    for (i, r) in e.report().iter().enumerate() {
        // Leaves only: a parent's qlen sums its children's.
        let leaves = r
            .classes
            .iter()
            .filter(|c| c.name.is_some() && !r.classes.iter().any(|x| x.parent == c.name));
        for c in leaves {
            if c.qlen > 0 {
                out.push((i, c.name.clone().unwrap_or_default(), c.qlen));
            }
        }
    }
    out.sort();
    out
}

/// What [`queued`] finds when `(std, ack)` resolves in the tree of the
/// interface a frame leaves through: toward the server, the data in wan0's
/// `std` and the bare ACK in its `ack`; toward the client, both data
/// segments in lan0's `std` and the UDP frame in its default.
fn by_tree() -> Vec<(usize, String, u64)> {
    [
        (LAN, "other", 1),
        (LAN, "std", 2),
        (WAN, "ack", 1),
        (WAN, "std", 1),
    ]
    .map(|(i, q, n)| (i, q.to_string(), n))
    .to_vec()
}

#[test]
fn one_root_on_an_interface_list_is_a_tree_on_each() {
    let mut e = bridge(
        "both = \"{ lan0 wan0 }\"\n\
         queue root on $both bandwidth 10M\n\
         queue std parent root bandwidth 5M\n\
         queue ack parent root bandwidth 1M\n\
         queue other parent root bandwidth 4M default\n\
         pass flags any no state\n\
         match out proto tcp set queue (std, ack)\n",
    );
    assert_eq!(queued(&mut e), by_tree());
}

#[test]
fn a_child_name_shared_by_two_roots_resolves_on_the_way_out() {
    let mut e = bridge(
        "queue up on $ext_if bandwidth 10M\n\
         queue std parent up bandwidth 5M\n\
         queue ack parent up bandwidth 1M\n\
         queue rest parent up bandwidth 4M default\n\
         queue down on $int_if bandwidth 50M\n\
         queue std parent down bandwidth 40M\n\
         queue ack parent down bandwidth 5M\n\
         queue other parent down bandwidth 5M default\n\
         pass flags any no state\n\
         match out proto tcp set queue (std, ack)\n",
    );
    assert_eq!(queued(&mut e), by_tree());
}
