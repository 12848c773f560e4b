//! The bridge loop: two ports driven through the engine, on the reactor.
//!
//! # Principles
//! - One lock of the engine per turn: feed what was received, run its
//!   timers, drain what may leave, read its next deadline.
//! - Nothing is dropped silently: a frame the kernel refuses for now waits
//!   in a bounded per-interface pending queue and the engine is not asked
//!   for more until it drains; a frame refused for good is `tx_errors`; a
//!   frame for an interface that is down is `down_drops` (the engine keeps
//!   shaping, so its queues do not stall with frames no one can send).

use crate::offload::OffloadResult;
use crate::pool::Pool;
use crate::port::{
    self, IoOptions, Port, XdpQueues, L2_MAX_OVERHEAD, RX_BATCH_FRAMES, STATS_PERIOD,
};
use crate::reactor::{Log, Policy, Reactor, Waker, Want};
use crate::sys;
use sluice_engine::Engine;
use sluice_time::Duration;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Frames taken from the engine per interface per turn.
const TX_DRAIN_FRAMES: usize = 256;
/// Frames held per interface while the kernel pushes back; beyond this the
/// engine keeps them (where its queues and AQM can act on them).
const PENDING_CAP: usize = 256;
/// Loop turns in a row that may skip epoll_wait while a socket keeps
/// filling whole batches.
const EPOLL_SKIP_MAX: u32 = 8;
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
    /// Times the interface went down (administratively or carrier loss).
    pub link_down: AtomicU64,
    /// Frames that were due on the interface while it was down, released.
    pub down_drops: AtomicU64,
    /// Times the XDP program was found detached (by someone else) and
    /// attached again.
    pub xdp_reattach: AtomicU64,
    /// Frames whose TCP/UDP checksum the sender left to TX offload
    /// (AF_PACKET's `TP_STATUS_CSUMNOTREADY`), completed before forwarding.
    pub csum_completed: AtomicU64,
    /// AF_XDP: the attach mode and every RX queue (mode, counters),
    /// refreshed once per `STATS_PERIOD`; `None` on packet sockets.
    pub xdp: Mutex<Option<XdpQueues>>,
}

/// Counters of both interfaces, index 0 = LAN, 1 = WAN.
#[derive(Debug, Default)]
pub struct IoStats {
    pub ifaces: [IfaceIoStats; 2],
    pub pool: PoolStats,
}

/// The frame buffer pool: its size and use (gauges, set once per turn).
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Capacity of one buffer.
    pub buffer_bytes: AtomicU64,
    /// Most free buffers kept.
    pub max_buffers: AtomicU64,
    /// Free buffers now.
    pub free_buffers: AtomicU64,
    /// Buffers allocated since start.
    pub allocated: AtomicU64,
}

/// Two interfaces bridged through the engine. Engine interface index `i`
/// is port `i`: 0 = LAN, 1 = WAN (the order given to `open`).
pub struct Bridge {
    ports: [Port; 2],
    mtu: [usize; 2],
    reactor: Reactor,
    stats: Arc<IoStats>,
    pool: Pool,
    pending: [VecDeque<Vec<u8>>; 2],
    method: String,
    /// Why the requested method was not used, if it was not.
    fallback: Option<String>,
    offloads: Vec<OffloadResult>,
    tick: Option<Tick>,
}

/// Called by the loop once per turn ([`Bridge::set_tick`]).
pub type Tick = Box<dyn FnMut() + Send>;

impl Bridge {
    /// Opens both interfaces (they must exist; one that is down is waited
    /// for by `run`).
    pub fn open(lan: &str, wan: &str, o: IoOptions) -> io::Result<Bridge> {
        let op = port::open_pair([lan, wan], &o)?;
        let policy = Policy {
            spin_ns: o.spin_ns,
            early_arm_min: EARLY_ARM_MIN,
            spin_while_blocked: false,
            epoll_skip_max: EPOLL_SKIP_MAX,
        };
        let rx_fds = [op.ports[0].rx_fds(), op.ports[1].rx_fds()];
        let reactor = Reactor::with_fds([lan, wan], [&rx_fds[0], &rx_fds[1]], policy)?;
        let buf = op.mtu[0].max(op.mtu[1]) + L2_MAX_OVERHEAD;
        let stats = IoStats::default();
        publish_queues(&op.ports, &stats);
        Ok(Bridge {
            ports: op.ports,
            mtu: op.mtu,
            reactor,
            stats: Arc::new(stats),
            pool: Pool::new(buf.max(1518), POOL_BUFFERS),
            pending: [VecDeque::new(), VecDeque::new()],
            method: op.method,
            fallback: op.fallback,
            offloads: op.offloads,
            tick: None,
        })
    }

    pub fn waker(&self) -> Waker {
        self.reactor.waker()
    }

    /// Where interface events (down, up, gone) are logged; stderr until set.
    pub fn set_log(&mut self, log: Log) {
        self.reactor.set_log(log);
    }

    /// A function the loop calls at the end of every turn, idle turns
    /// included (at least every `IDLE_WAIT_MS`): a liveness signal that
    /// stops when the loop is wedged (the daemon's systemd watchdog).
    pub fn set_tick(&mut self, tick: Tick) {
        self.tick = Some(tick);
    }

    /// The I/O method in use, for logs and `show info`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Why the requested method is not the one in use (see [`crate::Method`]).
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
    /// once woken, or `IDLE_WAIT_MS`) or an interface disappears (an
    /// error naming it). Frames still queued are released.
    pub fn run(&mut self, engine: Arc<Mutex<Engine>>, stop: Arc<AtomicBool>) -> io::Result<()> {
        let mut rx: Vec<(usize, Vec<u8>)> = Vec::with_capacity(2 * RX_BATCH_FRAMES + 64);
        let mut tx: [Vec<Vec<u8>>; 2] = [
            Vec::with_capacity(TX_DRAIN_FRAMES),
            Vec::with_capacity(TX_DRAIN_FRAMES),
        ];
        let mut readable = [true, true];
        let mut next_stats = sys::now() + STATS_PERIOD;
        while !stop.load(Ordering::Relaxed) {
            let ev = self.reactor.wait(&mut readable)?;
            for (i, st) in self.stats.ifaces.iter().enumerate() {
                if ev.went_down[i] {
                    st.link_down.fetch_add(1, Ordering::Relaxed);
                }
                if ev.came_up[i] {
                    readable[i] = true;
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
                // Receive buffers whose small frames were moved into
                // right-sized ones while they wait; bounded by the engine.
                while let Some(b) = eng.poll_spare() {
                    self.pool.put(b);
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
                publish_queues(&self.ports, &self.stats);
                let ps = &self.stats.pool;
                for (g, v) in [
                    (&ps.buffer_bytes, self.pool.buffer_capacity() as u64),
                    (&ps.max_buffers, self.pool.max_buffers() as u64),
                    (&ps.free_buffers, self.pool.free_len() as u64),
                    (&ps.allocated, self.pool.allocated()),
                ] {
                    g.store(v, Ordering::Relaxed);
                }
                self.keep_attached()?;
                next_stats = now + STATS_PERIOD;
            }
            // A port that is down takes nothing: waiting on it would be a
            // retry timer every TX_RETRY until it comes back.
            let mut blocked = false;
            for (i, p) in self.ports.iter_mut().enumerate() {
                if self.reactor.is_up(i) {
                    blocked |= !self.pending[i].is_empty() || p.tx_waiting();
                }
            }
            self.reactor.schedule(Want {
                now,
                deadline,
                blocked,
                readable: readable.iter().any(|&r| r),
            })?;
            if let Some(t) = self.tick.as_mut() {
                t();
            }
        }
        Ok(())
    }

    /// Once per `STATS_PERIOD`: an XDP program someone detached is attached
    /// again (logged once, counted in `xdp_reattach`); one that cannot be
    /// ends the loop with an error naming the interface, as a bridge that
    /// forwards nothing must not look alive. An RX queue count changed by
    /// `ethtool -L` is logged once per change: added queues have no
    /// socket until sluice restarts. (Netlink does not announce a
    /// BPF link detach, so this asks the link itself: one syscall.)
    fn keep_attached(&mut self) -> io::Result<()> {
        for (i, p) in self.ports.iter_mut().enumerate() {
            let name = self.reactor.name(i);
            match p.ensure_attached() {
                Ok(false) => {}
                Ok(true) => {
                    self.stats.ifaces[i]
                        .xdp_reattach
                        .fetch_add(1, Ordering::Relaxed);
                    self.reactor.log(&format!(
                        "the XDP program on {name} was detached (not by sluice); attached it again"
                    ));
                }
                Err(e) => {
                    // Deleted under us (its links detach with it): the
                    // same words as the link watch's.
                    let why = if crate::sockopt::ifindex(name).is_err() {
                        format!(
                            "interface {name} disappeared (deleted or moved to another namespace)"
                        )
                    } else {
                        format!("the XDP program on {name} was detached and cannot be attached again: {e}")
                    };
                    return Err(io::Error::new(e.kind(), why));
                }
            }
            match p.queue_change() {
                Some((served, now)) if now > served => self.reactor.log(&format!(
                    "{name} has {now} RX queues now, sluice serves {served} (counted at start): \
                     frames on the others reach the host stack, not the bridge; restart sluice \
                     to serve them"
                )),
                Some((served, now)) => self.reactor.log(&format!(
                    "{name} has {now} RX queues now (sluice opened {served}); all are served"
                )),
                None => {}
            }
        }
        Ok(())
    }

    /// Whether a port runs on AF_XDP: its program may have to be attached
    /// again while running (what `caps` must keep for it).
    pub fn uses_xdp(&self) -> bool {
        self.ports.iter().any(|p| p.is_xdp())
    }

    /// The capabilities the running loop uses ([`crate::caps`]): attaching
    /// an XDP program again (CAP_NET_ADMIN and CAP_BPF) and handing the
    /// interfaces back at exit (CAP_NET_ADMIN).
    pub fn caps_needed(&self) -> u64 {
        let mut v = vec![crate::caps::CAP_NET_ADMIN];
        if self.uses_xdp() {
            v.push(crate::caps::bpf_cap());
        }
        crate::caps::mask(&v)
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
            // Summed per batch: an atomic add per frame and counter is a
            // locked instruction each, for readers that look once a second.
            let (mut frames, mut bytes, mut oversize) = (0u64, 0u64, 0u64);
            let b = self.ports[i].recv_copies(&mut self.pool, &mut |_, v| {
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
                (&st.truncated, b.truncated),
                (&st.csum_completed, b.completed),
            ] {
                if n > 0 {
                    c.fetch_add(n, Ordering::Relaxed);
                }
            }
            *ready = b.full();
        }
        Ok(())
    }

    /// Sends what is pending on interface `i`, keeping what the kernel
    /// refuses for now, and (un)subscribes EPOLLOUT accordingly.
    fn flush(&mut self, i: usize) -> io::Result<()> {
        let st = &self.stats.ifaces[i];
        if !self.reactor.is_up(i) {
            let n = self.pending[i].len();
            if n > 0 {
                st.down_drops.fetch_add(n as u64, Ordering::Relaxed);
                self.pending[i].drain(..).for_each(|f| self.pool.put(f));
            }
            st.pending.store(0, Ordering::Relaxed);
            if let Some(fd) = self.ports[i].out_fd() {
                self.reactor.want_out(i, fd, false)?;
            }
            return Ok(());
        }
        // Descriptors left in an AF_XDP TX ring by an earlier kick.
        if self.pending[i].is_empty() {
            self.ports[i].service()?;
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
        if let Some(fd) = self.ports[i].out_fd() {
            self.reactor.want_out(i, fd, !self.pending[i].is_empty())?;
        }
        Ok(())
    }
}
/// Copies each AF_XDP port's queues (modes, counters) into `stats`.
fn publish_queues(ports: &[Port; 2], stats: &IoStats) {
    for (p, st) in ports.iter().zip(&stats.ifaces) {
        if let Some(q) = p.xdp_queues() {
            *st.xdp.lock().unwrap_or_else(|e| e.into_inner()) = Some(q);
        }
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
