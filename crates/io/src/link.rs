//! Interface state as the kernel announces it: a NETLINK_ROUTE socket
//! subscribed to link events, in the reactor's epoll.
//!
//! # Principles
//! - Netlink decides, sockets do not: an interface is usable while it is
//!   administratively up and operationally up (`IFF_UP` and `IFF_RUNNING`,
//!   which the kernel clears on carrier loss: `ip link set … down` and a
//!   cable pulled look the same; SIOCGIFFLAGS, 16 bits wide, reports
//!   both, where it could not report `IFF_LOWER_UP`), and it is gone
//!   on `RTM_DELLINK` (deleted, or moved to another namespace). The
//!   ENETDOWN/ENXIO a packet socket reports meanwhile is only cleared (a
//!   late one must not mark a link down that came back up).
//! - Matched by ifindex, which a rename keeps and a re-created interface
//!   of the same name does not have: a new `lan0` is not ours.
//! - A lost event (the socket's buffer overflowed: ENOBUFS) is recovered by
//!   asking SIOCGIFFLAGS for both interfaces again, never ignored.
//! - Parsing is pure ([`parse`]) and unit-tested on hand-built messages.

use crate::rtnl::{self, IFF_RUNNING, IFF_UP, RTMGRP_LINK, RTM_DELLINK, RTM_NEWLINK};
use crate::sockopt;
use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Messages read per wake-up at most; more wait for the next turn.
const RECV_MAX: usize = 16;

/// What happened to one of the watched interfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkChange {
    Down,
    Up,
    Gone,
}

/// One link message: (RTM_NEWLINK or RTM_DELLINK, ifindex, IFF_* flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkMsg {
    pub deleted: bool,
    pub ifindex: i32,
    pub flags: u32,
}

/// Usable: administratively and operationally up.
pub fn usable(flags: u32) -> bool {
    flags & IFF_UP != 0 && flags & IFF_RUNNING != 0
}

/// The link messages in one netlink datagram (others are skipped; a
/// truncated tail ends the walk).
pub fn parse(buf: &[u8]) -> Vec<LinkMsg> {
    rtnl::messages(buf)
        .filter(|m| matches!(m.kind, RTM_NEWLINK | RTM_DELLINK))
        .filter_map(|m| {
            let l = rtnl::parse_link(m.body)?;
            Some(LinkMsg {
                deleted: m.kind == RTM_DELLINK,
                ifindex: l.ifindex,
                flags: l.flags,
            })
        })
        .collect()
}

/// The state of the watched interfaces, kept from netlink events.
pub struct LinkWatch {
    fd: OwnedFd,
    names: Vec<String>,
    ifindex: Vec<i32>,
    up: Vec<bool>,
    buf: Vec<u8>,
}

impl LinkWatch {
    /// Watches `names` (the netlink socket also serves the SIOCGIFFLAGS
    /// queries: any socket does).
    pub fn open(names: &[&str]) -> io::Result<LinkWatch> {
        let fd = sys::netlink_route(RTMGRP_LINK)?;
        let ctl = fd.as_raw_fd();
        // Room for a burst of events (a flapping carrier); overflow is
        // recovered anyway.
        sockopt::set_buf(fd.as_raw_fd(), false, 1 << 20);
        let ifindex = names
            .iter()
            .map(|n| sockopt::ifindex(n))
            .collect::<io::Result<Vec<_>>>()?;
        // At start only the administrative state counts: the operational
        // one lags carrier by up to a second on a link just set up (the
        // kernel's linkwatch), and the event that sets it follows anyway.
        let up = names
            .iter()
            .map(|n| sockopt::if_flags(ctl, n).map(|f| f & IFF_UP != 0))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(LinkWatch {
            fd,
            names: names.iter().map(|s| s.to_string()).collect(),
            ifindex,
            up,
            buf: vec![0; 32 << 10],
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.up[i]
    }

    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// Reads what netlink has queued; `f(i, change)` for each change of
    /// interface `i`.
    pub fn read(&mut self, f: &mut dyn FnMut(usize, LinkChange)) -> io::Result<()> {
        for _ in 0..RECV_MAX {
            match sys::recv(&self.fd, &mut self.buf) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    for m in parse(&self.buf[..n]) {
                        let Some(i) = self.ifindex.iter().position(|&x| x == m.ifindex) else {
                            continue;
                        };
                        if m.deleted {
                            f(i, LinkChange::Gone);
                        } else {
                            self.set(i, usable(m.flags), f);
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.resync(f),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn set(&mut self, i: usize, up: bool, f: &mut dyn FnMut(usize, LinkChange)) {
        if self.up[i] != up {
            self.up[i] = up;
            f(i, if up { LinkChange::Up } else { LinkChange::Down });
        }
    }

    /// After lost events: the flags asked directly; an interface whose
    /// name no longer has our ifindex is gone.
    fn resync(&mut self, f: &mut dyn FnMut(usize, LinkChange)) {
        let ctl = self.fd.as_raw_fd();
        for i in 0..self.names.len() {
            let same = sockopt::ifindex(&self.names[i]).is_ok_and(|x| x == self.ifindex[i]);
            match sockopt::if_flags(ctl, &self.names[i]) {
                Ok(fl) if same => self.set(i, usable(fl), f),
                _ => f(i, LinkChange::Gone),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtnl::{IFINFOMSG, NLMSG_HDR};

    fn msg(kind: u16, ifindex: i32, flags: u32) -> Vec<u8> {
        let len = (NLMSG_HDR + IFINFOMSG + 6) as u32; // + an unaligned attribute
        let mut v = Vec::new();
        v.extend(len.to_ne_bytes());
        v.extend(kind.to_ne_bytes());
        v.extend([0u8; 10]);
        v.extend([0u8, 0, 1, 0]); // family, pad, type
        v.extend(ifindex.to_ne_bytes());
        v.extend(flags.to_ne_bytes());
        v.extend(0xffff_ffffu32.to_ne_bytes());
        v.extend([0u8; 6]);
        v.extend([0u8; 2]); // alignment padding
        v
    }

    #[test]
    fn parses_new_and_del_link_and_skips_the_rest() {
        let mut b = msg(RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
        b.extend(msg(20, 7, 0)); // RTM_NEWADDR: not ours
        b.extend(msg(RTM_NEWLINK, 3, IFF_UP));
        b.extend(msg(RTM_DELLINK, 7, 0));
        let m = parse(&b);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[0],
            LinkMsg {
                deleted: false,
                ifindex: 7,
                flags: IFF_UP | IFF_RUNNING
            }
        );
        assert!(usable(m[0].flags));
        assert!(
            !usable(m[1].flags),
            "up without carrier (not running) is down"
        );
        assert!(m[2].deleted);
    }

    #[test]
    fn truncated_or_bogus_lengths_end_the_walk() {
        let mut b = msg(RTM_NEWLINK, 7, IFF_UP);
        b.truncate(20);
        assert!(parse(&b).is_empty());
        let mut z = msg(RTM_NEWLINK, 7, IFF_UP);
        z[..4].copy_from_slice(&0u32.to_ne_bytes());
        assert!(parse(&z).is_empty(), "a zero length cannot loop");
    }
}
