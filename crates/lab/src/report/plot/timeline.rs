//! The timeline, in the manner of flent's `all_scaled`: throughput per
//! direction over time on top, latency over time below, phases shaded and
//! named, the link's rates as reference lines (the capacity of each moment
//! on a link that follows a rate trace). With several runs, one column
//! per run on shared scales.
//!
//! # Principles
//! - Columns share every axis (time span, rate unit and maximum, latency
//!   maximum), computed once from all runs ([`Scales`]).
//! - A lost probe breaks the latency line and is marked on the top edge, so a
//!   gap is never drawn as a straight line across the silence.
//! - Legends top left, link labels right: every scenario starts and ends
//!   idle, so those corners hold no data.
//! - With autorate, sluice's own rate per direction is a dotted step line
//!   in the direction's colour, over the link's capacity (dashed).
//! - With several LAN hosts, each host's goodput per direction is a thin
//!   line in the direction's colour under the total (host A solid, B
//!   dashed, others dotted), so who got the link reads off the same chart.

use plotters::chart::MeshStyle;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    answered_rtts, bold, err, finite_max, fit, house_mesh, polyline, text, tick, DOWN, IRTT, LOST,
    MAX_COLUMNS, PING, UP,
};
use crate::model::RunResult;
use crate::report::{fmt_added, fmt_link_rate, fmt_ms, hosts_line, is_loaded, link_line};

/// One or more runs side by side (only the first [`MAX_COLUMNS`] are drawn).
pub(crate) struct Timeline<'a> {
    pub runs: &'a [RunResult],
}
figure!(Timeline);

/// Axes shared by every column.
struct Scales {
    t_max_s: f64,
    /// Divisor from bit/s to the unit shown, and its name.
    rate_div: f64,
    rate_unit: &'static str,
    rate_max: f64,
    lat_max_ms: f64,
}

/// Headroom above the highest rate: the legend and the link labels live there.
/// Legends sit top left and link labels right: every scenario starts and ends
/// idle, so those corners hold no data.
const RATE_HEADROOM: f64 = 1.3;
const LATENCY_HEADROOM: f64 = 1.12;

fn scales(runs: &[RunResult]) -> Scales {
    let t_max_s = finite_max(runs.iter().flat_map(|r| {
        let phases = r.summary.phases.iter().map(|p| p.end_s);
        let rate = r.series.rate.iter().map(|s| s.t_s);
        let ping = r.series.ping.iter().map(|s| s.t_s);
        let irtt = r.series.irtt.iter().map(|s| s.t_s);
        phases.chain(rate).chain(ping).chain(irtt)
    }))
    .filter(|t| *t > 0.0)
    .unwrap_or(1.0);
    let peak_bps = finite_max(runs.iter().flat_map(|r| {
        let l = &r.summary.link;
        let traced = l.trace.iter().flat_map(|t| {
            let ((_, d), (_, u)) = t.bounds();
            [d as f64, u as f64]
        });
        let link = [l.down_bps as f64, l.up_bps as f64]
            .into_iter()
            .chain(traced);
        let seen = r.series.rate.iter().flat_map(|s| [s.down_bps, s.up_bps]);
        link.into_iter().chain(seen)
    }))
    .filter(|b| *b > 0.0)
    .unwrap_or(1e6);
    // kbit/s for the DSL-era links, where Mbit/s would read 0.1…0.5.
    let (rate_div, rate_unit) = if peak_bps < 2e6 {
        (1e3, "kbit/s")
    } else {
        (1e6, "Mbit/s")
    };
    let lat_max_ms = finite_max(runs.iter().flat_map(answered_rtts))
        .map(|m| (m * LATENCY_HEADROOM).max(1.0))
        .unwrap_or(100.0);
    Scales {
        t_max_s,
        rate_div,
        rate_unit,
        rate_max: peak_bps / rate_div * RATE_HEADROOM,
        lat_max_ms,
    }
}

impl Timeline<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let runs = &self.runs[..self.runs.len().min(MAX_COLUMNS)];
        let (head, body) = root.split_vertically(60);
        let Some(first) = runs.first() else {
            head.draw_text("no runs", &bold(20), (14, 10))
                .map_err(err)?;
            return Ok(());
        };
        let s = &first.summary;
        let compare = runs.len() > 1;
        let title = if compare {
            format!("{} — {} configurations", s.scenario, runs.len())
        } else {
            format!(
                "{} — shaper {} — grade {}",
                s.scenario, s.shaper, s.grade.overall
            )
        };
        head.draw_text(&title, &bold(20), (14, 8)).map_err(err)?;
        let sub = format!("{}; {}", link_line(s), hosts_line(s));
        head.draw_text(&sub, &text(14), (14, 36)).map_err(err)?;

        let sc = scales(runs);
        for (run, col) in runs.iter().zip(body.split_evenly((1, runs.len()))) {
            let title = compare.then(|| {
                format!(
                    "{} — grade {} ({})",
                    run.summary.shaper,
                    run.summary.grade.overall,
                    fmt_added(run.summary.grade.added_ms)
                )
            });
            column(&col, run, &sc, title.as_deref())?;
        }
        Ok(())
    }
}

/// A chart of one run's column over time: 0..`t_max_s` across, 0..`y_max`
/// up; `(top, x_labels)` are the top margin and the x label area, in pixels.
fn time_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    (top, x_labels): (u32, u32),
    t_max_s: f64,
    y_max: f64,
) -> Result<ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    ChartBuilder::on(area)
        .margin_right(14)
        .margin_top(top)
        .x_label_area_size(x_labels)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..t_max_s, 0.0..y_max)
        .map_err(err)
}

/// The series' legend, in the upper left over a veil of white.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(text(13))
        .draw()
        .map_err(err)
}

/// The mesh of a time chart: plain numbers on both axes, the house style.
fn time_mesh<'m, 'a, 'b, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB>,
) -> &'m mut MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    house_mesh(mesh.x_label_formatter(&tick).y_label_formatter(&tick), 0.1)
}

/// One run: phase names, throughput, latency.
fn column<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    run: &RunResult,
    sc: &Scales,
    title: Option<&str>,
) -> Result<(), String> {
    let area = area.margin(0, 4, 6, 6);
    let area = match title {
        Some(t) => {
            let width = area.dim_in_pixel().0 as usize;
            area.titled(&fit(t, width / 9), bold(15)).map_err(err)?
        }
        None => area,
    };
    let (strip, charts) = area.split_vertically(24);
    let h = charts.dim_in_pixel().1;
    let (upper, lower) = charts.split_vertically(h * 42 / 100);
    let phases = &run.summary.phases;

    // ---- throughput ----
    let mut chart = time_chart(&upper, (4, 26), sc.t_max_s, sc.rate_max)?;
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(format!("throughput ({})", sc.rate_unit));
    time_mesh(&mut mesh).draw().map_err(err)?;
    backdrop(&mut chart, run, sc.rate_max)?;
    let link = &run.summary.link;
    for (down, color, dir) in [(true, DOWN, "down"), (false, UP, "up")] {
        // The capacity under the curves: a step line on a moving link.
        let pick = |(d, u): (u64, u64)| if down { d } else { u };
        let mut steps = vec![(0.0, pick(link.rates_at(0.0)) as f64 / sc.rate_div)];
        for st in link.trace.iter().flat_map(|t| &t.steps).skip(1) {
            if st.t_s >= sc.t_max_s {
                break;
            }
            let y = pick((st.down_bps, st.up_bps)) as f64 / sc.rate_div;
            let prev = steps.last().map_or(y, |p| p.1);
            steps.extend([(st.t_s, prev), (st.t_s, y)]);
        }
        let y = steps.last().map_or(0.0, |p| p.1);
        steps.push((sc.t_max_s, y));
        chart
            .draw_series(DashedLineSeries::new(
                steps,
                8,
                5,
                color.mix(0.8).stroke_width(1),
            ))
            .map_err(err)?;
        let bps = pick(link.rates_at(sc.t_max_s));
        let label = match link.trace {
            Some(_) => format!("capacity {dir}"),
            None => format!("link {dir} {}", fmt_link_rate(bps)),
        };
        let style = text(12)
            .color(&color)
            .pos(Pos::new(HPos::Right, VPos::Bottom));
        chart
            .draw_series([Text::new(label, (sc.t_max_s * 0.995, y), style)])
            .map_err(err)?;
    }
    let rate = &run.series.rate;
    for (color, name, pick) in [
        (
            DOWN,
            "download",
            (|r| r.down_bps) as fn(&crate::model::RateSample) -> f64,
        ),
        (UP, "upload", |r| r.up_bps),
    ] {
        let points: Vec<(f64, f64)> = rate
            .iter()
            .map(|r| (r.t_s, pick(r) / sc.rate_div))
            .filter(|(t, v)| t.is_finite() && v.is_finite())
            .collect();
        chart
            .draw_series(polyline(&points, color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    shaper_rate_lines(&mut chart, run, sc)?;
    host_lines(&mut chart, run, sc)?;
    if rate.is_empty() {
        note(&mut chart, "no throughput samples", sc.t_max_s, sc.rate_max)?;
    }
    legend(&mut chart)?;

    // Phase names above the chart, centred on their spans (pixel positions
    // come from the chart, so they line up with the shading below).
    let strip = strip.use_screen_coord();
    let y = strip.get_base_pixel().1 + 12;
    for p in phases {
        let (x0, _) = chart.backend_coord(&(p.start_s.max(0.0), 0.0));
        let (x1, _) = chart.backend_coord(&(p.end_s.min(sc.t_max_s), 0.0));
        let room_px = (x1 - x0 - 6).max(0) as u32;
        let style = if is_loaded(p) { bold(13) } else { text(13) };
        let (name, style) = fit_px(&strip, &p.name, style, room_px);
        let style = style.pos(Pos::new(HPos::Center, VPos::Center));
        strip
            .draw(&Text::new(name, ((x0 + x1) / 2, y), style))
            .map_err(err)?;
    }

    // ---- latency ----
    let mut chart = time_chart(&lower, (22, 40), sc.t_max_s, sc.lat_max_ms)?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc("time (s)").y_desc("latency (ms)");
    time_mesh(&mut mesh).draw().map_err(err)?;
    backdrop(&mut chart, run, sc.lat_max_ms)?;
    let irtt: Vec<(f64, Option<f64>)> = run.series.irtt.iter().map(|p| (p.t_s, p.rtt_ms)).collect();
    let ping: Vec<(f64, Option<f64>)> = run.series.ping.iter().map(|p| (p.t_s, p.rtt_ms)).collect();
    // irtt first: denser and thinner, ping stays readable on top. Where
    // ICMP was dropped the latency series is irtt's: drawn once.
    let probe = run.summary.link.latency_probe();
    if !run.summary.link.drop_icmp {
        trace(&mut chart, &irtt, IRTT, 1, "irtt RTT")?;
    }
    trace(&mut chart, &ping, PING, 2, &format!("{probe} RTT"))?;
    let lost: Vec<f64> = ping
        .iter()
        .filter(|(t, v)| v.is_none() && t.is_finite())
        .map(|(t, _)| *t)
        .collect();
    if !lost.is_empty() {
        // Lost probes sit on the top edge: off the scale, like their RTT.
        let y = sc.lat_max_ms * 0.97;
        chart
            .draw_series(
                lost.iter()
                    .map(|&t| Cross::new((t, y), 4, LOST.stroke_width(2))),
            )
            .map_err(err)?
            .label(format!("{probe} lost ({})", lost.len()))
            .legend(|(x, y)| Cross::new((x + 10, y), 4, LOST.stroke_width(2)));
    }
    // On a scale shared with a bloated run a shaped run's line hugs the
    // axis: its numbers under load are written out (the summary's own).
    let worst = phases
        .iter()
        .filter(|p| is_loaded(p))
        .filter_map(|p| p.latency_ms)
        .max_by(|a, b| a.p50.total_cmp(&b.p50));
    if let Some(l) = worst {
        let label = format!(
            "under load: {probe} p50 {}, p99 {}",
            fmt_ms(l.p50),
            fmt_ms(l.p99)
        );
        // Above the plot area, right-aligned: clear of the data and markers.
        let (x, y) = chart.backend_coord(&(sc.t_max_s, sc.lat_max_ms));
        let style = text(13).pos(Pos::new(HPos::Right, VPos::Bottom));
        lower
            .use_screen_coord()
            .draw(&Text::new(label, (x, y - 3), style))
            .map_err(err)?;
    }
    let answered = ping.iter().chain(&irtt).any(|(_, v)| v.is_some());
    if !answered {
        note(&mut chart, "no answered probes", sc.t_max_s, sc.lat_max_ms)?;
    }
    if !answered && lost.is_empty() {
        // No series drew anything: no empty legend box.
        return Ok(());
    }
    legend(&mut chart)?;
    Ok(())
}

/// sluice's own rate per direction (autorate runs; nothing otherwise): a
/// dotted step line in the direction's colour.
fn shaper_rate_lines<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    run: &RunResult,
    sc: &Scales,
) -> Result<(), String> {
    for (dir, color, name) in [
        (crate::model::Dir::Down, DOWN, "sluice rate down"),
        (crate::model::Dir::Up, UP, "sluice rate up"),
    ] {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for r in run.series.shaper_rate.iter().filter(|r| r.dir == dir) {
            let (t, y) = (r.t_s.clamp(0.0, sc.t_max_s), r.bps / sc.rate_div);
            if let Some(&(_, prev)) = points.last() {
                points.push((t, prev));
            }
            points.push((t, y));
        }
        let Some(&(_, last)) = points.last() else {
            continue;
        };
        points.push((sc.t_max_s, last));
        let style = color.mix(0.7).stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(points, 2, 3, style))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 20, y)], 2, 3, style));
    }
    Ok(())
}

/// Each host's goodput per direction (multi-host runs; nothing otherwise).
fn host_lines<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    run: &RunResult,
    sc: &Scales,
) -> Result<(), String> {
    let hosts = run.series.host_rate.iter().map(|r| r.host).max();
    for h in 0..hosts.map_or(0, |m| m + 1) {
        for (color, dir, down) in [(DOWN, "down", true), (UP, "up", false)] {
            let points: Vec<(f64, f64)> = run
                .series
                .host_rate
                .iter()
                .filter(|r| r.host == h)
                .map(|r| {
                    (
                        r.t_s,
                        if down { r.down_bps } else { r.up_bps } / sc.rate_div,
                    )
                })
                .filter(|(t, v)| t.is_finite() && v.is_finite())
                .collect();
            let style = color.mix(0.9).stroke_width(1);
            let label = format!("host {} {dir}", crate::model::host_name(h));
            // Solid, dashed, dotted: told apart without more colours.
            if h == 0 {
                chart
                    .draw_series(polyline(&points, style))
                    .map_err(err)?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                continue;
            }
            let (dash, gap) = if h == 1 { (6, 4) } else { (2, 3) };
            chart
                .draw_series(DashedLineSeries::new(points, dash, gap, style))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 20, y)], dash, gap, style)
                });
        }
    }
    Ok(())
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Loaded phases shaded, boundaries dashed: the same in both charts.
fn backdrop<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    run: &RunResult,
    y_max: f64,
) -> Result<(), String> {
    let phases = &run.summary.phases;
    chart
        .draw_series(
            phases
                .iter()
                .filter(|p| is_loaded(p) && p.start_s.is_finite() && p.end_s.is_finite())
                .map(|p| {
                    Rectangle::new(
                        [(p.start_s, 0.0), (p.end_s, y_max)],
                        BLACK.mix(0.05).filled(),
                    )
                }),
        )
        .map_err(err)?;
    for p in phases.iter().skip(1).filter(|p| p.start_s.is_finite()) {
        chart
            .draw_series(DashedLineSeries::new(
                [(p.start_s, 0.0), (p.start_s, y_max)],
                6,
                4,
                BLACK.mix(0.45).stroke_width(1),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// A probe series as a line broken where probes were lost; a sample alone
/// between losses is a dot (a one-point line would not show).
fn trace<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    samples: &[(f64, Option<f64>)],
    color: RGBColor,
    width: u32,
    label: &str,
) -> Result<(), String> {
    let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for &(t, v) in samples {
        match v.filter(|v| v.is_finite() && t.is_finite()) {
            Some(v) => segments.last_mut().map(|s| s.push((t, v))).unwrap_or(()),
            None if segments.last().is_some_and(|s| !s.is_empty()) => segments.push(Vec::new()),
            None => {}
        }
    }
    let mut labelled = false;
    for seg in segments.into_iter().filter(|s| !s.is_empty()) {
        let anno = if seg.len() == 1 {
            chart
                .draw_series(seg.iter().map(|&p| Circle::new(p, 2, color.filled())))
                .map_err(err)?
        } else if width <= 1 {
            // Hairlines have no joins to spike: one path keeps the SVG small
            // for dense series (irtt every 20 ms).
            chart
                .draw_series(LineSeries::new(seg, color.stroke_width(width)))
                .map_err(err)?
        } else {
            chart
                .draw_series(polyline(&seg, color.stroke_width(width)))
                .map_err(err)?
        };
        if !labelled {
            labelled = true;
            anno.label(label).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width.max(2)))
            });
        }
    }
    Ok(())
}

/// `name` in `style`, smaller or shortened until it fits `room_px`.
fn fit_px<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    name: &str,
    style: TextStyle<'static>,
    room_px: u32,
) -> (String, TextStyle<'static>) {
    let width = |s: &str, st: &TextStyle| {
        area.estimate_text_size(s, st)
            .map(|(w, _)| w)
            .unwrap_or(u32::MAX)
    };
    if width(name, &style) <= room_px {
        return (name.to_string(), style);
    }
    let small = text(11);
    // Names are short (a few words): trying each length is cheap.
    let mut chars = name.chars().count();
    loop {
        let cut = fit(name, chars);
        if chars == 0 || width(&cut, &small) <= room_px {
            return (cut, small);
        }
        chars -= 1;
    }
}

/// A message in the middle of an empty chart.
fn note<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    msg: &str,
    x_max: f64,
    y_max: f64,
) -> Result<(), String> {
    let style = text(16)
        .color(&LOST)
        .pos(Pos::new(HPos::Center, VPos::Center));
    chart
        .draw_series([Text::new(
            msg.to_string(),
            (x_max / 2.0, y_max / 2.0),
            style,
        )])
        .map_err(err)?;
    Ok(())
}
