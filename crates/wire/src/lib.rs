//! Zero-copy checked views of the headers sluice needs to classify a frame.
//!
//! Owns: link-layer decapsulation (Ethernet II, up to two 802.1Q/802.1ad tags,
//! PPPoE session), IPv4 (options, fragments), IPv6 (extension-header chain),
//! TCP, UDP, ICMP/ICMPv6; the address an ARP or ND frame claims for its
//! sender ([`neighbor_claim`]); ECN rewriting with the incremental IPv4 checksum
//! update; the TCP header view, its options and in-place window/MSS rewrites
//! ([`tcp`]); the per-flow receive-window clamp ([`tcpwin`]); ICMP/ICMPv6
//! echo requests in a link's own framing and replies ([`echo`], autorate's
//! probes); frame builders for tests. Depends on nothing but `std`.
//!
//! # Principles
//!
//! - **Never panic on any input.** Every read goes through a bounds-checked
//!   accessor (`get`); no slice indexing on input-derived offsets. Proven by the
//!   proptests "arbitrary bytes" and "every truncation of a valid frame".
//! - **Check, then describe.** [`parse`] walks the headers once, checks each
//!   length field against the bytes that are really there, and returns a
//!   compact [`PacketInfo`] (smoltcp's `new_checked` + `Repr` shape, flattened).
//!   A malformed frame gives a [`WireError`] that names what is wrong.
//! - **Lengths come from the IP header, not the frame.** Ethernet pads short
//!   frames to 60 bytes; a frame longer than the IP datagram is legal, a frame
//!   shorter is truncated.
//! - **Ports only where they exist.** Only an unfragmented datagram or the
//!   first fragment (IPv4 offset 0, IPv6 fragment offset 0) carries L4 ports
//!   (RFC 791 §3.2, RFC 8200 §4.5); a later fragment has `l4: L4::None`.
//! - **Bounded work.** VLAN tags are capped at [`MAX_VLAN_TAGS`], the IPv6
//!   extension chain at [`MAX_EXT_HEADERS`]; beyond that the frame is rejected.

#![forbid(unsafe_code)]

mod checksum;
mod ether;
mod ip;
mod l4;
mod neigh;

pub mod build;
pub mod echo;
pub mod tcp;
pub mod tcpwin;

pub use checksum::{
    checksum_update16, checksum_update_at, complete_if_partial, complete_l4_checksum,
    internet_checksum,
};
pub use ether::{MAX_VLAN_TAGS, PPP_IPV4, PPP_IPV6};
pub use ip::MAX_EXT_HEADERS;
pub use neigh::{neighbor_claim, Claim, ClaimKind, ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT};

use std::fmt;
use std::net::IpAddr;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// 802.1Q customer tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// 802.1ad service tag (QinQ outer).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// PPPoE discovery stage (non-IP).
pub const ETHERTYPE_PPPOE_DISC: u16 = 0x8863;
/// PPPoE session stage.
pub const ETHERTYPE_PPPOE_SESS: u16 = 0x8864;

/// IP protocol numbers sluice looks at.
pub mod proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

/// TCP flag bits (RFC 9293 §3.1, RFC 3168 §6.1 for ECE/CWR).
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// What [`parse`] learned about a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// The innermost EtherType after VLAN tags (`0x8864` for a PPPoE session
    /// frame; `ip.af` says what PPP carries). For an 802.3 frame with a length
    /// field instead of a type, that length value.
    pub ethertype: u16,
    /// Bytes of VLAN tags plus PPPoE/PPP headers between the Ethernet header
    /// and the IP header (what link overhead accounting may want to know).
    pub encap_bytes: u16,
    /// Offset of the IP header (or of the non-IP payload) in the frame.
    pub l3_offset: usize,
    /// `None` for non-IP frames (ARP, LLDP, PPPoE discovery, PPP control).
    pub ip: Option<IpInfo>,
}

/// Address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Af {
    V4,
    V6,
}

/// Fragment status of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frag {
    /// Not fragmented (or an IPv6 atomic fragment).
    None,
    /// Offset 0 with more fragments following: carries the L4 header.
    First,
    /// Offset > 0: no L4 header.
    Later,
}

/// The IP layer of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpInfo {
    pub af: Af,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Upper-layer protocol (for IPv6: after the extension chain; the last
    /// header seen when the chain ends in ESP, No-Next-Header or a later fragment).
    pub proto: u8,
    /// The whole ToS / traffic-class byte (DSCP << 2 | ECN).
    pub tos: u8,
    /// Datagram length from the IP header (IPv6: 40 + payload length).
    pub ip_len: u16,
    pub frag: Frag,
    /// An IPv6 Authentication Header precedes the upper layer (RFC 4302):
    /// its ICV covers the fields a rewrite would change.
    pub authenticated: bool,
    /// Offset of the L4 header in the frame (meaningful when `l4` is not None).
    pub l4_offset: usize,
    pub l4: L4,
}

impl IpInfo {
    /// The two ECN bits (RFC 3168 §5).
    pub fn ecn(&self) -> u8 {
        self.tos & 0b11
    }

    /// Source and destination ports for TCP/UDP.
    pub fn ports(&self) -> Option<(u16, u16)> {
        match self.l4 {
            L4::Tcp { sport, dport, .. } | L4::Udp { sport, dport, .. } => Some((sport, dport)),
            _ => None,
        }
    }
}

/// The transport layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    /// Later fragment, or a protocol sluice does not look into.
    None,
    Tcp {
        sport: u16,
        dport: u16,
        flags: u8,
        /// Segment payload bytes (IP length − IP headers − TCP data offset).
        payload_len: u16,
    },
    Udp {
        sport: u16,
        dport: u16,
        payload_len: u16,
    },
    /// ICMP (IPv4) or ICMPv6.
    Icmp {
        typ: u8,
        code: u8,
        /// Echo identifier for echo request/reply (pf keys ICMP query states
        /// by it), 0 for other types.
        id: u16,
    },
}

/// Which header a [`WireError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    Ethernet,
    Vlan,
    Pppoe,
    Ipv4,
    Ipv6,
    Ipv6Ext,
    Tcp,
    Udp,
    Icmp,
}

/// What is wrong with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The frame ends inside this header (or inside the datagram its length claims).
    Truncated(Layer),
    /// More than [`MAX_VLAN_TAGS`] stacked VLAN tags.
    TooManyVlanTags,
    /// PPPoE session header with a version/type other than 1/1 or code ≠ 0.
    BadPppoeHeader,
    /// The IP version nibble does not match the EtherType / PPP protocol.
    BadIpVersion(u8),
    /// IPv4 IHL below 5 words.
    BadIhl(u8),
    /// IPv4 total length smaller than its header.
    BadTotalLength(u16),
    /// TCP data offset below 5 words or beyond the segment.
    BadTcpOffset(u8),
    /// UDP length field below 8 or beyond the datagram.
    BadUdpLength(u16),
    /// More than [`MAX_EXT_HEADERS`] IPv6 extension headers.
    ExtChainTooLong,
    /// [`set_ecn`] on a frame without IP.
    NotIp,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated(l) => write!(f, "truncated {l:?} header or payload"),
            WireError::TooManyVlanTags => write!(f, "more than {MAX_VLAN_TAGS} VLAN tags"),
            WireError::BadPppoeHeader => write!(f, "bad PPPoE session header"),
            WireError::BadIpVersion(v) => write!(f, "bad IP version {v}"),
            WireError::BadIhl(v) => write!(f, "bad IPv4 IHL {v} (minimum 5)"),
            WireError::BadTotalLength(v) => write!(f, "bad IPv4 total length {v}"),
            WireError::BadTcpOffset(v) => write!(f, "bad TCP data offset {v}"),
            WireError::BadUdpLength(v) => write!(f, "bad UDP length {v}"),
            WireError::ExtChainTooLong => {
                write!(f, "IPv6 extension chain longer than {MAX_EXT_HEADERS}")
            }
            WireError::NotIp => write!(f, "not an IP frame"),
        }
    }
}

impl std::error::Error for WireError {}

/// Parse an Ethernet frame (starting at the destination MAC, no FCS).
pub fn parse(frame: &[u8]) -> Result<PacketInfo, WireError> {
    let link = ether::parse_link(frame)?;
    let ip = match link.l3 {
        ether::L3Kind::Ipv4 => Some(ip::parse_ipv4(frame, link.l3_offset, link.l3_end)?),
        ether::L3Kind::Ipv6 => Some(ip::parse_ipv6(frame, link.l3_offset, link.l3_end)?),
        ether::L3Kind::Other => None,
    };
    Ok(PacketInfo {
        ethertype: link.ethertype,
        encap_bytes: link.encap_bytes,
        l3_offset: link.l3_offset,
        ip,
    })
}

/// Rewrite the two ECN bits of the IP header described by `info` (typically
/// to CE = 0b11 when an AQM marks instead of dropping). For IPv4 the header
/// checksum is updated incrementally (RFC 1624 eqn. 3); IPv6 has none.
pub fn set_ecn(frame: &mut [u8], info: &PacketInfo, ecn: u8) -> Result<(), WireError> {
    let ip = info.ip.as_ref().ok_or(WireError::NotIp)?;
    let at = info.l3_offset;
    match ip.af {
        Af::V4 => {
            let hdr = frame
                .get_mut(at..at.saturating_add(12))
                .ok_or(WireError::Truncated(Layer::Ipv4))?;
            let old_word = u16::from_be_bytes([hdr[0], hdr[1]]);
            hdr[1] = (hdr[1] & !0b11) | (ecn & 0b11);
            let new_word = u16::from_be_bytes([hdr[0], hdr[1]]);
            let old_sum = u16::from_be_bytes([hdr[10], hdr[11]]);
            let new_sum = checksum_update16(old_sum, old_word, new_word);
            hdr[10..12].copy_from_slice(&new_sum.to_be_bytes());
        }
        Af::V6 => {
            // Traffic class straddles bytes 0 and 1: its ECN bits are bits 5..4 of byte 1.
            let b = frame
                .get_mut(at.saturating_add(1))
                .ok_or(WireError::Truncated(Layer::Ipv6))?;
            *b = (*b & !0x30) | ((ecn & 0b11) << 4);
        }
    }
    Ok(())
}

/// Entry point for a cargo-fuzz target: parse, and if it parses, look for a
/// neighbour claim, rewrite ECN and parse again; the result must still parse
/// with the new ECN bits.
pub fn fuzz_entry(data: &[u8]) {
    if let Ok(info) = parse(data) {
        let _ = neighbor_claim(data, &info);
        if info.ip.is_some() {
            let mut copy = data.to_vec();
            if set_ecn(&mut copy, &info, 0b11).is_ok() {
                let again = parse(&copy).expect("ECN rewrite must keep a frame parseable");
                assert_eq!(again.ip.map(|i| i.ecn()), Some(0b11));
            }
        }
    }
}

/// Entry point for the `tcp_rewrite` fuzz target: walk the options of any
/// bytes (must end, never panic); for a frame that parses as TCP, read its
/// header, run a window clamp over it in both roles, and rewrite its window and
/// MSS — each rewrite must keep the TCP checksum exactly as valid (or as
/// invalid, by the same amount) as it was, and leave the frame parseable.
pub fn fuzz_tcp_entry(data: &[u8]) {
    let n = tcp::Options::new(data).take(64).count();
    assert!(n <= data.len(), "the option walk advances every step");
    let Ok(info) = parse(data) else { return };
    let Ok(hdr) = tcp::TcpHeader::in_frame(data, &info) else {
        let mut copy = data.to_vec();
        assert!(tcp::rewrite_window(&mut copy, &info, 1).is_err());
        assert_eq!(copy, data, "a refused rewrite leaves the frame untouched");
        return;
    };
    let seg = hdr.segment();
    let value = u16::from_be_bytes([
        data.first().copied().unwrap_or(0),
        data.last().copied().unwrap_or(0),
    ]);
    let before = tcp::tcp_checksum(data, &info).ok();
    let stored = hdr.checksum();
    let mut copy = data.to_vec();
    let af = info.ip.map_or(Af::V4, |ip| ip.af);
    let mut clamp = tcpwin::WindowClamp::new(af);
    clamp.on_sender(&seg);
    let _ = clamp.on_receiver_frame(&mut copy, &info, Some(u32::from(value)));
    let _ = tcp::rewrite_window(&mut copy, &info, value);
    let _ = tcp::rewrite_mss(&mut copy, &info, value ^ 0x5a5a);
    let again = parse(&copy).expect("a TCP rewrite keeps the frame parseable");
    let h2 = tcp::TcpHeader::in_frame(&copy, &again).expect("and its header readable");
    let after = tcp::tcp_checksum(&copy, &again).ok();
    // Valid before ⇔ valid after. Validity is what a receiver checks: the
    // field equals the recomputation modulo 0xffff (0x0000 and 0xffff are
    // both zero in one's complement).
    let verifies = |c: Option<u16>, field: u16| c.map(|c| c % 0xffff == field % 0xffff);
    assert_eq!(verifies(before, stored), verifies(after, h2.checksum()));
}

/// Read a big-endian u16 at `at`, if the bytes are there.
fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// UDP 10.0.0.1:1234 → 10.0.0.2:5678 with ToS 0x02 (ECT(0)) and a valid
    /// header checksum (0x66c8), as captured.
    const ECT0_V4: [u8; 46] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, //
        0x45, 0x02, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xc8, //
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, //
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0x00, 0x00, b'd', b'a', b't', b'a',
    ];

    #[test]
    fn set_ecn_marks_ce_and_fixes_checksum() {
        assert_eq!(internet_checksum(&ECT0_V4[14..34]), 0, "fixture checksum");
        let mut f = ECT0_V4;
        let info = parse(&f).unwrap();
        assert_eq!(info.ip.unwrap().ecn(), 0b10);
        set_ecn(&mut f, &info, 0b11).unwrap();
        assert_eq!(f[15], 0x03);
        assert_eq!(internet_checksum(&f[14..34]), 0);
        // Only the ToS byte and the checksum changed.
        let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != ECT0_V4[i]).collect();
        assert!(
            changed.iter().all(|i| [15, 24, 25].contains(i)),
            "{changed:?}"
        );
        set_ecn(&mut f, &info, 0b10).unwrap();
        assert_eq!(f, ECT0_V4, "rewriting back restores the original bytes");
    }

    #[test]
    fn error_messages_name_the_problem() {
        assert_eq!(
            WireError::BadIhl(3).to_string(),
            "bad IPv4 IHL 3 (minimum 5)"
        );
        assert_eq!(
            WireError::Truncated(Layer::Tcp).to_string(),
            "truncated Tcp header or payload"
        );
    }
}
