//! End-to-end behaviour of `sluice run` with real kernel TCP between network
//! namespaces (sluice_lab::BridgeLab): the PRIQ ACK configuration under a
//! saturating upload, reloads under load, bad input, and IP traffic inside
//! 802.1Q / 802.1ad tags and PPPoE sessions.
//!
//! Needs root, `ip`, `ethtool`, `ping`, `ss`, `iperf3`, `python3`
//! (scripts/setup.sh); otherwise each test prints a SKIP line and returns,
//! or fails under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::QueuesReply;
use sluice_lab::iperf3::{self, ClientOptions, Iperf3Result};
use sluice_lab::{BridgeLab, CLIENT_IP, SERVER_IP};
use sluice_testkit::{
    bridge_lab, inject, inject_count, proc_status, require_io, require_netns, Serial, Sluice,
    INJECT,
};
use std::time::Duration;

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// Root and every tool of this file, else SKIP (a failure under CI).
const TOOLS: &[&str] = &["iperf3", "ss", "python3"];

fn netns() -> Option<Serial> {
    require_netns(TOOLS)
}

/// The classic configuration of issue #2 on a 512 kbit/s upload, with a
/// plain 4 Mbit/s download queue so the download has a rate to keep. With
/// `pair = false` the same rules send ACKs into q_def: the control case,
/// where they wait behind bulk data in a deep queue (200 packets, as deep as
/// a modem's buffer: seconds at this rate).
fn priq_conf(pair: bool) -> String {
    let q = if pair { "(q_def, q_pri)" } else { "q_def" };
    format!(
        "altq on $ext_if priq bandwidth 512Kb queue {{ q_pri, q_def }}\n\
         queue q_pri priority 7\n\
         queue q_def priority 1 qlimit 200 priq(default)\n\
         altq on $int_if priq bandwidth 4Mb queue {{ d_def }}\n\
         queue d_def priority 1 qlimit 50 priq(default)\n\
         pass out on $ext_if proto tcp from $ext_if to any flags S/SA keep state queue {q}\n\
         pass in  on $ext_if proto tcp from any to $ext_if flags S/SA keep state queue {q}\n"
    )
}

/// Download (server → client, measured at the receiving iperf3 server in
/// the client namespace) with a small window (32 KB), as hosts of the ALTQ era had:
/// its rate then depends on how long its ACKs wait (DESIGN.md §6).
fn download(lab: &BridgeLab, port: u16, seconds: u32) -> Iperf3Result {
    let mut o = ClientOptions::new(CLIENT_IP, port);
    o.seconds = seconds;
    o.omit_seconds = 2;
    o.window = Some("32K".into());
    iperf3::client(&lab.topo, &lab.server, &o)
        .unwrap_or_else(|e| panic!("download: {e}\n{}", lab.log()))
}

fn upload(lab: &BridgeLab, port: u16, seconds: u32) -> Iperf3Result {
    let mut o = ClientOptions::new(SERVER_IP, port);
    o.seconds = seconds;
    iperf3::client(&lab.topo, &lab.client, &o)
        .unwrap_or_else(|e| panic!("upload: {e}\n{}", lab.log()))
}

/// (download alone, download during a saturating upload) in bit/s.
fn ack_case(pair: bool) -> (f64, f64) {
    let mut lab = BridgeLab::new("ack").expect("namespaces");
    let b = bin();
    lab.start_sluice(&b, &priq_conf(pair), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let (client, server) = (lab.client.clone(), lab.server.clone());
    iperf3::server(&mut lab.topo, &client, 5301).unwrap();
    let solo = download(&lab, 5301, 6);
    iperf3::server(&mut lab.topo, &client, 5302).unwrap();
    iperf3::server(&mut lab.topo, &server, 5303).unwrap();
    let during = std::thread::scope(|s| {
        let lab = &lab;
        let up = s.spawn(move || upload(lab, 5303, 10));
        // Let the upload fill q_def before the download starts.
        std::thread::sleep(Duration::from_secs(2));
        let d = download(lab, 5302, 6);
        let u = up.join().unwrap();
        assert!(
            u.goodput_bps > 0.3e6,
            "the upload must saturate its 512 kbit/s: {}",
            u.goodput_bps
        );
        d
    });
    let st = lab.stop_sluice().unwrap();
    assert!(
        st.is_some_and(|s| s.success()),
        "sluice did not stop cleanly\n{}",
        lab.log()
    );
    (solo.goodput_bps, during.goodput_bps)
}

#[test]
fn priq_empty_acks_keep_the_download_alive_during_an_upload() {
    let Some(_serial) = netns() else {
        return;
    };
    let (solo, during) = ack_case(true);
    let (c_solo, c_during) = ack_case(false);
    eprintln!(
        "netns_e2e: download with queue (q_def, q_pri): {:.0} -> {:.0} kbit/s ({:.0} %); \
         with queue q_def only: {:.0} -> {:.0} kbit/s ({:.0} %)",
        solo / 1e3,
        during / 1e3,
        100.0 * during / solo,
        c_solo / 1e3,
        c_during / 1e3,
        100.0 * c_during / c_solo
    );
    assert!(
        during >= 0.8 * solo,
        "ACK priority must keep ≥ 80 % of the solo download: {during} of {solo}"
    );
    // The control: without the pair the ACKs queue behind bulk data and the
    // window-limited download collapses. If it did not, this test proves nothing.
    assert!(
        c_during < 0.6 * c_solo,
        "control did not collapse: {c_during} of {c_solo}"
    );
}

const HFSC_10M: &str = "altq on $ext_if hfsc bandwidth 10Mb queue { up }\n\
    queue up bandwidth 100% qlimit 50 hfsc(default upperlimit 100%)\n\
    pass out on $ext_if keep state queue up\n";

#[test]
fn reload_under_load_refuses_bad_files_and_keeps_flows_alive() {
    let Some((_serial, mut lab)) = bridge_lab("rld", TOOLS) else {
        return;
    };
    let b = bin();
    lab.start_sluice(&b, HFSC_10M, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let server = lab.server.clone();
    iperf3::server(&mut lab.topo, &server, 5311).unwrap();
    let bad = lab.dir.join("bad.conf");
    std::fs::write(
        &bad,
        "altq on $ext_if hfsc bandwidth 10Mb queue { up }\nqueue up qlimit 70000 hfsc(default)\n",
    )
    .unwrap();
    let good = lab.dir.join("good.conf");
    std::fs::write(&good, HFSC_10M.replace("qlimit 50", "qlimit 40")).unwrap();
    let (bad, good) = (
        bad.to_string_lossy().into_owned(),
        good.to_string_lossy().into_owned(),
    );
    let r = std::thread::scope(|s| {
        let lab = &lab;
        let up = s.spawn(move || upload(lab, 5311, 8));
        std::thread::sleep(Duration::from_secs(2));
        let out = lab.ctl(&b, &["reload", "-f", &bad]).unwrap();
        assert_eq!(out.status.code(), Some(1), "bad reload must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("qlimit") && err.contains("65535"),
            "diagnostic expected: {err}"
        );
        std::thread::sleep(Duration::from_secs(2));
        let out = lab.ctl(&b, &["reload", "-f", &good]).unwrap();
        assert!(
            out.status.success(),
            "good reload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let msg = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(msg.contains("kept"), "{msg}");
        up.join().unwrap()
    });
    // The flow lived through both reloads at the shaped rate: 10 Mbit/s of
    // frames carry 10 × 1448/1514 Mbit/s of payload; allow 5 % for the
    // reload moments.
    let want = 10e6 * 1448.0 / 1514.0;
    assert!(
        (r.goodput_bps - want).abs() / want < 0.05,
        "goodput {} vs {want} across reloads\n{}",
        r.goodput_bps,
        lab.log()
    );
    let q = lab.queues(&b).expect("show queues --json");
    assert!(
        q.ifaces
            .iter()
            .flat_map(|i| &i.queues)
            .any(|q| q.qlimit == Some(40)),
        "new qlimit in force: {q:?}"
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}

#[test]
fn bad_input_is_counted_and_forwarding_goes_on() {
    let Some((_serial, mut lab)) = bridge_lab("bad", TOOLS) else {
        return;
    };
    let b = bin();
    // UDP creates states (the flood fills the table); ICMP passes without
    // one, so the ping below checks forwarding, not the state limit.
    let conf = "set limit states 1000\n\
        altq on $ext_if hfsc bandwidth 10Mb queue { up }\n\
        queue up bandwidth 100% qlimit 50 hfsc(default upperlimit 100%)\n\
        pass out on $ext_if proto udp keep state queue up\n";
    lab.start_sluice(&b, conf, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = lab.sluice_pid().unwrap();
    let rss_before = proc_status(pid, "VmRSS");
    let mut malformed_sent = 0;
    for mode in ["truncated", "bad_ihl", "bad_total_len", "v6_ext_chain"] {
        malformed_sent += inject_count(&lab, mode, CLIENT_IP, 200);
    }
    inject_count(&lab, "fragments", CLIENT_IP, 200);
    let flood = inject_count(&lab, "flood", CLIENT_IP, 5000);
    assert_eq!(flood, 5000);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        lab.sluice_alive(),
        "sluice died on bad input:\n{}",
        lab.log()
    );
    assert!(
        lab.ping_once(),
        "forwarding stopped after bad input:\n{}",
        lab.log()
    );

    let v = lab.info(&b).expect("show info --json");
    let lan = &v.counters[0];
    let (malformed, state_limit) = (lan.malformed, lan.state_limit);
    eprintln!(
        "netns_e2e: sent {malformed_sent} malformed frames, sluice counted {malformed}; \
         flood of 5000 5-tuples: {state_limit} refused at the state limit, {} states; RSS {} -> {} KiB",
        v.states,
        rss_before,
        proc_status(pid, "VmRSS")
    );
    assert_eq!(malformed, malformed_sent, "every malformed frame counted");
    assert!(v.states <= 1000, "state table over its limit");
    // Each flood state is unanswered: a new one evicts one (counted), or is
    // refused when the bounded scan finds none (counted).
    assert!(
        state_limit + v.state_evictions >= 3000,
        "flood beyond the limit must be refused or evict, and be counted ({} evicted)",
        v.state_evictions
    );
    // Memory stays bounded: the state table is capped and frames are pooled.
    assert!(
        proc_status(pid, "VmRSS") < rss_before + 64 * 1024,
        "RSS grew by more than 64 MiB"
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}

/// (frames, bytes) of an encapsulated mode: bytes are whole frames as sent.
fn inject_encap(lab: &BridgeLab, mode: &str, count: u32) -> (u64, u64) {
    let out = inject(lab, mode, CLIENT_IP, count);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// A queue's (packets, bytes) from `show queues --json`.
fn queue_counts(v: &QueuesReply, iface: &str, queue: &str) -> (u64, u64) {
    let q = v
        .ifaces
        .iter()
        .find(|i| i.name == iface)
        .and_then(|i| i.queues.iter().find(|q| q.name == queue))
        .unwrap_or_else(|| panic!("no queue {queue} on {iface}: {v:?}"));
    (q.packets, q.bytes)
}

/// A DSL router behind sluice speaks PPPoE to the bridged modem, and a
/// provider may hand over traffic inside VLAN tags: sluice must classify
/// the IP packet inside (the rule matches UDP port 5060 in every form),
/// charge the frame with its tags and PPPoE header, and forward it
/// unchanged. The frames are made by hand (this kernel has no 8021q or
/// pppoe module to make them), so this also covers tags the receiving
/// kernel strips before AF_PACKET sees them (sluice puts them back: from
/// the ring's slot header, or from PACKET_AUXDATA with recvmmsg), and
/// AF_XDP, which sees them before the kernel strips anything: all three
/// receive paths are run.
#[test]
fn vlan_qinq_and_pppoe_traffic_is_classified_charged_and_forwarded() {
    let Some(_serial) = netns() else {
        return;
    };
    for io in ["xdp", "ring", "mmsg"] {
        encap_case(io);
    }
}

fn encap_case(io: &str) {
    let mut lab = BridgeLab::new("l2").expect("namespaces");
    let b = bin();
    let conf = "altq on $ext_if priq bandwidth 100Mb queue { q_voice, q_def }\n\
        queue q_voice priority 7 qlimit 500\n\
        queue q_def priority 1 qlimit 500 priq(default)\n\
        pass out on $ext_if proto udp from any to any port 5060 keep state queue q_voice\n";
    lab.start_sluice(&b, conf, &["--io", io])
        .unwrap_or_else(|e| panic!("{e}"));
    // Each receive path is the point: none may pass on another's back.
    if !require_io(&lab, &b, io) {
        return;
    }
    let before = lab.queues(&b).unwrap();
    let voice0 = queue_counts(&before, "wan0", "q_voice");
    let def0 = queue_counts(&before, "wan0", "q_def");

    let server = lab.server.clone();
    let cap_out = lab.dir.join("capture.json");
    let cap = lab
        .topo
        .spawn_split(
            &server,
            &["python3", INJECT, "capture", "v0", "4"],
            &cap_out,
            &lab.dir.join("capture.err"),
        )
        .unwrap();
    // The capture socket must exist before the first frame leaves.
    std::thread::sleep(Duration::from_millis(700));
    let n = 100;
    let mut voice = (0, 0);
    let mut sent = std::collections::BTreeMap::new();
    for mode in ["vlan", "qinq", "pppoe4", "pppoe6"] {
        let (f, by) = inject_encap(&lab, mode, n);
        assert_eq!(f, u64::from(n));
        voice = (voice.0 + f, voice.1 + by);
        sent.insert(mode, f);
    }
    let (bulk, bulk_bytes) = inject_encap(&lab, "vlan_bulk", n);
    sent.insert("vlan_bulk", bulk);
    // Not IP at all: forwarded as it is, counted as non-IP.
    let (nonip, _) = inject_encap(&lab, "nonip", n);
    sent.insert("nonip", nonip);
    // The capture ends by itself after its 4 s.
    let status = lab.topo.wait(cap, Duration::from_secs(10)).unwrap();
    assert!(status.is_some_and(|s| s.success()), "capture failed");
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cap_out).unwrap()).expect("capture JSON");

    let after = lab.queues(&b).unwrap();
    let v1 = queue_counts(&after, "wan0", "q_voice");
    let d1 = queue_counts(&after, "wan0", "q_def");
    let info = lab.info(&b).unwrap();
    eprintln!(
        "netns_e2e: --io {io}: encapsulated frames sent {sent:?}, seen by the server {seen}; \
         q_voice +{} packets +{} bytes (sent {} frames, {} bytes); q_def +{} packets; \
         lan0 malformed {} non-ip {}",
        v1.0 - voice0.0,
        v1.1 - voice0.1,
        voice.0,
        voice.1,
        d1.0 - def0.0,
        info.counters[0].malformed,
        info.counters[0].non_ip,
    );
    for (mode, n) in &sent {
        assert_eq!(
            seen[mode].as_u64(),
            Some(*n),
            "{io}: {mode}: every frame reaches the server ({seen})\n{}",
            lab.log()
        );
    }
    assert_eq!(
        (v1.0 - voice0.0, v1.1 - voice0.1),
        voice,
        "{io}: every port-5060 packet in q_voice, charged its whole frame"
    );
    assert!(
        d1.0 - def0.0 >= bulk && d1.1 - def0.1 >= bulk_bytes,
        "the tagged bulk frames in the default queue"
    );
    assert_eq!(info.counters[0].malformed, 0);
    assert!(
        info.counters[0].non_ip >= nonip,
        "{io}: non-IP frames counted as such"
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}

/// IPv6 needs neighbour discovery (multicast solicitations, unicast
/// advertisements) to cross the bridge before the first echo can: with no
/// static neighbours, a ping between two ULAs inside the lab proves it.
#[test]
fn ipv6_neighbour_discovery_and_ping_cross_sluice() {
    let Some((_serial, mut lab)) = bridge_lab("v6", TOOLS) else {
        return;
    };
    let b = bin();
    lab.start_sluice(&b, "pass keep state\n", &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let (client, server) = (lab.client.clone(), lab.server.clone());
    for (ns, ifc, addr) in [(&client, "c0", "fd77::1/64"), (&server, "v0", "fd77::2/64")] {
        lab.topo
            .ip(ns, &["-6", "addr", "add", addr, "dev", ifc, "nodad"])
            .unwrap();
    }
    let out = lab
        .topo
        .exec_unchecked(
            &client,
            &["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd77::2"],
        )
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "ping6 through sluice failed:\n{text}\n{}",
        lab.log()
    );
    let neigh = lab
        .topo
        .ip(&client, &["-6", "neigh", "show", "fd77::2"])
        .unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
    assert!(
        neigh.contains("lladdr"),
        "the neighbour was learned by ND through sluice: {neigh}"
    );
    eprintln!(
        "netns_e2e: ping6 through sluice: {}",
        text.lines().last().unwrap_or("")
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
