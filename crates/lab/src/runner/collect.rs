//! Collect: stop the probes, keep what the shaper and the modem saw, read
//! the run's files into [`Series`] and summarise them.

use super::play::Played;
use super::setup::{Flow, Lab};
use super::{keep, rfc3339, since, LabError, RunOptions};
use crate::analysis;
use crate::iperf3;
use crate::model::{
    FlowRecord, IrttSample, PingSample, RunResult, Scenario, Series, ShaperRateSample, ShaperSpec,
    RATE_PERIOD,
};
use crate::probes;
use crate::topo::LabNet;
use std::path::Path;

/// Stops what still runs, reads every probe and returns the run's result.
pub(super) fn collect(
    mut lab: Lab,
    played: Played,
    s: &Scenario,
    shaper: &ShaperSpec,
    o: &RunOptions,
) -> Result<RunResult, LabError> {
    let _ = lab.net.topo.stop(lab.ping, "INT");
    let attack = lab
        .attacker
        .take()
        .map(|a| a.finish(&mut lab.net, since(lab.t0)));
    let total = s.total_secs();
    let rate = lab.sampler.take().map(|r| r.finish()).unwrap_or_default();
    keep_shaper_and_modem(&mut lab, o);
    let shaper_rate = autorate_rates(&mut lab, &o.dir);
    let (ping, irtt) = latency_samples(&mut lab, s);
    let flows = flow_records(&mut lab.net, &lab.flows, s, &mut lab.warnings);
    let series = Series {
        rate: rate
            .into_iter()
            .filter(|r| r.t_s > 0.0 && r.t_s <= total + RATE_PERIOD.as_secs_f64())
            .collect(),
        ping,
        irtt,
        flows,
        host_rate: played.host_rate,
        shaper_rate,
        health: played.health,
    };
    if let Some(e) = attack.as_ref().and_then(|a| a.error.as_ref()) {
        lab.warnings
            .push(format!("the attack did not run as planned: {e}"));
    }
    let mut result = analysis::finish(
        s,
        &s.run_label(&shaper.label()),
        series,
        rfc3339(lab.t0_wall),
        std::mem::take(&mut lab.warnings),
    );
    result.summary.attack = attack;
    Ok(result)
}

/// sluice's queues (as `sluice show queues --json` prints them) and the
/// modem's `tc -s`; then sluice and the delay line are stopped, and either
/// having exited early is a warning.
fn keep_shaper_and_modem(lab: &mut Lab, o: &RunOptions) {
    let w = &mut lab.warnings;
    if !lab.sh.alive(&mut lab.net) {
        w.push(format!(
            "sluice exited during the run; its log:\n{}",
            lab.sh.log_text()
        ));
    }
    if let Some(q) = lab.sh.queues(&lab.net, &o.sluice_bin) {
        let reply = sluice_control::proto::Reply::Queues(q);
        let text = serde_json::to_string_pretty(&reply).unwrap_or_default();
        keep(w, &o.dir.join("queues.json"), &text);
    }
    keep(w, &o.dir.join("modem.txt"), &lab.net.qdisc_report());
    lab.sh.stop(&mut lab.net);
    if !lab.net.delay_line_alive() {
        w.push("the delay line exited during the run (see delay-line.log)".into());
    }
    lab.net.stop_delay_line();
}

/// autorate's decisions (sluice with autorate only), in run time.
fn autorate_rates(lab: &mut Lab, dir: &Path) -> Vec<ShaperRateSample> {
    match std::fs::read_to_string(dir.join("autorate.csv")) {
        Ok(text) => {
            probes::parse_autorate(&text, lab.t0_wall, crate::topo::LAN_IF, crate::topo::WAN_IF)
                .unwrap_or_else(|e| {
                    lab.warnings.push(e);
                    Vec::new()
                })
        }
        Err(_) => Vec::new(),
    }
}

/// The ping's and irtt's samples within the run. With ICMP dropped beyond
/// the modem the ping still ran, to show the drop held (every echo lost),
/// and the latency series is irtt's round trips.
fn latency_samples(lab: &mut Lab, s: &Scenario) -> (Vec<PingSample>, Vec<IrttSample>) {
    let total = s.total_secs();
    let ping_text = read_probe(&mut lab.warnings, "ping", &lab.ping_txt);
    let mut ping: Vec<_> =
        probes::parse_ping(&ping_text, lab.interval_s, lab.ping_start_wall, lab.t0_wall)
            .into_iter()
            .filter(|p| p.t_s < total)
            .collect();
    let mut irtt = Vec::new();
    if let (Some(i), Some(spec)) = (&lab.irtt, &s.irtt) {
        match std::fs::read_to_string(&i.json)
            .map_err(|e| e.to_string())
            .and_then(|t| probes::parse_irtt(&t, f64::from(spec.interval_ms) / 1000.0, lab.t0_wall))
        {
            Ok(v) => irtt = v.into_iter().filter(|s| s.t_s < total).collect(),
            Err(e) => lab.warnings.push(format!("irtt: {e}")),
        }
    }
    if s.link.drop_icmp {
        let answered = ping.iter().filter(|p| p.rtt_ms.is_some()).count();
        if answered > 0 {
            lab.warnings.push(format!(
                "--drop-icmp: {answered} of {} pings were answered across a modem that drops ICMP",
                ping.len()
            ));
        }
        ping = irtt
            .iter()
            .map(|s| PingSample {
                t_s: s.t_s,
                rtt_ms: s.rtt_ms,
            })
            .collect();
    }
    (ping, irtt)
}

/// Each flow's goodput, retransmits and error, from its iperf3 JSON.
fn flow_records(
    net: &mut LabNet,
    flows: &[Flow],
    s: &Scenario,
    warnings: &mut Vec<String>,
) -> Vec<FlowRecord> {
    let total = s.total_secs();
    let mut records = Vec::with_capacity(flows.len());
    for (f, spec) in flows.iter().zip(&s.flows) {
        let (goodput, retr, cc, err) = flow_result(net, f);
        if let Some(cc) = &cc {
            if cc != &s.cc {
                warnings.push(format!(
                    "{:?} flow ran {cc}, not {} (iperf3 -C was refused?)",
                    spec.dir, s.cc
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
    records
}

/// One flow's [`flow_outcome`]; an upload interrupted before its final
/// exchange has its count from the server (the receiver), which prints
/// what it received when it stops.
fn flow_result(net: &mut LabNet, f: &Flow) -> FlowOutcome {
    if f.proc_id.is_none() {
        return (None, None, None, Some("never started".to_string()));
    }
    let (mut goodput, retr, cc, mut err) = match std::fs::read_to_string(&f.json) {
        Ok(text) => flow_outcome(&text),
        Err(e) => (
            None,
            None,
            None,
            Some(format!("cannot read {}: {e}", f.json.display())),
        ),
    };
    if goodput.is_none() {
        let _ = net.topo.stop(f.server, "INT");
        let server =
            std::fs::read_to_string(f.json.with_extension("server.json")).unwrap_or_default();
        if let (Some(g), _, _, None) = flow_outcome(&server) {
            goodput = Some(g);
            err = None;
        }
    }
    (goodput, retr, cc, err)
}

/// Goodput, retransmits, the sender's congestion control, or why there
/// is nothing.
type FlowOutcome = (Option<f64>, Option<u64>, Option<String>, Option<String>);

/// What one iperf3 JSON says: goodput, retransmits, the sender's
/// congestion control, or why there is nothing. An interrupted client
/// (SIGINT at the overrun limit) still reports what it measured.
fn flow_outcome(text: &str) -> FlowOutcome {
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

/// A probe's output, or (with a warning naming the file and the error)
/// nothing: an unreadable file is reported, not mistaken for a silent probe.
fn read_probe(warnings: &mut Vec<String>, probe: &str, path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        warnings.push(format!("{probe}: cannot read {}: {e}", path.display()));
        String::new()
    })
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
