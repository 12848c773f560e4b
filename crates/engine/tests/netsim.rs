//! The simulator's snapshot: a fixed table of cases through the real engine
//! in virtual time ([`sluice_engine::testing::netsim`]), their outcomes
//! compared line for line with `tests/snapshots/netsim.txt`. Any change in
//! the engine's behaviour on these paths shows as a diff; a change meant
//! is accepted with `SLUICE_ACCEPT_SNAPSHOT=1 cargo test -p sluice-engine
//! --test netsim`, and the new file reviewed and committed.

use sluice_engine::testing::netsim::case::{render, Case, Shaper};
use sluice_engine::testing::netsim::Dir;

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/netsim.txt");

/// (shaper, Mbit/s, flows, RTT ms, direction, ack-pacing, autorate).
const TABLE: [(Shaper, u64, usize, u64, Dir, bool, bool); 18] = {
    use Dir::*;
    use Shaper::*;
    [
        (FqCodel, 1, 1, 50, Down, false, false),
        (FqCodel, 1, 4, 50, Up, false, false),
        (FqCodel, 1, 4, 50, Down, true, false),
        (FqCodel, 10, 1, 10, Down, false, false),
        (FqCodel, 10, 4, 50, Down, false, false),
        (FqCodel, 10, 4, 50, Down, true, false),
        (FqCodel, 10, 16, 10, Up, false, false),
        (FqCodel, 10, 16, 50, Down, true, false),
        (FqCodel, 100, 4, 10, Down, false, false),
        (FqCodel, 100, 16, 50, Down, false, false),
        (FqCodel, 100, 1, 10, Up, false, false),
        (FqCodel, 100, 4, 50, Down, true, false),
        (Priq, 1, 4, 50, Down, false, false),
        (Priq, 10, 4, 10, Up, false, false),
        (Priq, 10, 16, 50, Down, false, false),
        (Priq, 100, 4, 10, Down, true, false),
        (FqCodel, 10, 4, 50, Down, false, true),
        (FqCodel, 10, 4, 50, Up, false, true),
    ]
};

fn table() -> String {
    let mut out = String::from(
        "# sluice netsim snapshot: see docs/testing.md (\"The simulator\").\n\
         # goodput Mbit/s total [per flow], jain; ping ms; drops by cause.\n",
    );
    for (shaper, mbps, flows, rtt_ms, dir, ack_pacing, autorate) in TABLE {
        let c = Case {
            shaper,
            mbps,
            flows,
            rtt_ms,
            dir,
            ack_pacing,
            autorate,
        };
        let o = c.run().unwrap_or_else(|e| panic!("{}: {e}", c.name()));
        out.push_str(&render(&c.name(), &o));
    }
    out
}

#[test]
fn the_table_matches_the_snapshot() {
    let now = table();
    if std::env::var_os("SLUICE_ACCEPT_SNAPSHOT").is_some() {
        std::fs::write(SNAPSHOT, &now).expect("write the snapshot");
        return;
    }
    let then = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    if now != then {
        let mut diff = String::new();
        let (a, b): (Vec<_>, Vec<_>) = (then.lines().collect(), now.lines().collect());
        for k in 0..a.len().max(b.len()) {
            let (x, y) = (a.get(k).copied(), b.get(k).copied());
            if x != y {
                diff.push_str(&format!(
                    "line {}:\n- {}\n+ {}\n",
                    k + 1,
                    x.unwrap_or("(none)"),
                    y.unwrap_or("(none)")
                ));
            }
        }
        panic!(
            "the simulator's outcomes differ from {SNAPSHOT}:\n{diff}\n\
             If the change is meant, rerun with SLUICE_ACCEPT_SNAPSHOT=1 and commit the file."
        );
    }
}

#[test]
fn two_runs_are_identical() {
    let c = Case {
        shaper: Shaper::FqCodel,
        mbps: 10,
        flows: 4,
        rtt_ms: 10,
        dir: Dir::Down,
        ack_pacing: true,
        autorate: false,
    };
    let (a, b) = (c.run().unwrap(), c.run().unwrap());
    assert_eq!(render("a", &a), render("a", &b));
}
