//! Golden tests: `valid/*.conf` → `*.out` (canonical print) and `*.warn`
//! (rendered warnings, absent when none), printed form is a fixed point;
//! `invalid/*.conf` → `*.err` (exact rendered diagnostics).
//! `UPDATE_GOLDEN=1 cargo test -p sluice-conf --test golden` rewrites them.
//! A `#-D name=value` line in a .conf passes a command-line define; a
//! `#-strict` line checks as `--strict` does. Table files are read under
//! `tables/`, as if it were both the working directory and `/`.

mod common;

use common::{conf_files, defines};

use sluice_conf::{print, CheckOptions, Checked, Diagnostic, FileLoader};
use std::fs;
use std::path::{Path, PathBuf};

/// The `.conf` files of `tests/golden/DIR`, sorted, each with its file
/// name and text.
fn files(dir: &str) -> Vec<(PathBuf, String, String)> {
    let v = conf_files(&format!("tests/golden/{dir}"));
    assert!(!v.is_empty(), "no golden files in tests/golden/{dir}");
    v
}

/// Table files of the golden tests: under `tests/golden/tables/`, which
/// stands for the working directory and for `/` (`/etc/spammers` is
/// `tables/etc/spammers`).
struct GoldenFiles;

impl FileLoader for GoldenFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/tables")
            .join(path.trim_start_matches('/'));
        fs::read_to_string(p).map_err(|e| e.to_string())
    }
}

/// `check` with the file's `#-D` defines, its `#-strict`, and table files.
fn check(name: &str, text: &str) -> Result<Checked, Vec<Diagnostic>> {
    let opts = CheckOptions {
        strict: text.lines().any(|l| l.trim_end() == "#-strict"),
        files: Some(&GoldenFiles),
    };
    sluice_conf::check_with(name, text, &defines(text), &opts)
}

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some()
}

/// Compare with the expectation file, or write it under UPDATE_GOLDEN.
/// An absent file expects empty output.
fn expect(path: &Path, got: &str, failures: &mut Vec<String>) {
    if update() {
        if got.is_empty() {
            let _ = fs::remove_file(path);
        } else {
            fs::write(path, got).unwrap();
        }
        return;
    }
    let want = fs::read_to_string(path).unwrap_or_default();
    if want != got {
        failures.push(format!(
            "{}:\n--- want\n{want}--- got\n{got}",
            path.display()
        ));
    }
}

#[test]
fn valid_files_print_canonically_and_reach_a_fixed_point() {
    let mut failures = Vec::new();
    for (f, name, text) in files("valid") {
        let c = match check(&name, &text) {
            Ok(c) => c,
            Err(d) => {
                let r: String = d.iter().map(|d| d.render(&name, &text)).collect();
                failures.push(format!("{name} should be valid:\n{r}"));
                continue;
            }
        };
        let printed = print(&c.config);
        expect(&f.with_extension("out"), &printed, &mut failures);
        let warns: String = c.warnings.iter().map(|w| w.render(&name, &text)).collect();
        expect(&f.with_extension("warn"), &warns, &mut failures);
        failures.extend(common::fixed_point_failure(&name, &c));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn invalid_files_give_exact_diagnostics() {
    let mut failures = Vec::new();
    for (f, name, text) in files("invalid") {
        match check(&name, &text) {
            Ok(_) => failures.push(format!("{name} should be invalid")),
            Err(d) => {
                assert!(
                    d.iter().any(|d| d.severity == sluice_conf::Severity::Error),
                    "{name}: Err without an error"
                );
                let r: String = d.iter().map(|d| d.render(&name, &text)).collect();
                expect(&f.with_extension("err"), &r, &mut failures);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
