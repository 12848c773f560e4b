use super::*;

const RATE: Rate = Rate::mbps(10);

/// A direction fed every [`TICK`] from `t0`, for `secs`, at `share` % of
/// [`RATE`], with sluice's wait `own` and the delay beyond `beyond`.
struct Feed {
    h: Health,
    rate: Rate,
    now: Instant,
    sent: u64,
    changes: Vec<HealthChange>,
}

impl Feed {
    fn new() -> Feed {
        Feed::at(RATE)
    }

    /// A direction shaped at `rate`.
    fn at(rate: Rate) -> Feed {
        let mut h = Health::new();
        assert_eq!(h.tick(Instant::ZERO, Sample::default()), None);
        Feed {
            h,
            rate,
            now: Instant::ZERO,
            sent: 0,
            changes: Vec::new(),
        }
    }

    fn run(&mut self, secs: u64, share: u64, own_ms: u64, beyond_ms: Option<u64>) {
        for _ in 0..secs * 10 {
            self.now += TICK;
            self.sent += self.rate.percent(share).bytes_in(TICK);
            let s = Sample {
                sent: self.sent,
                rate: self.rate,
                own: Duration::from_millis(own_ms),
                beyond: beyond_ms.map(Duration::from_millis),
            };
            self.changes.extend(self.h.tick(self.now, s));
        }
    }

    fn verdict(&self) -> Verdict {
        self.h.report(self.now).verdict
    }
}

#[test]
fn idle_or_a_trickle_is_not_enough_traffic() {
    let mut f = Feed::new();
    f.run(60, 5, 0, Some(40));
    assert_eq!(f.verdict(), Verdict::NotEnoughTraffic);
    let r = f.h.report(f.now);
    assert!(!r.loaded);
    assert_eq!(r.sluice.minute.samples, 0, "idle ticks count no latency");
    assert_eq!(r.grade, None);
    assert_eq!(r.episodes.count, 0);
    assert!(f.changes.is_empty());
}

/// An engine started long after the clock's zero (a monotonic clock counts
/// from boot): the first verdict holds since the first tick.
#[test]
fn the_first_verdict_holds_from_the_first_tick() {
    let mut h = Health::new();
    let idle = Sample {
        rate: RATE,
        ..Sample::default()
    };
    let start = Instant::ZERO + Duration::from_secs(37_000);
    assert_eq!(h.tick(start, idle), None);
    let later = start + Duration::from_secs(30);
    assert_eq!(h.tick(later, idle), None);
    let r = h.report(later);
    assert_eq!((r.verdict, r.since), (Verdict::NotEnoughTraffic, start));
}

#[test]
fn the_loaded_rule() {
    // At 80 % of the rate, loaded; at 79 %, not.
    let mut f = Feed::new();
    f.run(1, 80, 0, Some(1));
    assert!(f.h.report(f.now).loaded);
    f.run(1, 79, 0, Some(1));
    assert!(!f.h.report(f.now).loaded);
    // A standing queue in sluice makes it loaded at any output.
    f.run(1, 10, 5, Some(1));
    assert!(f.h.report(f.now).loaded);
    f.run(1, 10, 4, Some(1));
    assert!(!f.h.report(f.now).loaded);
    // The modem's queue grown, with half the rate out: loaded.
    f.run(1, 50, 0, Some(15));
    assert!(f.h.report(f.now).loaded);
    f.run(1, 49, 0, Some(15));
    assert!(!f.h.report(f.now).loaded);
}

#[test]
fn a_slow_link_stands_a_queue_only_past_two_frames() {
    // 250 kbit/s: two full frames take 97 ms. A call's packets waiting
    // 6 ms at 30 % of the rate are no standing queue; 100 ms is one.
    let mut f = Feed::at(Rate::kbps(250));
    f.run(30, 30, 6, Some(1));
    assert!(!f.h.report(f.now).loaded);
    assert_eq!(f.verdict(), Verdict::NotEnoughTraffic);
    f.run(1, 30, 100, Some(1));
    assert!(f.h.report(f.now).loaded);
}

#[test]
fn a_shaper_holding_the_queue_is_in_control_graded_by_added_latency() {
    let mut f = Feed::new();
    f.run(30, 95, 3, Some(1));
    assert_eq!(f.verdict(), Verdict::InControl);
    let r = f.h.report(f.now);
    assert_eq!(r.grade, Some("A+"), "{r:?}");
    let added = r.added.unwrap().as_millis_f64();
    assert!((3.5..=4.6).contains(&added), "{added}");
    assert_eq!(f.changes.len(), 1);
    assert_eq!(f.changes[0].from, Verdict::NotEnoughTraffic);
    // 20 ms in sluice and 20 beyond: 40 ms added, grade B.
    f.run(60, 95, 20, Some(14));
    let r = f.h.report(f.now);
    assert_eq!(r.verdict, Verdict::InControl);
    assert_eq!(r.grade, Some("B"), "{r:?}");
    let p50 = r.sluice.minute.p50.unwrap().as_millis_f64();
    assert!((20.0..=22.5).contains(&p50), "{p50}");
    // The hour remembers the first 30 s: its p50 lies between.
    assert_eq!(r.sluice.hour.samples, 900);
}

#[test]
fn a_link_slower_than_the_rate_is_not_in_control_with_a_suggestion() {
    let mut f = Feed::new();
    // A download through a modem at 83 % of the rate: sluice sends what
    // arrives, and the modem's queue stands at 120 ms.
    f.run(30, 83, 0, Some(120));
    let Verdict::NotInControl { suggested: Some(s) } = f.verdict() else {
        panic!("{:?}", f.verdict());
    };
    let want = RATE.percent(83).percent(MARGIN).as_bps() as f64;
    assert!((s.as_bps() as f64 / want - 1.0).abs() < 0.01, "{s}");
    let r = f.h.report(f.now);
    assert_eq!(r.episodes.count, 1);
    assert_eq!(r.episodes.longest, Duration::from_secs(30));
    assert_eq!(r.grade, Some("C"));
    // A link at 60 % of the rate: loaded though the shaper's output
    // stays far below its rate, and the suggestion follows the link.
    let mut f = Feed::new();
    f.run(30, 60, 0, Some(300));
    let Verdict::NotInControl { suggested: Some(s) } = f.verdict() else {
        panic!("{:?}", f.verdict());
    };
    let want = RATE.percent(60).percent(MARGIN).as_bps() as f64;
    assert!((s.as_bps() as f64 / want - 1.0).abs() < 0.01, "{s}");
}

#[test]
fn a_link_that_sets_the_pace_is_not_in_control_with_a_short_queue() {
    // The link at 83 % of the rate, its queue held to 5 ms (TCP control's
    // window clamp), none in sluice: the link sets the pace.
    let mut f = Feed::new();
    f.run(30, 83, 1, Some(5));
    let Verdict::NotInControl { suggested: Some(s) } = f.verdict() else {
        panic!("{:?}", f.verdict());
    };
    let want = RATE.percent(83).percent(MARGIN).as_bps() as f64;
    assert!((s.as_bps() as f64 / want - 1.0).abs() < 0.01, "{s}");
    assert_eq!(f.h.report(f.now).episodes.count, 0);
    // At 90 % it is the shaper's pace.
    let mut f = Feed::new();
    f.run(30, 90, 1, Some(5));
    assert_eq!(f.verdict(), Verdict::InControl);
    // A standing queue in sluice at 83 % (a class capped below the rate,
    // TCP control pacing uploads): sluice holds the queue, in control.
    let mut f = Feed::new();
    f.run(30, 83, 8, Some(1));
    assert_eq!(f.verdict(), Verdict::InControl);
}

#[test]
fn two_frames_of_queue_at_a_slow_rate_are_the_ack_clock_not_growth() {
    // 950 kbit/s: two full frames take 25.5 ms; at 10 Mbit/s, 2.4 ms.
    let slow = Rate::kbps(950);
    assert_eq!(grew_at(slow), Duration::from_nanos(25_498_948));
    assert_eq!(grew_at(RATE), GREW);
    assert_eq!(grew_at(Rate::ZERO), GREW);
    // 20 ms beyond at 950 kbit/s, under two frames: in control, and no
    // episode; at 10 Mbit/s the same 20 ms is a grown queue.
    let mut f = Feed::at(slow);
    f.run(30, 95, 15, Some(20));
    assert_eq!(f.verdict(), Verdict::InControl);
    assert_eq!(f.h.report(f.now).episodes.count, 0);
    let mut f = Feed::new();
    f.run(30, 95, 15, Some(20));
    assert!(matches!(f.verdict(), Verdict::NotInControl { .. }));
    // Past two frames the slow link's queue grew: not in control.
    let mut f = Feed::at(slow);
    f.run(30, 95, 15, Some(26));
    assert!(matches!(f.verdict(), Verdict::NotInControl { .. }));
    assert_eq!(f.h.report(f.now).episodes.count, 1);
}

#[test]
fn the_grade_leaves_out_the_start_of_each_load() {
    // Slow start fills the modem for 3 s, then sluice holds 3 ms and the
    // link 1: A+, as the steady load is; the minute's p99 still shows it.
    let mut f = Feed::new();
    f.run(3, 95, 0, Some(300));
    f.run(27, 95, 3, Some(1));
    let r = f.h.report(f.now);
    assert_eq!(r.grade, Some("A+"), "{r:?}");
    assert!(r.beyond.minute.p99.unwrap() >= Duration::from_millis(250));
    // A load shorter than the settling time: no grade yet.
    let mut f = Feed::new();
    f.run(4, 95, 3, Some(1));
    assert_eq!(f.h.report(f.now).grade, None);
    // Idle for a second, then a new load: its start is left out too.
    let mut f = Feed::new();
    f.run(10, 95, 3, Some(1));
    f.run(1, 0, 0, None);
    f.run(4, 95, 0, Some(300));
    f.run(1, 95, 3, Some(1));
    assert_eq!(f.h.report(f.now).grade, Some("A+"));
    // A pause under a second is the same load: 300 ms is graded.
    let mut f = Feed::new();
    f.run(10, 95, 3, Some(1));
    for _ in 0..9 {
        f.h.tick(
            f.now + TICK,
            Sample {
                sent: f.sent,
                rate: RATE,
                ..Sample::default()
            },
        );
        f.now += TICK;
    }
    f.run(4, 95, 0, Some(300));
    assert_ne!(f.h.report(f.now).grade, Some("A+"));
}

#[test]
fn a_queue_beyond_at_the_full_rate_suggests_autorate() {
    let mut f = Feed::new();
    f.run(30, 100, 0, Some(120));
    assert_eq!(f.verdict(), Verdict::NotInControl { suggested: None });
    assert!(f.verdict().to_string().contains("enable autorate"));
}

#[test]
fn the_verdict_changes_only_after_holding() {
    let mut f = Feed::new();
    f.run(30, 95, 1, Some(1));
    assert_eq!(f.verdict(), Verdict::InControl);
    // Bursts of a grown queue, a fifth of the time: counted, in control.
    for _ in 0..5 {
        f.run(4, 95, 1, Some(100));
        assert_eq!(f.verdict(), Verdict::InControl);
        f.run(16, 95, 1, Some(1));
    }
    let r = f.h.report(f.now);
    assert_eq!(r.episodes.count, 5);
    assert_eq!(r.episodes.longest, Duration::from_secs(4));
    assert_eq!(r.episodes.total, Duration::from_secs(20));
    assert_eq!(r.episodes.current_since, None);
    // Held: the evidence turns once half the 20 s grew (10 s), and the
    // verdict 5 s later (the hold).
    let before = f.changes.len();
    let start = f.now;
    f.run(30, 95, 1, Some(100));
    assert!(matches!(f.verdict(), Verdict::NotInControl { .. }));
    assert_eq!(f.changes.len(), before + 1);
    let c = f.changes[before];
    let turned = c.at.saturating_since(start);
    let at_least = Duration::from_secs(15);
    assert!(
        turned >= at_least && turned <= at_least + Duration::from_secs(1),
        "{turned:?}"
    );
    assert_eq!(f.h.report(f.now).since, c.at);
    assert!(f.h.report(f.now).episodes.current_since.is_some());
    // Load ends: not enough traffic, once the evidence has aged.
    f.run(30, 0, 0, None);
    assert_eq!(f.verdict(), Verdict::NotEnoughTraffic);
    assert_eq!(f.changes.len(), before + 2);
}

#[test]
fn a_gap_between_ticks_counts_as_what_was_sent_in_it() {
    let mut h = Health::new();
    let s = |sent| Sample {
        sent,
        rate: RATE,
        ..Sample::default()
    };
    h.tick(Instant::ZERO, s(0));
    // 10 s without a tick and one rate's tick worth of bytes: idle.
    let t = Instant::ZERO + Duration::from_secs(10);
    h.tick(t, s(RATE.bytes_in(TICK)));
    assert!(!h.report(t).loaded);
    assert_eq!(h.report(t).output, Rate(RATE.as_bps() / 100));
    // Time standing still is no tick.
    assert_eq!(h.tick(t, s(u64::MAX)), None);
    assert_eq!(h.report(t).output, Rate(RATE.as_bps() / 100));
}

#[test]
fn a_change_reads_as_one_line() {
    let c = HealthChange {
        at: Instant::ZERO,
        from: Verdict::InControl,
        to: Verdict::NotInControl {
            suggested: Some(Rate::kbps(9500)),
        },
    };
    let line = c.to_string();
    assert!(!line.contains('\n'));
    assert!(
        line.starts_with("not in control: the link is slower than the rate, try 9500Kb"),
        "{line}"
    );
    assert!(line.ends_with("(was: in control)"), "{line}");
}

#[test]
fn a_suggestion_is_a_rate_to_write_down() {
    assert_eq!(three_figures(Rate(9_499_571)), Rate(9_490_000));
    assert_eq!(three_figures(Rate(264_423)), Rate(264_000));
    assert_eq!(three_figures(Rate(999)), Rate(999));
    assert_eq!(three_figures(Rate(0)), Rate(0));
    assert_eq!(three_figures(Rate(u64::MAX)).0 / 10u64.pow(17), 184);
}

/// A download whose ACKs wait in a bloated upload (the lab at 1/0.25
/// Mbit/s, both ways 20 % above the modem): bursts at 40 % of its rate,
/// never loaded for long; the upload not in control. The download is held
/// back by the upload; a trickle, or an upload in control, is not.
#[test]
fn a_direction_with_traffic_behind_a_link_not_in_control_is_held_back() {
    let mut up = Feed::at(Rate::kbps(300));
    up.run(30, 98, 16, Some(700));
    let up_r = up.h.report(up.now);
    assert!(matches!(up_r.verdict, Verdict::NotInControl { .. }));

    let mut down = Feed::at(Rate::kbps(1200));
    down.run(30, 40, 4, Some(60));
    let down_r = down.h.report(down.now);
    assert_eq!(down_r.verdict, Verdict::NotEnoughTraffic);
    let mean = down_r.output_recent.as_bps() / 1000;
    assert!((470..=490).contains(&mean), "{mean} kbit/s");
    assert!(held_back(&down_r, &up_r));
    // The other way round: the upload has a verdict of its own.
    assert!(!held_back(&up_r, &down_r));

    // A trickle (the upload's own ACKs) is not held back: nothing to say.
    let mut trickle = Feed::at(Rate::kbps(1200));
    trickle.run(30, 3, 0, None);
    assert!(!held_back(&trickle.h.report(trickle.now), &up_r));

    // Behind an upload in control, too little load is just that.
    let mut calm = Feed::at(Rate::kbps(300));
    calm.run(30, 95, 3, Some(5));
    let calm_r = calm.h.report(calm.now);
    assert_eq!(calm_r.verdict, Verdict::InControl);
    assert!(!held_back(&down_r, &calm_r));
}
