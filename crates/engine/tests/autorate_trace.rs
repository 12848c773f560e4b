//! The controller's decisions over seeded random links, pinned: a digest
//! of every decision of 4 000 ticks per case (and every 100th decision
//! written out), against `snapshots/autorate_trace.txt`. It guards
//! refactors of the state machine (#39 item 3): any change in what the
//! controller decides, on any path the model reaches, fails it. A change
//! meant is accepted as the netsim snapshot's is (docs/testing.md):
//! `SLUICE_ACCEPT_SNAPSHOT=1`, and the file committed with it.
//!
//! The link is a fluid model, not a network: its rate walks at random and
//! steps, dips and fades now and then; a queue in front of it (after
//! sluice for an upload, before for a download) fills with what exceeds
//! it, and the reading is that queue's delay with some noise, now and then
//! missing (no fresh flows) or a probe's. Coarse on purpose: the point is
//! to reach every rule, not to model TCP (crates/engine/src/testing/netsim
//! does that).

use sluice_conf::ir::{Autorate, Reconfig};
use sluice_engine::autorate::{Controller, Tuning};
use sluice_engine::delay_signal::Reading;
use sluice_time::random::SplitMix64;
use sluice_time::{Duration, Instant, Rate};
use std::fmt::Write;

/// One case: the direction, the bounds and the schedule.
struct Case {
    name: &'static str,
    upload: bool,
    min: u64,
    max: u64,
    start: u64,
    reconfig: bool,
    seed: u64,
}

const CASES: [Case; 6] = [
    Case {
        name: "upload",
        upload: true,
        min: 1,
        max: 10,
        start: 4,
        reconfig: false,
        seed: 1,
    },
    Case {
        name: "upload_fast",
        upload: true,
        min: 2,
        max: 60,
        start: 20,
        reconfig: false,
        seed: 2,
    },
    Case {
        name: "download",
        upload: false,
        min: 5,
        max: 25,
        start: 20,
        reconfig: false,
        seed: 3,
    },
    Case {
        name: "download_slow",
        upload: false,
        min: 1,
        max: 12,
        start: 3,
        reconfig: false,
        seed: 4,
    },
    Case {
        name: "starlink_down",
        upload: false,
        min: 2,
        max: 100,
        start: 80,
        reconfig: true,
        seed: 5,
    },
    Case {
        name: "starlink_up",
        upload: true,
        min: 1,
        max: 20,
        start: 10,
        reconfig: true,
        seed: 6,
    },
];

const TICKS: u64 = 4_000;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over every decision: one changed decision changes the digest,
/// and the file stays small (every 100th tick is written out to read).
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn uniform(r: &mut SplitMix64) -> f64 {
    (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// The link's rate (bit/s) at tick `k`: a walk around `base`, with steps,
/// short dips and longer fades drawn from `r`.
struct Link {
    base: f64,
    now: f64,
    dip_left: u64,
    dip_to: f64,
}

impl Link {
    fn next(&mut self, r: &mut SplitMix64, max: f64) -> f64 {
        let u = uniform(r);
        if u < 0.004 {
            // A step: the link settles elsewhere.
            self.base = (max * (0.05 + 0.9 * uniform(r))).max(2e5);
        } else if u < 0.010 && self.dip_left == 0 {
            // A dip (a hand-over) or a fade (a tunnel).
            self.dip_left = 1 + (uniform(r) * 60.0) as u64;
            self.dip_to = 0.02 + 0.5 * uniform(r);
        }
        self.now += (self.base - self.now) * 0.2 + self.base * 0.03 * (uniform(r) - 0.5);
        if self.dip_left > 0 {
            self.dip_left -= 1;
            return (self.now * self.dip_to).max(1e5);
        }
        self.now.max(1e5)
    }
}

fn run(case: &Case, out: &mut String) {
    let cfg = Autorate {
        min: Rate::mbps(case.min),
        max: Rate::mbps(case.max),
        dry_run: false,
        probe: None,
        reconfig: case.reconfig.then_some(Reconfig::STARLINK),
    };
    let mut c = Controller::new(cfg, Rate::mbps(case.start), Tuning::default());
    if case.upload {
        c = c.way_out();
    }
    c.set_wall_clock(Some(Duration::from_secs(1_800_000_000 - 5)));
    let mut r = SplitMix64::new(case.seed);
    let max = Rate::mbps(case.max).0 as f64;
    let mut link = Link {
        base: max * 0.5,
        now: max * 0.5,
        dip_left: 0,
        dip_to: 1.0,
    };
    let tick = Duration::from_millis(50);
    let (mut sent, mut acked, mut queue_bits) = (0u64, 0u64, 0f64);
    let mut demand = 1.0;
    let mut paused = Duration::ZERO;
    let mut t = Instant(1_000_000_000);
    let mut digest = FNV_OFFSET;
    for k in 0..TICKS {
        let l = link.next(&mut r, max);
        if uniform(&mut r) < 0.01 {
            // The senders come and go: idle, light or loaded.
            demand = [0.0, 0.3, 1.0, 1.0, 1.5][(uniform(&mut r) * 5.0) as usize];
        }
        let secs = tick.as_secs_f64();
        let open = 1.0 - (paused.as_secs_f64() / secs).min(1.0);
        paused = paused - tick;
        let rate = c.rate().0 as f64;
        let output = if case.upload {
            // Sluice's output enters the modem's queue.
            let o = rate.min(demand * max) * open;
            queue_bits = (queue_bits + (o - l) * secs).max(0.0);
            o
        } else {
            // The modem's queue lies before sluice: the senders, clocked by
            // sluice's rate, push a little past it, and what the link does
            // not carry waits there.
            let offered = (demand * max).min(rate * 1.05);
            queue_bits = (queue_bits + (offered - l) * secs).clamp(0.0, l * 0.5);
            offered.min(l)
        };
        sent += (output * secs / 8.0) as u64;
        acked += (l.min(output + queue_bits / secs) * secs / 8.0) as u64;
        let delay_ms = queue_bits / l * 1000.0 + uniform(&mut r) * 3.0;
        let roll = uniform(&mut r);
        let reading = Reading {
            delay: (roll > 0.03).then_some(Duration((delay_ms * 1e6) as u64)),
            flows: 1 + (k % 5) as u32,
            newest_age: Some(Duration::from_millis(k % 7)),
            probe: roll > 0.97,
        };
        let delivered = case.upload.then_some(acked);
        if let Some(d) = c.tick(t, sent, delivered, reading) {
            paused = paused.max(d.hold);
            let line = format!(
                "{} {k} {} {} {} {:?} {}",
                case.name, d.achieved.0, d.old.0, d.new.0, d.reason, d.hold.0
            );
            digest = fnv1a(digest, line.as_bytes());
            if k % 100 == 0 {
                writeln!(out, "{line}").unwrap();
            }
        }
        t += tick;
    }
    let holds = c.holds;
    writeln!(
        out,
        "{} counts {:?} holds {holds} {}",
        case.name, c.counts, c.held_for.0
    )
    .unwrap();
}

#[test]
fn decisions_over_seeded_links_are_pinned() {
    let mut out = String::new();
    for case in &CASES {
        run(case, &mut out);
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/snapshots/autorate_trace.txt"
    );
    if std::env::var_os("SLUICE_ACCEPT_SNAPSHOT").is_some() {
        std::fs::write(path, &out).unwrap();
        return;
    }
    let pinned =
        std::fs::read_to_string(path).expect("the snapshot (SLUICE_ACCEPT_SNAPSHOT=1 writes it)");
    if pinned != out {
        let first = pinned
            .lines()
            .zip(out.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("pinned: {a}\n   now: {b}"))
            .unwrap_or_else(|| "lengths differ".into());
        panic!(
            "autorate's decisions changed; first difference:\n{first}\n\
             If the change is meant, rerun with SLUICE_ACCEPT_SNAPSHOT=1 and commit the file."
        );
    }
}
