//! flent reads what `sluice lab run` writes: a short `rrul` run's
//! `rrul.flent.gz` is plotted by Debian's flent (`flent -i FILE -p PLOT`),
//! and flent's own statistics of its series are the run's summary.
//!
//! Needs root, the lab's tools (scripts/setup.sh), `flent` and
//! python3-matplotlib; otherwise the test prints a SKIP line and returns,
//! or fails under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit). The run has
//! no shaper: the file's format is under test, not sluice's shaping.

use sluice_lab::model::Summary;
use sluice_testkit::{require_netns, unavailable, Sluice};
use std::path::{Path, PathBuf};
use std::process::Command;

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-flent-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Removes the run directory on every exit path, a failed assertion too.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `flent ARGS…`; its stdout, after asserting that it succeeded.
fn flent(args: &[&str]) -> String {
    let out = Command::new("flent")
        .args(args)
        .output()
        .expect("run flent");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "flent {args:?} failed:\n{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `Mean:` and `Data points:` of `series` in `flent -f stats` output.
fn stats_of(stats: &str, series: &str) -> Option<(f64, u64)> {
    let head = format!(" {series}:");
    let mut lines = stats.lines().skip_while(|l| *l != head).skip(1);
    let (mut mean, mut n) = (None, None);
    for l in lines.by_ref().take_while(|l| l.starts_with("  ")) {
        let mut f = l.split_whitespace();
        match (f.next(), f.next(), f.next()) {
            (Some("Mean:"), Some(v), _) => mean = v.parse().ok(),
            (Some("Data"), Some("points:"), Some(v)) => n = v.parse().ok(),
            _ => {}
        }
    }
    Some((mean?, n?))
}

/// `a` equals `b` to flent's six printed decimals (relative for large values).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 2e-6 + 1e-6 * b.abs()
}

fn is_png(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.len() > 1000 && b.starts_with(b"\x89PNG\r\n\x1a\n"))
}

/// Whether the Python that runs flent (its `#!` line) imports matplotlib,
/// which flent's plots need.
fn flent_has_matplotlib() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let Some(flent) = std::env::split_paths(&path)
        .map(|d| d.join("flent"))
        .find(|p| p.is_file())
    else {
        return false;
    };
    let text = std::fs::read_to_string(flent).unwrap_or_default();
    let Some(mut shebang) = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .map(|l| l.split_whitespace())
    else {
        return false;
    };
    let Some(interp) = shebang.next() else {
        return false;
    };
    Command::new(interp)
        .args(shebang)
        .args(["-c", "import matplotlib"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn flent_plots_a_lab_run_and_its_statistics_are_the_runs() {
    let Some(_serial) = require_netns(&["iperf3", "ss", "tc", "irtt", "flent"]) else {
        return;
    };
    if !flent_has_matplotlib() {
        unavailable(
            "flent cannot plot without python3-matplotlib",
            "run scripts/setup.sh as root",
        );
        return;
    }
    let dir = out_dir("rrul");
    let _cleanup = Cleanup(dir.clone());
    let sluice = Sluice::locate(env!("CARGO_BIN_EXE_sluice"));
    let args = ["run", "rrul", "--shaper", "none", "--duration", "4"];
    let out = sluice.lab(&args, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "sluice lab run rrul failed:\n{stderr}"
    );
    let s: Summary = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the summary's JSON ({e}):\n{stderr}"));
    let file = dir.join("rrul.flent.gz");
    let file_s = file.to_str().expect("utf-8 path");

    // The plots people ask flent for draw from the file.
    for plot in ["all_scaled", "totals", "ping_cdf"] {
        let png = dir.join(format!("{plot}.png"));
        flent(&["-i", file_s, "-p", plot, "-o", png.to_str().unwrap()]);
        assert!(is_png(&png), "flent -p {plot} drew no PNG");
    }

    // Over the loaded phase, flent's means are summary.json's: the link's
    // rates per direction and the ping RTT, from the same samples.
    let p = s
        .phases
        .iter()
        .find(|p| p.name == "rrul")
        .expect("an rrul phase");
    let cutoff = format!("{},{}", p.start_s, p.end_s);
    let stats = flent(&["-i", file_s, "-f", "stats", "--data-cutoff", &cutoff]);
    let expect = [
        ("TCP download sum", p.down_bps / 1e6),
        ("TCP upload sum", p.up_bps / 1e6),
        ("Ping (ms) ICMP", p.latency_ms.expect("answered pings").mean),
    ];
    for (series, want) in expect {
        let (mean, n) = stats_of(&stats, series)
            .unwrap_or_else(|| panic!("no figures for {series} in:\n{stats}"));
        assert!(n >= 5, "{series}: {n} samples in a loaded phase of 4 s");
        assert!(close(mean, want), "{series}: flent {mean}, summary {want}");
    }
    assert!(
        p.down_bps > 1e6 && p.up_bps > 1e5,
        "an rrul phase without load: {p:?}"
    );
    // irtt's round trips are flent's UDP ping.
    let (udp, n) = stats_of(&stats, "Ping (ms) UDP BE1").expect("irtt as Ping (ms) UDP BE1");
    assert!(n >= 20 && udp > 0.0, "irtt: {n} samples, mean {udp} ms");

    // Each flow's goodput is its series' mean (iperf3's end figure, as
    // flent keeps netperf's), and the series has iperf3's intervals.
    let whole = flent(&["-i", file_s, "-f", "stats"]);
    for f in &s.flows {
        let name = match f.dir {
            sluice_lab::model::Dir::Down => "TCP download BE",
            sluice_lab::model::Dir::Up => "TCP upload BE",
        };
        let want = f.goodput_bps.expect("iperf3's goodput") / 1e6;
        let (mean, n) = stats_of(&whole, name).unwrap_or_else(|| panic!("no {name} in:\n{whole}"));
        assert!(n >= 3, "{name}: {n} intervals");
        assert!(close(mean, want), "{name}: flent {mean}, iperf3 {want}");
    }
}
