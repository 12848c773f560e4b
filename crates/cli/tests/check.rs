//! `sluice check` as a user runs it: exit codes, diagnostics on stderr,
//! canonical form on stdout that checks clean again.

use sluice_testkit::output_with_stdin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sluice(args: &[&str], stdin: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(args);
    match stdin {
        Some(input) => output_with_stdin(&mut c, input.as_bytes()),
        None => c.output().expect("run sluice"),
    }
}

/// `sluice ARGS` refused with exit status 1; its stderr.
fn refused(args: &[&str], stdin: Option<&str>) -> String {
    let out = sluice(args, stdin);
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8(out.stderr).unwrap()
}

/// Every shipped configuration: `examples/` and the lab's `examples/lab/`.
fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v: Vec<PathBuf> = [root.clone(), root.join("lab")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).expect("examples/"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_checks_clean_and_its_canonical_form_is_a_fixed_point() {
    let ex = examples();
    assert!(
        ex.iter()
            .any(|p| p.to_string_lossy().contains("examples/lab/")),
        "examples/lab/ should ship the lab's configs"
    );
    assert!(
        ex.len() >= 20,
        "examples/ should ship the reference configs"
    );
    for f in ex {
        let f = f.to_str().unwrap();
        let out = sluice(
            &["check", "-v", "-D", "ext_if=wan0", "-D", "int_if=lan0", f],
            None,
        );
        assert!(
            out.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let canon = String::from_utf8(out.stdout).unwrap();
        assert!(!canon.is_empty(), "{f}: -v printed nothing");
        let again = sluice(&["check", "-v", "-"], Some(&canon));
        assert!(
            again.status.success(),
            "{f}: canonical form fails: {}",
            String::from_utf8_lossy(&again.stderr)
        );
        assert_eq!(
            String::from_utf8(again.stdout).unwrap(),
            canon,
            "{f}: not a fixed point"
        );
    }
}

#[test]
fn invalid_file_exits_1_with_a_located_diagnostic() {
    let text = "altq on em0 priq bandwidth 1Mb queue { a }\nqueue a priority 1 qlimit 70000 priq(default)\n";
    let err = refused(&["check", "-"], Some(text));
    assert!(err.contains("<stdin>:2:"), "location missing: {err}");
    assert!(err.contains("70000"), "offending text missing: {err}");
    assert!(err.contains("65535"), "allowed range missing: {err}");
}

#[test]
fn undefined_macro_is_an_error_that_names_it() {
    let text = "altq on $ext_if bandwidth 1Mb hfsc queue { bb }\nqueue bb bandwidth 100% qlimit 9 hfsc ( default )\n";
    let err = refused(&["check", "-"], Some(text));
    assert!(err.contains("ext_if"), "{err}");
    let ok = sluice(&["check", "-D", "ext_if=em0", "-"], Some(text));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

#[test]
fn missing_file_is_reported() {
    assert!(refused(&["check", "/nonexistent/pf.conf"], None).contains("cannot read"));
}

#[test]
fn only_regular_files_of_bounded_size_are_read() {
    // The daemon's own bounded read (sluice_control::read_config): a device
    // or a directory is refused without being read (today's read of
    // /dev/zero never ended).
    let dir = std::env::temp_dir();
    for p in [Path::new("/dev/zero"), dir.as_path()] {
        let e = refused(&["check", p.to_str().unwrap()], None);
        assert_eq!(
            e,
            format!(
                "error: {} is not a regular file (a FIFO, device or directory cannot be a configuration)\n",
                p.display()
            )
        );
    }
}

/// Bytes on standard input (for what is not text).
fn sluice_bytes(args: &[&str], input: &[u8]) -> Output {
    output_with_stdin(Command::new(env!("CARGO_BIN_EXE_sluice")).args(args), input)
}

const VALID: &str = "queue std on em0 bandwidth 10M default\n";

#[test]
fn pfctl_spellings_f_and_nf_check_the_file() {
    let dir = std::env::temp_dir().join(format!("sluice-check-f-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.conf");
    let bad = dir.join("bad.conf");
    std::fs::write(&good, VALID).unwrap();
    std::fs::write(&bad, "queue std on em0 bandwidth 10M\n").unwrap();
    let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());
    for args in [
        vec!["check", "-f", good],
        vec!["check", "-nf", good],
        vec!["check", "-n", "-f", good],
        vec!["check", "--file", good],
    ] {
        let out = sluice(&args, None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let err = refused(&["check", "-nf", bad], None);
    assert!(err.contains("no default queue"), "{err}");
    // No file at all is a usage error, as before.
    assert_eq!(sluice(&["check"], None).status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn binary_input_is_not_a_text_file_with_the_offset() {
    let out = sluice_bytes(&["check", "-"], b"pass out\n\x7fELF\x02\x01\x01\xff\xfe");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("not a text file: byte 16 (0xff)"), "{err}");
    let dir = std::env::temp_dir().join(format!("sluice-check-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("binary.conf");
    std::fs::write(&f, b"\0\0\0").unwrap();
    let err = refused(&["check", f.to_str().unwrap()], None);
    assert!(err.contains("not a text file: byte 0 (0x00)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_diagnostics_are_one_array_with_positions_and_hints() {
    let text = "queue std on em0 bandwidth 20MB default\npass out on em0 queue stdd\n";
    let out = sluice(&["check", "--json", "-"], Some(text));
    assert_eq!(out.status.code(), Some(0), "warnings keep exit 0");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 2, "{v}");
    assert_eq!(a[0]["file"], "<stdin>");
    assert_eq!(a[0]["line"], 1);
    assert_eq!(a[0]["column"], 28);
    assert_eq!(a[0]["end_column"], 32);
    assert_eq!(a[0]["severity"], "warning");
    assert!(a[0]["hint"].as_str().unwrap().contains("160Mb"), "{v}");
    assert_eq!(a[1]["line"], 2);
    assert!(
        a[1]["hint"]
            .as_str()
            .unwrap()
            .starts_with("did you mean `std`?"),
        "{v}"
    );

    let out = sluice(
        &["check", "--json", "-", "/nonexistent.conf"],
        Some("altq on em0 hsfc\n"),
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a[0]["severity"], "error");
    assert_eq!(a[0]["hint"], "did you mean `hfsc`?");
    assert_eq!(a[1]["file"], "/nonexistent.conf");
    assert!(a[1]["line"].is_null());
}

#[test]
fn show_takes_pfctl_modifier_spellings() {
    // With no daemon each alias reaches the socket (exit 1); an unknown
    // word is a usage error (exit 2).
    for what in [
        "q", "queue", "queues", "s", "states", "r", "rules", "i", "info",
    ] {
        let out = sluice(
            &["show", what, "--control", "/nonexistent/sluice.sock"],
            None,
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "show {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(sluice(&["show", "x"], None).status.code(), Some(2));
}

#[test]
fn long_help_is_wrapped() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--help"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let longest = help.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest <= 100, "a help line of {longest} characters");
}
