//! Tests of `sluice top` without a terminal: the model's numbers (rates
//! from deltas, no negative rate after a reload, sort, filter, hosts),
//! the keys, the plain output, and a full screen drawn at 80×24 into
//! ratatui's test backend.

use super::app::App;
use super::model::*;
use super::{plain, render, View};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use sluice_control::proto::*;
use std::time::Duration;

/// A queue from JSON (the reply's own parser: fields added to the report
/// later, with their defaults, do not break these builders).
fn queue(name: &str, parent: Option<&str>, packets: u64, bytes: u64) -> QueueJson {
    serde_json::from_value(json!({
        "id": if parent.is_none() { 0 } else { 1 }, "name": name, "parent": parent,
        "options": [], "bandwidth_bps": null, "priority": null, "qlimit": null,
        "packets": packets, "bytes": bytes, "dropped_packets": 3, "dropped_bytes": 4500,
        "drops": [], "ecn_marks": 7, "borrows": 0, "overlimits": 0,
        "qlength": 2, "backlog_bytes": 3000,
        "sojourn_p50_ns": 1_500_000, "sojourn_p99_ns": 12_000_000, "sojourn_max_ns": null,
        "sojourn_last_p50_ns": 800_000, "sojourn_last_p99_ns": 4_000_000
    }))
    .expect("a queue")
}

fn state(src: &str, sport: u16, dst: &str, bytes: [u64; 2], rtt_ms: Option<u64>) -> StateJson {
    let mut s: StateJson = serde_json::from_value(json!({
        "proto": "tcp", "src": src, "src_port": sport, "dst": dst, "dst_port": 5201,
        "direction": "out", "state": "ESTABLISHED:ESTABLISHED", "queue": "dl",
        "queue_pri": null, "rule": 0, "packets": [10, 10], "bytes": bytes,
        "age_ns": 75_000_000_000u64, "expires_in_ns": 1
    }))
    .expect("a state");
    s.rtt_to_dst = rtt_ms.map(|ms| RttJson {
        smoothed_ns: ms * 1_000_000,
        ..RttJson::default()
    });
    s
}

/// One interface `lan0` with a root and `dl`, shaped at `rate`.
fn snap(at_ms: u64, root: (u64, u64), dl: (u64, u64), states: Vec<StateJson>) -> Snapshot {
    Snapshot {
        at: Duration::from_millis(at_ms),
        queues: QueuesReply {
            ifaces: vec![IfaceQueues {
                name: "lan0".into(),
                sched: Some("hfsc".into()),
                bandwidth_bps: Some(10_000_000),
                queues: vec![
                    queue("root_lan0", None, root.0, root.1),
                    queue("dl", Some("root_lan0"), dl.0, dl.1),
                ],
                autorate: None,
            }],
        },
        states: Some(StatesReply {
            total: states.len() as u64,
            limit: 1000,
            states,
        }),
        health: HealthReply {
            directions: vec![HealthJson {
                iface: "lan0".into(),
                direction: "download".into(),
                verdict: "in-control".into(),
                grade: Some("A".into()),
                added_ns: Some(2_000_000),
                output_bps: 8_000_000,
                rate_bps: 10_000_000,
                ..HealthJson::default()
            }],
        },
    }
}

#[test]
fn queue_rates_are_deltas_over_the_polls_interval() {
    let a = snap(1000, (100, 100_000), (50, 50_000), vec![]);
    // 500 ms later: 62 500 bytes more on dl = 1 Mbit/s, 40 packets = 80/s.
    let b = snap(1500, (200, 200_000), (90, 112_500), vec![]);
    let rows = queue_rows(Some(&a), &b);
    let dl = rows.iter().find(|r| r.name == "dl").unwrap();
    assert_eq!(dl.bps, Some(1_000_000.0));
    assert_eq!(dl.pps, Some(80.0));
    assert_eq!(dl.bytes, 112_500, "the reply's own counter");
    assert_eq!(dl.cells()[2], "1.00Mb/s");
    // Sojourn of the last interval, not since creation.
    assert_eq!((dl.p50_ns, dl.p99_ns), (Some(800_000), Some(4_000_000)));
    // No previous poll: no rate, not zero.
    assert_eq!(queue_rows(None, &b)[1].bps, None);
}

#[test]
fn a_counter_reset_by_a_reload_gives_no_rate_not_a_negative_one() {
    let a = snap(0, (100, 100_000), (50, 50_000), vec![]);
    let b = snap(1000, (10, 9_000), (5, 4_000), vec![]);
    for r in queue_rows(Some(&a), &b) {
        assert_eq!((r.bps, r.pps), (None, None), "{r:?}");
        assert_eq!(r.cells()[2], "-");
    }
    // The same for a state whose tuple came back as a new state.
    let a = snap(
        0,
        (0, 0),
        (0, 0),
        vec![state("10.0.0.2", 1, "192.0.2.1", [9000, 9000], None)],
    );
    let b = snap(
        1000,
        (0, 0),
        (0, 0),
        vec![state("10.0.0.2", 1, "192.0.2.1", [100, 100], None)],
    );
    assert_eq!(state_rows(Some(&a), &b)[0].bps, None);
    let hosts = host_rows(Some(&a), &b);
    assert!(hosts.iter().all(|h| h.sent_bps == Some(0.0)), "{hosts:?}");
}

#[test]
fn a_poll_without_states_is_no_base_for_their_rates() {
    let mut a = snap(0, (0, 0), (0, 0), vec![]);
    a.states = None;
    let b = snap(
        1000,
        (0, 0),
        (0, 0),
        vec![state("10.0.0.2", 1, "192.0.2.1", [1000, 9000], None)],
    );
    assert_eq!(
        state_rows(Some(&a), &b)[0].bps,
        None,
        "not all its bytes in 1 s"
    );
    assert!(host_rows(Some(&a), &b).iter().all(|h| h.recv_bps.is_none()));
    assert!(state_rows(Some(&b), &a).is_empty());
}

#[test]
fn a_new_state_counts_all_its_bytes_within_the_interval() {
    let a = snap(0, (0, 0), (0, 0), vec![]);
    let b = snap(
        2000,
        (0, 0),
        (0, 0),
        vec![state("10.0.0.2", 1, "192.0.2.1", [1000, 249_000], None)],
    );
    assert_eq!(state_rows(Some(&a), &b)[0].bps, Some(1_000_000.0));
}

#[test]
fn hosts_sum_their_states_per_direction_with_shares_and_rtt() {
    let a = snap(
        0,
        (0, 0),
        (0, 0),
        vec![
            state("10.0.0.2", 1, "192.0.2.1", [0, 0], Some(30)),
            state("10.0.0.3", 2, "192.0.2.1", [0, 0], Some(20)),
        ],
    );
    let b = snap(
        1000,
        (0, 0),
        (0, 0),
        vec![
            state("10.0.0.2", 1, "192.0.2.1", [1000, 300_000], Some(30)),
            state("10.0.0.3", 2, "192.0.2.1", [1000, 100_000], Some(20)),
        ],
    );
    let mut rows = host_rows(Some(&a), &b);
    sort(&mut rows, HostRow::DEFAULT_SORT, false);
    let names: Vec<&str> = rows.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(names, ["10.0.0.2", "10.0.0.3", "192.0.2.1"], "by received");
    assert_eq!(rows[0].recv_bps, Some(2_400_000.0));
    // Every byte is sent by one host and received by another.
    assert_eq!(rows[0].recv_share, Some(300_000.0 / 402_000.0));
    let server = &rows[2];
    assert_eq!((server.sent_bps, server.states), (Some(3_200_000.0), 2));
    assert_eq!(server.sent_share, Some(400_000.0 / 402_000.0));
    // The responder's RTT: the smaller of its two states'.
    assert_eq!(server.rtt_ns, Some(20_000_000));
    assert_eq!(rows[0].cells()[4], "75%");
    assert_eq!(rows[1].cells()[4], "25%");
}

#[test]
fn sort_and_filter_the_states() {
    let a = snap(0, (0, 0), (0, 0), vec![]);
    let b = snap(
        1000,
        (0, 0),
        (0, 0),
        vec![
            state("10.0.0.2", 1, "192.0.2.1", [10, 10], Some(30)),
            state("10.0.0.3", 2, "198.51.100.7", [500, 500], Some(10)),
            state("10.0.0.4", 3, "192.0.2.9", [100, 100], None),
        ],
    );
    let mut rows = state_rows(Some(&a), &b);
    sort(&mut rows, StateRow::DEFAULT_SORT, false);
    let src = |rows: &[StateRow]| rows.iter().map(|r| r.src.clone()).collect::<Vec<_>>();
    assert_eq!(
        src(&rows),
        ["10.0.0.3:2", "10.0.0.4:3", "10.0.0.2:1"],
        "fastest first"
    );
    sort(&mut rows, StateRow::DEFAULT_SORT, true);
    assert_eq!(src(&rows), ["10.0.0.2:1", "10.0.0.4:3", "10.0.0.3:2"]);
    // Text ascending; an unknown RTT sorts last.
    sort(&mut rows, 2, false);
    assert_eq!(src(&rows), ["10.0.0.2:1", "10.0.0.4:3", "10.0.0.3:2"]);
    sort(&mut rows, 8, false);
    assert_eq!(src(&rows), ["10.0.0.2:1", "10.0.0.3:2", "10.0.0.4:3"]);
    let only = filter(rows.clone(), "198.51");
    assert_eq!(src(&only), ["10.0.0.3:2"]);
    assert_eq!(filter(rows.clone(), "EST:est").len(), 3, "any case");
    assert_eq!(filter(rows.clone(), "").len(), 3);
    assert!(filter(rows, "udp").is_empty());
}

#[test]
fn cells_fit_their_columns() {
    assert_eq!(rate_cell(Some(999_940_000.0)), "1.00Gb/s");
    assert_eq!(rate_cell(Some(123_456_000.0)), "123Mb/s");
    assert_eq!(rate_cell(Some(12_345.0)), "12.3Kb/s");
    assert_eq!(rate_cell(Some(999_400_000.0)), "999Mb/s");
    assert_eq!(rate_cell(Some(0.0)), "0.00b/s");
    assert_eq!(count_cell(9_999), "9999");
    assert_eq!(count_cell(99_999), "99K");
    assert_eq!(count_cell(9_999_999), "9999K");
    assert_eq!(count_cell(123_456), "123K");
    assert_eq!(count_cell(12_345_678), "12M");
    assert_eq!(count_cell(123_456_789), "123M");
    assert_eq!(ms_cell(Some(123_456_789)), "123ms");
    assert_eq!(short_state("FIN_WAIT_2:TIME_WAIT"), "FW2:TW");
    assert_eq!(short_state("0:0"), "0:0");
    assert_eq!(endpoint("2001:db8::1", 80), "[2001:db8::1]:80");
    // Every table fits in 80 columns with its spacing.
    for w in [QueueRow::WIDTHS, StateRow::WIDTHS, HostRow::WIDTHS] {
        let total: u16 = w.iter().sum::<u16>() + w.len() as u16 - 1;
        assert!(total <= 80, "{w:?}: {total}");
    }
}

#[test]
fn autorate_points_take_the_rate_output_and_new_decisions() {
    let mut a = snap(1000, (0, 0), (0, 0), vec![]);
    let mut b = snap(2000, (0, 1_000_000), (0, 0), vec![]);
    let ar = |rate: u64, delay: u64, load: u64| AutorateJson {
        min_bps: 1_000_000,
        max_bps: 20_000_000,
        dry_run: false,
        rate_bps: rate,
        delay_ns: Some(5_000_000),
        flows: 1,
        newest_age_ns: None,
        decisions: vec![("delay".into(), delay), ("load".into(), load)],
        delay_from_probe: false,
        samples: 0,
        samples_unsound: 0,
        holds: 0,
        held_ns: 0,
        probe: None,
        reconfig: None,
        reconfig_active: false,
    };
    a.queues.ifaces[0].autorate = Some(ar(9_000_000, 4, 10));
    b.queues.ifaces[0].autorate = Some(ar(8_000_000, 6, 10));
    let p = rate_points(Some(&a), &b, Duration::from_millis(500));
    assert_eq!(p.len(), 1);
    let (iface, p) = &p[0];
    assert_eq!(iface, "lan0");
    assert_eq!(
        (p.at, p.rate_bps, p.output_bps),
        (1.5, 8_000_000, Some(8_000_000.0))
    );
    assert_eq!(p.decisions, [("delay".to_string(), 2)]);
    let mut h = History::new(2);
    for _ in 0..3 {
        h.push(vec![("lan0".into(), p.clone())]);
    }
    assert_eq!(h.ifaces[0].1.len(), 2, "bounded");
    assert_eq!(render::decision_strip(&h.ifaces[0].1, 80), "dd");
    assert!(plain::rate_line("lan0", p).ends_with("delay 5.0ms, decisions delay 2"));
    let without = RatePoint {
        autorate: false,
        ..p.clone()
    };
    assert!(plain::rate_line("lan0", &without).ends_with("output 8.00Mb/s, no autorate"));
}

fn press(app: &mut App, code: KeyCode) {
    app.key(KeyEvent::new(code, KeyModifiers::NONE));
}

#[test]
fn keys_switch_views_sort_pause_filter_and_quit() {
    let mut app = App::new(
        snap(0, (0, 0), (0, 0), vec![]),
        Duration::from_secs(1),
        View::Queues,
    );
    press(&mut app, KeyCode::Char('3'));
    assert_eq!(app.view, View::States);
    press(&mut app, KeyCode::Right);
    assert_eq!(app.view, View::Autorate);
    press(&mut app, KeyCode::Char('v'));
    assert_eq!(app.view, View::Queues, "wraps");
    press(&mut app, KeyCode::Left);
    assert_eq!(app.view, View::Autorate);
    press(&mut app, KeyCode::Char('1'));
    // Queues start in the tree's order; s walks the columns and back.
    assert_eq!(app.sort[0], usize::MAX);
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.sort[0], 0);
    for _ in 0..8 {
        press(&mut app, KeyCode::Char('s'));
    }
    assert_eq!(app.sort[0], 8);
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.sort[0], usize::MAX);
    press(&mut app, KeyCode::Char('S'));
    assert!(app.reverse[0]);
    press(&mut app, KeyCode::Char('p'));
    assert!(app.paused);
    // Typed into the filter, not taken as keys.
    press(&mut app, KeyCode::Char('/'));
    for c in "q1".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        (app.filter.as_str(), app.view, app.quit),
        ("q1", View::Queues, false)
    );
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.filter, "");
    press(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    press(&mut app, KeyCode::Char('x'));
    assert!(!app.help && !app.quit, "any key closes the help");
    press(&mut app, KeyCode::Char('q'));
    assert!(app.quit);
}

/// The whole screen at 80×24 in ratatui's test backend: the verdict, the
/// queue names and a rate are there, and the sort mark moves.
#[test]
fn the_screen_at_80_by_24() {
    let a = snap(
        0,
        (100, 100_000),
        (50, 50_000),
        vec![state("10.0.0.2", 1, "192.0.2.1", [0, 0], Some(30))],
    );
    let b = snap(
        1000,
        (200, 225_000),
        (90, 175_000),
        vec![state("10.0.0.2", 1, "192.0.2.1", [1000, 125_000], Some(30))],
    );
    let mut app = App::new(a, Duration::from_secs(1), View::Queues);
    app.update(b);
    let text = |app: &App| {
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
        t.draw(|f| render::draw(f, app)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..24)
            .map(|y| {
                (0..80)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let s = text(&app);
    assert!(
        s.contains("download lan0: in control, grade A (+2.0ms)"),
        "{s}"
    );
    assert!(s.contains("root_lan0") && s.contains("dl"), "{s}");
    assert!(s.contains("1.00Mb/s") && s.contains("4.0ms"), "{s}");
    press(&mut app, KeyCode::Char('2'));
    let s = text(&app);
    assert!(s.contains("RECEIVED") && s.contains("10.0.0.2"), "{s}");
    press(&mut app, KeyCode::Char('4'));
    let s = text(&app);
    assert!(
        s.contains("lan0: shaped at 10.0Mb/s, output 1.00Mb/s, no autorate"),
        "{s}"
    );
    press(&mut app, KeyCode::Char('h'));
    assert!(text(&app).contains("sluice top: keys"));
}

/// A terminal too small for anything still draws every view (cut, not
/// a panic).
#[test]
fn a_tiny_terminal_draws_without_panicking() {
    let mut app = App::new(
        snap(0, (0, 0), (0, 0), vec![]),
        Duration::from_secs(1),
        View::Queues,
    );
    app.update(snap(1000, (5, 5000), (5, 5000), vec![]));
    for (w, h) in [(1, 1), (10, 3), (20, 5), (80, 6)] {
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
        for key in ['1', '2', '3', '4', 'h'] {
            press(&mut app, KeyCode::Char(key));
            t.draw(|f| render::draw(f, &app)).unwrap();
        }
        press(&mut app, KeyCode::Char('x'));
    }
}

#[test]
fn the_plain_report_has_every_view() {
    let a = snap(
        0,
        (100, 100_000),
        (50, 50_000),
        vec![state("10.0.0.2", 1, "192.0.2.1", [0, 0], Some(30))],
    );
    let b = snap(
        500,
        (200, 225_000),
        (90, 175_000),
        vec![state("10.0.0.2", 1, "192.0.2.1", [1000, 125_000], Some(30))],
    );
    let r = plain::report(&a, &b);
    let lines: Vec<&str> = r.lines().collect();
    assert_eq!(lines[0], "sluice top: rates over 0.50 s");
    assert!(
        lines[1].starts_with("download lan0: in control, grade A"),
        "{r}"
    );
    // dl: 125 000 bytes in 0.5 s.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("dl ") && l.contains("2.00Mb/s") && l.contains("80")),
        "{r}"
    );
    assert!(
        r.contains("HOST") && r.contains("10.0.0.2:1") && r.contains("EST:EST"),
        "{r}"
    );
    assert!(
        r.contains("lan0: shaped at 10.0Mb/s, output 2.00Mb/s"),
        "{r}"
    );
    assert!(!r.contains('\x1b'), "no terminal codes");
}

/// The header names the direction that holds a verdictless one back, and
/// says "not enough traffic" only where nothing does.
#[test]
fn the_verdict_line_names_what_holds_a_direction_back() {
    let d = |held: Option<&str>| HealthJson {
        iface: "lan0".into(),
        direction: "download".into(),
        verdict: "not-enough-traffic".into(),
        held_back_by: held.map(Into::into),
        output_bps: 480_000,
        rate_bps: 1_200_000,
        ..HealthJson::default()
    };
    let lines = verdict_lines(&HealthReply {
        directions: vec![d(Some("wan0")), d(None)],
    });
    assert!(
        lines[0].contains("download lan0: held back by wan0 (not in control): fix it first"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("download lan0: not enough traffic to say"),
        "{lines:?}"
    );
}
