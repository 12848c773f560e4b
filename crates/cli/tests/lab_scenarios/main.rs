//! `sluice lab` end to end: short versions (phases of a few seconds) of
//! every scenario through the real five-namespace network, asserting the
//! physics of issue #4 (`shaping.rs`), plus the lab's options and clean-up
//! on every exit path (`options.rs`).
//!
//! Needs root, `ip`, `tc`, `ethtool`, `ss`, `iperf3`, `ping`, `irtt`
//! (scripts/setup.sh); otherwise each test prints a SKIP line and returns,
//! or fails under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).
//! The release binary is used when SLUICE_BIN names it (as CI does): the
//! shaper must keep up with the link, which a debug build may not.
//! Bounds are stated at each assertion.
//!
//! # Principles
//! - Runs share the machine only where the links are slow. Every scenario
//!   but `rrul_heavy` moves at most 35 Mbit/s through a few iperf3
//!   streams: a run of rrul used 1.5–2.6 s of CPU (user + system, the lab
//!   and its children) in 13–16 s, host_fair's 66 streams 4.5 s in 19 s,
//!   so a few at once take well under one of the two cores, and the
//!   verdicts are about rates and queues of seconds or tens of ms. Such
//!   [`Load::Light`] tests run beside each other (libtest's threads), and a
//!   test's unshaped and shaped runs run at once ([`pair`]).
//!   [`Load::Heavy`] tests hold the machine alone (rrul_heavy's 200
//!   streams; rrul, whose shaped run must fill 75 % of 30 Mbit/s, beside
//!   its unshaped run only): they wait for the light tests running to end,
//!   and none starts meanwhile. This
//!   replaces sluice-testkit's serial lock in this binary only; the other
//!   netns binaries still run one test at a time.
//! - Each lab run is its own process with its own namespaces (named after
//!   its pid) and run directory: runs at once cannot see each other.

use sluice_lab::model::{PhaseSummary, Summary};
use sluice_testkit::{require_root, Sluice};
use std::path::PathBuf;
use std::process::Output;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

mod options;
mod shaping;

/// How a test shares the machine with the others of this binary.
#[derive(Clone, Copy)]
enum Load {
    /// Slow links and few streams: runs beside other light tests.
    Light,
    /// Needs the two cores: runs alone.
    Heavy,
}

/// Light tests hold it shared, heavy ones exclusively (a waiting heavy
/// test keeps new light ones out, so it is not starved).
static LANE: RwLock<()> = RwLock::new(());

/// Held for the whole test: its share of the machine.
#[allow(dead_code)] // held for its Drop
enum Lane {
    Shared(RwLockReadGuard<'static, ()>),
    Alone(RwLockWriteGuard<'static, ()>),
}

/// Root and every tool of this file, else SKIP (a failure under CI); the
/// guard of the test's share of the machine.
fn netns(load: Load) -> Option<Lane> {
    // A test that panicked poisons the lock; the others still run.
    let lane = match load {
        Load::Light => Lane::Shared(LANE.read().unwrap_or_else(|p| p.into_inner())),
        Load::Heavy => Lane::Alone(LANE.write().unwrap_or_else(|p| p.into_inner())),
    };
    require_root(&["ip", "ethtool", "ping", "iperf3", "ss", "tc", "irtt"]).then_some(lane)
}

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-lab-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `sluice lab ARGS… --json --out DIR`; its output (no namespace left).
fn lab(args: &[&str], tag: &str) -> Output {
    let dir = out_dir(tag);
    let out = Sluice::locate(env!("CARGO_BIN_EXE_sluice")).lab(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// `a()` and `b()` at once, each on its own thread; a panic in either is
/// the test's, with its own message (after both ended: no run is left
/// behind).
fn both<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    std::thread::scope(|s| {
        let a = s.spawn(a);
        let b = s.spawn(b);
        let (a, b) = (a.join(), b.join());
        match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => std::panic::resume_unwind(e),
        }
    })
}

/// `sluice lab run SCENARIO ARGS…` → its summary, asserting success.
fn run(scenario: &str, args: &[&str], tag: &str) -> Summary {
    let mut all = vec!["run", scenario];
    all.extend(args);
    let out = lab(&all, tag);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "sluice lab run {scenario} {args:?} failed:\n{stderr}"
    );
    eprintln!("{stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the summary's JSON ({e}):\n{stderr}"))
}

/// What `lab compare SCENARIO ARGS… --shaper none --shaper SHAPER`
/// measures (`shaper` `None`: the scenario's example, as `compare`'s
/// default), as two `lab run`s at once: the same two summaries in half the
/// time.
fn pair(scenario: &str, args: &[&str], shaper: Option<&str>) -> [Summary; 2] {
    let none: Vec<&str> = ["--shaper", "none"].iter().chain(args).copied().collect();
    let shaped: Vec<&str> = match shaper {
        Some(conf) => ["--shaper", conf].iter().chain(args).copied().collect(),
        None => args.to_vec(),
    };
    let (none, shaped) = both(
        || run(scenario, &none, &format!("{scenario}-none")),
        || run(scenario, &shaped, &format!("{scenario}-shaped")),
    );
    [none, shaped]
}

/// [`pair`] of `SCENARIO --duration S` with the scenario's example.
fn compare(scenario: &str, secs: u32) -> [Summary; 2] {
    pair(scenario, &["--duration", &secs.to_string()], None)
}

/// A shipped example config, by its path in the repository.
fn example(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    p.to_string_lossy().into_owned()
}

fn phase<'a>(s: &'a Summary, name: &str) -> &'a PhaseSummary {
    s.phases
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no phase {name} in {}", s.scenario))
}

fn p50(p: &PhaseSummary) -> f64 {
    p.latency_ms.map(|l| l.p50).unwrap_or(f64::INFINITY)
}

/// A direction's rate over a phase stays under the link rate (+5 %: frame
/// counting and sampling edges) and, when `saturated`, reaches 75 % of it
/// (a phase of a few seconds includes the flow's start-up).
fn within_link(what: &str, bps: f64, link_bps: u64, saturated: bool) {
    within(what, bps, link_bps, if saturated { 0.75 } else { 0.0 });
}

/// The same with an explicit lower share of the link.
fn within(what: &str, bps: f64, link_bps: u64, min_share: f64) {
    let link = link_bps as f64;
    assert!(
        bps <= link * 1.05,
        "{what}: {bps:.0} bit/s above the link's {link:.0}"
    );
    assert!(
        bps >= link * min_share,
        "{what}: {bps:.0} bit/s, under {:.0} % of the link's {link:.0}",
        100.0 * min_share
    );
}
