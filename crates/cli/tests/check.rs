//! `sluice check` as a user runs it: exit codes, diagnostics on stderr,
//! canonical form on stdout that checks clean again.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sluice(args: &[&str], stdin: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(args);
    if let Some(input) = stdin {
        use std::io::Write;
        use std::process::Stdio;
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sluice");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        return child.wait_with_output().expect("wait");
    }
    c.output().expect("run sluice")
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
    assert!(err.contains("-:2:"), "location missing: {err}");
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
