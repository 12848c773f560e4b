//! The client commands of the control socket: `sluice show
//! queues|states|rules|info|health`, `sluice reload` and `sluice stop`. Each sends
//! one request ([`sluice_control::request`]) and prints the reply, as text in
//! pfctl's layouts or as JSON (docs/control.md).

use crate::out::{ewrite, ewriteln, owrite, owriteln};
use clap::{Args, Subcommand};
use sluice_control::proto::*;
use sluice_control::DEFAULT_SOCKET;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod format;
/// The rate of a counter between two polls (`sluice top` shares it).
pub(crate) use format::per_sec;
pub use format::{
    format_health, format_info, format_queues, format_queues_measured, format_rules, format_states,
};

#[derive(Args, Clone, Debug)]
pub struct ControlArg {
    /// Control socket of the running daemon.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub control: PathBuf,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Queues with their counters, like `pfctl -vvsq`: packets and bytes
    /// passed, drops by reason, ECN marks, length, borrows/suspends, sojourn
    /// p50/p99.
    #[command(visible_aliases = ["q", "queue"])]
    Queues {
        /// Repeat every second with a refresh, like `pfctl -vvsq` (Ctrl-C stops).
        #[arg(short, long)]
        verbose: bool,
        /// With -v: stop after N displays.
        #[arg(long, value_name = "N", requires = "verbose")]
        count: Option<u64>,
        /// Print the reply as JSON (schema in docs/control.md).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ctl: ControlArg,
    },
    /// States with their queue pair and counters, like `pfctl -vss`.
    #[command(visible_aliases = ["s", "state"])]
    States {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ctl: ControlArg,
    },
    /// Rules with evaluations, matches, packets, bytes and states, like `pfctl -vsr`.
    #[command(visible_aliases = ["r", "rule"])]
    Rules {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ctl: ControlArg,
    },
    /// Uptime, interfaces, I/O method, packet and drop totals, state table, like `pfctl -si`.
    #[command(visible_aliases = ["i"])]
    Info {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ctl: ControlArg,
    },
    /// Whether each shaper is in control of its link, from the traffic it
    /// forwards: load, latency added by sluice and beyond it, grade, verdict.
    #[command(visible_aliases = ["h"])]
    Health {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ctl: ControlArg,
    },
}

#[derive(Args, Debug)]
pub struct ReloadArgs {
    /// Configuration to load (default: the file the daemon was started with).
    /// An invalid file is refused with `sluice check`'s diagnostics and the
    /// running configuration stays.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Refuse what `sluice check --strict` refuses (always so when the
    /// daemon runs with --strict).
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    ctl: ControlArg,
}

#[derive(Args, Debug)]
pub struct StopArgs {
    #[command(flatten)]
    ctl: ControlArg,
}

/// One request; a failure to get a reply becomes a message for a person.
fn request(path: &Path, req: &Request) -> Result<Reply, String> {
    sluice_control::request(path, req).map_err(|e| e.to_string())
}

pub(crate) fn fail(msg: &str) -> ExitCode {
    let mut msg = msg.to_string();
    if !msg.ends_with('\n') {
        msg.push('\n');
    }
    ewrite!(
        "{}",
        sluice_control::daemon::notify::for_stderr(sluice_control::log::Level::Error, &msg)
    );
    ExitCode::FAILURE
}

fn print_json(reply: &Reply) {
    match serde_json::to_string_pretty(reply) {
        Ok(s) => owriteln!("{s}"),
        Err(e) => ewriteln!("error: {e}"),
    }
}

/// One request, printed as JSON or text.
fn once(ctl: &ControlArg, req: Request, json: bool) -> ExitCode {
    match request(&ctl.control, &req) {
        Err(m) => fail(&format!("error: {m}")),
        Ok(Reply::Error { message }) => fail(&message),
        Ok(reply) if json => {
            print_json(&reply);
            ExitCode::SUCCESS
        }
        Ok(reply) => {
            owrite!("{}", format_reply(&reply));
            ExitCode::SUCCESS
        }
    }
}

fn format_reply(r: &Reply) -> String {
    match r {
        Reply::Queues(q) => format_queues(q),
        Reply::States(s) => format_states(s),
        Reply::Rules(r) => format_rules(r),
        Reply::Info(i) => format_info(i),
        Reply::Health(h) => format_health(h),
        Reply::Reloaded(r) => format!(
            "{}reloaded {}: {} packets kept, {} dropped\n",
            r.warnings, r.file, r.kept, r.dropped
        ),
        Reply::Stopping => "sluice is stopping\n".into(),
        Reply::Error { message } => message.clone(),
    }
}

pub fn run_show(a: ShowArgs) -> ExitCode {
    match a.what {
        What::Queues {
            verbose: false,
            json,
            ctl,
            ..
        } => once(&ctl, Request::ShowQueues, json),
        What::Queues {
            verbose: true,
            count,
            json,
            ctl,
        } => watch(&ctl, json, count),
        What::States { json, ctl } => once(&ctl, Request::ShowStates, json),
        What::Rules { json, ctl } => once(&ctl, Request::ShowRules, json),
        What::Info { json, ctl } => once(&ctl, Request::ShowInfo, json),
        What::Health { json, ctl } => once(&ctl, Request::ShowHealth, json),
    }
}

/// `show queues -v`: a fresh display every second until Ctrl-C (whose
/// default action ends the process) or `count` displays.
fn watch(ctl: &ControlArg, json: bool, count: Option<u64>) -> ExitCode {
    let tty = std::io::stdout().is_terminal();
    let mut shown = 0u64;
    let mut prev: Option<(QueuesReply, std::time::Instant)> = None;
    loop {
        let reply = match request(&ctl.control, &Request::ShowQueues) {
            Err(m) => return fail(&format!("error: {m}")),
            Ok(Reply::Error { message }) => return fail(&message),
            Ok(r) => r,
        };
        let at = std::time::Instant::now();
        if tty {
            // Home and clear, as pfctl's refresh does.
            owrite!("\x1b[H\x1b[2J");
        } else if shown > 0 {
            owriteln!("---");
        }
        match &reply {
            _ if json => print_json(&reply),
            Reply::Queues(q) => {
                let before = prev
                    .as_ref()
                    .map(|(p, t)| (p, at.duration_since(*t).as_secs_f64()));
                owrite!("{}", format_queues_measured(q, before));
                prev = Some((q.clone(), at));
            }
            other => owrite!("{}", format_reply(other)),
        }
        let _ = std::io::stdout().flush();
        shown += 1;
        if count.is_some_and(|c| shown >= c) {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

pub fn run_reload(a: ReloadArgs) -> ExitCode {
    // The daemon has its own working directory: send an absolute path.
    let file = match a.file.as_deref().map(std::path::absolute).transpose() {
        Ok(f) => f.map(|p| p.display().to_string()),
        Err(e) => return fail(&format!("error: {e}")),
    };
    let strict = a.strict;
    match request(&a.ctl.control, &Request::Reload { file, strict }) {
        Err(m) => fail(&format!("error: {m}")),
        Ok(Reply::Error { message }) => fail(&message),
        Ok(Reply::Reloaded(r)) => {
            ewrite!(
                "{}",
                sluice_control::daemon::notify::for_stderr(
                    sluice_control::log::Level::Warn,
                    &r.warnings
                )
            );
            owriteln!(
                "reloaded {}: {} packets kept, {} dropped",
                r.file,
                r.kept,
                r.dropped
            );
            ExitCode::SUCCESS
        }
        Ok(other) => fail(&format!("error: unexpected reply {other:?}")),
    }
}

pub fn run_stop(a: StopArgs) -> ExitCode {
    match request(&a.ctl.control, &Request::Stop) {
        Err(m) => fail(&format!("error: {m}")),
        Ok(Reply::Error { message }) => fail(&message),
        Ok(Reply::Stopping) => {
            owriteln!("sluice is stopping");
            ExitCode::SUCCESS
        }
        Ok(other) => fail(&format!("error: unexpected reply {other:?}")),
    }
}
