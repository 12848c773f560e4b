//! `--attach IF`, the daemon's side of `sluice_io::attach`: the two ports,
//! the attachment's guard, and `--nat`'s conntrack thread.
//!
//! # Principles
//! - `--attach` only decides the two ports of the one bridge the daemon
//!   runs: IF (renamed `slpN`) and the veth end toward the host's stack
//!   (`slvN`). IF on the LAN side (the default) is the LAN port
//!   (`int_if`) and the veth end the WAN port (`ext_if`); on the WAN side,
//!   the other way round.
//! - Nothing changes before the configuration was checked and the
//!   interface locked.
//! - IF is given back on every exit the process sees (the guard's drop:
//!   a clean stop, an error, a panic that unwinds); `sluice on-exit
//!   --attach IF` (systemd's `ExecStopPost=`) does it after the others
//!   ([`give_back`]), and so does the next daemon before it attaches
//!   (under the interface lock: never under a running sluice).
//! - `SLUICE_ATTACH_FAIL_AFTER=K` (tests only, docs/testing.md) makes the
//!   set-up fail before its step K+1, to prove the roll-back.

use crate::log::{log, Level};
use sluice_engine::nat::NatKey;
use sluice_engine::Engine;
use sluice_io::attach::{self, Attached, Inject};
use sluice_io::conntrack::{Conntrack, Tuple};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The two ports (LAN, WAN) `--attach IF` bridges. Nothing is changed,
/// but for giving IF back first if an earlier sluice left it attached
/// (as `run --bridge` takes its interfaces back from a kernel bridge).
/// A dry run changes nothing: it refuses instead.
pub fn ports(name: &str, wan_side: bool, dry_run: bool) -> Result<(String, String), String> {
    let dir = Path::new(crate::RUNTIME_DIR);
    if dry_run && attach::recorded(name, dir).is_ok_and(|r| r.is_some()) {
        return Err(format!(
            "--attach {name}: attached already (a state file of an earlier sluice); \
             `sluice on-exit --attach {name}` gives it back"
        ));
    }
    match give_back(name) {
        Ok(Some(done)) => log(
            Level::Info,
            format_args!("--attach {name}: left attached by an earlier sluice: {done}"),
        ),
        Ok(None) => {}
        Err(e) => return Err(format!("--attach {name}: {e}")),
    }
    let (snap, _) = attach::plan(name).map_err(|e| format!("--attach {name}: {e}"))?;
    let n = attach::plan::names(&snap);
    Ok(if wan_side {
        (n.peer, n.phys)
    } else {
        (n.phys, n.peer)
    })
}

/// `--iface-addr IF=…` naming the attached interface by its own name
/// means its port (`slpN` while attached; `phys`): rules say `$int_if`
/// or `$ext_if`, the user says `wan0`.
pub fn iface_addr_names(
    given: &[(String, sluice_conf::ir::IpNet)],
    name: &str,
    phys: &str,
) -> Vec<(String, sluice_conf::ir::IpNet)> {
    given
        .iter()
        .map(|(n, net)| {
            (
                if n == name {
                    phys.to_string()
                } else {
                    n.clone()
                },
                *net,
            )
        })
        .collect()
}

/// Refuses what `--attach` cannot do alongside other options.
pub fn check_options(on_exit_bridge: bool, user: bool) -> Result<(), String> {
    if on_exit_bridge {
        return Err(
            "--on-exit bridge is for --bridge: with --attach, IF is always given \
                    back to the host at exit (traffic then flows unshaped)"
                .into(),
        );
    }
    if user {
        return Err(
            "--user with --attach: giving IF back needs root (a sysctl and the \
                    state file in /run/sluice); run as root, or see docs/deploy.md"
                .into(),
        );
    }
    Ok(())
}

/// Gives IF back when dropped.
pub struct Guard(Attached, String);

impl Drop for Guard {
    fn drop(&mut self) {
        // Never panics (a panic here, while unwinding, would abort).
        match self.0.detach() {
            Ok(()) => log(
                Level::Info,
                format_args!("--attach {}: given back to the host as it was", self.1),
            ),
            Err(e) => log(
                Level::Error,
                format_args!(
                    "--attach {}: giving it back failed: {e}; run `sluice on-exit --attach {}`",
                    self.1, self.1
                ),
            ),
        }
    }
}

/// Attaches `name`, its state file in `dir`; the guard that detaches.
pub fn setup(name: &str, dir: &Path) -> Result<Guard, String> {
    let inject = Inject {
        fail_after: std::env::var("SLUICE_ATTACH_FAIL_AFTER")
            .ok()
            .and_then(|v| v.parse().ok()),
    };
    let a = attach::attach(name, dir, inject).map_err(|e| format!("--attach {name}: {e}"))?;
    let n = a.names();
    log(
        Level::Info,
        format_args!(
            "--attach {name}: {name} is now {} (sluice's port), the host's stack is on veth {name} <-> {} (sluice's port)",
            n.phys, n.peer
        ),
    );
    Ok(Guard(a, name.to_string()))
}

/// Gives `name` back from the state file an earlier sluice left (none
/// if there is none): what it was, in words. Under the interface lock,
/// so never under a running sluice.
pub fn give_back(name: &str) -> Result<Option<String>, String> {
    let dir = Path::new(crate::RUNTIME_DIR);
    let Some((snap, state)) = attach::recorded(name, dir).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    // A running sluice holds IF by its ifindex, whatever its name now.
    let phys = attach::plan::phys_name(snap.link.ifindex);
    let mut lock = None;
    for n in [phys.as_str(), name] {
        match sluice_io::lock_interfaces(dir, &[n]) {
            Ok(l) => {
                lock = Some(l);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{e}; stop that sluice first (`sluice stop`)")),
        }
    }
    attach::restore_recorded(&snap, &state).map_err(|e| e.to_string())?;
    drop(lock);
    Ok(Some(format!(
        "given back as it was ({} addresses, {} routes{})",
        snap.addrs.len(),
        snap.routes.len(),
        snap.master_name
            .map(|m| format!(", in {m}"))
            .unwrap_or_default()
    )))
}

fn lock(e: &Mutex<Engine>) -> std::sync::MutexGuard<'_, Engine> {
    e.lock().unwrap_or_else(|p| p.into_inner())
}

/// How often `--nat` collects the engine's questions.
const NAT_POLL: Duration = Duration::from_millis(10);

/// `--nat`: the thread that answers the engine's questions about
/// masqueraded connections from conntrack (crate::nat of the engine), off
/// the packet path, until `stop`. No conntrack: said once, and the engine
/// keeps post-NAT addresses.
pub fn spawn_nat(engine: Arc<Mutex<Engine>>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    lock(&engine).set_nat_hosts(true);
    std::thread::spawn(move || {
        let mut ct = match Conntrack::open() {
            Ok(c) => c,
            Err(e) => {
                log(
                    Level::Warn,
                    format_args!(
                        "--nat: no conntrack ({e}): hosts are told apart by post-NAT addresses"
                    ),
                );
                lock(&engine).set_nat_hosts(false);
                return;
            }
        };
        let mut warned = false;
        while !stop.load(Ordering::Relaxed) {
            let asked = lock(&engine).take_nat_lookups();
            if asked.is_empty() {
                std::thread::sleep(NAT_POLL);
                continue;
            }
            let answers: Vec<(NatKey, Option<std::net::IpAddr>)> = asked
                .into_iter()
                .map(|k| {
                    let reply = Tuple {
                        proto: k.proto,
                        src: k.remote,
                        sport: k.remote_port,
                        dst: k.local,
                        dport: k.local_port,
                    };
                    let found = ct.original_source(&reply).unwrap_or_else(|e| {
                        if !std::mem::replace(&mut warned, true) {
                            log(
                                Level::Warn,
                                format_args!(
                                    "--nat: conntrack: {e}; those hosts keep post-NAT addresses"
                                ),
                            );
                        }
                        None
                    });
                    (k, found)
                })
                .collect();
            let mut e = lock(&engine);
            for (k, h) in answers {
                e.answer_nat_lookup(k, h);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn iface_addr_by_the_attached_name_means_its_port() {
        let net = sluice_conf::ir::IpNet {
            addr: "203.0.113.2".parse().unwrap(),
            prefix: 32,
        };
        let given = vec![("wan0".to_string(), net), ("slv5".to_string(), net)];
        let v = super::iface_addr_names(&given, "wan0", "slp5");
        assert_eq!(
            v,
            vec![("slp5".to_string(), net), ("slv5".to_string(), net)]
        );
    }
}
