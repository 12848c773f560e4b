//! The kernel's own bridge, for the time sluice does not run: `run
//! --on-exit bridge` and `sluice on-exit bridge` hand the two interfaces to
//! a Linux bridge so frames keep flowing (unshaped, unfiltered), and `run`
//! takes them back when it starts.
//!
//! # Principles
//! - rtnetlink only (rtnetlink(7): `RTM_NEWLINK` with `IFLA_LINKINFO` kind
//!   `bridge`, `IFLA_MASTER`, `IFLA_IFALIAS`; `RTM_GETLINK`,
//!   `RTM_DELLINK`), what `ip link` sends, so the daemon needs neither
//!   iproute2 in its PATH nor a shell on its exit path: only
//!   CAP_NET_ADMIN (and the bridge module, loaded on demand by the kernel).
//! - sluice touches only a bridge it made: a link of kind `bridge` whose
//!   alias (IFLA_IFALIAS) starts with [`MARKER`]. The kernel ignores an
//!   alias in the creating request, so it is set by the next one and the
//!   bridge deleted again if that fails; a process killed between the two
//!   leaves an unmarked bridge, which is then refused like any other. A
//!   port of a master sluice did not make is an error naming that master,
//!   never released.
//! - Idempotent both ways: handing over interfaces already in sluice's
//!   bridge only makes sure everything is up; taking back interfaces that
//!   are in no bridge does nothing. The daemon's own exit and systemd's
//!   `ExecStopPost=` may both run, in any order, any number of times.
//! - The bridge is named after the LAN interface's ifindex
//!   ([`bridge_name`], at most 15 bytes: IFNAMSIZ), unique per LAN in a
//!   namespace; taking back finds it from its ports (`IFLA_MASTER`).
//! - STP stays off (the kernel's default, bridge(8) `stp_state 0`): a port
//!   forwards as soon as it is up, without 30 s of listening and learning.
//! - Every request asks for an acknowledgement (`NLM_F_ACK`) and waits
//!   for it (`ANSWER_WAIT` at most): each failure is reported with the step
//!   it happened at. Message building and parsing are pure and unit-tested.

use crate::rtnl::{
    self, parse_link, LinkInfo, Req, IFLA_IFALIAS, IFLA_IFNAME, IFLA_INFO_KIND, IFLA_LINKINFO,
    IFLA_MASTER, NLMSG_ERROR, NLM_F_CREATE, NLM_F_EXCL, RTM_DELLINK, RTM_GETLINK, RTM_NEWLINK,
};
use crate::sockopt;
use crate::sys;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

/// The start of the alias that marks a bridge as sluice's.
pub const MARKER: &str = "sluice on-exit bridge";

/// IFNAMSIZ less the terminating NUL.
const IFNAME_MAX: usize = 15;
/// How long one request may wait for the kernel's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// Datagrams read for one request at most (one link and the ack).
const ANSWER_DATAGRAMS: usize = 16;

/// The name of sluice's bridge for the LAN interface with `lan_ifindex`.
pub fn bridge_name(lan_ifindex: i32) -> String {
    let n = format!("sluice-br{lan_ifindex}");
    if n.len() <= IFNAME_MAX {
        n
    } else {
        // Any i32: 4 + 10 digits.
        format!("slbr{lan_ifindex}")
    }
}

/// The alias sluice gives its bridge.
fn marker_for(lan: &str, wan: &str) -> String {
    format!("{MARKER} for {lan},{wan}")
}

impl LinkInfo {
    /// A bridge sluice made.
    pub fn is_sluices(&self) -> bool {
        self.kind.as_deref() == Some("bridge")
            && self.alias.as_deref().is_some_and(|a| a.starts_with(MARKER))
    }

    fn describe(&self) -> String {
        match &self.kind {
            Some(k) => format!("{} ({k})", self.name),
            None => self.name.clone(),
        }
    }
}

/// What [`hand_over`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandOver {
    pub bridge: String,
    /// False when the bridge was there already (a second hand-over).
    pub created: bool,
}

/// Puts `lan` and `wan` into sluice's kernel bridge (made if missing), all
/// three up: from now on the kernel forwards every frame between them.
pub fn hand_over(lan: &str, wan: &str) -> io::Result<HandOver> {
    let mut nl = Rtnl::open()?;
    let ports = [nl.link_named(lan)?, nl.link_named(wan)?];
    let name = bridge_name(ports[0].ifindex);
    for p in &ports {
        if let Some(m) = p.master {
            let m = nl.link(m)?;
            if !m.is_sluices() {
                return Err(foreign(p, &m));
            }
        }
    }
    let (bridge, created) = match nl.find_named(&name)? {
        Some(b) if b.is_sluices() => (b, false),
        Some(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "a link named {name} exists and sluice did not make it (not a bridge \
                     with an alias starting `{MARKER}`): sluice leaves it alone; \
                     delete or rename it (`ip link del {name}`)",
                ),
            ))
        }
        None => (nl.create_bridge(&name, &marker_for(lan, wan))?, true),
    };
    for p in &ports {
        let mut r = Req::new(RTM_NEWLINK, 0, p.ifindex, Some(true));
        r.u32_attr(IFLA_MASTER, bridge.ifindex as u32);
        nl.call(r)
            .map_err(|e| step(e, &format!("adding {} to {name}", p.name)))?;
    }
    nl.call(Req::new(RTM_NEWLINK, 0, bridge.ifindex, Some(true)))
        .map_err(|e| step(e, &format!("setting {name} up")))?;
    Ok(HandOver {
        bridge: name,
        created,
    })
}

/// Takes `lan` and `wan` out of sluice's kernel bridge and deletes it (and
/// an empty one left for this LAN); the names of the bridges deleted. An
/// interface that does not exist is skipped (opening it reports that); one
/// in a bridge sluice did not make is an error and nothing is changed.
pub fn take_back(lan: &str, wan: &str) -> io::Result<Vec<String>> {
    let mut nl = Rtnl::open()?;
    let mut ports = Vec::new();
    for n in [lan, wan] {
        if let Some(p) = nl.find_named(n)? {
            ports.push(p);
        }
    }
    let mut ours: Vec<LinkInfo> = Vec::new();
    for p in &ports {
        if let Some(m) = p.master {
            let m = nl.link(m)?;
            if !m.is_sluices() {
                return Err(foreign(p, &m));
            }
            if !ours.iter().any(|o| o.ifindex == m.ifindex) {
                ours.push(m);
            }
        }
    }
    if let Some(p) = ports.first().filter(|p| p.name == lan) {
        if let Some(b) = nl.find_named(&bridge_name(p.ifindex))? {
            if b.is_sluices() && !ours.iter().any(|o| o.ifindex == b.ifindex) {
                ours.push(b);
            }
        }
    }
    let mut deleted = Vec::new();
    for b in ours {
        // Deleting a bridge releases its ports (they stay up).
        nl.call(Req::new(RTM_DELLINK, 0, b.ifindex, None))
            .map_err(|e| step(e, &format!("deleting {}", b.name)))?;
        deleted.push(b.name);
    }
    Ok(deleted)
}

fn foreign(port: &LinkInfo, master: &LinkInfo) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} is a port of {}, which sluice did not make (its alias does not start \
             with `{MARKER}`): sluice leaves it alone; release the port first \
             (`ip link set {} nomaster`)",
            port.name,
            master.describe(),
            port.name
        ),
    )
}

/// `e` with the step it happened at (and a hint where one helps).
fn step(e: io::Error, what: &str) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_NET_ADMIN)",
        // The kernel knows no link kind `bridge`.
        Some(libc::EOPNOTSUPP) if what.starts_with("creating") => {
            " (is the kernel's bridge module available? modprobe bridge)"
        }
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

/// A request/answer rtnetlink socket.
struct Rtnl {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    fn open() -> io::Result<Rtnl> {
        let fd = sys::netlink_route_requests(ANSWER_WAIT)
            .map_err(|e| step(e, "opening a netlink socket"))?;
        Ok(Rtnl {
            fd,
            seq: 0,
            // A link's full description (statistics included) is a few KiB.
            buf: vec![0; 64 << 10],
        })
    }

    /// Sends `req` and returns the links of the answer, once the kernel
    /// has acknowledged it; a negative acknowledgement is the error.
    fn call(&mut self, mut req: Req) -> io::Result<Vec<LinkInfo>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        sys::send(&self.fd, &req.finish(seq))?;
        let mut links = Vec::new();
        for _ in 0..ANSWER_DATAGRAMS {
            let n = sys::recv_wait(&self.fd, &mut self.buf)?;
            for a in parse_answers(&self.buf[..n]) {
                match a {
                    Answer::Ack { seq: s, error } if s == seq => {
                        return match error {
                            0 => Ok(links),
                            e => Err(io::Error::from_raw_os_error(-e)),
                        };
                    }
                    Answer::Link { seq: s, link } if s == seq => links.push(link),
                    _ => {}
                }
            }
        }
        Err(io::Error::other("no acknowledgement from the kernel"))
    }

    fn link(&mut self, ifindex: i32) -> io::Result<LinkInfo> {
        self.call(Req::new(RTM_GETLINK, 0, ifindex, None))
            .and_then(one)
            .map_err(|e| step(e, &format!("asking for link {ifindex}")))
    }

    /// The link called `name`, if there is one.
    fn find_named(&mut self, name: &str) -> io::Result<Option<LinkInfo>> {
        // if_nametoindex takes any length; the kernel refuses > IFNAMSIZ.
        let idx = match sockopt::ifindex(name) {
            Ok(i) => i,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match self.call(Req::new(RTM_GETLINK, 0, idx, None)).and_then(one) {
            Ok(l) => Ok(Some(l)),
            // Gone between the two questions.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(step(e, &format!("asking for {name}"))),
        }
    }

    fn link_named(&mut self, name: &str) -> io::Result<LinkInfo> {
        self.find_named(name)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}")))
    }

    /// Makes the bridge `name` with its marking `alias`; on any failure
    /// after the bridge exists it is deleted again.
    fn create_bridge(&mut self, name: &str, alias: &str) -> io::Result<LinkInfo> {
        let mut r = Req::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, None);
        r.str_attr(IFLA_IFNAME, name);
        r.nest(IFLA_LINKINFO, |r| r.str_attr(IFLA_INFO_KIND, "bridge"));
        self.call(r)
            .map_err(|e| step(e, &format!("creating bridge {name}")))?;
        let made = self.link_named(name)?;
        let mut r = Req::new(RTM_NEWLINK, 0, made.ifindex, None);
        r.str_attr(IFLA_IFALIAS, alias);
        if let Err(e) = self.call(r) {
            let _ = self.call(Req::new(RTM_DELLINK, 0, made.ifindex, None));
            return Err(step(e, &format!("marking bridge {name}")));
        }
        Ok(LinkInfo {
            alias: Some(alias.to_string()),
            ..made
        })
    }
}

fn one(mut v: Vec<LinkInfo>) -> io::Result<LinkInfo> {
    match v.len() {
        1 => Ok(v.remove(0)),
        n => Err(io::Error::other(format!(
            "{n} links in the answer, not one"
        ))),
    }
}

/// What the kernel answers a request with.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// `NLMSG_ERROR`: 0 is the acknowledgement, otherwise `-errno`.
    Ack {
        seq: u32,
        error: i32,
    },
    Link {
        seq: u32,
        link: LinkInfo,
    },
}

/// The answers in one netlink datagram (other messages skipped; a
/// truncated tail ends the walk).
fn parse_answers(buf: &[u8]) -> Vec<Answer> {
    rtnl::messages(buf)
        .filter_map(|m| match m.kind {
            NLMSG_ERROR => m.body.get(..4).map(|e| Answer::Ack {
                seq: m.seq,
                error: i32::from_ne_bytes([e[0], e[1], e[2], e[3]]),
            }),
            RTM_NEWLINK => parse_link(m.body).map(|link| Answer::Link { seq: m.seq, link }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtnl::*;

    /// A link answer as the kernel writes it.
    fn link_msg(seq: u32, ifindex: i32, build: impl FnOnce(&mut Req)) -> Vec<u8> {
        let mut r = Req::new(RTM_NEWLINK, 0, ifindex, Some(true));
        build(&mut r);
        r.finish(seq)
    }

    fn ack(seq: u32, error: i32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(36u32.to_ne_bytes());
        v.extend(NLMSG_ERROR.to_ne_bytes());
        v.extend(0u16.to_ne_bytes());
        v.extend(seq.to_ne_bytes());
        v.extend(0u32.to_ne_bytes());
        v.extend(error.to_ne_bytes());
        v.extend([0u8; 16]); // the request's header, echoed
        v
    }

    #[test]
    fn names_fit_ifnamsiz() {
        assert_eq!(bridge_name(7), "sluice-br7");
        assert_eq!(bridge_name(123_456), "sluice-br123456");
        assert_eq!(bridge_name(1_234_567), "slbr1234567");
        assert!(bridge_name(i32::MAX).len() <= IFNAME_MAX);
    }

    #[test]
    fn a_request_is_laid_out_as_rtnetlink_reads_it() {
        let mut r = Req::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, None);
        r.str_attr(IFLA_IFNAME, "sluice-br7");
        r.nest(IFLA_LINKINFO, |r| r.str_attr(IFLA_INFO_KIND, "bridge"));
        let b = r.finish(9);
        assert_eq!(
            u32::from_ne_bytes(b[..4].try_into().unwrap()) as usize,
            b.len()
        );
        assert_eq!(b.len() % 4, 0);
        let flags = u16::from_ne_bytes([b[6], b[7]]);
        assert_eq!(flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 9);
        let a: Vec<_> = attrs(&b[NLMSG_HDR + IFINFOMSG..]).collect();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0], (IFLA_IFNAME, &b"sluice-br7\0"[..]));
        assert_eq!(a[1].0, IFLA_LINKINFO, "the NESTED flag is masked off");
        let inner: Vec<_> = attrs(a[1].1).collect();
        assert_eq!(inner, vec![(IFLA_INFO_KIND, &b"bridge\0"[..])]);
    }

    #[test]
    fn answers_are_parsed_links_and_acks() {
        let mut b = link_msg(3, 12, |r| {
            r.str_attr(IFLA_IFNAME, "sluice-br4");
            r.u32_attr(IFLA_MASTER, 0);
            r.str_attr(IFLA_IFALIAS, &marker_for("lan0", "wan0"));
            r.nest(IFLA_LINKINFO, |r| r.str_attr(IFLA_INFO_KIND, "bridge"));
        });
        b.extend(ack(3, 0));
        b.extend(ack(4, -libc::EPERM));
        let a = parse_answers(&b);
        assert_eq!(a.len(), 3);
        let Answer::Link { seq: 3, link } = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(link.ifindex, 12);
        assert_eq!(link.name, "sluice-br4");
        assert_eq!(link.master, None, "master 0 is none");
        assert!(link.is_sluices());
        assert_eq!(a[1], Answer::Ack { seq: 3, error: 0 });
        assert_eq!(
            a[2],
            Answer::Ack {
                seq: 4,
                error: -libc::EPERM
            }
        );
    }

    #[test]
    fn only_a_marked_bridge_is_sluices() {
        let mut l = LinkInfo {
            kind: Some("bridge".into()),
            alias: None,
            ..LinkInfo::default()
        };
        assert!(!l.is_sluices(), "an unmarked bridge is not ours");
        l.alias = Some("uplink".into());
        assert!(!l.is_sluices());
        l.alias = Some(marker_for("a", "b"));
        assert!(l.is_sluices());
        l.kind = Some("bond".into());
        assert!(!l.is_sluices(), "the marker on another kind is not ours");
    }

    #[test]
    fn bad_lengths_end_the_walk() {
        let mut b = link_msg(1, 2, |r| r.str_attr(IFLA_IFNAME, "x"));
        b.truncate(20);
        assert!(parse_answers(&b).is_empty());
        let mut z = ack(1, 0);
        z[..4].copy_from_slice(&0u32.to_ne_bytes());
        assert!(parse_answers(&z).is_empty(), "a zero length cannot loop");
        // An attribute claiming 2 bytes (less than its header).
        assert_eq!(attrs(&[2, 0, 3, 0, 0, 0, 0, 0]).count(), 0);
        // One claiming more than is there.
        assert_eq!(attrs(&[64, 0, 3, 0, b'x', 0, 0, 0]).count(), 0);
    }
}
