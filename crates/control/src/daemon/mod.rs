//! The daemon (`sluice run`): start-up in order, the threads, and the stop.
//!
//! # Principles
//! - The file is checked exactly as `sluice check` does before anything is
//!   opened ([`check`]); an invalid file never starts a shaper and an
//!   invalid reload never replaces a running one.
//! - Start-up ([`Checked::start`]) changes the system in one order:
//!   interface lock, `--attach`, take-back from a kernel bridge, the ports,
//!   then the privilege drop (last, once every file is open). A step that
//!   fails undoes the earlier ones (their guards drop in reverse).
//! - Threads: the packet loop (the caller's), a signal thread that turns
//!   SIGHUP into a reload under the engine lock and SIGTERM/SIGINT into a
//!   stop, the control socket, the metrics endpoint, autorate's log and
//!   `--nat`'s conntrack thread ([`threads`]). The stop flag ends them all.
//! - What the interfaces do afterwards is `--on-exit`'s ([`on_exit`]).

pub mod attach;
pub mod autorate_log;
mod health_log;
pub(crate) mod io_stats;
pub mod notify;
pub mod on_exit;
mod privs;
mod threads;

use crate::log::{log_text, Level};
use crate::{error, info, log_warn as warn, Loaded, Running};
use sluice_conf::ir::IpNet;
use sluice_engine::{Engine, Options};
use sluice_io::{caps, Bridge, IfaceLock, IoOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Everything `sluice run` was told, parsed.
pub struct Config {
    /// The configuration file (`-f`).
    pub file: PathBuf,
    /// `-D NAME=VALUE`; `int_if` and `ext_if` default to the ports.
    pub defines: Vec<(String, String)>,
    pub strict: bool,
    pub ports: Ports,
    /// The control socket's path.
    pub control: PathBuf,
    pub metrics: Option<SocketAddr>,
    /// `--memory-limit`, bytes.
    pub memory_limit: u64,
    pub io: IoOptions,
    /// `--on-exit bridge`.
    pub fail_open: bool,
    /// `--iface-addr IF=NET`, in the order given.
    pub iface_addrs: Vec<(String, IpNet)>,
    /// `--state-dir`; default: the control socket's directory.
    pub state_dir: Option<PathBuf>,
    pub autorate_trace: bool,
    /// `--user`, a name or a uid.
    pub user: Option<String>,
}

/// The two ports the daemon bridges.
pub enum Ports {
    /// `--bridge LAN_IF,WAN_IF`.
    Bridge { lan: String, wan: String },
    /// `--attach IF`: IF and the veth end toward the host's stack.
    Attach {
        name: String,
        wan_side: bool,
        nat: bool,
        dry_run: bool,
    },
}

/// A configuration checked and the ports named; nothing changed yet.
pub struct Checked {
    cfg: Config,
    user: Option<caps::User>,
    lan: String,
    wan: String,
    loaded: Loaded,
}

/// Checks what can be checked before anything is changed: the user, the
/// ports, the configuration (its warnings logged).
pub fn check(cfg: Config) -> Result<Checked, Failed> {
    let user = cfg
        .user
        .as_deref()
        .map(privs::lookup_user)
        .transpose()
        .map_err(fail)?;
    let (lan, wan) = ports(&cfg, user.is_some()).map_err(fail)?;
    let mut defines = cfg.defines.clone();
    for (name, val) in [("int_if", &lan), ("ext_if", &wan)] {
        if !defines.iter().any(|(n, _)| n == name) {
            defines.push((name.to_string(), val.clone()));
        }
    }
    // What is checked here is what runs, and what `show` reports.
    let loaded = match crate::load_with(&cfg.file, &defines, cfg.strict) {
        Ok(c) => {
            log_text(Level::Warn, &c.warnings);
            c.loaded
        }
        Err(diags) => {
            log_text(Level::Error, &diags);
            return Err(fail(format!(
                "{}: invalid configuration, not starting",
                cfg.file.display()
            )));
        }
    };
    Ok(Checked {
        cfg,
        user,
        lan,
        wan,
        loaded,
    })
}

/// The two ports, LAN and WAN: `--bridge`'s, or those `--attach` makes
/// (nothing is changed yet).
fn ports(cfg: &Config, user: bool) -> Result<(String, String), String> {
    match &cfg.ports {
        Ports::Bridge { lan, wan } => Ok((lan.clone(), wan.clone())),
        Ports::Attach {
            name,
            wan_side,
            dry_run,
            ..
        } => {
            attach::check_options(cfg.fail_open, user)?;
            attach::ports(name, *wan_side, *dry_run)
        }
    }
}

/// The daemon, its ports open and its threads running.
///
/// Field order is drop order: the ports are released before the
/// interfaces are handed over (`on_exit`), IF given back and the lock
/// let go.
pub struct Daemon {
    bridge: Bridge,
    _on_exit: on_exit::OnExit,
    _attached: Option<attach::Guard>,
    _lock: IfaceLock,
    threads: threads::Threads,
    ports: [String; 2],
}

impl Checked {
    /// `--attach IF --dry-run`: the interface whose plan is to be shown
    /// instead of starting.
    pub fn dry_run(&self) -> Option<&str> {
        match &self.cfg.ports {
            Ports::Attach {
                name,
                dry_run: true,
                ..
            } => Some(name),
            _ => None,
        }
    }

    /// Builds the engine, opens the ports, drops privileges and starts
    /// the threads.
    pub fn start(self) -> Result<Daemon, Failed> {
        let engine = Arc::new(Mutex::new(self.engine().map_err(fail)?));
        // autorate's log is opened before privileges go and before any
        // set-up change (a refused directory stops here); with no autorate
        // in the file, none is made until a reload brings one.
        let logs_now = self.cfg.autorate_trace || !self.loaded.config.options.autorate.is_empty();
        let dirs = privs::Dirs::check(&self.cfg, self.user, logs_now).map_err(fail)?;
        let logs = [
            logs_now
                .then(|| autorate_log::open_early(&dirs.state))
                .flatten(),
            self.cfg
                .autorate_trace
                .then(|| autorate_log::open_samples(&dirs.state))
                .flatten(),
        ];
        let opened = self.open()?;
        // Last, after the log's files were opened as root.
        dirs.give().map_err(fail)?;
        privs::drop_privileges(&opened.bridge, self.cfg.metrics, self.user)
            .map_err(|e| fail(format!("cannot drop privileges: {e}")))?;
        let nat = matches!(self.cfg.ports, Ports::Attach { nat: true, .. });
        let state = self.state(engine, &opened.bridge);
        let mut bridge = opened.bridge;
        let threads = threads::Threads::start(threads::Start {
            state,
            control: &self.cfg.control,
            metrics: self.cfg.metrics,
            nat,
            state_dir: dirs.state.clone(),
            logs,
        })?;
        // Ports open, the first configuration live, the control socket up.
        notify::notify(&notify::ready_message(&bridging(
            &self.lan, &self.wan, &bridge,
        )));
        if let Some(mut w) = notify::Watchdog::from_env() {
            bridge.set_tick(Box::new(move || w.tick()));
        }
        Ok(Daemon {
            bridge,
            _on_exit: opened.on_exit,
            _attached: opened.attached,
            _lock: opened.lock,
            threads,
            ports: [self.lan, self.wan],
        })
    }

    /// The engine for the checked configuration, with `run`'s settings.
    fn engine(&self) -> Result<Engine, String> {
        let (lan, wan) = (&self.lan, &self.wan);
        let hash_key = sluice_io::random_key().map_err(|e| format!("getrandom: {e}"))?;
        let mut opts = Options::bridge(lan, wan, hash_key);
        let iface_addrs = match &self.cfg.ports {
            Ports::Attach { name, wan_side, .. } => {
                let port = if *wan_side { wan } else { lan };
                attach::iface_addr_names(&self.cfg.iface_addrs, name, port)
            }
            Ports::Bridge { .. } => self.cfg.iface_addrs.clone(),
        };
        opts.iface_addrs = configured_addrs(&iface_addrs, lan, wan)?;
        let mut e = Engine::new(&self.loaded.config, opts)
            .map_err(|e| format!("cannot build the queues: {e}"))?;
        e.set_memory_limit(self.cfg.memory_limit);
        e.set_autorate_trace(self.cfg.autorate_trace);
        autorate_log::set_wall_clock(&mut e);
        Ok(e)
    }

    /// The ports, opened in order, with the guards that undo each step.
    fn open(&self) -> Result<Opened, Failed> {
        let (lan, wan) = (&self.lan, &self.wan);
        // One sluice per interface, whatever its control socket
        // (sluice_io::lock_interfaces); taken before the take-back below,
        // so one sluice never undoes another's hand-over.
        let lock_dir = Path::new(crate::RUNTIME_DIR);
        // With --attach, IF (its ifindex) before it is renamed; the veth is new.
        let attach = match &self.cfg.ports {
            Ports::Attach { name, .. } => Some(name.as_str()),
            Ports::Bridge { .. } => None,
        };
        let locked = attach.map_or(vec![lan.as_str(), wan.as_str()], |n| vec![n]);
        let lock = sluice_io::lock_interfaces(lock_dir, &locked)
            .map_err(|e| fail(format!("cannot open {}: {e}", locked.join(","))))?;
        // Made before the bridge, so dropped after it: IF goes back to the
        // host on every exit this process sees.
        let attached = attach
            .map(|n| attach::setup(n, lock_dir))
            .transpose()
            .map_err(fail)?;
        // Made before the bridge, so dropped after it (sockets and XDP released).
        let mut on_exit = on_exit::take_back(self.cfg.fail_open, lan, wan).map_err(fail)?;
        let mut bridge = Bridge::open(lan, wan, self.cfg.io.clone())
            .map_err(|e| fail(format!("cannot open {lan},{wan}: {e}")))?;
        on_exit.arm();
        log_ports(&mut bridge, lan, wan);
        Ok(Opened {
            bridge,
            on_exit,
            attached,
            lock,
        })
    }

    /// What the control socket and the metrics endpoint see.
    fn state(&self, engine: Arc<Mutex<Engine>>, bridge: &Bridge) -> Arc<crate::DaemonState> {
        let (waker, stats) = (bridge.waker(), bridge.stats());
        let names = [self.lan.clone(), self.wan.clone()];
        Arc::new(crate::DaemonState {
            engine,
            running: Running::new(self.loaded.clone()),
            config_path: self.cfg.file.clone(),
            now: sluice_io::now,
            started: std::time::Instant::now(),
            ifaces: names.clone(),
            io_method: bridge.method().to_string(),
            xdp_queues: io_stats::xdp_queues_json(names.clone(), stats.clone()),
            io_stats: Arc::new(move || io_stats::io_counters(&names, &stats)),
            wake: Arc::new(move || waker.wake()),
            stop: Default::default(),
            clients: crate::conn::Clients::new(
                crate::server::MAX_CLIENTS,
                crate::metrics::MAX_CLIENTS,
            ),
        })
    }
}

/// The opened ports and the guards of the steps before them.
struct Opened {
    bridge: Bridge,
    on_exit: on_exit::OnExit,
    attached: Option<attach::Guard>,
    lock: IfaceLock,
}

fn bridging(lan: &str, wan: &str, bridge: &Bridge) -> String {
    format!(
        "bridging {lan} (int_if) <-> {wan} (ext_if) via {}",
        bridge.method()
    )
}

/// Link changes, offloads and the I/O method, as the ports open.
fn log_ports(bridge: &mut Bridge, lan: &str, wan: &str) {
    // Link down and up: one warning line each (a deleted link ends run).
    bridge.set_log(Arc::new(|m: &str| warn!("{m}")));
    for o in bridge.offloads() {
        match &o.outcome {
            Ok(how) => info!("{}: {} off ({how})", o.iface, o.feature),
            Err(msg) => warn!(
                "{}: could not turn {} off: {msg}; oversize frames are counted",
                o.iface, o.feature
            ),
        }
    }
    if let Some(why) = bridge.fallback() {
        warn!("--io fallback: {why}; using {}", bridge.method());
    }
    info!("{}", bridging(lan, wan, bridge));
}

impl Daemon {
    /// Runs the packet loop until a stop, then stops the threads; what the
    /// interfaces do next is the guards' (dropped after this).
    pub fn run(mut self) -> Result<(), Failed> {
        let engine = self.threads.state.engine.clone();
        let stop = self.threads.state.stop.clone();
        let result = self.bridge.run(engine, stop);
        notify::notify("STOPPING=1");
        self.threads.stop();
        io_stats::log_final(&self.ports, &self.bridge.stats());
        match result {
            Ok(()) => {
                info!("stopped");
                Ok(())
            }
            Err(e) => Err(fail(format!("packet loop failed: {e}"))),
        }
    }
}

/// A failure of the daemon's, logged where it happened: before the
/// guards of the steps before it undo them, so the log reads in order.
#[derive(Debug)]
pub struct Failed;

fn fail(e: String) -> Failed {
    error!("{e}");
    Failed
}

/// `--iface-addr` grouped by engine interface index (0 = LAN, 1 = WAN);
/// an interface that is not bridged is an error.
fn configured_addrs(
    given: &[(String, IpNet)],
    lan: &str,
    wan: &str,
) -> Result<Vec<(usize, Vec<IpNet>)>, String> {
    let mut out: Vec<(usize, Vec<IpNet>)> = Vec::new();
    for (name, net) in given {
        let idx = [lan, wan].iter().position(|n| n == name).ok_or_else(|| {
            format!("--iface-addr {name}=…: {name} is not bridged (--bridge {lan},{wan})")
        })?;
        match out.iter_mut().find(|(i, _)| *i == idx) {
            Some((_, v)) => v.push(*net),
            None => out.push((idx, vec![*net])),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        let (addr, prefix) = s.split_once('/').unwrap_or((s, ""));
        let addr: std::net::IpAddr = addr.parse().unwrap();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        IpNet {
            addr,
            prefix: prefix.parse().unwrap_or(max),
        }
    }

    #[test]
    fn iface_addrs_by_bridged_interface() {
        let given: Vec<_> = [
            ("wan0", "192.0.2.1/24"),
            ("lan0", "10.0.0.1"),
            ("wan0", "2001:db8::1/64"),
        ]
        .iter()
        .map(|(n, a)| (n.to_string(), net(a)))
        .collect();
        let v = configured_addrs(&given, "lan0", "wan0").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].0, v[0].1.len()), (1, 2));
        assert_eq!((v[1].0, v[1].1.len()), (0, 1));
        let e = configured_addrs(&[("eth5".into(), net("192.0.2.1"))], "lan0", "wan0").unwrap_err();
        assert!(
            e.contains("eth5 is not bridged (--bridge lan0,wan0)"),
            "{e}"
        );
    }
}
