//! `show info` (`pfctl -si`): status, then one column per interface.

use super::{hms, xdp};
use sluice_control::proto::*;
use std::fmt::Write as _;

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
