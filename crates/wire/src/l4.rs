//! Transport headers: TCP (RFC 9293 §3.1), UDP (RFC 768), ICMP (RFC 792) and
//! ICMPv6 (RFC 4443 §2.1).
//!
//! # Principles
//!
//! - `seg` is the L4 part of the datagram as bounded by the IP length, so
//!   payload lengths never include Ethernet padding.
//! - TCP data offset must be 5..=15 words and fit in the segment (checked in
//!   one place, `tcp::header_len`, which the header view shares).
//! - UDP's length field is checked against the datagram only when the
//!   datagram is whole; a first fragment legitimately carries a UDP length
//!   that covers all fragments.
//! - Protocols sluice does not look into give `L4::None`, never an error.

use crate::{proto, Af, Frag, Layer, WireError, L4};

const UDP_HDR: usize = 8;
const ICMP_HDR: usize = 8;

const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO: u8 = 8;
const ICMP6_ECHO: u8 = 128;
const ICMP6_ECHO_REPLY: u8 = 129;

fn clamp_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

pub(crate) fn parse_l4(af: Af, p: u8, seg: &[u8], frag: Frag) -> Result<L4, WireError> {
    match (af, p) {
        (_, proto::TCP) => {
            let hdr_len = crate::tcp::header_len(seg)?;
            let h = seg.get(..hdr_len).ok_or(WireError::Truncated(Layer::Tcp))?;
            Ok(L4::Tcp {
                sport: u16::from_be_bytes([h[0], h[1]]),
                dport: u16::from_be_bytes([h[2], h[3]]),
                flags: h[13],
                payload_len: clamp_u16(seg.len() - hdr_len),
            })
        }
        (_, proto::UDP) => {
            let h = seg.get(..UDP_HDR).ok_or(WireError::Truncated(Layer::Udp))?;
            let ulen = u16::from_be_bytes([h[4], h[5]]);
            let payload_len = if frag == Frag::None {
                if usize::from(ulen) < UDP_HDR || usize::from(ulen) > seg.len() {
                    return Err(WireError::BadUdpLength(ulen));
                }
                usize::from(ulen) - UDP_HDR
            } else {
                seg.len() - UDP_HDR
            };
            Ok(L4::Udp {
                sport: u16::from_be_bytes([h[0], h[1]]),
                dport: u16::from_be_bytes([h[2], h[3]]),
                payload_len: clamp_u16(payload_len),
            })
        }
        (Af::V4, proto::ICMP) | (Af::V6, proto::ICMPV6) => {
            let h = seg
                .get(..ICMP_HDR)
                .ok_or(WireError::Truncated(Layer::Icmp))?;
            let (typ, code) = (h[0], h[1]);
            let is_echo = match af {
                Af::V4 => typ == ICMP_ECHO || typ == ICMP_ECHO_REPLY,
                Af::V6 => typ == ICMP6_ECHO || typ == ICMP6_ECHO_REPLY,
            };
            let id = if is_echo {
                u16::from_be_bytes([h[4], h[5]])
            } else {
                0
            };
            Ok(L4::Icmp { typ, code, id })
        }
        _ => Ok(L4::None),
    }
}

#[cfg(test)]
mod tests {
    use crate::build::{V4_DST, V4_SRC};
    use crate::{parse, Layer, WireError, L4};

    /// DNS query 10.0.0.2:40000 → 1.1.1.1:53, 29-byte payload, as captured.
    const DNS_V4: [u8; 71] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x39, 0xab, 0xcd, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, //
        0x0a, 0x00, 0x00, 0x02, 0x01, 0x01, 0x01, 0x01, //
        0x9c, 0x40, 0x00, 0x35, 0x00, 0x25, 0x00, 0x00, //
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x07, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0x03, b'c', b'o', b'm', 0x00, //
        0x00, 0x01, 0x00, 0x01,
    ];

    /// What `DNS_V4` parses to at layer 4.
    const DNS_L4: L4 = L4::Udp {
        sport: 40000,
        dport: 53,
        payload_len: 29,
    };

    #[test]
    fn udp_dns() {
        let ip = parse(&DNS_V4).unwrap().ip.unwrap();
        assert_eq!(ip.l4, DNS_L4);
    }

    #[test]
    fn udp_bad_length() {
        let mut f = DNS_V4;
        f[39] = 0x07;
        assert_eq!(parse(&f), Err(WireError::BadUdpLength(7)));
        f[39] = 0x26; // 38 > 37-byte segment
        assert_eq!(parse(&f), Err(WireError::BadUdpLength(38)));
    }

    #[test]
    fn udp_first_fragment_trusts_ip_length() {
        let mut f = DNS_V4;
        f[20] = 0x20; // MF
        f[38] = 0x05; // UDP length covers the whole (reassembled) datagram
        let ip = parse(&f).unwrap().ip.unwrap();
        assert_eq!(ip.l4, DNS_L4);
    }

    #[test]
    fn icmp_echo_and_unreachable() {
        let f = crate::build::icmp_v4_echo(V4_SRC, V4_DST, 0x4242, 7, 56);
        assert_eq!(
            parse(&f).unwrap().ip.unwrap().l4,
            L4::Icmp {
                typ: 8,
                code: 0,
                id: 0x4242
            }
        );
        let mut g = f.clone();
        g[34] = 3;
        g[35] = 1;
        assert_eq!(
            parse(&g).unwrap().ip.unwrap().l4,
            L4::Icmp {
                typ: 3,
                code: 1,
                id: 0
            }
        );
        // ICMP header cut short by the IP length.
        let mut h = f[..38].to_vec();
        h[16] = 0;
        h[17] = 24;
        assert_eq!(parse(&h), Err(WireError::Truncated(Layer::Icmp)));
    }

    #[test]
    fn other_protocols_have_no_l4() {
        let mut f = DNS_V4;
        f[23] = 47; // GRE
        let ip = parse(&f).unwrap().ip.unwrap();
        assert_eq!((ip.proto, ip.l4), (47, L4::None));
    }
}
