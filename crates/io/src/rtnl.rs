//! rtnetlink messages (rtnetlink(7), netlink(7)): the walk over a
//! datagram, link descriptions and their attributes, and link requests.
//! Pure bytes, shared by the link watch (`link.rs`) and the kernel bridge
//! (`kernel_bridge.rs`); unit-tested on hand-built messages there and here.
//!
//! # Principles
//! - A walk never trusts a length: a message shorter than its header, or
//!   running past the datagram, ends it (no loop, no panic); so does an
//!   attribute shorter than its own header.
//! - Native byte order throughout (netlink's), lengths aligned to 4.

pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_EXCL: u16 = 0x200;
pub(crate) const NLM_F_CREATE: u16 = 0x400;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const RTM_NEWLINK: u16 = 16;
pub(crate) const RTM_DELLINK: u16 = 17;
pub(crate) const RTM_GETLINK: u16 = 18;
pub(crate) const RTMGRP_LINK: u32 = 1;
pub(crate) const IFLA_IFNAME: u16 = 3;
pub(crate) const IFLA_MASTER: u16 = 10;
pub(crate) const IFLA_LINKINFO: u16 = 18;
pub(crate) const IFLA_IFALIAS: u16 = 20;
pub(crate) const IFLA_INFO_KIND: u16 = 1;
const NLA_F_NESTED: u16 = 0x8000;
/// The attribute type without the NESTED and NET_BYTEORDER flags.
const NLA_TYPE_MASK: u16 = 0x3fff;
pub(crate) const NLMSG_HDR: usize = 16;
pub(crate) const IFINFOMSG: usize = 16;
pub(crate) const IFF_UP: u32 = libc::IFF_UP as u32;
pub(crate) const IFF_RUNNING: u32 = libc::IFF_RUNNING as u32;

pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One message of a datagram: its type, sequence number and body.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Msg<'a> {
    pub kind: u16,
    pub seq: u32,
    pub body: &'a [u8],
}

/// The messages in one netlink datagram; a truncated tail or a bogus
/// length ends the walk.
pub(crate) fn messages(buf: &[u8]) -> impl Iterator<Item = Msg<'_>> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let h = buf.get(at..at + NLMSG_HDR)?;
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        if len < NLMSG_HDR || at + len > buf.len() {
            return None;
        }
        let m = Msg {
            kind: u16::from_ne_bytes([h[4], h[5]]),
            seq: u32::from_ne_bytes([h[8], h[9], h[10], h[11]]),
            body: &buf[at + NLMSG_HDR..at + len],
        };
        // Each message is at least a header long, so the walk ends.
        at += align4(len);
        Some(m)
    })
}

/// What rtnetlink says about one link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    pub ifindex: i32,
    pub flags: u32,
    pub name: String,
    /// The ifindex of its master (a bridge, a bond), if it has one.
    pub master: Option<i32>,
    /// `IFLA_INFO_KIND`: `bridge`, `veth`, … (none for a physical NIC).
    pub kind: Option<String>,
    pub alias: Option<String>,
}

/// An `ifinfomsg` and its attributes.
pub(crate) fn parse_link(body: &[u8]) -> Option<LinkInfo> {
    let m = body.get(..IFINFOMSG)?;
    let mut l = LinkInfo {
        ifindex: i32::from_ne_bytes([m[4], m[5], m[6], m[7]]),
        flags: u32::from_ne_bytes([m[8], m[9], m[10], m[11]]),
        ..LinkInfo::default()
    };
    for (kind, data) in attrs(&body[IFINFOMSG..]) {
        match kind {
            IFLA_IFNAME => l.name = text(data),
            IFLA_MASTER if data.len() >= 4 => {
                let m = i32::from_ne_bytes([data[0], data[1], data[2], data[3]]);
                l.master = (m != 0).then_some(m);
            }
            IFLA_IFALIAS => l.alias = Some(text(data)).filter(|a| !a.is_empty()),
            IFLA_LINKINFO => {
                l.kind = attrs(data)
                    .find(|(k, _)| *k == IFLA_INFO_KIND)
                    .map(|(_, d)| text(d));
            }
            _ => {}
        }
    }
    Some(l)
}

/// The attributes in `buf` as (type without flags, payload).
pub(crate) fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let h = buf.get(at..at + 4)?;
        let len = u16::from_ne_bytes([h[0], h[1]]) as usize;
        let kind = u16::from_ne_bytes([h[2], h[3]]) & NLA_TYPE_MASK;
        // A length below the header's ends the walk (no progress otherwise).
        if len < 4 {
            return None;
        }
        let data = buf.get(at + 4..at + len)?;
        at += align4(len);
        Some((kind, data))
    })
}

/// A string attribute: up to its first NUL.
fn text(d: &[u8]) -> String {
    let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

/// One rtnetlink link request: header, `ifinfomsg`, attributes.
pub(crate) struct Req {
    buf: Vec<u8>,
}

impl Req {
    /// `up`: set (`Some(true)`) or clear `IFF_UP`, or leave the flags alone.
    pub(crate) fn new(kind: u16, flags: u16, ifindex: i32, up: Option<bool>) -> Req {
        let mut buf = Vec::with_capacity(128);
        buf.extend(0u32.to_ne_bytes()); // length: `finish`
        buf.extend(kind.to_ne_bytes());
        buf.extend((flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        buf.extend(0u32.to_ne_bytes()); // sequence: `finish`
        buf.extend(0u32.to_ne_bytes()); // port id 0: to the kernel
        buf.extend([libc::AF_UNSPEC as u8, 0]);
        buf.extend(0u16.to_ne_bytes()); // ARPHRD type: any
        buf.extend(ifindex.to_ne_bytes());
        let (set, change) = match up {
            Some(true) => (IFF_UP, IFF_UP),
            Some(false) => (0, IFF_UP),
            None => (0, 0),
        };
        buf.extend(set.to_ne_bytes());
        buf.extend(change.to_ne_bytes());
        Req { buf }
    }

    pub(crate) fn attr(&mut self, kind: u16, data: &[u8]) {
        self.buf.extend(((4 + data.len()) as u16).to_ne_bytes());
        self.buf.extend(kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    pub(crate) fn u32_attr(&mut self, kind: u16, v: u32) {
        self.attr(kind, &v.to_ne_bytes());
    }

    /// A NUL-terminated string attribute.
    pub(crate) fn str_attr(&mut self, kind: u16, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(kind, &v);
    }

    pub(crate) fn nest(&mut self, kind: u16, inner: impl FnOnce(&mut Req)) {
        let at = self.buf.len();
        self.buf.extend([0u8; 4]);
        inner(self);
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        self.buf[at + 2..at + 4].copy_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    }

    pub(crate) fn finish(&mut self, seq: u32) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.buf.clone()
    }
}
