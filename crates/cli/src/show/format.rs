//! Text layouts of `sluice show`, after pfctl's (`-vvsq`, `-vss`, `-vsr`,
//! `-si`). Pure functions of the replies; golden tests pin them.

use sluice_control::proto::*;
use sluice_time::Rate;
use std::fmt::Write as _;

mod xdp;

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
    format_queues_measured(r, None)
}

/// Rate of a counter between two snapshots `secs` apart (`None` when the
/// counter went backwards: the queue was re-created by a reload).
fn per_sec(now: u64, before: u64, secs: f64) -> Option<f64> {
    (now >= before && secs > 0.0).then(|| (now - before) as f64 / secs)
}

/// pfctl's spelling of a measured rate: `12.35Kb/s`.
fn rate_text(bits_per_sec: f64) -> String {
    sluice_time::units::format_measured_pf(bits_per_sec)
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
            let delay = a.delay_ns.map_or("none".to_string(), |d| ms(Some(d)));
            let decisions: Vec<String> = a
                .decisions
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let _ = writeln!(
                o,
                "# autorate on {}: rate {} (min {}, max {}{}{}), delay beyond sluice {} {}; samples {} ({} unsound); holds {} ({}); decisions: {}",
                iface.name,
                Rate(a.rate_bps),
                Rate(a.min_bps),
                Rate(a.max_bps),
                if a.dry_run { ", dry-run: not applied" } else { "" },
                match (&a.reconfig, a.reconfig_active) {
                    (Some(r), true) => format!(", reconfig {r}"),
                    (Some(r), false) => format!(", reconfig {r} off: no wall clock"),
                    (None, _) => String::new(),
                },
                delay,
                if a.delay_from_probe {
                    "from the probe".to_string()
                } else {
                    format!("over {} flows", a.flows)
                },
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
            if let (Some(p), Some(b)) = (q.ingress_charged_packets, q.ingress_charged_bytes) {
                let _ = writeln!(
                    o,
                    "  [ ingress: dropped and charged as sent: {p} pkts, {b} bytes ]"
                );
            }
            if let Some(t) = &q.tcp {
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
            let before = prev.and_then(|(p, secs)| {
                let pi = p.ifaces.iter().find(|x| x.name == iface.name)?;
                let pq = pi.queues.iter().find(|x| x.name == q.name)?;
                Some((
                    per_sec(q.packets, pq.packets, secs)?,
                    per_sec(q.bytes, pq.bytes, secs)?,
                ))
            });
            if let Some((pps, bps)) = before {
                let _ = writeln!(
                    o,
                    "  [ measured: {pps:.1} packets/s, {} ]",
                    rate_text(bps * 8.0)
                );
            }
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
        if let Some(w) = &s.windows {
            let _ = writeln!(o, "   {}", windows_text(w));
        }
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
        // Passive RTT: sluice to each endpoint and back (smoothed, min).
        let rtt = |e: &Option<RttJson>| {
            e.as_ref().map(|e| {
                format!(
                    "{:.1} ms (min {:.1})",
                    e.smoothed_ns as f64 / 1e6,
                    e.min_ns as f64 / 1e6
                )
            })
        };
        match (rtt(&s.rtt_to_src), rtt(&s.rtt_to_dst)) {
            (None, None) => {}
            (a, b) => {
                let dash = || "-".to_string();
                let _ = writeln!(
                    o,
                    "   rtt to {}: {}, to {}: {}",
                    endpoint(&s.src, s.src_port),
                    a.unwrap_or_else(dash),
                    endpoint(&s.dst, s.dst_port),
                    b.unwrap_or_else(dash)
                );
            }
        }
    }
    if (r.states.len() as u64) < r.total {
        let _ = writeln!(o, "# {} of {} states shown", r.states.len(), r.total);
    }
    o
}

/// pfctl's `[seqlo + span]` for each peer, `wscale N` after each when
/// both scales are known (RFC 7323 applies scaling only if both offered it).
fn windows_text(w: &[WindowJson; 2]) -> String {
    let both = w[0].wscale.is_some() && w[1].wscale.is_some();
    let one = |p: &WindowJson| {
        let span = p.seqhi.wrapping_sub(p.seqlo);
        match p.wscale {
            Some(ws) if both => format!("[{} + {span}] wscale {ws}", p.seqlo),
            _ => format!("[{} + {span}]", p.seqlo),
        }
    };
    format!("{}  {}", one(&w[0]), one(&w[1]))
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
        if x.mss_clamped > 0 {
            let _ = writeln!(o, "  [ MSS clamped: {} ]", x.mss_clamped);
        }
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
    let counters: [(&str, Get); 10] = [
        ("received packets", |c| c.rx_packets),
        ("received bytes", |c| c.rx_bytes),
        ("sent packets", |c| c.tx_packets),
        ("sent bytes", |c| c.tx_bytes),
        ("non-IP forwarded", |c| c.non_ip),
        ("ECN marked", |c| c.ecn_marked),
        ("SYN MSS clamped", |c| c.mss_clamped),
        ("SYN MSS untouched", |c| c.mss_untouched),
        ("autorate probes sent", |c| c.probes_sent),
        ("probe replies taken", |c| c.probe_replies),
    ];
    for (label, get) in counters {
        row(&mut o, label, i.counters.iter().map(get));
    }
    let _ = writeln!(o, "Drops");
    let drops: [(&str, Get); 8] = [
        ("malformed", |c| c.malformed),
        ("blocked", |c| c.blocked),
        ("state-limit", |c| c.state_limit),
        ("bad-state", |c| c.bad_state),
        ("no-route", |c| c.no_route),
        ("queue (egress)", |c| c.queue_drops),
        ("reload", |c| c.reload_drops),
        ("memory-limit", |c| c.memory_drops),
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
    row(&mut o, "evictions", std::iter::once(i.state_evictions));
    row(
        &mut o,
        "rule max hits",
        std::iter::once(i.state_rule_limit_hits),
    );
    let m = &i.memory;
    let size = sluice_time::units::format_bytes;
    let _ = writeln!(o, "Memory (queued frames, bytes)");
    row(&mut o, "held now", std::iter::once(m.held_bytes));
    row(&mut o, "peak", std::iter::once(m.peak_bytes));
    row(
        &mut o,
        &format!("limit ({})", size(m.limit_bytes)),
        std::iter::once(m.limit_bytes),
    );
    row(&mut o, "frames queued", std::iter::once(m.frames));
    row(&mut o, "right-sized frames", std::iter::once(m.right_sized));
    row(&mut o, "limit drops", std::iter::once(m.limit_drops));
    for q in &m.queue_limits {
        row(
            &mut o,
            &format!("{}/{} ({})", q.iface, q.queue, size(q.limit_bytes)),
            std::iter::once(q.limit_bytes),
        );
    }
    if !i.io.is_empty() {
        let _ = writeln!(o, "I/O ({})", i.io_method);
        for (name, v) in &i.io {
            row(&mut o, name, std::iter::once(*v));
        }
    }
    xdp::format_xdp(&mut o, &i.xdp);
    if !i.clients.is_empty() {
        let _ = writeln!(o, "Clients{:>30}{:>8}{:>8}", "serving", "cap", "refused");
        for c in &i.clients {
            let _ = writeln!(
                o,
                "  {:<28} {:>7} {:>7} {:>7}",
                c.server, c.serving, c.cap, c.refused
            );
        }
    }
    format_learned(&mut o, &i.learned_addrs);
    o
}

/// Bridge mode's interface addresses: what `from $ext_if` matches.
/// Interfaces that know the same set (both sides of the bridge learn alike)
/// share one list.
fn format_learned(o: &mut String, learned: &[LearnedAddrsJson]) {
    let same = |a: &LearnedAddrsJson, b: &LearnedAddrsJson| {
        a.addrs == b.addrs && a.refused == b.refused && a.configured == b.configured
    };
    let mut shown: Vec<&LearnedAddrsJson> = Vec::new();
    for l in learned {
        if shown.iter().any(|s| same(s, l)) {
            continue;
        }
        shown.push(l);
        let names: Vec<&str> = learned
            .iter()
            .filter(|x| same(x, l))
            .map(|x| x.iface.as_str())
            .collect();
        if !l.configured.is_empty() {
            let _ = writeln!(o, "Configured Addresses of {}", names.join(", "));
            for c in &l.configured {
                let _ = writeln!(o, "  {c}");
            }
            continue;
        }
        let _ = writeln!(
            o,
            "Learned Addresses of {} ({}, {} refused)",
            names.join(", "),
            l.addrs.len(),
            l.refused
        );
        for a in &l.addrs {
            let _ = writeln!(
                o,
                "  {:<40} age {}  idle {}",
                a.addr,
                hms(a.age_ns),
                hms(a.idle_ns)
            );
        }
    }
}

#[cfg(test)]
mod tests;
