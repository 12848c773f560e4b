//! `report.html` of a run and of a comparison.
//!
//! # Principles
//! - Self-contained but for the run's own files: inline CSS, no script, no
//!   external asset; plots and data are linked by relative paths, and only
//!   files that were written are linked (a skipped plot is explained instead).
//! - Every text that comes from a run (names, shaper labels, warnings, tool
//!   errors) is escaped.
//! - The numbers are the summary's; the comparison's table is the terminal
//!   table's cells ([`super::table::blocks`]).

use std::fmt::Write as _;

use super::table::{
    blocks, HOST_HEADER, HOST_TITLE, PHASE_HEADER, SHAPER_HEADER, STEP_HEADER, STEP_TITLE,
    VOIP_HEADER,
};
use super::{fmt_added, fmt_ms, fmt_pct, fmt_rate, hosts_line, link_line, PlotOutcome};
use crate::model::{Dir, RunResult, Summary};

const CSS: &str = "
body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:2em auto;max-width:1250px;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
.muted{color:#666;font-weight:normal}
table{border-collapse:collapse;margin:.5em 0}
th,td{padding:.25em .7em;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f4f4f4}th:first-child,td:first-child,td.l,th.l{text-align:left}
tr.first td{border-top:2px solid #ccc}
.grades{display:flex;gap:1.5em;align-items:center;margin:1em 0}
.grade{font-size:2.2em;font-weight:bold;width:2.2em;text-align:center;border-radius:.2em;padding:.1em;color:#fff}
.g-Ap,.g-A{background:#2ca02c}.g-B{background:#8cb400}.g-C{background:#e08a00}.g-D,.g-F{background:#d62728}
.g-none{background:#999}
.warn{background:#fff4e0;border-left:4px solid #e08a00;padding:.4em .8em;margin:.3em 0}
figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}
figcaption{color:#666;font-size:.9em}
";

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        esc(title)
    )
}

fn grade_box(g: Option<&str>) -> String {
    let class = match g {
        Some("A+") => "g-Ap",
        Some("A") => "g-A",
        Some("B") => "g-B",
        Some("C") => "g-C",
        Some("D") => "g-D",
        Some("F") => "g-F",
        _ => "g-none",
    };
    format!(
        "<div class=\"grade {class}\">{}</div>",
        esc(g.unwrap_or("–"))
    )
}

/// The plots that were drawn, or why not.
fn plots(out: &mut String, outcome: &PlotOutcome, captions: &[(&str, &str)]) {
    out.push_str("<h2>Plots</h2>\n");
    for w in &outcome.warnings {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", esc(w));
    }
    for (stem, caption) in captions {
        if outcome.drawn.contains(stem) {
            let _ = writeln!(
                out,
                "<figure><a href=\"{stem}.svg\"><img src=\"{stem}.png\" alt=\"{stem}\"></a>\
                 <figcaption>{} (<a href=\"{stem}.svg\">SVG</a>)</figcaption></figure>",
                esc(caption)
            );
        }
    }
    if outcome.drawn.is_empty() {
        out.push_str("<p>Plots are missing from this report; the data files below hold everything they would show.</p>\n");
    }
}

fn table_row(out: &mut String, cells: &[String], left: usize, class: &str) {
    let _ = write!(out, "<tr class=\"{class}\">");
    for (i, c) in cells.iter().enumerate() {
        let cls = if i < left { " class=\"l\"" } else { "" };
        let _ = write!(out, "<td{cls}>{}</td>", esc(c));
    }
    out.push_str("</tr>\n");
}

fn header_row(out: &mut String, cells: &[&str]) {
    out.push_str("<tr>");
    for c in cells {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr>\n");
}

/// The page of one run; `data` are the data files written (names in `dir`).
pub(super) fn run_page(run: &RunResult, data: &[String], outcome: &PlotOutcome) -> String {
    let s = &run.summary;
    let mut out = head(&format!("sluice lab — {} — {}", s.scenario, s.shaper));
    let _ = writeln!(
        out,
        "<h1>{} <span class=\"muted\">shaper {}</span></h1>\n<p class=\"muted\">{}; {} · started {} · sluice {}</p>",
        esc(&s.scenario),
        esc(&s.shaper),
        esc(&link_line(s)),
        esc(&hosts_line(s)),
        esc(&s.started_at),
        esc(&s.sluice_version)
    );
    summary_box(&mut out, s);
    phase_table(&mut out, s);
    for b in blocks(&[s]) {
        host_table(&mut out, &b.host_groups);
        step_table(&mut out, &b.step_groups);
    }
    if let Some(v) = &s.voip {
        out.push_str("<h2>VoIP (irtt during load)</h2>\n<table>\n");
        header_row(
            &mut out,
            &["one-way delay", "jitter (IPDV)", "loss", "MOS (E-model)"],
        );
        let cells = [
            fmt_ms(v.owd_ms),
            fmt_ms(v.jitter_ms),
            fmt_pct(v.loss_pct),
            format!("{:.2}", v.mos),
        ];
        table_row(&mut out, &cells, 0, "");
        out.push_str("</table>\n");
    }
    plots(
        &mut out,
        outcome,
        &[
            (
                "timeline",
                "Throughput and latency over time; loaded phases shaded.",
            ),
            (
                "cdf",
                "Ping RTT distribution per kind of phase; lost probes keep a curve below 100 %.",
            ),
        ],
    );
    flows(&mut out, s);
    warnings(&mut out, &[s]);
    out.push_str("<h2>Data</h2>\n<ul>\n");
    for name in data {
        let _ = writeln!(out, "<li><a href=\"{0}\">{0}</a></li>", esc(name));
    }
    out.push_str("</ul>\n</body>\n</html>\n");
    out
}

fn summary_box(out: &mut String, s: &Summary) {
    let g = &s.grade;
    let dir = |name: &str, grade: &Option<String>, ms: Option<f64>| match (grade, ms) {
        (Some(gr), Some(ms)) => format!("{name} {} ({})", esc(gr), esc(&fmt_added(ms))),
        _ => format!("{name} –"),
    };
    let idle = if s.idle_latency_ms.samples == 0 {
        "no answered probe".to_string()
    } else {
        format!(
            "p50 {}, p99 {} ({} probes)",
            fmt_ms(s.idle_latency_ms.p50),
            fmt_ms(s.idle_latency_ms.p99),
            s.idle_latency_ms.samples
        )
    };
    let _ = writeln!(
        out,
        "<div class=\"grades\">{}<div>bufferbloat grade (DSLReports scale) of the added latency under load: \
         <b>{}</b><br>{} · {}<br>idle latency: {}</div></div>",
        grade_box(Some(&g.overall)),
        esc(&fmt_added(g.added_ms)),
        dir("download", &g.down, g.added_down_ms),
        dir("upload", &g.up, g.added_up_ms),
        esc(&idle)
    );
}

fn phase_table(out: &mut String, s: &Summary) {
    out.push_str("<h2>Phases</h2>\n<table>\n");
    header_row(
        out,
        &[
            "phase", "time (s)", "load", "down", "up", "ping p50", "p90", "p99", "max", "loss",
        ],
    );
    for p in &s.phases {
        let load = match (p.load_down, p.load_up) {
            (true, true) => "down + up",
            (true, false) => "down",
            (false, true) => "up",
            (false, false) => "idle",
        };
        let lat = match &p.latency_ms {
            Some(l) => [fmt_ms(l.p50), fmt_ms(l.p90), fmt_ms(l.p99), fmt_ms(l.max)],
            None => ["-".into(), "-".into(), "-".into(), "-".into()],
        };
        let mut cells = vec![
            p.name.clone(),
            format!("{:.0}–{:.0}", p.start_s, p.end_s),
            load.to_string(),
            fmt_rate(p.down_bps),
            fmt_rate(p.up_bps),
        ];
        cells.extend(lat);
        cells.push(fmt_pct(p.loss_pct));
        table_row(out, &cells, 1, "");
    }
    out.push_str("</table>\n");
}

/// The per-host table of a multi-host block (nothing with one host).
fn host_table(out: &mut String, groups: &[Vec<Vec<String>>]) {
    grouped_table(out, "Hosts", HOST_TITLE, &HOST_HEADER, groups, 3);
}

fn step_table(out: &mut String, groups: &[Vec<Vec<String>>]) {
    grouped_table(
        out,
        "Following the link",
        STEP_TITLE,
        &STEP_HEADER,
        groups,
        2,
    );
}

/// `groups` under the heading `h2` and its explanation `title`: the first
/// cell once per group, each group's first row marked `first`. Nothing
/// when there are no groups.
fn grouped_table(
    out: &mut String,
    h2: &str,
    title: &str,
    header: &[&str],
    groups: &[Vec<Vec<String>>],
    left: usize,
) {
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>{h2}</h2>\n<p>{}</p>\n<table>", esc(title));
    header_row(out, header);
    for group in groups {
        for (j, row) in group.iter().enumerate() {
            let mut row = row.clone();
            if j > 0 {
                row[0] = String::new();
            }
            table_row(out, &row, left, if j == 0 { "first" } else { "" });
        }
    }
    out.push_str("</table>\n");
}

fn flows(out: &mut String, s: &Summary) {
    if s.flows.is_empty() {
        return;
    }
    out.push_str("<h2>Bulk flows (iperf3)</h2>\n<table>\n");
    header_row(
        out,
        &[
            "direction",
            "streams",
            "time (s)",
            "goodput",
            "retransmits",
            "error",
        ],
    );
    for f in &s.flows {
        let dir = match f.dir {
            Dir::Down => "down",
            Dir::Up => "up",
        };
        let cells = [
            // Which host, when there are several (the hosts table says
            // which is which).
            if s.hosts.is_empty() {
                dir.to_string()
            } else {
                format!("{dir} (host {})", crate::model::host_name(f.host))
            },
            f.streams.to_string(),
            format!("{:.0}–{:.0}", f.start_s, f.end_s),
            f.goodput_bps.map(fmt_rate).unwrap_or_else(|| "-".into()),
            f.retransmits
                .map(|r| r.to_string())
                .unwrap_or_else(|| "-".into()),
            f.error.clone().unwrap_or_default(),
        ];
        table_row(out, &cells, 1, "");
    }
    out.push_str("</table>\n");
}

fn warnings(out: &mut String, summaries: &[&Summary]) {
    let all: Vec<String> = summaries
        .iter()
        .flat_map(|s| {
            let prefix = if summaries.len() > 1 {
                format!("{}: ", s.shaper)
            } else {
                String::new()
            };
            s.warnings.iter().map(move |w| format!("{prefix}{w}"))
        })
        .collect();
    if all.is_empty() {
        return;
    }
    out.push_str("<h2>Warnings</h2>\n");
    for w in all {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", esc(&w));
    }
}

/// The comparison page; `links[i]` is run `i`'s report relative to the page.
pub(super) fn compare_page(
    runs: &[RunResult],
    links: &[Option<String>],
    outcome: &PlotOutcome,
) -> String {
    let summaries: Vec<&Summary> = runs.iter().map(|r| &r.summary).collect();
    let scenarios: Vec<&str> = summaries.iter().fold(Vec::new(), |mut v, s| {
        if !v.contains(&s.scenario.as_str()) {
            v.push(&s.scenario);
        }
        v
    });
    let mut out = head(&format!("sluice lab — compare — {}", scenarios.join(", ")));
    let _ = writeln!(
        out,
        "<h1>{} <span class=\"muted\">{} configurations compared</span></h1>",
        esc(&scenarios.join(", ")),
        runs.len()
    );

    out.push_str("<h2>Runs</h2>\n<table>\n");
    header_row(
        &mut out,
        &[
            "configuration",
            "scenario",
            "grade",
            "added under load",
            "report",
        ],
    );
    for (i, s) in summaries.iter().enumerate() {
        let report = match links.get(i).and_then(Option::as_ref) {
            Some(href) => format!("<a href=\"{}\">report.html</a>", esc(href)),
            None => "<span class=\"muted\">not found</span>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{report}</td></tr>",
            esc(&s.shaper),
            esc(&s.scenario),
            grade_box_small(&s.grade.overall),
            esc(&fmt_added(s.grade.added_ms))
        );
    }
    out.push_str("</table>\n");

    for b in blocks(&summaries) {
        let _ = writeln!(out, "<h2>{}</h2>\n<table>", esc(&b.title));
        header_row(&mut out, &PHASE_HEADER);
        for group in &b.phase_groups {
            for (j, row) in group.iter().enumerate() {
                let mut row = row.clone();
                if j > 0 {
                    row[0] = String::new();
                }
                table_row(&mut out, &row, 2, if j == 0 { "first" } else { "" });
            }
        }
        out.push_str("</table>\n");
        host_table(&mut out, &b.host_groups);
        step_table(&mut out, &b.step_groups);
        out.push_str("<table>\n");
        let mut header: Vec<&str> = SHAPER_HEADER.to_vec();
        if b.has_voip {
            header.extend(VOIP_HEADER);
        }
        header_row(&mut out, &header);
        for row in &b.shaper_rows {
            table_row(&mut out, row, 1, "");
        }
        out.push_str("</table>\n");
    }
    plots(
        &mut out,
        outcome,
        &[
            (
                "compare_timeline",
                "Each configuration over time, on the same scales.",
            ),
            (
                "compare_cdf",
                "Ping RTT under load, one curve per configuration.",
            ),
        ],
    );
    warnings(&mut out, &summaries);
    out.push_str("<h2>Data</h2>\n<ul>\n<li><a href=\"summaries.json\">summaries.json</a></li>\n</ul>\n</body>\n</html>\n");
    out
}

fn grade_box_small(g: &str) -> String {
    format!("<b>{}</b>", esc(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_runs_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn a_grouped_table_names_each_group_once_and_marks_its_first_row() {
        let row = |a: &str, b: &str| vec![a.to_string(), b.to_string()];
        let groups = vec![
            vec![row("step 1", "x"), row("step 1", "y")],
            vec![row("step 2", "z")],
        ];
        let mut out = String::new();
        grouped_table(&mut out, "H", "t<", &["a", "b"], &groups, 1);
        let want = "<h2>H</h2>\n<p>t&lt;</p>\n<table>\n<tr><th>a</th><th>b</th></tr>\n\
            <tr class=\"first\"><td class=\"l\">step 1</td><td>x</td></tr>\n\
            <tr class=\"\"><td class=\"l\"></td><td>y</td></tr>\n\
            <tr class=\"first\"><td class=\"l\">step 2</td><td>z</td></tr>\n</table>\n";
        assert_eq!(out, want);
        let mut none = String::new();
        grouped_table(&mut none, "H", "t", &["a"], &[], 1);
        assert_eq!(none, "");
    }
}
