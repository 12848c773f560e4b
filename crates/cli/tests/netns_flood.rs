//! A hostile flood against a running `sluice run` (issue #12, "Done
//! when"): 100 000 spoofed TCP segments of every flag combination with
//! random 5-tuples (a quarter IPv6), half from the LAN side and half from
//! the WAN side at once, through a stateful ACK-priority configuration
//! with a 10 000-state table (a tenth of the default). New LAN connections
//! must keep working during and after it, and the daemon's peak RSS must
//! stay under the cap documented in docs/dataplane.md ("Memory").
//!
//! Needs root, `ip`, `ping`, `python3` (scripts/setup.sh); otherwise SKIP,
//! or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_lab::BridgeLab;
use sluice_testkit::{bridge_lab, connect, listen, proc_status, Sluice, INJECT};
use std::time::{Duration, Instant};

/// Segments per side.
const PER_SIDE: u32 = 50_000;
const PORT: &str = "7777";
/// Peak RSS allowed, KiB: docs/dataplane.md's cap on what queued frames
/// hold (64 MiB) plus the state table and the binary, far under the
/// systemd unit's `MemoryMax=256M`.
const PEAK_RSS_KIB_MAX: u64 = 128 * 1024;

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// `connect` rounds of the injector from the client: (ok, failed).
fn connects(lab: &BridgeLab, count: u32, timeout_s: &str) -> (u32, u32) {
    let (s, _) = connect(lab, PORT, count, timeout_s);
    let mut it = s.split_whitespace().map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(count))
}

#[test]
fn spoofed_flood_from_both_sides_leaves_new_connections_working() {
    let Some((_serial, mut lab)) = bridge_lab("fl", &["ip", "ping", "python3"]) else {
        return;
    };
    let b = bin();
    // The README's ACK priority, for both directions, with a tenth of the
    // default state limit; the flood's SYNs (a quarter of the flag
    // combinations have SYN without ACK) alone are 2.5× the table.
    let conf = "set limit states 10000\n\
        altq on $ext_if priq bandwidth 20Mb queue { q_pri, q_def }\n\
        queue q_pri priority 7\n\
        queue q_def priority 1 qlimit 200 priq(default)\n\
        pass out on $ext_if proto tcp keep state queue (q_def, q_pri)\n\
        pass in on $ext_if proto tcp keep state queue (q_def, q_pri)\n";
    lab.start_sluice(&b, conf, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = lab.sluice_pid().unwrap();
    let listener = listen(&mut lab, PORT, None);
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = connects(&lab, 5, "2");
    assert_eq!(
        (ok, failed),
        (5, 0),
        "connections before the flood\n{}",
        lab.log()
    );
    let rss_before = proc_status(pid, "VmRSS");

    let (cmac, vmac) = (
        lab.topo.mac(&lab.client, "c0").unwrap(),
        lab.topo.mac(&lab.server, "v0").unwrap(),
    );
    let n = PER_SIDE.to_string();
    let (client, server) = (lab.client.clone(), lab.server.clone());
    let t0 = Instant::now();
    let from_lan = lab
        .topo
        .spawn(
            &client,
            &["python3", INJECT, "tcp_spoof", "c0", &cmac, &vmac, "1", &n],
            None,
        )
        .expect("flood from the LAN");
    let from_wan = lab
        .topo
        .spawn(
            &server,
            &["python3", INJECT, "tcp_spoof", "v0", &vmac, &cmac, "2", &n],
            None,
        )
        .expect("flood from the WAN");
    // New connections while the flood runs: each gets 2 s.
    let (during_ok, during_failed) = connects(&lab, 10, "2");
    for id in [from_lan, from_wan] {
        let st = lab.topo.wait(id, Duration::from_secs(120)).expect("wait");
        assert!(st.is_some_and(|s| s.success()), "flood injector failed");
    }
    let flood_s = t0.elapsed().as_secs_f64();
    let (after_ok, after_failed) = connects(&lab, 20, "2");
    let info = lab
        .info(&b)
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.log()));
    let (rss_after, hwm) = (proc_status(pid, "VmRSS"), proc_status(pid, "VmHWM"));
    eprintln!(
        "flood: {} segments in {flood_s:.1} s; connections during {during_ok} ok / \
         {during_failed} failed, after {after_ok} ok / {after_failed} failed; states \
         {} of {}, limit hits {}, inserts {}, evictions {}; RSS {rss_before} → {rss_after} KiB, peak {hwm} KiB",
        2 * PER_SIDE,
        info.states,
        info.state_limit,
        info.state_limit_hits,
        info.state_inserts,
        info.state_evictions,
    );
    let _ = lab.topo.stop(listener, "KILL");
    assert!(
        lab.sluice_alive(),
        "sluice died in the flood:\n{}",
        lab.log()
    );
    assert!(
        info.states <= info.state_limit,
        "state table over its limit"
    );
    assert!(
        info.state_inserts >= 10_000,
        "the flood did not reach the state table ({} inserts): the test tests nothing",
        info.state_inserts
    );
    assert_eq!(
        (after_ok, after_failed),
        (20, 0),
        "new LAN connections after the flood\n{}",
        lab.log()
    );
    assert!(
        during_ok >= 8,
        "new LAN connections during the flood: {during_ok} of 10"
    );
    assert!(
        hwm < PEAK_RSS_KIB_MAX,
        "peak RSS {hwm} KiB over the documented cap {PEAK_RSS_KIB_MAX} KiB"
    );
    assert!(lab.ping_once(), "forwarding after the flood");
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
