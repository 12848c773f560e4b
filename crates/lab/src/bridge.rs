//! The three-namespace path every end-to-end test and the lab start from:
//!
//! ```text
//!   client ns  c0 ── lan0  shaper ns (sluice --bridge lan0,wan0)  wan0 ── v0  server ns
//!   10.77.0.1/24                                                      10.77.0.2/24
//! ```
//!
//! Upload (client → server) leaves sluice through `wan0` (`$ext_if`),
//! download through `lan0` (`$int_if`). Neighbour entries are static so the
//! first packets of a test need no ARP; each lab has its own directory for
//! the config, the log and the control socket (never the system's
//! `/run/sluice/sluice.sock`, so a test cannot meet a real daemon). A test of
//! another sluice command in the middle (`delay-line`) names the two
//! interfaces and lets ARP cross instead ([`Wiring`]).

use crate::netns::{Netns, ProcId, Topology};
use sluice_control::proto::{InfoReply, QueuesReply, Reply};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

pub const CLIENT_IP: &str = "10.77.0.1";
pub const SERVER_IP: &str = "10.77.0.2";
/// Nobody's: the client ARPs for it to announce itself through sluice.
const UNUSED_LAN_IP: &str = "10.77.0.254";

/// How long `spawn_sluice` waits for the first ping to cross.
const PATH_WAIT_TRIES: u32 = 50;
const PATH_WAIT_STEP: Duration = Duration::from_millis(100);

/// The middle namespace's two interfaces and how the hosts find each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wiring {
    /// The middle's end of the client's link (`$int_if` for `sluice run`).
    pub lan: &'static str,
    /// The middle's end of the server's link (`$ext_if`).
    pub wan: &'static str,
    /// Permanent neighbour entries on both hosts: no ARP on the path. Off,
    /// the first ping of a test also proves that ARP crosses the middle.
    pub static_neighbours: bool,
}

impl Wiring {
    /// `sluice run --bridge lan0,wan0` with static neighbours.
    pub const SHAPER: Wiring = Wiring {
        lan: "lan0",
        wan: "wan0",
        static_neighbours: true,
    };
}

/// Client, shaper and server namespaces joined by two veth pairs.
pub struct BridgeLab {
    pub topo: Topology,
    pub client: Netns,
    pub shaper: Netns,
    pub server: Netns,
    pub wiring: Wiring,
    /// Scratch directory of this lab (removed on drop).
    pub dir: RunDir,
    sluice: Option<ProcId>,
}

/// A lab's scratch directory, where its sluice runs: the control socket,
/// the log and the `pf.conf` it reads, named alike in every lab (this
/// one, the test kit's router lab). It reads as the path it is.
#[derive(Clone, Debug)]
pub struct RunDir(PathBuf);

impl std::ops::Deref for RunDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for RunDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl RunDir {
    /// `name` under the system's temporary directory, made if missing.
    pub fn create(name: &str) -> io::Result<RunDir> {
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir)?;
        Ok(RunDir(dir))
    }

    pub fn control_path(&self) -> String {
        self.join("ctl.sock").to_string_lossy().into_owned()
    }

    pub fn log_path(&self) -> PathBuf {
        self.join("sluice.log")
    }

    /// What sluice has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Writes `conf` to the directory's `pf.conf` (returns its path).
    pub fn write_conf(&self, conf: &str) -> io::Result<String> {
        let p = self.join("pf.conf");
        std::fs::write(&p, conf)?;
        Ok(p.to_string_lossy().into_owned())
    }

    /// Removes the directory and all in it (a lab's last act).
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl BridgeLab {
    /// Builds the namespaces for `sluice run` ([`Wiring::SHAPER`]); `tag`
    /// (a few letters) names them.
    pub fn new(tag: &str) -> io::Result<BridgeLab> {
        BridgeLab::with_wiring(tag, Wiring::SHAPER)
    }

    /// Builds the namespaces with the middle's interfaces as `wiring` says.
    pub fn with_wiring(tag: &str, wiring: Wiring) -> io::Result<BridgeLab> {
        BridgeLab::build(tag, wiring, None)
    }

    /// As [`BridgeLab::new`] with `queues` RX and TX queues on both ends of
    /// both links (a multi-queue NIC on each side of sluice).
    pub fn with_queues(tag: &str, queues: u32) -> io::Result<BridgeLab> {
        BridgeLab::build(tag, Wiring::SHAPER, Some(queues))
    }

    fn build(tag: &str, wiring: Wiring, queues: Option<u32>) -> io::Result<BridgeLab> {
        let mut topo = Topology::new(tag);
        let client = topo.add_ns("c")?;
        let shaper = topo.add_ns("s")?;
        let server = topo.add_ns("v")?;
        topo.veth_queues(&client, "c0", &shaper, wiring.lan, queues)?;
        topo.veth_queues(&server, "v0", &shaper, wiring.wan, queues)?;
        topo.addr(&client, "c0", &format!("{CLIENT_IP}/24"))?;
        topo.addr(&server, "v0", &format!("{SERVER_IP}/24"))?;
        if wiring.static_neighbours {
            let (cmac, smac) = (topo.mac(&client, "c0")?, topo.mac(&server, "v0")?);
            topo.neigh(&client, "c0", SERVER_IP, &smac)?;
            topo.neigh(&server, "v0", CLIENT_IP, &cmac)?;
        }
        let dir = RunDir::create(client.name())?;
        Ok(BridgeLab {
            topo,
            client,
            shaper,
            server,
            wiring,
            dir,
            sluice: None,
        })
    }

    /// The lab's [`RunDir`]'s, as every test calls them.
    pub fn control_path(&self) -> String {
        self.dir.control_path()
    }
    pub fn log_path(&self) -> PathBuf {
        self.dir.log_path()
    }
    pub fn log(&self) -> String {
        self.dir.log()
    }
    pub fn write_conf(&self, conf: &str) -> io::Result<String> {
        self.dir.write_conf(conf)
    }

    /// Starts `bin run -f pf.conf --bridge LAN,WAN --control …` in the
    /// shaper namespace and waits until a ping crosses it.
    pub fn start_sluice(
        &mut self,
        bin: &str,
        conf: &str,
        extra: &[&str],
    ) -> Result<ProcId, String> {
        let log = self.log_path();
        self.start_sluice_to(bin, conf, extra, &log)
    }

    /// [`BridgeLab::start_sluice`] with stdout and stderr in `out` (appended)
    /// instead of the lab's log: `/dev/full` to test a full disk.
    pub fn start_sluice_to(
        &mut self,
        bin: &str,
        conf: &str,
        extra: &[&str],
        out: &Path,
    ) -> Result<ProcId, String> {
        let conf_path = self.write_conf(conf).map_err(|e| e.to_string())?;
        let ctl = self.control_path();
        let bridge = format!("{},{}", self.wiring.lan, self.wiring.wan);
        let mut args = vec![
            "run",
            "-f",
            &conf_path,
            "--bridge",
            &bridge,
            "--control",
            &ctl,
        ];
        args.extend_from_slice(extra);
        self.spawn_to(bin, &args, out)
    }

    /// Starts `bin ARGS…` (any sluice command that joins the two
    /// interfaces) in the shaper namespace, its output in
    /// [`BridgeLab::log_path`], and waits until a ping crosses it; `Err`
    /// if it exits first or no ping crosses within ~5 s.
    pub fn spawn_sluice(&mut self, bin: &str, args: &[&str]) -> Result<ProcId, String> {
        let log = self.log_path();
        self.spawn_to(bin, args, &log)
    }

    fn spawn_to(&mut self, bin: &str, args: &[&str], out: &Path) -> Result<ProcId, String> {
        let mut cmd = vec![bin];
        cmd.extend_from_slice(args);
        let shaper = self.shaper.clone();
        let id = self
            .topo
            .spawn(&shaper, &cmd, Some(out))
            .map_err(|e| format!("starting sluice: {e}"))?;
        self.sluice = Some(id);
        for _ in 0..PATH_WAIT_TRIES {
            if self.ping_once() {
                if self.wiring.static_neighbours {
                    // The client never ARPs otherwise, and `from $ext_if`
                    // means the addresses LAN hosts claim in ARP/ND.
                    self.topo
                        .arp_from(&self.client, UNUSED_LAN_IP)
                        .map_err(|e| format!("client ARP: {e}"))?;
                }
                return Ok(id);
            }
            if self
                .topo
                .try_status(id)
                .map_err(|e| e.to_string())?
                .is_some()
            {
                return Err(format!("sluice exited early:\n{}", self.log()));
            }
            std::thread::sleep(PATH_WAIT_STEP);
        }
        Err(format!("no path through sluice:\n{}", self.log()))
    }

    /// One ping client → server, 1 s timeout.
    pub fn ping_once(&self) -> bool {
        self.topo
            .exec(&self.client, &["ping", "-c", "1", "-W", "1", SERVER_IP])
            .is_ok()
    }

    /// True while the sluice started by `spawn_sluice` runs.
    pub fn sluice_alive(&mut self) -> bool {
        match self.sluice {
            Some(id) => matches!(self.topo.try_status(id), Ok(None)),
            None => false,
        }
    }

    /// The pid of the running sluice.
    pub fn sluice_pid(&self) -> Option<u32> {
        self.sluice.and_then(|id| self.topo.pid(id))
    }

    /// Runs a client command (`show …`, `reload …`, `stop`) against this
    /// lab's daemon, whatever its exit status.
    pub fn ctl(&self, bin: &str, args: &[&str]) -> io::Result<Output> {
        let ctl = self.control_path();
        let mut v = vec![bin];
        v.extend_from_slice(args);
        v.extend(["--control", &ctl]);
        self.topo.exec_unchecked(&self.shaper, &v)
    }

    /// The running sluice's typed answer to `show WHAT --json` (`info`,
    /// `queues`, `states`, `rules`).
    pub fn show(&self, bin: &str, what: &str) -> Result<Reply, String> {
        let out = self
            .ctl(bin, &["show", what, "--json"])
            .map_err(|e| format!("show {what}: {e}"))?;
        serde_json::from_slice::<Reply>(&out.stdout).map_err(|e| {
            format!(
                "show {what} --json: {e}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
    }

    /// `show info` of the running sluice.
    pub fn info(&self, bin: &str) -> Result<InfoReply, String> {
        match self.show(bin, "info")? {
            Reply::Info(i) => Ok(*i),
            other => Err(format!("show info answered {other:?}")),
        }
    }

    /// `show queues` of the running sluice.
    pub fn queues(&self, bin: &str) -> Result<QueuesReply, String> {
        match self.show(bin, "queues")? {
            Reply::Queues(q) => Ok(q),
            other => Err(format!("show queues answered {other:?}")),
        }
    }

    /// The I/O method the running sluice reports (`show info`'s
    /// `io_method`): what runs, which is not what `--io` asked for where a
    /// method fell back.
    pub fn io_method(&self, bin: &str) -> Result<String, String> {
        self.info(bin).map(|i| i.io_method)
    }

    /// An I/O counter of the running sluice by name (`lan0_link_down`,
    /// `show info`'s `io` list): `None` if it has no such counter. Panics
    /// (with sluice's log) if `show info` does not answer: for tests.
    pub fn io_counter(&self, bin: &str, name: &str) -> Option<u64> {
        let info = self
            .info(bin)
            .unwrap_or_else(|e| panic!("show info: {e}\n{}", self.log()));
        info.io.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Stops sluice with SIGTERM; its exit status.
    pub fn stop_sluice(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        match self.sluice.take() {
            Some(id) => self.topo.stop(id, "TERM"),
            None => Ok(None),
        }
    }
}

impl Drop for BridgeLab {
    fn drop(&mut self) {
        self.dir.remove();
    }
}
