//! Slow local clients against a running `sluice run` (issue #12 item 6):
//! more trickling clients than the caps (4 on the control socket, 8 on
//! `/metrics`) neither delay `sluice show info` or a scrape past a second
//! (each is served or refused at once), nor outlive their 2 s deadline,
//! nor touch forwarding; `show info` counts the refused.
//!
//! Needs root, `ip`, `ping`, `python3` (scripts/setup.sh); otherwise SKIP,
//! or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::Reply;
use sluice_testkit::{bridge_lab, Sluice, INJECT};
use std::time::{Duration, Instant};

const METRICS: &str = "127.0.0.1:9188";
/// How long the slow clients keep trickling (far past the 2 s deadline).
const TRICKLE_S: &str = "6";
/// Longest wait allowed for one answer (served or refused).
const ANSWER_MAX: Duration = Duration::from_secs(1);

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

#[test]
fn slow_clients_neither_block_control_nor_metrics_nor_forwarding() {
    let Some((_serial, mut lab)) = bridge_lab("sc", &["ip", "ping", "python3"]) else {
        return;
    };
    let b = bin();
    let conf = "altq on $ext_if hfsc bandwidth 10Mb queue { up }\n\
        queue up bandwidth 100% hfsc(default)\n";
    lab.start_sluice(&b, conf, &["--metrics", METRICS])
        .unwrap_or_else(|e| panic!("{e}"));
    let shaper = lab.shaper.clone();
    let ctl = format!("unix:{}", lab.control_path());
    let http = format!("tcp:{METRICS}");
    let t0 = Instant::now();
    let mut slow = Vec::new();
    for (k, (target, n)) in [(ctl.as_str(), 6), (http.as_str(), 12)]
        .into_iter()
        .enumerate()
    {
        let out = lab.dir.join(format!("trickle{k}.out"));
        let ns = n.to_string();
        let cmd = ["python3", INJECT, "trickle", target, &ns, TRICKLE_S];
        let id = lab.topo.spawn(&shaper, &cmd, Some(&out)).expect("trickle");
        slow.push((id, out, n));
    }
    std::thread::sleep(Duration::from_millis(500));

    // Until the slow clients' deadline has passed and a little more: every
    // request answered (or refused) within a second, and served in the end.
    let (mut info_served, mut scrape_served) = (0, 0);
    let mut slowest = Duration::ZERO;
    while t0.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        let out = lab.ctl(&b, &["show", "info", "--json"]).unwrap();
        slowest = slowest.max(t.elapsed());
        if matches!(
            serde_json::from_slice::<Reply>(&out.stdout),
            Ok(Reply::Info(_))
        ) {
            info_served += 1;
        }
        let t = Instant::now();
        let out = lab
            .topo
            .exec_unchecked(
                &shaper,
                &["python3", INJECT, "get", METRICS, "/metrics", "5"],
            )
            .unwrap();
        slowest = slowest.max(t.elapsed().saturating_sub(Duration::from_millis(150)));
        let s = String::from_utf8_lossy(&out.stdout);
        let status: u32 = s
            .split_whitespace()
            .next()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        assert!(
            status == 200 || status == 503,
            "a scrape got no answer ({s:?}) after {:?}",
            t0.elapsed()
        );
        scrape_served += u32::from(status == 200);
        assert!(lab.ping_once(), "forwarding stalled behind slow clients");
        std::thread::sleep(Duration::from_millis(200));
    }
    let info = lab.info(&b).unwrap_or_else(|e| panic!("{e}"));
    // Each slow client was closed by the server (at its deadline, or at
    // once when refused), none held until the client gave up.
    let mut closed = Vec::new();
    for (id, out, n) in slow {
        let _ = lab.topo.wait(id, Duration::from_secs(10));
        let s = std::fs::read_to_string(&out).unwrap_or_default();
        closed.push((s.trim().parse::<u32>().unwrap_or(0), n));
    }
    eprintln!(
        "slow clients: slowest answer {slowest:?}; show info served {info_served}, \
         scrapes served {scrape_served}; closed by the server {closed:?}; clients {:?}",
        info.clients
    );
    for (c, n) in &closed {
        assert_eq!(c, n, "slow clients still held after {TRICKLE_S} s");
    }
    assert!(slowest < ANSWER_MAX, "an answer took {slowest:?}");
    assert!(info_served > 0, "show info never served");
    assert!(scrape_served > 0, "/metrics never served");
    for server in ["control", "metrics"] {
        let c = info
            .clients
            .iter()
            .find(|c| c.server == server)
            .unwrap_or_else(|| panic!("no clients row for {server}: {:?}", info.clients));
        assert!(
            c.refused > 0,
            "{server}: nothing refused over its cap: {c:?}"
        );
    }
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
