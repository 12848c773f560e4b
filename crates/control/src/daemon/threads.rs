//! The daemon's threads beside the packet loop, started together and
//! stopped together.

use super::{attach, autorate_log, fail, notify, Failed};
use crate::{error, info, DaemonState};
use sluice_io::{Signal, Signals};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What the threads need.
pub(super) struct Start<'a> {
    pub state: Arc<DaemonState>,
    pub control: &'a Path,
    pub metrics: Option<SocketAddr>,
    /// `--nat`: conntrack's thread.
    pub nat: bool,
    pub state_dir: PathBuf,
    /// autorate's decision and sample logs, opened already.
    pub logs: [Option<autorate_log::Log>; 2],
}

/// The running threads: the signal thread, the control socket, the
/// metrics endpoint, `--nat` and autorate's log.
pub(super) struct Threads {
    pub state: Arc<DaemonState>,
    signals: Arc<Signals>,
    signal: JoinHandle<()>,
    control: JoinHandle<()>,
    metrics: Option<JoinHandle<()>>,
    /// Stops the two that poll (`--nat`, autorate's log) once the servers
    /// are gone.
    stop_log: Arc<AtomicBool>,
    nat: Option<JoinHandle<()>>,
    autorate_log: JoinHandle<()>,
}

impl Threads {
    pub fn start(s: Start<'_>) -> Result<Threads, Failed> {
        let signals = Signals::install()
            .map(Arc::new)
            .map_err(|e| fail(format!("cannot install signal handlers: {e}")))?;
        let state = s.state;
        let control = crate::spawn_control(s.control, state.clone())
            .map_err(|e| fail(format!("control socket {}: {e}", s.control.display())))?;
        let metrics = match s
            .metrics
            .map(|a| (a, crate::spawn_metrics(a, state.clone())))
        {
            None => None,
            Some((_, Ok(h))) => Some(h),
            Some((addr, Err(e))) => {
                let failed = fail(format!("metrics on {addr}: {e}"));
                state.stop.store(true, Ordering::SeqCst);
                let _ = control.join();
                return Err(failed);
            }
        };
        let signal = spawn_signal(signals.clone(), state.clone());
        let stop_log = Arc::new(AtomicBool::new(false));
        let nat = s
            .nat
            .then(|| attach::spawn_nat(state.engine.clone(), stop_log.clone()));
        let autorate_log =
            autorate_log::spawn(s.state_dir, s.logs, state.engine.clone(), stop_log.clone());
        Ok(Threads {
            state,
            signals,
            signal,
            control,
            metrics,
            stop_log,
            nat,
            autorate_log,
        })
    }

    /// Stops and joins them all (the packet loop has ended, by itself or
    /// by a stop).
    pub fn stop(self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.signals.stop();
        let _ = self.signal.join();
        let _ = self.control.join();
        self.stop_log.store(true, Ordering::SeqCst);
        let _ = self.autorate_log.join();
        if let Some(n) = self.nat {
            let _ = n.join();
        }
        if let Some(m) = self.metrics {
            let _ = m.join();
        }
    }
}

/// SIGTERM/SIGINT: stop. SIGHUP: reload, framed for systemd.
fn spawn_signal(signals: Arc<Signals>, state: Arc<DaemonState>) -> JoinHandle<()> {
    std::thread::spawn(move || loop {
        match signals.wait() {
            Signal::Stop => {
                state.stop.store(true, Ordering::SeqCst);
                (state.wake)();
                return;
            }
            Signal::Reload => reload(&state),
        }
    })
}

fn reload(state: &DaemonState) {
    let usec = notify::monotonic_usec();
    notify::notify(&notify::reloading_message(usec));
    info!("SIGHUP: reloading {}", state.config_path.display());
    // Checked before the engine lock is taken; all or nothing.
    match crate::reload_from(state, None) {
        Ok(rep) => info!(
            "reloaded {}: {} packets kept, {} dropped",
            rep.file, rep.kept, rep.dropped
        ),
        Err(diags) => error!("reload refused, keeping the running configuration:\n{diags}"),
    }
    notify::notify("READY=1");
}
