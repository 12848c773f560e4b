//! The lab's report from synthetic runs: the files a run directory and a
//! comparison hold, that they parse back, that the pictures are pictures of
//! the right size, that the page links only what exists, and the terminal
//! table's layout. Set `SLUICE_REPORT_SAMPLES=DIR` to keep the outputs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sluice_lab::analysis;
use sluice_lab::model::*;
use sluice_lab::report;
use sluice_lab::scenario;

/// A deterministic noise source (xorshift), so runs are reproducible.
struct Noise(u64);

impl Noise {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How a synthetic run behaves.
struct Profile {
    idle_ms: f64,
    /// RTT the queue settles at under load, reached after `ramp_s`.
    loaded_ms: f64,
    ramp_s: f64,
    /// Share of the link a bulk flow gets.
    util: f64,
    /// Share of the download left while the upload also runs (ACK starvation).
    down_under_upload: f64,
    /// Probability that a probe is lost under load.
    loss: f64,
}

const BLOATED: Profile = Profile {
    idle_ms: 20.0,
    loaded_ms: 2050.0,
    ramp_s: 8.0,
    util: 0.95,
    down_under_upload: 0.22,
    loss: 0.01,
};
const SHAPED: Profile = Profile {
    idle_ms: 20.0,
    loaded_ms: 32.0,
    ramp_s: 0.5,
    util: 0.9,
    down_under_upload: 0.97,
    loss: 0.0,
};

fn synth(s: &Scenario, shaper: &str, p: &Profile, seed: u64) -> RunResult {
    let mut rng = Noise(seed | 1);
    let windows = s.phase_windows();
    let phase_at = |t: f64| windows.iter().position(|&(a, b)| t >= a && t < b);
    let load = |t: f64| {
        phase_at(t)
            .map(|i| s.load_in_phase(i))
            .unwrap_or((false, false))
    };
    let started = |t: f64| phase_at(t).map(|i| t - windows[i].0).unwrap_or(0.0);
    let rtt_at = |t: f64, rng: &mut Noise| {
        let (d, u) = load(t);
        let jitter = rng.next() * 2.0;
        if !(d || u) {
            return Some(p.idle_ms + jitter);
        }
        if rng.next() < p.loss {
            return None;
        }
        let k = (started(t) / p.ramp_s).min(1.0);
        Some(p.idle_ms + (p.loaded_ms - p.idle_ms) * k * (0.9 + 0.2 * rng.next()) + jitter)
    };
    let mut series = Series::default();
    let end = s.total_secs();
    let step = f64::from(s.ping_interval_ms) / 1e3;
    let n = (end / step).round() as usize;
    for i in 0..n {
        let t = i as f64 * step;
        let rtt_ms = rtt_at(t, &mut rng);
        series.ping.push(PingSample { t_s: t, rtt_ms });
    }
    for i in 1..=(end / 0.5) as usize {
        let t = i as f64 * 0.5;
        let (d, u) = load(t - 0.01);
        let l = &s.link;
        let wobble = 0.95 + 0.1 * rng.next();
        let mut down = if d {
            l.down_bps as f64 * p.util * wobble
        } else {
            0.0
        };
        if d && u {
            down *= p.down_under_upload;
        }
        let up = if u {
            l.up_bps as f64 * p.util * wobble
        } else {
            0.0
        };
        // The other direction carries the ACKs: a few percent.
        let (down, up) = (down + up * 0.03, up + down * 0.03);
        series.rate.push(RateSample {
            t_s: t,
            down_bps: down,
            up_bps: up,
        });
    }
    if let Some(spec) = &s.irtt {
        let (a, b) = (windows[spec.from].0, windows[spec.to].1);
        let step = f64::from(spec.interval_ms) / 1e3;
        for i in 0..((b - a) / step) as usize {
            let t = a + i as f64 * step;
            let rtt = rtt_at(t, &mut rng);
            let split = 0.4 + 0.2 * rng.next();
            series.irtt.push(IrttSample {
                t_s: t,
                rtt_ms: rtt,
                up_owd_ms: rtt.map(|r| r * split),
                down_owd_ms: rtt.map(|r| r * (1.0 - split)),
            });
        }
    }
    for f in &s.flows {
        series.flows.push(FlowRecord {
            dir: f.dir,
            streams: f.streams,
            window: f.window,
            host: f.host,
            start_s: windows[f.from].0,
            end_s: windows[f.to].1,
            goodput_bps: Some(0.9 * s.link.up_bps as f64),
            retransmits: Some(12),
            error: None,
        });
    }
    analysis::finish(s, shaper, series, "2026-11-22T05:00:00Z".into(), Vec::new())
}

fn out_dir(name: &str) -> PathBuf {
    let base = match std::env::var_os("SLUICE_REPORT_SAMPLES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-tests"),
    };
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn names(paths: &[PathBuf]) -> BTreeSet<String> {
    paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The file names of `paths` are exactly `want`.
fn assert_names(paths: &[PathBuf], want: &[&str]) {
    let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
    assert_eq!(names(paths), want);
}

/// Width and height from a PNG's IHDR, after checking the signature.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert!(b.len() > 24, "{path:?} too short");
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{path:?} is not a PNG");
    assert_eq!(&b[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

fn assert_svg(path: &Path) {
    let s = std::fs::read_to_string(path).unwrap();
    let start = s.trim_start();
    assert!(
        start.starts_with("<svg") || start.starts_with("<?xml"),
        "{path:?}"
    );
    assert!(s.contains("<svg"), "{path:?}");
    assert!(s.trim_end().ends_with("</svg>"), "{path:?} is not closed");
    assert!(s.contains("<text"), "{path:?} has no text: labels missing");
}

/// Every `src="…"` and `href="…"` of the page names an existing file.
fn assert_links_exist(page: &Path) -> Vec<String> {
    let html = std::fs::read_to_string(page).unwrap();
    let dir = page.parent().unwrap();
    let mut refs = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for (i, _) in html.match_indices(attr) {
            let rest = &html[i + attr.len()..];
            let target = &rest[..rest.find('"').unwrap()];
            assert!(!target.contains("://"), "external reference {target}");
            assert!(
                dir.join(target).is_file(),
                "{page:?} links {target}, which does not exist"
            );
            refs.push(target.to_string());
        }
    }
    refs
}

/// One synthetic run of `s` per `(shaper, profile, seed)`.
fn synth_each(s: &Scenario, runs: &[(&str, &Profile, u64)]) -> Vec<RunResult> {
    runs.iter()
        .map(|&(shaper, p, seed)| synth(s, shaper, p, seed))
        .collect()
}

fn csv_rows(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().count() - 1
}

#[test]
fn a_bloated_run_directory_has_every_file_and_they_read_back() {
    let run = synth(&scenario::tcp_1up(), "none", &BLOATED, 7);
    assert_eq!(
        run.summary.grade.overall, "F",
        "the synthetic run is bloated"
    );
    let dir = out_dir("tcp_1up-none");
    let paths = report::write_run(&dir, &run).unwrap();
    assert_eq!(paths[0], dir.join("report.html"));
    for p in &paths {
        assert!(p.is_file(), "{p:?} returned but not written");
    }
    assert_names(
        &paths,
        &[
            "report.html",
            "summary.json",
            "rate.csv",
            "ping.csv",
            "flows.csv",
            "timeline.png",
            "timeline.svg",
            "cdf.png",
            "cdf.svg",
        ],
    );

    let back: Summary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(back, run.summary);
    assert_eq!(csv_rows(&dir.join("rate.csv")), run.series.rate.len());
    assert_eq!(csv_rows(&dir.join("ping.csv")), run.series.ping.len());
    assert_eq!(csv_rows(&dir.join("flows.csv")), run.series.flows.len());
    // A lost probe is an empty field, as many as the series has.
    let ping = std::fs::read_to_string(dir.join("ping.csv")).unwrap();
    let lost = run
        .series
        .ping
        .iter()
        .filter(|p| p.rtt_ms.is_none())
        .count();
    assert!(lost > 0, "the bloated profile loses probes");
    assert_eq!(ping.lines().filter(|l| l.ends_with(',')).count(), lost);

    assert_eq!(png_size(&dir.join("timeline.png")), (1200, 800));
    assert_eq!(png_size(&dir.join("cdf.png")), (900, 600));
    assert_svg(&dir.join("timeline.svg"));
    assert_svg(&dir.join("cdf.svg"));
    // Phase names and the log axis label are in the pictures.
    let timeline = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(timeline.contains("upload") && timeline.contains("idle again"));
    let cdf = std::fs::read_to_string(dir.join("cdf.svg")).unwrap();
    assert!(cdf.contains("log scale"), "20 ms vs 2 s spans two decades");

    let refs = assert_links_exist(&dir.join("report.html"));
    for f in [
        "timeline.png",
        "timeline.svg",
        "cdf.png",
        "summary.json",
        "ping.csv",
    ] {
        assert!(refs.iter().any(|r| r == f), "report.html does not show {f}");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("grade g-F"), "the grade is shown");
    assert!(!html.contains("<script"), "no scripts");
}

#[test]
fn a_voip_run_writes_irtt_and_shows_the_call() {
    let run = synth(&scenario::voip(), "voip-fqcodel.conf", &SHAPED, 11);
    let v = run.summary.voip.expect("irtt ran during load");
    assert!(v.mos > 4.0, "{v:?}");
    let dir = out_dir("voip-shaped");
    let paths = report::write_run(&dir, &run).unwrap();
    assert!(names(&paths).contains("irtt.csv"));
    assert_eq!(csv_rows(&dir.join("irtt.csv")), run.series.irtt.len());
    let html = std::fs::read_to_string(&paths[0]).unwrap();
    assert!(html.contains("VoIP") && html.contains(&format!("{:.2}", v.mos)));
    assert!(std::fs::read_to_string(dir.join("timeline.svg"))
        .unwrap()
        .contains("irtt RTT"));
    assert_links_exist(&paths[0]);
    let table = report::table(&[&run.summary]);
    assert!(
        table.contains("MOS") && table.contains(&format!("{:.2}", v.mos)),
        "{table}"
    );
}

#[test]
fn a_comparison_shares_scales_and_links_each_run() {
    let runs = synth_each(
        &scenario::ack_priority(),
        &[("none", &BLOATED, 3), ("priq-ack.conf", &SHAPED, 5)],
    );
    let base = out_dir("ack_priority-compare");
    let run_dirs: Vec<PathBuf> = ["none", "priq-ack"]
        .iter()
        .map(|n| base.join("runs").join(n))
        .collect();
    for (r, d) in runs.iter().zip(&run_dirs) {
        report::write_run(d, r).unwrap();
    }
    let dir = base.join("compare");
    let paths = report::write_compare(&dir, &runs, &run_dirs).unwrap();
    assert_eq!(paths[0], dir.join("report.html"));
    assert_names(
        &paths,
        &[
            "report.html",
            "summaries.json",
            "compare_timeline.png",
            "compare_timeline.svg",
            "compare_cdf.png",
            "compare_cdf.svg",
        ],
    );
    let back: Vec<Summary> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summaries.json")).unwrap())
            .unwrap();
    assert_eq!(
        back,
        runs.iter().map(|r| r.summary.clone()).collect::<Vec<_>>()
    );
    assert_eq!(png_size(&dir.join("compare_timeline.png")), (1280, 800));
    assert_eq!(png_size(&dir.join("compare_cdf.png")), (900, 600));
    assert_svg(&dir.join("compare_timeline.svg"));
    assert_svg(&dir.join("compare_cdf.svg"));
    let refs = assert_links_exist(&paths[0]);
    assert!(
        refs.contains(&"../runs/none/report.html".to_string()),
        "{refs:?}"
    );
    assert!(
        refs.contains(&"../runs/priq-ack/report.html".to_string()),
        "{refs:?}"
    );
    // kbit/s on a 512k link, in the picture and in the table.
    assert!(std::fs::read_to_string(dir.join("compare_timeline.svg"))
        .unwrap()
        .contains("kbit/s"));
    let html = std::fs::read_to_string(&paths[0]).unwrap();
    assert!(html.contains("download+upload") && html.contains("priq-ack.conf"));
}

#[test]
fn three_configurations_make_three_columns_and_three_curves() {
    let runs = synth_each(
        &scenario::tcp_1up(),
        &[
            ("none", &BLOATED, 21),
            ("hfsc-qlimit9.conf", &SHAPED, 22),
            ("tc:cake bandwidth 950kbit", &SHAPED, 23),
        ],
    );
    let dir = out_dir("tcp_1up-compare3");
    let paths = report::write_compare(&dir, &runs, &[]).unwrap();
    assert_eq!(png_size(&dir.join("compare_timeline.png")), (3 * 640, 800));
    let cdf = std::fs::read_to_string(dir.join("compare_cdf.svg")).unwrap();
    for r in &runs {
        assert!(
            cdf.contains(&r.summary.shaper),
            "{} has no curve",
            r.summary.shaper
        );
    }
    assert_links_exist(&paths[0]);
}

#[test]
fn a_comparison_without_run_reports_links_nothing_missing() {
    let s = scenario::tcp_1up();
    let runs = vec![synth(&s, "none", &BLOATED, 1)];
    let dir = out_dir("compare-unlinked");
    let paths = report::write_compare(&dir, &runs, &[dir.join("nowhere")]).unwrap();
    assert_links_exist(&paths[0]);
    assert!(std::fs::read_to_string(&paths[0])
        .unwrap()
        .contains("not found"));
}

// ---- the terminal table ----

fn latency(p50: f64, p99: f64) -> Latency {
    Latency {
        mean: p50,
        p50,
        p90: p99,
        p99,
        max: p99,
        samples: 100,
    }
}

/// A phase of the fixed summary: `(start, end)` s, `(down, up)` bit/s.
fn phase(
    name: &str,
    (start_s, end_s): (f64, f64),
    (down_bps, up_bps): (f64, f64),
    lat: Option<Latency>,
    loss_pct: f64,
) -> PhaseSummary {
    PhaseSummary {
        name: name.into(),
        start_s,
        end_s,
        down_bps,
        up_bps,
        latency_ms: lat,
        loss_pct,
        load_down: false,
        load_up: name == "upload",
        down_util_pct: None,
        up_util_pct: (name == "upload").then_some(90.0),
        verdicts: Vec::new(),
    }
}

/// A fixed tcp_1up summary, independent of the analysis.
fn fixed(shaper: &str, loaded: Option<Latency>, grade: &str, added: f64, up_bps: f64) -> Summary {
    Summary {
        scenario: "tcp_1up".into(),
        shaper: shaper.into(),
        link: scenario::tcp_1up().link,
        cc: "cubic".into(),
        ecn: false,
        sack: true,
        timestamps: true,
        attack: None,
        idle_latency_ms: latency(20.4, 22.0),
        phases: vec![
            phase(
                "idle",
                (0.0, 20.0),
                (1200.0, 800.0),
                Some(latency(20.4, 22.0)),
                0.0,
            ),
            phase("upload", (20.0, 50.0), (31_000.0, up_bps), loaded, 1.5),
            phase(
                "idle again",
                (50.0, 70.0),
                (1200.0, 800.0),
                Some(latency(20.5, 21.9)),
                0.0,
            ),
        ],
        voip: None,
        hosts: Vec::new(),
        rate_steps: Vec::new(),
        grade: Grades {
            overall: grade.into(),
            down: None,
            up: Some(grade.into()),
            added_ms: added,
            added_down_ms: None,
            added_up_ms: Some(added),
        },
        flows: Vec::new(),
        warnings: Vec::new(),
        started_at: "t".into(),
        sluice_version: "0.1.0".into(),
    }
}

#[test]
fn table_golden_before_after() {
    let before = fixed(
        "none",
        Some(latency(2083.0, 2310.0)),
        "F",
        2061.0,
        948_000.0,
    );
    let after = fixed(
        "hfsc-qlimit9.conf",
        Some(latency(44.7, 61.2)),
        "B",
        30.5,
        1_010_000.0,
    );
    let got = report::table(&[&before, &after]);
    let want = "\
tcp_1up — link 5M down / 1M up, RTT 20 ms, modem buffer 200 pkts; TCP cubic, ECN off
  phase       shaper                  down           up  ping p50  ping p99   loss
  idle        none                1 kbit/s     1 kbit/s   20.4 ms   22.0 ms  0.0 %
              hfsc-qlimit9.conf   1 kbit/s     1 kbit/s   20.4 ms   22.0 ms  0.0 %
  upload      none               31 kbit/s   948 kbit/s   2083 ms   2310 ms  1.5 %
              hfsc-qlimit9.conf  31 kbit/s  1.01 Mbit/s   44.7 ms   61.2 ms  1.5 %
  idle again  none                1 kbit/s     1 kbit/s   20.5 ms   21.9 ms  0.0 %
              hfsc-qlimit9.conf   1 kbit/s     1 kbit/s   20.5 ms   21.9 ms  0.0 %

  shaper             idle p50  grade  down  up  added under load
  none                20.4 ms      F     -   F          +2061 ms
  hfsc-qlimit9.conf   20.4 ms      B     -   B          +30.5 ms
";
    assert_eq!(got, want, "\n{got}");
}

/// Lines of each section (between blank lines and titles) have one width:
/// the last column is flush right, so equal length means aligned columns.
fn assert_aligned(table: &str) {
    let mut section: Vec<&str> = Vec::new();
    let check = |section: &mut Vec<&str>| {
        let rows: Vec<&&str> = section
            .iter()
            .filter(|l| !l.starts_with("  warning"))
            .collect();
        if let Some(first) = rows.first() {
            let w = first.chars().count();
            for l in &rows {
                assert_eq!(l.chars().count(), w, "misaligned:\n{table}");
            }
        }
        section.clear();
    };
    for line in table.lines() {
        if line.is_empty() || !line.starts_with("  ") {
            check(&mut section);
        } else {
            section.push(line);
        }
    }
    check(&mut section);
}

#[test]
fn table_reads_for_one_and_for_four_configurations_and_two_scenarios() {
    let s = scenario::tcp_1up();
    let a = synth(&s, "none", &BLOATED, 1);
    let b = synth(&s, "hfsc-qlimit9.conf", &SHAPED, 2);
    let c = synth(&s, "tc:cake bandwidth 950kbit", &SHAPED, 3);
    let d = synth(&s, "x.conf", &SHAPED, 4);
    let v = synth(&scenario::voip(), "voip-fqcodel.conf", &SHAPED, 5);
    let one = report::table(&[&a.summary]);
    assert_aligned(&one);
    assert_eq!(
        one.lines().filter(|l| l.contains("upload")).count(),
        1,
        "{one}"
    );
    let four = report::table(&[&a.summary, &b.summary, &c.summary, &d.summary, &v.summary]);
    assert_aligned(&four);
    // Two blocks: tcp_1up with four rows per phase, voip with one.
    assert_eq!(
        four.lines().filter(|l| l.starts_with("tcp_1up — ")).count(),
        1
    );
    assert_eq!(
        four.lines()
            .filter(|l| l.starts_with("voip — link 25M down / 2M up"))
            .count(),
        1
    );
    let upload_group: Vec<&str> = four
        .lines()
        .skip_while(|l| !l.starts_with("  upload"))
        .take(4)
        .collect();
    assert!(
        upload_group[1].contains("hfsc-qlimit9.conf") && upload_group[3].contains("x.conf"),
        "{four}"
    );
    assert!(!four.contains('\u{1b}'), "no colour codes");
}

// ---- degenerate data ----

fn degenerate(name: &str, run: &RunResult) {
    let dir = out_dir(name);
    let paths = report::write_run(&dir, run).unwrap();
    for p in &paths {
        assert!(p.is_file(), "{name}: {p:?}");
    }
    assert_eq!(png_size(&dir.join("timeline.png")), (1200, 800), "{name}");
    assert_eq!(png_size(&dir.join("cdf.png")), (900, 600), "{name}");
    assert_svg(&dir.join("timeline.svg"));
    assert_links_exist(&paths[0]);
    let back: Summary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(back, run.summary, "{name}");
    let t = report::table(&[&run.summary]);
    assert_aligned(&t);
    let cmp = out_dir(&format!("{name}-compare"));
    let paths =
        report::write_compare(&cmp, &[run.clone(), run.clone()], &[dir.clone(), dir]).unwrap();
    assert_links_exist(&paths[0]);
}

#[test]
fn degenerate_runs_do_not_panic_and_still_report() {
    let s = scenario::tcp_1up();
    // Nothing recorded at all.
    let empty = analysis::finish(
        &s,
        "none",
        Series::default(),
        "t".into(),
        vec!["iperf3 missing".into()],
    );
    degenerate("empty", &empty);

    // Every ping of the loaded phase lost.
    let mut r = synth(&s, "none", &BLOATED, 9);
    let (a, b) = s.phase_windows()[1];
    for p in r.series.ping.iter_mut().filter(|p| p.t_s >= a && p.t_s < b) {
        p.rtt_ms = None;
    }
    let all_lost = analysis::finish(&s, "none", r.series, "t".into(), Vec::new());
    degenerate("all-lost", &all_lost);

    // One sample of each kind.
    let one = Series {
        rate: vec![RateSample {
            t_s: 1.0,
            down_bps: 1e6,
            up_bps: 5e5,
        }],
        ping: vec![PingSample {
            t_s: 25.0,
            rtt_ms: Some(6000.0),
        }],
        irtt: vec![IrttSample {
            t_s: 25.0,
            rtt_ms: Some(20.0),
            up_owd_ms: Some(10.0),
            down_owd_ms: Some(10.0),
        }],
        flows: Vec::new(),
        shaper_rate: Vec::new(),
        host_rate: Vec::new(),
        health: Vec::new(),
    };
    degenerate(
        "single",
        &analysis::finish(&s, "none", one, "t".into(), Vec::new()),
    );

    // 0.05 ms next to 60 s, and a non-finite sample the runner should never
    // record but a plot must survive.
    let mut huge = synth(&s, "none", &BLOATED, 13);
    huge.series.ping[0].rtt_ms = Some(0.05);
    huge.series.ping[300].rtt_ms = Some(60_000.0);
    huge.series.rate[3].down_bps = f64::NAN;
    let huge = RunResult {
        summary: analysis::summarize(&s, "none", &huge.series, "t".into(), Vec::new()),
        series: huge.series,
    };
    let dir = out_dir("huge");
    let paths = report::write_run(&dir, &huge).unwrap();
    assert_eq!(png_size(&dir.join("timeline.png")), (1200, 800));
    assert_links_exist(&paths[0]);
    // The NaN is an empty CSV field, not the text "NaN".
    assert!(!std::fs::read_to_string(dir.join("rate.csv"))
        .unwrap()
        .contains("NaN"));
}
