//! contrib/sluice.service, run as written: its `ExecStartPre=` check must
//! pass on every shipped example, its `ExecStart=` run must get past its
//! arguments and the configuration with the same interfaces, and its
//! `ExecStopPost=` must apply the run's `--on-exit` mode to them. Its
//! systemd protocol, with a real `run` on a namespace bridge: READY=1 once
//! it forwards, WATCHDOG=1 at half of `$WATCHDOG_USEC`, RELOADING=1 and
//! READY=1 around a SIGHUP reload, STOPPING=1, a refused `reload` failing
//! with the diagnostics, priorities on log lines when stderr is the
//! journal.
//!
//! # Principles
//! - The unit file is the input, not a copy of it: the commands are parsed
//!   out of it and `$VAR`/`${VAR}` are substituted from its `Environment=`
//!   lines as systemd does, so editing the unit is what the test sees.
//! - Only the install paths are swapped: the sluice binary for this build's
//!   and `/etc/sluice/pf.conf` for each example. A command that names
//!   neither is a failure, never a silent pass.
//! - `run` cannot bridge here (the unit's interfaces must not exist on the
//!   test host: checked, never assumed), so it has to fail exactly at
//!   opening them, after clap, the configuration and the queues accepted
//!   everything; a usage error (exit 2) or a refused file fails the test.
//! - systemd-analyze is not needed here (CI machines may not have
//!   systemd): `tests/package.rs` runs `systemd-analyze verify` on the unit
//!   as the package installs it.
//! - The notify test binds the datagram socket systemd would
//!   (`$NOTIFY_SOCKET`, a path: an abstract name would not cross into the
//!   shaper's network namespace) and reads what `run` sends, in order.

use sluice_lab::netns::ProcId;
use sluice_lab::BridgeLab;
use sluice_testkit::{require_netns, Sluice};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const UNIT_BIN: &str = "/usr/sbin/sluice";
const UNIT_CONF: &str = "/etc/sluice/pf.conf";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `(section, key, value)` in file order; continuation lines joined.
struct Unit(Vec<(String, String, String)>);

impl Unit {
    fn parse(text: &str) -> Unit {
        let mut out = Vec::new();
        let mut section = String::new();
        let mut pending = String::new();
        for raw in text.lines() {
            let line = raw.trim();
            if pending.is_empty() && (line.is_empty() || line.starts_with(['#', ';'])) {
                continue;
            }
            if let Some(l) = line.strip_suffix('\\') {
                pending.push_str(l);
                pending.push(' ');
                continue;
            }
            let line = std::mem::take(&mut pending) + line;
            if line.starts_with('[') && line.ends_with(']') {
                section = line[1..line.len() - 1].to_string();
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("unit: `{line}` is neither a section nor KEY=VALUE"));
            out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
        }
        Unit(out)
    }

    fn all(&self, section: &str, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(s, k, _)| s == section && k == key)
            .map(|(_, _, v)| v.as_str())
            .collect()
    }

    /// The last assignment wins, as in systemd.
    fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.all(section, key).pop()
    }

    fn one(&self, section: &str, key: &str) -> &str {
        match self.all(section, key).as_slice() {
            [v] => v,
            vs => panic!("unit: [{section}] {key}= must be set once, found {vs:?}"),
        }
    }

    /// `Environment=` lines: whitespace-separated `NAME=value`, quotes allowed.
    fn environment(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for v in self.all("Service", "Environment") {
            for word in split_words(v) {
                let (n, val) = word
                    .split_once('=')
                    .unwrap_or_else(|| panic!("unit: Environment word `{word}` is not NAME=VALUE"));
                env.insert(n.to_string(), val.to_string());
            }
        }
        env
    }

    /// An `Exec*=` command line as systemd runs it: prefixes dropped,
    /// `${VAR}` substituted inside a word, a lone `$VAR` split on whitespace.
    fn command(&self, key: &str, env: &BTreeMap<String, String>) -> Vec<String> {
        let line = self
            .one("Service", key)
            .trim_start_matches(['@', '-', ':', '+', '!']);
        let lookup = |name: &str| {
            env.get(name)
                .unwrap_or_else(|| panic!("unit: {key}= uses ${name}, which no Environment= sets"))
                .clone()
        };
        let mut argv = Vec::new();
        for word in split_words(line) {
            let bare = word.strip_prefix('$').filter(|n| {
                !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            match bare {
                Some(name) => argv.extend(lookup(name).split_whitespace().map(String::from)),
                None => argv.push(expand_braced(&word, &lookup)),
            }
        }
        argv
    }
}

/// systemd's word splitting: whitespace outside double or single quotes.
fn split_words(s: &str) -> Vec<String> {
    let (mut words, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => (quote, any) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    assert!(quote.is_none(), "unit: unbalanced quote in `{s}`");
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

fn expand_braced(word: &str, lookup: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(a) = after.strip_prefix('{') {
            let end = a
                .find('}')
                .unwrap_or_else(|| panic!("unit: unclosed ${{ in `{word}`"));
            out.push_str(&lookup(&a[..end]));
            rest = &a[end + 1..];
        } else {
            panic!(
                "unit: `{word}`: $NAME inside a word is not substituted by systemd; use ${{NAME}}"
            );
        }
    }
    out.push_str(rest);
    out
}

/// The argv with the install paths replaced; both must be there.
fn for_test(argv: &[String], conf: &Path) -> Vec<String> {
    assert_eq!(argv.first().map(String::as_str), Some(UNIT_BIN), "{argv:?}");
    assert!(
        argv.iter().any(|a| a == UNIT_CONF),
        "{argv:?} does not name {UNIT_CONF}"
    );
    let mut out = vec![env!("CARGO_BIN_EXE_sluice").to_string()];
    out.extend(argv[1..].iter().map(|a| match a.as_str() {
        UNIT_CONF => conf.display().to_string(),
        _ => a.clone(),
    }));
    out
}

/// `-D NAME=VALUE` and `-DNAME=VALUE`, in order (later ones win).
fn defines(argv: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let d = match a.strip_prefix("-D") {
            Some("") => it.next().map(String::as_str),
            Some(d) => Some(d),
            None => None,
        };
        if let Some((n, v)) = d.and_then(|d| d.split_once('=')) {
            out.insert(n.to_string(), v.to_string());
        }
    }
    out
}

fn option<'a>(argv: &'a [String], long: &str) -> Option<&'a str> {
    let eq = format!("{long}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == long {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(eq.as_str())
        }
    })
}

fn examples() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["examples", "examples/lab", "examples/lab/traces"] {
        for e in std::fs::read_dir(repo().join(dir)).expect("read examples") {
            let p = e.expect("dir entry").path();
            if p.extension().is_some_and(|x| x == "conf") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 6,
        "expected the shipped examples, found {out:?}"
    );
    out
}

fn unit() -> Unit {
    let path = repo().join("contrib/sluice.service");
    Unit::parse(&std::fs::read_to_string(&path).expect("read contrib/sluice.service"))
}

/// Runs argv to completion; a command still running after `limit` is
/// killed and fails the test (a `run` that got further than expected).
fn run_bounded(argv: &[String], limit: Duration) -> Output {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "{argv:?} still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect output")
}

#[test]
fn exec_start_pre_check_passes_on_every_example() {
    let u = unit();
    let env = u.environment();
    let check = u.command("ExecStartPre", &env);
    assert_eq!(check.get(1).map(String::as_str), Some("check"), "{check:?}");
    let mut failed = Vec::new();
    for conf in examples() {
        let argv = for_test(&check, &conf);
        let out = run_bounded(&argv, Duration::from_secs(30));
        if !out.status.success() {
            failed.push(format!(
                "{}: {:?}\n{}",
                conf.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "the unit's ExecStartPre= ({check:?}) refuses:\n{}",
        failed.join("\n")
    );
}

#[test]
fn exec_start_bridges_the_interfaces_the_check_defined() {
    let u = unit();
    let env = u.environment();
    let check = u.command("ExecStartPre", &env);
    let run = u.command("ExecStart", &env);
    assert_eq!(run.get(1).map(String::as_str), Some("run"), "{run:?}");
    let bridge = option(&run, "--bridge").unwrap_or_else(|| panic!("{run:?}: no --bridge"));
    let (lan, wan) = bridge
        .split_once(',')
        .unwrap_or_else(|| panic!("--bridge {bridge}: expected LAN,WAN"));
    // What run loads (sluice_control::daemon::check): its own -D first, then
    // int_if/ext_if from --bridge. The check must have defined the same.
    let mut run_defs = defines(&run);
    run_defs
        .entry("int_if".into())
        .or_insert_with(|| lan.into());
    run_defs
        .entry("ext_if".into())
        .or_insert_with(|| wan.into());
    let check_defs = defines(&check);
    for name in ["int_if", "ext_if"] {
        assert_eq!(
            check_defs.get(name),
            run_defs.get(name),
            "ExecStartPre= checks with {name}={:?}, ExecStart= runs with {name}={:?}",
            check_defs.get(name),
            run_defs.get(name)
        );
    }
    assert_eq!(
        check_defs, run_defs,
        "check and run load with different macros"
    );

    for iface in [lan, wan] {
        assert!(
            !Path::new("/sys/class/net").join(iface).exists(),
            "{iface} exists on this host: this test will not start a shaper on it"
        );
    }
    let expected = format!("cannot open {lan},{wan}");
    for conf in examples() {
        let argv = for_test(&run, &conf);
        let out = run_bounded(&argv, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && stderr.contains(&expected),
            "{}: {argv:?} should get past its arguments and the file and fail at \
             `{expected}`; got {:?}:\n{stderr}",
            conf.display(),
            out.status
        );
    }
}

#[test]
fn control_socket_lives_in_the_runtime_directory() {
    let u = unit();
    let env = u.environment();
    let run = u.command("ExecStart", &env);
    let socket = option(&run, "--control").unwrap_or(sluice_control::DEFAULT_SOCKET);
    let dir = u
        .get("Service", "RuntimeDirectory")
        .expect("RuntimeDirectory= (the socket's directory; not all of /run)");
    assert_eq!(
        Path::new(socket).parent(),
        Some(Path::new("/run").join(dir).as_path()),
        "the control socket {socket} is not in RuntimeDirectory={dir}"
    );
    // `sluice show` without --control must reach the unit's daemon.
    assert_eq!(socket, sluice_control::DEFAULT_SOCKET);
    for rw in u.all("Service", "ReadWritePaths") {
        assert!(
            !split_words(rw)
                .iter()
                .any(|p| p.trim_end_matches('/') == "/run"),
            "ReadWritePaths={rw} opens all of /run"
        );
    }
}

/// systemd time spans as the unit writes them: `5`, `5s`, `500ms`, `2min`.
fn seconds(v: &str) -> f64 {
    let split = v
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(v.len());
    let n: f64 = v[..split]
        .parse()
        .unwrap_or_else(|_| panic!("time span `{v}`"));
    match &v[split..] {
        "" | "s" | "sec" => n,
        "ms" | "msec" => n / 1000.0,
        "m" | "min" => n * 60.0,
        u => panic!("time span `{v}`: unit `{u}` not understood here"),
    }
}

#[test]
fn restarts_outlast_a_flapping_nic_and_memory_is_capped() {
    let u = unit();
    assert!(u.get("Service", "Restart").is_some_and(|r| r != "no"));
    // systemd's defaults: 5 starts in 10 s, 100 ms between restarts.
    let interval = u.get("Unit", "StartLimitIntervalSec").map_or(10.0, seconds);
    let burst: f64 = u
        .get("Unit", "StartLimitBurst")
        .map_or(5.0, |b| b.parse().expect("StartLimitBurst"));
    let pause = u.get("Service", "RestartSec").map_or(0.1, seconds);
    assert!(
        interval == 0.0 || burst * pause > interval,
        "{burst} restarts {pause} s apart fit in StartLimitIntervalSec={interval}: \
         a NIC that stays down that long stops the service for good"
    );
    assert!(
        u.get("Service", "MemoryMax")
            .is_some_and(|m| m != "infinity" && !m.is_empty()),
        "no MemoryMax="
    );
}

/// The argv with the unit's binary replaced by this build's (a command
/// that reads no configuration, e.g. `on-exit`).
fn bin_for_test(argv: &[String]) -> Vec<String> {
    assert_eq!(argv.first().map(String::as_str), Some(UNIT_BIN), "{argv:?}");
    let mut out = vec![env!("CARGO_BIN_EXE_sluice").to_string()];
    out.extend(argv[1..].iter().cloned());
    out
}

#[test]
fn exec_stop_post_applies_the_run_s_on_exit_mode_to_the_same_interfaces() {
    let u = unit();
    let mut env = u.environment();
    assert!(
        env.contains_key("SLUICE_ON_EXIT"),
        "the unit sets no SLUICE_ON_EXIT= default (one knob for run and ExecStopPost=)"
    );
    // Both modes, as /etc/default/sluice may set them.
    for mode in ["down", "bridge"] {
        env.insert("SLUICE_ON_EXIT".into(), mode.into());
        let run = u.command("ExecStart", &env);
        let post = u.command("ExecStopPost", &env);
        assert_eq!(post.get(1).map(String::as_str), Some("on-exit"), "{post:?}");
        assert_eq!(option(&run, "--on-exit"), Some(mode), "{run:?}");
        assert_eq!(
            post.get(2).map(String::as_str),
            Some(mode),
            "ExecStopPost= ({post:?}) applies another mode than ExecStart= ({run:?})"
        );
        let bridge = option(&run, "--bridge").expect("run --bridge");
        assert_eq!(
            option(&post, "--bridge"),
            Some(bridge),
            "ExecStopPost= names other interfaces than ExecStart="
        );
        let (lan, wan) = bridge.split_once(',').expect("LAN,WAN");
        for iface in [lan, wan] {
            assert!(
                !Path::new("/sys/class/net").join(iface).exists(),
                "{iface} exists on this host: this test will not bridge it"
            );
        }
        // Both as written: run gets past its arguments to the missing
        // interfaces; on-exit too (`down` finds nothing to take back,
        // `bridge` fails naming the interface), never a usage error (2).
        let conf = examples().remove(0);
        let argv = for_test(&run, &conf);
        let out = run_bounded(&argv, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && stderr.contains(&format!("cannot open {bridge}")),
            "{argv:?}: {:?}\n{stderr}",
            out.status
        );
        let argv = bin_for_test(&post);
        let out = run_bounded(&argv, Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (code, says) = match mode {
            "down" => (0, "in no bridge of sluice".to_string()),
            _ => (1, format!("no interface {lan}")),
        };
        assert!(
            out.status.code() == Some(code) && stderr.contains(&says),
            "{argv:?}: expected status {code} and `{says}`, got {:?}:\n{stderr}",
            out.status
        );
    }
}

#[test]
fn the_unit_waits_for_ready_pings_a_watchdog_and_documents_the_man_pages() {
    let u = unit();
    assert_eq!(
        u.get("Service", "Type"),
        Some("notify"),
        "Type=notify: `systemctl start` returns once sluice forwards"
    );
    let watchdog = u
        .get("Service", "WatchdogSec")
        .map(seconds)
        .expect("WatchdogSec=: a wedged packet loop must be restarted");
    // The loop ticks at least every 100 ms when idle and pings at half the
    // timeout: a second leaves room for a loaded machine.
    assert!(watchdog >= 1.0, "WatchdogSec={watchdog} s is too tight");
    assert!(
        u.get("Service", "NotifyAccess")
            .is_none_or(|a| a == "main" || a == "all"),
        "the daemon itself (the main process) notifies"
    );
    let docs = u.get("Unit", "Documentation").expect("Documentation=");
    let man = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["generate", "man"])
        .output()
        .expect("sluice generate man");
    assert!(man.status.success(), "{man:?}");
    assert!(
        String::from_utf8_lossy(&man.stdout)
            .lines()
            .any(|l| l.starts_with(".TH SLUICE 8 ")),
        "sluice generate man writes sluice(8)"
    );
    for page in ["man:sluice(8)", "man:sluice.conf(5)"] {
        assert!(
            split_words(docs).iter().any(|w| w == page),
            "Documentation={docs} lacks {page}"
        );
    }
    assert!(
        repo().join("docs/man/sluice.conf.5").exists(),
        "sluice.conf(5) is docs/man/sluice.conf.5"
    );
}

#[test]
fn exec_reload_is_sluice_reload_so_a_failure_fails_the_reload() {
    let u = unit();
    let env = u.environment();
    let reload = u.command("ExecReload", &env);
    assert_eq!(
        reload.get(1).map(String::as_str),
        Some("reload"),
        "ExecReload= ({reload:?}) must run `sluice reload`: a signal cannot fail"
    );
    // As written, against no daemon (a private socket path, never the
    // host's): it must fail, not succeed silently.
    let dir = std::env::temp_dir().join(format!("sluice-unit-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut argv = bin_for_test(&reload);
    argv.extend([
        "--control".into(),
        dir.join("none.sock").display().to_string(),
    ]);
    let out = run_bounded(&argv, Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{argv:?}: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error"),
        "{argv:?}: {out:?}"
    );
}

/// Datagrams received on the fake `$NOTIFY_SOCKET`, with their arrival.
fn receive(sock: &UnixDatagram, until: Instant, out: &mut Vec<(Instant, String)>) {
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        sock.set_read_timeout(Some(
            until
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))
        .expect("timeout");
        match sock.recv(&mut buf) {
            Ok(n) => out.push((
                Instant::now(),
                String::from_utf8_lossy(&buf[..n]).into_owned(),
            )),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("recv on the notify socket: {e}"),
        }
    }
}

/// `WATCHDOG_USEC` for the notify test: pings every 500 ms.
const WATCHDOG_USEC: u64 = 1_000_000;

/// Starts `run -v` in the lab as systemd would start the unit: the fake
/// notify socket, a watchdog, stderr (the lab's log) named by
/// `JOURNAL_STREAM`; a configuration that warns at start.
fn start_under_fake_systemd(lab: &mut BridgeLab, b: &str) -> (UnixDatagram, ProcId) {
    let notify_path = lab.dir.join("notify.sock");
    let sock = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    std::fs::write(lab.log_path(), "").expect("log file");
    let meta = std::fs::metadata(lab.log_path()).expect("stat log");
    let conf = lab.write_conf("set skip on lo\npass all\n").expect("conf");
    let ctl = lab.control_path();
    let bridge = format!("{},{}", lab.wiring.lan, lab.wiring.wan);
    let vars = [
        format!("NOTIFY_SOCKET={}", notify_path.display()),
        format!("WATCHDOG_USEC={WATCHDOG_USEC}"),
        format!("JOURNAL_STREAM={}:{}", meta.dev(), meta.ino()),
    ];
    let mut args: Vec<&str> = vars.iter().map(String::as_str).collect();
    args.extend([
        b,
        "run",
        "-v",
        "-f",
        &conf,
        "--bridge",
        &bridge,
        "--control",
        &ctl,
    ]);
    let id = lab
        .spawn_sluice("env", &args)
        .unwrap_or_else(|e| panic!("run under a fake systemd: {e}"));
    (sock, id)
}

/// READY=1 is the first datagram, and the control socket answers by then.
fn assert_ready_first(lab: &BridgeLab, b: &str, sock: &UnixDatagram) {
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.is_empty() && t0.elapsed() < Duration::from_secs(10) {
        receive(sock, Instant::now() + Duration::from_millis(100), &mut got);
    }
    let (_, first) = got
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no notification:\n{}", lab.log()));
    assert!(
        first.starts_with("READY=1\nSTATUS=bridging lan0 (int_if) <-> wan0 (ext_if) via "),
        "the first notification is READY=1 with a status: {first:?}"
    );
    assert!(
        lab.info(b).is_ok(),
        "READY=1 before the control socket answers"
    );
}

/// WATCHDOG=1 at half of `WATCHDOG_USEC`, and nothing else meanwhile.
/// What queued while the path was awaited is read first; only datagrams
/// that arrive while the test listens are timed.
fn assert_watchdog_cadence(sock: &UnixDatagram) {
    sock.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.recv(&mut buf) {
        let m = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert_eq!(m, "WATCHDOG=1", "after READY=1: {m:?}");
    }
    sock.set_nonblocking(false).expect("blocking");
    let mut got = Vec::new();
    receive(sock, Instant::now() + Duration::from_secs(4), &mut got);
    for (_, m) in &got {
        assert_eq!(m, "WATCHDOG=1", "while running: {got:?}");
    }
    let gaps: Vec<f64> = got
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_secs_f64())
        .collect();
    eprintln!(
        "systemd_unit: watchdog pings {} in 4 s, gaps {gaps:.3?}",
        got.len()
    );
    let half = WATCHDOG_USEC as f64 / 2e6;
    assert!(
        (6..=10).contains(&got.len()),
        "{} pings in 4 s at {half} s: {gaps:?}",
        got.len()
    );
    assert!(
        gaps.iter().all(|&g| g >= half * 0.8 && g < 2.0 * half),
        "every gap about {half} s and under the {} s timeout: {gaps:?}",
        2.0 * half
    );
}

/// `sluice reload` (ExecReload=) of a broken file: exit 1, the diagnostic
/// on stderr; the running configuration stays and reloads.
fn assert_refused_reload_fails(lab: &BridgeLab, b: &str) {
    let broken = lab.dir.join("broken.conf");
    std::fs::write(&broken, "pass out on $ext_if queue nowhere (\n").expect("broken conf");
    let out = lab
        .ctl(b, &["reload", "-f", &broken.display().to_string()])
        .expect("reload");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refused reload fails: {out:?}"
    );
    assert!(
        said.contains("error") && said.contains("broken.conf:1:"),
        "the diagnostic names the file and line: {said}"
    );
    let ok = lab.ctl(b, &["reload"]).expect("reload");
    assert!(ok.status.success(), "the running file reloads: {ok:?}");
}

/// SIGHUP: RELOADING=1 (with MONOTONIC_USEC=) then READY=1.
fn assert_reload_by_signal(lab: &BridgeLab, id: ProcId, sock: &UnixDatagram) {
    let mut hup = Vec::new();
    lab.topo.signal(id, "HUP").expect("kill -HUP");
    receive(sock, Instant::now() + Duration::from_secs(2), &mut hup);
    let said: Vec<&str> = hup
        .iter()
        .map(|(_, m)| m.as_str())
        .filter(|m| *m != "WATCHDOG=1")
        .collect();
    assert!(
        said.len() == 2
            && said[0]
                .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 0)
            && said[1] == "READY=1",
        "around a SIGHUP reload: {said:?}\n{}",
        lab.log()
    );
}

/// stderr was the journal: every line carries its priority, none the
/// `sluice:` prefix journald adds itself.
fn assert_journal_priorities(log: &str) {
    assert!(
        log.contains("<4>warning: `set skip`"),
        "the start-up warning is <4>:\n{log}"
    );
    assert!(
        log.contains("<6>info: bridging lan0"),
        "info is <6>:\n{log}"
    );
    for line in log.lines().filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with('<') && !line.contains("sluice: "),
            "a line without its priority: {line:?}\n{log}"
        );
    }
}

#[test]
fn run_notifies_ready_pings_the_watchdog_and_a_refused_reload_fails() {
    let Some(_serial) = require_netns(&[]) else {
        return;
    };
    let b = Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path;
    let mut lab = BridgeLab::new("sd").expect("namespaces");
    let (sock, id) = start_under_fake_systemd(&mut lab, &b);
    assert_ready_first(&lab, &b, &sock);
    assert_watchdog_cadence(&sock);
    assert_refused_reload_fails(&lab, &b);
    assert_reload_by_signal(&lab, id, &sock);

    // A clean stop says STOPPING=1.
    let st = lab.stop_sluice().expect("stop");
    assert!(st.is_some_and(|s| s.success()), "{}", lab.log());
    let mut tail = Vec::new();
    receive(
        &sock,
        Instant::now() + Duration::from_millis(300),
        &mut tail,
    );
    assert!(
        tail.iter().any(|(_, m)| m == "STOPPING=1"),
        "STOPPING=1 at the end: {tail:?}"
    );
    assert_journal_priorities(&lab.log());
}
