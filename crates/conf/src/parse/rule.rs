//! `pass`, `block` and `match` rules (pf.conf(5) "PACKET FILTERING").
//!
//! The options sluice does not act on (label, tag, nat-to, route-to, state
//! options other than `max`, `max-src-states` and timeouts, …) are parsed
//! for shape and recorded in `RuleAst::ignored` (or the state options'
//! list) so `sluice check` can name each one; docs/config.md lists them.

use super::{PResult, P};
use crate::ast::{HostAst, RuleAst, Sp, StateOptsAst};
use crate::diag::{Diagnostic, Span};
use crate::ir::{
    Action, AddrFamily, AddrMatch, Direction, Flush, IpNet, MaxMss, PortOp, StatePolicy,
    MAX_MSS_MIN,
};
use crate::lex::Tok;
use crate::units::{self, ipnet};
use std::net::IpAddr;

fn iface_addr(w: &str, span: Span) -> PResult<AddrMatch> {
    let name = w.split_once(':').map_or(w, |(n, _)| n);
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        return Err(
            Diagnostic::error(format!("invalid interface name `{name}`"), span)
                .label("expected an interface or group name like em0 or egress"),
        );
    }
    Ok(match w.split_once(':') {
        Some((i, "network")) => AddrMatch::IfaceNetwork(i.to_string()),
        // `:broadcast`, `:peer`, `:0`: still the interface's addresses to sluice.
        Some((i, _)) => AddrMatch::Iface(i.to_string()),
        None => AddrMatch::Iface(w.to_string()),
    })
}

fn host(p: &mut P) -> PResult<Sp<HostAst>> {
    let start = p.here();
    let negated = p.eat(&Tok::Bang);
    let addr = match p.next().map(|t| (&t.tok, t.span)) {
        Some((Tok::Table(t), _)) => AddrMatch::Table(t.clone()),
        Some((Tok::LParen, _)) => {
            let w = p.word("an interface")?;
            // `(if)` modifiers like `(if:0)` or `(if round-robin)`: skip to `)`.
            while !p.at_end() && p.peek() != Some(&Tok::RParen) {
                p.next();
            }
            p.expect(Tok::RParen, "`)`")?;
            iface_addr(&w.v, w.span)?
        }
        Some((Tok::Word(w) | Tok::Str(w), span)) => match w.as_str() {
            "any" => AddrMatch::Any,
            "self" => AddrMatch::SelfAddr,
            "no-route" => AddrMatch::NoRoute,
            "urpf-failed" => AddrMatch::UrpfFailed,
            _ => {
                if let Some(n) = ipnet(w) {
                    n.into()
                } else if w.contains('/')
                    || w.parse::<IpAddr>().is_ok()
                    || w.chars().next().is_some_and(|c| c.is_ascii_digit())
                {
                    return Err(Diagnostic::error(format!("invalid address `{w}`"), span)
                        .label("expected an address, address/prefix, table, or interface"));
                } else if w.contains('.') {
                    return Err(Diagnostic::error(
                        format!("host name `{w}` is not resolved"),
                        span,
                    )
                    .label("sluice does not look up names")
                    .hint("write the address, or put the addresses in a table <name> { … }"));
                } else {
                    iface_addr(w, span)?
                }
            }
        },
        _ => {
            p.pos = p.pos.saturating_sub(1);
            return Err(p.unexpected("an address"));
        }
    };
    Ok(Sp::new(HostAst { addr, negated }, start.to(p.prev_span())))
}

impl From<IpNet> for AddrMatch {
    fn from(n: IpNet) -> AddrMatch {
        AddrMatch::Net(n)
    }
}

fn port_num(p: &mut P) -> PResult<(u16, Span)> {
    let w = p.word("a port")?;
    units::port(&w.v).map(|n| (n, w.span)).ok_or_else(|| {
        Diagnostic::error(format!("unknown port `{}`", w.v), w.span)
            .label("expected 0..65535 or a service name")
            .hint("known names include ssh domain http www https smtp ntp imap imaps pop3 submission; otherwise write the number")
    })
}

fn port(p: &mut P) -> PResult<Sp<PortOp>> {
    let start = p.here();
    let op: Option<fn(u16) -> PortOp> = match p.peek() {
        Some(Tok::Eq) => Some(PortOp::Eq),
        Some(Tok::Ne) => Some(PortOp::Ne),
        Some(Tok::Lt) => Some(PortOp::Lt),
        Some(Tok::Le) => Some(PortOp::Le),
        Some(Tok::Gt) => Some(PortOp::Gt),
        Some(Tok::Ge) => Some(PortOp::Ge),
        _ => None,
    };
    if let Some(op) = op {
        p.next();
        let (n, _) = port_num(p)?;
        return Ok(Sp::new(op(n), start.to(p.prev_span())));
    }
    if let Some(w) = p.peek_word() {
        if let Some((a, b)) = w.split_once(':') {
            let span = p.here();
            p.next();
            let (Some(a), Some(b)) = (units::port(a), units::port(b)) else {
                return Err(Diagnostic::error(format!("invalid port range `{w}`"), span)
                    .label("expected LOW:HIGH"));
            };
            return Ok(Sp::new(PortOp::Range(a.min(b), a.max(b)), span));
        }
    }
    let (a, _) = port_num(p)?;
    let op = if p.eat(&Tok::Between) {
        PortOp::Between(a, port_num(p)?.0)
    } else if p.eat(&Tok::Outside) {
        PortOp::Outside(a, port_num(p)?.0)
    } else {
        PortOp::Eq(a)
    };
    Ok(Sp::new(op, start.to(p.prev_span())))
}

/// `from …` / `to …`: hosts (default any) and optional ports.
type Hosts = Vec<Sp<HostAst>>;
type Ports = Vec<Sp<PortOp>>;

fn endpoint(p: &mut P) -> PResult<(Hosts, Ports)> {
    let mut hosts = Vec::new();
    if p.peek_word() != Some("port") {
        hosts = p.list(&mut host)?;
    }
    let mut ports = Vec::new();
    if p.eat_word("port") {
        ports = p.list(&mut port)?;
    }
    Ok((hosts, ports))
}

/// `NAME` or `(NAME [,] PRI_NAME)`: parse.y's `comma` is optional, so
/// `(bulk ack)` is the same pair as `(bulk, ack)`.
fn queue_pair(p: &mut P) -> PResult<(Sp<String>, Option<Sp<String>>)> {
    if p.eat(&Tok::LParen) {
        let a = p.name("queue name")?;
        p.eat(&Tok::Comma);
        let b = if p.peek() == Some(&Tok::RParen) {
            None
        } else {
            Some(p.name("queue name")?)
        };
        p.expect(Tok::RParen, "`)`")?;
        Ok((a, b))
    } else {
        Ok((p.name("queue name")?, None))
    }
}

/// One option inside `scrub ( … )`.
fn scrub_opt(p: &mut P, r: &mut RuleAst) -> PResult<()> {
    let w = p.word("a scrub option (max-mss, no-df, random-id, min-ttl, set-tos, reassemble)")?;
    match w.v.as_str() {
        "max-mss" => max_mss(p, r, &w),
        "no-df" | "random-id" => {
            r.ignored.push(w);
            Ok(())
        }
        "min-ttl" | "set-tos" => {
            r.ignored.push(w);
            p.skip_value("a value")
        }
        "reassemble" => {
            let what = p.word("`tcp`")?;
            r.ignored.push(Sp::new(
                format!("reassemble {}", what.v),
                w.span.to(what.span),
            ));
            Ok(())
        }
        o => Err(
            Diagnostic::error(format!("unknown scrub option `{o}`"), w.span)
                .label("expected max-mss, no-df, random-id, min-ttl, set-tos or reassemble tcp"),
        ),
    }
}

/// `max-mss N|auto` after its keyword `w`.
fn max_mss(p: &mut P, r: &mut RuleAst, w: &Sp<String>) -> PResult<()> {
    if let Some(first) = &r.max_mss {
        return Err(
            Diagnostic::error("`max-mss` given twice in one rule", w.span)
                .label("second `max-mss`")
                .note(first.span, "first given here"),
        );
    }
    let v = if p.eat_word("auto") {
        Sp::new(MaxMss::Auto, w.span.to(p.prev_span()))
    } else {
        let n = p
            .number("max-mss", u64::from(MAX_MSS_MIN), 65535)
            .map_err(|d| {
                d.hint("max-mss is a TCP segment size in bytes, or `auto` for the largest that keeps one frame within ~20 ms at the interface's rate")
            })?;
        Sp::new(MaxMss::Bytes(n.v as u16), w.span.to(n.span))
    };
    r.max_mss = Some(v);
    Ok(())
}

/// One `set` of a pass or match rule (`set` itself is `w`): queue, prio,
/// tos or delay. Twice in one rule is pfctl's "cannot be redefined".
fn rule_set(p: &mut P, r: &mut RuleAst, w: &Sp<String>) -> PResult<()> {
    let what = p.word("queue, prio, tos or delay")?;
    rule_setting(p, r, w, what)
}

/// The setting `what` (after `set`, or a bare `queue`, which `w` names).
fn rule_setting(p: &mut P, r: &mut RuleAst, w: &Sp<String>, what: Sp<String>) -> PResult<()> {
    let again = |what: &Sp<String>| {
        Diagnostic::error(format!("{} cannot be redefined", what.v), what.span)
            .label("given a second time in this rule")
            .hint("a rule sets one queue and one prio; pfctl refuses the second as well")
    };
    match what.v.as_str() {
        "queue" if r.queue.is_some() => return Err(again(&what)),
        "prio" if r.prio.is_some() => return Err(again(&what)),
        "queue" => r.queue = Some(queue_pair(p)?),
        "prio" => r.prio = Some(prio_pair(p)?),
        "tos" | "delay" => {
            r.ignored
                .push(Sp::new(format!("set {}", what.v), w.span.to(what.span)));
            p.skip_value("a value")?
        }
        o => {
            return Err(
                Diagnostic::error(format!("unknown `set {o}` in rule"), what.span)
                    .label("expected queue, prio, tos or delay"),
            )
        }
    }
    Ok(())
}

/// `N` or `(N [,] PRI_N)`, the comma optional as in [`queue_pair`].
fn prio_pair(p: &mut P) -> PResult<(u8, Option<u8>)> {
    if p.eat(&Tok::LParen) {
        let a = p.number("prio", 0, 7)?.v as u8;
        p.eat(&Tok::Comma);
        let b = if p.peek() == Some(&Tok::RParen) {
            None
        } else {
            Some(p.number("prio", 0, 7)?.v as u8)
        };
        p.expect(Tok::RParen, "`)`")?;
        Ok((a, b))
    } else {
        Ok((p.number("prio", 0, 7)?.v as u8, None))
    }
}

/// Pool and port options after nat-to / rdr-to / route-to targets.
fn skip_pool_opts(p: &mut P) -> PResult<()> {
    // Each iteration consumes a token or stops.
    loop {
        match p.peek_word() {
            Some("port") => {
                p.next();
                // Translation ports are not acted on: accept any spelling.
                p.list(&mut |p: &mut P| skip_op_item(p, "a port"))?;
            }
            Some(
                "static-port" | "round-robin" | "random" | "bitmask" | "least-states"
                | "sticky-address",
            ) => {
                p.next();
            }
            Some("source-hash") => {
                p.next();
                if p.peek_word().is_some_and(|w| w.starts_with("0x"))
                    || matches!(p.peek(), Some(Tok::Str(_)))
                {
                    p.next();
                }
            }
            _ => return Ok(()),
        }
    }
}

/// `user`/`group` values: `1000`, `= joe`, `{ a b }`, `1000 >< 2000`.
fn skip_id(p: &mut P) -> PResult<()> {
    p.list(&mut |p: &mut P| skip_op_item(p, "a user or group"))
        .map(|_| ())
}

/// One item of a list that is not acted on: `[op] word` or
/// `word >< word` / `word <> word`, each word being `what`.
fn skip_op_item(p: &mut P, what: &str) -> PResult<()> {
    if matches!(
        p.peek(),
        Some(Tok::Eq | Tok::Ne | Tok::Lt | Tok::Le | Tok::Gt | Tok::Ge)
    ) {
        p.next();
    }
    p.word(what)?;
    if p.eat(&Tok::Between) || p.eat(&Tok::Outside) {
        p.word(what)?;
    }
    Ok(())
}

/// The state options after `keep state (` up to and including `)`
/// (pf.conf(5) "STATEFUL TRACKING OPTIONS"), comma-separated.
fn state_opts(p: &mut P, o: &mut StateOptsAst) -> PResult<()> {
    // Each iteration consumes at least one token or returns.
    loop {
        if p.eat(&Tok::RParen) {
            return Ok(());
        }
        if p.eat(&Tok::Comma) {
            continue;
        }
        let w = match p.peek_word() {
            Some(w) => w,
            None => return Err(p.unexpected("a state option or `)`")),
        };
        match w {
            "max" | "max-src-states" | "max-src-nodes" | "max-src-conn" => {
                p.next();
                let (what, field) = match w {
                    "max" => ("max states", &mut o.max),
                    "max-src-states" => (w, &mut o.max_src_states),
                    "max-src-nodes" => (w, &mut o.max_src_nodes),
                    _ => (w, &mut o.max_src_conn),
                };
                *field = Some(p.number(what, 1, u64::from(u32::MAX))?);
            }
            "max-src-conn-rate" => {
                p.next();
                let r = p.word("N/SECONDS")?;
                let num = |x: &str| units::number(x).and_then(|n| u32::try_from(n).ok());
                match r.v.split_once('/').map(|(n, s)| (num(n), num(s))) {
                    Some((Some(n), Some(s))) if n > 0 && s > 0 => {
                        o.max_src_conn_rate = Some(Sp::new((n, s), r.span));
                    }
                    _ => {
                        return Err(Diagnostic::error(
                            format!("invalid max-src-conn-rate `{}`", r.v),
                            r.span,
                        )
                        .label("expected CONNECTIONS/SECONDS, both 1..4294967295, e.g. 100/10"))
                    }
                }
            }
            "overload" => {
                let w = p.word("a state option")?;
                let start = w.span;
                let table = match p.next().map(|t| &t.tok) {
                    Some(Tok::Table(t)) => t.clone(),
                    _ => {
                        p.pos = p.pos.saturating_sub(1);
                        return Err(p.unexpected("a table `<name>`"));
                    }
                };
                let flush = if !p.eat_word("flush") {
                    Flush::No
                } else if p.eat_word("global") {
                    Flush::Global
                } else {
                    Flush::Rule
                };
                o.overload = Some(Sp::new((table, flush), start.to(p.prev_span())));
            }
            "source-track" => {
                let w = p.word("a state option")?;
                let start = w.span;
                if !p.eat_word("rule") {
                    p.eat_word("global");
                }
                o.ignored
                    .push(Sp::new("source-track".into(), start.to(p.prev_span())));
            }
            "sloppy" => {
                p.next();
                o.sloppy = true;
            }
            // sluice's states float.
            "floating" => {
                p.next();
            }
            "no-sync" | "pflow" | "if-bound" | "allow-related" => {
                let w = p.word("a state option")?;
                o.ignored.push(w);
            }
            _ => {
                let (name, n) = super::timeout_item(p).map_err(|e| {
                    e.hint("state options: max, max-src-states, max-src-nodes, max-src-conn, max-src-conn-rate, overload, source-track, sloppy, no-sync, pflow, if-bound, floating, and timeouts such as tcp.established 600")
                })?;
                o.timeouts.push((name, n));
            }
        }
    }
}

pub fn rule(p: &mut P, first: &Sp<String>) -> PResult<RuleAst> {
    let action = match first.v.as_str() {
        "pass" => Action::Pass,
        "block" => Action::Block,
        _ => Action::Match,
    };
    // An old `scrub` statement: its scrub options stand bare among the
    // rule's (`fragment reassemble` is one of them there, not a criterion).
    let scrub_stmt = first.v == "scrub";
    let mut r = RuleAst {
        action,
        span: first.span,
        direction: None,
        quick: false,
        log: false,
        ifaces: Vec::new(),
        af: None,
        protos: Vec::new(),
        from_hosts: Vec::new(),
        from_ports: Vec::new(),
        to_hosts: Vec::new(),
        to_ports: Vec::new(),
        flags: None,
        tos: None,
        state: None,
        queue: None,
        prio: None,
        max_mss: None,
        unsupported: None,
        icmp_types: Vec::new(),
        state_opts: StateOptsAst::default(),
        ignored: Vec::new(),
        drop: false,
    };
    // Each iteration consumes at least one token or returns.
    while !p.at_end() {
        if p.peek() == Some(&Tok::Bang)
            && matches!(p.peek_at(1), Some(Tok::Word(w)) if w == "tagged" || w == "received-on")
        {
            p.next();
        }
        let w = p.word("a rule option")?;
        if scrub_stmt && matches!(w.v.as_str(), "fragment" | "reassemble" | "set-tos") {
            let what = p.word("a value")?;
            let name = if w.v == "set-tos" {
                w.v.clone()
            } else {
                format!("{} {}", w.v, what.v)
            };
            r.ignored.push(Sp::new(name, w.span.to(what.span)));
            continue;
        }
        match w.v.as_str() {
            "in" => r.direction = Some(Direction::In),
            "out" => r.direction = Some(Direction::Out),
            "quick" => r.quick = true,
            "log" => {
                r.log = true;
                r.ignored.push(w.clone());
                if p.peek() == Some(&Tok::LParen) {
                    p.skip_group()?;
                }
            }
            "drop" if action == Action::Block => r.drop = true,
            "return" | "return-rst" | "return-icmp" | "return-icmp6" if action == Action::Block => {
                r.ignored.push(w.clone());
                if p.peek() == Some(&Tok::LParen) {
                    p.skip_group()?;
                }
            }
            "on" => {
                if p.eat_word("rdomain") {
                    r.ignored
                        .push(Sp::new("on rdomain".into(), w.span.to(p.prev_span())));
                    p.word("an rdomain number")?;
                    continue;
                }
                let mut item = |p: &mut P| -> PResult<Sp<(String, bool)>> {
                    let start = p.here();
                    let neg = p.eat(&Tok::Bang);
                    let n = p.name("interface name")?;
                    Ok(Sp::new((n.v, neg), start.to(n.span)))
                };
                r.ifaces = p.list(&mut item)?;
            }
            "inet" => r.af = Some(AddrFamily::Inet),
            "inet6" => r.af = Some(AddrFamily::Inet6),
            "proto" => {
                let mut item = |p: &mut P| -> PResult<Sp<u8>> {
                    let w = p.word("a protocol")?;
                    units::proto(&w.v)
                        .map(|n| Sp::new(n, w.span))
                        .ok_or_else(|| {
                            Diagnostic::error(format!("unknown protocol `{}`", w.v), w.span).label(
                                "expected a name (tcp udp icmp icmp6 gre esp ah ipv6 …) or 0..255",
                            )
                        })
                };
                r.protos = p.list(&mut item)?;
            }
            "all" => {}
            "from" => (r.from_hosts, r.from_ports) = endpoint(p)?,
            "to" => (r.to_hosts, r.to_ports) = endpoint(p)?,
            "flags" => {
                let f = p.word("flags X/Y or `any`")?;
                let v = if f.v == "any" {
                    None
                } else {
                    let (set, mask) = f.v.split_once('/').unwrap_or((f.v.as_str(), "FSRPAUEW"));
                    match (units::tcp_flags(set), units::tcp_flags(mask)) {
                        (Some(s), Some(m)) if s & !m == 0 => Some((s, m)),
                        _ => {
                            return Err(Diagnostic::error(
                                format!("invalid flags `{}`", f.v),
                                f.span,
                            )
                            .label("expected SET/MASK from F S R P A U E W, e.g. S/SA")
                            .hint("every flag in SET must also be in MASK"))
                        }
                    }
                };
                r.flags = Some(Sp::new(v, f.span));
            }
            "tos" => {
                let t = p.word("a tos value")?;
                r.tos = Some(match t.v.as_str() {
                    "lowdelay" => 0x10,
                    "throughput" => 0x08,
                    "reliability" => 0x04,
                    v => match units::number(v).and_then(|n| u8::try_from(n).ok()) {
                        Some(n) => n,
                        None => {
                            return Err(Diagnostic::error(format!("invalid tos `{v}`"), t.span)
                                .label("expected 0..255 or lowdelay, throughput, reliability"))
                        }
                    },
                });
            }
            "keep" | "modulate" | "synproxy" | "no" => {
                if !p.eat_word("state") {
                    return Err(p.unexpected("`state`"));
                }
                r.state = Some(match w.v.as_str() {
                    "keep" => StatePolicy::Keep,
                    "no" => StatePolicy::No,
                    _ => {
                        r.ignored
                            .push(Sp::new(format!("{} state", w.v), w.span.to(p.prev_span())));
                        StatePolicy::Modulate
                    }
                });
                if p.eat(&Tok::LParen) {
                    state_opts(p, &mut r.state_opts)?;
                }
            }
            "queue" => rule_setting(p, &mut r, &w, w.clone())?,
            // `set queue q` or, as `pfctl -nv` prints them, several in
            // parentheses: `set ( prio 3, queue (bulk, ack) )`.
            "set" if p.eat(&Tok::LParen) => {
                // Each iteration consumes a setting or returns.
                loop {
                    p.eat(&Tok::Comma);
                    if p.eat(&Tok::RParen) {
                        break;
                    }
                    rule_set(p, &mut r, &w)?;
                }
            }
            "set" => rule_set(p, &mut r, &w)?,
            // pfSense writes `tracker N`, `ridentifier N` and its own dummynet
            // hooks `dnpipe (1, 2)` / `dnqueue (3, 4)` (numbered pipes we cannot name).
            // pf 4.6+: `scrub (max-mss 1440 no-df …)`; before, the same
            // options stood bare on `scrub` statements.
            "scrub" => {
                p.expect(Tok::LParen, "`(` and scrub options")?;
                // Each iteration consumes an option or returns.
                while !p.eat(&Tok::RParen) {
                    p.eat(&Tok::Comma);
                    if p.eat(&Tok::RParen) {
                        break;
                    }
                    scrub_opt(p, &mut r)?;
                }
            }
            "max-mss" => max_mss(p, &mut r, &w)?,
            "tracker" | "ridentifier" | "dnpipe" | "dnqueue" | "label" | "tag" | "rtable"
            | "min-ttl" => {
                r.ignored.push(w.clone());
                p.skip_value("a value")?
            }
            // Match criteria sluice cannot evaluate: remember the first.
            "os" | "probability" | "max-pkt-rate" | "prio" | "received-on" => {
                r.unsupported.get_or_insert_with(|| w.clone());
                p.skip_value("a value")?
            }
            "tagged" => {
                r.unsupported.get_or_insert_with(|| w.clone());
                p.skip_value("a tag")?
            }
            "user" | "group" => {
                r.unsupported.get_or_insert_with(|| w.clone());
                skip_id(p)?
            }
            "icmp-type" | "icmp6-type" => {
                let v6 = w.v == "icmp6-type";
                let mut item = |p: &mut P| -> PResult<Sp<(u8, Option<u8>)>> {
                    let t = p.word("an icmp type")?;
                    let typ = units::icmp_type(&t.v, v6).ok_or_else(|| {
                        Diagnostic::error(format!("unknown {} `{}`", w.v, t.v), t.span).label(
                            if v6 {
                                "expected a name (echoreq echorep unreach toobig neighbrsol …) or 0..255"
                            } else {
                                "expected a name (echoreq echorep unreach timex redir …) or 0..255"
                            },
                        )
                    })?;
                    let code = if p.eat_word("code") {
                        Some(p.number("an icmp code (0..255)", 0, 255)?.v as u8)
                    } else {
                        None
                    };
                    Ok(Sp::new((typ, code), t.span.to(p.prev_span())))
                };
                r.icmp_types = p.list(&mut item)?;
            }
            "route-to" | "reply-to" | "dup-to" | "rdr-to" | "nat-to" | "binat-to" | "divert-to" => {
                r.ignored.push(w.clone());
                p.skip_value("an address")?;
                skip_pool_opts(p)?;
            }
            "af-to" => {
                r.ignored.push(w.clone());
                p.word("inet or inet6")?;
                if p.eat_word("from") {
                    p.skip_value("an address")?;
                }
                if p.eat_word("to") {
                    p.skip_value("an address")?;
                }
            }
            "divert-packet" => {
                r.ignored.push(w.clone());
                if p.eat_word("port") {
                    p.word("a port")?;
                }
            }
            "fragment" => {
                r.unsupported.get_or_insert_with(|| w.clone());
            }
            "divert-reply" | "once" | "allow-opts" | "no-df" | "fastroute" | "random-id" => {
                r.ignored.push(w.clone())
            }
            o => {
                return Err(
                    Diagnostic::error(format!("unexpected `{o}` in rule"), w.span)
                        .label("not a rule option sluice knows")
                        .hint("see docs/config.md for the accepted pf rule options")
                        .did_you_mean(o, RULE_WORDS.iter().copied()),
                )
            }
        }
    }
    r.span = first.span.to(p.prev_span());
    Ok(r)
}

/// The words a rule takes (for "did you mean"), commonest first.
const RULE_WORDS: &[&str] = &[
    "in",
    "out",
    "quick",
    "on",
    "inet",
    "inet6",
    "proto",
    "from",
    "to",
    "all",
    "port",
    "flags",
    "keep",
    "state",
    "queue",
    "set",
    "log",
    "tos",
    "modulate",
    "synproxy",
    "no",
    "scrub",
    "max-mss",
    "label",
    "tag",
    "tagged",
    "rtable",
    "min-ttl",
    "os",
    "probability",
    "prio",
    "received-on",
    "user",
    "group",
    "icmp-type",
    "icmp6-type",
    "code",
    "route-to",
    "reply-to",
    "dup-to",
    "rdr-to",
    "nat-to",
    "binat-to",
    "divert-to",
    "af-to",
    "divert-packet",
    "fragment",
    "divert-reply",
    "once",
    "allow-opts",
    "no-df",
    "fastroute",
    "random-id",
    "tracker",
    "ridentifier",
    "dnpipe",
    "dnqueue",
    "max-pkt-rate",
];
