//! `sluice show health` end to end (issue #40 item 1): real kernel TCP
//! through `sluice run`. Idle, the download has not enough traffic to say;
//! then downloads behind a modem (htb at 10 Mbit/s with a FIFO of 100 full
//! frames, on the server's side, as in netns_autorate.rs) while sluice's
//! download is shaped 20 % above it, at 12 Mbit/s, with no autorate: the
//! modem's queue holds, so within 30 s of load the verdict is "not in
//! control" with a rate within 10 % of the modem's to try, and the
//! daemon logs the change.
//!
//! Needs root, `ip`, `tc`, `ping`, `iperf3`, `ss` (scripts/setup.sh);
//! otherwise SKIP, or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::{HealthJson, Reply};
use sluice_lab::{BridgeLab, SERVER_IP};
use sluice_testkit::{require_netns, Sluice};
use std::time::{Duration, Instant};

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// The download shaped at `rate`; the connections keep state (their
/// round trips are the delay signal).
fn conf(rate: &str) -> String {
    format!(
        "queue down on $int_if bandwidth {rate}\n\
         queue dl parent down bandwidth {rate} flows 1024 qlimit 1024 default\n\
         pass out on $ext_if keep state\n"
    )
}

/// The modem on the server's link (`v0` in the server's namespace):
/// 10 Mbit/s, a FIFO of 100 full frames.
fn modem(lab: &BridgeLab) {
    for cmd in [
        "tc qdisc add dev v0 root handle 1: htb default 1",
        "tc class add dev v0 parent 1: classid 1:1 htb rate 10mbit ceil 10mbit",
        "tc qdisc add dev v0 parent 1:1 handle 10: bfifo limit 151400",
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        lab.topo
            .exec(&lab.server, &args)
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
}

/// The download's entry of `show health --json`.
fn download(lab: &BridgeLab, b: &str) -> HealthJson {
    match lab.show(b, "health") {
        Ok(Reply::Health(h)) => h
            .directions
            .into_iter()
            .find(|d| d.iface == "lan0")
            .unwrap_or_else(|| panic!("no lan0 in show health\n{}", lab.log())),
        other => panic!("show health: {other:?}\n{}", lab.log()),
    }
}

#[test]
fn a_shaper_above_the_modem_is_not_in_control() {
    let Some(_serial) = require_netns(&["ip", "tc", "ping", "iperf3", "ss"]) else {
        return;
    };
    let mut lab = BridgeLab::new("hl").expect("namespaces");
    let b = bin();
    modem(&lab);
    lab.start_sluice(&b, &conf("12M"), &["-v"])
        .unwrap_or_else(|e| panic!("{e}"));

    // Idle: nothing to judge.
    std::thread::sleep(Duration::from_secs(1));
    let idle = download(&lab, &b);
    assert_eq!(
        (idle.direction.as_str(), idle.verdict.as_str()),
        ("download", "not-enough-traffic"),
        "{idle:?}"
    );
    assert_eq!(idle.rate_bps, 12_000_000, "{idle:?}");
    let text = lab.ctl(&b, &["show", "health"]).expect("show health");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains("download (lan0): not enough traffic to say"),
        "{text}"
    );

    // Loaded: four downloads, polled once a second for at most 30 s.
    let (verdict, seen, took) = under_load(&mut lab, &b, 5331, |d| d.verdict == "not-in-control");
    let text = lab.ctl(&b, &["show", "health"]).expect("show health");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    // The log collector's last round runs after the stop.
    lab.stop_sluice().expect("stop");
    let log = lab.log();
    eprintln!(
        "netns_health: {} after {:.1} s\n{}\n{text}",
        verdict.text,
        took.as_secs_f64(),
        seen.join("\n")
    );
    assert_eq!(
        verdict.verdict,
        "not-in-control",
        "not within 30 s of load:\n{}\n{log}",
        seen.join("\n")
    );
    let suggested = verdict.suggested_bps.expect("a rate to try") as f64;
    assert!(
        (9e6..=11e6).contains(&suggested),
        "suggested {:.2} Mbit/s, the modem's 10",
        suggested / 1e6
    );
    assert!(
        text.contains("download (lan0): not in control") && text.contains("try `bandwidth "),
        "{text}"
    );
    assert!(
        log.contains("health of lan0: not in control"),
        "the change is logged:\n{log}"
    );
}

/// Four downloads through the lab, `show health` polled once a second
/// until `done` says so or 30 s passed: the last download entry, what each
/// poll saw, and the time of load it took. The load is stopped after.
fn under_load(
    lab: &mut BridgeLab,
    b: &str,
    port: u16,
    done: impl Fn(&HealthJson) -> bool,
) -> (HealthJson, Vec<String>, Duration) {
    let server = lab.server.clone();
    let client = lab.client.clone();
    let p = port.to_string();
    let srv = sluice_lab::iperf3::server(&mut lab.topo, &server, port).expect("iperf3 server");
    let load = lab
        .topo
        .spawn(
            &client,
            &[
                "iperf3", "-c", SERVER_IP, "-p", &p, "-t", "35", "-R", "-P", "4",
            ],
            None,
        )
        .expect("iperf3 client");
    let t0 = Instant::now();
    let mut seen = Vec::new();
    let last = loop {
        std::thread::sleep(Duration::from_secs(1));
        let d = download(lab, b);
        seen.push(format!(
            "{:>4.1} s: {} loaded {:.1} s, output {:.2} Mbit/s, beyond p50 {:?}, grade {:?}",
            t0.elapsed().as_secs_f64(),
            d.verdict,
            d.loaded_ns as f64 / 1e9,
            d.output_bps as f64 / 1e6,
            d.beyond.minute.p50_ns.map(|n| n as f64 / 1e6),
            d.grade
        ));
        if done(&d) || t0.elapsed() >= Duration::from_secs(30) {
            break d;
        }
    };
    let took = t0.elapsed();
    let _ = lab.topo.stop(load, "TERM");
    let _ = lab.topo.stop(srv, "TERM");
    (last, seen, took)
}

/// The same modem with the download shaped at 90 % of it: sluice holds
/// the queue, so the verdict is "in control". A download's shaper sits
/// after the modem: at 95 % the modem's queue still stood (about 22 ms:
/// "not in control", with 9.5 Mbit/s measured to try), and the grade's
/// minute includes the slow start that filled the modem before the
/// downloads slowed (about 100 ms for 3 s: grade B), so neither the 95 %
/// case nor the grade is asserted here.
#[test]
fn a_shaper_below_the_modem_is_in_control() {
    let Some(_serial) = require_netns(&["ip", "tc", "ping", "iperf3", "ss"]) else {
        return;
    };
    let mut lab = BridgeLab::new("hi").expect("namespaces");
    let b = bin();
    modem(&lab);
    lab.start_sluice(&b, &conf("9M"), &["-v"])
        .unwrap_or_else(|e| panic!("{e}"));
    // In control, and held 5 s: a queue grown meanwhile would have turned
    // it (the verdict reads 20 s back).
    let (verdict, seen, took) = under_load(&mut lab, &b, 5332, |d| {
        d.verdict == "in-control" && d.since_ns >= 5_000_000_000
    });
    let text = lab.ctl(&b, &["show", "health"]).expect("show health");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    lab.stop_sluice().expect("stop");
    let log = lab.log();
    eprintln!(
        "netns_health in control: {} after {:.1} s\n{}\n{text}",
        verdict.text,
        took.as_secs_f64(),
        seen.join("\n")
    );
    assert_eq!(verdict.verdict, "in-control", "{}\n{log}", seen.join("\n"));
    assert!(verdict.grade.is_some(), "{verdict:?}");
    assert!(
        text.contains("download (lan0): in control, grade "),
        "{text}"
    );
    assert!(log.contains("health of lan0: in control"), "{log}");
}
