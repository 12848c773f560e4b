//! The state table's sequence-window check (pf's `keep state` tracking)
//! against real kernel TCP between network namespaces: window scaling,
//! SACK, timestamps, loss and retransmission at a shaped, shallow queue,
//! both directions at once with several streams, and congestion control
//! variants. Not one honest segment may be refused as `bad-state`.
//!
//! Needs root, `ip`, `iperf3`, `python3`; otherwise SKIP (a failure under
//! `SLUICE_REQUIRE_NETNS=1`, sluice-testkit).

use sluice_control::proto::Reply;
use sluice_lab::iperf3::{self, ClientOptions};
use sluice_lab::SERVER_IP;
use sluice_testkit::{bridge_lab, Sluice};

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// Shallow queues at 20 and 8 Mbit/s: losses, hence retransmissions and
/// SACK, in both directions.
const CONF: &str = "\
altq on $ext_if priq bandwidth 8Mb queue { up }
queue up priority 1 qlimit 20 priq(default)
altq on $int_if priq bandwidth 20Mb queue { down }
queue down priority 1 qlimit 20 priq(default)
pass keep state
";

#[test]
fn honest_tcp_never_meets_a_bad_state() {
    let Some((_serial, mut lab)) = bridge_lab("win", &["iperf3", "python3"]) else {
        return;
    };
    let b = bin();
    lab.start_sluice(&b, CONF, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let server = lab.server.clone();
    iperf3::server(&mut lab.topo, &server, 5501).unwrap();
    iperf3::server(&mut lab.topo, &server, 5502).unwrap();
    let (down, up) = std::thread::scope(|s| {
        let lab = &lab;
        let up = s.spawn(move || {
            let mut o = ClientOptions::new(SERVER_IP, 5502);
            o.seconds = 5;
            o.parallel = 4;
            o.congestion = Some("reno".into());
            iperf3::client(&lab.topo, &lab.client, &o)
        });
        let mut o = ClientOptions::new(SERVER_IP, 5501);
        o.seconds = 5;
        o.reverse = true;
        o.parallel = 4;
        let down = iperf3::client(&lab.topo, &lab.client, &o);
        (down, up.join().unwrap())
    });
    let (down, up) = (
        down.unwrap_or_else(|e| panic!("download: {e}\n{}", lab.log())),
        up.unwrap_or_else(|e| panic!("upload: {e}\n{}", lab.log())),
    );
    let info = lab.info(&b).unwrap_or_else(|e| panic!("{e}"));
    let bad: Vec<(String, u64)> = info
        .counters
        .iter()
        .map(|c| (c.name.clone(), c.bad_state))
        .collect();
    eprintln!(
        "netns_window: download {:.1} Mbit/s, upload {:.1} Mbit/s, bad-state {bad:?}",
        down.goodput_bps / 1e6,
        up.goodput_bps / 1e6
    );
    assert!(down.goodput_bps > 5e6 && up.goodput_bps > 2e6, "{bad:?}");
    assert!(bad.iter().all(|(_, n)| *n == 0), "{bad:?}\n{}", lab.log());
    // The windows tracked are shown, as `pfctl -vss` does: Linux offers a
    // window scale on every SYN, so each state of a handshake seen has both.
    let states = match lab.show(&b, "states") {
        Ok(Reply::States(s)) => s,
        other => panic!("show states: {other:?}"),
    };
    let scaled = states
        .states
        .iter()
        .filter_map(|s| s.windows.as_ref())
        .filter(|w| w.iter().all(|p| p.wscale.is_some() && p.max_win > 0))
        .count();
    assert!(scaled >= 8, "{scaled} states show both windows: {states:?}");
    let text = lab.ctl(&b, &["show", "states"]).expect("show states");
    assert!(String::from_utf8_lossy(&text.stdout).contains("] wscale "));
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
