//! Each queue's families (`iface` and `queue` labels): its counters, its
//! backlog and limit, its drops by reason, its sojourn as a histogram, and
//! TCP control where the queue has it.

use super::{bytes_per_second, histogram, secs, Out};
use crate::proto::{QueueJson, QueuesReply, TcpControlReport};
use crate::snapshot::QueueHistogram;

/// A family of one value per queue: the name after `sluice_queue_`, its
/// type, its value (none: the queue has no such value) and its help.
type PerQueue = (
    &'static str,
    &'static str,
    fn(&QueueJson) -> Option<f64>,
    &'static str,
);

fn n(v: u64) -> Option<f64> {
    Some(v as f64)
}

const PER_QUEUE: [PerQueue; 11] = [
    ("packets_total", "counter", |c| n(c.packets), "Packets the queue forwarded."),
    ("bytes_total", "counter", |c| n(c.bytes), "Bytes the queue forwarded."),
    ("ecn_marks_total", "counter", |c| n(c.ecn_marks), "Packets marked CE instead of dropped."),
    ("borrows_total", "counter", |c| n(c.borrows), "Times the class borrowed from its parent (CBQ)."),
    ("overlimits_total", "counter", |c| n(c.overlimits), "Times the class was held back by its rate."),
    ("backlog_packets", "gauge", |c| n(c.qlength), "Packets in the queue now."),
    ("backlog_bytes", "gauge", |c| n(c.backlog_bytes), "Bytes in the queue now."),
    ("limit_packets", "gauge", |c| c.qlimit.map(f64::from), "The queue's limit (qlimit)."),
    (
        "sojourn_max_seconds",
        "gauge",
        |c| c.sojourn_max_ns.map(secs),
        "Longest time a forwarded packet waited in the queue since it was created.",
    ),
    (
        "ingress_charged_packets_total",
        "counter",
        |c| c.ingress_charged_packets.map(|v| v as f64),
        "Ingress mode: packets the queue dropped that its shaper charged as if sent.",
    ),
    (
        "ingress_charged_bytes_total",
        "counter",
        |c| c.ingress_charged_bytes.map(|v| v as f64),
        "Ingress mode: bytes (with link overhead) of dropped packets charged to the shaper as if sent.",
    ),
];

pub(super) fn queue_families(o: &mut Out, q: &QueuesReply, sojourn: &[QueueHistogram]) {
    let queues = || {
        q.ifaces
            .iter()
            .flat_map(|i| i.queues.iter().map(move |c| (i.name.as_str(), c)))
    };
    for (suffix, kind, get, help) in PER_QUEUE {
        let name = format!("sluice_queue_{suffix}");
        o.family(&name, kind, help);
        for (iface, c) in queues() {
            if let Some(v) = get(c) {
                o.sample(&name, &[("iface", iface), ("queue", &c.name)], v);
            }
        }
    }
    for (unit, help) in [("packets", "Packets"), ("bytes", "Bytes")] {
        let name = format!("sluice_queue_dropped_{unit}_total");
        o.family(
            &name,
            "counter",
            &format!("{help} the queue dropped, by reason."),
        );
        for (iface, c) in queues() {
            for d in &c.drops {
                let v = if unit == "bytes" { d.bytes } else { d.packets };
                let l = [("iface", iface), ("queue", &c.name), ("reason", &d.reason)];
                o.sample(&name, &l, v);
            }
        }
    }
    let name = "sluice_queue_sojourn_seconds";
    o.family(
        name,
        "histogram",
        "Time forwarded packets waited in the queue, since it was created.",
    );
    for h in sojourn {
        let l = [("iface", h.iface.as_str()), ("queue", &h.queue)];
        histogram(o, name, &l, &h.histogram);
    }
    tcp_families(o, q);
}

/// TCP control per queue (`ack-pacing`, `window-clamp`), for queues that
/// have it. ACKs by what happened to them: `passed` + `held` are the pure
/// ACKs seen, `paced` + `flushed` + `capped` the held ones released.
fn tcp_families(o: &mut Out, q: &QueuesReply) {
    let controlled = || {
        q.ifaces.iter().flat_map(|i| {
            i.queues
                .iter()
                .filter_map(move |c| Some((i.name.as_str(), c.name.as_str(), c.tcp?)))
        })
    };
    type Get = fn(&TcpControlReport) -> u64;
    /// A family's name, help, and its `action` labels with their counter.
    type ByAction = (&'static str, &'static str, &'static [(&'static str, Get)]);
    let by_action: [ByAction; 3] = [
        (
            "sluice_queue_tcp_acks_total",
            "TCP control: pure ACKs passed on arrival or held, and held ACKs released paced, flushed ahead of a segment that must pass, or capped.",
            &[
                ("passed", |t| t.acks_passed),
                ("held", |t| t.acks_held),
                ("paced", |t| t.acks_paced),
                ("flushed", |t| t.acks_flushed),
                ("capped", |t| t.acks_capped),
            ],
        ),
        (
            "sluice_queue_tcp_windows_total",
            "TCP control: segments whose advertised window was clamped, or could not be controlled and passed untouched.",
            &[
                ("clamped", |t| t.windows_clamped),
                ("untouched", |t| t.windows_untouched),
            ],
        ),
        (
            "sluice_queue_tcp_ignored_total",
            "TCP control: segments forwarded but ignored, as ACKs of data never sent or SYNs that answer nothing.",
            &[
                ("ack_unsent", |t| t.acks_unsent),
                ("syn", |t| t.syns_ignored),
            ],
        ),
    ];
    for (name, help, actions) in by_action {
        o.family(name, "counter", help);
        for (iface, queue, t) in controlled() {
            for (action, get) in actions {
                let l = [("iface", iface), ("queue", queue), ("action", action)];
                o.sample(name, &l, get(&t));
            }
        }
    }
    type Gauge = (&'static str, &'static str, fn(&TcpControlReport) -> f64);
    let gauges: [Gauge; 3] = [
        (
            "sluice_queue_tcp_flows",
            "TCP control: connections under control now.",
            |t| t.flows as f64,
        ),
        (
            "sluice_queue_tcp_held_acks",
            "TCP control: ACKs held now.",
            |t| t.held_now as f64,
        ),
        (
            "sluice_queue_tcp_pace_bytes_per_second",
            "TCP control: the pace now (the queue's rate, less while a queue stood in sluice or before it).",
            |t| bytes_per_second(t.pace_bps),
        ),
    ];
    for (name, help, get) in gauges {
        o.family(name, "gauge", help);
        for (iface, queue, t) in controlled() {
            o.sample(name, &[("iface", iface), ("queue", queue)], get(&t));
        }
    }
}
