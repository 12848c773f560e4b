//! Compiled filter rules and their criteria (pf.conf(5) "PARAMETERS").
//!
//! # Principles
//!
//! - Compilation resolves every name once (interfaces to [`IfaceId`], tables
//!   to indices, queues to [`QueueName`]), so matching does no string work.
//! - Criteria are tested cheapest first; a rule matches only if all hold.
//! - An address criterion of one family (`from 10.0.0.0/8`, negated or not)
//!   never matches a packet of the other family: pf makes such a rule
//!   implicitly `inet`.
//! - `!` negates the address only, never the port (as in pf).
//! - A port criterion never matches a packet without ports (not TCP/UDP, or a
//!   later fragment). `flags X/Y` is tested on TCP packets only, as pf does
//!   (pf.c `pf_match_rule`): a TCP segment matches when `(flags & Y) == X`
//!   (a later TCP fragment, without flags, never does); other protocols
//!   ignore it, so pf's implicit `flags S/SA` on `pass out keep state` still
//!   lets UDP and ICMP match the rule. A stateful pass rule skips the test
//!   for a segment whose connection already has a state at the other half
//!   of the double evaluation: the flags were tested on the packet that
//!   opened it there (lib.rs).
//! - `tos` compares the DSCP part of the ToS byte (ECN bits masked), as
//!   OpenBSD does, so ECN marking does not change a packet's class.
//! - An unknown table name (the IR validator should prevent it) behaves as
//!   pf's undefined table: empty.

use crate::addr::{AddrTable, Prefix};
use crate::{IfaceId, QueueName, Timeouts};
use sluice_conf::ir::{self, Action, AddrMatch, Direction, MaxMss, PortOp, StatePolicy};
use sluice_wire::{Af, IpInfo, L4};
use std::net::IpAddr;

/// The ECN bits of the ToS byte (RFC 3168 §5).
const ECN_MASK: u8 = 0b11;

#[derive(Clone, Debug)]
pub(crate) enum CAddr {
    Any,
    Net(Prefix),
    Table(usize),
    Iface(IfaceId),
    IfaceNetwork(IfaceId),
    /// `self`: any address of any interface.
    SelfAddr,
    /// `no-route` / `urpf-failed`: sluice forwards as a bridge and consults no
    /// routing table, so these never match (`!no-route` matches everything).
    Never,
}

#[derive(Clone, Debug)]
pub(crate) struct CEndpoint {
    pub addr: CAddr,
    pub negated: bool,
    pub port: Option<PortOp>,
}

#[derive(Clone, Debug)]
pub(crate) struct CRule {
    pub action: Action,
    pub quick: bool,
    pub dir: Option<Direction>,
    pub iface: Option<(IfaceId, bool)>,
    pub af: Option<Af>,
    pub proto: Option<u8>,
    pub from: CEndpoint,
    pub to: CEndpoint,
    pub flags: Option<(u8, u8)>,
    pub tos: Option<u8>,
    pub icmp_type: Option<(u8, Option<u8>)>,
    pub keep_state: bool,
    pub queue: Option<(QueueName, Option<QueueName>)>,
    pub prio: Option<(u8, Option<u8>)>,
    pub max_mss: Option<MaxMss>,
    /// `max N`, `max-src-states N`.
    pub max: Option<u32>,
    pub max_src_states: Option<u32>,
    pub max_src_nodes: Option<u32>,
    pub max_src_conn: Option<u32>,
    pub max_src_conn_rate: Option<(u32, u32)>,
    /// `overload <t> [flush [global]]`: the table's index, and the flush.
    pub overload: Option<(usize, ir::Flush)>,
    /// The config's timeouts with this rule's own (`keep state
    /// (tcp.established 600)`) applied; None when it has none.
    pub timeouts: Option<Box<Timeouts>>,
    /// `keep state (sloppy)`: no sequence-window check.
    pub sloppy: bool,
}

/// Name resolution services compilation needs from the classifier.
pub(crate) trait Resolve {
    fn iface_id(&mut self, name: &str) -> IfaceId;
    fn queue_id(&mut self, name: &str) -> QueueName;
    fn table_id(&mut self, name: &str) -> usize;
}

fn compile_endpoint(e: &ir::Endpoint, r: &mut dyn Resolve) -> CEndpoint {
    let addr = match &e.addr {
        AddrMatch::Any => CAddr::Any,
        AddrMatch::Net(n) => CAddr::Net(Prefix::new(n)),
        AddrMatch::Table(t) => CAddr::Table(r.table_id(t)),
        AddrMatch::Iface(i) => CAddr::Iface(r.iface_id(i)),
        AddrMatch::IfaceNetwork(i) => CAddr::IfaceNetwork(r.iface_id(i)),
        AddrMatch::SelfAddr => CAddr::SelfAddr,
        AddrMatch::NoRoute | AddrMatch::UrpfFailed => CAddr::Never,
    };
    CEndpoint {
        addr,
        negated: e.negated,
        port: e.port,
    }
}

pub(crate) fn compile(rule: &ir::Rule, global: &Timeouts, r: &mut dyn Resolve) -> CRule {
    let so = &rule.state_opts;
    let timeouts = (!so.timeouts.is_empty()).then(|| {
        let mut t = *global;
        for &(k, d) in &so.timeouts {
            *t.get_mut(k) = d;
        }
        Box::new(t)
    });
    CRule {
        max: so.max,
        max_src_states: so.max_src_states,
        max_src_nodes: so.max_src_nodes,
        max_src_conn: so.max_src_conn,
        max_src_conn_rate: so.max_src_conn_rate,
        overload: so.overload.as_ref().map(|(t, f)| (r.table_id(t), *f)),
        timeouts,
        sloppy: so.sloppy,
        action: rule.action,
        quick: rule.quick,
        dir: rule.direction,
        iface: rule.iface.as_ref().map(|(n, neg)| (r.iface_id(n), *neg)),
        af: rule.af.map(|a| match a {
            ir::AddrFamily::Inet => Af::V4,
            ir::AddrFamily::Inet6 => Af::V6,
        }),
        proto: rule.proto,
        from: compile_endpoint(&rule.from, r),
        to: compile_endpoint(&rule.to, r),
        flags: rule.flags,
        tos: rule.tos,
        icmp_type: rule.icmp_type,
        keep_state: rule.action == Action::Pass
            && matches!(rule.state, StatePolicy::Keep | StatePolicy::Modulate),
        queue: rule
            .queue
            .as_ref()
            .map(|(q, p)| (r.queue_id(q), p.as_ref().map(|p| r.queue_id(p)))),
        prio: rule.prio,
        max_mss: rule.max_mss,
    }
}

/// Does port `p` satisfy `op`?
pub(crate) fn port_matches(op: PortOp, p: u16) -> bool {
    match op {
        PortOp::Eq(a) => p == a,
        PortOp::Ne(a) => p != a,
        PortOp::Lt(a) => p < a,
        PortOp::Le(a) => p <= a,
        PortOp::Gt(a) => p > a,
        PortOp::Ge(a) => p >= a,
        PortOp::Range(a, b) => a <= p && p <= b,
        PortOp::Between(a, b) => a < p && p < b,
        PortOp::Outside(a, b) => p < a || p > b,
    }
}

/// What matching needs besides the rule and the packet.
pub(crate) struct MatchCtx<'a> {
    pub tables: &'a [AddrTable],
    pub ifaces: &'a [crate::addr::Iface],
    /// The packet's connection has a live state at the other half of the
    /// double evaluation: stateful pass rules skip their `flags` test.
    pub known_conn: bool,
}

impl MatchCtx<'_> {
    /// Address part of an endpoint; None when the family makes the rule inapplicable.
    fn addr_matches(&self, a: &CAddr, addr: IpAddr) -> Option<bool> {
        Some(match a {
            CAddr::Any => true,
            CAddr::Net(p) => {
                if p.is_v6() != addr.is_ipv6() {
                    return None;
                }
                p.contains(addr)
            }
            CAddr::Table(t) => self.tables.get(*t).is_some_and(|t| t.contains(addr)),
            CAddr::Iface(i) => self
                .ifaces
                .get(i.0 as usize)
                .is_some_and(|i| i.has_addr(addr)),
            CAddr::IfaceNetwork(i) => self
                .ifaces
                .get(i.0 as usize)
                .is_some_and(|i| i.in_network(addr)),
            CAddr::SelfAddr => self.ifaces.iter().any(|i| i.has_addr(addr)),
            CAddr::Never => false,
        })
    }

    fn endpoint_matches(&self, e: &CEndpoint, addr: IpAddr, port: Option<u16>) -> bool {
        match self.addr_matches(&e.addr, addr) {
            Some(m) if m != e.negated => {}
            _ => return false,
        }
        match (e.port, port) {
            (None, _) => true,
            (Some(op), Some(p)) => port_matches(op, p),
            (Some(_), None) => false,
        }
    }

    /// All criteria of `r` against a packet seen on `ifc` at `dir`.
    pub(crate) fn matches(&self, r: &CRule, ifc: IfaceId, dir: Direction, pkt: &IpInfo) -> bool {
        if r.dir.is_some_and(|d| d != dir) {
            return false;
        }
        if let Some((i, neg)) = r.iface {
            if (i == ifc) == neg {
                return false;
            }
        }
        if r.af.is_some_and(|a| a != pkt.af) || r.proto.is_some_and(|p| p != pkt.proto) {
            return false;
        }
        let flags_apply = !(self.known_conn && r.keep_state);
        if let (Some((set, mask)), sluice_wire::proto::TCP, true) =
            (r.flags, pkt.proto, flags_apply)
        {
            match pkt.l4 {
                L4::Tcp { flags, .. } if flags & mask == set => {}
                // A later fragment has no flags to test.
                _ => return false,
            }
        }
        if r.tos.is_some_and(|t| t & !ECN_MASK != pkt.tos & !ECN_MASK) {
            return false;
        }
        if let Some((typ, code)) = r.icmp_type {
            match pkt.l4 {
                L4::Icmp {
                    typ: t, code: c, ..
                } if t == typ && code.is_none_or(|x| x == c) => {}
                _ => return false,
            }
        }
        let (sport, dport) = match pkt.ports() {
            Some((s, d)) => (Some(s), Some(d)),
            None => (None, None),
        };
        self.endpoint_matches(&r.from, pkt.src, sport)
            && self.endpoint_matches(&r.to, pkt.dst, dport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ops() {
        use PortOp::*;
        assert!(port_matches(Eq(80), 80) && !port_matches(Eq(80), 81));
        assert!(port_matches(Ne(80), 81) && !port_matches(Ne(80), 80));
        assert!(port_matches(Lt(1024), 1023) && !port_matches(Lt(1024), 1024));
        assert!(port_matches(Le(1024), 1024) && !port_matches(Le(1024), 1025));
        assert!(port_matches(Gt(1024), 1025) && !port_matches(Gt(1024), 1024));
        assert!(port_matches(Ge(1024), 1024) && !port_matches(Ge(1024), 1023));
        assert!(port_matches(Range(10, 20), 10) && port_matches(Range(10, 20), 20));
        assert!(!port_matches(Range(10, 20), 9) && !port_matches(Range(10, 20), 21));
        assert!(port_matches(Between(10, 20), 11) && !port_matches(Between(10, 20), 10));
        assert!(!port_matches(Between(10, 20), 20));
        assert!(port_matches(Outside(10, 20), 9) && port_matches(Outside(10, 20), 21));
        assert!(!port_matches(Outside(10, 20), 10) && !port_matches(Outside(10, 20), 20));
    }
}
