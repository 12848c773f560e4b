//! Play: the scenario's phases in wall-clock time, every [`TICK`] — flows
//! and the irtt stream started and stopped on time, the trace's rate
//! steps, per-host goodput, the hosts' TCP state, a sluice shaper's own
//! verdict — then the linger for late replies.

use super::progress::Bar;
use super::setup::{Flow, Irtt, Lab, IRTT_PORT};
use super::{append, keep, since, span, LabError, RunOptions, FLOW_GRACE_S, LINGER_MAX_S};
use crate::model::{Dir, HostRateSample, Scenario, FULL_FRAME_BYTES};
use crate::probes::{self, HostMeter};
use crate::topo::{host_ip, LabNet, SERVER_IP};
use crate::verdict::{self, HealthSample};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Main-loop period: flow starts are this punctual, Ctrl-C this quick.
const TICK: Duration = Duration::from_millis(50);
/// Per-host goodput sampling period (multi-host scenarios): each sample
/// runs `ss` in the server namespace, so fewer than the rate's.
const HOST_RATE_PERIOD_S: f64 = 0.5;
/// How often a sluice shaper's `show health` is read.
const HEALTH_PERIOD_S: f64 = 1.0;
/// How often the worst RTT so far is re-read from ping's output.
const WORST_RTT_EVERY_S: f64 = 1.0;
/// After SIGINT, how long a flow gets to print its JSON before SIGKILL.
const FLOW_STOP_S: f64 = 3.0;
/// Lower bound of the final linger (seconds) waiting for late ping
/// replies; the upper is [`LINGER_MAX_S`].
const LINGER_MIN_S: f64 = 1.0;
/// The irtt client waits this many times its worst RTT for the last
/// replies (`--wait NxDUR`), and is interrupted only past a wait that
/// long: an interrupted irtt writes no JSON at all. irtt's own default
/// (3×) outlasts the runner's linger behind a bloated FIFO.
const IRTT_WAIT_RTTS: u32 = 2;

/// What playing recorded besides the probes' own files.
pub(super) struct Played {
    /// Per-host goodput (several hosts only).
    pub host_rate: Vec<HostRateSample>,
    /// A sluice shaper's `show health`, once a second.
    pub health: Vec<HealthSample>,
}

/// Plays the scenario to its end and lingers.
pub(super) fn play(
    lab: &mut Lab,
    s: &Scenario,
    o: &RunOptions,
    bar: &mut Bar,
) -> Result<Played, LabError> {
    let mut ticker = Ticker::new(lab, s, o);
    loop {
        if o.stopped() {
            bar.done();
            return Err(LabError::Interrupted);
        }
        let t = since(lab.t0);
        if t >= s.total_secs() {
            break;
        }
        bar.show(s, t);
        ticker.tick(lab, s, t)?;
        std::thread::sleep(TICK);
    }
    linger(lab, s, o, bar, ticker.drain_s)?;
    bar.done();
    Ok(Played {
        host_rate: ticker.host_rate,
        health: ticker.health,
    })
}

/// The main loop's state between ticks.
struct Ticker {
    /// The worst ping RTT so far (seconds, bounded), and when it was read.
    worst_s: f64,
    worst_at: f64,
    /// How long an upload's final report may wait for the modem's FIFO to
    /// drain: full frames at the slower rate.
    drain_s: f64,
    /// The hosts' TCP state (`ss -tinm`) once per loaded phase, at its
    /// middle: windows, cwnd, socket buffers and the ECN flag as they were.
    tcp_txt: PathBuf,
    snapped: Vec<bool>,
    /// Per-host goodput (several hosts only: one host's is the whole rate).
    meter: Option<HostMeter>,
    meter_at: f64,
    host_rate: Vec<HostRateSample>,
    /// A moving link: the modem was built at the trace's first step; the
    /// others are played as their time comes (one `tc class change` per
    /// direction), each logged with when it took effect.
    next_step: usize,
    trace_csv: PathBuf,
    /// A sluice shaper's verdicts, and when they were last read.
    sluice_bin: PathBuf,
    health: Vec<HealthSample>,
    health_at: f64,
}

impl Ticker {
    fn new(lab: &mut Lab, s: &Scenario, o: &RunOptions) -> Ticker {
        let dir = &o.dir;
        let l = &s.link;
        let drain_s = (f64::from(l.buffer_pkts) * (FULL_FRAME_BYTES * 8) as f64
            / l.up_bps.min(l.down_bps).max(1) as f64)
            .min(LINGER_MAX_S);
        let trace_csv = dir.join("trace.csv");
        if l.trace.is_some() {
            keep(
                &mut lab.warnings,
                &trace_csv,
                "t_planned_s,t_applied_s,down_bps,up_bps\n",
            );
        }
        Ticker {
            worst_s: 0.0,
            worst_at: f64::NEG_INFINITY,
            drain_s,
            tcp_txt: dir.join("tcp.txt"),
            snapped: vec![false; s.phases.len()],
            meter: (s.hosts > 1).then(|| HostMeter::new((0..s.hosts).map(host_ip).collect())),
            meter_at: f64::NEG_INFINITY,
            host_rate: Vec::new(),
            next_step: 1,
            trace_csv,
            sluice_bin: o.sluice_bin.clone(),
            health: Vec::new(),
            health_at: f64::NEG_INFINITY,
        }
    }

    /// One pass of the main loop at run time `t`.
    fn tick(&mut self, lab: &mut Lab, s: &Scenario, t: f64) -> Result<(), LabError> {
        if t >= self.worst_at + WORST_RTT_EVERY_S {
            self.worst_at = t;
            self.worst_s = worst_rtt_s(&lab.ping_txt);
        }
        let grace = FLOW_GRACE_S + self.worst_s.max(self.drain_s);
        if let Some(tr) = s.link.trace.as_ref() {
            play_trace(lab, s, tr, &mut self.next_step, &self.trace_csv);
        }
        tend_flows(&mut lab.net, s, &mut lab.flows, t, grace)?;
        tend_irtt(&mut lab.net, s, lab.irtt.as_mut(), t)?;
        if let Some(a) = lab.attacker.as_mut() {
            a.tend(&mut lab.net, t)?;
        }
        let meter_due = t >= self.meter_at + HOST_RATE_PERIOD_S;
        if let Some(m) = self.meter.as_mut().filter(|_| meter_due) {
            self.meter_at = t;
            let server_ns = lab.net.server.clone();
            let out = lab
                .net
                .topo
                .exec_unchecked(&server_ns, &["ss", "-tinH", "state", "established"])?;
            let text = String::from_utf8_lossy(&out.stdout);
            self.host_rate.extend(m.sample(since(lab.t0), &text));
        }
        if t >= self.health_at + HEALTH_PERIOD_S {
            self.health_at = t;
            if let Some(h) = lab.sh.health(&lab.net, &self.sluice_bin) {
                self.health.push(verdict::sample(t, &h));
            }
        }
        if let Some(i) = snapshot_due(s, &self.snapped, t) {
            self.snapped[i] = true;
            let text = tcp_snapshot(&lab.net, &s.phases[i].name, t);
            append(&mut lab.warnings, &self.tcp_txt, &text);
        }
        Ok(())
    }
}

/// The worst RTT in the ping's output so far, seconds, at most
/// [`LINGER_MAX_S`] (0 before the first reply).
fn worst_rtt_s(ping_txt: &Path) -> f64 {
    std::fs::read_to_string(ping_txt)
        .map(|t| probes::ping_worst_ms(&t) / 1000.0)
        .unwrap_or(0.0)
        .min(LINGER_MAX_S)
}

/// Linger: late replies, and flows finishing their last seconds; whatever
/// still runs past its grace is stopped (its output is partial).
fn linger(
    lab: &mut Lab,
    s: &Scenario,
    o: &RunOptions,
    bar: &mut Bar,
    drain_s: f64,
) -> Result<(), LabError> {
    let worst_s = worst_rtt_s(&lab.ping_txt);
    let grace = FLOW_GRACE_S + worst_s.max(drain_s);
    let linger = (worst_s + 0.5).clamp(LINGER_MIN_S, LINGER_MAX_S);
    bar.note(&format!("waiting {linger:.1} s for the last replies"));
    let linger_end = s.total_secs() + linger;
    // irtt waits for its own late replies (IRTT_WAIT_RTTS × its worst RTT),
    // which ping may not have seen (ICMP dropped): while it runs it has
    // until its own interrupt, and a stop after.
    let irtt_stop_s = s
        .irtt
        .as_ref()
        .map(|spec| irtt_interrupt_s(span(s, spec.from, spec.to).1) + FLOW_STOP_S);
    loop {
        if o.stopped() {
            bar.done();
            return Err(LabError::Interrupted);
        }
        let t = since(lab.t0);
        tend_flows(&mut lab.net, s, &mut lab.flows, t, grace)?;
        tend_irtt(&mut lab.net, s, lab.irtt.as_mut(), t)?;
        let flows_done = lab
            .flows
            .iter()
            .all(|f| f.end_s.is_some() || f.proc_id.is_none());
        let irtt_done = lab.irtt.as_mut().is_none_or(|i| match i.proc_id {
            Some(id) => !matches!(lab.net.topo.try_status(id), Ok(None)),
            None => true,
        });
        if t >= linger_end && flows_done && irtt_done {
            return Ok(());
        }
        let irtt_stop = irtt_stop_s.filter(|_| !irtt_done).unwrap_or(0.0);
        if t >= (linger_end + grace + FLOW_STOP_S).max(irtt_stop) {
            stop_all(lab);
            return Ok(());
        }
        std::thread::sleep(TICK);
    }
}

/// Interrupts every flow and the irtt client still running.
fn stop_all(lab: &mut Lab) {
    for f in lab.flows.iter_mut().filter(|f| f.end_s.is_none()) {
        if let Some(id) = f.proc_id {
            let _ = lab.net.topo.stop(id, "INT");
            f.end_s = Some(since(lab.t0));
        }
    }
    if let Some(id) = lab.irtt.as_ref().and_then(|i| i.proc_id) {
        let _ = lab.net.topo.stop(id, "INT");
    }
}

/// Plays the trace's steps that are due at the run's time (only the latest
/// of several: a step the loop slept through lasted no time), from
/// `*next` on; each goes to `csv` with the time it took effect.
fn play_trace(
    lab: &mut Lab,
    scenario: &Scenario,
    trace: &crate::trace::RateTrace,
    next: &mut usize,
    csv: &Path,
) {
    let t = since(lab.t0);
    let due = trace.steps[*next..]
        .iter()
        .take_while(|s| s.t_s <= t)
        .count();
    if due == 0 {
        return;
    }
    *next += due;
    let step = trace.steps[*next - 1];
    match lab
        .net
        .set_modem_rates(&scenario.link, step.down_bps, step.up_bps)
    {
        Ok(()) => append(
            &mut lab.warnings,
            csv,
            &format!(
                "{:.3},{:.3},{},{}\n",
                step.t_s,
                since(lab.t0),
                step.down_bps,
                step.up_bps
            ),
        ),
        Err(e) => lab.warnings.push(format!(
            "trace {}: the step at {} s was not applied: {e}",
            trace.name, step.t_s
        )),
    }
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
        let sysctl: Vec<&str> = ["sysctl"]
            .into_iter()
            .chain(super::hosts::HOST_SYSCTLS)
            .collect();
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
