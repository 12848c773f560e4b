//! AF_XDP: XDP sockets on queue 0 of an interface, fed by a hand-assembled
//! XDP program.
//!
//! # Principles
//! - The XDP program is six BPF instructions:
//!   `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`. Every
//!   frame of queue 0 (ARP, ND, non-IP included) goes to the socket; a queue
//!   without a socket passes to the kernel stack, which is why an interface
//!   with more than one RX queue is refused (the caller falls back).
//! - The program is attached through a BPF link (`BPF_LINK_CREATE`): the
//!   link's descriptor is the attachment, so closing it (or the process
//!   dying) detaches the program. Native (driver) mode is tried first, then
//!   generic (skb) mode — the other way round on veth, whose native mode
//!   copies every frame once more.
//! - Someone else can detach that link (`BPF_LINK_DETACH`, `bpftool link
//!   detach`): the descriptor stays valid, its info says ifindex 0, and no
//!   netlink event announces it. [`XdpSocket::ensure_attached`] asks the
//!   link and attaches the same program again with a new one (the socket
//!   stays bound and in the map). An interface that already runs another
//!   program answers EBUSY/EEXIST: `ErrorKind::ResourceBusy`, a refusal.
//! - One UMEM per interface, `FRAMES` chunks: `RX_FRAMES` are handed to
//!   the fill ring for reception (as many slots as the TPACKET_V2 ring
//!   has, to absorb the same bursts while the loop is descheduled), the
//!   other `TX_FRAMES` are a free list for transmission. A received frame
//!   is copied out by the caller's closure and its chunk goes straight back
//!   to the fill ring, so the fill ring never runs dry because of us; a
//!   transmit chunk returns to the free list through the completion ring.
//! - Ring indices are free-running `u32`s shared with the kernel: the
//!   producer publishes with a release store after writing descriptors, the
//!   consumer reads the other side's index with an acquire load before
//!   reading descriptors ([`RingIdx`] holds the arithmetic, unit-tested).
//! - Two sockets per interface on queue 0: the receiving one (in the map
//!   and in epoll) owns the UMEM, fill and completion rings; a
//!   transmit-only one shares its UMEM and stays out of epoll.
//! - TX never blocks and never drops: a frame for which there is no free
//!   chunk or ring slot is not taken (the caller keeps it); descriptors
//!   the kernel has not consumed yet are kicked again on the next call
//!   ([`XdpSocket::service`]).
//! - Zero-copy mode needs no other code: the kernel picks it where the
//!   driver offers it, and completions, asynchronous there, are reclaimed
//!   on every send. Only copy mode (veth) has been run.

pub(crate) mod program;
mod socket;
mod umem;

pub use socket::XdpSocket;
