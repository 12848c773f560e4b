use super::*;
use crate::path::test_time::{at, ms};
use sluice_sched::{ClassId, Ecn};
use sluice_wire::build::{tcp_with, TcpSpec};
use sluice_wire::tcp_flags::ACK;
use std::net::Ipv4Addr;

const LAN: usize = 0;
const WAN: usize = 1;
const FAR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
/// The far end's direction of the connection, and the LAN host's.
const FROM_FAR: u64 = 0xaaaa_0001_0000_0000;
const FROM_HOST: u64 = 0xbbbb_0002_0000_0000;

fn pair() -> Monitor {
    let mut m = Monitor::new(vec![Some(WAN), Some(LAN)], vec![true, false], [7; 16]);
    m.set_wanted(true);
    m
}

fn ip(src: Ipv4Addr, dst: Ipv4Addr) -> IpInfo {
    let spec = TcpSpec {
        sport: 5201,
        dport: 40000,
        seq: 1,
        ack: 1,
        flags: ACK,
        window: 1000,
        options: &[],
        payload_len: 0,
    };
    let f = tcp_with(src, dst, &spec);
    sluice_wire::parse(&f).unwrap().ip.unwrap()
}

fn seg(ack: u32, payload_len: u16, tsval: Option<u32>) -> TcpSeg {
    TcpSeg {
        seq: 1,
        ack,
        flags: ACK,
        payload_len,
        window: 1000,
        wscale: None,
        timestamps: tsval.map(|t| (t, 0)),
    }
}

/// A segment from the far end arriving on the WAN side at `t`, which
/// completed a round trip of `rtt` if given.
fn from_far(m: &mut Monitor, t: u64, g: &TcpSeg, rtt: Option<Duration>) {
    let ip = ip(FAR, HOST);
    let rx = RxEvent {
        iface: WAN,
        egress: LAN,
        ip: &ip,
        seg: Some(g),
        flow_hash: FROM_FAR,
        rtt_sample: rtt,
    };
    m.on_rx(at(t), rx, || FROM_HOST);
}

/// The LAN host acknowledges the far end at `t`.
fn from_host(m: &mut Monitor, t: u64) {
    let ip = ip(HOST, FAR);
    let g = seg(1, 0, None);
    let rx = RxEvent {
        iface: LAN,
        egress: WAN,
        ip: &ip,
        seg: Some(&g),
        flow_hash: FROM_HOST,
        rtt_sample: None,
    };
    m.on_rx(at(t), rx, || FROM_FAR);
}

fn leaves(m: &mut Monitor, t: u64, iface: usize, flow: u64, waited: u64) {
    let pkt = Packet {
        data: Vec::new(),
        len: 0,
        cost: 0,
        flow,
        class: ClassId::ROOT,
        ecn: Ecn::NotEct,
        enqueued_at: at(t) - ms(waited),
        id: t,
        allowance_ms: 0,
    };
    assert_eq!(m.on_tx(at(t), iface, &pkt), ms(waited));
}

#[test]
fn an_upload_reads_what_its_far_ends_acknowledge_a_download_does_not() {
    let mut m = pair();
    for (i, ack) in [1000u32, 2448, 2448, 5344].into_iter().enumerate() {
        from_far(&mut m, i as u64, &seg(ack, 0, None), None);
    }
    assert_eq!(m.reading(at(10), WAN).delivered, Some(4344));
    assert_eq!(m.reading(at(10), LAN).delivered, None);
    // Unwanted (no autorate), nothing is counted.
    m.set_wanted(false);
    from_far(&mut m, 20, &seg(9344, 0, None), None);
    assert_eq!(m.reading(at(30), WAN).delivered, Some(4344));
}

#[test]
fn a_sample_is_corrected_by_its_connections_own_wait_out() {
    let mut m = pair();
    m.set_trace(true);
    // The LAN host's packets leave by the WAN side after 30 ms in
    // sluice's queue; another connection's wait nothing.
    leaves(&mut m, 0, WAN, FROM_HOST, 30);
    leaves(&mut m, 1, WAN, 0x1234_0000_0000_0000, 0);
    from_far(&mut m, 50, &seg(1, 1448, None), Some(ms(80)));
    let (traced, lost) = m.drain_trace();
    assert_eq!(lost, 0);
    assert_eq!(traced.len(), 1);
    let (side, t) = traced[0];
    assert_eq!((side, t.own.wait, t.rtt), (WAN, ms(30), ms(80)));
    // The interface's mean (gain 1/8: 30/8, then 0) is its own wait.
    assert_eq!(m.reading(at(60), WAN).own, Duration::from_nanos(3_281_250));
    assert_eq!(m.stats(LAN).samples, 1, "a download reads the WAN side");
}

#[test]
fn a_download_reads_the_way_in_once_its_senders_clock_is_trusted() {
    let mut m = pair();
    // A download: the far end's data every 10 ms, stamped by a 1 kHz
    // clock, each completing a round trip of 40 ms; the LAN host
    // acknowledges it. After 3 s its data meets a queue of 15 ms on the
    // way in, which the round trips do not show.
    let rtt_only = |m: &Monitor, t: u64| {
        let r = m.reading(at(t), LAN).beyond;
        (r.delay, r.flows)
    };
    for t in (0..3_500).step_by(10) {
        from_host(&mut m, t);
        let queue = if t >= 3_000 { 15 } else { 0 };
        from_far(
            &mut m,
            t + queue,
            &seg(1, 1448, Some(t as u32)),
            Some(ms(40)),
        );
        if t == 1_000 {
            // Not yet watched long enough: the round trip stands in.
            assert_eq!(rtt_only(&m, t), (Some(Duration::ZERO), 1));
        }
    }
    let r = m.reading(at(3_510), LAN).beyond;
    assert_eq!(r.delay, Some(ms(15)), "{r:?}");
    // The upload reads the way out: the round trips, with no queue.
    let up = m.reading(at(3_510), WAN).beyond;
    assert_eq!(up.delay, Some(Duration::ZERO));
}

/// A frame with its parse, as the stages hand them over.
fn framed(f: Vec<u8>) -> (Vec<u8>, PacketInfo) {
    let info = sluice_wire::parse(&f).unwrap();
    (f, info)
}

#[test]
fn the_probe_goes_out_at_a_hundredth_of_the_pairs_slower_rate_as_it_moves() {
    let mut m = pair();
    let hop: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
    m.set_probe(WAN, Some(hop));
    m.set_rate(LAN, Some(Rate::mbps(10)));
    m.set_rate(WAN, Some(Rate::kbps(128)));
    // The far side answers the router; the router's traffic leaves: the
    // probe's name (crate::probe).
    let (router, far) = (
        Ipv4Addr::new(203, 0, 113, 5),
        Ipv4Addr::new(198, 51, 100, 9),
    );
    let mut back = sluice_wire::build::udp_v4(far, router, 443, 4000, 100);
    let (dst, src) = (back[..6].to_vec(), back[6..12].to_vec());
    back[..6].copy_from_slice(&src);
    back[6..12].copy_from_slice(&dst);
    let (back, back_info) = framed(back);
    let back = Transit {
        iface: WAN,
        egress: LAN,
        frame: &back,
        info: &back_info,
    };
    assert!(!m.on_arrival(at(0), &back));
    let (out, out_info) = framed(sluice_wire::build::udp_v4(router, far, 4000, 443, 1200));
    let out = Transit {
        iface: LAN,
        egress: WAN,
        frame: &out,
        info: &out_info,
    };
    m.on_passed(at(0), &out);
    assert_eq!(m.next_probe(at(0)), Some(Instant::ZERO));
    assert!(m.poll_probe(at(0), WAN).is_some());
    assert!(
        m.poll_probe(at(0), LAN).is_none(),
        "only the WAN side probes"
    );
    // 58 bytes at 1 % of the slower direction, 128 kbit/s: 362.5 ms.
    let slow = at(0) + Duration::from_micros(362_500);
    assert_eq!(m.next_probe(at(1)), Some(slow));
    assert!(m.poll_probe(slow - Duration(1), WAN).is_none());
    assert!(m.poll_probe(slow, WAN).is_some());
    // The upload is shaped faster now: after the request already due,
    // ten a second at most.
    m.set_rate(WAN, Some(Rate::mbps(10)));
    let due = slow + Duration::from_micros(362_500);
    assert!(m.poll_probe(due, WAN).is_some());
    assert_eq!(m.next_probe(due), Some(due + Duration::from_millis(100)));
    // The same target keeps its counters; another starts afresh.
    m.set_probe(WAN, Some(hop));
    assert_eq!(m.stats(LAN).probe.map(|(_, s)| s.sent), Some(3));
    m.set_probe(WAN, Some(Ipv4Addr::new(192, 0, 2, 2).into()));
    assert_eq!(m.stats(LAN).probe.map(|(_, s)| s.sent), Some(0));
}
