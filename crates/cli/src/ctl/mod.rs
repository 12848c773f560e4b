//! The daemon's control plane: the root-only Unix socket behind `sluice show`,
//! `sluice reload` and `sluice stop`, reload itself (also used on SIGHUP), and
//! the Prometheus endpoint ([`spawn_metrics`]).
//!
//! # Principles
//!
//! - **The data plane comes first.** Every request takes the engine lock only
//!   to copy what it needs (a report, the states, the rule counters) and
//!   formats outside it. Reload checks the new file before it takes the lock,
//!   so an invalid file never stalls forwarding, and swaps under the lock with
//!   `Engine::reload`, which is all or nothing.
//! - **Root only.** The socket is created mode 0600 and every peer is checked
//!   with SO_PEERCRED: uid 0 or the daemon's own uid, nobody else (the mode
//!   alone is not enough: it is set after `bind`, and a descriptor can be
//!   passed on).
//! - **Bounded.** One thread serves the socket, one client at a time: a
//!   request line is at most [`proto::MAX_REQUEST_BYTES`], a connection at
//!   most [`server::MAX_REQUESTS_PER_CONN`] requests, and a silent client is
//!   dropped after [`server::CLIENT_TIMEOUT`], so no client can hold the
//!   server. `show states` returns at most [`proto::STATES_SHOWN_CAP`] states.
//! - **Protocol**: one JSON object per line each way (docs/control.md).
//! - **Time**: the engine is driven by the data plane's CLOCK_MONOTONIC
//!   ([`engine_now`] = `sluice_io::now()`); state ages and expiries are
//!   reported against that clock. Nothing else depends on it: which states
//!   belong to the current rules is decided from the states' own times.

#![forbid(unsafe_code)]

pub mod proto;
mod server;
pub mod snapshot;

pub use crate::metrics::spawn_metrics;
pub use server::spawn_control;

use sluice_conf::ir;
use sluice_engine::Engine;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// Default control socket path.
pub const DEFAULT_SOCKET: &str = "/run/sluice.sock";

/// What the control socket and the metrics endpoint see of a running daemon.
/// `run` builds it once; the servers only read it (and lock the engine).
pub struct DaemonState {
    pub engine: Arc<Mutex<Engine>>,
    /// Start of the daemon (for uptime).
    pub started: std::time::Instant,
    /// `[lan, wan]` as given to `--bridge`.
    pub ifaces: [String; 2],
    /// The packet I/O in use (`af_packet`, `af_xdp`, …).
    pub io_method: String,
    /// Counters of the I/O layer, by name (ring drops, syscalls, …).
    pub io_stats: Arc<dyn Fn() -> Vec<(String, u64)> + Send + Sync>,
    /// The file `run -f` loaded; `reload` without `-f` and SIGHUP read it again.
    pub config_path: PathBuf,
    /// `-D name=value` of the command line, applied to every reload.
    pub defines: Vec<(String, String)>,
    /// Wakes the data-plane loop (after a reload or stop).
    pub wake: Arc<dyn Fn() + Send + Sync>,
    pub stop: Arc<AtomicBool>,
}

/// What a successful reload did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReloadReport {
    /// The file that was loaded.
    pub file: String,
    /// Packets moved into a queue of the same name in the new tree.
    pub kept: u64,
    /// Packets whose queue vanished or no longer fitted (counted as drops).
    pub dropped: u64,
    /// Rendered warnings of the check (as `sluice check` prints them).
    pub warnings: String,
}

/// The engine clock of a daemon: nanoseconds since `started`.
pub fn engine_now(_state: &DaemonState) -> sluice_time::Instant {
    sluice_io::now()
}

/// Locks the engine even if the data plane panicked while holding it: the
/// counters are still worth showing and stopping must still work.
pub(crate) fn lock(state: &DaemonState) -> MutexGuard<'_, Engine> {
    state.engine.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads and checks `path` (default: `config_path`) with the daemon's
/// defines. An invalid file returns the rendered diagnostics and leaves the
/// engine untouched; a valid one is swapped in under the lock, then the loop
/// is woken so new deadlines take effect.
pub fn reload_from(state: &DaemonState, path: Option<&Path>) -> Result<ReloadReport, String> {
    let path = path.unwrap_or(&state.config_path);
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {name}: {e}\n"))?;
    let checked = match sluice_conf::check(&name, &text, &state.defines) {
        Ok(c) => c,
        Err(diags) => return Err(diags.iter().map(|d| d.render(&name, &text)).collect()),
    };
    let mut warnings: String = checked
        .warnings
        .iter()
        .map(|w| w.render(&name, &text))
        .collect();
    for q in &checked.config.interfaces {
        if !state.ifaces.contains(&q.ifname) {
            warnings.push_str(&format!(
                "warning: {name}:{}: queueing on `{}` is ignored: this daemon bridges {} and {}\n",
                q.line, q.ifname, state.ifaces[0], state.ifaces[1]
            ));
        }
    }
    let (r, since) = {
        let mut e = lock(state);
        let r = e
            .reload(&checked.config)
            .map_err(|e| format!("error: {name}: cannot build queues: {e}\n"))?;
        // The engine's clock never goes back, so every state created from
        // now on is younger than every state that exists now, whatever clock
        // the I/O layer drives the engine with. Bounded by the state limit.
        let newest = e.classifier().states().map(|s| s.created).max();
        (
            r,
            newest.map_or(sluice_time::Instant::ZERO, |t| t + sluice_time::Duration(1)),
        )
    };
    note_loaded(state, path, checked.config, since);
    (state.wake)();
    Ok(ReloadReport {
        file: name,
        kept: r.kept,
        dropped: r.dropped,
        warnings,
    })
}

/// The configuration an engine runs, kept for what the engine does not
/// report: rule text and queue options (`default`, `red`, curves …).
pub(crate) struct Loaded {
    pub path: PathBuf,
    pub config: ir::Config,
    /// States keep the rule index they were created with; those created
    /// before this engine time index the previous rule set.
    pub since: sluice_time::Instant,
}

type Registry = Mutex<Vec<(Weak<Mutex<Engine>>, Arc<Loaded>)>>;

/// Keyed by the engine itself, so several daemons in one process (tests) do
/// not see each other's configuration, and a dropped engine's entry goes.
fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

/// Records the configuration now running in `state.engine`; states created
/// at or after engine time `since` belong to its rules.
pub fn note_loaded(
    state: &DaemonState,
    path: &Path,
    config: ir::Config,
    since: sluice_time::Instant,
) {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.retain(|(w, _)| {
        w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(&state.engine))
    });
    let loaded = Arc::new(Loaded {
        path: path.to_path_buf(),
        config,
        since,
    });
    r.push((Arc::downgrade(&state.engine), loaded));
}

pub(crate) fn loaded(state: &DaemonState) -> Option<Arc<Loaded>> {
    let r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.iter()
        .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&state.engine)))
        .map(|(_, l)| l.clone())
}

/// Best effort at start-up: `run` loaded `config_path`; read it again for
/// the rule text. If it no longer checks, `show` goes without the text.
pub(crate) fn note_startup_config(state: &DaemonState) {
    if loaded(state).is_some() {
        return;
    }
    let path = &state.config_path;
    let name = path.display().to_string();
    if let Ok(text) = std::fs::read_to_string(path) {
        if let Ok(c) = sluice_conf::check(&name, &text, &state.defines) {
            note_loaded(state, path, c.config, sluice_time::Instant::ZERO);
        }
    }
}
