//! Rate accuracy end to end: real kernel TCP (iperf3, CUBIC) through
//! `sluice run` between network namespaces.
//!
//! Topology (names unique per pid and counter, see sluice-lab):
//!   client ns  c0 ── lan0  shaper ns (sluice --bridge lan0,wan0)  wan0 ── v0  server ns
//!   10.77.0.1/24                                                     10.77.0.2/24
//! Upload (client → server) leaves through wan0 = $ext_if, shaped by HFSC;
//! download (`iperf3 -R`) leaves through lan0 = $int_if, shaped by PRIQ.
//!
//! Expected goodput = rate × 1448 / 1514: every full-sized frame is 1514
//! bytes on the interface (14 Ethernet + 20 IPv4 + 32 TCP with timestamps +
//! 1448 payload), which is what the shaper charges; iperf3 reports payload.
//! The first second (slow start filling the queue) is omitted with `-O 1`,
//! then 5 s are measured. The iperf3 server always runs on the receiving
//! side (download = server in the client namespace), so its count ends only
//! when the client's end message, queued behind the data, arrives: nothing
//! a deep queue still holds (600 ms at 1 Mbit/s) is missed, which `-R`
//! would. Goodput = the receiving server's `end.sum_received`. Bound: 3 %.
//!
//! At 100 Mbit/s the test, not the shaper, is CPU-bound on a 2-core CI
//! machine: the iperf3 sender, both kernels' softirqs and sluice share two
//! cores, and a second in which another job takes one shows as a receiver
//! interval at 65–90 Mbit/s (a run-wide figure 4–15 % low with the shaper's
//! rate untouched). There the figure is the higher of the run's goodput and
//! its best three consecutive seconds: a shaper that is slow by more than
//! the bound is slow in every second and still fails, one that is fast
//! fails on the same figure, and up to two stalled seconds of five pass.
//!
//! 10 Mbit/s runs once per I/O path (`--io xdp`, `ring`, `mmsg`), each
//! checking with `show info` that the path asked for is the one that runs.
//!
//! Needs root, `ip`, `ethtool`, `ping`, `ss`, `iperf3` (scripts/setup.sh);
//! otherwise each test prints a SKIP line and returns, or fails under
//! `SLUICE_REQUIRE_NETNS=1` (sluice-testkit). The 100 Mbit/s case needs an
//! optimised sluice: a debug build SKIPs (fails under the same rule) unless
//! SLUICE_BIN points at a release binary, as scripts/test.sh does.

use sluice_lab::iperf3::{self, ClientOptions};
use sluice_lab::{BridgeLab, CLIENT_IP, SERVER_IP};
use sluice_testkit::{require_io, require_netns, wait_for, Sluice};
use std::time::Duration;

const PAYLOAD_PER_FRAME: f64 = 1448.0 / 1514.0;
const TOLERANCE: f64 = 0.03;

fn sluice() -> Sluice {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice"))
}

fn config(rate: &str) -> String {
    format!(
        "altq on $ext_if hfsc bandwidth {rate} queue {{ up_bulk }}\n\
         queue up_bulk bandwidth 100% hfsc(default linkshare 100% upperlimit 100%)\n\
         altq on $int_if priq bandwidth {rate} queue {{ dn_ack, dn_bulk }}\n\
         queue dn_ack priority 7\n\
         queue dn_bulk priority 1 priq(default)\n\
         pass out on $int_if proto tcp keep state queue (dn_bulk, dn_ack)\n\
         pass out on $ext_if keep state queue up_bulk\n"
    )
}

fn check(what: &str, rate_bps: f64, got_bps: f64) -> Result<(), String> {
    let want = rate_bps * PAYLOAD_PER_FRAME;
    let err = (got_bps - want) / want;
    eprintln!(
        "netns_rate: {what}: goodput {:.3} Mbit/s, expected {:.3} Mbit/s, error {:+.2} %",
        got_bps / 1e6,
        want / 1e6,
        err * 100.0
    );
    if err.abs() <= TOLERANCE {
        Ok(())
    } else {
        Err(format!(
            "{what}: goodput {got_bps:.0} bit/s is {:+.2} % off {want:.0} (bound ±3 %)",
            err * 100.0
        ))
    }
}

/// Payload bit/s over the best `n` consecutive whole receiver intervals
/// (a final fragment of the run, under half a second, is left out).
fn best_window_bps(intervals: &[(f64, f64)], n: usize) -> Option<f64> {
    let whole: Vec<&(f64, f64)> = intervals.iter().filter(|(s, _)| *s >= 0.5).collect();
    whole
        .windows(n)
        .map(|w| {
            let secs: f64 = w.iter().map(|(s, _)| s).sum();
            let bits: f64 = w.iter().map(|(s, b)| s * b).sum();
            bits / secs
        })
        .reduce(f64::max)
}

/// The goodput judged: the run's, or at a CPU-bound rate the higher of that
/// and the best three seconds (see the module comment).
fn judged_bps(r: &iperf3::Iperf3Result, cpu_bound: bool) -> f64 {
    match best_window_bps(&r.receiver_intervals, 3) {
        Some(w) if cpu_bound => w.max(r.goodput_bps),
        _ => r.goodput_bps,
    }
}

/// `io`: a `--io` method for sluice, which must be the one that runs
/// (else SKIP where the kernel refused it, a failure under CI).
/// `needs_release`: the 100 Mbit/s case, which needs an optimised sluice
/// and is the one judged on its best three seconds (module comment).
fn rate_case(rate: &str, rate_bps: f64, needs_release: bool, io: Option<&str>) {
    let Some(_serial) = require_netns(&["iperf3", "ss"]) else {
        return;
    };
    let sluice = sluice();
    if needs_release && !sluice.require_optimised(&format!("{rate} rate check")) {
        return;
    }
    let bin = sluice.path;
    let mut lab = BridgeLab::new("rate").expect("building the namespaces");
    let log = lab.log_path();
    let show_log = || std::fs::read_to_string(&log).unwrap_or_default();
    // Waits until a ping crosses; fails if sluice exits first.
    let mut args = vec!["-vv"];
    if let Some(m) = io {
        args.extend(["--io", m]);
    }
    lab.start_sluice(&bin, &config(rate), &args)
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(m) = io {
        if !require_io(&lab, &bin, m) {
            return;
        }
    }
    let client = lab.client.clone();

    let mut failures = Vec::new();
    let server = lab.server.clone();
    let runs = [
        ("upload", &client, &server, SERVER_IP, 5201u16),
        ("download", &server, &client, CLIENT_IP, 5202),
    ];
    for (dir, from, to, to_ip, port) in runs {
        // Two retries: on a shared 2-core machine another process can take
        // the shaper's core for seconds (CI, 2026-12-02: two attempts in a
        // row at 64-86 Mbit/s a second, then 95.5-95.6 in every run of the
        // same build alone). Every attempt is logged; the last must be
        // within the bound.
        let mut r = None;
        for attempt in 0..3u16 {
            iperf3::server(&mut lab.topo, to, port + 10 * attempt).expect("iperf3 server");
            let mut o = ClientOptions::new(to_ip, port + 10 * attempt);
            o.seconds = 5;
            o.omit_seconds = 1;
            let got = iperf3::client(&lab.topo, from, &o)
                .unwrap_or_else(|e| panic!("iperf3 {dir} at {rate}: {e}\n{}", show_log()));
            let iv: Vec<String> = got
                .receiver_intervals
                .iter()
                .map(|(s, b)| format!("{:.2}s@{:.3}", s, b / 1e6))
                .collect();
            eprintln!(
                "netns_rate: {rate} {dir} (attempt {}): {} retransmits, receiver intervals (Mbit/s) {}, best 3 s {:.3}, judged {}",
                attempt + 1,
                got.retransmits,
                iv.join(" "),
                best_window_bps(&got.receiver_intervals, 3).unwrap_or(0.0) / 1e6,
                if needs_release { "on the higher of run and best 3 s" } else { "on the run" }
            );
            let ok = check(
                &format!("{rate} {dir}"),
                rate_bps,
                judged_bps(&got, needs_release),
            )
            .is_ok();
            r = Some(got);
            if ok {
                break;
            }
        }
        let r = r.expect("at least one attempt");
        if let Err(e) = check(
            &format!("{rate} {dir}"),
            rate_bps,
            judged_bps(&r, needs_release),
        ) {
            failures.push(e);
        }
    }
    let st = lab.stop_sluice().unwrap();
    assert!(
        st.is_some_and(|s| s.success()),
        "sluice did not stop cleanly on SIGTERM: {st:?}\n{}",
        show_log()
    );
    assert!(failures.is_empty(), "{failures:#?}\n{}", show_log());
}

#[test]
fn rate_1mbit_both_directions() {
    rate_case("1Mb", 1e6, false, None);
}

/// 10 Mbit/s with no `--io`: whatever path sluice picks by default.
#[test]
fn rate_10mbit_both_directions() {
    rate_case("10Mb", 10e6, false, None);
}

/// The same HFSC/PRIQ check through the AF_XDP path (`--io xdp`).
#[test]
fn rate_10mbit_af_xdp_both_directions() {
    rate_case("10Mb", 10e6, false, Some("xdp"));
}

/// Through the TPACKET_V2 ring (`--io ring`).
#[test]
fn rate_10mbit_ring_both_directions() {
    rate_case("10Mb", 10e6, false, Some("ring"));
}

/// Through recvmmsg (`--io mmsg`).
#[test]
fn rate_10mbit_mmsg_both_directions() {
    rate_case("10Mb", 10e6, false, Some("mmsg"));
}

#[test]
fn rate_100mbit_both_directions() {
    rate_case("100Mb", 100e6, true, None);
}

/// The window figure of the 100 Mbit/s case, on the CI run that failed
/// before it existed: the second upload attempt's seconds (86.6 95.0 94.2
/// 90.5 92.3 Mbit/s and a 10 ms tail) judge at 93.2 Mbit/s, in the bound;
/// the first attempt's ramp (65.8 … 94.6) at 89.3, outside it; a shaper 5 %
/// fast in every second is outside it too.
#[test]
fn best_three_seconds_of_a_run() {
    let iv = |v: &[f64]| -> Vec<(f64, f64)> {
        let mut x: Vec<(f64, f64)> = v.iter().map(|m| (1.0, m * 1e6)).collect();
        x.push((0.01, 3.3e6));
        x
    };
    let w = |v: &[f64]| best_window_bps(&iv(v), 3).unwrap() / 1e6;
    let want = 100.0 * PAYLOAD_PER_FRAME;
    let stalled = w(&[86.551, 95.047, 94.207, 90.476, 92.340]);
    assert!((stalled - 93.243).abs() < 0.01, "{stalled}");
    assert!((stalled - want).abs() / want <= TOLERANCE);
    let ramp = w(&[65.758, 73.998, 83.671, 89.651, 94.565]);
    assert!((ramp - want).abs() / want > TOLERANCE, "{ramp}");
    let fast = w(&[want * 1.05; 5]);
    assert!((fast - want).abs() / want > TOLERANCE, "{fast}");
    assert_eq!(best_window_bps(&iv(&[90.0, 91.0]), 3), None);
}

/// An invalid file never starts a shaper: diagnostics, exit 1, and no
/// interface is touched (the bridge names do not even exist). Needs no root.
#[test]
fn invalid_file_exits_1_before_opening_interfaces() {
    let dir = std::env::temp_dir().join(format!("sluice-run-invalid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("bad.conf");
    std::fs::write(
        &conf,
        "altq on $ext_if hfsc bandwidth 10Mb queue { nosuch\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "-f"])
        .arg(&conf)
        .args(["--bridge", "nosuch-lan,nosuch-wan"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error"), "diagnostics rendered: {err}");
    assert!(err.contains("not starting"), "{err}");
    assert!(
        !err.contains("cannot open"),
        "interfaces must not be touched: {err}"
    );
}

/// ARP crosses; SIGHUP with an invalid file keeps the running configuration
/// and the path; SIGHUP with a valid file reloads; SIGTERM stops with exit 0.
#[test]
fn sighup_reload_refuses_invalid_and_applies_valid() {
    let Some(_serial) = require_netns(&[]) else {
        return;
    };
    let bin = sluice().path;
    let mut lab = BridgeLab::new("rate").expect("building the namespaces");
    let log = lab.log_path();
    let client = lab.client.clone();
    // Waits until a ping crosses; fails if sluice exits first.
    let sl = lab
        .start_sluice(&bin, &config("10Mb"), &["-v"])
        .unwrap_or_else(|e| panic!("{e}"));
    let conf = lab.dir.join("pf.conf");
    let show_log = || std::fs::read_to_string(&log).unwrap_or_default();
    // 5 s at most: a reload is milliseconds of work.
    let logged = |what: &str| wait_for(Duration::from_secs(5), || show_log().contains(what));
    // Non-IP frames cross too: without its static entry the client must
    // resolve the server by ARP through sluice.
    lab.topo
        .ip(&client, &["neigh", "del", SERVER_IP, "dev", "c0"])
        .unwrap();
    assert!(lab.ping_once(), "ARP did not cross sluice:\n{}", show_log());
    let neigh = lab.topo.ip(&client, &["neigh", "show", SERVER_IP]).unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
    assert!(
        neigh.contains("lladdr") && !neigh.contains("PERMANENT"),
        "server not learned by ARP: {neigh}"
    );

    std::fs::write(&conf, "queue broken on $ext_if bandwidth\n").unwrap();
    lab.topo.signal(sl, "HUP").unwrap();
    assert!(
        logged("reload refused"),
        "invalid reload not refused:\n{}",
        show_log()
    );
    assert!(
        lab.topo.try_status(sl).unwrap().is_none(),
        "sluice died:\n{}",
        show_log()
    );
    assert!(
        lab.ping_once(),
        "path lost after a refused reload:\n{}",
        show_log()
    );

    std::fs::write(&conf, config("20Mb")).unwrap();
    lab.topo.signal(sl, "HUP").unwrap();
    assert!(
        logged("reloaded "),
        "valid reload not applied:\n{}",
        show_log()
    );
    assert!(lab.ping_once(), "path lost after a reload:\n{}", show_log());

    let st = lab.stop_sluice().unwrap();
    assert!(
        st.is_some_and(|s| s.success()),
        "sluice did not stop cleanly on SIGTERM: {st:?}\n{}",
        show_log()
    );
}
