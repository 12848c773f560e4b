//! `sluice lab list|run|compare|bench|blast`: the bufferbloat experiments in
//! network namespaces (docs/lab.md), the data-plane benchmark and its
//! packet generator.
//!
//! # Principles
//! - Everything that can be refused is refused before a namespace exists:
//!   values, the scenario's name, the shaper config (checked exactly as
//!   `sluice check -D ext_if=wan0 -D int_if=lan0` would), root, tools.
//! - Ctrl-C (SIGINT/SIGTERM) raises a flag the runner polls; the run's
//!   `LabNet` is dropped on the way out, so namespaces never outlive the
//!   command. Exit 0 on success, 1 on an error, 130 when interrupted.
//! - With `--json`, stdout carries the summary JSON and nothing else; the
//!   table and paths go to stderr.

mod attack;
mod values;

use crate::out::{ewrite, ewriteln, owrite, owriteln};
use clap::{Args, Subcommand};
use sluice_lab::attack::Attack;
use sluice_lab::model::{RunResult, Scenario, ShaperSpec, Summary};
use sluice_lab::runner::{self, LabError, Progress, RunOptions};
use sluice_lab::scenario;
use sluice_time::{units::format_rate_short, Rate};
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use values::{OverheadArg, Overrides, WindowArg};

/// Where the default shaper configs are looked up, after the current
/// directory and the executable's repository: where the package puts
/// `examples/` (docs/install.md).
const SHARE_DIR: &str = "/usr/share/doc/sluice";

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Subcommand)]
enum LabCmd {
    /// List the scenarios: name, link, what it shows.
    List,
    /// Run one scenario with one shaper (default: the scenario's example config).
    Run(RunArgs),
    /// Run one scenario with several shapers in turn (default: none, then the example).
    Compare(CompareArgs),
    /// Data-plane benchmark: forwarding through sluice versus the kernel
    /// bridge on the same namespaces, and shaping accuracy 128k-1G.
    Bench(BenchArgs),
    /// Packet generator: fixed-size UDP/IPv4 frames out of one interface as
    /// fast as one core can send them (AF_PACKET sendmmsg, qdisc bypassed),
    /// or paced; what `sluice lab bench` measures forwarding with.
    Blast(BlastArgs),
    /// The lab's hostile host (started by `run`/`compare --attack`).
    #[command(hide = true)]
    Attack(attack::AttackArgs),
}

#[derive(Args)]
struct BlastArgs {
    /// Interface to send from.
    #[arg(long, value_name = "IF")]
    dev: String,
    /// Destination MAC address (a MAC nobody owns makes receivers drop the
    /// frames at the door, keeping their IP stack out of the measurement).
    #[arg(long, value_name = "MAC", default_value = "02:00:00:00:00:02", value_parser = sluice_io::blast::parse_mac)]
    dst_mac: [u8; 6],
    /// Source IPv4 address.
    #[arg(long, value_name = "ADDR", default_value = "10.77.0.1")]
    src: std::net::Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long, value_name = "ADDR", default_value = "10.77.0.2")]
    dst: std::net::Ipv4Addr,
    /// First UDP source port; flow i uses SPORT + i.
    #[arg(long, value_name = "PORT", default_value_t = 10_000)]
    sport: u16,
    /// UDP destination port.
    #[arg(long, value_name = "PORT", default_value_t = 9)]
    dport: u16,
    /// Frame length without the FCS: 60 is a 64 B frame on the wire, 1514 a
    /// 1518 B one.
    #[arg(long, value_name = "BYTES", default_value_t = 60)]
    len: usize,
    /// Flows (source ports), interleaved.
    #[arg(long, value_name = "N", default_value_t = 16)]
    flows: usize,
    /// How long to send.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    secs: f64,
    /// Frames per second (0: as fast as possible).
    #[arg(long, value_name = "PPS", default_value_t = 0.0)]
    pps: f64,
    /// Frames per sendmmsg call.
    #[arg(long, value_name = "N", default_value_t = 256)]
    batch: usize,
    /// Print a JSON object ({"sent","blocked","seconds","pps"}) instead of text.
    #[arg(long)]
    json: bool,
}

fn blast(a: BlastArgs) -> Result<(), Failure> {
    let duration = std::time::Duration::try_from_secs_f64(a.secs)
        .ok()
        .filter(|d| !d.is_zero() && d.as_secs() <= 3600)
        .ok_or_else(|| {
            Failure::Error(format!(
                "--secs {}: allowed more than 0 and at most 3600 seconds",
                a.secs
            ))
        })?;
    let o = sluice_io::blast::BlastOptions {
        dev: a.dev,
        dst_mac: a.dst_mac,
        src: a.src,
        dst: a.dst,
        sport: a.sport,
        dport: a.dport,
        len: a.len,
        flows: a.flows,
        duration,
        pps: a.pps,
        batch: a.batch,
    };
    let r = sluice_io::blast::run(&o, &mut |pps| {
        if !a.json {
            ewriteln!("blast: {pps:.0} pps")
        }
    })
    .map_err(|e| Failure::Error(format!("blast on {}: {e}", o.dev)))?;
    if a.json {
        owriteln!(
            "{}",
            serde_json::json!({"sent": r.sent, "blocked": r.blocked,
                "seconds": r.elapsed.as_secs_f64(), "pps": r.pps()})
        );
    } else {
        owriteln!("{}", r.summary(o.len));
    }
    Ok(())
}

#[derive(Args)]
struct BenchArgs {
    /// Seconds per measurement (64 B frames, 1518 B frames, TCP).
    #[arg(long, value_name = "S", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=600))]
    seconds: u32,
    /// Measure each path this many times and keep the best figure.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    repeats: u32,
    /// sluice packet I/O methods to measure (`sluice run --io`), comma-separated;
    /// each unshaped and with FQ-CoDel.
    #[arg(long, value_name = "METHOD,…", value_delimiter = ',', default_value = "xdp,ring", value_parser = ["xdp", "xdp-generic", "ring", "mmsg"])]
    io: Vec<String>,
    /// Only the shaping-accuracy part.
    #[arg(long, conflicts_with = "no_accuracy")]
    accuracy_only: bool,
    /// Skip the shaping-accuracy part.
    #[arg(long)]
    no_accuracy: bool,
    /// Rates of the accuracy part (comma-separated: 128k,1M,…).
    #[arg(long, value_name = "RATE,…", value_delimiter = ',', value_parser = values::parse_rate)]
    rates: Vec<u64>,
    /// Print the report as JSON to stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
}

fn bench(a: BenchArgs) -> Result<(), Failure> {
    if !rustix::process::geteuid().is_root() {
        return Err(Failure::Error(
            "sluice lab bench needs root (it creates network namespaces): run it with sudo".into(),
        ));
    }
    let bin = std::env::current_exe()
        .map_err(|e| Failure::Error(format!("cannot find the sluice executable: {e}")))?;
    let mut o = sluice_lab::bench::BenchOptions {
        seconds: a.seconds,
        repeats: a.repeats,
        forwarding: !a.accuracy_only,
        ..Default::default()
    };
    o.io_methods = a.io;
    if a.no_accuracy {
        o.accuracy_rates_bps.clear();
    } else if !a.rates.is_empty() {
        o.accuracy_rates_bps = a.rates;
    }
    let report = sluice_lab::bench::run(&bin.to_string_lossy(), &o, &mut |line| {
        ewriteln!("[bench] {line}")
    })
    .map_err(Failure::Error)?;
    let tab = sluice_lab::bench::table(&report);
    if a.json {
        ewrite!("{tab}");
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| Failure::Error(e.to_string()))?;
        owriteln!("{text}");
    } else {
        owrite!("{tab}");
    }
    Ok(())
}

/// Link and traffic overrides shared by `run` and `compare`.
#[derive(Args, Clone)]
struct OverrideArgs {
    /// Download rate of the modem, bit/s (512k, 5Mbit, 30Mb, 1G…).
    #[arg(long, value_name = "RATE", value_parser = values::parse_rate)]
    down: Option<u64>,
    /// Upload rate of the modem, bit/s.
    #[arg(long, value_name = "RATE", value_parser = values::parse_rate)]
    up: Option<u64>,
    /// Base round-trip time in ms (half each way; 0 = none).
    #[arg(long, value_name = "MS", value_parser = values::parse_rtt)]
    rtt: Option<f64>,
    /// Packets the modem's FIFO holds in each direction.
    #[arg(long, value_name = "PKTS", value_parser = values::parse_buffer)]
    buffer: Option<u32>,
    /// How the modem's FIFO counts --buffer: `packets` (pfifo) or `bytes`
    /// (bfifo of that many full-size frames, where an ACK takes ~1/20 of a
    /// slot). Default: the scenario's.
    #[arg(long, value_name = "packets|bytes", value_parser = values::parse_fifo)]
    fifo: Option<sluice_lab::model::FifoKind>,
    /// Link overhead the modem charges: cake's name (pppoe-llcsnap, ethernet,
    /// docsis…) or bytes per packet.
    #[arg(long, value_name = "NAME|BYTES", value_parser = values::parse_overhead)]
    overhead: Option<OverheadArg>,
    /// Length of every phase in seconds.
    #[arg(long, value_name = "S", value_parser = values::parse_duration)]
    duration: Option<f64>,
    /// TCP congestion control of both hosts (cubic, reno, bbr…: the
    /// client's and server's net.ipv4.tcp_congestion_control, and iperf3 -C).
    #[arg(long, value_name = "CC", value_parser = values::parse_cc)]
    cc: Option<String>,
    /// Socket buffer of every bulk flow, both ends (iperf3 -w: caps the
    /// sender's data in flight and the receiver's window): 64K, 256K, 1M…
    /// (powers of 1024) or `auto` (the kernel's autotuning).
    #[arg(long, value_name = "SIZE|auto", value_parser = values::parse_window)]
    window: Option<WindowArg>,
    /// The same for the downloads only (over --window).
    #[arg(long, value_name = "SIZE|auto", value_parser = values::parse_window)]
    window_down: Option<WindowArg>,
    /// The same for the uploads only (over --window).
    #[arg(long, value_name = "SIZE|auto", value_parser = values::parse_window)]
    window_up: Option<WindowArg>,
    /// ECN on the two hosts (net.ipv4.tcp_ecn 1 or 0 in the client and
    /// server namespaces). Default: the scenario's (off in every shipped one).
    #[arg(long, value_name = "on|off", value_parser = values::parse_on_off)]
    ecn: Option<bool>,
    /// TCP connections of every bulk flow (iperf3 -P), over the scenario's
    /// (rrul_heavy: 100 each way), 1 to 128.
    #[arg(long, value_name = "N", value_parser = values::parse_streams)]
    streams: Option<u32>,
    /// A link whose rate moves: the modem follows this rate trace (a file of
    /// `TIME DOWN UP` steps, or the name of a shipped one: lte, starlink,
    /// docsis-evening, step; see docs/lab.md).
    #[arg(long, value_name = "FILE|NAME", conflicts_with_all = ["down", "up"])]
    trace: Option<String>,
    /// The modem drops every ICMP packet it would forward, as an ISP that
    /// filters ICMP does: no reflector beyond it answers a ping. Latency is
    /// then measured with irtt's round trips (scenarios with an irtt
    /// stream: rrul, voip, …); the ping still runs, to show every echo lost.
    #[arg(long)]
    drop_icmp: bool,
    /// Random loss beyond the modem, both directions, on the delay line
    /// between the modem and the server: a percentage (1%, 0.5%, 3%).
    #[arg(long, value_name = "P%", value_parser = crate::delay_line::parse_loss_ppm)]
    loss: Option<u32>,
    /// Seed of --loss's draws (default: a random one; either way it is in
    /// summary.json, so a run can be replayed).
    #[arg(long, value_name = "N", requires = "loss")]
    loss_seed: Option<u64>,
    /// Both hosts without SACK (net.ipv4.tcp_sack=0 in the client and
    /// server namespaces).
    #[arg(long)]
    no_sack: bool,
    /// Both hosts without TCP timestamps (net.ipv4.tcp_timestamps=0).
    #[arg(long)]
    no_timestamps: bool,
    /// --attack lying-clock: how many lying connections (1 to 64; default 6).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(sluice_lab::attack::MAX_LIARS)))]
    liars: Option<u32>,
    /// --attack lying-clock: how their clock lies: frozen (default), fast
    /// (1.2x) or slow (0.8x, falling behind as if delayed more and more).
    #[arg(long, value_name = "frozen|fast|slow", value_parser = sluice_lab::attack::Clock::parse)]
    lie: Option<sluice_lab::attack::Clock>,
}

impl OverrideArgs {
    /// The overrides; a loss without a seed gets a random one (`Err` if
    /// the kernel gives no randomness).
    fn overrides(&self) -> Result<Overrides, Failure> {
        let loss = match self.loss {
            None => None,
            Some(ppm) => {
                let seed = match self.loss_seed {
                    Some(s) => s,
                    None => sluice_io::random_key()
                        .map(|k| u64::from_le_bytes(k[..8].try_into().unwrap_or_default()))
                        .map_err(|e| Failure::Error(format!("--loss: no random seed: {e}")))?,
                };
                Some(sluice_lab::model::LinkLoss { ppm, seed })
            }
        };
        Ok(Overrides {
            down_bps: self.down,
            up_bps: self.up,
            rtt_ms: self.rtt,
            buffer_pkts: self.buffer,
            overhead: self.overhead.clone(),
            phase_secs: self.duration,
            cc: self.cc.clone(),
            window: self.window,
            window_down: self.window_down,
            window_up: self.window_up,
            ecn: self.ecn,
            fifo: self.fifo,
            streams: self.streams,
            drop_icmp: self.drop_icmp,
            loss,
            no_sack: self.no_sack,
            no_timestamps: self.no_timestamps,
            liars: self.liars,
            lie: self.lie,
        })
    }
}

/// What `run` and `compare` share: the scenario, its overrides and where
/// the results go.
#[derive(Args)]
struct Experiment {
    /// Scenario name (`sluice lab list`).
    scenario: String,
    #[command(flatten)]
    ov: OverrideArgs,
    /// Run directory (default lab-results/SCENARIO-YYYYmmdd-HHMMSS); for
    /// `compare`, run N goes to DIR/N-LABEL.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print summary.json to stdout, and nothing else (`compare`: the
    /// summaries as a JSON array).
    #[arg(long)]
    json: bool,
    /// Run sluice shapers with `--autorate-trace`: every autorate decision
    /// in autorate.csv and every delay sample in autorate-samples.csv of
    /// the run directory (docs/autorate.md).
    #[arg(long)]
    autorate_trace: bool,
    /// A hostile LAN host plays during the first loaded phase, bounded and
    /// inside the lab (docs/lab.md, "Attacks"): none, forged-ack,
    /// syn-flood, addr-claims, lying-clock. `compare` takes several (comma-separated)
    /// and runs each shaper under each in turn.
    #[arg(long, value_name = "KIND,…", value_delimiter = ',', value_parser = parse_attack)]
    attack: Vec<AttackArg>,
}

/// One `--attack` value (`none` is no attack).
#[derive(Clone, Copy, Debug)]
struct AttackArg(Option<Attack>);

fn parse_attack(s: &str) -> Result<AttackArg, String> {
    Attack::parse(s).map(AttackArg)
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    exp: Experiment,
    /// A pf.conf (macros ext_if and int_if are defined), `none` (a plain
    /// bridge), or tc:'QDISC ARGS[;DOWN QDISC ARGS]' for the kernel's own
    /// qdisc. Default: the scenario's example config.
    #[arg(long, value_name = "FILE|none|tc:ARGS")]
    shaper: Option<String>,
}

#[derive(Args)]
struct CompareArgs {
    #[command(flatten)]
    exp: Experiment,
    /// A shaper to compare (repeat: each runs in turn on the same link and
    /// traffic). Default: none, then the scenario's example config.
    #[arg(long, value_name = "FILE|none|tc:ARGS")]
    shaper: Vec<String>,
}

pub fn run(a: LabArgs) -> ExitCode {
    match a.cmd {
        LabCmd::List => {
            list();
            ExitCode::SUCCESS
        }
        LabCmd::Run(r) => finish(lab(r.exp, std::slice::from_ref(&r.shaper), false)),
        LabCmd::Bench(b) => finish(bench(b)),
        LabCmd::Blast(b) => finish(blast(b)),
        LabCmd::Attack(a) => attack::run(a),
        LabCmd::Compare(c) => {
            let shapers = if c.shaper.is_empty() {
                vec![Some("none".to_string()), None]
            } else {
                c.shaper.iter().cloned().map(Some).collect()
            };
            finish(lab(c.exp, &shapers, true))
        }
    }
}

fn finish(r: Result<(), Failure>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Interrupted) => {
            ewriteln!("sluice lab: interrupted; the lab's namespaces were removed");
            ExitCode::from(130)
        }
        Err(Failure::Error(m)) => {
            ewriteln!("sluice lab: error: {m}");
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}

enum Failure {
    Interrupted,
    Error(String),
    /// Diagnostics are already on stderr.
    Reported,
}

fn list() {
    for s in scenario::all() {
        let l = &s.link;
        let link = format!(
            "{}/{} rtt {}ms buf {}p",
            format_rate_short(Rate::bps(l.down_bps)),
            format_rate_short(Rate::bps(l.up_bps)),
            l.rtt_ms,
            l.buffer_pkts
        );
        owriteln!("{:<13} {:<26} {}", s.name, link, s.about);
    }
}

/// The scenario's example config: in the current directory, the
/// executable's repository (target/{release,debug}/../..), the source tree
/// it was built from, or the install's share directory.
fn find_example(rel: &str) -> Option<PathBuf> {
    let mut roots = vec![PathBuf::from(".")];
    if let Ok(exe) = std::env::current_exe() {
        if let Some(repo) = exe
            .parent()
            .and_then(|p| p.parent())
            .and_then(|p| p.parent())
        {
            roots.push(repo.to_path_buf());
        }
    }
    roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    roots.push(PathBuf::from(SHARE_DIR));
    roots.into_iter().map(|r| r.join(rel)).find(|p| p.is_file())
}

/// The shaper of `--shaper` (or the scenario's default), with a pf.conf
/// checked as sluice will load it.
fn resolve_shaper(arg: Option<&str>, s: &Scenario) -> Result<ShaperSpec, Failure> {
    let spec = match arg {
        Some(a) => ShaperSpec::parse(a).map_err(Failure::Error)?,
        None => {
            let p = find_example(&s.shaper_example).ok_or_else(|| {
                Failure::Error(format!(
                    "cannot find {} (the {} scenario's shaper) in the current directory, the \
                     executable's repository or {SHARE_DIR}; run from the repository or give \
                     --shaper FILE",
                    s.shaper_example, s.name
                ))
            })?;
            ShaperSpec::Sluice {
                path: p.to_string_lossy().into_owned(),
            }
        }
    };
    if let ShaperSpec::Sluice { path } = &spec {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Error(format!("--shaper {path}: {e}")))?;
        let defines = [
            ("ext_if".to_string(), sluice_lab::topo::WAN_IF.to_string()),
            ("int_if".to_string(), sluice_lab::topo::LAN_IF.to_string()),
        ];
        match sluice_conf::check(path, &text, &defines) {
            Ok(c) => {
                for w in &c.warnings {
                    ewrite!("{}", w.render(path, &text));
                }
            }
            Err(diags) => {
                for d in &diags {
                    ewrite!("{}", d.render(path, &text));
                }
                ewriteln!(
                    "sluice lab: error: {path}: invalid shaper configuration, nothing was run"
                );
                return Err(Failure::Reported);
            }
        }
    }
    Ok(spec)
}

/// Where the shipped rate traces live (relative to the repository or
/// install root, as the scenarios' example configs).
const TRACE_DIR: &str = "examples/lab/traces";

/// `--trace`: a file, else a shipped trace by name; refused with the
/// file, line and column of what is wrong.
fn load_trace(arg: &str) -> Result<sluice_lab::trace::RateTrace, Failure> {
    let path = if Path::new(arg).is_file() {
        PathBuf::from(arg)
    } else {
        find_example(&format!("{TRACE_DIR}/{arg}.trace")).ok_or_else(|| {
            Failure::Error(format!(
                "--trace {arg}: no such file, and no shipped trace of that name; shipped: {} \
                 (in {TRACE_DIR})",
                shipped_traces().join(", ")
            ))
        })?
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::Error(format!("--trace {}: {e}", path.display())))?;
    let name = path
        .file_stem()
        .map_or_else(|| arg.to_string(), |n| n.to_string_lossy().into_owned());
    sluice_lab::trace::RateTrace::parse(&name, &text).map_err(|e| {
        let sep = if e.line == 0 { ": " } else { ":" };
        Failure::Error(format!("--trace {}{sep}{e}", path.display()))
    })
}

/// The names of the shipped traces (for the hint of an unknown one).
fn shipped_traces() -> Vec<String> {
    // Found through a file every install has (directories are not looked up).
    let mut names: Vec<String> = find_example(&format!("{TRACE_DIR}/step.trace"))
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let p = e.ok()?.path();
            if p.extension()? != "trace" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// The sluice executable for the shaper and the delay line.
fn sluice_bin() -> Result<PathBuf, Failure> {
    if let Some(p) = std::env::var_os("SLUICE_BIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe().map_err(|e| Failure::Error(format!("current executable: {e}")))
}

/// Raises `stop` on SIGINT/SIGTERM (the runner cleans up and returns).
fn watch_signals(stop: Arc<AtomicBool>) -> Result<(), Failure> {
    let signals = sluice_io::Signals::install()
        .map_err(|e| Failure::Error(format!("cannot install signal handlers: {e}")))?;
    std::thread::spawn(move || loop {
        if signals.wait() == sluice_io::Signal::Stop {
            stop.store(true, Ordering::SeqCst);
        }
    });
    Ok(())
}

/// A label as a directory name part.
fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    s.trim_matches('_').to_string()
}

fn lab(exp: Experiment, shapers: &[Option<String>], compare: bool) -> Result<(), Failure> {
    let Experiment {
        scenario: name,
        ov,
        out,
        json,
        autorate_trace,
        attack,
    } = exp;
    let attacks: Vec<Option<Attack>> = match attack.len() {
        0 => vec![None],
        1 => vec![attack[0].0],
        _ if compare => attack.iter().map(|a| a.0).collect(),
        _ => {
            return Err(Failure::Error(
                "`lab run` takes one --attack; several are for `lab compare`".into(),
            ))
        }
    };
    let mut s = scenario::by_name(&name).ok_or_else(|| {
        let names: Vec<_> = scenario::all().into_iter().map(|s| s.name).collect();
        Failure::Error(format!(
            "no scenario `{name}`; allowed: {} (see `sluice lab list`)",
            names.join(", ")
        ))
    })?;
    ov.overrides()?.apply(&mut s);
    if let Some(arg) = &ov.trace {
        s.link.follow(load_trace(arg)?);
    }
    runner::check_latency_probe(&s).map_err(Failure::Error)?;
    let specs = shapers
        .iter()
        .map(|a| resolve_shaper(a.as_deref(), &s))
        .collect::<Result<Vec<_>, _>>()?;
    if !rustix::process::geteuid().is_root() {
        return Err(Failure::Error(
            "sluice lab needs root (it creates network namespaces): run it with sudo".into(),
        ));
    }
    runner::check_tools(&s).map_err(Failure::Error)?;
    runner::check_windows(&s).map_err(Failure::Error)?;
    runner::check_cc(&s.cc).map_err(Failure::Error)?;
    let bin = sluice_bin()?;
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone())?;

    let base = out.unwrap_or_else(|| {
        PathBuf::from("lab-results").join(format!(
            "{}-{}",
            s.name,
            runner::dir_stamp(sluice_lab::probes::wall_now())
        ))
    });
    // The paths the outputs wrote; the first is the report to point at.
    let mut written: Vec<PathBuf> = Vec::new();
    // Each shaper under each attack, the shaper's runs together.
    let mut plan: Vec<(&ShaperSpec, Scenario)> = Vec::new();
    for spec in &specs {
        for &a in &attacks {
            let mut s = s.clone();
            s.attack = a;
            plan.push((spec, s));
        }
    }
    let mut runs = Vec::with_capacity(plan.len());
    let mut dirs = Vec::with_capacity(plan.len());
    let n = plan.len();
    for (i, (spec, s)) in plan.iter().enumerate() {
        let label = s.run_label(&spec.label());
        let dir = if compare {
            base.join(format!("{}-{}", i + 1, slug(&label)))
        } else {
            base.clone()
        };
        let o = RunOptions {
            sluice_bin: bin.clone(),
            dir: dir.clone(),
            stop: stop.clone(),
            progress: Progress::auto(),
            tag: if compare {
                format!("{} {}/{n} {label}", s.name, i + 1)
            } else {
                format!("{} {label}", s.name)
            },
            autorate_trace,
        };
        let r = match runner::run(s, spec, &o) {
            Ok(r) => r,
            Err(LabError::Interrupted) => return Err(Failure::Interrupted),
            Err(LabError::Failed(m)) => {
                return Err(Failure::Error(format!("{} with {label}: {m}", s.name,)))
            }
        };
        let files = write_outputs(&dir, &r)
            .map_err(|e| Failure::Error(format!("{}: {e}", dir.display())))?;
        if !compare {
            written = files;
        }
        for w in &r.summary.warnings {
            ewriteln!("sluice lab: warning ({label}): {w}");
        }
        runs.push(r);
        dirs.push(dir);
    }
    if compare {
        written = write_compare_outputs(&base, &runs, &dirs)
            .map_err(|e| Failure::Error(format!("{}: {e}", base.display())))?;
    }
    let summaries: Vec<&Summary> = runs.iter().map(|r| &r.summary).collect();
    let tab = table(&summaries);
    if json {
        ewrite!("{tab}");
        let text = if compare {
            serde_json::to_string_pretty(&summaries)
        } else {
            serde_json::to_string_pretty(&runs[0].summary)
        }
        .map_err(|e| Failure::Error(e.to_string()))?;
        owriteln!("{text}");
    } else {
        owrite!("{tab}");
    }
    let report = written
        .first()
        .cloned()
        .unwrap_or_else(|| base.join("summary.json"));
    let line = format!("results: {} (report: {})", base.display(), report.display());
    if json {
        ewriteln!("{line}");
    } else {
        owriteln!("{line}");
    }
    Ok(())
}

/// The run directory's outputs (report.html first, then summary.json, the
/// CSV series and the plots), plus `series.json`: every sample in one file
/// for tools that prefer JSON to the CSVs, and `<scenario>.flent.gz` for flent.
fn write_outputs(dir: &Path, run: &RunResult) -> io::Result<Vec<PathBuf>> {
    let mut written = sluice_lab::report::write_run(dir, run)?;
    let s = dir.join("series.json");
    std::fs::write(&s, serde_json::to_string(&run.series)?)?;
    written.push(s);
    written.push(sluice_lab::flent::write(dir, run)?);
    Ok(written)
}

/// The compare directory's outputs (report.html first).
fn write_compare_outputs(
    dir: &Path,
    runs: &[RunResult],
    run_dirs: &[PathBuf],
) -> io::Result<Vec<PathBuf>> {
    sluice_lab::report::write_compare(dir, runs, run_dirs)
}

/// The before/after table.
fn table(summaries: &[&Summary]) -> String {
    sluice_lab::report::table(summaries)
}
