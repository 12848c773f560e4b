//! The lab's results as people read them: `summary.json` and raw CSV for
//! tools, timeline and CDF plots (PNG + SVG) in the manner of flent, a
//! self-contained `report.html`, and the before/after table on the terminal.
//!
//! # Principles
//! - A run's data is never lost to a presentation problem: JSON and CSV are
//!   written first; the plots run after them, each behind a guard that turns
//!   a missing font, a backend error or even a panic inside the plotting
//!   library into a warning; the HTML is written last and says which plots
//!   are missing and why.
//! - Everything here is a function of a [`RunResult`] (and of the font file):
//!   no clocks, no network, so every output is tested from synthetic runs.
//! - Degenerate data is normal data: empty series, phases where every probe
//!   was lost, a single sample, 20 ms idle next to 6 s of bloat. Axis ranges
//!   are computed here (finite, non-empty) rather than left to the library.
//! - Same quantity, same unit and scale: in a comparison every column shares
//!   its axes so "before" and "after" read at a glance.
//! - Numbers shown are the summary's own (computed by `analysis`); the report
//!   derives only presentation (CDF points, axis ranges, cell text).

mod files;
mod html;
mod plot;
mod table;

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::model::{Dir, FifoKind, RunResult, Summary};
use sluice_time::units;

pub use table::table;

/// Writes a run's directory: `report.html` (returned first), `summary.json`,
/// the CSV series, and `timeline`/`cdf` plots as PNG and SVG when a font is
/// available. Creates `dir` if needed.
pub fn write_run(dir: &Path, run: &RunResult) -> io::Result<Vec<PathBuf>> {
    write_run_with(dir, run, plot::font())
}

/// Writes a comparison of `runs` (each run's own directory in `run_dirs`,
/// same order): `report.html` (returned first), `summaries.json` and the
/// side-by-side plots `compare_timeline` and `compare_cdf`.
pub fn write_compare(
    dir: &Path,
    runs: &[RunResult],
    run_dirs: &[PathBuf],
) -> io::Result<Vec<PathBuf>> {
    write_compare_with(dir, runs, run_dirs, plot::font())
}

/// What became of the plots of one report.
#[derive(Debug, Default)]
struct PlotOutcome {
    /// Stems (`timeline`, `cdf`…) whose PNG and SVG were both written.
    drawn: Vec<&'static str>,
    /// Why some plots are missing, for the HTML and stderr.
    warnings: Vec<String>,
}

impl PlotOutcome {
    /// To stderr, where a failed write (a closed pipe, a full disk) is
    /// ignored: the report files are what counts.
    fn print_warnings(&self) {
        let mut e = io::stderr().lock();
        for w in &self.warnings {
            let _ = writeln!(e, "warning: {w}");
        }
    }

    /// Draws each `(stem, figure, size)` into `dir`, adding the files to
    /// `paths`; a figure that cannot be drawn becomes a warning, not an error
    /// (the data files are written already).
    fn draw(
        &mut self,
        dir: &Path,
        figures: &[(&'static str, &dyn plot::Figure, (u32, u32))],
        paths: &mut Vec<PathBuf>,
    ) {
        for &(stem, fig, size) in figures {
            match plot::render(dir, stem, size, fig) {
                Ok(p) => {
                    self.drawn.push(stem);
                    paths.extend(p);
                }
                Err(e) => self.warnings.push(format!("{stem} plot not drawn: {e}")),
            }
        }
    }
}

/// `write_run` with the font's availability given, so the no-font path is
/// tested on a machine that has the font.
fn write_run_with(
    dir: &Path,
    run: &RunResult,
    font: Result<(), String>,
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = vec![dir.join("report.html")];
    // Data first: nothing after this point may lose it.
    paths.push(files::write_summary(dir, &run.summary)?);
    paths.extend(files::write_series(dir, &run.series)?);
    let data: Vec<String> = paths[1..]
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();

    let mut outcome = PlotOutcome::default();
    match font {
        Ok(()) => {
            let figures: [(&'static str, &dyn plot::Figure, (u32, u32)); 2] = [
                (
                    "timeline",
                    &plot::Timeline {
                        runs: std::slice::from_ref(run),
                    },
                    plot::TIMELINE_SIZE,
                ),
                ("cdf", &plot::PhaseCdf { run }, plot::CDF_SIZE),
            ];
            outcome.draw(dir, &figures, &mut paths);
        }
        Err(e) => outcome.warnings.push(e),
    }
    outcome.print_warnings();
    std::fs::write(&paths[0], html::run_page(run, &data, &outcome))?;
    Ok(paths)
}

fn write_compare_with(
    dir: &Path,
    runs: &[RunResult],
    run_dirs: &[PathBuf],
    font: Result<(), String>,
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = vec![dir.join("report.html")];
    let summaries: Vec<&Summary> = runs.iter().map(|r| &r.summary).collect();
    paths.push(files::write_summaries(dir, &summaries)?);

    let mut outcome = PlotOutcome::default();
    match font {
        Ok(()) if runs.is_empty() => outcome.warnings.push("no runs to compare".into()),
        Ok(()) => {
            let cols = runs.len().min(plot::MAX_COLUMNS) as u32;
            let timeline_size = (plot::COLUMN_WIDTH * cols, plot::TIMELINE_SIZE.1);
            let figures: [(&'static str, &dyn plot::Figure, (u32, u32)); 2] = [
                ("compare_timeline", &plot::Timeline { runs }, timeline_size),
                ("compare_cdf", &plot::CompareCdf { runs }, plot::CDF_SIZE),
            ];
            outcome.draw(dir, &figures, &mut paths);
            if runs.len() > plot::MAX_COLUMNS {
                outcome.warnings.push(format!(
                    "compare_timeline shows the first {} of {} configurations",
                    plot::MAX_COLUMNS,
                    runs.len()
                ));
            }
        }
        Err(e) => outcome.warnings.push(e),
    }
    outcome.print_warnings();
    // Links to each run's own report, relative to this directory.
    let links: Vec<Option<String>> = runs
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let page = run_dirs.get(i)?.join("report.html");
            if !page.is_file() {
                return None;
            }
            relative(dir, &page)
        })
        .collect();
    std::fs::write(&paths[0], html::compare_page(runs, &links, &outcome))?;
    Ok(paths)
}

/// `to` relative to directory `from`, as a URL path: `/` separators, each
/// segment percent-encoded (a directory named `run #2` must not become a
/// fragment).
fn relative(from: &Path, to: &Path) -> Option<String> {
    let from = from.canonicalize().ok()?;
    let to = to.canonicalize().ok()?;
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_string(); a.len() - common];
    parts.extend(
        b[common..]
            .iter()
            .map(|c| url_segment(&c.as_os_str().to_string_lossy())),
    );
    Some(parts.join("/"))
}

/// RFC 3986 percent-encoding of one path segment (unreserved bytes kept).
fn url_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---- formatting shared by the table, the HTML and the plots ----

/// A measured rate: `4.85 Mbit/s`, `999 kbit/s`.
fn fmt_rate(bps: f64) -> String {
    sluice_time::units::format_measured(bps, 2)
}

/// A configured rate, short: `5M`, `512k`, `1.5M`, `2G`.
fn fmt_link_rate(bps: u64) -> String {
    sluice_time::units::format_rate_short(sluice_time::Rate::bps(bps))
}

/// A latency with as many digits as carry meaning at its size.
fn fmt_ms(ms: f64) -> String {
    match ms {
        x if !x.is_finite() || x >= 1e9 => "no reply".into(),
        x if x < 10.0 => format!("{x:.2} ms"),
        x if x < 100.0 => format!("{x:.1} ms"),
        x => format!("{x:.0} ms"),
    }
}

/// Latency added under load: `+30.5 ms`, or `no reply` when a loaded
/// phase had no answered probe at all.
fn fmt_added(ms: f64) -> String {
    let s = fmt_ms(ms);
    if s.ends_with("ms") {
        format!("+{s}")
    } else {
        s
    }
}

fn fmt_pct(p: f64) -> String {
    if p.is_finite() {
        format!("{p:.1} %")
    } else {
        "-".into()
    }
}

/// `link 5M down / 1M up, RTT 20 ms, modem buffer 200 pkts[, overhead …]`;
/// on a moving link `link trace lte: 2M–30M down / 500k–8M up, …`.
fn link_line(s: &Summary) -> String {
    let l = &s.link;
    let rates = match &l.trace {
        Some(t) => {
            let ((dlo, dhi), (ulo, uhi)) = t.bounds();
            format!(
                "link trace {}: {}–{} down / {}–{} up",
                t.name,
                fmt_link_rate(dlo),
                fmt_link_rate(dhi),
                fmt_link_rate(ulo),
                fmt_link_rate(uhi)
            )
        }
        None => format!(
            "link {} down / {} up",
            fmt_link_rate(l.down_bps),
            fmt_link_rate(l.up_bps)
        ),
    };
    let mut out = format!(
        "{rates}, RTT {} ms, modem buffer {}",
        trim_float(l.rtt_ms),
        match l.fifo {
            FifoKind::Packets => format!("{} pkts", l.buffer_pkts),
            FifoKind::Bytes =>
                format!("{} B ({} full frames)", l.fifo_limit_bytes(), l.buffer_pkts),
        }
    );
    if l.overhead_bytes != 0 || l.atm {
        out.push_str(&format!(
            ", overhead {} ({} B{})",
            l.overhead_name,
            l.overhead_bytes,
            if l.atm { ", ATM cells" } else { "" }
        ));
    }
    if l.drop_icmp {
        // Every "ping" figure of the run is then irtt's.
        out.push_str(", ICMP dropped beyond the modem (latency: irtt RTT)");
    }
    if let Some(loss) = l.loss.filter(|l| l.ppm > 0) {
        out.push_str(&format!(
            ", random loss {} % each way beyond the modem (seed {})",
            loss.percent(),
            loss.seed
        ));
    }
    out
}

/// The hosts' TCP: `TCP cubic, ECN off[, no SACK][, no timestamps][, window 64KiB | , windows down
/// 64KiB / up autotuned]` (socket buffers per direction, from the flows as
/// they ran; nothing when every flow was autotuned).
fn hosts_line(s: &Summary) -> String {
    let mut out = format!("TCP {}, ECN {}", s.cc, if s.ecn { "on" } else { "off" });
    for (on, what) in [(s.sack, "SACK"), (s.timestamps, "timestamps")] {
        if !on {
            out.push_str(&format!(", no {what}"));
        }
    }
    let of = |d: Dir| -> Option<Option<u64>> {
        let w: Vec<Option<u64>> = s
            .flows
            .iter()
            .filter(|f| f.dir == d)
            .map(|f| f.window)
            .collect();
        // A direction's first flow speaks for it: every shipped scenario
        // gives a direction's flows one window.
        w.first().copied()
    };
    let text = |w: Option<u64>| w.map_or("autotuned".to_string(), units::format_bytes);
    match (of(Dir::Down), of(Dir::Up)) {
        (None | Some(None), None | Some(None)) => {}
        (Some(a), Some(b)) if a == b => out.push_str(&format!(", window {}", text(a))),
        (down, up) => {
            let parts: Vec<String> = [("down", down), ("up", up)]
                .into_iter()
                .filter_map(|(name, w)| w.map(|w| format!("{name} {}", text(w))))
                .collect();
            out.push_str(&format!(", windows {}", parts.join(" / ")));
        }
    }
    out
}

/// `20` for 20.0, `2.5` for 2.5.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Which kind of phase: the CDF pools idle phases and keeps loaded ones apart.
fn is_loaded(p: &crate::model::PhaseSummary) -> bool {
    p.load_down || p.load_up
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_switch_unit_at_one_megabit() {
        assert_eq!(fmt_rate(4_850_000.0), "4.85 Mbit/s");
        assert_eq!(fmt_rate(1_000_000.0), "1.00 Mbit/s");
        assert_eq!(fmt_rate(999_400.0), "999 kbit/s");
        assert_eq!(fmt_rate(0.0), "0 kbit/s");
        assert_eq!(fmt_rate(f64::NAN), "-");
        assert_eq!(fmt_link_rate(5_000_000), "5M");
        assert_eq!(fmt_link_rate(512_000), "512k");
        assert_eq!(fmt_link_rate(1_500_000), "1.5M");
        assert_eq!(fmt_link_rate(999), "999");
    }

    #[test]
    fn latencies_keep_meaningful_digits() {
        assert_eq!(fmt_ms(1.234), "1.23 ms");
        assert_eq!(fmt_ms(20.04), "20.0 ms");
        assert_eq!(fmt_ms(2083.4), "2083 ms");
        assert_eq!(fmt_ms(f64::MAX), "no reply");
        assert_eq!(fmt_ms(f64::INFINITY), "no reply");
    }

    fn tiny_run() -> RunResult {
        let s = crate::scenario::tcp_1up();
        let series = crate::model::Series {
            ping: vec![crate::model::PingSample {
                t_s: 1.0,
                rtt_ms: Some(20.0),
            }],
            ..Default::default()
        };
        crate::analysis::finish(&s, "none", series, "t".into(), Vec::new())
    }

    #[test]
    fn hosts_line_shows_cc_ecn_and_the_windows() {
        let run = |ecn: bool, down: Option<u64>, up: Option<u64>| {
            let mut s = crate::scenario::ack_priority();
            s.ecn = ecn;
            let mut series = crate::model::Series::default();
            for (dir, window) in [(Dir::Down, down), (Dir::Up, up)] {
                series.flows.push(crate::model::FlowRecord {
                    dir,
                    streams: 1,
                    window,
                    host: 0,
                    start_s: 0.0,
                    end_s: 1.0,
                    goodput_bps: None,
                    retransmits: None,
                    error: None,
                });
            }
            hosts_line(&crate::analysis::finish(&s, "none", series, "t".into(), vec![]).summary)
        };
        assert_eq!(run(false, None, None), "TCP cubic, ECN off");
        assert_eq!(
            run(true, Some(64 << 10), Some(64 << 10)),
            "TCP cubic, ECN on, window 64KiB"
        );
        assert_eq!(
            run(false, Some(64 << 10), None),
            "TCP cubic, ECN off, windows down 64KiB / up autotuned"
        );
        assert_eq!(
            run(false, None, Some(1 << 20)),
            "TCP cubic, ECN off, windows down autotuned / up 1MiB"
        );
        // Summaries carry it into every report: the table's title.
        assert!(tiny_run_table().contains("; TCP cubic, ECN off\n"));
        let mut s = tiny_run().summary;
        s.link.fifo = FifoKind::Bytes;
        assert!(
            link_line(&s).ends_with("modem buffer 302800 B (200 full frames)"),
            "{}",
            link_line(&s)
        );
    }

    #[test]
    fn a_moving_link_is_named_with_its_range() {
        let mut s = tiny_run().summary;
        let t = crate::trace::RateTrace::parse("lte", "0 20M 5M\n1 3M 800k\n2 40M 10M").unwrap();
        s.link.follow(t);
        assert!(
            link_line(&s).starts_with("link trace lte: 3M–40M down / 800k–10M up, RTT "),
            "{}",
            link_line(&s)
        );
    }

    fn tiny_run_table() -> String {
        table(&[&tiny_run().summary])
    }

    fn png_size(path: &Path) -> (u32, u32) {
        let b = std::fs::read(path).unwrap();
        let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        (be(16), be(20))
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn without_the_font_the_data_is_written_and_the_page_says_why() {
        let dir = temp("nofont");
        let run = tiny_run();
        let missing = Err(
            "plots skipped: cannot read X (install the Debian package fonts-dejavu-core)"
                .to_string(),
        );
        let paths = write_run_with(&dir, &run, missing.clone()).unwrap();
        let names: Vec<String> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "report.html",
                "summary.json",
                "rate.csv",
                "ping.csv",
                "flows.csv"
            ]
        );
        let html = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(html.contains("fonts-dejavu-core") && html.contains("Plots are missing"));
        assert!(!html.contains("<img") && !dir.join("timeline.png").exists());

        let cmp = dir.join("cmp");
        let paths = write_compare_with(
            &cmp,
            &[run.clone(), run],
            &[dir.clone(), dir.clone()],
            missing,
        )
        .unwrap();
        let html = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(html.contains("fonts-dejavu-core") && !html.contains("<img"));
        assert!(
            html.contains("href=\"../report.html\""),
            "links the run's page"
        );
        assert_eq!(paths.len(), 2, "report.html and summaries.json only");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn more_configurations_than_columns_are_said_so() {
        let dir = temp("many");
        let runs = vec![tiny_run(); plot::MAX_COLUMNS + 1];
        let paths = write_compare(&dir, &runs, &[]).unwrap();
        let html = std::fs::read_to_string(&paths[0]).unwrap();
        // The font is a setup requirement (scripts/setup.sh installs it).
        assert!(html.contains("shows the first 4 of 5"), "{html}");
        assert_eq!(
            png_size(&dir.join("compare_timeline.png")),
            (plot::COLUMN_WIDTH * 4, plot::TIMELINE_SIZE.1)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn relative_paths_walk_up_and_down() {
        let base = std::env::temp_dir().join(format!("sluice-report-rel-{}", std::process::id()));
        let a = base.join("cmp");
        let b = base.join("runs/one");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("report.html"), "x").unwrap();
        assert_eq!(
            relative(&a, &b.join("report.html")).as_deref(),
            Some("../runs/one/report.html")
        );
        assert_eq!(url_segment("run #2?"), "run%20%232%3F");
        assert_eq!(url_segment("räd"), "r%C3%A4d");
        assert_eq!(
            relative(&b, &b.join("report.html")).as_deref(),
            Some("report.html")
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
