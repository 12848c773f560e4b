//! The `sluice` binary: a thin layer of argument parsing over the library
//! crates. Each subcommand lives in its own module.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod check;
// The daemon side (control socket, reload, metrics); `run` starts it.
#[allow(dead_code, unused_imports)]
mod ctl;
#[allow(dead_code)]
mod metrics;
mod show;

#[derive(Parser)]
#[command(name = "sluice", version, about = "A traffic shaper that speaks pf.conf", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check configuration files, as `pfctl -nf` does; -v prints the canonical form.
    Check(check::Args),
    /// Show the running daemon's queues, states, rules or status (pfctl -s).
    Show(show::ShowArgs),
    /// Load a new configuration into the running daemon, atomically (pfctl -f).
    Reload(show::ReloadArgs),
    /// Stop the running daemon cleanly.
    Stop(show::StopArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check(a) => check::run(a),
        Cmd::Show(a) => show::run_show(a),
        Cmd::Reload(a) => show::run_reload(a),
        Cmd::Stop(a) => show::run_stop(a),
    }
}
