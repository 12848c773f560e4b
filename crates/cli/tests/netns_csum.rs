//! Hosts whose veth sends with TX checksum offload on (security review
//! L7): their TCP segments reach sluice's AF_PACKET sockets with only the
//! pseudo-header's sum in the checksum field (`TP_STATUS_CSUMNOTREADY`),
//! and nothing after sluice would complete it. sluice completes it, so a
//! TCP connection across works both ways, and counts each frame in
//! `IF_csum_completed`: on AF_PACKET as the kernel flags them, on AF_XDP
//! (which is told nothing) as recognised on a veth by their field. (The lab turns `tx` off on every veth end; here
//! it is turned back on on the two hosts' ends.)
//!
//! Needs root, `ip`, `ethtool`, `python3` (scripts/setup.sh); otherwise
//! SKIP, or a failure under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_lab::BridgeLab;
use sluice_testkit::{listen, require_netns, start_on_io, Sluice};
use std::time::Duration;

const PORT: &str = "5002";

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// Three TCP exchanges client → server: the injector's report and success.
fn connect(lab: &BridgeLab) -> (String, bool) {
    sluice_testkit::connect(lab, PORT, 3, "3")
}

#[test]
fn tcp_from_hosts_with_tx_checksum_offload_crosses_with_complete_checksums() {
    let Some(_serial) = require_netns(&["ethtool", "python3"]) else {
        return;
    };
    let b = bin();
    for io in ["ring", "mmsg", "xdp"] {
        let mut lab = BridgeLab::new("cs").expect("namespaces");
        if start_on_io(&mut lab, &b, "pass all\n", io, &[]).is_none() {
            continue;
        }
        listen(&mut lab, PORT, Some("30"));
        std::thread::sleep(Duration::from_millis(300));
        let completed = |name: &str| lab.io_counter(&b, name).unwrap_or(0);
        // The lab's own tx off: whole checksums, none taken for partial.
        let (report, ok) = connect(&lab);
        assert!(ok, "--io {io}, tx off: {report}\n{}", lab.log());
        assert_eq!(
            (
                completed("lan0_csum_completed"),
                completed("wan0_csum_completed")
            ),
            (0, 0),
            "--io {io}: a whole checksum was rewritten"
        );
        // Checksums left to offload, segments still MTU-sized (no TSO).
        for (ns, dev) in [(&lab.client, "c0"), (&lab.server, "v0")] {
            lab.topo
                .exec(ns, &["ethtool", "-K", dev, "tx", "on", "tso", "off"])
                .unwrap_or_else(|e| panic!("ethtool -K {dev} tx on: {e}"));
        }
        let (report, ok) = connect(&lab);
        let (lan, wan) = (
            completed("lan0_csum_completed"),
            completed("wan0_csum_completed"),
        );
        eprintln!(
            "netns_csum: --io {io}: TCP with tx offload on both hosts: {report}; \
             completed lan0 {lan}, wan0 {wan}"
        );
        assert!(ok, "--io {io}: {report}\n{}", lab.log());
        assert!(lan > 0 && wan > 0, "--io {io}: completed {lan}, {wan}");
        assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
    }
}
