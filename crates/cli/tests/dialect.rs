//! `sluice check` on the pf.conf constructs that read outside the file or
//! depend on `--strict`: table files (read as pfctl reads them, relative to
//! the working directory; `-v` prints their entries) and a rule naming a
//! queue that does not exist (a warning; `--strict` makes it an error).

use std::path::PathBuf;
use std::process::{Command, Output};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-dialect-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sluice_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run sluice")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn table_file_is_read_relative_to_the_cwd_and_printed_by_v() {
    let d = tmpdir("table");
    std::fs::write(
        d.join("pf.conf"),
        "table <fast> persist file \"lists/fast.txt\"\npass out to <fast>\n",
    )
    .unwrap();
    // Missing: an error at `file` (line 1, column 22), exit 1.
    let out = sluice_in(&d, &["check", "pf.conf"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("error: cannot read table file \"lists/fast.txt\""),
        "{err}"
    );
    assert!(err.contains("pf.conf:1:22"), "{err}");
    std::fs::create_dir_all(d.join("lists")).unwrap();
    std::fs::write(
        d.join("lists/fast.txt"),
        "# fast hosts\n192.0.2.7\n!10.0.0.0/8 2001:db8::/32\n",
    )
    .unwrap();
    let out = sluice_in(&d, &["check", "-v", "pf.conf"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains("table <fast> { 192.0.2.7, !10.0.0.0/8, 2001:db8::/32 }"),
        "{printed}"
    );
    // The printed form stands alone (no file) and checks to itself.
    std::fs::write(d.join("printed.conf"), &printed).unwrap();
    let again = sluice_in(&d, &["check", "-v", "printed.conf"]);
    assert_eq!(text(&again.stdout), printed);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn unknown_queue_warns_and_strict_refuses() {
    let d = tmpdir("strict");
    std::fs::write(
        d.join("pf.conf"),
        "queue root on em0 bandwidth 10M\nqueue std parent root bandwidth 10M default\npass out on em0 queue voip\n",
    )
    .unwrap();
    let out = sluice_in(&d, &["check", "pf.conf"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let warn = text(&out.stderr);
    assert!(warn.contains("warning: unknown queue `voip`"), "{warn}");
    assert!(warn.contains("default queue `std` on em0"), "{warn}");
    let out = sluice_in(&d, &["check", "--strict", "pf.conf"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("error: unknown queue `voip`"), "{err}");
    assert!(err.contains("pf.conf:3:23"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
