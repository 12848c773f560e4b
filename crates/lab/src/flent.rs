//! A lab run as flent's data file, `<run dir>/<scenario>.flent.gz`, so
//! `flent -i FILE -p all_scaled` plots sluice's runs with the tool the
//! bufferbloat community already reads.
//!
//! # Principles
//! - The format is flent's own (file format version 4, as flent's
//!   `resultset.py` reads it): gzip'd JSON with `metadata`, `x_values` (a
//!   regular grid of [`STEP_S`] seconds from the run's origin), `results`
//!   (each series on that grid, `null` where no sample is in reach) and
//!   `raw_values` (every measured sample with its absolute time `t` and
//!   value `val`). flent plots time series and computes its statistics
//!   from the raw values, so its means are the run's own, unresampled.
//! - Grid values follow flent's aggregator: linear interpolation between
//!   the samples either side of a grid point, within five steps; before
//!   the first or after the last sample, that sample within half a step.
//! - The test name is flent's `rrul_be` (all traffic best effort, as the
//!   lab's unmarked flows are), so its plot definitions apply: `all_scaled`,
//!   `totals`, `ping_cdf`, `icmp_cdf`, `box_totals` … Its series names
//!   carry sluice's data, in flent's units (Mbit/s, ms):
//!   `TCP download sum`/`TCP upload sum` the link's received rate per
//!   direction (rate.csv: Ethernet frames, as summary.json's phase rates),
//!   `TCP download BE`, `BE2` … each bulk flow's receiver goodput from
//!   iperf3's intervals (1 s in the lab; its end figure as `MEAN_VALUE`), `Ping (ms) ICMP`
//!   the answered pings, `Ping (ms) UDP BE1` irtt's round trips; `avg` and
//!   `TCP totals` are computed on the grid as flent's own runners do.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::model::{Dir, FlowRecord, RunResult};

/// flent's grid step (its default `STEP_SIZE`), seconds.
pub const STEP_S: f64 = 0.2;

/// The flent test whose plots fit a lab run.
pub const TEST_NAME: &str = "rrul_be";

/// flent's file format version this writer follows.
const FORMAT_VERSION: u32 = 4;

/// How far (in steps) flent's aggregator interpolates to the next sample.
const REACH_STEPS: f64 = 5.0;

/// One series: its samples `(t_s, value)` in run time, ordered by time.
struct Series {
    name: String,
    units: &'static str,
    samples: Vec<(f64, f64)>,
    /// The measuring tool's own mean (iperf3's end goodput), Mbit/s.
    mean: Option<f64>,
}

/// Writes `<scenario>.flent.gz` into `dir`, the run's directory (per-flow
/// goodput comes from the iperf3 JSON the runner left there, `flowN-DIR.json`;
/// a flow without it has no series of its own).
pub fn write(dir: &Path, run: &RunResult) -> io::Result<PathBuf> {
    let flows = flow_intervals(dir, &run.series.flows);
    let doc = document(run, &flows).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let path = dir.join(format!("{}.flent.gz", run.summary.scenario));
    let file = std::fs::File::create(&path)?;
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    serde_json::to_writer(&mut gz, &doc).map_err(io::Error::other)?;
    gz.finish()?.flush()?;
    Ok(path)
}

/// Each flow's receiver intervals `(seconds, bit/s)` from its iperf3 JSON,
/// in the order of `flows` (empty where the files are missing or
/// unreadable): a download's client (`-R`) is the receiver; an upload's
/// receiver is the server, whose own JSON is `flowN-up.server.json`.
fn flow_intervals(dir: &Path, flows: &[FlowRecord]) -> Vec<Vec<(f64, f64)>> {
    let read = |name: String| -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(dir.join(name)).ok()?;
        serde_json::from_str(&text).ok()
    };
    flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let stem = format!("flow{i}-{}", dir_word(f.dir));
            let client = read(format!("{stem}.json"));
            let own = match f.dir {
                Dir::Down => client.as_ref().and_then(|v| v.get("intervals")),
                Dir::Up => client
                    .as_ref()
                    .and_then(|v| v.pointer("/server_output_json/intervals")),
            };
            let mut iv = crate::iperf3::intervals(own);
            if iv.is_empty() && f.dir == Dir::Up {
                iv = crate::iperf3::intervals(
                    read(format!("{stem}.server.json"))
                        .as_ref()
                        .and_then(|v| v.get("intervals")),
                );
            }
            iv
        })
        .collect()
}

fn dir_word(d: Dir) -> &'static str {
    match d {
        Dir::Down => "down",
        Dir::Up => "up",
    }
}

/// The flent document of `run`; `flow_intervals[i]` are flow `i`'s
/// receiver intervals. Err when the run's start time is not RFC 3339 UTC.
pub fn document(run: &RunResult, flow_intervals: &[Vec<(f64, f64)>]) -> Result<Value, String> {
    let s = &run.summary;
    let t0 = unix_seconds(&s.started_at)
        .ok_or_else(|| format!("started_at `{}` is not RFC 3339 UTC", s.started_at))?;
    let total = round_us(s.phases.last().map_or(0.0, |p| p.end_s));
    let measured = measured_series(run, flow_intervals);
    let x: Vec<f64> = (0..=(total / STEP_S).ceil() as usize)
        .map(|k| round_us(k as f64 * STEP_S))
        .collect();

    let mut results = Map::new();
    let mut raw = Map::new();
    let mut meta = Map::new();
    let mut grids: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    for m in &measured {
        let grid: Vec<Option<f64>> = x.iter().map(|&t| on_grid(&m.samples, t)).collect();
        let raw_points: Vec<Value> = m
            .samples
            .iter()
            .map(|&(t, v)| json!({ "t": t0 + t, "val": v }))
            .collect();
        raw.insert(m.name.clone(), Value::Array(raw_points));
        let mut sm = json!({ "UNITS": m.units });
        if let Some(mean) = m.mean {
            sm["MEAN_VALUE"] = json!(mean);
        }
        meta.insert(m.name.clone(), sm);
        grids.push((m.name.clone(), grid));
    }
    for (name, units, grid) in derived(&grids, x.len()) {
        meta.insert(name.clone(), json!({ "UNITS": units }));
        grids.push((name, grid));
    }
    for (name, grid) in grids {
        results.insert(name, json!(grid));
    }

    let time = flent_time(&s.started_at);
    let title = format!("{} - {}", s.scenario, s.shaper);
    Ok(json!({
        "version": FORMAT_VERSION,
        "metadata": {
            "NAME": TEST_NAME,
            "TITLE": title,
            "NOTE": format!("sluice lab run {} (sluice {})", s.scenario, s.sluice_version),
            "TIME": time,
            "T0": time,
            "HOST": crate::SERVER_IP,
            "HOSTS": [crate::SERVER_IP],
            "LOCAL_HOST": "sluice-lab",
            "LENGTH": total,
            "TOTAL_LENGTH": total,
            "STEP_SIZE": STEP_S,
            "IP_VERSION": 4,
            "TEST_PARAMETERS": {},
            "DATA_FILENAME": format!("{}.flent.gz", s.scenario),
            "SERIES_META": meta,
        },
        "x_values": x,
        "results": results,
        "raw_values": raw,
    }))
}

/// The run's measured series, in flent's names and units.
fn measured_series(run: &RunResult, flow_intervals: &[Vec<(f64, f64)>]) -> Vec<Series> {
    let sr = &run.series;
    let mut out = vec![
        Series {
            name: "TCP download sum".into(),
            units: "Mbits/s",
            samples: sr
                .rate
                .iter()
                .map(|r| (r.t_s, mbit_of(r.down_bps)))
                .collect(),
            mean: None,
        },
        Series {
            name: "TCP upload sum".into(),
            units: "Mbits/s",
            samples: sr.rate.iter().map(|r| (r.t_s, mbit_of(r.up_bps))).collect(),
            mean: None,
        },
    ];
    out.extend(flow_series(&sr.flows, flow_intervals));
    let answered = |it: &mut dyn Iterator<Item = (f64, Option<f64>)>| -> Vec<(f64, f64)> {
        it.filter_map(|(t, v)| v.map(|v| (t, v))).collect()
    };
    out.push(Series {
        name: "Ping (ms) ICMP".into(),
        units: "ms",
        samples: answered(&mut sr.ping.iter().map(|p| (p.t_s, p.rtt_ms))),
        mean: None,
    });
    if !sr.irtt.is_empty() {
        out.push(Series {
            name: "Ping (ms) UDP BE1".into(),
            units: "ms",
            samples: answered(&mut sr.irtt.iter().map(|p| (p.t_s, p.rtt_ms))),
            mean: None,
        });
    }
    for s in &mut out {
        s.samples.retain(|(t, v)| t.is_finite() && v.is_finite());
        s.samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Each flow's receiver goodput over time (Mbit/s at the end of each of
/// iperf3's intervals), named `TCP download BE`, `BE2` … in flow order per
/// direction; its mean is iperf3's end figure, as flent keeps netperf's.
fn flow_series(flows: &[FlowRecord], flow_intervals: &[Vec<(f64, f64)>]) -> Vec<Series> {
    let mut out = Vec::new();
    let (mut down, mut up) = (0, 0);
    for (f, iv) in flows.iter().zip(flow_intervals) {
        let (word, n) = match f.dir {
            Dir::Down => ("download", &mut down),
            Dir::Up => ("upload", &mut up),
        };
        *n += 1;
        if iv.is_empty() {
            // No iperf3 intervals (its JSON is missing): no series to draw,
            // and the next flow keeps its number.
            continue;
        }
        let suffix = if *n == 1 {
            String::new()
        } else {
            n.to_string()
        };
        // iperf3's intervals are durations from the flow's start; a point is
        // the interval's end, as a rate sample's.
        let mut t = f.start_s;
        let samples = iv
            .iter()
            .map(|&(secs, bps)| {
                t += secs;
                (t, mbit_of(bps))
            })
            .collect();
        out.push(Series {
            name: format!("TCP {word} BE{suffix}"),
            units: "Mbits/s",
            samples,
            mean: f.goodput_bps.map(mbit_of),
        });
    }
    out
}

fn mbit_of(bps: f64) -> f64 {
    bps / 1e6
}

/// flent's computed series (`avg`, `TCP totals`) from the grids of the
/// measured ones: at each point the mean (or sum) of the series that have a
/// value there, `null` when none has.
fn derived(
    grids: &[(String, Vec<Option<f64>>)],
    len: usize,
) -> Vec<(String, &'static str, Vec<Option<f64>>)> {
    let flow = |word: &'static str| move |n: &str| n.starts_with(&format!("TCP {word} BE"));
    let combine = |pick: &dyn Fn(&str) -> bool, mean: bool| -> Vec<Option<f64>> {
        (0..len)
            .map(|i| {
                let vals: Vec<f64> = grids
                    .iter()
                    .filter(|(n, _)| pick(n))
                    .filter_map(|(_, g)| g[i])
                    .collect();
                let sum: f64 = vals.iter().sum();
                match vals.len() {
                    0 => None,
                    k if mean => Some(sum / k as f64),
                    _ => Some(sum),
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for word in ["download", "upload"] {
        if grids.iter().any(|(n, _)| flow(word)(n)) {
            out.push((
                format!("TCP {word} avg"),
                "Mbits/s",
                combine(&flow(word), true),
            ));
        }
    }
    let any_flow = |n: &str| flow("download")(n) || flow("upload")(n);
    if grids.iter().any(|(n, _)| any_flow(n)) {
        out.push(("TCP totals".into(), "Mbits/s", combine(&any_flow, false)));
    }
    let ping = |n: &str| n.starts_with("Ping (ms)");
    out.push(("Ping (ms) avg".into(), "ms", combine(&ping, true)));
    out
}

/// The value at grid time `t` of a series sampled at `samples` (ordered).
fn on_grid(samples: &[(f64, f64)], t: f64) -> Option<f64> {
    let next_i = samples.partition_point(|&(ts, _)| ts <= t);
    let prev = next_i.checked_sub(1).map(|i| samples[i]);
    let next = samples.get(next_i).copied();
    match (prev, next) {
        (Some((tp, vp)), Some((tn, vn))) if tn - t <= REACH_STEPS * STEP_S => {
            Some(vp + (vn - vp) * (t - tp) / (tn - tp))
        }
        (None, Some((tn, vn))) if tn - t <= STEP_S / 2.0 => Some(vn),
        (Some((tp, vp)), None) if t - tp <= STEP_S / 2.0 => Some(vp),
        _ => None,
    }
}

/// `k × 0.2` without binary noise (0.6000000000000001 → 0.6).
fn round_us(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Unix seconds of `YYYY-MM-DDTHH:MM:SS[.f]Z`.
fn unix_seconds(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let hh: i64 = t.next()?.parse().ok()?;
    let mm: i64 = t.next()?.parse().ok()?;
    let ss: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || hh > 23
        || mm > 59
        || !(0.0..61.0).contains(&ss)
    {
        return None;
    }
    Some((days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60) as f64 + ss)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm, the inverse of `runner::clock::civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// flent's own UTC timestamp form, `2026-11-22T05:00:00.000000Z` (its
/// reader takes a `Z`-less time as local time).
fn flent_time(rfc3339: &str) -> String {
    match rfc3339.strip_suffix('Z') {
        Some(t) if !t.contains('.') => format!("{t}.000000Z"),
        _ => rfc3339.to_string(),
    }
}

#[cfg(test)]
mod tests;
