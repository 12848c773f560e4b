//! `sluice check --explain`: golden explanations of every shipped example
//! (`golden/explain/*.txt`; `UPDATE_GOLDEN=1` rewrites them), its JSON, and
//! explanations that only running packets through the rules can give.

use sluice_testkit::output_with_stdin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sluice(args: &[&str], stdin: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(args).current_dir(root());
    output_with_stdin(&mut c, stdin.unwrap_or("").as_bytes())
}

fn explain(args: &[&str], stdin: Option<&str>) -> String {
    let mut a = vec![
        "check",
        "--explain",
        "-D",
        "ext_if=wan0",
        "-D",
        "int_if=lan0",
    ];
    a.extend_from_slice(args);
    let out = sluice(&a, stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_shipped_example_is_explained_as_its_golden_says() {
    let mut files: Vec<String> = ["examples", "examples/lab"]
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(root().join(d))
                .unwrap()
                .map(move |e| (d, e))
        })
        .map(|(d, e)| format!("{d}/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|f| f.ends_with(".conf"))
        .collect();
    files.sort();
    assert!(files.len() >= 20);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/explain");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for f in files {
        let got = explain(&[&f], None);
        let path = golden.join(f.replace('/', "-").replace(".conf", ".txt"));
        if update {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != got {
            failures.push(format!("{f}:\n--- want\n{want}--- got\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The empty ACK reaches its queue only through the state its SYN made
/// (`flags S/SA`), and the lowdelay packet through the pair's second
/// queue: only the classifier's state and pair logic get these right.
#[test]
fn states_and_queue_pairs_decide_as_on_the_wire() {
    let conf = "altq on $ext_if priq bandwidth 1Mb queue { q_ack, q_def }\n\
                queue q_ack priority 7 qlimit 20\n\
                queue q_def priority 1 qlimit 20 priq(default)\n\
                pass out on $ext_if proto tcp flags S/SA keep state queue (q_def, q_ack)\n\
                block out quick on $ext_if proto icmp\n";
    let text = explain(&["-"], Some(conf));
    let line = |kind: &str| {
        text.lines()
            .find(|l| l.contains(kind))
            .unwrap_or_else(|| panic!("{kind} missing:\n{text}"))
            .to_string()
    };
    assert!(
        line("empty TCP ACK (of a download)").contains("-> q_ack"),
        "{text}"
    );
    assert!(line("interactive SSH").contains("-> q_ack"), "{text}");
    assert!(line("bulk TCP upload").contains("-> q_def"), "{text}");
    assert!(line("DNS query").contains("-> q_def"), "{text}");
    assert!(line("DNS query").contains("implicit pass"), "{text}");
    assert!(
        line("ping (echo request)").contains("blocked by the rule at line 5"),
        "{text}"
    );
    assert!(
        line("ping (echo reply)").contains("blocked by the rule at line 5"),
        "{text}"
    );
    // int_if is only a -D macro the file never uses: the LAN side is unnamed.
    assert!(
        text.contains("download: packets leaving (lan): no queues, forwarded unshaped"),
        "{text}"
    );
}

#[test]
fn explain_json_names_queue_rate_and_control_per_packet() {
    let init = sluice(
        &["init", "--down", "30M", "--up", "5M", "--link", "docsis"],
        None,
    );
    let conf = String::from_utf8(init.stdout).unwrap();
    let out = sluice(&["check", "--explain", "--json", "-"], Some(&conf));
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &v[0];
    assert_eq!(f["file"], "<stdin>");
    assert_eq!(f["diagnostics"].as_array().unwrap().len(), 0);
    let up = &f["explain"]["upload"];
    assert_eq!(up["interface"], "wan0");
    let ack = &up["packets"][0];
    assert_eq!(ack["packet"], "empty TCP ACK (of a download)");
    assert_eq!(ack["queue"], "up_ack");
    assert_eq!(ack["rate_bps"], 4_750_000);
    assert_eq!(
        ack["tcp_control"],
        serde_json::json!(["ack-pacing", "window-clamp"])
    );
    let down = &f["explain"]["download"]["packets"][4];
    assert_eq!(down["packet"], "TCP download");
    assert_eq!(down["queue"], "down_bulk");
    assert!(down["discipline"].as_str().unwrap().starts_with("FQ-CoDel"));
    assert!(down["options"][0].as_str().unwrap().starts_with("ingress"));
}
