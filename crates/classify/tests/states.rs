//! Stateful filtering: the two reference configs, TCP tracking and timeouts,
//! direction semantics of a router's double evaluation, IPv6, expiry.

mod common;
use common::*;
use sluice_classify::{Classifier, StateHit, TcpPeer};
use sluice_conf::ir::{AddrMatch, Direction, SchedKind};
use sluice_time::Duration;
use sluice_wire::tcp_flags::*;
use sluice_wire::IpInfo;

const IN: Direction = Direction::In;
const OUT: Direction = Direction::Out;

fn qname(c: &Classifier, d: &sluice_classify::Decision) -> Option<String> {
    d.queue.map(|q| c.queue_name(q).to_string())
}

/// `altq on ext priq … queue { q_pri q_def }`
/// `pass out on ext proto tcp from ext to any flags S/SA keep state queue(q_def, q_pri)`
fn priq_reference() -> Classifier {
    let mut r = pass_on(OUT, "ext", None);
    r.proto = Some(6);
    r.from = ep(AddrMatch::Iface("ext".into()));
    r.flags = Some((SYN, SYN | ACK));
    r.queue = queue_pair("q_def", Some("q_pri"));
    let cfg = config_on_ext(vec![r], SchedKind::Priq, &["q_pri", "q_def"]);
    let mut c = classifier(&cfg);
    let ext = c.iface("ext");
    c.set_iface_addrs(ext, &[net("203.0.113.2", 24)]);
    c
}

#[test]
fn priq_reference_config() {
    let mut c = priq_reference();
    let ext = c.iface("ext");
    let lan = c.iface("lan");
    assert!(c.queue_lookup("q_pri").is_some() && c.queue_lookup("nope").is_none());
    let (me, srv) = ("203.0.113.2", "198.51.100.1");
    let mut t = secs(10);
    let mut step = |c: &mut Classifier, dir, p: IpInfo| {
        t += Duration::from_millis(1);
        c.classify(t, ext, dir, &p)
    };

    let d = step(&mut c, OUT, tcp(me, srv, 40000, 80, SYN, 0));
    assert_eq!(
        (d.verdict.is_pass(), d.state, d.rule),
        (true, StateHit::Created, Some(0))
    );
    assert_eq!(
        qname(&c, &d).as_deref(),
        Some("q_def"),
        "a SYN carries no ACK: default queue"
    );

    // The reply comes in on ext: it matches the state (reverse, opposite direction).
    let d = step(&mut c, IN, tcp(srv, me, 80, 40000, SYN | ACK, 0));
    assert_eq!(
        (d.state, qname(&c, &d).as_deref()),
        (StateHit::Matched, Some("q_pri"))
    );
    let d = step(&mut c, OUT, tcp(me, srv, 40000, 80, ACK, 0));
    assert_eq!(
        (d.state, qname(&c, &d).as_deref()),
        (StateHit::Matched, Some("q_pri"))
    );
    // Data → q_def; an empty ACK → q_pri; ACK with payload is data, not "an ACK".
    let d = step(&mut c, OUT, tcp(me, srv, 40000, 80, ACK | PSH, 1000));
    assert_eq!(qname(&c, &d).as_deref(), Some("q_def"));
    let d = step(&mut c, IN, tcp(srv, me, 80, 40000, ACK, 1448));
    assert_eq!(
        (d.state, qname(&c, &d).as_deref()),
        (StateHit::Matched, Some("q_def"))
    );
    let d = step(&mut c, OUT, tcp(me, srv, 40000, 80, ACK, 0));
    assert_eq!(qname(&c, &d).as_deref(), Some("q_pri"));

    let views: Vec<_> = c.states().collect();
    assert_eq!(views.len(), 1);
    let v = views[0];
    assert_eq!(
        (v.src, v.dst, v.direction),
        ((ip(me), 40000), (ip(srv), 80), OUT)
    );
    assert_eq!(v.proto_state.to_string(), "ESTABLISHED:ESTABLISHED");
    assert_eq!((v.queue, v.queue_pri), (Some("q_def"), Some("q_pri")));
    assert_eq!(v.packets, [4, 2]);

    // A mid-stream packet of an unknown connection: flags S/SA does not match.
    let d = step(&mut c, OUT, tcp(me, srv, 40001, 80, ACK, 0));
    assert_eq!(
        (d.verdict.is_pass(), d.state, d.queue),
        (true, StateHit::None, None)
    );
    // The same SYN from a routed LAN host (not ext's address): no state.
    let d = step(&mut c, OUT, tcp("192.168.1.5", srv, 40002, 80, SYN, 0));
    assert_eq!(d.state, StateHit::None);
    // The same SYN evaluated at In (on lan): the rule says `out on ext`.
    let d = c.classify(secs(11), lan, IN, &tcp(me, srv, 40003, 80, SYN, 0));
    assert_eq!(d.state, StateHit::None);
    assert_eq!(c.stats().states, 1);
    let s = c.rule_stats()[0];
    assert_eq!((s.states_created, s.packets), (1, 6));
}

/// `pass out on ext keep state queue(bb)` (the HFSC reference config).
#[test]
fn hfsc_reference_config() {
    let r = pass_on(OUT, "ext", Some("bb"));
    let cfg = config_on_ext(vec![r], SchedKind::Hfsc, &["root", "bb"]);
    let mut c = classifier(&cfg);
    let ext = c.iface("ext");
    let lan = c.iface("lan");
    let bb = c.queue_lookup("bb");

    let d = c.classify(secs(1), ext, OUT, &udp("192.168.1.5", "9.9.9.9", 5000, 53));
    assert_eq!((d.state, d.queue), (StateHit::Created, bb));
    // Any packet, TCP ACK included: a single queue means no pair to choose from.
    let d = c.classify(
        secs(1),
        ext,
        OUT,
        &tcp("192.168.1.5", "9.9.9.9", 5001, 443, ACK, 0),
    );
    assert_eq!((d.state, d.queue), (StateHit::Created, bb));
    let d = c.classify(secs(2), ext, IN, &udp("9.9.9.9", "192.168.1.5", 53, 5000));
    assert_eq!((d.state, d.queue), (StateHit::Matched, bb));
    // New inbound connection on ext: no rule → implicit pass, no queue, no state.
    let d = c.classify(secs(2), ext, IN, &udp("9.9.9.9", "192.168.1.5", 53, 6000));
    assert_eq!(
        (d.verdict.is_pass(), d.state, d.queue),
        (true, StateHit::None, None)
    );
    // The forward packet at its ingress (In on lan) is the other half: no state.
    let d = c.classify(secs(2), lan, IN, &udp("192.168.1.5", "9.9.9.9", 5000, 53));
    assert_eq!(d.state, StateHit::None);
    assert_eq!(c.stats().states, 2);
}

/// A router evaluates a forwarded packet twice; each half finds its own state.
#[test]
fn router_double_evaluation() {
    let a = pass_on(IN, "lan", Some("down"));
    let b = pass_on(OUT, "ext", Some("up"));
    let cfg = config(vec![a, b]);
    let mut c = classifier(&cfg);
    let (lan, ext) = (c.iface("lan"), c.iface("ext"));
    let fwd = tcp("192.168.1.5", "198.51.100.1", 40000, 443, SYN, 0);
    let rev = tcp("198.51.100.1", "192.168.1.5", 443, 40000, SYN | ACK, 0);
    let d1 = c.classify(secs(1), lan, IN, &fwd);
    let d2 = c.classify(secs(1), ext, OUT, &fwd);
    assert_eq!((d1.state, d1.rule), (StateHit::Created, Some(0)));
    assert_eq!((d2.state, d2.rule), (StateHit::Created, Some(1)));
    // Reply: In on ext matches the `out` state, Out on lan the `in` state.
    let r1 = c.classify(secs(1), ext, IN, &rev);
    let r2 = c.classify(secs(1), lan, OUT, &rev);
    assert_eq!(
        (r1.state, qname(&c, &r1).as_deref()),
        (StateHit::Matched, Some("up"))
    );
    assert_eq!(
        (r2.state, qname(&c, &r2).as_deref()),
        (StateHit::Matched, Some("down"))
    );
    // States float: the reply would match even seen on another interface.
    let other = c.iface("wlan");
    assert_eq!(
        c.classify(secs(1), other, IN, &rev).state,
        StateHit::Matched
    );
    assert_eq!(c.stats().states, 2);
    assert_eq!(
        d1.flow_hash, d2.flow_hash,
        "flow hash is per 5-tuple, not per interface"
    );
    assert_ne!(d1.flow_hash, r1.flow_hash, "and directional");
}

fn tcp_rule() -> Classifier {
    let mut r = pass();
    r.proto = Some(6);
    r.flags = Some((SYN, SYN | ACK));
    let cfg = config(vec![r]);
    classifier(&cfg)
}

/// Handshake at t=0..; returns the classifier after the last packet at `t`.
fn established(t: u64) -> Classifier {
    let mut c = tcp_rule();
    let e = c.iface("ext");
    assert_eq!(
        c.classify(secs(t), e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0))
            .state,
        StateHit::Created
    );
    c.classify(
        secs(t),
        e,
        IN,
        &tcp("10.0.0.2", "10.0.0.1", 2, 1, SYN | ACK, 0),
    );
    c.classify(secs(t), e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, ACK, 0));
    let v = c.states().next().unwrap();
    assert_eq!(
        v.proto_state,
        sluice_classify::ProtoState::Tcp([TcpPeer::Established; 2])
    );
    assert_eq!(v.expires, secs(t + 86_400));
    c
}

#[test]
fn established_state_expires_after_24h_idle() {
    let data = tcp("10.0.0.2", "10.0.0.1", 2, 1, ACK, 100);
    let mut c = established(5);
    let e = c.iface("ext");
    let just_before = secs(5 + 86_400) - Duration::from_nanos(1);
    assert_eq!(
        c.classify(just_before, e, IN, &data).state,
        StateHit::Matched
    );

    let mut c = established(5);
    // Expired but not yet purged: it must not match.
    assert_eq!(c.stats().states, 1);
    assert_eq!(
        c.classify(secs(5 + 86_400), e, IN, &data).state,
        StateHit::None
    );
    assert_eq!((c.stats().states, c.stats().expired), (0, 1));
}

#[test]
fn closed_state_expires_after_90s_and_port_reuse() {
    let fin_close = |c: &mut Classifier| {
        let e = c.iface("ext");
        let t = secs(100);
        c.classify(t, e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, FIN | ACK, 0));
        c.classify(t, e, IN, &tcp("10.0.0.2", "10.0.0.1", 2, 1, ACK, 0));
        c.classify(t, e, IN, &tcp("10.0.0.2", "10.0.0.1", 2, 1, FIN | ACK, 0));
        c.classify(t, e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, ACK, 0));
        let v = c.states().next().unwrap();
        assert_eq!(v.proto_state.to_string(), "FIN_WAIT_2:FIN_WAIT_2");
        assert_eq!(v.expires, secs(190));
    };
    let late_ack = tcp("10.0.0.2", "10.0.0.1", 2, 1, ACK, 0);
    let mut c = established(0);
    fin_close(&mut c);
    let e = c.iface("ext");
    assert_eq!(
        c.classify(secs(190) - Duration::from_nanos(1), e, IN, &late_ack)
            .state,
        StateHit::Matched
    );
    let mut c = established(0);
    fin_close(&mut c);
    assert_eq!(
        c.classify(secs(190), e, IN, &late_ack).state,
        StateHit::None
    );

    // A new SYN on the finished 4-tuple replaces the state at once.
    let mut c = established(0);
    fin_close(&mut c);
    let d = c.classify(
        secs(101),
        e,
        OUT,
        &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0),
    );
    assert_eq!(d.state, StateHit::Created);
    assert_eq!(
        c.states().next().unwrap().proto_state.to_string(),
        "SYN_SENT:CLOSED"
    );
}

#[test]
fn rst_and_timeouts_of_opening_states() {
    let mut c = established(0);
    let e = c.iface("ext");
    c.classify(secs(1), e, IN, &tcp("10.0.0.2", "10.0.0.1", 2, 1, RST, 0));
    assert_eq!(c.states().next().unwrap().expires, secs(91));
    // An unanswered SYN: tcp.first (120 s), then tcp.opening (30 s) on a retry.
    let mut c = tcp_rule();
    let e = c.iface("ext");
    let syn = tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0);
    c.classify(secs(0), e, OUT, &syn);
    assert_eq!(c.states().next().unwrap().expires, secs(120));
    assert_eq!(c.classify(secs(3), e, OUT, &syn).state, StateHit::Matched);
    assert_eq!(c.states().next().unwrap().expires, secs(33));
}

#[test]
fn udp_icmp_and_other_pseudo_states() {
    let cfg = config(vec![pass()]);
    let mut c = classifier(&cfg);
    let e = c.iface("ext");
    let q = udp("10.0.0.1", "10.0.0.2", 5000, 53);
    let a = udp("10.0.0.2", "10.0.0.1", 53, 5000);
    c.classify(secs(0), e, OUT, &q);
    assert_eq!(c.states().next().unwrap().expires, secs(60));
    assert_eq!(c.classify(secs(1), e, IN, &a).state, StateHit::Matched);
    assert_eq!(c.states().next().unwrap().expires, secs(31));
    c.classify(secs(2), e, OUT, &q);
    let v = c.states().next().unwrap();
    assert_eq!(
        (v.proto_state.to_string(), v.expires),
        ("MULTIPLE:MULTIPLE".to_string(), secs(62))
    );

    let echo = |s: [u8; 4], d: [u8; 4], typ: u8| {
        let mut f = sluice_wire::build::icmp_v4_echo(s.into(), d.into(), 77, 1, 8);
        f[34] = typ;
        info(&f)
    };
    let d = c.classify(secs(10), e, OUT, &echo([10, 0, 0, 1], [10, 0, 0, 3], 8));
    assert_eq!(d.state, StateHit::Created);
    let d = c.classify(secs(11), e, IN, &echo([10, 0, 0, 3], [10, 0, 0, 1], 0));
    assert_eq!(d.state, StateHit::Matched);
    let icmp_state = c.states().find(|v| v.proto == 1).unwrap();
    assert_eq!((icmp_state.src.1, icmp_state.expires), (77, secs(21)));

    // GRE (47): an "other" state keyed by addresses only.
    let mut f = sluice_wire::build::udp(ip("10.0.0.1"), ip("10.0.0.9"), 1, 2, 8);
    f[23] = 47;
    let gre = info(&f);
    assert_eq!(c.classify(secs(20), e, OUT, &gre).state, StateHit::Created);
    assert_eq!(c.classify(secs(21), e, OUT, &gre).state, StateHit::Matched);
}

#[test]
fn ipv6_states_both_ways() {
    let mut r = pass();
    r.direction = Some(OUT);
    r.af = Some(sluice_conf::ir::AddrFamily::Inet6);
    r.to = ep(AddrMatch::Net(net("2001:db8:beef::", 48)));
    r.queue = queue_pair("bulk", Some("ack"));
    let cfg = config(vec![r]);
    let mut c = classifier(&cfg);
    let e = c.iface("ext");
    let (a, b) = ("2001:db8::10", "2001:db8:beef::1");
    let d = c.classify(secs(0), e, OUT, &tcp(a, b, 50000, 443, SYN, 0));
    assert_eq!(
        (d.state, qname(&c, &d).as_deref()),
        (StateHit::Created, Some("bulk"))
    );
    let d = c.classify(secs(0), e, IN, &tcp(b, a, 443, 50000, SYN | ACK, 0));
    assert_eq!(
        (d.state, qname(&c, &d).as_deref()),
        (StateHit::Matched, Some("ack"))
    );
    let d = c.classify(
        secs(0),
        e,
        OUT,
        &tcp(a, "2001:db8:cafe::1", 50000, 443, SYN, 0),
    );
    assert_eq!(d.state, StateHit::None);
    // Lowdelay traffic class takes the second queue too.
    let mut f = sluice_wire::build::tcp(ip(a), ip(b), 50000, 443, ACK | PSH, 500);
    sluice_wire::build::set_tos(&mut f, 0x10).unwrap();
    let d = c.classify(secs(1), e, OUT, &info(&f));
    assert_eq!(
        (d.state, qname(&c, &d).as_deref()),
        (StateHit::Matched, Some("ack"))
    );
}

#[test]
fn prio_pair_follows_the_state() {
    let mut r = pass();
    r.prio = Some((1, Some(7)));
    let cfg = config(vec![r]);
    let mut c = classifier(&cfg);
    let e = c.iface("ext");
    assert_eq!(
        c.classify(secs(0), e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0))
            .prio,
        Some(1)
    );
    assert_eq!(
        c.classify(
            secs(0),
            e,
            IN,
            &tcp("10.0.0.2", "10.0.0.1", 2, 1, SYN | ACK, 0)
        )
        .prio,
        Some(7)
    );
    assert_eq!(
        c.classify(secs(0), e, OUT, &tcp("10.0.0.1", "10.0.0.2", 1, 2, ACK, 10))
            .prio,
        Some(1)
    );
}

#[test]
fn expire_is_bounded_by_budget() {
    let cfg = config(vec![pass()]);
    let mut c = classifier(&cfg);
    let e = c.iface("ext");
    for i in 0..100u16 {
        c.classify(secs(0), e, OUT, &udp("10.0.0.1", "10.0.0.2", 1000 + i, 53));
    }
    // Keep every tenth flow alive.
    for i in (0..100u16).step_by(10) {
        c.classify(secs(50), e, OUT, &udp("10.0.0.1", "10.0.0.2", 1000 + i, 53));
    }
    assert_eq!(c.expire(secs(30), 1000), 0, "nothing expired yet");
    let mut removed = 0;
    let mut calls = 0;
    while removed < 90 {
        let n = c.expire(secs(61), 7);
        assert!(n <= 7);
        removed += n;
        calls += 1;
        assert!(
            calls <= 100 / 7 + 1,
            "one sweep of 100 slots takes at most 15 calls"
        );
    }
    assert_eq!((removed, c.stats().states), (90, 10));
    assert_eq!(c.expire(secs(61), 1000), 0);
}
