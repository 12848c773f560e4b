//! Carrying a plan out: the snapshot of IF read from the kernel, each
//! operation sent as an rtnetlink request (or a sysctl write), and the
//! acknowledgement waited for.
//!
//! # Principles
//! - Every request asks for an acknowledgement and waits for it (at most
//!   `ANSWER_WAIT`); a failure names the operation, in words.
//! - Idempotent where a restoration may meet its own work: adding an
//!   address or a route replaces an equal one, deleting one that is gone
//!   (or a veth that is gone) succeeds. A link named IF that is not a veth
//!   is never deleted.

use super::plan::{Dev, Op, Snapshot};
use crate::rtnl::{
    self, parse_addr, parse_link, parse_neigh, parse_route, Addr, LinkInfo, Neigh, Req, Route,
    IFF_NOARP, IFF_PROMISC, IFLA_ADDRESS, IFLA_IFNAME, IFLA_INFO_DATA, IFLA_INFO_KIND,
    IFLA_LINKINFO, IFLA_MASTER, IFLA_MTU, NLMSG_DONE, NLMSG_ERROR, NLM_F_CREATE, NLM_F_EXCL,
    NUD_PERMANENT, RTM_DELADDR, RTM_DELLINK, RTM_DELNEIGH, RTM_DELROUTE, RTM_GETADDR, RTM_GETLINK,
    RTM_GETNEIGH, RTM_GETROUTE, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWNEIGH, RTM_NEWROUTE,
    VETH_INFO_PEER,
};
use crate::{sockopt, sys};
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// Datagrams one dump may take (a full routing table is a few hundred).
const DUMP_DATAGRAMS: usize = 1 << 16;

/// A request/answer rtnetlink socket that also dumps.
pub struct Nl {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Nl {
    pub fn open() -> io::Result<Nl> {
        Ok(Nl {
            fd: sys::netlink_route_requests(ANSWER_WAIT)?,
            seq: 0,
            buf: vec![0; 64 << 10],
        })
    }

    /// Sends `req`; the bodies of the messages answering it (of type
    /// `kind`), up to its acknowledgement or the end of the dump.
    fn exchange(&mut self, mut req: Req, kind: u16) -> io::Result<Vec<Vec<u8>>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        sys::send(&self.fd, &req.finish(seq))?;
        let mut out = Vec::new();
        for _ in 0..DUMP_DATAGRAMS {
            let n = sys::recv_wait(&self.fd, &mut self.buf)?;
            for m in rtnl::messages(&self.buf[..n]).filter(|m| m.seq == seq) {
                match m.kind {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => {
                        let e = m
                            .body
                            .get(..4)
                            .map_or(0, |e| i32::from_ne_bytes([e[0], e[1], e[2], e[3]]));
                        return match e {
                            0 => Ok(out),
                            e => Err(io::Error::from_raw_os_error(-e)),
                        };
                    }
                    k if k == kind => out.push(m.body.to_vec()),
                    _ => {}
                }
            }
        }
        Err(io::Error::other("no end to the kernel's answer"))
    }

    fn call(&mut self, req: Req) -> io::Result<()> {
        self.exchange(req, 0).map(drop)
    }

    pub fn link(&mut self, ifindex: i32) -> io::Result<LinkInfo> {
        let mut v = self.exchange(Req::new(RTM_GETLINK, 0, ifindex, None), RTM_NEWLINK)?;
        v.pop()
            .and_then(|b| parse_link(&b))
            .ok_or_else(|| io::Error::other(format!("no description of link #{ifindex}")))
    }

    /// The link called `name`, if there is one.
    pub fn find_named(&mut self, name: &str) -> io::Result<Option<LinkInfo>> {
        let idx = match sockopt::ifindex(name) {
            Ok(i) => i,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match self.link(idx) {
            Ok(l) => Ok(Some(l)),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn addrs(&mut self) -> io::Result<Vec<Addr>> {
        let v = self.exchange(rtnl::dump_request(RTM_GETADDR, 0), RTM_NEWADDR)?;
        Ok(v.iter().filter_map(|b| parse_addr(b)).collect())
    }

    pub fn neighs(&mut self) -> io::Result<Vec<Neigh>> {
        let v = self.exchange(rtnl::dump_request(RTM_GETNEIGH, 0), RTM_NEWNEIGH)?;
        Ok(v.iter().filter_map(|b| parse_neigh(b)).collect())
    }

    pub fn routes(&mut self) -> io::Result<Vec<Route>> {
        let v = self.exchange(rtnl::dump_request(RTM_GETROUTE, 0), RTM_NEWROUTE)?;
        Ok(v.iter().filter_map(|b| parse_route(b)).collect())
    }

    /// Carries `op` out.
    pub fn apply(&mut self, op: &Op) -> io::Result<()> {
        let gone =
            |e: &io::Error, codes: &[i32]| e.raw_os_error().is_some_and(|c| codes.contains(&c));
        match op {
            Op::SetUp { dev, up } => {
                let i = index(dev)?;
                self.call(Req::new(RTM_NEWLINK, 0, i, Some(*up)))
            }
            Op::SetMaster { dev, master } => {
                let mut r = Req::new(RTM_NEWLINK, 0, index(dev)?, None);
                r.u32_attr(IFLA_MASTER, master.unwrap_or(0) as u32);
                self.call(r)
            }
            Op::Rename { dev, to } => {
                let mut r = Req::new(RTM_NEWLINK, 0, index(dev)?, None);
                r.str_attr(IFLA_IFNAME, to);
                self.call(r)
            }
            Op::SetMac { dev, mac } => {
                let mut r = Req::new(RTM_NEWLINK, 0, index(dev)?, None);
                r.attr(IFLA_ADDRESS, mac);
                self.call(r)
            }
            Op::SetFlags {
                dev,
                promisc,
                noarp,
            } => {
                let mut r = Req::new(RTM_NEWLINK, 0, index(dev)?, None);
                let set =
                    if *promisc { IFF_PROMISC } else { 0 } | if *noarp { IFF_NOARP } else { 0 };
                r.set_flags(set, IFF_PROMISC | IFF_NOARP);
                self.call(r)
            }
            Op::SetIpv6Disabled { name, disabled } => set_ipv6_disabled(name, *disabled),
            Op::CreateVeth {
                name,
                peer,
                mtu,
                mac,
            } => {
                let mut r = Req::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, None);
                r.str_attr(IFLA_IFNAME, name);
                r.attr(IFLA_ADDRESS, mac);
                r.u32_attr(IFLA_MTU, *mtu);
                r.nest(IFLA_LINKINFO, |r| {
                    r.str_attr(IFLA_INFO_KIND, "veth");
                    r.nest(IFLA_INFO_DATA, |r| {
                        r.nest(VETH_INFO_PEER, |r| {
                            r.ifinfo(0);
                            r.str_attr(IFLA_IFNAME, peer);
                            r.u32_attr(IFLA_MTU, *mtu);
                        })
                    })
                });
                self.call(r)
            }
            Op::DeleteVeth { name } => match self.find_named(name)? {
                None => Ok(()),
                Some(l) if l.kind.as_deref() == Some("veth") => {
                    match self.call(Req::new(RTM_DELLINK, 0, l.ifindex, None)) {
                        Err(e) if gone(&e, &[libc::ENODEV]) => Ok(()),
                        r => r,
                    }
                }
                Some(l) => Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{name} is not sluice's veth (kind {}): sluice leaves it alone",
                        l.kind.as_deref().unwrap_or("none")
                    ),
                )),
            },
            Op::AddAddr { dev, addr } => {
                let i = index(dev)?;
                self.call(addr.request(RTM_NEWADDR, i))
            }
            Op::DelAddr { dev, addr } => {
                let i = index(dev)?;
                match self.call(addr.request(RTM_DELADDR, i)) {
                    Err(e) if gone(&e, &[libc::EADDRNOTAVAIL, libc::ENOENT, libc::ESRCH]) => Ok(()),
                    r => r,
                }
            }
            Op::AddRoute { dev, route } => {
                let i = index(dev)?;
                self.call(route.request(RTM_NEWROUTE, i))
            }
            Op::AddNeigh { dev, neigh } => {
                let i = index(dev)?;
                self.call(neigh.request(RTM_NEWNEIGH, i))
            }
            Op::DelNeigh { dev, neigh } => {
                let i = index(dev)?;
                match self.call(neigh.request(RTM_DELNEIGH, i)) {
                    Err(e) if gone(&e, &[libc::ENOENT, libc::ESRCH]) => Ok(()),
                    r => r,
                }
            }
            Op::DelRoute { dev, route } => {
                let i = index(dev)?;
                match self.call(route.request(RTM_DELROUTE, i)) {
                    Err(e) if gone(&e, &[libc::ESRCH, libc::ENOENT]) => Ok(()),
                    r => r,
                }
            }
        }
        .map_err(|e| step(e, op))
    }

    /// The host's configuration of `name`, and the multipath routes with a
    /// hop on it (which the plan refuses).
    pub fn snapshot(&mut self, name: &str) -> io::Result<(Snapshot, Vec<Route>)> {
        let link = self.find_named(name)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}"))
        })?;
        let master_name = match link.master {
            Some(m) => Some(self.link(m)?.name),
            None => None,
        };
        let idx = link.ifindex;
        let addrs = self
            .addrs()?
            .into_iter()
            .filter(|a| a.ifindex == idx)
            .collect();
        let (mut routes, mut multipath) = (Vec::new(), Vec::new());
        for r in self.routes()? {
            if r.multipath_ifindexes().contains(&idx) {
                multipath.push(r);
            } else if r.oif() == Some(idx) && !r.is_kernels() {
                routes.push(r);
            }
        }
        let neighs = self
            .neighs()?
            .into_iter()
            .filter(|n| n.ifindex == idx && n.state & NUD_PERMANENT != 0)
            .collect();
        let snap = Snapshot {
            neighs,
            ipv6_disabled: ipv6_disabled(name)?,
            link,
            master_name,
            addrs,
            routes,
        };
        Ok((snap, multipath))
    }
}

fn index(dev: &Dev) -> io::Result<i32> {
    match dev {
        Dev::Index(i) => Ok(*i),
        Dev::Name(n) => sockopt::ifindex(n),
    }
}

fn ipv6_path(name: &str) -> String {
    format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6")
}

/// `disable_ipv6` of `name`; none when the kernel has no IPv6.
fn ipv6_disabled(name: &str) -> io::Result<Option<bool>> {
    match std::fs::read_to_string(ipv6_path(name)) {
        Ok(t) => Ok(Some(t.trim() != "0")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn set_ipv6_disabled(name: &str, disabled: bool) -> io::Result<()> {
    std::fs::write(ipv6_path(name), if disabled { "1\n" } else { "0\n" })
}

/// `e` with the operation it happened at (and a hint where one helps).
fn step(e: io::Error, op: &Op) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_NET_ADMIN)",
        Some(libc::EOPNOTSUPP) if matches!(op, Op::CreateVeth { .. }) => {
            " (is the kernel's veth module available? modprobe veth)"
        }
        _ => "",
    };
    io::Error::new(e.kind(), format!("{op}: {e}{hint}"))
}
