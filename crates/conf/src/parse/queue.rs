//! `altq on …`, `queue …` (ALTQ, OpenBSD 5.5+ and dummynet forms) and `pipe …`.

use super::autorate::autorate;
use super::values::{bandwidth, duration};
use super::{PResult, P};
use crate::ast::{AltqDecl, CurveAst, PipeDecl, QueueDecl, Sp};
use crate::diag::{Diagnostic, Span};
use crate::ir::{AckFilterMode, FqCodelParams, HostIsolation, PipeSched, SchedKind};
use crate::lex::Tok;
use crate::units;
use sluice_time::Duration;

const MS: u64 = 1_000_000;

/// Every word a `queue` statement takes, in any dialect (for "did you mean").
const QUEUE_WORDS: &[&str] = &[
    "on",
    "bandwidth",
    "priority",
    "qlimit",
    "priq",
    "cbq",
    "hfsc",
    "fairq",
    "min",
    "max",
    "burst",
    "parent",
    "flows",
    "quantum",
    "default",
    "pipe",
    "weight",
    "ingress",
    "ack-filter",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
    "ack-pacing",
    "window-clamp",
    "autorate",
];

fn sched_kind(w: &str) -> Option<SchedKind> {
    match w {
        "priq" => Some(SchedKind::Priq),
        "cbq" => Some(SchedKind::Cbq),
        "hfsc" => Some(SchedKind::Hfsc),
        "fairq" => Some(SchedKind::Fairq),
        _ => None,
    }
}

fn unsupported_sched(w: &Sp<String>) -> Option<Diagnostic> {
    if matches!(w.v.as_str(), "codel" | "codelq") {
        return Some(
            Diagnostic::error(format!("`{}` is not a queue option", w.v), w.span)
                .label("in FreeBSD's ALTQ CoDel is a class flag or the interface's scheduler")
                .hint("write it among the scheduler's options, `priq(codel)`, `cbq(codel)` or `hfsc(codel)`, or `altq on IF codel bandwidth …` for one CoDel queue"),
        );
    }
    None
}

pub fn altq(p: &mut P, start: Span) -> PResult<AltqDecl> {
    if !p.eat_word("on") {
        return Err(p.unexpected("`on`"));
    }
    // pfctl's expand_altq: `altq on { em1 em2 } …` is one altq per
    // interface (sema makes the copies).
    let mut all = p
        .list(&mut |p: &mut P| p.name("interface name"))?
        .into_iter();
    let iface = all
        .next()
        .ok_or_else(|| p.unexpected("an interface name"))?;
    let mut a = AltqDecl {
        iface,
        on_more: all.collect(),
        sched: None,
        bandwidth: None,
        qlimit: None,
        tbrsize: None,
        children: Vec::new(),
        span: start,
        codel: None,
        autorate: None,
        root_flags: None,
        upperlimit: None,
    };
    // Each iteration consumes at least one token or returns.
    while !p.at_end() {
        if p.eat(&Tok::Comma) {
            continue;
        }
        let w = p.word("bandwidth, qlimit, tbrsize, queue or a scheduler")?;
        let n = |x: &Option<Sp<u64>>| x.as_ref().map(|c| c.span);
        match w.v.as_str() {
            "bandwidth" => once(a.bandwidth.as_ref().map(|b| b.span), "bandwidth", w.span)?,
            "qlimit" => once(n(&a.qlimit), "qlimit", w.span)?,
            "tbrsize" => once(n(&a.tbrsize), "tbrsize", w.span)?,
            s if sched_kind(s).is_some() || s == "codel" || s == "codelq" => {
                once(a.sched.as_ref().map(|x| x.span), "scheduler", w.span)?
            }
            _ => {}
        }
        match w.v.as_str() {
            "bandwidth" => a.bandwidth = Some(bandwidth(p)?),
            "qlimit" => a.qlimit = Some(p.number("qlimit", 0, u64::MAX)?),
            "tbrsize" => a.tbrsize = Some(p.number("tbrsize", 1, u64::from(u32::MAX))?),
            // pfctl's `qassign` may be empty: pfSense writes `altq on IF
            // codelq bandwidth BW queue` with nothing after `queue`.
            "queue" if p.at_end() => a.children = Vec::new(),
            "queue" => a.children = p.list(&mut |p: &mut P| p.name("queue name"))?,
            // FreeBSD ALTQ (pfSense's CODELQ): one CoDel queue for the
            // whole interface. Its IR is a PRIQ of one default class.
            "codel" | "codelq" => {
                let c = codel_opts(p)?;
                a.codel = Some(Sp::new(c, w.span));
                a.sched = Some(Sp::new(SchedKind::Priq, w.span));
            }
            "autorate" => a.autorate = Some(autorate(p, w.span)?),
            s => match sched_kind(s) {
                Some(k) => {
                    a.sched = Some(Sp::new(k, w.span));
                    if p.peek() == Some(&Tok::LParen) {
                        let (flags, ul) = root_flags(p, k, &w)?;
                        a.root_flags = Some(flags);
                        a.upperlimit = ul;
                    }
                }
                None if HostIsolation::from_word(s).is_some() => {
                    return Err(Diagnostic::error(format!("unexpected `{s}` in altq"), w.span)
                        .label("host isolation shares flow queues, which ALTQ has not")
                        .hint(format!("use OpenBSD 5.5+ queues, `queue NAME on IF … flows 1024 {s}`, or an fq_codel pipe")))
                }
                None if extension_word(s) => {
                    return Err(Diagnostic::error(format!("unexpected `{s}` in altq"), w.span)
                        .label("an option of a queue, not of `altq on`")
                        .hint(format!(
                            "write it among a queue's scheduler options, e.g. `queue NAME … hfsc(default {s})`{}",
                            if AckFilterMode::from_word(s).is_some() {
                                ""
                            } else {
                                "; on a parent queue it covers every queue under it"
                            }
                        )))
                }
                None => {
                    return Err(unsupported_sched(&w).unwrap_or_else(|| {
                        Diagnostic::error(format!("unexpected `{s}` in altq"), w.span)
                            .label("expected priq, cbq, hfsc, fairq, bandwidth, qlimit, tbrsize or queue")
                            .did_you_mean(s, ["priq", "cbq", "hfsc", "fairq", "bandwidth", "qlimit", "tbrsize", "queue", "codel", "autorate"])
                    }))
                }
            },
        }
    }
    a.span = start.to(p.prev_span());
    Ok(a)
}

/// The scheduler's options on the `altq on` line (`cbq(red ecn)`): pfctl
/// reads them with a queue's grammar and gives them to the root class.
/// Its flags are kept; a curve, `buckets` or `hogs` there would set the
/// root class's rate, which sluice takes from `bandwidth`, and sluice's
/// own options belong to a queue: both are refused with a hint.
/// The scheduler's parentheses on the altq line: its flags, and the root
/// class's `upperlimit` (resolved against the bandwidth in sema).
type RootOpts = (Sp<crate::ir::RootFlags>, Option<Sp<CurveAst>>);

fn root_flags(p: &mut P, k: SchedKind, w: &Sp<String>) -> PResult<RootOpts> {
    let start = p.here();
    let mut q = QueueDecl {
        name: w.clone(),
        ..QueueDecl::default()
    };
    sched_opts(p, &mut q, k)?;
    let span = start.to(p.prev_span());
    // The sluice extensions belong to queues.
    let queue_only = [
        ("ingress", q.ingress),
        ("ack-filter", q.ack_filter.as_ref().map(|c| c.span)),
        ("ack-pacing", q.ack_pacing),
        ("window-clamp", q.window_clamp),
    ];
    if let Some((word, Some(at))) = queue_only.into_iter().find(|(_, at)| at.is_some()) {
        return Err(Diagnostic::error(format!("`{word}` on the altq line"), at)
            .label("the interface's rate is its `bandwidth`; this option belongs to a queue")
            .hint(format!("write it on a queue, e.g. `queue NAME … {}(default {word} …)`; on a parent it covers the queues under it", k.name())));
    }
    Ok((
        Sp::new(
            crate::ir::RootFlags {
                default: q.default.is_some(),
                borrow: q.borrow,
                red: q.red,
                ecn: q.ecn,
                rio: q.rio,
                codel: q.codel.is_some(),
                unshared: [
                    q.realtime.is_some(),
                    q.linkshare.is_some(),
                    q.buckets.is_some(),
                    q.hogs.is_some(),
                ],
                upperlimit: None,
            },
            span,
        ),
        q.upperlimit,
    ))
}

/// `BW` or `(m1 d m2)`. pfctl's grammar puts an optional comma between
/// the three (`'(' bandwidth comma NUMBER comma bandwidth ')'`), and
/// pfSense writes `(m1, d, m2)`.
fn curve(p: &mut P) -> PResult<Sp<CurveAst>> {
    let start = p.here();
    if p.eat(&Tok::LParen) {
        let m1 = bandwidth(p)?.v;
        p.eat(&Tok::Comma);
        let d = duration(p, MS)?;
        p.eat(&Tok::Comma);
        let m2 = bandwidth(p)?.v;
        p.expect(Tok::RParen, "`)`")?;
        return Ok(Sp::new(
            CurveAst {
                m1: Some(m1),
                d,
                m2,
            },
            start.to(p.prev_span()),
        ));
    }
    let b = bandwidth(p)?;
    Ok(Sp::new(
        CurveAst {
            m1: None,
            d: Duration::ZERO,
            m2: b.v,
        },
        b.span,
    ))
}

/// OpenBSD 5.5+: `BW [burst BW for N ms]`.
fn curve55(p: &mut P, q: &mut QueueDecl) -> PResult<Sp<CurveAst>> {
    let b = bandwidth(p)?;
    let mut c = CurveAst {
        m1: None,
        d: Duration::ZERO,
        m2: b.v,
    };
    if p.peek_word() == Some("burst") {
        let kw = p.here();
        p.next();
        mark(&mut q.new_style, "burst", kw);
        c.m1 = Some(bandwidth(p)?.v);
        if !p.eat_word("for") {
            return Err(p.unexpected("`for`"));
        }
        c.d = duration(p, MS)?;
    }
    Ok(Sp::new(c, b.span.to(p.prev_span())))
}

/// The TCP control words (`ack-pacing`, `window-clamp`): where one was
/// written, or the duplicate error when `slot` already holds it (`owner`
/// is what it was written on, e.g. "queue `dl`").
fn tcp_word(slot: &mut Option<Span>, w: &Sp<String>, owner: &str) -> PResult<()> {
    if let Some(first) = *slot {
        return Err(
            Diagnostic::error(format!("duplicate `{}` on {owner}", w.v), w.span)
                .label("given again here")
                .note(first, "first given here"),
        );
    }
    *slot = Some(w.span);
    Ok(())
}

/// Options of a queue or pipe that sluice adds to pf (not of `altq on` or
/// of fq_codel's parameters): a hint for the one written in those places.
fn extension_word(w: &str) -> bool {
    matches!(w, "ingress" | "ack-pacing" | "window-clamp")
        || AckFilterMode::from_word(w).is_some()
        || HostIsolation::from_word(w).is_some()
}

/// `dual-srchost`, `dual-dsthost` or `triple-isolate` into `slot`, or the
/// error for a second one (`owner` as for [`tcp_word`]).
fn isolate_word(
    slot: &mut Option<Sp<HostIsolation>>,
    m: HostIsolation,
    w: &Sp<String>,
    owner: &str,
) -> PResult<()> {
    if let Some(first) = slot {
        return Err(Diagnostic::error(
            format!("second host isolation `{}` on {owner}", w.v),
            w.span,
        )
        .label("a flow queue isolates one way")
        .note(first.span, format!("`{}` given here", first.v.name()))
        .hint("dual-srchost: fair between sources (the upload); dual-dsthost: between destinations (the download); triple-isolate: both"));
    }
    *slot = Some(Sp::new(m, w.span));
    Ok(())
}

/// pfctl's "X cannot be respecified" when `first` (where X was given
/// before in this statement) is set.
fn once(first: Option<Span>, what: &str, at: Span) -> PResult<()> {
    match first {
        Some(f) => Err(
            Diagnostic::error(format!("{what} cannot be respecified"), at)
                .label("given a second time in this statement")
                .note(f, "first given here")
                .hint("write it once; pfctl refuses the second as well"),
        ),
        None => Ok(()),
    }
}

fn mark(slot: &mut Option<Sp<&'static str>>, what: &'static str, at: Span) {
    if slot.is_none() {
        *slot = Some(Sp::new(what, at));
    }
}

pub fn queue(p: &mut P, start: Span) -> PResult<QueueDecl> {
    let name = p.name("queue name")?;
    let mut q = QueueDecl {
        name,
        span: start,
        ..QueueDecl::default()
    };
    // Each iteration consumes at least one token or returns.
    while !p.at_end() {
        // pf.conf(5) separates 5.5+ options with commas (`bandwidth 10M,
        // min 5M, max 25M`), as `pfctl -sq` prints them; parse.y's `comma`
        // is optional everywhere, so a comma between any two options is fine.
        if p.eat(&Tok::Comma) {
            continue;
        }
        if p.peek() == Some(&Tok::LBrace) {
            mark(&mut q.old_style, "{ children }", p.here());
            q.children = p.list(&mut |p: &mut P| p.name("queue name"))?;
            continue;
        }
        let w = p.word("a queue option")?;
        let sp = |x: &Option<Sp<CurveAst>>| x.as_ref().map(|c| c.span);
        let n = |x: &Option<Sp<u64>>| x.as_ref().map(|c| c.span);
        match w.v.as_str() {
            "on" | "parent" | "pipe" => once(
                match w.v.as_str() {
                    "on" => q.on.as_ref().map(|x| x.span),
                    "parent" => q.parent.as_ref().map(|x| x.span),
                    _ => q.pipe.as_ref().map(|x| x.span),
                },
                &w.v,
                w.span,
            )?,
            "bandwidth" => once(sp(&q.bandwidth), "bandwidth", w.span)?,
            "min" => once(sp(&q.min), "min", w.span)?,
            "max" => once(sp(&q.max), "max", w.span)?,
            "priority" => once(n(&q.priority), "priority", w.span)?,
            "qlimit" => once(n(&q.qlimit), "qlimit", w.span)?,
            "flows" => once(n(&q.flows), "number of flows", w.span)?,
            "quantum" => once(n(&q.quantum), "quantum", w.span)?,
            "weight" => once(n(&q.weight), "weight", w.span)?,
            "default" => once(q.default, "default", w.span)?,
            s if sched_kind(s).is_some() => {
                once(q.sched.as_ref().map(|x| x.span), "scheduler", w.span)?
            }
            _ => {}
        }
        match w.v.as_str() {
            "on" => {
                // OpenBSD 5.5+: `queue down on { em1 em2 } …` is one tree
                // per interface, as pfctl expands interface lists.
                let mut all = p.list(&mut |p: &mut P| p.name("interface name"))?.into_iter();
                q.on = all.next();
                q.on_more = all.collect();
            }
            "bandwidth" => q.bandwidth = Some(curve55(p, &mut q)?),
            "min" => {
                mark(&mut q.new_style, "min", w.span);
                q.min = Some(curve55(p, &mut q)?);
            }
            "max" => {
                mark(&mut q.new_style, "max", w.span);
                q.max = Some(curve55(p, &mut q)?);
            }
            "priority" => {
                mark(&mut q.old_style, "priority", w.span);
                q.priority = Some(p.number("priority", 0, 255)?);
            }
            "qlimit" => q.qlimit = Some(p.number("qlimit", 0, u64::MAX)?),
            "parent" => {
                mark(&mut q.new_style, "parent", w.span);
                q.parent = Some(p.name("parent queue name")?);
            }
            "flows" => {
                mark(&mut q.new_style, "flows", w.span);
                q.flows = Some(p.number("number of flows", 1, 32_767)?);
            }
            "quantum" => {
                mark(&mut q.new_style, "quantum", w.span);
                q.quantum = Some(p.number("quantum", 1, 65_535)?);
            }
            "default" => {
                mark(&mut q.new_style, "default", w.span);
                q.default = Some(w.span);
            }
            "pipe" => q.pipe = Some(p.name("pipe name")?),
            "weight" => q.weight = Some(p.number("weight", 0, u64::MAX)?),
            "ingress" => q.ingress = Some(w.span),
            "autorate" => q.autorate = Some(autorate(p, w.span)?),
            // Like `ingress`: bare in any dialect, or among ALTQ's
            // scheduler options.
            "ack-pacing" => tcp_word(&mut q.ack_pacing, &w, &format!("queue `{}`", q.name.v))?,
            "window-clamp" => {
                tcp_word(&mut q.window_clamp, &w, &format!("queue `{}`", q.name.v))?
            }
            s if AckFilterMode::from_word(s).is_some() => {
                if let Some(m) = AckFilterMode::from_word(s) {
                    // Bare, it is 5.5+ (or dummynet) syntax; ALTQ writes
                    // it among the scheduler's options.
                    mark(&mut q.new_style, m.name(), w.span);
                    q.ack_filter = Some(Sp::new(m, w.span));
                }
            }
            s if HostIsolation::from_word(s).is_some() => {
                if let Some(m) = HostIsolation::from_word(s) {
                    // Flow queues are 5.5+ (or dummynet): ALTQ has none.
                    mark(&mut q.new_style, m.name(), w.span);
                    isolate_word(&mut q.isolate, m, &w, &format!("queue `{}`", q.name.v))?;
                }
            }
            s => match sched_kind(s) {
                Some(k) => {
                    mark(&mut q.old_style, k.opts_name(), w.span);
                    q.sched = Some(Sp::new(k, w.span));
                    if p.peek() == Some(&Tok::LParen) {
                        sched_opts(p, &mut q, k)?;
                    }
                }
                // pfctl's `qassign_item`: one child queue without braces as
                // the statement's last word (`queue drei bandwidth 30%
                // subseven`). A near miss of an option stays a typo.
                None if p.at_end()
                    && q.children.is_empty()
                    && unsupported_sched(&w).is_none()
                    && crate::suggest::nearest(s, QUEUE_WORDS.iter().copied()).is_none() =>
                {
                    mark(&mut q.old_style, "{ children }", w.span);
                    q.children = vec![w.clone()];
                }
                None => {
                    return Err(unsupported_sched(&w).unwrap_or_else(|| {
                        Diagnostic::error(format!("unexpected `{s}` in queue"), w.span).label("not a queue option").hint(
                            "ALTQ: on bandwidth priority qlimit priq(…) cbq(…) hfsc(…) fairq(…) { children }; \
                             5.5+: on bandwidth min max burst parent qlimit flows quantum default ack-filter dual-srchost dual-dsthost triple-isolate; pipes: pipe weight qlimit default ack-filter; any: ingress ack-pacing window-clamp",
                        ).did_you_mean(s, QUEUE_WORDS.iter().copied())
                    }))
                }
            },
        }
    }
    q.span = start.to(p.prev_span());
    Ok(q)
}

/// The flags and options each scheduler takes in its parentheses, in
/// pfctl's grammar (`cbqflags_item`, `priqflags_item`, `hfscopts_item`,
/// `fairqopts_item`) and then sluice's own.
fn sched_allowed(k: SchedKind) -> &'static [&'static str] {
    const EXT: [&str; 5] = [
        "ingress",
        "ack-filter",
        "ack-filter-aggressive",
        "ack-pacing",
        "window-clamp",
    ];
    match k {
        SchedKind::Priq => &[
            "default", "red", "ecn", "rio", "codel", EXT[0], EXT[1], EXT[2], EXT[3], EXT[4],
        ],
        SchedKind::Cbq => &[
            "default", "borrow", "red", "ecn", "rio", "codel", EXT[0], EXT[1], EXT[2], EXT[3],
            EXT[4],
        ],
        SchedKind::Fairq => &[
            "default",
            "red",
            "ecn",
            "rio",
            "codel",
            "buckets",
            "hogs",
            "linkshare",
            EXT[0],
            EXT[1],
            EXT[2],
            EXT[3],
            EXT[4],
        ],
        _ => &[
            "default",
            "red",
            "ecn",
            "rio",
            "codel",
            "realtime",
            "linkshare",
            "upperlimit",
            EXT[0],
            EXT[1],
            EXT[2],
            EXT[3],
            EXT[4],
        ],
    }
}

/// A service curve of `hfsc(…)`/`fairq(…)` into `slot`; pfctl refuses
/// one given twice ("linkshare already specified").
fn curve_once(p: &mut P, slot: &mut Option<Sp<CurveAst>>, w: &Sp<String>) -> PResult<()> {
    if let Some(first) = slot {
        return Err(
            Diagnostic::error(format!("{} already specified", w.v), w.span)
                .label("a second service curve of the same kind")
                .note(first.span, "first given here")
                .hint(format!(
                    "one `{} X` per queue, X = BW or (m1 d m2); pfctl refuses the second too",
                    w.v
                )),
        );
    }
    *slot = Some(curve(p)?);
    Ok(())
}

fn sched_opts(p: &mut P, q: &mut QueueDecl, k: SchedKind) -> PResult<()> {
    p.expect(Tok::LParen, "`(`")?;
    // Each iteration consumes at least one token or returns.
    loop {
        if p.eat(&Tok::RParen) {
            return Ok(());
        }
        if p.eat(&Tok::Comma) {
            continue;
        }
        let w = p.word("a scheduler option")?;
        // `pfctl -nv` prints the root class it makes as `queue root_IF …
        // cbq( wrr root ) { … }`; sema takes that line for what it is
        // and refuses the flags anywhere else, as pfctl does.
        if k == SchedKind::Cbq && matches!(w.v.as_str(), "wrr" | "root") {
            q.pfctl_root.get_or_insert(w.clone());
            continue;
        }
        if !sched_allowed(k).contains(&w.v.as_str()) {
            // pfctl's words: `unknown cbq flag "foo"`.
            let name = k.name();
            return Err(
                Diagnostic::error(format!("unknown {name} flag \"{}\"", w.v), w.span)
                    .label(format!(
                        "allowed in {name}(…): {}",
                        sched_allowed(k).join(" ")
                    ))
                    .did_you_mean(&w.v, sched_allowed(k).iter().copied()),
            );
        }
        match w.v.as_str() {
            "default" => q.default = Some(w.span),
            "red" => q.red = true,
            // ALTQ's `ecn` is RED that marks: pfctl sets RED|ECN.
            "ecn" => {
                q.red = true;
                q.ecn = true;
            }
            "rio" => q.rio = true,
            "borrow" => q.borrow = true,
            // FreeBSD ALTQ: the class queues in CoDel (pf.conf(5) of FreeBSD).
            "codel" => q.codel = Some(w.span),
            "realtime" => curve_once(p, &mut q.realtime, &w)?,
            "linkshare" => curve_once(p, &mut q.linkshare, &w)?,
            "upperlimit" => curve_once(p, &mut q.upperlimit, &w)?,
            "buckets" => q.buckets = Some(p.number("buckets", 0, u64::from(u32::MAX))?),
            "hogs" => q.hogs = Some(bandwidth(p)?),
            "ingress" => q.ingress = Some(w.span),
            "ack-pacing" => tcp_word(&mut q.ack_pacing, &w, &format!("queue `{}`", q.name.v))?,
            "window-clamp" => tcp_word(&mut q.window_clamp, &w, &format!("queue `{}`", q.name.v))?,
            s => {
                if let Some(m) = AckFilterMode::from_word(s) {
                    q.ack_filter = Some(Sp::new(m, w.span));
                }
            }
        }
    }
}

pub fn pipe(p: &mut P, start: Span) -> PResult<PipeDecl> {
    let name = p.name("pipe name")?;
    let mut d = PipeDecl {
        name,
        iface: None,
        bandwidth: None,
        delay: Duration::ZERO,
        loss_ppm: 0,
        qlimit: None,
        sched: PipeSched::Fifo,
        span: start,
        ingress: None,
        ack_filter: None,
        isolate: None,
        ack_pacing: None,
        window_clamp: None,
        autorate: None,
    };
    // Each iteration consumes at least one token or returns.
    while !p.at_end() {
        let w = p.word("a pipe option")?;
        match w.v.as_str() {
            "on" => d.iface = Some(p.name("interface name")?),
            "bandwidth" => d.bandwidth = Some(bandwidth(p)?),
            "delay" => d.delay = duration(p, MS)?,
            "plr" => {
                let v = p.word("a loss probability")?;
                d.loss_ppm = units::probability_ppm(&v.v).ok_or_else(|| {
                    Diagnostic::error(format!("invalid plr `{}`", v.v), v.span)
                        .label("expected a probability 0..1, e.g. 0.01")
                })?;
            }
            "qlimit" => d.qlimit = Some(p.number("qlimit", 0, u64::MAX)?),
            "sched" => {
                let s = p.word("a pipe scheduler")?;
                d.sched = match s.v.as_str() {
                    "fifo" => PipeSched::Fifo,
                    "drr" => PipeSched::Drr,
                    "wf2q" | "wf2q+" => PipeSched::Wf2q,
                    "fq_codel" => PipeSched::FqCodel(fq_codel(p)?),
                    o => {
                        return Err(Diagnostic::error(
                            format!("unknown pipe scheduler `{o}`"),
                            s.span,
                        )
                        .label("allowed: fifo drr wf2q fq_codel")
                        .did_you_mean(o, ["fifo", "drr", "wf2q", "fq_codel"]))
                    }
                };
            }
            "ingress" => d.ingress = Some(w.span),
            "autorate" => d.autorate = Some(autorate(p, w.span)?),
            o if AckFilterMode::from_word(o).is_some() => {
                d.ack_filter = AckFilterMode::from_word(o).map(|m| Sp::new(m, w.span));
            }
            o if HostIsolation::from_word(o).is_some() => {
                if let Some(m) = HostIsolation::from_word(o) {
                    isolate_word(&mut d.isolate, m, &w, &format!("pipe `{}`", d.name.v))?;
                }
            }
            "ack-pacing" => tcp_word(&mut d.ack_pacing, &w, &format!("pipe `{}`", d.name.v))?,
            "window-clamp" => {
                tcp_word(&mut d.window_clamp, &w, &format!("pipe `{}`", d.name.v))?
            }
            o => {
                return Err(
                    Diagnostic::error(format!("unexpected `{o}` in pipe"), w.span).label(
                        "expected on, bandwidth, delay, plr, qlimit, sched, ingress, ack-filter, dual-srchost, dual-dsthost, triple-isolate, ack-pacing or window-clamp",
                    ).did_you_mean(o, ["on", "bandwidth", "delay", "plr", "qlimit", "sched", "ingress", "ack-filter", "dual-srchost", "dual-dsthost", "triple-isolate", "ack-pacing", "window-clamp", "autorate"]),
                )
            }
        }
    }
    d.span = start.to(p.prev_span());
    Ok(d)
}

/// FreeBSD's `codel [(target MS, interval MS, ecn)]` of `altq on`: bare
/// numbers are milliseconds, as in its parse.y; unset ones keep
/// altq_codel's 5 ms and 100 ms.
fn codel_opts(p: &mut P) -> PResult<crate::ir::CodelParams> {
    let mut c = crate::ir::CodelParams::default();
    if !p.eat(&Tok::LParen) {
        return Ok(c);
    }
    p.options("a codel option", &mut |p, w| {
        let slot = match w.v.as_str() {
            "target" => &mut c.target,
            "interval" => &mut c.interval,
            "ecn" => {
                c.ecn = true;
                return Ok(());
            }
            // pfSense's CODELQ writes its queue limit here, `codelq ( qlimit
            // 50 )`; FreeBSD's pfctl refuses it too (codel_opts: interval,
            // target, ecn), so say where it goes instead.
            "qlimit" => {
                return Err(Diagnostic::error("unknown codel option `qlimit`", w.span)
                    .label("allowed: target interval ecn")
                    .hint("qlimit belongs to `altq on` itself: `altq on em0 codelq bandwidth 20Mb qlimit 50` (pfSense writes it inside the parentheses; FreeBSD's pfctl refuses that as well)"))
            }
            o => {
                return Err(Diagnostic::error(format!("unknown codel option `{o}`"), w.span)
                    .label("allowed: target interval ecn")
                    .hint("e.g. `altq on em0 codel(target 5, interval 100) bandwidth 20Mb` (milliseconds)"))
            }
        };
        let at = p.here();
        let d = duration(p, MS)?;
        if d == Duration::ZERO || d > Duration::from_secs(10) {
            return Err(
                Diagnostic::error(format!("codel {} out of range: {d}", w.v), at)
                    .label("allowed 1us..10s")
                    .hint("FreeBSD's defaults: target 5 ms, interval 100 ms"),
            );
        }
        *slot = d;
        Ok(())
    })?;
    Ok(c)
}

/// `fq_codel [(target 5ms, interval 100ms, quantum 1514, limit 10240, flows 1024, ecn)]`.
/// ECN is off unless asked for, as in dummynet's fq_codel.
fn fq_codel(p: &mut P) -> PResult<FqCodelParams> {
    let mut f = FqCodelParams {
        ecn: false,
        ..FqCodelParams::default()
    };
    if !p.eat(&Tok::LParen) {
        return Ok(f);
    }
    p.options("an fq_codel option", &mut |p, w| {
        match w.v.as_str() {
            "target" => f.target = duration(p, MS)?,
            "interval" => f.interval = duration(p, MS)?,
            "quantum" => f.quantum = p.number("quantum", 64, 65_535)?.v as u32,
            "limit" => f.limit = p.number("limit", 1, 1_000_000)?.v as u32,
            "flows" => f.flows = p.number("flows", 1, 65_536)?.v as u32,
            "ecn" => f.ecn = true,
            "noecn" => f.ecn = false,
            o if extension_word(o) => {
                return Err(
                    Diagnostic::error(format!("unknown fq_codel option `{o}`"), w.span)
                        .label("allowed: target interval quantum limit flows ecn noecn")
                        .hint(format!(
                            "`{o}` is an option of the pipe: write it after the parentheses, `sched fq_codel (…) {o}`"
                        )),
                )
            }
            o => {
                return Err(
                    Diagnostic::error(format!("unknown fq_codel option `{o}`"), w.span)
                        .label("allowed: target interval quantum limit flows ecn noecn"),
                )
            }
        }
        Ok(())
    })?;
    Ok(f)
}
