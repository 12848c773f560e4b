//! State-table exhaustion from the WAN (issue #12 item 2), under `sluice
//! run` bridging real namespaces: spoofed TCP segments with random 5-tuples
//! arrive on `$ext_if`, then the LAN opens a real TCP connection.
//!
//! 1. 3 000 spoofed ACKs into `set limit states 2000`: with pf's
//!    `flags S/SA` default they match no stateful rule and create no state
//!    (before: 2 000 states, 1 000 refused, and every new LAN connection
//!    refused for tcp.first = 120 s).
//! 2. 3 000 spoofed SYNs, which do create (unanswered) states and fill the
//!    table: the LAN connection evicts one of them instead of being refused.
//!
//! Needs root, `ip`, `python3` (scripts/setup.sh); otherwise SKIP, or a
//! failure under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_lab::bridge::CLIENT_IP;
use sluice_lab::BridgeLab;
use sluice_testkit::{bridge_lab, listen, Sluice, INJECT};
use std::time::Duration;

const LIMIT: u64 = 2000;
const FLOOD: u32 = 3000;
const PORT: &str = "5001";
/// The connection must complete well before tcp.first (120 s): a refused
/// SYN is retransmitted at 1 s and 3 s, and would still be refused.
const CONNECT_TIMEOUT_S: &str = "5";

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// `FLOOD` segments with `flags` from the server's side towards the client.
fn flood(lab: &BridgeLab, flags: &str, seed: u32) {
    let smac = lab.topo.mac(&lab.server, "v0").unwrap();
    let dmac = lab.topo.mac(&lab.client, "c0").unwrap();
    let (n, seed) = (FLOOD.to_string(), seed.to_string());
    let out = lab
        .topo
        .exec(
            &lab.server,
            &[
                "python3",
                INJECT,
                "tcp_spoof",
                "v0",
                &smac,
                &dmac,
                &seed,
                &n,
                flags,
                CLIENT_IP,
            ],
        )
        .unwrap_or_else(|e| panic!("flood {flags}: {e}"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), n);
    // Let sluice drain its rings.
    std::thread::sleep(Duration::from_millis(500));
}

/// One real TCP exchange client → server: the injector's report ("OK
/// FAILED SECONDS") and success.
fn connect(lab: &BridgeLab) -> (String, bool) {
    sluice_testkit::connect(lab, PORT, 1, CONNECT_TIMEOUT_S)
}

#[test]
fn spoofed_wan_floods_leave_new_lan_connections_working() {
    let Some((_serial, mut lab)) = bridge_lab("st", &["python3"]) else {
        return;
    };
    let b = bin();
    let conf = format!(
        "set limit states {LIMIT}\n\
         pass out on $ext_if keep state\n\
         pass out on $int_if keep state\n"
    );
    lab.start_sluice(&b, &conf, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    listen(&mut lab, PORT, Some("60"));
    // The listener is up once a connection succeeds (before any flood).
    let ready = (0..20).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        connect(&lab).1
    });
    assert!(ready, "no TCP path before the flood:\n{}", lab.log());

    flood(&lab, "A", 1);
    let after_acks = lab.info(&b).expect("show info");
    let (ack_report, ack_ok) = connect(&lab);
    eprintln!(
        "netns_state: {FLOOD} spoofed ACKs: {} states (limit {}), {} refused at the limit; \
         LAN connection: {ack_report}",
        after_acks.states, after_acks.state_limit, after_acks.state_limit_hits
    );
    assert_eq!(after_acks.state_limit, LIMIT);
    assert!(
        after_acks.states < 50,
        "spoofed ACKs created {} states (pf's flags S/SA default creates none)",
        after_acks.states
    );
    assert!(
        ack_ok,
        "LAN connection after the ACK flood: {ack_report}\n{}",
        lab.log()
    );

    flood(&lab, "S", 2);
    let after_syns = lab.info(&b).expect("show info");
    let (syn_report, syn_ok) = connect(&lab);
    let end = lab.info(&b).expect("show info");
    eprintln!(
        "netns_state: {FLOOD} spoofed SYNs: {} states, {} refused at the limit, {} evicted; \
         LAN connection: {syn_report}; then {} states, {} evicted",
        after_syns.states,
        after_syns.state_limit_hits,
        after_syns.state_evictions,
        end.states,
        end.state_evictions
    );
    assert!(
        after_syns.state_evictions > 0,
        "a SYN flood beyond the limit evicts unanswered states"
    );
    assert!(
        after_syns.states <= LIMIT && end.states <= LIMIT,
        "state table over its limit"
    );
    assert!(
        after_syns.states >= LIMIT - 10,
        "the SYN flood fills the table (the case eviction is for): {}",
        after_syns.states
    );
    assert!(
        syn_ok,
        "LAN connection into a table full of unanswered states: {syn_report}\n{}",
        lab.log()
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
