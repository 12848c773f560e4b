use std::io::Read as _;

use super::*;
use crate::model::{FlowRecord, PingSample, RateSample};

/// tcp_1down in three phases of 0.2 s: three rate samples, two answered
/// pings around a lost one, one download flow with one iperf3 interval.
fn tiny_run() -> RunResult {
    let mut s = crate::scenario::tcp_1down();
    for p in &mut s.phases {
        p.secs = 0.2;
    }
    let rate = |t_s, down_bps| RateSample {
        t_s,
        down_bps,
        up_bps: 1e5,
    };
    let series = crate::model::Series {
        rate: vec![rate(0.2, 1e6), rate(0.4, 4e6), rate(0.6, 1e6)],
        ping: vec![
            PingSample {
                t_s: 0.0,
                rtt_ms: Some(20.0),
            },
            PingSample {
                t_s: 0.2,
                rtt_ms: None,
            },
            PingSample {
                t_s: 0.4,
                rtt_ms: Some(30.0),
            },
        ],
        flows: vec![FlowRecord {
            dir: Dir::Down,
            streams: 1,
            window: None,
            start_s: 0.2,
            end_s: 0.4,
            host: 0,
            goodput_bps: Some(3.5e6),
            retransmits: Some(0),
            error: None,
        }],
        ..Default::default()
    };
    let started = "2026-11-22T05:00:00Z".into();
    let mut run = crate::analysis::finish(&s, "none", series, started, Vec::new());
    // The golden file must not change with the crate's version.
    run.summary.sluice_version = "0.1.0".into();
    run
}

/// The document of [`tiny_run`], checked by hand against flent's aggregator
/// rules and read by flent 2.1.1 (`flent -i`, `-p all_scaled`, `-f stats`).
const GOLDEN: &str = include_str!("golden.json");

#[test]
fn a_small_run_gives_flents_document() {
    let doc = document(&tiny_run(), &[vec![(0.2, 3.6e6)]]).unwrap();
    assert_eq!(serde_json::to_string(&doc).unwrap(), GOLDEN.trim_end());
}

#[test]
fn the_file_is_the_document_gzipped_and_named_after_the_scenario() {
    let dir = std::env::temp_dir().join(format!("sluice-flent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = tiny_run();
    // Without flow0-down.json the flow has no series of its own.
    let path = write(&dir, &run).unwrap();
    assert_eq!(path, dir.join("tcp_1down.flent.gz"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc, document(&run, &[Vec::new()]).unwrap());
    assert!(doc["results"].get("TCP download BE").is_none());
    // With it, iperf3's receiver intervals are the flow's series.
    let iperf = r#"{"start":{"test_start":{"reverse":1}},"intervals":[
        {"sum":{"seconds":0.1,"bits_per_second":2e6}},
        {"sum":{"seconds":0.1,"bits_per_second":4e6}}],
        "end":{"sum_received":{"bits_per_second":3e6,"seconds":0.2},
               "sum_sent":{"bits_per_second":3e6,"retransmits":0}}}"#;
    std::fs::write(dir.join("flow0-down.json"), iperf).unwrap();
    write(&dir, &run).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let raw = &doc["raw_values"]["TCP download BE"];
    let t0 = unix_seconds("2026-11-22T05:00:00Z").unwrap();
    assert_eq!(raw[0]["val"], json!(2.0));
    assert!((raw[1]["t"].as_f64().unwrap() - (t0 + 0.4)).abs() < 1e-6);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn grid_values_interpolate_within_reach_and_are_null_beyond() {
    let s = [(1.0, 10.0), (1.4, 20.0), (4.0, 0.0)];
    assert_eq!(on_grid(&s, 1.2), Some(15.0));
    assert_eq!(on_grid(&s, 1.0), Some(10.0));
    // Before the first sample: that sample within half a step only.
    assert_eq!(on_grid(&s, 0.95), Some(10.0));
    assert_eq!(on_grid(&s, 0.8), None);
    // A gap wider than five steps to the next sample: no value.
    assert_eq!(on_grid(&s, 2.0), None);
    assert_eq!(on_grid(&s, 4.1), Some(0.0));
    assert_eq!(on_grid(&s, 4.2), None);
    assert_eq!(on_grid(&[], 0.0), None);
}

#[test]
fn start_times_parse_as_utc_and_bad_ones_are_an_error() {
    assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0.0));
    assert_eq!(unix_seconds("2000-02-29T12:34:56Z"), Some(951_827_696.0));
    assert_eq!(
        unix_seconds("2026-11-22T05:00:00.5Z"),
        Some(1_795_323_600.5)
    );
    for bad in [
        "",
        "2026-11-22 05:00:00",
        "2026-13-01T00:00:00Z",
        "2026-11-22T05:00:00",
    ] {
        assert_eq!(unix_seconds(bad), None, "{bad}");
    }
    let mut run = tiny_run();
    run.summary.started_at = "yesterday".into();
    let e = document(&run, &[]).unwrap_err();
    assert!(e.contains("yesterday"), "{e}");
    assert_eq!(
        flent_time("2026-11-22T05:00:00Z"),
        "2026-11-22T05:00:00.000000Z"
    );
}

#[test]
fn an_uploads_goodput_comes_from_the_servers_json() {
    let dir = std::env::temp_dir().join(format!("sluice-flent-up-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut run = tiny_run();
    run.series.flows[0].dir = Dir::Up;
    // The client of an upload (no --get-server-output) has the sender's
    // intervals only; the receiver's are in the server's own JSON.
    let client = r#"{"start":{"test_start":{"reverse":0}},"intervals":[
        {"sum":{"seconds":0.2,"bits_per_second":9e6}}]}"#;
    let server = r#"{"start":{"test_start":{"reverse":0}},"intervals":[
        {"sum":{"seconds":0.2,"bits_per_second":1e6}}]}"#;
    std::fs::write(dir.join("flow0-up.json"), client).unwrap();
    std::fs::write(dir.join("flow0-up.server.json"), server).unwrap();
    let iv = flow_intervals(&dir, &run.series.flows);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(iv, vec![vec![(0.2, 1e6)]]);
    let doc = document(&run, &iv).unwrap();
    assert_eq!(
        doc["results"]["TCP upload BE"],
        json!([null, null, 1.0, null])
    );
    assert_eq!(
        doc["results"]["TCP upload avg"],
        json!([null, null, 1.0, null])
    );
    assert!(doc["results"].get("TCP download avg").is_none());
}
