//! The bridge loop.

use crate::delay::WakeEstimator;
use crate::offload::{self, OffloadResult};
use crate::pool::Pool;
use crate::sock::{PacketSocket, RingConfig, RingVersion, RxFrame};
use crate::sys;
use crate::xdp::XdpSocket;
use sluice_engine::Engine;
use sluice_time::{Duration, Instant};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Frames read per socket per loop turn: bounds how long the engine lock is
/// held and keeps both directions served fairly.
const RX_BATCH_FRAMES: usize = 256;
/// Frames taken from the engine per interface per turn.
const TX_DRAIN_FRAMES: usize = 256;
/// Frames held per interface while the kernel pushes back; beyond this the
/// engine keeps them (where its queues and AQM can act on them).
const PENDING_CAP: usize = 256;
/// Retry delay after ENOBUFS (no EPOLLOUT will come for a full peer queue).
const TX_RETRY: Duration = Duration::from_micros(20);
/// Loop turns in a row that may skip epoll_wait while a socket keeps
/// filling whole batches.
const EPOLL_SKIP_MAX: u32 = 8;
/// Longest epoll sleep, so a stop flag set without a wake-up is still seen.
const IDLE_WAIT_MS: i32 = 100;
/// How often the kernel ring-drop counters are collected.
const STATS_PERIOD: Duration = Duration::from_secs(1);
/// Deadlines farther than this are slept on with the timer armed early by
/// its measured wake-up latency (then the rest is spun). That is the
/// low-rate regime (one frame ≥ 1 ms, ≤ 12 Mbit/s). Up to 1 Mbit/s pf's
/// token bucket is one MTU, smaller than a full frame, so a frame leaves
/// only from a full bucket and every µs the wake-up comes late is lost
/// link time (measured: 1 Mbit/s HFSC delivered −0.75 % on the wire with
/// the timer armed at the deadline, −0.2 % armed early). Closer deadlines
/// are left to `spin_ns`: deeper buckets absorb lateness at higher rates,
/// and wider spinning would only take CPU from the traffic.
const EARLY_ARM_MIN: Duration = Duration::from_millis(1);
/// Buffers kept in the free list.
const POOL_BUFFERS: usize = 4096;
/// Ethernet header + one VLAN tag: a frame longer than MTU + this is a
/// super-packet that slipped past the offload settings.
const L2_MAX_OVERHEAD: usize = 18;

const TOK_SOCK0: u64 = 0;
const TOK_SOCK1: u64 = 1;
const TOK_TIMER: u64 = 2;
const TOK_WAKER: u64 = 3;
/// EPOLLOUT of the transmit sockets (registered only while frames wait).
const TOK_TX0: u64 = 4;

/// Which packet I/O to use (TX is sendmmsg except for AF_XDP).
/// docs/adr/0002-packet-io.md has the measurements behind the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Method {
    /// recvmmsg on the packet socket: every kernel has it, and a frame of
    /// any length arrives whole.
    Mmsg,
    /// TPACKET_V2 RX ring (one status word per frame slot, so no retire
    /// timer), falling back to recvmmsg where the kernel refuses the ring;
    /// [`Bridge::method`] says which one runs. More frames and more TCP
    /// throughput per core than recvmmsg, at the same latency.
    Ring,
    /// TPACKET_V3 RX ring (blocks handed over whole; a partly filled block
    /// waits for the retire timer), falling back to recvmmsg.
    RingV3,
    /// AF_XDP socket on queue 0 of each interface (RX and TX), fed by an
    /// XDP redirect program (native mode, else generic; generic first on
    /// veth); falls back to the TPACKET_V2 ring, then recvmmsg, where
    /// AF_XDP cannot be set up (the reason is in [`Bridge::fallback`]).
    /// The default: no loss where the ring drops, 20–30 % more TCP
    /// throughput, the same CPU per frame and latency.
    #[default]
    Xdp,
    /// As `Xdp`, but the program is attached in generic (skb) mode only,
    /// for drivers whose native XDP misbehaves.
    XdpGeneric,
}

/// Options of [`Bridge::open`].
#[derive(Clone, Debug)]
pub struct IoOptions {
    pub method: Method,
    /// Switch GRO/GSO/TSO/LRO/RX-VLAN offloads off on both interfaces.
    pub disable_offloads: bool,
    pub ring_block_bytes: u32,
    pub ring_blocks: u32,
    /// Block retire timeout: the latency bound of a lone packet on the ring.
    pub ring_retire_ms: u32,
    /// A deadline closer than this is busy-waited instead of slept on, as
    /// timer wake-up latency would overshoot it.
    pub spin_ns: u64,
}

impl Default for IoOptions {
    fn default() -> Self {
        IoOptions {
            method: Method::default(),
            disable_offloads: true,
            ring_block_bytes: 1 << 18,
            ring_blocks: 64,
            ring_retire_ms: 1,
            spin_ns: 50_000,
        }
    }
}

/// Counters of one interface, updated by the loop, readable from anywhere.
#[derive(Debug, Default)]
pub struct IfaceIoStats {
    pub rx_frames: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_frames: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Frames waiting for the kernel to accept them (gauge).
    pub pending: AtomicU64,
    /// Times the kernel pushed back (EAGAIN/ENOBUFS).
    pub tx_blocked: AtomicU64,
    /// Frames the kernel refused outright (counted, then released).
    pub tx_errors: AtomicU64,
    /// Frames the kernel dropped because the RX ring/socket was full.
    pub ring_drops: AtomicU64,
    /// Frames longer than MTU + L2 header (an offload still on upstream).
    pub oversize: AtomicU64,
    /// Frames longer than a ring slot, received only in part and therefore
    /// not forwarded (V2 ring with offloads left on upstream).
    pub truncated: AtomicU64,
}

/// Counters of both interfaces, index 0 = LAN, 1 = WAN.
#[derive(Debug, Default)]
pub struct IoStats {
    pub ifaces: [IfaceIoStats; 2],
}

/// Makes the loop re-read the engine's deadline (after a reload) or notice
/// a stop flag at once. Cheap to clone, usable from any thread.
#[derive(Clone, Debug)]
pub struct Waker(pub(crate) Arc<OwnedFd>);

impl Waker {
    pub fn wake(&self) {
        sys::bump_counter(self.0.as_raw_fd());
    }
}

/// One interface's sockets.
enum Port {
    /// A receiving packet socket (ring or recvmmsg) and a transmit-only
    /// one, kept out of epoll in the common case.
    Packet { rx: PacketSocket, tx: PacketSocket },
    /// One AF_XDP socket for both directions. It is never registered for
    /// EPOLLOUT: its TX side is retried on the `TX_RETRY` timer.
    Xdp(Box<XdpSocket>),
}

impl Port {
    fn rx_fd(&self) -> RawFd {
        match self {
            Port::Packet { rx, .. } => rx.fd(),
            Port::Xdp(x) => x.fd(),
        }
    }

    fn recv(&mut self, max: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> io::Result<usize> {
        match self {
            Port::Packet { rx, .. } => rx.recv(max, f),
            Port::Xdp(x) => Ok(x.recv(max, f)),
        }
    }

    fn send(&mut self, frames: &[Vec<u8>]) -> Result<usize, (usize, io::Error)> {
        match self {
            Port::Packet { tx, .. } => tx.send(frames),
            Port::Xdp(x) => x.send(frames),
        }
    }

    fn take_drops(&mut self) -> u64 {
        match self {
            Port::Packet { rx, .. } => rx.take_drops(),
            Port::Xdp(x) => x.take_drops(),
        }
    }

    /// Frames handed to the kernel but not yet taken by it (AF_XDP TX ring).
    fn tx_waiting(&mut self) -> bool {
        match self {
            Port::Packet { .. } => false,
            Port::Xdp(x) => x.tx_waiting(),
        }
    }
}

/// Two interfaces bridged through the engine. Engine interface index `i`
/// is socket `i`: 0 = LAN, 1 = WAN (the order given to `open`).
pub struct Bridge {
    ports: [Port; 2],
    mtu: [usize; 2],
    epoll: OwnedFd,
    timer: OwnedFd,
    waker: Waker,
    stats: Arc<IoStats>,
    pool: Pool,
    pending: [VecDeque<Vec<u8>>; 2],
    want_out: [bool; 2],
    method: String,
    /// Why the requested method was not used, if it was not.
    fallback: Option<String>,
    offloads: Vec<OffloadResult>,
    spin_ns: u64,
    /// How late timer wake-ups come; the timer is armed that much early.
    wake: WakeEstimator,
    /// The absolute time the timer is armed for, if it is.
    armed_at: Option<Instant>,
    /// The deadline the timer was armed early for.
    early_for: Option<Instant>,
}

fn open_sock(name: &str, o: &IoOptions) -> io::Result<PacketSocket> {
    let ring = |version| RingConfig {
        block_bytes: o.ring_block_bytes,
        blocks: o.ring_blocks,
        retire_ms: o.ring_retire_ms,
        version,
    };
    let version = match o.method {
        Method::Mmsg => return PacketSocket::open(name, None),
        Method::Ring => RingVersion::V2,
        Method::RingV3 => RingVersion::V3,
        Method::Xdp | Method::XdpGeneric => RingVersion::V2,
    };
    PacketSocket::open(name, Some(ring(version))).or_else(|_| PacketSocket::open(name, None))
}

/// AF_XDP on both interfaces, or the reason it cannot be had. `ctl`:
/// packet sockets for the ethtool ioctls (an AF_XDP socket does not take
/// them).
fn open_xdp(
    names: [&str; 2],
    ctl: [RawFd; 2],
    mtu: [usize; 2],
    generic: bool,
) -> Result<[Port; 2], String> {
    let one = |k: usize| {
        XdpSocket::open(names[k], mtu[k], ctl[k], generic)
            .map(|x| Port::Xdp(Box::new(x)))
            .map_err(|e| format!("{}: {e}", names[k]))
    };
    Ok([one(0)?, one(1)?])
}

fn xdp_name(ports: &[Port; 2]) -> String {
    let one = |p: &Port| match p {
        Port::Xdp(x) => format!(
            "af_xdp-{}-{}",
            if x.zerocopy() { "zerocopy" } else { "copy" },
            x.mode().name()
        ),
        Port::Packet { .. } => "af_packet".into(),
    };
    let (a, b) = (one(&ports[0]), one(&ports[1]));
    if a == b {
        a
    } else {
        format!("{a}/{b}")
    }
}

impl Bridge {
    /// Opens both interfaces (they must exist and be up).
    pub fn open(lan: &str, wan: &str, o: IoOptions) -> io::Result<Bridge> {
        // Offloads go off first: native XDP on veth refuses GSO/LRO peers,
        // and every path wants wire-sized frames.
        // The AF_PACKET transmit sockets also serve the ioctls; AF_XDP
        // closes them once it runs.
        let tx = [PacketSocket::open_tx(lan)?, PacketSocket::open_tx(wan)?];
        let mut offloads = Vec::new();
        if o.disable_offloads {
            offloads.extend(offload::disable(tx[0].fd(), lan));
            offloads.extend(offload::disable(tx[1].fd(), wan));
        }
        let mtu = [
            crate::sock::mtu(tx[0].fd(), lan).unwrap_or(1500) as usize,
            crate::sock::mtu(tx[1].fd(), wan).unwrap_or(1500) as usize,
        ];
        let mut fallback = None;
        let want_xdp = matches!(o.method, Method::Xdp | Method::XdpGeneric);
        let ctl = [tx[0].fd(), tx[1].fd()];
        let xdp = if want_xdp {
            match open_xdp([lan, wan], ctl, mtu, o.method == Method::XdpGeneric) {
                Ok(p) => Some(p),
                Err(why) => {
                    fallback = Some(format!("AF_XDP unavailable ({why})"));
                    None
                }
            }
        } else {
            None
        };
        let (ports, method) = match xdp {
            Some(p) => {
                let name = xdp_name(&p);
                (p, name)
            }
            None => {
                // open_sock runs the V2 ring where AF_XDP was asked for.
                let s0 = open_sock(lan, &o)?;
                let s1 = open_sock(wan, &o)?;
                let method = match (s0.has_ring(), s1.has_ring()) {
                    (true, true) if o.method == Method::RingV3 => "af_packet-tpacket_v3+sendmmsg",
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
                let ports = [
                    Port::Packet { rx: s0, tx: t0 },
                    Port::Packet { rx: s1, tx: t1 },
                ];
                (ports, method.to_string())
            }
        };
        let epoll = sys::epoll_create()?;
        let timer = sys::timerfd()?;
        let wfd = sys::eventfd()?;
        let inn = libc::EPOLLIN as u32;
        sys::epoll_ctl(
            &epoll,
            libc::EPOLL_CTL_ADD,
            ports[0].rx_fd(),
            inn,
            TOK_SOCK0,
        )?;
        sys::epoll_ctl(
            &epoll,
            libc::EPOLL_CTL_ADD,
            ports[1].rx_fd(),
            inn,
            TOK_SOCK1,
        )?;
        sys::epoll_ctl(
            &epoll,
            libc::EPOLL_CTL_ADD,
            timer.as_raw_fd(),
            inn,
            TOK_TIMER,
        )?;
        sys::epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, wfd.as_raw_fd(), inn, TOK_WAKER)?;
        let buf = mtu[0].max(mtu[1]) + L2_MAX_OVERHEAD;
        Ok(Bridge {
            ports,
            mtu,
            epoll,
            timer,
            waker: Waker(Arc::new(wfd)),
            stats: Arc::new(IoStats::default()),
            pool: Pool::new(buf.max(1518), POOL_BUFFERS),
            pending: [VecDeque::new(), VecDeque::new()],
            want_out: [false; 2],
            method,
            fallback,
            offloads,
            spin_ns: o.spin_ns,
            wake: WakeEstimator::default(),
            armed_at: None,
            early_for: None,
        })
    }

    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// The I/O method in use, for logs and `show info`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Why the requested method is not the one in use (see [`Method`]).
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    pub fn stats(&self) -> Arc<IoStats> {
        self.stats.clone()
    }

    /// What happened to each offload at open.
    pub fn offloads(&self) -> &[OffloadResult] {
        &self.offloads
    }

    /// Forwards until `stop` is set (then returns after at most one turn
    /// once woken, or `IDLE_WAIT_MS`). Frames still queued are released.
    pub fn run(&mut self, engine: Arc<Mutex<Engine>>, stop: Arc<AtomicBool>) -> io::Result<()> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let mut rx: Vec<(usize, Vec<u8>)> = Vec::with_capacity(2 * RX_BATCH_FRAMES + 64);
        let mut tx: [Vec<Vec<u8>>; 2] = [
            Vec::with_capacity(TX_DRAIN_FRAMES),
            Vec::with_capacity(TX_DRAIN_FRAMES),
        ];
        let mut readable = [true, true];
        let mut skipped = 0u32;
        let mut spin = false;
        let mut next_stats = sys::now() + STATS_PERIOD;
        // What the timerfd is armed at: re-arming an unchanged deadline is a
        // syscall per turn for nothing (at high rates the deadline is "now"
        // turn after turn, and spinning skips the timer altogether).
        let mut armed: Option<Option<Instant>> = None;
        while !stop.load(Ordering::Relaxed) {
            // A socket that filled its last batch is read again without
            // asking epoll (a syscall per batch for an answer we know), but
            // epoll is still consulted every EPOLL_SKIP_MAX turns so the
            // timer, the waker and the other socket are never starved.
            let n = if readable.iter().any(|r| *r) && skipped < EPOLL_SKIP_MAX {
                skipped += 1;
                0
            } else {
                skipped = 0;
                let wait_ms = if spin || readable.iter().any(|r| *r) {
                    0
                } else {
                    IDLE_WAIT_MS
                };
                sys::epoll_wait(&self.epoll, &mut events, wait_ms)?
            };
            for ev in events.iter().take(n) {
                let (tok, bits) = (ev.u64, ev.events);
                match tok {
                    TOK_SOCK0 | TOK_SOCK1 => {
                        let i = tok as usize;
                        if bits & libc::EPOLLIN as u32 != 0 {
                            readable[i] = true;
                        }
                    }
                    // Nothing to do: flush runs every turn.
                    t if t >= TOK_TX0 => {}
                    TOK_TIMER => {
                        if sys::drain_counter(self.timer.as_raw_fd()) > 0 {
                            if let Some(at) = self.armed_at.take() {
                                let late = sys::now().saturating_since(at);
                                self.wake.observe(late.as_nanos());
                            }
                            // A fired one-shot timer is disarmed.
                            armed = None;
                        }
                    }
                    _ => {
                        sys::drain_counter(self.waker.0.as_raw_fd());
                    }
                }
            }
            self.receive(&mut readable, &mut rx)?;

            // One lock per turn: feed, run timers, drain, read the deadline.
            let deadline = {
                let mut eng = engine.lock().unwrap_or_else(|p| p.into_inner());
                let now = sys::now();
                for (i, frame) in rx.drain(..) {
                    eng.handle_rx(now, i, frame);
                }
                eng.handle_timeout(now);
                for (i, out) in tx.iter_mut().enumerate() {
                    let room = PENDING_CAP
                        .saturating_sub(self.pending[i].len())
                        .min(TX_DRAIN_FRAMES);
                    for _ in 0..room {
                        match eng.poll_tx(now, i) {
                            Some(f) => out.push(f),
                            None => break,
                        }
                    }
                }
                // Bounded by the engine's own backlog cap.
                while let Some(d) = eng.poll_dropped() {
                    self.pool.put(d.frame);
                }
                eng.poll_timeout()
            };

            for (i, out) in tx.iter_mut().enumerate() {
                self.pending[i].extend(out.drain(..));
                self.flush(i)?;
            }
            let now = sys::now();
            if now >= next_stats {
                for (p, st) in self.ports.iter_mut().zip(&self.stats.ifaces) {
                    st.ring_drops.fetch_add(p.take_drops(), Ordering::Relaxed);
                }
                next_stats = now + STATS_PERIOD;
            }
            let blocked = self.pending.iter().any(|p| !p.is_empty())
                || self.ports.iter_mut().any(|p| p.tx_waiting());
            let at = match (deadline, blocked) {
                // The engine has frames due but the kernel is full: retry
                // shortly (or on EPOLLOUT) rather than spinning.
                (Some(d), true) => Some(d.max(now + TX_RETRY)),
                (None, true) => Some(now + TX_RETRY),
                (d, false) => d,
            };
            // A far deadline: arm early by the timer's measured latency,
            // and once that early wake-up came, spin the rest.
            let early = Duration::from_nanos(self.wake.early_ns());
            let window_ns = if at.is_some() && self.early_for == at {
                self.spin_ns + early.as_nanos()
            } else {
                self.spin_ns
            };
            spin = !blocked && at.is_some_and(|d| d.as_nanos() <= now.as_nanos() + window_ns);
            if !spin {
                let far = at.filter(|&d| d > now + EARLY_ARM_MIN);
                let arm = match far {
                    Some(d) => Some(d - early),
                    None => at,
                };
                if armed != Some(arm) {
                    sys::timer_set(&self.timer, arm)?;
                    armed = Some(arm);
                    self.armed_at = arm;
                }
                self.early_for = far;
            }
        }
        Ok(())
    }

    fn receive(
        &mut self,
        readable: &mut [bool; 2],
        rx: &mut Vec<(usize, Vec<u8>)>,
    ) -> io::Result<()> {
        for (i, ready) in readable.iter_mut().enumerate() {
            if !*ready {
                continue;
            }
            let st = &self.stats.ifaces[i];
            let limit = self.mtu[i] + L2_MAX_OVERHEAD;
            let pool = &mut self.pool;
            // Summed per batch: an atomic add per frame and counter is a
            // locked instruction each, for readers that look once a second.
            let (mut frames, mut bytes, mut oversize, mut truncated) = (0u64, 0u64, 0u64, 0u64);
            let got = self.ports[i].recv(RX_BATCH_FRAMES, &mut |f| {
                if f.truncated {
                    truncated += 1;
                    return;
                }
                let mut v = pool.take_copy(&[]);
                crate::ring::copy_with_vlan(&mut v, f.data, f.vlan);
                frames += 1;
                bytes += v.len() as u64;
                if v.len() > limit {
                    oversize += 1;
                }
                rx.push((i, v));
            })?;
            for (c, n) in [
                (&st.rx_frames, frames),
                (&st.rx_bytes, bytes),
                (&st.oversize, oversize),
                (&st.truncated, truncated),
            ] {
                if n > 0 {
                    c.fetch_add(n, Ordering::Relaxed);
                }
            }
            // Level-triggered epoll tells us again if more is waiting; a
            // partial batch means the socket is (momentarily) empty.
            *ready = got >= RX_BATCH_FRAMES;
        }
        Ok(())
    }

    /// Sends what is pending on interface `i`, keeping what the kernel
    /// refuses for now, and (un)subscribes EPOLLOUT accordingly.
    fn flush(&mut self, i: usize) -> io::Result<()> {
        let st = &self.stats.ifaces[i];
        if let Port::Xdp(x) = &mut self.ports[i] {
            // Descriptors left in the TX ring by an earlier kick.
            if self.pending[i].is_empty() {
                x.service()?;
            }
        }
        // Each pass sends a batch or stops; PENDING_CAP bounds the passes.
        while !self.pending[i].is_empty() {
            let batch = self.pending[i].make_contiguous();
            match self.ports[i].send(batch) {
                Ok(0) => {
                    st.tx_blocked.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(n) => sent(&mut self.pending[i], n, &mut self.pool, st),
                Err((n, _e)) => {
                    // Frames before `n` went out; the next one is
                    // unsendable (e.g. EMSGSIZE): count it.
                    sent(&mut self.pending[i], n, &mut self.pool, st);
                    if let Some(f) = self.pending[i].pop_front() {
                        st.tx_errors.fetch_add(1, Ordering::Relaxed);
                        self.pool.put(f);
                    }
                }
            }
        }
        st.pending
            .store(self.pending[i].len() as u64, Ordering::Relaxed);
        let Port::Packet { tx, .. } = &self.ports[i] else {
            return Ok(());
        };
        let tx_fd = tx.fd();
        let want = !self.pending[i].is_empty();
        if want != self.want_out[i] {
            let op = if want {
                libc::EPOLL_CTL_ADD
            } else {
                libc::EPOLL_CTL_DEL
            };
            sys::epoll_ctl(
                &self.epoll,
                op,
                tx_fd,
                libc::EPOLLOUT as u32,
                TOK_TX0 + i as u64,
            )?;
            self.want_out[i] = want;
        }
        Ok(())
    }
}

/// The first `n` frames of `pending` left: counted, and their buffers
/// recycled.
fn sent(pending: &mut VecDeque<Vec<u8>>, n: usize, pool: &mut Pool, st: &IfaceIoStats) {
    let mut bytes = 0u64;
    for f in pending.drain(..n) {
        bytes += f.len() as u64;
        pool.put(f);
    }
    st.tx_frames.fetch_add(n as u64, Ordering::Relaxed);
    st.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
}
