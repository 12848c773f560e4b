//! Whether the shaper is in control of the link, read from the traffic it
//! forwards: the speed test users run, without the test (issue #40).
//!
//! # Principles
//! (The rules with their figures: docs/engine.md, "Health".)
//! - **One direction, one tick.** A [`Health`] is the traffic leaving by
//!   one shaped interface, fed every [`TICK`] with what the engine already
//!   measures: bytes sent, the rate, sluice's own wait, the delay beyond
//!   (crate::path). Nothing here reads a clock.
//! - **Loaded**: output ≥ [`LOADED_SHARE`] of the rate, or a standing
//!   queue in sluice, or the modem's queue grown with output ≥
//!   [`BUSY_SHARE`] (a slower link never lets the shaper reach its rate).
//!   Latency counts only on loaded ticks: idle, every grade is A+.
//! - **Grown**: delay beyond ≥ [`grew_at`] — [`GREW`], or two full frames
//!   when longer: a delayed ACK (RFC 1122 §4.2.3.2) releases two
//!   back-to-back segments at any bottleneck, a controlled one included.
//! - **The verdict** reads the last [`EVIDENCE`] s: under [`MIN_LOADED`]
//!   loaded, not enough traffic; grown for half the loaded time, not in
//!   control, suggesting the rate the link drained at × [`MARGIN`]; or
//!   mostly busy without a queue in sluice yet short of [`SHORT`] of the
//!   rate (TCP control keeps the modem's queue short, the link still sets
//!   the pace), suggesting that output × [`MARGIN`]. Else in control. A
//!   new verdict holds [`HOLD`] before it takes effect; each change is an
//!   event.
//! - **Held back** ([`held_back`]): traffic, too little load to judge,
//!   and the other direction not in control: its ACKs wait in that link's
//!   queue (RFC 3449 §1.1), which sets this one's pace. Fix that first.
//! - **The grade**: DSLReports' (sluice_time::grade) of the last minute's
//!   mean added latency (sluice's wait + beyond) under steady load, the
//!   first [`SETTLE`] of each load left out as iperf3's `--omit` does.
//!   Sluice's wait is the bulk traffic's: a sparse flow skips most of it.
//! - Bounded memory: three windows of histograms per quantity
//!   ([`window`]) and a ring of [`EVIDENCE`] one-second slots.

pub mod window;

use sluice_time::{Duration, Histogram, Instant, Rate};
use std::fmt;
pub use window::{ByWindow, Latency};
use window::{Window, Windows};

/// How often the engine feeds each direction.
pub const TICK: Duration = Duration::from_millis(100);
/// The shaper's output, as a share of its rate (percent), that makes a
/// tick loaded.
pub const LOADED_SHARE: u64 = 80;
/// The output share that, with the link's queue grown, makes it loaded.
pub const BUSY_SHARE: u64 = 50;
/// Sluice's own wait that is a standing queue.
pub const STANDING: Duration = Duration::from_millis(5);
/// The delay beyond sluice that says the modem's queue grew: half of the
/// grade A's edge, well over the noise of a controlled link's readings.
pub const GREW: Duration = Duration::from_millis(15);
/// The verdict reads this many seconds back.
pub const EVIDENCE: usize = 20;
/// Loaded time within [`EVIDENCE`] a verdict needs.
pub const MIN_LOADED: Duration = Duration::from_secs(5);
/// How long a new verdict must hold before it is the verdict.
pub const HOLD: Duration = Duration::from_secs(5);
/// The suggested rate's share of the delivery rate (percent).
pub const MARGIN: u64 = 95;
/// A delivery rate at this share of the rate (percent) or above is the
/// rate's own: no slower rate to suggest.
pub const FULL: u64 = 97;
/// Sluice's mean output while loaded (percent of the rate) under which
/// the link, not the shaper, sets the pace: a link 12 % or more below the
/// rate (at 120 % the output is 83 %).
pub const SHORT: u64 = 88;
/// The mean output over [`EVIDENCE`] (percent of the rate) that is
/// traffic wanting more, not a trickle: an upload's ACKs alone are ~2 %
/// of a download's rate.
pub const TRAFFIC_SHARE: u64 = 10;
/// Time with the modem's queue grown the suggestion needs.
const MIN_MEASURED: Duration = Duration::from_secs(2);
/// Full frames of queue at the rate that are TCP's ACK clock, not growth.
pub const BURST_FRAMES: u64 = 2;
/// A full Ethernet frame (1500 bytes of IP and its header).
const FULL_FRAME: u64 = 1514;
/// The start of a load the grade leaves out.
pub const SETTLE: Duration = Duration::from_secs(5);
/// Time without a loaded tick after which load starts anew.
pub const RESTART: Duration = Duration::from_secs(1);

/// [`BURST_FRAMES`] full frames at `rate` ([`Duration::ZERO`] at no rate).
fn frames_at(rate: Rate) -> Duration {
    if rate == Rate::ZERO {
        return Duration::ZERO;
    }
    rate.tx_time(BURST_FRAMES * FULL_FRAME)
}

/// The delay beyond that says the modem's queue grew, for a direction
/// shaped at `rate`: [`GREW`], or [`BURST_FRAMES`] full frames at `rate`
/// when those take longer.
pub fn grew_at(rate: Rate) -> Duration {
    GREW.max(frames_at(rate))
}

/// Whether the shaper is in control of the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// Too little load lately to say.
    #[default]
    NotEnoughTraffic,
    /// Under load, the link beyond does not queue: sluice holds the queue.
    InControl,
    /// Under load the modem's queue grows: the link is slower than the
    /// rate. `suggested`: the rate the link delivered × [`MARGIN`]; `None`:
    /// not measured (enable autorate).
    NotInControl { suggested: Option<Rate> },
}

impl Verdict {
    /// Which verdict, apart from its suggestion.
    fn kind(self) -> u8 {
        match self {
            Verdict::NotEnoughTraffic => 0,
            Verdict::InControl => 1,
            Verdict::NotInControl { .. } => 2,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::NotEnoughTraffic => f.write_str("not enough traffic to say"),
            Verdict::InControl => f.write_str("in control"),
            Verdict::NotInControl { suggested: Some(r) } => write!(
                f,
                "not in control: the link is slower than the rate, try {}",
                sluice_time::units::format_rate(*r)
            ),
            Verdict::NotInControl { suggested: None } => {
                f.write_str("not in control: the link is slower than the rate, enable autorate")
            }
        }
    }
}

/// What the engine measured of one direction over a tick (counters are
/// running totals).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Bytes the interface sent so far.
    pub sent: u64,
    /// The rate it is shaped at now.
    pub rate: Rate,
    /// Sluice's own recent wait.
    pub own: Duration,
    /// The delay beyond sluice, if the traffic gives one.
    pub beyond: Option<Duration>,
}

/// The modem's queue grown under load: how often and how long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Episodes {
    /// Episodes begun (the current one included).
    pub count: u64,
    pub total: Duration,
    pub longest: Duration,
    /// Since when the current one lasts, if one does.
    pub current_since: Option<Instant>,
}

/// A verdict that took effect at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthChange {
    pub at: Instant,
    pub from: Verdict,
    pub to: Verdict,
}

impl fmt::Display for HealthChange {
    /// The daemon's log line (after the interface's name).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (was: {})", self.to, self.from)
    }
}

/// One direction's health, as `show health` reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HealthReport {
    pub verdict: Verdict,
    /// When the verdict took effect.
    pub since: Instant,
    /// The last tick's: whether loaded, the output and the rate.
    pub loaded: bool,
    pub output: Rate,
    pub rate: Rate,
    /// Loaded time within the last [`EVIDENCE`] seconds, and the mean
    /// output over them.
    pub loaded_recent: Duration,
    pub output_recent: Rate,
    /// Latency added by sluice (its wait) and beyond it, while loaded.
    pub sluice: ByWindow,
    pub beyond: ByWindow,
    pub episodes: Episodes,
    /// The grade of the last minute's mean added latency under load
    /// (`None`: no loaded tick in it), and that mean.
    pub grade: Option<&'static str>,
    pub added: Option<Duration>,
    /// Sluice's wait and the delay beyond on every loaded tick since the
    /// start, never forgotten: the metrics' histograms, whose `rate()`
    /// gives any window's quantiles.
    pub sluice_since_start: Histogram,
    pub beyond_since_start: Histogram,
}

/// One second of evidence.
#[derive(Clone, Copy, Debug, Default)]
struct Second {
    epoch: Option<u64>,
    /// Bytes sent in it, loaded or not.
    sent: u64,
    loaded: Duration,
    /// Loaded time with the output at [`BUSY_SHARE`] of the rate or more
    /// and no standing queue in sluice, and the bytes sent meanwhile.
    busy: Duration,
    busy_bytes: u64,
    /// Loaded time with the modem's queue grown, and the bytes delivered
    /// meanwhile.
    grew: Duration,
    grew_bytes: u64,
}

/// One direction's health (see the module docs).
#[derive(Clone, Debug)]
pub struct Health {
    last: Option<(Instant, Sample)>,
    report: HealthReport,
    /// The verdict the evidence gives now, and since when.
    candidate: (Verdict, Instant),
    evidence: [Second; EVIDENCE],
    sluice: Windows,
    beyond: Windows,
    /// Their sum, for the grade: the last minute's steady load only.
    added: Window,
    /// Since when the current load lasts, and its last loaded tick.
    load: Option<(Instant, Instant)>,
    /// The first tick.
    started: Instant,
}

impl Default for Health {
    fn default() -> Health {
        Health::new()
    }
}

impl Health {
    pub fn new() -> Health {
        Health {
            last: None,
            report: HealthReport::default(),
            candidate: (Verdict::NotEnoughTraffic, Instant::ZERO),
            evidence: [Second::default(); EVIDENCE],
            sluice: Windows::default(),
            beyond: Windows::default(),
            added: Window::minute(),
            load: None,
            started: Instant::ZERO,
        }
    }

    /// The control tick at `now` with the direction's sample `s`; a
    /// change of verdict, if one took effect.
    pub fn tick(&mut self, now: Instant, s: Sample) -> Option<HealthChange> {
        let Some((t0, p)) = self.last.replace((now, s)) else {
            // The first verdict holds from the first tick, not from the
            // clock's zero (`show health` would say "for" the uptime).
            self.report.since = now;
            self.candidate.1 = now;
            self.started = now;
            return None;
        };
        let dt = now.saturating_since(t0);
        if dt == Duration::ZERO {
            self.last = Some((t0, p));
            return None;
        }
        let sent = s.sent.saturating_sub(p.sent);
        let output = per_second(sent, dt);
        let grew = s.beyond.is_some_and(|b| b >= grew_at(s.rate));
        let loaded = output >= s.rate.percent(LOADED_SHARE)
            || s.own >= STANDING.max(frames_at(s.rate))
            || (grew && output >= s.rate.percent(BUSY_SHARE));
        self.episode(now, dt, loaded && grew);
        if loaded {
            self.sluice.record(now, s.own);
            self.report.sluice_since_start.record(s.own);
            let beyond = s.beyond.unwrap_or(Duration::ZERO);
            if s.beyond.is_some() {
                self.beyond.record(now, beyond);
                self.report.beyond_since_start.record(beyond);
            }
            if self.steady(now, dt) {
                self.added
                    .record(now, Duration(s.own.0.saturating_add(beyond.0)));
            }
        }
        let sec = self.second(now);
        sec.sent = sec.sent.saturating_add(sent);
        if loaded {
            sec.loaded = sec.loaded + dt;
            if output >= s.rate.percent(BUSY_SHARE) && s.own < STANDING {
                sec.busy = sec.busy + dt;
                sec.busy_bytes = sec.busy_bytes.saturating_add(sent);
            }
            if grew {
                sec.grew = sec.grew + dt;
                sec.grew_bytes = sec.grew_bytes.saturating_add(sent);
            }
        }
        let r = &mut self.report;
        (r.loaded, r.output, r.rate) = (loaded, output, s.rate);
        self.decide(now, s.rate)
    }

    /// A loaded tick at `now`: whether its load has lasted [`SETTLE`].
    fn steady(&mut self, now: Instant, dt: Duration) -> bool {
        let start = match self.load {
            Some((start, last)) if now.saturating_since(last) <= RESTART => start,
            _ => now - dt,
        };
        self.load = Some((start, now));
        now.saturating_since(start) > SETTLE
    }

    /// The evidence slot of `now`'s second, emptied if it held an older one.
    fn second(&mut self, now: Instant) -> &mut Second {
        let e = now.0 / 1_000_000_000;
        let sec = &mut self.evidence[(e % EVIDENCE as u64) as usize];
        if sec.epoch != Some(e) {
            *sec = Second {
                epoch: Some(e),
                ..Second::default()
            };
        }
        sec
    }

    /// An episode of the modem's queue grown goes on (`grew`) or ends.
    fn episode(&mut self, now: Instant, dt: Duration, grew: bool) {
        let ep = &mut self.report.episodes;
        match (grew, ep.current_since) {
            (true, None) => {
                ep.count += 1;
                ep.current_since = Some(now - dt);
            }
            (false, Some(_)) => ep.current_since = None,
            _ => {}
        }
        if grew {
            ep.total = ep.total + dt;
            let len = now.saturating_since(ep.current_since.unwrap_or(now));
            ep.longest = ep.longest.max(len);
        }
    }

    /// What the last [`EVIDENCE`] seconds say at `now`.
    fn evidence(&self, now: Instant, rate: Rate) -> (Verdict, Duration, u64) {
        let e = now.0 / 1_000_000_000;
        let recent = self
            .evidence
            .iter()
            .filter(|s| s.epoch.is_some_and(|x| x + EVIDENCE as u64 > e));
        let (mut loaded, mut grew, mut bytes) = (Duration::ZERO, Duration::ZERO, 0u64);
        let (mut busy, mut busy_bytes, mut sent) = (Duration::ZERO, 0u64, 0u64);
        for s in recent {
            sent = sent.saturating_add(s.sent);
            loaded = loaded + s.loaded;
            busy = busy + s.busy;
            busy_bytes = busy_bytes.saturating_add(s.busy_bytes);
            grew = grew + s.grew;
            bytes = bytes.saturating_add(s.grew_bytes);
        }
        // Mostly busy, yet short of the rate: see the module docs.
        let output = per_second(busy_bytes, busy);
        let short = busy.0.saturating_mul(2) >= loaded.0 && output < rate.percent(SHORT);
        let v = if loaded < MIN_LOADED {
            Verdict::NotEnoughTraffic
        } else if grew.0.saturating_mul(2) >= loaded.0 {
            // A link that delivers what sluice sends is not the slower
            // one: something else queues there (autorate follows it).
            let measured = (grew >= MIN_MEASURED).then(|| per_second(bytes, grew));
            let slower = measured.filter(|m| *m < rate.percent(FULL) && *m > Rate::ZERO);
            Verdict::NotInControl {
                suggested: slower.map(|m| three_figures(m.percent(MARGIN))),
            }
        } else if short {
            Verdict::NotInControl {
                suggested: Some(three_figures(output.percent(MARGIN))),
            }
        } else {
            Verdict::InControl
        };
        (v, loaded, sent)
    }

    /// The verdict at `now`, with hysteresis: a new one after [`HOLD`].
    fn decide(&mut self, now: Instant, rate: Rate) -> Option<HealthChange> {
        let (v, loaded, sent) = self.evidence(now, rate);
        self.report.loaded_recent = loaded;
        // The slots cover the seconds before this one and this one so far.
        let span = Duration((EVIDENCE as u64 - 1) * 1_000_000_000 + now.0 % 1_000_000_000);
        let span = span.min(now.saturating_since(self.started));
        self.report.output_recent = per_second(sent, span);
        if v.kind() != self.candidate.0.kind() {
            self.candidate.1 = now;
        }
        self.candidate.0 = v;
        let current = self.report.verdict;
        if v.kind() == current.kind() {
            // The same verdict: its suggestion follows the evidence.
            self.report.verdict = v;
            return None;
        }
        if now.saturating_since(self.candidate.1) < HOLD {
            return None;
        }
        self.report.verdict = v;
        self.report.since = now;
        Some(HealthChange {
            at: now,
            from: current,
            to: v,
        })
    }

    /// The report as of `now` (at or after the last tick).
    pub fn report(&self, now: Instant) -> HealthReport {
        let mut r = self.report.clone();
        r.sluice = self.sluice.read(now);
        r.beyond = self.beyond.read(now);
        let added = Latency::of(&self.added.read(now));
        r.added = added.mean;
        r.grade = added
            .mean
            .map(|m| sluice_time::grade::grade(m.as_millis_f64()));
        r
    }
}

/// Whether `this` direction is held back by the `other` (see the module
/// docs): too little load to judge, yet traffic, while the other is not
/// in control.
pub fn held_back(this: &HealthReport, other: &HealthReport) -> bool {
    this.verdict == Verdict::NotEnoughTraffic
        && this.rate > Rate::ZERO
        && this.output_recent >= this.rate.percent(TRAFFIC_SHARE)
        && matches!(other.verdict, Verdict::NotInControl { .. })
}

/// `r` rounded down to three significant figures: a rate to write in
/// pf.conf (`9490Kb`), not a measurement's noise.
fn three_figures(r: Rate) -> Rate {
    let mut unit = 1;
    while r.0 / unit >= 1000 {
        unit *= 10;
    }
    Rate(r.0 / unit * unit)
}

/// `bytes` over `dt` as a rate.
fn per_second(bytes: u64, dt: Duration) -> Rate {
    if dt.0 == 0 {
        return Rate::ZERO;
    }
    let bps = bytes as u128 * 8 * 1_000_000_000 / dt.0 as u128;
    Rate(u64::try_from(bps).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
