//! Link layer: Ethernet II (IEEE 802.3 clause 3.2.6 type field), stacked
//! 802.1Q / 802.1ad tags, and the PPPoE session stage (RFC 2516 §4, §5).
//!
//! # Principles
//!
//! - At most [`MAX_VLAN_TAGS`] tags are peeled: QinQ is two, a third is either
//!   an attack or a misconfiguration and is rejected rather than walked.
//! - PPPoE's own length field bounds the PPP payload: bytes after it (Ethernet
//!   padding) are not part of the IP datagram.
//! - A frame whose type is not IP (ARP, LLDP, PPPoE discovery, LCP/IPCP inside
//!   a session) is not an error: it parses with `L3Kind::Other`.

use crate::{be16, Layer, WireError};
use crate::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_PPPOE_SESS, ETHERTYPE_QINQ, ETHERTYPE_VLAN};

/// Stacked VLAN tags we peel (802.1ad outer + 802.1Q inner).
pub const MAX_VLAN_TAGS: usize = 2;
/// PPP protocol number of IPv4 (RFC 1332).
pub const PPP_IPV4: u16 = 0x0021;
/// PPP protocol number of IPv6 (RFC 5072).
pub const PPP_IPV6: u16 = 0x0057;

const ETH_HDR_LEN: usize = 14;
const VLAN_TAG_LEN: usize = 4;
/// PPPoE header (6) + PPP protocol field (2).
const PPPOE_HDR_LEN: usize = 8;
/// Values below this in the type position are 802.3 lengths, not EtherTypes.
const ETHERTYPE_MIN: u16 = 0x0600;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum L3Kind {
    Ipv4,
    Ipv6,
    Other,
}

pub(crate) struct Link {
    pub ethertype: u16,
    pub encap_bytes: u16,
    pub l3_offset: usize,
    /// End of the L3 bytes (frame end, or the PPPoE payload end).
    pub l3_end: usize,
    pub l3: L3Kind,
}

pub(crate) fn parse_link(frame: &[u8]) -> Result<Link, WireError> {
    let mut ethertype = be16(frame, 12).ok_or(WireError::Truncated(Layer::Ethernet))?;
    let mut off = ETH_HDR_LEN;
    let mut tags = 0usize;
    // Bounded by MAX_VLAN_TAGS: the loop returns an error on the tag after that.
    while ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
        if tags == MAX_VLAN_TAGS {
            return Err(WireError::TooManyVlanTags);
        }
        ethertype = be16(frame, off + 2).ok_or(WireError::Truncated(Layer::Vlan))?;
        off += VLAN_TAG_LEN;
        tags += 1;
    }
    let vlan_bytes = off - ETH_HDR_LEN;
    let mut link = Link {
        ethertype,
        encap_bytes: vlan_bytes as u16,
        l3_offset: off,
        l3_end: frame.len(),
        l3: L3Kind::Other,
    };
    match ethertype {
        ETHERTYPE_IPV4 => link.l3 = L3Kind::Ipv4,
        ETHERTYPE_IPV6 => link.l3 = L3Kind::Ipv6,
        ETHERTYPE_PPPOE_SESS => {
            let hdr = frame
                .get(off..off + PPPOE_HDR_LEN)
                .ok_or(WireError::Truncated(Layer::Pppoe))?;
            // ver=1 type=1 (RFC 2516 §4), code 0 for session data.
            if hdr[0] != 0x11 || hdr[1] != 0 {
                return Err(WireError::BadPppoeHeader);
            }
            let pppoe_len = usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
            let ppp_proto = u16::from_be_bytes([hdr[6], hdr[7]]);
            // The PPPoE length covers the PPP protocol field and its payload.
            let payload_start = off + 6;
            let end = payload_start + pppoe_len;
            if end > frame.len() {
                return Err(WireError::Truncated(Layer::Pppoe));
            }
            if pppoe_len < 2 {
                return Err(WireError::BadPppoeHeader);
            }
            link.encap_bytes = (vlan_bytes + PPPOE_HDR_LEN) as u16;
            link.l3_offset = off + PPPOE_HDR_LEN;
            link.l3_end = end;
            link.l3 = match ppp_proto {
                PPP_IPV4 => L3Kind::Ipv4,
                PPP_IPV6 => L3Kind::Ipv6,
                _ => L3Kind::Other,
            };
        }
        t if t < ETHERTYPE_MIN => link.l3 = L3Kind::Other,
        _ => {}
    }
    Ok(link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{V6_DST, V6_SRC};
    use crate::{parse, Af};

    /// ARP request who-has 192.168.1.1 tell 192.168.1.10, as captured (padded to 60).
    const ARP: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, //
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, //
        0xc0, 0xa8, 0x01, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn arp_is_non_ip() {
        let info = parse(&ARP).unwrap();
        assert_eq!(info.ethertype, 0x0806);
        assert_eq!(info.l3_offset, 14);
        assert_eq!(info.ip, None);
    }

    #[test]
    fn short_ethernet_is_truncated() {
        assert_eq!(
            parse(&ARP[..13]),
            Err(WireError::Truncated(Layer::Ethernet))
        );
        assert_eq!(parse(&[]), Err(WireError::Truncated(Layer::Ethernet)));
    }

    #[test]
    fn llc_length_frame_is_non_ip() {
        let mut f = ARP;
        f[12] = 0x00;
        f[13] = 0x26; // 802.3 length 38
        assert_eq!(parse(&f).unwrap().ip, None);
    }

    #[test]
    fn three_vlan_tags_are_rejected() {
        let mut f = vec![0u8; 12];
        for _ in 0..3 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        }
        f.extend_from_slice(&[0x08, 0x06]);
        f.extend_from_slice(&[0u8; 28]);
        assert_eq!(parse(&f), Err(WireError::TooManyVlanTags));
    }

    #[test]
    fn truncated_vlan_tag() {
        let f = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0x00, 0x0a];
        assert_eq!(parse(&f), Err(WireError::Truncated(Layer::Vlan)));
    }

    /// PPPoE session frame carrying an LCP echo request (PPP 0xc021): non-IP.
    #[test]
    fn pppoe_lcp_is_non_ip() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34, 0x00, 0x0a, 0xc0, 0x21]);
        f.extend_from_slice(&[0x09, 0x01, 0x00, 0x08, 0, 0, 0, 0]);
        let info = parse(&f).unwrap();
        assert_eq!(info.ethertype, ETHERTYPE_PPPOE_SESS);
        assert_eq!(info.encap_bytes, 8);
        assert_eq!(info.ip, None);
    }

    #[test]
    fn pppoe_bad_version_and_short_length() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0x64, 0x12, 0x00, 0x12, 0x34, 0x00, 0x02, 0x00, 0x21]);
        assert_eq!(parse(&f), Err(WireError::BadPppoeHeader));
        f[14] = 0x11;
        f[19] = 0x40; // claims 64 bytes, has 2
        assert_eq!(parse(&f), Err(WireError::Truncated(Layer::Pppoe)));
    }

    /// PPPoE discovery (PADI) is a non-IP EtherType.
    #[test]
    fn pppoe_discovery_is_non_ip() {
        let mut f = vec![0xffu8; 6];
        f.extend_from_slice(&[0x52, 0x54, 0, 1, 2, 3, 0x88, 0x63, 0x11, 0x09, 0, 0, 0, 4]);
        f.extend_from_slice(&[0x01, 0x01, 0x00, 0x00]);
        let info = parse(&f).unwrap();
        assert_eq!(info.ethertype, 0x8863);
        assert!(info.ip.is_none());
    }

    /// QinQ + PPPoE + IPv6: all encapsulations stacked.
    #[test]
    fn qinq_pppoe_ipv6() {
        let inner = crate::build::udp_v6(V6_SRC, V6_DST, 5000, 53, 10);
        let f = crate::build::pppoe_wrap(&inner, 0x1234);
        let f = crate::build::vlan_wrap(&f, ETHERTYPE_VLAN, 20);
        let f = crate::build::vlan_wrap(&f, ETHERTYPE_QINQ, 300);
        let info = parse(&f).unwrap();
        assert_eq!(info.encap_bytes, 16);
        assert_eq!(info.l3_offset, 30);
        let ip = info.ip.unwrap();
        assert_eq!(ip.af, Af::V6);
        assert_eq!(ip.ports(), Some((5000, 53)));
    }
}
