//! The lab's options end to end (the JSON summary, ECN and windows, rate
//! traces, dropped ICMP), bad input refused before any namespace, and
//! clean-up on SIGINT.

use crate::{bin, both, lab, netns, out_dir, phase, Load};
use sluice_lab::leftover_namespaces;
use sluice_lab::model::Summary;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The lab's namespaces of process `pid` still present.
fn leftovers(pid: u32) -> Vec<String> {
    leftover_namespaces("lab", pid).expect("ip netns list")
}

#[test]
fn json_summary_has_the_issue_fields() {
    let Some(_lane) = netns(Load::Light) else {
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
    let Some(_lane) = netns(Load::Light) else {
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
    // The two runs at once (crate::both); each checks its own hosts.
    let ((v, tcp), off) = both(|| run("on", "128K"), || run("off", "auto"));
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
    let (v, tcp) = off;
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
    let Some(_lane) = netns(Load::Light) else {
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
    let Some(_lane) = netns(Load::Light) else {
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

/// `--trace`: the modem follows the steps live, the summary carries the
/// trace and each loaded direction's utilisation of the capacity of each
/// moment; a bad trace is refused before any namespace.
#[test]
fn a_link_follows_its_rate_trace() {
    let Some(_lane) = netns(Load::Light) else {
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
    let Some(_lane) = netns(Load::Light) else {
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
