//! `sluice top`: a live full-screen view of the running daemon, in the
//! manner of pftop and `systat queues`: queues, hosts, states and autorate,
//! the health verdict on top of each.
//!
//! Principles
//! - The daemon's control socket is the only source: each poll sends the
//!   requests `sluice show queues|states|health --json` sends and keeps the
//!   typed replies ([`Snapshot`]); nothing is measured here but the time
//!   between two polls.
//! - Everything shown is computed by [`model`] from two snapshots (pure,
//!   unit-tested); [`render`] only lays it out and [`app`] only keeps the
//!   user's choices (view, sort, filter, pause).
//! - Not a terminal (or `--once`): two polls one interval apart, so rates
//!   are real, printed once as plain text, as `top -b -n 1` does.

use crate::out::owrite;
use crate::show::ControlArg;
use clap::{Args as ClapArgs, ValueEnum};
use sluice_control::proto::{Reply, Request};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod app;
pub mod model;
mod plain;
mod render;
#[cfg(test)]
mod tests;

use model::Snapshot;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Seconds between refreshes (decimals allowed, 0.1 to 3600).
    #[arg(short = 'd', long = "delay", value_name = "SECS", default_value = "1", value_parser = parse_delay)]
    delay: Duration,
    /// One plain display and exit, as `top -b -n 1` (the default when
    /// stdout is not a terminal): two polls one delay apart, so rates are real.
    #[arg(long)]
    once: bool,
    /// The view to start in.
    #[arg(long, value_enum, default_value_t = View::Queues)]
    view: View,
    #[command(flatten)]
    ctl: ControlArg,
}

/// The views, in the order of their number keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum View {
    Queues,
    Hosts,
    States,
    Autorate,
}

impl View {
    pub const ALL: [View; 4] = [View::Queues, View::Hosts, View::States, View::Autorate];

    pub fn index(self) -> usize {
        View::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }

    /// Whether the view's rows come from the state table.
    pub fn shows_states(self) -> bool {
        matches!(self, View::Hosts | View::States)
    }

    pub fn name(self) -> &'static str {
        match self {
            View::Queues => "queues",
            View::Hosts => "hosts",
            View::States => "states",
            View::Autorate => "autorate",
        }
    }
}

fn parse_delay(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}`: expected seconds, e.g. 1 or 0.5"))?;
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("`{s}`: the delay is 0.1 to 3600 seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// One request; anything but the expected reply is a message for a person.
fn ask(socket: &Path, req: Request) -> Result<Reply, String> {
    match sluice_control::request(socket, &req) {
        Err(e) => Err(e.to_string()),
        Ok(Reply::Error { message }) => Err(message),
        Ok(r) => Ok(r),
    }
}

/// One poll: the daemon's queues, states (when `states`) and health,
/// stamped with the time the queues were answered (their counters are the
/// rates' base).
pub fn poll(socket: &Path, epoch: Instant, states: bool) -> Result<Snapshot, String> {
    let unexpected = |r: Reply| format!("unexpected reply {r:?}");
    let queues = match ask(socket, Request::ShowQueues)? {
        Reply::Queues(q) => q,
        r => return Err(unexpected(r)),
    };
    let at = epoch.elapsed();
    let states = match states.then(|| ask(socket, Request::ShowStates)) {
        None => None,
        Some(Ok(Reply::States(s))) => Some(s),
        Some(Ok(r)) => return Err(unexpected(r)),
        Some(Err(e)) => return Err(e),
    };
    let health = match ask(socket, Request::ShowHealth)? {
        Reply::Health(h) => h,
        r => return Err(unexpected(r)),
    };
    Ok(Snapshot {
        at,
        queues,
        states,
        health,
    })
}

pub fn run(a: Args) -> ExitCode {
    let epoch = Instant::now();
    let socket = a.ctl.control.as_path();
    // The first poll before the screen is taken: a daemon that is not
    // there is an error message, not an empty screen.
    let plain = a.once || !std::io::stdout().is_terminal();
    let first = match poll(socket, epoch, plain || a.view.shows_states()) {
        Ok(s) => s,
        Err(m) => return crate::show::fail(&format!("error: {m}")),
    };
    if plain {
        std::thread::sleep(a.delay);
        let second = match poll(socket, epoch, true) {
            Ok(s) => s,
            Err(m) => return crate::show::fail(&format!("error: {m}")),
        };
        owrite!("{}", plain::report(&first, &second));
        return ExitCode::SUCCESS;
    }
    match app::run(socket, epoch, first, a.delay, a.view) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::show::fail(&format!("error: terminal: {e}")),
    }
}
