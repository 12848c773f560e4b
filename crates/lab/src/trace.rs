//! Links whose rate moves: a rate trace the modem follows during a run
//! (`sluice lab run … --trace FILE`).
//!
//! A trace is a text file of steps, one per line: the time in seconds from
//! the start of the run (the start of its first phase), the download rate
//! and the upload rate from that moment on, in the rate grammar of
//! pf.conf and the lab's options (`20M`, `512kbit`, `1.5Mb`):
//!
//! ```text
//! # time(s)  down   up
//! 0          20M    5M
//! 12.5       8M     2M     # a handover
//! 15         25M    6M
//! ```
//!
//! A line `align PERIOD` (`align 15s`) says the trace's times are the wall
//! clock's: the run starts at a moment whose Unix time is a multiple of
//! PERIOD, so a link whose changes are scheduled by the clock (Starlink
//! reconfigures at 12, 27, 42 and 57 s past each minute) changes at those
//! moments in the lab too, and a shaper that knows the schedule (autorate's
//! `reconfig`) can be tested against it. The runner waits for that moment
//! (less than PERIOD) before the first phase.
//!
//! # Principles
//! - A step function: a rate holds until the next step, the last one to the
//!   end of the run (what a modem does between two retrains), so the
//!   capacity of any moment is defined and utilisation can be computed
//!   against it ([`RateTrace::mean_capacity`]).
//! - The first step is at 0 and steps are strictly increasing in time: a
//!   trace that says two things about one moment, or nothing about the
//!   start, is refused, with the line and column, what was wrong, and what
//!   is allowed.
//! - Rates are the modem's (htb's) rate, with the same range as `--down`
//!   and `--up` ([`LINK_MIN_BPS`]..=[`LINK_MAX_BPS`]).
//! - Parsing is pure (text in, trace or located error out); the runner
//!   plays the steps on the modem with `tc class change`, which keeps the
//!   packets the FIFO holds (a retrain does not empty a modem's buffer).

use serde::{Deserialize, Serialize};
use sluice_time::units;
use std::fmt;

/// Slowest and fastest link the lab emulates (htb's and the host's limits).
pub const LINK_MIN_BPS: u64 = 8_000;
pub const LINK_MAX_BPS: u64 = 10_000_000_000;

/// Most steps a trace may have (a day at one step per second).
pub const MAX_STEPS: usize = 86_400;

/// One step: from `t_s` on, the link runs at these rates.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub t_s: f64,
    pub down_bps: u64,
    pub up_bps: u64,
}

/// A link's rates over time (see the module's principles).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateTrace {
    /// The file's name without directory and extension (`starlink`).
    pub name: String,
    /// At least one; the first at 0; strictly increasing in time.
    pub steps: Vec<Step>,
    /// `align PERIOD` (seconds): the run starts at a Unix time that is a
    /// multiple of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align_s: Option<f64>,
}

/// The longest `align` period: a run waits up to this long to start.
pub const MAX_ALIGN_S: f64 = 3600.0;

/// Why a trace was refused: where and what.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceError {
    /// 1-based; 0 when the error is about the file as a whole.
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.msg)
        } else {
            write!(f, "{}:{}: {}", self.line, self.col, self.msg)
        }
    }
}

/// What a line holds, for the hints.
const LINE_FORMAT: &str = "a step is `TIME DOWN UP`: seconds from the run's start, then \
     the download and upload rates (e.g. `12.5 8M 2M`); `align PERIOD` starts the run at a \
     multiple of PERIOD of the wall clock; `#` starts a comment";

impl RateTrace {
    /// Parses a trace file's text; `name` labels it in reports.
    pub fn parse(name: &str, text: &str) -> Result<RateTrace, TraceError> {
        let mut steps: Vec<Step> = Vec::new();
        let mut align: Option<(f64, usize)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("");
            let fields = fields(content);
            if fields.is_empty() {
                continue;
            }
            let at = |col: usize, msg: String| TraceError { line, col, msg };
            if fields[0].1 == "align" {
                align = Some((Self::align(&fields, line, align)?, line));
                continue;
            }
            if fields.len() != 3 {
                let col = fields.get(3).map_or(fields[0].0, |f| f.0);
                return Err(at(
                    col,
                    format!(
                        "{} fields where 3 are expected; {LINE_FORMAT}",
                        fields.len()
                    ),
                ));
            }
            let (tcol, ttext) = fields[0];
            let t_s = units::parse_duration(ttext, sluice_time::Duration::from_secs(1))
                .map(|d| d.as_secs_f64())
                .map_err(|e| {
                    at(
                        tcol,
                        format!(
                            "`{ttext}` is not a time: {e}; give seconds from the run's start \
                             (`12.5`, or with a unit: `12500ms`)"
                        ),
                    )
                })?;
            match steps.last() {
                None if t_s != 0.0 => {
                    return Err(at(
                        tcol,
                        format!(
                            "the first step is at {ttext}; it must be at 0, so the rates of \
                             the run's start are known"
                        ),
                    ))
                }
                Some(prev) if t_s <= prev.t_s => {
                    return Err(at(
                        tcol,
                        format!(
                            "time {ttext} is not after the previous step's ({} s): steps are \
                             in increasing time, one per moment",
                            prev.t_s
                        ),
                    ))
                }
                _ => {}
            }
            let rate = |(col, text): (usize, &str), dir: &str| -> Result<u64, TraceError> {
                let hint = "allowed: a number with an optional k/M/G multiplier and an \
                            optional bit/b/bps suffix, e.g. 512k, 8M, 1.5Mbit";
                if text.ends_with('B') && !text.ends_with("bps") {
                    return Err(at(
                        col,
                        format!(
                            "`{text}`: a capital B means bytes; {dir} rates are in bits per \
                             second ({hint})"
                        ),
                    ));
                }
                let bps = units::parse_rate(text)
                    .map_err(|e| at(col, format!("`{text}` is not a {dir} rate: {e} ({hint})")))?
                    .as_bps();
                if !(LINK_MIN_BPS..=LINK_MAX_BPS).contains(&bps) {
                    return Err(at(
                        col,
                        format!(
                            "{dir} rate `{text}` is out of range: the lab emulates links from \
                             8 kbit/s to 10 Gbit/s"
                        ),
                    ));
                }
                Ok(bps)
            };
            let down_bps = rate(fields[1], "download")?;
            let up_bps = rate(fields[2], "upload")?;
            if steps.len() == MAX_STEPS {
                return Err(at(
                    tcol,
                    format!("more than {MAX_STEPS} steps; a trace holds at most {MAX_STEPS}"),
                ));
            }
            steps.push(Step {
                t_s,
                down_bps,
                up_bps,
            });
        }
        if steps.is_empty() {
            return Err(TraceError {
                line: 0,
                col: 0,
                msg: format!("the trace has no step; {LINE_FORMAT}"),
            });
        }
        Ok(RateTrace {
            name: name.to_string(),
            steps,
            align_s: align.map(|(p, _)| p),
        })
    }

    /// `align PERIOD`: once per trace, a period of 1 ms to an hour.
    fn align(
        fields: &[(usize, &str)],
        line: usize,
        before: Option<(f64, usize)>,
    ) -> Result<f64, TraceError> {
        let at = |col: usize, msg: String| TraceError { line, col, msg };
        if let Some((_, first)) = before {
            return Err(at(
                fields[0].0,
                format!("a second `align` (the first is on line {first}); a trace has one"),
            ));
        }
        let [_, (col, text)] = fields else {
            let col = fields.get(2).map_or(fields[0].0, |f| f.0);
            return Err(at(
                col,
                "`align` takes one period, e.g. `align 15s` (the run starts at a multiple of \
                 15 s of the wall clock)"
                    .into(),
            ));
        };
        let p = units::parse_duration(text, sluice_time::Duration::from_secs(1))
            .map(|d| d.as_secs_f64())
            .map_err(|e| {
                at(
                    *col,
                    format!("`{text}` is not a period: {e}; e.g. `align 15s`"),
                )
            })?;
        if !(0.001..=MAX_ALIGN_S).contains(&p) {
            return Err(at(
                *col,
                format!(
                    "align period `{text}` is out of range: allowed 1ms..{MAX_ALIGN_S} s \
                     (a run waits up to one period to start)"
                ),
            ));
        }
        Ok(p)
    }

    /// How long to wait from Unix time `now_s` for the run to start at a
    /// multiple of the `align` period, no less than `margin_s` from now;
    /// `margin_s` without `align`.
    pub fn start_wait_s(&self, now_s: f64, margin_s: f64) -> f64 {
        let Some(p) = self.align_s else {
            return margin_s;
        };
        let earliest = now_s + margin_s;
        (earliest / p).ceil() * p - now_s
    }

    /// The step in force at `t_s` (the first before 0).
    pub fn at(&self, t_s: f64) -> Step {
        let i = self.steps.partition_point(|s| s.t_s <= t_s);
        self.steps[i.saturating_sub(1)]
    }

    /// When the last step starts: past it, its rates hold.
    pub fn last_change_s(&self) -> f64 {
        self.steps.last().map_or(0.0, |s| s.t_s)
    }

    /// (least, most) download and upload rates: `((dmin, dmax), (umin, umax))`.
    pub fn bounds(&self) -> ((u64, u64), (u64, u64)) {
        let fold = |f: fn(&Step) -> u64| {
            self.steps
                .iter()
                .map(f)
                .fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)))
        };
        (fold(|s| s.down_bps), fold(|s| s.up_bps))
    }

    /// Mean (down, up) capacity over `[a, b)` in bit/s, weighted by how long
    /// each step lasts inside it; the rates at `a` when the span is empty.
    pub fn mean_capacity(&self, a: f64, b: f64) -> (f64, f64) {
        if b <= a {
            let s = self.at(a);
            return (s.down_bps as f64, s.up_bps as f64);
        }
        let (mut down, mut up) = (0.0, 0.0);
        for (i, s) in self.steps.iter().enumerate() {
            let end = self.steps.get(i + 1).map_or(f64::INFINITY, |n| n.t_s);
            let start = if i == 0 { f64::NEG_INFINITY } else { s.t_s };
            let overlap = end.min(b) - start.max(a);
            if overlap > 0.0 {
                down += s.down_bps as f64 * overlap;
                up += s.up_bps as f64 * overlap;
            }
        }
        (down / (b - a), up / (b - a))
    }
}

/// The whitespace-separated fields of a line, each with its 1-based column.
fn fields(content: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in content.char_indices().chain([(content.len(), ' ')]) {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push((content[..s].chars().count() + 1, &content[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> TraceError {
        RateTrace::parse("t", text).unwrap_err()
    }

    #[test]
    fn steps_with_comments_units_and_blank_lines() {
        let t = RateTrace::parse(
            "lte",
            "# LTE\n\n0 20M 5M\n  1.5  8Mbit 512k # fade\n3000ms 1G 100000\n",
        )
        .unwrap();
        assert_eq!(t.name, "lte");
        assert_eq!(
            t.steps,
            vec![
                Step {
                    t_s: 0.0,
                    down_bps: 20_000_000,
                    up_bps: 5_000_000
                },
                Step {
                    t_s: 1.5,
                    down_bps: 8_000_000,
                    up_bps: 512_000
                },
                Step {
                    t_s: 3.0,
                    down_bps: 1_000_000_000,
                    up_bps: 100_000
                },
            ]
        );
    }

    #[test]
    fn rates_hold_until_the_next_step_and_the_last_to_the_end() {
        let t = RateTrace::parse("s", "0 10M 2M\n10 4M 1M\n20 8M 2M").unwrap();
        assert_eq!(t.at(-1.0).down_bps, 10_000_000);
        assert_eq!(t.at(9.999).down_bps, 10_000_000);
        assert_eq!(t.at(10.0).down_bps, 4_000_000);
        assert_eq!(t.at(19.9).up_bps, 1_000_000);
        assert_eq!(t.at(1e6).down_bps, 8_000_000);
        assert_eq!(t.last_change_s(), 20.0);
        assert_eq!(
            t.bounds(),
            ((4_000_000, 10_000_000), (1_000_000, 2_000_000))
        );
    }

    #[test]
    fn mean_capacity_weights_each_step_by_its_time_in_the_span() {
        let t = RateTrace::parse("s", "0 10M 2M\n10 4M 1M").unwrap();
        assert_eq!(t.mean_capacity(0.0, 10.0), (10e6, 2e6));
        // 5 s at 10M and 5 s at 4M.
        assert_eq!(t.mean_capacity(5.0, 15.0), (7e6, 1.5e6));
        // Past the end the last rates hold; before 0 the first.
        assert_eq!(t.mean_capacity(30.0, 40.0), (4e6, 1e6));
        assert_eq!(t.mean_capacity(-2.0, 0.0), (10e6, 2e6));
        assert_eq!(t.mean_capacity(12.0, 12.0), (4e6, 1e6));
    }

    #[test]
    fn refusals_say_where_what_and_what_is_allowed() {
        let e = err("1 10M 2M");
        assert_eq!((e.line, e.col), (1, 1));
        assert!(e.msg.contains("must be at 0"), "{e}");

        let e = err("0 10M 2M\n# c\n  5 4M 1M\n5 3M 1M");
        assert_eq!((e.line, e.col), (4, 1));
        assert!(e.msg.contains("not after the previous step's (5 s)"), "{e}");

        let e = err("0 10M");
        assert_eq!((e.line, e.col), (1, 1));
        assert!(e.msg.contains("2 fields where 3") && e.msg.contains("TIME DOWN UP"));

        let e = err("0 10M 2M 7");
        assert_eq!((e.line, e.col), (1, 10), "the extra field");

        let e = err("0 10M 2MB");
        assert_eq!((e.line, e.col), (1, 7));
        assert!(e.msg.contains("capital B means bytes"), "{e}");

        let e = err("0 fast 2M");
        assert_eq!((e.line, e.col), (1, 3));
        assert!(e.msg.contains("not a download rate"), "{e}");

        let e = err("0 10M 1k");
        assert!(e.msg.contains("upload rate `1k` is out of range"), "{e}");

        let e = err("0 10M 1M\nsoon 1M 1M");
        assert_eq!((e.line, e.col), (2, 1));
        assert!(e.msg.contains("`soon` is not a time"), "{e}");

        let e = err("# nothing\n\n");
        assert_eq!(e.line, 0);
        assert!(e.to_string().contains("no step"));
        assert_eq!(
            err("0 1M 1M\n-1 1M 1M").to_string(),
            "2:1: `-1` is not a time: not a number; give seconds from the run's start \
             (`12.5`, or with a unit: `12500ms`)"
        );
    }

    #[test]
    fn align_starts_the_run_at_a_multiple_of_its_period() {
        let t = RateTrace::parse("s", "# clock\nalign 15s\n0 10M 2M\n12 2M 500k").unwrap();
        assert_eq!(t.align_s, Some(15.0));
        assert_eq!(t.steps.len(), 2);
        // 1000.2 s + a 0.5 s margin: the next multiple of 15 is 1005.
        assert!((t.start_wait_s(1000.2, 0.5) - 4.8).abs() < 1e-9);
        // Exactly on one, with no margin: now.
        assert_eq!(t.start_wait_s(1005.0, 0.0), 0.0);
        // Within the margin of one: the next.
        assert!((t.start_wait_s(1004.9, 0.5) - 15.1).abs() < 1e-9);
        // Without `align`, the margin alone.
        let free = RateTrace::parse("s", "0 10M 2M").unwrap();
        assert_eq!((free.align_s, free.start_wait_s(1000.2, 0.5)), (None, 0.5));
        // Anywhere in the file, in any unit.
        let late = RateTrace::parse("s", "0 10M 2M\nalign 500ms").unwrap();
        assert_eq!(late.align_s, Some(0.5));
    }

    #[test]
    fn align_refusals() {
        let e = err("align 15s\n0 1M 1M\nalign 60s");
        assert_eq!((e.line, e.col), (3, 1));
        assert!(
            e.msg.contains("second `align` (the first is on line 1)"),
            "{e}"
        );
        let e = err("align\n0 1M 1M");
        assert_eq!((e.line, e.col), (1, 1));
        assert!(e.msg.contains("takes one period"), "{e}");
        let e = err("align 15s 3\n0 1M 1M");
        assert_eq!((e.line, e.col), (1, 11), "the extra field");
        let e = err("align soon\n0 1M 1M");
        assert_eq!((e.line, e.col), (1, 7));
        assert!(e.msg.contains("`soon` is not a period"), "{e}");
        let e = err("align 7200s\n0 1M 1M");
        assert!(e.msg.contains("out of range: allowed 1ms..3600 s"), "{e}");
        let e = err("align 0\n0 1M 1M");
        assert!(e.msg.contains("out of range"), "{e}");
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        // `é` is two bytes; the extra field is the 8th character.
        assert_eq!(err("0 é 2M x").col, 8);
        assert_eq!(err("\t0 1M 1M 9").col, 10, "a tab is one column");
    }
}
