//! The daemon's control plane: what a running shaper knows about itself
//! ([`DaemonState`]), the root-only Unix socket behind `sluice show`,
//! `sluice reload` and `sluice stop` ([`spawn_control`], [`request`]), the
//! typed protocol they speak ([`proto`]), reload itself (also used on
//! SIGHUP), and the Prometheus endpoint ([`spawn_metrics`]).
//!
//! # Principles
//!
//! - **The state owns what runs.** [`DaemonState`] holds the configuration
//!   the engine runs and its source text exactly as loaded ([`Loaded`]): set
//!   by `run` from what it checked and started, replaced by a reload in the
//!   same engine-lock section that swaps the engine, never read again from
//!   disk. So `show rules` shows the rules that run, and a refused reload
//!   changes nothing.
//! - **The data plane comes first.** Every request takes the engine lock only
//!   to copy what it needs (a report, the states, the rule counters) and
//!   formats outside it. Reload checks the new file before it takes the lock,
//!   so an invalid file never stalls forwarding, and swaps under the lock with
//!   `Engine::reload`, which is all or nothing.
//! - **Root only.** The socket is created mode 0600 and every peer is checked
//!   with SO_PEERCRED: uid 0 or the daemon's own uid, nobody else (the mode
//!   alone is not enough: it is set after `bind`, and a descriptor can be
//!   passed on).
//! - **Bounded.** No client can hold a server or delay another client.
//!   Each client is served on its own thread, at most
//!   [`server::MAX_CLIENTS`] (metrics: [`metrics::MAX_CLIENTS`]) at once;
//!   one more is refused at once (an error line; HTTP 503) and counted
//!   ([`DaemonState::clients`]). Deadlines are total, not per read
//!   ([`conn`]): a request line must arrive within [`server::CLIENT_TIMEOUT`]
//!   (a metrics request head within [`metrics::CLIENT_TIMEOUT`] of the
//!   accept) and a reply be taken within as long, however the bytes trickle.
//!   A request line is at most [`proto::MAX_REQUEST_BYTES`], a connection at
//!   most [`server::MAX_REQUESTS_PER_CONN`] requests, `show states` returns
//!   at most [`proto::STATES_SHOWN_CAP`] states, and a configuration is read
//!   only from a regular file of at most [`MAX_CONFIG_BYTES`]
//!   ([`read_config`]: never a FIFO or a device).
//! - **Typed both ways**: one JSON object per line each way (docs/control.md),
//!   read and written through the same [`proto`] types by the daemon, the
//!   CLI, the lab and the tests.
//! - **Time**: the engine is driven by the data plane's clock, which `run`
//!   passes in ([`DaemonState::now`]); state ages and expiries are reported
//!   against it. Which states belong to the current rules is decided from
//!   the states' own times.

#![forbid(unsafe_code)]
// The daemon's threads must not panic on a failed write to stderr: this
// crate reports through replies and the caller's log, never prints.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod client;
pub mod conn;
pub mod daemon;
pub mod log;
pub mod metrics;
pub mod proto;
pub mod server;
pub mod snapshot;
pub mod testing;

pub use client::{request, ClientError};
pub use metrics::spawn_metrics;
pub use proto::ReloadReport;
pub use server::spawn_control;

use sluice_conf::ir;
use sluice_engine::Engine;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Default control socket path: inside its own directory, so that the
/// systemd unit can hand the daemon `/run/sluice` (`RuntimeDirectory=`)
/// rather than all of `/run`, and `sluice show` needs no flag either way.
pub const DEFAULT_SOCKET: &str = "/run/sluice/sluice.sock";

/// The runtime directory (systemd's `RuntimeDirectory=sluice`): the
/// default control socket and the per-interface locks of `sluice run`.
pub const RUNTIME_DIR: &str = "/run/sluice";

/// A configuration as loaded: the file, its text, the `-D` defines it was
/// checked with and the IR built from them.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub path: PathBuf,
    /// The file's text exactly as read (diagnostics point into it).
    pub text: String,
    /// `-D name=value` of the command line, applied to every reload.
    pub defines: Vec<(String, String)>,
    pub config: ir::Config,
    /// States keep the rule index they were created with; those created
    /// before this engine time index the previous rule set.
    pub since: sluice_time::Instant,
    /// Checked with `--strict` (`sluice run --strict`): so is every reload.
    pub strict: bool,
}

/// A [`Loaded`] that passed `sluice check`, and its rendered warnings.
pub struct Checked {
    pub loaded: Loaded,
    pub warnings: String,
}

/// Reads `path` and checks it with `defines`, as `sluice check` does: the
/// one place both `run` (at start) and reload turn a file into a [`Loaded`].
/// An unreadable or invalid file returns the rendered diagnostics.
pub fn load(path: &Path, defines: &[(String, String)]) -> Result<Checked, String> {
    load_with(path, defines, false)
}

/// [`load`], under `--strict` when `strict`. Table files
/// (`table <t> file "path"`) are read through [`TableFiles`].
pub fn load_with(
    path: &Path,
    defines: &[(String, String)],
    strict: bool,
) -> Result<Checked, String> {
    let name = path.display().to_string();
    let text = read_config(path).map_err(|m| format!("error: {m}\n"))?;
    let opts = sluice_conf::CheckOptions {
        strict,
        files: Some(&TableFiles),
    };
    match sluice_conf::check_with(&name, &text, defines, &opts) {
        Ok(c) => Ok(Checked {
            warnings: c.warnings.iter().map(|w| w.render(&name, &text)).collect(),
            loaded: Loaded {
                path: path.to_path_buf(),
                text,
                defines: defines.to_vec(),
                config: c.config,
                since: sluice_time::Instant::ZERO,
                strict,
            },
        }),
        Err(diags) => Err(diags.iter().map(|d| d.render(&name, &text)).collect()),
    }
}

/// Reads the files of `table <t> file "path"` as pfctl does: the path as
/// written, so a relative one is relative to the working directory of the
/// process reading it (`sluice check`'s; the daemon's for `run` and every
/// reload); each through [`read_config`]'s bounded read.
pub struct TableFiles;

impl sluice_conf::FileLoader for TableFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        read_config(Path::new(path))
    }
}

/// The largest configuration file read (the biggest shipped example is a few
/// KiB; a table of a hundred thousand addresses fits): a reload of
/// `/dev/zero` or of a runaway file must not exhaust the daemon's memory.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads a configuration file: a regular file of at most
/// [`MAX_CONFIG_BYTES`], opened without blocking (a FIFO with no writer
/// would otherwise block the reader forever) and read through a bound (a
/// file that grows while read is still refused). The one place `run`,
/// reload and `sluice check` read a file; the error is one line, without
/// the `error: ` prefix.
pub fn read_config(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.display();
    let cannot = |e: std::io::Error| format!("cannot read {name}: {e}");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)
        .map_err(cannot)?;
    let meta = f.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(format!(
            "{name} is not a regular file (a FIFO, device or directory cannot be a configuration)"
        ));
    }
    let too_big = |size: u64| {
        format!(
            "{name} is {size} bytes, over the cap of {MAX_CONFIG_BYTES} bytes on a configuration"
        )
    };
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    f.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    // "not a text file: byte N …" rather than a raw UTF-8 error.
    sluice_conf::text(&bytes)
        .map(str::to_owned)
        .map_err(|e| format!("cannot read {name}: {e}"))
}

/// The configuration the engine runs. Replaced only by [`reload_from`],
/// under the engine lock, so a reader holding that lock sees the pair that
/// runs.
pub struct Running(RwLock<Arc<Loaded>>);

impl Running {
    pub fn new(loaded: Loaded) -> Self {
        Running(RwLock::new(Arc::new(loaded)))
    }

    pub fn get(&self) -> Arc<Loaded> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, loaded: Loaded) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded);
    }
}

/// What the control socket and the metrics endpoint see of a running daemon.
/// `run` builds it once; the servers read it, lock the engine and reload.
pub struct DaemonState {
    pub engine: Arc<Mutex<Engine>>,
    /// The configuration `engine` runs, as loaded.
    pub running: Running,
    /// The file `run -f` named: what `reload` without a file and SIGHUP read.
    pub config_path: PathBuf,
    /// The engine's clock (the data plane's CLOCK_MONOTONIC).
    pub now: fn() -> sluice_time::Instant,
    /// Start of the daemon (for uptime).
    pub started: std::time::Instant,
    /// `[lan, wan]` as given to `--bridge`.
    pub ifaces: [String; 2],
    /// The packet I/O in use (`af_packet`, `af_xdp`, …).
    pub io_method: String,
    /// Counters of the I/O layer, by name (ring drops, syscalls, …).
    pub io_stats: Arc<dyn Fn() -> Vec<(String, u64)> + Send + Sync>,
    /// AF_XDP's queues per interface (`show info`; empty on AF_PACKET).
    pub xdp_queues: Arc<dyn Fn() -> Vec<proto::XdpIfaceJson> + Send + Sync>,
    /// Wakes the data-plane loop (after a reload or stop).
    pub wake: Arc<dyn Fn() + Send + Sync>,
    pub stop: Arc<AtomicBool>,
    /// Clients of the control socket and the metrics endpoint being served
    /// now, and those refused at the cap.
    pub clients: conn::Clients,
}

/// Locks the engine even if the data plane panicked while holding it: the
/// counters are still worth showing and stopping must still work.
pub fn lock(state: &DaemonState) -> MutexGuard<'_, Engine> {
    #[cfg(test)]
    LOCKS_TAKEN.with(|n| n.set(n.get() + 1));
    state.engine.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
thread_local! {
    /// Engine locks this thread took through [`lock`] (tests count them).
    pub(crate) static LOCKS_TAKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Reads and checks `path` (default: `config_path`) with the running
/// defines. An invalid file returns the rendered diagnostics and leaves the
/// engine and the running configuration untouched; a valid one is swapped
/// in with the engine under its lock, then the loop is woken so new
/// deadlines take effect.
pub fn reload_from(state: &DaemonState, path: Option<&Path>) -> Result<ReloadReport, String> {
    reload_strict(state, path, false)
}

/// [`reload_from`], under `--strict` when `strict` or when the daemon was
/// started with it.
pub fn reload_strict(
    state: &DaemonState,
    path: Option<&Path>,
    strict: bool,
) -> Result<ReloadReport, String> {
    let path = path.unwrap_or(&state.config_path);
    let name = path.display().to_string();
    let running = state.running.get();
    let Checked {
        mut loaded,
        mut warnings,
    } = load_with(path, &running.defines, strict || running.strict)?;
    // A daemon started with --strict stays strict across reloads.
    loaded.strict = running.strict;
    for q in &loaded.config.interfaces {
        if !state.ifaces.contains(&q.ifname) {
            warnings.push_str(&format!(
                "warning: {name}:{}: queueing on `{}` is ignored: this daemon bridges {} and {}\n",
                q.line, q.ifname, state.ifaces[0], state.ifaces[1]
            ));
        }
    }
    let r = {
        let mut e = lock(state);
        // The engine's clock never goes back, so every state created from
        // now on is younger than every state that exists now, whatever clock
        // the I/O layer drives the engine with. Bounded by the state limit.
        let newest = e.classifier().states().map(|s| s.created).max();
        let r = e
            .reload(&loaded.config)
            .map_err(|e| format!("error: {name}: cannot build queues: {e}\n"))?;
        loaded.since = newest.map_or(sluice_time::Instant::ZERO, |t| t + sluice_time::Duration(1));
        state.running.set(loaded);
        r
    };
    (state.wake)();
    Ok(ReloadReport {
        file: name,
        kept: r.kept,
        dropped: r.dropped,
        warnings,
    })
}
