//! Robustness: `parse` never panics on any input, and ECN rewriting keeps
//! every frame valid.

use proptest::prelude::*;
use sluice_wire::{build, internet_checksum, parse, set_ecn, Af, PacketInfo, WireError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn valid_frames() -> Vec<Vec<u8>> {
    let a4 = Ipv4Addr::new(192, 0, 2, 1);
    let b4 = Ipv4Addr::new(198, 51, 100, 7);
    let a6: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let b6: Ipv6Addr = "2001:db8:1::2".parse().unwrap();
    let mut v = vec![
        build::tcp(a4, b4, 40000, 443, 0x02, 0),
        build::tcp(a4, b4, 40000, 443, 0x18, 100),
        build::tcp(a6, b6, 40000, 443, 0x10, 0),
        build::udp_v4(a4, b4, 5353, 53, 30),
        build::udp_v6(a6, b6, 5353, 53, 30),
        build::icmp_v4_echo(a4, b4, 1, 2, 56),
        build::icmp_v6_echo(a6, b6, 1, 2, 56),
        build::arp(a4, b4),
    ];
    let wrapped: Vec<Vec<u8>> = v
        .iter()
        .flat_map(|f| {
            let p = build::pppoe_wrap(f, 9);
            let q = build::vlan_wrap(&p, sluice_wire::ETHERTYPE_VLAN, 10);
            [p, build::vlan_wrap(&q, sluice_wire::ETHERTYPE_QINQ, 20)]
        })
        .collect();
    v.extend(wrapped);
    v
}

#[test]
fn every_truncation_of_valid_frames_is_handled() {
    for f in valid_frames() {
        let full = parse(&f).expect("valid frame parses");
        for n in 0..f.len() {
            // Must not panic. Built IP frames carry no padding, so every cut
            // lands inside a header or the datagram and must be an error.
            let r = parse(&f[..n]);
            if full.ip.is_some() {
                assert!(r.is_err(), "cut at {n} of {} parsed: {r:?}", f.len());
            }
        }
    }
}

#[test]
fn set_ecn_v4_keeps_checksum_and_v6_keeps_dscp() {
    let a: IpAddr = "10.1.2.3".parse().unwrap();
    let b: IpAddr = "10.3.2.1".parse().unwrap();
    let mut f = build::tcp(a, b, 1, 2, 0x10, 10);
    build::set_tos(&mut f, 0xb8 | 0b10).unwrap(); // EF + ECT(0)
    let info = parse(&f).unwrap();
    set_ecn(&mut f, &info, 0b11).unwrap();
    let ip = parse(&f).unwrap().ip.unwrap();
    assert_eq!(ip.tos, 0xbb);
    assert_eq!(internet_checksum(&f[14..34]), 0);

    let mut g = build::udp(build::V6_SRC.into(), build::V6_DST.into(), 1, 2, 3);
    build::set_tos(&mut g, 0x28 | 0b01).unwrap(); // AF11 + ECT(1)
    let info = parse(&g).unwrap();
    set_ecn(&mut g, &info, 0b11).unwrap();
    let ip = parse(&g).unwrap().ip.unwrap();
    assert_eq!((ip.af, ip.tos), (Af::V6, 0x2b));

    let arp = build::arp(Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(1, 2, 3, 5));
    let mut arp2 = arp.clone();
    assert_eq!(
        set_ecn(&mut arp2, &parse(&arp).unwrap(), 3),
        Err(WireError::NotIp)
    );
    // An info that does not fit the buffer is an error, not a panic.
    let bogus = PacketInfo {
        l3_offset: 1000,
        ..info
    };
    assert!(set_ecn(&mut g, &bogus, 3).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        sluice_wire::fuzz_entry(&data);
    }

    /// Arbitrary bytes behind a plausible link header reach the IP parsers.
    #[test]
    fn parse_never_panics_behind_ip_ethertypes(
        et in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x8864), Just(0x8100)],
        first in prop_oneof![Just(0x45u8), Just(0x60), Just(0x11), any::<u8>()],
        data in proptest::collection::vec(any::<u8>(), 0..160),
    ) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&et.to_be_bytes());
        f.push(first);
        f.extend_from_slice(&data);
        sluice_wire::fuzz_entry(&f);
    }

    /// Single-byte corruptions of valid frames never panic, and ECN rewriting
    /// of whatever still parses round-trips.
    #[test]
    fn mutated_valid_frames(idx in 0usize..24, pos in any::<usize>(), byte in any::<u8>()) {
        let frames = valid_frames();
        let mut f = frames[idx % frames.len()].clone();
        let p = pos % f.len();
        f[p] = byte;
        sluice_wire::fuzz_entry(&f);
    }
}
