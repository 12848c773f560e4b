//! The path monitor: every measurement sluice takes of the link beyond it,
//! read from the traffic it forwards, behind one type ([`Monitor`]).
//!
//! # Principles
//!
//! - **One entry per packet event.** The engine's stages tell the monitor
//!   what passed, each with the `now` the caller gave the engine (nothing
//!   here reads a clock): a frame from the far side before the rules
//!   ([`Monitor::on_arrival`]), a frame the rules passed
//!   ([`Monitor::on_passed`], [`Monitor::on_rx`]), an ACK TCP control
//!   released ([`Monitor::on_release`]), a packet leaving
//!   ([`Monitor::on_tx`]), and the probe's turn ([`Monitor::poll_probe`]).
//! - **One reading per direction.** A direction is the traffic leaving by
//!   one interface; [`Monitor::reading`] gives what its shaper acts on —
//!   the delay beyond sluice, sluice's own wait, and for an upload the
//!   bytes its far ends acknowledged. Which of the delay's readings a
//!   direction trusts (the way out, the way in, the round trip, the probe)
//!   is decided here, once.
//! - **The parts, each one job:** the queueing delay beyond sluice
//!   ([`delay_signal`]), a sender's one-way delay ([`owd`]), the bytes
//!   delivered beyond the link ([`delivered`]), autorate's active probe
//!   ([`probe`]), sluice's own wait that corrects each sample
//!   ([`sojourn`]), and the windowed minimum they share ([`minmax`]).
//!   None of them knows the engine; the monitor knows the bridge pairs.
//! - Bounded memory, O(1) per packet: each part's own bound.
//!   docs/engine.md "The path monitor" has the picture.

pub mod delay_signal;
pub mod delivered;
pub mod minmax;
mod monitor;
pub mod owd;
pub mod probe;
pub mod sojourn;

pub use monitor::{Monitor, PathReading, RxEvent, SideStats, Transit};

/// Virtual time for the parts' tests: `ms(n)` milliseconds, and `at(n)`,
/// `n` ms after a start one second past zero.
#[cfg(test)]
mod test_time {
    use sluice_time::{Duration, Instant};

    pub(super) fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    pub(super) fn at(n: u64) -> Instant {
        Instant(1_000_000_000) + ms(n)
    }
}
