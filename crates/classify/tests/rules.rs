//! Rule criteria and evaluation order (last match, quick, match rules).

mod common;
use common::*;
use sluice_classify::{BlockReason, Decision, StateHit, Verdict};
use sluice_conf::ir::{Action, AddrFamily, AddrMatch, Direction, PortOp, StatePolicy, Table};
use sluice_wire::tcp_flags::*;
use sluice_wire::{build, parse};

const IN: Direction = Direction::In;
const OUT: Direction = Direction::Out;

/// Classify with a single `block` rule built by `f` (and no state anywhere):
/// true when the rule matched.
fn blocks(
    f: impl FnOnce(&mut sluice_conf::ir::Rule),
    dir: Direction,
    pkt: &sluice_wire::IpInfo,
) -> bool {
    let mut r = block();
    f(&mut r);
    let cfg = config(vec![r]);
    let mut c = classifier(&cfg);
    let em0 = c.iface("em0");
    c.set_iface_addrs(em0, &[net("192.0.2.1", 24), net("2001:db8::1", 64)]);
    let d = c.classify(secs(1), em0, dir, pkt);
    assert_eq!(c.stats().states, 0);
    !d.verdict.is_pass()
}

#[test]
fn no_rule_means_pass_without_state() {
    let cfg = config(vec![]);
    let mut c = classifier(&cfg);
    let e = c.iface("em0");
    let d = c.classify(secs(1), e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0));
    assert!(d.verdict.is_pass());
    assert_eq!(
        (d.rule, d.state, d.queue, d.verdict),
        (None, StateHit::None, None, Verdict::Pass)
    );
}

#[test]
fn direction_and_interface() {
    let p = tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0);
    assert!(blocks(|r| r.direction = Some(OUT), OUT, &p));
    assert!(!blocks(|r| r.direction = Some(OUT), IN, &p));
    assert!(blocks(|r| r.direction = None, IN, &p));
    assert!(blocks(|r| r.iface = Some(("em0".into(), false)), IN, &p));
    assert!(!blocks(|r| r.iface = Some(("em1".into(), false)), IN, &p));
    assert!(!blocks(|r| r.iface = Some(("em0".into(), true)), IN, &p));
    assert!(blocks(|r| r.iface = Some(("em1".into(), true)), IN, &p));
}

#[test]
fn af_and_proto() {
    let p4 = udp("10.0.0.1", "10.0.0.2", 1, 2);
    let p6 = udp("2001:db8::5", "2001:db8::6", 1, 2);
    assert!(blocks(|r| r.af = Some(AddrFamily::Inet), IN, &p4));
    assert!(!blocks(|r| r.af = Some(AddrFamily::Inet), IN, &p6));
    assert!(blocks(|r| r.af = Some(AddrFamily::Inet6), IN, &p6));
    assert!(blocks(|r| r.proto = Some(17), IN, &p4));
    assert!(!blocks(|r| r.proto = Some(6), IN, &p4));
}

#[test]
fn from_to_networks_negation_and_family() {
    let p = tcp("10.1.2.3", "172.16.0.9", 1000, 80, SYN, 0);
    let n = |s: &str, l| AddrMatch::Net(net(s, l));
    assert!(blocks(|r| r.from = ep(n("10.0.0.0", 8)), IN, &p));
    assert!(!blocks(|r| r.from = ep(n("10.2.0.0", 16)), IN, &p));
    assert!(blocks(|r| r.to = ep(n("172.16.0.9", 32)), IN, &p));
    assert!(!blocks(|r| r.to = ep(n("10.0.0.0", 8)), IN, &p));
    // `from ! 10.2.0.0/16`
    assert!(blocks(
        |r| r.from = sluice_conf::ir::Endpoint {
            negated: true,
            ..ep(n("10.2.0.0", 16))
        },
        IN,
        &p
    ));
    assert!(!blocks(
        |r| r.from = sluice_conf::ir::Endpoint {
            negated: true,
            ..ep(n("10.0.0.0", 8))
        },
        IN,
        &p
    ));
    // An IPv4 criterion, even negated, never matches IPv6 (the rule is implicitly inet).
    let p6 = tcp("2001:db8::5", "2001:db8::6", 1, 2, SYN, 0);
    assert!(!blocks(
        |r| r.from = sluice_conf::ir::Endpoint {
            negated: true,
            ..ep(n("10.0.0.0", 8))
        },
        IN,
        &p6
    ));
    assert!(blocks(|r| r.from = ep(n("2001:db8::", 32)), IN, &p6));
}

#[test]
fn tables_most_specific_entry_decides() {
    let mut r = block();
    r.from = ep(AddrMatch::Table("bad".into()));
    let mut cfg = config(vec![r]);
    cfg.tables.push(Table {
        name: "bad".into(),
        entries: vec![
            (net("10.0.0.0", 8), false),
            (net("10.1.0.0", 16), true),
            (net("10.1.1.0", 24), false),
        ],
    });
    let mut c = classifier(&cfg);
    let e = c.iface("em0");
    let mut check = |src: &str| {
        !c.classify(secs(1), e, IN, &udp(src, "192.0.2.1", 1, 2))
            .verdict
            .is_pass()
    };
    assert!(check("10.9.9.9"));
    assert!(!check("10.1.9.9"));
    assert!(check("10.1.1.9"));
    assert!(!check("11.0.0.1"));

    // An undefined table is empty: `from <nope>` never matches, `from ! <nope>` always.
    let mut r = block();
    r.from = sluice_conf::ir::Endpoint {
        negated: true,
        ..ep(AddrMatch::Table("nope".into()))
    };
    let cfg = config(vec![r]);
    let mut c = classifier(&cfg);
    let e = c.iface("em0");
    assert!(!c
        .classify(secs(1), e, IN, &udp("10.0.0.1", "10.0.0.2", 1, 2))
        .verdict
        .is_pass());
}

#[test]
fn interface_addresses_networks_and_learning() {
    let own = AddrMatch::Iface("em0".into());
    let lan = AddrMatch::IfaceNetwork("em0".into());
    let from_own = udp("192.0.2.1", "8.8.8.8", 1, 53);
    let from_lan = udp("192.0.2.77", "8.8.8.8", 1, 53);
    assert!(blocks(|r| r.from = ep(own.clone()), OUT, &from_own));
    assert!(!blocks(|r| r.from = ep(own.clone()), OUT, &from_lan));
    assert!(blocks(|r| r.from = ep(lan.clone()), OUT, &from_lan));
    assert!(!blocks(
        |r| r.from = ep(lan.clone()),
        OUT,
        &udp("198.51.100.1", "8.8.8.8", 1, 53)
    ));
    assert!(blocks(
        |r| r.from = ep(own.clone()),
        OUT,
        &udp("2001:db8::1", "2001:db8:9::1", 1, 53)
    ));

    // Bridge mode: addresses learned at run time.
    let mut r = block();
    r.from = ep(own);
    let cfg = config(vec![r]);
    let mut c = classifier(&cfg);
    let e = c.iface("em0");
    let p = udp("192.168.7.9", "8.8.8.8", 1, 53);
    assert!(c.classify(secs(1), e, OUT, &p).verdict.is_pass());
    use sluice_classify::{Learn, LEARNED_ADDR_TTL};
    assert_eq!(
        c.learn_iface_addr(e, ip("203.0.113.9"), [2; 6], secs(1)),
        Some(Learn::Refused),
        "a global address, no network configured"
    );
    assert_eq!(
        c.learn_iface_addr(e, ip("192.168.7.9"), [2; 6], secs(1)),
        Some(Learn::Added)
    );
    assert_eq!(
        c.learn_iface_addr(e, ip("192.168.7.9"), [2; 6], secs(1)),
        Some(Learn::Refreshed)
    );
    assert!(!c.classify(secs(1), e, OUT, &p).verdict.is_pass());
    // Forgotten after the TTL: `from em0` no longer matches it.
    assert_eq!(c.expire_iface_addrs(secs(1) + LEARNED_ADDR_TTL), 1);
    assert!(c
        .classify(secs(1) + LEARNED_ADDR_TTL, e, OUT, &p)
        .verdict
        .is_pass());
}

#[test]
fn ports_every_op_and_no_ports_never_match() {
    let p = tcp("10.0.0.1", "10.0.0.2", 40000, 443, SYN, 0);
    let with = |op: PortOp| move |r: &mut sluice_conf::ir::Rule| r.to.port = Some(op);
    for (op, expect) in [
        (PortOp::Eq(443), true),
        (PortOp::Eq(80), false),
        (PortOp::Ne(80), true),
        (PortOp::Lt(443), false),
        (PortOp::Le(443), true),
        (PortOp::Gt(442), true),
        (PortOp::Ge(444), false),
        (PortOp::Range(400, 443), true),
        (PortOp::Between(400, 443), false),
        (PortOp::Outside(1, 442), true),
        (PortOp::Outside(1, 443), false),
    ] {
        assert_eq!(blocks(with(op), IN, &p), expect, "{op:?}");
    }
    assert!(blocks(|r| r.from.port = Some(PortOp::Ge(1024)), IN, &p));
    // Negation applies to the address only: `from ! 10.9.0.0/16 port 40000`.
    assert!(blocks(
        |r| {
            r.from = sluice_conf::ir::Endpoint {
                negated: true,
                port: Some(PortOp::Eq(40000)),
                ..ep(AddrMatch::Net(net("10.9.0.0", 16)))
            }
        },
        IN,
        &p
    ));
    // ICMP and later fragments have no ports: even `port != 80` does not match.
    let icmp = common::info(&build::icmp_v4_echo(
        [10, 0, 0, 1].into(),
        [10, 0, 0, 2].into(),
        1,
        1,
        8,
    ));
    assert!(!blocks(with(PortOp::Ne(80)), IN, &icmp));
    let mut f = build::udp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2, 100);
    build::set_ipv4_frag(&mut f, false, 64).unwrap();
    let later = parse(&f).unwrap().ip.unwrap();
    assert!(!blocks(with(PortOp::Ne(80)), IN, &later));
    assert!(
        blocks(|r| r.proto = Some(17), IN, &later),
        "proto still matches"
    );
}

#[test]
fn flags_test_tcp_only_and_other_protocols_ignore_them() {
    let sa = |r: &mut sluice_conf::ir::Rule| r.flags = Some((SYN, SYN | ACK));
    assert!(blocks(sa, IN, &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0)));
    assert!(blocks(
        sa,
        IN,
        &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN | ECE | CWR, 0)
    ));
    assert!(!blocks(
        sa,
        IN,
        &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN | ACK, 0)
    ));
    assert!(!blocks(sa, IN, &tcp("10.0.0.1", "10.0.0.2", 1, 2, ACK, 0)));
    // pf tests flags on TCP only: the implicit S/SA of a stateful pass rule
    // without `proto` must not keep UDP from matching it.
    assert!(blocks(sa, IN, &udp("10.0.0.1", "10.0.0.2", 1, 2)));
}

#[test]
fn tos_ignores_ecn_bits() {
    let mut f = build::udp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2, 10);
    build::set_tos(&mut f, 0xb8 | 0b11).unwrap();
    let p = common::info(&f);
    assert!(blocks(|r| r.tos = Some(0xb8), IN, &p));
    assert!(!blocks(|r| r.tos = Some(0x10), IN, &p));
}

fn run(rules: Vec<sluice_conf::ir::Rule>) -> (Decision, sluice_classify::Classifier) {
    let cfg = config(rules);
    let mut c = classifier(&cfg);
    let e = c.iface("em0");
    let d = c.classify(
        secs(1),
        e,
        OUT,
        &tcp("10.0.0.1", "10.0.0.2", 1000, 80, SYN, 0),
    );
    (d, c)
}

#[test]
fn last_match_wins_and_quick_stops() {
    let (d, _) = run(vec![block(), pass()]);
    assert!(d.verdict.is_pass());
    assert_eq!(d.rule, Some(1));
    let (d, _) = run(vec![pass(), block()]);
    assert_eq!(
        (d.verdict, d.rule),
        (Verdict::Block(BlockReason::Rule), Some(1))
    );
    let mut q = block();
    q.quick = true;
    let (d, _) = run(vec![q, pass()]);
    assert_eq!((d.verdict.is_pass(), d.rule), (false, Some(0)));
    let mut q = pass();
    q.quick = true;
    let (d, c) = run(vec![block(), q, block()]);
    assert_eq!(
        (d.verdict.is_pass(), d.rule, d.state),
        (true, Some(1), StateHit::Created)
    );
    let s = c.rule_stats();
    assert_eq!(
        (s[0].evaluations, s[1].evaluations, s[2].evaluations),
        (1, 1, 0)
    );
    assert_eq!((s[1].matches, s[1].packets, s[1].states_created), (1, 1, 1));
    assert_eq!(s[1].line, 2);
}

#[test]
fn match_rules_set_options_and_winner_overrides_only_what_it_sets() {
    let mut m = matchr();
    m.queue = queue_pair("bulk", Some("ack"));
    m.prio = Some((2, Some(6)));
    let mut p = pass();
    p.prio = Some((4, None));
    let (d, c) = run(vec![m.clone(), p.clone()]);
    assert_eq!(
        d.queue.map(|q| c.queue_name(q).to_string()),
        Some("bulk".into())
    );
    assert_eq!(d.prio, Some(4), "the pass rule's prio overrides");
    let mut p2 = p.clone();
    p2.queue = queue_pair("web", None);
    let (d, c) = run(vec![m.clone(), p2]);
    assert_eq!(c.queue_name(d.queue.unwrap()), "web");

    // A match rule after the winner still contributes what the winner leaves unset.
    let (d, c) = run(vec![pass(), m.clone()]);
    assert_eq!(
        (c.queue_name(d.queue.unwrap()), d.prio, d.rule),
        ("bulk", Some(2), Some(0))
    );

    // Only match rules: pf's implicit pass, with their options and no state.
    let (d, c) = run(vec![m.clone()]);
    assert_eq!(
        (d.verdict.is_pass(), d.rule, d.state),
        (true, None, StateHit::None)
    );
    assert_eq!(c.queue_name(d.queue.unwrap()), "bulk");

    // `match quick` ends evaluation: the later block is never reached.
    let mut mq = m;
    mq.quick = true;
    let (d, _) = run(vec![mq, block()]);
    assert!(d.verdict.is_pass());
}

#[test]
fn no_state_and_match_rules_create_no_state() {
    let mut p = pass();
    p.state = StatePolicy::No;
    let (d, c) = run(vec![p]);
    assert_eq!(
        (d.verdict.is_pass(), d.state, c.stats().states),
        (true, StateHit::None, 0)
    );
    let (d, c) = run(vec![rule(Action::Block)]);
    assert_eq!((d.state, c.stats().states), (StateHit::None, 0));
}

#[test]
fn icmp_type_and_code() {
    let req = build::icmp_v4_echo(
        "10.0.0.1".parse().unwrap(),
        "10.0.0.2".parse().unwrap(),
        7,
        1,
        56,
    );
    let echo = info(&req);
    // The same packet as an echo reply (type 0); checksums do not matter here.
    let mut rep = req.clone();
    let off = parse(&rep).unwrap().ip.unwrap().l4_offset;
    rep[off] = 0;
    let reply = info(&rep);
    let echoreq = |r: &mut sluice_conf::ir::Rule| {
        r.proto = Some(1);
        r.icmp_type = Some((8, None));
    };
    assert!(blocks(echoreq, IN, &echo));
    assert!(!blocks(echoreq, IN, &reply));
    assert!(blocks(
        |r| {
            r.proto = Some(1);
            r.icmp_type = Some((8, Some(0)))
        },
        IN,
        &echo
    ));
    assert!(!blocks(
        |r| {
            r.proto = Some(1);
            r.icmp_type = Some((8, Some(1)))
        },
        IN,
        &echo
    ));
    // Never matches a packet without an ICMP header.
    assert!(!blocks(echoreq, IN, &udp("10.0.0.1", "10.0.0.2", 1, 2)));
}
