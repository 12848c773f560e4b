//! `sluice run -f FILE --bridge LAN_IF,WAN_IF`: shape real traffic.
//!
//! # Principles
//! The file is checked exactly as `sluice check` does before anything is
//! opened; an invalid file never starts a shaper and an invalid reload never
//! replaces a running one. Two threads: the I/O loop (sluice-io) and a signal
//! thread that turns SIGHUP into a reload under the engine lock and
//! SIGTERM/SIGINT into a clean stop. Exit 0 on a clean stop, 1 otherwise.
//! What the interfaces do afterwards is `--on-exit`'s (`failopen.rs`).

use crate::args::{parse_bridge, parse_define, parse_iface_addr, parse_memory_limit, parse_method};
use crate::out::{debug, error, info, log_text, warn, Level};
use clap::Args as ClapArgs;
use sluice_conf::ir::IpNet;
use sluice_control::{DaemonState, Running};
use sluice_engine::{Engine, Options};
use sluice_io::{caps, Bridge, IoOptions, IoStats, Method, Signal, Signals};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(ClapArgs)]
pub struct Args {
    /// Configuration file in the pf.conf dialect.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: String,
    /// Define a macro, as pfctl -D does. `int_if` and `ext_if` default to
    /// the bridged LAN and WAN interfaces.
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// Refuse what `sluice check --strict` refuses, at start and on every
    /// reload (a rule naming a queue that does not exist).
    #[arg(long)]
    strict: bool,
    /// The two interfaces to bridge: LAN (int_if) and WAN (ext_if).
    #[arg(long, value_name = "LAN_IF,WAN_IF", value_parser = parse_bridge,
          required_unless_present = "attach")]
    bridge: Option<(String, String)>,
    #[command(flatten)]
    attach: crate::attach::RunArgs,
    /// Control socket for `sluice show|reload|stop` (root only).
    #[arg(long, value_name = "PATH", default_value = sluice_control::DEFAULT_SOCKET)]
    control: String,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    /// Cap on the memory queued frames may hold, all queues together, each
    /// frame charged its buffer plus a fixed overhead (`64MiB`, `256M`,
    /// bytes without a unit; K/M/G are powers of 1024). Frames beyond it
    /// are dropped and counted as `memory-limit`.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_memory_limit)]
    memory_limit: u64,
    /// Packet I/O: xdp (AF_XDP sockets on queue 0 of single-queue
    /// interfaces, XDP program in generic mode on veth and native mode
    /// elsewhere, each falling back to the other; where AF_XDP cannot be set
    /// up, ring with a warning), xdp-generic (generic mode only), ring
    /// (TPACKET_V2 RX ring + sendmmsg, recvmmsg where the kernel refuses the
    /// ring) or mmsg (recvmmsg/sendmmsg). With AF_XDP, tcpdump on the
    /// bridged interfaces sees none of the bridged traffic: capture with
    /// --io ring.
    #[arg(long, value_name = "METHOD", default_value = "xdp", value_parser = parse_method)]
    io: Method,
    /// Busy-wait for deadlines closer than this many microseconds instead of
    /// sleeping on the timer (0: always sleep).
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
    /// RX ring block size in KiB: the unit the ring's frame slots are carved
    /// from (64 blocks per interface).
    #[arg(long, value_name = "KIB", default_value_t = 256)]
    ring_block_kib: u32,
    /// Leave NIC offloads (GRO/GSO/TSO/LRO/rxvlan) as they are.
    #[arg(long)]
    keep_offloads: bool,
    /// What the interfaces do once sluice stops. down (fail-closed):
    /// nothing forwards until sluice runs again; the LAN is offline.
    /// bridge (fail-open): on SIGTERM/SIGINT, `sluice stop`, a failed
    /// packet loop or a panic, the interfaces are handed to a kernel bridge
    /// (sluice-brN): the LAN stays online, but unshaped and unfiltered
    /// (no pf rule applies; everything crosses). A killed daemon (SIGKILL,
    /// OOM) cannot: run `sluice on-exit bridge` after it (systemd:
    /// ExecStopPost=). At start, run always takes the interfaces back from
    /// such a bridge (docs/dataplane.md, "When sluice stops").
    #[arg(long, value_name = "MODE", value_enum, default_value = "down")]
    on_exit: crate::failopen::Mode,
    /// More log output (-v info, -vv debug).
    #[arg(short, action = clap::ArgAction::Count)]
    verbose: u8,
    /// An address of a bridged interface, or a network (CIDR) whose host
    /// address it is: what `IF` (`from $ext_if`) and `IF:network` mean in
    /// rules. Repeatable. An interface given none takes the addresses LAN-side
    /// hosts claim in ARP/ND (docs/dataplane.md).
    #[arg(long = "iface-addr", value_name = "IF=ADDR[/LEN]", value_parser = parse_iface_addr)]
    iface_addr: Vec<(String, IpNet)>,
    /// The daemon's state directory: autorate's decision log
    /// (`autorate.csv`, docs/autorate.md) goes there. Default: the
    /// directory of the control socket.
    #[arg(long = "state-dir", value_name = "DIR")]
    state_dir: Option<String>,
    /// Diagnosis of autorate: write every decision to `autorate.csv` (not
    /// only those that move the rate or change the reason) and every delay
    /// sample's parts to `autorate-samples.csv` in the state directory
    /// (docs/autorate.md). Thousands of lines a second under load.
    #[arg(long = "autorate-trace")]
    autorate_trace: bool,
    /// Run as this user (a name, or a uid) once set up: its uid and
    /// primary group, no supplementary groups, only the capabilities the
    /// packet loop needs. The control socket's and the state directories
    /// are given to it; the configuration must be readable by it for
    /// reloads. Use a dedicated system user: the control socket admits
    /// root and this user (docs/dataplane.md, "Privileges").
    #[arg(long, value_name = "USER")]
    user: Option<String>,
}

/// The two ports, LAN and WAN: `--bridge`'s, or those `--attach` makes
/// (nothing is changed yet).
fn ports(a: &Args) -> Result<(String, String), String> {
    match (&a.bridge, &a.attach.attach) {
        (Some(b), _) => Ok(b.clone()),
        (None, Some(name)) => {
            crate::attach::check_options(
                a.on_exit == crate::failopen::Mode::Bridge,
                a.user.is_some(),
            )?;
            crate::attach::ports(name, a.attach.attach_side, a.attach.dry_run)
        }
        (None, None) => Err("--bridge LAN_IF,WAN_IF or --attach IF".into()),
    }
}

mod privs;
use privs::{drop_privileges, lookup_user, Dirs};

pub fn run(a: Args) -> ExitCode {
    crate::out::set_log(a.verbose, crate::notify::stderr_is_journal());
    let user = match a.user.as_deref().map(lookup_user).transpose() {
        Ok(u) => u,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (lan, wan) = match ports(&a) {
        Ok(p) => p,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut defines = a.define.clone();
    for (name, val) in [("int_if", &lan), ("ext_if", &wan)] {
        if !defines.iter().any(|(n, _)| n == name) {
            defines.push((name.to_string(), val.clone()));
        }
    }
    // What is checked here is what runs, and what `show` reports.
    let loaded = match sluice_control::load_with(std::path::Path::new(&a.file), &defines, a.strict)
    {
        Ok(c) => {
            log_text(Level::Warn, &c.warnings);
            c.loaded
        }
        Err(diags) => {
            log_text(Level::Error, &diags);
            error!("{}: invalid configuration, not starting", a.file);
            return ExitCode::FAILURE;
        }
    };
    if let Some(name) = a.attach.attach.as_deref().filter(|_| a.attach.dry_run) {
        return match crate::attach::print_plan(name) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    let metrics_addr = match a.metrics.addr() {
        Ok(m) => m,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let hash_key = match sluice_io::random_key() {
        Ok(k) => k,
        Err(e) => {
            error!("getrandom: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut opts = Options::bridge(&lan, &wan, hash_key);
    let iface_addr = match &a.attach.attach {
        Some(n) if a.attach.attach_side == crate::attach::Side::Lan => {
            crate::attach::iface_addr_names(&a.iface_addr, n, &lan)
        }
        Some(n) => crate::attach::iface_addr_names(&a.iface_addr, n, &wan),
        None => a.iface_addr.clone(),
    };
    opts.iface_addrs = match configured_addrs(&iface_addr, &lan, &wan) {
        Ok(v) => v,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let engine = match Engine::new(&loaded.config, opts) {
        Ok(mut e) => {
            e.set_memory_limit(a.memory_limit);
            e.set_autorate_trace(a.autorate_trace);
            crate::autorate_log::set_wall_clock(&mut e);
            Arc::new(Mutex::new(e))
        }
        Err(e) => {
            error!("cannot build the queues: {e}");
            return ExitCode::FAILURE;
        }
    };
    // autorate's log is opened before privileges go and before any set-up
    // change (a refused directory stops here); with no autorate in the
    // file, none is made until a reload brings one.
    let logs_now = a.autorate_trace || !loaded.config.options.autorate.is_empty();
    let dirs = match Dirs::check(&a, user, logs_now) {
        Ok(d) => d,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let state_dir = dirs.state.clone();
    let early_log = logs_now
        .then(|| crate::autorate_log::open_early(&state_dir))
        .flatten();
    let samples = a
        .autorate_trace
        .then(|| crate::autorate_log::open_samples(&state_dir))
        .flatten();
    let io_opts = IoOptions {
        method: a.io,
        disable_offloads: !a.keep_offloads,
        spin_ns: a.spin_us.saturating_mul(1000),
        ring_block_bytes: a.ring_block_kib.saturating_mul(1024),
        ring_blocks: (16384 / a.ring_block_kib.max(4)).max(8),
        ..IoOptions::default()
    };
    // One sluice per interface, whatever its control socket (sluice_io::lock_interfaces);
    // taken before the take-back below, so one sluice never undoes another's hand-over.
    let lock_dir = std::path::Path::new(sluice_control::RUNTIME_DIR);
    // With --attach, IF (its ifindex) before it is renamed; the veth is new.
    let locked = match &a.attach.attach {
        Some(name) => vec![name.as_str()],
        None => vec![lan.as_str(), wan.as_str()],
    };
    let _lock = match sluice_io::lock_interfaces(lock_dir, &locked) {
        Ok(l) => l,
        Err(e) => {
            error!("cannot open {}: {e}", locked.join(","));
            return ExitCode::FAILURE;
        }
    };
    // Made before the bridge, so dropped after it: IF goes back to the
    // host on every exit this process sees.
    let _attached = match a
        .attach
        .attach
        .as_deref()
        .map(|n| crate::attach::setup(n, lock_dir))
    {
        None => None,
        Some(Ok(g)) => Some(g),
        Some(Err(e)) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // Made before the bridge, so dropped after it (sockets and XDP released).
    let mut on_exit = match crate::failopen::take_back(a.on_exit, &lan, &wan) {
        Ok(g) => g,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut bridge = match Bridge::open(&lan, &wan, io_opts) {
        Ok(b) => b,
        Err(e) => {
            error!("cannot open {lan},{wan}: {e}");
            return ExitCode::FAILURE;
        }
    };
    on_exit.arm();
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
    info!(
        "bridging {lan} (int_if) <-> {wan} (ext_if) via {}",
        bridge.method()
    );
    // Last, after the log's files were opened as root.
    if let Err(e) = dirs.give() {
        error!("{e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = drop_privileges(&bridge, metrics_addr, user) {
        error!("cannot drop privileges: {e}");
        return ExitCode::FAILURE;
    }
    let signals = match Signals::install() {
        Ok(s) => Arc::new(s),
        Err(e) => {
            error!("cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let state = {
        let (waker, stats) = (bridge.waker(), bridge.stats());
        let names = [lan.clone(), wan.clone()];
        Arc::new(DaemonState {
            engine: engine.clone(),
            running: Running::new(loaded),
            config_path: std::path::PathBuf::from(&a.file),
            now: sluice_io::now,
            started: std::time::Instant::now(),
            ifaces: [lan.clone(), wan.clone()],
            io_method: bridge.method().to_string(),
            xdp_queues: xdp_queues_json(names.clone(), stats.clone()),
            io_stats: Arc::new(move || io_counters(&names, &stats)),
            wake: Arc::new(move || waker.wake()),
            stop: stop.clone(),
            clients: sluice_control::conn::Clients::new(
                sluice_control::server::MAX_CLIENTS,
                sluice_control::metrics::MAX_CLIENTS,
            ),
        })
    };
    let control =
        match sluice_control::spawn_control(std::path::Path::new(&a.control), state.clone()) {
            Ok(h) => h,
            Err(e) => {
                error!("control socket {}: {e}", a.control);
                return ExitCode::FAILURE;
            }
        };
    let metrics =
        match metrics_addr.map(|addr| (addr, sluice_control::spawn_metrics(addr, state.clone()))) {
            None => None,
            Some((_, Ok(h))) => Some(h),
            Some((addr, Err(e))) => {
                error!("metrics on {addr}: {e}");
                stop.store(true, Ordering::SeqCst);
                let _ = control.join();
                return ExitCode::FAILURE;
            }
        };
    let sig_thread = {
        let (signals, state) = (signals.clone(), state.clone());
        std::thread::spawn(move || loop {
            match signals.wait() {
                Signal::Stop => {
                    state.stop.store(true, Ordering::SeqCst);
                    (state.wake)();
                    return;
                }
                Signal::Reload => {
                    let usec = crate::notify::monotonic_usec();
                    crate::notify::notify(&crate::notify::reloading_message(usec));
                    info!("SIGHUP: reloading {}", state.config_path.display());
                    // Checked before the engine lock is taken; all or nothing.
                    match sluice_control::reload_from(&state, None) {
                        Ok(rep) => info!(
                            "reloaded {}: {} packets kept, {} dropped",
                            rep.file, rep.kept, rep.dropped
                        ),
                        Err(diags) => {
                            error!("reload refused, keeping the running configuration:\n{diags}")
                        }
                    }
                    crate::notify::notify("READY=1");
                }
            }
        })
    };
    let stop_log = Arc::new(AtomicBool::new(false));
    let nat = a
        .attach
        .nat
        .then(|| crate::attach::spawn_nat(engine.clone(), stop_log.clone()));
    let autorate_log = crate::autorate_log::spawn(
        state_dir,
        [early_log, samples],
        engine.clone(),
        stop_log.clone(),
    );
    // Ports open, the first configuration live, the control socket up.
    crate::notify::notify(&crate::notify::ready_message(&format!(
        "bridging {lan} (int_if) <-> {wan} (ext_if) via {}",
        bridge.method()
    )));
    if let Some(mut w) = crate::notify::Watchdog::from_env() {
        bridge.set_tick(Box::new(move || w.tick()));
    }
    let result = bridge.run(engine.clone(), stop.clone());
    crate::notify::notify("STOPPING=1");
    // The loop may end by itself (an I/O error); release the other threads.
    stop.store(true, Ordering::SeqCst);
    signals.stop();
    let _ = sig_thread.join();
    let _ = control.join();
    stop_log.store(true, Ordering::SeqCst);
    let _ = autorate_log.join();
    if let Some(n) = nat {
        let _ = n.join();
    }
    if let Some(m) = metrics {
        let _ = m.join();
    }
    let stats = bridge.stats();
    for (name, s) in [&lan, &wan].iter().zip(&stats.ifaces) {
        debug!(
            "{name}: rx {} frames, tx {} frames, ring drops {}, tx errors {}, oversize {}",
            s.rx_frames.load(Ordering::Relaxed),
            s.tx_frames.load(Ordering::Relaxed),
            s.ring_drops.load(Ordering::Relaxed),
            s.tx_errors.load(Ordering::Relaxed),
            s.oversize.load(Ordering::Relaxed)
        );
    }
    match result {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("packet loop failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The I/O layer's counters by name, for `show info` and the metrics.
fn io_counters(names: &[String; 2], stats: &IoStats) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for (name, s) in names.iter().zip(&stats.ifaces) {
        for (what, c) in [
            ("rx_frames", &s.rx_frames),
            ("tx_frames", &s.tx_frames),
            ("ring_drops", &s.ring_drops),
            ("tx_blocked", &s.tx_blocked),
            ("tx_errors", &s.tx_errors),
            ("oversize", &s.oversize),
            ("link_down", &s.link_down),
            ("down_drops", &s.down_drops),
            ("xdp_reattach", &s.xdp_reattach),
            ("csum_completed", &s.csum_completed),
        ] {
            v.push((format!("{name}_{what}"), c.load(Ordering::Relaxed)));
        }
    }
    v.push(("log_write_errors".into(), crate::out::log_write_errors()));
    let p = &stats.pool;
    for (what, c) in [
        ("pool_buffer_bytes", &p.buffer_bytes),
        ("pool_max_buffers", &p.max_buffers),
        ("pool_free_buffers", &p.free_buffers),
        ("pool_allocated", &p.allocated),
    ] {
        v.push((what.into(), c.load(Ordering::Relaxed)));
    }
    v
}

/// AF_XDP's queues of each interface for `show info`.
fn xdp_queues_json(
    names: [String; 2],
    stats: Arc<IoStats>,
) -> Arc<dyn Fn() -> Vec<sluice_control::proto::XdpIfaceJson> + Send + Sync> {
    use sluice_control::proto::{XdpIfaceJson, XdpQueueJson};
    Arc::new(move || {
        let mut v = Vec::new();
        for (name, s) in names.iter().zip(&stats.ifaces) {
            let Some(x) = s.xdp.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
                continue;
            };
            let queues = x.queues.into_iter().map(|q| XdpQueueJson {
                queue: q.queue,
                mode: if q.zerocopy { "zerocopy" } else { "copy" }.into(),
                copy_reason: q.copy_why,
                rx_frames: q.rx_frames,
                ring_drops: q.ring_drops,
            });
            v.push(XdpIfaceJson {
                iface: name.clone(),
                attach: x.attach.into(),
                tx_queue: x.tx_queue,
                queues: queues.collect(),
            });
        }
        v
    })
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

    #[test]
    fn iface_addrs_by_bridged_interface() {
        let given: Vec<_> = ["wan0=192.0.2.1/24", "lan0=10.0.0.1", "wan0=2001:db8::1/64"]
            .iter()
            .map(|s| parse_iface_addr(s).unwrap())
            .collect();
        let v = configured_addrs(&given, "lan0", "wan0").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].0, v[0].1.len()), (1, 2));
        assert_eq!((v[1].0, v[1].1.len()), (0, 1));
        let e = configured_addrs(
            &[parse_iface_addr("eth5=192.0.2.1").unwrap()],
            "lan0",
            "wan0",
        )
        .unwrap_err();
        assert!(
            e.contains("eth5 is not bridged (--bridge lan0,wan0)"),
            "{e}"
        );
    }
}
