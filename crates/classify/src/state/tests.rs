use super::*;
use sluice_wire::tcp_flags::{ACK, SYN};

fn t(s: u64) -> Instant {
    Instant::from_nanos(s * 1_000_000_000)
}

/// A TCP state for port `n`, created at `at`, living 100 s; answered
/// (ESTABLISHED:ESTABLISHED) or left after the SYN.
fn tcp_state(n: u16, at: Instant, answered: bool) -> State {
    let a = ("10.0.0.1".parse().unwrap(), n);
    let b = ("10.0.0.2".parse().unwrap(), 80);
    let (key, lo) = StateKey::of(6, a, b, true);
    let (mut proto, timeout) = ProtoState::new(6);
    if answered {
        proto.update(1, SYN | ACK);
        proto.update(0, ACK);
    }
    State {
        key,
        init_is_lo: lo,
        rule: 0,
        queue: None,
        prio: None,
        max_mss: None,
        proto,
        timeout,
        timeout_len: Duration::from_secs(100),
        created: at,
        last: at,
        gen: 0,
        src_tracked: false,
        conn_counted: false,
        packets: [1, 0],
        bytes: [0, 0],
        rtt: Default::default(),
        win: None,
    }
}

fn table(limit: u32) -> StateTable {
    StateTable::new(limit, KeyedSip::new(&[7; 16]))
}

#[test]
fn adaptive_expiry_arithmetic() {
    let d = Duration::from_secs(120);
    assert_eq!(
        expiry(t(10), d, 600, (600, 1200)),
        t(130),
        "at start: unscaled"
    );
    assert_eq!(expiry(t(10), d, 900, (600, 1200)), t(70), "half way: half");
    assert_eq!(expiry(t(10), d, 1000, (600, 1200)), t(50));
    assert_eq!(expiry(t(10), d, 1200, (600, 1200)), t(10), "at end: now");
    assert_eq!(expiry(t(10), d, 5000, (600, 1200)), t(10));
    assert_eq!(expiry(t(10), d, 5000, (0, 0)), t(130), "0/0: off");
    assert_eq!(
        expiry(t(10), d, 5000, (900, 900)),
        t(130),
        "empty range: off"
    );
    // No overflow with the longest timeout and the largest counts.
    let long = Duration(u64::MAX / 4);
    let e = expiry(
        Instant::from_nanos(0),
        long,
        u32::MAX as usize - 1,
        (0, u64::from(u32::MAX)),
    );
    assert!(e > Instant::from_nanos(0));
}

#[test]
fn embryonic_is_unanswered() {
    assert!(tcp_state(1, t(0), false).embryonic());
    assert!(!tcp_state(1, t(0), true).embryonic());
    let mut half = tcp_state(1, t(0), false);
    half.proto.update(1, SYN | ACK);
    assert!(half.embryonic(), "SYN, SYN-ACK: the handshake is not done");
    let mut udp = tcp_state(1, t(0), false);
    (udp.proto, udp.timeout) = ProtoState::new(17);
    assert!(udp.embryonic());
    udp.timeout = udp.proto.update(0, 0);
    assert!(udp.embryonic(), "one direction only");
    udp.timeout = udp.proto.update(1, 0);
    assert!(!udp.embryonic());
    let mut icmp = tcp_state(1, t(0), false);
    (icmp.proto, icmp.timeout) = ProtoState::new(1);
    assert!(icmp.embryonic());
    icmp.timeout = icmp.proto.update(1, 0);
    assert!(!icmp.embryonic());
}

#[test]
fn full_table_evicts_the_oldest_embryonic_state_never_an_answered_one() {
    let mut tb = table(4);
    tb.insert(tcp_state(1, t(0), true), t(0)).unwrap();
    tb.insert(tcp_state(2, t(2), false), t(2)).unwrap();
    tb.insert(tcp_state(3, t(1), false), t(2)).unwrap();
    tb.insert(tcp_state(4, t(0), true), t(2)).unwrap();
    assert_eq!(tb.insert(tcp_state(5, t(3), false), t(3)), Ok(()));
    assert_eq!((tb.len(), tb.counters.evicted), (4, 1));
    let ports: Vec<u16> = tb.iter().map(|s| s.key.lo.1).collect();
    assert!(
        !ports.contains(&3),
        "the least recently used embryonic went: {ports:?}"
    );
    assert_eq!(tb.insert(tcp_state(6, t(3), false), t(3)), Ok(()));
    assert_eq!(tb.insert(tcp_state(7, t(3), false), t(3)), Ok(()));
    // Left: the two answered states and two embryonic ones (5 went, then 2 or 6).
    let answered = tb.iter().filter(|s| !s.embryonic()).count();
    assert_eq!((tb.len(), answered, tb.counters.evicted), (4, 2, 3));
    let mut full = table(2);
    full.insert(tcp_state(1, t(0), true), t(0)).unwrap();
    full.insert(tcp_state(2, t(0), true), t(0)).unwrap();
    assert_eq!(
        full.insert(tcp_state(3, t(1), false), t(1)),
        Err(InsertError::Full)
    );
    assert_eq!(
        (full.len(), full.counters.evicted, full.counters.limit_hits),
        (2, 0, 1)
    );
}

#[test]
fn expired_states_go_before_any_eviction() {
    let mut tb = table(2);
    tb.insert(tcp_state(1, t(0), false), t(0)).unwrap();
    tb.insert(tcp_state(2, t(50), false), t(50)).unwrap();
    // Port 1 expired at 100 s; port 2 lives until 150 s.
    assert_eq!(tb.insert(tcp_state(3, t(120), false), t(120)), Ok(()));
    assert_eq!((tb.counters.expired, tb.counters.evicted), (1, 0));
    assert!(tb.iter().any(|s| s.key.lo.1 == 2));
}

/// Constant cost under a flood: each refused or admitted insert examines
/// at most RECLAIM_SCAN_SLOTS slots, yet consecutive attempts walk the
/// whole slab, so a lone embryonic state is found within
/// ceil(limit / RECLAIM_SCAN_SLOTS) attempts.
#[test]
fn reclaim_is_bounded_per_insert_and_covers_the_slab() {
    let limit = 1000u16;
    let mut tb = table(u32::from(limit));
    for n in 0..limit - 1 {
        tb.insert(tcp_state(n + 1, t(0), true), t(0)).unwrap();
    }
    tb.insert(tcp_state(limit, t(0), false), t(0)).unwrap();
    let mut attempts = 0;
    loop {
        let before = tb.cursor;
        attempts += 1;
        let r = tb.insert(tcp_state(60_000, t(1), false), t(1));
        let step = (tb.cursor + tb.slots.len() - before) % tb.slots.len();
        assert!(
            step <= RECLAIM_SCAN_SLOTS,
            "one attempt scanned {step} slots"
        );
        if r.is_ok() {
            break;
        }
    }
    let bound = usize::from(limit).div_ceil(RECLAIM_SCAN_SLOTS);
    assert!(attempts <= bound, "{attempts} attempts > {bound}");
    assert_eq!((tb.counters.evicted, tb.len()), (1, usize::from(limit)));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// Random inserts (answered or not, at advancing times) into a
    /// small table: never above the limit; an answered live state is
    /// never removed; at most one eviction per insert, and only when no
    /// expired state was met; a refusal only when full.
    #[test]
    fn eviction_invariants(
        limit in 1u32..40,
        ops in proptest::collection::vec((0u16..200, proptest::bool::ANY, 0u64..30), 1..300),
    ) {
        let mut tb = table(limit);
        let mut now = 0;
        for (port, answered, dt) in ops {
            now += dt;
            let st = tcp_state(port, t(now), answered);
            if tb.peek(&st.key, t(now)).is_some() || tb.index.contains_key(&st.key) {
                continue;
            }
            let live_answered: Vec<StateKey> = tb
                .iter()
                .filter(|s| !s.embryonic() && t(now) < tb.expires(s))
                .map(|s| s.key)
                .collect();
            let (evicted, expired) = (tb.counters.evicted, tb.counters.expired);
            let full = tb.len() >= limit as usize;
            let r = tb.insert(st, t(now));
            proptest::prop_assert!(tb.len() <= limit as usize);
            proptest::prop_assert!(tb.slots_allocated() <= limit as usize);
            for k in &live_answered {
                proptest::prop_assert!(tb.index.contains_key(k), "answered live state evicted");
            }
            let ev = tb.counters.evicted - evicted;
            proptest::prop_assert!(ev <= 1);
            if ev == 1 {
                proptest::prop_assert_eq!(tb.counters.expired, expired);
            }
            if r.is_err() {
                proptest::prop_assert!(full);
            }
        }
    }
}

#[test]
fn key_orientation() {
    let a = ("10.0.0.1".parse().unwrap(), 1000);
    let b = ("10.0.0.2".parse().unwrap(), 80);
    let (k_fwd, lo1) = StateKey::of(6, a, b, true);
    let (k_rev, lo2) = StateKey::of(6, b, a, false);
    assert_eq!(
        k_fwd, k_rev,
        "reply at the opposite direction finds the state"
    );
    assert!(lo1 && !lo2);
    let (k_same_dir_rev, _) = StateKey::of(6, b, a, true);
    assert_ne!(k_fwd, k_same_dir_rev);
    let (k_other_dir, _) = StateKey::of(6, a, b, false);
    assert_ne!(
        k_fwd, k_other_dir,
        "the ingress half of a routed packet is another key"
    );
}
