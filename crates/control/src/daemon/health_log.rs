//! One log line per change of a direction's health verdict (issue #40):
//! info when the shaper takes control or traffic stops, warn when it
//! loses control, since that is what an operator must act on.

use crate::log::{log, Level};
use sluice_engine::health::{HealthChange, Verdict};

/// The level and the line of one change on `iface`.
pub(super) fn line(iface: &str, c: &HealthChange) -> (Level, String) {
    let level = match c.to {
        Verdict::NotInControl { .. } => Level::Warn,
        _ => Level::Info,
    };
    (level, format!("health of {iface}: {c}"))
}

/// Logs the changes the engine kept since the last call.
pub(super) fn log_changes(changes: &[(String, HealthChange)]) {
    for (iface, c) in changes {
        let (level, text) = line(iface, c);
        log(level, format_args!("{text}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_time::{Instant, Rate};

    #[test]
    fn losing_control_is_a_warning_with_the_suggestion() {
        let c = HealthChange {
            at: Instant::ZERO,
            from: Verdict::InControl,
            to: Verdict::NotInControl {
                suggested: Some(Rate::kbps(9_490)),
            },
        };
        let (level, text) = line("wan0", &c);
        assert_eq!(level, Level::Warn);
        assert_eq!(
            text,
            "health of wan0: not in control: the link is slower than the rate, try 9490Kb (was: in control)"
        );
        let back = HealthChange {
            at: Instant::ZERO,
            from: c.to,
            to: Verdict::InControl,
        };
        assert_eq!(line("wan0", &back).0, Level::Info);
    }
}
