//! `sluice run --attach IF [--attach-side lan|wan] [--dry-run]` and
//! `sluice on-exit --attach IF`: the options and what is printed; the
//! daemon's side is `sluice_control::daemon::attach`.
//!
//! # Principles
//! - With `--dry-run` the plan is printed, not carried out; nothing
//!   changes before the configuration was checked.
//! - `sluice on-exit --attach IF` (systemd's `ExecStopPost=`) gives IF
//!   back after a daemon that could not: the daemon's own guard does it on
//!   every exit it sees.

use crate::out::{ewriteln, owriteln};
use clap::{Args as ClapArgs, ValueEnum};
use sluice_io::attach;

/// Which side of the shaper IF is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Side {
    /// IF faces the LAN: IF is int_if, the host's stack is ext_if.
    Lan,
    /// IF faces the modem: the host's stack is int_if, IF is ext_if.
    Wan,
}

#[derive(ClapArgs)]
pub struct RunArgs {
    /// Shape between IF and this host's own stack (a router shaping its
    /// own LAN or WAN interface): IF is renamed slpN and a veth pair takes
    /// its place, the host end named IF with IF's MAC, MTU, bridge,
    /// addresses and routes; restored at exit (docs/deploy.md).
    #[arg(long, value_name = "IF", conflicts_with = "bridge")]
    pub attach: Option<String>,
    /// With --attach: whether IF is the LAN (int_if) or WAN (ext_if) side.
    #[arg(
        long,
        value_name = "SIDE",
        value_enum,
        default_value = "lan",
        requires = "attach",
        conflicts_with = "bridge"
    )]
    pub attach_side: Side,
    /// With --attach on a masquerading router's WAN interface: tell LAN
    /// hosts apart by their original addresses, asked of the kernel's
    /// conntrack for each new connection (CAKE's `nat`), for host isolation
    /// (`dual-srchost` …). Without conntrack, post-NAT addresses (said once).
    #[arg(long, requires = "attach", conflicts_with = "bridge")]
    pub nat: bool,
    /// With --attach: print the plan (the netlink operations, in words)
    /// and change nothing.
    #[arg(long, requires = "attach", conflicts_with = "bridge")]
    pub dry_run: bool,
}

/// `--dry-run`: the plan, one operation a line, on stdout.
pub fn print_plan(name: &str) -> Result<(), String> {
    let (snap, steps) = attach::plan(name).map_err(|e| format!("--attach {name}: {e}"))?;
    owriteln!(
        "sluice: --attach {name} would do ({} addresses, {} routes moved{}):",
        snap.addrs.len(),
        snap.routes.len(),
        snap.master_name
            .as_deref()
            .map(|m| format!(", bridge {m}"))
            .unwrap_or_default()
    );
    for (k, s) in steps.iter().enumerate() {
        owriteln!("{:3}. {}", k + 1, attach::plan::describe(&s.op, &snap));
    }
    Ok(())
}

/// `sluice on-exit --attach IF`: restores IF from its state file.
pub fn on_exit(name: &str) -> bool {
    match sluice_control::daemon::attach::give_back(name) {
        Ok(done) => {
            let msg = done.unwrap_or_else(|| "nothing attached (no state file)".into());
            ewriteln!("sluice: on-exit: --attach {name}: {msg}");
            true
        }
        Err(e) => {
            ewriteln!("sluice: on-exit: --attach {name}: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        a: crate::run::Args,
    }

    fn parses(args: &[&str]) -> bool {
        let mut v = vec!["sluice", "-f", "pf.conf"];
        v.extend_from_slice(args);
        Run::try_parse_from(v).is_ok()
    }

    #[test]
    fn attach_options_never_ride_along_with_bridge() {
        assert!(parses(&["--attach", "lan0", "--dry-run"]));
        assert!(parses(&["--attach", "wan0", "--attach-side", "wan"]));
        assert!(parses(&["--bridge", "a,b"]));
        assert!(!parses(&[]), "one of --bridge and --attach");
        assert!(!parses(&["--bridge", "a,b", "--attach", "c"]));
        // A dry run must never start a live bridge instead.
        assert!(!parses(&["--bridge", "a,b", "--dry-run"]));
        assert!(!parses(&["--bridge", "a,b", "--attach-side", "wan"]));
        assert!(!parses(&["--dry-run"]));
        assert!(parses(&[
            "--attach",
            "wan0",
            "--attach-side",
            "wan",
            "--nat"
        ]));
        assert!(
            !parses(&["--bridge", "a,b", "--nat"]),
            "conntrack is on the router"
        );
    }
}
