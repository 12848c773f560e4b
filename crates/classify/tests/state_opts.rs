//! `set timeout` (with pf's adaptive scaling) and the per-rule state
//! options `max`, `max-src-states` and timeouts, from config text.

mod common;

use common::*;
use sluice_classify::{BlockReason, Classifier, StateHit, Verdict};
use sluice_conf::ir::Direction;
use sluice_wire::tcp_flags::*;

const IN: Direction = Direction::In;
const OUT: Direction = Direction::Out;

/// A full handshake on `sport`; the state is then ESTABLISHED:ESTABLISHED.
fn handshake(c: &mut Classifier, at: u64, sport: u16) {
    let e = c.iface("ext");
    let s = |f| tcp("10.0.0.1", "10.0.0.2", sport, 80, f, 0);
    let r = |f| tcp("10.0.0.2", "10.0.0.1", 80, sport, f, 0);
    assert_eq!(
        c.classify(secs(at), e, OUT, &s(SYN)).state,
        StateHit::Created
    );
    assert_eq!(
        c.classify(secs(at), e, IN, &r(SYN | ACK)).state,
        StateHit::Matched
    );
    assert_eq!(
        c.classify(secs(at), e, OUT, &s(ACK)).state,
        StateHit::Matched
    );
}

#[test]
fn set_timeout_is_acted_on() {
    let mut c =
        from_text("set timeout { tcp.established 100, udp.first 7 }\npass out keep state\n");
    let e = c.iface("ext");
    handshake(&mut c, 0, 1000);
    let data = tcp("10.0.0.1", "10.0.0.2", 1000, 80, ACK, 10);
    assert_eq!(c.classify(secs(99), e, OUT, &data).state, StateHit::Matched);
    // 100 s idle after the packet at 99 s: gone (pf's default would be 24 h).
    assert_ne!(
        c.classify(secs(199), e, OUT, &data).state,
        StateHit::Matched
    );
    c.classify(secs(200), e, OUT, &udp("10.0.0.1", "10.0.0.2", 5000, 53));
    let v = c.states().find(|v| v.proto == 17).unwrap();
    assert_eq!(v.expires, secs(207));
}

/// pf.conf(5): above adaptive.start states every timeout is scaled by
/// (adaptive.end − states) / (adaptive.end − adaptive.start); at
/// adaptive.end states expire at once.
#[test]
fn adaptive_timeouts_scale_with_the_state_count() {
    let mut c = from_text(
        "set limit states 100\nset timeout { adaptive.start 10, adaptive.end 30, udp.first 60 }\n\
         pass out keep state\n",
    );
    let e = c.iface("ext");
    let flow = |i: u16| udp("10.0.0.1", "10.0.0.2", 1000 + i, 53);
    for i in 0..10 {
        c.classify(secs(0), e, OUT, &flow(i));
    }
    let exp = |c: &Classifier| c.states().map(|v| v.expires).max().unwrap();
    assert_eq!(exp(&c), secs(60), "10 states: not above adaptive.start");
    for i in 10..20 {
        c.classify(secs(0), e, OUT, &flow(i));
    }
    // 20 states: (30 − 20) / (30 − 10) = 1/2.
    assert_eq!(exp(&c), secs(30));
    assert_eq!(
        c.classify(secs(29), e, OUT, &flow(0)).state,
        StateHit::Matched
    );
    for i in 20..30 {
        c.classify(secs(29), e, OUT, &flow(i));
    }
    // 30 states = adaptive.end: every state has expired.
    assert_eq!(c.stats().states, 30);
    assert_ne!(
        c.classify(secs(29), e, OUT, &flow(25)).state,
        StateHit::Matched
    );
    // Defaults: 60 % / 120 % of the limit; with both 0, no scaling.
    let off = sluice_conf::check(
        "t.conf",
        "set limit states 10\nset timeout { adaptive.start 0, adaptive.end 0 }\npass out keep state\n",
        &[],
    )
    .unwrap();
    let mut c = classifier(&off.config);
    let e = c.iface("ext");
    for i in 0..10 {
        c.classify(secs(0), e, OUT, &flow(i));
    }
    assert_eq!(exp(&c), secs(60));
}

#[test]
fn max_caps_the_states_of_a_rule_and_a_reload_restarts_the_count() {
    let text = "pass out proto tcp keep state (max 2)\npass out proto udp keep state\n";
    let cfg = sluice_conf::check("t.conf", text, &[]).unwrap().config;
    let mut c = classifier(&cfg);
    let e = c.iface("ext");
    let syn = |p| tcp("10.0.0.1", "10.0.0.2", p, 80, SYN, 0);
    assert_eq!(
        c.classify(secs(0), e, OUT, &syn(1)).state,
        StateHit::Created
    );
    assert_eq!(
        c.classify(secs(0), e, OUT, &syn(2)).state,
        StateHit::Created
    );
    let d = c.classify(secs(0), e, OUT, &syn(3));
    assert_eq!(d.verdict, Verdict::Block(BlockReason::StateLimit));
    assert_eq!(c.stats().rule_limit_hits, 1);
    // Another rule is not capped.
    for p in 0..5 {
        let u = udp("10.0.0.1", "10.0.0.2", p, 53);
        assert_eq!(c.classify(secs(0), e, OUT, &u).state, StateHit::Created);
    }
    // A reset frees a slot: the RST makes the state closed, port reuse removes it.
    let rst = tcp("10.0.0.2", "10.0.0.1", 80, 1, RST, 0);
    c.classify(secs(1), e, IN, &rst);
    c.expire(secs(200), 100);
    assert_eq!(
        c.classify(secs(200), e, OUT, &syn(3)).state,
        StateHit::Created
    );
    c.reload_rules(&cfg);
    assert_eq!(
        c.classify(secs(200), e, OUT, &syn(4)).state,
        StateHit::Created
    );
    assert_eq!(
        c.classify(secs(200), e, OUT, &syn(5)).state,
        StateHit::Created
    );
    assert_eq!(
        c.classify(secs(200), e, OUT, &syn(6)).verdict,
        Verdict::Block(BlockReason::StateLimit)
    );
}

#[test]
fn max_src_states_caps_each_source() {
    let mut c = from_text("pass in proto tcp keep state (max-src-states 2)\n");
    let e = c.iface("ext");
    let syn = |src: &str, p| tcp(src, "10.0.0.9", p, 80, SYN, 0);
    for p in [1, 2] {
        assert_eq!(
            c.classify(secs(0), e, IN, &syn("192.0.2.1", p)).state,
            StateHit::Created
        );
    }
    let d = c.classify(secs(0), e, IN, &syn("192.0.2.1", 3));
    assert_eq!(d.verdict, Verdict::Block(BlockReason::StateLimit));
    assert_eq!(
        c.classify(secs(0), e, IN, &syn("192.0.2.2", 3)).state,
        StateHit::Created
    );
    // Expired states stop counting (tcp.first 120 s).
    c.expire(secs(121), 100);
    assert_eq!(
        c.classify(secs(121), e, IN, &syn("192.0.2.1", 3)).state,
        StateHit::Created
    );
}

#[test]
fn per_rule_timeouts_override_set_timeout() {
    let mut c = from_text(
        "set timeout udp.first 50\npass out proto udp to port 53 keep state (udp.first 5)\n\
         pass out proto udp to port 123 keep state\n",
    );
    let e = c.iface("ext");
    c.classify(secs(0), e, OUT, &udp("10.0.0.1", "10.0.0.2", 1000, 53));
    c.classify(secs(0), e, OUT, &udp("10.0.0.1", "10.0.0.2", 1000, 123));
    let mut v: Vec<_> = c.states().map(|v| (v.dst.1, v.expires)).collect();
    v.sort();
    assert_eq!(v, [(53, secs(5)), (123, secs(50))]);
}

#[test]
fn max_src_nodes_caps_the_sources_of_a_rule() {
    let mut c = from_text("pass in proto tcp keep state (max-src-nodes 2)\n");
    let e = c.iface("ext");
    let syn = |src: &str, p| tcp(src, "10.0.0.9", p, 80, SYN, 0);
    for (src, p) in [("192.0.2.1", 1), ("192.0.2.2", 1), ("192.0.2.1", 2)] {
        assert_eq!(
            c.classify(secs(0), e, IN, &syn(src, p)).state,
            StateHit::Created
        );
    }
    let d = c.classify(secs(0), e, IN, &syn("192.0.2.3", 1));
    assert_eq!(d.verdict, Verdict::Block(BlockReason::StateLimit));
    // A source whose states are all gone frees its node (tcp.first 120 s).
    c.expire(secs(121), 100);
    assert_eq!(
        c.classify(secs(121), e, IN, &syn("192.0.2.3", 1)).state,
        StateHit::Created
    );
}

/// pf.conf(5) `max-src-conn`: connections that completed the handshake,
/// per source; the one beyond the cap is ended when it completes, and the
/// count drops as connections go.
#[test]
fn max_src_conn_ends_the_connection_beyond_the_cap() {
    let mut c = from_text("pass out proto tcp keep state (max-src-conn 2)\n");
    let e = c.iface("ext");
    handshake(&mut c, 0, 1);
    handshake(&mut c, 0, 2);
    // A third handshake: SYN and SYN-ACK pass, the completing ACK is refused
    // and the state removed.
    let s = |f| tcp("10.0.0.1", "10.0.0.2", 3, 80, f, 0);
    let r = |f| tcp("10.0.0.2", "10.0.0.1", 80, 3, f, 0);
    assert_eq!(
        c.classify(secs(0), e, OUT, &s(SYN)).state,
        StateHit::Created
    );
    assert_eq!(
        c.classify(secs(0), e, IN, &r(SYN | ACK)).state,
        StateHit::Matched
    );
    let d = c.classify(secs(0), e, OUT, &s(ACK));
    assert_eq!(d.verdict, Verdict::Block(BlockReason::StateLimit));
    assert_eq!(c.stats().states, 2);
    // Another source is not capped; a closed connection frees its slot.
    let rst = tcp("10.0.0.2", "10.0.0.1", 80, 1, RST, 0);
    c.classify(secs(1), e, IN, &rst);
    c.expire(secs(200), 100);
    handshake(&mut c, 200, 3);
    assert_eq!(c.stats().states, 2);
}

/// pf.conf(5) `max-src-conn-rate N/S`: more than N connections completing
/// their handshake in S seconds from one source: the extra one is ended.
/// The count decays over the window (pf's threshold).
#[test]
fn max_src_conn_rate_ends_connections_beyond_the_rate() {
    let mut c = from_text("pass out proto tcp keep state (max-src-conn-rate 2/10)\n");
    let e = c.iface("ext");
    handshake(&mut c, 0, 1);
    handshake(&mut c, 1, 2);
    let s = |f| tcp("10.0.0.1", "10.0.0.2", 3, 80, f, 0);
    let r = |f| tcp("10.0.0.2", "10.0.0.1", 80, 3, f, 0);
    c.classify(secs(2), e, OUT, &s(SYN));
    c.classify(secs(2), e, IN, &r(SYN | ACK));
    let d = c.classify(secs(2), e, OUT, &s(ACK));
    assert_eq!(d.verdict, Verdict::Block(BlockReason::StateLimit));
    assert_eq!(c.stats().rule_limit_hits, 1);
    // 30 s later the count has decayed: a new connection completes.
    handshake(&mut c, 32, 4);
}

/// pf.conf(5) `overload <t> flush global`: the source beyond max-src-conn
/// goes into the table, which a `block quick from <t>` rule then matches,
/// and all its states are removed; other sources are untouched; a reload
/// keeps it in the table.
#[test]
fn overload_puts_the_source_in_the_table_and_flushes_its_states() {
    let text = "table <bad> persist\n\
                block in quick from <bad>\n\
                pass in proto tcp to port 22 keep state (max-src-conn 1, overload <bad> flush global)\n\
                pass in proto udp keep state\n";
    let cfg = sluice_conf::check("t.conf", text, &[]).unwrap().config;
    let mut c = classifier(&cfg);
    let e = c.iface("ext");
    let conn = |c: &mut Classifier, src: &str, sport: u16| {
        let s = |f| tcp(src, "10.0.0.9", sport, 22, f, 0);
        let r = |f| tcp("10.0.0.9", src, 22, sport, f, 0);
        c.classify(secs(0), e, IN, &s(SYN));
        c.classify(secs(0), e, OUT, &r(SYN | ACK));
        c.classify(secs(0), e, IN, &s(ACK)).verdict
    };
    assert_eq!(conn(&mut c, "192.0.2.1", 1), Verdict::Pass);
    assert_eq!(conn(&mut c, "192.0.2.2", 1), Verdict::Pass);
    let u = udp("192.0.2.1", "10.0.0.9", 5000, 53);
    assert_eq!(c.classify(secs(0), e, IN, &u).state, StateHit::Created);
    // The second connection from .1 overloads it.
    assert_eq!(
        conn(&mut c, "192.0.2.1", 2),
        Verdict::Block(BlockReason::StateLimit)
    );
    assert_eq!(c.stats().overloads, 1);
    let left: Vec<String> = c.states().map(|v| v.src.0.to_string()).collect();
    assert_eq!(
        left,
        ["192.0.2.2"],
        "flush global removed every state of .1"
    );
    let d = c.classify(secs(1), e, IN, &udp("192.0.2.1", "10.0.0.9", 5001, 53));
    assert_eq!(
        d.verdict,
        Verdict::Block(BlockReason::Rule),
        "<bad> holds .1"
    );
    c.reload_rules(&cfg);
    let d = c.classify(secs(2), e, IN, &udp("192.0.2.1", "10.0.0.9", 5002, 53));
    assert_eq!(
        d.verdict,
        Verdict::Block(BlockReason::Rule),
        "kept across a reload"
    );
    let d = c.classify(secs(2), e, IN, &udp("192.0.2.3", "10.0.0.9", 5002, 53));
    assert_eq!(d.verdict, Verdict::Pass);
}
