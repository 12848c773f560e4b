//! The router's own daemons on an interface `sluice run --attach` takes
//! (issue #38): started before sluice, as at boot, bound to the
//! interface by name, they must keep serving while the name belongs to
//! the veth's host end (a new ifindex with the same addresses), and again
//! once sluice has given the interface back.
//!
//! What is proved, on `sluice_testkit::router`'s router:
//! - LAN: dnsmasq (`interface=lan0`, a DHCP range, a local name) in each
//!   of its socket modes — the default (one wildcard socket, filtering
//!   each packet by the interface it came in on), `bind-interfaces` (its
//!   DHCP socket `SO_BINDTODEVICE lan0`, by index) and `bind-dynamic` —
//!   with lan0 holding the address (a Debian box), and in the default
//!   mode on `br-lan` with lan0 one of its ports (OpenWrt): a LAN client
//!   gets the same lease (busybox udhcpc) and resolves the local name
//!   (busybox nslookup) before, while attached and after sluice stops.
//! - WAN: busybox udhcpc holding wan0's lease from a dnsmasq on the
//!   modem, through `--attach wan0 --attach-side wan --nat`: a renewal
//!   (SIGUSR1) and a release and new discovery (SIGUSR2, SIGUSR1: udhcpc's
//!   raw socket, bound by ifindex) while attached, and a renewal after.
//! - A lease applied as dhcpcd applies it (address `noprefixroute`, the
//!   subnet route and the default route `proto dhcp`, the default route
//!   dumped first) is moved and given back exactly.
//! - dhcpcd, which follows wan0 by ifindex (docs/deploy.md), restarted
//!   after sluice attached and again after it stopped, as the advice
//!   says, takes its lease through sluice and then directly.
//!
//! Needs root, `ip`, `ethtool`, `ping`, `tc`, `nft`, `bridge`, dnsmasq
//! (dnsmasq-base), busybox, dhcpcd (dhcpcd-base) and `unshare`
//! (scripts/setup.sh); otherwise each test prints a SKIP line and
//! returns, or fails under `SLUICE_REQUIRE_NETNS=1`.

use sluice_lab::netns::Netns;
use sluice_testkit::router::{RouterLab, LAN_IF, ROUTER_LAN_IP, SERVER_IP, SHAPER, WAN_IF};
use sluice_testkit::{require_netns, wait_for, Sluice};
use std::time::Duration;

const TOOLS: &[&str] = &["tc", "nft", "bridge", "dnsmasq", "busybox"];
const DAEMON_WAIT: Duration = Duration::from_secs(5);
const DAD_WAIT: Duration = Duration::from_secs(5);
/// The LAN's DHCP range and the name dnsmasq answers for itself.
const LAN_RANGE: &str = "--dhcp-range=10.81.1.100,10.81.1.150,255.255.255.0,1h";
const LOCAL_NAME: &str = "nas.lan";
const LOCAL_ADDR: &str = "10.81.1.77";
/// The modem's one lease: the address the router's WAN had statically.
const WAN_ADDR: &str = "10.81.2.1";
const MODEM_IP: &str = "10.81.2.2";

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// One lease for the first client: `busybox udhcpc` in the foreground,
/// quitting once bound (the broadcast flag set: dnsmasq then answers by
/// broadcast, as to any client that asks so). The leased address, or a
/// panic with udhcpc's and dnsmasq's words.
fn lan_lease(lab: &RouterLab, when: &str) -> String {
    let script = lab.udhcpc_script("lan-client", false).unwrap();
    let c = &lab.clients[0];
    let out = lab
        .topo
        .exec_unchecked(
            c,
            &[
                "busybox",
                "udhcpc",
                "-i",
                "c0",
                "-n",
                "-q",
                "-B",
                "-t",
                "6",
                "-T",
                "1",
                "-s",
                &script.display().to_string(),
            ],
        )
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let bound = text
        .lines()
        .find_map(|l| l.strip_prefix("bound ip="))
        .unwrap_or_else(|| {
            panic!(
                "no lease {when}:\n{text}\n--- dnsmasq:\n{}\n--- sluice:\n{}",
                lab.dnsmasq_log("lan"),
                lab.log()
            )
        });
    let want = format!(" router={ROUTER_LAN_IP} dns={ROUTER_LAN_IP}");
    assert!(bound.ends_with(&want), "lease {when}: {bound}");
    bound.split(' ').next().unwrap_or_default().to_string()
}

/// The first client resolves the local name through the router.
fn assert_resolves(lab: &RouterLab, when: &str) {
    let out = lab
        .topo
        .exec_unchecked(
            &lab.clients[0],
            &["busybox", "nslookup", "-type=a", LOCAL_NAME, ROUTER_LAN_IP],
        )
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("Address: {LOCAL_ADDR}")),
        "{LOCAL_NAME} {when}:\n{text}{}\n--- dnsmasq:\n{}",
        String::from_utf8_lossy(&out.stderr),
        lab.dnsmasq_log("lan")
    );
}

/// dnsmasq serves the LAN on `iface` in `mode` before, during and after
/// `--attach lan0`; `direct`: the router's address on lan0 itself (else
/// on `br-lan`, lan0 its port).
fn dnsmasq_through_attach(tag: &str, direct: bool, iface: &str, mode: Option<&str>) {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let mut lab = RouterLab::new(tag, "100mbit").expect("building the router's namespaces");
    if direct {
        lab.lan_direct().unwrap();
    }
    let interface = format!("--interface={iface}");
    let host = format!("--host-record={LOCAL_NAME},{LOCAL_ADDR}");
    let mut args = vec![interface.as_str(), LAN_RANGE, host.as_str()];
    args.extend(mode);
    let rt = lab.router.clone();
    let dns = lab
        .spawn_dnsmasq(&rt, "lan", &args, DAEMON_WAIT)
        .expect("dnsmasq");
    let first = lan_lease(&lab, "before sluice");
    assert_resolves(&lab, "before sluice");

    let id = lab.start_sluice(&b, SHAPER, &["--attach", LAN_IF]);
    assert_eq!(
        lan_lease(&lab, "while attached"),
        first,
        "the same lease (same MAC) while attached"
    );
    assert_resolves(&lab, "while attached");
    assert!(
        lab.reaches(&lab.clients[0], SERVER_IP, 5),
        "the LAN reaches the server while attached"
    );
    lab.stop_sluice(id);

    assert_eq!(lan_lease(&lab, "after sluice stopped"), first);
    assert_resolves(&lab, "after sluice stopped");
    assert!(
        lab.topo.try_status(dns).unwrap().is_none(),
        "dnsmasq exited:\n{}",
        lab.dnsmasq_log("lan")
    );
}

#[test]
fn dnsmasq_wildcard_serves_an_attached_lan() {
    dnsmasq_through_attach("dmw", true, LAN_IF, None);
}

#[test]
fn dnsmasq_bind_interfaces_serves_an_attached_lan() {
    dnsmasq_through_attach("dmb", true, LAN_IF, Some("--bind-interfaces"));
}

#[test]
fn dnsmasq_bind_dynamic_serves_an_attached_lan() {
    dnsmasq_through_attach("dmd", true, LAN_IF, Some("--bind-dynamic"));
}

#[test]
fn dnsmasq_on_the_bridge_of_an_attached_port() {
    dnsmasq_through_attach("dmr", false, "br-lan", None);
}

/// The DHCPACKs the modem's dnsmasq sent.
fn acks(lab: &RouterLab) -> usize {
    lab.dnsmasq_log("wan").matches("DHCPACK(m0)").count()
}

/// Waits for udhcpc's `n`-th event `kind` with the WAN address, and the
/// modem's ACK count above `acks_before`.
fn await_wan(lab: &RouterLab, kind: &str, n: usize, acks_before: usize, when: &str) {
    let want = format!("{kind} ip={WAN_ADDR} router={MODEM_IP}");
    let ok = wait_for(DAEMON_WAIT, || {
        let seen = lab
            .udhcpc_events("wan")
            .iter()
            .filter(|e| e.starts_with(&want))
            .count();
        seen >= n && acks(lab) > acks_before
    });
    assert!(
        ok,
        "no {kind} of {WAN_ADDR} {when}: {:?}\n--- modem's dnsmasq:\n{}\n--- sluice:\n{}",
        lab.udhcpc_events("wan"),
        lab.dnsmasq_log("wan"),
        lab.log()
    );
    let addr = lab.topo.ip(&lab.router, &["-4", "addr", "show", WAN_IF]);
    let addr = String::from_utf8_lossy(&addr.unwrap().stdout).into_owned();
    assert!(
        addr.contains(&format!("inet {WAN_ADDR}/24")),
        "{when}: {addr}"
    );
}

/// Counts the events `kind` udhcpc logged so far.
fn events(lab: &RouterLab, kind: &str) -> usize {
    lab.udhcpc_events("wan")
        .iter()
        .filter(|e| e.starts_with(&format!("{kind} ")))
        .count()
}

fn assert_lan_reaches_server(lab: &RouterLab, when: &str) {
    for c in &lab.clients {
        assert!(
            lab.reaches(c, SERVER_IP, 5),
            "{} cannot reach the server {when}\n{}",
            c.name(),
            lab.log()
        );
    }
}

#[test]
fn udhcpc_keeps_the_wan_lease_through_attach() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let mut lab = RouterLab::new("dwn", "100mbit").expect("building the router's namespaces");
    lab.wan_dynamic().unwrap();
    let (modem, rt): (Netns, Netns) = (lab.modem.clone(), lab.router.clone());
    let range = format!("--dhcp-range={WAN_ADDR},{WAN_ADDR},255.255.255.0,1h");
    let gw = format!("--dhcp-option=3,{MODEM_IP}");
    lab.spawn_dnsmasq(
        &modem,
        "wan",
        &["--interface=m0", "--port=0", &range, &gw],
        DAEMON_WAIT,
    )
    .expect("the modem's dnsmasq");
    let script = lab.udhcpc_script("wan", true).unwrap();
    let script = script.display().to_string();
    let udhcpc = lab
        .topo
        .spawn(
            &rt,
            &[
                "busybox", "udhcpc", "-f", "-i", WAN_IF, "-B", "-t", "5", "-T", "1", "-A", "1",
                "-s", &script,
            ],
            Some(&lab.dir.join("udhcpc-wan.out")),
        )
        .unwrap();
    await_wan(&lab, "bound", 1, 0, "at boot");
    assert_lan_reaches_server(&lab, "before sluice");

    let id = lab.start_sluice(
        &b,
        SHAPER,
        &["--attach", WAN_IF, "--attach-side", "wan", "--nat"],
    );
    assert_lan_reaches_server(&lab, "while attached");
    let (a, r) = (acks(&lab), events(&lab, "renew"));
    lab.topo.signal(udhcpc, "USR1").unwrap();
    await_wan(&lab, "renew", r + 1, a, "renewed while attached");
    // A release and a new discovery: udhcpc's raw socket, bound by index.
    let (a, bnd) = (acks(&lab), events(&lab, "bound"));
    lab.topo.signal(udhcpc, "USR2").unwrap();
    assert!(
        wait_for(DAEMON_WAIT, || lab
            .dnsmasq_log("wan")
            .contains("DHCPRELEASE(m0)")),
        "no release reached the modem: {:?}",
        lab.udhcpc_events("wan")
    );
    lab.topo.signal(udhcpc, "USR1").unwrap();
    await_wan(&lab, "bound", bnd + 1, a, "discovered again while attached");
    assert_lan_reaches_server(&lab, "after a new lease while attached");
    lab.stop_sluice(id);

    let (a, r) = (acks(&lab), events(&lab, "renew"));
    lab.topo.signal(udhcpc, "USR1").unwrap();
    await_wan(&lab, "renew", r + 1, a, "renewed after sluice stopped");
    assert_lan_reaches_server(&lab, "after sluice stopped");
    assert!(
        lab.topo.try_status(udhcpc).unwrap().is_none(),
        "udhcpc exited: {:?}",
        lab.udhcpc_events("wan")
    );
}

#[test]
fn a_dhcpcd_style_lease_moves_and_comes_back() {
    let Some(_serial) = require_netns(TOOLS) else {
        return;
    };
    let b = bin();
    let mut lab = RouterLab::new("dcd", "100mbit").expect("building the router's namespaces");
    lab.wan_dynamic().unwrap();
    let (t, rt) = (&lab.topo, &lab.router);
    let src = WAN_ADDR;
    // As dhcpcd applies a lease; the kernel dumps the default route first.
    for cmd in [
        vec![
            "addr",
            "add",
            "10.81.2.1/24",
            "dev",
            WAN_IF,
            "noprefixroute",
        ],
        vec![
            "route",
            "add",
            "10.81.2.0/24",
            "dev",
            WAN_IF,
            "proto",
            "dhcp",
            "scope",
            "link",
            "src",
            src,
            "metric",
            "1002",
        ],
        vec![
            "route", "add", "default", "via", MODEM_IP, "dev", WAN_IF, "proto", "dhcp", "src", src,
            "metric", "1002",
        ],
    ] {
        t.ip(rt, &cmd).unwrap();
    }
    let before = lab.state(DAD_WAIT).unwrap();
    assert_lan_reaches_server(&lab, "before sluice");
    let id = lab.start_sluice(&b, SHAPER, &["--attach", WAN_IF, "--attach-side", "wan"]);
    assert_lan_reaches_server(&lab, "while attached");
    lab.stop_sluice(id);
    let after = lab.state(DAD_WAIT).unwrap();
    assert_eq!(before.links, after.links, "ip -j addr");
    assert_eq!(before.routes, after.routes, "ip -j route");
    assert_lan_reaches_server(&lab, "after sluice stopped");
}

/// The valid lifetime (s) of [`WAN_ADDR`] on wan0, if it is there.
fn wan_lifetime(lab: &RouterLab) -> Option<u64> {
    let out = lab
        .topo
        .ip(&lab.router, &["-j", "-4", "addr", "show", WAN_IF])
        .ok()?;
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    links[0]["addr_info"]
        .as_array()?
        .iter()
        .find(|a| a["local"] == WAN_ADDR)?["valid_life_time"]
        .as_u64()
}

/// Waits for dhcpcd's lease: a new DHCPACK from the modem, and wan0
/// holding the address with a fresh lifetime (of the 120 s leases).
fn await_dhcpcd(lab: &RouterLab, acks_before: usize, when: &str) {
    let ok = wait_for(DAEMON_WAIT, || {
        acks(lab) > acks_before && wan_lifetime(lab).is_some_and(|l| l > 100)
    });
    let out = std::fs::read_to_string(lab.dir.join("dhcpcd.out")).unwrap_or_default();
    assert!(
        ok,
        "no lease of {WAN_ADDR} {when} (lifetime {:?}):\n{out}\n--- modem's dnsmasq:\n{}\n\
         --- sluice:\n{}",
        wan_lifetime(lab),
        lab.dnsmasq_log("wan"),
        lab.log()
    );
}

/// docs/deploy.md's advice for dhcpcd, which follows wan0 by ifindex:
/// restarted once sluice has attached, and again once it has stopped, it
/// takes its lease through sluice and then directly.
#[test]
fn dhcpcd_restarted_after_attach_and_after_stop_keeps_the_wan() {
    let tools: Vec<&str> = TOOLS.iter().copied().chain(["dhcpcd", "unshare"]).collect();
    let Some(_serial) = require_netns(&tools) else {
        return;
    };
    let b = bin();
    let mut lab = RouterLab::new("dcr", "100mbit").expect("building the router's namespaces");
    lab.wan_dynamic().unwrap();
    let modem = lab.modem.clone();
    let range = format!("--dhcp-range={WAN_ADDR},{WAN_ADDR},255.255.255.0,2m");
    let gw = format!("--dhcp-option=3,{MODEM_IP}");
    lab.spawn_dnsmasq(
        &modem,
        "wan",
        &["--interface=m0", "--port=0", &range, &gw],
        DAEMON_WAIT,
    )
    .expect("the modem's dnsmasq");
    let mut dhcpcd = lab.spawn_dhcpcd(WAN_IF).unwrap();
    await_dhcpcd(&lab, 0, "at boot");
    assert_lan_reaches_server(&lab, "before sluice");

    let id = lab.start_sluice(&b, SHAPER, &["--attach", WAN_IF, "--attach-side", "wan"]);
    lab.topo.stop(dhcpcd, "TERM").unwrap();
    let a = acks(&lab);
    dhcpcd = lab.spawn_dhcpcd(WAN_IF).unwrap();
    await_dhcpcd(&lab, a, "restarted while attached");
    assert_lan_reaches_server(&lab, "while attached");

    lab.stop_sluice(id);
    lab.topo.stop(dhcpcd, "TERM").unwrap();
    let a = acks(&lab);
    lab.spawn_dhcpcd(WAN_IF).unwrap();
    await_dhcpcd(&lab, a, "restarted after sluice stopped");
    assert_lan_reaches_server(&lab, "after sluice stopped");
}
