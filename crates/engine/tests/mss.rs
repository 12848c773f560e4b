//! `scrub (max-mss …)` through the engine: which SYNs are clamped, to what,
//! with a valid checksum, and what passes untouched.

mod common;

use sluice_engine::{Engine, Rx};
use sluice_wire::build::{tcp_with, TcpSpec};
use sluice_wire::tcp::{tcp_checksum, TcpHeader, TcpOption};
use sluice_wire::tcp_flags::{ACK, SYN};
use std::net::{IpAddr, Ipv6Addr};

use common::{bridge as engine, CLIENT, LAN, SERVER, WAN};

fn syn(src: IpAddr, dst: IpAddr, flags: u8, opts: &[TcpOption]) -> Vec<u8> {
    let mut o = Vec::new();
    for x in opts {
        x.encode(&mut o);
    }
    let (sport, dport) = if flags & ACK != 0 {
        (443, 40_000)
    } else {
        (40_000, 443)
    };
    tcp_with(
        src,
        dst,
        &TcpSpec {
            sport,
            dport,
            seq: 1000,
            ack: if flags & ACK != 0 { 1001 } else { 0 },
            flags,
            window: 65535,
            options: &o,
            payload_len: 0,
        },
    )
}

/// Forwards `f` arriving on `from`; the frame that leaves, its MSS, and
/// whether its checksum is right.
fn through(e: &mut Engine, from: usize, f: Vec<u8>) -> (Vec<u8>, Option<u16>, bool) {
    assert!(matches!(
        e.handle_rx(sluice_time::Instant::ZERO, from, f),
        Rx::Queued { .. }
    ));
    let out = e
        .poll_tx(sluice_time::Instant::ZERO, 1 - from)
        .expect("forwarded");
    let info = sluice_wire::parse(&out).unwrap();
    let h = TcpHeader::in_frame(&out, &info).unwrap();
    let mss = h.segment().options.mss;
    let ok = tcp_checksum(&out, &info) == Ok(h.checksum());
    (out, mss, ok)
}

fn mss(v: u16) -> TcpOption<'static> {
    TcpOption::Mss(v)
}

#[test]
fn both_ends_syns_are_clamped_by_a_match_rule_and_its_state() {
    let mut e = engine("match scrub (max-mss 1200)\npass\n");
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    let opts = [
        mss(1460),
        TcpOption::SackPermitted,
        TcpOption::WindowScale(7),
    ];
    let (_, m, ok) = through(&mut e, LAN, syn(c, s, SYN, &opts));
    assert_eq!((m, ok), (Some(1200), true));
    // The server's SYN-ACK matches the state: clamped too.
    let (_, m, ok) = through(&mut e, WAN, syn(s, c, SYN | ACK, &[mss(1460)]));
    assert_eq!((m, ok), (Some(1200), true));
    assert_eq!(e.counters(LAN).unwrap().mss_clamped, 1);
    assert_eq!(e.counters(WAN).unwrap().mss_clamped, 1);
    // Counted on the rule that decided them (the pass rule, whose state
    // the SYN-ACK matched), as pfctl -vsr counts packets.
    let r = e.classifier().rule_stats();
    assert_eq!((r[0].mss_clamped, r[1].mss_clamped), (0, 2));
}

#[test]
fn smaller_or_absent_mss_and_other_segments_pass_unchanged() {
    let mut e = engine("pass scrub (max-mss 1200)\n");
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    let f = syn(c, s, SYN, &[mss(1000)]);
    let (out, m, _) = through(&mut e, LAN, f.clone());
    assert_eq!((out, m), (f, Some(1000)), "never raised");
    let f = syn(c, s, SYN, &[TcpOption::SackPermitted]);
    let (out, m, _) = through(&mut e, LAN, f.clone());
    assert_eq!((out, m), (f, None), "never added");
    assert_eq!(e.counters(LAN).unwrap().mss_clamped, 0);
}

#[test]
fn ipv6_is_clamped_and_never_below_1220() {
    let mut e = engine("pass scrub (max-mss 600)\n");
    let c = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 10));
    let s = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let (_, m, ok) = through(&mut e, LAN, syn(c, s, SYN, &[mss(1440)]));
    assert_eq!((m, ok), (Some(1220), true));
}

#[test]
fn auto_follows_the_rate_of_the_interface_the_syn_arrived_on() {
    // 120 kbit/s with PPPoE over ATM on wan0: one 1514-byte frame takes
    // ~110 ms, so `auto` gives the floor, 536, to SYN-ACKs arriving there
    // (they announce what the client may upload). lan0 has no queues:
    // SYNs arriving on it are left alone.
    let mut e = engine(
        "set overhead on wan0 pppoe-llcsnap\n\
         altq on wan0 priq bandwidth 120Kb queue { q_pri, q_def }\n\
         queue q_pri priority 7\n\
         queue q_def priority 1 priq(default)\n\
         match scrub (max-mss auto)\n\
         pass\n",
    );
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    let (_, m, _) = through(&mut e, LAN, syn(c, s, SYN, &[mss(1460)]));
    assert_eq!(m, Some(1460));
    let f = syn(s, c, SYN | ACK, &[mss(1460)]);
    assert!(matches!(
        e.handle_rx(sluice_time::Instant::ZERO, WAN, f),
        Rx::Queued { .. }
    ));
    let out = e
        .poll_tx(sluice_time::Instant::ZERO, LAN)
        .expect("forwarded");
    let info = sluice_wire::parse(&out).unwrap();
    let h = TcpHeader::in_frame(&out, &info).unwrap();
    assert_eq!(h.segment().options.mss, Some(536));
    assert_eq!(tcp_checksum(&out, &info), Ok(h.checksum()));
}

#[test]
fn unreadable_options_pass_unmodified_and_counted() {
    let mut e = engine("pass scrub (max-mss 1200)\n");
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    // An option whose length runs past the header, before the MSS.
    let mut f = syn(c, s, SYN, &[TcpOption::SackPermitted, mss(1460)]);
    let opt = 14 + 20 + 20;
    f[opt + 1] = 40;
    let (out, _, _) = through(&mut e, LAN, f.clone());
    assert_eq!(out, f);
    assert_eq!(e.counters(LAN).unwrap().mss_untouched, 1);
}

#[test]
fn every_mss_option_of_a_syn_is_clamped_and_none_raised() {
    // Stacks take the last of several MSS options: a SYN with a small
    // first and a large last one is clamped where it counts.
    let mut e = engine("pass scrub (max-mss 1400)\n");
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    let (out, last, ok) = through(&mut e, LAN, syn(c, s, SYN, &[mss(1000), mss(1460)]));
    assert_eq!((last, ok), (Some(1400), true));
    let info = sluice_wire::parse(&out).unwrap();
    let h = TcpHeader::in_frame(&out, &info).unwrap();
    let all: Vec<u16> = sluice_wire::tcp::Options::new(h.option_bytes())
        .filter_map(|o| match o {
            Ok(TcpOption::Mss(v)) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(all, [1000, 1400], "the first kept, the last lowered");
    assert_eq!(e.counters(LAN).unwrap().mss_clamped, 1);
}

#[test]
fn a_signed_syn_passes_unmodified_and_counted() {
    // TCP-MD5 (BGP) signs the header: a clamped MSS would be dropped.
    let mut e = engine("pass scrub (max-mss 1200)\n");
    let (c, s) = (IpAddr::V4(CLIENT), IpAddr::V4(SERVER));
    let sig = TcpOption::Unknown {
        kind: 19,
        data: &[0x5a; 16],
    };
    let f = syn(c, s, SYN, &[mss(1460), sig]);
    let (out, _, _) = through(&mut e, LAN, f.clone());
    assert_eq!(out, f);
    assert_eq!(e.counters(LAN).unwrap().mss_untouched, 1);
}
