//! Text layouts of `sluice show`, after pfctl's (`-vvsq`, `-vss`, `-vsr`,
//! `-si`). Pure functions of the replies; golden tests pin them.

use crate::ctl::proto::*;
use sluice_time::Rate;
use std::fmt::Write as _;

fn ms(ns: Option<u64>) -> String {
    match ns {
        Some(ns) => format!("{:.1} ms", ns as f64 / 1e6),
        None => "-".into(),
    }
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

/// `pfctl -vvsq`: a header in pf.conf syntax, then three bracketed lines.
pub fn format_queues(r: &QueuesReply) -> String {
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
        for q in &iface.queues {
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
            let _ = writeln!(
                o,
                "  [ sojourn p50: {}  p99: {}  max: {}  drops: {} ]",
                ms(q.sojourn_p50_ns),
                ms(q.sojourn_p99_ns),
                ms(q.sojourn_max_ns),
                drops
            );
        }
    }
    o
}

/// `hh:mm:ss`, with days in front when there are any.
fn hms(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn endpoint(addr: &str, port: u16) -> String {
    // pfctl writes IPv6 ports in brackets, since `:` is taken.
    if addr.contains(':') {
        format!("{addr}[{port}]")
    } else {
        format!("{addr}:{port}")
    }
}

/// `pfctl -vss`: `all PROTO A -> B STATE`, then the state's counters.
pub fn format_states(r: &StatesReply) -> String {
    let mut o = String::new();
    for s in &r.states {
        let (a, b) = (endpoint(&s.src, s.src_port), endpoint(&s.dst, s.dst_port));
        // pf shows outbound states initiator first, inbound responder first.
        let pair = if s.direction == "out" {
            format!("{a} -> {b}")
        } else {
            format!("{b} <- {a}")
        };
        let _ = writeln!(o, "all {} {pair}       {}", s.proto, s.state);
        let queue = match (&s.queue, &s.queue_pri) {
            (Some(q), Some(p)) => format!("queue ({q}, {p}), "),
            (Some(q), None) => format!("queue {q}, "),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "   {queue}age {}, expires in {}, {}:{} pkts, {}:{} bytes, rule {}",
            hms(s.age_ns),
            hms(s.expires_in_ns),
            s.packets[0],
            s.packets[1],
            s.bytes[0],
            s.bytes[1],
            s.rule.map_or("-".to_string(), |r| r.to_string())
        );
    }
    if (r.states.len() as u64) < r.total {
        let _ = writeln!(o, "# {} of {} states shown", r.states.len(), r.total);
    }
    o
}

/// `pfctl -vsr`: each rule, then its counters.
pub fn format_rules(r: &RulesReply) -> String {
    let mut o = String::new();
    for x in &r.rules {
        match &x.text {
            Some(t) => {
                let _ = writeln!(o, "@{} {t}", x.number);
            }
            None => {
                let _ = writeln!(
                    o,
                    "@{} (line {}: text unavailable, the file changed since it was loaded)",
                    x.number, x.line
                );
            }
        }
        let _ = writeln!(
            o,
            "  [ Evaluations: {:<10} Packets: {:<10} Bytes: {:<12} States: {:<6} ]",
            x.evaluations, x.packets, x.bytes, x.states
        );
        let _ = writeln!(
            o,
            "  [ Matches: {:<10} State Creations: {:<10} Line: {} ]",
            x.matches, x.state_creations, x.line
        );
    }
    o
}

fn row(o: &mut String, label: &str, values: impl Iterator<Item = u64>) {
    let _ = write!(o, "  {label:<24}");
    for v in values {
        let _ = write!(o, "{v:>16}");
    }
    o.push('\n');
}

/// `pfctl -si`: status, then one column per interface.
pub fn format_info(i: &InfoReply) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Status: Running for {}    sluice {} (pid {})",
        hms(i.uptime_ns),
        i.version,
        i.pid
    );
    let (lan, wan) = (
        i.ifaces.first().map_or("-", String::as_str),
        i.ifaces.get(1).map_or("-", String::as_str),
    );
    let _ = writeln!(
        o,
        "Bridge: {lan} (lan) <-> {wan} (wan)    I/O: {}",
        i.io_method
    );
    let _ = writeln!(o, "Config: {}", i.config);
    o.push('\n');
    let _ = write!(o, "{:<26}", "Counters");
    for c in &i.counters {
        let _ = write!(o, "{:>16}", c.name);
    }
    o.push('\n');
    type Get = fn(&IfaceCountersJson) -> u64;
    let counters: [(&str, Get); 6] = [
        ("received packets", |c| c.rx_packets),
        ("received bytes", |c| c.rx_bytes),
        ("sent packets", |c| c.tx_packets),
        ("sent bytes", |c| c.tx_bytes),
        ("non-IP forwarded", |c| c.non_ip),
        ("ECN marked", |c| c.ecn_marked),
    ];
    for (label, get) in counters {
        row(&mut o, label, i.counters.iter().map(get));
    }
    let _ = writeln!(o, "Drops");
    let drops: [(&str, Get); 6] = [
        ("malformed", |c| c.malformed),
        ("blocked", |c| c.blocked),
        ("state-limit", |c| c.state_limit),
        ("no-route", |c| c.no_route),
        ("queue (egress)", |c| c.queue_drops),
        ("reload", |c| c.reload_drops),
    ];
    for (label, get) in drops {
        row(&mut o, label, i.counters.iter().map(get));
        if label.starts_with("queue") {
            let mut reasons: Vec<&str> = Vec::new();
            for c in &i.counters {
                for d in &c.queue_drops_by_reason {
                    if !reasons.contains(&d.reason.as_str()) {
                        reasons.push(&d.reason);
                    }
                }
            }
            for r in reasons {
                let per = i.counters.iter().map(|c| {
                    c.queue_drops_by_reason
                        .iter()
                        .find(|d| d.reason == r)
                        .map_or(0, |d| d.packets)
                });
                row(&mut o, &format!("  {r}"), per);
            }
        }
    }
    let _ = writeln!(o, "State Table");
    row(&mut o, "current entries", std::iter::once(i.states));
    row(&mut o, "limit", std::iter::once(i.state_limit));
    row(&mut o, "inserts", std::iter::once(i.state_inserts));
    row(&mut o, "removals", std::iter::once(i.state_removals));
    row(&mut o, "limit hits", std::iter::once(i.state_limit_hits));
    if !i.io.is_empty() {
        let _ = writeln!(o, "I/O ({})", i.io_method);
        for (name, v) in &i.io {
            row(&mut o, name, std::iter::once(*v));
        }
    }
    o
}
