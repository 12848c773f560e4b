//! ALTQ trees: `altq on IF SCHED … queue { … }` and the `queue` lines it reaches.

use super::{curve, resolve, Kind, QMeta, SumRule, Tree, B, DEFAULT_QLIMIT, MAX_DEPTH};
use crate::ast::{AltqDecl, QueueDecl, Sp};
use crate::diag::Diagnostic;
use crate::ir::{
    CodelParams, Dialect, IfaceQueueing, Queue, RootFlags, SchedKind, ServiceCurve,
    FAIRQ_MAX_BUCKETS,
};
use crate::units::Bw;
use sluice_time::Rate;

/// Link speed assumed for `bandwidth N%` and a missing bandwidth on `altq`.
pub(crate) const ASSUMED_IFSPEED: Rate = Rate::gbps(1);

impl B<'_, '_, '_> {
    // ---- ALTQ ----

    pub(super) fn altq(&mut self, a: &AltqDecl) -> Option<IfaceQueueing> {
        let Some(sched) = a.sched.as_ref().map(|s| s.v) else {
            self.cx.err(
                Diagnostic::error(
                    format!("`altq on {}` needs a scheduler", a.iface.v),
                    a.iface.span,
                )
                .hint("add priq, cbq, hfsc or fairq"),
            );
            return None;
        };
        // pf takes the interface's link speed for a percentage or a missing
        // bandwidth. sluice decides before it sees the interface, so it
        // assumes the common NIC speed and says so.
        let speed_warning = |what: String, span| {
            Diagnostic::warning(what, span)
                .label(format!("pf would use the interface's speed; sluice assumes {ASSUMED_IFSPEED}"))
                .hint("shaping only helps below the bottleneck's rate: write an absolute bandwidth, ~95% of the line rate")
        };
        let bw = match &a.bandwidth {
            Some(Sp { v: Bw::Abs(r), .. }) if r.0 > 0 => *r,
            Some(Sp {
                v: Bw::Pct(p),
                span,
            }) if *p > 0 && *p <= 10_000 => {
                let r = Rate((ASSUMED_IFSPEED.0 as u128 * *p as u128 / 10_000) as u64);
                self.cx.err(speed_warning(
                    format!("interface speed unknown: bandwidth {r} assumed"),
                    *span,
                ));
                r
            }
            Some(b) => {
                self.cx.err(
                    Diagnostic::error("interface bandwidth out of range", b.span)
                        .label("an absolute rate (e.g. 100Kb, 20Mb) or 1%..100% of the link"),
                );
                return None;
            }
            None => {
                self.cx.err(speed_warning(
                    format!(
                        "`altq on {}` names no bandwidth: {ASSUMED_IFSPEED} assumed",
                        a.iface.v
                    ),
                    a.iface.span,
                ));
                ASSUMED_IFSPEED
            }
        };
        if let Some(c) = &a.codel {
            return self.altq_codel(a, c, bw);
        }
        if a.children.is_empty() {
            self.cx.err(
                Diagnostic::error(format!("`altq on {}` has no queues", a.iface.v), a.span)
                    .hint("add `queue { name, … }`"),
            );
            return None;
        }
        self.pfctl_root_class(a, sched);
        let altq_qlimit = self.outer_qlimit(&a.qlimit);
        let mut t = Tree::default();
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
        // pfctl sums CBQ's bandwidths (a warning) and FAIRQ's link-sharing
        // curves (its bandwidth by default; an error) against the parent;
        // HFSC's curves are checked as curves (hfsc_admit).
        if sched == SchedKind::Hfsc {
            self.hfsc_admission(&t, bw);
        } else if sched != SchedKind::Priq {
            self.children_sum(
                &t,
                None,
                bw,
                a.iface.span,
                &format!("`altq on {}`", a.iface.v),
                SumRule::of(sched),
            );
        }
        let opt = match sched {
            SchedKind::Priq => "priq(default)",
            SchedKind::Cbq => "cbq(default)",
            SchedKind::Fairq => "fairq(default)",
            _ => "hfsc(default)",
        };
        let default_queue = self.default_check_in(
            &t,
            &a.iface,
            &format!("mark one queue with {opt}"),
            sched == SchedKind::Cbq,
        );
        if matches!(sched, SchedKind::Priq | SchedKind::Fairq) {
            self.unique_priorities(&t, &a.iface.v, sched);
        }
        self.drain_warnings(&t, bw, sched, false);
        self.ingress_checks(&t, &a.iface);
        self.ack_filter_warnings(&t, false);
        let iface_abs = matches!(&a.bandwidth, Some(Sp { v: Bw::Abs(r), .. }) if r.0 > 0);
        self.tcp_rate_warnings(&t, &a.iface, iface_abs);
        if let Some(f) = a
            .root_flags
            .as_ref()
            .filter(|f| f.v.dropped().next().is_some())
        {
            let words: Vec<&str> = f.v.dropped().collect();
            self.cx.err(
                Diagnostic::warning(
                    format!("`{}` on the altq line shares nothing", words.join(" ")),
                    f.span,
                )
                .label("pfctl gives it to ALTQ's root class, which has no siblings to share with: dropped")
                .hint(format!(
                    "to share a parent's bandwidth, write it on its queues: `queue NAME … {}(… {} …)`",
                    sched.name(),
                    words[0]
                )),
            );
        }
        if let Some(f) = a
            .root_flags
            .as_ref()
            .filter(|f| f.v.words().next().is_some())
        {
            let words: Vec<&str> = f.v.words().collect();
            self.cx.err(
                Diagnostic::warning(
                    format!("`{}` on the altq line has no effect", words.join(" ")),
                    f.span,
                )
                .label("pfctl gives these to ALTQ's root class, which holds no packets")
                .hint(format!(
                    "to act on them, write them on the queues: `queue NAME … {}({})`",
                    sched.name(),
                    words.join(" ")
                )),
            );
        }
        Some(IfaceQueueing {
            ifname: a.iface.v.clone(),
            sched,
            bandwidth: bw,
            tbrsize: a.tbrsize.as_ref().map(|t| t.v as u32),
            queues: t.queues,
            default_queue,
            pipe: None,
            line: self.cx.line(a.span),
            dialect: Dialect::Altq,
            root_flags: RootFlags {
                upperlimit: self.root_upperlimit(a, bw),
                ..a.root_flags
                    .as_ref()
                    .map(|f| RootFlags {
                        unshared: [false; 4],
                        ..f.v
                    })
                    .unwrap_or_default()
            },
        })
    }

    /// The root class `pfctl -nv` prints for a CBQ or HFSC `altq on IF`:
    /// `queue root_IF on IF bandwidth BW priority 0 [cbq( wrr root )]
    /// {q1, q2}` with the altq's own queues as children. It is the altq
    /// line again: taken as read, not a queue of its own.
    fn pfctl_root_class(&mut self, a: &AltqDecl, sched: SchedKind) {
        if !matches!(sched, SchedKind::Cbq | SchedKind::Hfsc) {
            return;
        }
        let name = format!("root_{}", a.iface.v);
        let mut want: Vec<&str> = a.children.iter().map(|c| c.v.as_str()).collect();
        want.sort_unstable();
        let found = (0..self.decls.len()).find(|&i| {
            let d = &self.decls[i];
            let mut kids: Vec<&str> = d.children.iter().map(|c| c.v.as_str()).collect();
            kids.sort_unstable();
            !self.dup[i]
                && self.kinds[i] == Kind::Altq
                && d.name.v == name
                && d.on.as_ref().is_none_or(|o| o.v == a.iface.v)
                && kids == want
        });
        if let Some(i) = found {
            self.used[i] = true;
        }
    }

    /// `altq on IF codel[(…)] bandwidth BW [qlimit N]` (FreeBSD ALTQ,
    /// pfSense's CODELQ): no classes, every packet of the interface waits in
    /// one CoDel queue of `qlimit` packets (altq_codel's default 50) served
    /// at `bandwidth`. In the IR: a PRIQ whose one default class is that
    /// queue, named [`CodelParams::ROOT_QUEUE`].
    fn altq_codel(&mut self, a: &AltqDecl, c: &Sp<CodelParams>, bw: Rate) -> Option<IfaceQueueing> {
        if let Some(first) = a.children.first() {
            self.cx.err(
                Diagnostic::error(format!("`altq on {} codel` has no queues", a.iface.v), first.span)
                    .label("CoDel as the interface's scheduler is one queue without classes")
                    .hint("drop `queue { … }`, or keep the classes and give each CoDel: `altq on IF priq … queue { … }` with `priq(codel)`"),
            );
            return None;
        }
        let mut q = Queue::new(CodelParams::ROOT_QUEUE, self.cx.line(a.span));
        q.qlimit = self.outer_qlimit(&a.qlimit) as u32;
        q.default = true;
        q.codel = Some(c.v);
        Some(IfaceQueueing {
            ifname: a.iface.v.clone(),
            sched: SchedKind::Priq,
            bandwidth: bw,
            tbrsize: a.tbrsize.as_ref().map(|t| t.v as u32),
            queues: vec![q],
            default_queue: 0,
            pipe: None,
            line: self.cx.line(a.span),
            dialect: Dialect::Altq,
            root_flags: RootFlags::default(),
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
                .hint(hint)
                .did_you_mean(&name.v, self.decls.iter().map(|d| d.name.v.as_str())),
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
        if let Some(w) = &d.pfctl_root {
            self.cx.err(
                Diagnostic::error(format!("unknown cbq flag \"{}\"", w.v), w.span)
                    .label("pfctl prints `wrr root` on the root class it makes, and refuses them as input")
                    .hint(format!("drop them; only `queue root_{iface} …` as `pfctl -nv` prints it may carry them")),
            );
        }
        if let Some(ns) = &d.new_style {
            let hint = match ns.v {
                "flows" | "quantum" => "ALTQ queues have no flows; for FQ-CoDel use OpenBSD 5.5+ queues (`queue NAME on IF …` with `flows N`) instead of altq",
                "min" | "max" | "burst" => "in ALTQ write hfsc(realtime X), hfsc(upperlimit X) or hfsc(linkshare (m1 d m2))",
                "default" => "in ALTQ the default is a scheduler option: priq(default), cbq(default) or hfsc(default)",
                "ack-filter" | "ack-filter-aggressive" => "in ALTQ the ACK filter is a scheduler option: priq(ack-filter), cbq(ack-filter) or hfsc(ack-filter)",
                "dual-srchost" | "dual-dsthost" | "triple-isolate" => "host isolation shares flow queues, which ALTQ queues do not have; use OpenBSD 5.5+ queues with `flows N` or an fq_codel pipe",
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
                    .label(format!("this interface runs {}", sched.name())),
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
        if sched == SchedKind::Fairq {
            // pfctl takes a FAIRQ tree (it checks the children's
            // link-sharing against the parent's); ALTQ's fairq is flat, so
            // every queue of it is a class of its own priority.
            if let Some(c) = d.children.first() {
                self.cx.err(
                    Diagnostic::warning("FAIRQ is flat: child queues are classes of their own", c.span)
                        .label("served by its own priority, not within its parent's bandwidth")
                        .hint("the tree only groups the names (and resolves percentages); use cbq or hfsc to share a parent's bandwidth"),
                );
            }
        }
        let line = self.cx.line(d.span);
        let mut q = Queue::new(&d.name.v, line);
        q.parent = parent;
        let max_prio = if sched == SchedKind::Priq { 15 } else { 7 };
        if let Some(p) = &d.priority {
            if p.v > max_prio {
                self.cx.err(
                    Diagnostic::error(format!("priority out of range: {}", p.v), p.span)
                        .label(format!("allowed 0..{max_prio} for {}", sched.name())),
                );
            }
            // Keep the written value even when out of range: the file is
            // rejected anyway, and a clamped value would echo as a false
            // duplicate priority.
            q.priority = p.v as u8;
        }
        let ql = self.qlimit(d, def_qlimit);
        q.qlimit = ql.unwrap_or(DEFAULT_QLIMIT as u32);
        q.bandwidth = self.bandwidth(d, parent_rate, parent.is_some(), true);
        q.default = d.default.is_some();
        q.red = d.red;
        q.rio = d.rio;
        q.ecn = d.ecn;
        q.borrow = d.borrow;
        q.ingress = d.ingress.is_some();
        q.ack_filter = d.ack_filter.as_ref().map(|a| a.v);
        q.codel = d.codel.map(|_| CodelParams::default());
        if let (Some(at), true) = (d.codel, d.red || d.rio) {
            // FreeBSD's ALTQ sets up RED, then CoDel over it: CoDel decides.
            self.cx.err(
                Diagnostic::warning(
                    format!(
                        "`codel` and `{}` on `{}`: CoDel decides",
                        if d.rio { "rio" } else { "red" },
                        d.name.v
                    ),
                    at,
                )
                .label("one queue has one AQM; FreeBSD's ALTQ uses CoDel when both are given")
                .hint("drop `red`/`rio` (or `codel`) to say which one you mean"),
            );
        }
        let meta = QMeta::of(d, ql.is_some());
        q.tcp = meta.tcp();
        q.realtime = d.realtime.as_ref().map(|c| curve(&c.v, parent_rate));
        q.linkshare = d.linkshare.as_ref().map(|c| curve(&c.v, parent_rate));
        q.upperlimit = d.upperlimit.as_ref().map(|c| curve(&c.v, parent_rate));
        if sched == SchedKind::Fairq {
            self.fairq_options(d, &mut q, parent_rate);
        }
        if matches!(sched, SchedKind::Hfsc | SchedKind::Fairq) && q.linkshare.is_none() {
            q.linkshare = q.bandwidth.map(ServiceCurve::linear);
        }
        // pfctl's queue_opts start at `bw_percent = 100`, and an HFSC
        // class's linkshare defaults to its bandwidth: without either, it
        // shares as its parent's rate (written out when printed).
        if sched == SchedKind::Hfsc && q.linkshare.is_none() {
            q.linkshare = Some(ServiceCurve::linear(parent_rate));
        }
        // The same default for a CBQ class: its parent's rate, written out.
        if sched == SchedKind::Cbq && q.bandwidth.is_none() {
            q.bandwidth = Some(parent_rate);
        }
        let rate = q.bandwidth.unwrap_or(parent_rate);
        let idx = t.queues.len();
        if let Some(p) = parent {
            if let Some(pq) = t.queues.get_mut(p) {
                pq.children.push(idx);
            }
        }
        t.push(q, meta);
        if sched == SchedKind::Priq {
            return;
        }
        path.push(name.v.clone());
        let children = d.children.clone();
        for c in &children {
            self.altq_queue(iface, sched, def_qlimit, c, Some(idx), rate, t, path);
        }
        path.pop();
        if sched == SchedKind::Hfsc {
            return;
        }
        self.children_sum(
            t,
            Some(idx),
            rate,
            name.span,
            &format!("`{}`", name.v),
            SumRule::of(sched),
        );
    }

    /// FAIRQ's own options of `d` into `q`: `buckets` rounded up to a power
    /// of two as ALTQ does (with a warning), `hogs` resolved against the
    /// interface, `linkshare` accepted with a warning (ALTQ ignores it).
    fn fairq_options(&mut self, d: &QueueDecl, q: &mut Queue, iface_rate: Rate) {
        // `buckets 0` is ALTQ's default (256), as `hogs 0` is no hogs.
        if let Some(b) = d.buckets.as_ref().filter(|b| b.v != 0) {
            let max = FAIRQ_MAX_BUCKETS as u32;
            let n = b.v.min(FAIRQ_MAX_BUCKETS) as u32;
            let up = n.next_power_of_two();
            if b.v > FAIRQ_MAX_BUCKETS {
                self.cx.err(
                    Diagnostic::warning(format!("buckets {} is above FAIRQ's {max}", b.v), b.span)
                        .label(format!("{max} used, as ALTQ does"))
                        .hint(format!("write `buckets {max}` or fewer")),
                );
            } else if up != n {
                self.cx.err(
                    Diagnostic::warning(format!("buckets {n} is not a power of two"), b.span)
                        .label(format!("rounded up to {up}, as ALTQ does"))
                        .hint(format!("write `buckets {up}`")),
                );
            }
            q.buckets = Some(up);
        }
        q.hogs = d
            .hogs
            .as_ref()
            .map(|h| resolve(h.v, iface_rate))
            .filter(|r| r.0 != 0);
        if let Some(c) = &d.linkshare {
            self.cx.err(
                Diagnostic::warning("FAIRQ's `linkshare` has no effect", c.span)
                    .label("ALTQ's fairq parses it and does not use it; neither does sluice")
                    .hint("the class's `bandwidth` is the rate above which it yields to lower priorities"),
            );
        }
    }
}

/// Is a queue marked `default` left out of every tree by a name that
/// leads nowhere (a misspelt `parent`, an ALTQ queue no `{ … }` lists)?
/// Its own error says why; "no default queue" would only echo it.
pub(super) fn stray_default(altqs: &[AltqDecl], decls: &[QueueDecl], kinds: &[Kind]) -> bool {
    let named = |n: &str| decls.iter().any(|x| x.name.v == n);
    let listed = |n: &str| {
        altqs.iter().flat_map(|a| &a.children).any(|c| c.v == n)
            || decls.iter().flat_map(|x| &x.children).any(|c| c.v == n)
    };
    decls.iter().zip(kinds).any(|(d, k)| {
        d.default.is_some()
            && match k {
                Kind::Child55 => d.parent.as_ref().is_some_and(|p| !named(&p.v)),
                Kind::Altq => !listed(&d.name.v),
                _ => false,
            }
    })
}

impl B<'_, '_, '_> {
    /// The altq line's `upperlimit` against the interface's `bw`: pfctl
    /// gives it to the root class, where it caps the tree; above the
    /// interface it is refused as on any queue.
    fn root_upperlimit(&mut self, a: &AltqDecl, bw: Rate) -> Option<ServiceCurve> {
        let ul = a.upperlimit.as_ref()?;
        let c = curve(&ul.v, bw);
        if c.m2 > bw {
            self.cx.err(
                Diagnostic::error(
                    format!("upperlimit {} is higher than the interface's {bw}", c.m2),
                    ul.span,
                )
                .label("above the interface's bandwidth")
                .hint(
                    "on the altq line it caps the whole tree: give a rate at or below `bandwidth`",
                ),
            );
            return None;
        }
        if c.m1 != c.m2 && c.d.0 > 0 {
            self.cx.err(
                Diagnostic::warning("the altq line's upperlimit caps at its m2", ul.span)
                    .label(format!("the tree is served at {} throughout", c.m2))
                    .hint("its burst (m1 for d) applies on a queue, not on the interface"),
            );
        }
        Some(c)
    }
}
