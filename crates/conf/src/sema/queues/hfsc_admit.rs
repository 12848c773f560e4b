//! pfctl's admission control for ALTQ HFSC trees (`eval_pfqueue_hfsc` in
//! pfctl_altq.c), refused in pfctl's words.
//!
//! # Principles
//! - Siblings' real-time curves together stay under 80 % of the
//!   interface ("real-time sc exceeds 80% of the interface bandwidth"):
//!   ALTQ keeps 20 % so guarantees never over-commit the link.
//! - Siblings' link-sharing curves together stay under their parent's
//!   (the interface's for the top level): "linkshare sc exceeds parent's sc".
//! - An upper limit is at most the interface's rate and at least the
//!   real-time rate; a two-piece curve is concave (`m1` ≥ `m2`, or `m1`
//!   0) and never has `m2` 0 after a non-zero `m1`.
//! - "Under" is exact for piecewise-linear curves from the origin: both
//!   are compared at every breakpoint and in their final slope.

use super::{Tree, B};
use crate::diag::Diagnostic;
use crate::ir::ServiceCurve;
use sluice_time::Rate;

/// Service (bit·ns/s) of `c` in the first `t` ns.
fn value(c: &ServiceCurve, t: u64) -> u128 {
    let (m1, d, m2) = (u128::from(c.m1.0), c.d.0, u128::from(c.m2.0));
    if d == 0 {
        return m2 * u128::from(t);
    }
    m1 * u128::from(t.min(d)) + m2 * u128::from(t.saturating_sub(d))
}

/// Whether the sum of `curves` is at or under `limit` at every time.
fn under(curves: &[ServiceCurve], limit: &ServiceCurve) -> bool {
    let at = |t: u64| curves.iter().map(|c| value(c, t)).sum::<u128>() <= value(limit, t);
    let slope: u128 = curves.iter().map(|c| u128::from(c.m2.0)).sum();
    curves
        .iter()
        .chain(std::iter::once(limit))
        .filter(|c| c.d.0 > 0)
        .all(|c| at(c.d.0))
        && slope <= u128::from(limit.m2.0)
}

impl B<'_, '_, '_> {
    /// pfctl's HFSC checks over the ALTQ tree `t` on an interface of rate `iface`.
    pub(super) fn hfsc_admission(&mut self, t: &Tree, iface: Rate) {
        self.hfsc_curves(t, iface);
        self.hfsc_sibling_sums(t, iface);
    }

    /// Each queue's own curves: concave, `m2` set, upper limit in range.
    fn hfsc_curves(&mut self, t: &Tree, iface: Rate) {
        for (q, m) in t.queues.iter().zip(&t.meta) {
            for (what, c) in [
                ("realtime", q.realtime),
                ("linkshare", q.linkshare),
                ("upperlimit", q.upperlimit),
            ] {
                let Some(c) = c else { continue };
                if c.m1.0 > 0 && c.m2.0 == 0 {
                    self.cx.err(
                        Diagnostic::error(format!("m2 is zero for {}", q.name), m.name)
                            .label(format!("its {what} curve ends at 0 after {}", c.m1))
                            .hint("the last rate of `(m1 d m2)` is the one the queue keeps"),
                    );
                } else if c.m1.0 > 0 && c.m1 < c.m2 {
                    self.cx.err(
                        Diagnostic::error(format!("m1 must be zero for convex curve: {}", q.name), m.name)
                            .label(format!("{what} ({} {} {}) starts slower than it goes on", c.m1, c.d, c.m2))
                            .hint("HFSC curves are concave: a burst above the rate (m1 > m2), or the rate alone"),
                    );
                }
            }
            if let Some(ul) = q.upperlimit {
                if ul.m1 > iface || ul.m2 > iface {
                    self.cx.err(
                        Diagnostic::error("upper-limit larger than interface bandwidth", m.name)
                            .label(format!(
                                "upperlimit of `{}` above the interface's {iface}",
                                q.name
                            ))
                            .hint(format!("at most {iface}")),
                    );
                } else if q.realtime.is_some_and(|rt| rt.m2 > ul.m2) {
                    self.cx.err(
                        Diagnostic::error("upper-limit sc smaller than real-time sc", m.name)
                            .label(format!("`{}` guarantees more than it may send", q.name))
                            .hint("raise upperlimit to at least the realtime rate"),
                    );
                }
            }
        }
    }

    /// Siblings' realtime curves against 80 % of the interface, their
    /// linkshare curves against their parent's; each reported once, at
    /// the queue that tips the sum over.
    fn hfsc_sibling_sums(&mut self, t: &Tree, iface: Rate) {
        let rt_cap = ServiceCurve::linear(Rate(iface.0 / 100 * 80));
        let parents = std::iter::once(None).chain((0..t.queues.len()).map(Some));
        for p in parents {
            let kids: Vec<usize> = (0..t.queues.len())
                .filter(|&i| t.queues[i].parent == p)
                .collect();
            let ls_cap = p
                .and_then(|p| t.queues[p].linkshare)
                .unwrap_or(ServiceCurve::linear(iface));
            let (mut rt, mut ls) = (Vec::new(), Vec::new());
            // A child above its parent is already reported as such.
            let above = kids
                .iter()
                .any(|&k| t.queues[k].bandwidth.is_some_and(|b| b > ls_cap.m2));
            let (mut rt_over, mut ls_over) = (false, above);
            let hint = if kids.iter().any(|&k| t.queues[k].bandwidth.is_none()) {
                "a queue without bandwidth or linkshare shares at its parent's whole rate (pfctl's 100%): give each sibling its share"
            } else {
                "lower the children's bandwidth or linkshare so that together they fit in their parent's"
            };
            for &k in &kids {
                let (q, m) = (&t.queues[k], &t.meta[k]);
                if let Some(c) = q.realtime.filter(|_| !rt_over) {
                    rt.push(c);
                    if !under(&rt, &rt_cap) {
                        rt_over = true;
                        self.cx.err(
                            Diagnostic::error(
                                format!("real-time sc exceeds 80% of the interface bandwidth ({})", rt_cap.m2),
                                m.name,
                            )
                            .label(format!("with `{}` the realtime curves under one parent sum above it", q.name))
                            .hint("ALTQ keeps 20% of the link out of real-time guarantees: lower them"),
                        );
                    }
                }
                if let Some(c) = q.linkshare.filter(|_| !ls_over) {
                    ls.push(c);
                    if !under(&ls, &ls_cap) {
                        ls_over = true;
                        self.cx.err(
                            Diagnostic::error("linkshare sc exceeds parent's sc", m.name)
                                .label(format!("with `{}` its siblings' linkshare sums above their parent's {}", q.name, ls_cap.m2))
                                .hint(hint),
                        );
                    }
                }
            }
        }
    }
}
