//! Text layouts of `sluice show`, after pfctl's (`-vvsq`, `-vss`, `-vsr`,
//! `-si`): one module per subcommand. Pure functions of the replies;
//! golden tests pin them (`tests/golden/show/*.txt`).

mod health;
mod info;
mod queues;
mod rules;
mod states;
mod xdp;

pub use health::format_health;
pub use info::format_info;
pub(crate) use queues::per_sec;
pub use queues::{format_queues, format_queues_measured};
pub use rules::format_rules;
pub use states::format_states;

/// Milliseconds with one decimal, `-` for none.
fn ms(ns: Option<u64>) -> String {
    match ns {
        Some(ns) => format!("{:.1} ms", ns as f64 / 1e6),
        None => "-".into(),
    }
}

/// `hh:mm:ss`, with days in front when there are any.
fn hms(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// pfctl's spelling of a measured rate: `12.35Kb/s`.
fn rate_text(bits_per_sec: f64) -> String {
    sluice_time::units::format_measured_pf(bits_per_sec)
}

#[cfg(test)]
mod tests;
