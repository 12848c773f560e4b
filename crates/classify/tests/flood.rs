//! State-table exhaustion (issue #12 item 2), at the classifier: configs
//! written as text (so pf's defaults come from `sluice-conf`), spoofed
//! segments with pseudo-random 5-tuples, then a real connection.

mod common;

use common::*;
use sluice_classify::{BlockReason, Classifier, IfaceId, StateHit, Verdict};
use sluice_conf::ir::Direction;
use sluice_wire::tcp_flags::*;

const IN: Direction = Direction::In;
const OUT: Direction = Direction::Out;

/// Stateful rules on both sides and a table of 2 000 states: the
/// incident's configuration.
const STATEFUL_2000: &str = "set limit states 2000\n\
                             pass out on lan keep state\n\
                             pass out on wan keep state\n";

/// A new LAN connection (10.0.0.7:40000 to 192.0.2.1:443) at 2 s: its SYN
/// passes and creates the state, seen Out on `wan`; the SYN-ACK, In on
/// `wan`, matches it.
fn lan_connection_opens(c: &mut Classifier, wan: IfaceId) {
    let syn = tcp("10.0.0.7", "192.0.2.1", 40000, 443, SYN, 0);
    let d = c.classify(secs(2), wan, OUT, &syn);
    assert_eq!((d.verdict, d.state), (Verdict::Pass, StateHit::Created));
    let synack = tcp("192.0.2.1", "10.0.0.7", 443, 40000, SYN | ACK, 0);
    assert_eq!(
        c.classify(secs(2), wan, IN, &synack).state,
        StateHit::Matched
    );
}

/// xorshift: spoofed 5-tuples without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn addr(&mut self) -> String {
        let v = self.next();
        format!("198.{}.{}.{}", v as u8, (v >> 8) as u8, (v >> 16) as u8)
    }
    fn port(&mut self) -> u16 {
        1024 + (self.next() % 60_000) as u16
    }
}

/// The incident of the issue: 3 000 spoofed ACKs from the WAN (seen Out on
/// the LAN side, as a bridge evaluates them) into `set limit states 2000`.
/// With pf's `flags S/SA` default they match no stateful rule and create no
/// state; a new LAN connection then gets its state. (Before: 2 000 states,
/// 1 000 refused, and the LAN SYN refused with StateLimit.)
#[test]
fn spoofed_acks_create_no_state_and_lan_connections_still_open() {
    let mut c = from_text(STATEFUL_2000);
    let (lan, wan) = (c.iface("lan"), c.iface("wan"));
    let mut rng = Rng(0x5eed);
    let mut refused = 0;
    for _ in 0..3000 {
        let p = tcp(&rng.addr(), "10.0.0.7", rng.port(), rng.port(), ACK, 0);
        let d = c.classify(secs(1), lan, OUT, &p);
        refused += u32::from(d.verdict == Verdict::Block(BlockReason::StateLimit));
        assert_ne!(d.state, StateHit::Created, "an ACK created a state");
    }
    assert_eq!((c.stats().states, refused), (0, 0));
    lan_connection_opens(&mut c, wan);
}

/// `flags any` opts out (pf.conf(5)): every segment may create a state, so
/// the same flood fills the table, where its unanswered states evict each
/// other; `no state` rules get no default either.
#[test]
fn flags_any_opts_out_of_the_default() {
    let cfg = sluice_conf::check(
        "t.conf",
        "set limit states 100\npass out on lan flags any keep state\n\
         pass in on lan no state\npass in on wan proto udp keep state\n",
        &[],
    )
    .unwrap()
    .config;
    let flags: Vec<_> = cfg.rules.iter().map(|r| r.flags).collect();
    assert_eq!(flags, [None, None, None]);
    let mut c = classifier(&cfg);
    let lan = c.iface("lan");
    let mut rng = Rng(7);
    for _ in 0..300 {
        let p = tcp(&rng.addr(), "10.0.0.7", rng.port(), rng.port(), ACK, 0);
        c.classify(secs(1), lan, OUT, &p);
    }
    let s = c.stats();
    assert_eq!(
        (s.states, s.states_evicted, s.state_limit_hits),
        (100, 200, 0)
    );
    let dflt = sluice_conf::check("t.conf", "pass out keep state\n", &[]).unwrap();
    assert_eq!(dflt.config.rules[0].flags, Some((SYN, SYN | ACK)));
}

/// An explicit `flags` is honoured as written; UDP still matches a rule
/// carrying the implicit S/SA (pf tests flags on TCP only).
#[test]
fn explicit_flags_are_honoured_and_udp_ignores_the_default() {
    let mut c = from_text("pass out on lan flags SE/SAE keep state\npass out on wan keep state\n");
    let (lan, wan) = (c.iface("lan"), c.iface("wan"));
    let syn = tcp("10.0.0.1", "10.0.0.2", 1, 2, SYN, 0);
    assert_eq!(c.classify(secs(0), lan, OUT, &syn).state, StateHit::None);
    let ecn_syn = tcp("10.0.0.1", "10.0.0.2", 3, 2, SYN | ECE, 0);
    assert_eq!(
        c.classify(secs(0), lan, OUT, &ecn_syn).state,
        StateHit::Created
    );
    let u = udp("10.0.0.1", "10.0.0.2", 5000, 53);
    assert_eq!(c.classify(secs(0), lan, OUT, &u).state, StateHit::Created);
    let u2 = udp("10.0.0.1", "10.0.0.2", 5001, 53);
    assert_eq!(c.classify(secs(0), wan, OUT, &u2).state, StateHit::Created);
}

/// A SYN flood does create states (they match `flags S/SA`); into a full
/// table, a new connection evicts an embryonic one instead of being
/// refused, and once answered it is never evicted by later floods.
/// (Before: the LAN SYN refused with StateLimit.)
#[test]
fn syn_flood_evicts_embryonic_states_never_the_established_connection() {
    let mut c = from_text(STATEFUL_2000);
    let (lan, wan) = (c.iface("lan"), c.iface("wan"));
    let mut rng = Rng(0xf100d);
    let mut flood = |c: &mut Classifier, at: u64, n: u32| {
        let mut passed = 0;
        for _ in 0..n {
            let p = tcp(&rng.addr(), "10.0.0.7", rng.port(), 80, SYN, 0);
            passed += u32::from(c.classify(secs(at), lan, OUT, &p).verdict == Verdict::Pass);
        }
        passed
    };
    flood(&mut c, 1, 3000);
    assert_eq!(c.stats().states, 2000);
    lan_connection_opens(&mut c, wan);
    let ack = tcp("10.0.0.7", "192.0.2.1", 40000, 443, ACK, 0);
    assert_eq!(c.classify(secs(2), wan, OUT, &ack).state, StateHit::Matched);
    let passed = flood(&mut c, 3, 20_000);
    let s = c.stats();
    eprintln!(
        "flood: {passed} of 20000 SYNs admitted, {} evicted, {} refused, {} states",
        s.states_evicted, s.state_limit_hits, s.states
    );
    assert!(s.states <= 2000);
    let data = tcp("192.0.2.1", "10.0.0.7", 443, 40000, ACK | PSH, 1000);
    let d = c.classify(secs(4), wan, IN, &data);
    assert_eq!(
        d.state,
        StateHit::Matched,
        "the established connection survived"
    );
}

/// A bridge evaluates each frame twice (In on ingress, Out on egress) and
/// each half has its own state. The LAN's SYN creates the upload half (Out
/// on wan); the download half (Out on lan) is created by the SYN-ACK, which
/// `flags S/SA` alone would refuse: a segment of a connection whose other
/// half is known creates its half (spoofed segments have no other half).
/// That half starts from the other half's tracking, so after the handshake
/// both are ESTABLISHED:ESTABLISHED (tcp.established, never evicted).
#[test]
fn the_second_half_of_a_bridged_connection_gets_its_state_and_queue() {
    let text = "altq on lan priq bandwidth 10Mb queue { dn_bulk, dn_ack }\n\
                queue dn_bulk priority 1 priq(default)\nqueue dn_ack priority 7\n\
                pass out on lan proto tcp keep state queue (dn_bulk, dn_ack)\n\
                pass out on wan keep state\n";
    let mut c = from_text(text);
    let (lan, wan) = (c.iface("lan"), c.iface("wan"));
    let up = |f, n| tcp("10.0.0.7", "192.0.2.1", 40000, 443, f, n);
    let down = |f, n| tcp("192.0.2.1", "10.0.0.7", 443, 40000, f, n);
    // SYN: in on lan (no rule), out on wan (creates the upload half).
    c.classify(secs(0), lan, IN, &up(SYN, 0));
    assert_eq!(
        c.classify(secs(0), wan, OUT, &up(SYN, 0)).state,
        StateHit::Created
    );
    // SYN-ACK: in on wan (upload half), out on lan (creates the download half).
    assert_eq!(
        c.classify(secs(0), wan, IN, &down(SYN | ACK, 0)).state,
        StateHit::Matched
    );
    let d = c.classify(secs(0), lan, OUT, &down(SYN | ACK, 0));
    assert_eq!(d.state, StateHit::Created, "the download half");
    let dn_ack = c.queue_lookup("dn_ack");
    assert_eq!(d.queue, dn_ack);
    // ACK, then data both ways.
    c.classify(secs(0), lan, IN, &up(ACK, 0));
    c.classify(secs(0), wan, OUT, &up(ACK, 0));
    c.classify(secs(1), wan, IN, &down(ACK, 1000));
    let d = c.classify(secs(1), lan, OUT, &down(ACK, 1000));
    assert_eq!(
        (d.state, d.queue),
        (StateHit::Matched, c.queue_lookup("dn_bulk"))
    );
    let mut halves: Vec<String> = c.states().map(|v| v.proto_state.to_string()).collect();
    halves.sort();
    assert_eq!(
        halves,
        ["ESTABLISHED:ESTABLISHED", "ESTABLISHED:ESTABLISHED"]
    );
    // An hour idle (tcp.opening would be 30 s): still both there.
    let d = c.classify(secs(3600), lan, OUT, &down(ACK, 1000));
    assert_eq!(d.state, StateHit::Matched);
    // A spoofed ACK of an unknown connection still creates nothing.
    let spoof = tcp("192.0.2.9", "10.0.0.7", 443, 40001, ACK, 0);
    assert_eq!(
        c.classify(secs(3600), lan, OUT, &spoof).state,
        StateHit::None
    );
}

/// The closing flood at the classifier: 100 000 spoofed segments of
/// every flag combination and random 5-tuples, from either side, into
/// `set limit states 2000`; then a LAN connection opens and gets both
/// halves. Only SYN-without-ACK segments create states, and a full table
/// gives up unanswered ones. (Before: the table filled with the first
/// 2 000 segments and the LAN SYN was refused.)
#[test]
fn a_flood_of_every_flag_combination_leaves_new_connections_working() {
    let mut c = from_text(STATEFUL_2000);
    let (lan, wan) = (c.iface("lan"), c.iface("wan"));
    let mut rng = Rng(0xabcdef);
    for i in 0..100_000u32 {
        let flags = (i % 256) as u8;
        let p = tcp(&rng.addr(), "10.0.0.7", rng.port(), rng.port(), flags, 0);
        // From the WAN (out on lan) and from the LAN (out on wan).
        let (ifc, pkt) = if i % 2 == 0 {
            (lan, p)
        } else {
            (
                wan,
                tcp("10.0.0.7", &rng.addr(), rng.port(), rng.port(), flags, 0),
            )
        };
        c.classify(secs(1), ifc, OUT, &pkt);
    }
    let s = c.stats();
    eprintln!(
        "100k flood: {} states, {} created, {} evicted, {} refused",
        s.states, s.inserts, s.states_evicted, s.state_limit_hits
    );
    assert!(s.states <= 2000);
    let syn = tcp("10.0.0.7", "192.0.2.1", 40000, 443, SYN, 0);
    assert_eq!(c.classify(secs(2), wan, OUT, &syn).state, StateHit::Created);
    let synack = tcp("192.0.2.1", "10.0.0.7", 443, 40000, SYN | ACK, 0);
    assert_eq!(
        c.classify(secs(2), wan, IN, &synack).state,
        StateHit::Matched
    );
    assert_eq!(
        c.classify(secs(2), lan, OUT, &synack).state,
        StateHit::Created
    );
}
