use super::*;

fn fig(a: f64, b: f64, c: f64) -> Figures {
    Figures {
        udp_64b_pps: a,
        udp_1514b_pps: b,
        tcp_bps: c,
    }
}

fn report() -> BenchReport {
    let kernel = fig(300_000.0, 250_000.0, 5e9);
    let f = fig(150_000.0, 125_000.0, 2.5e9);
    BenchReport {
        sluice_bin: "target/release/sluice".into(),
        kernel_release: "6.18.0".into(),
        cpus: 2,
        seconds: 4,
        repeats: 1,
        kernel,
        sluice: vec![SluiceRow {
            path: "sluice mmsg, unshaped".into(),
            io: "mmsg".into(),
            method: String::new(),
            shaped: false,
            figures: f,
            ratio: f.ratio_to(&kernel),
            cpu_ns_per_frame: CpuPerFrame {
                frame_64b: 800.0,
                frame_1518b: 1250.0,
            },
        }],
        accuracy: vec![AccuracyRow {
            rate_bps: 128_000,
            qlimit: 8,
            wire_bps: 127_900.0,
            error: -0.00078125,
            span_seconds: 10.02,
            frames: 106,
            goodput_bps: 121_000.0,
            retransmits: 3,
        }],
    }
}

#[test]
fn ratios_divide_by_the_reference_and_survive_a_zero() {
    let r = fig(150.0, 50.0, 3.0).ratio_to(&fig(300.0, 100.0, 0.0));
    assert_eq!(r, fig(0.5, 0.5, 0.0));
    assert_eq!(
        fig(1.0, 5.0, 2.0).best(&fig(3.0, 4.0, 2.5)),
        fig(3.0, 5.0, 2.5)
    );
}

#[test]
fn cpu_per_frame_keeps_the_cheaper_measured_figure() {
    let a = CpuPerFrame {
        frame_64b: 900.0,
        frame_1518b: 0.0,
    };
    let b = CpuPerFrame {
        frame_64b: 1000.0,
        frame_1518b: 1200.0,
    };
    assert_eq!(
        a.best(&b),
        CpuPerFrame {
            frame_64b: 900.0,
            frame_1518b: 1200.0
        }
    );
}

#[test]
fn cpu_seconds_reads_this_process() {
    let s = cpu_seconds(std::process::id()).unwrap();
    assert!((0.0..1e6).contains(&s), "{s}");
}

#[test]
fn table_has_every_figure_and_ratio() {
    let t = table(&report());
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[2],
        "| kernel bridge | 300 | 1.00 | 250 | 1.00 | 5.00 | 1.00 | – | – | – |"
    );
    assert_eq!(
        lines[3],
        "| sluice mmsg, unshaped | 150 | 0.50 | 125 | 0.50 | 2.50 | 0.50 | 800 | 1250 | 1.25 |"
    );
    assert!(t.contains("best of 1, kernel 6.18.0, 2 CPUs"), "{t}");
}

#[test]
fn report_round_trips_through_json() {
    let r = report();
    let j = serde_json::to_string(&r).unwrap();
    assert!(j.contains("\"udp_64b_pps\":150000.0"), "{j}");
    assert!(j.contains("\"ratio\""), "{j}");
    let back: BenchReport = serde_json::from_str(&j).unwrap();
    assert_eq!(back, r);
}

#[test]
fn accuracy_rows_are_in_the_table() {
    let t = table(&report());
    assert!(
        t.contains(
            "| 128.0 kbit/s | 8 | 127.9 kbit/s | -0.08 % | 10.02 | 106 | 121.0 kbit/s | 3 |"
        ),
        "{t}"
    );
    assert_eq!(fmt_bps(9_998_000.0), "9.998 Mbit/s");
    assert_eq!(fmt_bps(1e9), "1.000 Gbit/s");
}

#[test]
fn accuracy_queue_is_about_10_ms_within_bounds() {
    assert_eq!(accuracy_qlimit(128_000), 8);
    assert_eq!(accuracy_qlimit(10_000_000), 8);
    // 100 Mbit/s × 10 ms = 1 Mbit = 82 full frames.
    assert_eq!(accuracy_qlimit(100_000_000), 82);
    assert_eq!(accuracy_qlimit(10_000_000_000), 500);
    let c = accuracy_conf(128_000, 8);
    assert!(c.starts_with("altq on $ext_if hfsc bandwidth 128000 queue { up_bulk }"));
    assert!(c.contains("qlimit 8 hfsc(default linkshare 100% upperlimit 100%)"));
}

#[test]
fn fq_codel_config_names_the_rate() {
    let c = fq_codel_conf("10G");
    assert!(c.starts_with("queue fq on $ext_if bandwidth 10G flows 1024"));
    assert!(c.contains("pass keep state"));
}
