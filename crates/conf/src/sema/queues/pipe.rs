//! dummynet pipes and the weighted queues that feed them.

use super::{Kind, QMeta, Tree, B, DEFAULT_QLIMIT};
use crate::ast::{PipeDecl, Sp};
use crate::diag::{Diagnostic, Span};
use crate::ir::{IfaceQueueing, Pipe, PipeSched, Queue, SchedKind, TcpControl};
use crate::units::Bw;

impl B<'_, '_, '_> {
    // ---- dummynet ----

    pub(super) fn pipe(&mut self, p: &PipeDecl) -> Option<IfaceQueueing> {
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
        let pipe_qlimit = self.outer_qlimit(&p.qlimit);
        // The pipe's TCP control covers each of its queues; a queue may add
        // its own.
        let pipe_tcp = TcpControl {
            ack_pacing: p.ack_pacing.is_some(),
            window_clamp: p.window_clamp.is_some(),
        };
        let mut t = Tree::default();
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
                .or(d.sched.as_ref().map(|x| (x.span, x.v.opts_name())))
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
            if let Some(at) = d.ingress {
                self.cx.err(
                    Diagnostic::error("`ingress` is an option of the pipe", at)
                        .label("the pipe's link is what a dropped packet occupies")
                        .hint(format!(
                            "write it on the pipe: `pipe {} on IF bandwidth BW … ingress`",
                            p.name.v
                        )),
                );
            }
            let mut q = Queue::new(&d.name.v, self.cx.line(d.span));
            q.ingress = p.ingress.is_some();
            let ql = self.qlimit(d, pipe_qlimit);
            q.qlimit = ql.unwrap_or(DEFAULT_QLIMIT as u32);
            q.default = d.default.is_some();
            q.ack_filter = d.ack_filter.as_ref().map(|a| a.v);
            // The pipe's covers each queue; a queue may name its own.
            q.isolate = d.isolate.as_ref().or(p.isolate.as_ref()).map(|a| a.v);
            let w = d.weight.as_ref().map_or(1, |w| w.v);
            if !(1..=100).contains(&w) {
                let span = d.weight.as_ref().map_or(d.name.span, |w| w.span);
                self.cx.err(
                    Diagnostic::error(format!("weight out of range: {w}"), span)
                        .label("allowed 1..100"),
                );
            }
            q.weight = Some(w.clamp(1, 100) as u32);
            // A priority here is already an error above: nothing to point at.
            let meta = QMeta {
                priority: None,
                ..QMeta::of(d, ql.is_some())
            };
            q.tcp = pipe_tcp.union(meta.tcp());
            t.push(q, meta);
        }
        if t.queues.is_empty() {
            // A pipe without queues is one queue: rules may name the pipe itself.
            let mut q = Queue::new(&p.name.v, self.cx.line(p.span));
            q.qlimit = pipe_qlimit as u32;
            q.default = true;
            q.weight = Some(1);
            q.ingress = p.ingress.is_some();
            q.isolate = p.isolate.as_ref().map(|a| a.v);
            q.tcp = pipe_tcp;
            t.push(
                q,
                QMeta {
                    qlimit_ok: true,
                    name: p.name.span,
                    qlimit: p.qlimit.as_ref().map(|q| q.span),
                    default: None,
                    priority: None,
                    ingress: None,
                    ack_filter: None,
                    isolate: None,
                    ack_pacing: None,
                    window_clamp: None,
                    abs_bw: false,
                },
            );
        }
        let default_queue =
            self.default_check(&t, &p.name, "mark one of the pipe's queues with `default`");
        let fq = matches!(p.sched, PipeSched::FqCodel(_));
        self.drain_warnings(&t, bw, SchedKind::Pipe, fq);
        if let (true, Some(ql)) = (fq, p.qlimit.as_ref()) {
            self.cx.err(
                Diagnostic::warning(
                    format!("`qlimit` has no effect on pipe `{}`", p.name.v),
                    ql.span,
                )
                .label("dummynet's fq_codel keeps its own queues, bounded by its own `limit` (10240 packets unless set)")
                .hint("write `sched fq_codel (limit N)`"),
            );
        }
        if let Some(at) = p.ingress {
            self.ingress_upload_warning(iface, at);
            if !fq {
                self.cx.err(
                    Diagnostic::warning(format!("pipe `{}` has no AQM for `ingress` to charge", p.name.v), at)
                        .label("only its tail drops are charged: a tail-drop queue behind the bottleneck fills before it drops")
                        .hint("use `sched fq_codel`"),
                );
            }
        }
        self.ack_filter_warnings(&t, matches!(p.sched, PipeSched::Fifo));
        // Only fq_codel pipes have flow queues; the pipe's own word or a
        // queue's.
        let asked = p.isolate.as_ref().or(self
            .decls
            .iter()
            .filter(|d| d.pipe.as_ref().is_some_and(|x| x.v == p.name.v))
            .find_map(|d| d.isolate.as_ref()));
        if let (false, Some(m)) = (fq, asked) {
            self.cx.err(
                Diagnostic::error(
                    format!(
                        "`{}` on pipe `{}` cannot isolate hosts",
                        m.v.name(),
                        p.name.v
                    ),
                    m.span,
                )
                .label("host isolation shares flow queues; only `sched fq_codel` has them")
                .hint(format!("write `sched fq_codel {}` on the pipe", m.v.name())),
            );
        }
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
                ingress: p.ingress.is_some(),
                ack_filter: p.ack_filter.as_ref().map(|a| a.v),
                isolate: p.isolate.as_ref().map(|a| a.v),
                tcp: pipe_tcp,
            }),
            line: self.cx.line(p.span),
            dialect: crate::ir::Dialect::Altq,
            root_flags: crate::ir::RootFlags::default(),
        })
    }
}
