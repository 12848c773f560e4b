//! Output that cannot be written (stderr on a full disk, stdout into a
//! closed pipe) never panics sluice: a client command stops with status 1,
//! and a running daemon drops and counts its log lines, reloads and stops
//! as usual.
//!
//! The daemon test needs root and the lab's tools (scripts/setup.sh);
//! otherwise it prints a SKIP line and returns, or fails under
//! `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_lab::BridgeLab;
use sluice_testkit::{require_netns, wait_for, Sluice};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The exit status of a Rust panic.
const PANIC_STATUS: i32 = 101;

fn full() -> Stdio {
    Stdio::from(
        File::options()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full"),
    )
}

fn conf(name: &str, text: &str) -> (tempdir::Dir, String) {
    let d = tempdir::Dir::new(name);
    let p = d.0.join("pf.conf");
    std::fs::write(&p, text).unwrap();
    let s = p.to_string_lossy().into_owned();
    (d, s)
}

/// A private directory removed on drop (no extra dependency).
mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new(tag: &str) -> Dir {
            let p =
                std::env::temp_dir().join(format!("sluice-logfail-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `sluice ARGS` with the given stdout and stderr, to its end.
fn sluice(args: &[&str], stdout: Stdio, stderr: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdout(stdout)
        .stderr(stderr)
        .output()
        .expect("run sluice")
}

fn no_panic(what: &str, out: &Output) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        out.status.code(),
        Some(PANIC_STATUS),
        "{what}: panicked:\n{text}"
    );
    assert!(!text.contains("panicked"), "{what}:\n{text}");
}

#[test]
fn check_with_stderr_on_a_full_disk_exits_1_without_panicking() {
    let (_d, bad) = conf("bad", "pass bogus\n");
    let out = sluice(&["check", "-v", &bad], Stdio::piped(), full());
    no_panic("check of an invalid file, stderr on /dev/full", &out);
    assert_eq!(out.status.code(), Some(1), "the file is still refused");

    let (_d2, good) = conf("good", "pass all\n");
    let out = sluice(&["check", "-v", &good], Stdio::piped(), full());
    no_panic("check -v of a valid file, stderr on /dev/full", &out);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pass all"));
}

#[test]
fn check_with_stdout_on_a_full_disk_says_so_and_exits_1() {
    let (_d, good) = conf("out", "pass all\n");
    let out = sluice(&["check", "-v", &good], full(), Stdio::piped());
    no_panic("check -v, stdout on /dev/full", &out);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write the output"), "{err}");
}

#[test]
fn check_into_a_closed_pipe_exits_1_quietly() {
    // More canonical output than a pipe buffer holds, so the write meets
    // the closed end whatever the timing.
    // A queue, so that a valid file warns about nothing (no "no queues").
    let rules: String = std::iter::once("queue std on em0 bandwidth 10M default\n".to_string())
        .chain((1..=4000).map(|p| format!("pass in proto tcp from any to any port {p}\n")))
        .collect();
    let (_d, big) = conf("pipe", &rules);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "-v", &big])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = child.wait().unwrap();
    assert_ne!(st.code(), Some(PANIC_STATUS), "panicked:\n{err}");
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(
        err.is_empty(),
        "a closed pipe is not worth a message:\n{err}"
    );
}

#[test]
fn show_with_stderr_on_a_full_disk_exits_1_without_panicking() {
    let out = sluice(
        &["show", "info", "--control", "/nonexistent/sluice.sock"],
        Stdio::piped(),
        full(),
    );
    no_panic("show info without a daemon, stderr on /dev/full", &out);
    assert_eq!(out.status.code(), Some(1));
}

/// `log_write_errors` of `show info`.
fn log_write_errors(lab: &BridgeLab, bin: &str) -> u64 {
    let info = lab.info(bin).expect("show info");
    info.io
        .iter()
        .find(|(n, _)| n == "log_write_errors")
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no log_write_errors in {:?}", info.io))
}

/// One daemon with stderr on /dev/full: `-vv` loses lines from the start
/// (it died there before), no `-v` first loses the refused reload's error
/// (its panic used to end the signal thread: SIGTERM was then ignored).
fn daemon_case(bin: &str, verbose: &[&str]) {
    let mut lab = BridgeLab::new("lf").expect("namespaces");
    let mut extra = vec!["--io", "mmsg"];
    extra.extend_from_slice(verbose);
    let id = lab
        .start_sluice_to(bin, "pass all\n", &extra, Path::new("/dev/full"))
        .unwrap_or_else(|e| panic!("{verbose:?}: stderr on /dev/full: {e}"));
    let at_start = log_write_errors(&lab, bin);
    if !verbose.is_empty() {
        assert!(
            at_start > 0,
            "-vv logs at start; the lost lines are counted"
        );
    }

    lab.write_conf("pass bogus\n").unwrap();
    for _ in 0..2 {
        lab.topo.signal(id, "HUP").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        wait_for(Duration::from_secs(3), || log_write_errors(&lab, bin)
            >= at_start + 2),
        "{verbose:?}: the refused reloads' lines are counted"
    );
    assert!(
        lab.sluice_alive(),
        "{verbose:?}: sluice died on a refused reload"
    );
    assert!(
        lab.ping_once(),
        "still forwarding after the refused reloads"
    );

    // The signal thread still answers: a valid reload, then SIGTERM.
    lab.write_conf("pass all\nblock in proto udp\n").unwrap();
    lab.topo.signal(id, "HUP").unwrap();
    assert!(
        wait_for(Duration::from_secs(3), || lab
            .show(bin, "rules")
            .is_ok_and(|r| format!("{r:?}").contains("udp"))),
        "{verbose:?}: SIGHUP still reloads after the refused ones"
    );
    let st = lab.stop_sluice().unwrap();
    assert!(
        st.is_some_and(|s| s.success()),
        "{verbose:?}: sluice did not stop cleanly on SIGTERM: {st:?}"
    );
}

#[test]
fn daemon_with_stderr_on_a_full_disk_survives_a_refused_reload_and_stops_on_sigterm() {
    let Some(_serial) = require_netns(&[]) else {
        return;
    };
    let bin = Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path;
    daemon_case(&bin, &["-vv"]);
    daemon_case(&bin, &[]);
}
