//! Units shared by every sluice crate.
//!
//! Owns: `Instant` and `Duration` (nanoseconds, monotonic, supplied by the caller),
//! `Rate` (bit/s, 64-bit so 10 Gbit/s and beyond never wrap), the per-packet
//! link-layer `Overhead` (fixed bytes or ATM cell framing) and a small log-bucket
//! `Histogram` for sojourn percentiles, [`units`]: the one place rates and
//! durations are parsed from and formatted for people, [`random`]: the one
//! seeded random stream, and [`grade`]: the DSLReports bufferbloat grade.
//! Depends on nothing. No clock is read here: time is always an argument.
#![forbid(unsafe_code)]

pub mod grade;
mod histogram;
mod overhead;
pub mod random;
mod rate;
mod time;
pub mod units;

pub use histogram::Histogram;
pub use overhead::{Framing, Overhead};
pub use rate::Rate;
pub use time::{Duration, Instant};
