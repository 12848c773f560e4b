//! Published pf.conf files with queueing, tried as a new user would: each
//! file of `tests/corpus/` is a configuration from a man page, a handbook,
//! a tutorial or a repository, unchanged below a header naming its source
//! (`tests/corpus/README.md` lists them).
//!
//! # Principles
//! - A file pfctl loads must load: checked with the `#-D name=value`
//!   defines its header gives (macros its source defines elsewhere), it
//!   gives a configuration with at least one queue tree, and its canonical
//!   print reads back to the same configuration and prints identically
//!   (the fixed point of docs/config.md "Canonical form").
//! - A file with a sibling `.err` is one sluice refuses on purpose (or
//!   pfctl refuses too): the rendered diagnostics must be exactly the
//!   `.err` (`UPDATE_GOLDEN=1` rewrites them).

mod common;

use common::{conf_files, defines};

use sluice_conf::{CheckOptions, Severity};
use std::fs;
use std::path::PathBuf;

fn corpus() -> Vec<(PathBuf, String, String)> {
    let v = conf_files("tests/corpus");
    assert!(v.len() >= 21, "the corpus lost files: {v:?}");
    v
}

/// Every file has a header that names where it comes from.
#[test]
fn every_file_names_its_source() {
    for (_, name, text) in corpus() {
        assert!(
            text.starts_with("# corpus: ") && text.contains("http"),
            "{name}: no `# corpus:` header with the source's address"
        );
    }
}

#[test]
fn published_files_load_and_print_to_a_fixed_point() {
    let mut failures = Vec::new();
    for (f, name, text) in corpus() {
        let opts = CheckOptions::default();
        let got = sluice_conf::check_with(&name, &text, &defines(&text), &opts);
        let err_file = f.with_extension("err");
        if err_file.exists() || std::env::var_os("UPDATE_GOLDEN").is_some() && got.is_err() {
            let rendered: String = match &got {
                Ok(_) => {
                    failures.push(format!(
                        "{name}: loads, but {} expects a refusal",
                        err_file.display()
                    ));
                    continue;
                }
                Err(d) => {
                    assert!(
                        d.iter().any(|d| d.severity == Severity::Error),
                        "{name}: Err without an error"
                    );
                    d.iter().map(|d| d.render(&name, &text)).collect()
                }
            };
            if std::env::var_os("UPDATE_GOLDEN").is_some() {
                fs::write(&err_file, &rendered).unwrap();
            } else if fs::read_to_string(&err_file).unwrap() != rendered {
                failures.push(format!(
                    "{name}: diagnostics differ from the .err:\n{rendered}"
                ));
            }
            continue;
        }
        let c = match got {
            Ok(c) => c,
            Err(d) => {
                let r: String = d.iter().map(|d| d.render(&name, &text)).collect();
                failures.push(format!("{name} does not load:\n{r}"));
                continue;
            }
        };
        if !c.config.interfaces.iter().any(|i| !i.queues.is_empty()) {
            failures.push(format!("{name}: loads without a queue"));
        }
        failures.extend(common::fixed_point_failure(&name, &c));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
