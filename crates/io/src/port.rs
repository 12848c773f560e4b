//! One interface's sockets, whatever the packet I/O: AF_XDP, a TPACKET
//! ring with a transmit-only socket, or one recvmmsg/sendmmsg socket.
//!
//! # Principles
//! - The loops above see one shape: receive a batch, send a batch, take the
//!   kernel's drop counter, ask whether transmitted descriptors still wait
//!   for the kernel, name the descriptors epoll watches.
//! - An interface that is down or went away answers ENETDOWN/ENXIO/ENODEV;
//!   here that is "nothing received" or "the kernel pushed back", never a
//!   failure of the loop: the link watch (`link.rs`) says whether the
//!   interface is down (wait) or gone (end). The sockets survive a
//!   down/up as they are: AF_PACKET re-hooks itself on up, and an AF_XDP
//!   socket stays bound with its program attached (checked on veth in
//!   generic mode, `tests/netns_link.rs`; native drivers re-attach the
//!   socket's UMEM when they restart their rings, untested here).
//! - Which I/O runs is decided once at open ([`open_pair`]), with the
//!   fallbacks of [`Method`] and the reason recorded. An interface that
//!   already runs another XDP program (EBUSY/EEXIST on attach) is not a
//!   reason to fall back but a refusal: AF_PACKET beside another bridge
//!   would forward every frame twice.
//! - An XDP program someone detached (`bpftool link detach`) is attached
//!   again by [`Port::ensure_attached`], which the bridge calls once a
//!   second: the AF_XDP socket stays bound and in the map meanwhile.

use crate::offload::{self, OffloadResult};
use crate::pool::Pool;
use crate::sock::{PacketSocket, RingConfig, RxFrame};
use crate::sockopt;
use crate::xdp::{QueueInfo, XdpSocket};
use sluice_time::Duration;
use std::io;
use std::os::fd::RawFd;

/// Frames read per port per loop turn (both loops): bounds one turn's
/// work so neither direction, the timers nor the departures starve.
pub const RX_BATCH_FRAMES: usize = 256;
/// How often a loop collects the kernel's receive-drop counters.
pub const STATS_PERIOD: Duration = Duration::from_secs(1);
/// Ethernet header + one VLAN tag: a frame longer than MTU + this is a
/// super-packet that slipped past the offload settings.
pub const L2_MAX_OVERHEAD: usize = 18;

/// One [`Port::recv_copies`] batch, besides the frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxBatch {
    /// Frames taken from the kernel (skipped ones included).
    pub taken: usize,
    /// Frames longer than a ring slot, received only in part: skipped.
    pub truncated: u64,
    /// Frames whose TCP/UDP checksum was completed in the copy.
    pub completed: u64,
}

impl RxBatch {
    /// A whole batch: the socket may hold more. (A partial one means it is
    /// momentarily empty; level-triggered epoll reports it again anyway.)
    pub fn full(&self) -> bool {
        self.taken >= RX_BATCH_FRAMES
    }
}

/// AF_XDP on one interface, for `show info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XdpQueues {
    /// How the program is attached: `native` or `generic`.
    pub attach: &'static str,
    /// The queue frames are transmitted on.
    pub tx_queue: u32,
    /// Every RX queue, in order.
    pub queues: Vec<QueueInfo>,
}

/// Which packet I/O to use (TX is sendmmsg except for AF_XDP).
/// docs/adr/0002-packet-io.md has the measurements behind the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Method {
    /// recvmmsg on the packet socket: every kernel has it, and a frame of
    /// any length arrives whole.
    Mmsg,
    /// TPACKET_V2 RX ring (one status word per frame slot, so no retire
    /// timer), falling back to recvmmsg where the kernel refuses the ring;
    /// `Bridge::method` says which one runs. More frames and more TCP
    /// throughput per core than recvmmsg, at the same latency.
    Ring,
    /// AF_XDP sockets on every RX queue of each interface and one for TX,
    /// fed by an XDP redirect program (native mode, else generic; generic
    /// first on veth; zero-copy per queue where the driver offers it);
    /// falls back to the TPACKET_V2 ring, then recvmmsg, where
    /// AF_XDP cannot be set up (the reason is in `Bridge::fallback`).
    /// The default: no loss where the ring drops, 20–30 % more TCP
    /// throughput, the same CPU per frame and latency.
    #[default]
    Xdp,
    /// As `Xdp`, but the program is attached in generic (skb) mode only,
    /// for drivers whose native XDP misbehaves.
    XdpGeneric,
}

/// Options of `Bridge::open`.
#[derive(Clone, Debug)]
pub struct IoOptions {
    pub method: Method,
    /// Switch GRO/GSO/TSO/LRO/RX-VLAN offloads off on both interfaces.
    pub disable_offloads: bool,
    pub ring_block_bytes: u32,
    pub ring_blocks: u32,
    /// A deadline closer than this is busy-waited instead of slept on, as
    /// timer wake-up latency would overshoot it.
    pub spin_ns: u64,
    /// AF_XDP receive chunks per RX queue (`None`: the default depth).
    pub xdp_rx_frames: Option<u32>,
}

impl Default for IoOptions {
    fn default() -> Self {
        IoOptions {
            method: Method::default(),
            disable_offloads: true,
            ring_block_bytes: 1 << 18,
            ring_blocks: 64,
            spin_ns: 50_000,
            xdp_rx_frames: None,
        }
    }
}

/// One interface's sockets.
pub enum Port {
    /// A receiving packet socket (ring or recvmmsg) and, for the bridge, a
    /// transmit-only one kept out of epoll in the common case (`None`:
    /// `rx` sends too).
    Packet {
        rx: PacketSocket,
        tx: Option<PacketSocket>,
    },
    /// AF_XDP sockets: one per RX queue, one transmitting. Never
    /// registered for EPOLLOUT: the TX side is retried on the `TX_RETRY`
    /// timer.
    Xdp(Box<XdpSocket>),
}

/// An interface that is down or gone: the link watch decides what it means.
fn link_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV)
    )
}

impl Port {
    /// The descriptors epoll watches for reception (AF_XDP: one per RX
    /// queue); reading the port serves them all.
    pub fn rx_fds(&self) -> Vec<RawFd> {
        match self {
            Port::Packet { rx, .. } => vec![rx.fd()],
            Port::Xdp(x) => x.fds(),
        }
    }

    /// AF_XDP: the attach mode and each RX queue's mode and counters.
    pub fn xdp_queues(&self) -> Option<XdpQueues> {
        match self {
            Port::Packet { .. } => None,
            Port::Xdp(x) => Some(XdpQueues {
                attach: x.mode().name(),
                tx_queue: crate::xdp::TX_QUEUE,
                queues: x.queue_info(),
            }),
        }
    }

    /// The descriptor to watch for EPOLLOUT while the kernel pushes back
    /// (`None`: retried on the timer only).
    pub fn out_fd(&self) -> Option<RawFd> {
        match self {
            Port::Packet { tx: Some(t), .. } => Some(t.fd()),
            Port::Packet { rx, tx: None } => Some(rx.fd()),
            Port::Xdp(_) => None,
        }
    }

    /// Receives up to about `max` frames into `f`; the number taken.
    pub fn recv(&mut self, max: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> io::Result<usize> {
        match self {
            Port::Packet { rx, .. } => match rx.recv(max, f) {
                Err(e) if link_error(&e) => Ok(0),
                r => r,
            },
            Port::Xdp(x) => Ok(x.recv(max, f)),
        }
    }

    /// Receives one batch (up to [`RX_BATCH_FRAMES`]) as owned buffers
    /// from `pool`: each whole frame copied with its VLAN tag put back and
    /// a checksum left to offload completed (`ring::copy_frame`), then
    /// handed to `f` with the pool (to give a buffer back). A frame
    /// received only in part is counted, not handed on.
    pub fn recv_copies(
        &mut self,
        pool: &mut Pool,
        f: &mut dyn FnMut(&mut Pool, Vec<u8>),
    ) -> io::Result<RxBatch> {
        let (mut truncated, mut completed) = (0u64, 0u64);
        let taken = self.recv(RX_BATCH_FRAMES, &mut |fr| {
            if fr.truncated {
                truncated += 1;
                return;
            }
            let mut v = pool.take_copy(&[]);
            if crate::ring::copy_frame(&mut v, fr.data, fr.vlan, fr.csum) {
                completed += 1;
            }
            f(pool, v);
        })?;
        Ok(RxBatch {
            taken,
            truncated,
            completed,
        })
    }

    /// Sends frames in order; `Ok(n)`: the first `n` left (fewer than all:
    /// the kernel pushed back); `Err((n, e))`: frame `n` is unsendable.
    pub fn send(&mut self, frames: &[Vec<u8>]) -> Result<usize, (usize, io::Error)> {
        let r = match self {
            Port::Packet { tx: Some(t), .. } => t.send(frames),
            Port::Packet { rx, tx: None } => rx.send(frames),
            Port::Xdp(x) => x.send(frames),
        };
        match r {
            Err((n, e)) if link_error(&e) => Ok(n),
            r => r,
        }
    }

    /// Kicks what an earlier send left in an AF_XDP TX ring and reclaims
    /// completions (nothing to do for packet sockets).
    pub fn service(&mut self) -> io::Result<()> {
        match self {
            Port::Packet { .. } => Ok(()),
            Port::Xdp(x) => match x.service() {
                Err(e) if link_error(&e) => Ok(()),
                r => r,
            },
        }
    }

    /// Kernel receive drops since the last call.
    pub fn take_drops(&mut self) -> u64 {
        match self {
            Port::Packet { rx, .. } => rx.take_drops(),
            Port::Xdp(x) => x.take_drops(),
        }
    }

    /// AF_XDP: re-attaches the XDP program if someone detached it
    /// (`Ok(true)`); packet sockets have nothing to check.
    pub fn ensure_attached(&mut self) -> io::Result<bool> {
        match self {
            Port::Packet { .. } => Ok(false),
            Port::Xdp(x) => x.ensure_attached(),
        }
    }

    /// AF_XDP: the RX queue count, once it changed since the last call
    /// (`Some((served, now))`, see [`XdpSocket::queue_change`]).
    pub fn queue_change(&mut self) -> Option<(u32, u32)> {
        match self {
            Port::Packet { .. } => None,
            Port::Xdp(x) => x.queue_change(),
        }
    }

    /// Whether this port runs on AF_XDP (its program may need attaching again).
    pub fn is_xdp(&self) -> bool {
        matches!(self, Port::Xdp(_))
    }

    /// Frames handed to the kernel but not yet taken by it (AF_XDP TX ring).
    pub fn tx_waiting(&mut self) -> bool {
        match self {
            Port::Packet { .. } => false,
            Port::Xdp(x) => x.tx_waiting(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Port::Xdp(x) => format!(
                "af_xdp-{}-{}",
                match (x.zerocopy(), x.any_zerocopy()) {
                    (true, _) => "zerocopy",
                    (false, true) => "mixed",
                    (false, false) => "copy",
                },
                x.mode().name()
            ),
            Port::Packet { .. } => "af_packet".into(),
        }
    }
}

/// Two opened ports and how they came to be.
pub struct Opened {
    pub ports: [Port; 2],
    pub mtu: [usize; 2],
    /// The I/O method in use, for logs and `show info`.
    pub method: String,
    /// Why the requested method was not used, if it was not.
    pub fallback: Option<String>,
    pub offloads: Vec<OffloadResult>,
}

fn open_sock(name: &str, o: &IoOptions) -> io::Result<PacketSocket> {
    if o.method == Method::Mmsg {
        return PacketSocket::open(name, None);
    }
    let ring = RingConfig {
        block_bytes: o.ring_block_bytes,
        blocks: o.ring_blocks,
    };
    PacketSocket::open(name, Some(ring)).or_else(|_| PacketSocket::open(name, None))
}

/// Why AF_XDP could not be had: a reason to fall back (the kernel or
/// driver cannot), or a refusal (another XDP program holds an interface).
enum XdpRefused {
    Fallback(String),
    Busy(String),
}

/// AF_XDP on both interfaces, or the reason it cannot be had. `ctl`:
/// packet sockets for the ethtool ioctls (an AF_XDP socket does not take
/// them).
fn open_xdp(
    names: [&str; 2],
    ctl: [RawFd; 2],
    mtu: [usize; 2],
    generic: bool,
    rx_frames: Option<u32>,
) -> Result<[Port; 2], XdpRefused> {
    let one = |k: usize| {
        XdpSocket::open(names[k], mtu[k], ctl[k], generic, rx_frames)
            .map(|x| Port::Xdp(Box::new(x)))
            .map_err(|e| {
                let why = format!("{}: {e}", names[k]);
                if e.kind() == io::ErrorKind::ResourceBusy {
                    XdpRefused::Busy(why)
                } else {
                    XdpRefused::Fallback(why)
                }
            })
    };
    Ok([one(0)?, one(1)?])
}

/// Opens the bridge's two ports per `o` (the interfaces must exist).
pub fn open_pair(names: [&str; 2], o: &IoOptions) -> io::Result<Opened> {
    // Offloads go off first: native XDP on veth refuses GSO/LRO peers, and
    // every path wants wire-sized frames. The AF_PACKET transmit sockets
    // also serve the ioctls; AF_XDP closes them once it runs.
    let tx = [
        PacketSocket::open_tx(names[0])?,
        PacketSocket::open_tx(names[1])?,
    ];
    let mut offloads = Vec::new();
    if o.disable_offloads {
        for (t, n) in tx.iter().zip(names) {
            offloads.extend(offload::disable(t.fd(), n));
        }
    }
    let mtu = [0, 1].map(|k| sockopt::mtu(tx[k].fd(), names[k]).unwrap_or(1500) as usize);
    let mut fallback = None;
    let xdp = match o.method {
        Method::Xdp | Method::XdpGeneric => {
            let ctl = [tx[0].fd(), tx[1].fd()];
            let generic = o.method == Method::XdpGeneric;
            match open_xdp(names, ctl, mtu, generic, o.xdp_rx_frames) {
                Ok(p) => Some(p),
                Err(XdpRefused::Busy(why)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        format!(
                        "{why}; refusing to run beside it (no fallback: two bridges on one link)"
                    ),
                    ))
                }
                Err(XdpRefused::Fallback(why)) => {
                    fallback = Some(format!("AF_XDP unavailable ({why})"));
                    None
                }
            }
        }
        _ => None,
    };
    if let Some(ports) = xdp {
        let (a, b) = (ports[0].describe(), ports[1].describe());
        let method = if a == b { a } else { format!("{a}/{b}") };
        return Ok(Opened {
            ports,
            mtu,
            method,
            fallback,
            offloads,
        });
    }
    // open_sock runs the V2 ring where AF_XDP was asked for.
    let s0 = open_sock(names[0], o)?;
    let s1 = open_sock(names[1], o)?;
    let method = match (s0.has_ring(), s1.has_ring()) {
        (true, true) => "af_packet-tpacket_v2+sendmmsg",
        (false, false) => "af_packet-recvmmsg+sendmmsg",
        _ => "af_packet-mixed",
    };
    if o.method != Method::Mmsg && !(s0.has_ring() && s1.has_ring()) {
        let why = "the kernel refused the TPACKET ring";
        fallback = Some(match fallback {
            Some(f) => format!("{f}; {why}"),
            None => why.to_string(),
        });
    }
    let [t0, t1] = tx;
    Ok(Opened {
        ports: [
            Port::Packet {
                rx: s0,
                tx: Some(t0),
            },
            Port::Packet {
                rx: s1,
                tx: Some(t1),
            },
        ],
        mtu,
        method: method.to_string(),
        fallback,
        offloads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::program;
    use std::io::Write;
    use std::process::Command;

    /// Runs `f` on a thread of its own in a new, empty network namespace
    /// (a thread's namespace is its own; processes it starts inherit it),
    /// so nothing touches the host's interfaces. Needs root: skipped
    /// otherwise, a failure under SLUICE_REQUIRE_NETNS=1.
    fn in_fresh_netns(f: impl FnOnce() + Send + 'static) {
        let ok = std::thread::spawn(move || {
            // SAFETY: plain syscall; it changes this thread's namespace only.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return false;
            }
            f();
            true
        })
        .join()
        .expect("the test thread panicked");
        if !ok {
            let required = std::env::var("SLUICE_REQUIRE_NETNS").is_ok_and(|v| v == "1");
            assert!(!required, "unshare(CLONE_NEWNET) refused: run as root");
            let _ = writeln!(std::io::stderr(), "SKIP: needs root (unshare CLONE_NEWNET)");
        }
    }

    fn ip(args: &[&str]) {
        let st = Command::new("ip").args(args).status().expect("ip");
        assert!(st.success(), "ip {args:?}");
    }

    #[test]
    fn an_interface_with_another_xdp_program_is_refused_not_fallen_back() {
        in_fresh_netns(|| {
            ip(&["link", "add", "a0", "type", "veth", "peer", "name", "b0"]);
            ip(&["link", "set", "a0", "up"]);
            ip(&["link", "set", "b0", "up"]);
            // Someone else's program on b0 (ours will do: any program).
            let map = program::create_xskmap(1).unwrap();
            let prog = program::load_program(&map).unwrap();
            let b0 = sockopt::ifindex("b0").unwrap() as u32;
            let (held, _) = program::attach_first(&prog, b0, &[program::XdpMode::Generic]).unwrap();
            let o = IoOptions {
                disable_offloads: false,
                ..IoOptions::default()
            };
            let e = match open_pair(["a0", "b0"], &o) {
                Ok(op) => panic!(
                    "opened as {} beside another program ({:?})",
                    op.method, op.fallback
                ),
                Err(e) => e,
            };
            assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
            assert!(
                e.to_string().starts_with("b0: "),
                "names the interface: {e}"
            );
            // Without it, AF_XDP opens on both.
            drop(held);
            let op = open_pair(["a0", "b0"], &o).unwrap();
            assert!(op.method.starts_with("af_xdp-"), "{}", op.method);
        });
    }

    #[test]
    fn a_batch_is_copied_whole_with_its_vlan_tag_put_back() {
        in_fresh_netns(|| {
            ip(&["link", "add", "a0", "type", "veth", "peer", "name", "b0"]);
            ip(&["link", "set", "a0", "up"]);
            ip(&["link", "set", "b0", "up"]);
            // Broadcast, VLAN 5 (veth strips the tag on receive: auxdata
            // or the ring slot carry it), a local-experimental ethertype.
            let mut frame = vec![0xff; 6];
            frame.extend([2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x05, 0x88, 0xb5]);
            frame.extend((0..60u8).map(|b| b ^ 0x5a));
            let tx = PacketSocket::open_tx("a0").unwrap();
            let ring = RingConfig {
                block_bytes: 1 << 16,
                blocks: 4,
            };
            for cfg in [None, Some(ring)] {
                let mut port = Port::Packet {
                    rx: PacketSocket::open("b0", cfg).unwrap(),
                    tx: None,
                };
                let mut pool = Pool::new(2048, 16);
                let mut got = Vec::new();
                // Bounded wait for the frame (others: IPv6 on link-up),
                // sent again each time: until link-up's deferred qdisc
                // activation, a0 drops what it is given.
                for _ in 0..200 {
                    assert_eq!(tx.send(std::slice::from_ref(&frame)).unwrap(), 1);
                    let b = port
                        .recv_copies(&mut pool, &mut |_, v| got.push(v))
                        .unwrap();
                    assert!(!b.full() && b.truncated == 0, "{b:?}");
                    if got.contains(&frame) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                assert!(got.contains(&frame), "ring {}: {got:02x?}", cfg.is_some());
            }
        });
    }

    /// A veth pair with `queues` RX and TX queues on each end, both up.
    fn veth_mq(a: &str, b: &str, queues: u32) {
        let q = queues.to_string();
        let n = ["numrxqueues", &q, "numtxqueues", &q];
        let mut args = vec!["link", "add", a];
        args.extend(n);
        args.extend(["type", "veth", "peer", "name", b]);
        args.extend(n);
        ip(&args);
        ip(&["link", "set", a, "up"]);
        ip(&["link", "set", b, "up"]);
    }

    #[test]
    fn every_rx_queue_gets_an_af_xdp_socket_in_epoll() {
        in_fresh_netns(|| {
            veth_mq("a0", "b0", 4);
            let o = IoOptions {
                disable_offloads: false,
                ..IoOptions::default()
            };
            let op = open_pair(["a0", "b0"], &o).unwrap();
            assert_eq!(op.fallback, None);
            assert_eq!(op.method, "af_xdp-copy-generic");
            for p in &op.ports {
                assert_eq!(p.rx_fds().len(), 4, "one socket per RX queue");
                let q = p.xdp_queues().expect("AF_XDP");
                assert_eq!(q.attach, "generic");
                assert_eq!(q.tx_queue, 0);
                let ids: Vec<u32> = q.queues.iter().map(|q| q.queue).collect();
                assert_eq!(ids, [0, 1, 2, 3]);
                for q in &q.queues {
                    assert!(!q.zerocopy);
                    let why = q.copy_why.as_deref().unwrap_or("");
                    assert!(why.contains("generic"), "{why}");
                }
            }
        });
    }

    #[test]
    fn a_queue_count_changed_while_running_is_reported_once() {
        in_fresh_netns(|| {
            veth_mq("a0", "b0", 4);
            let ethtool = |n: &str| {
                let st = Command::new("ethtool")
                    .args(["-L", "a0", "rx", n])
                    .status()
                    .expect("ethtool");
                assert!(st.success(), "ethtool -L a0 rx {n}");
            };
            ethtool("2");
            let o = IoOptions {
                disable_offloads: false,
                ..IoOptions::default()
            };
            let mut op = open_pair(["a0", "b0"], &o).unwrap();
            let p = &mut op.ports[0];
            assert_eq!(p.rx_fds().len(), 2);
            assert_eq!(p.queue_change(), None, "unchanged");
            ethtool("4");
            assert_eq!(p.queue_change(), Some((2, 4)));
            assert_eq!(p.queue_change(), None, "reported once");
            assert_eq!(op.ports[1].queue_change(), None, "b0 unchanged");
        });
    }

    #[test]
    fn zero_copy_refused_by_the_driver_falls_back_per_queue_with_the_reason() {
        in_fresh_netns(|| {
            veth_mq("a0", "b0", 2);
            // veth's native XDP wants GRO on the peer to build its frames.
            let _ = Command::new("ethtool")
                .args(["-K", "b0", "gro", "on"])
                .status();
            let ctl = PacketSocket::open_tx("a0").unwrap();
            let x = XdpSocket::open_native("a0", 1500, ctl.fd()).unwrap();
            assert_eq!(x.mode(), program::XdpMode::Native);
            let q = x.queue_info();
            assert_eq!(q.len(), 2);
            for q in &q {
                // veth offers no zero-copy: every queue says why.
                assert!(!q.zerocopy);
                let why = q.copy_why.as_deref().unwrap_or("");
                assert!(why.starts_with("zero-copy refused by the driver"), "{why}");
            }
        });
    }

    #[test]
    fn a_detached_program_is_attached_again_or_refused_if_taken() {
        in_fresh_netns(|| {
            ip(&["link", "add", "a0", "type", "veth", "peer", "name", "b0"]);
            ip(&["link", "set", "a0", "up"]);
            ip(&["link", "set", "b0", "up"]);
            let o = IoOptions {
                disable_offloads: false,
                ..IoOptions::default()
            };
            let mut op = open_pair(["a0", "b0"], &o).unwrap();
            let Port::Xdp(x) = &mut op.ports[0] else {
                panic!("AF_XDP expected, runs {}", op.method);
            };
            assert!(!x.ensure_attached().unwrap(), "attached: nothing to do");
            x.detach_for_test().unwrap();
            assert!(x.ensure_attached().unwrap(), "detached: attached again");
            assert!(!x.ensure_attached().unwrap(), "and it holds");
            // Detached, and another program takes the interface first.
            x.detach_for_test().unwrap();
            let map = program::create_xskmap(1).unwrap();
            let prog = program::load_program(&map).unwrap();
            let a0 = sockopt::ifindex("a0").unwrap() as u32;
            let _intruder = program::attach_first(&prog, a0, &[program::XdpMode::Generic]).unwrap();
            let e = x.ensure_attached().unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
        });
    }
}
