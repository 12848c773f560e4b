//! The canonical printer: IR → pf.conf text in sluice's dialect.
//!
//! # Principles
//! - Fixed point: `check(print(c))` yields `c` again (modulo line numbers),
//!   and printing that yields the same text. Golden tests hold us to it.
//! - Everything resolved is written out: percentages as rates, defaults
//!   (qlimit, priority) explicitly, lists expanded one rule per line.
//! - Each tree in the dialect it was written in ([`Dialect`]): OpenBSD
//!   5.5+ queues as `queue … parent … bandwidth … burst … for …ms`, ALTQ
//!   as `altq on …` and `queue … SCHED(…)`; pipes in the dummynet dialect.

use crate::ir::*;

/// The scheduler's word in pf.conf (`sluice show` names a tree's by it).
pub fn sched_name(s: SchedKind) -> &'static str {
    s.name()
}
use crate::units::{proto_name, tcp_flags_str};
use std::fmt::Write as _;

pub fn print(cfg: &Config) -> String {
    let mut o = String::new();
    if cfg.options.state_limit != Options::default().state_limit {
        let _ = writeln!(o, "set limit states {}", cfg.options.state_limit);
    }
    let (t, dt) = (&cfg.options.timeouts, Timeouts::default());
    for k in TimeoutKind::ALL {
        if t.get(k) != dt.get(k) {
            let _ = writeln!(o, "set timeout {} {}", k.name(), secs(t.get(k)));
        }
    }
    for (name, v) in [
        ("interval", cfg.options.interval),
        ("adaptive.start", cfg.options.adaptive_start),
        ("adaptive.end", cfg.options.adaptive_end),
    ] {
        if let Some(v) = v {
            let _ = writeln!(o, "set timeout {name} {v}");
        }
    }
    for (i, ov) in &cfg.options.overhead {
        let atm = if ov.framing == sluice_time::Framing::Atm {
            " atm"
        } else {
            ""
        };
        let _ = writeln!(o, "set overhead on {i} {}{atm}", ov.bytes);
    }
    for t in &cfg.tables {
        let e: Vec<String> = t
            .entries
            .iter()
            .map(|(n, neg)| format!("{}{}", if *neg { "!" } else { "" }, net(n)))
            .collect();
        let _ = writeln!(o, "table <{}> {{ {} }}", t.name, e.join(", "));
    }
    for iq in &cfg.interfaces {
        if !o.is_empty() {
            o.push('\n');
        }
        let start = o.len();
        match iq.sched {
            SchedKind::Pipe => pipe(&mut o, iq),
            _ if iq.dialect == Dialect::OpenBsd => new_style(&mut o, iq),
            _ => altq(&mut o, iq),
        }
        if let Some(a) = cfg.options.autorate_of(&iq.ifname) {
            autorate(&mut o, start, a);
        }
    }
    if !cfg.rules.is_empty() && !o.is_empty() {
        o.push('\n');
    }
    for r in &cfg.rules {
        rule(&mut o, r);
    }
    o
}

/// `autorate (…)` at the end of the interface's first line (its `altq
/// on`, root queue or pipe), which starts at `start`.
fn autorate(o: &mut String, start: usize, a: crate::ir::Autorate) {
    let dry = if a.dry_run { ", dry-run" } else { "" };
    // std's Display is the canonical form (RFC 5952 for IPv6), which the
    // parser reads back as the same address.
    let probe = a.probe.map_or(String::new(), |p| format!(", probe {p}"));
    // Always the long form: what the engine will do.
    let reconfig = a
        .reconfig
        .map_or(String::new(), |r| format!(", reconfig {r}"));
    let words = format!(
        " autorate (min {}, max {}{dry}{probe}{reconfig})",
        a.min, a.max
    );
    match o[start..].find('\n') {
        Some(i) => o.insert_str(start + i, &words),
        None => o.push_str(&words),
    }
}

fn net(n: &IpNet) -> String {
    let full = if n.addr.is_ipv4() { 32 } else { 128 };
    if n.prefix == full {
        n.addr.to_string()
    } else {
        format!("{}/{}", n.addr, n.prefix)
    }
}

/// `(a, b)` of `words` joined by `sep`, or nothing when there are none.
fn in_parens(words: &[String], sep: &str) -> String {
    if words.is_empty() {
        String::new()
    } else {
        format!("({})", words.join(sep))
    }
}

fn curve(c: &ServiceCurve) -> String {
    if c.m1.0 == 0 && c.d.0 == 0 {
        c.m2.to_string()
    } else {
        format!("({} {} {})", c.m1, c.d, c.m2)
    }
}

/// The options ALTQ writes in a queue's scheduler parentheses
/// (`hfsc(default red realtime 1Mb)`), in the printer's order and spelling.
pub fn sched_options(q: &Queue) -> Vec<String> {
    let mut opts: Vec<String> = Vec::new();
    for (on, name) in [
        (q.default, "default"),
        (q.borrow, "borrow"),
        (q.red, "red"),
        (q.ecn, "ecn"),
        (q.rio, "rio"),
        (q.codel.is_some(), "codel"),
    ] {
        if on {
            opts.push(name.into());
        }
    }
    if let Some(c) = &q.realtime {
        opts.push(format!("realtime {}", curve(c)));
    }
    if let Some(c) = &q.linkshare {
        // Linkshare defaults to the bandwidth; only a different one is news.
        if Some(*c) != q.bandwidth.map(ServiceCurve::linear) {
            opts.push(format!("linkshare {}", curve(c)));
        }
    }
    if let Some(c) = &q.upperlimit {
        opts.push(format!("upperlimit {}", curve(c)));
    }
    if let Some(n) = q.buckets {
        opts.push(format!("buckets {n}"));
    }
    if let Some(r) = q.hogs {
        opts.push(format!("hogs {r}"));
    }
    opts.extend(flag_words(q.ingress, q.ack_filter, None, q.tcp).map(String::from));
    opts
}

/// `ack-pacing` and `window-clamp` as set in `t`, in the printer's order.
fn tcp_words(t: TcpControl) -> impl Iterator<Item = &'static str> {
    [
        (t.ack_pacing, "ack-pacing"),
        (t.window_clamp, "window-clamp"),
    ]
    .into_iter()
    .filter_map(|(on, w)| on.then_some(w))
}

/// The flags a queue or pipe line ends with, in the printer's order:
/// `ingress`, the ACK filter, the host isolation, then [`tcp_words`].
fn flag_words(
    ingress: bool,
    ack_filter: Option<AckFilterMode>,
    isolate: Option<HostIsolation>,
    tcp: TcpControl,
) -> impl Iterator<Item = &'static str> {
    ingress
        .then_some("ingress")
        .into_iter()
        .chain(ack_filter.map(AckFilterMode::name))
        .chain(isolate.map(HostIsolation::name))
        .chain(tcp_words(tcp))
}

/// Every option of a queue as one list, for `sluice show`: the scheduler
/// options of [`sched_options`], then the counts only OpenBSD 5.5+ queues
/// (`flows`, `quantum`) and pipes (`weight`) carry, spelled as
/// [`print`] writes them.
pub fn queue_options(q: &Queue) -> Vec<String> {
    let mut opts = sched_options(q);
    for (word, n) in [
        ("flows", q.flows),
        ("quantum", q.quantum),
        ("weight", q.weight),
    ] {
        if let Some(n) = n {
            opts.push(format!("{word} {n}"));
        }
    }
    opts
}

/// The IR of `altq on IF codel(…)`: a PRIQ of one default class named
/// [`CodelParams::ROOT_QUEUE`] with nothing but its qlimit and CoDel. An
/// equal tree written as a PRIQ prints so too; both read back the same.
fn root_codel(iq: &IfaceQueueing) -> Option<(CodelParams, u32)> {
    let [q] = iq.queues.as_slice() else {
        return None;
    };
    let c = q.codel?;
    let mut plain = Queue::new(CodelParams::ROOT_QUEUE, q.line);
    plain.qlimit = q.qlimit;
    plain.default = true;
    plain.codel = Some(c);
    (iq.sched == SchedKind::Priq && *q == plain).then_some((c, q.qlimit))
}

fn altq(o: &mut String, iq: &IfaceQueueing) {
    if let Some((c, qlimit)) = root_codel(iq) {
        let d = CodelParams::default();
        let mut opts = Vec::new();
        if c.target != d.target {
            opts.push(format!("target {}", c.target));
        }
        if c.interval != d.interval {
            opts.push(format!("interval {}", c.interval));
        }
        if c.ecn {
            opts.push("ecn".to_string());
        }
        let opts = in_parens(&opts, ", ");
        let _ = write!(
            o,
            "altq on {} codel{opts} bandwidth {} qlimit {qlimit}",
            iq.ifname, iq.bandwidth
        );
        if let Some(t) = iq.tbrsize {
            let _ = write!(o, " tbrsize {t}");
        }
        o.push('\n');
        return;
    }
    let top: Vec<&str> = iq
        .queues
        .iter()
        .filter(|q| q.parent.is_none())
        .map(|q| q.name.as_str())
        .collect();
    let mut flags: Vec<String> = iq.root_flags.words().map(str::to_string).collect();
    if let Some(c) = &iq.root_flags.upperlimit {
        flags.push(format!("upperlimit {}", curve(c)));
    }
    let flags = in_parens(&flags, " ");
    let _ = write!(
        o,
        "altq on {} {}{flags} bandwidth {}",
        iq.ifname,
        iq.sched.name(),
        iq.bandwidth
    );
    if let Some(t) = iq.tbrsize {
        let _ = write!(o, " tbrsize {t}");
    }
    let _ = writeln!(o, " queue {{ {} }}", top.join(", "));
    for q in &iq.queues {
        let _ = write!(o, "queue {} on {}", q.name, iq.ifname);
        if let Some(b) = q.bandwidth {
            let _ = write!(o, " bandwidth {b}");
        }
        let _ = write!(o, " priority {} qlimit {}", q.priority, q.qlimit);
        let opts = sched_options(q);
        if !opts.is_empty() {
            let _ = write!(o, " {}({})", iq.sched.name(), opts.join(" "));
        }
        if !q.children.is_empty() {
            let kids: Vec<&str> = q
                .children
                .iter()
                .filter_map(|&c| iq.queues.get(c))
                .map(|c| c.name.as_str())
                .collect();
            let _ = write!(o, " {{ {} }}", kids.join(", "));
        }
        o.push('\n');
    }
}

/// `BW [burst BW for Nms]`: pfctl's `scspec` takes the time in whole
/// milliseconds only, so a finer one keeps sluice's own unit.
fn curve55(c: &ServiceCurve) -> String {
    if c.m1.0 == 0 && c.d.0 == 0 {
        return c.m2.to_string();
    }
    let ms = 1_000_000;
    let d = if c.d.0.is_multiple_of(ms) {
        format!("{}ms", c.d.0 / ms)
    } else {
        c.d.to_string()
    };
    format!("{} burst {} for {d}", c.m2, c.m1)
}

fn new_style(o: &mut String, iq: &IfaceQueueing) {
    for q in &iq.queues {
        let _ = write!(o, "queue {} on {}", q.name, iq.ifname);
        if let Some(p) = q.parent.and_then(|p| iq.queues.get(p)) {
            let _ = write!(o, " parent {}", p.name);
        }
        if let Some(c) = &q.linkshare {
            let _ = write!(o, " bandwidth {}", curve55(c));
        }
        if let Some(c) = &q.realtime {
            let _ = write!(o, " min {}", curve55(c));
        }
        if let Some(c) = &q.upperlimit {
            let _ = write!(o, " max {}", curve55(c));
        }
        let _ = write!(o, " qlimit {}", q.qlimit);
        if let Some(f) = q.flows {
            let _ = write!(o, " flows {f}");
        }
        if let Some(f) = q.quantum {
            let _ = write!(o, " quantum {f}");
        }
        if q.default {
            o.push_str(" default");
        }
        for w in flag_words(q.ingress, q.ack_filter, q.isolate, q.tcp) {
            let _ = write!(o, " {w}");
        }
        o.push('\n');
    }
}

fn ppm(p: u32) -> String {
    let s = format!("{}.{:06}", p / 1_000_000, p % 1_000_000);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn pipe(o: &mut String, iq: &IfaceQueueing) {
    let Some(p) = &iq.pipe else { return };
    let _ = write!(
        o,
        "pipe {} on {} bandwidth {}",
        p.name, iq.ifname, iq.bandwidth
    );
    if p.delay.0 != 0 {
        let _ = write!(o, " delay {}", p.delay);
    }
    if p.loss_ppm != 0 {
        let _ = write!(o, " plr {}", ppm(p.loss_ppm));
    }
    let _ = write!(o, " qlimit {} sched ", p.qlimit);
    match &p.sched {
        PipeSched::Fifo => o.push_str("fifo"),
        PipeSched::Drr => o.push_str("drr"),
        PipeSched::Wf2q => o.push_str("wf2q"),
        PipeSched::FqCodel(f) => {
            let _ = write!(
                o,
                "fq_codel (target {}, interval {}, quantum {}, limit {}, flows {}, {})",
                f.target,
                f.interval,
                f.quantum,
                f.limit,
                f.flows,
                if f.ecn { "ecn" } else { "noecn" }
            );
        }
    }
    for w in flag_words(p.ingress, p.ack_filter, p.isolate, p.tcp) {
        let _ = write!(o, " {w}");
    }
    o.push('\n');
    for q in &iq.queues {
        let _ = write!(
            o,
            "queue {} pipe {} weight {} qlimit {}",
            q.name,
            p.name,
            q.weight.unwrap_or(1),
            q.qlimit
        );
        if q.default {
            o.push_str(" default");
        }
        // The pipe's isolation and TCP control are copied to each queue:
        // print what the queue adds.
        let isolate = q.isolate.filter(|&m| Some(m) != p.isolate);
        let own = TcpControl {
            ack_pacing: q.tcp.ack_pacing && !p.tcp.ack_pacing,
            window_clamp: q.tcp.window_clamp && !p.tcp.window_clamp,
        };
        for w in flag_words(false, q.ack_filter, isolate, own) {
            let _ = write!(o, " {w}");
        }
        o.push('\n');
    }
}

/// pf's one-or-two form: ` WORD a`, or ` WORD (a, b)` (`queue`, `set prio`).
fn one_or_two<T: std::fmt::Display>(o: &mut String, word: &str, v: Option<(T, Option<T>)>) {
    match v {
        Some((a, Some(b))) => {
            let _ = write!(o, " {word} ({a}, {b})");
        }
        Some((a, None)) => {
            let _ = write!(o, " {word} {a}");
        }
        None => {}
    }
}

fn addr(a: &AddrMatch) -> String {
    match a {
        AddrMatch::Any => "any".into(),
        AddrMatch::Net(n) => net(n),
        AddrMatch::Table(t) => format!("<{t}>"),
        // Parenthesised so that any name reads back as an interface, even one
        // that looks like a keyword (`(any)`) or starts with a digit.
        AddrMatch::Iface(i) => format!("({i})"),
        AddrMatch::IfaceNetwork(i) => format!("({i}:network)"),
        AddrMatch::SelfAddr => "self".into(),
        AddrMatch::NoRoute => "no-route".into(),
        AddrMatch::UrpfFailed => "urpf-failed".into(),
    }
}

fn port(p: &PortOp) -> String {
    match *p {
        PortOp::Eq(a) => format!("{a}"),
        PortOp::Ne(a) => format!("!= {a}"),
        PortOp::Lt(a) => format!("< {a}"),
        PortOp::Le(a) => format!("<= {a}"),
        PortOp::Gt(a) => format!("> {a}"),
        PortOp::Ge(a) => format!(">= {a}"),
        PortOp::Range(a, b) => format!("{a}:{b}"),
        PortOp::Between(a, b) => format!("{a} >< {b}"),
        PortOp::Outside(a, b) => format!("{a} <> {b}"),
    }
}

fn endpoint(o: &mut String, kw: &str, e: &Endpoint) {
    let _ = write!(
        o,
        " {kw} {}{}",
        if e.negated { "!" } else { "" },
        addr(&e.addr)
    );
    if let Some(p) = &e.port {
        let _ = write!(o, " port {}", port(p));
    }
}

/// Whole seconds (what `set timeout` reads).
fn secs(d: sluice_time::Duration) -> u64 {
    d.0 / 1_000_000_000
}

/// `max 10, max-src-states 3, tcp.established 600`, or empty.
fn state_opts(s: &StateOpts) -> String {
    let mut v = Vec::new();
    if let Some(m) = s.max {
        v.push(format!("max {m}"));
    }
    if let Some(m) = s.max_src_states {
        v.push(format!("max-src-states {m}"));
    }
    if let Some(m) = s.max_src_nodes {
        v.push(format!("max-src-nodes {m}"));
    }
    if let Some(m) = s.max_src_conn {
        v.push(format!("max-src-conn {m}"));
    }
    if let Some((n, secs)) = s.max_src_conn_rate {
        v.push(format!("max-src-conn-rate {n}/{secs}"));
    }
    if let Some((t, flush)) = &s.overload {
        v.push(format!(
            "overload <{t}>{}",
            match flush {
                Flush::No => "",
                Flush::Rule => " flush",
                Flush::Global => " flush global",
            }
        ));
    }
    for (k, d) in &s.timeouts {
        v.push(format!("{} {}", k.name(), secs(*d)));
    }
    if s.sloppy {
        v.push("sloppy".into());
    }
    v.join(", ")
}

fn rule(o: &mut String, r: &Rule) {
    o.push_str(match r.action {
        Action::Pass => "pass",
        Action::Block => "block",
        Action::Match => "match",
    });
    match r.direction {
        Some(Direction::In) => o.push_str(" in"),
        Some(Direction::Out) => o.push_str(" out"),
        None => {}
    }
    if r.log {
        o.push_str(" log");
    }
    if r.quick {
        o.push_str(" quick");
    }
    if let Some((i, neg)) = &r.iface {
        let _ = write!(o, " on {}{i}", if *neg { "!" } else { "" });
    }
    match r.af {
        Some(AddrFamily::Inet) => o.push_str(" inet"),
        Some(AddrFamily::Inet6) => o.push_str(" inet6"),
        None => {}
    }
    if let Some(p) = r.proto {
        match proto_name(p) {
            Some(n) => {
                let _ = write!(o, " proto {n}");
            }
            None => {
                let _ = write!(o, " proto {p}");
            }
        }
    }
    if r.from == Endpoint::default() && r.to == Endpoint::default() {
        o.push_str(" all");
    } else {
        endpoint(o, "from", &r.from);
        endpoint(o, "to", &r.to);
    }
    match r.flags {
        Some((s, m)) => {
            let _ = write!(o, " flags {}/{}", tcp_flags_str(s), tcp_flags_str(m));
        }
        // Without it, the printed rule would read back with pf's S/SA default.
        None if r.action == Action::Pass
            && r.state != StatePolicy::No
            && matches!(r.proto, None | Some(PROTO_TCP)) =>
        {
            o.push_str(" flags any");
        }
        None => {}
    }
    if let Some((t, code)) = r.icmp_type {
        let kw = if r.proto == Some(58) || r.af == Some(AddrFamily::Inet6) {
            "icmp6-type"
        } else {
            "icmp-type"
        };
        let _ = write!(o, " {kw} {t}");
        if let Some(c) = code {
            let _ = write!(o, " code {c}");
        }
    }
    if let Some(t) = r.tos {
        let _ = write!(o, " tos 0x{t:02x}");
    }
    if r.action == Action::Pass {
        let opts = state_opts(&r.state_opts);
        match r.state {
            StatePolicy::Keep if opts.is_empty() => {}
            StatePolicy::Keep => {
                let _ = write!(o, " keep state ({opts})");
            }
            StatePolicy::No => o.push_str(" no state"),
            StatePolicy::Modulate if opts.is_empty() => o.push_str(" modulate state"),
            StatePolicy::Modulate => {
                let _ = write!(o, " modulate state ({opts})");
            }
        }
    }
    one_or_two(o, "queue", r.queue.as_ref().map(|(a, b)| (a, b.as_ref())));
    one_or_two(o, "set prio", r.prio);
    match r.max_mss {
        Some(MaxMss::Bytes(n)) => {
            let _ = write!(o, " scrub (max-mss {n})");
        }
        Some(MaxMss::Auto) => o.push_str(" scrub (max-mss auto)"),
        None => {}
    }
    o.push('\n');
}
