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
