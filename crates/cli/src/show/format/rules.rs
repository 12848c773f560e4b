//! `show rules` (`pfctl -vsr`): each rule, then its counters.

use sluice_control::proto::*;
use std::fmt::Write as _;

/// `pfctl -vsr`: each rule, then its counters.
pub fn format_rules(r: &RulesReply) -> String {
    let mut o = String::new();
    for x in &r.rules {
        match &x.text {
            Some(t) => {
                let _ = writeln!(o, "@{} {t}", x.number);
            }
            None => {
                let _ = writeln!(
                    o,
                    "@{} (line {}: text unavailable, the file changed since it was loaded)",
                    x.number, x.line
                );
            }
        }
        let _ = writeln!(
            o,
            "  [ Evaluations: {:<10} Packets: {:<10} Bytes: {:<12} States: {:<6} ]",
            x.evaluations, x.packets, x.bytes, x.states
        );
        let _ = writeln!(
            o,
            "  [ Matches: {:<10} State Creations: {:<10} Line: {} ]",
            x.matches, x.state_creations, x.line
        );
        if x.mss_clamped > 0 {
            let _ = writeln!(o, "  [ MSS clamped: {} ]", x.mss_clamped);
        }
    }
    o
}
