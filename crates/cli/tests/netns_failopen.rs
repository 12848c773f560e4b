//! Fail-open or fail-closed (issue #12 item 11), with real frames between
//! network namespaces: with `run --on-exit bridge` the LAN stays online
//! after `sluice stop` (a kernel bridge forwards), and after a SIGKILL
//! once `sluice on-exit bridge` ran (what systemd's `ExecStopPost=` does); a
//! fresh `run` takes the interfaces back and forwards through sluice again.
//! With the default (`down`) nothing crosses after a stop. A bridge sluice
//! did not make is never touched: `run` and `on-exit` refuse, naming it.
//!
//! Needs root, `ip`, `ethtool`, `ping` (scripts/setup.sh); otherwise each
//! test prints a SKIP line and returns, or fails under
//! `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_lab::netns::ProcId;
use sluice_lab::BridgeLab;
use sluice_testkit::{bridge_lab, wait_for, Sluice};
use std::time::Duration;

const CONF: &str = "pass all\n";
/// Pings (1 s timeout each) a working path gets to answer once: the
/// kernel bridge forwards as soon as its ports are up (no STP).
const PINGS: u32 = 5;
/// How long a stop or a refusal may take.
const EXIT_WAIT: Duration = Duration::from_secs(5);

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// How many of `n` pings client → server crossed.
fn pings(lab: &BridgeLab, n: u32) -> u32 {
    (0..n).filter(|_| lab.ping_once()).count() as u32
}

/// True once a ping crosses, within [`PINGS`] tries.
fn path_open(lab: &BridgeLab) -> bool {
    (0..PINGS).any(|_| lab.ping_once())
}

/// The master of `dev` in the shaper namespace (`ip -o link`: `master X`).
fn master(lab: &BridgeLab, dev: &str) -> Option<String> {
    let out = lab
        .topo
        .ip(&lab.shaper, &["-o", "link", "show", "dev", dev])
        .unwrap_or_else(|e| panic!("ip link show {dev}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    words.find(|w| *w == "master")?;
    words.next().map(String::from)
}

/// The bridges of the shaper namespace, by name.
fn bridges(lab: &BridgeLab) -> Vec<String> {
    let out = lab
        .topo
        .ip(&lab.shaper, &["-o", "link", "show", "type", "bridge"])
        .expect("ip link show type bridge");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
        .collect()
}

/// `sluice on-exit ARGS… --bridge lan0,wan0` in the shaper namespace.
fn on_exit(lab: &BridgeLab, b: &str, mode: &str) -> std::process::Output {
    lab.topo
        .exec_unchecked(&lab.shaper, &[b, "on-exit", mode, "--bridge", "lan0,wan0"])
        .expect("sluice on-exit")
}

/// Starts sluice (`extra` arguments), waits until it answers on its
/// control socket (it has taken the interfaces back by then), and checks
/// that the path runs through sluice: no bridge left, and a ping counted.
fn start_and_check_it_forwards(lab: &mut BridgeLab, b: &str, extra: &[&str]) -> ProcId {
    let id = lab
        .start_sluice(b, CONF, extra)
        .unwrap_or_else(|e| panic!("run {extra:?}: {e}"));
    assert!(
        wait_for(EXIT_WAIT, || lab.info(b).is_ok()),
        "sluice never answered:\n{}",
        lab.log()
    );
    assert_eq!(
        master(lab, "lan0"),
        None,
        "run took lan0 back:\n{}",
        lab.log()
    );
    assert_eq!(master(lab, "wan0"), None, "run took wan0 back");
    assert_eq!(bridges(lab), Vec::<String>::new(), "the bridge is deleted");
    let rx = lab.io_counter(b, "lan0_rx_frames").expect("lan0_rx_frames");
    assert!(path_open(lab), "no ping through sluice:\n{}", lab.log());
    let rx2 = lab.io_counter(b, "lan0_rx_frames").expect("lan0_rx_frames");
    assert!(rx2 > rx, "the pings crossed sluice (lan0 rx {rx} -> {rx2})");
    id
}

#[test]
fn on_exit_bridge_keeps_the_lan_online_and_run_takes_it_back() {
    let Some((_serial, mut lab)) = bridge_lab("fo", &[]) else {
        return;
    };
    let b = bin();

    // 1. A clean stop (`sluice stop`) hands the interfaces to a bridge.
    let id = lab
        .start_sluice(&b, CONF, &["--on-exit", "bridge"])
        .unwrap_or_else(|e| panic!("run --on-exit bridge: {e}"));
    // While it runs, `on-exit` refuses (its interface locks, not its
    // control socket, say that it runs).
    let early = on_exit(&lab, &b, "bridge");
    let said = String::from_utf8_lossy(&early.stderr);
    assert!(
        !early.status.success() && said.contains("already bridged by another sluice"),
        "on-exit beside a running sluice: {early:?}"
    );
    assert_eq!(
        master(&lab, "lan0"),
        None,
        "on-exit made no bridge beside sluice"
    );
    let out = lab.ctl(&b, &["stop"]).expect("sluice stop");
    assert!(out.status.success(), "sluice stop: {out:?}");
    let st = lab.topo.wait(id, EXIT_WAIT).unwrap();
    assert!(
        st.is_some_and(|s| s.success()),
        "a clean stop: {st:?}\n{}",
        lab.log()
    );
    let after_stop = pings(&lab, 3);
    let br = master(&lab, "lan0");
    eprintln!("netns_failopen: --on-exit bridge, after `sluice stop`: {after_stop}/3 pings, lan0 master {br:?}");
    assert!(
        br.as_deref().is_some_and(|m| m.starts_with("sluice-br")),
        "lan0 in sluice's bridge: {br:?}\n{}",
        lab.log()
    );
    assert_eq!(master(&lab, "wan0"), br, "wan0 in the same bridge");
    assert!(
        after_stop >= 2,
        "the LAN stays online after stop:\n{}",
        lab.log()
    );
    assert!(
        lab.log().contains("handed to the kernel bridge"),
        "the hand-over is logged:\n{}",
        lab.log()
    );

    // 2. A fresh run takes them back and forwards itself; on the packet
    //    socket path too, and SIGTERM hands them over as `stop` did.
    start_and_check_it_forwards(&mut lab, &b, &["--on-exit", "bridge", "--io", "ring"]);
    let st = lab.stop_sluice().unwrap();
    assert!(st.is_some_and(|s| s.success()), "{}", lab.log());
    let after_term = pings(&lab, 3);
    eprintln!("netns_failopen: --on-exit bridge --io ring, after SIGTERM: {after_term}/3 pings");
    assert!(after_term >= 2, "the LAN stays online after SIGTERM");
    assert!(master(&lab, "lan0").is_some_and(|m| m.starts_with("sluice-br")));
    let id = start_and_check_it_forwards(&mut lab, &b, &["--on-exit", "bridge"]);

    // 3. SIGKILL: nothing forwards, until `sluice on-exit bridge` runs.
    lab.topo.signal(id, "KILL").expect("kill -KILL");
    assert!(wait_for(EXIT_WAIT, || !lab.sluice_alive()), "SIGKILL");
    let killed = pings(&lab, 2);
    let out = on_exit(&lab, &b, "bridge");
    let after_cmd = pings(&lab, 3);
    eprintln!(
        "netns_failopen: after SIGKILL: {killed}/2 pings; after `sluice on-exit bridge`: \
         {after_cmd}/3 pings ({})",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    assert_eq!(killed, 0, "a killed sluice forwards nothing by itself");
    assert!(out.status.success(), "on-exit bridge: {out:?}");
    assert!(after_cmd >= 2, "on-exit bridge put the LAN back online");
    // Idempotent: systemd's ExecStopPost= also runs after a clean exit.
    let again = on_exit(&lab, &b, "bridge");
    assert!(
        again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already"),
        "a second on-exit bridge is a no-op: {again:?}"
    );
    assert_eq!(bridges(&lab).len(), 1, "one bridge, not two");

    // 4. Taken back again; with the default mode a stop leaves it offline.
    start_and_check_it_forwards(&mut lab, &b, &[]);
    let st = lab.stop_sluice().unwrap();
    assert!(st.is_some_and(|s| s.success()), "{}", lab.log());
    let closed = pings(&lab, 2);
    eprintln!("netns_failopen: --on-exit down (default), after SIGTERM: {closed}/2 pings");
    assert_eq!(closed, 0, "fail-closed: nothing forwards after stop");
    assert!(bridges(&lab).is_empty());
}

#[test]
fn a_bridge_sluice_did_not_make_is_left_alone() {
    let Some((_serial, mut lab)) = bridge_lab("fn", &[]) else {
        return;
    };
    let b = bin();
    let ip = |args: &[&str]| {
        lab.topo
            .ip(&lab.shaper, args)
            .unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
    };
    ip(&["link", "add", "br-home", "type", "bridge"]);
    ip(&["link", "set", "lan0", "master", "br-home"]);
    ip(&["link", "set", "br-home", "up"]);

    // on-exit, either mode, refuses and changes nothing.
    for mode in ["bridge", "down"] {
        let out = on_exit(&lab, &b, mode);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("lan0 is a port of br-home"),
            "on-exit {mode} on a foreign bridge: {out:?}"
        );
    }
    assert_eq!(bridges(&lab), vec!["br-home".to_string()]);

    // run refuses at start (the ping of start_sluice may cross br-home
    // or not: what counts is that sluice exits, naming the bridge).
    let _ = lab.start_sluice(&b, CONF, &["--on-exit", "bridge"]);
    assert!(
        wait_for(EXIT_WAIT, || !lab.sluice_alive()),
        "sluice runs on a port of a foreign bridge:\n{}",
        lab.log()
    );
    let log = lab.log();
    eprintln!(
        "netns_failopen: run with lan0 in br-home: {}",
        log.lines().last().unwrap_or("")
    );
    assert!(
        log.contains("lan0 is a port of br-home"),
        "the error names the bridge:\n{log}"
    );
    assert_eq!(
        master(&lab, "lan0").as_deref(),
        Some("br-home"),
        "untouched"
    );
    assert_eq!(bridges(&lab), vec!["br-home".to_string()], "no bridge made");
}
