//! The exposition's tests: each family's shape, and the whole text of a
//! fixed snapshot against its golden file.

use super::*;

#[test]
fn rtt_samples_are_a_prometheus_histogram() {
    let mut h = [sluice_time::Histogram::new(), sluice_time::Histogram::new()];
    for ms in [3u64, 12, 40, 40, 250] {
        h[0].record(sluice_time::Duration::from_millis(ms));
    }
    let mut o = Out::default();
    rtt_histograms(&mut o, &h);
    let t = o.text;
    assert!(
        t.contains("# TYPE sluice_tcp_rtt_seconds histogram\n"),
        "{t}"
    );
    let at = |le: &str| {
        let key = format!("sluice_tcp_rtt_seconds_bucket{{endpoint=\"responder\",le=\"{le}\"}} ");
        let line = t
            .lines()
            .find(|l| l.starts_with(&key))
            .unwrap_or_else(|| panic!("{key}\n{t}"));
        line[key.len()..].parse::<u64>().unwrap()
    };
    // Edges of the histogram's buckets: each count exact.
    assert_eq!(at("0.002048"), 0);
    assert_eq!(at("0.003072"), 1);
    assert_eq!(at("0.008192"), 1);
    assert_eq!(at("0.012288"), 2);
    assert_eq!(at("0.049152"), 4);
    assert_eq!(at("0.196608"), 4);
    assert_eq!(at("0.262144"), 5);
    assert_eq!(at("+Inf"), 5);
    assert_eq!(
        t.matches("endpoint=\"responder\",le=").count(),
        LE_US.len() + 1
    );
    assert!(
        t.contains("sluice_tcp_rtt_seconds_count{endpoint=\"responder\"} 5\n"),
        "{t}"
    );
    assert!(
        t.contains("sluice_tcp_rtt_seconds_sum{endpoint=\"responder\"} 0.345\n"),
        "{t}"
    );
    assert!(
        t.contains("sluice_tcp_rtt_seconds_count{endpoint=\"initiator\"} 0\n"),
        "{t}"
    );
}

/// One scrape copies the engine under one lock (it took three: the
/// queues, the info and the RTT histograms each locked it), the
/// health reports included.
#[test]
fn a_scrape_takes_the_engine_lock_once() {
    let d = crate::testing::example_daemon("one-lock");
    let before = crate::LOCKS_TAKEN.with(|n| n.get());
    let text = render(&d.state);
    let taken = crate::LOCKS_TAKEN.with(|n| n.get()) - before;
    assert_eq!(taken, 1, "engine locks per scrape");
    for family in [
        "sluice_queue_packets_total",
        "sluice_states",
        "sluice_tcp_rtt_seconds",
        "sluice_health_verdict",
    ] {
        assert!(text.contains(&format!("# TYPE {family} ")), "{family}");
    }
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape("x\ny"), r"x\ny");
}

/// Every counter of a queue with TCP control, under the queue's labels
/// and its action; nothing for the queues without it.
#[test]
fn tcp_control_counters_per_queue() {
    let q = crate::snapshot::tests::tcp_controlled();
    let mut o = Out::default();
    queue_families(&mut o, &q, &[]);
    let tcp: Vec<&str> = o
        .text
        .lines()
        .filter(|l| l.starts_with("sluice_queue_tcp_"))
        .collect();
    assert_eq!(
        tcp,
        [
            r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="passed"} 3400"#,
            r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="held"} 900"#,
            r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="paced"} 880"#,
            r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="flushed"} 6"#,
            r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="capped"} 1"#,
            r#"sluice_queue_tcp_windows_total{iface="wan0",queue="bulk",action="clamped"} 4100"#,
            r#"sluice_queue_tcp_windows_total{iface="wan0",queue="bulk",action="untouched"} 2"#,
            r#"sluice_queue_tcp_ignored_total{iface="wan0",queue="bulk",action="ack_unsent"} 7"#,
            r#"sluice_queue_tcp_ignored_total{iface="wan0",queue="bulk",action="syn"} 5"#,
            r#"sluice_queue_tcp_flows{iface="wan0",queue="bulk"} 12"#,
            r#"sluice_queue_tcp_held_acks{iface="wan0",queue="bulk"} 14"#,
            r#"sluice_queue_tcp_pace_bytes_per_second{iface="wan0",queue="bulk"} 575000"#,
        ],
        "{}",
        o.text
    );
    for (name, kind) in [
        ("sluice_queue_tcp_acks_total", "counter"),
        ("sluice_queue_tcp_windows_total", "counter"),
        ("sluice_queue_tcp_ignored_total", "counter"),
        ("sluice_queue_tcp_flows", "gauge"),
        ("sluice_queue_tcp_held_acks", "gauge"),
        ("sluice_queue_tcp_pace_bytes_per_second", "gauge"),
    ] {
        let t = format!("# TYPE {name} {kind}\n");
        assert_eq!(o.text.matches(&t).count(), 1, "{}", o.text);
    }
}

/// The autorate families of a 20 Mbit/s upload root with `autorate
/// (min 5M, max 40M, OPTION)`, its rate set by hand to `rate`.
fn autorate_metrics(option: &str, rate: Option<sluice_time::Rate>) -> Out {
    let text = format!(
        "queue up on wan0 bandwidth 20M autorate (min 5M, max 40M, {option})\n\
         queue bulk parent up bandwidth 100% default\n"
    );
    let cfg = sluice_conf::check("t.conf", &text, &[]).unwrap().config;
    let mut e = sluice_engine::Engine::new(
        &cfg,
        sluice_engine::Options::bridge("lan0", "wan0", [1; 16]),
    )
    .unwrap();
    if let Some(r) = rate {
        e.set_rate(1, r, sluice_time::Instant(1)).unwrap();
    }
    let q = crate::snapshot::queues_from(&e.report(), Some(&cfg));
    let mut o = Out::default();
    autorate_families(&mut o, &q);
    o
}

#[test]
fn autorate_and_the_current_rate_are_exported() {
    let o = autorate_metrics("dry-run", Some(sluice_time::Rate::mbps(12)));
    for want in [
        r#"sluice_iface_rate_bytes_per_second{iface="wan0"} 1500000"#,
        r#"sluice_autorate_rate_bytes_per_second{iface="wan0"} 2500000"#,
        r#"sluice_autorate_min_bytes_per_second{iface="wan0"} 625000"#,
        r#"sluice_autorate_max_bytes_per_second{iface="wan0"} 5000000"#,
        r#"sluice_autorate_dry_run{iface="wan0"} 1"#,
        r#"sluice_autorate_flows{iface="wan0"} 0"#,
        r#"sluice_autorate_samples_total{iface="wan0"} 0"#,
        r#"sluice_autorate_samples_unsound_total{iface="wan0"} 0"#,
        "# TYPE sluice_autorate_samples_unsound_total counter",
        r#"sluice_autorate_holds_total{iface="wan0"} 0"#,
        r#"sluice_autorate_held_seconds_total{iface="wan0"} 0"#,
        "# TYPE sluice_autorate_held_seconds_total counter",
        r#"sluice_autorate_decisions_total{iface="wan0",reason="delay"} 0"#,
        "# TYPE sluice_autorate_decisions_total counter",
    ] {
        assert!(o.text.lines().any(|l| l == want), "{want} in\n{}", o.text);
    }
    assert!(
        !o.text.contains("sluice_autorate_delay_seconds{"),
        "no signal, no sample"
    );
    assert!(!o.text.contains(r#"iface="lan0""#), "lan0 is not shaped");
    assert!(
        !o.text.contains("sluice_autorate_probe"),
        "no probe asked for"
    );
}

#[test]
fn autorates_probe_is_exported_where_one_is_sent() {
    let o = autorate_metrics("probe 192.0.2.1", None);
    for want in [
        r#"sluice_autorate_probe_sent_total{iface="wan0",target="192.0.2.1"} 0"#,
        r#"sluice_autorate_probe_answered_total{iface="wan0",target="192.0.2.1"} 0"#,
        r#"sluice_autorate_probe_lost_total{iface="wan0",target="192.0.2.1"} 0"#,
        "# TYPE sluice_autorate_probe_rtt_seconds gauge",
    ] {
        assert!(o.text.lines().any(|l| l == want), "{want} in\n{}", o.text);
    }
    assert!(
        !o.text.contains("sluice_autorate_probe_rtt_seconds{"),
        "no reply yet"
    );
}

#[test]
fn filtered_acks_are_a_drop_reason_of_the_queue() {
    let (e, cfg) = crate::snapshot::tests::ack_filtered();
    let q = crate::snapshot::queues_from(&e.report(), Some(&cfg));
    let mut o = Out::default();
    queue_families(&mut o, &q, &[]);
    let line = o
        .text
        .lines()
        .find(|l| l.starts_with(r#"sluice_queue_dropped_packets_total{iface="wan0",queue="up""#))
        .unwrap_or_else(|| panic!("{}", o.text));
    assert_eq!(
        line,
        r#"sluice_queue_dropped_packets_total{iface="wan0",queue="up",reason="ack-filter"} 8"#
    );
}

/// The engine clock of [`full_scrape`]'s daemon: the end of its traffic.
fn at_end() -> sluice_time::Instant {
    sluice_time::Instant(12_000_000_000)
}

/// Both directions shaped, autorate with a probe on the upload, TCP
/// control: every family has samples.
const FULL_CONF: &str = "\
pipe up on wan0 bandwidth 1Mb sched fq_codel (ecn) autorate (min 500Kb, max 2Mb, probe 192.0.2.1) ack-pacing window-clamp
pipe down on lan0 bandwidth 4Mb sched fq_codel (ecn) ingress
pass
";

/// A scrape of a daemon whose engine forwarded 12 s of traffic in
/// virtual time (an upload offered twice its rate: loaded, a standing
/// queue; a light download), with the I/O layer's every counter: the
/// text every family of the exposition has samples in, the same at every
/// run.
pub(crate) fn full_scrape() -> crate::snapshot::Scrape {
    use sluice_time::{Duration, Instant};
    use std::net::Ipv4Addr;
    let dir = crate::testing::tmpdir("metrics-full");
    let path = dir.join("pf.conf");
    std::fs::write(&path, FULL_CONF).expect("write pf.conf");
    let loaded = crate::load(&path, &[]).expect("the config checks").loaded;
    let _ = std::fs::remove_dir_all(&dir);
    let mut e = sluice_engine::Engine::new(
        &loaded.config,
        sluice_engine::Options::bridge("lan0", "wan0", [5; 16]),
    )
    .expect("the engine builds");
    let (client, server) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(192, 0, 2, 1));
    let mut now = Instant::ZERO;
    let mut k = 0u64;
    while now < at_end() {
        // 2 Mbit/s up (a 1514-byte frame each 6 ms), 0.5 Mbit/s down.
        if k.is_multiple_of(6) {
            let f = sluice_wire::build::udp_v4(client, server, 4000, 5001, 1472);
            e.handle_rx(now, 0, f);
        }
        if k.is_multiple_of(24) {
            let f = sluice_wire::build::udp_v4(server, client, 5001, 4000, 1472);
            e.handle_rx(now, 1, f);
        }
        e.handle_timeout(now);
        for iface in [0, 1] {
            while e.poll_tx(now, iface).is_some() {}
        }
        while e.poll_dropped().is_some() {}
        now += Duration::from_millis(1);
        k += 1;
    }
    let names = ["lan0".to_string(), "wan0".to_string()];
    let io = crate::daemon::io_stats::io_counters(&names, &sluice_io::IoStats::default());
    let state = crate::DaemonState {
        engine: std::sync::Arc::new(std::sync::Mutex::new(e)),
        running: crate::Running::new(loaded),
        config_path: path,
        now: at_end,
        started: std::time::Instant::now(),
        ifaces: names,
        io_method: "af_packet".into(),
        io_stats: std::sync::Arc::new(move || io.clone()),
        xdp_queues: std::sync::Arc::new(Vec::new),
        wake: std::sync::Arc::new(|| {}),
        stop: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        clients: crate::conn::Clients::new(crate::server::MAX_CLIENTS, MAX_CLIENTS),
    };
    let mut s = crate::snapshot::scrape(&state);
    // What changes from one build or run to the next (the log's counter
    // is the process's).
    (s.info.version, s.info.uptime_ns) = ("0.0.0".into(), 3_600_000_000_000);
    for (_, v) in s
        .info
        .io
        .iter_mut()
        .filter(|(n, _)| n == "log_write_errors")
    {
        *v = 0;
    }
    s
}

/// The whole exposition of [`full_scrape`], pinned: `UPDATE_GOLDEN=1`
/// rewrites `golden.txt` (then review the diff).
#[test]
fn the_whole_exposition_golden() {
    let text = render_scrape(&full_scrape());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics/golden.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("write the golden file");
    }
    assert_eq!(text, std::fs::read_to_string(&path).unwrap_or_default());
}

/// Prometheus's rules, over every line of the full exposition: each
/// family has HELP and TYPE once, before its samples; counters and only
/// counters end in `_total`; no `bps`; histogram buckets are cumulative
/// and end at `+Inf` = `_count`.
#[test]
fn every_family_follows_the_naming_rules() {
    let scrape = full_scrape();
    let text = render_scrape(&scrape);
    // Each of the I/O layer's counters is one sample of a family.
    let io = text
        .lines()
        .filter(|l| l.starts_with("sluice_io_") || l.starts_with("sluice_log_"))
        .count();
    assert_eq!(io, scrape.info.io.len(), "{:?}", scrape.info.io);
    let mut types: std::collections::HashMap<String, String> = Default::default();
    let mut helps = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(helps.insert(name.to_string()), "HELP twice: {name}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(helps.contains(name), "TYPE before HELP: {name}");
            let old = types.insert(name.to_string(), kind.to_string());
            assert!(old.is_none(), "TYPE twice: {name}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(!name.contains("bps") && !name.contains("qlength"), "{line}");
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    let base = name.strip_suffix(s)?;
                    (types.get(base).map(String::as_str) == Some("histogram")).then_some(base)
                })
                .unwrap_or(name);
            assert!(types.contains_key(family), "sample before its TYPE: {line}");
        }
    }
    // Cumulative buckets, per series.
    let mut last: Option<(String, u64)> = None;
    for line in text.lines().filter(|l| l.contains("_bucket{")) {
        let (series, v) = line.rsplit_once(' ').unwrap();
        let key = series.split(",le=").next().unwrap().to_string();
        let v: u64 = v.parse().unwrap();
        if let Some((k, prev)) = &last {
            if *k == key {
                assert!(v >= *prev, "{line}");
            }
        }
        last = Some((key, v));
    }
    for family in [
        "sluice_queue_sojourn_seconds",
        "sluice_health_added_latency_seconds",
        "sluice_tcp_rtt_seconds",
    ] {
        assert_eq!(types[family], "histogram", "{family}");
    }
    // The loaded upload's queue waited: its sojourn has samples.
    let count = text
        .lines()
        .find(|l| l.starts_with("sluice_queue_sojourn_seconds_count{iface=\"wan0\""))
        .expect("the upload's sojourn");
    assert_ne!(count.rsplit(' ').next(), Some("0"), "{count}");
}

/// contrib/grafana/sluice.json, the dashboard shipped for these names.
const DASHBOARD: &str = include_str!("../../../../contrib/grafana/sluice.json");

/// Every `sluice_…` metric name in the PromQL of a dashboard: its
/// panels' `expr`s and its variables' queries.
fn queried_names(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "definition" | "query", serde_json::Value::String(q)) => {
                        out.extend(promql_names(q));
                    }
                    _ => queried_names(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| queried_names(v, out)),
        _ => {}
    }
}

/// The metric names (`sluice_` and name characters) in one query.
fn promql_names(q: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = q;
    while let Some(at) = rest.find("sluice_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// The names of a dashboard's queries that the exposition `text` has no
/// sample of.
fn missing_from(dashboard: &str, text: &str) -> Vec<String> {
    let d: serde_json::Value = serde_json::from_str(dashboard).expect("the dashboard is JSON");
    let mut names = Vec::new();
    queried_names(&d, &mut names);
    assert!(!names.is_empty(), "no query names a sluice metric");
    // A sample's name, or a family's whose samples come and go (the
    // suggested rate: only while not in control).
    let known: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ").or(Some(l)))
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    names.retain(|n| !known.contains(n.as_str()));
    names
}

/// Every metric the Grafana dashboard queries is one the daemon exports
/// in a full snapshot (a renamed family breaks the test).
#[test]
fn the_grafana_dashboard_queries_exported_metrics() {
    let text = render_scrape(&full_scrape());
    assert_eq!(missing_from(DASHBOARD, &text), Vec::<String>::new());
    let d: serde_json::Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut names = Vec::new();
    queried_names(&d, &mut names);
    for wanted in [
        "sluice_health_verdict",
        "sluice_iface_tx_bytes_total",
        "sluice_iface_rate_bytes_per_second",
        "sluice_queue_sojourn_seconds_bucket",
        "sluice_health_added_latency_seconds_bucket",
        "sluice_queue_dropped_packets_total",
        "sluice_queue_ecn_marks_total",
        "sluice_autorate_rate_bytes_per_second",
    ] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} not graphed");
    }
    // A misspelt name is caught.
    let typo = DASHBOARD.replace(
        "sluice_queue_sojourn_seconds_bucket",
        "sluice_queue_sojurn_seconds_bucket",
    );
    assert_eq!(
        missing_from(&typo, &text),
        [
            "sluice_queue_sojurn_seconds_bucket",
            "sluice_queue_sojurn_seconds_bucket"
        ]
    );
}
