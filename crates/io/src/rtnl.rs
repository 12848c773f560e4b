//! rtnetlink messages (rtnetlink(7), netlink(7)): the walk over a
//! datagram, link descriptions and their attributes, and link requests.
//! Pure bytes, shared by the link watch (`link.rs`), the kernel bridge
//! (`kernel_bridge.rs`) and `--attach` (`attach/`, which also moves
//! addresses and routes: `ifaddrmsg`, `rtmsg`); unit-tested on hand-built
//! messages there and here.
//!
//! # Principles
//! - A walk never trusts a length: a message shorter than its header, or
//!   running past the datagram, ends it (no loop, no panic); so does an
//!   attribute shorter than its own header.
//! - Native byte order throughout (netlink's), lengths aligned to 4.

pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_REPLACE: u16 = 0x100;
pub(crate) const NLM_F_EXCL: u16 = 0x200;
pub(crate) const NLM_F_DUMP: u16 = 0x300;
pub(crate) const NLM_F_CREATE: u16 = 0x400;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;
pub(crate) const RTM_NEWLINK: u16 = 16;
pub(crate) const RTM_DELLINK: u16 = 17;
pub(crate) const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_NEWADDR: u16 = 20;
pub(crate) const RTM_DELADDR: u16 = 21;
pub(crate) const RTM_GETADDR: u16 = 22;
pub(crate) const RTM_NEWROUTE: u16 = 24;
pub(crate) const RTM_DELROUTE: u16 = 25;
pub(crate) const RTM_GETROUTE: u16 = 26;
pub(crate) const RTM_NEWNEIGH: u16 = 28;
pub(crate) const RTM_DELNEIGH: u16 = 29;
pub(crate) const RTM_GETNEIGH: u16 = 30;
pub(crate) const RTMGRP_LINK: u32 = 1;
pub(crate) const IFLA_ADDRESS: u16 = 1;
pub(crate) const IFLA_IFNAME: u16 = 3;
pub(crate) const IFLA_MTU: u16 = 4;
pub(crate) const IFLA_MASTER: u16 = 10;
pub(crate) const IFLA_LINKINFO: u16 = 18;
pub(crate) const IFLA_IFALIAS: u16 = 20;
pub(crate) const IFLA_INFO_KIND: u16 = 1;
pub(crate) const IFLA_INFO_DATA: u16 = 2;
/// veth's `IFLA_INFO_DATA`: the peer, an `ifinfomsg` and its attributes.
pub(crate) const VETH_INFO_PEER: u16 = 1;
const NLA_F_NESTED: u16 = 0x8000;
/// The attribute type without the NESTED and NET_BYTEORDER flags.
const NLA_TYPE_MASK: u16 = 0x3fff;
pub(crate) const NLMSG_HDR: usize = 16;
pub(crate) const IFINFOMSG: usize = 16;
pub(crate) const IFADDRMSG: usize = 8;
pub(crate) const RTMSG: usize = 12;
pub(crate) const NDMSG: usize = 12;
pub(crate) const IFF_UP: u32 = libc::IFF_UP as u32;
pub(crate) const IFF_RUNNING: u32 = libc::IFF_RUNNING as u32;
pub(crate) const IFF_NOARP: u32 = libc::IFF_NOARP as u32;
pub(crate) const IFF_PROMISC: u32 = libc::IFF_PROMISC as u32;

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
    pub mtu: u32,
    /// `IFLA_ADDRESS`: the hardware (MAC) address.
    pub mac: Vec<u8>,
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
            IFLA_MTU if data.len() >= 4 => {
                l.mtu = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]);
            }
            IFLA_ADDRESS => l.mac = data.to_vec(),
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
pub(crate) fn text(d: &[u8]) -> String {
    let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

/// One rtnetlink link request: header, `ifinfomsg`, attributes.
pub(crate) struct Req {
    buf: Vec<u8>,
}

impl Req {
    /// A request whose fixed header (`ifaddrmsg`, `rtmsg`, …) is `head`.
    pub(crate) fn with_head(kind: u16, flags: u16, head: &[u8]) -> Req {
        let mut buf = Vec::with_capacity(128);
        buf.extend(0u32.to_ne_bytes()); // length: `finish`
        buf.extend(kind.to_ne_bytes());
        buf.extend((flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        buf.extend(0u32.to_ne_bytes()); // sequence: `finish`
        buf.extend(0u32.to_ne_bytes()); // port id 0: to the kernel
        buf.extend_from_slice(head);
        buf.resize(align4(buf.len()), 0);
        Req { buf }
    }

    /// A link header and its attributes built in place (a veth's peer).
    pub(crate) fn ifinfo(&mut self, ifindex: i32) {
        self.buf.extend([libc::AF_UNSPEC as u8, 0]);
        self.buf.extend(0u16.to_ne_bytes());
        self.buf.extend(ifindex.to_ne_bytes());
        self.buf.extend([0u8; 8]);
    }

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

    /// The `ifinfomsg`'s flags: those in `change` set as in `set`.
    pub(crate) fn set_flags(&mut self, set: u32, change: u32) {
        let at = NLMSG_HDR + 8;
        self.buf[at..at + 4].copy_from_slice(&set.to_ne_bytes());
        self.buf[at + 4..at + 8].copy_from_slice(&change.to_ne_bytes());
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

pub(crate) const IFA_ADDRESS: u16 = 1;
pub(crate) const IFA_LOCAL: u16 = 2;
pub(crate) const IFA_LABEL: u16 = 3;
const IFA_BROADCAST: u16 = 4;
const IFA_ANYCAST: u16 = 5;
const IFA_CACHEINFO: u16 = 6;
const IFA_FLAGS: u16 = 8;
const IFA_RT_PRIORITY: u16 = 9;
const IFA_PROTO: u16 = 11;
pub(crate) const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
pub(crate) const RTA_OIF: u16 = 4;
pub(crate) const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
pub(crate) const RTA_MULTIPATH: u16 = 9;
const RTA_FLOW: u16 = 11;
pub(crate) const RTA_TABLE: u16 = 15;
const RTA_PREF: u16 = 20;
/// `rtm_protocol`: made by the kernel (an address's prefix route).
pub(crate) const RTPROT_KERNEL: u8 = 2;
pub(crate) const RT_TABLE_LOCAL: u32 = 255;
/// `rtm_flags` a request may carry (RTNH_F_ONLINK); the others
/// (DEAD, LINKDOWN, OFFLOAD, …) are the kernel's to report and it refuses
/// them in a request.
const RTM_FLAGS_REPLAYED: u32 = 4;
/// `RTM_F_CLONED`: a cached clone, not a configured route.
const RTM_F_CLONED: u32 = 0x200;

/// The attributes of an address a request may carry back: everything
/// that describes it, nothing that is the kernel's own bookkeeping.
const ADDR_REPLAYED: [u16; 9] = [
    IFA_ADDRESS,
    IFA_LOCAL,
    IFA_LABEL,
    IFA_BROADCAST,
    IFA_ANYCAST,
    IFA_CACHEINFO,
    IFA_FLAGS,
    IFA_RT_PRIORITY,
    IFA_PROTO,
];
/// Likewise for a route (`RTA_OIF` is rewritten, `RTA_MULTIPATH` kept
/// only to be refused, `RTA_CACHEINFO` and `RTA_EXPIRES` dropped).
const ROUTE_REPLAYED: [u16; 11] = [
    RTA_DST,
    RTA_SRC,
    RTA_OIF,
    RTA_GATEWAY,
    RTA_PRIORITY,
    RTA_PREFSRC,
    RTA_METRICS,
    RTA_MULTIPATH,
    RTA_FLOW,
    RTA_TABLE,
    RTA_PREF,
];

/// One address as rtnetlink describes it (`ifaddrmsg` and the attributes
/// a request may carry back), to be deleted or replayed on another link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr {
    pub family: u8,
    pub prefixlen: u8,
    pub flags: u8,
    pub scope: u8,
    pub ifindex: i32,
    pub attrs: Vec<(u16, Vec<u8>)>,
}

/// One route (`rtmsg` and its replayable attributes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub family: u8,
    pub dst_len: u8,
    pub src_len: u8,
    pub tos: u8,
    pub table: u8,
    pub protocol: u8,
    pub scope: u8,
    pub kind: u8,
    pub flags: u32,
    pub attrs: Vec<(u16, Vec<u8>)>,
}

fn attr_of(attrs: &[(u16, Vec<u8>)], kind: u16) -> Option<&[u8]> {
    attrs.iter().find(|(k, _)| *k == kind).map(|(_, d)| &d[..])
}

fn u32_of(d: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(d.get(..4)?.try_into().ok()?))
}

/// An address attribute as text (`10.0.1.1`, `fe80::1`).
pub(crate) fn ip_text(family: u8, d: &[u8]) -> String {
    match (family as i32, d.len()) {
        (libc::AF_INET, 4) => std::net::Ipv4Addr::new(d[0], d[1], d[2], d[3]).to_string(),
        (libc::AF_INET6, 16) => {
            let b: [u8; 16] = d.try_into().unwrap_or([0; 16]);
            std::net::Ipv6Addr::from(b).to_string()
        }
        _ => format!("{d:02x?}"),
    }
}

fn keep(buf: &[u8], wanted: &[u16]) -> Vec<(u16, Vec<u8>)> {
    attrs(buf)
        .filter(|(k, _)| wanted.contains(k))
        .map(|(k, d)| (k, d.to_vec()))
        .collect()
}

/// An `ifaddrmsg` and its attributes.
pub(crate) fn parse_addr(body: &[u8]) -> Option<Addr> {
    let m = body.get(..IFADDRMSG)?;
    Some(Addr {
        family: m[0],
        prefixlen: m[1],
        flags: m[2],
        scope: m[3],
        ifindex: i32::from_ne_bytes([m[4], m[5], m[6], m[7]]),
        attrs: keep(&body[IFADDRMSG..], &ADDR_REPLAYED),
    })
}

/// An `rtmsg` and its attributes; a cached clone is none.
pub(crate) fn parse_route(body: &[u8]) -> Option<Route> {
    let m = body.get(..RTMSG)?;
    let flags = u32::from_ne_bytes([m[8], m[9], m[10], m[11]]);
    if flags & RTM_F_CLONED != 0 {
        return None;
    }
    Some(Route {
        family: m[0],
        dst_len: m[1],
        src_len: m[2],
        tos: m[3],
        table: m[4],
        protocol: m[5],
        scope: m[6],
        kind: m[7],
        flags,
        attrs: keep(&body[RTMSG..], &ROUTE_REPLAYED),
    })
}

impl Addr {
    /// `IFA_LOCAL` (IPv4's own address), else `IFA_ADDRESS`, as text with
    /// its prefix length.
    pub fn describe(&self) -> String {
        let a = attr_of(&self.attrs, IFA_LOCAL).or_else(|| attr_of(&self.attrs, IFA_ADDRESS));
        let a = a.map_or_else(|| "?".into(), |d| ip_text(self.family, d));
        format!("{a}/{}", self.prefixlen)
    }

    /// The request that adds (`RTM_NEWADDR`, replacing an equal one) or
    /// deletes it on `ifindex`.
    pub(crate) fn request(&self, kind: u16, ifindex: i32) -> Req {
        let flags = if kind == RTM_NEWADDR {
            NLM_F_CREATE | NLM_F_REPLACE
        } else {
            0
        };
        let mut head = vec![self.family, self.prefixlen, self.flags, self.scope];
        head.extend(ifindex.to_ne_bytes());
        let mut r = Req::with_head(kind, flags, &head);
        for (k, d) in &self.attrs {
            r.attr(*k, d);
        }
        r
    }
}

impl Route {
    /// The routing table, `RTA_TABLE` first (tables above 255).
    pub fn table(&self) -> u32 {
        attr_of(&self.attrs, RTA_TABLE)
            .and_then(u32_of)
            .unwrap_or(self.table as u32)
    }

    pub fn oif(&self) -> Option<i32> {
        attr_of(&self.attrs, RTA_OIF)
            .and_then(u32_of)
            .map(|i| i as i32)
    }

    /// The interfaces of a multipath route's next hops (`rtnexthop`s:
    /// length u16, flags u8, hops u8, ifindex i32, then attributes).
    pub fn multipath_ifindexes(&self) -> Vec<i32> {
        let Some(mut b) = attr_of(&self.attrs, RTA_MULTIPATH) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while b.len() >= 8 {
            let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
            out.push(i32::from_ne_bytes([b[4], b[5], b[6], b[7]]));
            if len < 8 || align4(len) > b.len() {
                break;
            }
            b = &b[align4(len)..];
        }
        out
    }

    /// Made by the kernel with an address or a link (local table, prefix
    /// routes): it comes back by itself and is never replayed.
    pub fn is_kernels(&self) -> bool {
        self.protocol == RTPROT_KERNEL || self.table() == RT_TABLE_LOCAL
    }

    /// `10.0.9.0/24 via 10.0.1.2 table 100`, as `ip route` would say.
    pub fn describe(&self) -> String {
        let dst = match attr_of(&self.attrs, RTA_DST) {
            Some(d) => format!("{}/{}", ip_text(self.family, d), self.dst_len),
            None => "default".into(),
        };
        let via = attr_of(&self.attrs, RTA_GATEWAY)
            .map(|g| format!(" via {}", ip_text(self.family, g)))
            .unwrap_or_default();
        let table = match self.table() {
            254 => String::new(),
            t => format!(" table {t}"),
        };
        format!("{dst}{via}{table}")
    }

    /// The request that adds (`RTM_NEWROUTE`, replacing an equal one) or
    /// deletes it with `ifindex` as its output interface.
    pub(crate) fn request(&self, kind: u16, ifindex: i32) -> Req {
        let flags = if kind == RTM_NEWROUTE {
            NLM_F_CREATE | NLM_F_REPLACE
        } else {
            0
        };
        let mut head = vec![
            self.family,
            self.dst_len,
            self.src_len,
            self.tos,
            self.table,
            self.protocol,
            self.scope,
            self.kind,
        ];
        head.extend((self.flags & RTM_FLAGS_REPLAYED).to_ne_bytes());
        let mut r = Req::with_head(kind, flags, &head);
        for (k, d) in &self.attrs {
            match *k {
                RTA_OIF => r.u32_attr(RTA_OIF, ifindex as u32),
                RTA_MULTIPATH => {}
                _ => r.attr(*k, d),
            }
        }
        r
    }
}

const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `ndm_state`: an entry the administrator made, never expiring.
pub(crate) const NUD_PERMANENT: u16 = 0x80;

/// A neighbour entry (`ndmsg`, its address and link-layer address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neigh {
    pub family: u8,
    pub ifindex: i32,
    pub state: u16,
    pub flags: u8,
    pub kind: u8,
    pub attrs: Vec<(u16, Vec<u8>)>,
}

/// An `ndmsg` and its attributes.
pub(crate) fn parse_neigh(body: &[u8]) -> Option<Neigh> {
    let m = body.get(..NDMSG)?;
    Some(Neigh {
        family: m[0],
        ifindex: i32::from_ne_bytes([m[4], m[5], m[6], m[7]]),
        state: u16::from_ne_bytes([m[8], m[9]]),
        flags: m[10],
        kind: m[11],
        attrs: keep(&body[NDMSG..], &[NDA_DST, NDA_LLADDR]),
    })
}

impl Neigh {
    /// `10.0.1.9 lladdr 02:00:00:00:00:09`, as `ip neigh` would say.
    pub fn describe(&self) -> String {
        let dst =
            attr_of(&self.attrs, NDA_DST).map_or_else(|| "?".into(), |d| ip_text(self.family, d));
        let ll = attr_of(&self.attrs, NDA_LLADDR)
            .map(|l| {
                let hex: Vec<String> = l.iter().map(|b| format!("{b:02x}")).collect();
                format!(" lladdr {}", hex.join(":"))
            })
            .unwrap_or_default();
        format!("{dst}{ll}")
    }

    /// The request that adds (replacing an equal one) or deletes it on
    /// `ifindex`.
    pub(crate) fn request(&self, kind: u16, ifindex: i32) -> Req {
        let flags = if kind == RTM_NEWNEIGH {
            NLM_F_CREATE | NLM_F_REPLACE
        } else {
            0
        };
        let mut head = vec![self.family, 0, 0, 0];
        head.extend(ifindex.to_ne_bytes());
        head.extend(self.state.to_ne_bytes());
        head.extend([self.flags, self.kind]);
        let mut r = Req::with_head(kind, flags, &head);
        for (k, d) in &self.attrs {
            r.attr(*k, d);
        }
        r
    }
}

/// A dump request: every address (`RTM_GETADDR`), route
/// (`RTM_GETROUTE`, all tables) or neighbour (`RTM_GETNEIGH`) of `family`
/// (`AF_UNSPEC`: all).
pub(crate) fn dump_request(kind: u16, family: u8) -> Req {
    let head_len = if kind == RTM_GETROUTE {
        RTMSG
    } else {
        IFADDRMSG
    };
    let mut head = vec![0u8; head_len];
    head[0] = family;
    Req::with_head(kind, NLM_F_DUMP, &head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: &mut Req) -> Vec<u8> {
        r.finish(1)[NLMSG_HDR..].to_vec()
    }

    fn v4_addr() -> Addr {
        Addr {
            family: libc::AF_INET as u8,
            prefixlen: 24,
            flags: 0x80,
            scope: 0,
            ifindex: 7,
            attrs: vec![
                (IFA_ADDRESS, vec![10, 0, 1, 1]),
                (IFA_LOCAL, vec![10, 0, 1, 1]),
                (IFA_LABEL, b"lan0\0".to_vec()),
            ],
        }
    }

    #[test]
    fn an_address_replays_on_another_link_unchanged_but_for_its_index() {
        let a = v4_addr();
        let b = body(&mut a.request(RTM_NEWADDR, 12));
        let back = parse_addr(&b).expect("parses");
        assert_eq!(back.ifindex, 12);
        assert_eq!(Addr { ifindex: 7, ..back }, a);
        assert_eq!(a.describe(), "10.0.1.1/24");
    }

    #[test]
    fn an_address_dump_keeps_only_what_a_request_may_carry() {
        let mut head = vec![libc::AF_INET6 as u8, 64, 0, 0];
        head.extend(3i32.to_ne_bytes());
        let mut r = Req::with_head(RTM_NEWADDR, 0, &head);
        r.attr(
            IFA_ADDRESS,
            &[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        );
        r.attr(7, &[1, 2, 3, 4]); // IFA_MULTICAST: not replayed
        let a = parse_addr(&body(&mut r)).unwrap();
        assert_eq!(a.attrs.len(), 1);
        assert_eq!(a.describe(), "fe80::1/64");
    }

    fn route(oif: i32, table: u32, protocol: u8) -> Route {
        Route {
            family: libc::AF_INET as u8,
            dst_len: 24,
            src_len: 0,
            tos: 0,
            table: table.min(252) as u8,
            protocol,
            scope: 0,
            kind: 1,
            flags: 0,
            attrs: vec![
                (RTA_TABLE, table.to_ne_bytes().to_vec()),
                (RTA_DST, vec![10, 0, 9, 0]),
                (RTA_GATEWAY, vec![10, 0, 1, 2]),
                (RTA_OIF, (oif as u32).to_ne_bytes().to_vec()),
            ],
        }
    }

    #[test]
    fn a_route_replays_with_its_output_interface_rewritten() {
        let mut r = route(7, 100, 4);
        r.flags = 0x10 | 4; // LINKDOWN (the kernel's) | ONLINK
        let back = parse_route(&body(&mut r.request(RTM_NEWROUTE, 12))).unwrap();
        assert_eq!(back.oif(), Some(12));
        assert_eq!(back.flags, 4, "only ONLINK goes back to the kernel");
        assert_eq!(back.table(), 100);
        assert_eq!(r.describe(), "10.0.9.0/24 via 10.0.1.2 table 100");
        assert!(!r.is_kernels());
        assert!(route(7, 254, RTPROT_KERNEL).is_kernels());
        assert!(route(7, 255, 4).is_kernels());
    }

    #[test]
    fn cached_clones_are_not_routes_and_multipath_hops_are_read() {
        let mut r = route(7, 254, 4);
        r.flags = RTM_F_CLONED;
        let mut b = body(&mut r.request(RTM_NEWROUTE, 7));
        b[8..12].copy_from_slice(&RTM_F_CLONED.to_ne_bytes());
        assert_eq!(parse_route(&b), None);
        let mut hops = Vec::new();
        for i in [3i32, 9] {
            hops.extend(8u16.to_ne_bytes());
            hops.extend([0, 0]);
            hops.extend(i.to_ne_bytes());
        }
        let mut r = route(7, 254, 4);
        r.attrs.push((RTA_MULTIPATH, hops));
        assert_eq!(r.multipath_ifindexes(), vec![3, 9]);
        // A hop claiming a length past the attribute ends the walk.
        r.attrs.last_mut().unwrap().1[8..10].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(r.multipath_ifindexes(), vec![3, 9]);
    }

    #[test]
    fn a_neighbour_replays_on_another_link() {
        let n = Neigh {
            family: libc::AF_INET as u8,
            ifindex: 7,
            state: NUD_PERMANENT,
            flags: 0,
            kind: 0,
            attrs: vec![
                (NDA_DST, vec![10, 0, 1, 9]),
                (NDA_LLADDR, vec![2, 0, 0, 0, 0, 9]),
            ],
        };
        let back = parse_neigh(&body(&mut n.request(RTM_NEWNEIGH, 12))).unwrap();
        assert_eq!(
            Neigh {
                ifindex: 7,
                ..back.clone()
            },
            n
        );
        assert_eq!(back.ifindex, 12);
        assert_eq!(n.describe(), "10.0.1.9 lladdr 02:00:00:00:00:09");
    }

    #[test]
    fn a_veth_peer_nests_a_link_header() {
        let mut r = Req::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, None);
        r.str_attr(IFLA_IFNAME, "lan0");
        r.nest(IFLA_LINKINFO, |r| {
            r.str_attr(IFLA_INFO_KIND, "veth");
            r.nest(IFLA_INFO_DATA, |r| {
                r.nest(VETH_INFO_PEER, |r| {
                    r.ifinfo(0);
                    r.str_attr(IFLA_IFNAME, "slv7");
                })
            });
        });
        let b = r.finish(1);
        let info = attrs(&b[NLMSG_HDR + IFINFOMSG..])
            .find(|(k, _)| *k == IFLA_LINKINFO)
            .unwrap()
            .1;
        let data = attrs(info).find(|(k, _)| *k == IFLA_INFO_DATA).unwrap().1;
        let peer = attrs(data).next().unwrap();
        assert_eq!(peer.0, VETH_INFO_PEER);
        let l = parse_link(peer.1).unwrap();
        assert_eq!(l.name, "slv7");
    }
}
