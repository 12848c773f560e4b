//! Golden tests of the `show` layouts.

use super::*;
use sluice_control::proto::*;

/// Compares `got` with `tests/golden/show/NAME.txt`; `UPDATE_GOLDEN=1`
/// rewrites the file instead (then review the diff).
fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/show")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).expect("write the golden file");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got, want, "{} differs", path.display());
}

/// An interface's queues as `show queues` receives them (no autorate).
fn iface(name: &str, sched: Option<&str>, bps: Option<u64>, queues: Vec<QueueJson>) -> IfaceQueues {
    IfaceQueues {
        autorate: None,
        name: name.into(),
        sched: sched.map(Into::into),
        bandwidth_bps: bps,
        queues,
    }
}

/// The reply of one interface.
fn one(i: IfaceQueues) -> QueuesReply {
    QueuesReply { ifaces: vec![i] }
}

fn queue(id: u32, name: &str) -> QueueJson {
    QueueJson {
        id,
        name: name.into(),
        parent: None,
        options: vec![],
        bandwidth_bps: None,
        priority: None,
        qlimit: None,
        packets: 0,
        bytes: 0,
        dropped_packets: 0,
        dropped_bytes: 0,
        drops: vec![],
        ecn_marks: 0,
        borrows: 0,
        overlimits: 0,
        qlength: 0,
        backlog_bytes: 0,
        sojourn_p50_ns: None,
        sojourn_p99_ns: None,
        sojourn_max_ns: None,
        sojourn_last_p50_ns: None,
        sojourn_last_p99_ns: None,
        ingress_charged_packets: None,
        ingress_charged_bytes: None,
        tcp: None,
    }
}

#[test]
fn an_ingress_queue_shows_what_its_drops_were_charged() {
    let q = QueueJson {
        qlimit: Some(50),
        options: vec!["default".into(), "ingress".into()],
        dropped_packets: 3,
        dropped_bytes: 4_500,
        drops: vec![DropJson {
            reason: "aqm".into(),
            packets: 3,
            bytes: 4_500,
        }],
        ingress_charged_packets: Some(3),
        ingress_charged_bytes: Some(4_542),
        ..queue(1, "dl")
    };
    let r = one(iface("lan0", Some("hfsc"), Some(4_850_000), vec![q]));
    golden("ingress", &format_queues(&r));
}

/// A download queue with TCP control (and ingress mode, as it would be
/// configured): one more line after the ingress one, every counter
/// under its own word.
#[test]
fn a_tcp_controlled_queue_shows_its_acks_and_windows() {
    let q = QueueJson {
        qlimit: Some(1000),
        options: vec![
            "default".into(),
            "ingress".into(),
            "ack-pacing".into(),
            "window-clamp".into(),
        ],
        packets: 51_200,
        bytes: 74_000_000,
        qlength: 4,
        ingress_charged_packets: Some(0),
        ingress_charged_bytes: Some(0),
        tcp: Some(TcpControlReport {
            flows: 12,
            acks_passed: 3400,
            acks_held: 900,
            held_now: 14,
            acks_paced: 880,
            acks_flushed: 6,
            acks_capped: 1,
            windows_clamped: 4100,
            windows_untouched: 2,
            acks_unsent: 3,
            syns_ignored: 0,
            pace_bps: 4_600_000,
            path_queue: Some(sluice_time::Duration::from_millis(3)),
        }),
        ..queue(1, "dl")
    };
    let r = one(iface(
        "lan0",
        Some("hfsc"),
        Some(4_850_000),
        vec![q, queue(2, "other")],
    ));
    golden("tcp-control", &format_queues(&r));
}

#[test]
fn queues_golden() {
    let def = QueueJson {
        priority: Some(1),
        qlimit: Some(50),
        options: vec!["default".into()],
        packets: 1234,
        bytes: 1_800_000,
        dropped_packets: 12,
        dropped_bytes: 18_000,
        drops: vec![DropJson {
            reason: "queue-full".into(),
            packets: 12,
            bytes: 18_000,
        }],
        qlength: 7,
        sojourn_p50_ns: Some(48_000_000),
        sojourn_p99_ns: Some(96_100_000),
        sojourn_max_ns: Some(120_000_000),
        sojourn_last_p50_ns: Some(2_100_000),
        sojourn_last_p99_ns: Some(4_200_000),
        ..queue(2, "q_def")
    };
    // Busy once, idle in the last interval: its quantiles since creation
    // are not shown as if they were recent.
    let pri = QueueJson {
        priority: Some(7),
        qlimit: Some(50),
        packets: 10,
        bytes: 600,
        sojourn_p50_ns: Some(30_000_000),
        sojourn_p99_ns: Some(30_000_000),
        sojourn_max_ns: Some(30_000_000),
        ..queue(1, "q_pri")
    };
    let r = QueuesReply {
        ifaces: vec![
            iface("lan0", None, None, vec![]),
            iface(
                "wan0",
                Some("priq"),
                Some(100_000),
                vec![queue(0, "root_wan0"), pri, def],
            ),
        ],
    };
    golden("queues", &format_queues(&r));
    // `show queues -v` a second later: the measured rates join.
    let mut before = r.clone();
    let q = &mut before.ifaces[1].queues[2];
    (q.packets, q.bytes) = (1134, 1_650_000);
    golden(
        "queues-v",
        &format_queues_measured(&r, Some((&before, 1.0))),
    );
}

#[test]
fn measured_rates_between_two_snapshots() {
    let snap = |packets, bytes| {
        one(iface(
            "wan0",
            Some("priq"),
            Some(1_000_000),
            vec![QueueJson {
                packets,
                bytes,
                ..queue(1, "q")
            }],
        ))
    };
    let (a, b) = (snap(100, 150_000), snap(300, 400_000));
    // 200 packets and 250 kB in 2 s: 100 packets/s, 1 Mb/s.
    let out = format_queues_measured(&b, Some((&a, 2.0)));
    assert!(
        out.ends_with("  [ measured: 100.0 packets/s, 1.00Mb/s ]\n"),
        "{out}"
    );
    // A counter that went backwards (reload) shows no rate.
    let out = format_queues_measured(&a, Some((&b, 2.0)));
    assert!(!out.contains("measured"), "{out}");
    assert_eq!(rate_text(999.0), "999.00b/s");
    assert_eq!(rate_text(12_345.0), "12.35Kb/s");
}

#[test]
fn hfsc_children_follow_parents() {
    let mut a = queue(1, "parent");
    a.bandwidth_bps = Some(1_000_000);
    let mut b = queue(2, "kid");
    b.parent = Some("parent".into());
    b.options = vec!["realtime (2Mb 10 1Mb)".into()];
    let r = one(iface(
        "wan0",
        Some("hfsc"),
        Some(10_000_000),
        vec![queue(0, "root_wan0"), a, b],
    ));
    let out = format_queues(&r);
    let heads: Vec<&str> = out.lines().filter(|l| l.starts_with("queue")).collect();
    assert_eq!(
        heads,
        [
            "queue root_wan0 on wan0 bandwidth 10Mb hfsc { parent }",
            "queue parent on wan0 bandwidth 1Mb hfsc { kid }",
            "queue kid on wan0 hfsc( realtime (2Mb 10 1Mb) )",
        ]
    );
}

fn state(direction: &str, src: &str, rule: Option<u32>) -> StateJson {
    StateJson {
        proto: "tcp".into(),
        src: src.into(),
        src_port: 51234,
        dst: if src.contains(':') {
            "2001:db8::1"
        } else {
            "192.0.2.1"
        }
        .into(),
        dst_port: 80,
        direction: direction.into(),
        state: "ESTABLISHED:ESTABLISHED".into(),
        queue: Some("q_def".into()),
        queue_pri: Some("q_pri".into()),
        rule,
        packets: [14, 12],
        bytes: [1200, 9000],
        age_ns: 12_000_000_000,
        expires_in_ns: 86_388_000_000_000,
        rtt_to_dst: None,
        rtt_to_src: None,
        windows: None,
    }
}

#[test]
fn states_golden() {
    let mut timed = state("out", "10.0.0.2", Some(0));
    timed.rtt_to_dst = Some(RttJson {
        last_ns: 45_000_000,
        min_ns: 41_250_000,
        smoothed_ns: 43_040_000,
        samples: 12,
    });
    let window = |seqlo: u32, seqhi: u32, wscale| WindowJson {
        seqlo,
        seqhi,
        max_win: 64_240,
        wscale,
    };
    timed.windows = Some([
        window(1_000_000, 1_262_144, Some(7)),
        window(u32::MAX - 99, 64_140, Some(9)),
    ]);
    let mut unscaled = state("in", "2001:db8::2", None);
    unscaled.windows = Some([window(5, 65_540, Some(7)), window(9, 9, None)]);
    let r = StatesReply {
        total: 3,
        limit: 10_000,
        states: vec![timed, unscaled],
    };
    golden("states", &format_states(&r));
}

#[test]
fn rules_golden() {
    let r = RulesReply {
        rules: vec![
            RuleJson {
                number: 0,
                line: 10,
                text: Some("pass out on wan0 proto tcp all flags S/SA queue (q_def, q_pri)".into()),
                evaluations: 1234,
                matches: 99,
                packets: 5678,
                bytes: 1_234_567,
                state_creations: 9,
                states: 3,
                mss_clamped: 2,
            },
            RuleJson {
                number: 1,
                line: 12,
                text: None,
                evaluations: 0,
                matches: 0,
                packets: 0,
                bytes: 0,
                state_creations: 0,
                states: 0,
                mss_clamped: 0,
            },
        ],
    };
    golden("rules", &format_rules(&r));
}

#[test]
fn info_golden() {
    let lan = IfaceCountersJson {
        name: "lan0".into(),
        rx_packets: 21,
        rx_bytes: 21_000,
        blocked: 1,
        ..Default::default()
    };
    let wan = IfaceCountersJson {
        name: "wan0".into(),
        tx_packets: 3,
        tx_bytes: 3000,
        queue_drops: 11,
        memory_drops: 4,
        mss_clamped: 3,
        probes_sent: 5,
        probe_replies: 4,
        queue_drops_by_reason: vec![DropJson {
            reason: "queue-full".into(),
            packets: 11,
            bytes: 11_000,
        }],
        ..Default::default()
    };
    let i = InfoReply {
        version: "0.1.0".into(),
        pid: 42,
        uptime_ns: 90_061_000_000_000,
        ifaces: vec!["lan0".into(), "wan0".into()],
        io_method: "af_packet".into(),
        config: "/etc/sluice/pf.conf".into(),
        counters: vec![lan, wan],
        states: 5,
        state_limit: 10_000,
        state_inserts: 7,
        state_removals: 2,
        state_limit_hits: 0,
        io: vec![("rx_ring_drops".into(), 3)],
        memory: MemoryJson {
            held_bytes: 2_801_988,
            peak_bytes: 3_000_000,
            limit_bytes: 64 << 20,
            limit_drops: 4,
            frames: 20_000,
            right_sized: 19_999,
            queue_limits: vec![QueueMemoryLimit {
                iface: "wan0".into(),
                queue: "bulk".into(),
                limit_bytes: 32 << 20,
            }],
        },
        clients: vec![ClientsJson {
            server: "control".into(),
            serving: 1,
            cap: 4,
            refused: 2,
        }],
        learned_addrs: ["lan0", "wan0", "wan1"]
            .map(|n| LearnedAddrsJson {
                iface: n.into(),
                refused: 2,
                addrs: vec![LearnedAddrJson {
                    addr: "192.168.1.10".into(),
                    age_ns: 3_723_000_000_000,
                    idle_ns: 4_000_000_000,
                }],
                configured: if n == "wan1" {
                    vec!["203.0.113.2/24".into()]
                } else {
                    vec![]
                },
            })
            .to_vec(),
        state_evictions: 4,
        state_rule_limit_hits: 1,
        xdp: vec![],
    };
    golden("info", &format_info(&i));
}

/// An upload queue with `ack-filter` after ten ACKs of one download,
/// through the engine and the snapshot as `sluice show queues` gets it.
#[test]
fn filtered_acks_show_among_the_queues_drops() {
    let text = "altq on wan0 priq bandwidth 64Kb queue { up }\nqueue up priq(default ack-filter)\n";
    let cfg = sluice_conf::check("t.conf", text, &[]).unwrap().config;
    let opts = sluice_engine::Options::bridge("lan0", "wan0", [3; 16]);
    let mut e = sluice_engine::Engine::new(&cfg, opts).unwrap();
    for n in 0..10u32 {
        let a = std::net::Ipv4Addr::new(10, 0, 0, 2);
        let b = std::net::Ipv4Addr::new(192, 0, 2, 1);
        let f = sluice_sched::testing::TcpFrame::ack(a, b, 40_000, 443, 1000 * n);
        e.handle_rx(sluice_time::Instant(1), 0, f.build());
    }
    let q = sluice_control::snapshot::queues_from(&e.report(), Some(&cfg));
    let out = format_queues(&q);
    let at = out
        .find("queue up on wan0")
        .unwrap_or_else(|| panic!("{out}"));
    let up: Vec<&str> = out[at..].lines().take(4).collect();
    assert!(up[0].ends_with("priq( default ack-filter )"), "{out}");
    assert!(up[1].contains("dropped pkts:      8"), "{out}");
    assert!(up[3].ends_with("drops: ack-filter 8 ]"), "{out}");
}

fn latency(p50_ms: f64, p99_ms: f64, samples: u64) -> LatencyJson {
    let ns = |ms: f64| Some((ms * 1e6) as u64);
    LatencyJson {
        p50_ns: ns(p50_ms),
        p99_ns: ns(p99_ms),
        mean_ns: ns(p50_ms),
        samples,
    }
}

/// Three directions, one per verdict: the layout of each.
#[test]
fn health_golden() {
    let s = 1_000_000_000u64;
    let up = HealthJson {
        iface: "wan0".into(),
        direction: "upload".into(),
        verdict: "in-control".into(),
        text: "in control".into(),
        since_ns: 72 * s,
        loaded: true,
        output_bps: 9_450_000,
        rate_bps: 10_000_000,
        loaded_ns: 19 * s,
        evidence_ns: 20 * s,
        sluice: LatencyWindowsJson {
            minute: latency(2.0, 5.0, 600),
            hour: latency(1.5, 6.0, 3_000),
            day: latency(1.5, 6.0, 3_000),
        },
        beyond: LatencyWindowsJson {
            minute: latency(1.1, 3.2, 600),
            hour: latency(1.0, 4.0, 3_000),
            day: latency(1.0, 4.0, 3_000),
        },
        grade: Some("A".into()),
        added_ns: Some(3_100_000),
        ..Default::default()
    };
    let down = HealthJson {
        iface: "lan0".into(),
        direction: "download".into(),
        verdict: "not-in-control".into(),
        suggested_bps: Some(25_000_000),
        held_back_by: None,
        text: "not in control".into(),
        since_ns: 9 * s,
        loaded: true,
        output_bps: 26_400_000,
        rate_bps: 30_000_000,
        loaded_ns: 20 * s,
        evidence_ns: 20 * s,
        sluice: LatencyWindowsJson {
            minute: latency(0.2, 0.9, 300),
            ..Default::default()
        },
        beyond: LatencyWindowsJson {
            minute: latency(48.0, 95.0, 300),
            ..Default::default()
        },
        episodes: EpisodesJson {
            count: 1,
            total_ns: 28 * s,
            longest_ns: 28 * s,
            current_ns: Some(28 * s),
        },
        grade: Some("C".into()),
        added_ns: Some(52_000_000),
    };
    let idle = HealthJson {
        iface: "wan1".into(),
        direction: "upload".into(),
        verdict: "not-enough-traffic".into(),
        text: "not enough traffic to say".into(),
        since_ns: 3_600 * s,
        output_bps: 12_000,
        rate_bps: 1_000_000,
        loaded_ns: 1_200_000_000,
        evidence_ns: 20 * s,
        ..Default::default()
    };
    // Bursts of a download whose ACKs wait behind a bloated upload.
    let held = HealthJson {
        iface: "lan1".into(),
        direction: "download".into(),
        verdict: "not-enough-traffic".into(),
        held_back_by: Some("wan1".into()),
        since_ns: 40 * s,
        output_bps: 480_000,
        rate_bps: 1_200_000,
        loaded_ns: 1_500_000_000,
        evidence_ns: 20 * s,
        ..Default::default()
    };
    let r = HealthReply {
        directions: vec![up, down, idle, held],
    };
    golden("health", &format_health(&r));
    assert_eq!(
        format_health(&HealthReply::default()),
        "# no shaped interface: nothing to judge\n"
    );
}
