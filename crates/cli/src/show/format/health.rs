//! `show health`: one block per shaped direction, the verdict on top, then
//! how loaded the link was, the latency added under load by sluice and
//! beyond it (p50/p99 over the last minute, hour and day) and the modem's
//! queue episodes.

use super::{hms, rate_text};
use sluice_control::proto::{HealthJson, HealthReply, LatencyJson};
use sluice_time::units::format_rate;
use sluice_time::Rate;
use std::fmt::Write as _;

pub fn format_health(r: &HealthReply) -> String {
    if r.directions.is_empty() {
        return "# no shaped interface: nothing to judge\n".into();
    }
    let mut out = String::new();
    for (i, d) in r.directions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        direction(&mut out, d);
    }
    out
}

fn direction(out: &mut String, d: &HealthJson) {
    let _ = writeln!(out, "{} ({}): {}", d.direction, d.iface, verdict(d));
    let secs = |ns: u64| ns as f64 / 1e9;
    let _ = writeln!(
        out,
        "  loaded {:.1} s of the last {:.0} s; sending {}, shaped at {}; verdict held {}",
        secs(d.loaded_ns),
        secs(d.evidence_ns),
        rate_text(d.output_bps as f64),
        format_rate(Rate(d.rate_bps)),
        hms(d.since_ns),
    );
    out.push_str("  added under load   minute p50 / p99     hour p50 / p99       day p50 / p99\n");
    for (name, w) in [("by sluice", &d.sluice), ("beyond", &d.beyond)] {
        let _ = writeln!(
            out,
            "    {:<15}  {:<19}  {:<19}  {}",
            name,
            pair(&w.minute),
            pair(&w.hour),
            pair(&w.day)
        );
    }
    let e = &d.episodes;
    let _ = write!(
        out,
        "  modem queue grew {} time{}, {:.1} s in all, longest {:.1} s",
        e.count,
        if e.count == 1 { "" } else { "s" },
        secs(e.total_ns),
        secs(e.longest_ns),
    );
    match e.current_ns {
        Some(ns) => {
            let _ = writeln!(out, "; growing for {:.1} s", secs(ns));
        }
        None => out.push('\n'),
    }
}

/// The verdict line's text after the direction.
fn verdict(d: &HealthJson) -> String {
    let grade = match (&d.grade, d.added_ns) {
        (Some(g), Some(ns)) => format!(
            ", grade {g} (+{:.1} ms under load over the last minute)",
            ns as f64 / 1e6
        ),
        _ => String::new(),
    };
    let rate = format_rate(Rate(d.rate_bps));
    match d.verdict.as_str() {
        "in-control" => format!("in control{grade}"),
        "not-in-control" => {
            let fix = match d.suggested_bps {
                Some(s) => format!(
                    "try `bandwidth {}` or enable autorate",
                    format_rate(Rate(s))
                ),
                None => "enable autorate".into(),
            };
            format!("not in control{grade}: the link is slower than the {rate} configured; {fix}")
        }
        _ => {
            let mut t = format!(
                "not enough traffic to say (loaded {:.1} s of the last {:.0} s)",
                d.loaded_ns as f64 / 1e9,
                d.evidence_ns as f64 / 1e9
            );
            if let Some(by) = &d.held_back_by {
                let _ = write!(
                    t,
                    "; held back by {by}, not in control: its ACKs wait in that queue, fix it first"
                );
            }
            t
        }
    }
}

/// `p50 / p99` in milliseconds, `-` where nothing was loaded.
fn pair(l: &LatencyJson) -> String {
    match (l.p50_ns, l.p99_ns) {
        (Some(a), Some(b)) => format!("{:.1} / {:.1} ms", a as f64 / 1e6, b as f64 / 1e6),
        _ => "-".into(),
    }
}
