//! The parser never panics and the printer stays a fixed point: arbitrary
//! strings, pf-flavoured token soup, and mutations of the valid golden files
//! all go through `fuzz_entry` (which asserts the round trip on success).

use proptest::prelude::*;
use std::fs;
use std::path::Path;

fn corpus() -> Vec<String> {
    let mut v = Vec::new();
    for dir in [
        "tests/golden/valid",
        "tests/golden/invalid",
        "../../examples",
    ] {
        let d = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut files: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for p in files {
            if p.extension().is_some_and(|e| e == "conf") {
                v.push(fs::read_to_string(p).unwrap());
            }
        }
    }
    assert!(v.len() >= 20, "corpus too small: {}", v.len());
    v
}

const WORDS: &[&str] = &[
    "altq",
    "on",
    "em0",
    "queue",
    "{",
    "}",
    "(",
    ")",
    ",",
    "priq",
    "cbq",
    "hfsc",
    "bandwidth",
    "100Kb",
    "50%",
    "qlimit",
    "0",
    "70000",
    "priority",
    "7",
    "default",
    "pass",
    "block",
    "match",
    "in",
    "out",
    "from",
    "to",
    "any",
    "port",
    "80",
    "flags",
    "S/SA",
    "A/A",
    "keep",
    "state",
    "queue",
    "q",
    "parent",
    "min",
    "max",
    "burst",
    "for",
    "10ms",
    "flows",
    "pipe",
    "weight",
    "sched",
    "fq_codel",
    "ecn",
    "$x",
    "x",
    "=",
    "\"em0\"",
    "<t>",
    "!",
    "\\\n",
    "\n",
    "#",
    "realtime",
    "linkshare",
    "(1Mb",
    "5",
    "2Mb)",
    "set",
    "prio",
    "table",
    "10.0.0.0/8",
    "::1",
    "><",
    "<>",
    "<",
    ">=",
    "egress:network",
    "self",
    "all",
    "proto",
    "tcp",
    "udp",
    "inet6",
    "overhead",
    "pppoe-vcmux",
    "atm",
    "limit",
    "states",
    "é",
    "\t",
    "ingress",
    "ack-pacing",
    "window-clamp",
    // pfctl's own spellings (docs/pf-compat.md): flags on the altq line,
    // grouped rule settings, glued curves, a single child, 5.5+ options.
    "cbq(ecn)",
    "hfsc(default",
    "codel)",
    "rio",
    "red",
    "borrow",
    "upperlimit",
    "realtime(1Mb",
    "set (",
    "prio(5,",
    "queue(q,",
    "q)",
    "wrr",
    "root",
    "quantum",
    "1514",
    "4.50Mb",
    "1s",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..60).prop_map(|w| w.join(" "))
}

// 256 cases per property by default; PROPTEST_CASES=100000 for a long run.
proptest! {

    #[test]
    fn arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..400)) {
        sluice_conf::fuzz_entry(&data);
    }

    #[test]
    fn arbitrary_strings(s in "\\PC{0,300}") {
        sluice_conf::fuzz_entry(s.as_bytes());
    }

    #[test]
    fn token_soup(s in soup()) {
        sluice_conf::fuzz_entry(s.as_bytes());
    }

    #[test]
    fn mutated_valid_files(idx in 0usize..1000, cuts in prop::collection::vec((0usize..4000, 0usize..8, prop::sample::select(WORDS)), 1..4)) {
        let c = corpus();
        let mut text = c[idx % c.len()].clone().into_bytes();
        for (at, del, ins) in cuts {
            let at = at.min(text.len());
            let end = (at + del).min(text.len());
            text.splice(at..end, ins.bytes());
        }
        sluice_conf::fuzz_entry(&text);
    }
}

#[test]
fn every_corpus_file_survives_fuzz_entry() {
    for t in corpus() {
        sluice_conf::fuzz_entry(t.as_bytes());
    }
}
