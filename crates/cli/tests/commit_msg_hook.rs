//! `.githooks/commit-msg` holds the commit rule of CONTRIBUTING.md: a
//! subject of at most 72 characters (counted in characters, not bytes) and
//! a blank line before a body; it ignores what git strips (comments, the
//! scissors line and below, leading blank lines). Run with `sh` on
//! messages, and once through a real `git commit` with
//! `core.hooksPath` set as CONTRIBUTING.md says.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hook() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.githooks/commit-msg")
}

/// A scratch directory, removed on every exit path.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "sluice-commit-msg-{what}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The hook's verdict on `message`, run in `dir` (outside any repository
/// the test's own checkout configures).
fn judge(dir: &Path, message: &str) -> Output {
    let file = dir.join("COMMIT_EDITMSG");
    fs::write(&file, message).unwrap();
    Command::new("sh")
        .arg(hook())
        .arg(&file)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .output()
        .expect("sh runs")
}

#[test]
fn the_hook_passes_a_message_that_keeps_the_rule() {
    let dir = Scratch::new("good");
    let at_most = format!("lab: {}", "x".repeat(67));
    assert_eq!(at_most.chars().count(), 72);
    let wide = format!("sched: {}", "≤".repeat(65));
    assert!(wide.len() > 72 && wide.chars().count() == 72);
    for message in [
        "sched: one select for PRIQ's ring walk\n".to_string(),
        "sched: one select\n\nThe why, and the figures: 41 ns before, 40 after.\n".into(),
        format!("{at_most}\n\nbody\n"),
        format!("{wide}\n"),
        "# a comment git strips\n\n\nlab: subject after blank lines\n# more\n\nbody\n".into(),
        format!(
            "lab: subject\n\n# ------------------------ >8 ------------------------\n{}\n",
            "diff line ".repeat(20)
        ),
        format!("fixup! {}\n", "y".repeat(80)),
    ] {
        let out = judge(&dir.0, &message);
        assert!(
            out.status.success(),
            "refused:\n{message}\n--\n{}",
            text(&out)
        );
    }
}

#[test]
fn the_hook_refuses_a_long_subject_and_a_missing_blank_line() {
    let dir = Scratch::new("bad");
    let long = format!("lab: {}", "x".repeat(68));
    for (message, says) in [
        (
            format!("{long}\n\nbody\n"),
            "the subject is 73 characters; at most 72",
        ),
        (
            format!("sched: {}\n", "≤".repeat(66)),
            "the subject is 73 characters",
        ),
        (
            "sched: split fq_codel\nthe body right under it\n".to_string(),
            "no blank line after the subject",
        ),
        (
            "# comment\nsched: split fq_codel\n# comment\nbody\n".into(),
            "no blank line after the subject",
        ),
    ] {
        let out = judge(&dir.0, &message);
        let report = text(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "passed:\n{message}\n--\n{report}"
        );
        assert!(report.contains(says), "missing `{says}` in:\n{report}");
        assert!(report.contains("CONTRIBUTING.md"), "{report}");
    }
}

/// As CONTRIBUTING.md sets it up: `git config core.hooksPath` pointing at
/// the hooks, then a commit that breaks the rule is refused and one that
/// keeps it is made.
#[test]
fn git_commit_runs_the_hook_through_core_hooks_path() {
    let dir = Scratch::new("git");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(&dir.0)
            .env_remove("GIT_DIR")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_WORK_TREE")
            .output()
            .expect("git runs (scripts/setup.sh installs it)")
    };
    let hooks = hook().parent().unwrap().canonicalize().unwrap();
    assert!(git(&["init", "-q"]).status.success());
    let set = git(&["config", "core.hooksPath", hooks.to_str().unwrap()]);
    assert!(set.status.success(), "{}", text(&set));

    let refused = git(&["commit", "-q", "--allow-empty", "-m", &"z".repeat(80)]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("the subject is 80 characters"),
        "{}",
        text(&refused)
    );
    let made = git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "lab: a subject",
        "-m",
        "A body with the why.",
    ]);
    assert!(made.status.success(), "{}", text(&made));
    let log = git(&["log", "--format=%s"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "lab: a subject\n");
}
