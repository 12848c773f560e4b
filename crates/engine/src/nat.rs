//! NAT-aware hosts (CAKE's `nat`, tc-cake(8)): on the WAN side of a
//! masquerading router every LAN host has the router's address; host
//! isolation needs the original one. The I/O side asks the kernel's
//! conntrack ([`NatHosts::take_lookups`], answered with
//! [`NatHosts::answer`]); the engine uses the answer in the host key of
//! every later packet of the connection.
//!
//! # Principles
//! - Sans-IO: the engine only records which connections it needs the
//!   original host of and uses what it was told; asking is the caller's,
//!   off the packet path. Until the answer comes (and where there is none)
//!   the post-NAT address stands: the fallback is today's behaviour.
//! - Keyed by the connection's **reply** tuple as conntrack has it (from
//!   the remote end to the router's address and port): a packet toward
//!   the LAN side carries it as it is, one away from it reversed. The
//!   router's end is the one substituted: the source of what leaves
//!   toward the WAN, the destination of what leaves toward the LAN.
//! - Bounded: at most [`CAPACITY`] connections remembered (the oldest
//!   forgotten first) and [`PENDING`] questions waiting; a connection
//!   whose question did not fit is asked at its next packet. A TCP SYN
//!   asks again (a masquerading router reuses ports for new connections).

use sluice_wire::IpInfo;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// Connections remembered.
pub const CAPACITY: usize = 65_536;
/// Questions waiting for the caller at most.
pub const PENDING: usize = 4_096;

/// A connection's reply tuple: from the remote end to the router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatKey {
    pub proto: u8,
    pub remote: IpAddr,
    pub remote_port: u16,
    pub local: IpAddr,
    pub local_port: u16,
}

impl NatKey {
    /// The key of `ip` leaving toward the LAN side (`toward_lan`) or the
    /// WAN; none without ports (ICMP, fragments).
    pub fn of(ip: &IpInfo, toward_lan: bool) -> Option<NatKey> {
        let (sp, dp) = ip.ports()?;
        Some(if toward_lan {
            NatKey {
                proto: ip.proto,
                remote: ip.src,
                remote_port: sp,
                local: ip.dst,
                local_port: dp,
            }
        } else {
            NatKey {
                proto: ip.proto,
                remote: ip.dst,
                remote_port: dp,
                local: ip.src,
                local_port: sp,
            }
        })
    }
}

#[derive(Debug, Default)]
pub struct NatHosts {
    on: bool,
    /// The original host, or none: asked, and conntrack had no entry.
    known: HashMap<NatKey, Option<IpAddr>>,
    order: VecDeque<NatKey>,
    pending: Vec<NatKey>,
}

impl NatHosts {
    pub fn set_on(&mut self, on: bool) {
        self.on = on;
        if !on {
            *self = NatHosts::default();
        }
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The original host of `key`'s connection if known; asks for it
    /// otherwise (`fresh`: a TCP SYN, a new connection: asked again).
    pub fn lookup(&mut self, key: NatKey, fresh: bool) -> Option<IpAddr> {
        if !self.on {
            return None;
        }
        match self.known.get(&key) {
            Some(h) if !fresh => return *h,
            Some(None) if fresh => return None, // asked already, not answered
            _ => {}
        }
        if self.pending.len() >= PENDING {
            return self.known.get(&key).copied().flatten();
        }
        self.pending.push(key);
        if self.known.insert(key, None).is_none() {
            self.order.push_back(key);
            if self.order.len() > CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.known.remove(&old);
                }
            }
        }
        None
    }

    /// The questions recorded since the last call.
    pub fn take_lookups(&mut self) -> Vec<NatKey> {
        std::mem::take(&mut self.pending)
    }

    /// conntrack's answer for `key` (none: no entry, the post-NAT address
    /// stays); an answer for a forgotten connection is dropped.
    pub fn answer(&mut self, key: NatKey, original: Option<IpAddr>) {
        if let Some(h) = self.known.get_mut(&key) {
            *h = original;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> NatKey {
        NatKey {
            proto: 6,
            remote: "10.0.3.2".parse().unwrap(),
            remote_port: 5201,
            local: "10.0.2.1".parse().unwrap(),
            local_port: port,
        }
    }

    #[test]
    fn asked_once_then_answered() {
        let mut n = NatHosts::default();
        assert_eq!(n.lookup(key(1), false), None, "off: nothing asked");
        assert!(n.take_lookups().is_empty());
        n.set_on(true);
        assert_eq!(n.lookup(key(1), false), None);
        assert_eq!(n.lookup(key(1), false), None);
        assert_eq!(n.take_lookups(), vec![key(1)], "asked once");
        let lan: IpAddr = "192.168.1.10".parse().unwrap();
        n.answer(key(1), Some(lan));
        assert_eq!(n.lookup(key(1), false), Some(lan));
        // A new connection on a reused port is asked again.
        assert_eq!(n.lookup(key(1), true), None);
        assert_eq!(n.take_lookups(), vec![key(1)]);
        n.answer(key(2), Some(lan));
        assert_eq!(n.lookup(key(2), false), None, "an answer nobody asked for");
    }

    #[test]
    fn bounded_oldest_forgotten() {
        let mut n = NatHosts::default();
        n.set_on(true);
        for p in 0..(PENDING as u16 + 10) {
            n.lookup(key(p), false);
        }
        assert_eq!(n.take_lookups().len(), PENDING, "the rest asked later");
        assert_eq!(n.lookup(key(PENDING as u16 + 5), false), None);
        assert_eq!(n.take_lookups().len(), 1);
        let mut m = NatHosts::default();
        m.set_on(true);
        for i in 0..=CAPACITY as u32 {
            let mut k = key(0);
            k.local_port = i as u16;
            k.remote_port = (i >> 16) as u16;
            m.lookup(k, false);
            m.take_lookups();
        }
        assert_eq!(m.known.len(), CAPACITY);
        assert!(!m.known.contains_key(&key(0)), "the oldest went first");
    }

    #[test]
    fn a_key_is_the_reply_tuple_from_either_direction() {
        use std::net::Ipv4Addr;
        let (router, server) = (Ipv4Addr::new(10, 0, 2, 1), Ipv4Addr::new(10, 0, 3, 2));
        let ip = |f: Vec<u8>| sluice_wire::parse(&f).unwrap().ip.unwrap();
        let up = ip(sluice_wire::build::udp_v4(router, server, 40000, 5201, 100));
        let down = ip(sluice_wire::build::udp_v4(server, router, 5201, 40000, 100));
        let k = NatKey::of(&down, true).unwrap();
        assert_eq!(NatKey::of(&up, false), Some(k));
        assert_eq!((k.local_port, k.remote_port), (40000, 5201));
        assert_eq!(k.local, IpAddr::V4(router));
    }
}
