//! Neighbour protocols: the address a host claims as its own in ARP (RFC 826)
//! or IPv6 Neighbor Discovery (RFC 4861).
//!
//! # Principles
//!
//! - A claim is what a receiving host would put in its neighbour cache for
//!   the sender: ARP's sender protocol address (requests and replies alike —
//!   RFC 826 "Packet Reception" merges the sender's pair either way; RFC
//!   5227 announcements are requests whose sender equals their target), an
//!   IPv6 Neighbor Advertisement's target address (RFC 4861 §4.4) and a
//!   Neighbor Solicitation's source address (§7.2.4: the solicited node caches
//!   it). Nothing else — in particular no plain IP source address — claims.
//! - Only what a receiver would accept: ARP for Ethernet/IPv4 (htype 1,
//!   ptype 0x0800, lengths 6/4); ND with hop limit 255 and code 0 (§7.1.1,
//!   §7.1.2: anything else was forwarded by a router or is malformed).
//!   Unspecified (RFC 5227 probes, DAD), multicast, broadcast and loopback
//!   addresses are never a host's own.
//! - Never panics: every read is bounds-checked; a short or odd packet
//!   simply claims nothing.

use crate::{be16, proto, PacketInfo, ETHERTYPE_ARP, L4};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ICMPv6 Neighbor Solicitation (RFC 4861 §4.3).
pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
/// ICMPv6 Neighbor Advertisement (RFC 4861 §4.4).
pub const ND_NEIGHBOR_ADVERT: u8 = 136;

/// How a frame claimed its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimKind {
    ArpRequest,
    ArpReply,
    /// Gratuitous ARP / RFC 5227 announcement: sender address = target address.
    ArpAnnounce,
    NeighborSolicit,
    NeighborAdvert,
}

/// An address a neighbour-protocol frame claims for its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub addr: IpAddr,
    pub kind: ClaimKind,
}

/// The address `frame` (parsed as `info`) claims for its sender, if it is an
/// ARP or ND message a neighbour would accept and the address can be a
/// host's own.
pub fn neighbor_claim(frame: &[u8], info: &PacketInfo) -> Option<Claim> {
    let claim = match &info.ip {
        None if info.ethertype == ETHERTYPE_ARP => arp_claim(frame, info.l3_offset)?,
        None => return None,
        Some(ip) if ip.proto == proto::ICMPV6 => {
            let L4::Icmp { typ, code: 0, .. } = ip.l4 else {
                return None;
            };
            // IPv6 hop limit: byte 7 of the fixed header.
            if frame.get(info.l3_offset.checked_add(7)?) != Some(&255) {
                return None;
            }
            match typ {
                ND_NEIGHBOR_ADVERT => {
                    let at = ip.l4_offset.checked_add(8)?;
                    let t: [u8; 16] = frame.get(at..at.checked_add(16)?)?.try_into().ok()?;
                    Claim {
                        addr: IpAddr::V6(Ipv6Addr::from(t)),
                        kind: ClaimKind::NeighborAdvert,
                    }
                }
                ND_NEIGHBOR_SOLICIT => Claim {
                    addr: ip.src,
                    kind: ClaimKind::NeighborSolicit,
                },
                _ => return None,
            }
        }
        Some(_) => return None,
    };
    own_address(claim.addr).then_some(claim)
}

fn arp_claim(frame: &[u8], at: usize) -> Option<Claim> {
    // htype, ptype, hlen/plen, oper; then sha(6) spa(4) tha(6) tpa(4).
    if be16(frame, at)? != 1 || be16(frame, at.checked_add(2)?)? != 0x0800 {
        return None;
    }
    if be16(frame, at.checked_add(4)?)? != 0x0604 {
        return None;
    }
    let ip4 = |off: usize| -> Option<Ipv4Addr> {
        let s = at.checked_add(off)?;
        let b: [u8; 4] = frame.get(s..s.checked_add(4)?)?.try_into().ok()?;
        Some(Ipv4Addr::from(b))
    };
    let (spa, tpa) = (ip4(14)?, ip4(24)?);
    let kind = match be16(frame, at.checked_add(6)?)? {
        1 if spa == tpa => ClaimKind::ArpAnnounce,
        1 => ClaimKind::ArpRequest,
        2 => ClaimKind::ArpReply,
        _ => return None,
    };
    Some(Claim {
        addr: IpAddr::V4(spa),
        kind,
    })
}

/// Could `a` be a host's own unicast address?
fn own_address(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(a) => {
            !(a.is_unspecified() || a.is_multicast() || a.is_broadcast() || a.is_loopback())
        }
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast() || a.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn claim(f: &[u8]) -> Option<Claim> {
        neighbor_claim(f, &parse(f).unwrap())
    }

    /// ARP reply 192.168.1.1 is-at 52:54:00:aa:bb:cc to 192.168.1.10, as captured.
    const ARP_REPLY: [u8; 60] = [
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc, 0x08, 0x06, //
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc, //
        0xc0, 0xa8, 0x01, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0xc0, 0xa8, 0x01, 0x0a, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    /// Solicited NA: fe80::1 (hop limit 255) says 2001:db8::1 is at
    /// 52:54:00:aa:bb:cc (target link-layer address option).
    const NA: [u8; 86] = [
        0x33, 0x33, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc, 0x86, 0xdd, //
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, //
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0x88, 0x00, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0x02, 0x01, 0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc,
    ];

    #[test]
    fn arp_reply_claims_its_sender() {
        assert_eq!(
            claim(&ARP_REPLY),
            Some(Claim {
                addr: "192.168.1.1".parse().unwrap(),
                kind: ClaimKind::ArpReply
            })
        );
    }

    #[test]
    fn arp_requests_announcements_and_probes() {
        let mut req = ARP_REPLY;
        req[21] = 1;
        assert_eq!(claim(&req).unwrap().kind, ClaimKind::ArpRequest);
        req[38..42].copy_from_slice(&[0xc0, 0xa8, 0x01, 0x01]);
        assert_eq!(claim(&req).unwrap().kind, ClaimKind::ArpAnnounce);
        // RFC 5227 probe: sender 0.0.0.0 claims nothing.
        let mut probe = ARP_REPLY;
        probe[21] = 1;
        probe[28..32].copy_from_slice(&[0; 4]);
        assert_eq!(claim(&probe), None);
        let mut bcast = ARP_REPLY;
        bcast[28..32].copy_from_slice(&[0xff; 4]);
        assert_eq!(claim(&bcast), None);
    }

    #[test]
    fn odd_arp_claims_nothing() {
        for (at, v) in [(15, 0x06), (17, 0xdd), (18, 8), (21, 3), (21, 0)] {
            let mut f = ARP_REPLY;
            f[at] = v;
            assert_eq!(claim(&f), None, "byte {at} = {v:#x}");
        }
        // Every truncation: no panic, and no claim once the sender address is cut.
        for n in 14..42 {
            assert_eq!(claim(&ARP_REPLY[..n]), None, "cut at {n}");
        }
    }

    #[test]
    fn neighbor_advert_claims_its_target() {
        assert_eq!(
            claim(&NA),
            Some(Claim {
                addr: "2001:db8::1".parse().unwrap(),
                kind: ClaimKind::NeighborAdvert
            })
        );
        // Forwarded (hop limit < 255) or a bad code: not from a neighbour.
        let mut fwd = NA;
        fwd[21] = 254;
        assert_eq!(claim(&fwd), None);
        let mut code = NA;
        code[55] = 1;
        assert_eq!(claim(&code), None);
        let mut mcast = NA;
        mcast[62] = 0xff;
        assert_eq!(claim(&mcast), None, "multicast target");
    }

    #[test]
    fn neighbor_solicit_claims_its_source_unless_dad() {
        let mut ns = NA;
        ns[54] = ND_NEIGHBOR_SOLICIT;
        assert_eq!(
            claim(&ns),
            Some(Claim {
                addr: "fe80::1".parse().unwrap(),
                kind: ClaimKind::NeighborSolicit
            })
        );
        // Duplicate address detection: source ::.
        ns[22..38].copy_from_slice(&[0; 16]);
        assert_eq!(claim(&ns), None);
    }

    #[test]
    fn ip_traffic_claims_nothing() {
        let f = crate::build::udp_v4(crate::build::V4_SRC, crate::build::V4_DST, 1, 2, 10);
        assert_eq!(claim(&f), None);
        let echo = crate::build::icmp_v6_echo(crate::build::V6_SRC, crate::build::V6_DST, 1, 1, 8);
        assert_eq!(claim(&echo), None);
    }

    #[test]
    fn builders_claim_what_they_say() {
        use crate::build::{arp, arp_reply, nd_advert, V4_DST, V4_SRC, V6_DST, V6_SRC};
        let c = claim(&arp_reply(V4_SRC, V4_DST)).unwrap();
        assert_eq!((c.addr, c.kind), (IpAddr::V4(V4_SRC), ClaimKind::ArpReply));
        assert_eq!(
            claim(&arp(V4_SRC, V4_DST)).unwrap().kind,
            ClaimKind::ArpRequest
        );
        let c = claim(&nd_advert(V6_DST, V6_SRC)).unwrap();
        assert_eq!(
            (c.addr, c.kind),
            (IpAddr::V6(V6_SRC), ClaimKind::NeighborAdvert)
        );
    }
}
