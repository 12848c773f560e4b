//! The state limit under a flood, and the model-checked state table.

mod common;
use common::*;
use proptest::prelude::*;
use sluice_classify::{BlockReason, Classifier, IfaceId, Options, StateHit, Timeouts, Verdict};
use sluice_conf::ir::Direction;
use sluice_time::{Duration, Instant};
use sluice_wire::IpInfo;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

/// xorshift64*: a seeded generator for the flood (no OS randomness in tests).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Each of `flows` (UDP from 192.168.1.2:4000+i to 9.9.9.9:53) out on `e`
/// at `t`, the first finding `out`, and its reply in, matching that state.
fn both_ways(c: &mut Classifier, e: IfaceId, t: Instant, flows: &[IpInfo], out: StateHit) {
    for (i, f) in flows.iter().enumerate() {
        assert_eq!(c.classify(t, e, Direction::Out, f).state, out);
        let reply = udp("9.9.9.9", "192.168.1.2", 53, 4000 + i as u16);
        assert_eq!(
            c.classify(t, e, Direction::In, &reply).state,
            StateHit::Matched
        );
    }
}

#[test]
fn flood_beyond_the_limit() {
    const LIMIT: u32 = 1000;
    const FLOOD: usize = 20_000;
    let cfg = config(vec![pass()]);
    let mut c = Classifier::new(
        &cfg,
        Options {
            hash_key: [7; 16],
            state_limit: Some(LIMIT),
            ..Options::default()
        },
    );
    let e = c.iface("ext");
    let t0 = secs(1);
    // Ten answered flows before the flood.
    let flows: Vec<_> = (0..10u16)
        .map(|i| udp("192.168.1.2", "9.9.9.9", 4000 + i, 53))
        .collect();
    both_ways(&mut c, e, t0, &flows, StateHit::Created);
    let mut rng = Rng(0x5eed);
    let mut blocked = 0u64;
    for i in 0..FLOOD {
        let r = rng.next();
        let src = IpAddr::V4(Ipv4Addr::from(r as u32));
        let p = common::info(&sluice_wire::build::udp(
            src,
            ip("192.168.1.2"),
            (r >> 32) as u16,
            (r >> 48) as u16,
            0,
        ));
        let d = c.classify(t0, e, Direction::In, &p);
        if d.verdict == Verdict::Block(BlockReason::StateLimit) {
            assert!(!d.verdict.is_pass());
            blocked += 1;
        }
        let s = c.stats();
        assert!(s.states <= LIMIT as usize, "step {i}: {} states", s.states);
        assert!(c.state_slots_allocated() <= LIMIT as usize);
    }
    let s = c.stats();
    assert_eq!(s.states, LIMIT as usize);
    assert_eq!(s.state_limit_hits, blocked);
    // The flood's unanswered states make room for each other (a bounded
    // scan may find none to evict: then the packet is refused); the
    // answered flows are never evicted.
    assert_eq!(
        s.states_evicted + blocked,
        (FLOOD as u64) - u64::from(LIMIT - 10),
        "every flood packet beyond the limit evicted or was refused"
    );
    assert!(blocked * 100 < FLOOD as u64, "blocked {blocked}");
    // Existing flows keep working, both ways.
    both_ways(&mut c, e, t0, &flows, StateHit::Matched);
    // Once the flood's states expire (udp.first = 60 s) and are purged, new ones fit.
    let later = t0 + Duration::from_secs(61);
    assert_eq!(c.expire(later, LIMIT as usize), LIMIT as usize);
    let d = c.classify(
        later,
        e,
        Direction::Out,
        &udp("192.168.1.3", "9.9.9.9", 1, 53),
    );
    assert_eq!(d.state, StateHit::Created);
}

#[test]
fn full_table_reclaims_expired_slots_before_refusing() {
    let mut cfg = config(vec![pass()]);
    // Unscaled timeouts: a full 4-state table is at pf's default adaptive.end.
    cfg.options.adaptive_start = Some(0);
    cfg.options.adaptive_end = Some(0);
    let mut c = Classifier::new(
        &cfg,
        Options {
            state_limit: Some(4),
            ..Options::default()
        },
    );
    let e = c.iface("ext");
    // Four answered flows: nothing a full table may evict.
    for i in 0..4 {
        c.classify(
            secs(0),
            e,
            Direction::Out,
            &udp("10.0.0.1", "10.0.0.2", i, 53),
        );
        c.classify(
            secs(0),
            e,
            Direction::In,
            &udp("10.0.0.2", "10.0.0.1", 53, i),
        );
    }
    let d = c.classify(
        secs(1),
        e,
        Direction::Out,
        &udp("10.0.0.1", "10.0.0.2", 99, 53),
    );
    assert_eq!(d.verdict, Verdict::Block(BlockReason::StateLimit));
    // All four expired (udp.single 30 s) but nobody called expire(): the insert reclaims.
    let d = c.classify(
        secs(31),
        e,
        Direction::Out,
        &udp("10.0.0.1", "10.0.0.2", 99, 53),
    );
    assert_eq!(d.state, StateHit::Created);
    assert!(c.stats().states <= 4);
}

// ---- model-checked op sequences -------------------------------------------------

const POOL: usize = 24;
const LIMIT: usize = 8;
const TIMEOUT_S: u64 = 30;

#[derive(Clone, Debug)]
enum Op {
    /// Packet of flow `flow`; `reply` = sent by the server; `out` = evaluated at Out.
    Packet {
        flow: usize,
        reply: bool,
        out: bool,
    },
    Advance {
        ms: u64,
    },
    Expire {
        budget: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..POOL, any::<bool>(), any::<bool>()).prop_map(|(flow, reply, out)| Op::Packet { flow, reply, out }),
        2 => (0u64..20_000).prop_map(|ms| Op::Advance { ms }),
        1 => (0usize..12).prop_map(|budget| Op::Expire { budget }),
    ]
}

fn endpoints(flow: usize) -> ((IpAddr, u16), (IpAddr, u16)) {
    let client = IpAddr::V4(Ipv4Addr::new(10, 0, 0, (flow % 5) as u8 + 1));
    ((client, 1000 + flow as u16), (ip("10.9.9.9"), 53))
}

/// Model key: (flow, whether client→server packets are evaluated at Out).
type MKey = (usize, bool);

fn model_key_of_view(v: &sluice_classify::StateView<'_>) -> MKey {
    let flow = (0..POOL)
        .find(|&f| {
            let (a, b) = endpoints(f);
            (v.src == a && v.dst == b) || (v.src == b && v.dst == a)
        })
        .expect("state of a pool flow");
    let (client, _) = endpoints(flow);
    let init_out = v.direction == Direction::Out;
    (flow, if v.src == client { init_out } else { !init_out })
}

fn run_model(ops: &[Op]) {
    let mut cfg = config(vec![pass()]);
    // The model keeps unscaled timeouts (adaptive scaling: flood.rs).
    cfg.options.adaptive_start = Some(0);
    cfg.options.adaptive_end = Some(0);
    let t = Duration::from_secs(TIMEOUT_S);
    let timeouts = Timeouts {
        udp_first: t,
        udp_single: t,
        udp_multiple: t,
        ..Timeouts::default()
    };
    let mut c = Classifier::new(
        &cfg,
        Options {
            hash_key: [3; 16],
            state_limit: Some(LIMIT as u32),
            timeouts: Some(timeouts),
        },
    );
    let e = c.iface("ext");
    let mut now = Instant::from_nanos(1);
    // The model: key → (expiry instant, created by a reply, answered), for
    // every state resident in the real table.
    let mut model: HashMap<MKey, (Instant, bool, bool)> = HashMap::new();
    let mut evicted = 0;
    for (step, o) in ops.iter().enumerate() {
        match *o {
            Op::Packet { flow, reply, out } => {
                let (a, b) = endpoints(flow);
                let (s, d) = if reply { (b, a) } else { (a, b) };
                let p = common::info(&sluice_wire::build::udp(s.0, d.0, s.1, d.1, 4));
                let dir = if out { Direction::Out } else { Direction::In };
                let key = (flow, if reply { !out } else { out });
                let live = model.get(&key).is_some_and(|&(x, _, _)| now < x);
                let resident_before = c.stats().states;
                let dec = c.classify(now, e, dir, &p);
                if live {
                    assert_eq!(
                        dec.state,
                        StateHit::Matched,
                        "step {step}: live state must match"
                    );
                    if let Some(m) = model.get_mut(&key) {
                        m.0 = now + t;
                        // The other side spoke: no longer embryonic.
                        m.2 |= m.1 != reply;
                    }
                } else {
                    assert_ne!(
                        dec.state,
                        StateHit::Matched,
                        "step {step}: expired/absent state matched"
                    );
                    model.remove(&key);
                    match dec.state {
                        StateHit::Created => {
                            model.insert(key, (now + t, reply, false));
                        }
                        _ => {
                            assert_eq!(dec.verdict, Verdict::Block(BlockReason::StateLimit));
                            assert_eq!(
                                resident_before, LIMIT,
                                "step {step}: refused below the limit"
                            );
                            assert_eq!(
                                c.stats().states,
                                LIMIT,
                                "step {step}: refused while not full"
                            );
                        }
                    }
                }
            }
            Op::Advance { ms } => now += Duration::from_millis(ms),
            Op::Expire { budget } => {
                let n = c.expire(now, budget);
                assert!(n <= budget);
            }
        }
        // Sync: whatever the real table dropped must have been expired in
        // the model, or be the one unanswered state evicted at this step.
        let real: HashMap<MKey, Instant> = c
            .states()
            .map(|v| (model_key_of_view(&v), v.expires))
            .collect();
        let evicted_now = c.stats().states_evicted - evicted;
        evicted += evicted_now;
        assert!(evicted_now <= 1, "step {step}: {evicted_now} evictions");
        let mut vanished_live = 0;
        for (k, &(exp, _, answered)) in &model {
            if !real.contains_key(k) && exp > now {
                assert!(!answered, "step {step}: answered live state {k:?} vanished");
                vanished_live += 1;
            }
        }
        assert!(
            vanished_live <= evicted_now,
            "step {step}: {vanished_live} live states vanished, {evicted_now} evicted"
        );
        model.retain(|k, _| real.contains_key(k));
        let exps: HashMap<MKey, Instant> = model.iter().map(|(k, v)| (*k, v.0)).collect();
        assert_eq!(real, exps, "step {step}: table and model disagree");
        assert!(c.stats().states <= LIMIT && c.state_slots_allocated() <= LIMIT);
    }
    // A full sweep leaves no expired state behind.
    c.expire(now, LIMIT);
    assert!(c.states().all(|v| now < v.expires));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn state_table_agrees_with_model(ops in proptest::collection::vec(op(), 1..200)) {
        run_model(&ops);
    }
}
