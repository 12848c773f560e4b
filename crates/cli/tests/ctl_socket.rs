//! The control socket end to end: a daemon state over a real engine that has
//! forwarded real frames, served on a temporary socket, driven by the
//! `sluice` binary's client commands; and the metrics endpoint over HTTP.

#[allow(dead_code, unused_imports)]
#[path = "../src/ctl/mod.rs"]
mod ctl;
#[allow(dead_code, unused_imports)]
#[path = "../src/metrics.rs"]
mod metrics;

use ctl::proto::Reply;
use ctl::DaemonState;
use sluice_engine::{Engine, Options};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const LAN: usize = 0;
const WAN: usize = 1;

const GOOD: &str = "\
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 qlimit 10 priq(default)

pass out on $ext_if proto tcp from any to any flags S/SA keep state queue (q_def, q_pri)
pass out on $ext_if proto udp queue (q_def, q_pri)
";

/// Same queue names, a bigger q_def and a new one: q_def keeps its packets.
const NEW: &str = "\
altq on $ext_if priq bandwidth 200Kb queue { q_pri, q_def, q_new }
queue q_pri priority 7
queue q_def priority 1 qlimit 100 priq(default)
queue q_new priority 3
pass out on $ext_if proto udp queue q_def
";

const BAD: &str = "\
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 99
queue q_def priority 1 priq(default)
";

struct Daemon {
    dir: PathBuf,
    sock: PathBuf,
    state: Arc<DaemonState>,
    wakes: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-ctl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn defines() -> Vec<(String, String)> {
    vec![("ext_if".to_string(), "wan0".to_string())]
}

/// A daemon whose engine has seen one TCP connection and 20 UDP datagrams
/// into a 10-packet queue, and sent 3 of them.
fn daemon(name: &str) -> Daemon {
    let dir = tmpdir(name);
    let conf = dir.join("pf.conf");
    std::fs::write(&conf, GOOD).unwrap();
    let cfg = sluice_conf::check("pf.conf", GOOD, &defines())
        .unwrap()
        .config;
    let engine = Engine::new(
        &cfg,
        Options {
            ifaces: vec!["lan0".into(), "wan0".into()],
            bridge: vec![(LAN, WAN)],
            hash_key: [7; 16],
            iface_addrs: vec![],
        },
    )
    .unwrap();
    let wakes = Arc::new(AtomicU64::new(0));
    let w = wakes.clone();
    let state = Arc::new(DaemonState {
        engine: Arc::new(Mutex::new(engine)),
        started: std::time::Instant::now(),
        ifaces: ["lan0".into(), "wan0".into()],
        io_method: "test".into(),
        io_stats: Arc::new(|| vec![("rx_ring_drops".to_string(), 3)]),
        config_path: conf,
        defines: defines(),
        wake: Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }),
        stop: Arc::new(AtomicBool::new(false)),
    });
    {
        let now = ctl::engine_now(&state);
        let mut e = state.engine.lock().unwrap();
        let syn = sluice_wire::build::tcp_v4(
            Ipv4Addr::new(10, 0, 0, 2),
            Ipv4Addr::new(192, 0, 2, 1),
            40000,
            80,
            sluice_wire::tcp_flags::SYN,
            0,
        );
        e.handle_rx(now, LAN, syn);
        for i in 0..20 {
            let f = sluice_wire::build::udp_v4(
                Ipv4Addr::new(10, 0, 0, 2),
                Ipv4Addr::new(192, 0, 2, 1),
                5000 + i,
                53,
                1000,
            );
            e.handle_rx(now, LAN, f);
        }
        // The token bucket starts full enough for a few packets.
        let mut sent = 0;
        while sent < 3 && e.poll_tx(now, WAN).is_some() {
            sent += 1;
        }
        assert!(sent > 0, "nothing left the queue");
    }
    let sock = dir.join("ctl.sock");
    let handle = ctl::spawn_control(&sock, state.clone()).unwrap();
    Daemon {
        dir,
        sock,
        state,
        wakes,
        handle: Some(handle),
    }
}

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
fn show_queues_json_reports_what_the_engine_counted() {
    let d = daemon("queues-json");
    let out = stdout(&sluice(&["show", "queues", "--json"], &d.sock));
    let Reply::Queues(q) = serde_json::from_str(&out).unwrap() else {
        panic!("not a queues reply: {out}")
    };
    let wan = q.ifaces.iter().find(|i| i.name == "wan0").unwrap();
    assert_eq!(wan.sched.as_deref(), Some("priq"));
    assert_eq!(wan.bandwidth_bps, Some(100_000));
    let def = wan.queues.iter().find(|c| c.name == "q_def").unwrap();
    // A SYN is no ACK: it and 20 datagrams into qlimit 10, 11 refused.
    let full = def.drops.iter().find(|d| d.reason == "queue-full").unwrap();
    assert_eq!(full.packets, 11);
    assert_eq!(def.dropped_packets, 11);
    assert_eq!(def.options, vec!["default".to_string()]);
    assert_eq!(def.qlimit, Some(10));
    assert_eq!(def.priority, Some(1));
    let pri = wan.queues.iter().find(|c| c.name == "q_pri").unwrap();
    assert_eq!((pri.packets, pri.qlength), (0, 0));
    assert!((1..=3).contains(&def.packets), "passed {}", def.packets);
    assert_eq!(def.packets + def.qlength, 10);
    // The engine's own report agrees with the wire.
    let rep = d.state.engine.lock().unwrap().report();
    let c = rep[WAN].class("q_def").unwrap();
    assert_eq!((c.passed_packets, c.qlen), (def.packets, def.qlength));
    let lan = q.ifaces.iter().find(|i| i.name == "lan0").unwrap();
    assert_eq!(lan.sched, None);
}

#[test]
fn show_queues_text_is_pfctl_like_and_repeats_with_v() {
    let d = daemon("queues-text");
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
    let d = daemon("rules");
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
    let d = daemon("reload");
    let bad = d.dir.join("bad.conf");
    std::fs::write(&bad, BAD).unwrap();
    let before = d.state.engine.lock().unwrap().report();
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
    let after = d.state.engine.lock().unwrap().report();
    assert_eq!(format!("{before:?}"), format!("{after:?}"));
    assert_eq!(d.wakes.load(Ordering::SeqCst), 0);

    let good = d.dir.join("new.conf");
    std::fs::write(&good, NEW).unwrap();
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
    {
        let now = ctl::engine_now(&d.state);
        let f = sluice_wire::build::udp_v4(
            Ipv4Addr::new(10, 0, 0, 3),
            Ipv4Addr::new(192, 0, 2, 1),
            7000,
            53,
            100,
        );
        d.state.engine.lock().unwrap().handle_rx(now, LAN, f);
    }
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
    let mut d = daemon("stop");
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
fn stale_socket_is_replaced_and_a_live_one_is_not() {
    let d = daemon("stale");
    // A second server on a live socket must refuse, not steal it.
    let e = ctl::spawn_control(&d.sock, d.state.clone()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    let stale = d.dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let o = sluice(&["show", "info"], &stale);
    assert!(String::from_utf8_lossy(&o.stderr).contains("stale socket"));
    let h = ctl::spawn_control(&stale, d.state.clone()).unwrap();
    let out = stdout(&sluice(&["show", "info"], &stale));
    assert!(out.starts_with("Status: Running"), "{out}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&stale).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    d.state.stop.store(true, Ordering::SeqCst);
    h.join().unwrap();
    // A regular file in the way is left alone.
    let file = d.dir.join("file");
    std::fs::write(&file, "keep me").unwrap();
    assert!(ctl::spawn_control(&file, d.state.clone()).is_err());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn garbage_and_oversized_requests_get_an_error_and_the_server_lives() {
    use std::io::{BufRead, BufReader, Write};
    let d = daemon("garbage");
    let ask = |line: &[u8]| {
        let mut s = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
        s.write_all(line).unwrap();
        let mut r = String::new();
        BufReader::new(s).read_line(&mut r).unwrap();
        serde_json::from_str::<Reply>(&r).unwrap()
    };
    assert!(matches!(
        ask(b"{\"cmd\":\"rm -rf\"}\n"),
        Reply::Error { .. }
    ));
    assert!(matches!(ask(b"\xff\xfe\n"), Reply::Error { .. }));
    let mut big = vec![b'x'; ctl::proto::MAX_REQUEST_BYTES + 10];
    big.push(b'\n');
    let Reply::Error { message } = ask(&big) else {
        panic!()
    };
    assert!(message.contains("longer than"), "{message}");
    assert!(matches!(ask(b"{\"cmd\":\"show-info\"}\n"), Reply::Info(_)));
}

#[test]
fn non_root_peers_are_refused() {
    if rustix::process::geteuid().as_raw() != 0 || !Path::new("/usr/bin/setpriv").exists() {
        // Needs root to switch to `nobody`; CI and the dev machines run as root.
        eprintln!("skipped: not root or no setpriv");
        return;
    }
    let d = daemon("peer");
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
        eprintln!("skipped: the test binary is not executable by nobody");
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

/// One sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// A parsed exposition: `(name, labels) -> value`, and `name -> type`.
struct Exposition {
    samples: Vec<Sample>,
    types: std::collections::HashMap<String, String>,
}

impl Exposition {
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && l.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(a, b)| a == k && b == v))
            })
            .map(|s| s.2)
    }
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// Parses Prometheus text format 0.0.4 strictly enough to catch a broken
/// line, a sample without `# TYPE`, a duplicate series or family.
fn parse_exposition(text: &str) -> Exposition {
    let mut types = std::collections::HashMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{line}");
            assert!(
                ["counter", "gauge", "untyped", "summary", "histogram"].contains(&kind),
                "{line}"
            );
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter without _total: {line}");
            }
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "family declared twice: {line}"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), Vec::new()),
            Some((n, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let mut labels = Vec::new();
                let mut chars = body.chars().peekable();
                while chars.peek().is_some() {
                    let k: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    assert_eq!(chars.next(), Some('"'), "{line}");
                    let mut v = String::new();
                    loop {
                        match chars.next() {
                            Some('\\') => match chars.next() {
                                Some('n') => v.push('\n'),
                                Some(c) => v.push(c),
                                None => panic!("{line}"),
                            },
                            Some('"') => break,
                            Some(c) => v.push(c),
                            None => panic!("unterminated label in {line}"),
                        }
                    }
                    assert!(valid_name(&k), "label {k} in {line}");
                    labels.push((k, v));
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                }
                (n.to_string(), labels)
            }
        };
        assert!(valid_name(&name), "{line}");
        assert!(
            types.contains_key(&name),
            "sample before its # TYPE: {line}"
        );
        assert!(
            !samples.iter().any(|(n, l, _)| *n == name && *l == labels),
            "duplicate series: {line}"
        );
        samples.push((name, labels, value));
    }
    Exposition { samples, types }
}

fn http(addr: std::net::SocketAddr, request: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

#[test]
fn metrics_endpoint_serves_a_parseable_exposition() {
    let d = daemon("metrics");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let h = ctl::spawn_metrics(addr, d.state.clone()).unwrap();
    let (head, body) = http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    let m = parse_exposition(&body);

    let rep = d.state.engine.lock().unwrap().report();
    let def = rep[WAN].class("q_def").unwrap();
    let q = |name: &str| m.get(name, &[("iface", "wan0"), ("queue", "q_def")]);
    assert_eq!(
        q("sluice_queue_packets_total"),
        Some(def.passed_packets as f64)
    );
    assert_eq!(q("sluice_queue_bytes_total"), Some(def.passed_bytes as f64));
    assert_eq!(q("sluice_queue_qlength"), Some(def.qlen as f64));
    assert_eq!(
        q("sluice_queue_backlog_bytes"),
        Some(def.backlog_bytes as f64)
    );
    assert_eq!(q("sluice_queue_qlimit"), Some(10.0));
    assert_eq!(q("sluice_queue_ecn_marks_total"), Some(0.0));
    let drops = [
        ("iface", "wan0"),
        ("queue", "q_def"),
        ("reason", "queue-full"),
    ];
    assert_eq!(m.get("sluice_queue_drops_total", &drops), Some(11.0));
    for qt in ["0.5", "0.99"] {
        let l = [("iface", "wan0"), ("queue", "q_def"), ("quantile", qt)];
        let v = m.get("sluice_queue_sojourn_seconds", &l).unwrap();
        assert!((0.0..1.0).contains(&v), "{v}");
    }
    assert_eq!(m.get("sluice_states", &[]), Some(21.0));
    assert!(m.get("sluice_state_limit", &[]).unwrap() >= 21.0);
    assert_eq!(
        m.get("sluice_iface_rx_packets_total", &[("iface", "lan0")]),
        Some(21.0)
    );
    let tx = rep[WAN].counters.tx_frames as f64;
    assert_eq!(
        m.get("sluice_iface_tx_packets_total", &[("iface", "wan0")]),
        Some(tx)
    );
    let cause = [("iface", "wan0"), ("cause", "queue")];
    assert_eq!(m.get("sluice_iface_dropped_total", &cause), Some(11.0));
    assert_eq!(m.get("sluice_io", &[("stat", "rx_ring_drops")]), Some(3.0));
    assert_eq!(m.types["sluice_queue_drops_total"], "counter");
    assert_eq!(m.types["sluice_queue_qlength"], "gauge");

    let (head, _) = http(addr, "GET /nope HTTP/1.0\r\n\r\n");
    assert!(head.starts_with("HTTP/1.0 404"), "{head}");
    let (head, _) = http(addr, "POST /metrics HTTP/1.0\r\n\r\n");
    assert!(head.starts_with("HTTP/1.0 405"), "{head}");
    let huge = format!("GET /metrics HTTP/1.0\r\nX: {}", "a".repeat(20_000));
    let (head, _) = http(addr, &huge);
    assert!(head.starts_with("HTTP/1.0 431"), "{head}");

    d.state.stop.store(true, Ordering::SeqCst);
    h.join().unwrap();
}
