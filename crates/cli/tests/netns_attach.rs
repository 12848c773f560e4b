//! `sluice run --attach IF` on a router (issue #38): sluice between one
//! interface of a NAT router and the router's own stack, on the router
//! itself (`sluice_testkit::router`: two LAN clients behind a switch, the
//! router's `lan0` a port of its bridge `br-lan`, masquerade on `wan0`, a
//! modem at 20 Mbit/s with a big FIFO, a server behind it).
//!
//! What is proved: with `--attach lan0` both directions are shaped to the
//! configured rate, the light host (1 flow against 16) keeps its half with
//! host isolation, the router still answers on its LAN address; with
//! `--attach wan0` the masquerade rule naming `wan0` still applies (the
//! host end took the name), and with `--nat` the light host keeps its
//! half on the WAN side too (conntrack's original addresses). The router's configuration as data
//! (`ip -j addr`, `ip -j route show table all`, `bridge -j link`) is the
//! same as before after every way out: a clean stop, a refused
//! configuration, a failure injected half-way through the set-up
//! (`SLUICE_ATTACH_FAIL_AFTER`, test-only), and SIGKILL followed by
//! `sluice on-exit --attach IF`; and after each the LAN reaches the server.
//! After a SIGKILL the next `run --attach` gives IF back before attaching
//! it again, and `--dry-run` refuses rather than plan over it.
//!
//! Needs root, `ip`, `ethtool`, `ping`, `tc`, `nft`, `bridge`, and for the
//! rates `iperf3`, `ss` (scripts/setup.sh); otherwise each test prints a
//! SKIP line and returns, or fails under `SLUICE_REQUIRE_NETNS=1`.

use sluice_lab::iperf3::{self, ClientOptions, Iperf3Result};
use sluice_testkit::router::{
    NetState, RouterLab, LAN_IF, ROUTER_LAN_IP, SERVER_IP, SHAPER, WAN_IF,
};
use sluice_testkit::{require_netns, Sluice};
use std::time::Duration;

const TOOLS: &[&str] = &["tc", "nft", "bridge"];
/// The shaper's rate each way, under the modem's 20 Mbit/s.
const RATE_BPS: f64 = 8e6;
/// Payload per 1514-byte frame (TCP with timestamps): what iperf3 counts
/// of what the shaper charges.
const PAYLOAD_PER_FRAME: f64 = 1448.0 / 1514.0;
/// The light host's least share with host isolation (of two hosts).
const LIGHT_SHARE: f64 = 0.45;
const DAD_WAIT: Duration = Duration::from_secs(5);

fn new_lab(tag: &str) -> RouterLab {
    RouterLab::new(tag, "20mbit").expect("building the router's namespaces")
}

fn state(lab: &RouterLab) -> NetState {
    lab.state(DAD_WAIT)
        .expect("reading the router's configuration")
}

/// Everything that must hold once the router is itself again.
fn assert_restored(lab: &RouterLab, before: &NetState, how: &str) {
    let after = state(lab);
    assert_eq!(
        before.links,
        after.links,
        "ip -j addr after {how}\n{}",
        lab.log()
    );
    assert_eq!(before.routes, after.routes, "ip -j route after {how}");
    assert_eq!(before.bridge, after.bridge, "bridge -j link after {how}");
    assert_eq!(
        before.neighs, after.neighs,
        "permanent neighbours after {how}"
    );
    assert_eq!(
        lab.attach_state(LAN_IF),
        None,
        "state file left after {how}"
    );
    for c in &lab.clients {
        assert!(
            lab.reaches(c, SERVER_IP, 5),
            "{} cannot reach the server after {how}",
            c.name()
        );
    }
}

/// Both clients and the router's LAN address answer through sluice.
fn assert_forwards(lab: &RouterLab) {
    for c in &lab.clients {
        assert!(
            lab.reaches(c, ROUTER_LAN_IP, 5),
            "router's LAN address\n{}",
            lab.log()
        );
        assert!(lab.reaches(c, SERVER_IP, 5), "the server\n{}", lab.log());
    }
}

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

#[test]
fn attach_refused_configuration_changes_nothing() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let mut lab = new_lab("atr");
    let before = state(&lab);
    let conf = lab.write_conf("queue nonsense\n").unwrap();
    let ctl = lab.control_path();
    let out = lab
        .sluice_cmd(
            &b,
            &["run", "-f", &conf, "--attach", LAN_IF, "--control", &ctl],
        )
        .unwrap();
    assert!(!out.status.success(), "a bad file must not start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid configuration"), "{err}");
    assert_restored(&lab, &before, "a refused configuration");
    lab.sluice = None;
}

#[test]
fn attach_dry_run_prints_the_plan_and_changes_nothing() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let lab = new_lab("atd");
    let before = state(&lab);
    let conf = lab.write_conf(SHAPER).unwrap();
    let out = lab
        .sluice_cmd(&b, &["run", "-f", &conf, "--attach", LAN_IF, "--dry-run"])
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("--attach {LAN_IF} would do")),
        "{text}"
    );
    assert!(
        text.contains("nomaster") && text.contains("add veth lan0"),
        "{text}"
    );
    assert_restored(&lab, &before, "--dry-run");
}

/// The number of steps `--dry-run` lists for `--attach ifname`.
fn plan_len(lab: &RouterLab, b: &str, conf: &str, ifname: &str) -> usize {
    let out = lab
        .sluice_cmd(b, &["run", "-f", conf, "--attach", ifname, "--dry-run"])
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .count()
}

#[test]
fn attach_failure_half_way_is_rolled_back() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let lab = new_lab("atf");
    let before = state(&lab);
    let conf = lab.write_conf(SHAPER).unwrap();
    let ctl = lab.control_path();
    for (ifname, side) in [(LAN_IF, "lan"), (WAN_IF, "wan")] {
        let n = plan_len(&lab, &b, &conf, ifname);
        // LAN: a bridge port (release, join); WAN: addresses, routes, a
        // static neighbour.
        assert!(n >= 10, "the {ifname} plan has {n} steps");
        // After nothing, after the first deletions, a third, half, two
        // thirds of the way, before the last step.
        for k in [0, 3, n / 3, n / 2, 2 * n / 3, n - 1] {
            let env = format!("SLUICE_ATTACH_FAIL_AFTER={k}");
            let args = [
                env.as_str(),
                &b,
                "run",
                "-f",
                &conf,
                "--attach",
                ifname,
                "--attach-side",
                side,
                "--control",
                &ctl,
            ];
            let out = lab.sluice_cmd("env", &args).unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{ifname} step {k}: {err}");
            assert!(
                err.contains("injected failure") && err.contains("rolled back"),
                "{ifname} step {k}: {err}"
            );
            assert_restored(
                &lab,
                &before,
                &format!("{ifname}: a failure after step {k}"),
            );
        }
    }
}

#[test]
fn attach_restored_by_a_clean_stop_and_wan_nat_keeps_working() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let mut lab = new_lab("atw");
    let before = state(&lab);
    // WAN: the masquerade rule names wan0, which the host end now is.
    let id = lab.start_sluice(&b, SHAPER, &["--attach", WAN_IF, "--attach-side", "wan"]);
    let attached = state(&lab);
    assert_ne!(attached.links, before.links, "nothing was attached");
    assert!(
        attached
            .neighs
            .iter()
            .any(|n| n.contains("10.81.2.99") && n.contains("\"dev\":\"wan0\"")),
        "the static neighbour moves to the host end wan0: {:?}",
        attached.neighs
    );
    assert_forwards(&lab);
    lab.stop_sluice(id);
    assert_eq!(lab.attach_state(WAN_IF), None);
    assert_restored(&lab, &before, "a clean stop (WAN)");
    // LAN, stopped by `sluice stop`.
    let id = lab.start_sluice(&b, SHAPER, &["--attach", LAN_IF]);
    assert_forwards(&lab);
    let ctl = lab.control_path();
    let out = lab.sluice_cmd(&b, &["stop", "--control", &ctl]).unwrap();
    assert!(out.status.success());
    let st = lab.topo.wait(id, Duration::from_secs(10)).unwrap();
    assert!(st.is_some_and(|s| s.success()), "{st:?}\n{}", lab.log());
    assert_restored(&lab, &before, "sluice stop (LAN)");
}

#[test]
fn attach_restored_after_sigkill_by_the_next_run_and_by_on_exit() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let mut lab = new_lab("atk");
    let before = state(&lab);
    let id = lab.start_sluice(&b, SHAPER, &["--attach", LAN_IF]);
    assert_forwards(&lab);
    lab.topo.stop(id, "KILL").unwrap();
    assert!(
        lab.attach_state(LAN_IF).is_some(),
        "the state file is the undo"
    );
    let attached = state(&lab);
    assert_ne!(
        attached.links, before.links,
        "a killed sluice restores nothing"
    );
    // A dry run refuses to plan over a left attachment, changing nothing.
    let conf = lab.write_conf(SHAPER).unwrap();
    let out = lab
        .sluice_cmd(&b, &["run", "-f", &conf, "--attach", LAN_IF, "--dry-run"])
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("attached already"),
        "{err}"
    );
    assert_eq!(
        state(&lab).links,
        attached.links,
        "--dry-run changed something"
    );
    // The next run gives IF back first, then attaches it again.
    let id = lab.start_sluice(&b, SHAPER, &["--attach", LAN_IF, "-v"]);
    assert!(
        lab.log()
            .contains("left attached by an earlier sluice: given back"),
        "{}",
        lab.log()
    );
    assert_forwards(&lab);
    lab.topo.stop(id, "KILL").unwrap();
    lab.sluice = None;
    for round in ["restores", "has nothing left to do"] {
        let out = lab
            .sluice_cmd(&b, &["on-exit", "--attach", LAN_IF])
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "on-exit {round}: {err}");
        if round == "restores" {
            assert!(err.contains("given back as it was"), "{err}");
        } else {
            assert!(err.contains("nothing attached"), "{err}");
        }
        assert_restored(&lab, &before, &format!("SIGKILL and on-exit ({round})"));
    }
}

/// One iperf3 run, one flow, client `client` → the server (or back with
/// `reverse`), 6 s less the first.
fn iperf(lab: &mut RouterLab, client: usize, reverse: bool, port: u16) -> Iperf3Result {
    let srv = lab.server.clone();
    iperf3::server(&mut lab.topo, &srv, port).expect("iperf3 server");
    let mut o = ClientOptions::new(SERVER_IP, port);
    o.seconds = 6;
    o.omit_seconds = 1;
    o.reverse = reverse;
    iperf3::client(&lab.topo, &lab.clients[client], &o)
        .unwrap_or_else(|e| panic!("iperf3: {e}\n{}", lab.log()))
}

/// c1 with one flow and c2 with 16 at once; c1's share of the goodput.
fn light_share(lab: &mut RouterLab, reverse: bool, port: u16) -> f64 {
    let srv = lab.server.clone();
    iperf3::server(&mut lab.topo, &srv, port).expect("iperf3 server");
    iperf3::server(&mut lab.topo, &srv, port + 1).expect("iperf3 server");
    let opts = |p: u16, n: u32| {
        let mut o = ClientOptions::new(SERVER_IP, p);
        (o.seconds, o.omit_seconds, o.reverse, o.parallel) = (8, 2, reverse, n);
        o
    };
    let (light, heavy) = std::thread::scope(|s| {
        let l = s.spawn(|| iperf3::client(&lab.topo, &lab.clients[0], &opts(port, 1)));
        let h = s.spawn(|| iperf3::client(&lab.topo, &lab.clients[1], &opts(port + 1, 16)));
        (l.join().unwrap(), h.join().unwrap())
    });
    let (l, h) = (light.expect("light iperf3"), heavy.expect("heavy iperf3"));
    l.goodput_bps / (l.goodput_bps + h.goodput_bps)
}

#[test]
fn attach_lan_shapes_both_ways_and_isolates_hosts() {
    let Some(_serial) = require_netns(&["tc", "nft", "bridge", "iperf3", "ss"]) else {
        return;
    };
    let sluice = Sluice::locate(env!("CARGO_BIN_EXE_sluice"));
    if !sluice.require_optimised("attach rate check") {
        return;
    }
    let b = sluice.path;
    let mut lab = new_lab("ats");
    let before = state(&lab);
    let id = lab.start_sluice(&b, SHAPER, &["--attach", LAN_IF]);
    assert_forwards(&lab);
    let expected = RATE_BPS * PAYLOAD_PER_FRAME;
    let mut failures = Vec::new();
    for (dir, reverse, port) in [("upload", false, 5201u16), ("download", true, 5301)] {
        let mut ratio = 0.0;
        for attempt in 0..3u16 {
            let r = iperf(&mut lab, 0, reverse, port + attempt);
            ratio = r.goodput_bps / RATE_BPS;
            eprintln!(
                "netns_attach: {dir} attempt {}: {:.3} Mbit/s, goodput/configured {ratio:.3} (expected ~{:.3})",
                attempt + 1,
                r.goodput_bps / 1e6,
                expected / RATE_BPS
            );
            if (0.90..=1.00).contains(&ratio) {
                break;
            }
        }
        if !(0.90..=1.00).contains(&ratio) {
            failures.push(format!(
                "{dir}: goodput/configured {ratio:.3} outside 0.90-1.00"
            ));
        }
        let mut share = 0.0;
        for attempt in 0..2u16 {
            share = light_share(&mut lab, reverse, port + 10 + 2 * attempt);
            eprintln!("netns_attach: {dir} light host share {share:.3} (1 flow against 16)");
            if share >= LIGHT_SHARE {
                break;
            }
        }
        if share < LIGHT_SHARE {
            failures.push(format!("{dir}: light host {share:.3} < {LIGHT_SHARE}"));
        }
    }
    assert!(
        lab.reaches(&lab.clients[0], ROUTER_LAN_IP, 3),
        "the router's LAN address under load"
    );
    lab.stop_sluice(id);
    assert_restored(&lab, &before, "a clean stop after load");
    assert!(failures.is_empty(), "{failures:#?}\n{}", lab.log());
}

/// `--attach wan0 --nat` on the masquerading router: the light host keeps
/// its half though every LAN host has the router's address on the WAN
/// (conntrack tells them apart); without `--nat` it would get ~1/17.
#[test]
fn attach_wan_with_nat_isolates_masqueraded_hosts() {
    let Some(_serial) = require_netns(&["tc", "nft", "bridge", "iperf3", "ss"]) else {
        return;
    };
    let sluice = Sluice::locate(env!("CARGO_BIN_EXE_sluice"));
    if !sluice.require_optimised("attach NAT isolation check") {
        return;
    }
    let b = sluice.path;
    let mut lab = new_lab("atn");
    let before = state(&lab);
    // Without --nat the light host measured 0.06 (per-flow fairness).
    let args = ["--attach", WAN_IF, "--attach-side", "wan", "--nat", "-v"];
    let id = lab.start_sluice(&b, SHAPER, &args);
    assert_forwards(&lab);
    let mut failures = Vec::new();
    for (dir, reverse, port) in [("upload", false, 5401u16), ("download", true, 5501)] {
        let mut share = 0.0;
        for attempt in 0..2u16 {
            share = light_share(&mut lab, reverse, port + 2 * attempt);
            eprintln!("netns_attach: NAT {dir} light host share {share:.3} (1 flow against 16)");
            if share >= LIGHT_SHARE {
                break;
            }
        }
        if share < LIGHT_SHARE {
            failures.push(format!("NAT {dir}: light host {share:.3} < {LIGHT_SHARE}"));
        }
    }
    assert!(!lab.log().contains("no conntrack"), "{}", lab.log());
    lab.stop_sluice(id);
    assert_restored(&lab, &before, "a clean stop after NAT load");
    assert!(failures.is_empty(), "{failures:#?}\n{}", lab.log());
}
