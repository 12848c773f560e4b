//! OpenBSD 5.5+ trees: a root `queue NAME on IF` and children by `parent`, mapped to HFSC.

use super::altq::ASSUMED_IFSPEED;
use super::{curve, Kind, QMeta, SumRule, Tree, B, DEFAULT_QLIMIT, MAX_DEPTH};
use crate::diag::Diagnostic;
use crate::ir::{IfaceQueueing, Queue, SchedKind};
use crate::units::Bw;
use sluice_time::Rate;

impl B<'_, '_, '_> {
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
        if let Some(prev) = t.queues.iter().position(|q| q.name == d.name.v) {
            // A name shared across parents is fine in two trees (one per
            // direction), not in one: a rule's `set queue` would be ambiguous.
            self.cx.err(
                Diagnostic::error(
                    format!("queue `{}` twice in the tree of `{iface}`", d.name.v),
                    d.name.span,
                )
                .label("a rule naming it could mean either")
                .note(t.meta[prev].name, "already in this tree here")
                .hint("queues under different parents may share a name only in different interfaces' trees; rename one"),
            );
            return None;
        }
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
        let mut q = Queue::new(&d.name.v, self.cx.line(d.span));
        q.parent = parent;
        let ql = self.qlimit(d, DEFAULT_QLIMIT);
        q.qlimit = ql.unwrap_or(DEFAULT_QLIMIT as u32);
        q.bandwidth = self.bandwidth(d, parent_rate, parent.is_some(), false);
        q.linkshare = d.bandwidth.as_ref().map(|c| curve(&c.v, parent_rate));
        q.realtime = d.min.as_ref().map(|c| curve(&c.v, parent_rate));
        q.upperlimit = d.max.as_ref().map(|c| curve(&c.v, parent_rate));
        q.flows = d.flows.as_ref().map(|f| f.v as u32);
        q.quantum = d.quantum.as_ref().map(|f| f.v as u32);
        q.default = d.default.is_some();
        q.ingress = d.ingress.is_some();
        q.ack_filter = d.ack_filter.as_ref().map(|a| a.v);
        q.isolate = d.isolate.as_ref().map(|a| a.v);
        let meta = QMeta::of(d, ql.is_some());
        q.tcp = meta.tcp();
        let rate = q.bandwidth.unwrap_or(parent_rate);
        let idx = t.queues.len();
        if let Some(p) = parent.and_then(|p| t.queues.get_mut(p)) {
            p.children.push(idx);
        }
        t.push(q, meta);
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
        if let (Some(f), Some(&j)) = (&d.flows, kids.first()) {
            self.cx.err(
                Diagnostic::error(
                    format!("queue `{}` has flows and child queues", name.v),
                    f.span,
                )
                .label("`flows` makes a leaf an FQ-CoDel queue")
                .note(self.decls[j].name.span, "a child of it")
                .hint("give `flows N` to the leaves under it"),
            );
        }
        if parent.is_some() && d.bandwidth.is_none() && d.flows.is_none() {
            self.cx.err(
                Diagnostic::error(
                    format!("queue `{}` has neither bandwidth nor flows", name.v),
                    name.span,
                )
                .label("under a shaped root every queue needs its share")
                .hint("add `bandwidth BW` (its share of the parent), or `flows N` for an FQ-CoDel leaf"),
            );
        }
        for j in kids {
            if self.used[j] && t.queues.iter().any(|q| q.name == self.decls[j].name.v) {
                continue;
            }
            self.queue55(j, iface, Some(idx), rate, t, depth + 1);
        }
        self.children_sum(
            t,
            Some(idx),
            rate,
            name.span,
            &format!("`{}`", name.v),
            SumRule::Scaled,
        );
        Some(idx)
    }

    pub(super) fn root55(&mut self, i: usize) -> Option<IfaceQueueing> {
        let d = &self.decls[i];
        let on = d.on.clone()?;
        let bw = match d.bandwidth.as_ref().map(|b| b.v.m2) {
            Some(Bw::Abs(r)) if r.0 > 0 => r,
            // OpenBSD: a root with `flows` and no bandwidth is FQ-CoDel
            // on the interface, unshaped: pf sends at the link's speed.
            // sluice decides before it sees the interface, so it assumes
            // the common NIC speed, as for ALTQ without a bandwidth.
            None if d.flows.is_some() => {
                self.cx.err(
                    Diagnostic::warning(
                        format!("root queue `{}` names no bandwidth: {ASSUMED_IFSPEED} assumed", d.name.v),
                        d.name.span,
                    )
                    .label(format!("pf would send at the interface's speed; sluice assumes {ASSUMED_IFSPEED}"))
                    .hint("FQ-CoDel only helps where the queue forms: give the bottleneck's rate, ~95% of the line, e.g. `bandwidth 95M`"),
                );
                ASSUMED_IFSPEED
            }
            _ => {
                self.used[i] = true;
                self.cx.err(
                    Diagnostic::error(
                        format!("root queue `{}` needs an absolute bandwidth", d.name.v),
                        d.name.span,
                    )
                    .label(format!("the root of `{}`", on.v))
                    .hint("write e.g. `queue main on em0 bandwidth 20M`, or `flows N` alone for FQ-CoDel at the link's speed"),
                );
                return None;
            }
        };
        let span = d.span;
        let mut t = Tree::default();
        self.queue55(i, &on.v, None, bw, &mut t, 0);
        let default_queue = self.default_check(&t, &on, "mark one leaf queue with `default`");
        self.drain_warnings(&t, bw, SchedKind::Hfsc, false);
        self.ingress_checks(&t, &on);
        self.ack_filter_warnings(&t, false);
        self.isolation_checks(&t, false);
        Some(IfaceQueueing {
            ifname: on.v,
            sched: SchedKind::Hfsc,
            bandwidth: bw,
            tbrsize: None,
            queues: t.queues,
            default_queue,
            pipe: None,
            line: self.cx.line(span),
            dialect: crate::ir::Dialect::OpenBsd,
            root_flags: crate::ir::RootFlags::default(),
        })
    }
}
