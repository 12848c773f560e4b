//! The `sluice` binary: a thin layer of argument parsing over the library
//! crates. Each subcommand lives in its own module.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod check;
mod run;

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
    /// Bridge two interfaces and shape the traffic between them.
    Run(run::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check(a) => check::run(a),
        Cmd::Run(a) => run::run(a),
    }
}
