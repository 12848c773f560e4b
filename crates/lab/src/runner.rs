//! One lab run: build the network, start the shaper, play the scenario's
//! phases in wall-clock time, collect the probes and summarise —
//! [`setup`], [`play`], [`collect`].
//!
//! # Principles
//! - `t = 0` is the start of phase 0 on the wall clock, so `ping -D`, irtt
//!   and the rate sampler share one time base; flows start on time at
//!   their first phase and are interrupted (SIGINT, so iperf3 still prints
//!   what it measured) when they overrun their last phase by
//!   [`FLOW_GRACE_S`] plus the worst RTT seen — iperf3's own timer starts
//!   only after its set-up, which can take seconds behind a full FIFO.
//! - The last probes get time to come back: the run lingers for the worst
//!   RTT seen plus a margin, bounded by [`LINGER_MAX_S`]. irtt waits for
//!   its own (a multiple of its worst RTT) and is interrupted only past a
//!   wait for replies that late: an interrupted irtt writes nothing.
//! - Every exit path, Ctrl-C included (the caller's `stop` flag, polled
//!   every tick), leaves nothing behind: all state lives in a [`LabNet`]
//!   whose drop kills the processes and deletes the namespaces.
//! - What helps a user see why stays in the run directory: raw probe
//!   output, iperf3's JSON, sluice's log and queue counters, the modem's
//!   `tc -s` statistics.
//!
//! [`LabNet`]: crate::topo::LabNet

use crate::model::{Dir, RunResult, Scenario, ShaperSpec};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

mod attacker;
mod checks;
mod clock;
mod collect;
mod hosts;
mod play;
mod progress;
mod setup;
pub use checks::{check_hosts, check_latency_probe, check_tools, check_windows, required_tools};
pub use clock::{dir_stamp, rfc3339};
pub use hosts::check_cc;
use progress::Bar;
pub use progress::Progress;

/// A flow still running this long after its last phase, plus the worst
/// ping RTT seen (an upload's final report waits for the modem's FIFO to
/// drain), is interrupted.
pub const FLOW_GRACE_S: f64 = 2.0;
/// Upper bound of the final linger (seconds) waiting for late ping replies.
pub const LINGER_MAX_S: f64 = 10.0;

/// How to run.
pub struct RunOptions {
    /// The sluice executable (shaper and delay line).
    pub sluice_bin: PathBuf,
    /// The run directory (created).
    pub dir: PathBuf,
    /// Set by the caller's signal handler: stop and clean up.
    pub stop: Arc<AtomicBool>,
    pub progress: Progress,
    /// Shown before the phase in progress lines (e.g. "2/3 none").
    pub tag: String,
    /// sluice runs with `--autorate-trace`: every autorate decision and
    /// delay sample in the run directory.
    pub autorate_trace: bool,
}

impl RunOptions {
    /// The caller asked the run to stop.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Why a run produced no result.
#[derive(Debug)]
pub enum LabError {
    /// The stop flag was raised (Ctrl-C); everything was cleaned up.
    Interrupted,
    Failed(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Interrupted => write!(f, "interrupted"),
            LabError::Failed(m) => write!(f, "{m}"),
        }
    }
}

impl From<std::io::Error> for LabError {
    fn from(e: std::io::Error) -> LabError {
        LabError::Failed(e.to_string())
    }
}

/// Runs `scenario` with `shaper`; the run directory is filled as it goes.
pub fn run(
    scenario: &Scenario,
    shaper: &ShaperSpec,
    o: &RunOptions,
) -> Result<RunResult, LabError> {
    check_hosts(scenario).map_err(LabError::Failed)?;
    std::fs::create_dir_all(&o.dir)?;
    let mut bar = Bar {
        mode: o.progress,
        tag: o.tag.clone(),
        last_phase: None,
    };
    let mut lab = setup::Lab::start(scenario, shaper, o, &mut bar)?;
    let played = play::play(&mut lab, scenario, o, &mut bar)?;
    collect::collect(lab, played, scenario, shaper, o)
}

/// Seconds since `t0`.
fn since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

/// Seconds from the start of phase `from` to the end of phase `to`.
fn span(s: &Scenario, from: usize, to: usize) -> (f64, f64) {
    let w = s.phase_windows();
    let a = w.get(from).map(|x| x.0).unwrap_or(0.0);
    let b = w.get(to).map(|x| x.1).unwrap_or(a);
    (a, b)
}

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Down => "down",
        Dir::Up => "up",
    }
}

/// Appends to one of the run's files, or says in the warnings why not.
fn append(warnings: &mut Vec<String>, path: &Path, text: &str) {
    use std::io::Write;
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = r {
        warnings.push(format!("cannot write {}: {e}", path.display()));
    }
}

/// Writes one of the run's files, or says in the warnings why it is missing.
fn keep(warnings: &mut Vec<String>, path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        warnings.push(format!("cannot write {}: {e}", path.display()));
    }
}
