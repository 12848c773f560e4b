//! Bridge mode's learned interface addresses (issue #12 item 3), in virtual
//! time: what `from $ext_if` matches is what LAN-side hosts claimed in ARP/ND,
//! not whatever source address a frame carries; entries expire; a full set
//! replaces its least recently seen idle entry.
//!
//! Each test reads the classification from the queue counters (q_pri: `from
//! $ext_if` matched; q_def: it did not), which main has too.

use sluice_engine::{Engine, Options};
use sluice_time::{Duration, Instant};
use sluice_wire::build;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const LAN: usize = 0;
const WAN: usize = 1;
const HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
const GATEWAY: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);
const REMOTE: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const TTL: Duration = sluice_classify::LEARNED_ADDR_TTL;

/// UDP from `$ext_if`'s addresses goes to q_pri, everything else to q_def.
const CONF: &str = "
altq on $ext_if priq bandwidth 100Mb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 priq(default)
pass out on $ext_if proto udp from $ext_if to any no state queue q_pri
";

fn engine() -> Engine {
    let defines = vec![("ext_if".to_string(), "wan0".to_string())];
    let cfg = sluice_conf::check("learn.conf", CONF, &defines)
        .expect("valid")
        .config;
    Engine::new(&cfg, Options::bridge("lan0", "wan0", [5; 16])).expect("engine")
}

fn secs(s: u64) -> Instant {
    Instant::ZERO + Duration::from_secs(s)
}

fn v4(n: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0000 + n)
}

/// Sends one UDP datagram from `src` on the LAN side at `now` and says
/// whether it went to q_pri (`from $ext_if` matched).
fn matches_ext_if(e: &mut Engine, now: Instant, src: IpAddr) -> bool {
    let before = pri(e);
    let dst = match src {
        IpAddr::V4(_) => IpAddr::V4(REMOTE),
        IpAddr::V6(_) => IpAddr::V6(build::V6_DST),
    };
    e.handle_rx(now, LAN, build::udp(src, dst, 4000, 53, 20));
    while e.poll_tx(now, WAN).is_some() {}
    pri(e) > before
}

fn pri(e: &Engine) -> u64 {
    e.report()[WAN]
        .class("q_pri")
        .map_or(0, |c| c.passed_packets)
}

fn forward(e: &mut Engine, now: Instant, iface: usize, frame: Vec<u8>) {
    e.handle_rx(now, iface, frame);
    while e.poll_tx(now, LAN).is_some() || e.poll_tx(now, WAN).is_some() {}
}

/// Main: the 256 spoofed sources fill the learned set first come, and the
/// real host, who announced itself by ARP, never matches (0 of 1 to q_pri).
#[test]
fn spoofed_sources_are_not_learned() {
    let mut e = engine();
    for n in 0..1000 {
        forward(&mut e, secs(1), LAN, build::udp_v4(v4(n), REMOTE, 1, 2, 10));
    }
    forward(&mut e, secs(2), LAN, build::arp(HOST, GATEWAY));
    assert!(
        matches_ext_if(&mut e, secs(3), HOST.into()),
        "the host that ARPed is one of $ext_if's addresses"
    );
    assert!(!matches_ext_if(&mut e, secs(3), v4(5).into()));
    let (learned, _) = e.learned_addrs(WAN);
    assert_eq!(
        learned.iter().map(|l| l.addr).collect::<Vec<_>>(),
        [IpAddr::V4(HOST)]
    );
}

/// Main: any source is learned, so a host that never took part in ARP
/// matches too.
#[test]
fn arp_and_nd_claims_are_learned_plain_sources_are_not() {
    let mut e = engine();
    let silent = Ipv4Addr::new(192, 168, 1, 99);
    forward(&mut e, secs(1), LAN, build::arp_reply(HOST, GATEWAY));
    // A ULA: with no network configured only local ranges are learned.
    let v6 = Ipv6Addr::new(0xfd00, 0xdb8, 0, 0, 0, 0, 0, 0x10);
    forward(&mut e, secs(1), LAN, build::nd_advert(v6, v6));
    assert!(matches_ext_if(&mut e, secs(2), HOST.into()));
    assert!(matches_ext_if(&mut e, secs(2), v6.into()));
    assert!(!matches_ext_if(&mut e, secs(2), silent.into()));
    assert!(
        !matches_ext_if(&mut e, secs(2), silent.into()),
        "its own traffic did not teach it either"
    );
    // Claims from the WAN side are the remote network's, never ours.
    let remote_v4 = Ipv4Addr::new(192, 168, 1, 77);
    forward(&mut e, secs(2), WAN, build::arp_reply(remote_v4, HOST));
    assert!(!matches_ext_if(&mut e, secs(3), remote_v4.into()));
}

/// Main: never forgotten (still q_pri a day later).
#[test]
fn learned_addresses_expire_unless_seen() {
    let mut e = engine();
    let quiet = Ipv4Addr::new(192, 168, 1, 20);
    forward(&mut e, secs(1), LAN, build::arp(HOST, GATEWAY));
    forward(&mut e, secs(1), LAN, build::arp(quiet, GATEWAY));
    // HOST keeps talking (each datagram refreshes it); `quiet` does not.
    let step = TTL.as_nanos() / 4_000_000_000;
    for k in 1..=3 {
        assert!(matches_ext_if(&mut e, secs(1 + k * step), HOST.into()));
    }
    let later = secs(1) + TTL + Duration::from_secs(1);
    e.handle_timeout(later);
    assert!(!matches_ext_if(&mut e, later, quiet.into()), "forgotten");
    assert!(matches_ext_if(&mut e, later, HOST.into()), "kept alive");
    assert_eq!(e.learned_addrs(LAN).0.len(), 1);
    // An ARP again brings it back.
    forward(&mut e, later, LAN, build::arp(quiet, GATEWAY));
    assert!(matches_ext_if(&mut e, later, quiet.into()));
}

/// An ARP claim from `mac` (the frame's source and ARP sender).
fn arp_from(a: Ipv4Addr, mac: u8) -> Vec<u8> {
    let mut f = build::arp(a, GATEWAY);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0xee, mac]);
    f[22..28].copy_from_slice(&[2, 0, 0, 0, 0xee, mac]);
    f
}

/// Main: first come, first served forever (the 257th host never matches).
/// Now: one MAC holds at most MAX_ADDRS_PER_MAC and churns its own slots;
/// a full set (many MACs) gives the newcomer the least recently seen slot
/// of the MAC holding the most.
#[test]
fn a_full_set_replaces_the_least_recently_seen_entry() {
    let mut e = engine();
    let n = sluice_classify::MAX_LEARNED_ADDRS as u32;
    let per = sluice_classify::MAX_ADDRS_PER_MAC;
    // One MAC claiming n addresses keeps only its last `per`.
    for k in 0..n {
        forward(
            &mut e,
            secs(4 * u64::from(k)),
            LAN,
            build::arp(v4(k), GATEWAY),
        );
    }
    let t = secs(4 * u64::from(n));
    assert!(t < secs(0) + TTL, "nothing has expired yet");
    assert!(matches_ext_if(&mut e, t, v4(n - 1).into()));
    assert!(!matches_ext_if(&mut e, t, v4(n - 1 - per).into()));
    assert_eq!(e.learned_addrs(WAN).0.len(), per as usize);
    // Many MACs fill the set; a newcomer takes the oldest slot of the
    // largest (the first MAC's, tied with the others at `per`).
    let mut e = engine();
    for k in 0..n {
        forward(
            &mut e,
            secs(u64::from(k)),
            LAN,
            arp_from(v4(k), (k / per) as u8),
        );
    }
    assert_eq!(e.learned_addrs(WAN).0.len(), n as usize);
    let t = secs(u64::from(n));
    forward(&mut e, t, LAN, arp_from(v4(n), 200));
    assert!(matches_ext_if(&mut e, t, v4(n).into()));
    assert_eq!(e.learned_addrs(WAN).0.len(), n as usize);
}

/// A flood of claims (each spoofed sender ARPs and sends) fills the set;
/// a host arriving a few minutes later takes an idle slot, and a second
/// flood (1000 senders in ten seconds) never takes the slot of that host
/// while it talks. Main: the first flood's sources hold every slot forever,
/// so the host never matches.
#[test]
fn an_arp_flood_never_displaces_a_talking_host() {
    let mut e = engine();
    let spoof = |e: &mut Engine, now: Instant, a: Ipv4Addr| {
        forward(e, now, LAN, build::arp(a, GATEWAY));
        forward(e, now, LAN, build::udp_v4(a, REMOTE, 1, 2, 10));
    };
    for k in 0..300 {
        spoof(&mut e, secs(1), v4(k));
    }
    let t = secs(180);
    forward(&mut e, t, LAN, arp_from(HOST, 1));
    assert!(
        matches_ext_if(&mut e, t, HOST.into()),
        "an idle slot is taken"
    );
    let mut displaced = 0;
    for k in 0..1000u32 {
        let now = t + Duration::from_millis(10 * u64::from(k));
        spoof(&mut e, now, v4(10_000 + k));
        if k % 100 == 0 && !matches_ext_if(&mut e, now, HOST.into()) {
            displaced += 1;
        }
    }
    assert_eq!(displaced, 0);
    // The floods (one MAC) hold its quota: the first's 32 in, 268
    // refused; the second replaces those idle 32, and 968 are refused.
    let (learned, refused) = e.learned_addrs(WAN);
    let per = sluice_classify::MAX_ADDRS_PER_MAC as usize;
    assert_eq!((learned.len(), refused), (per + 1, 268 + 968));
}

/// A reload keeps what was learned (the hosts did not change with the
/// rules), and the entries still expire on their own clock.
#[test]
fn a_reload_keeps_learned_addresses_until_they_expire() {
    let mut e = engine();
    forward(&mut e, secs(1), LAN, build::arp(HOST, GATEWAY));
    let defines = vec![("ext_if".to_string(), "wan0".to_string())];
    let cfg = sluice_conf::check("learn.conf", CONF, &defines)
        .unwrap()
        .config;
    e.reload(&cfg).expect("reload");
    assert!(matches_ext_if(&mut e, secs(2), HOST.into()), "kept");
    let (learned, _) = e.learned_addrs(WAN);
    assert_eq!(learned[0].since, secs(1), "the same entry, not a new one");
    e.handle_timeout(secs(2) + TTL);
    assert!(
        !matches_ext_if(&mut e, secs(2) + TTL, HOST.into()),
        "expired"
    );
}
