//! Latency CDFs: of one run per kind of phase (idle pooled, each loaded
//! phase apart), and of several runs under load (one curve per run).
//!
//! # Principles
//! - A lost probe counts in the denominator: a curve tops out at the share
//!   of probes that were answered, so loss is visible rather than hidden
//!   (the legend gives the loss too).
//! - The x axis is logarithmic when the answered RTTs span more than two
//!   decades (20 ms idle next to seconds of bloat), linear otherwise. Both
//!   are the same linear chart: in the log case the data is plotted as
//!   log10(ms) with ticks placed and labelled at 1-2-5 × 10^k ms.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{bold, err, house_mesh, nice_step, palette, polyline, text, tick, IDLE, LOST};
use crate::model::RunResult;
use crate::report::{is_loaded, link_line};

/// Points per curve: beyond this a curve is thinned by rank (a CDF of a few
/// thousand probes looks the same, and the SVG stays small).
const MAX_CDF_POINTS: usize = 2000;
/// Ratio of the largest to the smallest RTT above which the axis is log.
const LOG_RATIO: f64 = 100.0;
/// RTTs are clamped to this before a logarithm (a 0 ms RTT is a clock artefact).
const MIN_RTT_MS: f64 = 0.01;

/// One run's ping RTT CDF per kind of phase.
pub(crate) struct PhaseCdf<'a> {
    pub run: &'a RunResult,
}
figure!(PhaseCdf);

/// Several runs' ping RTT CDF over their loaded phases.
pub(crate) struct CompareCdf<'a> {
    pub runs: &'a [RunResult],
}
figure!(CompareCdf);

/// A curve's samples before plotting.
struct Curve {
    label: String,
    color: RGBColor,
    /// Answered RTTs, ms.
    rtts: Vec<f64>,
    /// Probes sent, answered or not.
    sent: usize,
}

/// Ping probes of `run` sent inside the phases `keep` selects.
fn probes(
    run: &RunResult,
    keep: impl Fn(&crate::model::PhaseSummary) -> bool,
) -> (Vec<f64>, usize) {
    let windows: Vec<(f64, f64)> = run
        .summary
        .phases
        .iter()
        .filter(|p| keep(p))
        .map(|p| (p.start_s, p.end_s))
        .collect();
    let inside = run
        .series
        .ping
        .iter()
        .filter(|p| windows.iter().any(|&(a, b)| p.t_s >= a && p.t_s < b));
    let mut sent = 0;
    let mut rtts = Vec::new();
    for p in inside {
        sent += 1;
        rtts.extend(p.rtt_ms.filter(|v| v.is_finite()));
    }
    (rtts, sent)
}

fn label(name: &str, rtts: &[f64], sent: usize) -> String {
    let lost = sent - rtts.len();
    if lost == 0 {
        format!("{name} (n={sent})")
    } else {
        format!(
            "{name} (n={sent}, {:.1} % lost)",
            100.0 * lost as f64 / sent as f64
        )
    }
}

impl PhaseCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let run = self.run;
        let mut curves = Vec::new();
        let (rtts, sent) = probes(run, |p| !is_loaded(p));
        if sent > 0 {
            curves.push(Curve {
                label: label("idle", &rtts, sent),
                color: IDLE,
                rtts,
                sent,
            });
        }
        // Each loaded phase by name; a name used twice is one curve.
        let mut names: Vec<&str> = Vec::new();
        for p in run.summary.phases.iter().filter(|p| is_loaded(p)) {
            if !names.contains(&p.name.as_str()) {
                names.push(&p.name);
            }
        }
        for (i, name) in names.iter().enumerate() {
            let (rtts, sent) = probes(run, |p| is_loaded(p) && p.name == *name);
            if sent > 0 {
                curves.push(Curve {
                    label: label(name, &rtts, sent),
                    color: palette(i),
                    rtts,
                    sent,
                });
            }
        }
        let s = &run.summary;
        let title = format!(
            "{} — shaper {}: {} RTT per phase",
            s.scenario,
            s.shaper,
            s.link.latency_probe()
        );
        chart(root, &title, &link_line(s), curves)
    }
}

impl CompareCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let Some(first) = self.runs.first() else {
            return chart(root, "no runs", "", Vec::new());
        };
        let mixed = self
            .runs
            .iter()
            .any(|r| r.summary.scenario != first.summary.scenario);
        let curves = self
            .runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let (rtts, sent) = probes(r, is_loaded);
                let name = if mixed {
                    format!("{} / {}", r.summary.scenario, r.summary.shaper)
                } else {
                    r.summary.shaper.clone()
                };
                (sent > 0).then(|| Curve {
                    label: label(&name, &rtts, sent),
                    color: palette(i),
                    rtts,
                    sent,
                })
            })
            .collect();
        let probe = first.summary.link.latency_probe();
        let title = if mixed {
            format!("{probe} RTT under load")
        } else {
            format!(
                "{}: {probe} RTT under load, per configuration",
                first.summary.scenario
            )
        };
        chart(root, &title, &link_line(&first.summary), curves)
    }
}

/// The x axis: log10 or linear, with its ticks.
struct XAxis {
    log: bool,
    range: (f64, f64),
    ticks: Vec<f64>,
}

impl XAxis {
    fn of(curves: &[Curve]) -> XAxis {
        let all = curves.iter().flat_map(|c| c.rtts.iter().copied());
        let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if !lo.is_finite() || hi <= 0.0 {
            // Nothing answered: an honest empty axis.
            return XAxis {
                log: false,
                range: (0.0, 100.0),
                ticks: linear_ticks(0.0, 100.0),
            };
        }
        let lo = lo.max(MIN_RTT_MS);
        if hi / lo > LOG_RATIO {
            let (a, b) = (lo.log10(), hi.log10());
            let pad = (b - a) * 0.04;
            let (a, b) = (a - pad, b + pad);
            XAxis {
                log: true,
                range: (a, b),
                ticks: log_ticks(a, b),
            }
        } else {
            // Zoom on the data: idle RTTs of 20–22 ms would be a vertical
            // line on an axis from 0.
            let pad = ((hi - lo) * 0.08).max(hi * 0.02).max(MIN_RTT_MS);
            let (a, b) = ((lo - pad).max(0.0), hi + pad);
            XAxis {
                log: false,
                range: (a, b),
                ticks: linear_ticks(a, b),
            }
        }
    }

    fn x(&self, ms: f64) -> f64 {
        if self.log {
            ms.max(MIN_RTT_MS).log10()
        } else {
            ms
        }
    }

    fn label(&self, v: f64) -> String {
        let ms = if self.log { 10f64.powf(v) } else { v };
        // Ticks are 1-2-5 × 10^k: rounding to 3 significant digits is exact.
        let s = format!("{:.3}", ms);
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn linear_ticks(a: f64, b: f64) -> Vec<f64> {
    let step = nice_step(b - a, 8.0);
    let first = (a / step).ceil() as i64;
    let last = (b / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// 1, 2, 5 × 10^k inside `[a, b]` (exponents); just the decades when the
/// span is wide enough that 1-2-5 labels would collide.
fn log_ticks(a: f64, b: f64) -> Vec<f64> {
    let mults: &[f64] = if b - a > 4.5 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let mut out = Vec::new();
    // At most a few dozen decades can pass the MIN_RTT_MS clamp and f64 range.
    for k in (a.floor() as i32)..=(b.ceil() as i32) {
        for m in mults {
            let v = (m * 10f64.powi(k)).log10();
            if v >= a && v <= b {
                out.push(v);
            }
        }
    }
    out
}

/// A linear f64 axis with ticks of our choosing, labelled by the mesh's
/// formatter (plotters' own custom-tick wrapper cannot take a formatter).
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Bold ticks only: light grid lines between 1-2-5 ticks add noise.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }
}

/// Step points of one curve: (x, % of sent at or below), thinned by rank.
fn steps(c: &Curve, axis: &XAxis) -> Vec<(f64, f64)> {
    let mut v = c.rtts.clone();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let stride = n.div_ceil(MAX_CDF_POINTS).max(1);
    let pct = |i: usize| 100.0 * i as f64 / c.sent.max(1) as f64;
    let mut out = Vec::with_capacity(2 * (n / stride + 2));
    let mut prev = 0.0;
    for (i, &ms) in v.iter().enumerate() {
        // Keep every stride-th sample and always the last one.
        if (i + 1) % stride != 0 && i + 1 != n {
            continue;
        }
        let x = axis.x(ms);
        out.push((x, prev));
        prev = pct(i + 1);
        out.push((x, prev));
    }
    out
}

fn chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    sub: &str,
    curves: Vec<Curve>,
) -> Result<(), String> {
    let (head, body) = root.split_vertically(58);
    head.draw_text(title, &bold(18), (14, 8)).map_err(err)?;
    head.draw_text(sub, &text(13), (14, 34)).map_err(err)?;
    // The legend goes under the chart: inside, it would cover some curve
    // whatever the corner (a bloated CDF crosses the lower right).
    let rows = curves.len().div_ceil(LEGEND_COLUMNS) as u32;
    let body_h = body.dim_in_pixel().1;
    let (body, legend_area) =
        body.split_vertically(body_h.saturating_sub(rows * LEGEND_ROW_PX + 8));
    let axis = XAxis::of(&curves);
    let x_coord = Ticked {
        inner: (axis.range.0..axis.range.1).into(),
        ticks: axis.ticks.clone(),
    };
    let mut chart = ChartBuilder::on(&body)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(x_coord, 0.0..100.0)
        .map_err(err)?;
    let fmt = |v: &f64| axis.label(*v);
    let x_desc = if axis.log {
        "RTT (ms, log scale)"
    } else {
        "RTT (ms)"
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .y_desc("probes at or below (%)")
        .x_label_formatter(&fmt)
        .y_label_formatter(&tick);
    house_mesh(&mut mesh, 0.12).draw().map_err(err)?;
    if curves.iter().all(|c| c.rtts.is_empty()) {
        let style = text(16)
            .color(&LOST)
            .pos(Pos::new(HPos::Center, VPos::Center));
        let mid = ((axis.range.0 + axis.range.1) / 2.0, 50.0);
        chart
            .draw_series([Text::new("no answered pings".to_string(), mid, style)])
            .map_err(err)?;
    }
    for c in &curves {
        let color = c.color;
        let points = steps(c, &axis);
        if points.len() <= 2 {
            // One sample: its vertical step is easy to miss, so mark it.
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        chart
            .draw_series(polyline(&points, color.stroke_width(2)))
            .map_err(err)?;
    }
    legend(&legend_area, &curves)
}

const LEGEND_COLUMNS: usize = 2;
const LEGEND_ROW_PX: u32 = 22;

/// Curve keys in a grid of [`LEGEND_COLUMNS`] under the chart.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    curves: &[Curve],
) -> Result<(), String> {
    let col_w = (area.dim_in_pixel().0 as i32 - 80) / LEGEND_COLUMNS as i32;
    for (i, c) in curves.iter().enumerate() {
        let x = 74 + (i % LEGEND_COLUMNS) as i32 * col_w;
        let y = (i / LEGEND_COLUMNS) as i32 * LEGEND_ROW_PX as i32 + 10;
        area.draw(&PathElement::new(
            vec![(x, y), (x + 24, y)],
            c.color.stroke_width(3),
        ))
        .map_err(err)?;
        let style = text(13).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(c.label.clone(), (x + 32, y), style))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(rtts: Vec<f64>, sent: usize) -> Curve {
        Curve {
            label: String::new(),
            color: IDLE,
            rtts,
            sent,
        }
    }

    #[test]
    fn log_axis_only_beyond_two_decades() {
        let narrow = XAxis::of(&[curve(vec![20.0, 200.0], 2)]);
        assert!(!narrow.log);
        let wide = XAxis::of(&[curve(vec![20.0], 1), curve(vec![6000.0], 1)]);
        assert!(wide.log);
        let labels: Vec<String> = wide.ticks.iter().map(|&t| wide.label(t)).collect();
        assert!(
            labels.contains(&"20".to_string()) && labels.contains(&"5000".to_string()),
            "{labels:?}"
        );
        let tight = XAxis::of(&[curve(vec![20.0, 22.0], 2)]);
        assert!(
            tight.range.0 > 19.0 && tight.range.1 < 23.0,
            "{:?}",
            tight.range
        );
        assert!(tight.ticks.len() >= 3, "{:?}", tight.ticks);
        let single = XAxis::of(&[curve(vec![6000.0], 1)]);
        assert!(single.range.0 < 6000.0 && single.range.1 > 6000.0);
        let empty = XAxis::of(&[curve(vec![], 5)]);
        assert!(!empty.log && empty.range.1 > empty.range.0);
    }

    #[test]
    fn lost_probes_keep_the_curve_below_100_percent() {
        let c = curve(vec![30.0, 10.0, 20.0], 4);
        let axis = XAxis::of(std::slice::from_ref(&c));
        let pts = steps(&c, &axis);
        assert_eq!(pts.first(), Some(&(10.0, 0.0)));
        assert_eq!(pts.last(), Some(&(30.0, 75.0)));
        assert!(
            pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1),
            "monotone"
        );
    }

    #[test]
    fn long_curves_are_thinned_but_keep_their_ends() {
        let n = 10 * MAX_CDF_POINTS + 7;
        let c = curve((0..n).map(|i| i as f64 + 1.0).collect(), n);
        let axis = XAxis::of(std::slice::from_ref(&c));
        let pts = steps(&c, &axis);
        assert!(pts.len() <= 2 * MAX_CDF_POINTS + 2, "{}", pts.len());
        assert_eq!(pts.last().map(|p| p.1), Some(100.0));
    }
}
