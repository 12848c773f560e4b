//! The checks of a built tree that only warn: TCP control without a real
//! rate, host isolation where it cannot act, an ACK filter with no effect.

use super::{altq, Tree, B};
use crate::ast::Sp;
use crate::diag::Diagnostic;
use crate::ir::HostIsolation;

impl B<'_, '_, '_> {
    /// `ack-pacing` / `window-clamp` on an ALTQ queue with no rate to
    /// control at: the engine uses the queue's bandwidth, else the nearest
    /// ancestor's, else the interface's, and here every one of them is a
    /// share of the 1 Gbit/s sluice assumes for an `altq on` without an
    /// absolute bandwidth (`iface_abs` false). The other dialects cannot
    /// get here: a 5.5+ root and a pipe must have an absolute bandwidth.
    pub(super) fn tcp_rate_warnings(&mut self, t: &Tree, iface: &Sp<String>, iface_abs: bool) {
        if iface_abs {
            return;
        }
        for (i, m) in t.meta.iter().enumerate() {
            let mut anchored = false;
            let mut at = Some(i);
            // Parents come before children: each step goes up, so at most
            // `queues.len()` steps.
            for _ in 0..=t.queues.len() {
                let Some(j) = at else { break };
                if t.meta.get(j).is_some_and(|x| x.abs_bw) {
                    anchored = true;
                    break;
                }
                at = t.queues.get(j).and_then(|q| q.parent).filter(|&p| p < j);
            }
            if anchored {
                continue;
            }
            let q = &t.queues[i];
            for (word, span) in [
                ("ack-pacing", m.ack_pacing),
                ("window-clamp", m.window_clamp),
            ] {
                let Some(span) = span else { continue };
                self.cx.err(
                    Diagnostic::warning(format!("`{word}` on `{}` has no rate to work at", q.name), span)
                        .label(format!(
                            "no absolute bandwidth on the queue, its parents or `altq on {}`: each flow's share would come from the assumed {}",
                            iface.v,
                            altq::ASSUMED_IFSPEED
                        ))
                        .hint("give `altq on` the line's rate (e.g. `bandwidth 4850Kb`, ~95% of it) or the queue an absolute bandwidth"),
                );
            }
        }
    }

    /// Host isolation where it cannot act: it shares a leaf's flow queues,
    /// so a queue with children or without flow queues cannot isolate
    /// (`fq` tells that the leaves of this tree are fq_codel's; else a leaf
    /// needs its own `flows N`). An error: the configuration asks for a
    /// fairness it would not get.
    pub(super) fn isolation_checks(&mut self, t: &Tree, fq: bool) {
        for (q, m) in t.queues.iter().zip(&t.meta) {
            let (Some(mode), Some(at)) = (q.isolate, m.isolate) else {
                continue;
            };
            // TCP control written on the queue or an ancestor (a pipe's
            // is copied to its queues).
            let mut tcp = q.tcp;
            let mut up = q.parent;
            for _ in 0..t.queues.len() {
                let Some(p) = up.and_then(|p| t.queues.get(p)) else {
                    break;
                };
                tcp = tcp.union(p.tcp);
                up = p.parent;
            }
            let (label, hint) = if tcp.any() && mode == HostIsolation::Both {
                (
                    "TCP control (`ack-pacing`, `window-clamp`) shares a queue by one end's hosts, not by both",
                    "use `dual-srchost` on the upload queue or `dual-dsthost` on the download queue; TCP control then shares by host too".to_string(),
                )
            } else if !q.children.is_empty() {
                (
                    "a queue with child queues holds no packets",
                    format!("write `{}` on the leaf queues with `flows N`", mode.name()),
                )
            } else if !fq && q.flows.is_none() {
                (
                    "host isolation shares flow queues, and this queue has none",
                    format!("add `flows 1024` to make it a flow queue (FQ-CoDel), then `{}` shares it by host", mode.name()),
                )
            } else {
                continue;
            };
            self.cx.err(
                Diagnostic::error(
                    format!("`{}` on `{}` cannot isolate hosts", mode.name(), q.name),
                    at,
                )
                .label(label)
                .hint(hint),
            );
        }
    }

    /// `ack-filter` where it cannot act: a queue with children holds no
    /// packets, and the queues of a fifo pipe (`fifo_pipe`) share the
    /// pipe's one FIFO.
    pub(super) fn ack_filter_warnings(&mut self, t: &Tree, fifo_pipe: bool) {
        for (q, m) in t.queues.iter().zip(&t.meta) {
            let (Some(mode), Some(at)) = (q.ack_filter, m.ack_filter) else {
                continue;
            };
            let why = if !q.children.is_empty() {
                Some((
                    "a queue with child queues holds no packets",
                    "write it on the leaf queues that carry the ACKs (the upload's)",
                ))
            } else if q.codel.is_some() {
                Some((
                    "sluice's CoDel queue has no ACK filter",
                    "drop `codel` (the FIFO, RED and RIO have one) or use OpenBSD 5.5+ queues with `flows N`",
                ))
            } else if fifo_pipe {
                Some((
                    "the queues of a fifo pipe share the pipe's one FIFO",
                    "write it on the pipe: `pipe NAME on IF … ack-filter`",
                ))
            } else {
                None
            };
            if let Some((label, hint)) = why {
                self.cx.err(
                    Diagnostic::warning(
                        format!("`{}` on `{}` has no effect", mode.name(), q.name),
                        at,
                    )
                    .label(label)
                    .hint(hint),
                );
            }
        }
    }
}
