//! `sluice top` read through a real terminal (issue #40 item 2): the
//! daemon runs in the lab's namespaces with a download through it, `top`
//! runs in a detached tmux session of 80×24, and the test reads the screen
//! with `tmux capture-pane`: queue names, the verdict line, a rate that
//! moves between two screens and agrees with `show queues --json` of the
//! same moments, a state's byte count between two `show states --json`
//! taken around the screen, keys (view switch, filter, quit) and the exit
//! status. Then the plain one-shot output with stdout not a terminal.
//!
//! Needs root, `ip`, `iperf3`, `tmux` (scripts/setup.sh); otherwise SKIP,
//! or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::{QueueJson, Reply, StateJson};
use sluice_lab::{BridgeLab, SERVER_IP};
use sluice_testkit::{require_netns, wait_for, Sluice};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// The download shaped at 20 Mbit/s; its connections keep state.
const CONF: &str = "queue tdown on $int_if bandwidth 20M\n\
                    queue tbulk parent tdown bandwidth 20M flows 1024 qlimit 1024 default\n\
                    pass out on $ext_if keep state\n";

/// A tmux server of the test's own (its socket in the lab's directory),
/// killed with all its sessions on every way out.
struct Tmux {
    socket: PathBuf,
}

const SESSION: &str = "top";

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        let o = self.run(&["capture-pane", "-p", "-t", SESSION]);
        assert!(o.status.success(), "capture-pane: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success(), "send-keys {keys:?}");
    }

    fn alive(&self) -> bool {
        self.run(&["has-session", "-t", SESSION]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn queue(lab: &BridgeLab, b: &str, name: &str) -> (Instant, QueueJson) {
    match lab.show(b, "queues") {
        Ok(Reply::Queues(q)) => {
            let at = Instant::now();
            let q = q
                .ifaces
                .into_iter()
                .flat_map(|i| i.queues)
                .find(|q| q.name == name)
                .unwrap_or_else(|| panic!("no queue {name}"));
            (at, q)
        }
        other => panic!("show queues: {other:?}\n{}", lab.log()),
    }
}

fn states(lab: &BridgeLab, b: &str) -> Vec<StateJson> {
    match lab.show(b, "states") {
        Ok(Reply::States(s)) => s.states,
        other => panic!("show states: {other:?}\n{}", lab.log()),
    }
}

/// The cells of the screen's row starting with `first`.
fn row<'a>(screen: &'a str, first: &str) -> Option<Vec<&'a str>> {
    screen
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.first() == Some(&first))
}

/// `8.00Mb/s` in bits a second.
fn rate(cell: &str) -> f64 {
    let v = cell
        .strip_suffix("b/s")
        .unwrap_or_else(|| panic!("rate {cell}"));
    let (num, mul) = match v.chars().last() {
        Some('K') => (&v[..v.len() - 1], 1e3),
        Some('M') => (&v[..v.len() - 1], 1e6),
        Some('G') => (&v[..v.len() - 1], 1e9),
        _ => (v, 1.0),
    };
    num.parse::<f64>().unwrap_or_else(|_| panic!("rate {cell}")) * mul
}

/// `12K` as the range of counts it stands for (top rounds down).
fn count(cell: &str) -> (u64, u64) {
    let (num, unit) = match cell.chars().last() {
        Some('K') => (&cell[..cell.len() - 1], 1_000),
        Some('M') => (&cell[..cell.len() - 1], 1_000_000),
        Some('G') => (&cell[..cell.len() - 1], 1_000_000_000),
        _ => (cell, 1),
    };
    let n: u64 = num.parse().unwrap_or_else(|_| panic!("count {cell}"));
    (n * unit, (n + 1) * unit - 1)
}

#[test]
fn top_in_tmux_shows_the_daemon_live() {
    let Some(_serial) = require_netns(&["iperf3", "tmux"]) else {
        return;
    };
    let mut lab = BridgeLab::new("tp").expect("namespaces");
    let b = bin();
    lab.start_sluice(&b, CONF, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let tmux = Tmux {
        socket: lab.dir.join("tmux.sock"),
    };
    let status = lab.dir.join("top.status");
    // The exit status is written where the test can read it once the
    // session has ended.
    let cmd = format!(
        "{b} top -d 1 --control {}; echo $? > {}",
        lab.control_path(),
        status.display()
    );
    let o = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        SESSION,
        "-x",
        "80",
        "-y",
        "24",
        &cmd,
    ]);
    assert!(o.status.success(), "tmux new-session: {o:?}");

    // Idle: the first screen after a rate could be measured.
    std::thread::sleep(Duration::from_millis(2500));
    let idle = tmux.screen();
    for name in ["tdown", "tbulk", "QUEUE", "RATE", "P99"] {
        assert!(idle.contains(name), "{name} missing:\n{idle}");
    }
    assert!(
        idle.contains("download lan0: not enough traffic to say"),
        "the verdict line:\n{idle}"
    );
    assert!(idle.lines().count() <= 24 && idle.lines().all(|l| l.chars().count() <= 80));
    let idle_rate = rate(row(&idle, "tbulk").expect("tbulk row")[2]);

    // Loaded: a download through the shaper, at half its rate so that its
    // rate is steady and two readings over different intervals compare.
    let port = 5341;
    let srv = sluice_lab::iperf3::server(&mut lab.topo, &lab.server.clone(), port)
        .expect("iperf3 server");
    let client = lab.client.clone();
    let load = lab
        .topo
        .spawn(
            &client,
            &[
                "iperf3",
                "-c",
                SERVER_IP,
                "-p",
                &port.to_string(),
                "-t",
                "25",
                "-R",
                "-b",
                "10M",
            ],
            None,
        )
        .expect("iperf3 client");
    std::thread::sleep(Duration::from_secs(5));
    // The screen's rate is over top's last interval, which lies between
    // these two readings of the counter (each one delay from the screen).
    let (t0, q0) = queue(&lab, &b, "tbulk");
    std::thread::sleep(Duration::from_millis(1100));
    let loaded = tmux.screen();
    std::thread::sleep(Duration::from_millis(1100));
    let (t1, q1) = queue(&lab, &b, "tbulk");
    let cells = row(&loaded, "tbulk").unwrap_or_else(|| panic!("tbulk row:\n{loaded}"));
    let shown = rate(cells[2]);
    let json = (q1.bytes - q0.bytes) as f64 * 8.0 / (t1 - t0).as_secs_f64();
    eprintln!("top_tmux: idle {idle_rate:.0} b/s, loaded {shown:.0} b/s on screen, {json:.0} b/s from show --json\n{loaded}");
    assert!(
        shown > 5e6 && shown != idle_rate,
        "the rate moved:\n{idle}\n{loaded}"
    );
    assert!(
        (shown - json).abs() <= 0.2 * json,
        "screen {shown} b/s against show --json {json} b/s\n{loaded}"
    );

    // The states view, filtered down to the download's data connection.
    let data = states(&lab, &b)
        .into_iter()
        .max_by_key(|s| s.bytes[0] + s.bytes[1])
        .expect("a state");
    tmux.keys(&["3"]);
    tmux.keys(&["/"]);
    tmux.keys(&["-l", &format!(":{}", data.src_port)]);
    tmux.keys(&["Enter"]);
    let before = states(&lab, &b);
    std::thread::sleep(Duration::from_millis(1500));
    let screen = tmux.screen();
    let after = states(&lab, &b);
    let total = |v: &[StateJson]| {
        v.iter()
            .find(|s| s.src_port == data.src_port && s.src == data.src)
            .map(|s| s.bytes[0] + s.bytes[1])
            .expect("the data connection's state")
    };
    let src = format!("{}:{}", data.src, data.src_port);
    let cells = row(&screen, "tcp").unwrap_or_else(|| panic!("a tcp row:\n{screen}"));
    assert_eq!(cells[1], src, "{screen}");
    assert_eq!(
        screen.lines().filter(|l| l.starts_with("tcp ")).count(),
        1,
        "the filter leaves one state:\n{screen}"
    );
    let (lo, hi) = count(cells[5]);
    assert!(
        hi >= total(&before) && lo <= total(&after),
        "bytes {} on screen, {}..{} from show --json\n{screen}",
        cells[5],
        total(&before),
        total(&after)
    );
    assert!(screen.contains("SOURCE") && screen.contains(&format!("/:{}", data.src_port)));

    // Hosts (`/` Enter: no filter; Escape is not sent, tmux would read
    // Escape, 2 as Alt-2), then autorate's view of the shaped interface.
    tmux.keys(&["/"]);
    tmux.keys(&["Enter"]);
    tmux.keys(&["2"]);
    let shows = |want: &dyn Fn(&str) -> bool, what: &str| {
        let mut last = String::new();
        let seen = wait_for(Duration::from_secs(3), || {
            last = tmux.screen();
            want(&last)
        });
        assert!(seen, "{what} missing:\n{last}");
        last
    };
    // The client's row with a rate (one poll after a view switch may
    // have none yet).
    let received = |s: &str| row(s, &data.src).is_some_and(|c| c.get(3) != Some(&"-"));
    let hosts = shows(&received, &format!("{}'s rate", data.src));
    let client = row(&hosts, &data.src).expect("the client's row");
    assert!(rate(client[3]) > 5e6, "the client receives:\n{hosts}");
    tmux.keys(&["Right", "Right"]);
    let want = "lan0: shaped at 20.0Mb/s, output";
    let chart = shows(&|s: &str| s.contains(want), want);
    eprintln!("{hosts}\n{chart}");
    assert!(chart.contains("no autorate"), "{chart}");

    // The help, then q: top ends, with status 0, and the session with it.
    tmux.keys(&["h"]);
    assert!(wait_for(Duration::from_secs(2), || tmux
        .screen()
        .contains("sluice top: keys")));
    // Any key closes it (not Escape: tmux would read Escape, q as Alt-q).
    tmux.keys(&["x"]);
    assert!(wait_for(Duration::from_secs(2), || !tmux
        .screen()
        .contains("sluice top: keys")));
    tmux.keys(&["q"]);
    assert!(
        wait_for(Duration::from_secs(3), || !tmux.alive()),
        "top did not quit"
    );
    let code = std::fs::read_to_string(&status).unwrap_or_default();
    assert_eq!(code.trim(), "0", "top's exit status");

    // Not a terminal: one plain report, every view, rates over the delay.
    let o = lab
        .ctl(&b, &["top", "-d", "0.5"])
        .expect("sluice top, piped");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    // The interval is the delay plus the first poll's states and health.
    let secs: f64 = text
        .strip_prefix("sluice top: rates over ")
        .and_then(|t| t.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((0.5..1.5).contains(&secs), "{text}");
    for want in [
        "QUEUE",
        "tbulk",
        "HOST",
        "SOURCE",
        "lan0: shaped at 20.0Mb/s",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    assert!(!text.contains('\x1b'), "no terminal codes:\n{text}");

    let _ = lab.topo.stop(load, "TERM");
    let _ = lab.topo.stop(srv, "TERM");
    lab.stop_sluice().expect("stop");
}
