//! Semantic checks: AST → validated IR, plus warnings.
//!
//! # Principles
//! - Everything the engine needs is resolved here: percentages become rates,
//!   defaults are filled in (qlimit 50, priority 1, HFSC linkshare = bandwidth),
//!   names are checked, lists are expanded into one rule per combination (pf's
//!   cross product, pf.conf(5) "LISTS").
//! - Each error points at the offending token; duplicates point at both.
//! - Warnings never change the IR: the config the user wrote is the config run.

mod autorate;
mod hosts;
mod ignored;
mod queues;
mod tables;

use crate::ast::{AltqDecl, RuleAst, Sp, Stmt, TimeoutName};
use crate::diag::{line_col, Diagnostic, Span};
use crate::ir::{self, Config, Endpoint, IfaceQueueing, Rule, StatePolicy};

/// One rule may expand to at most this many IR rules (pf has no cap, but a
/// 5-way cross product of big lists is a typo in practice).
const MAX_EXPANSION: usize = 10_000;

pub struct Ctx<'t> {
    pub text: &'t str,
    /// `--strict`: a rule naming a missing queue is an error, not a warning.
    pub strict: bool,
    pub diags: Vec<Diagnostic>,
    /// Every option parsed and not acted on, in file order (one warning
    /// per name, `ignored::warn`).
    pub ignored: Vec<Sp<String>>,
    /// Where the last `set block-policy` said `return`, if it did.
    pub block_policy_return: Option<Span>,
    /// Byte offset of every `\n`, so line numbers cost a binary search
    /// instead of a scan from the top for each of thousands of rules.
    newlines: Vec<usize>,
}

impl Ctx<'_> {
    pub fn line(&self, span: Span) -> u32 {
        let before = self.newlines.partition_point(|&nl| nl < span.start);
        debug_assert_eq!(
            before + 1,
            line_col(self.text, span.start).0,
            "line table out of step"
        );
        u32::try_from(before + 1).unwrap_or(u32::MAX)
    }
    pub fn err(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }
}

/// `set prio` orders the eight bands of an interface without queues
/// (OpenBSD's interface priority queue); where queues are defined they
/// decide, as in OpenBSD. A warning for a rule whose `on IF` has queues.
fn prio_on_queues(cx: &mut Ctx, cfg: &Config, r: &RuleAst) {
    if r.prio.is_none() {
        return;
    }
    for i in r.ifaces.iter().filter(|i| !i.v.1) {
        if cfg.interfaces.iter().any(|q| q.ifname == i.v.0) {
            cx.err(
                Diagnostic::warning(format!("`set prio` has no effect on `{}`", i.v.0), i.span)
                    .label("this interface has queues: they decide the order")
                    .hint("put the packets in a queue instead (`queue (bulk, ack)` sends empty ACKs and lowdelay packets to the second)"),
            );
        }
    }
}

/// The longest one frame should take on the wire before `check` suggests
/// `max-mss auto` (the budget `auto` itself keeps to).
pub(crate) const FRAME_WARN_NS: u128 = 20_000_000;

/// A warning for each shaped interface where one full-sized frame takes
/// longer than [`FRAME_WARN_NS`], when no rule clamps the MSS: nothing can
/// go out while such a frame is on the wire, whatever the scheduler.
fn slow_frames(
    cx: &mut Ctx,
    cfg: &Config,
    altqs: &[crate::ast::AltqDecl],
    qdecls: &[crate::ast::QueueDecl],
    pipes: &[crate::ast::PipeDecl],
) {
    if cfg.rules.iter().any(|r| r.max_mss.is_some()) {
        return;
    }
    for q in &cfg.interfaces {
        let rate = q.shaped_rate();
        if rate.0 == 0 {
            continue;
        }
        let bytes = cfg.options.overhead_of(&q.ifname).cost(1514);
        let ns = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(rate.0);
        if ns <= FRAME_WARN_NS {
            continue;
        }
        let named = |s: &Option<crate::ast::Sp<String>>| {
            s.as_ref().filter(|i| i.v == q.ifname).map(|i| i.span)
        };
        let span = altqs
            .iter()
            .find(|a| a.iface.v == q.ifname)
            .map(|a| a.iface.span)
            .or_else(|| qdecls.iter().find_map(|d| named(&d.on)))
            .or_else(|| pipes.iter().find_map(|p| named(&p.iface)));
        let Some(span) = span else { continue };
        let ms = ns / 1_000_000;
        cx.err(
            Diagnostic::warning(
                format!("one full-sized frame takes {ms} ms on `{}`", q.ifname),
                span,
            )
            .label(format!("1514 bytes ({bytes} on the wire) at {rate}"))
            .hint(format!(
                "whatever is queued behind a frame waits for it; `match on {} scrub (max-mss auto)` keeps frames within ~20 ms (docs/config.md)",
                q.ifname
            )),
        );
    }
}

pub fn build(
    text: &str,
    stmts: Vec<Stmt>,
    opts: &crate::CheckOptions,
) -> (Config, Vec<Diagnostic>) {
    let mut cx = Ctx {
        strict: opts.strict,
        newlines: text
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i)
            .collect(),
        text,
        diags: Vec::new(),
        ignored: Vec::new(),
        block_policy_return: None,
    };
    let mut cfg = Config::default();
    let mut altqs = Vec::new();
    let mut qdecls = Vec::new();
    let mut pipes = Vec::new();
    let mut rules = Vec::new();
    let mut adaptive_span = None;
    for s in stmts {
        match s {
            Stmt::Altq(mut a) => {
                // `altq on { em1 em2 } …`: one altq per interface, the
                // queues it lists instantiated on each (pfctl's expand_altq).
                let more = std::mem::take(&mut a.on_more);
                let copies: Vec<AltqDecl> = more
                    .into_iter()
                    .map(|iface| AltqDecl { iface, ..a.clone() })
                    .collect();
                altqs.push(a);
                altqs.extend(copies);
            }
            Stmt::Queue(q) => qdecls.push(*q),
            Stmt::Pipe(p) => pipes.push(p),
            Stmt::Rule(r) => rules.push(*r),
            Stmt::Overhead(i, o) => {
                cfg.options.overhead.retain(|(n, _)| *n != i.v);
                cfg.options.overhead.push((i.v, o));
            }
            Stmt::Limit { states, ignored } => {
                cx.ignored.extend(ignored);
                match states.map(|n| (u32::try_from(n.v), n)) {
                    Some((Ok(v), _)) if v > 0 => cfg.options.state_limit = v,
                    Some((_, n)) => cx.err(
                        Diagnostic::error(format!("state limit out of range: {}", n.v), n.span)
                            .label("allowed 1..4294967295"),
                    ),
                    None => {}
                }
            }
            Stmt::Timeouts(items) => {
                for (name, n) in items {
                    if matches!(
                        name.v,
                        TimeoutName::AdaptiveStart | TimeoutName::AdaptiveEnd
                    ) {
                        adaptive_span = Some(name.span);
                    }
                    set_timeout(&mut cx, &mut cfg.options, name, n);
                }
            }
            Stmt::Table(mut t) => {
                cx.ignored.extend(t.ignored);
                let from_files = tables::read_files(&mut cx, &t.files, opts.files);
                t.entries.extend(from_files);
                if let Some(prev) = cfg.tables.iter_mut().find(|x| x.name == t.name.v) {
                    prev.entries.extend(t.entries);
                } else {
                    cfg.tables.push(ir::Table {
                        name: t.name.v,
                        entries: t.entries,
                    });
                }
            }
            Stmt::Ignored(mut what) => {
                // pf keeps the last `set block-policy`.
                if what.first().is_some_and(|w| w.v == "set block-policy") {
                    cx.block_policy_return = what
                        .iter()
                        .find(|w| w.v == crate::ast::BLOCK_POLICY_RETURN)
                        .map(|w| w.span);
                    what.retain(|w| w.v != crate::ast::BLOCK_POLICY_RETURN);
                }
                cx.ignored.extend(what);
            }
        }
    }
    let (start, end) = cfg.options.adaptive();
    if end != 0 && start >= end {
        let span = adaptive_span.unwrap_or_default();
        cx.err(
            Diagnostic::error(
                format!("adaptive.start ({start}) must be below adaptive.end ({end})"),
                span,
            )
            .label("adaptive timeouts scale between the two")
            .hint("set both to 0 to turn adaptive scaling off; by default they are 60 % and 120 % of `set limit states`"),
        );
    }
    cfg.interfaces = queues::build(&mut cx, &altqs, &qdecls, &pipes);
    let mut out_rules = Vec::new();
    for r in &rules {
        prio_on_queues(&mut cx, &cfg, r);
        cx.ignored.extend(r.ignored.iter().cloned());
        cx.ignored.extend(r.state_opts.ignored.iter().cloned());
        expand_rule(&mut cx, &cfg, r, &mut out_rules);
    }
    cfg.rules = out_rules;
    autorate::build(&mut cx, &mut cfg, &altqs, &qdecls, &pipes);
    slow_frames(&mut cx, &cfg, &altqs, &qdecls, &pipes);
    hosts::behind_nat(&mut cx, &cfg, &qdecls, &pipes, &rules);
    ignored::warn(&mut cx);
    (cfg, cx.diags)
}

/// One `set timeout NAME N`: a later value wins, as in pf.
fn set_timeout(cx: &mut Ctx, o: &mut ir::Options, name: Sp<TimeoutName>, n: Sp<u64>) {
    let secs = u32::try_from(n.v).unwrap_or(u32::MAX);
    match name.v {
        TimeoutName::State(k) => *o.timeouts.get_mut(k) = sluice_time::Duration::from_secs(n.v),
        TimeoutName::AdaptiveStart => o.adaptive_start = Some(secs),
        TimeoutName::AdaptiveEnd => o.adaptive_end = Some(secs),
        TimeoutName::Interval => {
            o.interval = Some(secs);
            cx.ignored
                .push(Sp::new("set timeout interval".into(), name.span));
        }
        TimeoutName::Other(w) => cx
            .ignored
            .push(Sp::new(format!("set timeout {w}"), name.span)),
    }
}

/// The state options of `r` that sluice acts on; the others were recorded
/// as ignored by the parser, or are here.
fn state_opts(cx: &mut Ctx, r: &RuleAst, state: StatePolicy) -> ir::StateOpts {
    let o = &r.state_opts;
    // The parser bounds every count to 1..=u32::MAX.
    let count = |m: &Option<Sp<u64>>| m.as_ref().map(|m| u32::try_from(m.v).unwrap_or(u32::MAX));
    let mut out = ir::StateOpts {
        max: count(&o.max),
        max_src_states: count(&o.max_src_states),
        max_src_nodes: count(&o.max_src_nodes),
        max_src_conn: count(&o.max_src_conn),
        max_src_conn_rate: o.max_src_conn_rate.as_ref().map(|r| r.v),
        overload: o.overload.as_ref().map(|r| r.v.clone()),
        timeouts: Vec::new(),
        sloppy: o.sloppy,
    };
    for (name, n) in &o.timeouts {
        match name.v {
            TimeoutName::State(k) => {
                out.timeouts.retain(|(x, _)| *x != k);
                out.timeouts
                    .push((k, sluice_time::Duration::from_secs(n.v)));
            }
            _ => {
                let w = match name.v {
                    TimeoutName::Interval => "interval",
                    TimeoutName::AdaptiveStart => "adaptive.start",
                    TimeoutName::AdaptiveEnd => "adaptive.end",
                    TimeoutName::Other(w) => w,
                    TimeoutName::State(_) => "",
                };
                cx.ignored
                    .push(Sp::new(format!("state option {w}"), name.span));
            }
        }
    }
    if let Some(ov) = &o.overload {
        if o.max_src_conn.is_none() && o.max_src_conn_rate.is_none() {
            cx.ignored.push(Sp::new(
                "overload without a connection limit".into(),
                ov.span,
            ));
        }
    }
    if r.action != ir::Action::Pass || state == StatePolicy::No {
        if let Some(m) = o
            .max
            .as_ref()
            .or(o.max_src_states.as_ref())
            .or(o.max_src_nodes.as_ref())
            .or(o.max_src_conn.as_ref())
        {
            cx.ignored
                .push(Sp::new("state options without state".into(), m.span));
        } else if let Some(r) = &o.max_src_conn_rate {
            cx.ignored
                .push(Sp::new("state options without state".into(), r.span));
        } else if let Some(r) = &o.overload {
            cx.ignored
                .push(Sp::new("state options without state".into(), r.span));
        } else if let Some((name, _)) = o.timeouts.first() {
            cx.ignored
                .push(Sp::new("state options without state".into(), name.span));
        }
        return ir::StateOpts::default();
    }
    out
}

fn all_queue_names(cfg: &Config) -> Vec<&str> {
    let mut v: Vec<&str> = cfg
        .interfaces
        .iter()
        .flat_map(|i| i.queues.iter().map(|q| q.name.as_str()))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The one interface a rule is pinned to (`on IF`, not negated, not a list).
fn rule_iface<'c>(cfg: &'c Config, r: &RuleAst) -> Option<&'c IfaceQueueing> {
    match r.ifaces.as_slice() {
        [one] if !one.v.1 => cfg.interfaces.iter().find(|i| i.ifname == one.v.0),
        _ => None,
    }
}

/// A rule naming a queue that has children: ALTQ's CBQ queues the packets
/// there (every CBQ class holds a queue, sharing its allocation with its
/// children), as does FAIRQ (flat: every queue is a class); HFSC, ALTQ's
/// and OpenBSD's, queues only in leaves and sends them to the default
/// queue, which a warning names.
fn interior_queue_warnings(cx: &mut Ctx, cfg: &Config, name: &crate::ast::Sp<String>) {
    for i in &cfg.interfaces {
        let Some(q) = i.queues.iter().find(|q| q.name == name.v) else {
            continue;
        };
        if q.children.is_empty() || matches!(i.sched, ir::SchedKind::Cbq | ir::SchedKind::Fairq) {
            continue;
        }
        let default = i
            .queues
            .get(i.default_queue)
            .map_or("?", |d| d.name.as_str());
        cx.err(
            Diagnostic::warning(
                format!("queue `{}` on `{}` has child queues", name.v, i.ifname),
                name.span,
            )
            .label(format!(
                "HFSC queues packets only in leaves: these go to the default queue `{default}`, as in pf"
            ))
            .hint("name one of its children instead"),
        );
    }
}

fn check_queue_name(cx: &mut Ctx, cfg: &Config, r: &RuleAst, name: &crate::ast::Sp<String>) {
    let names = all_queue_names(cfg);
    let here = rule_iface(cfg, r);
    if let (Some(i), true) = (here, names.contains(&name.v.as_str())) {
        // pf resolves the queue on the egress interface: an `out` rule on an
        // interface with its own queues and without this one is a mistake.
        if r.direction == Some(ir::Direction::Out) && !i.queues.iter().any(|q| q.name == name.v) {
            let local: Vec<&str> = i.queues.iter().map(|q| q.name.as_str()).collect();
            cx.err(
                Diagnostic::warning(
                    format!("queue `{}` is not defined on `{}`", name.v, i.ifname),
                    name.span,
                )
                .label(format!(
                    "packets leaving {} go to its default queue{} instead",
                    i.ifname,
                    i.queues
                        .get(i.default_queue)
                        .map_or(String::new(), |d| format!(" `{}`", d.name))
                ))
                .hint(format!("queues on {}: {}", i.ifname, local.join(", "))),
            );
        }
    }
    if names.contains(&name.v.as_str()) {
        interior_queue_warnings(cx, cfg, name);
        return;
    }
    unknown_queue(cx, cfg, r, name, here, &names);
}

/// A rule naming a queue no interface has. pfctl loads such a ruleset and
/// pf sends the packets to the default queue of the interface they leave
/// through (the engine does the same: an unknown name resolves to the
/// default class), so it is a warning naming those default queues; under
/// `--strict` an error.
fn unknown_queue(
    cx: &mut Ctx,
    cfg: &Config,
    r: &RuleAst,
    name: &Sp<String>,
    here: Option<&IfaceQueueing>,
    names: &[&str],
) {
    let default_of = |i: &IfaceQueueing| {
        i.queues
            .get(i.default_queue)
            .map_or(String::new(), |q| format!("`{}` on {}", q.name, i.ifname))
    };
    // An `out` rule pinned to an interface says where the packets leave;
    // otherwise any shaped interface may be the way out.
    let pinned = here.filter(|_| r.direction == Some(ir::Direction::Out));
    let label = match pinned {
        Some(i) => format!("packets go to the default queue {} instead", default_of(i)),
        None if cfg.interfaces.is_empty() => {
            "no interface has queues: this assignment does nothing".to_string()
        }
        None => {
            let d: Vec<String> = cfg.interfaces.iter().map(default_of).collect();
            format!(
                "packets go to the default queue of the interface they leave through: {}",
                d.join(", ")
            )
        }
    };
    let hint = if let Some(i) = here {
        let local: Vec<&str> = i.queues.iter().map(|q| q.name.as_str()).collect();
        format!("queues on {}: {}", i.ifname, local.join(", "))
    } else if names.is_empty() {
        "no queues are defined; add `altq on IF … queue { … }`, `queue NAME on IF …` or a pipe"
            .to_string()
    } else {
        format!("queues defined: {}", names.join(", "))
    };
    let d = if cx.strict {
        Diagnostic::error(format!("unknown queue `{}`", name.v), name.span)
            .hint(format!("{hint} (an error under --strict; pfctl loads it)"))
    } else {
        Diagnostic::warning(format!("unknown queue `{}`", name.v), name.span).hint(format!(
            "{hint}; pfctl loads this too (`--strict` makes it an error)"
        ))
    };
    cx.err(d.label(label).did_you_mean(&name.v, names.iter().copied()));
}

/// Is queue `name` served ahead of its interface's default queue somewhere?
fn is_high_priority(cfg: &Config, name: &str) -> bool {
    cfg.interfaces.iter().any(|i| {
        let Some(q) = i.queues.iter().find(|q| q.name == name) else {
            return false;
        };
        let Some(d) = i.queues.get(i.default_queue) else {
            return false;
        };
        q.priority > d.priority
            || q.weight.unwrap_or(0) > d.weight.unwrap_or(0)
            || (q.realtime.is_some() && d.realtime.is_none())
    })
}

/// pf's `flags S/SA` default (pf.conf(5) "flags"; pfctl parse.y): a `pass`
/// rule that keeps state and says nothing about flags creates states only
/// from a TCP segment with SYN set and ACK clear, so a segment of a
/// connection the table does not know (a spoofed ACK, a flood of them)
/// falls through instead of filling the table. `flags any` opts out. The
/// default is written into the IR (and printed) only where TCP can match.
fn rule_flags(r: &RuleAst, state: StatePolicy, proto: Option<u8>) -> Option<(u8, u8)> {
    match &r.flags {
        Some(f) => f.v,
        None if r.action == ir::Action::Pass
            && state != StatePolicy::No
            && matches!(proto, None | Some(ir::PROTO_TCP)) =>
        {
            Some(ir::FLAGS_S_SA)
        }
        None => None,
    }
}

fn expand_rule(cx: &mut Ctx, cfg: &Config, r: &RuleAst, out: &mut Vec<Rule>) {
    // A criterion sluice cannot evaluate widens the rule if dropped. A shaper
    // must never block what pf would pass, so a widened `block` is left out;
    // a widened `pass`/`match` only passes or queues more, and is kept.
    if let Some(u) = &r.unsupported {
        if r.action == ir::Action::Block {
            cx.err(
                Diagnostic::warning(
                    format!("block rule left out: sluice cannot evaluate `{}`", u.v),
                    u.span,
                )
                .label("a match criterion of pf's filter")
                .hint(
                    "without it the rule would block more than pf does; sluice shapes, pf filters",
                ),
            );
            return;
        }
        cx.err(
            Diagnostic::warning(
                format!(
                    "sluice cannot evaluate `{}`: this rule matches without it",
                    u.v
                ),
                u.span,
            )
            .label("ignored match criterion")
            .hint("the rule may match (and queue) more packets than it does in pf"),
        );
    }
    if let Some((a, b)) = &r.queue {
        check_queue_name(cx, cfg, r, a);
        if let Some(b) = b {
            check_queue_name(cx, cfg, r, b);
        }
        // The classic trap: an "ACK queue" that matches every established segment.
        if let (Some(f), None) = (&r.flags, b) {
            if let Some((set, _)) = f.v {
                if set & 0x10 != 0 && set & 0x02 == 0 && is_high_priority(cfg, &a.v) {
                    cx.err(
                        Diagnostic::warning(format!("this rule sends every established TCP segment to high-priority queue `{}`", a.v), f.span)
                            .label("matches data segments too, not just ACKs")
                            .hint(format!(
                                "every TCP segment after the handshake has ACK set; use queue (bulk, {}) to prioritise only empty ACKs",
                                a.v
                            )),
                    );
                }
            }
        }
    }
    let ifaces: Vec<Option<(String, bool)>> = if r.ifaces.is_empty() {
        vec![None]
    } else {
        r.ifaces.iter().map(|i| Some(i.v.clone())).collect()
    };
    let protos: Vec<Option<u8>> = if r.protos.is_empty() {
        vec![None]
    } else {
        r.protos.iter().map(|p| Some(p.v)).collect()
    };
    let hosts = |h: &[crate::ast::Sp<crate::ast::HostAst>]| -> Vec<(ir::AddrMatch, bool)> {
        if h.is_empty() {
            vec![(ir::AddrMatch::Any, false)]
        } else {
            h.iter().map(|h| (h.v.addr.clone(), h.v.negated)).collect()
        }
    };
    let ports = |p: &[crate::ast::Sp<ir::PortOp>]| -> Vec<Option<ir::PortOp>> {
        if p.is_empty() {
            vec![None]
        } else {
            p.iter().map(|p| Some(p.v)).collect()
        }
    };
    if let Some(t) = r.icmp_types.first() {
        if r.protos.is_empty() || r.protos.iter().any(|p| p.v != 1 && p.v != 58) {
            cx.err(
                Diagnostic::error("icmp-type needs `proto icmp` or `proto icmp6`", t.span)
                    .label("ICMP types exist only in ICMP packets")
                    .hint("add `proto icmp` (or `proto icmp6` with icmp6-type)"),
            );
            return;
        }
    }
    let icmps: Vec<Option<(u8, Option<u8>)>> = if r.icmp_types.is_empty() {
        vec![None]
    } else {
        r.icmp_types.iter().map(|t| Some(t.v)).collect()
    };
    let (fh, fp, th, tp) = (
        hosts(&r.from_hosts),
        ports(&r.from_ports),
        hosts(&r.to_hosts),
        ports(&r.to_ports),
    );
    let total = [
        ifaces.len(),
        protos.len(),
        fh.len(),
        fp.len(),
        th.len(),
        tp.len(),
        icmps.len(),
    ]
    .iter()
    .try_fold(1usize, |a, &n| a.checked_mul(n))
    .unwrap_or(usize::MAX);
    if total > MAX_EXPANSION {
        cx.err(
            Diagnostic::error(format!("rule expands to {total} rules"), r.span)
                .label(format!("at most {MAX_EXPANSION}"))
                .hint("use a table <name> { … } for long address lists"),
        );
        return;
    }
    if let (Some((q, _)), ir::Action::Block) = (&r.queue, r.action) {
        // pf puts the RST or ICMP unreachable of `block return` in the
        // rule's queue; sluice answers nothing, so there is nothing to queue.
        // A plain `block` returns too under `set block-policy return`.
        let ret = r
            .ignored
            .iter()
            .find(|w| w.v.starts_with("return"))
            .map(|w| (w.span, w.v.as_str()));
        let ret = ret.or(match (r.drop, cx.block_policy_return) {
            (false, Some(at)) => Some((at, "set block-policy return")),
            _ => None,
        });
        cx.err(match ret {
            Some((at, what)) => Diagnostic::warning(
                format!("sluice sends no replies, so queue `{}` is unused", q.v),
                q.span,
            )
            .label("in pf this queue carries the replies of `block return`")
            .note(at, format!("`{what}` asks pf to answer with a TCP RST or an ICMP unreachable"))
            .hint("sluice drops blocked packets without a reply (it forwards, it does not answer); write the queue on a pass rule if it should carry traffic"),
            None => Diagnostic::warning("a queue on a block rule has no effect", r.span)
                .hint("blocked packets are never queued"),
        });
    }
    let line = cx.line(r.span);
    let state = match r.action {
        ir::Action::Pass => r.state.unwrap_or(StatePolicy::Keep),
        _ => StatePolicy::No,
    };
    let sopts = state_opts(cx, r, state);
    let fam = |a: &ir::AddrMatch| match a {
        ir::AddrMatch::Net(n) => Some(if n.addr.is_ipv4() {
            ir::AddrFamily::Inet
        } else {
            ir::AddrFamily::Inet6
        }),
        _ => None,
    };
    // Bounded by MAX_EXPANSION, checked above.
    for i in &ifaces {
        for p in &protos {
            for (fa, fneg) in &fh {
                for fport in &fp {
                    for (ta, tneg) in &th {
                        for (tport, icmp) in
                            tp.iter().flat_map(|t| icmps.iter().map(move |i| (t, i)))
                        {
                            // pf drops combinations whose address families cannot match.
                            let (ff, tf) = (fam(fa), fam(ta));
                            if let (Some(x), Some(y)) = (ff, tf) {
                                if x != y {
                                    continue;
                                }
                            }
                            if let Some(af) = r.af {
                                if ff.is_some_and(|f| f != af) || tf.is_some_and(|f| f != af) {
                                    continue;
                                }
                            }
                            out.push(Rule {
                                action: r.action,
                                direction: r.direction,
                                quick: r.quick,
                                log: r.log,
                                iface: i.clone(),
                                af: r.af.or(ff).or(tf),
                                proto: *p,
                                from: Endpoint {
                                    addr: fa.clone(),
                                    negated: *fneg,
                                    port: *fport,
                                },
                                to: Endpoint {
                                    addr: ta.clone(),
                                    negated: *tneg,
                                    port: *tport,
                                },
                                flags: rule_flags(r, state, *p),
                                tos: r.tos,
                                icmp_type: *icmp,
                                state,
                                queue: r
                                    .queue
                                    .as_ref()
                                    .map(|(a, b)| (a.v.clone(), b.as_ref().map(|b| b.v.clone()))),
                                prio: r.prio,
                                max_mss: r.max_mss.as_ref().map(|m| m.v),
                                state_opts: sopts.clone(),
                                line,
                            });
                        }
                    }
                }
            }
        }
    }
}
