//! IPv4 (RFC 791 §3.1) and IPv6 (RFC 8200 §3, §4) headers.
//!
//! # Principles
//!
//! - The datagram is `[l3_offset, l3_offset + ip_len)`; it must fit in the
//!   link's L3 bytes (else `Truncated`), and everything after it is padding.
//! - IPv4: IHL ≥ 5 and within the datagram; total length ≥ IHL·4.
//! - IPv6: the extension chain (hop-by-hop, routing, fragment, destination
//!   options, AH) is walked at most [`MAX_EXT_HEADERS`] steps; ESP and
//!   No-Next-Header end it without an L4 header.
//! - Fragments: offset ≠ 0 ⇒ [`Frag::Later`] and no L4 header is read.

use crate::l4::parse_l4;
use crate::{Af, Frag, IpInfo, Layer, WireError, L4};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv6 extension headers walked before giving up. RFC 8200 §4.1 recommends
/// at most one of each (six kinds, destination options twice); 8 leaves room
/// for that and bounds the work per packet.
pub const MAX_EXT_HEADERS: usize = 8;

const IPV4_MIN_HDR: usize = 20;
const IPV6_HDR: usize = 40;
const IPV4_MF: u16 = 0x2000;
const IPV4_OFFSET_MASK: u16 = 0x1fff;

const NH_HOP_BY_HOP: u8 = 0;
const NH_ROUTING: u8 = 43;
const NH_FRAGMENT: u8 = 44;
const NH_ESP: u8 = 50;
const NH_AH: u8 = 51;
const NH_NONE: u8 = 59;
const NH_DEST_OPTS: u8 = 60;

/// The bytes from `range` of `frame` on (`avail`) and the fixed header at
/// their start (`min_len` bytes), once both are there and the header's
/// version is `version`.
#[inline]
fn ip_header(
    frame: &[u8],
    range: std::ops::Range<usize>,
    min_len: usize,
    layer: Layer,
    version: u8,
) -> Result<(&[u8], &[u8]), WireError> {
    let avail = frame.get(range).ok_or(WireError::Truncated(layer))?;
    let h = avail.get(..min_len).ok_or(WireError::Truncated(layer))?;
    let v = h[0] >> 4;
    if v != version {
        return Err(WireError::BadIpVersion(v));
    }
    Ok((avail, h))
}

pub(crate) fn parse_ipv4(frame: &[u8], at: usize, end: usize) -> Result<IpInfo, WireError> {
    let (avail, h) = ip_header(frame, at..end, IPV4_MIN_HDR, Layer::Ipv4, 4)?;
    let ihl = h[0] & 0x0f;
    if ihl < 5 {
        return Err(WireError::BadIhl(ihl));
    }
    let hdr_len = usize::from(ihl) * 4;
    let total = u16::from_be_bytes([h[2], h[3]]);
    if usize::from(total) < hdr_len {
        return Err(WireError::BadTotalLength(total));
    }
    if usize::from(total) > avail.len() {
        return Err(WireError::Truncated(Layer::Ipv4));
    }
    let frag_field = u16::from_be_bytes([h[6], h[7]]);
    let frag = match (frag_field & IPV4_OFFSET_MASK, frag_field & IPV4_MF != 0) {
        (0, false) => Frag::None,
        (0, true) => Frag::First,
        _ => Frag::Later,
    };
    let proto = h[9];
    let src = IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19]));
    let l4_offset = at + hdr_len;
    let l4 = if frag == Frag::Later {
        L4::None
    } else {
        // Safe: hdr_len <= total <= avail.len() was checked above.
        let seg = avail.get(hdr_len..usize::from(total)).unwrap_or(&[]);
        parse_l4(Af::V4, proto, seg, frag)?
    };
    Ok(IpInfo {
        af: Af::V4,
        src,
        dst,
        proto,
        tos: h[1],
        ip_len: total,
        frag,
        // IPv4's AH is the upper layer itself (protocol 51): never TCP.
        authenticated: false,
        l4_offset,
        l4,
    })
}

pub(crate) fn parse_ipv6(frame: &[u8], at: usize, end: usize) -> Result<IpInfo, WireError> {
    let (avail, h) = ip_header(frame, at..end, IPV6_HDR, Layer::Ipv6, 6)?;
    let tos = (h[0] << 4) | (h[1] >> 4);
    let payload_len = u16::from_be_bytes([h[4], h[5]]);
    let datagram_len = IPV6_HDR + usize::from(payload_len);
    let dgram = avail
        .get(..datagram_len)
        .ok_or(WireError::Truncated(Layer::Ipv6))?;
    let mut a = [0u8; 16];
    a.copy_from_slice(&h[8..24]);
    let src = IpAddr::V6(Ipv6Addr::from(a));
    a.copy_from_slice(&h[24..40]);
    let dst = IpAddr::V6(Ipv6Addr::from(a));

    let mut next = h[6];
    let mut off = IPV6_HDR;
    let mut frag = Frag::None;
    let mut authenticated = false;
    let mut steps = 0usize;
    // Bounded by MAX_EXT_HEADERS: each iteration consumes one header or returns.
    loop {
        let ext_len = match next {
            NH_HOP_BY_HOP | NH_ROUTING | NH_DEST_OPTS => {
                let len_byte = *dgram
                    .get(off + 1)
                    .ok_or(WireError::Truncated(Layer::Ipv6Ext))?;
                (usize::from(len_byte) + 1) * 8
            }
            NH_AH => {
                authenticated = true;
                let len_byte = *dgram
                    .get(off + 1)
                    .ok_or(WireError::Truncated(Layer::Ipv6Ext))?;
                (usize::from(len_byte) + 2) * 4
            }
            NH_FRAGMENT => 8,
            _ => break,
        };
        if steps == MAX_EXT_HEADERS {
            return Err(WireError::ExtChainTooLong);
        }
        steps += 1;
        let ext = dgram
            .get(off..off + ext_len)
            .ok_or(WireError::Truncated(Layer::Ipv6Ext))?;
        if next == NH_FRAGMENT {
            let fo = u16::from_be_bytes([ext[2], ext[3]]);
            let offset = fo >> 3;
            let more = fo & 1 != 0;
            frag = match (offset, more) {
                (0, false) => Frag::None, // atomic fragment (RFC 6946)
                (0, true) => Frag::First,
                _ => Frag::Later,
            };
        }
        next = ext[0];
        off += ext_len;
        if frag == Frag::Later {
            break;
        }
    }
    let l4 = if frag == Frag::Later || next == NH_ESP || next == NH_NONE {
        L4::None
    } else {
        let seg = dgram.get(off..).unwrap_or(&[]);
        parse_l4(Af::V6, next, seg, frag)?
    };
    Ok(IpInfo {
        af: Af::V6,
        src,
        dst,
        proto: next,
        tos,
        ip_len: u16::try_from(datagram_len).unwrap_or(u16::MAX),
        frag,
        authenticated,
        l4_offset: at + off,
        l4,
    })
}

#[cfg(test)]
mod tests {
    use crate::build::{V6_DST, V6_SRC};
    use crate::{parse, tcp_flags, Af, Frag, Layer, WireError, L4};
    use std::net::IpAddr;

    /// A TCP SYN 192.168.1.10:51514 → 93.184.216.34:443 with MSS/SACK/TS/WS
    /// options, written out as a capture would show it.
    const SYN_V4: [u8; 74] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, //
        0xc0, 0xa8, 0x01, 0x0a, 0x5d, 0xb8, 0xd8, 0x22, //
        0xc9, 0x3a, 0x01, 0xbb, 0x9a, 0x2b, 0x1c, 0x01, 0x00, 0x00, 0x00, 0x00, //
        0xa0, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, //
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x9b, 0x2e, 0x01, //
        0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn syn_v4() {
        let info = parse(&SYN_V4).unwrap();
        assert_eq!(info.ethertype, 0x0800);
        assert_eq!(info.l3_offset, 14);
        let ip = info.ip.unwrap();
        assert_eq!(ip.af, Af::V4);
        assert_eq!(ip.src, "192.168.1.10".parse::<IpAddr>().unwrap());
        assert_eq!(ip.dst, "93.184.216.34".parse::<IpAddr>().unwrap());
        assert_eq!(ip.proto, 6);
        assert_eq!(ip.ip_len, 60);
        assert_eq!(ip.frag, Frag::None);
        assert_eq!(ip.l4_offset, 34);
        assert_eq!(
            ip.l4,
            L4::Tcp {
                sport: 51514,
                dport: 443,
                flags: tcp_flags::SYN,
                payload_len: 0
            }
        );
    }

    #[test]
    fn ethernet_padding_is_ignored() {
        let mut f = SYN_V4.to_vec();
        f.extend_from_slice(&[0u8; 6]);
        assert_eq!(parse(&f).unwrap().ip, parse(&SYN_V4).unwrap().ip);
    }

    #[test]
    fn v4_errors_name_the_field() {
        let mut f = SYN_V4;
        f[14] = 0x44;
        assert_eq!(parse(&f), Err(WireError::BadIhl(4)));
        f[14] = 0x55;
        assert_eq!(parse(&f), Err(WireError::BadIpVersion(5)));
        let mut f = SYN_V4;
        f[17] = 0x10; // total length 16 < 20
        assert_eq!(parse(&f), Err(WireError::BadTotalLength(16)));
        let mut f = SYN_V4;
        f[17] = 0x50; // total length 80 > 60 bytes present
        assert_eq!(parse(&f), Err(WireError::Truncated(Layer::Ipv4)));
        let mut f = SYN_V4;
        f[14] = 0x4f; // IHL 60 bytes: the options eat the whole TCP header
        assert_eq!(parse(&f), Err(WireError::Truncated(Layer::Tcp)));
        f[14] = 0x4f;
        f[17] = 0x30; // total length 48 < IHL 60
        assert_eq!(parse(&f), Err(WireError::BadTotalLength(48)));
        let mut f = SYN_V4;
        f[46] = 0x40; // TCP data offset 4 words
        assert_eq!(parse(&f), Err(WireError::BadTcpOffset(4)));
        f[46] = 0xf0; // 60 bytes > 40-byte segment
        assert_eq!(parse(&f), Err(WireError::BadTcpOffset(15)));
    }

    #[test]
    fn v4_options_shift_l4() {
        // IHL 6 with one NOP/EOL option word; the TCP header follows at 38.
        let mut f = SYN_V4[..34].to_vec();
        f[14] = 0x46;
        f[17] = 0x40; // 64
        f.extend_from_slice(&[0x01, 0x01, 0x01, 0x00]);
        f.extend_from_slice(&SYN_V4[34..]);
        let ip = parse(&f).unwrap().ip.unwrap();
        assert_eq!(ip.l4_offset, 38);
        assert_eq!(ip.ports(), Some((51514, 443)));
    }

    #[test]
    fn v4_fragments() {
        let mut f = SYN_V4;
        f[20] = 0x20; // MF, offset 0
        assert_eq!(parse(&f).unwrap().ip.unwrap().frag, Frag::First);
        assert!(parse(&f).unwrap().ip.unwrap().ports().is_some());
        f[20] = 0x00;
        f[21] = 0xb9; // offset 185*8
        let ip = parse(&f).unwrap().ip.unwrap();
        assert_eq!(ip.frag, Frag::Later);
        assert_eq!(ip.l4, L4::None);
        assert_eq!(ip.proto, 6);
    }

    /// ICMPv6 echo request 2001:db8::1 → 2001:db8::2 behind hop-by-hop (router
    /// alert + padding) and a destination-options header.
    #[test]
    fn v6_ext_chain_to_icmpv6() {
        let mut f = vec![
            0x33, 0x33, 0, 0, 0, 1, 0x52, 0x54, 0, 0x12, 0x34, 0x56, 0x86, 0xdd,
        ];
        f.extend_from_slice(&[0x6b, 0x80, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x40]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[60, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]); // HBH → DST
        f.extend_from_slice(&[58, 0, 0x01, 0x04, 0, 0, 0, 0]); // DST → ICMPv6
        f.extend_from_slice(&[
            128, 0, 0x12, 0x34, 0xbe, 0xef, 0x00, 0x01, b'p', b'i', b'n', b'g',
        ]);
        let ip = parse(&f).unwrap().ip.unwrap();
        assert_eq!(ip.af, Af::V6);
        assert_eq!(ip.tos, 0xb8); // traffic class EF
        assert_eq!(ip.proto, 58);
        assert_eq!(ip.ip_len, 68);
        assert_eq!(ip.l4_offset, 14 + 56);
        assert_eq!(
            ip.l4,
            L4::Icmp {
                typ: 128,
                code: 0,
                id: 0xbeef
            }
        );
    }

    #[test]
    fn v6_fragment_and_chain_cap() {
        let base = crate::build::udp_v6(V6_SRC, V6_DST, 1000, 2000, 0);
        // Insert a fragment header with offset 0, M=1 → First with ports.
        let with_frag = |offset_words: u16, more: bool| {
            let mut f = base[..54].to_vec();
            f[20] = 44;
            f[19] += 8;
            let fo = (offset_words << 3) | u16::from(more);
            f.extend_from_slice(&[17, 0, (fo >> 8) as u8, fo as u8, 0, 0, 0, 7]);
            f.extend_from_slice(&base[54..]);
            f
        };
        let ip = parse(&with_frag(0, true)).unwrap().ip.unwrap();
        assert_eq!(ip.frag, Frag::First);
        assert_eq!(ip.ports(), Some((1000, 2000)));
        let ip = parse(&with_frag(10, false)).unwrap().ip.unwrap();
        assert_eq!(ip.frag, Frag::Later);
        assert_eq!(ip.l4, L4::None);
        assert_eq!(ip.proto, 17);

        // Nine destination-options headers exceed MAX_EXT_HEADERS.
        let mut f = base[..54].to_vec();
        f[20] = 60;
        let n = crate::MAX_EXT_HEADERS + 1;
        f[19] += (8 * n) as u8;
        for i in 0..n {
            let nh = if i + 1 == n { 17 } else { 60 };
            f.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]);
        }
        f.extend_from_slice(&base[54..]);
        assert_eq!(parse(&f), Err(WireError::ExtChainTooLong));
        // Exactly MAX_EXT_HEADERS is fine.
        let mut g = base[..54].to_vec();
        g[20] = 60;
        let n = crate::MAX_EXT_HEADERS;
        g[19] += (8 * n) as u8;
        for i in 0..n {
            let nh = if i + 1 == n { 17 } else { 60 };
            g.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]);
        }
        g.extend_from_slice(&base[54..]);
        assert_eq!(parse(&g).unwrap().ip.unwrap().ports(), Some((1000, 2000)));
    }

    #[test]
    fn v6_truncated_and_esp() {
        let f = crate::build::tcp(V6_SRC, V6_DST, 1, 2, tcp_flags::ACK, 100);
        assert_eq!(
            parse(&f[..f.len() - 1]),
            Err(WireError::Truncated(Layer::Ipv6))
        );
        assert_eq!(parse(&f[..40]), Err(WireError::Truncated(Layer::Ipv6)));
        let mut esp = f.clone();
        esp[20] = 50;
        let ip = parse(&esp).unwrap().ip.unwrap();
        assert_eq!((ip.proto, ip.l4), (50, L4::None));
    }
}
