//! autorate's families of the exposition (docs/autorate.md): the rate
//! each shaped interface runs at, and each controller's state, decisions
//! and probe.

use super::{bytes_per_second, secs, Out};
use crate::proto::{AutorateJson, QueuesReply};

/// A family of one value per interface with autorate: the name after
/// `sluice_autorate_`, its type, its value (none: not known) and its help.
type PerAutorate = (
    &'static str,
    &'static str,
    fn(&AutorateJson) -> Option<f64>,
    &'static str,
);

const PER_AUTORATE: [PerAutorate; 10] = [
    (
        "rate_bytes_per_second",
        "gauge",
        |a| Some(bytes_per_second(a.rate_bps)),
        "The rate autorate chose (in dry-run: would have set).",
    ),
    ("min_bytes_per_second", "gauge", |a| Some(bytes_per_second(a.min_bps)), "autorate's lower bound."),
    ("max_bytes_per_second", "gauge", |a| Some(bytes_per_second(a.max_bps)), "autorate's upper bound."),
    ("dry_run", "gauge", |a| Some(f64::from(u8::from(a.dry_run))), "1 when autorate only logs its decisions."),
    (
        "delay_seconds",
        "gauge",
        |a| a.delay_ns.map(secs),
        "Median delay beyond sluice over fresh flows, as last acted on (absent: no signal).",
    ),
    ("flows", "gauge", |a| Some(f64::from(a.flows)), "Flows the delay signal is the median of."),
    (
        "samples_total",
        "counter",
        |a| Some(a.samples as f64),
        "Delay-signal samples autorate's reading was taken from (the WAN side's, both directions).",
    ),
    (
        "samples_unsound_total",
        "counter",
        |a| Some(a.samples_unsound as f64),
        "Delay-signal samples left out: sluice's own wait to correct them by was longer than the round trip.",
    ),
    (
        "holds_total",
        "counter",
        |a| Some(a.holds as f64),
        "Holds autorate made: an upload's cut keeps its shaper silent while the modem's queue drains.",
    ),
    (
        "held_seconds_total",
        "counter",
        |a| Some(secs(a.held_ns)),
        "Time autorate's holds kept the shaper silent, in all.",
    ),
];

/// The rate each shaped interface runs at, and autorate's state and
/// decisions (docs/autorate.md).
pub(super) fn autorate_families(o: &mut Out, q: &QueuesReply) {
    let name = "sluice_iface_rate_bytes_per_second";
    o.family(
        name,
        "gauge",
        "The rate an interface is shaped at now (its bandwidth, or autorate's latest).",
    );
    for i in &q.ifaces {
        if let Some(b) = i.bandwidth_bps {
            o.sample(name, &[("iface", &i.name)], bytes_per_second(b));
        }
    }
    let with: Vec<(&str, &AutorateJson)> = q
        .ifaces
        .iter()
        .filter_map(|i| i.autorate.as_ref().map(|a| (i.name.as_str(), a)))
        .collect();
    if with.is_empty() {
        return;
    }
    for (suffix, kind, get, help) in PER_AUTORATE {
        let name = format!("sluice_autorate_{suffix}");
        o.family(&name, kind, help);
        for (iface, a) in &with {
            if let Some(v) = get(a) {
                o.sample(&name, &[("iface", iface)], v);
            }
        }
    }
    let probes: Vec<(&str, &crate::proto::ProbeJson)> = with
        .iter()
        .filter_map(|(i, a)| a.probe.as_ref().map(|p| (*i, p)))
        .collect();
    for (name, help, f) in [
        (
            "sluice_autorate_probe_sent_total",
            "Echo requests autorate's probe sent.",
            (|p| p.sent) as fn(&crate::proto::ProbeJson) -> u64,
        ),
        (
            "sluice_autorate_probe_answered_total",
            "Replies to autorate's probe (taken, not forwarded).",
            |p| p.answered,
        ),
        (
            "sluice_autorate_probe_lost_total",
            "autorate's probes unanswered within 2 s or overtaken.",
            |p| p.lost,
        ),
    ] {
        if probes.is_empty() {
            break;
        }
        o.family(name, "counter", help);
        for (iface, p) in &probes {
            o.sample(name, &[("iface", iface), ("target", &p.target)], f(p));
        }
    }
    let name = "sluice_autorate_probe_rtt_seconds";
    if !probes.is_empty() {
        o.family(name, "gauge", "The latest round trip of autorate's probe.");
        for (iface, p) in &probes {
            if let Some(r) = p.last_rtt_ns {
                o.sample(name, &[("iface", iface), ("target", &p.target)], secs(r));
            }
        }
    }
    let name = "sluice_autorate_decisions_total";
    o.family(
        name,
        "counter",
        "autorate's decisions (one per 50 ms tick), by reason: delay (cut), load (raise), idle, unsure, refractory, steady (held).",
    );
    for (iface, a) in &with {
        for (reason, n) in &a.decisions {
            o.sample(name, &[("iface", iface), ("reason", reason)], n);
        }
    }
}
