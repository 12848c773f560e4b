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
//! - sluice's extensions that act on a class's traffic (`ingress`,
//!   `ack-pacing`, `window-clamp`) stay on the queue they are written on; on
//!   a parent they cover every leaf under it. A pipe's are copied to each of
//!   its queues (which may add TCP control of their own).

mod altq;
mod hfsc_admit;
mod openbsd;
mod pipe;
mod warnings;

use super::Ctx;
use crate::ast::{AltqDecl, CurveAst, PipeDecl, QueueDecl, Sp};
use crate::diag::{Diagnostic, Span};
use crate::ir::{IfaceQueueing, Queue, SchedKind, ServiceCurve, TcpControl};
use crate::units::Bw;
use sluice_time::Rate;

const DEFAULT_QLIMIT: u64 = Queue::DEFAULT_QLIMIT as u64;
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

/// Per built queue: where to point warnings and default-queue errors.
struct QMeta {
    /// False when the qlimit was out of range (already an error: no warning on top).
    qlimit_ok: bool,
    name: Span,
    qlimit: Option<Span>,
    default: Option<Span>,
    priority: Option<Span>,
    /// Where `ingress` was written on the queue.
    ingress: Option<Span>,
    ack_filter: Option<Span>,
    /// Where `dual-srchost` & co. were written on the queue.
    isolate: Option<Span>,
    /// Where `ack-pacing` and `window-clamp` were written on the queue.
    ack_pacing: Option<Span>,
    window_clamp: Option<Span>,
    /// The queue's own bandwidth was written as an absolute rate (not a
    /// percentage, not absent): a rate that does not depend on its parents.
    abs_bw: bool,
}

impl QMeta {
    /// Where `d`'s options stand; `qlimit_ok` as for the field.
    fn of(d: &QueueDecl, qlimit_ok: bool) -> QMeta {
        QMeta {
            qlimit_ok,
            name: d.name.span,
            qlimit: d.qlimit.as_ref().map(|q| q.span),
            default: d.default,
            priority: d.priority.as_ref().map(|p| p.span),
            ingress: d.ingress,
            ack_filter: d.ack_filter.as_ref().map(|a| a.span),
            isolate: d.isolate.as_ref().map(|a| a.span),
            ack_pacing: d.ack_pacing,
            window_clamp: d.window_clamp,
            abs_bw: d
                .bandwidth
                .as_ref()
                .is_some_and(|b| matches!(b.v.m2, Bw::Abs(_))),
        }
    }

    /// The TCP control written on the queue itself.
    fn tcp(&self) -> TcpControl {
        TcpControl {
            ack_pacing: self.ack_pacing.is_some(),
            window_clamp: self.window_clamp.is_some(),
        }
    }
}

#[derive(Default)]
struct Tree {
    queues: Vec<Queue>,
    meta: Vec<QMeta>,
}

impl Tree {
    /// Adds `q` as the next queue, with where its options stand.
    fn push(&mut self, q: Queue, meta: QMeta) {
        self.queues.push(q);
        self.meta.push(meta);
    }
}

/// The items of `items` whose name no earlier item has; each repeat is
/// reported there as "`message` name`" with a note at the first.
fn firsts<'i, T>(
    cx: &mut Ctx,
    items: &'i [T],
    name: impl Fn(&T) -> &Sp<String>,
    message: &str,
) -> Vec<&'i T> {
    let mut out = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let this = name(item);
        match items[..n].iter().map(&name).find(|p| p.v == this.v) {
            Some(prev) => cx.err(
                Diagnostic::error(format!("{message}{}`", this.v), this.span)
                    .note(prev.span, "first defined here"),
            ),
            None => out.push(item),
        }
    }
    out
}

struct B<'a, 'c, 't> {
    cx: &'c mut Ctx<'t>,
    decls: &'a [QueueDecl],
    kinds: Vec<Kind>,
    used: Vec<bool>,
    dup: Vec<bool>,
    /// A queue marked `default` that attaches to no tree (a misspelt
    /// parent, a name no `{ … }` lists): its own error says why, and "no
    /// default queue" on its interface would only echo it.
    stray_default: bool,
}

pub fn build(
    cx: &mut Ctx,
    altqs: &[AltqDecl],
    decls: &[QueueDecl],
    pipes: &[PipeDecl],
) -> Vec<IfaceQueueing> {
    let expanded = per_interface(decls);
    let decls = expanded.as_slice();
    let altq_on = |i: &str| altqs.iter().any(|a| a.iface.v == i);
    let kinds: Vec<Kind> = decls
        .iter()
        .map(|d| {
            if d.oldqueue.is_some() {
                Kind::Altq
            } else if d.pipe.is_some() {
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
    let stray_default = altq::stray_default(altqs, decls, &kinds);
    let mut b = B {
        cx,
        decls,
        kinds,
        used: vec![false; decls.len()],
        dup: vec![false; decls.len()],
        stray_default,
    };
    b.duplicates();
    b.oldqueue_notes();
    let mut out: Vec<(IfaceQueueing, Span)> = Vec::new();
    for a in firsts(b.cx, altqs, |a| &a.iface, "second `altq on ") {
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
    for p in firsts(b.cx, pipes, |p| &p.name, "duplicate pipe `") {
        if let Some(iq) = b.pipe(p) {
            out.push((iq, p.name.span));
        }
    }
    b.unused(altqs, pipes);
    // Trees in the order the file gives them, whatever their dialect: the
    // printer writes them in this order, and reading its output back must
    // give the same configuration.
    out.sort_by_key(|(_, span)| span.start);
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

/// A queue written `on { IF1 IF2 … }` as one queue per interface (pfctl's
/// list expansion): each copy is `on` one interface, so a root makes one
/// tree per interface and a child under it belongs to each of them.
fn per_interface(decls: &[QueueDecl]) -> Vec<QueueDecl> {
    let mut out = Vec::with_capacity(decls.len());
    for d in decls {
        let mut first = d.clone();
        first.on_more = Vec::new();
        for i in &d.on_more {
            let mut copy = first.clone();
            copy.on = Some(i.clone());
            out.push(copy);
        }
        out.insert(out.len() - d.on_more.len(), first);
    }
    out
}

impl B<'_, '_, '_> {
    /// `oldqueue` is read as ALTQ's `queue`; the warning says so once, at
    /// the first, so that the user knows the canonical form spells it `queue`.
    fn oldqueue_notes(&mut self) {
        let mut all = self.decls.iter().filter_map(|d| d.oldqueue);
        let Some(first) = all.next() else { return };
        let more = all.count();
        let also = match more {
            0 => String::new(),
            1 => " (and 1 more)".to_string(),
            n => format!(" (and {n} more)"),
        };
        self.cx.err(
            Diagnostic::warning("`oldqueue` read as an ALTQ `queue`", first)
                .label(format!("OpenBSD 5.5's spelling of an ALTQ queue{also}"))
                .hint("OpenBSD 5.5 kept ALTQ under `oldqueue` while `queue` became the new scheduler's; sluice reads both, and `sluice check -v` writes `queue`"),
        );
    }

    fn duplicates(&mut self) {
        for j in 0..self.decls.len() {
            let dj = &self.decls[j];
            // pfctl refuses a name twice under one parent, not under two
            // (`std parent up` and `std parent down` may share a name so
            // that one `set queue std` works in both directions); within
            // one interface's tree `queue55` still refuses a repeat.
            let parent = |d: &QueueDecl| d.parent.as_ref().map(|p| p.v.clone());
            let clash = self.decls[..j].iter().position(|di| {
                di.name.v == dj.name.v
                    && parent(di) == parent(dj)
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

    /// The qlimit an `altq` or a pipe gives its queues; the default after
    /// reporting an out-of-range value.
    fn outer_qlimit(&mut self, qlimit: &Option<Sp<u64>>) -> u64 {
        match qlimit {
            Some(q) if q.v == 0 || q.v > 65_535 => {
                self.cx.err(
                    Diagnostic::error(format!("qlimit out of range: {}", q.v), q.span)
                        .label("allowed 1..65535"),
                );
                DEFAULT_QLIMIT
            }
            Some(q) => q.v,
            None => DEFAULT_QLIMIT,
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

    /// A queue's absolute bandwidth. Above the parent is an error under ALTQ
    /// (`strict`) and a warning for OpenBSD 5.5+ shares (see `children_sum`).
    fn bandwidth(
        &mut self,
        d: &QueueDecl,
        parent: Rate,
        under_parent: bool,
        strict: bool,
    ) -> Option<Rate> {
        let bw = d.bandwidth.as_ref()?;
        let parent_what = if under_parent { "parent" } else { "interface" };
        let r = resolve(bw.v.m2, parent);
        if r > parent || matches!(bw.v.m2, Bw::Pct(p) if p > 10_000) {
            let msg = format!(
                "bandwidth {r} of queue `{}` is above its {parent_what}'s {parent}",
                d.name.v
            );
            let diag = if strict {
                Diagnostic::error(msg, bw.span)
            } else {
                Diagnostic::warning(msg, bw.span)
            };
            self.cx.err(diag.label(format!("at most {parent}")));
        }
        Some(r)
    }

    fn default_check(&mut self, t: &Tree, iface: &Sp<String>, hint: &str) -> usize {
        self.default_check_in(t, iface, hint, false)
    }

    /// As [`B::default_check`]; `interior_ok` lets the default have children
    /// (ALTQ's CBQ, whose interior classes hold packets too).
    fn default_check_in(
        &mut self,
        t: &Tree,
        iface: &Sp<String>,
        hint: &str,
        interior_ok: bool,
    ) -> usize {
        let defs: Vec<usize> = (0..t.queues.len())
            .filter(|&i| t.queues[i].default)
            .collect();
        match defs.as_slice() {
            [] if self.stray_default => 0,
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
                if !interior_ok && !t.queues[*first].children.is_empty() {
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

    /// Children that ask for more than their parent: pfctl refuses it for
    /// FAIRQ ("link-sharing sc exceeds parent's sc") and warns for CBQ ("the
    /// sum of the child bandwidth … higher than parent"); OpenBSD 5.5+ takes
    /// bandwidth as a share and accepts it (the FAQ's own example
    /// oversubscribes by 1K), so there it is a warning too.
    fn children_sum(
        &mut self,
        t: &Tree,
        parent: Option<usize>,
        rate: Rate,
        at: Span,
        what: &str,
        rule: SumRule,
    ) {
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
            let msg = format!("child queues of {what} ask for {s}, more than its {rate}");
            let d = match rule {
                SumRule::Refuse => Diagnostic::error(msg, at)
                    .hint("lower the children's bandwidth or use percentages of the parent"),
                SumRule::Bounded => Diagnostic::warning(msg, at).hint(
                    "the parent's bandwidth bounds them together; lower them to say what you mean",
                ),
                SumRule::Scaled => Diagnostic::warning(msg, at)
                    .hint("the shares are scaled down to fit; lower them to say what you mean"),
            };
            self.cx.err(d.label(format!("children sum to {s}")));
        }
    }

    fn drain_warnings(&mut self, t: &Tree, iface_rate: Rate, sched: SchedKind, fq_pipe: bool) {
        if fq_pipe {
            return;
        }
        for (q, m) in t.queues.iter().zip(&t.meta) {
            if q.flows.is_some() || q.codel.is_some() || !q.children.is_empty() || !m.qlimit_ok {
                continue;
            }
            let rate = match sched {
                // FAIRQ's bandwidth is a threshold, not a cap; its qlimit
                // is per bucket.
                SchedKind::Priq | SchedKind::Pipe | SchedKind::Fairq => iface_rate,
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

    /// Whether `iface` was written as pf's usual name of the WAN side
    /// (`$ext_if`, `$wan_if`, `$wan`, or the `egress` group): where packets
    /// leave towards the bottleneck, i.e. the upload.
    fn upload_side(&self, iface: &Sp<String>) -> bool {
        let written = self
            .cx
            .text
            .get(iface.span.start..iface.span.end)
            .unwrap_or("");
        matches!(
            written.trim_start_matches('$'),
            "ext_if" | "wan_if" | "wan" | "egress"
        )
    }

    /// `ingress` written at `at` on interface `iface` (written there as
    /// the WAN side): a warning, since it is for the download side.
    fn ingress_upload_warning(&mut self, iface: &Sp<String>, at: Span) {
        if !self.upload_side(iface) {
            return;
        }
        self.cx.err(
            Diagnostic::warning(
                format!("`ingress` on `{}`, the upload side", iface.v),
                at,
            )
            .label("packets leaving the WAN interface have not crossed the bottleneck yet")
            .hint("ingress mode is for the download side, shaped where it leaves for the LAN (`$int_if`): there a dropped packet has already used the line; here a drop costs the line nothing"),
        );
    }

    /// Ingress checks of an ALTQ or OpenBSD 5.5+ tree: the upload side, and
    /// a queue whose leaves have no AQM (only tail drops to charge).
    fn ingress_checks(&mut self, t: &Tree, iface: &Sp<String>) {
        for (i, (q, m)) in t.queues.iter().zip(&t.meta).enumerate() {
            let Some(at) = m.ingress else { continue };
            self.ingress_upload_warning(iface, at);
            let mut leaves = Vec::new();
            let mut stack = vec![i];
            // Bounded by the tree: every queue is pushed once (children
            // come after their parent).
            while let Some(j) = stack.pop() {
                match t.queues.get(j) {
                    Some(x) if x.children.is_empty() => leaves.push(x),
                    Some(x) => stack.extend(x.children.iter().copied().filter(|&c| c > j)),
                    None => {}
                }
            }
            if leaves
                .iter()
                .any(|l| l.flows.is_some() || l.codel.is_some() || l.red || l.rio)
            {
                continue;
            }
            self.cx.err(
                Diagnostic::warning(format!("queue `{}` has no AQM for `ingress` to charge", q.name), at)
                    .label("only its tail drops are charged: a tail-drop queue behind the bottleneck fills before it drops")
                    .hint("give it an AQM: `flows N` (FQ-CoDel, OpenBSD 5.5+ queues) or `red` (ALTQ, e.g. hfsc(red ingress))"),
            );
        }
    }

    /// PRIQ and FAIRQ serve one class per priority level: pfctl rejects
    /// two queues with the same priority on one interface.
    fn unique_priorities(&mut self, t: &Tree, iface: &str, sched: SchedKind) {
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
                    .hint(format!(
                        "{} priorities must be unique per interface; the default priority is 1",
                        sched.name().to_uppercase()
                    )),
                );
            }
        }
    }

    fn unused(&mut self, altqs: &[AltqDecl], pipes: &[PipeDecl]) {
        // A queue some `{ … }` list names belongs to that tree even when the
        // tree failed to build; its error is already reported, so no cascade.
        let listed = |name: &str| {
            altqs
                .iter()
                .flat_map(|a| a.children.iter())
                .any(|c| c.v == name)
                || self
                    .decls
                    .iter()
                    .flat_map(|q| q.children.iter())
                    .any(|c| c.v == name)
        };
        for i in 0..self.decls.len() {
            if self.used[i] || (self.kinds[i] == Kind::Altq && listed(&self.decls[i].name.v)) {
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
                    .did_you_mean(d.pipe.as_ref().map_or("", |p| p.v.as_str()), names)
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
                        .did_you_mean(&p.v, self.decls.iter().map(|x| x.name.v.as_str()))
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

/// What a tree whose children ask for more than their parent gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SumRule {
    /// An error (ALTQ's FAIRQ, as pfctl).
    Refuse,
    /// A warning: the parent's rate still bounds the children (CBQ, as pfctl).
    Bounded,
    /// A warning: the children's rates are shares (OpenBSD 5.5+).
    Scaled,
}

impl SumRule {
    /// ALTQ's rule for a tree of `sched`.
    pub(super) fn of(sched: SchedKind) -> SumRule {
        if sched == SchedKind::Cbq {
            SumRule::Bounded
        } else {
            SumRule::Refuse
        }
    }
}
