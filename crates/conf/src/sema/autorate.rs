//! `autorate (min BW, max BW, dry-run, probe ADDR, reconfig …)` (issue #16,
//! docs/autorate.md).
//!
//! # Principles
//! - The controller changes the rate of an interface's shaper, so the
//!   option belongs where that rate is written: the `altq on` line, the
//!   OpenBSD 5.5+ root queue (`queue NAME on IF` without `parent`), or the
//!   pipe. Anywhere else it is an error naming the right place.
//! - Bounds: `min` defaults to a quarter of the interface's bandwidth,
//!   `max` to the bandwidth; a percentage is of the bandwidth (as a
//!   queue's is of its parent's). `0 < min ≤ bandwidth ≤ max`: the
//!   configured bandwidth is where the controller starts, so it must lie
//!   within the bounds.
//! - One `autorate` per interface.
//! - Its signal is the passive RTT of TCP states: with no stateful `pass`
//!   rule that can match TCP, it would never hear anything. That is a
//!   warning (the file still runs; the controller holds), unless the
//!   interface has a `probe`, whose echo gives a reading without states.
//! - `probe` must be an address one host beyond the link answers from:
//!   not unspecified, multicast, broadcast or loopback (an IPv4-mapped
//!   IPv6 address is judged as the IPv4 one it maps).
//! - `reconfig`: each value's range is the parser's; here, how they
//!   relate. `at < every` (an offset into the period), and `lead + hold <
//!   every`, or the rate would be at `min` all the time. `lead` and `hold`
//!   default to [`Reconfig::DEFAULT_LEAD`] and [`Reconfig::DEFAULT_HOLD`].

use super::Ctx;
use crate::ast::{AltqDecl, AutorateAst, PipeDecl, QueueDecl, ReconfigAst, Sp, PROBE_HINT};
use crate::diag::{Diagnostic, Span};
use crate::ir::{Action, Autorate, Config, Reconfig, StatePolicy};
use crate::units::Bw;
use sluice_time::Rate;
use std::net::IpAddr;

/// Why `a` cannot be a probe address (message words, label), if it cannot.
fn unpingable(a: IpAddr) -> Option<(&'static str, &'static str)> {
    // `::ffff:127.0.0.1` is 127.0.0.1 on the wire of a dual-stack socket.
    let a = a.to_canonical();
    if a.is_unspecified() {
        Some(("the unspecified address", "no host has this address"))
    } else if a.is_multicast() {
        Some(("a multicast address", "a probe needs one host to answer"))
    } else if matches!(a, IpAddr::V4(v4) if v4.is_broadcast()) {
        Some(("the broadcast address", "a probe needs one host to answer"))
    } else if a.is_loopback() {
        Some((
            "a loopback address",
            "its echo never crosses the link: no delay reading",
        ))
    } else {
        None
    }
}

/// Reports a `probe` address no hop beyond the link can answer from;
/// true when it is fine.
fn check_probe(cx: &mut Ctx, p: &Sp<IpAddr>) -> bool {
    let Some((what, why)) = unpingable(p.v) else {
        return true;
    };
    cx.err(
        Diagnostic::error(format!("autorate probe {} is {what}", p.v), p.span)
            .label(why)
            .hint(PROBE_HINT),
    );
    false
}

/// The schedule `r` says, with the defaults put in, or `None` after
/// reporting why its values do not fit together.
fn check_reconfig(cx: &mut Ctx, r: &ReconfigAst) -> Option<Reconfig> {
    let rc = Reconfig {
        every: r.every.v,
        at: r.at.v,
        lead: r.lead.as_ref().map_or(Reconfig::DEFAULT_LEAD, |l| l.v),
        hold: r.hold.as_ref().map_or(Reconfig::DEFAULT_HOLD, |h| h.v),
    };
    let mut ok = true;
    if rc.at >= rc.every {
        cx.err(
            Diagnostic::error(
                format!(
                    "autorate reconfig at {} is not less than every {}",
                    rc.at, rc.every
                ),
                r.at.span,
            )
            .label(format!("must be less than every ({})", rc.every))
            .note(r.every.span, "the period")
            .hint("`at` is the offset into each period: Starlink's drops at 12, 27, 42 and 57 s past the minute are `every 15s, at 12s`"),
        );
        ok = false;
    }
    // Both at most the parser's 1 s and 10 s: no overflow.
    if rc.lead + rc.hold >= rc.every {
        let at = r
            .hold
            .as_ref()
            .or(r.lead.as_ref())
            .map_or(r.span, |d| d.span);
        cx.err(
            Diagnostic::error(
                format!(
                    "autorate reconfig lead {} + hold {} is not less than every {}",
                    rc.lead, rc.hold, rc.every
                ),
                at,
            )
            .label("the rate would never leave the window around the drops")
            .note(r.every.span, "the period")
            .hint(format!(
                "shorten lead or hold (defaults {} and {}), or check every",
                Reconfig::DEFAULT_LEAD,
                Reconfig::DEFAULT_HOLD
            )),
        );
        ok = false;
    }
    ok.then_some(rc)
}

fn resolve(b: &Sp<Bw>, bandwidth: Rate) -> Rate {
    match b.v {
        Bw::Abs(r) => r,
        Bw::Pct(bp) => Rate((u128::from(bandwidth.0) * u128::from(bp) / 10_000) as u64),
    }
}

/// Checks every `autorate` and records the valid ones in
/// `cfg.options.autorate` (interfaces must be built already).
pub fn build(
    cx: &mut Ctx,
    cfg: &mut Config,
    altqs: &[AltqDecl],
    qdecls: &[QueueDecl],
    pipes: &[PipeDecl],
) {
    let mut found: Vec<(String, &AutorateAst)> = Vec::new();
    for a in altqs {
        if let Some(ar) = &a.autorate {
            found.push((a.iface.v.clone(), ar));
        }
    }
    for p in pipes {
        let Some(ar) = &p.autorate else { continue };
        match &p.iface {
            Some(i) => found.push((i.v.clone(), ar)),
            None => cx.err(
                Diagnostic::error(
                    format!("autorate on pipe `{}` without an interface", p.name.v),
                    ar.span,
                )
                .label("the controller changes an interface's rate")
                .hint(format!(
                    "write `pipe {} on IF bandwidth BW autorate (…)`",
                    p.name.v
                )),
            ),
        }
    }
    for q in qdecls {
        let Some(ar) = &q.autorate else { continue };
        let altq_iface =
            q.on.as_ref()
                .filter(|on| altqs.iter().any(|a| a.iface.v == on.v));
        match (&q.on, &q.parent, altq_iface) {
            (Some(on), None, None) if q.pipe.is_none() => found.push((on.v.clone(), ar)),
            (_, _, Some(on)) => cx.err(
                Diagnostic::error(format!("autorate on ALTQ queue `{}`", q.name.v), ar.span)
                    .label("only on the interface's root")
                    .hint(format!("write it on the `altq on {} …` line", on.v)),
            ),
            _ => cx.err(
                Diagnostic::error(format!("autorate on queue `{}`, which is not an interface's root", q.name.v), ar.span)
                    .label("only on the interface's root")
                    .hint("write it on the root queue (`queue NAME on IF bandwidth BW autorate (…)`), the `altq on` line or the pipe; child queues keep their own bandwidths"),
            ),
        }
    }
    let mut seen: Vec<(String, Span)> = Vec::new();
    // The first autorate that only TCP states can feed.
    let mut unprobed: Option<Span> = None;
    for (iface, ar) in found {
        if let Some((_, first)) = seen.iter().find(|(n, _)| *n == iface) {
            cx.err(
                Diagnostic::error(format!("a second autorate on interface {iface}"), ar.span)
                    .label("one controller per interface")
                    .note(*first, "the first one"),
            );
            continue;
        }
        seen.push((iface.clone(), ar.span));
        // Checked before the bounds so one run reports both kinds of mistake.
        let probe_ok = ar.probe.as_ref().is_none_or(|p| check_probe(cx, p));
        let reconfig = ar.reconfig.as_ref().map(|r| check_reconfig(cx, r));
        let Some(iq) = cfg.interfaces.iter().find(|i| i.ifname == iface) else {
            continue; // the queue checks have said why
        };
        let bw = iq.bandwidth;
        let min = ar.min.as_ref().map_or(Rate(bw.0 / 4), |b| resolve(b, bw));
        let max = ar.max.as_ref().map_or(bw, |b| resolve(b, bw));
        let at = |b: &Option<Sp<Bw>>| b.as_ref().map_or(ar.span, |b| b.span);
        if bw == Rate::ZERO {
            cx.err(
                Diagnostic::error(
                    format!("autorate on interface {iface} without a bandwidth"),
                    ar.span,
                )
                .label("the controller starts at the bandwidth")
                .hint("give the root a `bandwidth`"),
            );
            continue;
        }
        if min == Rate::ZERO {
            cx.err(
                Diagnostic::error("autorate min 0", at(&ar.min))
                    .label("a shaper needs a rate above 0")
                    .hint(format!("e.g. `min {}`", Rate(bw.0 / 4))),
            );
            continue;
        }
        if min > max {
            cx.err(
                Diagnostic::error(
                    format!("autorate min {min} is above max {max}"),
                    at(&ar.min),
                )
                .label(format!("at most {max}"))
                .note(at(&ar.max), "the max"),
            );
            continue;
        }
        if bw < min || bw > max {
            cx.err(
                Diagnostic::error(
                    format!("bandwidth {bw} of interface {iface} is outside its autorate range {min}..{max}"),
                    if bw < min { at(&ar.min) } else { at(&ar.max) },
                )
                .label(format!("allowed {min}..{max}"))
                .hint("the controller starts at the bandwidth: keep min ≤ bandwidth ≤ max"),
            );
            continue;
        }
        if !probe_ok || reconfig == Some(None) {
            continue;
        }
        if ar.probe.is_none() {
            unprobed = unprobed.or(Some(ar.span));
        }
        cfg.options.autorate.push((
            iface,
            Autorate {
                min,
                max,
                dry_run: ar.dry_run,
                probe: ar.probe.as_ref().map(|p| p.v),
                reconfig: reconfig.flatten(),
            },
        ));
    }
    if let Some(span) = unprobed {
        let stateful_tcp = cfg.rules.iter().any(|r| {
            r.action == Action::Pass && r.state != StatePolicy::No && r.proto.is_none_or(|p| p == 6)
        });
        if !stateful_tcp {
            cx.err(
                Diagnostic::warning("autorate without a stateful pass rule for TCP", span)
                    .label("it reads the delay from the RTT of TCP states: none will be made")
                    .hint("add a `keep state` rule the connections' SYNs meet, e.g. `pass out on $ext_if proto tcp keep state`, or give autorate a `probe ADDR` to ping (the modem or the ISP's first hop)"),
            );
        }
    }
    // In the interfaces' order, so the printed form reads back the same.
    let pos = |n: &str| cfg.interfaces.iter().position(|i| i.ifname == n);
    let mut v = std::mem::take(&mut cfg.options.autorate);
    v.sort_by_key(|(n, _)| pos(n));
    cfg.options.autorate = v;
}
