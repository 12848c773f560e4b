//! What a sluice shaper said of itself during a run: `show health` read
//! once a second, and per phase the verdict it ended on.
//!
//! # Principles
//! - The lab knows the modem's rates; sluice does not. Recording sluice's
//!   own verdict beside the lab's independent measurement (ping, irtt,
//!   goodput against the capacity) is how a run checks the verdict (issue
//!   #40): a shaper above the modem must read *not in control* and suggest
//!   about the modem's rate, one below it *in control*, idle *not enough
//!   traffic*.
//! - A phase's verdict is the last one read in it, with how long into the
//!   phase it had held unbroken by then (`since_s`): "not in control after
//!   13 s of load" is the time to verdict.

use crate::model::Dir;
use serde::{Deserialize, Serialize};
use sluice_control::proto::HealthReply;

/// One direction as `show health` read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirVerdict {
    pub dir: Dir,
    /// `not-enough-traffic`, `in-control` or `not-in-control`.
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_bps: Option<u64>,
    /// Not enough traffic because the other direction is not in control.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_back: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<String>,
}

/// One reading of `show health` at run time `t_s`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthSample {
    pub t_s: f64,
    pub directions: Vec<DirVerdict>,
}

/// A direction's verdict at the end of a phase, held since `since_s`
/// seconds into it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseVerdict {
    #[serde(flatten)]
    pub last: DirVerdict,
    pub since_s: f64,
}

/// `reply` read at run time `t_s`.
pub fn sample(t_s: f64, reply: &HealthReply) -> HealthSample {
    let directions = reply
        .directions
        .iter()
        .map(|d| DirVerdict {
            dir: if d.direction == "upload" {
                Dir::Up
            } else {
                Dir::Down
            },
            verdict: d.verdict.clone(),
            suggested_bps: d.suggested_bps,
            held_back: d.held_back_by.is_some(),
            grade: d.grade.clone(),
        })
        .collect();
    HealthSample { t_s, directions }
}

/// Each direction's last verdict in `[start, end)` of `samples` (in time
/// order), with how long into the phase it had held unbroken (the same
/// verdict and held-back state; the suggestion may move).
pub fn of_phase(samples: &[HealthSample], start: f64, end: f64) -> Vec<PhaseVerdict> {
    let inside: Vec<_> = samples
        .iter()
        .filter(|s| s.t_s >= start && s.t_s < end)
        .collect();
    let mut out = Vec::new();
    for dir in [Dir::Down, Dir::Up] {
        let of = |s: &HealthSample| s.directions.iter().find(|d| d.dir == dir).cloned();
        let Some(last) = inside.iter().rev().find_map(|s| of(s)) else {
            continue;
        };
        let same = |d: &DirVerdict| d.verdict == last.verdict && d.held_back == last.held_back;
        let mut since = start;
        for s in inside.iter().rev() {
            match of(s) {
                Some(d) if same(&d) => since = s.t_s,
                Some(_) => break,
                None => {}
            }
        }
        out.push(PhaseVerdict {
            last,
            since_s: since - start,
        });
    }
    out
}

/// One line of a phase's verdicts, for the text report: "down not in
/// control (try 4.73Mb) after 13 s; up held back".
pub fn line(v: &[PhaseVerdict]) -> String {
    v.iter()
        .map(|p| {
            let d = &p.last;
            let what = match (d.verdict.as_str(), d.held_back) {
                (_, true) => match d.dir {
                    Dir::Down => "held back by the upload".to_string(),
                    Dir::Up => "held back by the download".to_string(),
                },
                ("not-in-control", _) => match d.suggested_bps {
                    Some(b) => format!(
                        "not in control, try {}",
                        sluice_time::units::format_rate(sluice_time::Rate(b))
                    ),
                    None => "not in control, enable autorate".into(),
                },
                (v, _) => v.replace('-', " "),
            };
            // The grade is the last minute's: said only with a verdict.
            let judged = d.verdict != "not-enough-traffic";
            let grade = d
                .grade
                .as_ref()
                .filter(|_| judged)
                .map(|g| format!(", grade {g}"))
                .unwrap_or_default();
            let dir = if d.dir == Dir::Up { "up" } else { "down" };
            format!("{dir} {what}{grade} from {:.0} s", p.since_s)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_s: f64, down: (&str, bool), up: (&str, Option<u64>)) -> HealthSample {
        HealthSample {
            t_s,
            directions: vec![
                DirVerdict {
                    dir: Dir::Down,
                    verdict: down.0.into(),
                    suggested_bps: None,
                    held_back: down.1,
                    grade: None,
                },
                DirVerdict {
                    dir: Dir::Up,
                    verdict: up.0.into(),
                    suggested_bps: up.1,
                    held_back: false,
                    grade: Some("C".into()),
                },
            ],
        }
    }

    const NET: &str = "not-enough-traffic";
    const NIC: &str = "not-in-control";

    #[test]
    fn a_phase_ends_on_its_last_verdict_held_since_it_began() {
        let samples = [
            s(9.0, (NET, false), (NET, None)),
            s(10.5, (NET, false), (NET, None)),
            s(20.0, (NET, true), (NIC, Some(950_000))),
            s(24.0, (NET, true), (NIC, Some(948_000))),
            s(69.5, (NET, true), (NIC, Some(949_000))),
            s(71.0, (NET, false), (NIC, Some(949_000))),
        ];
        let idle = of_phase(&samples, 0.0, 10.0);
        assert_eq!(idle.len(), 2);
        assert_eq!((idle[0].last.verdict.as_str(), idle[0].since_s), (NET, 9.0));
        let load = of_phase(&samples, 10.0, 70.0);
        let (down, up) = (&load[0], &load[1]);
        assert!(down.last.held_back);
        assert_eq!(down.since_s, 10.0, "held back from 20 s");
        // The suggestion moved; the verdict held from 20 s on, the last one's.
        assert_eq!((up.since_s, up.last.suggested_bps), (10.0, Some(949_000)));
        assert_eq!(
            line(&load),
            "down held back by the upload from 10 s; up not in control, try 949Kb, grade C from 10 s"
        );
        assert!(of_phase(&samples, 80.0, 90.0).is_empty(), "no reading");
    }

    #[test]
    fn a_reply_maps_to_directions() {
        let reply: HealthReply = serde_json::from_str(
            r#"{"directions":[{"iface":"lan0","direction":"download","verdict":"not-enough-traffic",
            "held_back_by":"wan0","text":"","since_ns":0,"loaded":false,"output_bps":0,"rate_bps":1,
            "loaded_ns":0,"evidence_ns":0,"sluice":{"minute":{"samples":0},"hour":{"samples":0},
            "day":{"samples":0}},"beyond":{"minute":{"samples":0},"hour":{"samples":0},
            "day":{"samples":0}},"episodes":{"count":0,"total_ns":0,"longest_ns":0},"grade":null,
            "added_ns":null}]}"#,
        )
        .expect("a reply");
        let got = sample(3.0, &reply);
        assert_eq!(got.directions[0].dir, Dir::Down);
        assert!(got.directions[0].held_back);
    }
}
