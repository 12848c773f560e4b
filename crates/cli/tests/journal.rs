//! The unit's client commands under journald: `check` (ExecStartPre=) and
//! `reload` (ExecReload=) write their diagnostics with a `<N>` priority on
//! every line when stderr is the journal (`$JOURNAL_STREAM` names it), so
//! `journalctl -p warning -u sluice` shows why a start or reload failed;
//! on a terminal they stay as they are.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A scratch directory of this test process, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("sluice-journal-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch dir");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `sluice ARGS` with stderr into a file; with `journal`, that file
/// is named by `$JOURNAL_STREAM` as journald names its stream. Returns the
/// exit code and what stderr got.
fn stderr_of(dir: &Scratch, args: &[&str], journal: bool) -> (Option<i32>, String) {
    let log = dir.0.join("stderr");
    let f = File::create(&log).expect("stderr file");
    let meta = f.metadata().expect("stat");
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(args).stdout(Stdio::null()).stderr(f);
    c.env_remove("JOURNAL_STREAM");
    if journal {
        c.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    }
    let status = c.status().expect("run sluice");
    (status.code(), std::fs::read_to_string(&log).expect("read"))
}

/// Every line of `text` starts with `<prio>`.
fn all_lines_have(text: &str, prio: &str) -> bool {
    !text.is_empty() && text.lines().all(|l| l.starts_with(prio))
}

#[test]
fn check_gives_errors_priority_3_and_warnings_4_only_in_the_journal() {
    let dir = Scratch::new("check");
    let broken = dir.0.join("broken.conf");
    std::fs::write(&broken, "pass out on em0 queue nowhere (\n").unwrap();
    let warns = dir.0.join("warns.conf");
    // Parsed, not acted on: a warning, and the file is accepted.
    std::fs::write(&warns, "set skip on lo\npass all\n").unwrap();
    let (b, w) = (broken.to_str().unwrap(), warns.to_str().unwrap());

    let (code, said) = stderr_of(&dir, &["check", b], true);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("error"), "{said}");
    assert!(
        all_lines_have(&said, "<3>"),
        "every line of an error, caret too: {said:?}"
    );

    let (code, said) = stderr_of(&dir, &["check", w], true);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("warning"), "the file warns: {said}");
    assert!(all_lines_have(&said, "<4>"), "{said:?}");

    let (_, said) = stderr_of(&dir, &["check", b], false);
    assert!(
        said.contains("error") && !said.contains('<'),
        "a terminal gets no priority: {said:?}"
    );
}

#[test]
fn reload_s_failure_is_an_error_in_the_journal() {
    let dir = Scratch::new("reload");
    // A private socket path with no daemon behind it, never the host's.
    let sock = dir.0.join("none.sock");
    let args = ["reload", "--control", sock.to_str().unwrap()];
    let (code, said) = stderr_of(&dir, &args, true);
    assert_eq!(code, Some(1), "{said}");
    assert!(all_lines_have(&said, "<3>error"), "{said:?}");
    let (_, said) = stderr_of(&dir, &args, false);
    assert!(said.starts_with("error"), "{said:?}");
}
