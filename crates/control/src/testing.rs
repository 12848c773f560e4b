//! An example daemon without packet I/O, for the tests of the control plane
//! and of its clients (`sluice show` in crates/cli): a real engine that has
//! forwarded real frames, its [`DaemonState`], served on a socket in a
//! temporary directory. Nothing here runs in a shaper.

use crate::{load, DaemonState, Running};
use sluice_engine::{Engine, Options};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

pub const LAN: usize = 0;
pub const WAN: usize = 1;

/// The example daemon's `pf.conf` (`ext_if` is defined as `wan0`).
pub const EXAMPLE_CONF: &str = "\
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 qlimit 10 priq(default)

pass out on $ext_if proto tcp from any to any flags S/SA keep state queue (q_def, q_pri)
pass out on $ext_if proto udp queue (q_def, q_pri)
";

/// A reload of [`EXAMPLE_CONF`]: same queue names, a bigger q_def and a new
/// queue, so q_def keeps its packets.
pub const NEW_CONF: &str = "\
altq on $ext_if priq bandwidth 200Kb queue { q_pri, q_def, q_new }
queue q_pri priority 7
queue q_def priority 1 qlimit 100 priq(default)
queue q_new priority 3
pass out on $ext_if proto udp queue q_def
";

/// An invalid config (priority out of range on line 2).
pub const BAD_CONF: &str = "\
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 99
queue q_def priority 1 priq(default)
";

/// The `-D` defines the example daemon runs with.
pub fn defines() -> Vec<(String, String)> {
    vec![("ext_if".to_string(), "wan0".to_string())]
}

/// A monotonic clock for engines in tests: nanoseconds since first use.
pub fn clock() -> sluice_time::Instant {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    let t = START.get_or_init(std::time::Instant::now).elapsed();
    sluice_time::Instant(u64::try_from(t.as_nanos()).unwrap_or(u64::MAX))
}

/// A served example daemon; dropping it stops the server and removes its
/// directory.
pub struct TestDaemon {
    pub dir: PathBuf,
    pub sock: PathBuf,
    pub state: Arc<DaemonState>,
    /// Times the data plane was woken.
    pub wakes: Arc<AtomicU64>,
    pub handle: Option<JoinHandle<()>>,
}

impl TestDaemon {
    /// The engine receives, on the LAN side, a UDP datagram from
    /// `src:sport` to `192.0.2.1:dport` with `payload` bytes.
    pub fn receive_udp(&self, src: Ipv4Addr, sport: u16, dport: u16, payload: usize) {
        let f = sluice_wire::build::udp_v4(src, Ipv4Addr::new(192, 0, 2, 1), sport, dport, payload);
        crate::lock(&self.state).handle_rx(clock(), LAN, f);
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory under the system's temporary one, unique to this
/// process and `name`.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-ctl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create a temporary directory");
    d
}

/// The example daemon, served: [`EXAMPLE_CONF`] loaded from `DIR/pf.conf`,
/// an engine that has seen one TCP connection and 20 UDP datagrams into a
/// 10-packet queue, and sent up to 3 of them. Panics on any failure (a
/// fixture).
pub fn example_daemon(name: &str) -> TestDaemon {
    let dir = tmpdir(name);
    let conf = dir.join("pf.conf");
    std::fs::write(&conf, EXAMPLE_CONF).expect("write pf.conf");
    let loaded = load(&conf, &defines())
        .expect("the example config checks")
        .loaded;
    let engine = Engine::new(&loaded.config, Options::bridge("lan0", "wan0", [7; 16]))
        .expect("the example engine builds");
    let wakes = Arc::new(AtomicU64::new(0));
    let w = wakes.clone();
    let state = Arc::new(DaemonState {
        engine: Arc::new(Mutex::new(engine)),
        running: Running::new(loaded),
        config_path: conf,
        now: clock,
        started: std::time::Instant::now(),
        ifaces: ["lan0".into(), "wan0".into()],
        io_method: "test".into(),
        io_stats: Arc::new(|| vec![("rx_ring_drops".to_string(), 3)]),
        xdp_queues: Arc::new(Vec::new),
        wake: Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }),
        stop: Arc::new(AtomicBool::new(false)),
        clients: crate::conn::Clients::new(crate::server::MAX_CLIENTS, crate::metrics::MAX_CLIENTS),
    });
    let sock = dir.join("ctl.sock");
    let handle = crate::spawn_control(&sock, state.clone()).expect("serve the control socket");
    let d = TestDaemon {
        dir,
        sock,
        state,
        wakes,
        handle: Some(handle),
    };
    let syn = sluice_wire::build::tcp(
        Ipv4Addr::new(10, 0, 0, 2),
        Ipv4Addr::new(192, 0, 2, 1),
        40000,
        80,
        sluice_wire::tcp_flags::SYN,
        0,
    );
    crate::lock(&d.state).handle_rx(clock(), LAN, syn);
    for i in 0..20 {
        d.receive_udp(Ipv4Addr::new(10, 0, 0, 2), 5000 + i, 53, 1000);
    }
    // The token bucket starts full enough for a few packets.
    let (mut e, mut sent) = (crate::lock(&d.state), 0);
    while sent < 3 && e.poll_tx(clock(), WAN).is_some() {
        sent += 1;
    }
    assert!(sent > 0, "nothing left the queue");
    drop(e);
    d
}
