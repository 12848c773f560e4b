//! Packet I/O for sluice: moves real frames between two interfaces through
//! the sans-IO engine.
//!
//! # Principles
//! - One reactor (`reactor.rs`) under both packet loops: epoll over the two
//!   ports, one timerfd armed at an absolute CLOCK_MONOTONIC deadline (early
//!   by the measured wake-up latency, the rest spun), one eventfd waker for
//!   other threads (reload, stop), one netlink socket for link events. The
//!   timing decision is a pure, unit-tested function (`reactor::plan`).
//! - Two users, each small: the bridge (`bridge.rs`) drives the engine,
//!   locked once per turn, never per packet; the lab's delay line
//!   (`delay.rs`) drives its delay queues. Both see a port (`port.rs`) the
//!   same way whatever the socket: AF_XDP, TPACKET ring, recvmmsg. Module
//!   imports go one way: users → reactor, port → sockets → `sockopt`/`sys`.
//! - Interfaces come and go: a link that goes down (or loses carrier) is
//!   waited for, logged and counted, and forwarding resumes when it comes
//!   back; a deleted one ends the loop with an error naming it (`link.rs`).
//! - Nothing is dropped silently: a frame the kernel refuses for now
//!   (EAGAIN/ENOBUFS) waits in a bounded per-interface pending queue and the
//!   engine is not asked for more until it drains; a frame it refuses for
//!   good is counted in `tx_errors`, one due on a link that is down in
//!   `down_drops`.
//! - One sluice per interface (`lock.rs`: a flock per netns and ifindex);
//!   once set up, the daemon keeps only the capabilities its loop uses
//!   (`caps.rs`).
//! - Buffers are recycled ([`pool::Pool`]): steady state does not allocate.
//! - Packet I/O by AF_XDP (`Method::Xdp`, the default: an AF_XDP socket
//!   per RX queue of each interface and one for TX, `xdp/`: the BPF
//!   program in `program.rs`, UMEM and rings in `umem.rs`, one queue's
//!   socket in `queue.rs`, the interface's in `socket.rs`), falling back
//!   to a TPACKET_V2 RX ring (`Method::Ring`) with sendmmsg on a
//!   transmit-only socket, which falls back to recvmmsg (`Method::Mmsg`)
//!   where the kernel refuses the ring (docs/adr/0002-packet-io.md has the
//!   numbers).
//! - When sluice stops, the interfaces may be handed to the kernel's own
//!   bridge (`kernel_bridge.rs`, rtnetlink) so the LAN stays online,
//!   unshaped; `run` takes them back at start.
//! - This is the only crate of the workspace with `unsafe`. Syscalls go
//!   through `rustix` where it has them typed (clock, epoll, timerfd,
//!   eventfd, getrandom, netlink, capabilities and ids, flock, socket
//!   creation, AF_XDP options and addresses, sendmmsg), so those need
//!   none. What is left is what rustix lacks: the mmap'd TPACKET ring
//!   (`sock.rs`) and AF_XDP rings and UMEM (`xdp/umem.rs`, `queue.rs`,
//!   `socket.rs`), the BPF syscall (`xdp/program.rs`), recvmmsg and the
//!   packet-socket bind (`sock.rs`), typed setsockopt/getsockopt and the
//!   interface ioctls (`sockopt.rs`), sigaction and the handler's eventfd
//!   (`signals.rs`), getpwnam_r (`caps.rs`), SCHED_FIFO and a borrowed
//!   descriptor for epoll (`sys.rs`), and the generator in `blast.rs`;
//!   each block says why it is sound. The reactor, the ports and both
//!   loops have none.

// A failed write to stderr must not panic the data plane: messages go
// through the caller's log callback (`Log`), never print!/eprint!.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod attach;
pub mod blast;
mod bridge;
pub mod caps;
pub mod conntrack;
pub mod delay;
pub mod kernel_bridge;
mod link;
mod lock;
pub mod offload;
pub mod pool;
mod port;
pub mod raw;
mod reactor;
pub mod ring;
mod rtnl;
pub mod signals;
mod sock;
mod sockopt;
mod sys;
mod xdp;

pub use bridge::{Bridge, IfaceIoStats, IoStats, PoolStats, Tick};
pub use delay::{set_thread_fifo, DelayLine, DelayOptions, DelayStats};
pub use lock::{lock_interfaces, IfaceLock};
pub use offload::OffloadResult;
pub use port::{IoOptions, Method, XdpQueues};
pub use reactor::{Log, Waker};
pub use signals::{Signal, Signals};
pub use sys::{now, random_key};
pub use xdp::{check_rx_frames, QueueInfo, RX_FRAMES_ASK};
