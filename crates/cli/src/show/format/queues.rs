//! `show queues` (`pfctl -vvsq`): per interface, autorate's header, then
//! each queue in pf.conf syntax and its bracketed counter lines.

use super::{ms, rate_text};
use sluice_control::proto::*;
use sluice_time::Rate;
use std::fmt::Write as _;

/// `pfctl -vvsq`: a header in pf.conf syntax, then three bracketed lines.
pub fn format_queues(r: &QueuesReply) -> String {
    format_queues_measured(r, None)
}

/// As [`format_queues`]; with the previous snapshot and the seconds since,
/// a fourth line per queue gives the measured rates, as `pfctl -vvsq` does
/// from its second display on.
pub fn format_queues_measured(r: &QueuesReply, prev: Option<(&QueuesReply, f64)>) -> String {
    let mut o = String::new();
    for iface in &r.ifaces {
        let Some(sched) = &iface.sched else {
            let _ = writeln!(
                o,
                "# {}: no queueing (frames leave in arrival order)",
                iface.name
            );
            continue;
        };
        if let Some(a) = &iface.autorate {
            autorate(&mut o, &iface.name, a);
        }
        for q in &iface.queues {
            header(&mut o, iface, sched, q);
            counters(&mut o, q);
            if let Some(t) = &q.tcp {
                tcp(&mut o, t);
            }
            if let Some(before) = prev.and_then(|(p, secs)| before(p, secs, &iface.name, q)) {
                measured(&mut o, before);
            }
        }
    }
    o
}

/// `# autorate on IF: …` and, with a probe, `# autorate probe to …`.
fn autorate(o: &mut String, iface: &str, a: &AutorateJson) {
    let delay = a.delay_ns.map_or("none".to_string(), |d| ms(Some(d)));
    let decisions: Vec<String> = a
        .decisions
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    let dry_run = if a.dry_run {
        ", dry-run: not applied"
    } else {
        ""
    };
    let reconfig = match (&a.reconfig, a.reconfig_active) {
        (Some(r), true) => format!(", reconfig {r}"),
        (Some(r), false) => format!(", reconfig {r} off: no wall clock"),
        (None, _) => String::new(),
    };
    let source = if a.delay_from_probe {
        "from the probe".to_string()
    } else {
        format!("over {} flows", a.flows)
    };
    let _ = writeln!(
        o,
        "# autorate on {iface}: rate {} (min {}, max {}{dry_run}{reconfig}), delay beyond sluice {delay} {source}; samples {} ({} unsound); holds {} ({}); decisions: {}",
        Rate(a.rate_bps),
        Rate(a.min_bps),
        Rate(a.max_bps),
        a.samples,
        a.samples_unsound,
        a.holds,
        ms(Some(a.held_ns)),
        decisions.join(", ")
    );
    if let Some(p) = &a.probe {
        let _ = writeln!(
            o,
            "# autorate probe to {}: sent {}, answered {}, lost {}, last round trip {}",
            p.target,
            p.sent,
            p.answered,
            p.lost,
            p.last_rtt_ns.map_or("none".to_string(), |d| ms(Some(d)))
        );
    }
}

/// The queue in pf.conf syntax, its children in braces.
fn header(o: &mut String, iface: &IfaceQueues, sched: &str, q: &QueueJson) {
    let _ = write!(o, "queue {} on {}", q.name, iface.name);
    let bw = if q.id == 0 {
        iface.bandwidth_bps
    } else {
        q.bandwidth_bps
    };
    if let Some(b) = bw {
        let _ = write!(o, " bandwidth {}", Rate(b));
    }
    if let Some(p) = q.priority {
        let _ = write!(o, " priority {p}");
    }
    if let Some(l) = q.qlimit {
        let _ = write!(o, " qlimit {l}");
    }
    if q.options.is_empty() {
        let _ = write!(o, " {sched}");
    } else {
        let _ = write!(o, " {sched}( {} )", q.options.join(" "));
    }
    let kids = children(iface, q);
    if !kids.is_empty() {
        let _ = write!(o, " {{ {} }}", kids.join(", "));
    }
    o.push('\n');
}

/// pfctl's three bracketed lines, and ingress mode's charged drops.
fn counters(o: &mut String, q: &QueueJson) {
    let _ = writeln!(
        o,
        "  [ pkts: {:>10}  bytes: {:>10}  dropped pkts: {:>6} bytes: {:>8} ]",
        q.packets, q.bytes, q.dropped_packets, q.dropped_bytes
    );
    let limit = q.qlimit.map_or("-".to_string(), |l| l.to_string());
    let _ = writeln!(
        o,
        "  [ qlength: {:>4}/{:>4}  borrows: {:>6}  suspends: {:>6}  ecn marks: {:>6} ]",
        q.qlength, limit, q.borrows, q.overlimits, q.ecn_marks
    );
    let drops = if q.drops.is_empty() {
        "none".to_string()
    } else {
        q.drops
            .iter()
            .map(|d| format!("{} {}", d.reason, d.packets))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // The quantiles of the last interval (a day-old queue's since-creation
    // p99 barely moves); the max and the drops since creation.
    let last = sluice_engine::SOJOURN_INTERVAL.as_nanos() / 1_000_000_000;
    let _ = writeln!(
        o,
        "  [ sojourn p50: {}  p99: {} (last {last}-{} s)  max: {}  drops: {} ]",
        ms(q.sojourn_last_p50_ns),
        ms(q.sojourn_last_p99_ns),
        2 * last,
        ms(q.sojourn_max_ns),
        drops
    );
    if let (Some(p), Some(b)) = (q.ingress_charged_packets, q.ingress_charged_bytes) {
        let _ = writeln!(
            o,
            "  [ ingress: dropped and charged as sent: {p} pkts, {b} bytes ]"
        );
    }
}

/// TCP control's lines: ACKs and windows, what was ignored (if anything),
/// the pace.
fn tcp(o: &mut String, t: &TcpControlReport) {
    let _ = writeln!(
        o,
        "  [ tcp: flows {}  acks passed {} held {} (now {}) paced {} flushed {} capped {}  windows clamped {} untouched {} ]",
        t.flows,
        t.acks_passed,
        t.acks_held,
        t.held_now,
        t.acks_paced,
        t.acks_flushed,
        t.acks_capped,
        t.windows_clamped,
        t.windows_untouched
    );
    if t.acks_unsent + t.syns_ignored > 0 {
        let _ = writeln!(
            o,
            "  [ tcp: ignored acks of unsent data {}  syns {} ]",
            t.acks_unsent, t.syns_ignored
        );
    }
    let before = t
        .path_queue
        .map(|d| format!("  queue before sluice {}", ms(Some(d.as_nanos()))))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "  [ tcp: pace {}{before} ]",
        rate_text(t.pace_bps as f64)
    );
}

/// Packets and bytes a second of `q` since the snapshot `secs` before.
fn before(prev: &QueuesReply, secs: f64, iface: &str, q: &QueueJson) -> Option<(f64, f64)> {
    let pi = prev.ifaces.iter().find(|x| x.name == iface)?;
    let pq = pi.queues.iter().find(|x| x.name == q.name)?;
    Some((
        per_sec(q.packets, pq.packets, secs)?,
        per_sec(q.bytes, pq.bytes, secs)?,
    ))
}

fn measured(o: &mut String, (pps, bps): (f64, f64)) {
    let _ = writeln!(
        o,
        "  [ measured: {pps:.1} packets/s, {} ]",
        rate_text(bps * 8.0)
    );
}

/// Rate of a counter between two snapshots `secs` apart (`None` when the
/// counter went backwards: the queue was re-created by a reload).
pub(crate) fn per_sec(now: u64, before: u64, secs: f64) -> Option<f64> {
    (now >= before && secs > 0.0).then(|| (now - before) as f64 / secs)
}

fn children<'a>(iface: &'a IfaceQueues, q: &QueueJson) -> Vec<&'a str> {
    let root = q.id == 0;
    iface
        .queues
        .iter()
        .filter(|c| c.id != q.id)
        .filter(|c| match &c.parent {
            Some(p) => *p == q.name && !root,
            None => root,
        })
        .map(|c| c.name.as_str())
        .collect()
}
