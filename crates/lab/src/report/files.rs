//! `summary.json`, `summaries.json` and the raw series as CSV.
//!
//! # Principles
//! - CSV follows RFC 4180: a header line, comma separated, `\n` line ends,
//!   text fields quoted when they hold a comma, quote or line break.
//! - One row per sample, in recorded order, so a row count equals the
//!   series length; a missing value (a lost probe) is an empty field,
//!   never a sentinel number.
//! - Numbers are written with Rust's shortest round-trip form, so reading
//!   them back gives the recorded `f64` exactly.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::{Dir, Series, Summary};

pub(super) fn write_summary(dir: &Path, summary: &Summary) -> io::Result<PathBuf> {
    let path = dir.join("summary.json");
    let text = serde_json::to_string_pretty(summary).map_err(io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(path)
}

pub(super) fn write_summaries(dir: &Path, summaries: &[&Summary]) -> io::Result<PathBuf> {
    let path = dir.join("summaries.json");
    let text = serde_json::to_string_pretty(summaries).map_err(io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(path)
}

/// `rate.csv`, `ping.csv`, `flows.csv`, `irtt.csv` when irtt ran,
/// `hosts.csv` when the run had several LAN hosts and `health.csv` when a
/// sluice shaper was read.
pub(super) fn write_series(dir: &Path, series: &Series) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut put = |name: &str, text: String| -> io::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        out.push(path);
        Ok(())
    };
    put("rate.csv", rate_csv(series))?;
    put("ping.csv", ping_csv(series))?;
    if !series.irtt.is_empty() {
        put("irtt.csv", irtt_csv(series))?;
    }
    put("flows.csv", flows_csv(series))?;
    if !series.host_rate.is_empty() {
        put("hosts.csv", hosts_csv(series))?;
    }
    if !series.health.is_empty() {
        put("health.csv", health_csv(series))?;
    }
    Ok(out)
}

fn rate_csv(series: &Series) -> String {
    let mut s = String::from("t_s,down_bps,up_bps\n");
    for r in &series.rate {
        let _ = writeln!(s, "{},{},{}", num(r.t_s), num(r.down_bps), num(r.up_bps));
    }
    s
}

/// One row per reading and direction of sluice's `show health`.
fn health_csv(series: &Series) -> String {
    let mut s = String::from("t_s,dir,verdict,suggested_bps,held_back,grade\n");
    for r in &series.health {
        for d in &r.directions {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{}",
                num(r.t_s),
                if d.dir == crate::model::Dir::Up {
                    "up"
                } else {
                    "down"
                },
                d.verdict,
                d.suggested_bps.map(|b| b.to_string()).unwrap_or_default(),
                d.held_back,
                d.grade.as_deref().unwrap_or(""),
            );
        }
    }
    s
}

fn hosts_csv(series: &Series) -> String {
    let mut s = String::from("t_s,host,down_bps,up_bps\n");
    for r in &series.host_rate {
        let _ = writeln!(
            s,
            "{},{},{},{}",
            num(r.t_s),
            r.host,
            num(r.down_bps),
            num(r.up_bps)
        );
    }
    s
}

fn ping_csv(series: &Series) -> String {
    let mut s = String::from("t_s,rtt_ms\n");
    for p in &series.ping {
        let _ = writeln!(s, "{},{}", num(p.t_s), opt(p.rtt_ms));
    }
    s
}

fn irtt_csv(series: &Series) -> String {
    let mut s = String::from("t_s,rtt_ms,up_owd_ms,down_owd_ms\n");
    for p in &series.irtt {
        let _ = writeln!(
            s,
            "{},{},{},{}",
            num(p.t_s),
            opt(p.rtt_ms),
            opt(p.up_owd_ms),
            opt(p.down_owd_ms)
        );
    }
    s
}

fn flows_csv(series: &Series) -> String {
    let mut s = String::from("dir,streams,start_s,end_s,goodput_bps,retransmits,error\n");
    for f in &series.flows {
        let dir = match f.dir {
            Dir::Down => "down",
            Dir::Up => "up",
        };
        let _ = writeln!(
            s,
            "{dir},{},{},{},{},{},{}",
            f.streams,
            num(f.start_s),
            num(f.end_s),
            opt(f.goodput_bps),
            f.retransmits.map(|r| r.to_string()).unwrap_or_default(),
            quote(f.error.as_deref().unwrap_or(""))
        );
    }
    s
}

/// Shortest round-trip form; empty for a non-finite value (CSV has no NaN).
fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}

fn opt(x: Option<f64>) -> String {
    x.map(num).unwrap_or_default()
}

/// RFC 4180 quoting: only when needed, doubling embedded quotes.
fn quote(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FlowRecord, IrttSample, PingSample};

    #[test]
    fn lost_probes_are_empty_fields_and_numbers_round_trip() {
        let series = Series {
            ping: vec![
                PingSample {
                    t_s: 0.1,
                    rtt_ms: Some(20.125),
                },
                PingSample {
                    t_s: 0.2,
                    rtt_ms: None,
                },
            ],
            irtt: vec![IrttSample {
                t_s: 1.0,
                rtt_ms: None,
                up_owd_ms: None,
                down_owd_ms: None,
            }],
            ..Series::default()
        };
        assert_eq!(ping_csv(&series), "t_s,rtt_ms\n0.1,20.125\n0.2,\n");
        assert_eq!(
            irtt_csv(&series),
            "t_s,rtt_ms,up_owd_ms,down_owd_ms\n1,,,\n"
        );
        let back: f64 = num(0.1 + 0.2).parse().unwrap();
        assert_eq!(back, 0.1 + 0.2);
        assert_eq!(num(f64::NAN), "");
    }

    #[test]
    fn errors_with_commas_and_quotes_are_quoted() {
        let series = Series {
            flows: vec![FlowRecord {
                dir: Dir::Up,
                streams: 4,
                window: None,
                host: 0,
                start_s: 10.0,
                end_s: 40.0,
                goodput_bps: None,
                retransmits: None,
                error: Some("unable to connect, \"refused\"".into()),
            }],
            ..Series::default()
        };
        assert_eq!(
            flows_csv(&series),
            "dir,streams,start_s,end_s,goodput_bps,retransmits,error\n\
             up,4,10,40,,,\"unable to connect, \"\"refused\"\"\"\n"
        );
    }
}
