//! What becomes of the LAN when the daemon stops: `--on-exit down|bridge`
//! (docs/dataplane.md, "When sluice stops").
//!
//! # Principles
//! - `down` (fail-closed, the default): nothing forwards between the two
//!   interfaces until sluice runs again. `bridge` (fail-open): on every
//!   exit the process itself sees (SIGTERM/SIGINT, `sluice stop`, a failed
//!   packet loop, a start that failed after the interfaces were opened, a
//!   panic that unwinds and drops [`OnExit`]) the XDP program and sockets
//!   are released first (the guard is made before the bridge loop and so
//!   dropped after it), then the interfaces are handed to a kernel bridge
//!   (`sluice_io::kernel_bridge`): online, but unshaped and unfiltered.
//! - Armed only once this process holds the interfaces (opened them): a
//!   run that cannot open them must not bridge what another sluice
//!   forwards.
//! - The daemon takes the interfaces back when it starts, whatever its
//!   mode, before it opens them; only from a bridge sluice made.
//! - What the process never sees (SIGKILL, the OOM killer) is `sluice
//!   on-exit MODE`'s, in systemd's `ExecStopPost=`; both are idempotent.
//! - The exit path needs CAP_NET_ADMIN for as long as the daemon runs.

use crate::log::{log, Level};
use sluice_io::kernel_bridge;

/// Takes `lan` and `wan` back from sluice's kernel bridge, if an earlier
/// exit left them there; the guard for this run's exit, to be made before
/// the bridge loop (so that it is dropped after it) and armed once the
/// interfaces are open ([`OnExit::arm`]).
pub fn take_back(fail_open: bool, lan: &str, wan: &str) -> Result<OnExit, String> {
    match kernel_bridge::take_back(lan, wan) {
        Ok(gone) => {
            for b in gone {
                log(
                    Level::Info,
                    format_args!("took {lan},{wan} back from the kernel bridge {b} (deleted)"),
                );
            }
        }
        Err(e) => return Err(format!("cannot take {lan},{wan} back: {e}")),
    }
    Ok(OnExit {
        fail_open,
        armed: false,
        ifaces: (lan.to_string(), wan.to_string()),
    })
}

/// Acts out the `--on-exit` mode when dropped, once armed.
pub struct OnExit {
    /// `--on-exit bridge`: hand the interfaces to a kernel bridge.
    fail_open: bool,
    armed: bool,
    ifaces: (String, String),
}

impl OnExit {
    /// This process holds the interfaces now: its exit hands them over.
    pub fn arm(&mut self) {
        self.armed = true;
    }
}

impl Drop for OnExit {
    fn drop(&mut self) {
        if !self.armed || !self.fail_open {
            return;
        }
        let (lan, wan) = (&self.ifaces.0, &self.ifaces.1);
        // Never panics (a panic here, while unwinding, would abort).
        match kernel_bridge::hand_over(lan, wan) {
            Ok(h) => log(
                Level::Warn,
                format_args!(
                    "--on-exit bridge: {lan},{wan} handed to the kernel bridge {}: \
                     traffic flows unshaped and unfiltered until sluice runs again",
                    h.bridge
                ),
            ),
            Err(e) => log(
                Level::Error,
                format_args!("--on-exit bridge: {e}; nothing forwards between {lan},{wan}"),
            ),
        }
    }
}
