//! Every factor and threshold the controller decides by, with what it is
//! and why it has its value. `Tuning::default()` is what the engine runs;
//! the lab cases behind the values are in docs/autorate.md §3.

use super::units::{DurationExt, Share};
use sluice_time::{Duration, Rate};

/// The controller's constants (the defaults are what the engine runs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// One decision per tick: cake-autorate's pace, a few round trips of a
    /// home link, short enough to follow a hand-over.
    pub tick: Duration,

    // ---- What the reading says (each threshold + half a frame's time) ----
    /// Delay beyond sluice above which the link is taken to be queueing
    /// (a cut), 10 ms: CAKE's target is 5 ms, and the passive signal's
    /// own noise is a few.
    pub target: Duration,
    /// At or under this the reading is calm enough to raise (half the
    /// target): between it and the target the rate stays.
    pub raise_below: Duration,
    /// At or under this nothing is read (a quarter of the target): a fade's
    /// end is watched for on it, and an upload's raise near an old cut is
    /// quick only on it.
    pub empty: Duration,
    /// A full-sized Ethernet frame (bytes): each threshold allows half its
    /// time at the current rate ([`Tuning::frame_noise`]).
    pub frame_bytes: u64,

    // ---- Load ----
    /// Output / rate (or output / `min`) at or above which delay is
    /// blamed on the rate; under both, the link is idle.
    pub busy: f64,
    /// Output / rate at or above which a raise is tried.
    pub loaded: f64,

    // ---- Cuts ----
    /// The cut keeps `1 − d / (d + cut_knee)` of the rate on a delay `d`:
    /// deeper cuts for deeper queues, a link that fell far followed in a
    /// few steps.
    pub cut_knee: Duration,
    /// The deepest cut keeps this much of the rate.
    pub cut_deepest: f64,
    /// The shallowest cut keeps this much (less would not drain).
    pub cut_shallowest: f64,
    /// The least kept when the output is already below the rate (it then
    /// measures the link): enough to drain.
    pub under_link: f64,
    /// A download's output under this share of the rate is held there by
    /// the link (its queue lies before sluice).
    pub link_limited: f64,
    /// How long the link rate seen at such a cut holds off further cuts
    /// while the rate is under it.
    pub link_memory: Duration,
    /// Under this share of the link seen, delay is the senders' lag (TCP
    /// needs a round trip, the AQM an interval, to slow down), not the rate.
    pub under_link_seen: f64,
    /// No further cut this long after one, so that it can show.
    pub refractory: Duration,
    /// Within this many refractory periods of a cut, a delay below
    /// [`Tuning::draining`] of the cut's is its queue draining.
    pub drain_periods: u64,
    /// See [`Tuning::drain_periods`].
    pub draining: Share,
    /// A delay above this many times the last cut's (+ the target), while
    /// sluice's output is what enters the queue, skips the refractory
    /// period: the first cut of a step is made on its first milliseconds.
    pub escalate: u64,

    // ---- Raises ----
    /// Growth per tick when raising (0.02: +2 %): multiplicative, so the
    /// time to find a higher link is logarithmic in the ratio.
    pub raise: f64,
    /// Growth per tick near the rate of the last cut ([`Tuning::probe_zone`]
    /// of it or above), while that cut is recent ([`Tuning::ceiling_memory`]).
    pub probe: f64,
    /// From this share of the rate where the link was last found the raise
    /// is the gentle probe; a way back from a dip ends at it.
    pub probe_zone: f64,
    /// How long the rate where the link was last found stands for it.
    pub ceiling_memory: Duration,
    /// No raise this long after a cut.
    pub raise_after_cut: Duration,

    // ---- Dips and fades ----
    /// Growth per tick on the way back from a dip (+10 %: from 2 % of the
    /// old rate back to 90 % of it in about two seconds, where +2 % takes
    /// nine).
    pub fast: f64,
    /// A cut on a delay at least this large starts a dip as a cut the link
    /// forces does: the link fell (a probe step past it shows as 10–20 ms).
    pub dip_delay: Duration,
    /// Under this share of the rate before a dip the link is still down (a
    /// delay on the way back restarts it) or, an upload's, the dip ends in
    /// a fade; a cut from under it in a fade says where its link is.
    pub fade_depth: f64,
    /// A fade's end is watched for this long after its dip began: fades on
    /// the move last 1–3 s, and after this the rate before is another link's.
    pub fade_memory: Duration,
    /// A rate this far past the fade's link, with nothing read since it
    /// reached it, says the fade is over: at +0.25 % a tick that is 20
    /// ticks, and had the link stayed a queue of ~25 ms would stand.
    pub fade_past: f64,
    /// A cut in the fade from at most this much over the link found tells
    /// where the link is (a hold's measure reads up to a tenth under it).
    pub fade_near: f64,
    /// And nothing read for this long at least: a queue the rate past the
    /// link grows shows within a few ticks.
    pub fade_quiet: Duration,

    // ---- An upload's hold (the shaper paused so the modem drains) ----
    /// A hold leaves this much of the delay read (half the target).
    pub hold_leaves: Duration,
    /// The longest hold: a reading above this is more likely a flow's
    /// noise than a queue (and a queue that deep drains in time anyway).
    pub max_hold: Duration,
    /// How long after a hold's end the reading may still show the queue
    /// it drained: a round trip, the signal's per-flow window (~100 ms)
    /// and a tick.
    pub hold_lag: Duration,
    /// The least time a hold's measure of the link spans: the far ends
    /// acknowledge in bursts (delayed ACKs, GRO, the download's queue).
    pub hold_measure_span: Duration,
    /// The least delivery (full frames) a hold measures the link by.
    pub hold_measure_frames: u64,
    /// A measure counts only while the reading still shows more than this
    /// (half the target): a link that came back empties the queue, idles,
    /// and delivers less than its rate.
    pub hold_queue: Duration,
    /// A link measured under this share of the rate is taken for the link
    /// (a small gap is the measure's noise).
    pub hold_gap: f64,
    /// The rate is then set to this share of it, so what is read drains.
    pub hold_under_link: f64,

    // ---- The drain after an upload's cut ----
    /// The drain is over once the reading is calm or at most this share of
    /// its highest.
    pub drain_over: Share,
    /// A drain shorter than this says nothing of the link's rate: the
    /// reading lags the queue by its windows (~100 ms) and ticks (50 ms).
    pub slow_drain: Duration,
    /// Nor does one of less delay than this (a few frames' noise).
    pub drain_depth: Duration,

    // ---- A scheduled drop (`reconfig`) ----
    /// A window's way back starts at this share of the rate before it.
    pub reconfig_restart: Share,
}

impl Default for Tuning {
    fn default() -> Self {
        let target = Duration::from_millis(10);
        Tuning {
            tick: Duration::from_millis(50),
            target,
            raise_below: target.div(2),
            empty: target.div(4),
            frame_bytes: 1514,
            busy: 0.5,
            loaded: 0.75,
            cut_knee: Duration::from_millis(100),
            cut_deepest: 0.5,
            cut_shallowest: 0.9,
            under_link: 0.85,
            link_limited: 0.9,
            link_memory: Duration::from_secs(2),
            under_link_seen: 0.95,
            refractory: Duration::from_millis(300),
            drain_periods: 6,
            draining: Share::new(3, 4),
            escalate: 2,
            raise: 0.02,
            probe: 0.0025,
            probe_zone: 0.9,
            ceiling_memory: Duration::from_secs(3),
            raise_after_cut: Duration::from_millis(500),
            fast: 0.1,
            dip_delay: Duration::from_millis(50),
            fade_depth: 0.5,
            fade_memory: Duration::from_secs(10),
            fade_past: 1.05,
            fade_near: 1.2,
            fade_quiet: Duration::from_millis(500),
            hold_leaves: target.div(2),
            max_hold: Duration::from_millis(500),
            hold_lag: Duration::from_millis(300),
            hold_measure_span: Duration::from_millis(200),
            hold_measure_frames: 8,
            hold_queue: target.div(2),
            hold_gap: 0.9,
            hold_under_link: 0.95,
            drain_over: Share::new(1, 4),
            slow_drain: Duration::from_millis(500),
            drain_depth: Duration::from_millis(20),
            reconfig_restart: Share::new(1, 2),
        }
    }
}

impl Tuning {
    /// What the thresholds allow for the frame the modem is sending at
    /// `rate`: half a full frame's time, the mean wait it adds to a packet
    /// behind it (the signal's per-flow least over 100 ms takes the rest
    /// away). Below ~10 Mbit/s that frame is a delay the signal cannot
    /// tell from a queue (docs/autorate.md §3, `f`).
    pub fn frame_noise(&self, rate: Rate) -> Duration {
        rate.tx_time(self.frame_bytes).div(2)
    }

    /// The cut's threshold at `rate`.
    pub fn cut_above(&self, rate: Rate) -> Duration {
        self.target + self.frame_noise(rate)
    }

    /// The share of the rate a cut on `delay` keeps.
    pub fn cut_factor(&self, delay: Duration) -> f64 {
        let d = delay.as_secs_f64();
        (1.0 - d / (d + self.cut_knee.as_secs_f64())).clamp(self.cut_deepest, self.cut_shallowest)
    }
}
