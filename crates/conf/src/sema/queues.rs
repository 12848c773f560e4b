//! Queue trees: ALTQ (`altq on` + `queue`), OpenBSD 5.5+ (`queue … on IF` /
//! `parent`), and dummynet (`pipe` + `queue … pipe P`) into
//! [`IfaceQueueing`]s.
//!
//! # Principles
//! - Which era a `queue` line belongs to is decided from its keywords and the
//!   file (an `altq on IF` makes `queue … on IF` ALTQ); a keyword of the other
//!   era is an error with a hint, never silently reinterpreted.
//! - Trees are built top-down from their roots with a depth cap
//!   ([`MAX_DEPTH`]); a queue nobody reaches is an error, not dropped.
//! - Defaults: qlimit 50 (pf), priority 1 (pfctl's DEFAULT_PRIORITY), HFSC
//!   linkshare = bandwidth (pfctl does the same), dummynet weight 1.

use super::Ctx;
use crate::ast::{AltqDecl, CurveAst, PipeDecl, QueueDecl, Sp};
use crate::diag::{Diagnostic, Span};
use crate::ir::{IfaceQueueing, Pipe, PipeSched, Queue, SchedKind, ServiceCurve};
use crate::units::Bw;
use sluice_time::Rate;

const DEFAULT_QLIMIT: u64 = 50;
const DEFAULT_PRIORITY: u8 = 1;
/// Queue trees deeper than this are a cycle or a mistake.
const MAX_DEPTH: usize = 32;
/// Warn when a full queue takes longer than this to drain.
const DRAIN_WARN_NS: u128 = 200_000_000;
const MTU_BITS: u128 = 1500 * 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Altq,
    Root55,
    Child55,
    Dummynet,
}

fn resolve(bw: Bw, parent: Rate) -> Rate {
    match bw {
        Bw::Abs(r) => r,
        Bw::Pct(bp) => Rate((u128::from(parent.0) * u128::from(bp) / 10_000) as u64),
    }
}

fn curve(c: &CurveAst, parent: Rate) -> ServiceCurve {
    match c.m1 {
        None => ServiceCurve::linear(resolve(c.m2, parent)),
        Some(m1) => ServiceCurve {
            m1: resolve(m1, parent),
            d: c.d,
            m2: resolve(c.m2, parent),
        },
    }
}

fn new_queue(name: &str, line: u32) -> Queue {
    Queue {
        name: name.to_string(),
        parent: None,
        bandwidth: None,
        priority: DEFAULT_PRIORITY,
        qlimit: DEFAULT_QLIMIT as u32,
        qlimit_bytes: None,
        default: false,
        red: false,
        rio: false,
        ecn: false,
        borrow: false,
        realtime: None,
        linkshare: None,
        upperlimit: None,
        flows: None,
        quantum: None,
        weight: None,
        children: Vec::new(),
        line,
    }
}

/// Per built queue: where to point warnings and default-queue errors.
struct QMeta {
    /// False when the qlimit was out of range (already an error: no warning on top).
    qlimit_ok: bool,
    name: Span,
    qlimit: Option<Span>,
    default: Option<Span>,
    priority: Option<Span>,
}

struct Tree {
    queues: Vec<Queue>,
    meta: Vec<QMeta>,
}

struct B<'a, 'c, 't> {
    cx: &'c mut Ctx<'t>,
    decls: &'a [QueueDecl],
    kinds: Vec<Kind>,
    used: Vec<bool>,
    dup: Vec<bool>,
}

pub fn build(
    cx: &mut Ctx,
    altqs: &[AltqDecl],
    decls: &[QueueDecl],
    pipes: &[PipeDecl],
) -> Vec<IfaceQueueing> {
    let altq_on = |i: &str| altqs.iter().any(|a| a.iface.v == i);
    let kinds = decls
        .iter()
        .map(|d| {
            if d.pipe.is_some() {
                Kind::Dummynet
            } else if d.parent.is_some() {
                Kind::Child55
            } else if d.on.as_ref().is_some_and(|o| !altq_on(&o.v)) {
                Kind::Root55
            } else {
                Kind::Altq
            }
        })
        .collect();
    let mut b = B {
        cx,
        decls,
        kinds,
        used: vec![false; decls.len()],
        dup: vec![false; decls.len()],
    };
    b.duplicates();
    let mut out: Vec<(IfaceQueueing, Span)> = Vec::new();
    for (n, a) in altqs.iter().enumerate() {
        if let Some(prev) = altqs[..n].iter().find(|p| p.iface.v == a.iface.v) {
            b.cx.err(
                Diagnostic::error(format!("second `altq on {}`", a.iface.v), a.iface.span)
                    .note(prev.iface.span, "first defined here"),
            );
            continue;
        }
        if let Some(iq) = b.altq(a) {
            out.push((iq, a.iface.span));
        }
    }
    for (i, d) in decls.iter().enumerate() {
        if b.kinds[i] == Kind::Root55 && !b.dup[i] {
            if let Some(iq) = b.root55(i) {
                out.push((iq, d.name.span));
            }
        }
    }
    for (n, p) in pipes.iter().enumerate() {
        if let Some(prev) = pipes[..n].iter().find(|x| x.name.v == p.name.v) {
            b.cx.err(
                Diagnostic::error(format!("duplicate pipe `{}`", p.name.v), p.name.span)
                    .note(prev.name.span, "first defined here"),
            );
            continue;
        }
        if let Some(iq) = b.pipe(p) {
            out.push((iq, p.name.span));
        }
    }
    b.unused(altqs, pipes);
    let mut result: Vec<IfaceQueueing> = Vec::new();
    for (n, (iq, span)) in out.iter().enumerate() {
        if let Some((_, prev)) = out[..n].iter().find(|(x, _)| x.ifname == iq.ifname) {
            b.cx.err(
                Diagnostic::error(
                    format!("interface `{}` already has a queue tree", iq.ifname),
                    *span,
                )
                .label("second definition")
                .note(*prev, "first defined here")
                .hint(
                    "one interface runs one scheduler: one altq, one 5.5+ root queue, or one pipe",
                ),
            );
            continue;
        }
        result.push(iq.clone());
    }
    result
}

impl B<'_, '_, '_> {
    fn duplicates(&mut self) {
        for j in 0..self.decls.len() {
            let dj = &self.decls[j];
            let clash = self.decls[..j].iter().position(|di| {
                di.name.v == dj.name.v
                    && match (&di.on, &dj.on) {
                        (Some(a), Some(b)) => a.v == b.v,
                        _ => true,
                    }
            });
            if let Some(i) = clash {
                self.dup[j] = true;
                self.used[j] = true;
                self.cx.err(
                    Diagnostic::error(format!("duplicate queue `{}`", dj.name.v), dj.name.span)
                        .label("defined again here")
                        .note(self.decls[i].name.span, "first defined here"),
                );
            }
        }
    }

    /// The queue's qlimit; `None` after reporting an out-of-range value.
    fn qlimit(&mut self, d: &QueueDecl, default: u64) -> Option<u32> {
        let Some(q) = &d.qlimit else {
            return Some(default.clamp(1, 65_535) as u32);
        };
        if q.v == 0 || q.v > 65_535 {
            let hint = if q.v == 0 {
                "a queue needs room for at least one packet; pf's default qlimit is 50 packets"
            } else {
                "pf's default qlimit is 50 packets"
            };
            self.cx.err(
                Diagnostic::error(format!("qlimit out of range: {}", q.v), q.span)
                    .label("allowed 1..65535")
                    .hint(hint),
            );
            return None;
        }
        Some(q.v as u32)
    }

    fn bandwidth(&mut self, d: &QueueDecl, parent: Rate, parent_what: &str) -> Option<Rate> {
        let bw = d.bandwidth.as_ref()?;
        let r = resolve(bw.v.m2, parent);
        if r > parent || matches!(bw.v.m2, Bw::Pct(p) if p > 10_000) {
            self.cx.err(
                Diagnostic::error(
                    format!(
                        "bandwidth {r} of queue `{}` is above its {parent_what}'s {parent}",
                        d.name.v
                    ),
                    bw.span,
                )
                .label(format!("at most {parent}")),
            );
        }
        Some(r)
    }

    fn default_check(&mut self, t: &Tree, iface: &Sp<String>, hint: &str) -> usize {
        let defs: Vec<usize> = (0..t.queues.len())
            .filter(|&i| t.queues[i].default)
            .collect();
        match defs.as_slice() {
            [] => {
                self.cx.err(
                    Diagnostic::error(format!("no default queue on `{}`", iface.v), iface.span)
                        .label("packets without a queue assignment need a default queue")
                        .hint(hint.to_string()),
                );
                0
            }
            [first, rest @ ..] => {
                for &r in rest {
                    let at = t.meta[r].default.unwrap_or(t.meta[r].name);
                    let first_at = t.meta[*first].default.unwrap_or(t.meta[*first].name);
                    self.cx.err(
                        Diagnostic::error(format!("two default queues on `{}`", iface.v), at)
                            .label("second default")
                            .note(first_at, "first default here"),
                    );
                }
                if !t.queues[*first].children.is_empty() {
                    self.cx.err(
                        Diagnostic::error(
                            format!("default queue `{}` has child queues", t.queues[*first].name),
                            t.meta[*first].name,
                        )
                        .hint("the default queue must be a leaf"),
                    );
                }
                *first
            }
        }
    }

    fn children_sum(&mut self, t: &Tree, parent: Option<usize>, rate: Rate, at: Span, what: &str) {
        let kids = t.queues.iter().filter(|q| q.parent == parent);
        if kids.clone().any(|q| q.bandwidth.is_some_and(|b| b > rate)) {
            return; // that child is already reported as above its parent
        }
        let sum: u128 = kids
            .filter_map(|q| q.bandwidth)
            .map(|r| u128::from(r.0))
            .sum();
        if sum > u128::from(rate.0) {
            let s = Rate(u64::try_from(sum).unwrap_or(u64::MAX));
            self.cx.err(
                Diagnostic::error(
                    format!("child queues of {what} ask for {s}, more than its {rate}"),
                    at,
                )
                .label(format!("children sum to {s}"))
                .hint("lower the children's bandwidth or use percentages of the parent"),
            );
        }
    }

    fn drain_warnings(&mut self, t: &Tree, iface_rate: Rate, sched: SchedKind, fq_pipe: bool) {
        if fq_pipe {
            return;
        }
        for (q, m) in t.queues.iter().zip(&t.meta) {
            if q.flows.is_some() || !q.children.is_empty() || !m.qlimit_ok {
                continue;
            }
            let rate = match sched {
                SchedKind::Priq | SchedKind::Pipe => iface_rate,
                _ => q
                    .upperlimit
                    .map(|u| u.m2)
                    .or(q.bandwidth)
                    .unwrap_or(iface_rate),
            };
            if rate.0 == 0 {
                continue;
            }
            let drain_ns = u128::from(q.qlimit) * MTU_BITS * 1_000_000_000 / u128::from(rate.0);
            if drain_ns <= DRAIN_WARN_NS {
                continue;
            }
            let ms = drain_ns / 1_000_000;
            let suggest = (u128::from(rate.0) / 60_000).max(1);
            let (span, label) = match m.qlimit {
                Some(s) => (s, format!("{ms} ms of 1500-byte packets at {rate}")),
                None => (
                    m.name,
                    format!("the default qlimit 50 holds {ms} ms at {rate}"),
                ),
            };
            self.cx.err(
                Diagnostic::warning(format!("queue `{}` can hold {ms} ms of traffic", q.name), span)
                    .label(label)
                    .hint(format!("a full queue longer than ~200 ms adds delay, not throughput; qlimit {suggest} keeps it under 200 ms")),
            );
        }
    }

    /// PRIQ serves one class per priority level: pfctl rejects two queues
    /// with the same priority on one interface.
    fn unique_priorities(&mut self, t: &Tree, iface: &str) {
        for j in 0..t.queues.len() {
            if let Some(i) = (0..j).find(|&i| t.queues[i].priority == t.queues[j].priority) {
                let at = t.meta[j].priority.unwrap_or(t.meta[j].name);
                let first = t.meta[i].priority.unwrap_or(t.meta[i].name);
                self.cx.err(
                    Diagnostic::error(
                        format!(
                            "`{}` and `{}` have the same priority {} on `{iface}`",
                            t.queues[i].name, t.queues[j].name, t.queues[j].priority
                        ),
                        at,
                    )
                    .label("priority already used")
                    .note(first, "first used here")
                    .hint(
                        "PRIQ priorities must be unique per interface; the default priority is 1",
                    ),
                );
            }
        }
    }

    // ---- ALTQ ----

    fn altq(&mut self, a: &AltqDecl) -> Option<IfaceQueueing> {
        let Some(sched) = a.sched.as_ref().map(|s| s.v) else {
            self.cx.err(
                Diagnostic::error(
                    format!("`altq on {}` needs a scheduler", a.iface.v),
                    a.iface.span,
                )
                .hint("add priq, cbq or hfsc"),
            );
            return None;
        };
        let bw = match &a.bandwidth {
            Some(Sp { v: Bw::Abs(r), .. }) if r.0 > 0 => *r,
            Some(b) => {
                self.cx.err(
                    Diagnostic::error("interface bandwidth must be an absolute rate", b.span)
                        .label("e.g. 100Kb, 20Mb"),
                );
                return None;
            }
            None => {
                self.cx.err(
                    Diagnostic::error(format!("`altq on {}` needs a bandwidth", a.iface.v), a.iface.span)
                        .hint("sluice cannot ask the interface for its speed: write `bandwidth` with ~95% of the line rate"),
                );
                return None;
            }
        };
        if a.children.is_empty() {
            self.cx.err(
                Diagnostic::error(format!("`altq on {}` has no queues", a.iface.v), a.span)
                    .hint("add `queue { name, … }`"),
            );
            return None;
        }
        let altq_qlimit = match &a.qlimit {
            Some(q) if q.v == 0 || q.v > 65_535 => {
                self.cx.err(
                    Diagnostic::error(format!("qlimit out of range: {}", q.v), q.span)
                        .label("allowed 1..65535"),
                );
                DEFAULT_QLIMIT
            }
            Some(q) => q.v,
            None => DEFAULT_QLIMIT,
        };
        let mut t = Tree {
            queues: Vec::new(),
            meta: Vec::new(),
        };
        let mut path = Vec::new();
        for c in &a.children {
            self.altq_queue(
                &a.iface.v,
                sched,
                altq_qlimit,
                c,
                None,
                bw,
                &mut t,
                &mut path,
            );
        }
        if sched != SchedKind::Priq {
            self.children_sum(
                &t,
                None,
                bw,
                a.iface.span,
                &format!("`altq on {}`", a.iface.v),
            );
        }
        let opt = match sched {
            SchedKind::Priq => "priq(default)",
            SchedKind::Cbq => "cbq(default)",
            _ => "hfsc(default)",
        };
        let default_queue = self.default_check(&t, &a.iface, &format!("mark one queue with {opt}"));
        if sched == SchedKind::Priq {
            self.unique_priorities(&t, &a.iface.v);
        }
        self.drain_warnings(&t, bw, sched, false);
        Some(IfaceQueueing {
            ifname: a.iface.v.clone(),
            sched,
            bandwidth: bw,
            tbrsize: a.tbrsize.as_ref().map(|t| t.v as u32),
            queues: t.queues,
            default_queue,
            pipe: None,
            line: self.cx.line(a.span),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn altq_queue(
        &mut self,
        iface: &str,
        sched: SchedKind,
        def_qlimit: u64,
        name: &Sp<String>,
        parent: Option<usize>,
        parent_rate: Rate,
        t: &mut Tree,
        path: &mut Vec<String>,
    ) {
        let found = (0..self.decls.len()).find(|&i| {
            let d = &self.decls[i];
            !self.dup[i]
                && self.kinds[i] == Kind::Altq
                && d.name.v == name.v
                && d.on.as_ref().is_none_or(|o| o.v == iface)
        });
        let Some(i) = found else {
            let other = self.decls.iter().find(|d| d.name.v == name.v);
            let hint = match other {
                Some(d) if d.parent.is_some() => "that queue uses OpenBSD 5.5+ `parent`; ALTQ queues are declared without `parent`".to_string(),
                Some(d) if d.pipe.is_some() => "that queue belongs to a dummynet pipe".to_string(),
                Some(d) => format!("that queue is declared `on {}`", d.on.as_ref().map_or("?", |o| o.v.as_str())),
                None => format!("declare it: `queue {} …`", name.v),
            };
            self.cx.err(
                Diagnostic::error(
                    format!("unknown queue `{}` on `{iface}`", name.v),
                    name.span,
                )
                .label("no such ALTQ queue")
                .hint(hint),
            );
            return;
        };
        if path.contains(&name.v) || path.len() >= MAX_DEPTH {
            self.cx.err(
                Diagnostic::error(format!("queue `{}` is its own ancestor", name.v), name.span)
                    .label("cycle in the queue tree"),
            );
            return;
        }
        if t.queues.iter().any(|q| q.name == name.v) {
            self.cx.err(
                Diagnostic::error(
                    format!("queue `{}` is listed twice on `{iface}`", name.v),
                    name.span,
                )
                .label("already in this tree"),
            );
            return;
        }
        self.used[i] = true;
        let d = &self.decls[i];
        if let Some(ns) = &d.new_style {
            let hint = match ns.v {
                "flows" | "quantum" => "ALTQ queues have no flows; for FQ-CoDel use OpenBSD 5.5+ queues (`queue NAME on IF …` with `flows N`) instead of altq",
                "min" | "max" | "burst" => "in ALTQ write hfsc(realtime X), hfsc(upperlimit X) or hfsc(linkshare (m1 d m2))",
                "default" => "in ALTQ the default is a scheduler option: priq(default), cbq(default) or hfsc(default)",
                _ => "ALTQ children are listed in the parent's `{ … }` or in `altq … queue { … }`",
            };
            self.cx.err(
                Diagnostic::error(
                    format!(
                        "`{}` is OpenBSD 5.5+ syntax, but `{}` is an ALTQ queue",
                        ns.v, d.name.v
                    ),
                    ns.span,
                )
                .label(format!("queues under `altq on {iface}` use ALTQ syntax"))
                .hint(hint),
            );
        }
        if let Some(w) = &d.weight {
            self.cx.err(
                Diagnostic::error("`weight` is for queues under a pipe", w.span)
                    .hint("ALTQ shares by priority or bandwidth"),
            );
        }
        if let Some(s) = &d.sched {
            if s.v != sched {
                self.cx.err(
                    Diagnostic::error(
                        format!("scheduler options do not match `altq on {iface}`"),
                        s.span,
                    )
                    .label(format!("this interface runs {}", sched_name(sched))),
                );
            }
        }
        if sched == SchedKind::Priq {
            if let Some(c) = d.children.first() {
                self.cx.err(
                    Diagnostic::error("PRIQ queues cannot have child queues", c.span)
                        .hint("PRIQ is flat; use cbq or hfsc for a tree"),
                );
            }
        }
        let line = self.cx.line(d.span);
        let mut q = new_queue(&d.name.v, line);
        q.parent = parent;
        let max_prio = if sched == SchedKind::Priq { 15 } else { 7 };
        if let Some(p) = &d.priority {
            if p.v > max_prio {
                self.cx.err(
                    Diagnostic::error(format!("priority out of range: {}", p.v), p.span)
                        .label(format!("allowed 0..{max_prio} for {}", sched_name(sched))),
                );
            }
            // Keep the written value even when out of range: the file is
            // rejected anyway, and a clamped value would echo as a false
            // duplicate priority.
            q.priority = p.v as u8;
        }
        let ql = self.qlimit(d, def_qlimit);
        q.qlimit = ql.unwrap_or(DEFAULT_QLIMIT as u32);
        let what = if parent.is_some() {
            "parent"
        } else {
            "interface"
        };
        q.bandwidth = self.bandwidth(d, parent_rate, what);
        q.default = d.default.is_some();
        q.red = d.red;
        q.rio = d.rio;
        q.ecn = d.ecn;
        q.borrow = d.borrow;
        q.realtime = d.realtime.as_ref().map(|c| curve(&c.v, parent_rate));
        q.linkshare = d.linkshare.as_ref().map(|c| curve(&c.v, parent_rate));
        q.upperlimit = d.upperlimit.as_ref().map(|c| curve(&c.v, parent_rate));
        if sched == SchedKind::Hfsc && q.linkshare.is_none() {
            q.linkshare = q.bandwidth.map(ServiceCurve::linear);
        }
        let rate = q.bandwidth.unwrap_or(parent_rate);
        let idx = t.queues.len();
        if let Some(p) = parent {
            if let Some(pq) = t.queues.get_mut(p) {
                pq.children.push(idx);
            }
        }
        t.queues.push(q);
        t.meta.push(QMeta {
            qlimit_ok: ql.is_some(),
            name: d.name.span,
            qlimit: d.qlimit.as_ref().map(|q| q.span),
            default: d.default,
            priority: d.priority.as_ref().map(|p| p.span),
        });
        if sched == SchedKind::Priq {
            return;
        }
        path.push(name.v.clone());
        let children = d.children.clone();
        for c in &children {
            self.altq_queue(iface, sched, def_qlimit, c, Some(idx), rate, t, path);
        }
        path.pop();
        self.children_sum(t, Some(idx), rate, name.span, &format!("`{}`", name.v));
    }

    // ---- OpenBSD 5.5+ ----

    fn queue55(
        &mut self,
        i: usize,
        iface: &str,
        parent: Option<usize>,
        parent_rate: Rate,
        t: &mut Tree,
        depth: usize,
    ) -> Option<usize> {
        self.used[i] = true;
        let d = &self.decls[i];
        if let Some(os) = &d.old_style {
            let hint = match os.v {
                "priority" => "OpenBSD 5.5+ queues have no priority; use `set prio N` on pass/match rules",
                "priq(…)" | "cbq(…)" | "hfsc(…)" => "OpenBSD 5.5+ queues are always HFSC; drop the hfsc(...) and use bandwidth/min/max/default",
                _ => "OpenBSD 5.5+ children name their parent: `queue CHILD parent NAME …`",
            };
            self.cx.err(
                Diagnostic::error(
                    format!(
                        "`{}` is ALTQ syntax, but `{}` is an OpenBSD 5.5+ queue",
                        os.v, d.name.v
                    ),
                    os.span,
                )
                .label("no `altq on` for this interface")
                .hint(hint),
            );
        }
        if let Some(w) = &d.weight {
            self.cx.err(
                Diagnostic::error("`weight` is for queues under a pipe", w.span)
                    .hint("5.5+ queues share by bandwidth"),
            );
        }
        let mut q = new_queue(&d.name.v, self.cx.line(d.span));
        q.parent = parent;
        let ql = self.qlimit(d, DEFAULT_QLIMIT);
        q.qlimit = ql.unwrap_or(DEFAULT_QLIMIT as u32);
        let what = if parent.is_some() {
            "parent"
        } else {
            "interface"
        };
        q.bandwidth = self.bandwidth(d, parent_rate, what);
        q.linkshare = d.bandwidth.as_ref().map(|c| curve(&c.v, parent_rate));
        q.realtime = d.min.as_ref().map(|c| curve(&c.v, parent_rate));
        q.upperlimit = d.max.as_ref().map(|c| curve(&c.v, parent_rate));
        q.flows = d.flows.as_ref().map(|f| f.v as u32);
        q.quantum = d.quantum.as_ref().map(|f| f.v as u32);
        q.default = d.default.is_some();
        let rate = q.bandwidth.unwrap_or(parent_rate);
        let idx = t.queues.len();
        if let Some(p) = parent.and_then(|p| t.queues.get_mut(p)) {
            p.children.push(idx);
        }
        t.queues.push(q);
        t.meta.push(QMeta {
            qlimit_ok: ql.is_some(),
            name: d.name.span,
            qlimit: d.qlimit.as_ref().map(|q| q.span),
            default: d.default,
            priority: d.priority.as_ref().map(|p| p.span),
        });
        let name = d.name.clone();
        let kids: Vec<usize> = (0..self.decls.len())
            .filter(|&j| {
                let c = &self.decls[j];
                !self.dup[j]
                    && self.kinds[j] == Kind::Child55
                    && c.parent.as_ref().is_some_and(|p| p.v == name.v)
                    && c.on.as_ref().is_none_or(|o| o.v == iface)
            })
            .collect();
        if !kids.is_empty() && depth >= MAX_DEPTH {
            self.cx.err(
                Diagnostic::error("queue tree too deep", name.span)
                    .label(format!("more than {MAX_DEPTH} levels")),
            );
            return Some(idx);
        }
        for j in kids {
            if self.used[j] && t.queues.iter().any(|q| q.name == self.decls[j].name.v) {
                continue;
            }
            self.queue55(j, iface, Some(idx), rate, t, depth + 1);
        }
        self.children_sum(t, Some(idx), rate, name.span, &format!("`{}`", name.v));
        Some(idx)
    }

    fn root55(&mut self, i: usize) -> Option<IfaceQueueing> {
        let d = &self.decls[i];
        let on = d.on.clone()?;
        let bw = match d.bandwidth.as_ref().map(|b| b.v.m2) {
            Some(Bw::Abs(r)) if r.0 > 0 => r,
            _ => {
                self.used[i] = true;
                self.cx.err(
                    Diagnostic::error(
                        format!("root queue `{}` needs an absolute bandwidth", d.name.v),
                        d.name.span,
                    )
                    .label(format!("the root of `{}`", on.v))
                    .hint("write e.g. `queue main on em0 bandwidth 20M`"),
                );
                return None;
            }
        };
        let span = d.span;
        let mut t = Tree {
            queues: Vec::new(),
            meta: Vec::new(),
        };
        self.queue55(i, &on.v, None, bw, &mut t, 0);
        let default_queue = self.default_check(&t, &on, "mark one leaf queue with `default`");
        self.drain_warnings(&t, bw, SchedKind::Hfsc, false);
        Some(IfaceQueueing {
            ifname: on.v,
            sched: SchedKind::Hfsc,
            bandwidth: bw,
            tbrsize: None,
            queues: t.queues,
            default_queue,
            pipe: None,
            line: self.cx.line(span),
        })
    }

    // ---- dummynet ----

    fn pipe(&mut self, p: &PipeDecl) -> Option<IfaceQueueing> {
        let Some(iface) = &p.iface else {
            self.cx.err(
                Diagnostic::error(format!("pipe `{}` needs `on IF`", p.name.v), p.name.span)
                    .hint("a pipe shapes the packets leaving one interface"),
            );
            return None;
        };
        let bw = match &p.bandwidth {
            Some(Sp { v: Bw::Abs(r), .. }) if r.0 > 0 => *r,
            Some(b) => {
                self.cx.err(
                    Diagnostic::error("pipe bandwidth must be an absolute rate", b.span)
                        .label("e.g. 970Kb"),
                );
                return None;
            }
            None => {
                self.cx.err(
                    Diagnostic::error(
                        format!("pipe `{}` needs a bandwidth", p.name.v),
                        p.name.span,
                    )
                    .hint("use ~97% of the measured line rate"),
                );
                return None;
            }
        };
        let pipe_qlimit = match &p.qlimit {
            Some(q) if q.v == 0 || q.v > 65_535 => {
                self.cx.err(
                    Diagnostic::error(format!("qlimit out of range: {}", q.v), q.span)
                        .label("allowed 1..65535"),
                );
                DEFAULT_QLIMIT
            }
            Some(q) => q.v,
            None => DEFAULT_QLIMIT,
        };
        let mut t = Tree {
            queues: Vec::new(),
            meta: Vec::new(),
        };
        for i in 0..self.decls.len() {
            let d = &self.decls[i];
            if self.dup[i]
                || self.kinds[i] != Kind::Dummynet
                || d.pipe.as_ref().is_none_or(|x| x.v != p.name.v)
            {
                continue;
            }
            self.used[i] = true;
            let bad: Option<(Span, &str)> = d
                .bandwidth
                .as_ref()
                .map(|b| (b.span, "bandwidth"))
                .or(d.priority.as_ref().map(|x| (x.span, "priority")))
                .or(d.sched.as_ref().map(|x| (x.span, sched_opts_name(x.v))))
                .or(d.children.first().map(|x| (x.span, "child queues")))
                .or(d.parent.as_ref().map(|x| (x.span, "parent")))
                .or(d.min.as_ref().map(|x| (x.span, "min")))
                .or(d.max.as_ref().map(|x| (x.span, "max")))
                .or(d.flows.as_ref().map(|x| (x.span, "flows")))
                .or(d.quantum.as_ref().map(|x| (x.span, "quantum")));
            if let Some((span, what)) = bad {
                self.cx.err(
                    Diagnostic::error(format!("`{what}` is not an option of a queue under a pipe"), span)
                        .label("dummynet queues take weight, qlimit and default")
                        .hint("rate and scheduler belong to the pipe: `pipe NAME on IF bandwidth BW sched …`"),
                );
            }
            let mut q = new_queue(&d.name.v, self.cx.line(d.span));
            let ql = self.qlimit(d, pipe_qlimit);
            q.qlimit = ql.unwrap_or(DEFAULT_QLIMIT as u32);
            q.default = d.default.is_some();
            let w = d.weight.as_ref().map_or(1, |w| w.v);
            if !(1..=100).contains(&w) {
                let span = d.weight.as_ref().map_or(d.name.span, |w| w.span);
                self.cx.err(
                    Diagnostic::error(format!("weight out of range: {w}"), span)
                        .label("allowed 1..100"),
                );
            }
            q.weight = Some(w.clamp(1, 100) as u32);
            t.queues.push(q);
            t.meta.push(QMeta {
                qlimit_ok: ql.is_some(),
                name: d.name.span,
                qlimit: d.qlimit.as_ref().map(|q| q.span),
                default: d.default,
                priority: None,
            });
        }
        if t.queues.is_empty() {
            // A pipe without queues is one queue: rules may name the pipe itself.
            let mut q = new_queue(&p.name.v, self.cx.line(p.span));
            q.qlimit = pipe_qlimit as u32;
            q.default = true;
            q.weight = Some(1);
            t.queues.push(q);
            t.meta.push(QMeta {
                qlimit_ok: true,
                name: p.name.span,
                qlimit: p.qlimit.as_ref().map(|q| q.span),
                default: None,
                priority: None,
            });
        }
        let default_queue =
            self.default_check(&t, &p.name, "mark one of the pipe's queues with `default`");
        let fq = matches!(p.sched, PipeSched::FqCodel(_));
        self.drain_warnings(&t, bw, SchedKind::Pipe, fq);
        Some(IfaceQueueing {
            ifname: iface.v.clone(),
            sched: SchedKind::Pipe,
            bandwidth: bw,
            tbrsize: None,
            queues: t.queues,
            default_queue,
            pipe: Some(Pipe {
                name: p.name.v.clone(),
                delay: p.delay,
                loss_ppm: p.loss_ppm,
                qlimit: pipe_qlimit as u32,
                sched: p.sched.clone(),
            }),
            line: self.cx.line(p.span),
        })
    }

    fn unused(&mut self, altqs: &[AltqDecl], pipes: &[PipeDecl]) {
        for i in 0..self.decls.len() {
            if self.used[i] {
                continue;
            }
            let d = &self.decls[i];
            let diag = match self.kinds[i] {
                Kind::Dummynet => {
                    let pn = d.pipe.as_ref().map_or(d.name.span, |p| p.span);
                    let names: Vec<&str> = pipes.iter().map(|p| p.name.v.as_str()).collect();
                    let hint = if names.is_empty() {
                        "no pipes are defined".to_string()
                    } else {
                        format!("pipes defined: {}", names.join(", "))
                    };
                    Diagnostic::error(
                        format!(
                            "unknown pipe `{}`",
                            d.pipe.as_ref().map_or("", |p| p.v.as_str())
                        ),
                        pn,
                    )
                    .label("no such pipe")
                    .hint(hint)
                }
                Kind::Child55 => {
                    let p = d.parent.clone().unwrap_or_default();
                    let altq_parent = self
                        .decls
                        .iter()
                        .zip(&self.kinds)
                        .any(|(x, k)| *k == Kind::Altq && x.name.v == p.v);
                    let hint = if altq_parent {
                        "`parent` is OpenBSD 5.5+ syntax; ALTQ children are listed in the parent's `{ … }`"
                    } else {
                        "the parent must be a queue reachable from a root `queue NAME on IF …`"
                    };
                    Diagnostic::error(format!("unknown parent queue `{}`", p.v), p.span)
                        .label("no 5.5+ queue of this name")
                        .hint(hint)
                }
                _ => {
                    let hint = match &d.on {
                        Some(on) if altqs.iter().any(|a| a.iface.v == on.v) => format!(
                            "list it in `altq on {} … queue {{ … }}` or in a parent's `{{ … }}`; `queue NAME on IF` without a parent is OpenBSD 5.5+ syntax, which does not mix with altq",
                            on.v
                        ),
                        _ if altqs.is_empty() => "attach it: `altq on IF … queue { NAME }` (ALTQ), `queue NAME on IF …` (OpenBSD 5.5+ root), `parent NAME` or `pipe NAME`".to_string(),
                        _ => "list it in an `altq on IF … queue { … }` or in a parent queue's `{ … }`".to_string(),
                    };
                    Diagnostic::error(
                        format!("queue `{}` is outside any altq or interface", d.name.v),
                        d.name.span,
                    )
                    .label("nothing refers to this queue")
                    .hint(hint)
                }
            };
            self.cx.err(diag);
        }
    }
}

pub fn sched_name(s: SchedKind) -> &'static str {
    match s {
        SchedKind::Priq => "priq",
        SchedKind::Cbq => "cbq",
        SchedKind::Hfsc => "hfsc",
        SchedKind::Pipe => "pipe",
    }
}

pub fn sched_opts_name(s: SchedKind) -> &'static str {
    match s {
        SchedKind::Priq => "priq(…)",
        SchedKind::Cbq => "cbq(…)",
        _ => "hfsc(…)",
    }
}
