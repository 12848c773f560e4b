//! autorate's families of the exposition (docs/autorate.md): the rate
//! each shaped interface runs at, and each controller's state, decisions
//! and probe.

use super::{bytes_per_second, secs, Out};
use crate::proto::QueuesReply;

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
    let with: Vec<(&str, &crate::proto::AutorateJson)> = q
        .ifaces
        .iter()
        .filter_map(|i| i.autorate.as_ref().map(|a| (i.name.as_str(), a)))
        .collect();
    if with.is_empty() {
        return;
    }
    for (name, help, f) in [
        (
            "sluice_autorate_rate_bytes_per_second",
            "The rate autorate chose (in dry-run: would have set).",
            (|a| Some(bytes_per_second(a.rate_bps)))
                as fn(&crate::proto::AutorateJson) -> Option<f64>,
        ),
        (
            "sluice_autorate_min_bytes_per_second",
            "autorate's lower bound.",
            |a| Some(bytes_per_second(a.min_bps)),
        ),
        (
            "sluice_autorate_max_bytes_per_second",
            "autorate's upper bound.",
            |a| Some(bytes_per_second(a.max_bps)),
        ),
        (
            "sluice_autorate_dry_run",
            "1 when autorate only logs its decisions.",
            |a| Some(f64::from(u8::from(a.dry_run))),
        ),
        (
            "sluice_autorate_delay_seconds",
            "Median delay beyond sluice over fresh flows, as last acted on (absent: no signal).",
            |a| a.delay_ns.map(secs),
        ),
        (
            "sluice_autorate_flows",
            "Flows the delay signal is the median of.",
            |a| Some(f64::from(a.flows)),
        ),
    ] {
        o.family(name, "gauge", help);
        for (iface, a) in &with {
            if let Some(v) = f(a) {
                o.sample(name, &[("iface", iface)], v);
            }
        }
    }
    for (name, help, f) in [
        (
            "sluice_autorate_samples_total",
            "Delay-signal samples autorate's reading was taken from (the WAN side's, both directions).",
            (|a| a.samples) as fn(&crate::proto::AutorateJson) -> u64,
        ),
        (
            "sluice_autorate_samples_unsound_total",
            "Delay-signal samples left out: sluice's own wait to correct them by was longer than the round trip.",
            |a| a.samples_unsound,
        ),
        (
            "sluice_autorate_holds_total",
            "Holds autorate made: an upload's cut keeps its shaper silent while the modem's queue drains.",
            |a| a.holds,
        ),
    ] {
        o.family(name, "counter", help);
        for (iface, a) in &with {
            o.sample(name, &[("iface", iface)], f(a));
        }
    }
    let name = "sluice_autorate_held_seconds_total";
    o.family(
        name,
        "counter",
        "Time autorate's holds kept the shaper silent, in all.",
    );
    for (iface, a) in &with {
        o.sample(name, &[("iface", iface)], a.held_ns as f64 / 1e9);
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
