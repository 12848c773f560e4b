//! sluice-lab: the network-namespace harness for end-to-end tests and the lab.
//!
//! # Principles
//! - Everything a test creates is owned by one [`netns::Topology`] value whose
//!   `Drop` kills the children it started (and any process still inside its
//!   namespaces) and deletes the namespaces, on every exit path including a
//!   panic; names carry the pid and a counter so parallel tests never collide.
//! - It drives the system's own tools (`ip`, `ethtool`, `iperf3`) so what a
//!   test does can be replayed by hand from its log.
//! - No `unsafe`: signals go through `kill(1)`.
//! - Writing to stderr never ends a run: a closed pipe or a full disk
//!   loses the progress line, not the results (no `eprintln!`, which
//!   panics on a failed write).
#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod analysis;
pub mod attack;
pub mod bench;
pub mod bridge;
pub mod flent;
pub mod iperf3;
pub mod model;
pub mod netns;
pub mod probes;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod shaper;
pub mod topo;
pub mod trace;
pub mod verdict;

pub use bridge::{BridgeLab, Wiring, CLIENT_IP, SERVER_IP};
pub use iperf3::{ClientOptions, Iperf3Result, UdpCounts};
pub use netns::{have_tools, leftover_namespaces, Netns, ProcId, Topology};
