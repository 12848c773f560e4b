//! RED/RIO guarantees in virtual time.

use super::*;
use crate::testing::check_aqm;
use crate::Ecn;

fn pkt(id: u64) -> Packet {
    Packet::synthetic(id, 500, id, ClassId::ROOT)
}

/// Holds the instantaneous queue at exactly `depth` for `arrivals` arrivals
/// (one departure per accepted arrival) and returns (drops, marks).
fn hold_at(q: &mut dyn Qdisc, depth: u64, arrivals: u64, ect: bool) -> (u64, u64) {
    let mut drops = Vec::new();
    let mut id = 0;
    let mut t = 0;
    // Fill without checking: the early arrivals see a small average.
    while q.len() < depth as usize {
        id += 1;
        q.enqueue(pkt(id), Instant(t), &mut drops);
    }
    drops.clear();
    let (mut dropped, mut marked) = (0, 0);
    for _ in 0..arrivals {
        id += 1;
        t += 1000;
        let mut p = pkt(id);
        if ect {
            p.ecn = Ecn::Ect0;
        }
        match q.enqueue(p, Instant(t), &mut drops) {
            Enqueue::Rejected => dropped += 1,
            _ => {
                let out = q.dequeue(Instant(t), &mut drops).expect("resident");
                marked += u64::from(out.ecn == Ecn::Ce);
            }
        }
        drops.clear();
    }
    (dropped, marked)
}

fn red(min_th: u32, max_th: u32, weight: u8, ecn: bool) -> Red {
    Red::new(Params {
        limit_packets: 1000,
        min_th,
        max_th,
        weight,
        ecn,
        ..Params::default()
    })
}

#[test]
fn below_min_th_never_drops() {
    let mut q = red(5, 15, 2, false);
    // Depth 4 < min_th: the average converges to 4 and stays below 5.
    let (d, m) = hold_at(&mut q, 4, 20_000, false);
    assert_eq!((d, m), (0, 0));
    assert!(q.avg_q16() < 5 << 16);
}

#[test]
fn above_max_th_always_drops_even_ect() {
    let mut q = red(5, 15, 2, true);
    let mut drops = Vec::new();
    let mut forced = 0;
    // Only arrivals: the queue and its average grow past max_th; from then
    // on every arrival must be refused, ECT or not.
    for id in 0..200u64 {
        let mut p = pkt(id);
        p.ecn = if id % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
        let r = q.enqueue(p, Instant(id), &mut drops);
        if q.avg_q16() >= 15 << 16 {
            assert_eq!(r, Enqueue::Rejected, "arrival {id} with avg ≥ max_th");
            assert_eq!(drops.last().map(|d| d.reason), Some(DropReason::Aqm));
            forced += 1;
        }
    }
    assert!(forced > 100);
}

#[test]
fn drop_rate_rises_with_avg_and_follows_uniform_spacing() {
    let mut last = 0.0;
    for depth in [7u64, 10, 13] {
        let mut q = red(5, 15, 2, false);
        let n = 40_000;
        let (d, _) = hold_at(&mut q, depth, n, false);
        let rate = d as f64 / n as f64;
        // With uniform spacing the gap between drops is uniform on
        // 1..=1/pb, so the drop rate is 2·pb/(1+pb).
        let pb = 0.1 * (depth as f64 - 5.0) / 10.0;
        let want = 2.0 * pb / (1.0 + pb);
        assert!(
            (rate - want).abs() / want < 0.15,
            "depth {depth}: rate {rate}, want {want}"
        );
        assert!(rate > last, "drop rate must rise with avg");
        last = rate;
    }
}

#[test]
fn ecn_marks_instead_of_early_drops() {
    let mut q = red(5, 15, 2, true);
    let (d, m) = hold_at(&mut q, 10, 20_000, true);
    assert_eq!(
        d, 0,
        "ECT packets between thresholds are marked, not dropped"
    );
    assert!(m > 500, "{m} marks");
    // Marked packets still queued at the end are counted but not yet seen.
    let counted = q.stats().ecn_marks;
    assert!(counted >= m && counted <= m + 10, "{counted} vs {m}");
    let mut q = red(5, 15, 2, true);
    let (d, m) = hold_at(&mut q, 10, 20_000, false);
    assert!(d > 500 && m == 0, "not-ECT still dropped");
}

#[test]
fn idle_time_decays_avg() {
    let mut q = red(5, 15, 2, false);
    hold_at(&mut q, 10, 1000, false);
    let mut drops = Vec::new();
    let before = q.avg_q16();
    assert!(before > 9 << 16);
    while q.dequeue(Instant(2_000_000), &mut drops).is_some() {}
    // 3 idle packet times (800 µs each) at w = 1/4: avg × 0.75^3, then the
    // arrival's own EWMA step towards 0.
    q.enqueue(pkt(1), Instant(2_000_000 + 3 * 800_000), &mut drops);
    let want = before as f64 * 0.75f64.powi(3) * 0.75;
    let got = q.avg_q16() as f64;
    assert!((got - want).abs() / want < 0.01, "{got} vs {want}");
    // A long idle period empties the average entirely.
    while q.dequeue(Instant(3_000_000_000), &mut drops).is_some() {}
    q.enqueue(pkt(2), Instant(60_000_000_000), &mut drops);
    assert_eq!(q.avg_q16(), 0);
}

#[test]
fn limit_refuses_newcomer() {
    let mut q = Red::new(Params {
        limit_packets: 3,
        min_th: 100,
        max_th: 200,
        ..Params::default()
    });
    let mut drops = Vec::new();
    for id in 0..4 {
        q.enqueue(pkt(id), Instant(0), &mut drops);
    }
    assert_eq!(drops.len(), 1);
    assert_eq!(
        (drops[0].pkt.id, drops[0].reason),
        (3, DropReason::QueueFull)
    );
}

fn prec_by_flow(p: &Packet) -> u8 {
    (p.flow % 3) as u8
}

#[test]
fn rio_drops_high_precedence_first() {
    let mut q = Rio::new(RioParams {
        limit_packets: 1000,
        weight: 2,
        precedence: prec_by_flow,
        ..RioParams::default()
    });
    let mut drops = Vec::new();
    // Queue held near 30 packets of mixed precedence: precedence 2 sees all
    // of them (≥ its max_th 15: forced drops), precedence 0 only its own
    // third (~10 < its min_th 35: never dropped).
    let mut lost = [0u64; 3];
    let mut sent = [0u64; 3];
    for id in 0..30_000u64 {
        let p = Packet::synthetic(id, 500, id, ClassId::ROOT);
        let dp = prec_by_flow(&p) as usize;
        sent[dp] += 1;
        if q.enqueue(p, Instant(id * 100), &mut drops) == Enqueue::Rejected {
            lost[dp] += 1;
        }
        if q.len() > 30 {
            q.dequeue(Instant(id * 100), &mut drops);
        }
    }
    assert_eq!(lost[0], 0, "{lost:?}");
    assert!(lost[2] > lost[1], "{lost:?}");
    assert!(
        lost[2] as f64 > 0.5 * sent[2] as f64,
        "{lost:?} of {sent:?}"
    );
    assert!(q.avg_q16(2) > q.avg_q16(0));
}

#[test]
fn model_check_red_and_rio() {
    check_aqm(9, true, |ecn| {
        Box::new(Red::new(Params {
            limit_packets: 20,
            min_th: 3,
            max_th: 9,
            max_p: MAX_P_ONE / 4,
            weight: 1,
            ecn,
            ..Params::default()
        }))
    });
    check_aqm(9, false, |ecn| {
        let t = |min_th, max_th| Thresholds {
            min_th,
            max_th,
            max_p: MAX_P_ONE / 4,
        };
        Box::new(Rio::new(RioParams {
            limit_packets: 20,
            thresholds: [t(8, 12), t(5, 9), t(2, 6)],
            weight: 1,
            ecn,
            precedence: prec_by_flow,
            ..RioParams::default()
        }))
    });
}
