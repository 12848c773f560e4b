//! `sluice run --attach IF`: sluice between one interface and the host's
//! own stack on the same machine (a router shaping its own LAN or WAN).
//! IF is renamed and a veth pair takes its place; sluice bridges IF with
//! the veth's far end, so the one engine and reactor of `--bridge` serve
//! it: attaching only decides the two ports (docs/adr/0003-attach.md).
//!
//! # Principles
//! - The plan is pure (`plan.rs`: a snapshot of IF in, operations and
//!   their undos out); carrying it out is `exec.rs`; the snapshot is kept
//!   in a state file (`state.rs`) before the first change, so a restart,
//!   a clean stop and `sluice on-exit --attach IF` after a SIGKILL all
//!   restore IF from the same data.
//! - A set-up that fails half-way is rolled back (the undos of the steps
//!   done, last first) before the error is returned; the state file goes
//!   only once the roll-back succeeded.
//! - Restoring is idempotent: it may run from the daemon's own exit and
//!   from systemd's `ExecStopPost=`, in any order, any number of times.

mod exec;
pub mod plan;
pub mod state;

pub use plan::{Names, Op, Snapshot, Step};

use exec::Nl;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The state file of `name` in `dir`: per network namespace (its inode)
/// and name, the name IF had (and the host end has).
pub fn state_path(dir: &Path, name: &str) -> io::Result<PathBuf> {
    let netns = std::fs::metadata("/proc/self/ns/net")
        .map_err(|e| io::Error::new(e.kind(), format!("/proc/self/ns/net: {e}")))?
        .ino();
    Ok(dir.join(format!("attach-{netns}-{name}.state")))
}

/// What `--attach name` would do, without doing it.
pub fn plan(name: &str) -> io::Result<(Snapshot, Vec<Step>)> {
    let mut nl = Nl::open()?;
    let (snap, multipath) = nl.snapshot(name)?;
    let steps = plan::attach(&snap, &multipath)
        .map_err(|r| io::Error::new(io::ErrorKind::InvalidInput, r.0))?;
    Ok((snap, steps))
}

/// An attached interface; [`Attached::detach`] gives it back.
pub struct Attached {
    snap: Snapshot,
    state: PathBuf,
}

/// For tests of the roll-back only: a set-up that fails after this many
/// steps (the CLI reads `SLUICE_ATTACH_FAIL_AFTER`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Inject {
    pub fail_after: Option<usize>,
}

/// Attaches `name`: snapshot, state file in `dir`, the plan carried out;
/// a failure half-way is rolled back before it is returned.
pub fn attach(name: &str, dir: &Path, inject: Inject) -> io::Result<Attached> {
    let state = state_path(dir, name)?;
    if state.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists: {name} is attached already, by a running sluice (stop it \
                 first) or by one that did not stop cleanly (then `sluice on-exit \
                 --attach {name}` gives it back)",
                state.display()
            ),
        ));
    }
    let (snap, steps) = plan(name)?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(&state, state::to_text(&snap))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", state.display())))?;
    let mut nl = Nl::open()?;
    for (k, s) in steps.iter().enumerate() {
        let r = match inject.fail_after {
            Some(n) if n == k => Err(io::Error::other(format!(
                "injected failure before step {} (SLUICE_ATTACH_FAIL_AFTER={n})",
                k + 1
            ))),
            _ => nl.apply(&s.op),
        };
        if let Err(e) = r {
            let back = run_all(&mut nl, &plan::rollback(&steps, k));
            return Err(match back {
                Ok(()) => {
                    let _ = std::fs::remove_file(&state);
                    io::Error::new(e.kind(), format!("{e}; rolled back, {name} is as it was"))
                }
                Err(b) => io::Error::new(
                    e.kind(),
                    format!(
                        "{e}; rolling back failed too ({b}): run `sluice on-exit --attach {name}`"
                    ),
                ),
            });
        }
    }
    Ok(Attached { snap, state })
}

/// Every operation of `ops`, all tried (one failure does not stop a
/// restoration); the first error.
fn run_all(nl: &mut Nl, ops: &[Op]) -> io::Result<()> {
    let mut first = None;
    for op in ops {
        if let Err(e) = nl.apply(op) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

impl Attached {
    pub fn names(&self) -> Names {
        plan::names(&self.snap)
    }

    /// Gives IF back as it was, and removes the state file.
    pub fn detach(&self) -> io::Result<()> {
        restore(&self.snap, &self.state)
    }
}

fn restore(snap: &Snapshot, state: &Path) -> io::Result<()> {
    let mut nl = Nl::open()?;
    let names = plan::names(snap);
    // A veth under IF's name: sluice's host end (IF itself is no veth of
    // sluice's making unless the ifindex says so).
    let veth = nl
        .find_named(&names.host)?
        .is_some_and(|l| l.ifindex != snap.link.ifindex && l.kind.as_deref() == Some("veth"));
    run_all(&mut nl, &plan::detach(snap, veth))?;
    match std::fs::remove_file(state) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// What the state file in `dir` says `name` was before a sluice attached
/// it (and the file), or none if nothing is attached.
pub fn recorded(name: &str, dir: &Path) -> io::Result<Option<(Snapshot, PathBuf)>> {
    let state = state_path(dir, name)?;
    let text = match std::fs::read_to_string(&state) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("{}: {e}", state.display()),
            ))
        }
    };
    let snap = state::from_text(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", state.display()),
        )
    })?;
    Ok(Some((snap, state)))
}

/// After a sluice that attached IF stopped without giving it back
/// (SIGKILL, a panic that aborted): restores `snap` (from [`recorded`])
/// and removes the state file.
pub fn restore_recorded(snap: &Snapshot, state: &Path) -> io::Result<()> {
    restore(snap, state)
}
