//! `sluice init`'s recipe (`sluice_conf::recipe`): golden output for every
//! link type, and every output checks with no warning at a slow, a middle
//! and a fast line. `UPDATE_GOLDEN=1` rewrites `golden/init/*.conf`.

use sluice_conf::recipe::{line_rate, recipe, Knobs, Link};
use std::path::Path;

fn knobs(down: &str, up: &str, link: Link) -> Knobs {
    let rate = |flag, s| line_rate(flag, s).unwrap();
    Knobs::new(rate("--down", down), rate("--up", up), link)
}

/// Each golden: its file name and knobs.
fn goldens() -> Vec<(String, Knobs)> {
    let mut v: Vec<(String, Knobs)> = Link::ALL
        .into_iter()
        .map(|l| (format!("{}-30M-5M.conf", l.name()), knobs("30M", "5M", l)))
        .collect();
    v.push(("adsl-1M-256k.conf".into(), knobs("1M", "256k", Link::Adsl)));
    v.push((
        "pppoe-1M-256k.conf".into(),
        knobs("1M", "256k", Link::Pppoe),
    ));
    v.push((
        "ethernet-500M-50M.conf".into(),
        knobs("500M", "50M", Link::Ethernet),
    ));
    let mut hosts = knobs("100M", "20M", Link::Docsis);
    hosts.hosts = true;
    v.push(("docsis-100M-20M-hosts.conf".into(), hosts));
    let mut auto = knobs("50M", "10M", Link::Vdsl);
    auto.autorate = true;
    v.push(("vdsl-50M-10M-autorate.conf".into(), auto));
    v
}

#[test]
fn init_output_matches_its_golden_for_every_link_type() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/init");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for (name, k) in goldens() {
        let got = recipe(&k).unwrap();
        let path = dir.join(&name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != got {
            failures.push(format!("{name}:\n--- want\n{want}--- got\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn init_output_checks_with_no_warning_for_every_link_and_rate() {
    let pairs = [("1M", "256k"), ("30M", "5M"), ("500M", "50M")];
    let mut failures = Vec::new();
    for link in Link::ALL {
        for (down, up) in pairs {
            for (hosts, autorate) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut k = knobs(down, up, link);
                k.hosts = hosts;
                k.autorate = autorate;
                let text = recipe(&k).unwrap();
                let what = format!(
                    "{} {down}/{up} hosts={hosts} autorate={autorate}",
                    link.name()
                );
                match sluice_conf::check("init.conf", &text, &[]) {
                    Ok(c) if c.warnings.is_empty() => {}
                    Ok(c) => failures.push(format!(
                        "{what}: warnings\n{}",
                        c.warnings
                            .iter()
                            .map(|w| w.render("init.conf", &text))
                            .collect::<String>()
                    )),
                    Err(d) => failures.push(format!(
                        "{what}: refused\n{}\n{text}",
                        d.iter()
                            .map(|w| w.render("init.conf", &text))
                            .collect::<String>()
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_line_of_the_output_is_a_statement_a_comment_or_blank() {
    // "Every comment says why, in one line": no comment wraps onto a second
    // line of its own, so each comment line is followed by a statement or
    // by another comment about the same statement, and none is empty.
    let text = recipe(&knobs("1M", "256k", Link::Pppoe)).unwrap();
    for l in text.lines() {
        assert!(
            l.is_empty() || !l.trim_start().starts_with("# ") || l.len() > 12,
            "{l}"
        );
        assert_ne!(l.trim(), "#", "an empty comment line");
    }
}
