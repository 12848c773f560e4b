//! The docs' relative links resolve: `scripts/check-links.py` over
//! README.md and docs/**/*.md (files and GitHub's `#anchor`s), and the
//! checker itself finds a missing file and a missing anchor, and leaves
//! code alone. python3 is one of the packages `scripts/setup.sh` installs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `check-links.py --root ROOT`.
fn check_links(root: &Path) -> Output {
    Command::new("python3")
        .arg(repo().join("scripts/check-links.py"))
        .arg("--root")
        .arg(root)
        .output()
        .expect("python3 runs (scripts/setup.sh installs it)")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let out = check_links(&repo());
    assert!(out.status.success(), "broken links:\n{}", text(&out));
}

/// A scratch repository, removed on every exit path.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_checker_finds_a_missing_file_and_a_missing_anchor() {
    let dir = Scratch(std::env::temp_dir().join(format!(
        "sluice-docs-links-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    )));
    fs::create_dir_all(dir.0.join("docs")).unwrap();
    fs::write(
        dir.0.join("docs/a.md"),
        "# Intro\n\n## Fair between hosts: `host_fair` (issue #14)\n\n## Intro\n\
         \n```text\n# not a heading\n```\n",
    )
    .unwrap();
    fs::write(
        dir.0.join("README.md"),
        "[ok](docs/a.md#fair-between-hosts-host_fair-issue-14)\n\
         [ok, the second Intro](docs/a.md#intro-1)\n\
         [gone](docs/none.md)\n\
         [bad anchor](docs/a.md#nowhere)\n\
         [not a heading](docs/a.md#not-a-heading)\n\
         `[code span](docs/in-code.md)` [web](https://example.org/x.md)\n\
         ```\n[fenced](docs/in-fence.md)\n```\n",
    )
    .unwrap();

    let out = check_links(&dir.0);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    for broken in [
        "README.md:3: docs/none.md: no such file",
        "README.md:4: docs/a.md#nowhere: no heading with anchor #nowhere",
        "README.md:5: docs/a.md#not-a-heading: no heading",
    ] {
        assert!(report.contains(broken), "missing `{broken}` in:\n{report}");
    }
    for fine in [
        "README.md:1:",
        "README.md:2:",
        "in-code",
        "in-fence",
        "example.org",
    ] {
        assert!(!report.contains(fine), "`{fine}` reported in:\n{report}");
    }
    assert!(
        report.contains("5 relative links checked, 3 broken"),
        "{report}"
    );
}
