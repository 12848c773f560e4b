use super::*;
use crate::fifo::{self, Fifo};
use crate::fq_codel::{self, FqCodel};
use crate::red::{self, Red, Rio};
use crate::testing::{ids_served, tcp_opt_sack, tcp_opt_timestamps, TcpFrame};
use crate::{DropReason, Drops, Ecn, Enqueue, Qdisc};
use proptest::prelude::*;
use sluice_time::Instant;
use sluice_wire::tcp_flags::{ACK, CWR, ECE, FIN, PSH, RST, SYN, URG};
use std::net::{Ipv4Addr, Ipv6Addr};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const FLOW: u64 = 0x1234_5678_9abc_def0;

fn ack(n: u32) -> TcpFrame {
    TcpFrame::ack(A, B, 40_000, 80, n)
}

fn with(mut f: TcpFrame, edit: impl FnOnce(&mut TcpFrame)) -> TcpFrame {
    edit(&mut f);
    f
}

fn sack(n: u32, blocks: &[(u32, u32)]) -> TcpFrame {
    with(ack(n), |f| f.options = tcp_opt_sack(blocks))
}

/// Which of `queued` (by position) enqueueing `new` drops under `mode`.
fn victim(mode: AckFilter, queued: &[TcpFrame], new: &TcpFrame) -> Option<usize> {
    let q: Vec<Packet> = queued
        .iter()
        .enumerate()
        .map(|(i, f)| f.packet(i as u64, FLOW))
        .collect();
    find_redundant(mode, &new.packet(99, FLOW), q.iter())
}

/// Whether `new` makes the single queued `old` redundant (aggressive mode
/// drops on one).
fn drops_one(old: &TcpFrame, new: &TcpFrame) -> bool {
    victim(AckFilter::Aggressive, std::slice::from_ref(old), new) == Some(0)
}

#[test]
fn a_newer_ack_makes_an_older_one_redundant() {
    assert!(drops_one(&ack(1000), &ack(2000)));
    assert!(!drops_one(&ack(2000), &ack(1000)), "an older newcomer");
    assert!(!drops_one(&ack(1000), &ack(1000)), "a duplicate ACK counts");
    assert_eq!(victim(AckFilter::Off, &[ack(1), ack(2)], &ack(3)), None);
}

#[test]
fn conservative_needs_two_redundant_acks_and_drops_the_oldest() {
    let c = AckFilter::Conservative;
    assert_eq!(victim(c, &[ack(100)], &ack(300)), None);
    assert_eq!(victim(c, &[ack(100), ack(200)], &ack(300)), Some(0));
    // Something else of the flow in between does not count, nor stop it.
    let data = with(ack(150), |f| f.payload = 100);
    assert_eq!(victim(c, &[ack(100), data.clone()], &ack(300)), None);
    assert_eq!(victim(c, &[data, ack(100), ack(200)], &ack(300)), Some(1));
}

#[test]
fn ack_numbers_compare_in_serial_arithmetic() {
    assert!(drops_one(&ack(0xffff_ff00), &ack(0x100)), "across the wrap");
    assert!(!drops_one(&ack(0x100), &ack(0xffff_ff00)));
    // Exactly half the space apart is neither newer nor older.
    assert!(!drops_one(&ack(0), &ack(0x8000_0000)));
    assert!(drops_one(&ack(0), &ack(0x7fff_ffff)));
}

#[test]
fn sack_information_is_never_lost() {
    let old = sack(100, &[(200, 300)]);
    assert!(!drops_one(&old, &ack(100)), "same ACK, no SACK");
    assert!(
        !drops_one(&old, &ack(150)),
        "newer ACK with fewer SACK blocks"
    );
    assert!(!drops_one(&old, &sack(150, &[(400, 500)])), "other blocks");
    assert!(drops_one(&old, &sack(150, &[(200, 400)])), "block covered");
    assert!(drops_one(&old, &ack(300)), "covered by the cumulative ACK");
    assert!(
        drops_one(&old, &sack(100, &[(200, 300), (400, 500)])),
        "more SACK"
    );
    assert!(
        !drops_one(&old, &sack(100, &[(200, 300)])),
        "same SACK: a dupack"
    );
    let two = sack(100, &[(400, 500), (200, 300)]);
    assert!(
        !drops_one(&two, &sack(150, &[(400, 500)])),
        "one block of two lost"
    );
    assert!(drops_one(&two, &sack(150, &[(400, 600), (200, 300)])));
    // An ACK without SACK is made redundant by one with the same number
    // and news in its SACK blocks (no dupack is lost: SACK carries it).
    assert!(drops_one(&ack(100), &sack(100, &[(200, 300)])));
}

#[test]
fn a_dsack_is_never_dropped() {
    // A block below the ACK (RFC 2883 §4.1.1).
    assert!(!drops_one(&sack(300, &[(100, 200)]), &ack(400)));
    // A first block inside the second (§4.1.2).
    let d = sack(100, &[(250, 300), (200, 400)]);
    assert!(!drops_one(&d, &sack(150, &[(200, 500)])));
}

#[test]
fn ecn_feedback_is_kept() {
    for bit in [ECE, CWR] {
        let marked = with(ack(100), |f| f.flags |= bit);
        assert!(!drops_one(&marked, &ack(200)), "old with {bit:#x}");
        assert!(
            !drops_one(&ack(100), &marked.clone().tap_ack(200)),
            "new with {bit:#x}"
        );
    }
    // AE (Accurate ECN) and the reserved bits, in either.
    let ae = with(ack(100), |f| f.reserved = 1);
    assert!(!drops_one(&ae, &ack(200)));
    assert!(!drops_one(&ack(100), &ae.tap_ack(200)));
    // A CE-marked ACK carries a congestion signal of its own.
    let ce = with(ack(100), |f| f.ecn = Ecn::Ce);
    assert!(!drops_one(&ce, &ack(200)));
    let ect = with(ack(100), |f| f.ecn = Ecn::Ect0);
    assert!(drops_one(&ect, &ack(200)));
}

trait TapAck {
    fn tap_ack(self, n: u32) -> TcpFrame;
}

impl TapAck for TcpFrame {
    fn tap_ack(mut self, n: u32) -> TcpFrame {
        self.ack = n;
        self
    }
}

#[test]
fn only_understood_options_are_dropped() {
    let unknown: [&[u8]; 6] = [
        &[2, 4, 5, 180],              // MSS
        &[1, 3, 3, 7],                // window scale
        &[4, 2],                      // SACK permitted
        &[8, 9, 0, 0, 0, 1, 0, 0, 0], // timestamps of a wrong length
        &[5, 6, 0, 0, 0, 1],          // SACK of a wrong length
        &[30, 4, 0, 0],               // an experimental kind (MPTCP)
    ];
    for o in unknown {
        let f = with(ack(100), |f| f.options = o.to_vec());
        assert!(!drops_one(&f, &ack(200)), "old with {o:?}");
        assert!(!drops_one(&ack(100), &f.tap_ack(200)), "new with {o:?}");
    }
    // Truncated: a length running past the header, a kind without length.
    for o in [&[8u8, 10, 0, 0][..], &[1, 1, 1, 8][..]] {
        let f = with(ack(100), |f| f.options = o.to_vec());
        assert!(!drops_one(&f, &ack(200)), "old with {o:?}");
    }
    // Two timestamps options are not a thing a stack sends.
    let twice = [tcp_opt_timestamps(1, 1), tcp_opt_timestamps(1, 1)].concat();
    assert!(!drops_one(
        &with(ack(100), |f| f.options = twice),
        &ack(200)
    ));
    // NOP and EOL are padding; what follows EOL is not read.
    let pad = with(ack(100), |f| f.options = vec![1, 1, 1, 0, 2, 9, 9, 9]);
    assert!(drops_one(&pad, &ack(200)));
}

#[test]
fn timestamps_must_not_be_newer_than_the_newcomers() {
    let ts = |n, val, ecr| with(ack(n), |f| f.options = tcp_opt_timestamps(val, ecr));
    assert!(drops_one(&ts(100, 10, 5), &ts(200, 11, 6)));
    assert!(drops_one(&ts(100, 10, 5), &ts(200, 10, 5)));
    assert!(!drops_one(&ts(100, 12, 5), &ts(200, 11, 6)));
    assert!(!drops_one(&ts(100, 10, 7), &ts(200, 11, 6)));
    assert!(!drops_one(&ts(100, 10, 5), &ack(200)), "newcomer without");
    // Timestamps wrap too.
    assert!(drops_one(&ts(100, u32::MAX, 5), &ts(200, 3, 6)));
}

#[test]
fn only_pure_acks_are_dropped() {
    let cases = [
        with(ack(100), |f| f.payload = 1),
        with(ack(100), |f| f.flags |= PSH),
        with(ack(100), |f| f.flags |= FIN),
        with(ack(100), |f| f.flags |= SYN),
        with(ack(100), |f| f.flags |= RST),
        with(ack(100), |f| f.flags |= URG),
        with(ack(100), |f| f.flags = 0),
    ];
    for old in &cases {
        assert!(!drops_one(old, &ack(200)), "{old:?}");
    }
    // The newcomer must acknowledge, and not open or reset.
    for flags in [SYN | ACK, RST | ACK, RST, 0] {
        assert!(!drops_one(&ack(100), &with(ack(200), |f| f.flags = flags)));
    }
    // Data and FIN carry a cumulative ACK as good as a pure one.
    assert!(drops_one(&ack(100), &with(ack(200), |f| f.payload = 1000)));
    assert!(drops_one(&ack(100), &with(ack(200), |f| f.flags |= FIN)));
}

#[test]
fn an_ip_fragment_is_never_a_candidate() {
    let old = ack(100);
    let mut p = old.packet(0, FLOW);
    p.data[14 + 6] |= 0x20; // IPv4 more fragments
    assert!(sluice_wire::parse(&p.data).is_ok());
    assert_eq!(
        find_redundant(AckFilter::Aggressive, &ack(200).packet(1, FLOW), [p].iter()),
        None
    );
}

#[test]
fn different_connections_never_touch_each_other() {
    let others = [
        TcpFrame::ack(A, B, 40_001, 80, 100),
        TcpFrame::ack(A, B, 40_000, 81, 100),
        TcpFrame::ack(A, Ipv4Addr::new(192, 0, 2, 2), 40_000, 80, 100),
        TcpFrame::ack(B, A, 80, 40_000, 100),
    ];
    // Same flow hash (a collision) and still left alone.
    for o in &others {
        assert!(!drops_one(o, &ack(200)), "{o:?}");
    }
    // A different flow hash is not even read.
    let q = [ack(100).packet(0, FLOW ^ 1)];
    let new = ack(200).packet(1, FLOW);
    assert_eq!(find_redundant(AckFilter::Aggressive, &new, q.iter()), None);
    // A frame that is not TCP at all.
    let mut junk = ack(100).packet(0, FLOW);
    junk.data.truncate(30);
    assert_eq!(
        find_redundant(AckFilter::Aggressive, &new, [junk].iter()),
        None
    );
}

#[test]
fn the_longest_pure_acks_are_still_candidates() {
    // 40 bytes of options (timestamps and three SACK blocks), in IPv6
    // behind two VLAN tags and PPPoE: the most a pure ACK carries.
    let a = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    let b = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
    let opts = |n: u32| {
        let mut o = tcp_opt_timestamps(1, 1);
        o.extend(tcp_opt_sack(&[
            (n + 10, n + 20),
            (n + 30, n + 40),
            (n + 50, n + 60),
        ]));
        o
    };
    let f = |n: u32| with(TcpFrame::ack(a, b, 1, 2, n), |f| f.options = opts(n));
    let wrap = |p: Packet| {
        use sluice_wire::build::{pppoe_wrap, vlan_wrap};
        let data = vlan_wrap(&vlan_wrap(&pppoe_wrap(&p.data, 3), 0x8100, 7), 0x88a8, 9);
        assert_eq!(data.len(), 14 + 8 + 8 + 40 + 60);
        Packet {
            len: data.len() as u32,
            data,
            ..p
        }
    };
    let old = wrap(f(100).packet(0, FLOW));
    // The newer one covers the old blocks with its cumulative ACK.
    let new = wrap(f(200).packet(1, FLOW));
    assert_eq!(
        find_redundant(AckFilter::Aggressive, &new, [old].iter()),
        Some(0)
    );
}

#[test]
fn ipv6_acks_are_filtered_alike() {
    let a = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    let b = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
    let v6 = |n| TcpFrame::ack(a, b, 40_000, 443, n);
    assert!(drops_one(&v6(100), &v6(200)));
    assert!(!drops_one(&v6(200), &v6(100)));
    let s = with(v6(100), |f| f.options = tcp_opt_sack(&[(200, 300)]));
    assert!(!drops_one(&s, &v6(150)));
    assert!(!drops_one(&ack(100), &v6(200)), "IPv4 and IPv6 never match");
}

fn enqueue_all(q: &mut dyn Qdisc, frames: &[TcpFrame], drops: &mut Drops) -> Vec<Enqueue> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| q.enqueue(f.packet(i as u64, FLOW), Instant(i as u64), drops))
        .collect()
}

fn drain(q: &mut dyn Qdisc) -> Vec<u64> {
    ids_served(q, Instant(1_000_000), &mut Vec::new())
}

fn stats(q: &dyn Qdisc) -> crate::QueueStats {
    let mut out = None;
    q.visit_stats(&mut |_, s| out = Some(s.clone()));
    out.expect("a leaf reports itself")
}

#[test]
fn a_fifo_drops_the_redundant_ack_and_keeps_the_order() {
    let mut q = Fifo::new(fifo::Params::default()).with_ack_filter(AckFilter::Conservative);
    let mut drops = Vec::new();
    let data = with(ack(50), |f| f.payload = 500);
    let got = enqueue_all(&mut q, &[data, ack(100), ack(200), ack(300)], &mut drops);
    use Enqueue::*;
    assert_eq!(got, [Queued, Queued, Queued, QueuedDroppedOthers]);
    assert_eq!(drops.len(), 1);
    assert_eq!(
        (drops[0].pkt.id, drops[0].reason),
        (1, DropReason::AckFilter)
    );
    let st = q.stats();
    assert_eq!(st.drop_packets[DropReason::AckFilter.index()], 1);
    assert_eq!((st.enq_packets, st.qlen), (4, 3), "{st:?}");
    assert_eq!(q.backlog_bytes(), st.backlog_bytes);
    assert_eq!(drain(&mut q), [0, 2, 3]);
}

#[test]
fn a_full_fifo_takes_the_newer_ack_in_place_of_the_redundant_one() {
    let mut q = Fifo::new(fifo::Params {
        limit_packets: 2,
        limit_bytes: None,
    })
    .with_ack_filter(AckFilter::Conservative);
    let mut drops = Vec::new();
    let got = enqueue_all(&mut q, &[ack(100), ack(200), ack(300)], &mut drops);
    assert_eq!(got[2], Enqueue::QueuedDroppedOthers);
    assert_eq!(drain(&mut q), [1, 2]);

    // When even the freed room is not enough the old ACK stays.
    let len = ack(1).build().len() as u64;
    let mut q = Fifo::new(fifo::Params {
        limit_packets: 10,
        limit_bytes: Some(2 * len + 5),
    })
    .with_ack_filter(AckFilter::Conservative);
    let mut drops = Vec::new();
    let big = with(ack(300), |f| {
        f.options = tcp_opt_sack(&[(400, 500), (600, 700)])
    });
    let got = enqueue_all(&mut q, &[ack(100), ack(200), big], &mut drops);
    assert_eq!(got[2], Enqueue::Rejected);
    assert_eq!(drops[0].reason, DropReason::QueueFull);
    assert_eq!(drain(&mut q), [0, 1]);
}

#[test]
fn fq_codel_filters_within_the_flow_queue() {
    let mut q = FqCodel::new(fq_codel::Params {
        ack_filter: AckFilter::Aggressive,
        ..fq_codel::Params::default()
    });
    let mut drops = Vec::new();
    let data = with(ack(50), |f| f.payload = 500);
    let got = enqueue_all(&mut q, &[ack(100), data, ack(200), ack(300)], &mut drops);
    use Enqueue::*;
    assert_eq!(
        got,
        [Queued, Queued, QueuedDroppedOthers, QueuedDroppedOthers]
    );
    let ids: Vec<_> = drops.iter().map(|d| (d.pkt.id, d.reason)).collect();
    assert_eq!(
        ids,
        [(0, DropReason::AckFilter), (2, DropReason::AckFilter)]
    );
    let st = q.stats();
    assert_eq!((st.enq_packets, st.qlen), (4, 2), "{st:?}");
    assert_eq!(q.flow_backlog(q.bucket(FLOW)) as u64, q.backlog_bytes());
    assert_eq!(drain(&mut q), [1, 3]);
}

/// RED and RIO that never drop early: only the filter drops here.
fn red(mode: AckFilter) -> Box<dyn Qdisc> {
    let p = red::Params {
        limit_packets: 1000,
        min_th: 900,
        max_th: 1000,
        ..red::Params::default()
    };
    Box::new(Red::new(p).with_ack_filter(mode))
}

fn rio(mode: AckFilter) -> Box<dyn Qdisc> {
    let t = red::Thresholds {
        min_th: 900,
        max_th: 1000,
        max_p: red::MAX_P_ONE / 10,
    };
    let p = red::RioParams {
        limit_packets: 1000,
        thresholds: [t; red::PRECEDENCES],
        // Pure ACKs low drop precedence, the rest high: the filter must
        // keep both counts right.
        precedence: |p| u8::from(p.len > 100) * 2,
        ..red::RioParams::default()
    };
    Box::new(Rio::new(p).with_ack_filter(mode))
}

#[test]
fn red_and_rio_filter_alike() {
    for make in [red, rio] {
        let mut q = make(AckFilter::Conservative);
        let mut drops = Vec::new();
        let data = with(ack(50), |f| f.payload = 500);
        let frames = [ack(100), data, ack(200), ack(300), ack(400)];
        let got = enqueue_all(q.as_mut(), &frames, &mut drops);
        use Enqueue::*;
        assert_eq!(
            got,
            [
                Queued,
                Queued,
                Queued,
                QueuedDroppedOthers,
                QueuedDroppedOthers
            ]
        );
        let ids: Vec<_> = drops.iter().map(|d| (d.pkt.id, d.reason)).collect();
        assert_eq!(
            ids,
            [(0, DropReason::AckFilter), (2, DropReason::AckFilter)]
        );
        let st = stats(q.as_ref());
        assert_eq!((st.enq_packets, st.qlen, st.total_drops()), (5, 3, 2));
        assert_eq!(drain(q.as_mut()), [1, 3, 4]);
        assert_eq!(stats(q.as_ref()).qlen, 0);
    }
}

#[test]
fn without_the_filter_nothing_is_dropped() {
    // The same sequences as above, filter off: the figures the tests
    // above move away from.
    let mut q = Fifo::new(fifo::Params::default());
    let mut drops = Vec::new();
    enqueue_all(&mut q, &[ack(100), ack(200), ack(300)], &mut drops);
    assert!(drops.is_empty());
    assert_eq!(drain(&mut q), [0, 1, 2]);
}

// ---- property: only pure ACKs go, the rest keeps its order, the newest
// segment of every connection stays ----

#[derive(Clone, Debug)]
enum Kind {
    Ack,
    Sack,
    Data,
    Syn,
    Fin,
    Ece,
    Unknown,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        6 => Just(Kind::Ack),
        2 => Just(Kind::Sack),
        2 => Just(Kind::Data),
        1 => Just(Kind::Syn),
        1 => Just(Kind::Fin),
        1 => Just(Kind::Ece),
        1 => Just(Kind::Unknown),
    ]
}

fn frame(conn: u16, k: &Kind, ackno: u32, v6: bool) -> TcpFrame {
    let mut f = if v6 {
        TcpFrame::ack(
            Ipv6Addr::LOCALHOST,
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            1000 + conn,
            80,
            ackno,
        )
    } else {
        TcpFrame::ack(A, B, 1000 + conn, 80, ackno)
    };
    match k {
        Kind::Ack => {}
        Kind::Sack => {
            f.options = tcp_opt_sack(&[(ackno.wrapping_add(1000), ackno.wrapping_add(2000))])
        }
        Kind::Data => f.payload = 100,
        Kind::Syn => f.flags = SYN | ACK,
        Kind::Fin => f.flags = FIN | ACK,
        Kind::Ece => f.flags = ECE | ACK,
        Kind::Unknown => f.options = vec![2, 4, 5, 180],
    }
    f
}

/// The oracle, written apart from the filter: a frame the test built as a
/// pure ACK with understood options.
fn pure(k: &Kind) -> bool {
    matches!(k, Kind::Ack | Kind::Sack)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn never_drops_a_non_pure_ack_nor_reorders(
        steps in prop::collection::vec((0u16..3, kind(), 0u32..40, any::<bool>(), 0u8..4), 1..120),
        base in any::<u32>(),
        aggressive in any::<bool>(),
        leaf in 0..4u8,
    ) {
        let mode = if aggressive { AckFilter::Aggressive } else { AckFilter::Conservative };
        let fq = leaf == 1;
        let mut q: Box<dyn Qdisc> = match leaf {
            0 => Box::new(Fifo::new(fifo::Params { limit_packets: 1000, limit_bytes: None }).with_ack_filter(mode)),
            1 => Box::new(FqCodel::new(fq_codel::Params { flows: 2, ack_filter: mode, ..fq_codel::Params::default() })),
            2 => red(mode),
            _ => rio(mode),
        };
        let mut drops = Vec::new();
        let mut sent = Vec::new();
        // What left between arrivals (one in four steps sends one).
        let mut out = Vec::new();
        for (i, (conn, k, step, v6, send)) in steps.iter().enumerate() {
            // ACK numbers mostly rising, sometimes repeating, across the wrap.
            let ackno = base.wrapping_add(step * 100 + i as u32 * 10);
            let f = frame(*conn, k, ackno, *v6);
            // Connections share flow hashes pairwise: collisions are the
            // rule here, not the exception.
            let flow = u64::from(*conn % 2);
            let key = (*conn, *v6);
            q.enqueue(f.packet(i as u64, flow), Instant(i as u64), &mut drops);
            if *send == 0 {
                out.extend(q.dequeue(Instant(i as u64), &mut drops).map(|p| p.id));
            }
            sent.push((key, k.clone()));
        }
        for d in &drops {
            prop_assert_eq!(d.reason, DropReason::AckFilter);
            let (_, k) = &sent[d.pkt.id as usize];
            prop_assert!(pure(k), "dropped a {:?}", k);
        }
        out.extend(drain(q.as_mut()));
        // Everything is accounted for, nothing twice.
        let mut all: Vec<u64> = out.iter().copied().chain(drops.iter().map(|d| d.pkt.id)).collect();
        all.sort_unstable();
        prop_assert_eq!(all, (0..sent.len() as u64).collect::<Vec<_>>());
        // Per connection, what leaves leaves in the order it came (the
        // FIFO keeps the global order too).
        for key in sent.iter().map(|s| s.0).collect::<std::collections::BTreeSet<_>>() {
            let mine: Vec<u64> = out.iter().copied().filter(|&id| sent[id as usize].0 == key).collect();
            prop_assert!(mine.windows(2).all(|w| w[0] < w[1]), "{:?}", mine);
            // The newest segment of the connection survived.
            let last = sent.iter().rposition(|s| s.0 == key).unwrap() as u64;
            prop_assert!(out.contains(&last), "newest {} of {:?} dropped", last, key);
        }
        if !fq {
            prop_assert!(out.windows(2).all(|w| w[0] < w[1]));
        }
        let st = stats(q.as_ref());
        prop_assert_eq!(st.drop_packets[DropReason::AckFilter.index()], drops.len() as u64);
        prop_assert_eq!(st.enq_packets, sent.len() as u64);
    }
}
