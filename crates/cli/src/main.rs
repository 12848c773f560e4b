//! The `sluice` binary: a thin layer of argument parsing and printing over
//! the library crates (the daemon's control plane is sluice-control). Each
//! subcommand lives in its own module.

#![forbid(unsafe_code)]
// `print!`/`eprint!` panic on a failed write (full disk, closed pipe): the
// binary writes through `out` instead (issue #12).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod args;
mod attach;
mod check;
#[cfg(feature = "lab")]
mod delay_line;
mod explain;
mod failopen;
mod generate;
mod init;
#[cfg(feature = "lab")]
mod lab;
mod metrics;
mod out;
mod run;
mod show;
mod top;

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
    /// Write a commented pf.conf for a line from its rates and link type
    /// (FQ-CoDel both ways at 95 %, the lab's best measured recipe).
    Init(init::Args),
    /// Bridge two interfaces and shape the traffic between them.
    Run(run::Args),
    /// Show the running daemon's queues, states, rules or status (pfctl -s).
    Show(show::ShowArgs),
    /// A live full-screen view of the running daemon, as pftop: queues,
    /// hosts, states, autorate, the health verdict on top (h for the keys).
    ///
    /// When stdout is not a terminal (or with --once): every view once, as
    /// plain text, from two polls one delay apart.
    Top(top::Args),
    /// Load a new configuration into the running daemon, atomically (pfctl -f).
    Reload(show::ReloadArgs),
    /// Stop the running daemon cleanly.
    Stop(show::StopArgs),
    /// After sluice stopped, do what `run --on-exit MODE` does at exit: for
    /// a daemon that could not (SIGKILL, OOM kill); systemd's ExecStopPost=.
    ///
    /// `bridge` hands the two interfaces to a kernel bridge (fail-open:
    /// online, unshaped, unfiltered); `down` takes them out of it (fail-closed:
    /// nothing forwards). Either is a no-op when already done; a bridge
    /// sluice did not make is never touched.
    OnExit(failopen::Args),
    /// Bridge two interfaces with a fixed delay per direction (the lab's base RTT).
    ///
    /// Every frame read on A is sent unchanged on B after --delay, every frame
    /// read on B is sent on A after --delay-back (ARP and ND included). A plain
    /// FIFO per direction, independent of the shaper (no engine, classifier or
    /// scheduler), for machines whose kernel lacks netem. Runs until SIGTERM or
    /// SIGINT, then prints its counters (frames, bytes, drops, lateness
    /// histogram) to stderr.
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    DelayLine(delay_line::Args),
    /// Reproduce the classic bufferbloat experiments in network namespaces
    /// (real TCP through a bloated modem, without and with a shaper).
    #[cfg(feature = "lab")]
    Lab(lab::LabArgs),
    /// Write the man page or shell completions (for packaging).
    #[command(hide = true)]
    Generate(generate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check(a) => check::run(a),
        Cmd::Init(a) => init::run(a),
        Cmd::Run(a) => run::run(a),
        Cmd::Show(a) => show::run_show(a),
        Cmd::Top(a) => top::run(a),
        Cmd::Reload(a) => show::run_reload(a),
        Cmd::Stop(a) => show::run_stop(a),
        Cmd::OnExit(a) => failopen::run(a),
        #[cfg(feature = "lab")]
        Cmd::DelayLine(a) => delay_line::run(a),
        #[cfg(feature = "lab")]
        Cmd::Lab(a) => lab::run(a),
        Cmd::Generate(a) => generate::run::<Cli>(a),
    }
}
