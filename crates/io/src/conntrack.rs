//! The kernel's connection tracking, asked over netlink
//! (NETLINK_NETFILTER, `IPCTNL_MSG_CT_GET`; libnetfilter_conntrack's
//! messages, nfnetlink_conntrack.h): the original (pre-NAT) source of a
//! connection the router masquerades, for NAT-aware host isolation
//! (CAKE's `nat`, tc-cake(8)).
//!
//! # Principles
//! - Asked by the connection's **reply** tuple, which is what sluice sees
//!   on the WAN side of a masquerading router: from the server to the
//!   router's own address and port. The answer's **original** tuple's
//!   source is the LAN host.
//! - Off the packet path: one blocking request per new connection, from a
//!   thread of the daemon's, never from the data plane's loop.
//! - No conntrack (module not loaded, no entry, no permission) is an
//!   answer, not an error: the caller falls back to post-NAT addresses.
//! - Message building and parsing are pure and unit-tested; attributes
//!   carry ports in network byte order, addresses as on the wire.

use crate::rtnl::{self, Req, NLMSG_DONE, NLMSG_ERROR};
use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::time::Duration;

/// `NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_GET`.
const CT_GET: u16 = (1 << 8) | 1;
/// `IPCTNL_MSG_CT_NEW`: an entry in an answer.
const CT_NEW: u16 = 1 << 8;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;
/// `nfgenmsg`: family, version, resource id.
const NFGENMSG: usize = 4;
const ANSWER_WAIT: Duration = Duration::from_millis(500);

/// One direction of a connection: protocol, source and destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tuple {
    pub proto: u8,
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
}

fn family(a: IpAddr) -> u8 {
    match a {
        IpAddr::V4(_) => libc::AF_INET as u8,
        IpAddr::V6(_) => libc::AF_INET6 as u8,
    }
}

fn addr_attrs(r: &mut Req, src: IpAddr, dst: IpAddr) {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            r.attr(CTA_IP_V4_SRC, &s.octets());
            r.attr(CTA_IP_V4_DST, &d.octets());
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(a) => a.octets(),
                IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            };
            r.attr(CTA_IP_V6_SRC, &v6(s));
            r.attr(CTA_IP_V6_DST, &v6(d));
        }
    }
}

/// The request for the entry whose reply tuple is `reply`.
fn request(reply: &Tuple) -> Req {
    let mut r = Req::with_head(CT_GET, 0, &[family(reply.src), 0, 0, 0]);
    r.nest(CTA_TUPLE_REPLY, |r| {
        r.nest(CTA_TUPLE_IP, |r| addr_attrs(r, reply.src, reply.dst));
        r.nest(CTA_TUPLE_PROTO, |r| {
            r.attr(CTA_PROTO_NUM, &[reply.proto]);
            r.attr(CTA_PROTO_SRC_PORT, &reply.sport.to_be_bytes());
            r.attr(CTA_PROTO_DST_PORT, &reply.dport.to_be_bytes());
        });
    });
    r
}

fn ip_of(d: &[u8]) -> Option<IpAddr> {
    match d.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(d).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(d).ok()?)),
        _ => None,
    }
}

/// The original tuple's source in a `CT_NEW` body.
fn original_source(body: &[u8]) -> Option<IpAddr> {
    let (_, orig) = rtnl::attrs(body.get(NFGENMSG..)?).find(|(k, _)| *k == CTA_TUPLE_ORIG)?;
    let (_, ip) = rtnl::attrs(orig).find(|(k, _)| *k == CTA_TUPLE_IP)?;
    rtnl::attrs(ip)
        .find(|(k, _)| *k == CTA_IP_V4_SRC || *k == CTA_IP_V6_SRC)
        .and_then(|(_, d)| ip_of(d))
}

/// A NETLINK_NETFILTER socket for conntrack questions.
pub struct Conntrack {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Conntrack {
    pub fn open() -> io::Result<Conntrack> {
        Ok(Conntrack {
            fd: crate::sys::netlink_requests(Some(rustix::net::netlink::NETFILTER), ANSWER_WAIT)?,
            seq: 0,
            buf: vec![0; 16 << 10],
        })
    }

    /// The original source of the connection whose reply tuple is
    /// `reply`: `Ok(None)` when conntrack has no such entry.
    pub fn original_source(&mut self, reply: &Tuple) -> io::Result<Option<IpAddr>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        crate::sys::send(&self.fd, &request(reply).finish(seq))?;
        let mut found = None;
        for _ in 0..8 {
            let n = crate::sys::recv_wait(&self.fd, &mut self.buf)?;
            for m in rtnl::messages(&self.buf[..n]).filter(|m| m.seq == seq) {
                match m.kind {
                    CT_NEW => found = original_source(m.body),
                    NLMSG_DONE => return Ok(found),
                    NLMSG_ERROR => {
                        let e = m
                            .body
                            .get(..4)
                            .map_or(0, |e| i32::from_ne_bytes([e[0], e[1], e[2], e[3]]));
                        return match -e {
                            0 => Ok(found),
                            libc::ENOENT => Ok(None),
                            e => Err(io::Error::from_raw_os_error(e)),
                        };
                    }
                    _ => {}
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtnl::NLMSG_HDR;

    fn reply() -> Tuple {
        Tuple {
            proto: 6,
            src: "10.81.3.2".parse().unwrap(),
            sport: 5201,
            dst: "10.81.2.1".parse().unwrap(),
            dport: 40000,
        }
    }

    #[test]
    fn a_request_asks_by_the_reply_tuple_ports_in_network_order() {
        let b = request(&reply()).finish(3);
        assert_eq!(u16::from_ne_bytes([b[4], b[5]]), CT_GET);
        assert_eq!(b[NLMSG_HDR], libc::AF_INET as u8);
        let (k, t) = rtnl::attrs(&b[NLMSG_HDR + NFGENMSG..]).next().unwrap();
        assert_eq!(k, CTA_TUPLE_REPLY);
        let parts: Vec<_> = rtnl::attrs(t).collect();
        let ip: Vec<_> = rtnl::attrs(parts[0].1).collect();
        assert_eq!(
            ip,
            vec![
                (CTA_IP_V4_SRC, &[10, 81, 3, 2][..]),
                (CTA_IP_V4_DST, &[10, 81, 2, 1][..])
            ]
        );
        let proto: Vec<_> = rtnl::attrs(parts[1].1).collect();
        assert_eq!(proto[0], (CTA_PROTO_NUM, &[6u8][..]));
        assert_eq!(proto[1], (CTA_PROTO_SRC_PORT, &5201u16.to_be_bytes()[..]));
        assert_eq!(proto[2], (CTA_PROTO_DST_PORT, &40000u16.to_be_bytes()[..]));
    }

    #[test]
    fn the_original_source_is_read_from_an_entry() {
        // An entry as the kernel writes it: the original tuple first.
        let mut r = Req::with_head(CT_NEW, 0, &[libc::AF_INET as u8, 0, 0, 0]);
        r.nest(CTA_TUPLE_ORIG, |r| {
            r.nest(CTA_TUPLE_IP, |r| {
                addr_attrs(
                    r,
                    "10.81.1.11".parse().unwrap(),
                    "10.81.3.2".parse().unwrap(),
                )
            })
        });
        r.nest(CTA_TUPLE_REPLY, |r| {
            r.nest(CTA_TUPLE_IP, |r| {
                addr_attrs(
                    r,
                    "10.81.3.2".parse().unwrap(),
                    "10.81.2.1".parse().unwrap(),
                )
            })
        });
        let b = r.finish(1);
        assert_eq!(
            original_source(&b[NLMSG_HDR..]),
            Some("10.81.1.11".parse().unwrap())
        );
        assert_eq!(
            original_source(&b[NLMSG_HDR..NLMSG_HDR + 2]),
            None,
            "truncated"
        );
    }
}
