//! `sluice init` as a user runs it: its output checks clean through
//! `sluice check` itself, `-o` writes the file, and bad knobs are refused
//! with the flag, the range and a hint (exit 2).

use std::process::{Command, Output};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

#[test]
fn init_output_passes_check_with_no_warning_for_every_link() {
    let dir = std::env::temp_dir().join(format!("sluice-init-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for link in [
        "ethernet", "raw", "docsis", "vdsl", "adsl", "pppoe", "lte", "starlink",
    ] {
        for (down, up) in [("1M", "256k"), ("30M", "5M"), ("500M", "50M")] {
            let f = dir.join(format!("{link}-{down}-{up}.conf"));
            let f = f.to_str().unwrap();
            let out = sluice(&[
                "init", "--down", down, "--up", up, "--link", link, "--hosts", "-o", f,
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let chk = sluice(&["check", "-nf", f]);
            assert!(chk.status.success(), "{link} {down}/{up}");
            assert!(
                chk.stderr.is_empty(),
                "{link} {down}/{up} warns:\n{}",
                String::from_utf8_lossy(&chk.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn init_prints_to_stdout_with_the_interfaces_given() {
    let out = sluice(&[
        "init", "--down", "100M", "--up", "20M", "--wan", "eth1", "--lan", "eth0",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ext_if = \"eth1\""), "{text}");
    assert!(text.contains("int_if = \"eth0\""), "{text}");
    assert!(
        text.contains("pipe down on $int_if bandwidth 95Mb"),
        "{text}"
    );
}

#[test]
fn nonsense_rates_are_refused_with_range_and_hint() {
    for (down, up, want) in [
        ("0", "5M", "--down 0 is below"),
        ("fast", "5M", "--down `fast` is not a rate"),
        ("30M", "32k", "--up 32k is below"),
        ("200G", "5M", "--down 200G is above"),
        ("1M", "200M", "were the two swapped"),
        ("30MB", "5M", "multiply by 8"),
    ] {
        let out = sluice(&["init", "--down", down, "--up", up]);
        assert_eq!(out.status.code(), Some(2), "{down}/{up}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(want), "{down}/{up}: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = sluice(&["init", "--down", "30M", "--up", "5M", "--link", "cable"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The package's /etc/sluice/pf.conf (contrib/pf.conf) is init's output for
/// its placeholder line under a header of its own: regenerate it when the
/// recipe changes.
#[test]
fn the_packaged_pf_conf_is_init_s_output() {
    let out = sluice(&["init", "--down", "20M", "--up", "5M"]);
    assert!(out.status.success());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/pf.conf");
    let shipped = std::fs::read_to_string(path).expect("contrib/pf.conf");
    let body = shipped
        .split_once("\n\n")
        .map(|(_, rest)| rest)
        .expect("a header, a blank line, then init's output");
    assert_eq!(
        body,
        String::from_utf8_lossy(&out.stdout),
        "regenerate contrib/pf.conf's body with `sluice init --down 20M --up 5M`"
    );
}
