//! Byte-level tests of `wire::tcp`: header and option parsing, rewrites.

use super::*;

fn opts(bytes: &[u8]) -> Vec<Result<TcpOption<'_>, OptionError>> {
    Options::new(bytes).collect()
}

/// The option block of a Linux SYN: MSS 1460, SACK-permitted, timestamps,
/// NOP, window scale 7.
const LINUX_SYN_OPTS: [u8; 20] = [
    0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x9b, 0x2e, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x03, 0x03, 0x07,
];

#[test]
fn linux_syn_options() {
    assert_eq!(
        opts(&LINUX_SYN_OPTS),
        vec![
            Ok(TcpOption::Mss(1460)),
            Ok(TcpOption::SackPermitted),
            Ok(TcpOption::Timestamps {
                tsval: 0x009b_2e01,
                tsecr: 0
            }),
            Ok(TcpOption::WindowScale(7)),
        ]
    );
    let o = TcpOptions::parse(&LINUX_SYN_OPTS);
    assert_eq!(o.mss, Some(1460));
    assert_eq!(o.window_scale, Some(7));
    assert!(!o.window_scale_clamped);
    assert!(o.sack_permitted);
    assert_eq!(o.timestamps, Some((0x009b_2e01, 0)));
    assert!(o.fully_understood());
}

/// An ACK with NOP NOP TS and NOP NOP SACK(2 blocks), as Linux sends it.
#[test]
fn sack_blocks_and_timestamps() {
    let b: [u8; 32] = [
        1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6, //
        1, 1, 5, 18, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0, 0, 0x30, 0, 0, 0, 0x40, 0,
    ];
    let o = TcpOptions::parse(&b);
    assert_eq!(o.timestamps, Some((5, 6)));
    assert_eq!(o.sack_blocks(), &[(0x1000, 0x2000), (0x3000, 0x4000)]);
    assert!(o.error.is_none());
    // Four blocks (the most 40 bytes hold) parse; an empty SACK does not.
    let mut four = vec![5u8, 34];
    for i in 0..8u32 {
        four.extend_from_slice(&(i * 100).to_be_bytes());
    }
    assert_eq!(TcpOptions::parse(&four).sack_blocks().len(), 4);
    assert_eq!(
        opts(&[5, 2]),
        vec![Err(OptionError::WrongLength {
            at: 0,
            kind: 5,
            len: 2
        })]
    );
    assert_eq!(
        opts(&[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        vec![Err(OptionError::WrongLength {
            at: 0,
            kind: 5,
            len: 11
        })]
    );
}

#[test]
fn eol_ends_and_padding_is_ignored() {
    assert_eq!(
        opts(&[2, 4, 1, 0, 0, 0xff, 0xff, 0xff]),
        vec![Ok(TcpOption::Mss(256))]
    );
    assert_eq!(opts(&[]), vec![]);
    assert_eq!(opts(&[1, 1, 1, 1]), vec![]);
}

#[test]
fn length_zero_and_one_stop_the_walk() {
    for len in [0u8, 1] {
        let b = [1, 30, len, 2, 4, 5, 0xb4];
        assert_eq!(
            opts(&b),
            vec![Err(OptionError::BadLength {
                at: 1,
                kind: 30,
                len
            })],
            "len {len}"
        );
        let o = TcpOptions::parse(&b);
        assert_eq!(o.mss, None, "nothing after the bad option is read");
        assert!(o.error.is_some());
    }
}

#[test]
fn truncated_options() {
    // Kind without a length byte.
    assert_eq!(
        opts(&[1, 1, 1, 3]),
        vec![Err(OptionError::Truncated { at: 3, kind: 3 })]
    );
    // Length runs past the end.
    assert_eq!(
        opts(&[8, 10, 0, 0, 0, 1]),
        vec![Err(OptionError::Truncated { at: 0, kind: 8 })]
    );
    // An earlier good option is still reported.
    assert_eq!(
        opts(&[3, 3, 2, 2, 4]),
        vec![
            Ok(TcpOption::WindowScale(2)),
            Err(OptionError::Truncated { at: 3, kind: 2 })
        ]
    );
}

#[test]
fn known_kinds_with_wrong_lengths() {
    for (b, kind, len) in [
        (&[2u8, 3, 5][..], 2, 3),
        (&[2, 6, 5, 0xb4, 0, 0][..], 2, 6),
        (&[3, 2][..], 3, 2),
        (&[8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..], 8, 12),
        (&[3, 4, 1, 1][..], 3, 4),
        (&[4, 3, 0][..], 4, 3),
        (&[8, 6, 0, 0, 0, 0][..], 8, 6),
    ] {
        assert_eq!(
            opts(b),
            vec![Err(OptionError::WrongLength { at: 0, kind, len })]
        );
    }
}

#[test]
fn unknown_kinds_are_skipped_by_length() {
    // TCP-AO-like kind 29 with 4 data bytes, then MSS.
    let b = [29, 6, 1, 2, 3, 4, 2, 4, 0x05, 0xdc];
    assert_eq!(
        opts(&b),
        vec![
            Ok(TcpOption::Unknown {
                kind: 29,
                data: &[1, 2, 3, 4]
            }),
            Ok(TcpOption::Mss(1500))
        ]
    );
    let o = TcpOptions::parse(&b);
    assert_eq!((o.unknown, o.mss), (1, Some(1500)));
    assert!(!o.fully_understood());
}

#[test]
fn window_scale_above_14_is_14_and_flagged() {
    for s in 0..=255u8 {
        let o = TcpOptions::parse(&[3, 3, s]);
        assert_eq!(o.window_scale, Some(s.min(14)));
        assert_eq!(o.window_scale_clamped, s > 14, "shift {s}");
    }
}

#[test]
fn encode_round_trips() {
    let blocks = [0u8, 0, 0, 1, 0, 0, 0, 2];
    let list = [
        TcpOption::Mss(1220),
        TcpOption::WindowScale(14),
        TcpOption::SackPermitted,
        TcpOption::Sack(SackBlocks::new(&blocks).unwrap()),
        TcpOption::Timestamps { tsval: 7, tsecr: 9 },
        TcpOption::Unknown {
            kind: 30,
            data: &[0xaa],
        },
    ];
    let mut b = Vec::new();
    for o in &list {
        o.encode(&mut b);
    }
    let back: Vec<_> = Options::new(&b).map(|r| r.unwrap()).collect();
    assert_eq!(back, list);
}

#[test]
fn refusals_have_labels_and_messages() {
    assert_eq!(Refused::Fragment.label(), "fragment");
    assert_eq!(
        Refused::BadDataOffset(3).to_string(),
        "bad TCP data offset 3 (5..=15 words within the segment)"
    );
    assert_eq!(
        OptionError::BadLength {
            at: 4,
            kind: 9,
            len: 1
        }
        .to_string(),
        "TCP option kind 9 at option byte 4 has length 1 (minimum 2)"
    );
}
