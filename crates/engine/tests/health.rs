//! The health verdict (crate::health) through the simulator: the real
//! engine in virtual time, bulk TCP through a modem with a deep FIFO, as
//! a user's line (issue #40's goals). A shaper 20 % above the modem's rate
//! is not in control and suggests a rate within 10 % of the modem's; at
//! 95 % it is, graded A or A+ at 10/2 Mbit/s and within a grade of its
//! pinger at 1/0.25 (where one frame takes 12-48 ms); a trickle is not
//! enough traffic. Each at two lines, each direction (the simulator loads
//! one direction at a time).

use sluice_conf::recipe::{self, Knobs};
use sluice_engine::health::{HealthReport, Verdict};
use sluice_engine::testing::netsim::{Dir, Link, Load, Outcome, Sim, LAN, WAN};
use sluice_engine::{Engine, Options};
use sluice_time::grade::{grade, grade_rank};
use sluice_time::{Duration, Instant, Rate};

/// A line: the modem's rate each way (kbit/s).
#[derive(Clone, Copy)]
struct Line {
    down_k: u64,
    up_k: u64,
}

const DSL: Line = Line {
    down_k: 10_000,
    up_k: 2_000,
};
const SLOW: Line = Line {
    down_k: 1_000,
    up_k: 250,
};

/// How sluice is configured.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Conf {
    /// What `sluice init` writes (FQ-CoDel, the download in ingress mode,
    /// TCP control, CoDel's target at 1.5 frame times on a slow line), as
    /// users run it.
    Recipe,
    /// FQ-CoDel both ways, the download in ingress mode, no TCP control:
    /// a shaper that leaves the queue to the rate alone.
    Plain,
}

/// Sluice shaping both ways at `pct` % of `line`.
fn engine(line: Line, pct: u64, conf: Conf) -> Engine {
    let text = match conf {
        Conf::Recipe => {
            let knobs = Knobs {
                // The recipe shapes at 95 % of the rate it is given.
                down: Rate::kbps(line.down_k * pct / 95),
                up: Rate::kbps(line.up_k * pct / 95),
                link: recipe::Link::Raw,
                autorate: false,
                hosts: false,
                wan: "wan0".into(),
                lan: "lan0".into(),
            };
            recipe::recipe(&knobs).expect("a recipe")
        }
        Conf::Plain => {
            let (d, u) = (line.down_k * pct / 100, line.up_k * pct / 100);
            format!(
                "pipe up on wan0 bandwidth {u}Kb sched fq_codel\n\
                 pipe down on lan0 bandwidth {d}Kb sched fq_codel ingress\n\
                 queue up_q pipe up default\n\
                 queue down_q pipe down default\n\
                 pass out on wan0 keep state queue up_q\n\
                 pass out on lan0 keep state queue down_q\n"
            )
        }
    };
    let cfg = sluice_conf::check("health.conf", &text, &[])
        .expect("valid conf")
        .config;
    Engine::new(&cfg, Options::bridge("lan0", "wan0", [7; 16])).expect("engine")
}

/// 30 s of `flows` bulk flows `dir` (none: the pinger's trickle alone).
fn run(line: Line, pct: u64, conf: Conf, flows: usize, dir: Dir) -> Outcome {
    let link = Link {
        down: Rate::kbps(line.down_k),
        up: Rate::kbps(line.up_k),
        // 100 full frames: a modem's deep FIFO (the bufferbloat).
        fifo_bytes: 100 * 1514,
        one_way: Duration::from_millis(20),
    };
    let load = Load {
        flows,
        dir,
        ping_every: Duration::from_millis(100),
        warmup: Duration::ZERO,
        duration: Duration::from_secs(30),
    };
    Sim::new(engine(line, pct, conf), link, load).run()
}

/// The report of the direction `dir` (a download leaves by the LAN side).
fn report(o: &Outcome, dir: Dir) -> &HealthReport {
    let i = if dir == Dir::Down { LAN } else { WAN };
    o.health[i].as_ref().expect("a shaped direction has health")
}

fn modem(line: Line, dir: Dir) -> Rate {
    Rate::kbps(if dir == Dir::Down {
        line.down_k
    } else {
        line.up_k
    })
}

fn above_the_modem(line: Line, conf: Conf, dir: Dir) {
    let o = run(line, 120, conf, 4, dir);
    let r = report(&o, dir);
    let Verdict::NotInControl { suggested: Some(s) } = r.verdict else {
        panic!("{:?}: {r:#?}", r.verdict);
    };
    // Once, within 20 s of the load (it starts at 1 s; the goal is 30 s,
    // the rule takes 5 s of load and the 5 s hold); it does not flap. By
    // the end (30 s) the suggestion is within 10 % of the modem's rate.
    // The first may still be none (enable autorate): an upload's modem
    // fills at sluice's full rate before TCP backs off to the modem's.
    let m = modem(line, dir).as_bps() as f64;
    let near = |s: Rate| (s.as_bps() as f64 / m - 1.0).abs() <= 0.10;
    let [(_, first)] = &o.health_changes[..] else {
        panic!("{:?}", o.health_changes);
    };
    assert!(
        first.at <= Instant::ZERO + Duration::from_secs(1 + 20),
        "{first:?}"
    );
    match first.to {
        Verdict::NotInControl { suggested: None } => {}
        Verdict::NotInControl {
            suggested: Some(s0),
        } => {
            assert!(near(s0), "first suggested {s0} for a modem at {m}")
        }
        v => panic!("{v:?}"),
    }
    assert!(near(s), "suggested {s} for a modem at {m}");
}

/// Sluice at `pct` % of the modem: in control, graded within one grade
/// of what the pinger saw (its mean round trip under load less the base
/// 40 ms). The health grade counts the bulk traffic's wait in sluice,
/// which a ping in its own FQ flow skips: it may read one grade worse.
/// On a slow line it may read one better: the ping waits behind the frame
/// being sent at sluice and at the modem (at 250 kbit/s, 48 ms each).
fn below_the_modem(line: Line, pct: u64, dir: Dir) -> HealthReport {
    let o = run(line, pct, Conf::Recipe, 4, dir);
    let r = report(&o, dir).clone();
    assert_eq!(r.verdict, Verdict::InControl, "{r:#?}");
    assert!(r.sluice.minute.samples > 0);
    let n = o.rtts.len() as u64;
    let mean = o.rtts.iter().map(|d| d.as_nanos()).sum::<u64>() / n.max(1);
    let ping = Duration(mean.saturating_sub(40_000_000)).as_millis_f64();
    let (want, got) = (
        grade_rank(grade(ping)),
        grade_rank(r.grade.expect("graded")),
    );
    assert!(got + 1 >= want && got <= want + 1, "ping {ping} ms: {r:#?}");
    r
}

fn a_trickle(line: Line, dir: Dir) {
    let o = run(line, 95, Conf::Recipe, 0, dir);
    let r = report(&o, dir);
    assert_eq!(r.verdict, Verdict::NotEnoughTraffic, "{r:#?}");
    assert!(o.health_changes.is_empty(), "{:?}", o.health_changes);
    assert_eq!(r.grade, None);
}

#[test]
fn dsl_download_above_the_modem_is_not_in_control() {
    above_the_modem(DSL, Conf::Plain, Dir::Down);
}

/// With TCP control the window clamp holds the modem's queue to a few ms
/// (the modem's queue never grows), but sluice's output stays at the
/// link's rate, 83 % of its own: not in control all the same.
#[test]
fn dsl_download_above_the_modem_with_tcp_control_is_not_in_control() {
    above_the_modem(DSL, Conf::Recipe, Dir::Down);
}

#[test]
fn dsl_upload_above_the_modem_is_not_in_control() {
    above_the_modem(DSL, Conf::Plain, Dir::Up);
}

#[test]
fn dsl_below_the_modem_is_in_control() {
    for dir in [Dir::Down, Dir::Up] {
        let r = below_the_modem(DSL, 95, dir);
        assert!(matches!(r.grade, Some("A+") | Some("A")), "{r:#?}");
    }
}

#[test]
fn dsl_trickle_is_not_enough_traffic() {
    a_trickle(DSL, Dir::Down);
    a_trickle(DSL, Dir::Up);
}

#[test]
fn slow_download_above_the_modem_is_not_in_control() {
    above_the_modem(SLOW, Conf::Plain, Dir::Down);
}

#[test]
fn slow_upload_above_the_modem_is_not_in_control() {
    above_the_modem(SLOW, Conf::Plain, Dir::Up);
}

/// At 1 Mbit/s one full frame takes 12 ms at the modem and at sluice, and
/// TCP's ACK clock leaves a frame or two at the modem (the simulator: 15
/// ms on average): the added latency is some 35 ms, grade B, as the
/// pinger sees it (43 ms). The download is in control at 95 % with the
/// recipe's CoDel target of 1.5 frame times; with the default 5 ms, CoDel
/// drops every flow to its smallest window and their retransmissions fill
/// the modem (not in control, truthfully).
#[test]
fn slow_below_the_modem_is_in_control() {
    below_the_modem(SLOW, 95, Dir::Down);
    below_the_modem(SLOW, 95, Dir::Up);
}

#[test]
fn slow_trickle_is_not_enough_traffic() {
    a_trickle(SLOW, Dir::Down);
    a_trickle(SLOW, Dir::Up);
}

#[test]
fn health_is_kept_for_shaped_interfaces_only_and_ticks_while_idle() {
    let mut e = engine(DSL, 95, Conf::Recipe);
    assert!(e.health(LAN).is_some() && e.health(WAN).is_some());
    assert_eq!(e.health(7), None);
    // Idle, the tick still comes: the verdict ages without traffic.
    let now = Instant::ZERO + Duration::from_secs(3);
    e.handle_timeout(now);
    let next = e.poll_timeout().expect("the health tick");
    assert!(next > now && next <= now + sluice_engine::health::TICK);
    let text = "pipe up on wan0 bandwidth 1900Kb sched fq_codel\n\
                queue up_q pipe up default\n\
                pass out on wan0 keep state queue up_q\n";
    let cfg = sluice_conf::check("health.conf", text, &[])
        .expect("valid")
        .config;
    e.reload(&cfg).expect("reload");
    assert!(e.health(LAN).is_none() && e.health(WAN).is_some());
}
