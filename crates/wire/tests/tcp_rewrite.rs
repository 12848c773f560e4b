//! Byte-level tests of TCP window and MSS rewriting and of the window clamp
//! on real frames: every rewrite's incremental checksum equals a full
//! recomputation, over IPv4 and IPv6, bare and behind 802.1Q, QinQ and PPPoE.

use proptest::prelude::*;
use sluice_wire::build::{self, TcpSpec};
use sluice_wire::tcp::{
    rewrite_mss, rewrite_window, tcp_checksum, OptionError, Refused, TcpHeader, TcpOption,
};
use sluice_wire::tcp_flags::{ACK, SYN};
use sluice_wire::tcpwin::{PassReason, Verdict, WindowClamp};
use sluice_wire::{parse, Af, PacketInfo, ETHERTYPE_QINQ, ETHERTYPE_VLAN};
use std::net::IpAddr;

/// A pure ACK 192.168.1.10:51514 → 93.184.216.34:443 in VLAN 100 with
/// NOP NOP timestamps, window 0x01f5. The TCP checksum (0x130a) and the one
/// after the window becomes 0x0040 (0x14bf) were computed outside sluice
/// (a few lines of Python over the pseudo-header and segment).
const ACK_V4_VLAN: [u8; 70] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x81, 0x00, //
    0x00, 0x64, 0x08, 0x00, 0x45, 0x00, 0x00, 0x34, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, //
    0x26, 0xf1, 0xc0, 0xa8, 0x01, 0x0a, 0x5d, 0xb8, 0xd8, 0x22, 0xc9, 0x3a, 0x01, 0xbb, //
    0x9a, 0x2b, 0x1c, 0x01, 0x5e, 0x6f, 0x70, 0x81, 0x80, 0x10, 0x01, 0xf5, 0x13, 0x0a, //
    0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x0a, 0x0b, 0x0c, 0x0d, 0x01, 0x02, 0x03, 0x04,
];

/// A pure ACK 2001:db8::10:443 → 2001:db8:1::20:40000 with a SACK block and
/// timestamps, window 0x0100; checksum 0xaf91, and 0xb091 once the window is
/// 0xffff (computed outside sluice, as above).
const ACK_V6_SACK: [u8; 98] = [
    0x33, 0x33, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x86, 0xdd, //
    0x60, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, //
    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0xbb, //
    0x9c, 0x40, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22, 0xb0, 0x10, 0x01, 0x00, //
    0xaf, 0x91, 0x00, 0x00, 0x01, 0x01, 0x05, 0x0a, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, //
    0x20, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x09,
];

fn stored_checksum(f: &[u8]) -> u16 {
    let info = parse(f).unwrap();
    TcpHeader::in_frame(f, &info).unwrap().checksum()
}

fn window_of(f: &[u8]) -> u16 {
    let info = parse(f).unwrap();
    TcpHeader::in_frame(f, &info).unwrap().window()
}

/// The stored checksum equals a full recomputation.
fn assert_checksum_ok(f: &[u8]) {
    let info = parse(f).unwrap();
    assert_eq!(
        stored_checksum(f),
        tcp_checksum(f, &info).unwrap(),
        "checksum differs from recomputation"
    );
}

#[test]
fn captured_frames_read_back() {
    let info = parse(&ACK_V4_VLAN).unwrap();
    let h = TcpHeader::in_frame(&ACK_V4_VLAN, &info).unwrap();
    assert_eq!((h.sport(), h.dport()), (51514, 443));
    assert_eq!((h.seq(), h.ack()), (0x9a2b_1c01, 0x5e6f_7081));
    assert_eq!((h.flags(), h.window(), h.header_len()), (ACK, 0x01f5, 32));
    let s = h.segment();
    assert_eq!(s.options.timestamps, Some((0x0a0b_0c0d, 0x0102_0304)));
    assert_checksum_ok(&ACK_V4_VLAN);

    let info = parse(&ACK_V6_SACK).unwrap();
    let s = TcpHeader::in_frame(&ACK_V6_SACK, &info).unwrap().segment();
    assert_eq!(s.options.sack_blocks(), &[(0x1000, 0x2000)]);
    assert_eq!(s.options.timestamps, Some((7, 9)));
    assert!(s.options.fully_understood());
    assert_checksum_ok(&ACK_V6_SACK);
}

/// The rewrite gives the checksum an independent computation gives, touches
/// only the window and checksum bytes, and rewriting back restores the frame.
#[test]
fn rewrite_matches_independently_computed_checksums() {
    for (orig, new_win, new_sum, win_at) in [
        (&ACK_V4_VLAN[..], 0x0040u16, 0x14bfu16, 52usize),
        (&ACK_V6_SACK[..], 0xffff, 0xb091, 68),
    ] {
        let mut f = orig.to_vec();
        let info = parse(&f).unwrap();
        let old = window_of(&f);
        assert_eq!(rewrite_window(&mut f, &info, new_win), Ok(old));
        assert_eq!(window_of(&f), new_win);
        assert_eq!(stored_checksum(&f), new_sum);
        let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != orig[i]).collect();
        assert!(
            changed.iter().all(|&i| (win_at..win_at + 4).contains(&i)),
            "{changed:?}"
        );
        assert_eq!(rewrite_window(&mut f, &info, old), Ok(new_win));
        assert_eq!(f, orig);
    }
}

/// Every one of the 65536 window values, reached by a chain of incremental
/// updates (errors would accumulate), equals a full recomputation; the chain
/// passes through a checksum of 0x0000, RFC 1624's -0 corner, and must give
/// 0x0000 there (eqn. 2 would give 0xffff).
#[test]
fn every_window_value_equals_recomputation() {
    for orig in [&ACK_V4_VLAN[..], &ACK_V6_SACK[..]] {
        let mut f = orig.to_vec();
        let info = parse(&f).unwrap();
        let mut zero_seen = false;
        for w in 0..=u16::MAX {
            rewrite_window(&mut f, &info, w).unwrap();
            let c = stored_checksum(&f);
            assert_eq!(c, tcp_checksum(&f, &info).unwrap(), "window {w:#x}");
            assert_ne!(c, 0xffff, "window {w:#x}: -0");
            zero_seen |= c == 0;
        }
        assert!(zero_seen, "the chain must cross the 0x0000 corner");
    }
}

#[test]
fn mss_at_an_odd_offset() {
    // NOP then MSS: the MSS value starts at TCP byte 23 (odd) and straddles
    // two checksum words.
    let mut opts = vec![1u8];
    TcpOption::Mss(1460).encode(&mut opts);
    TcpOption::WindowScale(7).encode(&mut opts);
    for (src, dst) in addrs() {
        let spec = TcpSpec {
            sport: 40000,
            dport: 443,
            seq: 7,
            flags: SYN,
            window: 64240,
            options: &opts,
            ..Default::default()
        };
        let mut f = build::tcp_with(src, dst, &spec);
        let info = parse(&f).unwrap();
        assert_checksum_ok(&f);
        // Lowered, never raised: 0xffff and 0x0100 leave 0x00ff as it is.
        for mss in [0xffffu16, 1400, 0x00ff, 0x0100, 0] {
            let before = TcpHeader::in_frame(&f, &info)
                .unwrap()
                .segment()
                .options
                .mss
                .unwrap();
            assert_eq!(rewrite_mss(&mut f, &info, mss), Ok(before));
            let s = TcpHeader::in_frame(&f, &info).unwrap().segment();
            assert_eq!(s.options.mss, Some(mss.min(before)));
            assert_eq!(s.options.window_scale, Some(7));
            assert_checksum_ok(&f);
        }
    }
}

#[test]
fn every_mss_option_above_the_limit_is_lowered_and_none_raised() {
    // Stacks take the last of several MSS options: clamping only the first
    // would leave the one that counts above the limit.
    let mut opts = Vec::new();
    for v in [1000u16, 1460, 1300, 9000] {
        TcpOption::Mss(v).encode(&mut opts);
    }
    for (src, dst) in addrs() {
        let spec = TcpSpec {
            flags: SYN,
            options: &opts,
            ..Default::default()
        };
        let mut f = build::tcp_with(src, dst, &spec);
        let info = parse(&f).unwrap();
        assert_eq!(rewrite_mss(&mut f, &info, 1400), Ok(9000));
        let h = TcpHeader::in_frame(&f, &info).unwrap();
        let all: Vec<_> = sluice_wire::tcp::Options::new(h.option_bytes())
            .filter_map(|o| match o {
                Ok(TcpOption::Mss(v)) => Some(v),
                _ => None,
            })
            .collect();
        assert_eq!(all, [1000, 1400, 1300, 1400]);
        assert_eq!(h.segment().options.mss_max, Some(1400));
        assert_checksum_ok(&f);
    }
}

#[test]
fn signed_segments_are_never_rewritten() {
    // TCP-MD5 (kind 19, 18 bytes) and TCP-AO (kind 29) sign the header.
    let (src, dst) = addrs()[0];
    for kind in [19u8, 29] {
        let mut opts = Vec::new();
        TcpOption::Mss(1460).encode(&mut opts);
        TcpOption::Unknown {
            kind,
            data: &[0xab; 16],
        }
        .encode(&mut opts);
        let spec = TcpSpec {
            flags: SYN | ACK,
            window: 64240,
            options: &opts,
            ..Default::default()
        };
        let mut f = build::tcp_with(src, dst, &spec);
        let orig = f.clone();
        let info = parse(&f).unwrap();
        let seg = TcpHeader::in_frame(&f, &info).unwrap().segment();
        assert!(seg.options.authenticated, "kind {kind}");
        assert_eq!(
            rewrite_window(&mut f, &info, 100),
            Err(Refused::Authenticated)
        );
        assert_eq!(rewrite_mss(&mut f, &info, 536), Err(Refused::Authenticated));
        assert_eq!(f, orig);
    }
}

#[test]
fn tcp_behind_an_ipv6_authentication_header_is_never_rewritten() {
    // IPv6, next header AH (51: 12 bytes fixed + a 12-byte ICV = 24 bytes,
    // length field 4), then TCP.
    let (src, dst) = addrs()
        .into_iter()
        .find(|(s, _)| s.is_ipv6())
        .expect("an IPv6 pair");
    let plain = build::tcp_with(
        src,
        dst,
        &TcpSpec {
            flags: ACK,
            window: 5000,
            ..Default::default()
        },
    );
    let info = parse(&plain).unwrap();
    let l4 = info.ip.unwrap().l4_offset;
    let mut f = plain[..l4].to_vec();
    let mut ah = vec![6u8, 4, 0, 0];
    ah.extend([0u8; 20]);
    f.extend(&ah);
    f.extend(&plain[l4..]);
    f[l4 - 40 + 6] = 51;
    let plen = u16::from_be_bytes([f[l4 - 40 + 4], f[l4 - 40 + 5]]) + 24;
    f[l4 - 40 + 4..l4 - 40 + 6].copy_from_slice(&plen.to_be_bytes());
    let info = parse(&f).unwrap();
    let ip = info.ip.unwrap();
    assert!(ip.authenticated && ip.l4_offset == l4 + 24);
    let orig = f.clone();
    assert_eq!(
        rewrite_window(&mut f, &info, 100),
        Err(Refused::Authenticated)
    );
    assert_eq!(f, orig);
}

#[test]
fn mss_rewrite_refusals() {
    let (src, dst) = addrs()[0];
    let mut f = build::tcp(src, dst, 1, 2, SYN, 0);
    let info = parse(&f).unwrap();
    assert_eq!(rewrite_mss(&mut f, &info, 1), Err(Refused::NoMss));
    let spec = TcpSpec {
        flags: SYN,
        options: &[1, 30, 1, 2, 4, 5, 0xb4],
        ..Default::default()
    };
    let mut g = build::tcp_with(src, dst, &spec);
    let orig = g.clone();
    let info = parse(&g).unwrap();
    assert_eq!(
        rewrite_mss(&mut g, &info, 1),
        Err(Refused::BadOptions(OptionError::BadLength {
            at: 1,
            kind: 30,
            len: 1
        }))
    );
    assert_eq!(g, orig);
}

fn addrs() -> Vec<(IpAddr, IpAddr)> {
    vec![
        (
            build::V4_SRC.into(),
            "203.0.113.9".parse::<IpAddr>().unwrap(),
        ),
        (
            build::V6_SRC.into(),
            "2001:db8:ffff::9".parse::<IpAddr>().unwrap(),
        ),
    ]
}

/// Wrap `f` in encapsulation `enc`: 0 bare, 1 802.1Q, 2 QinQ, 3 PPPoE,
/// 4 QinQ + PPPoE.
fn encap(f: &[u8], enc: u8) -> Vec<u8> {
    let vlan = |f: &[u8]| build::vlan_wrap(f, ETHERTYPE_VLAN, 42);
    let qinq = |f: &[u8]| build::vlan_wrap(&vlan(f), ETHERTYPE_QINQ, 7);
    match enc {
        0 => f.to_vec(),
        1 => vlan(f),
        2 => qinq(f),
        3 => build::pppoe_wrap(f, 0x99),
        _ => qinq(&build::pppoe_wrap(f, 0x99)),
    }
}

fn option_set(i: u8) -> Vec<u8> {
    let mut b = Vec::new();
    let blocks = [0u8, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0];
    match i % 5 {
        0 => {}
        1 => {
            for o in [
                TcpOption::Mss(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps { tsval: 1, tsecr: 0 },
                TcpOption::WindowScale(7),
            ] {
                o.encode(&mut b);
            }
        }
        2 => {
            b.extend_from_slice(&[1, 1]);
            TcpOption::Timestamps {
                tsval: 0xdead_beef,
                tsecr: 0xfeed_f00d,
            }
            .encode(&mut b);
        }
        3 => {
            b.extend_from_slice(&[1, 1]);
            TcpOption::Sack(sluice_wire::tcp::SackBlocks::new(&blocks).unwrap()).encode(&mut b);
        }
        _ => b.extend_from_slice(&[1, 0x55, 9, 0]), // malformed: runs past the header
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Random TCP frames (family, encapsulation, options, payload, fields)
    /// and random new windows: the rewritten checksum equals a full
    /// recomputation, only four bytes change, and the old value comes back.
    #[test]
    fn incremental_equals_recomputation(
        v6 in any::<bool>(),
        enc in 0u8..5,
        opt in any::<u8>(),
        seq in any::<u32>(),
        ack in any::<u32>(),
        flags in any::<u8>(),
        old_win in any::<u16>(),
        new_wins in prop::collection::vec(any::<u16>(), 1..8),
        payload_len in 0usize..1500,
    ) {
        let (src, dst) = addrs()[usize::from(v6)];
        let opts = option_set(opt);
        let spec = TcpSpec {
            sport: 1234, dport: 80, seq, ack, flags, window: old_win,
            options: &opts, payload_len,
        };
        let orig = encap(&build::tcp_with(src, dst, &spec), enc);
        let info = parse(&orig).unwrap();
        prop_assert_eq!(info.ip.unwrap().af, if v6 { Af::V6 } else { Af::V4 });
        assert_checksum_ok(&orig);
        let mut f = orig.clone();
        let mut prev = old_win;
        for w in new_wins {
            prop_assert_eq!(rewrite_window(&mut f, &info, w), Ok(prev));
            prop_assert_eq!(window_of(&f), w);
            assert_checksum_ok(&f);
            let changed = (0..f.len()).filter(|&i| f[i] != orig[i]).count();
            prop_assert!(changed <= 4, "{} bytes changed", changed);
            prev = w;
        }
        prop_assert_eq!(parse(&f).unwrap(), info);
    }
}

#[test]
fn refusals_leave_the_frame_untouched() {
    let (src, dst) = addrs()[0];
    let check = |f: &mut Vec<u8>, info: &sluice_wire::PacketInfo, why: Refused| {
        let orig = f.clone();
        assert_eq!(rewrite_window(f, info, 1), Err(why));
        assert_eq!(*f, orig);
    };
    // Not IP.
    let mut a = build::arp(build::V4_SRC, build::V4_DST);
    let info = parse(&a).unwrap();
    check(&mut a, &info, Refused::NotIp);
    // UDP.
    let mut u = build::udp(src, dst, 1, 2, 10);
    let info = parse(&u).unwrap();
    check(&mut u, &info, Refused::NotTcp);
    // First and later fragments.
    for (more, off) in [(true, 0u16), (false, 100)] {
        let mut t = build::tcp(src, dst, 1, 2, ACK, 100);
        build::set_ipv4_frag(&mut t, more, off).unwrap();
        let info = parse(&t).unwrap();
        check(&mut t, &info, Refused::Fragment);
    }
    // A description of a longer frame applied to a cut one.
    let t = build::tcp(src, dst, 1, 2, ACK, 100);
    let info = parse(&t).unwrap();
    let mut cut = t[..40].to_vec();
    check(&mut cut, &info, Refused::Truncated);
    // The header changed under its description: data offset 4 words, then 15.
    let mut bad = t.clone();
    bad[46] = 0x40;
    check(&mut bad, &info, Refused::BadDataOffset(4));
    let mut short = build::tcp(src, dst, 1, 2, ACK, 0);
    let info = parse(&short).unwrap();
    short[46] = 0xf0;
    check(&mut short, &info, Refused::BadDataOffset(15));
    // Every truncation of a description's frame is refused, never a panic.
    let t = encap(&build::tcp(src, dst, 1, 2, ACK, 0), 4);
    let info = parse(&t).unwrap();
    for n in 0..t.len() {
        let mut c = t[..n].to_vec();
        assert!(rewrite_window(&mut c, &info, 1).is_err(), "cut at {n}");
        assert_eq!(c, &t[..n]);
    }
}

/// A handshake and an ACK as frames; returns the ACK after the clamp's
/// rewrite and its verdict.
fn handshake_then_ack(
    src: IpAddr,
    dst: IpAddr,
    enc: u8,
    rcv_ws: Option<u8>,
    snd_ws: Option<u8>,
    ack_window: u16,
    target: u32,
) -> (WindowClamp, Vec<u8>, Verdict) {
    let af = if src.is_ipv4() { Af::V4 } else { Af::V6 };
    let mut c = WindowClamp::new(af);
    let mut ro = Vec::new();
    TcpOption::Mss(1400).encode(&mut ro);
    TcpOption::SackPermitted.encode(&mut ro);
    TcpOption::Timestamps { tsval: 5, tsecr: 0 }.encode(&mut ro);
    if let Some(s) = rcv_ws {
        ro.push(1);
        TcpOption::WindowScale(s).encode(&mut ro);
    }
    let syn = TcpSpec {
        sport: 50000,
        dport: 443,
        seq: 100,
        flags: SYN,
        window: 65535,
        options: &ro,
        ..Default::default()
    };
    let mut f = encap(&build::tcp_with(src, dst, &syn), enc);
    let info = parse(&f).unwrap();
    assert_eq!(c.on_receiver_frame(&mut f, &info, None), Ok(Verdict::Keep));
    let mut so = Vec::new();
    if let Some(s) = snd_ws {
        TcpOption::WindowScale(s).encode(&mut so);
    }
    let synack = TcpSpec {
        sport: 443,
        dport: 50000,
        seq: 9000,
        ack: 101,
        flags: SYN | ACK,
        window: 65535,
        options: &so,
        ..Default::default()
    };
    let g = encap(&build::tcp_with(dst, src, &synack), enc);
    c.on_sender_frame(&g, &parse(&g).unwrap()).unwrap();
    let ack = client_ack(ack_window);
    let mut h = encap(&build::tcp_with(src, dst, &ack), enc);
    let info = parse(&h).unwrap();
    let v = c.on_receiver_frame(&mut h, &info, Some(target)).unwrap();
    (c, h, v)
}

/// Every scale factor 0..=14 (and 15, used as 14), IPv4 and IPv6, every
/// encapsulation: the ACK after the handshake carries ceil(target / 2^s)
/// (target above 2 · MSS and the edge of the receiver's SYN window), and its
/// checksum equals a recomputation.
#[test]
fn clamp_on_frames_every_scale() {
    for (src, dst) in addrs() {
        for enc in 0..5 {
            for s in 0..=15u8 {
                let shift = s.min(14);
                // The SYN window (65535 bytes, passed as is) is an edge the
                // ACK must keep; 65535 bytes at this shift, rounded up.
                let edge_field = 65535u32.div_ceil(1 << shift);
                let (c, f, v) = handshake_then_ack(src, dst, enc, Some(s), Some(3), 65535, 100_000);
                assert_eq!(c.scale(), Some(shift));
                assert_eq!(c.window_scale_clamped(), s > 14);
                let want = 100_000u32.div_ceil(1 << shift).max(edge_field).min(65535) as u16;
                let expect = if want == 65535 {
                    Verdict::Keep
                } else {
                    Verdict::Rewrite(want)
                };
                assert_eq!(v, expect, "shift {s} enc {enc} {src}");
                assert_eq!(window_of(&f), want);
                assert_checksum_ok(&f);
            }
        }
    }
}

#[test]
fn clamp_without_scaling_and_floor() {
    let (src, dst) = addrs()[1];
    // The sender offers no window scale: unscaled.
    let (c, f, v) = handshake_then_ack(src, dst, 1, Some(7), None, 65535, 70_000);
    assert_eq!(c.scale(), Some(0));
    assert_eq!(v, Verdict::Keep, "70000 > 65535 offered");
    assert_eq!(window_of(&f), 65535);
    // Receiver advertises less than the target: untouched.
    let (_, f, v) = handshake_then_ack(src, dst, 0, Some(2), Some(2), 1000, 1 << 20);
    assert_eq!((v, window_of(&f)), (Verdict::Keep, 1000));
}

/// The client's first ACK after a handshake (50000 → 443, ISNs 100 and
/// 9000), advertising `window`.
fn client_ack(window: u16) -> TcpSpec<'static> {
    TcpSpec {
        sport: 50000,
        dport: 443,
        seq: 101,
        ack: 9001,
        flags: ACK,
        window,
        ..Default::default()
    }
}

/// Malformed options in a handshake, a flow without a handshake, and a
/// half-open one: the frame passes byte for byte, with a reason.
#[test]
fn uncontrollable_flows_pass_unmodified() {
    for (src, dst) in addrs() {
        let af = if src.is_ipv4() { Af::V4 } else { Af::V6 };
        let ack = client_ack(60000);
        let orig = build::tcp_with(src, dst, &ack);
        let info = parse(&orig).unwrap();

        let mut c = WindowClamp::new(af);
        assert_passes(&mut c, &orig, &info, PassReason::NoHandshake);

        let syn = TcpSpec {
            flags: SYN,
            window: 65535,
            ..ack
        };
        let mut s = build::tcp_with(src, dst, &syn);
        let sinfo = parse(&s).unwrap();
        c.on_receiver_frame(&mut s, &sinfo, None).unwrap();
        assert_passes(&mut c, &orig, &info, PassReason::HalfOpen);

        // Window-scale option with length 1 in the SYN: the flow is opaque.
        let bad = TcpSpec {
            flags: SYN,
            window: 65535,
            options: &[3, 1, 7],
            ..ack
        };
        let mut d = WindowClamp::new(af);
        let b = build::tcp_with(src, dst, &bad);
        let binfo = parse(&b).unwrap();
        assert_passes(&mut d, &b, &binfo, PassReason::BadOptions);
        assert_passes(&mut d, &orig, &info, PassReason::BadOptions);
    }
}

/// `c` lets `frame` by for `why` without changing a byte of it.
fn assert_passes(c: &mut WindowClamp, frame: &[u8], info: &PacketInfo, why: PassReason) {
    let mut f = frame.to_vec();
    assert_eq!(
        c.on_receiver_frame(&mut f, info, Some(1)),
        Ok(Verdict::Pass(why))
    );
    assert_eq!(f, frame);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The TCP fuzz entry point over arbitrary bytes and over mutated TCP
    /// frames: no panic, option walks end, rewrites keep checksums valid.
    #[test]
    fn fuzz_tcp_entry_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..200)) {
        sluice_wire::fuzz_tcp_entry(&data);
    }

    #[test]
    fn fuzz_tcp_entry_on_mutated_frames(
        v6 in any::<bool>(),
        enc in 0u8..5,
        opt in any::<u8>(),
        muts in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
    ) {
        let (src, dst) = addrs()[usize::from(v6)];
        let opts = option_set(opt);
        let spec = TcpSpec { flags: SYN | ACK, window: 1000, options: &opts, ..Default::default() };
        let mut f = encap(&build::tcp_with(src, dst, &spec), enc);
        for (pos, byte) in muts {
            let n = f.len();
            f[pos % n] = byte;
        }
        sluice_wire::fuzz_tcp_entry(&f);
    }
}
