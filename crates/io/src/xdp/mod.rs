//! AF_XDP: an XDP socket on every RX queue of an interface and one
//! transmitting, fed by a hand-assembled XDP program.
//!
//! # Principles
//! - The XDP program is six BPF instructions:
//!   `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`. The
//!   XSKMAP has a slot per RX queue and every queue has a socket in it, so
//!   every frame (ARP, ND, non-IP included) reaches sluice whichever queue
//!   RSS (or, on veth, the sender's TX queue) chose. The queues are counted
//!   at open (ETHTOOL_GCHANNELS, else sysfs); a queue added later by
//!   `ethtool -L` has no socket and passes to the kernel stack, which
//!   [`XdpSocket::queue_change`] notices (the bridge logs it).
//! - The program is attached through a BPF link (`BPF_LINK_CREATE`): the
//!   link's descriptor is the attachment, so closing it (or the process
//!   dying) detaches the program. Native (driver) mode is tried first, then
//!   generic (skb) mode — the other way round on veth, whose native mode
//!   copies every frame once more.
//! - Someone else can detach that link (`BPF_LINK_DETACH`, `bpftool link
//!   detach`): the descriptor stays valid, its info says ifindex 0, and no
//!   netlink event announces it. [`XdpSocket::ensure_attached`] asks the
//!   link and attaches the same program again with a new one (the sockets
//!   stay bound and in the map). An interface that already runs another
//!   program answers EBUSY/EEXIST: `ErrorKind::ResourceBusy`, a refusal.
//! - A UMEM per RX queue (`queue.rs`), not one shared by the queues
//!   (XDP_SHARED_UMEM across queues, Linux ≥ 5.10): a received frame is
//!   copied out at once, so a shared pool would only move chunks between
//!   queues, at the price of fill and completion rings fed from one free
//!   list. Per queue, the socket, its rings and its chunks are one struct
//!   ([`queue::RxQueue`]) that nothing else writes: the one data-plane
//!   thread serves them today, and a thread per queue can own one
//!   tomorrow. Every receive batch visits every queue and shares the
//!   port's batch equally among those holding frames
//!   ([`queue::split_batch`]): with one flow per queue, every flow is
//!   served every turn, as a single ring serves them.
//! - Each queue is as deep as the single-queue ring (`RX_FRAMES` chunks,
//!   all in its fill ring) for up to four queues, then shares a per-
//!   interface budget, never below `RX_FRAMES_MIN` (`rx_frames_per_queue`
//!   has the measurement): RSS keeps a flow on one queue, and all the
//!   traffic can land on one. A received frame's chunk goes straight
//!   back, so the fill ring never runs dry because of us.
//! - One transmitting socket per interface, on queue 0, sharing queue 0's
//!   UMEM (its `TX_FRAMES` chunks are a free list, back through the
//!   completion ring) and kept out of epoll. One is enough: the shaper
//!   decides one departure order per interface, which one TX ring keeps
//!   (several would let the driver reorder it), and one thread sends.
//! - Zero-copy is asked for per queue where the program runs natively
//!   (`XDP_ZEROCOPY`); a driver that refuses it gets copy mode on a fresh
//!   socket, and the queue keeps the reason (generic mode is always copy:
//!   the driver built an skb already). `show info` lists every queue.
//! - Ring indices are free-running `u32`s shared with the kernel: the
//!   producer publishes with a release store after writing descriptors, the
//!   consumer reads the other side's index with an acquire load before
//!   reading descriptors ([`RingIdx`] holds the arithmetic, unit-tested).
//! - TX never blocks and never drops: a frame for which there is no free
//!   chunk or ring slot is not taken (the caller keeps it); descriptors
//!   the kernel has not consumed yet are kicked again on the next call
//!   ([`XdpSocket::service`]). Zero-copy completions, asynchronous, are
//!   reclaimed on every send. Only copy mode (veth) has been run.

pub(crate) mod program;
mod queue;
mod socket;
mod umem;

pub use queue::{check_rx_frames, RX_FRAMES_ASK};
pub use socket::{QueueInfo, XdpSocket, TX_QUEUE};
