//! Learned-address poisoning (issue #12 item 3), end to end: `sluice run`
//! with the README's ACK-priority rules (`from $ext_if`) between network
//! namespaces (sluice_lab::BridgeLab).
//!
//! A LAN host sends frames from 300 spoofed source addresses; then a new
//! host joins the LAN (a second address on the client's link, announced by
//! gratuitous ARP as RFC 5227 hosts do) and downloads: its empty ACKs must
//! still go to q_pri, i.e. `from $ext_if` still matches it, and `show info`
//! lists it. Then 1000 spoofed ARP claims must not push it out.
//!
//! Needs root, `ip`, `ping`, `iperf3`, `python3`; otherwise SKIP (a failure
//! under `SLUICE_REQUIRE_NETNS=1`, sluice-testkit).

use sluice_control::proto::InfoReply;
use sluice_lab::{BridgeLab, CLIENT_IP, SERVER_IP};
use sluice_testkit::{inject_count, require_netns, Sluice};

/// The host that joins after the flood, on the client's link.
const NEW_IP: &str = "10.77.0.3";

/// README's PRIQ ACK configuration (issue #2).
const CONF: &str = "\
altq on $ext_if priq bandwidth 100Mb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 priq(default)
pass out on $ext_if proto tcp from $ext_if to any flags S/SA keep state queue (q_def, q_pri)
pass in  on $ext_if proto tcp from any to $ext_if flags S/SA keep state queue (q_def, q_pri)
";

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// Packets q_pri has sent on wan0.
fn q_pri(lab: &BridgeLab) -> u64 {
    let q = lab.queues(&bin()).unwrap_or_else(|e| panic!("{e}"));
    q.ifaces
        .iter()
        .filter(|i| i.name == "wan0")
        .flat_map(|i| &i.queues)
        .find(|q| q.name == "q_pri")
        .map_or(0, |q| q.packets)
}

/// A 2 s download from the server to `NEW_IP` (iperf3 -R bound to it): the
/// new host's empty ACKs cross wan0.
fn download_to_new_host(lab: &mut BridgeLab, port: u16) {
    let server = lab.server.clone();
    sluice_lab::iperf3::server(&mut lab.topo, &server, port).unwrap();
    let p = port.to_string();
    lab.topo
        .exec(
            &lab.client,
            &[
                "iperf3", "-c", SERVER_IP, "-p", &p, "-B", NEW_IP, "-R", "-t", "2",
            ],
        )
        .unwrap_or_else(|e| panic!("download: {e}\n{}", lab.log()));
}

fn learned(info: &InfoReply, iface: &str) -> (Vec<String>, u64) {
    info.learned_addrs
        .iter()
        .find(|l| l.iface == iface)
        .map_or((Vec::new(), 0), |l| {
            (l.addrs.iter().map(|a| a.addr.clone()).collect(), l.refused)
        })
}

/// A running sluice (`extra` arguments) and `NEW_IP` on the client's link,
/// known to the server by a static neighbour entry: nothing ARPs for it.
fn lab_with_new_host(tag: &str, extra: &[&str]) -> (BridgeLab, String) {
    let mut lab = BridgeLab::new(tag).expect("namespaces");
    let b = bin();
    lab.start_sluice(&b, CONF, extra)
        .unwrap_or_else(|e| panic!("{e}"));
    let (client, server) = (lab.client.clone(), lab.server.clone());
    lab.topo
        .ip(
            &client,
            &["addr", "add", &format!("{NEW_IP}/24"), "dev", "c0"],
        )
        .unwrap();
    let cmac = lab.topo.mac(&client, "c0").unwrap();
    lab.topo.neigh(&server, "v0", NEW_IP, &cmac).unwrap();
    (lab, b)
}

#[test]
fn spoofed_sources_do_not_poison_from_ext_if() {
    let Some(_serial) = require_netns(&["iperf3", "python3"]) else {
        return;
    };
    let (mut lab, b) = lab_with_new_host("lrn", &[]);

    // One LAN host sends from 300 spoofed sources (more than the 256 slots).
    assert_eq!(inject_count(&lab, "spoof", CLIENT_IP, 300), 300);
    // A new host joins and announces itself, then downloads.
    assert_eq!(inject_count(&lab, "announce", NEW_IP, 1), 1);
    let before = q_pri(&lab);
    download_to_new_host(&mut lab, 5411);
    let after_flood = q_pri(&lab) - before;
    let info = lab.info(&b).unwrap_or_else(|e| panic!("{e}"));
    let (addrs, _) = learned(&info, "wan0");
    eprintln!(
        "netns_learn: after 300 spoofed sources, the new host's download put \
         {after_flood} empty ACKs into q_pri; learned on wan0: {addrs:?}"
    );
    assert!(
        after_flood >= 50,
        "`from $ext_if` must match the new host after a spoofed flood: \
         {after_flood} packets in q_pri\n{}",
        lab.log()
    );
    assert!(addrs.iter().any(|a| a == NEW_IP), "{addrs:?}");
    assert!(
        addrs.iter().any(|a| a == CLIENT_IP),
        "the client ARPed at start: {addrs:?}"
    );
    assert!(
        !addrs.iter().any(|a| a.starts_with("10.200.")),
        "spoofed sources learned: {addrs:?}"
    );

    // 1000 spoofed ARP claims (from the client's MAC): they take that
    // MAC's free slots, not the new host's.
    assert_eq!(inject_count(&lab, "arp_spoof", CLIENT_IP, 1000), 1000);
    let before = q_pri(&lab);
    download_to_new_host(&mut lab, 5412);
    let after_arp = q_pri(&lab) - before;
    let info = lab.info(&b).unwrap_or_else(|e| panic!("{e}"));
    let (addrs, refused) = learned(&info, "wan0");
    eprintln!(
        "netns_learn: after 1000 spoofed ARP claims: {after_arp} empty ACKs \
         into q_pri, {} addresses learned, {refused} refused",
        addrs.len()
    );
    assert!(after_arp >= 50, "{after_arp} packets in q_pri");
    assert!(addrs.iter().any(|a| a == NEW_IP), "pushed out: {addrs:?}");
    // The claims came from the client's MAC: they fill its quota
    // (MAX_ADDRS_PER_MAC), the rest are refused.
    assert_eq!(addrs.len(), 32, "the client MAC's quota in use");
    assert!(refused > 0);
    let shown = lab
        .ctl(&b, &["show", "info"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        shown.contains("Learned Addresses of lan0, wan0") && shown.contains(NEW_IP),
        "{shown}"
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}

/// `--iface-addr wan0=NEW_IP`: `from $ext_if` is that address, learned from
/// nothing (the new host never announces itself) and deaf to floods; `show
/// info` says so. Main: no such option, sluice does not start.
#[test]
fn a_configured_ext_if_address_needs_no_learning() {
    let Some(_serial) = require_netns(&["iperf3", "python3"]) else {
        return;
    };
    let (mut lab, b) = lab_with_new_host("lrc", &["--iface-addr", &format!("wan0={NEW_IP}")]);
    assert_eq!(inject_count(&lab, "spoof", CLIENT_IP, 300), 300);
    assert_eq!(inject_count(&lab, "arp_spoof", CLIENT_IP, 300), 300);
    let before = q_pri(&lab);
    download_to_new_host(&mut lab, 5413);
    let pri = q_pri(&lab) - before;
    let info = lab.info(&b).unwrap_or_else(|e| panic!("{e}"));
    let wan = info.learned_addrs.iter().find(|l| l.iface == "wan0");
    eprintln!("netns_learn: configured {NEW_IP}: {pri} empty ACKs into q_pri; wan0: {wan:?}");
    assert!(pri >= 50, "{pri} packets in q_pri\n{}", lab.log());
    let wan = wan.expect("wan0 in show info");
    assert_eq!(wan.configured, [format!("{NEW_IP}/32")]);
    assert!(
        wan.addrs.is_empty(),
        "a configured interface learns nothing"
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
