//! Packet I/O for sluice: moves real frames between two interfaces through
//! the sans-IO engine.
//!
//! # Principles
//! - One thread, one epoll loop: both packet sockets, one timerfd armed at
//!   the engine's absolute `poll_timeout()` (CLOCK_MONOTONIC), one eventfd
//!   waker for other threads (reload, stop). The engine sits behind
//!   `Arc<Mutex<Engine>>` and is locked once per batch, never per packet.
//! - Nothing is dropped silently: a frame the kernel refuses for now
//!   (EAGAIN/ENOBUFS) waits in a bounded per-interface pending queue and the
//!   engine is not asked for more until it drains; a frame it refuses for
//!   good is counted in `tx_errors`.
//! - Buffers are recycled ([`pool::Pool`]): steady state does not allocate.
//! - Packet I/O by AF_XDP (`Method::Xdp`, the default: one AF_XDP socket
//!   pair per interface for both directions, `xdp.rs`), falling back to a
//!   TPACKET_V2 RX ring (`Method::Ring`; the V3 block ring is
//!   `Method::RingV3`) with sendmmsg on a transmit-only socket, which falls
//!   back to recvmmsg (`Method::Mmsg`) where the kernel refuses the ring
//!   (docs/adr/0002-packet-io.md has the numbers).
//! - This is the only crate of the workspace with `unsafe`, confined to
//!   `sys.rs`, `sock.rs`, `xdp.rs`, `offload.rs`, `signals.rs`, two calls
//!   (`prctl`, `sched_setscheduler`) in `delay.rs` and the generator in
//!   `blast.rs`; each block says why it is sound.

pub mod blast;
mod bridge;
pub mod delay;
mod link;
pub mod offload;
pub mod pool;
mod port;
pub mod reactor;
pub mod ring;
pub mod signals;
mod sock;
mod sockopt;
mod sys;
mod xdp;

pub use bridge::{Bridge, IfaceIoStats, IoStats};
pub use delay::{set_thread_fifo, DelayLine, DelayOptions, DelayStats};
pub use offload::OffloadResult;
pub use port::{IoOptions, Method};
pub use reactor::{Log, Waker};
pub use signals::{Signal, Signals};
pub use sys::{now, random_key};
