use super::*;
use crate::rtnl::{Neigh, NUD_PERMANENT, RTA_DST, RTA_OIF};

fn addr(last: u8, prefixlen: u8) -> Addr {
    Addr {
        family: libc::AF_INET as u8,
        prefixlen,
        flags: 0,
        scope: 0,
        ifindex: 7,
        attrs: vec![(crate::rtnl::IFA_LOCAL, vec![10, 0, 1, last])],
    }
}

fn route(net: u8) -> Route {
    Route {
        family: libc::AF_INET as u8,
        dst_len: 24,
        src_len: 0,
        tos: 0,
        table: 254,
        protocol: 4,
        scope: 0,
        kind: 1,
        flags: 0,
        attrs: vec![
            (RTA_DST, vec![10, 0, net, 0]),
            (RTA_OIF, 7u32.to_ne_bytes().to_vec()),
        ],
    }
}

fn neigh() -> Neigh {
    Neigh {
        family: libc::AF_INET as u8,
        ifindex: 7,
        state: NUD_PERMANENT,
        flags: 0,
        kind: 0,
        attrs: vec![(1, vec![10, 0, 1, 9])],
    }
}

fn snap(master: Option<i32>) -> Snapshot {
    Snapshot {
        link: LinkInfo {
            ifindex: 7,
            flags: IFF_UP,
            name: "lan0".into(),
            master,
            kind: None,
            alias: None,
            mtu: 1500,
            mac: vec![0x52, 0x54, 0, 1, 2, 3],
        },
        master_name: master.map(|_| "br-lan".into()),
        addrs: vec![addr(1, 24), addr(2, 24)],
        routes: vec![route(9)],
        neighs: vec![neigh()],
        ipv6_disabled: Some(false),
    }
}

fn ops(plan: &[Step]) -> Vec<Op> {
    plan.iter().map(|s| s.op.clone()).collect()
}

fn pos(v: &[Op], want: impl Fn(&Op) -> bool) -> usize {
    v.iter()
        .position(want)
        .expect("the operation is in the plan")
}

#[test]
fn names_fit_ifnamsiz_and_the_mac_is_local_unicast() {
    assert_eq!(phys_name(7), "slp7");
    assert!(phys_name(i32::MAX).len() <= IFNAME_MAX);
    assert!(peer_name(i32::MAX).len() <= IFNAME_MAX);
    let m = phys_mac(0x0102_0304);
    assert_eq!(m, vec![0x02, 0x73, 0x6c, 0x02, 0x03, 0x04]);
    assert_eq!(m[0] & 0x03, 0x02, "locally administered, not multicast");
}

#[test]
fn the_host_end_takes_ifs_name_mac_mtu_bridge_addresses_and_routes() {
    let s = snap(Some(3));
    let v = ops(&attach(&s, &[]).unwrap());
    let host = Dev::Name("lan0".into());
    let phys = Dev::Index(7);
    let create = pos(&v, |o| matches!(o, Op::CreateVeth { .. }));
    assert_eq!(
        v[create],
        Op::CreateVeth {
            name: "lan0".into(),
            peer: "slv7".into(),
            mtu: 1500,
            mac: s.link.mac.clone()
        }
    );
    let rename = pos(&v, |o| {
        *o == Op::Rename {
            dev: phys.clone(),
            to: "slp7".into(),
        }
    });
    let down = pos(&v, |o| {
        *o == Op::SetUp {
            dev: phys.clone(),
            up: false,
        }
    });
    assert!(down < rename, "a link is renamed only while down");
    assert!(rename < create, "the name is free before the veth takes it");
    let join = pos(&v, |o| {
        *o == Op::SetMaster {
            dev: host.clone(),
            master: Some(3),
        }
    });
    assert!(join > create);
    assert!(v.contains(&Op::SetMaster {
        dev: phys.clone(),
        master: None
    }));
    assert!(v.contains(&Op::SetMac {
        dev: phys.clone(),
        mac: phys_mac(7)
    }));
    assert!(v.contains(&Op::SetFlags {
        dev: phys.clone(),
        promisc: true,
        noarp: true
    }));
    let added: Vec<_> = v
        .iter()
        .filter_map(|o| match o {
            Op::AddAddr { dev, addr } if *dev == host => Some(addr.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(added, s.addrs, "in the kernel's order");
    let first_route = pos(&v, |o| matches!(o, Op::AddRoute { .. }));
    let last_addr = v
        .iter()
        .rposition(|o| matches!(o, Op::AddAddr { .. }))
        .unwrap();
    assert!(first_route > last_addr, "a gateway needs its address first");
    assert_eq!(
        v.last(),
        Some(&Op::AddRoute {
            dev: host,
            route: route(9)
        })
    );
}

#[test]
fn no_master_no_bridge_steps() {
    let v = ops(&attach(&snap(None), &[]).unwrap());
    assert!(!v.iter().any(|o| matches!(o, Op::SetMaster { .. })));
}

#[test]
fn a_full_rollback_restores_addresses_in_order_then_routes() {
    let s = snap(Some(3));
    let plan = attach(&s, &[]).unwrap();
    let back = rollback(&plan, plan.len());
    let phys = Dev::Index(7);
    assert_eq!(
        back[0],
        Op::SetUp {
            dev: phys.clone(),
            up: false
        }
    );
    let del = pos(&back, |o| matches!(o, Op::DeleteVeth { .. }));
    let rename = pos(&back, |o| {
        *o == Op::Rename {
            dev: phys.clone(),
            to: "lan0".into(),
        }
    });
    assert!(del < rename, "the name is freed before IF takes it back");
    let adds: Vec<_> = back
        .iter()
        .filter_map(|o| match o {
            Op::AddAddr { addr, .. } => Some(addr.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(adds, s.addrs, "primary before secondary");
    let master = pos(&back, |o| {
        *o == Op::SetMaster {
            dev: phys.clone(),
            master: Some(3),
        }
    });
    let up = pos(&back, |o| {
        *o == Op::SetUp {
            dev: phys.clone(),
            up: true,
        }
    });
    let addr = pos(&back, |o| matches!(o, Op::AddAddr { .. }));
    assert!(rename < master && master < up && up < addr);
    assert_eq!(
        back.last(),
        Some(&Op::AddRoute {
            dev: phys,
            route: route(9)
        })
    );
    assert!(back.contains(&Op::SetMac {
        dev: Dev::Index(7),
        mac: s.link.mac.clone()
    }));
}

#[test]
fn a_rollback_undoes_only_the_steps_done() {
    let s = snap(Some(3));
    let plan = attach(&s, &[]).unwrap();
    assert!(rollback(&plan, 0).is_empty());
    // Failing at the first step after the route went: only it comes back.
    assert_eq!(
        rollback(&plan, 1),
        vec![Op::AddRoute {
            dev: Dev::Index(7),
            route: route(9)
        }]
    );
    let rename = plan
        .iter()
        .position(|s| matches!(s.op, Op::Rename { .. }))
        .unwrap();
    let back = rollback(&plan, rename);
    assert!(!back.iter().any(|o| matches!(o, Op::Rename { .. })));
    assert!(back.contains(&Op::SetMaster {
        dev: Dev::Index(7),
        master: Some(3)
    }));
    assert!(rollback(&plan, usize::MAX).len() == rollback(&plan, plan.len()).len());
}

#[test]
fn a_link_that_was_down_stays_down() {
    let mut s = snap(None);
    s.link.flags = 0;
    let plan = attach(&s, &[]).unwrap();
    let back = rollback(&plan, plan.len());
    assert!(!back.contains(&Op::SetUp {
        dev: Dev::Index(7),
        up: true
    }));
    assert!(!detach(&s, true).contains(&Op::SetUp {
        dev: Dev::Index(7),
        up: true
    }));
}

#[test]
fn detach_restores_the_snapshot_and_deletes_the_veth_only_if_there() {
    let s = snap(Some(3));
    let v = detach(&s, true);
    assert_eq!(
        v[0],
        Op::DeleteVeth {
            name: "lan0".into()
        }
    );
    assert!(!detach(&s, false)
        .iter()
        .any(|o| matches!(o, Op::DeleteVeth { .. })));
    // The same operations as a full rollback, as a set: one restoration.
    let plan = attach(&s, &[]).unwrap();
    let mut a = rollback(&plan, plan.len());
    // The sysctl names IF as it is called then (the test below).
    a.retain(|o| {
        *o != Op::SetUp {
            dev: Dev::Index(7),
            up: false,
        } && !matches!(o, Op::SetIpv6Disabled { .. })
    });
    for o in &a {
        assert!(v.contains(o), "{o} is missing from detach");
    }
}

#[test]
fn what_cannot_be_restored_exactly_is_refused() {
    let s = snap(None);
    let e = attach(&s, &[route(5)]).unwrap_err();
    assert!(e.0.contains("multipath route 10.0.5.0/24"), "{e}");
    let mut t = snap(None);
    t.link.name = "slp7".into();
    assert!(attach(&t, &[]).unwrap_err().0.contains("attached already"));
    t.link.name = "slpine".into();
    assert!(attach(&t, &[]).is_ok(), "only slp<digits> is sluice's");
    let mut b = snap(None);
    b.link.kind = Some("bridge".into());
    assert!(attach(&b, &[]).unwrap_err().0.contains("a bridge"));
    b.link.kind = Some("vlan".into());
    assert!(
        attach(&b, &[]).is_ok(),
        "a VLAN interface (OpenWrt's eth0.2) is fine"
    );
    let mut p = snap(None);
    p.link.mac = Vec::new();
    assert!(attach(&p, &[]).unwrap_err().0.contains("not an Ethernet"));
}

#[test]
fn the_plan_reads_as_ip_commands() {
    let v = ops(&attach(&snap(Some(3)), &[]).unwrap());
    let text: Vec<String> = v.iter().map(|o| o.to_string()).collect();
    assert!(
        text.contains(&"rename link #7 to slp7".to_string()),
        "{text:?}"
    );
    assert!(
        text.contains(&"add veth lan0 address 52:54:00:01:02:03 mtu 1500 peer slv7".to_string())
    );
    assert!(text.contains(&"add address 10.0.1.1/24 on lan0".to_string()));
    assert!(text.contains(&"set link #7 promisc on arp off".to_string()));
}

/// Every sysctl of a restoration (`ops`) that names IF names it as it
/// is called at that point (IF starts as `name`; renames are followed).
/// A restoration never writes the host end's: the veth goes.
fn sysctls_name_if_as_it_is_then(ops: &[Op], mut name: String) {
    for o in ops {
        match o {
            Op::Rename {
                dev: Dev::Index(7),
                to,
            } => name = to.clone(),
            Op::SetIpv6Disabled { name: n, .. } => {
                assert_eq!(*n, name, "{o} while IF is called {name}")
            }
            _ => {}
        }
    }
}

#[test]
fn a_rollback_names_if_by_the_name_it_has_at_each_step() {
    let plan = attach(&snap(Some(3)), &[]).unwrap();
    let rename = plan
        .iter()
        .position(|s| matches!(s.op, Op::Rename { .. }))
        .unwrap();
    for done in 0..=plan.len() {
        let start = if done > rename { "slp7" } else { "lan0" };
        sysctls_name_if_as_it_is_then(&rollback(&plan, done), start.into());
    }
    sysctls_name_if_as_it_is_then(&detach(&snap(Some(3)), true), "slp7".into());
}

#[test]
fn described_with_names() {
    let s = snap(Some(3));
    let v = ops(&attach(&s, &[]).unwrap());
    let text: Vec<String> = v.iter().map(|o| describe(o, &s)).collect();
    assert!(
        text.contains(&"rename #7 (lan0) to slp7".to_string()),
        "{text:?}"
    );
    assert!(
        text.contains(&"set lan0 master br-lan".to_string()),
        "{text:?}"
    );
}

#[test]
fn permanent_neighbours_move_with_if_and_come_back() {
    let s = snap(None);
    let plan = attach(&s, &[]).unwrap();
    let v = ops(&plan);
    let host = Dev::Name("lan0".into());
    let phys = Dev::Index(7);
    let is_del = |o: &Op| matches!(o, Op::DelNeigh { dev, .. } if *dev == phys);
    let is_add = |o: &Op| matches!(o, Op::AddNeigh { dev, .. } if *dev == phys);
    let del = pos(&v, is_del);
    let del_addr = pos(&v, |o| matches!(o, Op::DelAddr { .. }));
    assert!(del < del_addr, "deleting IF's last address flushes them");
    assert!(v.contains(&Op::AddNeigh {
        dev: host,
        neigh: neigh()
    }));
    // Whatever step failed, a neighbour comes back after the addresses.
    for done in 0..=plan.len() {
        let back = rollback(&plan, done);
        if let Some(add) = back.iter().position(is_add) {
            assert!(
                !back[add..].iter().any(|o| matches!(o, Op::AddAddr { .. })),
                "failing at {done}: {back:?}"
            );
        }
    }
    let d = detach(&s, true);
    let add = pos(&d, is_add);
    assert!(!d[add..].iter().any(|o| matches!(o, Op::AddAddr { .. })));
}

/// dhcpcd's shape: the address `noprefixroute`, the subnet route (scope
/// link) added by the client after the default route via a gateway in
/// that subnet, so the kernel dumps the default route first.
fn dhcpcd_routes() -> Vec<Route> {
    let mut default = route(0);
    default.dst_len = 0;
    default.attrs = vec![
        (crate::rtnl::RTA_GATEWAY, vec![10, 0, 1, 254]),
        (RTA_OIF, 7u32.to_ne_bytes().to_vec()),
    ];
    let mut subnet = route(1);
    subnet.scope = 253;
    vec![default, subnet]
}

/// The routes of `v` that are added, in order.
fn added_routes(v: &[Op]) -> Vec<Route> {
    v.iter()
        .filter_map(|o| match o {
            Op::AddRoute { route, .. } => Some(route.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_gateways_link_route_is_added_before_the_route_via_it() {
    let mut s = snap(None);
    s.routes = dhcpcd_routes();
    let want = vec![s.routes[1].clone(), s.routes[0].clone()];
    let plan = attach(&s, &[]).unwrap();
    assert_eq!(added_routes(&ops(&plan)), want, "on the host end");
    assert_eq!(
        added_routes(&rollback(&plan, plan.len())),
        want,
        "by a rollback"
    );
    assert_eq!(added_routes(&detach(&s, true)), want, "by detach");
}
