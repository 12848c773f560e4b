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
    let period = crate::runner::RATE_PERIOD.as_secs_f64();
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
mod tests {
    use super::*;
    use crate::model::{PingSample, RateSample};
    use crate::scenario;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 90.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        let l = latency([3.0, 1.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((l.p50, l.max, l.samples), (2.0, 3.0, 3));
        assert!((l.mean - 2.0).abs() < 1e-12);
    }

    #[test]
    fn mos_falls_with_delay_jitter_and_loss() {
        let perfect = mos(0.0, 0.0, 0.0);
        assert!(perfect > 4.3 && perfect <= 4.5, "{perfect}");
        // A good call: 20 ms one way, 1 ms jitter, no loss is "toll quality".
        assert!(mos(20.0, 1.0, 0.0) > 4.3);
        // Monotone in each argument.
        assert!(mos(200.0, 1.0, 0.0) < mos(100.0, 1.0, 0.0));
        assert!(mos(20.0, 30.0, 0.0) < mos(20.0, 5.0, 0.0));
        assert!(mos(20.0, 1.0, 5.0) < mos(20.0, 1.0, 1.0));
        // Two seconds of bufferbloat makes a call useless.
        assert!(mos(2000.0, 50.0, 0.0) < 1.5);
        assert_eq!(mos(5000.0, 500.0, 100.0), 1.0);
    }

    fn series_for(s: &Scenario, idle_ms: f64, loaded_ms: f64) -> Series {
        let mut series = Series::default();
        let windows = s.phase_windows();
        for (i, &(a, b)) in windows.iter().enumerate() {
            let (d, u) = s.load_in_phase(i);
            let rtt = if d || u { loaded_ms } else { idle_ms };
            let mut t = a;
            while t < b {
                series.ping.push(PingSample {
                    t_s: t,
                    rtt_ms: Some(rtt),
                });
                series.rate.push(RateSample {
                    t_s: t + 0.5,
                    down_bps: if d { 4e6 } else { 0.0 },
                    up_bps: if u { 9e5 } else { 0.0 },
                });
                t += 0.5;
            }
        }
        series
    }

    #[test]
    fn utilisation_is_against_the_capacity_of_each_moment() {
        let mut s = scenario::tcp_1up();
        for p in &mut s.phases {
            p.secs = 10.0;
        }
        s.link.up_bps = 1_000_000;
        // Rate samples at 0.5 s: a constant 9e5 up in the loaded phase.
        let series = series_for(&s, 20.0, 40.0);
        let fixed = summarize(&s, "x", &series, "t".into(), vec![]);
        let up = &fixed.phases[1];
        assert!((up.up_util_pct.unwrap() - 90.0).abs() < 1e-9, "{up:?}");
        assert_eq!(up.down_util_pct, None, "no download load");
        assert_eq!(fixed.phases[0].up_util_pct, None, "idle");

        // The link halves in the middle of the loaded phase (10..20 s): the
        // same 9e5 is 90 % of 1M for 5 s and 180 % of 0.5M for 5 s, i.e.
        // 9e5 × 10 s over (1M + 0.5M) × 5 s = 120 %.
        let trace = crate::trace::RateTrace::parse("half", "0 5M 1M\n15 5M 500k").unwrap();
        s.link.follow(trace);
        let moving = summarize(&s, "x", &series, "t".into(), vec![]);
        let up = moving.phases[1].up_util_pct.unwrap();
        assert!((up - 120.0).abs() < 1e-9, "{up}");
        // A sample straddling the step counts each part at its own rate.
        let mut one = Series::default();
        one.rate.push(RateSample {
            t_s: 14.5,
            down_bps: 0.0,
            up_bps: 0.0,
        });
        one.rate.push(RateSample {
            t_s: 15.5,
            down_bps: 0.0,
            up_bps: 750_000.0,
        });
        let (_, u) = phase_util(&one, &s.link, 15.0, 16.0);
        assert!((u - 100.0).abs() < 1e-9, "{u}");
    }

    /// `tcp_1down` in 10 s phases (loaded 10..20 s) on `trace`, with the
    /// download's throughput `down(t)` sampled every 0.1 s of the load.
    fn on_trace(trace: &str, down: impl Fn(f64) -> f64) -> (Scenario, Series) {
        let mut s = scenario::tcp_1down();
        for p in &mut s.phases {
            p.secs = 10.0;
        }
        s.link
            .follow(crate::trace::RateTrace::parse("t", trace).unwrap());
        let mut series = Series::default();
        for i in 101..=200 {
            let t = f64::from(i) / 10.0;
            series.rate.push(RateSample {
                t_s: t,
                down_bps: down(t),
                up_bps: 0.0,
            });
        }
        (s, series)
    }

    #[test]
    fn rate_steps_time_the_shapers_answer_to_each_step_of_the_link() {
        // The download falls to 4M at 12 s, back at 16 s; the upload's
        // step at 5 s is in an idle phase, the one at 18 s in a phase
        // without upload load: neither counts.
        let (s, mut series) = on_trace("0 10M 1M\n5 10M 2M\n12 4M 2M\n16 10M 2M\n18 10M 1M", |t| {
            if t <= 16.0 {
                3.5e6
            } else {
                9e6
            }
        });
        let sum = summarize(&s, "x", &series, "t".into(), vec![]);
        assert_eq!(sum.rate_steps.len(), 2, "{:?}", sum.rate_steps);
        let (down, up) = (&sum.rate_steps[0], &sum.rate_steps[1]);
        assert_eq!(
            (down.t_s, down.from_bps, down.to_bps),
            (12.0, 10_000_000, 4_000_000)
        );
        assert!(!down.measured && down.settle_s.is_none(), "no autorate log");
        // Up: the 1 s mean reaches 80 % of 10M with 9 of its 10 samples at 9M.
        assert_eq!((up.t_s, up.dir, up.to_bps), (16.0, Dir::Down, 10_000_000));
        let d = up.settle_s.expect("followed");
        assert!((d - 0.9).abs() < 0.051, "{d}");

        // With autorate's log: below 4M 0.9 s after the step.
        let rate = |t_s, bps| crate::model::ShaperRateSample {
            t_s,
            dir: Dir::Down,
            bps,
        };
        series.shaper_rate = vec![rate(0.0, 9.7e6), rate(12.5, 6e6), rate(12.9, 3.9e6)];
        let sum = summarize(&s, "x", &series, "t".into(), vec![]);
        let d = sum.rate_steps[0].settle_s.expect("followed");
        assert!((d - 0.9).abs() < 1e-9 && sum.rate_steps[0].measured, "{d}");
        // Never below the new capacity before the next step: not followed
        // within the 4 s to it.
        series.shaper_rate = vec![rate(0.0, 9.7e6), rate(12.5, 6e6), rate(16.5, 3e6)];
        let sum = summarize(&s, "x", &series, "t".into(), vec![]);
        assert_eq!(sum.rate_steps[0].settle_s, None);
        assert!(sum.rate_steps[0].measured);
        assert!((sum.rate_steps[0].window_s - 4.0).abs() < 1e-9);
        // The last step searches to the end of its loaded phase.
        let last = &sum.rate_steps[1];
        assert!(last.window_s > 0.0 && last.t_s + last.window_s <= s.total_secs());
    }

    #[test]
    fn only_steps_of_a_fifth_or_more_are_timed_and_wiggles_do_not_end_a_search() {
        // ±5 % every second, a step down to 4M at 12 s and back to 10M at
        // 15 s, then wiggles again. The throughput climbs back to 9 Mbit/s
        // only 2.5 s after the step up, past two wiggles: its 1 s mean
        // reaches 8M at 18.3 s.
        let (s, series) = on_trace(
            "0 10M 1M\n11 10.5M 1M\n12 4M 1M\n13 4.2M 1M\n14 4M 1M\n\
             15 10M 1M\n16 9.5M 1M\n17 10M 1M\n18 10.4M 1M\n19 9.9M 1M",
            |t| if t < 17.5 { 3.5e6 } else { 9e6 },
        );
        let sum = summarize(&s, "x", &series, "t".into(), vec![]);
        let steps: Vec<(f64, u64, u64)> = sum
            .rate_steps
            .iter()
            .map(|x| (x.t_s, x.from_bps, x.to_bps))
            .collect();
        assert_eq!(
            steps,
            [(12.0, 10_500_000, 4_000_000), (15.0, 4_000_000, 10_000_000)]
        );
        let d = sum.rate_steps[1].settle_s.expect("followed");
        assert!((d - 3.3).abs() < 0.051, "{d}");
    }

    #[test]
    fn summary_of_a_bloated_upload() {
        let s = scenario::tcp_1up();
        let series = series_for(&s, 20.0, 2000.0);
        let sum = summarize(&s, "none", &series, "t".into(), vec![]);
        assert_eq!(sum.idle_latency_ms.p50, 20.0);
        assert_eq!(sum.phases.len(), 3);
        let up = &sum.phases[1];
        assert_eq!(up.latency_ms.unwrap().p99, 2000.0);
        assert!((up.up_bps - 9e5).abs() < 1.0 && up.down_bps == 0.0);
        assert_eq!(sum.grade.overall, "F");
        assert_eq!(sum.grade.up.as_deref(), Some("F"));
        assert_eq!(sum.grade.down, None);
        assert!((sum.grade.added_ms - 1980.0).abs() < 1e-9);

        let good = summarize(&s, "x", &series_for(&s, 20.0, 40.0), "t".into(), vec![]);
        assert_eq!(good.grade.overall, "A");
    }

    #[test]
    fn lost_pings_count_as_loss_and_no_answer_is_an_f() {
        let s = scenario::tcp_1up();
        let mut series = series_for(&s, 20.0, 50.0);
        let (a, b) = s.phase_windows()[1];
        for p in series.ping.iter_mut().filter(|p| p.t_s >= a && p.t_s < b) {
            p.rtt_ms = None;
        }
        let sum = summarize(&s, "none", &series, "t".into(), vec![]);
        assert_eq!(sum.phases[1].loss_pct, 100.0);
        assert!(sum.phases[1].latency_ms.is_none());
        assert_eq!(sum.grade.overall, "F");
        // Serialisable despite the unmeasurable phase.
        assert!(serde_json::to_string(&sum).is_ok());
    }

    #[test]
    fn summary_json_records_ecn_and_each_flows_window() {
        let mut s = scenario::ack_priority();
        s.ecn = true;
        s.flows[1].window = Some(256 << 10);
        let mut series = series_for(&s, 20.0, 50.0);
        for f in &s.flows {
            series.flows.push(crate::model::FlowRecord {
                dir: f.dir,
                streams: f.streams,
                window: f.window,
                host: f.host,
                start_s: 0.0,
                end_s: 1.0,
                goodput_bps: None,
                retransmits: None,
                error: None,
            });
        }
        let sum = summarize(&s, "none", &series, "t".into(), vec![]);
        let v = serde_json::to_value(&sum).unwrap();
        assert_eq!(v["ecn"], serde_json::json!(true));
        assert_eq!(
            v["flows"][0]["window"],
            serde_json::json!(s.flows[0].window)
        );
        assert_eq!(v["flows"][1]["window"], serde_json::json!(262144));
        // A summary.json written before these fields still reads: ECN off,
        // windows unknown (autotuned).
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("ecn");
        for f in old["flows"].as_array_mut().unwrap() {
            f.as_object_mut().unwrap().remove("window");
        }
        let back: Summary = serde_json::from_value(old).unwrap();
        assert!(!back.ecn && back.flows.iter().all(|f| f.window.is_none()));
    }

    /// host_fair with synthetic per-host goodput: A alone at `solo`, then
    /// A at `a` and B at `b` (bit/s, both directions) while both run.
    fn host_series(s: &Scenario, solo: f64, a: f64, b: f64) -> Series {
        let mut series = series_for(s, 20.0, 30.0);
        let w = s.phase_windows();
        let mut t = 0.5;
        while t <= s.total_secs() {
            let (alone, both) = (t > w[1].0 && t <= w[1].1, t > w[2].0 && t <= w[2].1);
            for (host, bps) in [
                (
                    0,
                    if alone {
                        solo
                    } else if both {
                        a
                    } else {
                        0.0
                    },
                ),
                (1, if both { b } else { 0.0 }),
            ] {
                series.host_rate.push(crate::model::HostRateSample {
                    t_s: t,
                    host,
                    down_bps: bps,
                    up_bps: bps / 5.0,
                });
            }
            t += 0.5;
        }
        series
    }

    #[test]
    fn hosts_get_their_goodput_shares_ping_and_voip_per_phase() {
        let s = scenario::host_fair();
        let mut series = host_series(&s, 9e6, 3e5, 9e6);
        // A's irtt stream: 20 ms one way each direction, all through.
        let mut t = 0.0;
        while t < s.total_secs() {
            series.irtt.push(crate::model::IrttSample {
                t_s: t,
                rtt_ms: Some(40.0),
                up_owd_ms: Some(20.0),
                down_owd_ms: Some(20.0),
            });
            t += 0.02;
        }
        let sum = summarize(&s, "flows", &series, "t".into(), Vec::new());
        assert_eq!(sum.hosts.len(), 2);
        let (a, b) = (&sum.hosts[0], &sum.hosts[1]);
        assert_eq!((a.name.as_str(), a.ip.as_str()), ("A", "10.77.0.1"));
        assert_eq!((b.name.as_str(), b.ip.as_str()), ("B", "10.77.0.2"));
        let names: Vec<_> = a.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["idle", "host A alone", "both hosts", "idle again"]);
        // Idle: nobody moved data, no share.
        assert_eq!(a.phases[0].down_share_pct, None);
        // Alone: A has everything.
        assert_eq!(a.phases[1].down_bps, 9e6);
        assert_eq!(a.phases[1].down_share_pct, Some(100.0));
        assert_eq!(b.phases[1].down_share_pct, Some(0.0));
        // Both: 0.3 of 9.3 Mbit/s is 3.2 %, in each direction.
        let (pa, pb) = (&a.phases[2], &b.phases[2]);
        assert_eq!((pa.down_bps, pb.down_bps), (3e5, 9e6));
        let share = 100.0 * 3e5 / 9.3e6;
        assert!((pa.down_share_pct.unwrap() - share).abs() < 1e-9);
        assert!((pa.up_share_pct.unwrap() - share).abs() < 1e-9);
        assert!((pa.down_share_pct.unwrap() + pb.down_share_pct.unwrap() - 100.0).abs() < 1e-9);
        // A pings and calls; B does neither.
        assert_eq!(pa.ping_ms.map(|l| l.p50), Some(30.0));
        let v = pa.voip.expect("A's call");
        assert_eq!((v.owd_ms, v.loss_pct), (20.0, 0.0));
        assert!(v.mos > 4.3, "{}", v.mos);
        assert!(pb.ping_ms.is_none() && pb.voip.is_none());
    }

    #[test]
    fn one_host_has_no_host_table_and_old_summaries_still_load() {
        let s = scenario::tcp_1up();
        let sum = summarize(
            &s,
            "none",
            &series_for(&s, 20.0, 30.0),
            "t".into(),
            Vec::new(),
        );
        assert!(sum.hosts.is_empty());
        // A summary as written before hosts existed: no `hosts`, flows
        // without `host`; a series without `host_rate`.
        let mut v = serde_json::to_value(&sum).unwrap();
        v.as_object_mut().unwrap().remove("hosts");
        let back: Summary = serde_json::from_value(v).unwrap();
        assert!(back.hosts.is_empty());
        let flow = r#"{"dir":"up","streams":1,"start_s":0,"end_s":1,
            "goodput_bps":null,"retransmits":null,"error":null}"#;
        let f: crate::model::FlowRecord = serde_json::from_str(flow).unwrap();
        assert_eq!(f.host, 0);
        let old = r#"{"rate":[],"ping":[],"irtt":[],"flows":[]}"#;
        let series: Series = serde_json::from_str(old).unwrap();
        assert!(series.host_rate.is_empty());
    }
}
