//! What becomes of the LAN when sluice stops: `run --on-exit down|bridge`,
//! and `sluice on-exit MODE`, the same done from outside after a crash.
//!
//! # Principles
//! - `down` (fail-closed, the default and sluice's behaviour before the
//!   option): nothing forwards between the two interfaces until sluice runs
//!   again. The LAN is offline, and nothing crosses unfiltered.
//! - `bridge` (fail-open): on every exit the process itself sees —
//!   SIGTERM/SIGINT, `sluice stop`, a packet loop that failed (a deleted
//!   interface), a start that failed after the interfaces were opened, a
//!   panic (the binary unwinds, and unwinding drops the daemon's `OnExit`; a build
//!   with `panic = "abort"` would leave it to the service manager) — the XDP
//!   program and the sockets are released first (the guard is made before
//!   the bridge loop and so dropped after it), then the interfaces are
//!   handed to a kernel bridge (`sluice_io::kernel_bridge`): online, but
//!   unshaped and unfiltered; no pf rule applies to what crosses.
//! - Armed only once this process holds the interfaces (opened them): a
//!   run that cannot open them (another instance has them, or they are
//!   missing) must not bridge what another sluice forwards.
//! - What the process never sees (SIGKILL, the OOM killer, a fault that
//!   aborts) is the service manager's to handle: `sluice on-exit MODE` in
//!   systemd's `ExecStopPost=` (contrib/sluice.service), which runs after
//!   every exit, crashes included. Running both is harmless: handing over
//!   and taking back are idempotent.
//! - `run` takes the interfaces back when it starts, whatever its own
//!   mode, before it opens them; only from a bridge sluice made, never from
//!   another master (an error naming it instead). The daemon's guard is
//!   `sluice_control::daemon::on_exit`.
//! - `--attach IF` has no mode: at exit IF goes back to the host
//!   (`attach.rs`); `sluice on-exit --attach IF` does that after a crash.
//! - The exit path needs CAP_NET_ADMIN (rtnetlink link changes) for as
//!   long as the daemon runs.

use crate::out::ewriteln;
use clap::{Args as ClapArgs, ValueEnum};
use sluice_io::kernel_bridge;
use std::path::Path;
use std::process::ExitCode;

/// What the two interfaces do once sluice has stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Fail closed: nothing forwards (the LAN is offline).
    Down,
    /// Fail open: a kernel bridge forwards everything, unshaped and
    /// unfiltered.
    Bridge,
}

#[derive(ClapArgs)]
pub struct Args {
    /// `bridge`: hand the two interfaces to a kernel bridge (made if
    /// missing), so that traffic flows, unshaped and unfiltered. `down`:
    /// take them out of the bridge an earlier exit made, if any, so that
    /// nothing forwards.
    #[arg(value_enum, value_name = "MODE", required_unless_present = "attach")]
    mode: Option<Mode>,
    /// The two interfaces, as given to `run --bridge`: LAN and WAN.
    #[arg(long, value_name = "LAN_IF,WAN_IF", value_parser = crate::args::parse_bridge,
          required_unless_present = "attach")]
    bridge: Option<(String, String)>,
    /// The interface given to `run --attach`: give it back to the host as
    /// it was before sluice attached it (from sluice's state file; nothing
    /// to do if there is none). No MODE.
    #[arg(long, value_name = "IF", conflicts_with_all = ["mode", "bridge"])]
    attach: Option<String>,
}

pub fn run(a: Args) -> ExitCode {
    let (Some(mode), Some((lan, wan))) = (a.mode, &a.bridge) else {
        let name = a.attach.as_deref().unwrap_or_default();
        return if crate::attach::on_exit(name) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    };
    // A running daemon forwards already; a kernel bridge beside it would
    // forward each frame a second time, unshaped. Its interface locks say
    // so whatever its control socket; held until this command is done, so
    // no `sluice run` starts in the middle of the change.
    // A missing interface runs no sluice: the mode's own step says what
    // became of it.
    let dir = Path::new(sluice_control::RUNTIME_DIR);
    let _lock = match sluice_io::lock_interfaces(dir, &[lan, wan]) {
        Ok(l) => Some(l),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
            ewriteln!("sluice: on-exit: {lan},{wan}: {e}; stop that sluice first (`sluice stop`)");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            ewriteln!("sluice: on-exit: {lan},{wan}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let done = match mode {
        Mode::Bridge => kernel_bridge::hand_over(lan, wan).map(|h| {
            format!(
                "{lan},{wan} in the kernel bridge {} ({}): traffic flows unshaped and unfiltered",
                h.bridge,
                if h.created { "made" } else { "already there" }
            )
        }),
        Mode::Down => kernel_bridge::take_back(lan, wan).map(|gone| match gone.as_slice() {
            [] => format!("{lan},{wan} are in no bridge of sluice: nothing forwards"),
            g => format!(
                "{lan},{wan} taken out of the kernel bridge {} (deleted): nothing forwards",
                g.join(", ")
            ),
        }),
    };
    match done {
        Ok(msg) => {
            ewriteln!("sluice: on-exit: {msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            ewriteln!("sluice: on-exit: {e}");
            ExitCode::FAILURE
        }
    }
}
