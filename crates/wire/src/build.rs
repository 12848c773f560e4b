//! Frame builders for tests, benchmarks and the engine's self-tests.
//!
//! Every frame is Ethernet II from `02:00:00:00:00:01` to `02:00:00:00:00:02`
//! with valid IPv4 header checksums and valid TCP/UDP/ICMP checksums, so the
//! frames can also be sent on a real link. ToS/ECN and fragment fields can be
//! set afterwards with [`set_tos`] / [`set_ipv4_frag`], which keep the
//! checksum right.
//!
//! These are generators, not parsers: they trust their arguments (a payload
//! longer than an IP datagram can hold is clamped to what fits).

use crate::checksum::{finish, pseudo_header_sum, sum_words};
use crate::{parse, proto, Af, WireError, ETHERTYPE_PPPOE_SESS, PPP_IPV4, PPP_IPV6};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The hosts the frames of tests and benches go between, when the addresses
/// themselves do not matter: `10.0.0.1` → `10.0.0.2`.
pub const V4_SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const V4_DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Likewise over IPv6 (RFC 3849 documentation prefix): `2001:db8::1` →
/// `2001:db8::2`.
pub const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Largest L4 segment that fits in an IPv4 datagram with a 20-byte header.
const MAX_SEGMENT: usize = 65_535 - 20;

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(1514);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn payload(len: usize) -> impl Iterator<Item = u8> {
    (0..len).map(|i| i as u8)
}

fn tcp_segment(sport: u16, dport: u16, flags: u8, payload_len: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(20 + payload_len);
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&0x1000_0000u32.to_be_bytes()); // seq
    let ack = if flags & crate::tcp_flags::ACK != 0 {
        0x2000_0000u32
    } else {
        0
    };
    s.extend_from_slice(&ack.to_be_bytes());
    s.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    s.extend(payload(payload_len.min(MAX_SEGMENT - 20)));
    s
}

fn udp_segment(sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let n = payload_len.min(MAX_SEGMENT - 8);
    let mut s = Vec::with_capacity(8 + n);
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    s.extend_from_slice(&[0, 0]);
    s.extend(payload(n));
    s
}

fn icmp_echo(typ: u8, id: u16, seq: u16, payload_len: usize) -> Vec<u8> {
    let mut s = vec![typ, 0, 0, 0];
    s.extend_from_slice(&id.to_be_bytes());
    s.extend_from_slice(&seq.to_be_bytes());
    s.extend(payload(payload_len.min(MAX_SEGMENT - 8)));
    s
}

/// Offset of the checksum field inside an L4 header.
fn csum_offset(p: u8) -> Option<usize> {
    match p {
        proto::TCP => Some(16),
        proto::UDP => Some(6),
        proto::ICMP | proto::ICMPV6 => Some(2),
        _ => None,
    }
}

fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, p: u8, mut seg: Vec<u8>) -> Vec<u8> {
    let total = (20 + seg.len()) as u16;
    let mut h = vec![0x45, 0x00];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, p, 0, 0]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    let c = finish(sum_words(0, &h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    if let Some(at) = csum_offset(p) {
        // ICMPv4 has no pseudo-header; TCP/UDP do (RFC 793 §3.1, RFC 768).
        let init = if p == proto::ICMP {
            0
        } else {
            pseudo_header_sum(src.into(), dst.into(), p, seg.len() as u32)
        };
        let mut c = finish(sum_words(init, &seg));
        if c == 0 && p == proto::UDP {
            c = 0xffff; // RFC 768: zero means "no checksum"
        }
        seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    let mut f = eth(crate::ETHERTYPE_IPV4);
    f.extend_from_slice(&h);
    f.extend_from_slice(&seg);
    f
}

fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, nh: u8, mut seg: Vec<u8>) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    h.extend_from_slice(&[nh, 64]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    if let Some(at) = csum_offset(nh) {
        // RFC 8200 §8.1 pseudo-header.
        let ph = pseudo_header_sum(src.into(), dst.into(), nh, seg.len() as u32);
        let mut c = finish(sum_words(ph, &seg));
        if c == 0 && nh == proto::UDP {
            c = 0xffff;
        }
        seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    let mut f = eth(crate::ETHERTYPE_IPV6);
    f.extend_from_slice(&h);
    f.extend_from_slice(&seg);
    f
}

/// UDP over IPv4.
pub fn udp_v4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    ipv4(src, dst, proto::UDP, udp_segment(sport, dport, payload_len))
}

/// UDP over IPv6.
pub fn udp_v6(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    ipv6(src, dst, proto::UDP, udp_segment(sport, dport, payload_len))
}

/// ICMP echo request over IPv4.
pub fn icmp_v4_echo(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    id: u16,
    seq: u16,
    payload_len: usize,
) -> Vec<u8> {
    ipv4(src, dst, proto::ICMP, icmp_echo(8, id, seq, payload_len))
}

/// ICMPv6 echo request.
pub fn icmp_v6_echo(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    id: u16,
    seq: u16,
    payload_len: usize,
) -> Vec<u8> {
    ipv6(
        src,
        dst,
        proto::ICMPV6,
        icmp_echo(128, id, seq, payload_len),
    )
}

/// TCP for either family. Panics if `src` and `dst` are of different families
/// (a test-authoring mistake, not an input).
pub fn tcp(
    src: impl Into<IpAddr>,
    dst: impl Into<IpAddr>,
    sport: u16,
    dport: u16,
    flags: u8,
    payload_len: usize,
) -> Vec<u8> {
    let seg = tcp_segment(sport, dport, flags, payload_len);
    ip(src.into(), dst.into(), proto::TCP, seg, "tcp")
}

/// UDP for either family. Panics on mixed families.
pub fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let seg = udp_segment(sport, dport, payload_len);
    ip(src, dst, proto::UDP, seg, "udp")
}

/// The IP packet of either family around `seg`; `what` names the caller in
/// the panic on mixed families.
fn ip(src: IpAddr, dst: IpAddr, p: u8, seg: Vec<u8>, what: &str) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => ipv4(s, d, p, seg),
        (IpAddr::V6(s), IpAddr::V6(d)) => ipv6(s, d, p, seg),
        _ => panic!("build::{what}: mixed address families"),
    }
}

/// The fields of a TCP segment for [`tcp_with`]. `options` are raw option
/// bytes (see [`crate::tcp::TcpOption::encode`]), padded with EOL to a whole
/// word; more than 40 bytes are cut to 40.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpSpec<'a> {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub options: &'a [u8],
    pub payload_len: usize,
}

/// TCP for either family with every header field chosen (valid checksums).
/// Panics on mixed families.
pub fn tcp_with(src: impl Into<IpAddr>, dst: impl Into<IpAddr>, spec: &TcpSpec<'_>) -> Vec<u8> {
    let mut opts = spec.options.get(..40).unwrap_or(spec.options).to_vec();
    while !opts.len().is_multiple_of(4) {
        opts.push(crate::tcp::opt_kind::EOL);
    }
    let data_off = ((20 + opts.len()) / 4) as u8;
    let mut s = Vec::with_capacity(20 + opts.len() + spec.payload_len);
    s.extend_from_slice(&spec.sport.to_be_bytes());
    s.extend_from_slice(&spec.dport.to_be_bytes());
    s.extend_from_slice(&spec.seq.to_be_bytes());
    s.extend_from_slice(&spec.ack.to_be_bytes());
    s.extend_from_slice(&[data_off << 4, spec.flags]);
    s.extend_from_slice(&spec.window.to_be_bytes());
    s.extend_from_slice(&[0, 0, 0, 0]);
    s.extend_from_slice(&opts);
    s.extend(payload(spec.payload_len.min(MAX_SEGMENT - s.len())));
    ip(src.into(), dst.into(), proto::TCP, s, "tcp_with")
}

/// ARP request "who has `target`, tell `sender`", padded to the 60-byte minimum.
pub fn arp(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(crate::ETHERTYPE_ARP);
    f[..6].copy_from_slice(&[0xff; 6]);
    f.extend_from_slice(&[0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f.resize(60, 0);
    f
}

/// ARP reply "`sender` is at 02:00:00:00:00:01" to `target`, padded to 60 bytes.
pub fn arp_reply(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = arp(sender, target);
    f[..6].copy_from_slice(&DST_MAC);
    f[21] = 2;
    f[32..38].copy_from_slice(&DST_MAC);
    f
}

/// Unsolicited ICMPv6 Neighbor Advertisement from `src` for `target` (hop
/// limit 255, override flag, valid checksum).
pub fn nd_advert(src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let mut seg = vec![crate::ND_NEIGHBOR_ADVERT, 0, 0, 0, 0x20, 0, 0, 0];
    seg.extend_from_slice(&target.octets());
    let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    let mut f = ipv6(src, all_nodes, proto::ICMPV6, seg);
    // RFC 4861 §7.1.2: only hop limit 255 is a neighbour's (not in the checksum).
    f[14 + 7] = 255;
    f
}

/// Insert a VLAN tag (`tpid` 0x8100 or 0x88a8) with VLAN id `vid` after the MACs.
/// Frames shorter than an Ethernet header are returned unchanged.
pub fn vlan_wrap(frame: &[u8], tpid: u16, vid: u16) -> Vec<u8> {
    let Some((macs, rest)) = frame.split_at_checked(12) else {
        return frame.to_vec();
    };
    let mut f = macs.to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    f.extend_from_slice(rest);
    f
}

/// Turn an IPv4/IPv6 Ethernet frame into a PPPoE session frame (session id
/// `session`). Non-IP frames are returned unchanged.
pub fn pppoe_wrap(frame: &[u8], session: u16) -> Vec<u8> {
    let Ok(info) = parse(frame) else {
        return frame.to_vec();
    };
    let Some(ip) = info.ip else {
        return frame.to_vec();
    };
    let Some((head, l3)) = frame.split_at_checked(info.l3_offset) else {
        return frame.to_vec();
    };
    let Some(macs) = head.get(..12) else {
        return frame.to_vec();
    };
    let ppp = match ip.af {
        Af::V4 => PPP_IPV4,
        Af::V6 => PPP_IPV6,
    };
    let mut f = macs.to_vec();
    f.extend_from_slice(&ETHERTYPE_PPPOE_SESS.to_be_bytes());
    f.extend_from_slice(&[0x11, 0x00]);
    f.extend_from_slice(&session.to_be_bytes());
    f.extend_from_slice(&((l3.len() + 2) as u16).to_be_bytes());
    f.extend_from_slice(&ppp.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// The reply the target of echo request `req` sends (any framing
/// [`parse`] reads): MACs and addresses swapped, the type made a reply
/// (ICMP 0, ICMPv6 129), the message's checksum recomputed from scratch
/// (ICMPv6's over the pseudo-header; the IP header's is unchanged by a
/// swap). `None` when `req` is no echo request.
pub fn echo_reply_to(req: &[u8]) -> Option<Vec<u8>> {
    let info = parse(req).ok()?;
    let ip = info.ip?;
    let (typ, at, len) = match (ip.af, ip.l4) {
        (Af::V4, crate::L4::Icmp { typ: 8, .. }) => (0, 12, 4),
        (Af::V6, crate::L4::Icmp { typ: 128, .. }) => (129, 8, 16),
        _ => return None,
    };
    let mut f = req.to_vec();
    let (a, b) = (f.get(..6)?.to_vec(), f.get(6..12)?.to_vec());
    f[..6].copy_from_slice(&b);
    f[6..12].copy_from_slice(&a);
    let (s, d) = (info.l3_offset + at, info.l3_offset + at + len);
    let (src, dst) = (f.get(s..s + len)?.to_vec(), f.get(d..d + len)?.to_vec());
    f[s..s + len].copy_from_slice(&dst);
    f[d..d + len].copy_from_slice(&src);
    let l4 = ip.l4_offset;
    let end = info.l3_offset + usize::from(ip.ip_len);
    *f.get_mut(l4)? = typ;
    f.get_mut(l4 + 2..l4 + 4)?.copy_from_slice(&[0, 0]);
    let msg = f.get(l4..end)?;
    let init = match ip.af {
        Af::V4 => 0,
        Af::V6 => pseudo_header_sum(ip.dst, ip.src, proto::ICMPV6, msg.len() as u32),
    };
    let c = finish(sum_words(init, msg));
    f[l4 + 2..l4 + 4].copy_from_slice(&c.to_be_bytes());
    Some(f)
}

/// Set the whole ToS / traffic-class byte (IPv4 checksum recomputed).
pub fn set_tos(frame: &mut [u8], tos: u8) -> Result<(), WireError> {
    let info = parse(frame)?;
    let ip = info.ip.ok_or(WireError::NotIp)?;
    let at = info.l3_offset;
    match ip.af {
        Af::V4 => {
            let h = frame
                .get_mut(at..at + 20)
                .ok_or(WireError::Truncated(crate::Layer::Ipv4))?;
            h[1] = tos;
            fix_ipv4_checksum(frame, at, ip.l4_offset)
        }
        Af::V6 => {
            let h = frame
                .get_mut(at..at + 2)
                .ok_or(WireError::Truncated(crate::Layer::Ipv6))?;
            h[0] = 0x60 | (tos >> 4);
            h[1] = (h[1] & 0x0f) | (tos << 4);
            Ok(())
        }
    }
}

/// Set an IPv4 frame's MF flag and fragment offset (in 8-byte units).
pub fn set_ipv4_frag(frame: &mut [u8], more: bool, offset_words: u16) -> Result<(), WireError> {
    let info = parse(frame)?;
    let ip = info.ip.ok_or(WireError::NotIp)?;
    if ip.af != Af::V4 {
        return Err(WireError::NotIp);
    }
    let at = info.l3_offset;
    let field = (offset_words & 0x1fff) | if more { 0x2000 } else { 0 };
    let h = frame
        .get_mut(at + 6..at + 8)
        .ok_or(WireError::Truncated(crate::Layer::Ipv4))?;
    h.copy_from_slice(&field.to_be_bytes());
    fix_ipv4_checksum(frame, at, ip.l4_offset)
}

fn fix_ipv4_checksum(frame: &mut [u8], at: usize, end: usize) -> Result<(), WireError> {
    let h = frame
        .get_mut(at..end)
        .ok_or(WireError::Truncated(crate::Layer::Ipv4))?;
    h[10] = 0;
    h[11] = 0;
    let c = finish(sum_words(0, h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internet_checksum;

    #[test]
    fn built_frames_have_valid_checksums() {
        let f = tcp(V4_SRC, V4_DST, 1, 2, 0x12, 33);
        assert_eq!(internet_checksum(&f[14..34]), 0);
        // TCP checksum verifies with the pseudo-header.
        let mut ph = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 6];
        ph.extend_from_slice(&((f.len() - 34) as u16).to_be_bytes());
        assert_eq!(finish(sum_words(sum_words(0, &ph), &f[34..])), 0);
        let g = icmp_v4_echo(V4_SRC, V4_DST, 9, 1, 56);
        assert_eq!(internet_checksum(&g[34..]), 0);
    }

    #[test]
    fn set_tos_and_frag_keep_checksum() {
        let mut f = udp_v4(V4_SRC, V4_DST, 1, 2, 5);
        set_tos(&mut f, 0xb8).unwrap();
        assert_eq!(internet_checksum(&f[14..34]), 0);
        assert_eq!(parse(&f).unwrap().ip.unwrap().tos, 0xb8);
        set_ipv4_frag(&mut f, true, 0).unwrap();
        assert_eq!(internet_checksum(&f[14..34]), 0);
        assert_eq!(parse(&f).unwrap().ip.unwrap().frag, crate::Frag::First);
        let mut g = udp_v6("::1".parse().unwrap(), "::2".parse().unwrap(), 1, 2, 5);
        set_tos(&mut g, 0x2e).unwrap();
        assert_eq!(parse(&g).unwrap().ip.unwrap().tos, 0x2e);
    }

    #[test]
    fn arp_and_wraps() {
        let a = arp(V4_SRC, V4_DST);
        assert_eq!(a.len(), 60);
        assert!(parse(&a).unwrap().ip.is_none());
        let v = vlan_wrap(&a, crate::ETHERTYPE_VLAN, 7);
        let info = parse(&v).unwrap();
        assert_eq!(
            (info.ethertype, info.encap_bytes, info.l3_offset),
            (0x0806, 4, 18)
        );
        let t = tcp(V4_SRC, V4_DST, 1, 2, 0x10, 0);
        let p = pppoe_wrap(&t, 1);
        let info = parse(&p).unwrap();
        assert_eq!(
            (info.ethertype, info.encap_bytes, info.l3_offset),
            (0x8864, 8, 22)
        );
        assert_eq!(info.ip.unwrap().ports(), Some((1, 2)));
    }
}
