//! The autorate controller (issue #16 item 3): the rate of an
//! interface's shaper follows a link whose capacity moves.
//!
//! # Principles
//!
//! As cake-autorate, sqm-autorate and LibreQoS StormGuard do, each tick
//! ([`Tuning::tick`]) classifies the moment by *load* (output / rate) and
//! *delay* beyond sluice (read from the TCP it forwards,
//! [`crate::delay_signal`]): delay under load cuts the rate towards the
//! output, load without delay raises it, and a cut waits out a refractory
//! period. Guarantees: never a raise without evidence nor a cut on silence
//! (no reading, or idle: the rate stays); always within `[min, max]`; in
//! dry-run the decisions are made and logged, and the engine does not apply
//! them; time is an argument. An upload's cut also *holds* the shaper (the
//! one meaning of "hold" here: it sends nothing for a while, `hold.rs`) so
//! the modem's queue drains at the link's full rate. The rules and the lab
//! cases behind them: docs/autorate.md §3.
//!
//! A state machine (`phase.rs`); what is learnt of the link (the last cut,
//! where it was found, the drain, the hold) outlives the phases
//! (`memory.rs`). Transitions:
//!
//! - Steady → Dip: a cut the link forces (a download's output under the
//!   rate, a delay of [`Tuning::dip_delay`], an upload's output collapsed).
//! - Dip → Steady or, an upload's under half the rate before, Fade: back
//!   at 90 % of the rate before, or delay on the way back; a download's
//!   output stops following the way back → Steady (`link`).
//! - Fade → Dip: past its link with nothing read (the way back resumes),
//!   or a forced cut; → Steady after [`Tuning::fade_memory`].
//! - any → Reconfig: a scheduled drop's window opens; at its end, idle →
//!   the phase before, loaded → Dip from half the rate before.

mod cut;
mod drain;
mod hold;
mod memory;
mod phase;
mod raise;
mod reconfig;
mod tuning;
mod units;

pub use tuning::Tuning;
pub use units::Share;

use crate::delay_signal::Reading;
use memory::Memory;
use phase::Phase;
use sluice_conf::ir::Autorate;
use sluice_time::{Duration, Instant, Rate};
use units::RateExt;

/// Why the controller did what it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Delay beyond sluice under load: the rate was cut.
    Delay,
    /// Load without delay: the rate was raised.
    Load,
    /// Too little traffic to judge: the rate stays.
    Idle,
    /// No fresh delay signal: the rate stays.
    Unsure,
    /// Delay, but a cut was just made (or the queue is draining): the
    /// rate stays.
    Refractory,
    /// Delay within the target, or no room to move (a bound): the rate
    /// stays.
    Steady,
    /// A scheduled drop of the link (`reconfig`): the rate at `min` from
    /// just before it to just after, then back to half the rate before.
    Reconfig,
    /// A download's output stopped following the way back from a dip: the
    /// rate went to the most the link let through since the dip began.
    Link,
}

impl Reason {
    pub const ALL: [Reason; 8] = [
        Reason::Delay,
        Reason::Load,
        Reason::Idle,
        Reason::Unsure,
        Reason::Refractory,
        Reason::Steady,
        Reason::Reconfig,
        Reason::Link,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Delay => "delay",
            Reason::Load => "load",
            Reason::Idle => "idle",
            Reason::Unsure => "unsure",
            Reason::Refractory => "refractory",
            Reason::Steady => "steady",
            Reason::Reconfig => "reconfig",
            Reason::Link => "link",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One decision: what the controller saw and what it chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub at: Instant,
    /// The delay signal's median and the flows it is over.
    pub delay: Option<Duration>,
    pub flows: u32,
    /// Age of the newest sample.
    pub newest_age: Option<Duration>,
    /// The delay is the round trip of autorate's probe, not the traffic's
    /// (crate::probe).
    pub probe: bool,
    /// Achieved output over the tick.
    pub achieved: Rate,
    pub old: Rate,
    pub new: Rate,
    pub reason: Reason,
    /// An upload's cut: how long the shaper sends nothing, from `at`, so
    /// that the queue beyond it drains at the link's full rate (zero
    /// otherwise; see [`Controller::way_out`]).
    pub hold: Duration,
    /// Dry-run: `new` was not applied.
    pub dry_run: bool,
}

/// The controller of one interface's rate.
#[derive(Clone, Debug)]
pub struct Controller {
    cfg: Autorate,
    tuning: Tuning,
    rate: Rate,
    next_tick: Instant,
    /// The previous tick and the bytes sent by then.
    last_tick: Option<(Instant, u64)>,
    /// The queue acted on lies after sluice's output (an upload's root):
    /// see [`Controller::way_out`].
    way_out: bool,
    phase: Phase,
    memory: Memory,
    /// The highest output since the latest dip began. It outlives the dip
    /// by a tick: a `reconfig` window that opens then starts its way back
    /// from it.
    dip_peak: Rate,
    /// A hold decided and not yet handed out with its decision.
    pending_hold: Duration,
    /// The wall clock: Unix time = `now` + this (see
    /// [`Controller::set_wall_clock`]).
    wall: Option<Duration>,
    last_reason: Option<Reason>,
    /// Decisions by reason (ticks).
    pub counts: [u64; Reason::ALL.len()],
    /// Holds made (an upload's cuts), and their time in all.
    pub holds: u64,
    pub held_for: Duration,
}

/// What one tick observed, for the rules.
#[derive(Clone, Copy, Debug)]
struct Tick {
    now: Instant,
    achieved: Rate,
    /// Bytes sent through the shaper so far, and acknowledged by the far
    /// ends (an upload's).
    sent: u64,
    delivered: Option<u64>,
    probe: bool,
}

impl Controller {
    /// A controller starting at `start` (the configured bandwidth),
    /// clamped to the bounds.
    pub fn new(cfg: Autorate, start: Rate, tuning: Tuning) -> Controller {
        Controller {
            cfg,
            tuning,
            rate: start.max(cfg.min).min(cfg.max),
            next_tick: Instant::ZERO,
            last_tick: None,
            way_out: false,
            phase: Phase::Steady,
            memory: Memory::default(),
            dip_peak: Rate(0),
            pending_hold: Duration::ZERO,
            wall: None,
            last_reason: None,
            counts: [0; Reason::ALL.len()],
            holds: 0,
            held_for: Duration::ZERO,
        }
    }

    /// The queue this controller acts on lies after sluice's output (the
    /// upload's root on the WAN side): what enters it is what sluice
    /// sends, so an output under the rate is the senders' doing (their
    /// ACKs come back at the link's slower pace) and says nothing of the
    /// link's rate. The rules that read the output as the link's (a
    /// download's: its queue lies before sluice, whose output is what the
    /// link lets through) are off: the least cut factor, the link rate
    /// remembered at a cut, and the wait on a cut too small.
    pub fn way_out(mut self) -> Self {
        self.way_out = true;
        self
    }

    /// Where the wall clock is: Unix time (since the epoch) is `now` plus
    /// `offset`. Only a `reconfig` schedule needs it; the daemon sets it
    /// (and again as the clock is adjusted), `None` turns the schedule off.
    pub fn set_wall_clock(&mut self, offset: Option<Duration>) {
        self.wall = offset;
    }

    pub fn config(&self) -> Autorate {
        self.cfg
    }

    /// The rate the controller has chosen (in dry-run, the one it would set).
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// When [`Controller::tick`] next has something to do.
    pub fn next_tick(&self) -> Instant {
        self.next_tick
    }

    /// Decides at `now`, from the bytes sent through the shaper so far
    /// (`sent_bytes`, a counter), those the far ends of its connections
    /// have acknowledged so far (`delivered`, a counter; an upload's, see
    /// [`crate::delivered::Delivered`]; `None` where not counted) and
    /// the delay signal. `None` when no tick is due (or on the first
    /// call, which only starts the clock).
    pub fn tick(
        &mut self,
        now: Instant,
        sent_bytes: u64,
        delivered: Option<u64>,
        signal: Reading,
    ) -> Option<Decision> {
        if now < self.next_tick {
            return None;
        }
        self.next_tick = now + self.tuning.tick;
        let (t0, b0) = self.last_tick.replace((now, sent_bytes))?;
        let dt = now.saturating_since(t0);
        if dt == Duration::ZERO {
            return None;
        }
        let achieved = units::rate_of(sent_bytes.saturating_sub(b0), dt);
        self.measure_hold(now, delivered, signal.delay);
        let tick = Tick {
            now,
            achieved,
            sent: sent_bytes,
            delivered,
            probe: signal.probe,
        };
        let (new, reason) = self.decide(tick, signal.delay);
        let hold = std::mem::take(&mut self.pending_hold);
        if hold > Duration::ZERO {
            self.holds += 1;
            self.held_for = self.held_for + hold;
        }
        let d = Decision {
            at: now,
            delay: signal.delay,
            flows: signal.flows,
            newest_age: signal.newest_age,
            probe: signal.probe,
            achieved,
            old: self.rate,
            new,
            reason,
            hold,
            dry_run: self.cfg.dry_run,
        };
        self.rate = new;
        self.last_reason = Some(reason);
        self.counts[reason.index()] += 1;
        Some(d)
    }

    /// Whether a decision is worth a line in the log: the rate moved, a
    /// hold was made, or the reason changed since the previous tick.
    pub fn worth_logging(&self, d: &Decision, previous: Option<Reason>) -> bool {
        d.new != d.old || d.hold > Duration::ZERO || previous != Some(d.reason)
    }

    /// The reason of the latest decision.
    pub fn last_reason(&self) -> Option<Reason> {
        self.last_reason
    }

    /// One decision. The order of the rules is the order of precedence: a
    /// scheduled drop, no reading, a hold's measure, idle, delay, calm.
    fn decide(&mut self, k: Tick, delay: Option<Duration>) -> (Rate, Reason) {
        let t = self.tuning;
        let rate = self.rate;
        if let Some(d) = self.scheduled(k.now, k.sent) {
            return d;
        }
        self.dip_peak = if matches!(self.phase, Phase::Dip(_)) {
            self.dip_peak.max(k.achieved)
        } else {
            Rate(0)
        };
        let load = k.achieved.ratio(rate);
        let Some(delay) = delay else {
            return (rate, Reason::Unsure);
        };
        let empty = delay <= t.empty;
        if let (false, Phase::Fade(f)) = (empty, &mut self.phase) {
            // Anything read: the fade's link may be there still, or its
            // queue draining, and the watch for its end starts again.
            f.past = None;
        }
        if let Some(d) = self.cut_to_measured(k, delay) {
            return d;
        }
        if load < t.busy && k.achieved.under(t.busy, self.cfg.min) {
            return (rate, Reason::Idle);
        }
        let frame = t.frame_noise(rate);
        let calm = delay <= t.raise_below + frame;
        self.memory.track_drain(k.now, delay, k.sent, calm, &t);
        if delay > t.target + frame {
            return self.on_delay(k, delay);
        }
        self.on_calm(k.now, calm, empty, load)
    }
}

#[cfg(test)]
mod tests;
