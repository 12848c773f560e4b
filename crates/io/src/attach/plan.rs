//! The plan of `--attach IF`: the host's configuration of IF in (a
//! [`Snapshot`]: the link, its addresses, its routes, as data), the list of
//! rtnetlink operations out, each with the operation that undoes it. Pure:
//! no syscall; `exec.rs` carries a plan out.
//!
//! # Principles
//! - IF keeps its ifindex and gives its name away: it is renamed
//!   ([`phys_name`]) and a veth pair takes its place, the host end named IF
//!   with IF's MAC address and MTU, in IF's bridge, with IF's addresses and
//!   routes. Everything that names IF (nftables `iifname`, a DHCP client,
//!   dnsmasq's `interface=`) finds the host end under the same name; what
//!   matched on IF's MAC still matches (docs/adr/0003-attach.md).
//! - IF itself ends up with no address, no master, a locally administered
//!   MAC of its own ([`phys_mac`]), promiscuous, NOARP and with IPv6 off:
//!   its own stack answers nothing (no ARP reply for the router's
//!   addresses with the wrong MAC, no frame addressed to the router
//!   processed twice); sluice reads every frame of it and forwards it to
//!   the veth end toward the host.
//! - Every step has its undo, and a failure half-way runs the undos of the
//!   steps done, last first; the order is chosen so that this restores IF
//!   exactly: addresses are deleted last first, so that their undo adds
//!   them first first (an IPv4 primary before its secondaries); routes are
//!   deleted before addresses, so they are added after them, narrower
//!   scope first ([`add_order`]), so that a gateway is reachable when the
//!   route via it is added.
//! - [`detach`] is computed from the snapshot taken before attaching (kept
//!   in the state file): it restores that, whatever state a crash left,
//!   and running it again changes nothing (every step is idempotent:
//!   adding replaces, deleting what is gone is not an error).

use crate::rtnl::{Addr, LinkInfo, Neigh, Route, IFF_NOARP, IFF_PROMISC, IFF_UP};
use std::fmt;

/// IFNAMSIZ less the terminating NUL.
pub const IFNAME_MAX: usize = 15;

/// What the host had on IF before attaching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub link: LinkInfo,
    /// The name of IF's master (a bridge), if it has one.
    pub master_name: Option<String>,
    /// IF's addresses, in the kernel's order.
    pub addrs: Vec<Addr>,
    /// The routes whose output interface is IF, every table, in the
    /// kernel's order: those the kernel makes by itself excluded.
    pub routes: Vec<Route>,
    /// IF's permanent neighbour entries (`ip neigh ... nud permanent`);
    /// the learnt ones are learnt again.
    pub neighs: Vec<Neigh>,
    /// `net.ipv6.conf.IF.disable_ipv6`, if the kernel has IPv6.
    pub ipv6_disabled: Option<bool>,
}

/// A link the plan names: one that exists when planning, by ifindex (it
/// keeps it across a rename); one made by the plan, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dev {
    Index(i32),
    Name(String),
}

/// One rtnetlink operation (or a sysctl write: IPv6 on a link).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    SetUp {
        dev: Dev,
        up: bool,
    },
    /// The master's ifindex, or none (release).
    SetMaster {
        dev: Dev,
        master: Option<i32>,
    },
    Rename {
        dev: Dev,
        to: String,
    },
    SetMac {
        dev: Dev,
        mac: Vec<u8>,
    },
    SetFlags {
        dev: Dev,
        promisc: bool,
        noarp: bool,
    },
    /// `net.ipv6.conf.NAME.disable_ipv6`.
    SetIpv6Disabled {
        name: String,
        disabled: bool,
    },
    /// A veth pair: `name` with `mac` and `mtu`, its peer `peer`.
    CreateVeth {
        name: String,
        peer: String,
        mtu: u32,
        mac: Vec<u8>,
    },
    /// Deletes the veth `name` (and so its peer); only a veth.
    DeleteVeth {
        name: String,
    },
    AddAddr {
        dev: Dev,
        addr: Addr,
    },
    DelAddr {
        dev: Dev,
        addr: Addr,
    },
    AddRoute {
        dev: Dev,
        route: Route,
    },
    DelRoute {
        dev: Dev,
        route: Route,
    },
    AddNeigh {
        dev: Dev,
        neigh: Neigh,
    },
    DelNeigh {
        dev: Dev,
        neigh: Neigh,
    },
}

/// One step: the operation and what undoes it (none where a later undo
/// covers it: whatever is put on the veth goes with it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub op: Op,
    pub undo: Option<Op>,
}

/// The names `--attach` gives: IF renamed, and the veth end sluice
/// bridges it with (the host end takes IF's own name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub host: String,
    pub phys: String,
    pub peer: String,
}

/// IF's name while attached: `slp` and its ifindex (at most 13 bytes).
pub fn phys_name(ifindex: i32) -> String {
    format!("slp{ifindex}")
}

/// The veth end sluice bridges IF with: `slv` and IF's ifindex.
pub fn peer_name(ifindex: i32) -> String {
    format!("slv{ifindex}")
}

/// IF's own MAC while attached: locally administered, unicast, from its
/// ifindex (`02:73:6c` — "sl" — then the index), so never IF's real one.
pub fn phys_mac(ifindex: i32) -> Vec<u8> {
    let i = ifindex.to_be_bytes();
    vec![0x02, 0x73, 0x6c, i[1], i[2], i[3]]
}

pub fn names(s: &Snapshot) -> Names {
    Names {
        host: s.link.name.clone(),
        phys: phys_name(s.link.ifindex),
        peer: peer_name(s.link.ifindex),
    }
}

/// Why IF cannot be attached as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Refuses what the plan could not restore exactly, or what is not a
/// plain Ethernet interface of the host.
fn check(s: &Snapshot, multipath: &[Route]) -> Result<(), Refusal> {
    let l = &s.link;
    let n = names(s);
    let ours = |p: &str| {
        n.host
            .strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    if ours("slp") || ours("slv") {
        return Err(Refusal(format!(
            "{}: looks attached already (sluice's names are slpN/slvN); run `sluice on-exit --attach IF` with the original name",
            l.name
        )));
    }
    if l.mac.len() != 6 {
        return Err(Refusal(format!(
            "{}: not an Ethernet interface (hardware address of {} bytes); attach a PPPoE or tunnel link's underlying Ethernet interface",
            l.name,
            l.mac.len()
        )));
    }
    if let Some(k @ ("bridge" | "bond" | "team")) = l.kind.as_deref() {
        return Err(Refusal(format!(
            "{}: a {k}: sluice attaches one interface, not a {k} with its ports \
             (they would stay with it); attach the port the traffic crosses (the WAN \
             port, or the LAN port facing the hosts)",
            l.name
        )));
    }
    if l.mtu == 0 {
        return Err(Refusal(format!("{}: no MTU reported", l.name)));
    }
    if let Some(r) = multipath.first() {
        return Err(Refusal(format!(
            "{}: the multipath route {} has a next hop on it; sluice cannot move one hop of it (move it to a single path first)",
            l.name,
            r.describe()
        )));
    }
    Ok(())
}

/// The plan that attaches IF (`s`); `multipath` are the routes with a
/// next hop on IF among several, which refuse it.
pub fn attach(s: &Snapshot, multipath: &[Route]) -> Result<Vec<Step>, Refusal> {
    check(s, multipath)?;
    let l = &s.link;
    let n = names(s);
    let phys = || Dev::Index(l.ifindex);
    let host = || Dev::Name(n.host.clone());
    let was_up = l.flags & IFF_UP != 0;
    let (promisc, noarp) = (l.flags & IFF_PROMISC != 0, l.flags & IFF_NOARP != 0);
    let mut v = Vec::new();
    let mut step = |op, undo| v.push(Step { op, undo });
    for r in add_order(&s.routes).into_iter().rev() {
        step(
            Op::DelRoute {
                dev: phys(),
                route: r.clone(),
            },
            Some(Op::AddRoute {
                dev: phys(),
                route: r.clone(),
            }),
        );
    }
    // Deleting IF's last IPv4 address or taking it down would flush them
    // (arp_ifdown): deleted one by one first, so that each undo runs after
    // the addresses are back.
    for n in s.neighs.iter().rev() {
        step(
            Op::DelNeigh {
                dev: phys(),
                neigh: n.clone(),
            },
            Some(Op::AddNeigh {
                dev: phys(),
                neigh: n.clone(),
            }),
        );
    }
    for a in s.addrs.iter().rev() {
        step(
            Op::DelAddr {
                dev: phys(),
                addr: a.clone(),
            },
            Some(Op::AddAddr {
                dev: phys(),
                addr: a.clone(),
            }),
        );
    }
    step(
        Op::SetUp {
            dev: phys(),
            up: false,
        },
        was_up.then(|| Op::SetUp {
            dev: phys(),
            up: true,
        }),
    );
    if let Some(m) = l.master {
        step(
            Op::SetMaster {
                dev: phys(),
                master: None,
            },
            Some(Op::SetMaster {
                dev: phys(),
                master: Some(m),
            }),
        );
    }
    step(
        Op::Rename {
            dev: phys(),
            to: n.phys.clone(),
        },
        Some(Op::Rename {
            dev: phys(),
            to: n.host.clone(),
        }),
    );
    step(
        Op::SetMac {
            dev: phys(),
            mac: phys_mac(l.ifindex),
        },
        Some(Op::SetMac {
            dev: phys(),
            mac: l.mac.clone(),
        }),
    );
    step(
        Op::SetFlags {
            dev: phys(),
            promisc: true,
            noarp: true,
        },
        Some(Op::SetFlags {
            dev: phys(),
            promisc,
            noarp,
        }),
    );
    if let Some(d) = s.ipv6_disabled {
        step(
            Op::SetIpv6Disabled {
                name: n.phys.clone(),
                disabled: true,
            },
            // Undone before the rename is: IF is still called `phys` then.
            Some(Op::SetIpv6Disabled {
                name: n.phys.clone(),
                disabled: d,
            }),
        );
    }
    step(
        Op::CreateVeth {
            name: n.host.clone(),
            peer: n.peer.clone(),
            mtu: l.mtu,
            mac: l.mac.clone(),
        },
        Some(Op::DeleteVeth {
            name: n.host.clone(),
        }),
    );
    if let Some(m) = l.master {
        step(
            Op::SetMaster {
                dev: host(),
                master: Some(m),
            },
            None,
        );
    }
    if s.ipv6_disabled == Some(true) {
        step(
            Op::SetIpv6Disabled {
                name: n.host.clone(),
                disabled: true,
            },
            None,
        );
    }
    // The peer carries nothing of the host's: no IPv6 of its own either.
    if s.ipv6_disabled.is_some() {
        step(
            Op::SetIpv6Disabled {
                name: n.peer.clone(),
                disabled: true,
            },
            None,
        );
    }
    step(
        Op::SetUp {
            dev: Dev::Name(n.peer.clone()),
            up: true,
        },
        None,
    );
    step(
        Op::SetUp {
            dev: host(),
            up: was_up,
        },
        None,
    );
    step(
        Op::SetUp {
            dev: phys(),
            up: true,
        },
        Some(Op::SetUp {
            dev: phys(),
            up: false,
        }),
    );
    for a in &s.addrs {
        step(
            Op::AddAddr {
                dev: host(),
                addr: a.clone(),
            },
            None,
        );
    }
    for n in &s.neighs {
        step(
            Op::AddNeigh {
                dev: host(),
                neigh: n.clone(),
            },
            None,
        );
    }
    for r in add_order(&s.routes) {
        step(
            Op::AddRoute {
                dev: host(),
                route: r.clone(),
            },
            None,
        );
    }
    Ok(v)
}

/// `routes` in an order the kernel accepts them in: narrower scope first
/// (host, link, then universe), otherwise the kernel's order. A route via
/// a gateway needs a route of link scope to it; the kernel's prefix route
/// comes with the address, but a DHCP client that adds its address
/// `noprefixroute` (dhcpcd) adds that route itself, after the default
/// route, and the dump lists the default route first. Deleted in the
/// reverse order.
fn add_order(routes: &[Route]) -> Vec<&Route> {
    let mut v: Vec<&Route> = routes.iter().collect();
    v.sort_by_key(|r| std::cmp::Reverse(r.scope));
    v
}

/// The undos of the first `done` steps of `plan`, last first: what rolls
/// a set-up that failed at step `done` back.
pub fn rollback(plan: &[Step], done: usize) -> Vec<Op> {
    plan[..done.min(plan.len())]
        .iter()
        .rev()
        .filter_map(|s| s.undo.clone())
        .collect()
}

/// The plan that gives IF back as it was in `s`, from whatever state an
/// attach left (complete, half-way, or a detach itself cut short):
/// `veth_present`: a veth named IF exists (not IF itself).
pub fn detach(s: &Snapshot, veth_present: bool) -> Vec<Op> {
    let l = &s.link;
    let n = names(s);
    let phys = || Dev::Index(l.ifindex);
    let mut v = Vec::new();
    if veth_present {
        v.push(Op::DeleteVeth {
            name: n.host.clone(),
        });
    }
    v.push(Op::SetUp {
        dev: phys(),
        up: false,
    });
    v.push(Op::Rename {
        dev: phys(),
        to: n.host.clone(),
    });
    v.push(Op::SetMac {
        dev: phys(),
        mac: l.mac.clone(),
    });
    v.push(Op::SetFlags {
        dev: phys(),
        promisc: l.flags & IFF_PROMISC != 0,
        noarp: l.flags & IFF_NOARP != 0,
    });
    if let Some(d) = s.ipv6_disabled {
        v.push(Op::SetIpv6Disabled {
            name: n.host.clone(),
            disabled: d,
        });
    }
    if let Some(m) = l.master {
        v.push(Op::SetMaster {
            dev: phys(),
            master: Some(m),
        });
    }
    if l.flags & IFF_UP != 0 {
        v.push(Op::SetUp {
            dev: phys(),
            up: true,
        });
    }
    for a in &s.addrs {
        v.push(Op::AddAddr {
            dev: phys(),
            addr: a.clone(),
        });
    }
    for n in &s.neighs {
        v.push(Op::AddNeigh {
            dev: phys(),
            neigh: n.clone(),
        });
    }
    for r in add_order(&s.routes) {
        v.push(Op::AddRoute {
            dev: phys(),
            route: r.clone(),
        });
    }
    v
}

impl fmt::Display for Dev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dev::Index(i) => write!(f, "link #{i}"),
            Dev::Name(n) => f.write_str(n),
        }
    }
}

fn mac_text(m: &[u8]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The operation in words, as `--dry-run` prints it (`ip` commands where
/// one says the same).
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::SetUp { dev, up } => {
                write!(f, "set {dev} {}", if *up { "up" } else { "down" })
            }
            Op::SetMaster {
                dev,
                master: Some(m),
            } => write!(f, "set {dev} master link #{m}"),
            Op::SetMaster { dev, master: None } => write!(f, "set {dev} nomaster"),
            Op::Rename { dev, to } => write!(f, "rename {dev} to {to}"),
            Op::SetMac { dev, mac } => write!(f, "set {dev} address {}", mac_text(mac)),
            Op::SetFlags {
                dev,
                promisc,
                noarp,
            } => write!(
                f,
                "set {dev} promisc {} arp {}",
                if *promisc { "on" } else { "off" },
                if *noarp { "off" } else { "on" }
            ),
            Op::SetIpv6Disabled { name, disabled } => {
                write!(
                    f,
                    "sysctl net.ipv6.conf.{name}.disable_ipv6={}",
                    *disabled as u8
                )
            }
            Op::CreateVeth {
                name,
                peer,
                mtu,
                mac,
            } => write!(
                f,
                "add veth {name} address {} mtu {mtu} peer {peer}",
                mac_text(mac)
            ),
            Op::DeleteVeth { name } => write!(f, "delete veth {name} (and its peer)"),
            Op::AddAddr { dev, addr } => write!(f, "add address {} on {dev}", addr.describe()),
            Op::DelAddr { dev, addr } => write!(f, "delete address {} from {dev}", addr.describe()),
            Op::AddRoute { dev, route } => write!(f, "add route {} dev {dev}", route.describe()),
            Op::AddNeigh { dev, neigh } => {
                write!(f, "add neighbour {} permanent on {dev}", neigh.describe())
            }
            Op::DelNeigh { dev, neigh } => {
                write!(f, "delete neighbour {} from {dev}", neigh.describe())
            }
            Op::DelRoute { dev, route } => {
                write!(f, "delete route {} dev {dev}", route.describe())
            }
        }
    }
}

/// `op` in words with the links of `s` by name: IF as `#N (lan0)` (its
/// name changes during the plan, its ifindex does not), its bridge by name.
pub fn describe(op: &Op, s: &Snapshot) -> String {
    let mut t = op.to_string();
    if let (Some(m), Some(name)) = (s.link.master, &s.master_name) {
        t = t.replace(&format!("master link #{m}"), &format!("master {name}"));
    }
    t.replace(
        &format!("link #{}", s.link.ifindex),
        &format!("#{} ({})", s.link.ifindex, s.link.name),
    )
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
