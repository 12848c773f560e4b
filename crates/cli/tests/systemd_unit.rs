//! contrib/sluice.service, run as written: its `ExecStartPre=` check must
//! pass on every shipped example, its `ExecStart=` run must get past its
//! arguments and the configuration with the same interfaces, and its
//! `ExecStopPost=` must apply the run's `--on-exit` mode to them.
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
//! - systemd-analyze is not needed (CI machines may not have systemd).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const UNIT_BIN: &str = "/usr/local/bin/sluice";
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
    // What run loads (crates/cli/src/run.rs): its own -D first, then
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
