//! The metrics server's web dashboard (issue #40 item 3) in headless
//! Chromium, under real traffic: `sluice run --metrics` in the lab's
//! shaper namespace, an iperf3 transfer each way through it, and the page
//! loaded twice a few seconds apart with `--dump-dom`. Each time the
//! charts drew (SVG paths with points), and the numbers the page wrote
//! into its direction sections' `data-` attributes lie between two
//! `sluice show … --json` taken around the load (so they match within one
//! interval); between the two loads they moved. A third load takes a
//! screenshot (`target/tmp/dashboard.png`) for a person to look at.
//!
//! Needs root, `ip`, `ping`, `iperf3`, `ss`, `chromium` (scripts/setup.sh);
//! otherwise SKIP, or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::{InfoReply, Reply};
use sluice_lab::{BridgeLab, SERVER_IP};
use sluice_testkit::{require_netns, Sluice};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Inside the shaper's namespace: its own loopback.
const METRICS: &str = "127.0.0.1:9188";
/// Rates of the two directions.
const DOWN_BPS: u64 = 20_000_000;
const UP_BPS: u64 = 8_000_000;
/// Virtual time a load runs the page for: six polls and two host samples.
const BUDGET_MS: &str = "6500";
/// The `y` of a chart's zero line: the page's chart() draws 130 units
/// high with 16 below the axis.
const ZERO_Y: f64 = 114.0;
/// A load that takes longer than this has hung: it is killed.
const BROWSER_LIMIT: Duration = Duration::from_secs(25);

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// Both directions shaped (at [`DOWN_BPS`] and [`UP_BPS`]), with state.
const CONF: &str = "queue down on $int_if bandwidth 20M\n\
    queue dl parent down bandwidth 20M flows 1024 qlimit 1024 default\n\
    queue up on $ext_if bandwidth 8M\n\
    queue ul parent up bandwidth 8M flows 1024 qlimit 1024 default\n\
    pass out on $ext_if keep state\n";

/// A headless Chromium in `ns` (its own process group, killed with its
/// children when dropped, on every exit path).
struct Browser {
    child: Child,
}

impl Browser {
    /// Loads the dashboard with `args` (`--dump-dom`, `--screenshot=…`)
    /// and waits for it to end; its stdout.
    fn load(ns: &str, dir: &Path, args: &[&str]) -> String {
        let out = dir.join("chromium.out");
        let profile = dir.join("chromium-profile");
        let url = format!("http://{METRICS}/");
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            ns,
            "chromium",
            "--headless",
            "--no-sandbox",
        ])
        .args(["--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--virtual-time-budget={BUDGET_MS}"))
        .args(args)
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("chromium's output file"))
        .stderr(Stdio::null())
        .process_group(0);
        let mut b = Browser {
            child: cmd.spawn().expect("start chromium"),
        };
        let t0 = Instant::now();
        // Polled every 50 ms up to BROWSER_LIMIT.
        loop {
            if let Some(st) = b.child.try_wait().expect("wait for chromium") {
                assert!(st.success(), "chromium {args:?}: {st}");
                break;
            }
            assert!(t0.elapsed() < BROWSER_LIMIT, "chromium {args:?} hung");
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(b);
        std::fs::read_to_string(&out).expect("chromium's output")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group: the browser, its zygote and renderers.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The opening tag of the element with `id` in `dom`, and its content
/// up to the next `</section>`.
fn section<'a>(dom: &'a str, id: &str) -> (&'a str, &'a str) {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} on the page:\n{dom}"));
    let start = dom[..at].rfind('<').unwrap();
    let end = start + dom[start..].find('>').unwrap();
    let close = end + dom[end..].find("</section>").unwrap_or(dom.len() - end);
    (&dom[start..end], &dom[end..close])
}

fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=\"");
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    &tag[at..at + tag[at..].find('"').unwrap()]
}

fn num(tag: &str, name: &str) -> u64 {
    attr(tag, name)
        .parse()
        .unwrap_or_else(|e| panic!("{name} in {tag}: {e}"))
}

/// The `y` of each point drawn in a chart's series (`d="M x y L x y …"`;
/// SVG's `y` grows downwards, the chart's zero is the largest).
fn points(body: &str, series: &str) -> Vec<f64> {
    let key = format!("data-series=\"{series}\" d=\"");
    let at = body
        .find(&key)
        .unwrap_or_else(|| panic!("no series {series}"))
        + key.len();
    let d = &body[at..at + body[at..].find('"').unwrap()];
    d.split(['M', 'L'])
        .filter_map(|p| p.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

fn info(lab: &BridgeLab, b: &str) -> InfoReply {
    lab.info(b).unwrap_or_else(|e| panic!("{e}\n{}", lab.log()))
}

fn tx_bytes(i: &InfoReply, iface: &str) -> u64 {
    i.counters
        .iter()
        .find(|c| c.name == iface)
        .unwrap()
        .tx_bytes
}

fn verdicts(lab: &BridgeLab, b: &str) -> Vec<(String, String)> {
    match lab.show(b, "health") {
        Ok(Reply::Health(h)) => h
            .directions
            .into_iter()
            .map(|d| (d.iface, d.verdict))
            .collect(),
        other => panic!("show health: {other:?}"),
    }
}

/// One `--dump-dom` load between two `show` calls: each direction's
/// numbers on the page lie between theirs. The page's tx counters.
fn checked_load(lab: &BridgeLab, b: &str, ns: &str) -> [u64; 2] {
    let (v0, before) = (verdicts(lab, b), info(lab, b));
    let dom = Browser::load(ns, &lab.dir, &["--dump-dom"]);
    let (after, v1) = (info(lab, b), verdicts(lab, b));
    let (main, _) = section(&dom, "dash");
    assert!(num(main, "data-updates") >= 5, "{main}");
    let mut seen = [0; 2];
    for (i, (iface, rate)) in [("lan0", DOWN_BPS), ("wan0", UP_BPS)].iter().enumerate() {
        let (tag, body) = section(&dom, &format!("dir-{iface}"));
        let tx = num(tag, "data-tx-bytes");
        let (lo, hi) = (tx_bytes(&before, iface), tx_bytes(&after, iface));
        assert!(
            (lo..=hi).contains(&tx),
            "{iface}: page {tx}, show {lo}..{hi}"
        );
        assert!(lo < hi, "{iface}: no traffic between the two shows");
        assert_eq!(num(tag, "data-rate-bps"), *rate, "{tag}");
        assert!(num(tag, "data-points") >= 4, "{tag}");
        let verdict = attr(tag, "data-verdict");
        assert!(
            [&v0, &v1]
                .iter()
                .any(|v| v.contains(&(iface.to_string(), verdict.to_string()))),
            "{iface}: page says {verdict}, show health {v0:?} then {v1:?}"
        );
        for series in ["sent", "rate", "drops"] {
            assert!(points(body, series).len() >= 4, "{iface} {series}: {body}");
        }
        // Polls milliseconds apart (virtual time) may see no frame sent
        // between two, not all of them.
        let sent = points(body, "sent");
        assert!(
            sent.iter().any(|y| *y < ZERO_Y),
            "{iface}: nothing sent: {sent:?}"
        );
        seen[i] = tx;
    }
    let (_, hosts) = section(&dom, "hosts");
    assert!(hosts.contains("data-host=\"10.77.0.1\""), "{hosts}");
    seen
}

#[test]
fn the_dashboard_draws_live_numbers_that_match_show() {
    let Some(_serial) = require_netns(&["ping", "iperf3", "ss", "chromium"]) else {
        return;
    };
    let t0 = Instant::now();
    let mut lab = BridgeLab::new("db").expect("namespaces");
    let b = bin();
    lab.start_sluice(&b, CONF, &["--metrics", METRICS])
        .unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = (lab.server.clone(), lab.client.clone());
    let srv = sluice_lab::iperf3::server(&mut lab.topo, &server, 5341).expect("iperf3 server");
    let load = lab
        .topo
        .spawn(
            &client,
            &[
                "iperf3", "-c", SERVER_IP, "-p", "5341", "-t", "40", "--bidir",
            ],
            None,
        )
        .expect("iperf3 client");
    std::thread::sleep(Duration::from_secs(2));
    let ns = lab.shaper.name().to_string();

    let first = checked_load(&lab, &b, &ns);
    std::thread::sleep(Duration::from_secs(3));
    let second = checked_load(&lab, &b, &ns);
    for i in 0..2 {
        assert!(
            second[i] > first[i],
            "the numbers did not move: {first:?} {second:?}"
        );
    }

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    Browser::load(
        &ns,
        &lab.dir,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500",
            "--hide-scrollbars",
        ],
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        png.len()
    );
    eprintln!(
        "dashboard_chromium: screenshot {} ({} bytes), {:.1} s",
        shot.display(),
        png.len(),
        t0.elapsed().as_secs_f64()
    );
    let _ = lab.topo.stop(load, "TERM");
    let _ = lab.topo.stop(srv, "TERM");
}
