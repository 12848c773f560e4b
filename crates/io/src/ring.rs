//! TPACKET_V2 frame slots and PACKET_AUXDATA control messages, parsed
//! from bytes.
//!
//! # Principles
//! A TPACKET_V2 slot is fixed-size and carries its own status word
//! (`tp_status & TP_STATUS_USER`: user space owns it), then a
//! `struct tpacket2_hdr`, a `sockaddr_ll` and the frame at `tp_mac`
//! (linux/if_packet.h, Documentation/networking/packet_mmap.rst). This
//! module only reads byte slices: every offset from the kernel is
//! bounds-checked and a corrupt header yields nothing instead of a panic.
//! The mmap itself lives in `sock.rs`; here nothing is unsafe, so it is
//! unit-tested from byte arrays. (The TPACKET_V3 block ring was removed:
//! docs/adr/0002-packet-io.md has why V2 replaced it.)
//! A frame whose status (or `PACKET_AUXDATA`'s, on recvmmsg) says
//! `TP_STATUS_CSUMNOTREADY` gets its TCP/UDP checksum completed as it is
//! copied out of the ring, before the engine reads or rewrites it: sent
//! on as it came, it would carry a pseudo-header sum onto a wire where no
//! offload completes it (security review L7).

/// `tp_status` bit: the slot belongs to user space.
pub const TP_STATUS_USER: u32 = 1;
/// `tp_status` bit: the kernel removed a VLAN tag into `tp_vlan_tci`.
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `tp_status` bit: `tp_vlan_tpid` is meaningful.
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// `tp_status` bit: the sender left the TCP/UDP checksum to TX offload
/// (CHECKSUM_PARTIAL, a veth or tap peer with `tx` on): its field holds
/// only the pseudo-header's sum. Completed in software ([`copy_frame`]).
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// `tp_status` bit: the kernel verified the checksum (or needs not):
/// the frame is whole as it is; nothing to do.
pub const TP_STATUS_CSUM_VALID: u32 = 1 << 7;
/// `sll_pkttype` of a frame this host sent.
pub const PACKET_OUTGOING: u8 = 4;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_ne_bytes([s[0], s[1]]))
}

/// One received frame in a ring slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The captured bytes, from the MAC header on.
    pub data: &'a [u8],
    /// Length on the wire (larger than `data` if truncated by snaplen).
    pub wire_len: u32,
    pub status: u32,
    /// The VLAN tag the kernel stripped, as (TPID, TCI), if any.
    pub vlan: Option<(u16, u16)>,
    /// `sll_pkttype` (host, broadcast, other host, outgoing …).
    pub pkttype: u8,
}

/// AF_PACKET socket options (linux/if_packet.h), for every packet socket
/// of the crate. `PACKET_AUXDATA` is also the control message carrying
/// `struct tpacket_auxdata` on the recvmmsg path.
pub const SOL_PACKET: i32 = 263;
pub const PACKET_ADD_MEMBERSHIP: i32 = 1;
pub const PACKET_RX_RING: i32 = 5;
pub const PACKET_STATISTICS: i32 = 6;
pub const PACKET_AUXDATA: i32 = 8;
pub const PACKET_VERSION: i32 = 10;
pub const PACKET_QDISC_BYPASS: i32 = 20;
pub const PACKET_IGNORE_OUTGOING: i32 = 23;
pub const PACKET_MR_PROMISC: u16 = 1;
pub const TPACKET_V2: i32 = 1;
/// `struct cmsghdr` on 64-bit Linux: `size_t cmsg_len; int level; int type`.
const CMSG_HDR: usize = 16;
/// Messages walked per control buffer: the kernel sends one auxdata message;
/// the cap only guards against a malformed buffer.
const CMSG_CAP: usize = 8;

/// The VLAN tag (TPID, TCI) the kernel stripped, from a recvmsg control
/// buffer with `PACKET_AUXDATA` enabled; `None` if there is none.
pub fn auxdata_vlan(control: &[u8]) -> Option<(u16, u16)> {
    auxdata(control)?.1
}

/// `tp_status` and the stripped VLAN tag (TPID, TCI) from a recvmsg
/// control buffer with `PACKET_AUXDATA` enabled; `None` without auxdata.
pub fn auxdata(control: &[u8]) -> Option<(u32, Option<(u16, u16)>)> {
    let mut at = 0usize;
    for _ in 0..CMSG_CAP {
        let hdr = control.get(at..at.checked_add(CMSG_HDR)?)?;
        let len = usize::try_from(u64::from_ne_bytes(hdr[..8].try_into().ok()?)).ok()?;
        let level = i32::from_ne_bytes(hdr[8..12].try_into().ok()?);
        let kind = i32::from_ne_bytes(hdr[12..16].try_into().ok()?);
        if len < CMSG_HDR {
            return None;
        }
        if level == SOL_PACKET && kind == PACKET_AUXDATA {
            // tp_status u32, tp_len u32, tp_snaplen u32, tp_mac u16,
            // tp_net u16, tp_vlan_tci u16, tp_vlan_tpid u16.
            let d = control.get(at + CMSG_HDR..at.checked_add(len)?)?;
            let status = u32_at(d, 0)?;
            if status & TP_STATUS_VLAN_VALID == 0 {
                return Some((status, None));
            }
            let tci = u16_at(d, 16)?;
            let tpid = u16_at(d, 18)?;
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                tpid
            } else {
                0x8100
            };
            return Some((status, Some((tpid, tci))));
        }
        // Next message: CMSG_ALIGN(len) to 8 bytes.
        at = at.checked_add(len.checked_add(7)? & !7)?;
    }
    None
}

/// What is known of a received frame's TCP/UDP checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Csum {
    /// Whole, or verified by the kernel (`TP_STATUS_CSUM_VALID`), or not
    /// known to be otherwise (a physical NIC's frames always are).
    Complete,
    /// Left to TX offload (`TP_STATUS_CSUMNOTREADY`): to be completed.
    Partial,
    /// Nothing says (AF_XDP on a veth or tap, whose peer may offload):
    /// completed if it looks partial (`sluice_wire::complete_if_partial`).
    Unknown,
}

/// What `tp_status` says of the frame's checksum.
pub fn csum_of(status: u32) -> Csum {
    if status & TP_STATUS_CSUMNOTREADY != 0 {
        Csum::Partial
    } else {
        Csum::Complete
    }
}

/// A received frame into `out` as it is to leave: the stripped VLAN tag
/// put back ([`copy_with_vlan`]) and a checksum left to offload completed
/// (`csum`). True when one was completed.
pub fn copy_frame(out: &mut Vec<u8>, data: &[u8], vlan: Option<(u16, u16)>, csum: Csum) -> bool {
    copy_with_vlan(out, data, vlan);
    match csum {
        Csum::Complete => false,
        Csum::Partial => sluice_wire::complete_l4_checksum(out),
        Csum::Unknown => sluice_wire::complete_if_partial(out),
    }
}

/// Copies `data` into `out`, re-inserting a VLAN tag the kernel stripped
/// after the two MAC addresses, so the frame leaves exactly as it came.
pub fn copy_with_vlan(out: &mut Vec<u8>, data: &[u8], vlan: Option<(u16, u16)>) {
    out.clear();
    match vlan {
        Some((tpid, tci)) if data.len() >= 12 => {
            out.extend_from_slice(&data[..12]);
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&tci.to_be_bytes());
            out.extend_from_slice(&data[12..]);
        }
        _ => out.extend_from_slice(data),
    }
}

/// Size of `struct tpacket2_hdr` (32 bytes, already TPACKET_ALIGNed); the
/// `struct sockaddr_ll` follows it.
pub const TPACKET2_HDRLEN: usize = 32;

/// Parses one TPACKET_V2 frame slot (`struct tpacket2_hdr`, then
/// `sockaddr_ll`, then the frame at `tp_mac`). Used for a slot whose status
/// says user space owns it; `None` for a header that points outside the
/// slot. A frame longer than the slot (`wire_len > data.len()`) is
/// truncated: the caller must not forward it as if whole.
pub fn parse_v2_frame(slot: &[u8]) -> Option<Frame<'_>> {
    let status = u32_at(slot, 0)?;
    let wire_len = u32_at(slot, 4)?;
    let snaplen = u32_at(slot, 8)? as usize;
    let mac = u16_at(slot, 12)? as usize;
    let vlan_tci = u16_at(slot, 24)?;
    let vlan_tpid = u16_at(slot, 26)?;
    let pkttype = *slot.get(TPACKET2_HDRLEN + 10)?;
    let data = slot.get(mac..mac.checked_add(snaplen)?)?;
    let vlan = if status & TP_STATUS_VLAN_VALID != 0 {
        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && vlan_tpid != 0 {
            vlan_tpid
        } else {
            0x8100
        };
        Some((tpid, vlan_tci))
    } else {
        None
    };
    Some(Frame {
        data,
        wire_len,
        status,
        vlan,
        pkttype,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn put16(b: &mut [u8], off: usize, v: u16) {
        b[off..off + 2].copy_from_slice(&v.to_ne_bytes());
    }

    fn v2_slot(data: &[u8], wire_len: u32, pkttype: u8, vlan: Option<(u16, u16)>) -> Vec<u8> {
        // Layout as the kernel writes it: header, sockaddr_ll, data at 66.
        let mac = 66usize;
        let mut s = vec![0u8; 2048];
        let mut status = TP_STATUS_USER;
        if let Some((tpid, tci)) = vlan {
            status |= TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
            put16(&mut s, 24, tci);
            put16(&mut s, 26, tpid);
        }
        put32(&mut s, 0, status);
        put32(&mut s, 4, wire_len);
        put32(&mut s, 8, data.len() as u32);
        put16(&mut s, 12, mac as u16);
        s[TPACKET2_HDRLEN + 10] = pkttype;
        s[mac..mac + data.len()].copy_from_slice(data);
        s
    }

    #[test]
    fn v2_slot_gives_frame_tag_and_pkttype() {
        let data: Vec<u8> = (0..60u8).collect();
        let s = v2_slot(&data, 60, PACKET_OUTGOING, Some((0x88a8, 42)));
        let f = parse_v2_frame(&s).expect("valid slot");
        assert_eq!(f.data, &data[..]);
        assert_eq!(f.wire_len, 60);
        assert_eq!(f.pkttype, PACKET_OUTGOING);
        assert_eq!(f.vlan, Some((0x88a8, 42)));
        let slot = v2_slot(&data, 60, 0, None);
        let plain = parse_v2_frame(&slot).expect("valid slot");
        assert_eq!(plain.vlan, None);
    }

    #[test]
    fn v2_truncated_frame_is_recognisable() {
        let data = [7u8; 100];
        let slot = v2_slot(&data, 9000, 0, None);
        let f = parse_v2_frame(&slot).expect("valid slot");
        assert!(f.wire_len as usize > f.data.len());
    }

    #[test]
    fn v2_bad_offsets_and_short_slots_yield_none() {
        let data = [1u8; 64];
        let mut s = v2_slot(&data, 64, 0, None);
        put16(&mut s, 12, 2040); // mac + snaplen beyond the slot
        assert_eq!(parse_v2_frame(&s), None);
        for len in 0..TPACKET2_HDRLEN + 11 {
            assert_eq!(parse_v2_frame(&s[..len]), None, "{len}-byte slot");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap deterministic scramble: every prefix of a pseudo-random slot.
        let mut x: u32 = 0x1234_5678;
        let mut b = vec![0u8; 512];
        for v in b.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *v = x as u8;
        }
        put32(&mut b, 0, TP_STATUS_USER);
        for len in 0..b.len() {
            if let Some(f) = parse_v2_frame(&b[..len]) {
                assert!(f.data.len() <= len, "{len}-byte slot");
            }
        }
    }

    fn cmsg(level: i32, kind: i32, payload: &[u8]) -> Vec<u8> {
        let len = 16 + payload.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(len as u64).to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 8 != 0 {
            v.push(0);
        }
        v
    }

    fn auxdata(status: u32, tci: u16, tpid: u16) -> Vec<u8> {
        let mut a = vec![0u8; 20];
        put32(&mut a, 0, status);
        put16(&mut a, 16, tci);
        put16(&mut a, 18, tpid);
        a
    }

    #[test]
    fn auxdata_gives_the_stripped_tag() {
        let st = 1 | TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
        let c = cmsg(SOL_PACKET, PACKET_AUXDATA, &auxdata(st, 100, 0x88a8));
        assert_eq!(auxdata_vlan(&c), Some((0x88a8, 100)));
        // Without TPID_VALID the TPID is 802.1Q.
        let c = cmsg(
            SOL_PACKET,
            PACKET_AUXDATA,
            &auxdata(1 | TP_STATUS_VLAN_VALID, 7, 0),
        );
        assert_eq!(auxdata_vlan(&c), Some((0x8100, 7)));
        // No tag.
        let c = cmsg(SOL_PACKET, PACKET_AUXDATA, &auxdata(1, 7, 0x8100));
        assert_eq!(auxdata_vlan(&c), None);
        // Found after another message.
        let mut c = cmsg(1, 2, &[9; 5]);
        c.extend(cmsg(SOL_PACKET, PACKET_AUXDATA, &auxdata(st, 5, 0x8100)));
        assert_eq!(auxdata_vlan(&c), Some((0x8100, 5)));
    }

    #[test]
    fn malformed_control_buffers_yield_none() {
        assert_eq!(auxdata_vlan(&[]), None);
        assert_eq!(auxdata_vlan(&[0u8; 15]), None);
        let st = 1 | TP_STATUS_VLAN_VALID;
        let mut c = cmsg(SOL_PACKET, PACKET_AUXDATA, &auxdata(st, 5, 0));
        c.truncate(30);
        assert_eq!(auxdata_vlan(&c), None, "truncated payload");
        let mut c = cmsg(SOL_PACKET, PACKET_AUXDATA, &auxdata(st, 5, 0));
        c[..8].copy_from_slice(&3u64.to_ne_bytes());
        assert_eq!(auxdata_vlan(&c), None, "length below the header");
        let mut c = cmsg(SOL_PACKET, PACKET_AUXDATA, &auxdata(st, 5, 0));
        c[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(auxdata_vlan(&c), None, "length beyond the buffer");
    }

    /// A TCP/IPv4 frame as a sender with TX checksum offload hands it
    /// over (the field holds the folded pseudo-header sum), and as it
    /// must leave.
    fn partial_tcp() -> (Vec<u8>, Vec<u8>) {
        let (src, dst) = ([10, 0, 0, 2], [192, 0, 2, 1]);
        let whole = sluice_wire::build::tcp(
            std::net::Ipv4Addr::from(src),
            std::net::Ipv4Addr::from(dst),
            40000,
            443,
            sluice_wire::tcp_flags::ACK,
            700,
        );
        let (l4, seg_len) = (14 + 20, whole.len() - 14 - 20);
        let mut p: u32 = [src, dst]
            .iter()
            .flat_map(|a| {
                [
                    u16::from_be_bytes([a[0], a[1]]),
                    u16::from_be_bytes([a[2], a[3]]),
                ]
            })
            .map(u32::from)
            .sum::<u32>()
            + 6
            + seg_len as u32;
        while p > 0xffff {
            p = (p & 0xffff) + (p >> 16);
        }
        let mut partial = whole.clone();
        partial[l4 + 16..l4 + 18].copy_from_slice(&(p as u16).to_be_bytes());
        (partial, whole)
    }

    #[test]
    fn a_frame_left_to_checksum_offload_is_completed_as_it_is_copied() {
        let (partial, whole) = partial_tcp();
        assert_ne!(partial, whole);
        // The ring: the status bit, with a stripped tag to put back first.
        let mut slot = v2_slot(&partial, partial.len() as u32, 0, Some((0x8100, 5)));
        let st = u32_at(&slot, 0).unwrap() | TP_STATUS_CSUMNOTREADY;
        put32(&mut slot, 0, st);
        let f = parse_v2_frame(&slot).expect("valid slot");
        assert_eq!(csum_of(f.status), Csum::Partial);
        let mut out = Vec::new();
        assert!(copy_frame(&mut out, f.data, f.vlan, csum_of(f.status)));
        assert_eq!(out, sluice_wire::build::vlan_wrap(&whole, 0x8100, 5));
        // recvmmsg: the same bit in PACKET_AUXDATA.
        let c = cmsg(
            SOL_PACKET,
            PACKET_AUXDATA,
            &auxdata(1 | TP_STATUS_CSUMNOTREADY, 0, 0),
        );
        let (status, vlan) = super::auxdata(&c).expect("auxdata");
        assert!(csum_of(status) == Csum::Partial && vlan.is_none());
        assert!(copy_frame(&mut out, &partial, vlan, csum_of(status)));
        assert_eq!(out, whole);
        // AF_XDP: recognised by its field.
        assert!(copy_frame(&mut out, &partial, None, Csum::Unknown));
        assert_eq!(out, whole);
        assert!(!copy_frame(&mut out, &whole, None, Csum::Unknown));
        assert_eq!(out, whole);
        // Verified (CSUM_VALID) or plain frames are copied untouched.
        assert_eq!(
            csum_of(TP_STATUS_USER | TP_STATUS_CSUM_VALID),
            Csum::Complete
        );
        assert!(!copy_frame(&mut out, &partial, None, Csum::Complete));
        assert_eq!(out, partial);
    }

    #[test]
    fn vlan_tag_is_reinserted_after_the_macs() {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00, 0x45]);
        let mut out = Vec::new();
        copy_with_vlan(&mut out, &frame, Some((0x88a8, 0x0064)));
        assert_eq!(out.len(), frame.len() + 4);
        assert_eq!(&out[12..16], &[0x88, 0xa8, 0x00, 0x64]);
        assert_eq!(&out[16..], &[0x08, 0x00, 0x45]);
        copy_with_vlan(&mut out, &frame, None);
        assert_eq!(out, frame);
        copy_with_vlan(&mut out, &[1, 2, 3], Some((0x8100, 1)));
        assert_eq!(out, vec![1, 2, 3], "too short for a tag: copied as is");
    }
}
