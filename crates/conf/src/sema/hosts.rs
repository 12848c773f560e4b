//! Host isolation where the addresses it tells hosts by are the NAT
//! router's (docs/host-isolation.md).
//!
//! # Principles
//! - sluice translates no addresses, so `nat-to` in its ruleset describes
//!   what a router does, and where there is NAT there are two places for
//!   sluice: between the LAN and the router, where each LAN host has its
//!   own address, or between the router and the modem, where all have the
//!   router's. The file cannot tell which; `check` says so where it
//!   matters: on an interface that both isolates hosts and is named by a
//!   translating rule (or by an old `nat`/`binat` statement, which names
//!   its interface in a part sluice does not read).
//! - A warning, not an error: on the LAN side the configuration is right.

use super::Ctx;
use crate::ast::{PipeDecl, QueueDecl, RuleAst};
use crate::diag::{Diagnostic, Span};
use crate::ir::Config;

/// Names of translations on rules, and of translating statements.
const RULE_NAT: [&str; 2] = ["nat-to", "binat-to"];
const STMT_NAT: [&str; 2] = ["nat", "binat"];

/// One warning per isolating interface whose hosts a translation may hide.
pub(super) fn behind_nat(
    cx: &mut Ctx,
    cfg: &Config,
    qdecls: &[QueueDecl],
    pipes: &[PipeDecl],
    rules: &[RuleAst],
) {
    let stmt_nat = cx
        .ignored
        .iter()
        .find(|w| STMT_NAT.contains(&w.v.as_str()))
        .map(|w| w.span);
    for iq in &cfg.interfaces {
        let Some((mode, name)) = iq
            .queues
            .iter()
            .find_map(|q| q.isolate.map(|m| (m, q.name.as_str())))
        else {
            continue;
        };
        // Where it was written: on the queue, else on its pipe.
        let at: Option<Span> = qdecls
            .iter()
            .filter(|d| d.name.v == name)
            .find_map(|d| d.isolate.as_ref().map(|m| m.span))
            .or_else(|| {
                pipes
                    .iter()
                    .filter(|p| p.iface.as_ref().is_some_and(|i| i.v == iq.ifname))
                    .find_map(|p| p.isolate.as_ref().map(|m| m.span))
            });
        let Some(at) = at else { continue };
        let names_iface = |r: &RuleAst| {
            r.ifaces.is_empty()
                || r.ifaces
                    .iter()
                    .any(|i| !i.v.1 && (i.v.0 == iq.ifname || i.v.0 == "egress"))
        };
        let nat = rules
            .iter()
            .filter(|r| names_iface(r))
            .find_map(|r| r.ignored.iter().find(|w| RULE_NAT.contains(&w.v.as_str())))
            .map(|w| w.span)
            .or(stmt_nat);
        let Some(nat) = nat else { continue };
        cx.err(
            Diagnostic::warning(
                format!(
                    "`{}` on `{}` tells hosts by address, and this ruleset translates addresses",
                    mode.name(),
                    iq.ifname
                ),
                at,
            )
            .label("fair between the hosts sluice sees")
            .note(nat, "a router translates here; sluice does not")
            .hint("run sluice between the LAN and the NAT router: between the router and the modem every host has the router's address, and the queue is fair per flow only (docs/host-isolation.md)"),
        );
    }
}
