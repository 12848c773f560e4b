//! The `sluice` binary's client commands (`show`, `reload`, `stop`) against
//! the example daemon of `sluice_control::testing`: pfctl-like text, JSON
//! as printed, exit codes and messages. The control plane itself is tested
//! in crates/control/tests/ctl_socket.rs.

use sluice_control::proto::Reply;
use sluice_control::testing::{example_daemon, BAD_CONF, LAN, NEW_CONF, WAN};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::Ordering;

fn sluice(args: &[&str], sock: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .arg("--control")
        .arg(sock)
        .output()
        .expect("run sluice")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn show_queues_text_is_pfctl_like_and_repeats_with_v() {
    let d = example_daemon("queues-text");
    let out = stdout(&sluice(&["show", "queues"], &d.sock));
    assert!(
        out.contains("queue root_wan0 on wan0 bandwidth 100Kb priq { q_pri, q_def }\n"),
        "{out}"
    );
    assert!(
        out.contains("queue q_def on wan0 priority 1 qlimit 10 priq( default )\n"),
        "{out}"
    );
    assert!(out.contains("drops: queue-full 11 ]"), "{out}");
    assert!(out.contains("# lan0: no queueing"), "{out}");
    let o = sluice(&["show", "queues", "-v", "--count", "2"], &d.sock);
    let out = stdout(&o);
    assert_eq!(out.matches("queue q_def on wan0").count(), 2, "{out}");
    assert_eq!(out.matches("\n---\n").count(), 1, "{out}");
    // From the second display on, each queue of wan0 has its measured rate.
    assert_eq!(
        out.matches("  [ measured: 0.0 packets/s, 0.00b/s ]\n")
            .count(),
        3,
        "{out}"
    );
}

#[test]
fn show_rules_states_and_info() {
    let d = example_daemon("rules");
    let rules = stdout(&sluice(&["show", "rules"], &d.sock));
    assert!(
        rules.starts_with("@0 pass out on wan0 proto tcp all flags S/SA queue (q_def, q_pri)\n"),
        "{rules}"
    );
    let first = rules.lines().nth(1).unwrap();
    assert!(first.contains("States: 1 "), "{first}");
    assert!(rules.contains("Line: 5 ]"), "{rules}");
    assert!(rules.contains("@1 pass out on wan0 proto udp"), "{rules}");

    let states = stdout(&sluice(&["show", "states"], &d.sock));
    assert!(
        states.contains("all tcp 10.0.0.2:40000 -> 192.0.2.1:80       SYN_SENT:CLOSED\n"),
        "{states}"
    );
    assert!(
        states.contains("queue (q_def, q_pri), age 00:00:"),
        "{states}"
    );
    assert!(states.contains("1:0 pkts"), "{states}");

    let info = stdout(&sluice(&["show", "info"], &d.sock));
    assert!(
        info.contains("Bridge: lan0 (lan) <-> wan0 (wan)    I/O: test"),
        "{info}"
    );
    assert!(
        info.contains(&format!("pid {}", std::process::id())),
        "{info}"
    );
    let rx = info
        .lines()
        .find(|l| l.contains("received packets"))
        .unwrap();
    let nums: Vec<u64> = rx
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums, vec![21, 0], "{rx}");
    let qf = info.lines().find(|l| l.contains("queue-full")).unwrap();
    let nums: Vec<u64> = qf
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums, vec![0, 11], "{qf}");
    assert!(info.contains("rx_ring_drops"), "{info}");

    let json = stdout(&sluice(&["show", "info", "--json"], &d.sock));
    let Reply::Info(i) = serde_json::from_str(&json).unwrap() else {
        panic!("{json}")
    };
    assert_eq!(i.counters[LAN].rx_packets, 21);
    // One TCP state and one per datagram (UDP pass rules keep state).
    assert_eq!(i.states, 21);
    assert_eq!(i.io, vec![("rx_ring_drops".to_string(), 3)]);
}

#[test]
fn bad_reload_is_refused_and_good_one_swaps() {
    // What the engine does is tested in crates/control; here, what the
    // commands print.
    let d = example_daemon("reload");
    let bad = d.dir.join("bad.conf");
    std::fs::write(&bad, BAD_CONF).unwrap();
    let o = sluice(&["reload", "-f", bad.to_str().unwrap()], &d.sock);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    // The diagnostics of `sluice check`, pointing into the file.
    let check = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "-D", "ext_if=wan0"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(err, String::from_utf8_lossy(&check.stderr), "{err}");
    assert!(err.contains("bad.conf:2"), "{err}");

    let good = d.dir.join("new.conf");
    std::fs::write(&good, NEW_CONF).unwrap();
    let queued = d.state.engine.lock().unwrap().queued(WAN) as u64;
    let out = stdout(&sluice(&["reload", "-f", good.to_str().unwrap()], &d.sock));
    // Every resident packet was in q_def or q_pri, both still there.
    assert_eq!(
        out,
        format!(
            "reloaded {}: {queued} packets kept, 0 dropped\n",
            good.display()
        )
    );
    assert_eq!(d.wakes.load(Ordering::SeqCst), 1);
    let rep = d.state.engine.lock().unwrap().report();
    assert!(rep[WAN].class("q_new").is_some());
    assert_eq!(d.state.engine.lock().unwrap().queued(WAN) as u64, queued);
    let rules = stdout(&sluice(&["show", "rules"], &d.sock));
    assert!(
        rules.starts_with("@0 pass out on wan0 proto udp all queue q_def\n"),
        "{rules}"
    );
    // The TCP state was created by the old rule set: not counted for the new @0.
    assert!(
        rules.lines().nth(1).unwrap().contains("States: 0 "),
        "{rules}"
    );
    let states = stdout(&sluice(&["show", "states"], &d.sock));
    assert!(states.contains(" bytes, rule -\n"), "{states}");
    // A connection after the reload is the new @0's.
    d.receive_udp(Ipv4Addr::new(10, 0, 0, 3), 7000, 53, 100);
    let rules = stdout(&sluice(&["show", "rules"], &d.sock));
    assert!(
        rules.lines().nth(1).unwrap().contains("States: 1 "),
        "{rules}"
    );
    let states = stdout(&sluice(&["show", "states"], &d.sock));
    let mut lines = states.lines();
    lines
        .by_ref()
        .find(|l| *l == "all udp 10.0.0.3:7000 -> 192.0.2.1:53       SINGLE:NO_TRAFFIC")
        .unwrap_or_else(|| panic!("{states}"));
    let detail = lines.next().unwrap();
    // Age and expiry depend on how fast the test runs; the rest does not.
    assert!(detail.starts_with("   queue q_def, age 00:00:"), "{detail}");
    assert!(
        detail.ends_with(", 1:0 pkts, 128:0 bytes, rule 0"),
        "{detail}"
    );
    let info = stdout(&sluice(&["show", "info"], &d.sock));
    assert!(
        info.contains(&format!("Config: {}", good.display())),
        "{info}"
    );
    // Without -f: the daemon's own file again.
    let out = stdout(&sluice(&["reload"], &d.sock));
    assert!(out.contains("pf.conf:"), "{out}");
}

#[test]
fn stop_sets_the_flag_wakes_and_removes_the_socket() {
    let mut d = example_daemon("stop");
    let out = stdout(&sluice(&["stop"], &d.sock));
    assert_eq!(out, "sluice is stopping\n");
    assert!(d.state.stop.load(Ordering::SeqCst));
    assert_eq!(d.wakes.load(Ordering::SeqCst), 1);
    d.handle.take().unwrap().join().unwrap();
    assert!(!d.sock.exists());
    let o = sluice(&["show", "info"], &d.sock);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is `sluice run` running? (no such socket)"),
        "{err}"
    );
}

#[test]
fn non_root_peers_are_refused() {
    // Needs root to switch to `nobody`; CI and the dev machines run as root.
    if !sluice_testkit::require_root(&["setpriv"]) {
        return;
    }
    let d = example_daemon("peer");
    // The tree must be traversable for `nobody` to reach the socket at all.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&d.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = || {
        Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_sluice"))
            .args(["show", "info", "--control"])
            .arg(&d.sock)
            .output()
            .unwrap()
    };
    // Mode 0600: the kernel refuses the connect.
    let o = as_nobody();
    if String::from_utf8_lossy(&o.stderr).contains("cannot execute") {
        sluice_testkit::unavailable(
            "the sluice binary is not executable by nobody",
            "make the target directory readable and traversable by others (chmod o+rx)",
        );
        return;
    }
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("(permission denied: run as root)"), "{err}");
    // Even with the mode opened up, SO_PEERCRED refuses the peer.
    std::fs::set_permissions(&d.sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = as_nobody();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("control socket is for root only"), "{err}");
    // And root still gets through.
    assert!(stdout(&sluice(&["show", "info"], &d.sock)).starts_with("Status:"));
}
