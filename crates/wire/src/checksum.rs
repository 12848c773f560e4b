//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! # Principles
//!
//! - One's-complement sum over 16-bit big-endian words; an odd trailing byte
//!   is padded with zero (RFC 1071 §4.1).
//! - Incremental update uses RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, which
//!   never produces the -0 (0x0000 ↔ 0xffff) ambiguity of eqn. 2.
//! - A 16-bit field at an odd offset of the covered data straddles two words:
//!   its contribution to the sum is its byte-swapped value (the sum is
//!   byte-order independent, RFC 1071 §2(B)), so the same update applies to
//!   the swapped old and new values.
//! - TCP and UDP checksums also cover a pseudo-header (RFC 9293 §3.1, RFC 768,
//!   RFC 8200 §8.1); its sum is built in one place, [`pseudo_header_sum`].
//! - A frame a Linux sender left to TX checksum offload (CHECKSUM_PARTIAL:
//!   AF_PACKET says `TP_STATUS_CSUMNOTREADY`) carries only the
//!   pseudo-header's sum in its TCP/UDP checksum field. [`complete_l4_checksum`]
//!   writes the full one, computed afresh (pseudo-header and segment, the
//!   field taken as zero) rather than added onto what the field holds, so
//!   the result is right whatever the field held. A UDP result of 0 is sent
//!   as 0xffff (RFC 768: 0 means "no checksum"). Where nothing says whether
//!   a frame was left partial, [`complete_if_partial`] recognises one by its
//!   field (the pseudo-header's folded sum) and a checksum that fails.

use std::net::IpAddr;

/// One's-complement sum of `data` added to `initial`, not yet folded or inverted.
pub(crate) fn sum_words(initial: u32, data: &[u8]) -> u32 {
    let mut acc = initial;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([w[0], w[1]])));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Fold carries and invert: the final checksum value.
pub(crate) fn finish(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum of `data` (checksum field included as it stands).
pub fn internet_checksum(data: &[u8]) -> u16 {
    finish(sum_words(0, data))
}

/// New checksum after one 16-bit word of the covered data changed from `old`
/// to `new` (RFC 1624 eqn. 3).
pub fn checksum_update16(sum: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    finish(acc)
}

/// New checksum after the 16 bits at byte `offset` of the covered data changed
/// from `old` to `new` (both as read big-endian from the two bytes). `offset`
/// counts from the start of the checksummed bytes; for TCP/UDP that is the
/// start of the L4 header (the pseudo-header is an even number of bytes).
pub fn checksum_update_at(sum: u16, offset: usize, old: u16, new: u16) -> u16 {
    if offset.is_multiple_of(2) {
        checksum_update16(sum, old, new)
    } else {
        checksum_update16(sum, old.swap_bytes(), new.swap_bytes())
    }
}

/// Unfolded sum of the TCP/UDP pseudo-header: IPv4 (RFC 9293 §3.1: source,
/// destination, zero, protocol, 16-bit length) or IPv6 (RFC 8200 §8.1: source,
/// destination, 32-bit length, three zero bytes, next header). Mixed families
/// cannot come out of a parse; they sum to 0.
pub(crate) fn pseudo_header_sum(src: IpAddr, dst: IpAddr, proto: u8, len: u32) -> u32 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let acc = sum_words(sum_words(0, &s.octets()), &d.octets());
            // An IPv4 datagram cannot carry more than 65535 bytes of segment.
            let len16 = u16::try_from(len).unwrap_or(u16::MAX);
            sum_words(acc, &[0, proto, (len16 >> 8) as u8, len16 as u8])
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let acc = sum_words(sum_words(0, &s.octets()), &d.octets());
            let acc = sum_words(acc, &len.to_be_bytes());
            sum_words(acc, &[0, 0, 0, proto])
        }
        _ => 0,
    }
}

/// Where the TCP or UDP checksum of the unfragmented segment in `frame`
/// is: (segment start, segment end, field offset in the segment, the
/// pseudo-header's unfolded sum); `None` for anything else.
fn l4_checksum_field(frame: &[u8]) -> Option<(usize, usize, usize, u32)> {
    let info = crate::parse(frame).ok()?;
    let ip = info.ip?;
    let field = match ip.l4 {
        crate::L4::Tcp { .. } => 16,
        crate::L4::Udp { .. } => 6,
        _ => return None,
    };
    if ip.frag != crate::Frag::None {
        return None;
    }
    let end = info.l3_offset + usize::from(ip.ip_len);
    let len = end.checked_sub(ip.l4_offset).filter(|l| *l >= field + 2)?;
    frame.get(ip.l4_offset..end)?;
    let pseudo = pseudo_header_sum(ip.src, ip.dst, ip.proto, len as u32);
    Some((ip.l4_offset, end, field, pseudo))
}

/// Writes the full TCP or UDP checksum of the unfragmented segment in
/// `frame` (Ethernet on, as [`crate::parse`] reads it), the segment ending
/// where the IP datagram does. `false`, the frame untouched, for anything
/// else (not IP, another protocol, a fragment, malformed).
pub fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    let Some((start, end, field, pseudo)) = l4_checksum_field(frame) else {
        return false;
    };
    let is_udp = field == 6;
    let seg = &mut frame[start..end];
    seg[field..field + 2].copy_from_slice(&[0, 0]);
    let mut c = finish(sum_words(pseudo, seg));
    if c == 0 && is_udp {
        c = 0xffff;
    }
    seg[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// [`complete_l4_checksum`] for a frame that may or may not have been
/// left to offload, where nothing says which (AF_XDP): completed only
/// when its field holds exactly the pseudo-header's folded sum and the
/// checksum does not verify. A complete checksum is never changed; the
/// cost for one is a pseudo-header sum and a compare.
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    let Some((start, end, field, pseudo)) = l4_checksum_field(frame) else {
        return false;
    };
    let seg = &frame[start..end];
    let held = u16::from_be_bytes([seg[field], seg[field + 1]]);
    if held != !finish(pseudo) || finish(sum_words(pseudo, seg)) == 0 {
        return false;
    }
    complete_l4_checksum(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `frame` as a CHECKSUM_PARTIAL sender hands it over: the L4 checksum
    /// field holds the pseudo-header's folded sum, not inverted.
    fn partial(frame: &[u8], field: usize) -> Vec<u8> {
        let mut f = frame.to_vec();
        let info = crate::parse(&f).unwrap();
        let ip = info.ip.unwrap();
        let len = info.l3_offset + usize::from(ip.ip_len) - ip.l4_offset;
        let mut acc = pseudo_header_sum(ip.src, ip.dst, ip.proto, len as u32);
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        let at = ip.l4_offset + field;
        f[at..at + 2].copy_from_slice(&(acc as u16).to_be_bytes());
        f
    }

    #[test]
    fn a_partial_tcp_or_udp_checksum_is_completed_as_the_nic_would() {
        use crate::build;
        let (a4, b4) = ("10.0.0.2".parse().unwrap(), "192.0.2.1".parse().unwrap());
        let (a6, b6) = (
            "2001:db8::2".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
        );
        let frames: Vec<(Vec<u8>, usize)> = vec![
            (
                build::tcp(a4, b4, 40000, 443, crate::tcp_flags::ACK, 1000),
                16,
            ),
            (
                build::tcp(a6, b6, 40000, 443, crate::tcp_flags::ACK, 999),
                16,
            ),
            (build::udp(a4, b4, 5000, 53, 33), 6),
            (build::udp(a6, b6, 5000, 53, 120), 6),
            (
                build::vlan_wrap(
                    &build::tcp(a4, b4, 1, 2, crate::tcp_flags::SYN, 0),
                    0x8100,
                    7,
                ),
                16,
            ),
            (build::pppoe_wrap(&build::udp(a6, b6, 9, 9, 11), 3), 6),
        ];
        for (i, (whole, field)) in frames.iter().enumerate() {
            let mut f = partial(whole, *field);
            assert_ne!(&f, whole, "frame {i}: the test must start partial");
            assert!(complete_l4_checksum(&mut f), "frame {i}");
            assert_eq!(&f, whole, "frame {i}");
            // A complete checksum stays what it is.
            assert!(complete_l4_checksum(&mut f));
            assert_eq!(&f, whole, "frame {i} again");
        }
        // Ethernet padding after the datagram is not summed.
        let (mut padded, whole) = (partial(&frames[2].0, 6), frames[2].0.clone());
        padded.extend_from_slice(&[0xaa; 6]);
        assert!(complete_l4_checksum(&mut padded));
        assert_eq!(&padded[..whole.len()], &whole[..]);
    }

    #[test]
    fn only_a_frame_whose_field_is_the_pseudo_header_sum_is_taken_for_partial() {
        use crate::build;
        let (a, b) = ("10.0.0.2".parse().unwrap(), "192.0.2.1".parse().unwrap());
        let whole = build::tcp(a, b, 40000, 443, crate::tcp_flags::ACK, 300);
        let mut f = partial(&whole, 16);
        assert!(complete_if_partial(&mut f));
        assert_eq!(f, whole);
        // Complete: untouched.
        assert!(!complete_if_partial(&mut f));
        assert_eq!(f, whole);
        // Wrong, but not a pseudo-header sum: not ours to repair.
        let mut bad = whole.clone();
        let at = 14 + 20 + 16;
        bad[at] ^= 0x5a;
        let before = bad.clone();
        assert!(!complete_if_partial(&mut bad));
        assert_eq!(bad, before);
        let udp = build::udp(a, b, 1, 2, 57);
        let mut f = partial(&udp, 6);
        assert!(complete_if_partial(&mut f));
        assert_eq!(f, udp);
    }

    #[test]
    fn what_is_not_unfragmented_tcp_or_udp_is_left_alone() {
        use crate::build;
        let (a, b) = ("10.0.0.2".parse().unwrap(), "192.0.2.1".parse().unwrap());
        let mut icmp = build::icmp_v4_echo(a, b, 1, 1, 8);
        let before = icmp.clone();
        assert!(!complete_l4_checksum(&mut icmp));
        assert_eq!(icmp, before);
        let mut arp = build::arp(a, b);
        assert!(!complete_l4_checksum(&mut arp));
        let mut frag = build::udp(a.into(), b.into(), 1, 2, 100);
        crate::build::set_ipv4_frag(&mut frag, true, 0).unwrap();
        let before = frag.clone();
        assert!(!complete_l4_checksum(&mut frag));
        assert_eq!(frag, before);
        let mut short = build::udp(a.into(), b.into(), 1, 2, 100);
        short.truncate(40);
        assert!(!complete_l4_checksum(&mut short));
    }

    /// RFC 1071 §3 example: the words 0001 f203 f4f5 f6f7 sum to 0xddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn incremental_equals_full_recompute() {
        let mut hdr = [
            0x45u8, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xac, 0x10,
            0x0a, 0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        let c = internet_checksum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(c, 0xb1e6); // the classic worked example's header
        assert_eq!(internet_checksum(&hdr), 0);
        for tos in 0..=255u8 {
            let mut h = hdr;
            let old = u16::from_be_bytes([h[0], h[1]]);
            h[1] = tos;
            let new = u16::from_be_bytes([h[0], h[1]]);
            let inc = checksum_update16(c, old, new);
            h[10..12].copy_from_slice(&inc.to_be_bytes());
            assert_eq!(internet_checksum(&h), 0, "tos {tos:#x}");
        }
    }

    /// RFC 1624 §4's worked example: the other words sum to 0xcd7a, m goes
    /// 0x5555 → 0x3285. Recomputation gives 0x0000; eqn. 2 would give 0xffff
    /// (the -0 the RFC warns about); eqn. 3 must give 0x0000.
    #[test]
    fn rfc1624_minus_zero_corner() {
        let c = 0xcd7au32;
        let hc = finish(c + 0x5555);
        assert_eq!(hc, 0xdd2f);
        assert_eq!(finish(c + 0x3285), 0x0000, "recomputation");
        assert_eq!(checksum_update16(hc, 0x5555, 0x3285), 0x0000);
        // And back: 0x0000 → the original.
        assert_eq!(checksum_update16(0x0000, 0x3285, 0x5555), 0xdd2f);
    }

    /// A 16-bit field at every offset of a buffer, odd ones included, updated
    /// incrementally equals a full recomputation. (The buffer keeps nonzero
    /// bytes elsewhere: of all-zero data the recomputation is 0xffff, the -0
    /// that eqn. 3 by design never produces — both verify.)
    #[test]
    fn update_at_any_offset_equals_recompute() {
        let orig: Vec<u8> = (0..41u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        for at in 0..orig.len() - 1 {
            for new in [0x0000u16, 0xffff, 0x1234, 0xfe01, 0x00ff] {
                let mut buf = orig.clone();
                let sum = internet_checksum(&buf);
                let old = u16::from_be_bytes([buf[at], buf[at + 1]]);
                buf[at..at + 2].copy_from_slice(&new.to_be_bytes());
                assert_eq!(
                    checksum_update_at(sum, at, old, new),
                    internet_checksum(&buf),
                    "offset {at} {old:#x} -> {new:#x}"
                );
            }
        }
    }
}
