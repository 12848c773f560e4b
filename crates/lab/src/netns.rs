//! Namespaces, veth pairs and processes inside them.

use std::io;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// How long `stop` waits for a child to exit after its signal before
/// killing it: generous for a clean shutdown, short enough for a test.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Poll period while waiting for a child.
const WAIT_STEP: Duration = Duration::from_millis(20);

/// A namespace created by a [`Topology`] (its full, unique name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Netns(pub String);

impl Netns {
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// A process started by [`Topology::spawn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcId(usize);

/// True when running as root with `ip` and every tool in `extra` on PATH;
/// otherwise the reason, for a SKIP line.
pub fn have_tools(extra: &[&str]) -> Result<(), String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("id: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    for tool in std::iter::once(&"ip").chain(extra) {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !found {
            return Err(format!("{tool} not found"));
        }
    }
    Ok(())
}

/// The start of every namespace name of the topologies tagged `tag` made by
/// process `pid`.
fn name_prefix(tag: &str, pid: u32) -> String {
    format!("sl-{tag}-{pid}-")
}

/// The namespaces of topologies tagged `tag` made by process `pid` that
/// still exist (`ip netns list`): empty once every one has been dropped,
/// whatever way the process ended.
pub fn leftover_namespaces(tag: &str, pid: u32) -> io::Result<Vec<String>> {
    let out = run(Command::new("ip").args(["netns", "list"]))?;
    let prefix = name_prefix(tag, pid);
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect())
}

/// Namespaces, links and children of one test, torn down on drop.
pub struct Topology {
    prefix: String,
    namespaces: Vec<Netns>,
    children: Vec<Option<Child>>,
}

fn run(cmd: &mut Command) -> io::Result<Output> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out)
}

impl Topology {
    /// A new, empty topology; `tag` (a few letters) names it in `ip netns`.
    pub fn new(tag: &str) -> Topology {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        Topology {
            prefix: format!("{}{n}", name_prefix(tag, std::process::id())),
            namespaces: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Creates namespace `<prefix>-<name>` with loopback up.
    pub fn add_ns(&mut self, name: &str) -> io::Result<Netns> {
        let ns = Netns(format!("{}-{name}", self.prefix));
        run(Command::new("ip").args(["netns", "add", &ns.0]))?;
        self.namespaces.push(ns.clone());
        self.ip(&ns, &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs `ip -n NS ARGS…`.
    pub fn ip(&self, ns: &Netns, args: &[&str]) -> io::Result<Output> {
        run(Command::new("ip").arg("-n").arg(&ns.0).args(args))
    }

    /// A veth pair `a_if` in `a` — `b_if` in `b`, both up, with TSO, GSO,
    /// GRO and TX checksum offload off on both ends (so every frame is
    /// wire-sized and carries a complete checksum through AF_PACKET).
    pub fn veth(&self, a: &Netns, a_if: &str, b: &Netns, b_if: &str) -> io::Result<()> {
        self.veth_queues(a, a_if, b, b_if, None)
    }

    /// As [`Topology::veth`], each end with `queues` RX and TX queues
    /// (`None`: the kernel's default, one in use): a multi-queue NIC.
    pub fn veth_queues(
        &self,
        a: &Netns,
        a_if: &str,
        b: &Netns,
        b_if: &str,
        queues: Option<u32>,
    ) -> io::Result<()> {
        let q = queues.map(|n| n.to_string());
        let nq: Vec<&str> = match &q {
            Some(n) => vec!["numrxqueues", n, "numtxqueues", n],
            None => vec![],
        };
        run(Command::new("ip")
            .args(["link", "add", a_if, "netns", &a.0])
            .args(&nq)
            .args(["type", "veth", "peer", "name", b_if, "netns", &b.0])
            .args(&nq))?;
        for (ns, ifname) in [(a, a_if), (b, b_if)] {
            self.exec(
                ns,
                &[
                    "ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                ],
            )?;
            self.ip(ns, &["link", "set", ifname, "up"])?;
        }
        Ok(())
    }

    /// Adds an address (`10.0.0.1/24`) to an interface.
    pub fn addr(&self, ns: &Netns, ifname: &str, cidr: &str) -> io::Result<()> {
        self.ip(ns, &["addr", "add", cidr, "dev", ifname])
            .map(|_| ())
    }

    /// The MAC address of an interface.
    pub fn mac(&self, ns: &Netns, ifname: &str) -> io::Result<String> {
        let out = self.exec(ns, &["cat", &format!("/sys/class/net/{ifname}/address")])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// A permanent neighbour entry, so no ARP is needed on the path.
    pub fn neigh(&self, ns: &Netns, ifname: &str, ip: &str, mac: &str) -> io::Result<()> {
        self.ip(
            ns,
            &[
                "neigh",
                "replace",
                ip,
                "lladdr",
                mac,
                "dev",
                ifname,
                "nud",
                "permanent",
            ],
        )
        .map(|_| ())
    }

    /// Makes `ns`'s kernel send an ARP request carrying its own address
    /// (RFC 826 sender fields) by sending one datagram to `unused`, an
    /// unassigned address on one of `ns`'s links: what a host with static
    /// neighbours otherwise never does. sluice in bridge mode learns
    /// `$ext_if`'s addresses from such claims only (docs/dataplane.md).
    pub fn arp_from(&self, ns: &Netns, unused: &str) -> io::Result<()> {
        let script = format!("echo > /dev/udp/{unused}/9");
        self.exec(ns, &["bash", "-c", &script]).map(|_| ())
    }

    /// Runs a command inside `ns` to completion; non-zero exit is an error.
    pub fn exec(&self, ns: &Netns, cmd: &[&str]) -> io::Result<Output> {
        run(Command::new("ip").args(["netns", "exec", &ns.0]).args(cmd))
    }

    /// Runs a command inside `ns` to completion whatever its exit status.
    pub fn exec_unchecked(&self, ns: &Netns, cmd: &[&str]) -> io::Result<Output> {
        Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .args(cmd)
            .stdin(Stdio::null())
            .output()
    }

    /// Starts a command inside `ns`; its stdout and stderr go to `log`
    /// (appended) or are discarded. The child is killed on drop.
    pub fn spawn(&mut self, ns: &Netns, cmd: &[&str], log: Option<&Path>) -> io::Result<ProcId> {
        let (out, err) = match log {
            Some(p) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?;
                (Stdio::from(f.try_clone()?), Stdio::from(f))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .args(cmd)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()?;
        self.children.push(Some(child));
        Ok(ProcId(self.children.len() - 1))
    }

    /// Starts a command inside `ns` with stdout and stderr in two files
    /// (created or truncated): a JSON printer's output stays parseable
    /// whatever it warns about. The child is killed on drop.
    pub fn spawn_split(
        &mut self,
        ns: &Netns,
        cmd: &[&str],
        stdout: &Path,
        stderr: &Path,
    ) -> io::Result<ProcId> {
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .args(cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(stdout)?))
            .stderr(Stdio::from(std::fs::File::create(stderr)?))
            .spawn()?;
        self.children.push(Some(child));
        Ok(ProcId(self.children.len() - 1))
    }

    /// The namespaces created so far (full names).
    pub fn namespaces(&self) -> &[Netns] {
        &self.namespaces
    }

    /// The pid of a spawned child (`ip netns exec` execs the command, so
    /// this is the command itself).
    pub fn pid(&self, id: ProcId) -> Option<u32> {
        self.children.get(id.0)?.as_ref().map(|c| c.id())
    }

    /// Whether the child has exited, without waiting.
    pub fn try_status(&mut self, id: ProcId) -> io::Result<Option<ExitStatus>> {
        match self.children.get_mut(id.0).and_then(|c| c.as_mut()) {
            Some(c) => c.try_wait(),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    /// Sends `signal` (e.g. "TERM", "HUP") to a child.
    pub fn signal(&self, id: ProcId, signal: &str) -> io::Result<()> {
        let pid = self
            .pid(id)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        run(Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string()))
        .map(|_| ())
    }

    /// Waits up to `limit` for a child that ends by itself; `Ok(None)` if
    /// it is still running then.
    pub fn wait(&mut self, id: ProcId, limit: Duration) -> io::Result<Option<ExitStatus>> {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.try_status(id)? {
                return Ok(Some(st));
            }
            if t0.elapsed() >= limit {
                return Ok(None);
            }
            std::thread::sleep(WAIT_STEP);
        }
    }

    /// Sends `signal` and waits for the exit; after `STOP_GRACE` the child
    /// is killed and `Ok(None)` says it did not stop on its own.
    pub fn stop(&mut self, id: ProcId, signal: &str) -> io::Result<Option<ExitStatus>> {
        if let Some(st) = self.try_status(id)? {
            return Ok(Some(st));
        }
        self.signal(id, signal)?;
        let t0 = Instant::now();
        while t0.elapsed() < STOP_GRACE {
            if let Some(st) = self.try_status(id)? {
                return Ok(Some(st));
            }
            std::thread::sleep(WAIT_STEP);
        }
        if let Some(c) = self.children.get_mut(id.0).and_then(|c| c.as_mut()) {
            let _ = c.kill();
            let _ = c.wait();
        }
        Ok(None)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            // Daemons (iperf3 -D) and grandchildren are not in `children`.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &ns.0]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-KILL", pid]).status();
                }
            }
            let _ = Command::new("ip")
                .args(["netns", "del", &ns.0])
                .stderr(Stdio::null())
                .status();
        }
    }
}
