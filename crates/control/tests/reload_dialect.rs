//! Reloads and the pf.conf dialect: a reload reads the table files again,
//! and `--strict` (on the request or on the daemon) refuses a rule naming a
//! queue that does not exist, which a plain reload loads with a warning.

use sluice_control::proto::{Reply, Request};
use sluice_control::request;
use sluice_control::testing::example_daemon;

const WITH_TABLE: &str = "\
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 qlimit 10 priq(default)
table <fast> persist file \"TABLE\"
pass out on $ext_if to <fast> queue q_pri
";

const UNKNOWN_QUEUE: &str = "\
altq on $ext_if priq bandwidth 100Kb queue { q_pri, q_def }
queue q_pri priority 7
queue q_def priority 1 qlimit 10 priq(default)
pass out on $ext_if proto udp queue voip
";

fn reload(sock: &std::path::Path, file: &std::path::Path, strict: bool) -> Reply {
    let req = Request::Reload {
        file: Some(file.display().to_string()),
        strict,
    };
    request(sock, &req).expect("the daemon answers")
}

#[test]
fn reload_reads_table_files_again() {
    let d = example_daemon("reload-table");
    let table = d.dir.join("fast.txt");
    let conf = d.dir.join("table.conf");
    let text = WITH_TABLE.replace("TABLE", &table.display().to_string());
    std::fs::write(&conf, text).unwrap();
    let entries = |d: &sluice_control::testing::TestDaemon| {
        let cfg = d.state.running.get();
        let t = cfg.config.tables.iter().find(|t| t.name == "fast").unwrap();
        t.entries.len()
    };
    // A missing file is refused, at the `file` keyword of line 4.
    let Reply::Error { message } = reload(&d.sock, &conf, false) else {
        panic!("a missing table file was not refused")
    };
    assert!(message.contains("cannot read table file"), "{message}");
    assert!(message.contains("table.conf:4:22"), "{message}");
    std::fs::write(&table, "192.0.2.1\n# c\n198.51.100.0/24\n").unwrap();
    let Reply::Reloaded(_) = reload(&d.sock, &conf, false) else {
        panic!("refused")
    };
    assert_eq!(entries(&d), 2);
    std::fs::write(&table, "192.0.2.1 192.0.2.2 192.0.2.3\n").unwrap();
    let Reply::Reloaded(_) = reload(&d.sock, &conf, false) else {
        panic!("refused")
    };
    assert_eq!(entries(&d), 3, "the reload read the file again");
}

#[test]
fn strict_reload_refuses_an_unknown_queue_a_plain_one_warns() {
    let d = example_daemon("reload-strict");
    let conf = d.dir.join("unknown.conf");
    std::fs::write(&conf, UNKNOWN_QUEUE).unwrap();
    let Reply::Error { message } = reload(&d.sock, &conf, true) else {
        panic!("--strict did not refuse an unknown queue")
    };
    assert!(message.contains("error: unknown queue `voip`"), "{message}");
    let Reply::Reloaded(r) = reload(&d.sock, &conf, false) else {
        panic!("a plain reload refused an unknown queue")
    };
    assert!(
        r.warnings.contains("warning: unknown queue `voip`")
            && r.warnings.contains("default queue `q_def` on wan0"),
        "{}",
        r.warnings
    );
}
