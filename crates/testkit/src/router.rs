//! A router with NAT in network namespaces: the shape `sluice run --attach`
//! is tested on (issue #38). Built with `sluice_lab::netns::Topology`.
//!
//! ```text
//!  c1 10.81.1.11 ─┐                 router (ip_forward, nft masquerade on wan0)
//!                 sw (br0) ── lan0 ∈ br-lan 10.81.1.1/24
//!  c2 10.81.1.12 ─┘                  wan0 10.81.2.1/24 ── m0  modem  m1 ── s0  server
//!                                                 10.81.2.2  htb+pfifo  10.81.3.1  10.81.3.2
//! ```
//! - The LAN interface is a port of the router's bridge `br-lan` (which
//!   holds the router's LAN address), as on OpenWrt; the clients share a
//!   switch (its own namespace) in front of it.
//! - The modem is the bottleneck the shaper must stay under: htb at
//!   [`RouterLab::new`]'s rate each way with a 1000-packet pfifo.
//! - [`NetState`] is the router's configuration as data (`ip -j addr`,
//!   `ip -j route show table all`, `bridge -j link`, the permanent
//!   neighbours: wan0 has one), normalised only for
//!   what the kernel itself varies: the order of equal-rank entries and
//!   an address's `tentative` flag while DAD runs.
//! - Dropping the lab removes sluice's `--attach` state files of the
//!   router's namespace (a deleted namespace's inode may be reused).
//! - The router's daemons (dnsmasq, busybox udhcpc) are spawned through
//!   the topology, so they die with the lab; their files (pid, leases,
//!   log, the client's event log) live in the lab's directory.
//!   [`RouterLab::lan_direct`] and [`RouterLab::wan_dynamic`] reshape the
//!   router for them: the LAN address on `lan0` itself (a Debian box, no
//!   bridge), the WAN address left to a DHCP client.

use sluice_lab::bridge::RunDir;
use sluice_lab::netns::{Netns, ProcId, Topology};
use std::io;
use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub const LAN_IF: &str = "lan0";
pub const WAN_IF: &str = "wan0";
pub const ROUTER_LAN_IP: &str = "10.81.1.1";
pub const CLIENT_IPS: [&str; 2] = ["10.81.1.11", "10.81.1.12"];
pub const SERVER_IP: &str = "10.81.3.2";
/// The shaper the router tests run: 8 Mbit/s each way (under the modem),
/// each direction's flows isolated per LAN host.
pub const SHAPER: &str = "queue up on $ext_if bandwidth 8M max 8M\n\
    queue up_q parent up flows 1024 bandwidth 8M default dual-srchost\n\
    queue dn on $int_if bandwidth 8M max 8M\n\
    queue dn_q parent dn flows 1024 bandwidth 8M default dual-dsthost\n\
    pass all\n";
/// How long a started sluice has to answer on its control socket.
pub const START_WAIT: Duration = Duration::from_secs(10);
/// sluice's runtime directory (`sluice_control::RUNTIME_DIR`).
const RUNTIME_DIR: &str = "/run/sluice";

static LABS: AtomicU32 = AtomicU32::new(0);

pub struct RouterLab {
    pub topo: Topology,
    pub router: Netns,
    pub clients: [Netns; 2],
    pub modem: Netns,
    pub server: Netns,
    pub sluice: Option<ProcId>,
    pub dir: RunDir,
}

/// The router's configuration as data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetState {
    pub links: Vec<String>,
    pub routes: Vec<String>,
    pub bridge: Vec<String>,
    /// `ip -j neigh show nud permanent`.
    pub neighs: Vec<String>,
}

impl RouterLab {
    /// The namespaces, links, addresses, NAT and the modem at `modem_rate`
    /// (tc's syntax: `20mbit`) each way.
    pub fn new(tag: &str, modem_rate: &str) -> io::Result<RouterLab> {
        let mut topo = Topology::new(tag);
        let router = topo.add_ns("rt")?;
        let sw = topo.add_ns("sw")?;
        let clients = [topo.add_ns("c1")?, topo.add_ns("c2")?];
        let modem = topo.add_ns("mdm")?;
        let server = topo.add_ns("srv")?;
        let n = LABS.fetch_add(1, Ordering::Relaxed);
        let dir = RunDir::create(&format!("{}-{n}", router.name()))?;
        let lab = RouterLab {
            topo,
            router,
            clients,
            modem,
            server,
            sluice: None,
            dir,
        };
        lab.wire(&sw, modem_rate)?;
        Ok(lab)
    }

    fn wire(&self, sw: &Netns, modem_rate: &str) -> io::Result<()> {
        let (t, rt) = (&self.topo, &self.router);
        // The LAN: two clients and the router's lan0 on one switch.
        t.ip(sw, &["link", "add", "br0", "type", "bridge"])?;
        for (i, c) in self.clients.iter().enumerate() {
            let port = format!("p{i}");
            t.veth(c, "c0", sw, &port)?;
            t.ip(sw, &["link", "set", &port, "master", "br0"])?;
            t.addr(c, "c0", &format!("{}/24", CLIENT_IPS[i]))?;
            t.ip(c, &["route", "add", "default", "via", ROUTER_LAN_IP])?;
        }
        t.veth(rt, LAN_IF, sw, "p9")?;
        t.ip(sw, &["link", "set", "p9", "master", "br0"])?;
        t.ip(sw, &["link", "set", "br0", "up"])?;
        t.ip(rt, &["link", "add", "br-lan", "type", "bridge"])?;
        t.ip(rt, &["link", "set", LAN_IF, "master", "br-lan"])?;
        t.ip(rt, &["link", "set", "br-lan", "up"])?;
        t.addr(rt, "br-lan", &format!("{ROUTER_LAN_IP}/24"))?;
        // The WAN: router — modem — server.
        t.veth(rt, WAN_IF, &self.modem, "m0")?;
        t.veth(&self.modem, "m1", &self.server, "s0")?;
        t.addr(rt, WAN_IF, "10.81.2.1/24")?;
        t.addr(&self.modem, "m0", "10.81.2.2/24")?;
        t.addr(&self.modem, "m1", "10.81.3.1/24")?;
        t.addr(&self.server, "s0", &format!("{SERVER_IP}/24"))?;
        t.ip(rt, &["route", "add", "default", "via", "10.81.2.2"])?;
        // An administrator's static entry, which --attach wan0 must move.
        t.neigh(rt, WAN_IF, "10.81.2.99", "02:00:00:00:00:99")?;
        t.ip(
            &self.server,
            &["route", "add", "default", "via", "10.81.3.1"],
        )?;
        for ns in [rt, &self.modem] {
            t.exec(ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        }
        for cmd in [
            "add table ip nat",
            "add chain ip nat post { type nat hook postrouting priority 100 ; }",
            &format!("add rule ip nat post oifname \"{WAN_IF}\" masquerade"),
        ] {
            t.exec(rt, &["nft", cmd])?;
        }
        for dev in ["m0", "m1"] {
            t.exec(
                &self.modem,
                &[
                    "tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default",
                    "1",
                ],
            )?;
            t.exec(
                &self.modem,
                &[
                    "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                    "rate", modem_rate, "ceil", modem_rate,
                ],
            )?;
            t.exec(
                &self.modem,
                &[
                    "tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo",
                    "limit", "1000",
                ],
            )?;
        }
        Ok(())
    }

    /// One ping (1 s timeout) from `from` to `to` answered.
    pub fn ping(&self, from: &Netns, to: &str) -> bool {
        self.topo
            .exec_unchecked(from, &["ping", "-c", "1", "-W", "1", to])
            .is_ok_and(|o| o.status.success())
    }

    /// A ping answered within `tries` tries.
    pub fn reaches(&self, from: &Netns, to: &str, tries: u32) -> bool {
        (0..tries).any(|_| self.ping(from, to))
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

    /// `bin run -f CONF --control CTL ARGS…` in the router, output to the
    /// lab's log; does not wait.
    pub fn spawn_sluice(&mut self, bin: &str, conf: &str, args: &[&str]) -> io::Result<ProcId> {
        let conf = self.write_conf(conf)?;
        let ctl = self.control_path();
        let mut cmd = vec![bin, "run", "-f", &conf, "--control", &ctl];
        cmd.extend_from_slice(args);
        let (rt, log) = (self.router.clone(), self.log_path());
        let id = self.topo.spawn(&rt, &cmd, Some(&log))?;
        self.sluice = Some(id);
        Ok(id)
    }

    /// [`spawn_sluice`](Self::spawn_sluice), then waits (at most
    /// [`START_WAIT`]) until it answers on its control socket; panics with
    /// its log if it exits first or never answers.
    pub fn start_sluice(&mut self, bin: &str, conf: &str, args: &[&str]) -> ProcId {
        let id = self.spawn_sluice(bin, conf, args).expect("spawn sluice");
        let mut exited = None;
        let up = crate::wait_for(START_WAIT, || {
            exited = self.topo.try_status(id).ok().flatten();
            exited.is_some() || self.answers(bin)
        });
        assert!(
            up && exited.is_none(),
            "sluice {args:?} did not come up ({exited:?}):\n{}",
            self.log()
        );
        id
    }

    /// SIGTERM to the sluice `id`; panics with its log unless it exits
    /// cleanly within its grace.
    pub fn stop_sluice(&mut self, id: ProcId) {
        let st = self.topo.stop(id, "TERM").expect("stopping sluice");
        assert!(
            st.is_some_and(|s| s.success()),
            "sluice did not stop cleanly ({st:?}):\n{}",
            self.log()
        );
        self.sluice = None;
    }

    /// `bin ARGS…` in the router, to completion.
    pub fn sluice_cmd(&self, bin: &str, args: &[&str]) -> io::Result<Output> {
        let mut cmd = vec![bin];
        cmd.extend_from_slice(args);
        self.topo.exec_unchecked(&self.router, &cmd)
    }

    /// Whether the running sluice answers `show info`.
    pub fn answers(&self, bin: &str) -> bool {
        let ctl = self.control_path();
        self.sluice_cmd(bin, &["show", "info", "--control", &ctl])
            .is_ok_and(|o| o.status.success())
    }

    /// The router's configuration, once no address is tentative (DAD
    /// done, at most `wait`).
    pub fn state(&self, wait: Duration) -> io::Result<NetState> {
        let t0 = std::time::Instant::now();
        loop {
            let links = self.json(&["ip", "-j", "addr"])?;
            let tentative = links.iter().any(|l| {
                l["addr_info"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x.get("tentative").is_some()))
            });
            if !tentative || t0.elapsed() > wait {
                return Ok(NetState {
                    links: links.into_iter().map(normal_link).collect(),
                    routes: sorted(self.json(&["ip", "-j", "route", "show", "table", "all"])?),
                    bridge: sorted(self.json(&["bridge", "-j", "link"])?),
                    neighs: sorted(self.json(&[
                        "ip",
                        "-j",
                        "neigh",
                        "show",
                        "nud",
                        "permanent",
                    ])?),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn json(&self, cmd: &[&str]) -> io::Result<Vec<serde_json::Value>> {
        let out = self.topo.exec(&self.router, cmd)?;
        let text = String::from_utf8_lossy(&out.stdout);
        let text = if text.trim().is_empty() {
            "[]"
        } else {
            text.trim()
        };
        serde_json::from_str(text).map_err(|e| io::Error::other(format!("{cmd:?}: {e}")))
    }

    /// The Debian shape: `lan0` out of `br-lan`, the router's LAN address
    /// on `lan0` itself, `br-lan` gone.
    pub fn lan_direct(&self) -> io::Result<()> {
        let (t, rt) = (&self.topo, &self.router);
        t.ip(rt, &["link", "set", LAN_IF, "nomaster"])?;
        t.ip(rt, &["link", "del", "br-lan"])?;
        t.addr(rt, LAN_IF, &format!("{ROUTER_LAN_IP}/24"))
    }

    /// `wan0` without its static IPv4 address and default route (and the
    /// permanent neighbour, which went with the last address): a DHCP
    /// client's to set. The IPv6 link-local address stays, as with any
    /// DHCP client.
    pub fn wan_dynamic(&self) -> io::Result<()> {
        self.topo
            .ip(&self.router, &["-4", "addr", "flush", "dev", WAN_IF])
            .map(|_| ())
    }

    /// dnsmasq in `ns`, in the foreground as root, with no configuration
    /// file, no upstream and no hosts file, and without its ping of an
    /// address before offering it (a delay of seconds that would only
    /// make the tests' clients retry); `args` add the interface,
    /// ranges and mode. Its pid file, leases and log are the lab's
    /// `dnsmasq-TAG.*`. Waits (at most `wait`) until it has logged its
    /// start: an error with its output if it exits or stays silent.
    pub fn spawn_dnsmasq(
        &mut self,
        ns: &Netns,
        tag: &str,
        args: &[&str],
        wait: Duration,
    ) -> io::Result<ProcId> {
        let f = |ext: &str| self.dir.join(format!("dnsmasq-{tag}.{ext}"));
        let (pid, leases, log, out) = (f("pid"), f("leases"), f("log"), f("out"));
        let opts = [
            format!("--pid-file={}", pid.display()),
            format!("--dhcp-leasefile={}", leases.display()),
            format!("--log-facility={}", log.display()),
        ];
        let mut cmd = vec![
            "dnsmasq",
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--user=root",
            "--group=root",
            "--no-resolv",
            "--no-hosts",
            "--log-dhcp",
            "--log-queries",
            "--no-ping",
        ];
        cmd.extend(opts.iter().map(String::as_str));
        cmd.extend_from_slice(args);
        let id = self.topo.spawn(ns, &cmd, Some(&out))?;
        let t0 = std::time::Instant::now();
        loop {
            if std::fs::read_to_string(&log).is_ok_and(|l| l.contains("started, version")) {
                return Ok(id);
            }
            if self.topo.try_status(id)?.is_some() || t0.elapsed() > wait {
                let said = std::fs::read_to_string(&out).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "dnsmasq {args:?} did not start: {said}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The log of the dnsmasq spawned as `tag`.
    pub fn dnsmasq_log(&self, tag: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("dnsmasq-{tag}.log"))).unwrap_or_default()
    }

    /// A busybox `udhcpc -s` script in the lab's directory: each event
    /// (`deconfig`, `bound`, `renew`, `leasefail`, …) appends a line
    /// `EVENT ip=… router=… dns=…` to `NAME.events` and to its stdout;
    /// with `apply` the lease is applied as udhcpc's default script does
    /// (address, default route). Its path.
    pub fn udhcpc_script(&self, name: &str, apply: bool) -> io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let events = self.dir.join(format!("{name}.events"));
        let apply = if apply {
            "case \"$1\" in\n\
             deconfig) ip -4 addr flush dev \"$interface\"; ip link set \"$interface\" up ;;\n\
             bound|renew) ip addr replace \"$ip/${mask:-24}\" dev \"$interface\"\n\
             \x20 [ -n \"$router\" ] && ip route replace default via \"$router\" dev \"$interface\" ;;\n\
             esac\n"
        } else {
            ""
        };
        let script = format!(
            "#!/bin/sh\n\
             line=\"$1 ip=$ip router=$router dns=$dns\"\n\
             echo \"$line\"; echo \"$line\" >> '{}'\n\
             {apply}exit 0\n",
            events.display()
        );
        let path = self.dir.join(format!("{name}.sh"));
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(path)
    }

    /// dhcpcd on the router's `ifname`, IPv4 only, in the foreground with
    /// no hook script and no ARP probe of the offered address. Its
    /// run and lease directories are fixed host paths (`/run/dhcpcd`,
    /// `/var/lib/dhcpcd`, the package's): it runs in a mount namespace of
    /// its own with a tmpfs on `/run` and on `/var/lib/dhcpcd`, so that it
    /// neither sees nor leaves host state.
    pub fn spawn_dhcpcd(&mut self, ifname: &str) -> io::Result<ProcId> {
        let conf = self.dir.join("dhcpcd.conf");
        std::fs::write(&conf, "ipv4only\nnoarp\noption routers\n")?;
        let script = format!(
            "mount -t tmpfs sl-dhcpcd /run && \
             mount -t tmpfs sl-dhcpcd /var/lib/dhcpcd && \
             exec dhcpcd -B -4 -c /bin/true -f '{}' {ifname}",
            conf.display()
        );
        let (rt, log) = (self.router.clone(), self.dir.join("dhcpcd.out"));
        self.topo.spawn(
            &rt,
            &[
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ],
            Some(&log),
        )
    }

    /// The events a [`RouterLab::udhcpc_script`] named `name` logged.
    pub fn udhcpc_events(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(format!("{name}.events")))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The netns inode of the router (names sluice's state files).
    fn router_inode(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/run/netns/{}", self.router.name()))
            .ok()
            .map(|m| m.ino())
    }

    /// Sluice's `--attach IF` state file of the router, if there is one.
    pub fn attach_state(&self, ifname: &str) -> Option<PathBuf> {
        let p = PathBuf::from(RUNTIME_DIR)
            .join(format!("attach-{}-{ifname}.state", self.router_inode()?));
        p.exists().then_some(p)
    }
}

/// A link of `ip -j addr`, its addresses in a fixed order and without the
/// DAD flag.
fn normal_link(mut l: serde_json::Value) -> String {
    if let Some(a) = l.get_mut("addr_info").and_then(|a| a.as_array_mut()) {
        for x in a.iter_mut() {
            if let Some(o) = x.as_object_mut() {
                o.remove("tentative");
            }
        }
        a.sort_by_key(|x| x.to_string());
    }
    l.to_string()
}

fn sorted(v: Vec<serde_json::Value>) -> Vec<String> {
    let mut s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    s.sort();
    s
}

impl Drop for RouterLab {
    fn drop(&mut self) {
        for i in [LAN_IF, WAN_IF] {
            if let Some(p) = self.attach_state(i) {
                let _ = std::fs::remove_file(p);
            }
        }
        self.dir.remove();
    }
}
