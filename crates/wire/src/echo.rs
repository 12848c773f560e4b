//! ICMP / ICMPv6 echo request and reply, for autorate's probes (issue #16;
//! docs/autorate.md "Probes").
//!
//! # Principles
//!
//! - **In the link's own framing.** A probe leaves by the same way as the
//!   traffic it stands beside: its link-layer header (MACs, VLAN tags, a
//!   PPPoE session) is copied from a frame that left that way, and only the
//!   PPPoE length, which counts the datagram, is set anew
//!   (RFC 2516 §4; the PPP protocol must be the family's, which the
//!   caller's template guarantees by being a frame of that family).
//! - **Valid on a real wire.** IPv4 header checksum (RFC 791), ICMP
//!   checksum over the message (RFC 792), ICMPv6 checksum over the
//!   pseudo-header and the message (RFC 4443 §2.3); DF set, TTL 64.
//! - **A reply is read, never trusted.** [`echo_reply`] only reads what
//!   [`crate::parse`] checked; the caller recognises its own replies by the
//!   payload, which an echo returns unchanged (RFC 792, RFC 4443 §4.2)
//!   where a NAT may rewrite the identifier.

use crate::checksum::{finish, pseudo_header_sum, sum_words};
use crate::{proto, Af, PacketInfo, ETHERTYPE_PPPOE_SESS, L4};
use std::net::IpAddr;

/// ICMP echo request / reply types (RFC 792) and ICMPv6's (RFC 4443 §4).
pub const ICMP_ECHO_REQUEST: u8 = 8;
pub const ICMP_ECHO_REPLY: u8 = 0;
pub const ICMPV6_ECHO_REQUEST: u8 = 128;
pub const ICMPV6_ECHO_REPLY: u8 = 129;

/// Bytes of a PPPoE session header plus the PPP protocol field.
const PPPOE_AND_PPP: usize = 8;

/// An echo request from `src` to `dst` (one family, else `None`) behind
/// `l2`, the bytes before the IP header of a frame of that family that
/// left by the same way (Ethernet, VLAN tags, PPPoE + PPP). `None` also
/// when `l2` is shorter than an Ethernet header, or claims PPPoE without
/// room for its header.
pub fn echo_request(
    l2: &[u8],
    src: IpAddr,
    dst: IpAddr,
    id: u16,
    seq: u16,
    payload: &[u8],
) -> Option<Vec<u8>> {
    if l2.len() < 14 {
        return None;
    }
    let typ = match (src, dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => ICMP_ECHO_REQUEST,
        (IpAddr::V6(_), IpAddr::V6(_)) => ICMPV6_ECHO_REQUEST,
        _ => return None,
    };
    let mut msg = Vec::with_capacity(8 + payload.len());
    msg.extend_from_slice(&[typ, 0, 0, 0]);
    msg.extend_from_slice(&id.to_be_bytes());
    msg.extend_from_slice(&seq.to_be_bytes());
    msg.extend_from_slice(payload);
    let mut ip = Vec::with_capacity(40);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(20 + msg.len()).ok()?;
            ip.extend_from_slice(&[0x45, 0]);
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&seq.to_be_bytes());
            ip.extend_from_slice(&[0x40, 0, 64, proto::ICMP, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let c = finish(sum_words(0, &ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let c = finish(sum_words(0, &msg));
            msg[2..4].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = u16::try_from(msg.len()).ok()?;
            ip.extend_from_slice(&[0x60, 0, 0, 0]);
            ip.extend_from_slice(&len.to_be_bytes());
            ip.extend_from_slice(&[proto::ICMPV6, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let ph = pseudo_header_sum(src, dst, proto::ICMPV6, u32::from(len));
            let c = finish(sum_words(ph, &msg));
            msg[2..4].copy_from_slice(&c.to_be_bytes());
        }
        _ => return None,
    }
    let mut f = Vec::with_capacity(l2.len() + ip.len() + msg.len());
    f.extend_from_slice(l2);
    // The innermost EtherType is the two bytes before the PPPoE header when
    // there is one; the PPPoE length counts the PPP protocol and the datagram.
    if l2.len() >= 14 + PPPOE_AND_PPP {
        let at = l2.len() - PPPOE_AND_PPP - 2;
        if l2.get(at..at + 2) == Some(&ETHERTYPE_PPPOE_SESS.to_be_bytes()[..]) {
            let len = u16::try_from(2 + ip.len() + msg.len()).ok()?;
            let at = l2.len() - 4;
            f[at..at + 2].copy_from_slice(&len.to_be_bytes());
        }
    }
    f.extend_from_slice(&ip);
    f.extend_from_slice(&msg);
    Some(f)
}

/// An echo reply as [`crate::parse`] described it: identifier, sequence
/// number and the payload returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EchoReply<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub id: u16,
    pub seq: u16,
    pub payload: &'a [u8],
}

/// The echo reply `frame` carries, if it is one (ICMP type 0 over IPv4,
/// ICMPv6 type 129 over IPv6, unfragmented, its header whole).
pub fn echo_reply<'a>(frame: &'a [u8], info: &PacketInfo) -> Option<EchoReply<'a>> {
    let ip = info.ip.as_ref()?;
    let want = match ip.af {
        Af::V4 => ICMP_ECHO_REPLY,
        Af::V6 => ICMPV6_ECHO_REPLY,
    };
    let L4::Icmp { typ, .. } = ip.l4 else {
        return None;
    };
    if typ != want || ip.frag != crate::Frag::None {
        return None;
    }
    // The datagram ends where its IP length says (Ethernet may pad).
    let end = info.l3_offset.checked_add(usize::from(ip.ip_len))?;
    let msg = frame.get(ip.l4_offset..end)?;
    let id = u16::from_be_bytes([*msg.get(4)?, *msg.get(5)?]);
    let seq = u16::from_be_bytes([*msg.get(6)?, *msg.get(7)?]);
    Some(EchoReply {
        src: ip.src,
        dst: ip.dst,
        id,
        seq,
        payload: msg.get(8..)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build, internet_checksum, parse};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const A4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    const B4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
    const A6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7));
    const B6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1));

    /// The bytes before the IP header of a frame.
    fn l2_of(frame: &[u8]) -> Vec<u8> {
        let info = parse(frame).unwrap();
        frame[..info.l3_offset].to_vec()
    }

    fn answer(req: &[u8]) -> Vec<u8> {
        build::echo_reply_to(req).expect("an echo request")
    }

    #[test]
    fn an_ipv4_request_is_a_valid_echo_with_both_checksums_right() {
        let l2 = l2_of(&build::udp_v4(build::V4_SRC, build::V4_DST, 1, 2, 10));
        let f = echo_request(&l2, A4, B4, 0x1234, 7, b"sluice-probe-xyz").unwrap();
        assert_eq!(&f[..14], &l2[..]);
        let info = parse(&f).unwrap();
        let ip = info.ip.unwrap();
        assert_eq!((ip.src, ip.dst, ip.proto), (A4, B4, proto::ICMP));
        assert_eq!(
            ip.l4,
            L4::Icmp {
                typ: 8,
                code: 0,
                id: 0x1234
            }
        );
        assert_eq!(usize::from(ip.ip_len), f.len() - 14);
        // A header or message with its checksum in sums to zero.
        assert_eq!(internet_checksum(&f[14..34]), 0);
        assert_eq!(internet_checksum(&f[34..]), 0);
        assert_eq!(&f[16..18], &(20 + 8 + 16u16).to_be_bytes());
        assert_eq!(f[20] & 0x40, 0x40, "DF");
        assert_eq!(f[22], 64, "TTL");
    }

    #[test]
    fn an_ipv6_request_checksums_over_the_pseudo_header() {
        let l2 = l2_of(&build::udp_v6(build::V6_SRC, build::V6_DST, 1, 2, 10));
        let f = echo_request(&l2, A6, B6, 9, 65535, &[0xab; 16]).unwrap();
        let info = parse(&f).unwrap();
        let ip = info.ip.unwrap();
        assert_eq!((ip.src, ip.dst, ip.proto), (A6, B6, proto::ICMPV6));
        assert_eq!(
            ip.l4,
            L4::Icmp {
                typ: 128,
                code: 0,
                id: 9
            }
        );
        let msg = &f[54..];
        let ph = pseudo_header_sum(A6, B6, proto::ICMPV6, msg.len() as u32);
        assert_eq!(finish(sum_words(ph, msg)), 0);
        // The same message built by the test builders (another payload
        // generator) checks the same way: the sum is over what is there.
        let other = build::icmp_v6_echo(build::V6_SRC, build::V6_DST, 1, 1, 4);
        let m = &other[54..];
        let ph = pseudo_header_sum(
            build::V6_SRC.into(),
            build::V6_DST.into(),
            58,
            m.len() as u32,
        );
        assert_eq!(finish(sum_words(ph, m)), 0);
    }

    #[test]
    fn vlan_tags_are_kept_and_a_pppoe_length_is_set_for_the_new_datagram() {
        let inner = build::udp_v4(build::V4_SRC, build::V4_DST, 1, 2, 500);
        let tagged = build::vlan_wrap(&build::pppoe_wrap(&inner, 0x77), 0x8100, 42);
        let l2 = l2_of(&tagged);
        assert_eq!(l2.len(), 14 + 4 + 8);
        let f = echo_request(&l2, A4, B4, 1, 2, &[0; 16]).unwrap();
        let info = parse(&f).unwrap();
        assert_eq!(info.l3_offset, l2.len());
        let ip = info.ip.unwrap();
        assert_eq!(ip.dst, B4);
        // PPPoE length: the PPP protocol (2) and the datagram (20 + 8 + 16).
        let at = l2.len() - 4;
        assert_eq!(u16::from_be_bytes([f[at], f[at + 1]]), 2 + 44);
        assert_eq!(&f[..at], &l2[..at], "MACs, tag, PPPoE session kept");
        assert_eq!(&f[at + 2..l2.len()], &l2[at + 2..], "PPP protocol kept");
    }

    #[test]
    fn mixed_families_and_short_templates_build_nothing() {
        let l2 = l2_of(&build::udp_v4(build::V4_SRC, build::V4_DST, 1, 2, 10));
        assert_eq!(echo_request(&l2, A4, B6, 1, 1, &[]), None);
        assert_eq!(echo_request(&l2[..13], A4, B4, 1, 1, &[]), None);
    }

    #[test]
    fn a_reply_gives_back_id_sequence_and_payload() {
        for (l2, s, d) in [
            (
                l2_of(&build::udp_v4(build::V4_SRC, build::V4_DST, 1, 2, 10)),
                A4,
                B4,
            ),
            (
                l2_of(&build::udp_v6(build::V6_SRC, build::V6_DST, 1, 2, 10)),
                A6,
                B6,
            ),
        ] {
            let req = echo_request(&l2, s, d, 0xbeef, 300, b"0123456789abcdef").unwrap();
            // A request is not a reply.
            assert_eq!(echo_reply(&req, &parse(&req).unwrap()), None);
            let mut rep = answer(&req);
            rep.extend_from_slice(&[0; 6]); // Ethernet padding is not payload
            let r = echo_reply(&rep, &parse(&rep).unwrap()).unwrap();
            assert_eq!((r.src, r.dst, r.id, r.seq), (d, s, 0xbeef, 300));
            assert_eq!(r.payload, b"0123456789abcdef");
        }
    }

    #[test]
    fn other_icmp_and_cut_replies_are_not_replies() {
        let l2 = l2_of(&build::udp_v4(build::V4_SRC, build::V4_DST, 1, 2, 10));
        let rep = answer(&echo_request(&l2, A4, B4, 1, 1, &[7; 16]).unwrap());
        // Destination unreachable (type 3) with the same bytes.
        let mut unreach = rep.clone();
        unreach[34] = 3;
        assert_eq!(echo_reply(&unreach, &parse(&unreach).unwrap()), None);
        // Every truncation either fails to parse or is no reply.
        for n in 0..rep.len() {
            if let Ok(info) = parse(&rep[..n]) {
                assert_eq!(echo_reply(&rep[..n], &info), None, "cut at {n}");
            }
        }
        // A later fragment carries no ICMP header.
        let mut frag = rep.clone();
        build::set_ipv4_frag(&mut frag, false, 10).unwrap();
        assert_eq!(echo_reply(&frag, &parse(&frag).unwrap()), None);
        // UDP is not ICMP.
        let udp = build::udp_v4(build::V4_SRC, build::V4_DST, 1, 2, 10);
        assert_eq!(echo_reply(&udp, &parse(&udp).unwrap()), None);
    }
}
