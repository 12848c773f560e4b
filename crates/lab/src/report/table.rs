//! The before/after table: one block per scenario (and link), phases as row
//! groups so the configurations of one phase sit on adjacent lines, then
//! one line per configuration with its idle latency, grade and VoIP figures.
//!
//! # Principles
//! - The cells are built once ([`Block`]) and rendered twice: as aligned
//!   text for the terminal and as an HTML table for `report.html`, so both
//!   always say the same.
//! - Plain text, never colour: it goes to logs and pipes as often as to a
//!   terminal. Widths count characters, not bytes (the header has an em dash).
//! - Phases are matched across runs by name and occurrence, not by index, so
//!   runs whose phase lists differ still line up where they can.
//! - On a moving link (a rate trace) a loaded direction's rate carries its
//!   utilisation of the capacity of each moment, `4.70 Mbit/s (92 %)`.
//! - Runs with several LAN hosts get a third table: per loaded phase, per
//!   configuration, one line per host with its goodput and share of each
//!   direction, and its ping and MOS where it runs them.

use super::{fmt_added, fmt_ms, fmt_pct, fmt_rate, hosts_line, link_line};
use crate::model::Summary;

pub(super) const PHASE_HEADER: [&str; 7] = [
    "phase", "shaper", "down", "up", "ping p50", "ping p99", "loss",
];
const PHASE_LEFT: usize = 2; // phase and shaper are text, the rest numbers
pub(super) const SHAPER_HEADER: [&str; 6] = [
    "shaper",
    "idle p50",
    "grade",
    "down",
    "up",
    "added under load",
];
pub(super) const VOIP_HEADER: [&str; 4] = ["VoIP owd", "jitter", "loss", "MOS"];
pub(super) const HOST_HEADER: [&str; 9] = [
    "phase", "shaper", "host", "down", "share", "up", "share", "ping p99", "MOS",
];
const HOST_LEFT: usize = 3;
pub(super) const STEP_HEADER: [&str; 3] = ["step of the link", "shaper", "followed in"];
/// The title line of the rate steps' table.
pub(super) const STEP_TITLE: &str =
    "after each step of the link's capacity (a step down: until the shaper's own rate is at or \
     below the new capacity; a step up: until the throughput's 1 s mean reaches 80 % of it):";

/// The title line of the per-host table.
pub(super) const HOST_TITLE: &str =
    "per host (TCP goodput, and its share of the hosts' sum in each direction):";

/// The cells of one scenario's block.
pub(super) struct Block {
    /// `tcp_1up — link 5M down / 1M up, …; TCP cubic, ECN off`
    pub title: String,
    /// One group per phase; within it one row per run (`PHASE_HEADER` cells).
    pub phase_groups: Vec<Vec<Vec<String>>>,
    /// One row per run: `SHAPER_HEADER` cells, then `VOIP_HEADER` cells
    /// when any run of the block measured VoIP.
    pub shaper_rows: Vec<Vec<String>>,
    pub has_voip: bool,
    /// Multi-host runs: one group per loaded phase; within it one row per
    /// run and host (`HOST_HEADER` cells). Empty when no run has hosts.
    pub host_groups: Vec<Vec<Vec<String>>>,
    /// Moving links: one group per step of the capacity, one row per run
    /// (`STEP_HEADER` cells). Empty without a trace.
    pub step_groups: Vec<Vec<Vec<String>>>,
    /// `shaper  phase: verdicts`, for each phase a sluice shaper judged
    /// (crate::verdict).
    pub verdicts: Vec<String>,
    /// `shaper: warning`, for every warning of every run.
    pub warnings: Vec<String>,
}

/// The title line of the verdicts.
pub(super) const VERDICT_TITLE: &str =
    "sluice's own verdict at each phase's end (show health), held since:";

/// The terminal table of `summaries` (1 for a run, 2–4 for a comparison).
pub fn table(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    for (i, b) in blocks(summaries).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&b.title);
        out.push('\n');
        render(
            &mut out,
            &grouped(&PHASE_HEADER, &b.phase_groups, 1),
            PHASE_LEFT,
        );
        out.push('\n');
        if !b.host_groups.is_empty() {
            let rows = grouped(&HOST_HEADER, &b.host_groups, 2);
            titled(&mut out, HOST_TITLE, &rows, HOST_LEFT);
        }
        if !b.step_groups.is_empty() {
            let rows = grouped(&STEP_HEADER, &b.step_groups, 1);
            titled(&mut out, STEP_TITLE, &rows, 2);
        }
        let mut header: Vec<String> = SHAPER_HEADER.iter().map(|s| s.to_string()).collect();
        if b.has_voip {
            header.extend(VOIP_HEADER.iter().map(|s| s.to_string()));
        }
        let mut rows = vec![header];
        rows.extend(b.shaper_rows.iter().cloned());
        render(&mut out, &rows, 1);
        if !b.verdicts.is_empty() {
            out.push_str(VERDICT_TITLE);
            out.push('\n');
            for v in &b.verdicts {
                out.push_str("  ");
                out.push_str(v);
                out.push('\n');
            }
        }
        for w in &b.warnings {
            out.push_str("  warning: ");
            out.push_str(w);
            out.push('\n');
        }
    }
    out
}

/// `header` over `groups`' rows, each group read as one unit: after its
/// first row, the first `lead` cells are left blank while they repeat the
/// row above (the phase; with `lead` 2 also the host).
fn grouped(header: &[&str], groups: &[Vec<Vec<String>>], lead: usize) -> Vec<Vec<String>> {
    let mut rows = vec![header.iter().map(|s| s.to_string()).collect()];
    for group in groups {
        for (j, row) in group.iter().enumerate() {
            let mut row = row.clone();
            for c in 0..lead.min(row.len()) {
                if j > 0 && (c == 0 || row[c] == group[j - 1][c]) {
                    row[c] = String::new();
                }
            }
            rows.push(row);
        }
    }
    rows
}

/// A sub-table: its title, indented, then `rows`.
fn titled(out: &mut String, title: &str, rows: &[Vec<String>], left: usize) {
    out.push_str("  ");
    out.push_str(title);
    out.push('\n');
    render(out, rows, left);
    out.push('\n');
}

/// Groups `summaries` by scenario and link, in order of first appearance.
pub(super) fn blocks(summaries: &[&Summary]) -> Vec<Block> {
    let mut keys: Vec<String> = Vec::new();
    let mut members: Vec<Vec<&Summary>> = Vec::new();
    for s in summaries {
        let title = format!("{} — {}; {}", s.scenario, link_line(s), hosts_line(s));
        match keys.iter().position(|k| *k == title) {
            Some(i) => members[i].push(s),
            None => {
                keys.push(title);
                members.push(vec![s]);
            }
        }
    }
    keys.into_iter()
        .zip(members)
        .map(|(title, runs)| block(title, &runs))
        .collect()
}

/// A phase's identity across runs: its name and which occurrence of it.
fn phase_keys(s: &Summary) -> Vec<(String, usize)> {
    let mut keys: Vec<(String, usize)> = Vec::with_capacity(s.phases.len());
    for p in &s.phases {
        let n = keys.iter().filter(|(name, _)| *name == p.name).count();
        keys.push((p.name.clone(), n));
    }
    keys
}

fn block(title: String, runs: &[&Summary]) -> Block {
    let per_run: Vec<Vec<(String, usize)>> = runs.iter().map(|s| phase_keys(s)).collect();
    // Union of phase keys: the first run's order, then any the others add.
    let mut order: Vec<(String, usize)> = Vec::new();
    for keys in &per_run {
        for k in keys {
            if !order.contains(k) {
                order.push(k.clone());
            }
        }
    }
    let phase_groups = order
        .iter()
        .map(|key| {
            runs.iter()
                .zip(&per_run)
                .filter_map(|(s, keys)| {
                    let i = keys.iter().position(|k| k == key)?;
                    let p = s.phases.get(i)?;
                    let (p50, p99) = match &p.latency_ms {
                        Some(l) => (fmt_ms(l.p50), fmt_ms(l.p99)),
                        None => ("-".into(), "-".into()),
                    };
                    // On a moving link a loaded direction's rate says how
                    // much of the capacity of its moments it used.
                    let rate = |bps: f64, util: Option<f64>| match util {
                        Some(u) if s.link.trace.is_some() => {
                            format!("{} ({u:.0} %)", fmt_rate(bps))
                        }
                        _ => fmt_rate(bps),
                    };
                    Some(vec![
                        p.name.clone(),
                        short_label(&s.shaper),
                        rate(p.down_bps, p.down_util_pct),
                        rate(p.up_bps, p.up_util_pct),
                        p50,
                        p99,
                        fmt_pct(p.loss_pct),
                    ])
                })
                .collect()
        })
        .collect();

    let host_groups = order
        .iter()
        .map(|key| {
            runs.iter()
                .zip(&per_run)
                .flat_map(|(s, keys)| {
                    let i = keys.iter().position(|k| k == key);
                    let loaded = i
                        .and_then(|i| s.phases.get(i))
                        .is_some_and(|p| p.load_down || p.load_up);
                    let rows: Vec<Vec<String>> = match i {
                        Some(i) if loaded => s
                            .hosts
                            .iter()
                            .filter_map(|h| Some(host_row(&s.shaper, &h.name, h.phases.get(i)?)))
                            .collect(),
                        _ => Vec::new(),
                    };
                    rows
                })
                .collect::<Vec<_>>()
        })
        .filter(|g: &Vec<Vec<String>>| !g.is_empty())
        .collect();

    // Steps are matched across runs by time and direction (one trace).
    let mut step_keys: Vec<(String, f64, crate::model::Dir)> = Vec::new();
    for s in runs {
        for st in &s.rate_steps {
            if !step_keys.iter().any(|k| k.1 == st.t_s && k.2 == st.dir) {
                let dir = match st.dir {
                    crate::model::Dir::Down => "download",
                    crate::model::Dir::Up => "upload",
                };
                let name = format!(
                    "{} s {dir} {}→{}",
                    super::trim_float(st.t_s),
                    super::fmt_link_rate(st.from_bps),
                    super::fmt_link_rate(st.to_bps)
                );
                step_keys.push((name, st.t_s, st.dir));
            }
        }
    }
    let step_groups = step_keys
        .iter()
        .map(|(name, t, dir)| {
            runs.iter()
                .map(|s| {
                    let cell = match s.rate_steps.iter().find(|x| x.t_s == *t && x.dir == *dir) {
                        Some(x) if !x.measured => "- (no autorate log)".to_string(),
                        Some(x) => match x.settle_s {
                            Some(d) => format!("{d:.2} s"),
                            None if x.window_s > 0.0 => {
                                format!("not within {:.1} s", x.window_s)
                            }
                            None => "not followed".to_string(),
                        },
                        None => "-".to_string(),
                    };
                    vec![name.clone(), short_label(&s.shaper), cell]
                })
                .collect()
        })
        .collect();

    let has_voip = runs.iter().any(|s| s.voip.is_some());
    let shaper_rows = runs
        .iter()
        .map(|s| {
            let g = &s.grade;
            let idle = if s.idle_latency_ms.samples == 0 {
                "-".to_string()
            } else {
                fmt_ms(s.idle_latency_ms.p50)
            };
            let mut row = vec![
                short_label(&s.shaper),
                idle,
                g.overall.clone(),
                g.down.clone().unwrap_or_else(|| "-".into()),
                g.up.clone().unwrap_or_else(|| "-".into()),
                fmt_added(g.added_ms),
            ];
            if has_voip {
                match &s.voip {
                    Some(v) => row.extend([
                        fmt_ms(v.owd_ms),
                        fmt_ms(v.jitter_ms),
                        fmt_pct(v.loss_pct),
                        format!("{:.2}", v.mos),
                    ]),
                    None => row.extend(std::iter::repeat_n("-".to_string(), VOIP_HEADER.len())),
                }
            }
            row
        })
        .collect();
    let warnings = runs
        .iter()
        .flat_map(|s| s.warnings.iter().map(move |w| format!("{}: {w}", s.shaper)))
        .collect();
    let verdicts = runs
        .iter()
        .flat_map(|s| {
            s.phases
                .iter()
                .filter(|p| !p.verdicts.is_empty())
                .map(move |p| {
                    let line = crate::verdict::line(&p.verdicts);
                    format!("{}  {}: {line}", short_label(&s.shaper), p.name)
                })
        })
        .collect();
    Block {
        title,
        phase_groups,
        shaper_rows,
        has_voip,
        host_groups,
        step_groups,
        verdicts,
        warnings,
    }
}

/// One host's line in one phase: `both hosts  none  A  4.70 Mbit/s  49 %  …`.
fn host_row(shaper: &str, host: &str, p: &crate::model::HostPhase) -> Vec<String> {
    let share = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.0} %"));
    vec![
        p.name.clone(),
        short_label(shaper),
        host.to_string(),
        fmt_rate(p.down_bps),
        share(p.down_share_pct),
        fmt_rate(p.up_bps),
        share(p.up_share_pct),
        p.ping_ms.map_or("-".to_string(), |l| fmt_ms(l.p99)),
        p.voip.map_or("-".to_string(), |v| format!("{:.2}", v.mos)),
    ]
}

/// Aligned columns, two spaces apart, indented by two: the first `left`
/// columns flush left (text), the others flush right (numbers).
fn render(out: &mut String, rows: &[Vec<String>], left: usize) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..cols).map(width).collect();
    for row in rows {
        let mut line = String::from("  ");
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c < left {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            } else {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// Longest shaper label a table column shows: a `tc:` spec can be a whole
/// command line; the full label is in summary.json and the report.
const LABEL_MAX_CHARS: usize = 40;

/// `label`, cut to [`LABEL_MAX_CHARS`] with an ellipsis.
fn short_label(label: &str) -> String {
    if label.chars().count() <= LABEL_MAX_CHARS {
        return label.to_string();
    }
    let mut s: String = label.chars().take(LABEL_MAX_CHARS - 1).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_shaper_labels_are_cut_with_an_ellipsis() {
        assert_eq!(super::short_label("none"), "none");
        let long = "tc:cake bandwidth 120kbit besteffort pppoe-llcsnap;cake bandwidth 490kbit";
        let cut = super::short_label(long);
        assert_eq!(cut.chars().count(), super::LABEL_MAX_CHARS);
        assert!(cut.ends_with('…') && long.starts_with(cut.trim_end_matches('…')));
    }

    use super::*;

    #[test]
    fn columns_are_aligned_by_characters_not_bytes() {
        let rows = vec![
            vec!["a—b".to_string(), "1".to_string()],
            vec!["abcd".to_string(), "100".to_string()],
        ];
        let mut out = String::new();
        render(&mut out, &rows, 1);
        assert_eq!(out, "  a—b     1\n  abcd  100\n");
    }

    #[test]
    fn a_step_not_followed_says_how_long_it_had() {
        use crate::model::{Dir, RateStep};
        let s = crate::scenario::tcp_1up();
        let series = crate::model::Series::default();
        let mut sum = crate::analysis::summarize(&s, "auto.conf", &series, "t".into(), Vec::new());
        let step = |t_s, window_s| RateStep {
            t_s,
            dir: Dir::Up,
            from_bps: 1_000_000,
            to_bps: 4_000_000,
            settle_s: None,
            window_s,
            measured: true,
        };
        // Cut short by the next step after 4 s; one from a summary written
        // before the window was kept.
        sum.rate_steps = vec![step(12.0, 4.0), step(16.0, 0.0)];
        let text = table(&[&sum]);
        let cell = |start: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(start))
                .map(|l| l.split_whitespace().skip(5).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| panic!("no line {start}:\n{text}"))
        };
        assert_eq!(cell("12 s upload"), "not within 4.0 s");
        assert_eq!(cell("16 s upload"), "not followed");
    }

    /// A sluice shaper's verdicts, read during the run, close the block:
    /// per phase, the last one with how long into the phase it held.
    #[test]
    fn the_shapers_own_verdicts_are_listed_per_phase() {
        use crate::model::Dir;
        use crate::verdict::{DirVerdict, HealthSample};
        let s = crate::scenario::tcp_1up();
        let mut series = crate::model::Series::default();
        let up = |t_s: f64, verdict: &str, suggested_bps| HealthSample {
            t_s,
            directions: vec![DirVerdict {
                dir: Dir::Up,
                verdict: verdict.into(),
                suggested_bps,
                held_back: false,
                grade: Some("C".into()),
            }],
        };
        series.health = vec![
            up(5.0, "not-enough-traffic", None),
            up(15.0, "not-enough-traffic", None),
            up(24.0, "not-in-control", Some(950_000)),
            up(30.0, "not-in-control", Some(949_000)),
        ];
        let sum = crate::analysis::summarize(&s, "f.conf", &series, "t".into(), Vec::new());
        let text = table(&[&sum]);
        assert!(text.contains(VERDICT_TITLE), "{text}");
        let (idle, load) = (&sum.phases[0], &sum.phases[1]);
        let want = [
            format!("f.conf  {}: up not enough traffic from 5 s", idle.name),
            format!(
                "f.conf  {}: up not in control, try 949Kb, grade C from {:.0} s",
                load.name,
                24.0 - load.start_s
            ),
        ];
        for w in want {
            assert!(text.contains(&w), "no {w:?} in\n{text}");
        }
        // Without readings (a kernel shaper, `none`): no such lines.
        let bare = crate::model::Series::default();
        let sum = crate::analysis::summarize(&s, "none", &bare, "t".into(), Vec::new());
        assert!(!table(&[&sum]).contains(VERDICT_TITLE));
    }

    #[test]
    fn several_hosts_get_a_line_each_per_loaded_phase() {
        use crate::model::HostRateSample;
        let s = crate::scenario::host_fair();
        let mut series = crate::model::Series::default();
        let mut t = 0.5;
        while t <= s.total_secs() {
            for (host, bps) in [(0, 3e5), (1, 9e6)] {
                let on = t > 10.0 && t <= 70.0 && (host == 0 || t > 30.0);
                let bps = if on { bps } else { 0.0 };
                series.host_rate.push(HostRateSample {
                    t_s: t,
                    host,
                    down_bps: bps,
                    up_bps: bps / 5.0,
                });
            }
            t += 0.5;
        }
        let sum = crate::analysis::summarize(&s, "flows.conf", &series, "t".into(), Vec::new());
        let text = table(&[&sum]);
        assert!(text.contains(HOST_TITLE), "{text}");
        let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = |start: &str| {
            text.lines()
                .map(words)
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no line {start}:\n{text}"))
        };
        // Phase, shaper, host, down + share, up + share, ping p99, MOS.
        assert_eq!(
            line("both hosts flows.conf A"),
            "both hosts flows.conf A 300 kbit/s 3 % 60 kbit/s 3 % - -"
        );
        assert_eq!(line("B 9.00"), "B 9.00 Mbit/s 97 % 1.80 Mbit/s 97 % - -");
        // Idle phases have no host lines; a one-host run no host table.
        assert!(!text
            .lines()
            .any(|l| l.contains("idle") && l.contains(" A ")));
        let one = crate::scenario::tcp_1up();
        let sum =
            crate::analysis::summarize(&one, "x", &Default::default(), "t".into(), Vec::new());
        assert!(!table(&[&sum]).contains(HOST_TITLE));
    }
}
