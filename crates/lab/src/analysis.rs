//! From a run's raw series to its summary: percentiles, phase statistics,
//! the bufferbloat grade and a VoIP quality estimate.
//!
//! # Principles
//! - Pure functions of the recorded data: the same series always gives the
//!   same summary, so the analysis is unit-tested without a network.
//! - Percentiles are nearest-rank on the sorted samples (no interpolation),
//!   so every reported latency is one that was measured.
//! - The grade follows DSLReports' speed test: the increase of the *mean*
//!   latency under load over the idle mean, A+ < 5 ms, A < 30, B < 60,
//!   C < 200, D < 400, else F.
//! - MOS follows the simplified E-model of ITU-T G.107 as used for VoIP
//!   monitoring (Cole & Rosenbluth, 2001): effective latency = one-way
//!   delay + 2 × jitter + 10 ms codec delay; R = 93.2 − latency/40 below
//!   160 ms, 93.2 − (latency − 120)/10 above; −2.5 per percent of loss.
//! - Utilisation is against the capacity of each moment: every rate
//!   sample's bits over what the link could carry during its interval (the
//!   trace's mean there, on a moving link), so a shaper that tracks a
//!   falling rate is not credited with the capacity the link no longer had.
//! - With several LAN hosts, a host's share of a direction in a phase is
//!   its mean goodput over the sum of all hosts' (percent): shares add up
//!   to 100 whatever the link carried, so they say how the shaper split
//!   what it passed, which is what host isolation is about.

use crate::model::{
    host_name, Dir, Grades, HostPhase, HostSummary, Latency, Link, PhaseSummary, RateStep,
    RunResult, Scenario, Series, Summary, Voip,
};

/// Nearest-rank percentile `p` (0..=100) of ascending `sorted`; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let p = p.clamp(0.0, 100.0);
    // Nearest rank: the smallest value with at least p % of samples at or below it.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Statistics of a set of latencies; `None` when there are none.
pub fn latency(samples: impl IntoIterator<Item = f64>) -> Option<Latency> {
    let mut v: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    Some(Latency {
        mean,
        p50: percentile(&v, 50.0),
        p90: percentile(&v, 90.0),
        p99: percentile(&v, 99.0),
        max: v[v.len() - 1],
        samples: v.len() as u64,
    })
}

// One grade for the lab and the engine's health verdict.
pub use sluice_time::grade::grade;
use sluice_time::grade::grade_rank;

/// Estimated mean opinion score (1..=4.5) of a G.711-like call.
pub fn mos(owd_ms: f64, jitter_ms: f64, loss_pct: f64) -> f64 {
    let eff = owd_ms.max(0.0) + 2.0 * jitter_ms.max(0.0) + 10.0;
    let mut r = if eff < 160.0 {
        93.2 - eff / 40.0
    } else {
        93.2 - (eff - 120.0) / 10.0
    };
    r -= 2.5 * loss_pct.clamp(0.0, 100.0);
    let r = r.clamp(0.0, 100.0);
    let m = 1.0 + 0.035 * r + 7.0e-6 * r * (r - 60.0) * (100.0 - r);
    m.clamp(1.0, 4.5)
}

/// Mean absolute difference of consecutive one-way delays (IPDV), ms.
fn ipdv(owds: &[f64]) -> f64 {
    if owds.len() < 2 {
        return 0.0;
    }
    let sum: f64 = owds.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    sum / (owds.len() - 1) as f64
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Mean of the rate samples whose interval ends inside `[start, end)`.
fn phase_rates(series: &Series, start: f64, end: f64) -> (f64, f64) {
    mean_rates(
        series
            .rate
            .iter()
            .filter(|r| r.t_s > start && r.t_s <= end)
            .map(|r| (r.down_bps, r.up_bps)),
    )
}

/// Utilisation over `[start, end)`: the received bits of the rate samples
/// ending in it over the capacity the link had during the same sampling
/// intervals, percent, per direction.
fn phase_util(series: &Series, link: &Link, start: f64, end: f64) -> (f64, f64) {
    let (mut got, mut cap) = ((0.0, 0.0), (0.0, 0.0));
    // A sample covers the time since the one before it (the first, one
    // sampling period).
    let period = crate::model::RATE_PERIOD.as_secs_f64();
    let mut prev = f64::NEG_INFINITY;
    for r in &series.rate {
        let a = if prev.is_finite() {
            prev
        } else {
            r.t_s - period
        };
        prev = r.t_s;
        if !(r.t_s > start && r.t_s <= end) || r.t_s <= a {
            continue;
        }
        let dt = r.t_s - a;
        let (cd, cu) = link.mean_capacity(a, r.t_s);
        got.0 += r.down_bps * dt;
        got.1 += r.up_bps * dt;
        cap.0 += cd * dt;
        cap.1 += cu * dt;
    }
    let pct = |g: f64, c: f64| if c > 0.0 { 100.0 * g / c } else { 0.0 };
    (pct(got.0, cap.0), pct(got.1, cap.1))
}

/// Share of a step up's new capacity the throughput must reach.
pub const STEP_UP_SHARE: f64 = 0.8;
/// Window of the throughput mean a step up is judged on.
const STEP_UP_WINDOW_S: f64 = 1.0;

/// Least change of a link's capacity, as a share of the capacity before,
/// that counts as a step to follow. Traces that move every second (`lte`,
/// `starlink`'s ±10 % within a slot, `docsis-evening`'s ±5 %) would
/// otherwise be timed at every wiggle: a 5 % rise "followed to 80 %" says
/// nothing, and the next wiggle a second later cut every search short.
pub const STEP_MIN_CHANGE: f64 = 0.2;

/// Each step of a moving link's capacity (a change of at least
/// [`STEP_MIN_CHANGE`]) inside a phase loaded in its direction, and how
/// long the shaper took to follow it: down, until its own rate (autorate's
/// log) was at or below the new capacity; up, until the throughput's 1 s
/// mean reached [`STEP_UP_SHARE`] of it. The search ends at the
/// direction's next step or the end of the loaded phase.
fn rate_steps(scenario: &Scenario, series: &Series, phases: &[PhaseSummary]) -> Vec<RateStep> {
    let Some(trace) = &scenario.link.trace else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for dir in [Dir::Down, Dir::Up] {
        let cap = |s: &crate::trace::Step| match dir {
            Dir::Down => s.down_bps,
            Dir::Up => s.up_bps,
        };
        let changes: Vec<(f64, u64, u64)> = trace
            .steps
            .windows(2)
            .filter(|w| {
                let (from, to) = (cap(&w[0]) as f64, cap(&w[1]) as f64);
                (to - from).abs() >= STEP_MIN_CHANGE * from
            })
            .map(|w| (w[1].t_s, cap(&w[0]), cap(&w[1])))
            .collect();
        let own: Vec<(f64, f64)> = series
            .shaper_rate
            .iter()
            .filter(|r| r.dir == dir)
            .map(|r| (r.t_s, r.bps))
            .collect();
        for (i, &(t, from, to)) in changes.iter().enumerate() {
            let Some(p) = phases.iter().find(|p| p.start_s <= t && t < p.end_s) else {
                continue;
            };
            let loaded = match dir {
                Dir::Down => p.load_down,
                Dir::Up => p.load_up,
            };
            if !loaded {
                continue;
            }
            let until = changes.get(i + 1).map_or(p.end_s, |c| c.0).min(p.end_s);
            let (settle_s, measured) = if to < from {
                if own.is_empty() {
                    (None, false)
                } else {
                    // The rate in force at t, then each decision after it.
                    let at_t = own.iter().rev().find(|r| r.0 <= t).map(|r| (t, r.1));
                    let after = own.iter().copied().filter(|r| r.0 > t && r.0 < until);
                    let hit = at_t
                        .into_iter()
                        .chain(after)
                        .find(|r| r.1 <= to as f64)
                        .map(|r| r.0 - t);
                    (hit, true)
                }
            } else {
                let goal = STEP_UP_SHARE * to as f64;
                let rate: Vec<(f64, f64)> = series
                    .rate
                    .iter()
                    .map(|r| {
                        let v = match dir {
                            Dir::Down => r.down_bps,
                            Dir::Up => r.up_bps,
                        };
                        (r.t_s, v)
                    })
                    .collect();
                let hit = rate
                    .iter()
                    .filter(|r| r.0 > t && r.0 <= until)
                    .find(|r| {
                        // The second before the sample (a hair less, so a
                        // sample a float's width inside is not counted twice).
                        let from = r.0 - STEP_UP_WINDOW_S + 1e-6;
                        let w: Vec<f64> = rate
                            .iter()
                            .filter(|x| x.0 > from && x.0 <= r.0)
                            .map(|x| x.1)
                            .collect();
                        !w.is_empty() && mean(&w) >= goal
                    })
                    .map(|r| r.0 - t);
                (hit, true)
            };
            out.push(RateStep {
                t_s: t,
                dir,
                from_bps: from,
                to_bps: to,
                settle_s,
                window_s: until - t,
                measured,
            });
        }
    }
    out.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    out
}

/// Mean (down, up) of rate samples; zero without any.
fn mean_rates(samples: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let (mut n, mut down, mut up) = (0.0, 0.0, 0.0);
    for (d, u) in samples {
        n += 1.0;
        down += d;
        up += u;
    }
    if n == 0.0 {
        return (0.0, 0.0);
    }
    (down / n, up / n)
}

/// The VoIP figures of the irtt probes sent in `[start, end)`.
fn voip_in(series: &Series, start: f64, end: f64) -> Option<Voip> {
    let probes: Vec<_> = series
        .irtt
        .iter()
        .filter(|p| p.t_s >= start && p.t_s < end)
        .collect();
    if probes.is_empty() {
        return None;
    }
    let lost = probes.iter().filter(|p| p.rtt_ms.is_none()).count();
    let up: Vec<f64> = probes.iter().filter_map(|p| p.up_owd_ms).collect();
    let down: Vec<f64> = probes.iter().filter_map(|p| p.down_owd_ms).collect();
    let owd = mean(&up).max(mean(&down));
    let jitter = ipdv(&up).max(ipdv(&down));
    let loss_pct = 100.0 * lost as f64 / probes.len() as f64;
    Some(Voip {
        owd_ms: owd,
        jitter_ms: jitter,
        loss_pct,
        mos: mos(owd, jitter, loss_pct),
    })
}

/// Summarises a run of `scenario` (with the phase lengths it ran with).
pub fn summarize(
    scenario: &Scenario,
    shaper: &str,
    series: &Series,
    started_at: String,
    mut warnings: Vec<String>,
) -> Summary {
    let windows = scenario.phase_windows();
    let mut phases = Vec::with_capacity(windows.len());
    for (i, (&(start, end), spec)) in windows.iter().zip(&scenario.phases).enumerate() {
        let pings: Vec<_> = series
            .ping
            .iter()
            .filter(|p| p.t_s >= start && p.t_s < end)
            .collect();
        let answered = pings.iter().filter_map(|p| p.rtt_ms);
        let loss_pct = if pings.is_empty() {
            0.0
        } else {
            100.0 * pings.iter().filter(|p| p.rtt_ms.is_none()).count() as f64 / pings.len() as f64
        };
        let (down_bps, up_bps) = phase_rates(series, start, end);
        let (load_down, load_up) = scenario.load_in_phase(i);
        let (down_util, up_util) = phase_util(series, &scenario.link, start, end);
        phases.push(PhaseSummary {
            name: spec.name.clone(),
            start_s: start,
            end_s: end,
            down_bps,
            up_bps,
            latency_ms: latency(answered),
            loss_pct,
            load_down,
            load_up,
            down_util_pct: load_down.then_some(down_util),
            up_util_pct: load_up.then_some(up_util),
            verdicts: crate::verdict::of_phase(&series.health, start, end),
        });
    }

    // Idle: the unloaded phases before the first load; else any unloaded one.
    let first_load = phases
        .iter()
        .position(|p| p.load_down || p.load_up)
        .unwrap_or(phases.len());
    let idle_window = |p: &&PhaseSummary| !(p.load_down || p.load_up);
    let mut idle_pings: Vec<f64> = phases[..first_load]
        .iter()
        .filter(idle_window)
        .flat_map(|p| pings_in(series, p.start_s, p.end_s))
        .collect();
    if idle_pings.is_empty() {
        idle_pings = phases
            .iter()
            .filter(idle_window)
            .flat_map(|p| pings_in(series, p.start_s, p.end_s))
            .collect();
    }
    let idle = latency(idle_pings).unwrap_or_else(|| {
        warnings.push("no answered ping while idle: added latency measured from 0 ms".into());
        Latency::default()
    });

    let added = |p: &PhaseSummary| p.latency_ms.map(|l| (l.mean - idle.mean).max(0.0));
    let worst = |f: &dyn Fn(&PhaseSummary) -> bool| -> Option<f64> {
        phases
            .iter()
            .filter(|p| f(p))
            // A loaded phase with no answered ping at all is as bad as it gets.
            .map(|p| added(p).unwrap_or(f64::INFINITY))
            .reduce(f64::max)
    };
    let mut added_down = worst(&|p| p.load_down && !p.load_up);
    let mut added_up = worst(&|p| p.load_up && !p.load_down);
    let overall = worst(&|p| p.load_down || p.load_up).unwrap_or(0.0);

    // Bidirectional load only: the irtt one-way delays tell the directions apart.
    if scenario.irtt.is_some() {
        let idle_owd = owd_means(series, &phases, |p| !(p.load_down || p.load_up));
        let load_owd = owd_means(series, &phases, |p| p.load_down && p.load_up);
        if let (Some((iu, id)), Some((lu, ld))) = (idle_owd, load_owd) {
            added_up = added_up.or(Some((lu - iu).max(0.0)));
            added_down = added_down.or(Some((ld - id).max(0.0)));
        }
    }

    // VoIP: the probes of the loaded phases the stream ran in.
    let voip = scenario.irtt.as_ref().and_then(|spec| {
        let loaded: Vec<_> = (spec.from..=spec.to)
            .filter(|&i| phases.get(i).is_some_and(|p| p.load_down || p.load_up))
            .collect();
        let (a, b) = (*loaded.first()?, *loaded.last()?);
        voip_in(series, phases[a].start_s, phases[b].end_s)
    });

    let overall_grade = grade(overall).to_string();
    let down = added_down.map(|a| grade(a).to_string());
    let up = added_up.map(|a| grade(a).to_string());
    // The overall grade is never better than a direction's.
    let overall_grade = [Some(overall_grade.clone()), down.clone(), up.clone()]
        .into_iter()
        .flatten()
        .max_by_key(|g| grade_rank(g))
        .unwrap_or(overall_grade);

    for f in &series.flows {
        if let Some(e) = &f.error {
            warnings.push(format!("{:?} flow ({} streams): {e}", f.dir, f.streams));
        }
    }

    let hosts = host_summaries(scenario, series, &phases);
    let rate_steps = rate_steps(scenario, series, &phases);
    Summary {
        scenario: scenario.name.clone(),
        shaper: shaper.to_string(),
        link: scenario.link.clone(),
        cc: scenario.cc.clone(),
        ecn: scenario.ecn,
        sack: scenario.sack,
        timestamps: scenario.timestamps,
        attack: None,
        idle_latency_ms: idle,
        phases,
        voip,
        grade: Grades {
            overall: overall_grade,
            down,
            up,
            added_ms: if overall.is_finite() {
                overall
            } else {
                f64::MAX
            },
            added_down_ms: added_down.map(finite),
            added_up_ms: added_up.map(finite),
        },
        flows: series.flows.clone(),
        hosts,
        rate_steps,
        warnings,
        started_at,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Each LAN host's goodput, shares, ping and VoIP figures per phase; empty
/// with a single host (its figures are the run's).
pub fn host_summaries(
    scenario: &Scenario,
    series: &Series,
    phases: &[PhaseSummary],
) -> Vec<HostSummary> {
    if scenario.hosts < 2 {
        return Vec::new();
    }
    // Mean goodput of each host in each phase: [phase][host] = (down, up).
    let rates: Vec<Vec<(f64, f64)>> = phases
        .iter()
        .map(|p| {
            (0..scenario.hosts)
                .map(|h| host_rates(series, h, p.start_s, p.end_s))
                .collect()
        })
        .collect();
    let share = |mine: f64, all: f64| (all > 0.0).then(|| 100.0 * mine / all);
    (0..scenario.hosts)
        .map(|h| {
            let phases = phases
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (down, up) = rates[i][h];
                    let sum_down: f64 = rates[i].iter().map(|r| r.0).sum();
                    let sum_up: f64 = rates[i].iter().map(|r| r.1).sum();
                    let irtt_here = scenario
                        .irtt
                        .as_ref()
                        .is_some_and(|s| s.host == h && s.from <= i && i <= s.to);
                    HostPhase {
                        name: p.name.clone(),
                        down_bps: down,
                        up_bps: up,
                        down_share_pct: share(down, sum_down),
                        up_share_pct: share(up, sum_up),
                        ping_ms: if scenario.ping_host == h {
                            p.latency_ms
                        } else {
                            None
                        },
                        voip: if irtt_here {
                            voip_in(series, p.start_s, p.end_s)
                        } else {
                            None
                        },
                    }
                })
                .collect();
            HostSummary {
                host: h,
                name: host_name(h),
                ip: crate::topo::host_ip(h),
                phases,
            }
        })
        .collect()
}

/// Mean goodput (down, up) of `host` over the samples whose interval ends
/// inside `(start, end]`.
fn host_rates(series: &Series, host: usize, start: f64, end: f64) -> (f64, f64) {
    mean_rates(
        series
            .host_rate
            .iter()
            .filter(|r| r.host == host && r.t_s > start && r.t_s <= end)
            .map(|r| (r.down_bps, r.up_bps)),
    )
}

/// JSON has no infinity: a phase without any answered probe reports f64::MAX.
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        f64::MAX
    }
}

fn pings_in(series: &Series, start: f64, end: f64) -> impl Iterator<Item = f64> + '_ {
    series
        .ping
        .iter()
        .filter(move |p| p.t_s >= start && p.t_s < end)
        .filter_map(|p| p.rtt_ms)
}

/// Mean (up, down) one-way delay of irtt probes in the phases `keep` selects.
fn owd_means(
    series: &Series,
    phases: &[PhaseSummary],
    keep: impl Fn(&PhaseSummary) -> bool,
) -> Option<(f64, f64)> {
    let mut up = Vec::new();
    let mut down = Vec::new();
    for p in phases.iter().filter(|p| keep(p)) {
        for s in series
            .irtt
            .iter()
            .filter(|s| s.t_s >= p.start_s && s.t_s < p.end_s)
        {
            up.extend(s.up_owd_ms);
            down.extend(s.down_owd_ms);
        }
    }
    if up.is_empty() || down.is_empty() {
        return None;
    }
    Some((mean(&up), mean(&down)))
}

/// Convenience: summarise and bundle.
pub fn finish(
    scenario: &Scenario,
    shaper: &str,
    series: Series,
    started_at: String,
    warnings: Vec<String>,
) -> RunResult {
    let summary = summarize(scenario, shaper, &series, started_at, warnings);
    RunResult { summary, series }
}

#[cfg(test)]
mod tests;
