//! One lab run: build the network, start the shaper, play the scenario's
//! phases in wall-clock time, collect the probes and summarise.
//!
//! # Principles
//! - `t = 0` is the start of phase 0 on the wall clock, so `ping -D`, irtt
//!   and the rate sampler share one time base; flows start on time at
//!   their first phase and are interrupted (SIGINT, so iperf3 still prints
//!   what it measured) when they overrun their last phase by
//!   [`FLOW_GRACE_S`] plus the worst RTT seen — iperf3's own timer starts only after its set-up,
//!   which can take seconds behind a full FIFO.
//! - The last probes get time to come back: the run lingers for the worst
//!   RTT seen plus a margin, bounded by [`LINGER_MAX_S`]. irtt waits for
//!   its own ([`IRTT_WAIT_RTTS`] × its worst RTT) and is interrupted only
//!   past a wait for replies that late: an interrupted irtt writes nothing.
//! - Every exit path, Ctrl-C included (the caller's `stop` flag, polled
//!   every [`TICK`]), leaves nothing behind: all state lives in a
//!   [`LabNet`] whose drop kills the processes and deletes the namespaces.
//! - What helps a user see why stays in the run directory: raw probe
//!   output, iperf3's JSON, sluice's log and queue counters, the modem's
//!   `tc -s` statistics.

use crate::analysis;
use crate::iperf3;
use crate::model::{
    Dir, FlowRecord, PingSample, RunResult, Scenario, Series, ShaperSpec, RATE_PERIOD,
};
use crate::netns::ProcId;
use crate::probes::{self, HostMeter, RateSampler, RxPoint};
use crate::shaper::Shaper;
use crate::topo::{host_ip, LabNet, SERVER_IP};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod attacker;
mod clock;
mod hosts;
mod progress;
pub use clock::{dir_stamp, rfc3339};
pub use hosts::check_cc;
use hosts::{host_tcp, HOST_SYSCTLS};
use progress::Bar;
pub use progress::Progress;

/// Main-loop period: flow starts are this punctual, Ctrl-C this quick.
const TICK: Duration = Duration::from_millis(50);
/// Per-host goodput sampling period (multi-host scenarios): each sample
/// runs `ss` in the server namespace, so fewer than the rate's.
const HOST_RATE_PERIOD_S: f64 = 0.5;
/// A flow still running this long after its last phase, plus the worst
/// ping RTT seen (an upload's final report waits for the modem's FIFO to
/// drain), is interrupted.
pub const FLOW_GRACE_S: f64 = 2.0;
/// How often the worst RTT so far is re-read from ping's output.
const WORST_RTT_EVERY_S: f64 = 1.0;
/// After SIGINT, how long a flow gets to print its JSON before SIGKILL.
const FLOW_STOP_S: f64 = 3.0;
/// Bounds of the final linger (seconds) waiting for late ping replies.
const LINGER_MIN_S: f64 = 1.0;
pub const LINGER_MAX_S: f64 = 10.0;
/// Set-up margin between building the network and `t = 0`.
const START_MARGIN: Duration = Duration::from_millis(300);
const FIRST_PORT: u16 = 5201;
/// A full-size Ethernet frame, bits (for FIFO drain times).
const FULL_FRAME_BITS: f64 = 1514.0 * 8.0;
/// How long an iperf3 server gets to start listening (20 ms steps).
const SERVER_READY_TRIES: u32 = 150;
const IRTT_PORT: u16 = 2112;
/// How long the irtt server gets to start listening (20 ms steps).
const IRTT_READY_TRIES: u32 = 150;
/// The irtt client waits this many times its worst RTT for the last
/// replies (`--wait NxDUR`). irtt's own default (3×) outlasted the runner
/// behind a bloated FIFO: at a worst RTT of 4.4 s it waited 13 s, was
/// interrupted, and an interrupted irtt writes no JSON at all ("context
/// canceled"), so the runs that most need a MOS had none.
const IRTT_WAIT_RTTS: u32 = 2;

/// How to run.
pub struct RunOptions {
    /// The sluice executable (shaper and delay line).
    pub sluice_bin: PathBuf,
    /// The run directory (created).
    pub dir: PathBuf,
    /// Set by the caller's signal handler: stop and clean up.
    pub stop: Arc<AtomicBool>,
    pub progress: Progress,
    /// Shown before the phase in progress lines (e.g. "2/3 none").
    pub tag: String,
    /// sluice runs with `--autorate-trace`: every autorate decision and
    /// delay sample in the run directory.
    pub autorate_trace: bool,
}

/// Why a run produced no result.
#[derive(Debug)]
pub enum LabError {
    /// The stop flag was raised (Ctrl-C); everything was cleaned up.
    Interrupted,
    Failed(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Interrupted => write!(f, "interrupted"),
            LabError::Failed(m) => write!(f, "{m}"),
        }
    }
}

impl From<std::io::Error> for LabError {
    fn from(e: std::io::Error) -> LabError {
        LabError::Failed(e.to_string())
    }
}

/// The tools a scenario needs, with the Debian package of each.
pub fn required_tools(scenario: &Scenario) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("ss", "iproute2"),
        ("ethtool", "ethtool"),
        ("iperf3", "iperf3"),
        ("ping", "iputils-ping"),
    ];
    if scenario.irtt.is_some() {
        v.push(("irtt", "irtt"));
    }
    v
}

/// `Err` names every missing tool and its package.
pub fn check_tools(scenario: &Scenario) -> Result<(), String> {
    let missing: Vec<String> = required_tools(scenario)
        .into_iter()
        .filter(|(tool, _)| {
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(std::process::Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        })
        .map(|(tool, pkg)| format!("`{tool}` (Debian package {pkg})"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "missing tools: {}; install them, e.g. `apt-get install {}`",
            missing.join(", "),
            required_tools(scenario)
                .into_iter()
                .map(|(_, p)| p)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(" ")
        ))
    }
}

/// Refuses a flow window the kernel would silently clamp: a socket buffer
/// request above `net.core.rmem_max`/`wmem_max` gets the maximum instead
/// (socket(7), SO_RCVBUF/SO_SNDBUF). These two sysctls are the host's,
/// whichever namespace reads them.
pub fn check_windows(scenario: &Scenario) -> Result<(), String> {
    let Some(w) = scenario.flows.iter().filter_map(|f| f.window).max() else {
        return Ok(());
    };
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let limits = [
        ("rmem_max", read("rmem_max")),
        ("wmem_max", read("wmem_max")),
    ];
    window_fits(w, &limits)
}

/// `Err` when the link drops ICMP (`--drop-icmp`) and the scenario has no
/// irtt stream to measure latency with instead.
pub fn check_latency_probe(scenario: &Scenario) -> Result<(), String> {
    if !scenario.link.drop_icmp || scenario.irtt.is_some() {
        return Ok(());
    }
    let with: Vec<String> = crate::scenario::all()
        .into_iter()
        .filter(|s| s.irtt.is_some())
        .map(|s| s.name)
        .collect();
    Err(format!(
        "--drop-icmp: scenario `{}` has no irtt stream, and with ICMP dropped beyond the modem \
         its latency can only be measured with irtt's round trips; scenarios with one: {}",
        scenario.name,
        with.join(", ")
    ))
}

/// `Err` when `window` exceeds one of the named kernel limits (an unread
/// limit is not checked).
fn window_fits(window: u64, limits: &[(&str, Option<u64>)]) -> Result<(), String> {
    for (name, limit) in limits {
        if let Some(max) = *limit {
            if window > max {
                return Err(format!(
                    "a window of {window} bytes is above net.core.{name} ({max} bytes): the \
                     kernel would clamp the socket buffer to it; give a smaller --window, or \
                     raise the limit (sysctl -w net.core.{name}={window})"
                ));
            }
        }
    }
    Ok(())
}

/// A bulk flow while it runs.
struct Flow {
    port: u16,
    /// Its iperf3 server (stopped with SIGINT before an interrupted
    /// upload's count is read from it).
    server: ProcId,
    proc_id: Option<ProcId>,
    interrupted_at: Option<f64>,
    start_s: f64,
    end_s: Option<f64>,
    json: PathBuf,
}

/// The irtt client while it runs.
struct Irtt {
    proc_id: Option<ProcId>,
    interrupted_at: Option<f64>,
    json: PathBuf,
}

/// Seconds since `t0`.
fn since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

/// What one iperf3 JSON says: goodput, retransmits, the sender's
/// congestion control, or why there is nothing. An interrupted client
/// (SIGINT at the overrun limit) still reports what it measured.
fn flow_outcome(text: &str) -> (Option<f64>, Option<u64>, Option<String>, Option<String>) {
    // iperf3 may print a warning line on stdout before its JSON ("Size of
    // data read does not correspond to offered length" when interrupted).
    let text = text.find('{').and_then(|i| text.get(i..)).unwrap_or(text);
    if let Ok(r) = iperf3::parse_json(text) {
        let cc = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| {
                v.pointer("/end/sender_tcp_congestion")?
                    .as_str()
                    .map(String::from)
            });
        return (Some(r.goodput_bps), Some(r.retransmits), cc, None);
    }
    let v: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let got = v.as_ref().and_then(|v| {
        let recv = v.pointer("/end/sum_received/bits_per_second")?.as_f64()?;
        let secs = v.pointer("/end/sum_received/seconds")?.as_f64()?;
        (secs > 0.0 && recv > 0.0).then_some(recv)
    });
    match got {
        Some(bps) => {
            let retr = v
                .as_ref()
                .and_then(|v| v.pointer("/end/sum_sent/retransmits")?.as_u64());
            (Some(bps), retr, None, None)
        }
        None => {
            let err = v
                .as_ref()
                .and_then(|v| v.get("error")?.as_str().map(String::from))
                .unwrap_or_else(|| {
                    if text.trim().is_empty() {
                        "no output from iperf3".into()
                    } else {
                        "unreadable iperf3 output".into()
                    }
                });
            (None, None, None, Some(err))
        }
    }
}

/// Seconds from the start of phase `from` to the end of phase `to`.
fn span(s: &Scenario, from: usize, to: usize) -> (f64, f64) {
    let w = s.phase_windows();
    let a = w.get(from).map(|x| x.0).unwrap_or(0.0);
    let b = w.get(to).map(|x| x.1).unwrap_or(a);
    (a, b)
}

/// Runs `scenario` with `shaper`; the run directory is filled as it goes.
pub fn run(
    scenario: &Scenario,
    shaper: &ShaperSpec,
    o: &RunOptions,
) -> Result<RunResult, LabError> {
    check_hosts(scenario).map_err(LabError::Failed)?;
    std::fs::create_dir_all(&o.dir)?;
    let stopped = || o.stop.load(Ordering::SeqCst);
    let mut bar = Bar {
        mode: o.progress,
        tag: o.tag.clone(),
        last_phase: None,
    };
    bar.note("building the network");
    let ts_lie = (scenario.attack == Some(crate::attack::Attack::LyingClock))
        .then_some((scenario.lying.clock, crate::attack::SINK_PORT));
    let mut net = LabNet::build(
        &scenario.link,
        scenario.hosts,
        &o.sluice_bin,
        &o.dir,
        ts_lie,
    )?;
    if stopped() {
        return Err(LabError::Interrupted);
    }
    host_tcp(&net, scenario)?;
    let mut sh = Shaper::start(&mut net, shaper, &o.sluice_bin, &o.dir, o.autorate_trace)
        .map_err(LabError::Failed)?;
    let mut warnings = Vec::new();
    // After the shaper's start, which waits for a ping to cross.
    if scenario.link.drop_icmp {
        net.drop_forwarded_icmp()?;
    }

    // Servers: one iperf3 per flow (one server serves one test at a time).
    let server_ns = net.server.clone();
    let mut flows: Vec<Flow> = Vec::with_capacity(scenario.flows.len());
    for (i, f) in scenario.flows.iter().enumerate() {
        let port = FIRST_PORT + i as u16;
        let json = o.dir.join(format!("flow{i}-{}.json", dir_name(f.dir)));
        let server = iperf3_server(&mut net, port, &json.with_extension("server.json"))?;
        flows.push(Flow {
            port,
            server,
            proc_id: None,
            interrupted_at: None,
            start_s: span(scenario, f.from, f.to).0,
            end_s: None,
            json,
        });
    }
    let mut attacker = attacker::Attacker::start(&mut net, scenario, &o.sluice_bin, &o.dir)?;
    let mut irtt = None;
    if scenario.irtt.is_some() {
        let bind = format!("{SERVER_IP}:{IRTT_PORT}");
        net.topo.spawn(
            &server_ns,
            &["irtt", "server", "-b", &bind, "-i", "0"],
            Some(&o.dir.join("irtt-server.log")),
        )?;
        let needle = format!(":{IRTT_PORT} ");
        let mut ready = false;
        for _ in 0..IRTT_READY_TRIES {
            let out = net.topo.exec(&server_ns, &["ss", "-Hlun"])?;
            if String::from_utf8_lossy(&out.stdout).contains(&needle) {
                ready = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !ready {
            return Err(LabError::Failed("irtt server did not start".into()));
        }
        irtt = Some(Irtt {
            proc_id: None,
            interrupted_at: None,
            json: o.dir.join("irtt.json"),
        });
    }

    // Anchors: processes whose /proc/PID/net/dev is each end's view (the
    // LAN's: the single host's, or the switch's with several).
    let (lan_ns, lan_if) = net.lan_rx_point();
    let lan_ns = lan_ns.clone();
    let anchor_c = net.topo.spawn(&lan_ns, &["sleep", "1000000"], None)?;
    let anchor_v = net.topo.spawn(&server_ns, &["sleep", "1000000"], None)?;
    let pid = |id| {
        net.topo
            .pid(id)
            .ok_or_else(|| LabError::Failed("anchor pid".into()))
    };
    let (pid_c, pid_v) = (pid(anchor_c)?, pid(anchor_v)?);

    // A trace that says `align` starts at a multiple of its period of the
    // wall clock (a schedule of the clock's, as Starlink's); the wait is
    // under one period.
    let (now_wall, now) = (probes::wall_now(), Instant::now());
    let margin = START_MARGIN.as_secs_f64();
    let wait = scenario
        .link
        .trace
        .as_ref()
        .map_or(margin, |tr| tr.start_wait_s(now_wall, margin));
    if wait > 1.0 {
        bar.note(&format!(
            "waiting {wait:.1} s to start on the trace's clock"
        ));
    }
    let t0_wall = now_wall + wait;
    let t0 = now + Duration::from_secs_f64(wait);
    let sampler = RateSampler::start(
        RxPoint {
            pid: pid_c,
            ifname: lan_if.into(),
        },
        RxPoint {
            pid: pid_v,
            ifname: "v0".into(),
        },
        RATE_PERIOD,
        t0_wall,
    );
    while let Some(left) = t0.checked_duration_since(Instant::now()) {
        if stopped() {
            bar.done();
            return Err(LabError::Interrupted);
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    let interval_s = f64::from(scenario.ping_interval_ms.max(1)) / 1000.0;
    let ping_txt = o.dir.join("ping.txt");
    let ping_start_wall = probes::wall_now();
    let ping_i = format!("{interval_s}");
    let ping_ns = net.hosts[scenario.ping_host].clone();
    let ping = net.topo.spawn_split(
        &ping_ns,
        &["ping", "-n", "-D", "-i", &ping_i, SERVER_IP],
        &ping_txt,
        &o.dir.join("ping.err"),
    )?;

    let total = scenario.total_secs();
    let (mut worst_s, mut worst_at) = (0.0f64, f64::NEG_INFINITY);
    // An upload's final report waits for the modem's FIFO to drain: full
    // frames at the slower rate.
    let l = &scenario.link;
    let drain_s = (f64::from(l.buffer_pkts) * FULL_FRAME_BITS
        / l.up_bps.min(l.down_bps).max(1) as f64)
        .min(LINGER_MAX_S);
    // The hosts' TCP state (`ss -tinm`) once per loaded phase, at its
    // middle: windows, cwnd, socket buffers and the ECN flag as they were.
    let tcp_txt = o.dir.join("tcp.txt");
    let mut snapped = vec![false; scenario.phases.len()];
    // Per-host goodput (several hosts only: one host's is the whole rate).
    let mut meter =
        (scenario.hosts > 1).then(|| HostMeter::new((0..scenario.hosts).map(host_ip).collect()));
    let (mut host_rate, mut meter_at) = (Vec::new(), f64::NEG_INFINITY);
    // A moving link: the modem was built at the trace's first step; the
    // others are played as their time comes (one `tc class change` per
    // direction), each logged with when it took effect.
    let trace = scenario.link.trace.as_ref();
    let mut next_step = 1;
    let trace_csv = o.dir.join("trace.csv");
    if trace.is_some() {
        keep(
            &mut warnings,
            &trace_csv,
            "t_planned_s,t_applied_s,down_bps,up_bps\n",
        );
    }
    // Main loop: bounded by the scenario's length (plus the linger below).
    loop {
        if stopped() {
            bar.done();
            return Err(LabError::Interrupted);
        }
        let t = since(t0);
        if t >= total {
            break;
        }
        bar.show(scenario, t);
        if t >= worst_at + WORST_RTT_EVERY_S {
            worst_at = t;
            worst_s = std::fs::read_to_string(&ping_txt)
                .map(|t| probes::ping_worst_ms(&t) / 1000.0)
                .unwrap_or(0.0)
                .min(LINGER_MAX_S);
        }
        let grace = FLOW_GRACE_S + worst_s.max(drain_s);
        if let Some(tr) = trace {
            play_trace(
                &net,
                scenario,
                tr,
                &mut next_step,
                t0,
                &trace_csv,
                &mut warnings,
            );
        }
        tend_flows(&mut net, scenario, &mut flows, t, grace)?;
        tend_irtt(&mut net, scenario, irtt.as_mut(), t)?;
        if let Some(a) = attacker.as_mut() {
            a.tend(&mut net, t)?;
        }
        if let Some(m) = meter
            .as_mut()
            .filter(|_| t >= meter_at + HOST_RATE_PERIOD_S)
        {
            meter_at = t;
            let out = net
                .topo
                .exec_unchecked(&server_ns, &["ss", "-tinH", "state", "established"])?;
            host_rate.extend(m.sample(since(t0), &String::from_utf8_lossy(&out.stdout)));
        }
        if let Some(i) = snapshot_due(scenario, &snapped, t) {
            snapped[i] = true;
            let text = tcp_snapshot(&net, &scenario.phases[i].name, t);
            append(&mut warnings, &tcp_txt, &text);
        }
        std::thread::sleep(TICK);
    }

    // Linger: late replies, and flows finishing their last seconds.
    let worst_s = std::fs::read_to_string(&ping_txt)
        .map(|t| probes::ping_worst_ms(&t) / 1000.0)
        .unwrap_or(0.0)
        .min(LINGER_MAX_S);
    let grace = FLOW_GRACE_S + worst_s.max(drain_s);
    let linger = (worst_s + 0.5).clamp(LINGER_MIN_S, LINGER_MAX_S);
    bar.note(&format!("waiting {linger:.1} s for the last replies"));
    let linger_end = total + linger;
    // irtt waits for its own late replies (IRTT_WAIT_RTTS × its worst RTT),
    // which ping may not have seen (ICMP dropped): while it runs it has
    // until its own interrupt, and a stop after.
    let irtt_stop_s = scenario
        .irtt
        .as_ref()
        .map(|spec| irtt_interrupt_s(span(scenario, spec.from, spec.to).1) + FLOW_STOP_S);
    loop {
        if stopped() {
            bar.done();
            return Err(LabError::Interrupted);
        }
        let t = since(t0);
        tend_flows(&mut net, scenario, &mut flows, t, grace)?;
        tend_irtt(&mut net, scenario, irtt.as_mut(), t)?;
        let flows_done = flows
            .iter()
            .all(|f| f.end_s.is_some() || f.proc_id.is_none());
        let irtt_done = irtt.as_mut().is_none_or(|i| match i.proc_id {
            Some(id) => !matches!(net.topo.try_status(id), Ok(None)),
            None => true,
        });
        if t >= linger_end && flows_done && irtt_done {
            break;
        }
        let irtt_stop = irtt_stop_s.filter(|_| !irtt_done).unwrap_or(0.0);
        if t >= (linger_end + grace + FLOW_STOP_S).max(irtt_stop) {
            // Whatever still runs is stopped now (its output is partial).
            for f in flows.iter_mut().filter(|f| f.end_s.is_none()) {
                if let Some(id) = f.proc_id {
                    let _ = net.topo.stop(id, "INT");
                    f.end_s = Some(since(t0));
                }
            }
            if let Some(id) = irtt.as_ref().and_then(|i| i.proc_id) {
                let _ = net.topo.stop(id, "INT");
            }
            break;
        }
        std::thread::sleep(TICK);
    }
    bar.done();
    let _ = net.topo.stop(ping, "INT");
    let attack = attacker.map(|a| a.finish(&mut net, since(t0)));
    let rate = sampler.finish();

    // What the shaper and the modem saw.
    if !sh.alive(&mut net) {
        warnings.push(format!(
            "sluice exited during the run; its log:\n{}",
            sh.log_text()
        ));
    }
    if let Some(q) = sh.queues(&net, &o.sluice_bin) {
        // As `sluice show queues --json` prints it.
        let reply = sluice_control::proto::Reply::Queues(q);
        let text = serde_json::to_string_pretty(&reply).unwrap_or_default();
        keep(&mut warnings, &o.dir.join("queues.json"), &text);
    }
    keep(&mut warnings, &o.dir.join("modem.txt"), &net.qdisc_report());
    sh.stop(&mut net);
    if !net.delay_line_alive() {
        warnings.push("the delay line exited during the run (see delay-line.log)".into());
    }
    net.stop_delay_line();

    // autorate's decisions (sluice with autorate only), in run time.
    let autorate_csv = o.dir.join("autorate.csv");
    let shaper_rate = match std::fs::read_to_string(&autorate_csv) {
        Ok(text) => {
            probes::parse_autorate(&text, t0_wall, crate::topo::LAN_IF, crate::topo::WAN_IF)
                .unwrap_or_else(|e| {
                    warnings.push(e);
                    Vec::new()
                })
        }
        Err(_) => Vec::new(),
    };

    // Series.
    let ping_text = read_probe(&mut warnings, "ping", &ping_txt);
    let mut ping_samples: Vec<_> =
        probes::parse_ping(&ping_text, interval_s, ping_start_wall, t0_wall)
            .into_iter()
            .filter(|p| p.t_s < total)
            .collect();
    let mut irtt_samples = Vec::new();
    if let (Some(i), Some(spec)) = (&irtt, &scenario.irtt) {
        match std::fs::read_to_string(&i.json)
            .map_err(|e| e.to_string())
            .and_then(|t| probes::parse_irtt(&t, f64::from(spec.interval_ms) / 1000.0, t0_wall))
        {
            Ok(v) => irtt_samples = v.into_iter().filter(|s| s.t_s < total).collect(),
            Err(e) => warnings.push(format!("irtt: {e}")),
        }
    }
    if scenario.link.drop_icmp {
        // The ping still ran, to show the drop held: every echo lost.
        let answered = ping_samples.iter().filter(|p| p.rtt_ms.is_some()).count();
        if answered > 0 {
            warnings.push(format!(
                "--drop-icmp: {answered} of {} pings were answered across a modem that drops ICMP",
                ping_samples.len()
            ));
        }
        ping_samples = irtt_samples
            .iter()
            .map(|s| PingSample {
                t_s: s.t_s,
                rtt_ms: s.rtt_ms,
            })
            .collect();
    }
    let mut records = Vec::with_capacity(flows.len());
    for (f, spec) in flows.iter().zip(&scenario.flows) {
        let (mut goodput, retr, cc, mut err) = if f.proc_id.is_none() {
            (None, None, None, Some("never started".to_string()))
        } else {
            match std::fs::read_to_string(&f.json) {
                Ok(text) => flow_outcome(&text),
                Err(e) => (
                    None,
                    None,
                    None,
                    Some(format!("cannot read {}: {e}", f.json.display())),
                ),
            }
        };
        if goodput.is_none() && f.proc_id.is_some() {
            // An upload interrupted before its final exchange: the server
            // (the receiver) prints what it received when it stops.
            let _ = net.topo.stop(f.server, "INT");
            let server =
                std::fs::read_to_string(f.json.with_extension("server.json")).unwrap_or_default();
            if let (Some(g), _, _, None) = flow_outcome(&server) {
                goodput = Some(g);
                err = None;
            }
        }
        if let Some(cc) = &cc {
            if cc != &scenario.cc {
                warnings.push(format!(
                    "{:?} flow ran {cc}, not {} (iperf3 -C was refused?)",
                    spec.dir, scenario.cc
                ));
            }
        }
        records.push(FlowRecord {
            dir: spec.dir,
            streams: spec.streams,
            window: spec.window,
            host: spec.host,
            start_s: f.start_s,
            end_s: f.end_s.unwrap_or(total),
            goodput_bps: goodput,
            retransmits: retr,
            error: err,
        });
    }
    let series = Series {
        rate: rate
            .into_iter()
            .filter(|r| r.t_s > 0.0 && r.t_s <= total + RATE_PERIOD.as_secs_f64())
            .collect(),
        ping: ping_samples,
        irtt: irtt_samples,
        flows: records,
        host_rate,
        shaper_rate,
    };
    if let Some(e) = attack.as_ref().and_then(|a| a.error.as_ref()) {
        warnings.push(format!("the attack did not run as planned: {e}"));
    }
    let mut result = analysis::finish(
        scenario,
        &crate::attack::run_label(&shaper.label(), scenario),
        series,
        rfc3339(t0_wall),
        warnings,
    );
    result.summary.attack = attack;
    Ok(result)
}

/// Plays the trace's steps that are due at the run's time (only the latest
/// of several: a step the loop slept through lasted no time), from
/// `*next` on; each goes to `csv` with the time it took effect.
fn play_trace(
    net: &LabNet,
    scenario: &Scenario,
    trace: &crate::trace::RateTrace,
    next: &mut usize,
    t0: Instant,
    csv: &Path,
    warnings: &mut Vec<String>,
) {
    let t = since(t0);
    let due = trace.steps[*next..]
        .iter()
        .take_while(|s| s.t_s <= t)
        .count();
    if due == 0 {
        return;
    }
    *next += due;
    let step = trace.steps[*next - 1];
    match net.set_modem_rates(&scenario.link, step.down_bps, step.up_bps) {
        Ok(()) => append(
            warnings,
            csv,
            &format!(
                "{:.3},{:.3},{},{}\n",
                step.t_s,
                since(t0),
                step.down_bps,
                step.up_bps
            ),
        ),
        Err(e) => warnings.push(format!(
            "trace {}: the step at {} s was not applied: {e}",
            trace.name, step.t_s
        )),
    }
}

/// A probe's output, or (with a warning naming the file and the error)
/// nothing: an unreadable file is reported, not mistaken for a silent probe.
fn read_probe(warnings: &mut Vec<String>, probe: &str, path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        warnings.push(format!("{probe}: cannot read {}: {e}", path.display()));
        String::new()
    })
}

/// The loaded phase whose middle `t` has passed and whose TCP state is not
/// yet recorded.
fn snapshot_due(s: &Scenario, snapped: &[bool], t: f64) -> Option<usize> {
    s.phase_windows()
        .iter()
        .enumerate()
        .position(|(i, &(a, b))| {
            let (down, up) = s.load_in_phase(i);
            (down || up) && !snapped[i] && t >= (a + b) / 2.0 && t < b
        })
}

/// `Err` when a flow, the ping or the irtt stream names a LAN host the
/// scenario does not have, or the scenario has no host or too many.
pub fn check_hosts(s: &Scenario) -> Result<(), String> {
    use crate::model::MAX_HOSTS;
    if !(1..=MAX_HOSTS).contains(&s.hosts) {
        return Err(format!(
            "scenario {}: {} LAN hosts; a scenario has 1 to {MAX_HOSTS}",
            s.name, s.hosts
        ));
    }
    let users = s
        .flows
        .iter()
        .map(|f| ("a bulk flow", f.host))
        .chain([("the ping", s.ping_host)])
        .chain(s.irtt.as_ref().map(|i| ("the irtt stream", i.host)));
    for (what, host) in users {
        if host >= s.hosts {
            return Err(format!(
                "scenario {}: {what} runs on LAN host {host}, but the hosts are 0 to {}",
                s.name,
                s.hosts - 1
            ));
        }
    }
    Ok(())
}

/// `ss -tinm` and the TCP sysctls of the client and the server, under a
/// header naming the phase and the time. (iproute2 6.1's `ss` does not
/// print the `ts sack ecn` option flags on kernel 6.18, though TCP_INFO
/// has them: the sysctl says what the host was set to.)
fn tcp_snapshot(net: &LabNet, phase: &str, t: f64) -> String {
    let mut out = String::new();
    let hosts = net.hosts.iter().enumerate().map(|(i, h)| {
        let name = match net.hosts.len() {
            1 => "client".to_string(),
            _ => format!("client {} ({})", crate::model::host_name(i), host_ip(i)),
        };
        (name, h)
    });
    for (host, ns) in hosts.chain([("server".to_string(), &net.server)]) {
        out.push_str(&format!("== t={t:.1} s ({phase}) {host}: ss -tinm\n"));
        let sysctl: Vec<&str> = ["sysctl"].into_iter().chain(HOST_SYSCTLS).collect();
        for cmd in [
            sysctl.as_slice(),
            ["ss", "-tinm", "state", "established"].as_slice(),
        ] {
            match net.topo.exec_unchecked(ns, cmd) {
                Ok(o) => out.push_str(&String::from_utf8_lossy(&o.stdout)),
                Err(e) => out.push_str(&format!("({e})\n")),
            }
        }
    }
    out
}

/// Appends to one of the run's files, or says in the warnings why not.
fn append(warnings: &mut Vec<String>, path: &Path, text: &str) {
    use std::io::Write;
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = r {
        warnings.push(format!("cannot write {}: {e}", path.display()));
    }
}

/// Writes one of the run's files, or says in the warnings why it is missing.
fn keep(warnings: &mut Vec<String>, path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        warnings.push(format!("cannot write {}: {e}", path.display()));
    }
}

/// A one-shot iperf3 server on `port` in the server namespace, its JSON
/// (the receiver's counts for an upload) kept in `json`.
fn iperf3_server(net: &mut LabNet, port: u16, json: &Path) -> Result<ProcId, LabError> {
    let p = port.to_string();
    let ns = net.server.clone();
    let id = net.topo.spawn_split(
        &ns,
        &["iperf3", "-s", "-1", "-J", "-p", &p],
        json,
        &json.with_extension("err"),
    )?;
    let needle = format!(":{port} ");
    for _ in 0..SERVER_READY_TRIES {
        let out = net.topo.exec(&ns, &["ss", "-Hltn"])?;
        if String::from_utf8_lossy(&out.stdout).contains(&needle) {
            return Ok(id);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(LabError::Failed(format!(
        "iperf3 server on port {port} did not start"
    )))
}

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Down => "down",
        Dir::Up => "up",
    }
}

/// Starts flows whose first phase has begun, interrupts overrunning ones,
/// notes the ones that ended.
fn tend_flows(
    net: &mut LabNet,
    s: &Scenario,
    flows: &mut [Flow],
    t: f64,
    grace_s: f64,
) -> Result<(), LabError> {
    for (f, spec) in flows.iter_mut().zip(&s.flows) {
        let (a, b) = span(s, spec.from, spec.to);
        match f.proc_id {
            None if t >= a && t < b => {
                let secs = ((b - a).ceil() as u64).max(1).to_string();
                let (port, streams) = (f.port.to_string(), spec.streams.to_string());
                let mut args = vec![
                    "iperf3", "-c", SERVER_IP, "-p", &port, "-t", &secs, "-P", &streams, "-C",
                    &s.cc, "-J",
                ];
                let window = spec.window.map(|w| w.to_string());
                if let Some(w) = &window {
                    args.extend(["-w", w.as_str()]);
                }
                if spec.dir == Dir::Down {
                    args.push("-R");
                }
                let err = f.json.with_extension("err");
                let ns = net.hosts[spec.host].clone();
                f.proc_id = Some(net.topo.spawn_split(&ns, &args, &f.json, &err)?);
                f.start_s = t;
            }
            Some(id) if f.end_s.is_none() => {
                if !matches!(net.topo.try_status(id), Ok(None)) {
                    f.end_s = Some(t);
                } else if f.interrupted_at.is_none() && t >= b + grace_s {
                    let _ = net.topo.signal(id, "INT");
                    f.interrupted_at = Some(t);
                } else if f.interrupted_at.is_some_and(|i| t >= i + FLOW_STOP_S) {
                    let _ = net.topo.signal(id, "KILL");
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// When an irtt client whose stream ends at `end_s` is interrupted: after
/// its wait for replies as late as the worst the runner waits for
/// ([`LINGER_MAX_S`]).
fn irtt_interrupt_s(end_s: f64) -> f64 {
    end_s + FLOW_GRACE_S + f64::from(IRTT_WAIT_RTTS) * LINGER_MAX_S
}

/// The same for the irtt client.
fn tend_irtt(
    net: &mut LabNet,
    s: &Scenario,
    irtt: Option<&mut Irtt>,
    t: f64,
) -> Result<(), LabError> {
    let (Some(i), Some(spec)) = (irtt, &s.irtt) else {
        return Ok(());
    };
    let (a, b) = span(s, spec.from, spec.to);
    match i.proc_id {
        None if t >= a && t < b => {
            let dur = format!("{}ms", ((b - t) * 1000.0).max(1.0) as u64);
            let iv = format!("{}ms", spec.interval_ms.max(1));
            let len = spec.payload_bytes.to_string();
            let json = i.json.to_string_lossy().into_owned();
            let dst = format!("{SERVER_IP}:{IRTT_PORT}");
            let ns = net.hosts[spec.host].clone();
            let err = i.json.with_extension("err");
            // irtt's long options take their value after `=` only.
            let wait = format!("--wait={IRTT_WAIT_RTTS}x1s");
            i.proc_id = Some(net.topo.spawn_split(
                &ns,
                &[
                    "irtt", "client", "-i", &iv, "-l", &len, "-d", &dur, &wait, "-Q", "-o", &json,
                    &dst,
                ],
                &i.json.with_extension("log"),
                &err,
            )?);
        }
        Some(id) if i.interrupted_at.is_none() && t >= irtt_interrupt_s(b) => {
            if matches!(net.topo.try_status(id), Ok(None)) {
                let _ = net.topo.signal(id, "INT");
                i.interrupted_at = Some(t);
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupted_iperf3_still_reports() {
        let ok = r#"{"end":{"sum_sent":{"bits_per_second":1,"retransmits":3},
            "sum_received":{"seconds":2,"bits_per_second":900000},
            "sender_tcp_congestion":"cubic"}}"#;
        let (g, r, cc, e) = flow_outcome(ok);
        assert_eq!(
            (g, r, cc.as_deref(), e),
            (Some(900000.0), Some(3), Some("cubic"), None)
        );
        let int = r#"{"error":"interrupt - the client has terminated","end":{
            "sum_sent":{"retransmits":1},"sum_received":{"seconds":2.9,"bits_per_second":4e5}}}"#;
        let (g, r, _, e) = flow_outcome(int);
        assert_eq!((g, r, e), (Some(4e5), Some(1), None));
        let warned = format!("WARNING:  Size of data read does not correspond\n{int}");
        assert_eq!(flow_outcome(&warned).0, Some(4e5));
        let failed = r#"{"error":"unable to connect to server","end":{}}"#;
        let (g, _, _, e) = flow_outcome(failed);
        assert_eq!(g, None);
        assert!(e.unwrap().contains("unable to connect"));
        assert_eq!(flow_outcome("").3.as_deref(), Some("no output from iperf3"));
    }
}

#[cfg(test)]
mod host_tests {
    use super::*;

    #[test]
    fn windows_above_the_kernel_limits_are_refused() {
        let limits = [("rmem_max", Some(212_992)), ("wmem_max", Some(4 << 20))];
        assert_eq!(window_fits(64 << 10, &limits), Ok(()));
        assert_eq!(window_fits(212_992, &limits), Ok(()));
        let e = window_fits(256 << 10, &limits).unwrap_err();
        assert!(
            e.contains("262144") && e.contains("net.core.rmem_max (212992 bytes)"),
            "{e}"
        );
        assert!(e.contains("sysctl -w net.core.rmem_max=262144"), "{e}");
        // A limit that could not be read is not a reason to refuse.
        assert_eq!(window_fits(1 << 30, &[("rmem_max", None)]), Ok(()));
        // Autotuned flows need no check.
        let mut s = crate::scenario::tcp_1up();
        s.flows[0].window = None;
        assert_eq!(check_windows(&s), Ok(()));
    }

    #[test]
    fn dropping_icmp_needs_an_irtt_stream() {
        let mut s = crate::scenario::tcp_1up();
        assert_eq!(check_latency_probe(&s), Ok(()));
        s.link.drop_icmp = true;
        let e = check_latency_probe(&s).unwrap_err();
        assert!(
            e.starts_with("--drop-icmp: scenario `tcp_1up` has no irtt stream")
                && e.contains("rrul")
                && e.contains("voip"),
            "{e}"
        );
        let mut r = crate::scenario::by_name("rrul").unwrap();
        r.link.drop_icmp = true;
        assert_eq!(check_latency_probe(&r), Ok(()));
        assert_eq!(r.link.latency_probe(), "irtt");
    }

    #[test]
    fn tcp_state_is_recorded_once_per_loaded_phase_at_its_middle() {
        // ack_priority: idle 0-30, download 30-60, both 60-90, upload 90-120.
        let s = crate::scenario::ack_priority();
        let mut snapped = vec![false; s.phases.len()];
        assert_eq!(snapshot_due(&s, &snapped, 20.0), None, "idle");
        assert_eq!(snapshot_due(&s, &snapped, 44.0), None, "before the middle");
        assert_eq!(snapshot_due(&s, &snapped, 45.0), Some(1));
        snapped[1] = true;
        assert_eq!(snapshot_due(&s, &snapped, 50.0), None, "once");
        assert_eq!(snapshot_due(&s, &snapped, 75.5), Some(2));
        assert_eq!(snapshot_due(&s, &snapped, 135.0), None, "idle again");
    }
}

#[cfg(test)]
mod probe_file_tests {
    use super::*;

    #[test]
    fn unreadable_probe_output_and_unwritable_files_are_warnings() {
        let mut w = Vec::new();
        let missing = Path::new("/nonexistent-sluice-lab/ping.txt");
        assert_eq!(read_probe(&mut w, "ping", missing), "");
        keep(&mut w, Path::new("/nonexistent-sluice-lab/modem.txt"), "x");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("ping: cannot read /nonexistent-sluice-lab/ping.txt: "),
            "{w:?}"
        );
        assert!(
            w[1].starts_with("cannot write /nonexistent-sluice-lab/modem.txt: "),
            "{w:?}"
        );
    }
}

#[cfg(test)]
mod hosts_tests {
    use super::*;

    #[test]
    fn flows_and_probes_must_name_a_host_of_the_scenario() {
        let mut s = crate::scenario::host_fair();
        assert_eq!(check_hosts(&s), Ok(()));
        s.flows[2].host = 2;
        let e = check_hosts(&s).unwrap_err();
        assert!(e.contains("LAN host 2, but the hosts are 0 to 1"), "{e}");
        let mut s = crate::scenario::tcp_1up();
        s.ping_host = 1;
        assert!(check_hosts(&s).unwrap_err().contains("the ping"));
        s.ping_host = 0;
        s.hosts = 0;
        assert!(check_hosts(&s).unwrap_err().contains("1 to 16"));
    }
}
