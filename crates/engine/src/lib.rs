//! The engine: one pipeline per interface, built from the config IR and
//! driven entirely by the caller's clock.
//!
//! Owns: building queue trees from `sluice_conf::ir` ([`build`]), the per-packet
//! path (parse → classify in and out, as pf does on a router → resolve the
//! queue on the egress interface → enqueue), transmission (`poll_tx`), the
//! next deadline (`poll_timeout`), atomic reload, and statistics. Depends on
//! time, wire, conf (IR only), classify and sched. Sans-IO: no clock, no
//! syscall; the I/O crate calls `handle_rx(now, …)`, `poll_tx(now, …)` and
//! arms one timer from `poll_timeout()`, as quinn-proto's connection does.
//!
//! Every frame that is not forwarded is counted with its cause and handed back
//! through [`Engine::poll_dropped`]; nothing disappears silently. [`testing`]
//! checks that contract over arbitrary frame and clock sequences (the
//! `engine_ops` fuzz target and its seed corpus).
#![forbid(unsafe_code)]

pub mod autorate;
mod bounded;
pub mod build;
mod engine;
pub mod health;
pub mod mss;
pub mod nat;
pub mod path;
pub mod prio;
mod report;
pub mod tcpctl;
pub mod testing;
pub mod votes;

// The monitor's parts keep the paths autorate, the daemon and tests name.
pub use path::{delay_signal, delivered, owd, probe};

pub use engine::{
    DropCause, DroppedFrame, Engine, IfaceCounters, MemoryReport, Options, ReloadReport, Rx,
    DEFAULT_MEMORY_LIMIT,
};
pub use report::{
    AutorateReport, ClassReport, IfaceReport, ProbeReport, SojournMarks, TcpControlReport,
    SOJOURN_INTERVAL,
};
