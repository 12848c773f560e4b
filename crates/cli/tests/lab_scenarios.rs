//! `sluice lab` end to end: short versions (phases of a few seconds) of
//! every scenario through the real five-namespace network, asserting the
//! physics of issue #4, plus clean-up on every exit path.
//!
//! Needs root, `ip`, `tc`, `ethtool`, `ss`, `iperf3`, `ping`, `irtt`
//! (scripts/setup.sh); otherwise each test prints a SKIP line and returns,
//! or fails under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).
//! The release binary is used when SLUICE_BIN names it (as CI does): the
//! shaper must keep up with the link, which a debug build may not.
//! Bounds are stated at each assertion; runs are serial (two at once would
//! measure the machine, which has two cores).

use sluice_lab::leftover_namespaces;
use sluice_lab::model::{PhaseSummary, Summary};
use sluice_testkit::{require_netns, Serial, Sluice};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// Root and every tool of this file, else SKIP (a failure under CI).
fn netns() -> Option<Serial> {
    require_netns(&["iperf3", "ss", "tc", "irtt"])
}

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-lab-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The lab's namespaces of process `pid` still present.
fn leftovers(pid: u32) -> Vec<String> {
    leftover_namespaces("lab", pid).expect("ip netns list")
}

/// Runs `sluice lab ARGS… --json --out DIR`; its output (no namespace left).
fn lab(args: &[&str], tag: &str) -> Output {
    let dir = out_dir(tag);
    let out = Sluice::locate(env!("CARGO_BIN_EXE_sluice")).lab(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// `lab compare SCENARIO --duration S [--shaper X]…` → one summary per shaper.
fn compare(scenario: &str, secs: u32, shapers: &[&str]) -> Vec<Summary> {
    let d = secs.to_string();
    let mut args = vec!["compare", scenario, "--duration", &d];
    for s in shapers {
        args.extend(["--shaper", s]);
    }
    let out = lab(&args, scenario);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "sluice lab compare {scenario} failed:\n{stderr}"
    );
    eprintln!("{stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the summaries' JSON ({e}):\n{stderr}"))
}

/// A shipped example config, by its path in the repository.
fn example(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    p.to_string_lossy().into_owned()
}

fn phase<'a>(s: &'a Summary, name: &str) -> &'a PhaseSummary {
    s.phases
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no phase {name} in {}", s.scenario))
}

fn p50(p: &PhaseSummary) -> f64 {
    p.latency_ms.map(|l| l.p50).unwrap_or(f64::INFINITY)
}

/// A direction's rate over a phase stays under the link rate (+5 %: frame
/// counting and sampling edges) and, when `saturated`, reaches 75 % of it
/// (a phase of a few seconds includes the flow's start-up).
fn within_link(what: &str, bps: f64, link_bps: u64, saturated: bool) {
    within(what, bps, link_bps, if saturated { 0.75 } else { 0.0 });
}

/// The same with an explicit lower share of the link.
fn within(what: &str, bps: f64, link_bps: u64, min_share: f64) {
    let link = link_bps as f64;
    assert!(
        bps <= link * 1.05,
        "{what}: {bps:.0} bit/s above the link's {link:.0}"
    );
    assert!(
        bps >= link * min_share,
        "{what}: {bps:.0} bit/s, under {:.0} % of the link's {link:.0}",
        100.0 * min_share
    );
}

#[test]
fn tcp_1up_bloats_without_a_shaper_and_not_with_hfsc() {
    let Some(_serial) = netns() else {
        return;
    };
    let runs = compare("tcp_1up", 5, &[]);
    assert_eq!(runs.len(), 2, "default compare: none, then the example");
    let (none, hfsc) = (&runs[0], &runs[1]);
    assert_eq!(none.shaper, "none");
    assert_eq!(hfsc.shaper, "hfsc-qlimit9.conf");
    for s in &runs {
        let up = phase(s, "upload");
        within_link(
            &format!("{} upload", s.shaper),
            up.up_bps,
            s.link.up_bps,
            true,
        );
        assert!(
            s.warnings.iter().all(|w| !w.contains("exited")),
            "{:?}",
            s.warnings
        );
    }
    // Without a shaper the modem's 200-packet FIFO (2.4 s at 1 Mbit/s) fills.
    let idle = none.idle_latency_ms.p50;
    let loaded = p50(phase(none, "upload"));
    eprintln!("tcp_1up none: idle {idle:.1} ms, upload p50 {loaded:.0} ms");
    assert!(
        loaded >= 10.0 * idle,
        "bloat: upload p50 {loaded} ms < 10 × idle {idle} ms"
    );
    assert_eq!(none.grade.up.as_deref(), Some("F"));
    // HFSC qlimit 9 keeps the queue in sluice: at most 9 × 12 ms + idle.
    let idle = hfsc.idle_latency_ms.p50;
    let loaded = p50(phase(hfsc, "upload"));
    eprintln!("tcp_1up hfsc: idle {idle:.1} ms, upload p50 {loaded:.0} ms");
    assert!(
        loaded <= idle + 150.0,
        "hfsc: upload p50 {loaded} ms > idle {idle} + 150 ms"
    );
}

#[test]
fn ack_priority_keeps_the_download_during_an_upload() {
    let Some(_serial) = netns() else {
        return;
    };
    // The upload's set-up crosses the download's full FIFO (~1.5 s per
    // round trip): it sends data ~7 s into its phase, so phases are 15 s.
    let runs = compare("ack_priority", 15, &[]);
    let retained = |s: &Summary| {
        let solo = phase(s, "download").down_bps;
        let both = phase(s, "download+upload").down_bps;
        within_link(
            &format!("{} download", s.shaper),
            solo,
            s.link.down_bps,
            false,
        );
        within_link(
            &format!("{} upload", s.shaper),
            phase(s, "upload").up_bps,
            s.link.up_bps,
            false,
        );
        // Not vacuous: the upload really ran during the phase measured.
        let up = phase(s, "download+upload").up_bps;
        assert!(
            up >= 0.3 * s.link.up_bps as f64,
            "{}: upload only {up:.0} bit/s",
            s.shaper
        );
        (solo, both, both / solo.max(1.0))
    };
    let (solo, both, r) = retained(&runs[0]);
    eprintln!(
        "ack_priority none: download {:.1} kB/s alone, {:.1} kB/s with the upload ({:.0} %)",
        solo / 8e3,
        both / 8e3,
        100.0 * r
    );
    let (solo, both, r) = retained(&runs[1]);
    eprintln!(
        "ack_priority priq: download {:.1} kB/s alone, {:.1} kB/s with the upload ({:.0} %)",
        solo / 8e3,
        both / 8e3,
        100.0 * r
    );
    // No bound on the unshaped run's share: with 15 s phases the upload is
    // still setting up and filling the modem's byte FIFO for most of the
    // phase (measured 86 %); the collapse to ~20 % shows once it has
    // (30 s phases, settled half: docs/notebook/2026-11-24-seeds-collapse.md).
    // The download alone fills most of the 512 kbit/s line (64 KB window).
    assert!(solo >= 0.6 * 512e3, "download alone only {solo:.0} bit/s");
    assert!(
        r >= 0.8,
        "PRIQ: the download kept {:.0} % (< 80 %) during the upload",
        100.0 * r
    );
}

#[test]
fn rrul_and_voip_are_better_with_fq_codel() {
    let Some(_serial) = netns() else {
        return;
    };
    // rrul's four downloads lose about a second of the line to their
    // start (slow start behind the uploads' ACK share): over 5 s phases
    // that left 69-77 % of the 30 Mbit/s link, with or without the
    // latest changes (three runs each), against the 75 % bound; over 10 s
    // it is a tenth of the phase (86 % typical, but one run of a full
    // suite read 70 %; 60 s phases: 94 %): 15 s.
    for (name, secs) in [("rrul", 15), ("voip", 5)] {
        let runs = compare(name, secs, &[]);
        let (none, fq) = (&runs[0], &runs[1]);
        for s in &runs {
            let p = &s.phases[1];
            assert!(p.load_down && p.load_up, "{name}: phase 2 loads both ways");
            // Without a shaper the downloads' ACKs wait seconds behind the
            // upload: they need not fill the line (that is the point).
            // With one, the upload also carries the downloads' ACKs, which
            // the shaper charges 38 bytes of Ethernet overhead each (the
            // counters here do not): 60 % of the line is left for data.
            let shaped = s.shaper != "none";
            within_link(
                &format!("{name} {} down", s.shaper),
                p.down_bps,
                s.link.down_bps,
                shaped,
            );
            let min_up = if shaped { 0.6 } else { 0.0 };
            within(
                &format!("{name} {} up", s.shaper),
                p.up_bps,
                s.link.up_bps,
                min_up,
            );
            let v = s
                .voip
                .unwrap_or_else(|| panic!("{name} {}: no voip figures", s.shaper));
            assert!(v.mos >= 1.0 && v.mos <= 4.5, "{v:?}");
            assert_eq!(s.flows.len(), 2);
            eprintln!(
                "{name} {}: idle {:.1} ms, load p50 {:.0} p99 {:.0} ms, grade {}, voip owd {:.0} ms jitter {:.1} ms loss {:.1} % MOS {:.2}",
                s.shaper,
                s.idle_latency_ms.p50,
                p50(p),
                p.latency_ms.map(|l| l.p99).unwrap_or(f64::NAN),
                s.grade.overall,
                v.owd_ms,
                v.jitter_ms,
                v.loss_pct,
                v.mos
            );
        }
        // A 1000-packet FIFO at 5 (2) Mbit/s up is seconds; FQ-CoDel at 97 % is ms.
        assert!(
            p50(&fq.phases[1]) * 3.0 < p50(&none.phases[1]),
            "{name}: shaper p50 {} not well under none {}",
            p50(&fq.phases[1]),
            p50(&none.phases[1])
        );
        let rank = |g: &str| ["A+", "A", "B", "C", "D", "F"].iter().position(|x| *x == g);
        assert!(
            rank(&fq.grade.overall) < rank(&none.grade.overall),
            "{name}: grades"
        );
        let (mn, mf) = (none.voip.unwrap().mos, fq.voip.unwrap().mos);
        assert!(
            mf > mn,
            "{name}: MOS with the shaper {mf:.2} ≤ without {mn:.2}"
        );
    }
}

/// Behind a FIFO of seconds the call still gets its figures. irtt waits
/// for its last replies a multiple of its worst RTT; its own default (3×)
/// outlasted the runner once that RTT passed 4 s, and an interrupted irtt
/// writes nothing: the bloated runs, the ones a MOS is for, had none (`lte`
/// without a shaper, 2026-12-05). 200 packets at 192 kbit/s up are 12.6 s
/// of FIFO; 5 s of load put 4.9–5.2 s in it.
#[test]
fn a_call_behind_seconds_of_fifo_keeps_its_figures() {
    let Some(_serial) = netns() else {
        return;
    };
    let args = [
        "run",
        "voip",
        "--shaper",
        "none",
        "--duration",
        "5",
        "--up",
        "192k",
        "--buffer",
        "200",
    ];
    let out = lab(&args, "voip-bloat");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: Summary = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the summary's JSON ({e}):\n{stderr}"));
    let worst_ms = s.phases[1].latency_ms.map_or(0.0, |l| l.max);
    // Under 4 s irtt's old wait ended in time too: the run would prove nothing.
    assert!(
        worst_ms > 4000.0,
        "the FIFO held only {worst_ms} ms: not bloated enough to test the wait"
    );
    let v = s
        .voip
        .unwrap_or_else(|| panic!("no voip figures at a worst RTT of {worst_ms} ms:\n{stderr}"));
    assert!(v.owd_ms > 1000.0 && v.mos < 2.0, "{v:?}");
}

#[test]
fn rrul_heavy_and_tcp_1down_run_with_their_shapers() {
    let Some(_serial) = netns() else {
        return;
    };
    // 2 × 100 connections take seconds to set up through the queues, and
    // 200 iperf3 streams share the two cores with sluice: the phase is
    // sane (in bounds, loaded, answered), not saturated.
    let heavy = &compare("rrul_heavy", 8, &[&example("examples/lab/rrul-paced.conf")])[0];
    let p = &heavy.phases[1];
    within("rrul_heavy down", p.down_bps, heavy.link.down_bps, 0.3);
    within("rrul_heavy up", p.up_bps, heavy.link.up_bps, 0.3);
    assert!(p.latency_ms.is_some(), "pings answered under 200 flows");
    eprintln!(
        "rrul_heavy paced: idle {:.1} ms, load p50 {:.0} ms, loss {:.1} %, grade {}",
        heavy.idle_latency_ms.p50,
        p50(p),
        p.loss_pct,
        heavy.grade.overall
    );
    let down = &compare(
        "tcp_1down",
        5,
        &[&example("examples/lab/tcp1down-paced.conf")],
    )[0];
    let p = phase(down, "download");
    within_link("tcp_1down down", p.down_bps, down.link.down_bps, true);
    // The download held to 97 % of the line from its ACKs: the modem's
    // FIFO stays short (20 ms at the default duration,
    // docs/notebook/2026-11-24-tcp-control.md); a
    // bound with room for two shared cores.
    assert!(
        p50(p) <= down.idle_latency_ms.p50 + 60.0,
        "tcp_1down p50 {}",
        p50(p)
    );
    assert_eq!(down.grade.up, None, "no upload phase");
    assert!(down.grade.down.is_some());
}

#[test]
fn json_summary_has_the_issue_fields() {
    let Some(_serial) = netns() else {
        return;
    };
    let out = lab(
        &[
            "run",
            "tcp_1up",
            "--shaper",
            "none",
            "--duration",
            "2",
            "--rtt",
            "10",
        ],
        "json",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    for ptr in [
        "/scenario",
        "/shaper",
        "/link/down_bps",
        "/link/up_bps",
        "/link/rtt_ms",
        "/link/buffer_pkts",
        "/idle_latency_ms/p50",
        "/phases/0/name",
        "/phases/0/start_s",
        "/phases/0/end_s",
        "/phases/0/down_bps",
        "/phases/0/up_bps",
        "/phases/0/latency_ms/p50",
        "/phases/0/latency_ms/p90",
        "/phases/0/latency_ms/p99",
        "/phases/0/latency_ms/max",
        "/phases/0/loss_pct",
        "/grade/overall",
        "/ecn",
        "/flows/0/window",
    ] {
        assert!(v.pointer(ptr).is_some(), "summary.json lacks {ptr}: {v}");
    }
    assert_eq!(
        v.pointer("/link/rtt_ms").and_then(|x| x.as_f64()),
        Some(10.0)
    );
    assert_eq!(
        v.pointer("/phases/2/end_s").and_then(|x| x.as_f64()),
        Some(6.0)
    );
    // 10 ms of base RTT really is there (delay line or netem), and not much more.
    let idle = v
        .pointer("/idle_latency_ms/p50")
        .and_then(|x| x.as_f64())
        .unwrap();
    assert!(
        (9.5..=15.0).contains(&idle),
        "idle RTT {idle} ms for --rtt 10"
    );
}

/// The sockets of `ss -tinm` output (a socket line, then its indented
/// details) whose text mentions `needle`, each as one line.
fn sockets_with(ss: &str, needle: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for line in ss.lines() {
        if line.starts_with(char::is_whitespace) {
            cur.push(' ');
            cur.push_str(line.trim());
            continue;
        }
        if cur.contains(needle) {
            out.push(std::mem::take(&mut cur));
        }
        cur = line.to_string();
    }
    if cur.contains(needle) {
        out.push(cur);
    }
    out
}

#[test]
fn ecn_and_window_reach_both_hosts() {
    let Some(_serial) = netns() else {
        return;
    };
    // tcp_1up's upload, client 10.77.0.1 -> server 10.77.1.2:5201; tcp.txt
    // has both hosts' `ss -tinm` from the middle of the upload phase.
    let run = |ecn: &str, window: &str| -> (serde_json::Value, String) {
        let dir = out_dir(&format!("ecn-{ecn}"));
        let out = Command::new(bin())
            .args([
                "lab",
                "run",
                "tcp_1up",
                "--shaper",
                "none",
                "--duration",
                "3",
            ])
            .args(["--ecn", ecn, "--window", window, "--json", "--out"])
            .arg(&dir)
            .env("SLUICE_BIN", bin())
            .stdin(Stdio::null())
            .output()
            .expect("sluice lab");
        let tcp = std::fs::read_to_string(dir.join("tcp.txt")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stderr}"));
        (v, tcp)
    };
    let (v, tcp) = run("on", "128K");
    assert_eq!(v["ecn"], serde_json::json!(true), "{v}");
    assert_eq!(v["flows"][0]["window"], serde_json::json!(131072), "{v}");
    // The iperf3 sockets of both hosts (control and data connection; the
    // server's are IPv4-mapped: [::ffff:10.77.1.2]:5201).
    let (client_part, server_part) = tcp.split_once(") server:").expect("two sections");
    let client = sockets_with(client_part, "10.77.1.2:5201");
    let server = sockets_with(server_part, "10.77.1.2]:5201");
    assert!(!client.is_empty() && !server.is_empty(), "{tcp}");
    // Both hosts had ECN on (this kernel's `ss` does not print the
    // negotiated flag, so the sysctl is what tcp.txt records).
    for part in [client_part, server_part] {
        assert!(part.contains("net.ipv4.tcp_ecn = 1\n"), "{part}");
    }
    // -w 128K reached both ends of the data connection: the kernel doubles
    // the request (socket(7)), so the sender's send buffer and the
    // receiver's receive buffer are both 256 KiB.
    assert!(
        client.iter().any(|s| s.contains(",tb262144,")),
        "client send buffer: {client:?}"
    );
    assert!(
        server.iter().any(|s| s.contains(",rb262144,")),
        "server receive buffer: {server:?}"
    );
    let (v, tcp) = run("off", "auto");
    assert_eq!(v["ecn"], serde_json::json!(false), "{v}");
    assert_eq!(v["flows"][0]["window"], serde_json::Value::Null, "{v}");
    let all = sockets_with(&tcp, ":5201");
    assert!(!all.is_empty(), "{tcp}");
    assert_eq!(tcp.matches("net.ipv4.tcp_ecn = 0\n").count(), 2, "{tcp}");
    assert!(!tcp.contains("net.ipv4.tcp_ecn = 1"), "{tcp}");
    assert!(!all.iter().any(|s| s.contains(",tb262144,")), "{all:?}");
}

#[test]
fn a_bad_shaper_fails_before_any_namespace() {
    let Some(_serial) = netns() else {
        return;
    };
    let conf = out_dir("bad").with_extension("conf");
    std::fs::write(
        &conf,
        "altq on $ext_if priq bandwidth 1Mb queue { a }\nqueue b priority 1\n",
    )
    .unwrap();
    let c = conf.to_string_lossy().into_owned();
    let out = lab(&["run", "tcp_1up", "--shaper", &c], "bad");
    let _ = std::fs::remove_file(&conf);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("invalid shaper configuration"), "{stderr}");
    assert!(stderr.contains("error"), "the check diagnostics: {stderr}");
    assert!(out.stdout.is_empty());
    // A bad value is refused the same way.
    let out = lab(&["run", "tcp_1up", "--up", "5MB"], "badrate");
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("bytes"));
}

#[test]
fn sigint_removes_the_namespaces() {
    let Some(_serial) = netns() else {
        return;
    };
    let dir = out_dir("sigint");
    let child = Command::new(bin())
        .args(["lab", "run", "tcp_1up", "--duration", "30", "--out"])
        .arg(&dir)
        .env("SLUICE_BIN", bin())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the run is under way: its namespaces exist and ping runs.
    let t0 = Instant::now();
    while !dir.join("ping.txt").exists() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!leftovers(pid).is_empty(), "the run never started");
    std::thread::sleep(Duration::from_secs(2));
    let running = Command::new("pgrep").arg("-f").arg(&dir).output().unwrap();
    assert!(
        !running.stdout.is_empty(),
        "sluice runs under the lab before the SIGINT"
    );
    let st = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    // Nothing of the run keeps running either: sluice (the example's HFSC
    // config) had the run directory in its command line (--control DIR/…).
    let ps = Command::new("pgrep").arg("-f").arg(&dir).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        ps.stdout.is_empty(),
        "processes left: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

/// Host `name`'s figures in phase `phase` of a multi-host run.
fn host_phase<'a>(s: &'a Summary, name: &str, phase: &str) -> &'a sluice_lab::model::HostPhase {
    s.hosts
        .iter()
        .find(|h| h.name == name)
        .and_then(|h| h.phases.iter().find(|p| p.name == phase))
        .unwrap_or_else(|| panic!("{}: no host {name} / phase {phase}", s.shaper))
}

#[test]
fn host_fair_has_two_hosts_that_both_reach_the_server() {
    let Some(_serial) = netns() else {
        return;
    };
    // 6 s phases (~27 s a run). The modem's FIFO is cut to 30 packets
    // (0.18 s up): iperf3 opens its 32 connections one after the other,
    // each a round trip behind host A's upload, and behind the scenario's
    // 1000-packet FIFO (6 s up) host B would not have sent anything yet.
    let flows = example("examples/lab/host-fair-flows.conf");
    let args = [
        "compare",
        "host_fair",
        "--duration",
        "6",
        "--buffer",
        "30",
        "--shaper",
        "none",
        "--shaper",
        &flows,
    ];
    let out = lab(&args, "host_fair");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sluice lab compare failed:\n{stderr}");
    let runs: Vec<Summary> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the summaries' JSON ({e}):\n{stderr}"));
    assert_eq!(runs.len(), 2);
    for s in &runs {
        let names: Vec<_> = s
            .hosts
            .iter()
            .map(|h| (h.name.as_str(), h.ip.as_str()))
            .collect();
        assert_eq!(
            names,
            [("A", "10.77.0.1"), ("B", "10.77.0.2")],
            "{}",
            s.shaper
        );
        // Alone, A moves data both ways and B (silent) nothing: the goodput
        // is told apart by host.
        let (a, b) = (
            host_phase(s, "A", "host A alone"),
            host_phase(s, "B", "host A alone"),
        );
        eprintln!(
            "host_fair {} alone: A down {:.0} up {:.0}, B down {:.0} up {:.0} bit/s",
            s.shaper, a.down_bps, a.up_bps, b.down_bps, b.up_bps
        );
        assert!(a.down_bps > 1e5, "{}: A down {}", s.shaper, a.down_bps);
        assert!(
            a.up_bps > 0.3 * s.link.up_bps as f64,
            "{}: A up {}",
            s.shaper,
            a.up_bps
        );
        assert!(
            b.down_bps + b.up_bps < 1e3,
            "{}: silent B moved {} + {} bit/s",
            s.shaper,
            b.down_bps,
            b.up_bps
        );
        assert!(a.down_share_pct.unwrap() > 99.0 && a.up_share_pct.unwrap() > 99.0);
        // A pings and runs the call; B does neither.
        assert!(a.ping_ms.is_some() && a.voip.is_some(), "{}", s.shaper);
        assert!(b.ping_ms.is_none() && b.voip.is_none(), "{}", s.shaper);
        // Together, both hosts' downloads get through; the shares add up.
        let (a, b) = (
            host_phase(s, "A", "both hosts"),
            host_phase(s, "B", "both hosts"),
        );
        eprintln!(
            "host_fair {} both: A down {:.0} ({:.0} %) up {:.0} ({:.0} %); B down {:.0} ({:.0} %) up {:.0} ({:.0} %)",
            s.shaper,
            a.down_bps,
            a.down_share_pct.unwrap_or(f64::NAN),
            a.up_bps,
            a.up_share_pct.unwrap_or(f64::NAN),
            b.down_bps,
            b.down_share_pct.unwrap_or(f64::NAN),
            b.up_bps,
            b.up_share_pct.unwrap_or(f64::NAN)
        );
        // Unshaped, which of B's two clients gets its 33 connections
        // through the full FIFO first varies (each a round trip, a lost
        // SYN a second): B's goodput is counted over both directions.
        assert!(
            a.down_bps + a.up_bps > 1e5 && b.down_bps + b.up_bps > 1e5,
            "{}: both hosts move data",
            s.shaper
        );
        for (a, b) in [
            (a.down_share_pct, b.down_share_pct),
            (a.up_share_pct, b.up_share_pct),
        ] {
            let sum = a.unwrap() + b.unwrap();
            assert!(
                (sum - 100.0).abs() < 1e-6,
                "{}: shares add to {sum}",
                s.shaper
            );
        }
    }
    // Per-flow FQ-CoDel: B's 64 connections against A's 2 take most of
    // each direction (~97 % once settled; the 6 s phase includes B's
    // connection set-up and slow start).
    let fq = &runs[1];
    let (a, b) = (
        host_phase(fq, "A", "both hosts"),
        host_phase(fq, "B", "both hosts"),
    );
    assert!(
        a.down_bps.min(a.up_bps).min(b.down_bps).min(b.up_bps) > 1e5,
        "per-flow FQ: both hosts both ways"
    );
    for (dir, a, b) in [
        ("down", a.down_share_pct.unwrap(), b.down_share_pct.unwrap()),
        ("up", a.up_share_pct.unwrap(), b.up_share_pct.unwrap()),
    ] {
        assert!(
            b >= 55.0 && b > a,
            "per-flow FQ {dir}: B {b:.0} %, A {a:.0} %"
        );
    }
}

/// `--trace`: the modem follows the steps live, the summary carries the
/// trace and each loaded direction's utilisation of the capacity of each
/// moment; a bad trace is refused before any namespace.
#[test]
fn a_link_follows_its_rate_trace() {
    let Some(_serial) = netns() else {
        return;
    };
    let trace = out_dir("trace").with_extension("trace");
    // tcp_1down with 4 s phases: the download runs 4..8 s; the modem's
    // download rate falls from 8M to 2M in its middle.
    std::fs::write(&trace, "# time down up\n0 8M 1M\n6 2M 1M\n").unwrap();
    let t = trace.to_string_lossy().into_owned();
    let args = [
        "run",
        "tcp_1down",
        "--shaper",
        "none",
        "--duration",
        "4",
        "--trace",
        &t,
    ];
    let out = lab(&args, "trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    eprintln!("{stderr}");
    let s: Summary = serde_json::from_slice(&out.stdout).expect("summary JSON");
    let tr = s.link.trace.as_ref().expect("the summary keeps the trace");
    assert_eq!(tr.steps.len(), 2);
    assert_eq!((s.link.down_bps, s.link.up_bps), (8_000_000, 1_000_000));
    assert!(
        stderr.contains("link trace sluice-lab-test-"),
        "the table names the trace: {stderr}"
    );
    let p = phase(&s, "download");
    let util = p.down_util_pct.expect("a loaded direction's utilisation");
    // The capacity over the phase averages 5M. Had the modem stayed at 8M,
    // TCP would have filled it: ~150 % of that average. Following the step,
    // the download cannot exceed the capacity of any moment (+5 % for
    // frame counting and the sampling edges), and it saturates both halves.
    assert!(
        (60.0..=105.0).contains(&util),
        "download at {util:.0} % of the capacity of each moment ({:.0} bit/s)",
        p.down_bps
    );
    assert!(p.down_bps < 5.3e6, "{:.0} bit/s", p.down_bps);
    assert_eq!(p.up_util_pct, None, "no upload load");

    // A trace that is not one: file, line and column, before any namespace.
    std::fs::write(&trace, "0 8M 1M\n6 2MB 1M\n").unwrap();
    let out = lab(&["run", "tcp_1down", "--trace", &t], "badtrace");
    let _ = std::fs::remove_file(&trace);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--trace {t}:2:3: `2MB`: a capital B means bytes")),
        "{stderr}"
    );
    // A name that is neither a file nor a shipped trace lists the shipped.
    let out = lab(&["run", "tcp_1down", "--trace", "nowhere"], "notrace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("docsis-evening, lte, starlink, step"),
        "{stderr}"
    );
}

/// `--drop-icmp`: the modem drops the ICMP it would forward, as an ISP
/// that filters it does. No ping crosses (the runner warns of any that
/// did), and the run's latency figures are irtt's round trips: 50 a second
/// where voip's ping sends 5. A scenario without irtt is refused first.
#[test]
fn with_icmp_dropped_the_latency_is_irtts() {
    let Some(_serial) = netns() else {
        return;
    };
    let out = lab(&["run", "voip", "--duration", "3", "--drop-icmp"], "noicmp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    eprintln!("{stderr}");
    let s: Summary = serde_json::from_slice(&out.stdout).expect("summary JSON");
    assert!(s.link.drop_icmp, "the summary says ICMP was dropped");
    assert!(
        s.warnings.iter().all(|w| !w.starts_with("--drop-icmp")),
        "a ping crossed the modem: {:?}",
        s.warnings
    );
    // 3 s idle at one irtt packet per 20 ms is 150; the ping's would be 15.
    assert!(
        s.idle_latency_ms.samples >= 100,
        "idle latency from {} samples: not irtt's",
        s.idle_latency_ms.samples
    );
    let l = phase(&s, "call under load")
        .latency_ms
        .expect("latency under load");
    assert!(l.samples >= 100, "{} samples under load", l.samples);
    assert!(
        stderr.contains("ICMP dropped beyond the modem (latency: irtt RTT)"),
        "the table says what the latency is: {stderr}"
    );

    let out = lab(&["run", "tcp_1up", "--drop-icmp"], "noicmp-refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--drop-icmp: scenario `tcp_1up` has no irtt stream"),
        "{stderr}"
    );
}
