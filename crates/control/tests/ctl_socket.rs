//! The control plane end to end: the example daemon of
//! `sluice_control::testing` (a real engine that has forwarded real frames)
//! served on a temporary socket, asked with the typed client; and the
//! metrics endpoint over HTTP. The `sluice` binary's text and exit codes
//! over the same daemon are tested in crates/cli/tests/ctl_socket.rs.

use sluice_control::proto::{Reply, Request};
use sluice_control::testing::{example_daemon, BAD_CONF, LAN, NEW_CONF, WAN};
use sluice_control::{request, ClientError};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::Ordering;

fn ask(sock: &Path, req: Request) -> Reply {
    match request(sock, &req) {
        Ok(Reply::Error { message }) => panic!("{req:?}: refused: {message}"),
        Ok(r) => r,
        Err(e) => panic!("{req:?}: {e}"),
    }
}

#[test]
fn show_queues_reports_what_the_engine_counted() {
    let d = example_daemon("queues-json");
    let Reply::Queues(q) = ask(&d.sock, Request::ShowQueues) else {
        panic!("not a queues reply")
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
fn show_info_counts_packets_states_and_io() {
    let d = example_daemon("info");
    let Reply::Info(i) = ask(&d.sock, Request::ShowInfo) else {
        panic!("not an info reply")
    };
    assert_eq!(i.counters[LAN].rx_packets, 21);
    // One TCP state and one per datagram (UDP pass rules keep state).
    assert_eq!(i.states, 21);
    assert_eq!(i.io, vec![("rx_ring_drops".to_string(), 3)]);
    assert_eq!(i.ifaces, ["lan0", "wan0"]);
    assert_eq!(i.config, d.dir.join("pf.conf").display().to_string());
}

/// `show rules` shows the rules that run: those `run` loaded, not the file
/// as it is on disk now.
#[test]
fn rules_are_those_loaded_not_the_file_on_disk() {
    let d = example_daemon("rules-disk");
    std::fs::write(d.dir.join("pf.conf"), NEW_CONF).unwrap();
    let Reply::Rules(r) = ask(&d.sock, Request::ShowRules) else {
        panic!("not a rules reply")
    };
    assert_eq!(r.rules.len(), 2);
    assert_eq!(
        r.rules[0].text.as_deref(),
        Some("pass out on wan0 proto tcp all flags S/SA queue (q_def, q_pri)")
    );
    assert_eq!(r.rules[0].states, 1);
    assert_eq!(r.rules[1].line, 6);
    assert_eq!(
        d.state.running.get().text,
        sluice_control::testing::EXAMPLE_CONF
    );
}

#[test]
fn bad_reload_is_refused_and_good_one_swaps() {
    let d = example_daemon("reload");
    let bad = d.dir.join("bad.conf");
    std::fs::write(&bad, BAD_CONF).unwrap();
    let before = d.state.engine.lock().unwrap().report();
    let reload = |f: &Path| Request::Reload {
        file: Some(f.display().to_string()),
        strict: false,
    };
    let Ok(Reply::Error { message }) = request(&d.sock, &reload(&bad)) else {
        panic!("a bad file was not refused")
    };
    // The diagnostics of `sluice check`, pointing into the file.
    assert!(message.contains("bad.conf:2"), "{message}");
    let after = d.state.engine.lock().unwrap().report();
    assert_eq!(format!("{before:?}"), format!("{after:?}"));
    assert_eq!(d.wakes.load(Ordering::SeqCst), 0);
    // A refused reload changes nothing of what runs.
    let running = d.state.running.get();
    assert_eq!(running.path, d.dir.join("pf.conf"));
    assert_eq!(running.text, sluice_control::testing::EXAMPLE_CONF);

    let good = d.dir.join("new.conf");
    std::fs::write(&good, NEW_CONF).unwrap();
    let queued = d.state.engine.lock().unwrap().queued(WAN) as u64;
    let Reply::Reloaded(r) = ask(&d.sock, reload(&good)) else {
        panic!("not a reloaded reply")
    };
    // Every resident packet was in q_def or q_pri, both still there.
    assert_eq!(
        (r.file.as_str(), r.kept, r.dropped),
        (good.to_str().unwrap(), queued, 0)
    );
    assert_eq!(d.wakes.load(Ordering::SeqCst), 1);
    let rep = d.state.engine.lock().unwrap().report();
    assert!(rep[WAN].class("q_new").is_some());
    assert_eq!(d.state.engine.lock().unwrap().queued(WAN) as u64, queued);
    let running = d.state.running.get();
    assert_eq!(
        (running.path.as_path(), running.text.as_str()),
        (good.as_path(), NEW_CONF)
    );
    let rules = |d: &sluice_control::testing::TestDaemon| match ask(&d.sock, Request::ShowRules) {
        Reply::Rules(r) => r.rules,
        other => panic!("{other:?}"),
    };
    let r = rules(&d);
    assert_eq!(
        r[0].text.as_deref(),
        Some("pass out on wan0 proto udp all queue q_def")
    );
    // The TCP state was created by the old rule set: not counted for the new @0.
    assert_eq!(r[0].states, 0);
    let states = |d: &sluice_control::testing::TestDaemon| match ask(&d.sock, Request::ShowStates) {
        Reply::States(s) => s.states,
        other => panic!("{other:?}"),
    };
    assert!(states(&d).iter().all(|s| s.rule.is_none()));
    // A connection after the reload is the new @0's.
    d.receive_udp(Ipv4Addr::new(10, 0, 0, 3), 7000, 53, 100);
    assert_eq!(rules(&d)[0].states, 1);
    let st = states(&d);
    let s = st
        .iter()
        .find(|s| s.src == "10.0.0.3" && s.src_port == 7000)
        .unwrap_or_else(|| panic!("{st:?}"));
    assert_eq!(
        (s.proto.as_str(), s.dst.as_str(), s.dst_port),
        ("udp", "192.0.2.1", 53)
    );
    assert_eq!(s.state, "SINGLE:NO_TRAFFIC");
    assert_eq!(s.queue.as_deref(), Some("q_def"));
    assert_eq!((s.packets, s.bytes, s.rule), ([1, 0], [128, 0], Some(0)));
    let Reply::Info(i) = ask(&d.sock, Request::ShowInfo) else {
        panic!()
    };
    assert_eq!(i.config, good.display().to_string());
    // Without a file: the daemon's own file again.
    let Reply::Reloaded(r) = ask(
        &d.sock,
        Request::Reload {
            file: None,
            strict: false,
        },
    ) else {
        panic!()
    };
    assert!(r.file.ends_with("pf.conf"), "{}", r.file);
}

#[test]
fn stop_sets_the_flag_wakes_and_removes_the_socket() {
    let mut d = example_daemon("stop");
    assert_eq!(ask(&d.sock, Request::Stop), Reply::Stopping);
    assert!(d.state.stop.load(Ordering::SeqCst));
    assert_eq!(d.wakes.load(Ordering::SeqCst), 1);
    d.handle.take().unwrap().join().unwrap();
    assert!(!d.sock.exists());
    let e = request(&d.sock, &Request::ShowInfo).unwrap_err();
    assert!(matches!(e, ClientError::Connect(..)), "{e:?}");
    assert!(
        e.to_string()
            .contains("is `sluice run` running? (no such socket)"),
        "{e}"
    );
}

#[test]
fn stale_socket_is_replaced_and_a_live_one_is_not() {
    let d = example_daemon("stale");
    // A second server on a live socket must refuse, not steal it.
    let e = sluice_control::spawn_control(&d.sock, d.state.clone()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    let stale = d.dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let e = request(&stale, &Request::ShowInfo).unwrap_err();
    assert!(e.to_string().contains("stale socket"), "{e}");
    let h = sluice_control::spawn_control(&stale, d.state.clone()).unwrap();
    assert!(matches!(ask(&stale, Request::ShowInfo), Reply::Info(_)));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&stale).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    d.state.stop.store(true, Ordering::SeqCst);
    h.join().unwrap();
    // A regular file in the way is left alone.
    let file = d.dir.join("file");
    std::fs::write(&file, "keep me").unwrap();
    assert!(sluice_control::spawn_control(&file, d.state.clone()).is_err());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn garbage_and_oversized_requests_get_an_error_and_the_server_lives() {
    use std::io::{BufRead, BufReader, Write};
    let d = example_daemon("garbage");
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
    let mut big = vec![b'x'; sluice_control::proto::MAX_REQUEST_BYTES + 10];
    big.push(b'\n');
    let Reply::Error { message } = ask(&big) else {
        panic!()
    };
    assert!(message.contains("longer than"), "{message}");
    assert!(matches!(ask(b"{\"cmd\":\"show-info\"}\n"), Reply::Info(_)));
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
        // A histogram's samples are its name plus _bucket, _sum or _count.
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|sfx| {
                name.strip_suffix(sfx)
                    .filter(|base| types.get(*base).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(&name)
            .to_string();
        assert!(
            types.contains_key(&family),
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
    let d = example_daemon("metrics");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let h = sluice_control::spawn_metrics(addr, d.state.clone()).unwrap();
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
    assert_eq!(q("sluice_queue_backlog_packets"), Some(def.qlen as f64));
    assert_eq!(
        q("sluice_queue_backlog_bytes"),
        Some(def.backlog_bytes as f64)
    );
    assert_eq!(q("sluice_queue_limit_packets"), Some(10.0));
    assert_eq!(q("sluice_queue_ecn_marks_total"), Some(0.0));
    let drops = [
        ("iface", "wan0"),
        ("queue", "q_def"),
        ("reason", "queue-full"),
    ];
    assert_eq!(
        m.get("sluice_queue_dropped_packets_total", &drops),
        Some(11.0)
    );
    // The sojourn histogram counts every packet the queue forwarded.
    assert_eq!(m.types["sluice_queue_sojourn_seconds"], "histogram");
    assert_eq!(
        q("sluice_queue_sojourn_seconds_count"),
        Some(def.passed_packets as f64)
    );
    let inf = [("iface", "wan0"), ("queue", "q_def"), ("le", "+Inf")];
    assert_eq!(
        m.get("sluice_queue_sojourn_seconds_bucket", &inf),
        Some(def.passed_packets as f64)
    );
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
    assert_eq!(
        m.get("sluice_iface_dropped_packets_total", &cause),
        Some(11.0)
    );
    // No untyped family with the interface inside a value: the example's
    // I/O stat is no interface's, and has no family.
    assert!(!m.types.contains_key("sluice_io"), "{:?}", m.types);
    assert_eq!(m.types["sluice_queue_dropped_packets_total"], "counter");
    assert_eq!(m.types["sluice_queue_backlog_packets"], "gauge");

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
