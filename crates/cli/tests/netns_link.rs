//! Interface events under `sluice run`, on every I/O path (AF_XDP, the
//! TPACKET ring, recvmmsg): a link that goes down (set down, or its carrier
//! lost when the peer goes down) is waited for without
//! spinning and forwarding resumes when it comes back up (logged and
//! counted); a link that is deleted ends the daemon with an error naming it
//! and a non-zero exit status.
//!
//! Needs root, `ip`, `ethtool`, `ping` (scripts/setup.sh); otherwise each
//! test prints a SKIP line and returns, or fails under
//! `SLUICE_REQUIRE_NETNS=1` (sluice-testkit). Tests hold the kit's serial
//! lock: they share two cores, and CPU time is measured below.

use sluice_lab::BridgeLab;
use sluice_testkit::{require_io, require_netns, Sluice};
use std::time::Duration;

/// How long the link stays down.
const DOWN_FOR: Duration = Duration::from_secs(2);
/// CPU the daemon may use while the link is down, in clock ticks (1/100 s
/// on Linux): a loop spinning on the dead link would use ~200 in 2 s.
const DOWN_CPU_TICKS_MAX: u64 = 30;
/// Pings (1 s timeout each) allowed for forwarding to resume after up.
const RESUME_PINGS: u32 = 8;

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th of the whole line.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Where the link is taken down: lan0 itself in the shaper namespace, or
/// its veth peer c0 in the client namespace (lan0 loses carrier).
#[derive(Clone, Copy, Debug)]
enum Flap {
    Admin,
    Carrier,
}

fn link(lab: &BridgeLab, flap: Flap, args: &[&str]) {
    let ns = match flap {
        Flap::Admin => &lab.shaper,
        Flap::Carrier => &lab.client,
    };
    lab.topo
        .ip(ns, args)
        .unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
}

fn flap_case(io: &str, flap: Flap) {
    let dev = match flap {
        Flap::Admin => "lan0",
        Flap::Carrier => "c0",
    };
    let mut lab = BridgeLab::new("lk").expect("namespaces");
    let b = bin();
    lab.start_sluice(&b, "pass all\n", &["--io", io, "-v"])
        .unwrap_or_else(|e| panic!("--io {io}: {e}"));
    if !require_io(&lab, &b, io) {
        return;
    }
    let pid = lab.sluice_pid().expect("pid");
    let downs_before = lab
        .io_counter(&b, "lan0_link_down")
        .expect("lan0_link_down");

    link(&lab, flap, &["link", "set", dev, "down"]);
    // Let the event arrive before measuring.
    std::thread::sleep(Duration::from_millis(200));
    let t0 = cpu_ticks(pid);
    std::thread::sleep(DOWN_FOR);
    let used = cpu_ticks(pid) - t0;
    assert!(
        lab.sluice_alive(),
        "--io {io}: sluice exited on link down:\n{}",
        lab.log()
    );
    assert!(
        !lab.ping_once(),
        "--io {io}: a ping crossed a link that is down"
    );
    link(&lab, flap, &["link", "set", dev, "up"]);
    let resumed = (1..=RESUME_PINGS).find(|_| lab.ping_once());
    let downs = lab
        .io_counter(&b, "lan0_link_down")
        .expect("lan0_link_down");
    eprintln!(
        "netns_link: --io {io}, {flap:?} down: CPU while down {used} ticks in {DOWN_FOR:?}; \
         forwarding resumed at ping {resumed:?}; lan0_link_down {downs_before} -> {downs}"
    );
    assert!(
        used <= DOWN_CPU_TICKS_MAX,
        "--io {io}: {used} ticks of CPU in {DOWN_FOR:?} with the link down (spinning?)\n{}",
        lab.log()
    );
    assert!(
        resumed.is_some(),
        "--io {io}: no ping crossed within {RESUME_PINGS} tries after link up\n{}",
        lab.log()
    );
    assert_eq!(downs, downs_before + 1, "--io {io}: one down counted");
    let log = lab.log();
    assert!(
        log.contains("lan0 is down") && log.contains("lan0 is up"),
        "--io {io}: down and up logged:\n{log}"
    );
    let st = lab.stop_sluice().unwrap();
    assert!(
        st.is_some_and(|s| s.success()),
        "--io {io}: sluice did not stop cleanly\n{}",
        lab.log()
    );
}

fn delete_case(io: &str) {
    let mut lab = BridgeLab::new("ld").expect("namespaces");
    let b = bin();
    let id = lab
        .start_sluice(&b, "pass all\n", &["--io", io])
        .unwrap_or_else(|e| panic!("--io {io}: {e}"));
    if !require_io(&lab, &b, io) {
        return;
    }
    link(&lab, Flap::Admin, &["link", "del", "lan0"]);
    let st = lab.topo.wait(id, Duration::from_secs(5)).unwrap();
    let log = lab.log();
    eprintln!("netns_link: --io {io}: lan0 deleted: sluice {st:?}");
    let st = st.unwrap_or_else(|| panic!("--io {io}: sluice still runs without lan0\n{log}"));
    assert!(
        !st.success(),
        "--io {io}: exit status must say failure\n{log}"
    );
    assert!(
        log.contains("interface lan0 disappeared"),
        "--io {io}: the error names the interface:\n{log}"
    );
}

#[test]
fn link_down_is_waited_out_and_forwarding_resumes_on_every_io_path() {
    let Some(_serial) = require_netns(&[]) else {
        return;
    };
    for io in ["xdp", "ring", "mmsg"] {
        flap_case(io, Flap::Admin);
    }
    // Carrier loss goes through the same path; once is enough.
    flap_case("xdp", Flap::Carrier);
}

#[test]
fn deleted_interface_ends_the_run_with_an_error_naming_it() {
    let Some(_serial) = require_netns(&[]) else {
        return;
    };
    for io in ["xdp", "ring", "mmsg"] {
        delete_case(io);
    }
}
