//! sluice-testkit: what every network-namespace test shares. A dev-dependency
//! only; the namespaces themselves are built by `sluice_lab` ([`BridgeLab`],
//! [`sluice_lab::Topology`]), the one place that builds topologies.
//!
//! # Principles
//! - A test that cannot run says so. [`require_netns`], [`require_root`]
//!   and [`unavailable`] print `SKIP <binary>::<test>: <reason>` straight
//!   to stderr (libtest does not capture it, so the line shows even when
//!   the test passes; `scripts/test.sh` counts them) and the test returns
//!   early.
//! - Under CI a skip is a failure. With `SLUICE_REQUIRE_NETNS=1` (set by
//!   `scripts/test.sh` when `CI` is set or when it runs as root) the same
//!   calls panic with the reason and a hint, so a machine that lost a tool
//!   or its privileges cannot turn the suite green by skipping it. The
//!   same rule covers every other reason a test cannot run: a debug build
//!   where an optimised one is needed ([`Sluice::require_optimised`]), an
//!   `--io` method the kernel refuses ([`require_io`]).
//! - One lock per test process ([`serial`]): the machine has two cores, and
//!   two tests measuring time or rate at once would measure each other.
//!   Every guard [`require_netns`] returns holds it.
//! - One frame injector ([`INJECT`], `support/inject.py`): hand-made frames,
//!   floods, slow and counting TCP clients; [`inject`] runs it on the
//!   client of a [`BridgeLab`]. One reader of `/proc/PID/status`
//!   ([`proc_status`]).
//! - One copy of each set-up the tests repeat: [`bridge_lab`] (the lock
//!   and the namespaces), [`iperf3()`] (one run across the lab), [`modem`]
//!   (an htb bottleneck with a byte FIFO), [`listen`] and [`connect`] (the
//!   injector's TCP ends); the router's in [`router`].
//!
//! # Variables
//! - `SLUICE_REQUIRE_NETNS`: `1` (any value but empty or `0`) turns every
//!   SKIP into a failure.
//! - `SLUICE_BIN`: the sluice binary to run instead of the test build's own;
//!   taken to be optimised (`scripts/test.sh` points it at a release build).

#![forbid(unsafe_code)]

pub mod router;

use sluice_lab::iperf3::{self, ClientOptions, Iperf3Result};
use sluice_lab::netns::{Netns, ProcId};
use sluice_lab::{have_tools, BridgeLab};
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Set (to `1`) by `scripts/test.sh` under CI and as root: a test that
/// cannot run fails instead of skipping.
pub const REQUIRE_VAR: &str = "SLUICE_REQUIRE_NETNS";

/// Tools the lab's own topology runs: `ip` (namespaces, links), `ethtool`
/// (offloads off on every veth) and `ping` (waiting for the path).
const LAB_TOOLS: &[&str] = &["ip", "ethtool", "ping"];

static SERIAL: Mutex<()> = Mutex::new(());

/// Whether [`REQUIRE_VAR`] asks every test to run.
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `binary::test` of the running test: libtest names each test's thread
/// after the test, and the binary is `<file>-<hash>`.
pub fn test_name() -> String {
    let bin = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .map(|s| match s.rsplit_once('-') {
            Some((file, _hash)) => file.to_string(),
            None => s,
        })
        .unwrap_or_else(|| "?".into());
    let thread = std::thread::current();
    format!("{bin}::{}", thread.name().unwrap_or("?"))
}

/// The test cannot run here, for `reason`: prints the SKIP line and
/// returns, or, when [`required`], panics with the reason and `hint` (what
/// makes the test runnable).
pub fn unavailable(reason: &str, hint: &str) {
    let test = test_name();
    if required() {
        panic!(
            "{test} cannot run: {reason}; {hint}. {REQUIRE_VAR}=1 (scripts/test.sh sets it \
             under CI and as root) makes this a failure, not a skip; unset it to skip"
        );
    }
    // Past libtest's capture: the line must show for a test that "passed".
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: {reason} ({hint}; {REQUIRE_VAR}=1 makes this a failure)"
    );
}

/// The process-wide serial lock, held until the guard drops.
pub struct Serial {
    _guard: MutexGuard<'static, ()>,
}

/// Waits for the serial lock (a test that panicked while holding it does
/// not stop the others).
pub fn serial() -> Serial {
    Serial {
        _guard: SERIAL.lock().unwrap_or_else(|p| p.into_inner()),
    }
}

/// Root, the lab's tools and `tools`: `Some(guard)` holding the serial lock
/// when the test can run, else `None` after [`unavailable`] (which panics
/// under [`REQUIRE_VAR`]).
pub fn require_netns(tools: &[&str]) -> Option<Serial> {
    let guard = serial();
    let all: Vec<&str> = LAB_TOOLS.iter().chain(tools).copied().collect();
    require_root(&all).then_some(guard)
}

/// The start of a test on a [`BridgeLab`]: [`require_netns`] for `tools`,
/// then the lab's namespaces, named after `tag`. `None` when the test
/// cannot run (after [`unavailable`]); the guard holds the serial lock,
/// so keep it for the whole test.
pub fn bridge_lab(tag: &str, tools: &[&str]) -> Option<(Serial, BridgeLab)> {
    let serial = require_netns(tools)?;
    Some((serial, BridgeLab::new(tag).expect("namespaces")))
}

/// Root and `tools` (and `ip`) for a test that needs no namespace and
/// measures nothing: true, else false after [`unavailable`].
pub fn require_root(tools: &[&str]) -> bool {
    let tools: Vec<&str> = tools.iter().copied().filter(|t| *t != "ip").collect();
    match have_tools(&tools) {
        Ok(()) => true,
        Err(why) => {
            unavailable(&why, "run scripts/setup.sh as root");
            false
        }
    }
}

/// The sluice binary a test runs.
#[derive(Clone, Debug)]
pub struct Sluice {
    pub path: String,
    /// An optimised build: fast enough for 100 Mbit/s on two cores.
    pub optimised: bool,
}

impl Sluice {
    /// `SLUICE_BIN` when set (taken to be optimised), else `cargo_bin`, the
    /// caller's `env!("CARGO_BIN_EXE_sluice")`, optimised when this test
    /// build is (a test and its binary share the profile).
    pub fn locate(cargo_bin: &str) -> Sluice {
        match std::env::var("SLUICE_BIN") {
            Ok(p) if !p.is_empty() => Sluice {
                path: p,
                optimised: true,
            },
            _ => Sluice {
                path: cargo_bin.to_string(),
                optimised: !cfg!(debug_assertions),
            },
        }
    }

    /// True when optimised; else [`unavailable`] for `what` and false.
    pub fn require_optimised(&self, what: &str) -> bool {
        if !self.optimised {
            unavailable(
                &format!("{what} needs an optimised sluice, this is a debug build"),
                "cargo build --release --bin sluice; SLUICE_BIN=$PWD/target/release/sluice",
            );
        }
        self.optimised
    }
}

impl Sluice {
    /// Runs `sluice lab ARGS… --json --out DIR` (stdin closed, the lab's own
    /// tools found through `SLUICE_BIN`) and returns its output, after
    /// checking that it left none of its namespaces behind. The caller
    /// owns `dir`.
    pub fn lab(&self, args: &[&str], dir: &std::path::Path) -> std::process::Output {
        use std::process::{Command, Stdio};
        let child = Command::new(&self.path)
            .arg("lab")
            .args(args)
            .arg("--json")
            .arg("--out")
            .arg(dir)
            .env("SLUICE_BIN", &self.path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sluice lab");
        let pid = child.id();
        let out = child.wait_with_output().expect("sluice lab");
        let left = sluice_lab::leftover_namespaces("lab", pid).expect("ip netns list");
        assert!(left.is_empty(), "namespaces left behind: {left:?}");
        out
    }
}

/// The frame injector every netns test drives (its modes: the script's
/// docstring).
pub const INJECT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/support/inject.py");

/// Runs `inject.py c0 CMAC VMAC SRC SERVER_IP MODE COUNT` on the client of
/// `lab` (frames from the client towards the server's MAC, from address
/// `src`); its output, whatever its exit status.
pub fn inject(lab: &BridgeLab, mode: &str, src: &str, count: u32) -> std::process::Output {
    let smac = lab.topo.mac(&lab.client, "c0").expect("client MAC");
    let dmac = lab.topo.mac(&lab.server, "v0").expect("server MAC");
    let n = count.to_string();
    let argv = [
        "python3",
        INJECT,
        "c0",
        &smac,
        &dmac,
        src,
        sluice_lab::SERVER_IP,
        mode,
        &n,
    ];
    lab.topo
        .exec(&lab.client, &argv)
        .unwrap_or_else(|e| panic!("inject {mode}: {e}"))
}

/// [`inject`]'s count of frames sent (its first number).
pub fn inject_count(lab: &BridgeLab, mode: &str, src: &str, count: u32) -> u64 {
    let out = inject(lab, mode, src, count);
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("inject {mode}: no count in {text:?}"))
}

/// One iperf3 run across `lab`: a one-shot server on its server host at
/// `o.port`, the client `o` on its client host (`o.reverse` for a
/// download); the client's result, or a panic naming `what` with sluice's
/// log. The server is waited for (at most 5 s) so that its port is free.
pub fn iperf3(lab: &mut BridgeLab, what: &str, o: &ClientOptions) -> Iperf3Result {
    let server = lab.server.clone();
    let srv = iperf3::server(&mut lab.topo, &server, o.port).expect("iperf3 server");
    let r = iperf3::client(&lab.topo, &lab.client, o)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", lab.log()));
    let _ = lab.topo.wait(srv, Duration::from_secs(5));
    r
}

/// A modem on `dev` in `ns` of `lab`: htb at `rate` (tc's words:
/// `10mbit`) with a FIFO of `fifo_bytes` behind it, in place of whatever
/// root qdisc was there.
pub fn modem(lab: &BridgeLab, ns: &Netns, dev: &str, rate: &str, fifo_bytes: u32) {
    let t = &lab.topo;
    let _ = t.exec_unchecked(ns, &["tc", "qdisc", "del", "dev", dev, "root"]);
    for cmd in [
        format!("tc qdisc add dev {dev} root handle 1: htb default 1"),
        format!("tc class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate}"),
        format!("tc qdisc add dev {dev} parent 1:1 handle 10: bfifo limit {fifo_bytes}"),
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        t.exec(ns, &args).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
}

/// Starts `inject.py listen PORT [SECS]` on the server of `lab`, its output
/// in the lab's `listen.log`: the TCP listener [`inject`]'s connecting
/// modes talk to (it quits after `secs`, when given).
pub fn listen(lab: &mut BridgeLab, port: &str, secs: Option<&str>) -> ProcId {
    let server = lab.server.clone();
    let log = lab.dir.join("listen.log");
    let mut argv = vec!["python3", INJECT, "listen", port];
    argv.extend(secs);
    lab.topo
        .spawn(&server, &argv, Some(&log))
        .expect("listener")
}

/// Runs `inject.py connect` on the client of `lab`: `count` TCP exchanges
/// with [`listen`]'s listener on `port`, each given `timeout_s` seconds.
/// The injector's report (`OK FAILED SECONDS`) and whether all succeeded.
pub fn connect(lab: &BridgeLab, port: &str, count: u32, timeout_s: &str) -> (String, bool) {
    let n = count.to_string();
    let argv = [
        "python3",
        INJECT,
        "connect",
        sluice_lab::SERVER_IP,
        port,
        &n,
        timeout_s,
    ];
    let out = lab
        .topo
        .exec_unchecked(&lab.client, &argv)
        .expect("inject connect");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (text, out.status.success())
}

/// Runs `cmd` with `input` on its standard input (closed after it) and
/// collects its output.
pub fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin piped");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    child.wait_with_output().expect("wait")
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`), or 0 if the
/// process or the field is gone.
pub fn proc_status(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Polls `cond` every 100 ms for up to `limit`; whether it became true.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if t0.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The start of `io_method` for each `--io` value (docs/control.md).
fn method_prefix(io: &str) -> &'static str {
    match io {
        "xdp" | "xdp-generic" => "af_xdp-",
        "ring" => "af_packet-tpacket_v2",
        "mmsg" => "af_packet-recvmmsg",
        _ => panic!("require_io: unknown --io {io}: expected xdp, xdp-generic, ring or mmsg"),
    }
}

/// The sluice running in `lab`, started with `--io io`, runs that method:
/// true. If it fell back because the kernel refused the method (logged as
/// `--io fallback: …`), [`unavailable`] and false. Any other method
/// fails the test: a rate or path check must not pass on another path.
pub fn require_io(lab: &BridgeLab, bin: &str, io: &str) -> bool {
    let method = lab
        .io_method(bin)
        .unwrap_or_else(|e| panic!("--io {io}: {e}\n{}", lab.log()));
    if method.starts_with(method_prefix(io)) {
        eprintln!("{}: --io {io} runs {method}", test_name());
        return true;
    }
    let log = lab.log();
    match log.lines().find(|l| l.contains("--io fallback")) {
        Some(line) => {
            unavailable(
                &format!("--io {io}: sluice runs {method}: {}", line.trim()),
                "this kernel or driver refuses the path; sluice's log says why",
            );
            false
        }
        None => panic!("--io {io}: sluice runs {method} and logged no fallback:\n{log}"),
    }
}

/// Starts sluice in `lab` with `conf`, `--io io` and `args` (waiting until
/// a ping crosses it; a panic with the reason if none does), then
/// [`require_io`]: its id, or `None` when the kernel refused the method.
pub fn start_on_io(
    lab: &mut BridgeLab,
    bin: &str,
    conf: &str,
    io: &str,
    args: &[&str],
) -> Option<ProcId> {
    let argv: Vec<&str> = ["--io", io].iter().chain(args).copied().collect();
    let id = lab
        .start_sluice(bin, conf, &argv)
        .unwrap_or_else(|e| panic!("--io {io}: {e}"));
    require_io(lab, bin, io).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_io_value_names_its_method() {
        assert_eq!(method_prefix("xdp"), "af_xdp-");
        assert_eq!(method_prefix("xdp-generic"), "af_xdp-");
        assert!("af_packet-tpacket_v2+sendmmsg".starts_with(method_prefix("ring")));
        assert!("af_packet-recvmmsg+sendmmsg".starts_with(method_prefix("mmsg")));
        assert!(!"af_packet-recvmmsg+sendmmsg".starts_with(method_prefix("ring")));
    }

    #[test]
    fn the_test_name_is_the_thread_name() {
        let name = test_name();
        assert!(
            name.ends_with("::tests::the_test_name_is_the_thread_name"),
            "{name}"
        );
        assert!(name.starts_with("sluice_testkit::"), "{name}");
    }

    #[test]
    fn proc_status_reads_kib_fields() {
        let me = std::process::id();
        assert!(proc_status(me, "VmRSS") > 0);
        assert!(proc_status(me, "VmHWM") >= proc_status(me, "VmRSS") / 2);
        assert_eq!(proc_status(me, "NoSuchField"), 0);
        assert_eq!(proc_status(me, "VmRS"), 0, "a prefix is not the field");
    }

    #[test]
    fn output_with_stdin_feeds_and_closes_stdin() {
        // `cat` ends only once its input is closed.
        let out = output_with_stdin(&mut Command::new("cat"), b"pf.conf\n");
        assert!(out.status.success());
        assert_eq!(out.stdout, b"pf.conf\n");
    }

    #[test]
    fn wait_for_reports_the_condition() {
        let mut n = 0;
        assert!(wait_for(Duration::from_secs(2), || {
            n += 1;
            n >= 3
        }));
        assert!(!wait_for(Duration::ZERO, || false));
    }
}
