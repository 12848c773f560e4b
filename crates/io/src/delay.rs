//! A plain delay line between two interfaces: the lab's base RTT.
//!
//! # Principles
//! - Independent of the code under test: no engine, classifier or
//!   scheduler, only this crate's packet sockets and reactor. Every
//!   frame read on A is sent on B after `a_to_b`, every frame read on B is
//!   sent on A after `b_to_a` (ARP, ND, anything), unchanged.
//! - One FIFO per direction. The delay is constant per direction, so due
//!   times are non-decreasing along each FIFO and only its head needs a
//!   timer: the timerfd is armed at the earliest head (absolute
//!   CLOCK_MONOTONIC). A timer wake-up comes late by tens to hundreds of
//!   µs (more in a VM), so the timer is armed early by a running estimate
//!   of that lateness (`reactor::WakeEstimator`) and a head closer than `spin_ns`
//!   is busy-waited: the spin covers the jitter, not the whole latency.
//!   Order is preserved.
//! - Bounded: at most `cap_frames` frames are held per direction; beyond it
//!   a frame is dropped and counted (`drops_full`), never buffered without
//!   limit. A frame the kernel refuses for now (EAGAIN/ENOBUFS) stays at the
//!   head and is retried on EPOLLOUT or after `TX_RETRY`; one it refuses for
//!   good is counted in `tx_errors`.
//! - Accuracy is measured, not assumed: every sent frame's lateness (send
//!   time − due time) goes into a fixed-bucket histogram and a maximum.
//!   The arrival time is when the loop read the frame (one clock read per
//!   receive batch), so the kernel's wake-up latency on receive is not in
//!   the lateness figure; the end-to-end test measures it with ping.
//! - The loop itself is the crate's reactor (`reactor.rs`, with this
//!   line's policy: arm every due time early, spin within `spin_ns`) over
//!   two recvmmsg ports; while an interface is down, frames due on it are
//!   released and counted (`down_drops`), and a deleted one ends `run`.
//! - Random loss, when asked for (`loss_ppm`, per direction): each frame
//!   read is lost with that probability, drawn from a SplitMix64 stream
//!   seeded by `loss_seed`, so a seed replays the same pattern of draws
//!   (which frames they hit depends on arrival order). Counted in
//!   `drops_loss`. Independent (Bernoulli) loss, as netem's `loss random`.
//! - recvmmsg, not the TPACKET_V3 ring: a ring block waits up to its retire
//!   timeout (≥ 1 ms) before user space sees a lone frame, which would be
//!   added to the delay.

use crate::offload::{self, OffloadResult};
use crate::pool::Pool;
use crate::port::{Port, L2_MAX_OVERHEAD, STATS_PERIOD};
use crate::reactor::{Log, Policy, Reactor, Waker, Want, TX_RETRY};
use crate::sock::{PacketSocket, MMSG_BATCH};
use crate::sockopt;
use crate::sys::{self, set_timer_slack_ns};
use sluice_time::random::{SplitMix64, PPM};
use sluice_time::{Duration, Instant};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Frames sent per direction per loop turn (a few `sendmmsg` calls); the
/// rest are sent on the next turn, which follows at once (spin).
const TX_TURN_FRAMES: usize = 1024;
/// Free buffers kept for reuse.
const POOL_BUFFERS: usize = 8192;
/// Upper bounds (ns) of the lateness histogram buckets; the last bucket is
/// everything above the last bound.
pub const LATE_BOUNDS_NS: [u64; 7] = [
    10_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 10_000_000,
];
const LATE_BUCKETS: usize = LATE_BOUNDS_NS.len() + 1;

pub use crate::sys::set_thread_fifo;

/// Called with each frame read (after the loss draw) and the direction it
/// goes (0 = A→B, 1 = B→A), before it is held: the lab's hostile-peer
/// tools rewrite a few header fields there.
pub type FrameHook = Box<dyn FnMut(usize, &mut Vec<u8>) + Send>;

/// Options of [`DelayLine::open`].
#[derive(Clone, Debug)]
pub struct DelayOptions {
    /// Hold time of frames read on A before they leave on B.
    pub a_to_b: Duration,
    /// Hold time of frames read on B before they leave on A.
    pub b_to_a: Duration,
    /// Frames held per direction at most. The default (65536) is 15× what
    /// 100 Mbit/s × 500 ms of full-sized frames needs (~4200).
    pub cap_frames: usize,
    /// Switch GRO/GSO/TSO/LRO/RX-VLAN offloads off on both interfaces.
    pub disable_offloads: bool,
    /// A due time closer than this is busy-waited rather than slept on.
    pub spin_ns: u64,
    /// Random loss per direction (0 = A→B, 1 = B→A), parts per million.
    pub loss_ppm: [u32; 2],
    /// Seed of the loss draws.
    pub loss_seed: u64,
}

impl Default for DelayOptions {
    fn default() -> Self {
        DelayOptions {
            a_to_b: Duration::ZERO,
            b_to_a: Duration::ZERO,
            cap_frames: 65536,
            disable_offloads: true,
            // With the timer armed early, a wider spin buys little: at
            // 50 Mbit/s UDP, 10 µs gave 98.8 % of frames within 100 µs at
            // 16 % of a core, 50 µs 99.5 % at 28 %.
            spin_ns: 10_000,
            loss_ppm: [0; 2],
            loss_seed: 0,
        }
    }
}

/// Counters of one direction; index 0 = A→B, 1 = B→A.
#[derive(Debug, Default)]
pub struct DelayDirStats {
    /// Frames read on the ingress interface.
    pub rx_frames: AtomicU64,
    /// Frames sent on the egress interface.
    pub tx_frames: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Frames dropped because `cap_frames` were already held.
    pub drops_full: AtomicU64,
    /// Frames lost on purpose (`loss_ppm`).
    pub drops_loss: AtomicU64,
    /// Frames the kernel refused outright (too large, …).
    pub tx_errors: AtomicU64,
    /// Times the kernel pushed back (EAGAIN/ENOBUFS); frames were kept.
    pub tx_blocked: AtomicU64,
    /// Frames the kernel dropped before we could read them (socket full).
    pub rx_kernel_drops: AtomicU64,
    /// Frames currently held (gauge).
    pub held: AtomicU64,
    /// Times the egress interface went down (link or carrier).
    pub link_down: AtomicU64,
    /// Frames due while the egress interface was down, released.
    pub down_drops: AtomicU64,
    /// How early the timer is armed (gauge, ns; the same in both
    /// directions: the latency estimate of `reactor::WakeEstimator`).
    pub timer_early_ns: AtomicU64,
    /// Largest lateness seen, ns.
    pub late_max_ns: AtomicU64,
    /// Lateness histogram, buckets bounded by [`LATE_BOUNDS_NS`].
    pub late_hist: [AtomicU64; LATE_BUCKETS],
}

impl DelayDirStats {
    fn record_late(&self, late_ns: u64) {
        let b = LATE_BOUNDS_NS
            .iter()
            .position(|&ub| late_ns <= ub)
            .unwrap_or(LATE_BOUNDS_NS.len());
        if let Some(c) = self.late_hist.get(b) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.late_max_ns.fetch_max(late_ns, Ordering::Relaxed);
    }

    /// Frames sent no later than `bound_ns` after their due time (bound
    /// rounded up to a histogram bucket bound).
    pub fn sent_within(&self, bound_ns: u64) -> u64 {
        LATE_BOUNDS_NS
            .iter()
            .zip(&self.late_hist)
            .take_while(|(&ub, _)| ub <= bound_ns)
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .sum()
    }

    /// One line for logs: `A→B 1234 frames …`.
    pub fn summary(&self) -> String {
        let l = |o: &AtomicU64| o.load(Ordering::Relaxed);
        let hist: Vec<String> = LATE_BOUNDS_NS
            .iter()
            .map(|ub| format!("≤{}µs", ub / 1000))
            .chain(std::iter::once(">10000µs".to_string()))
            .zip(&self.late_hist)
            .map(|(label, c)| format!("{label}:{}", l(c)))
            .collect();
        format!(
            "rx {} tx {} frames {} bytes, dropped {} (random loss) {} (full) {} (kernel rx) {} (tx error) \
             {} (link down, {} times), tx blocked {}, held {}, timer armed {} µs early, \
             late max {} µs, lateness {}",
            l(&self.rx_frames),
            l(&self.tx_frames),
            l(&self.tx_bytes),
            l(&self.drops_loss),
            l(&self.drops_full),
            l(&self.rx_kernel_drops),
            l(&self.tx_errors),
            l(&self.down_drops),
            l(&self.link_down),
            l(&self.tx_blocked),
            l(&self.held),
            l(&self.timer_early_ns) / 1000,
            l(&self.late_max_ns) / 1000,
            hist.join(" ")
        )
    }
}

/// Counters of both directions, readable from any thread.
#[derive(Debug, Default)]
pub struct DelayStats {
    /// 0 = A→B, 1 = B→A.
    pub dirs: [DelayDirStats; 2],
}

/// Random loss: true with probability `ppm / 10⁶` per draw, from the
/// seeded stream of [`sluice_time::random`] (a recorded seed replays it).
#[derive(Clone, Debug)]
pub struct Loss {
    rng: SplitMix64,
    ppm: u32,
}

impl Loss {
    pub fn new(ppm: u32, seed: u64) -> Loss {
        Loss {
            rng: SplitMix64::new(seed),
            ppm: ppm.min(PPM),
        }
    }

    /// Whether the next frame is lost (no draw at all without loss).
    pub fn lose(&mut self) -> bool {
        self.rng.chance(self.ppm)
    }
}

/// One direction's FIFO of frames with their due times. Pure (time is an
/// argument), so its ordering and bound are tested without sockets.
#[derive(Debug)]
pub struct DelayQueue {
    delay: Duration,
    cap_frames: usize,
    due: VecDeque<Instant>,
    frames: VecDeque<Vec<u8>>,
}

impl DelayQueue {
    pub fn new(delay: Duration, cap_frames: usize) -> DelayQueue {
        DelayQueue {
            delay,
            cap_frames,
            due: VecDeque::new(),
            frames: VecDeque::new(),
        }
    }

    /// Holds `frame`, read at `now`; gives it back if `cap_frames` are
    /// already held (the caller counts the drop and recycles it).
    pub fn push(&mut self, now: Instant, frame: Vec<u8>) -> Result<(), Vec<u8>> {
        if self.frames.len() >= self.cap_frames {
            return Err(frame);
        }
        // Constant delay and a monotonic clock keep `due` sorted; the max
        // guards the invariant against a caller passing an older `now`.
        let at = now + self.delay;
        let at = self.due.back().map_or(at, |&last| at.max(last));
        self.due.push_back(at);
        self.frames.push_back(frame);
        Ok(())
    }

    /// When the head is due, if anything is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().copied()
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The longest run of frames due at `now`, contiguous in memory, at
    /// most `max` long (for one `sendmmsg`), with the head's due time.
    pub fn due_batch(&self, now: Instant, max: usize) -> (&[Vec<u8>], Option<Instant>) {
        let (front, _) = self.frames.as_slices();
        let (due_front, due_back) = self.due.as_slices();
        let n = due_front
            .iter()
            .chain(due_back)
            .take(front.len().min(max))
            .take_while(|&&d| d <= now)
            .count();
        (&front[..n], self.next_due())
    }

    /// Removes up to `n` frames from the head, in order, each with its due
    /// time.
    pub fn pop(&mut self, n: usize) -> impl Iterator<Item = (Instant, Vec<u8>)> + '_ {
        let n = n.min(self.frames.len());
        self.due.drain(..n).zip(self.frames.drain(..n))
    }
}

/// Two interfaces joined by a fixed delay in each direction.
pub struct DelayLine {
    /// One recvmmsg/sendmmsg socket per interface.
    ports: [Port; 2],
    reactor: Reactor,
    stats: Arc<DelayStats>,
    pool: Pool,
    /// `queues[d]`: frames read on port `d`, leaving on port `1 - d`.
    queues: [DelayQueue; 2],
    /// The kernel pushed back on port `i`'s egress: no send before this
    /// time unless EPOLLOUT comes first (`Instant::ZERO`: not blocked).
    blocked_until: [Instant; 2],
    offloads: Vec<OffloadResult>,
    /// `loss[d]`: random loss of the frames read on port `d`.
    loss: [Loss; 2],
    hook: Option<FrameHook>,
}

impl DelayLine {
    /// Opens both interfaces (they must exist; one that is down is waited
    /// for by `run`).
    pub fn open(a: &str, b: &str, o: DelayOptions) -> io::Result<DelayLine> {
        let sa = PacketSocket::open(a, None)?;
        let sb = PacketSocket::open(b, None)?;
        let mut offloads = Vec::new();
        if o.disable_offloads {
            offloads.extend(offload::disable(sa.fd(), a));
            offloads.extend(offload::disable(sb.fd(), b));
        }
        let mtu = [
            sockopt::mtu(sa.fd(), a).unwrap_or(1500) as usize,
            sockopt::mtu(sb.fd(), b).unwrap_or(1500) as usize,
        ];
        let policy = Policy {
            spin_ns: o.spin_ns,
            early_arm_min: Duration::ZERO,
            spin_while_blocked: true,
            epoll_skip_max: 0,
        };
        let reactor = Reactor::new([a, b], [sa.fd(), sb.fd()], policy)?;
        let buf = (mtu[0].max(mtu[1]) + L2_MAX_OVERHEAD).max(1518);
        let cap = o.cap_frames.max(1);
        Ok(DelayLine {
            ports: [
                Port::Packet { rx: sa, tx: None },
                Port::Packet { rx: sb, tx: None },
            ],
            reactor,
            stats: Arc::new(DelayStats::default()),
            pool: Pool::new(buf, POOL_BUFFERS),
            queues: [
                DelayQueue::new(o.a_to_b, cap),
                DelayQueue::new(o.b_to_a, cap),
            ],
            blocked_until: [Instant::ZERO; 2],
            offloads,
            // One seed, two independent streams (B→A's seed differs).
            loss: [
                Loss::new(o.loss_ppm[0], o.loss_seed),
                Loss::new(o.loss_ppm[1], o.loss_seed ^ 0x5DEE_CE66_D1CE_5EED),
            ],
            hook: None,
        })
    }

    pub fn waker(&self) -> Waker {
        self.reactor.waker()
    }

    /// A hook every frame passes through before it is held ([`FrameHook`]).
    pub fn set_hook(&mut self, hook: FrameHook) {
        self.hook = Some(hook);
    }

    /// Where interface events (down, up, gone) are logged; stderr until set.
    pub fn set_log(&mut self, log: Log) {
        self.reactor.set_log(log);
    }

    pub fn stats(&self) -> Arc<DelayStats> {
        self.stats.clone()
    }

    /// What happened to each offload at open.
    pub fn offloads(&self) -> &[OffloadResult] {
        &self.offloads
    }

    /// Forwards until `stop` is set (noticed at once when woken, else
    /// within `IDLE_WAIT_MS`) or an interface disappears (an error naming
    /// it). Frames still held are released.
    pub fn run(&mut self, stop: Arc<AtomicBool>) -> io::Result<()> {
        // Best effort: without it the timer may fire up to 50 µs late.
        let _ = set_timer_slack_ns(1);
        let mut readable = [true, true];
        let mut next_stats = sys::now() + STATS_PERIOD;
        while !stop.load(Ordering::Relaxed) {
            let ev = self.reactor.wait(&mut readable)?;
            for (i, ready) in readable.iter_mut().enumerate() {
                if ev.writable[i] {
                    self.blocked_until[i] = Instant::ZERO;
                }
                // Counted on the direction that leaves through port `i`.
                if ev.went_down[i] {
                    self.stats.dirs[1 - i]
                        .link_down
                        .fetch_add(1, Ordering::Relaxed);
                }
                if ev.came_up[i] {
                    *ready = true;
                }
            }
            self.receive(&mut readable)?;
            let now = sys::now();
            for d in 0..2 {
                self.flush(d, now)?;
            }
            if now >= next_stats {
                for (p, st) in self.ports.iter_mut().zip(&self.stats.dirs) {
                    st.rx_kernel_drops
                        .fetch_add(p.take_drops(), Ordering::Relaxed);
                }
                next_stats = now + STATS_PERIOD;
            }
            // Blocked egresses are folded into the deadline (per direction).
            self.reactor.schedule(Want {
                now,
                deadline: self.next_wakeup(),
                blocked: false,
                readable: readable.iter().any(|&r| r),
            })?;
            let early = self.reactor.early_ns();
            for st in &self.stats.dirs {
                st.timer_early_ns.store(early, Ordering::Relaxed);
            }
        }
        // Frames still held are released; `held` keeps their number.
        for (q, st) in self.queues.iter_mut().zip(&self.stats.dirs) {
            st.held.store(q.len() as u64, Ordering::Relaxed);
            q.pop(usize::MAX).for_each(drop);
        }
        Ok(())
    }

    /// The earliest head due time, or a retry time for a blocked egress.
    fn next_wakeup(&self) -> Option<Instant> {
        (0..2)
            .filter_map(|d| {
                let due = self.queues[d].next_due()?;
                Some(due.max(self.blocked_until[1 - d]))
            })
            .min()
    }

    fn receive(&mut self, readable: &mut [bool; 2]) -> io::Result<()> {
        for (i, ready) in readable.iter_mut().enumerate() {
            if !*ready {
                continue;
            }
            let st = &self.stats.dirs[i];
            let queue = &mut self.queues[i];
            let loss = &mut self.loss[i];
            let hook = &mut self.hook;
            let now = sys::now();
            // A down interface reads as empty (port.rs); the reactor
            // decides whether it is down or gone.
            let b = self.ports[i].recv_copies(&mut self.pool, &mut |pool, mut v| {
                st.rx_frames.fetch_add(1, Ordering::Relaxed);
                if loss.lose() {
                    st.drops_loss.fetch_add(1, Ordering::Relaxed);
                    pool.put(v);
                    return;
                }
                if let Some(h) = hook.as_mut() {
                    h(i, &mut v);
                }
                if let Err(v) = queue.push(now, v) {
                    st.drops_full.fetch_add(1, Ordering::Relaxed);
                    pool.put(v);
                }
            })?;
            *ready = b.full();
            st.held.store(queue.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Sends the frames of direction `d` that are due at `now` on socket
    /// `1 - d`, keeping what the kernel refuses for now.
    fn flush(&mut self, d: usize, now: Instant) -> io::Result<()> {
        let out = 1 - d;
        let st = &self.stats.dirs[d];
        if !self.reactor.is_up(out) {
            // Nothing can leave: what is due is released and counted, so
            // the line neither spins on it nor sends stale frames later.
            let n = self.queues[d].due_batch(now, usize::MAX).0.len();
            for (_, f) in self.queues[d].pop(n) {
                st.down_drops.fetch_add(1, Ordering::Relaxed);
                self.pool.put(f);
            }
            self.blocked_until[out] = Instant::ZERO;
        }
        let mut budget = TX_TURN_FRAMES;
        // Each pass sends one batch or stops; `budget` bounds the passes.
        while budget > 0 && now >= self.blocked_until[out] {
            let (batch, _) = self.queues[d].due_batch(now, budget.min(MMSG_BATCH));
            if batch.is_empty() {
                break;
            }
            let sent_at = sys::now();
            match self.ports[out].send(batch) {
                Ok(0) => {
                    st.tx_blocked.fetch_add(1, Ordering::Relaxed);
                    self.blocked_until[out] = now + TX_RETRY;
                }
                Ok(sent) => {
                    budget = budget.saturating_sub(sent);
                    for (due, f) in self.queues[d].pop(sent) {
                        st.tx_frames.fetch_add(1, Ordering::Relaxed);
                        st.tx_bytes.fetch_add(f.len() as u64, Ordering::Relaxed);
                        st.record_late(sent_at.saturating_since(due).as_nanos());
                        self.pool.put(f);
                    }
                }
                Err((_, _e)) => {
                    // The head frame is unsendable (e.g. EMSGSIZE): count it.
                    budget -= 1;
                    for (_, f) in self.queues[d].pop(1) {
                        st.tx_errors.fetch_add(1, Ordering::Relaxed);
                        self.pool.put(f);
                    }
                }
            }
        }
        st.held
            .store(self.queues[d].len() as u64, Ordering::Relaxed);
        if let Some(fd) = self.ports[out].out_fd() {
            self.reactor
                .want_out(out, fd, self.blocked_until[out] > now)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn holds_each_frame_for_the_delay_in_order() {
        let mut q = DelayQueue::new(Duration::from_millis(10), 16);
        for i in 0..5u8 {
            q.push(t(u64::from(i) * 1_000_000), vec![i]).unwrap();
        }
        assert_eq!(q.next_due(), Some(t(10_000_000)));
        // Nothing is due a nanosecond early.
        assert!(q.due_batch(t(9_999_999), 64).0.is_empty());
        // At 12 ms the frames read at 0, 1, 2 ms are due, in order.
        let (b, head) = q.due_batch(t(12_000_000), 64);
        assert_eq!(b, &[vec![0], vec![1], vec![2]]);
        assert_eq!(head, Some(t(10_000_000)));
        let popped: Vec<(Instant, Vec<u8>)> = q.pop(b.len()).collect();
        assert_eq!(popped[2], (t(12_000_000), vec![2]));
        assert_eq!(q.len(), 2);
        assert_eq!(q.next_due(), Some(t(13_000_000)));
    }

    #[test]
    fn batch_respects_max_and_zero_delay_is_due_at_once() {
        let mut q = DelayQueue::new(Duration::ZERO, 1000);
        for i in 0..100u8 {
            q.push(t(5), vec![i]).unwrap();
        }
        assert_eq!(q.due_batch(t(5), 64).0.len(), 64);
        assert_eq!(q.due_batch(t(5), 7).0.len(), 7);
        assert_eq!(q.pop(64).count(), 64);
        assert_eq!(q.due_batch(t(5), 64).0.len(), 36);
    }

    #[test]
    fn bounded_at_cap_and_gives_the_frame_back() {
        let mut q = DelayQueue::new(Duration::from_millis(1), 3);
        for i in 0..3u8 {
            assert!(q.push(t(0), vec![i]).is_ok());
        }
        assert_eq!(q.push(t(0), vec![9]), Err(vec![9]));
        assert_eq!(q.len(), 3);
        q.pop(1).for_each(drop);
        assert!(q.push(t(0), vec![10]).is_ok(), "room again after a pop");
    }

    #[test]
    fn due_times_never_go_backwards() {
        let mut q = DelayQueue::new(Duration::from_micros(100), 8);
        q.push(t(1_000_000), vec![1]).unwrap();
        // A caller clock that stepped back must not reorder departures.
        q.push(t(500_000), vec![2]).unwrap();
        let d: Vec<Instant> = q.pop(2).map(|(d, _)| d).collect();
        assert!(d[0] <= d[1], "{d:?}");
    }

    #[test]
    fn wrapped_storage_is_sent_in_order_across_batches() {
        // Fill, drain partly and refill so the ring buffer wraps; the
        // frames must still come out in arrival order.
        let mut q = DelayQueue::new(Duration::ZERO, 8);
        let mut next_in = 0u8;
        let mut next_out = 0u8;
        for round in 0..50u64 {
            while q.len() < 8 {
                q.push(t(round), vec![next_in]).unwrap();
                next_in = next_in.wrapping_add(1);
            }
            // Bounded: at most 8 frames held, each pass pops ≥ 1.
            for _ in 0..3 {
                let n = q.due_batch(t(round), 3).0.len();
                assert!(n > 0);
                for (_, f) in q.pop(n) {
                    assert_eq!(f, vec![next_out]);
                    next_out = next_out.wrapping_add(1);
                }
            }
        }
    }

    #[test]
    fn loss_hits_its_rate_and_a_seed_replays_it() {
        let draws = |ppm, seed| {
            let mut l = Loss::new(ppm, seed);
            (0..100_000).map(|_| l.lose()).collect::<Vec<_>>()
        };
        let lost = |v: &[bool]| v.iter().filter(|&&x| x).count();
        let one = draws(10_000, 7);
        // 1 % of 100 000: 1000 ± 4 σ (σ ≈ 31).
        assert!((876..=1124).contains(&lost(&one)), "{}", lost(&one));
        assert_eq!(one, draws(10_000, 7), "the same seed, the same losses");
        assert_ne!(one, draws(10_000, 8));
        assert_eq!(lost(&draws(0, 7)), 0);
        assert_eq!(lost(&draws(1_000_000, 7)), 100_000);
        let three = lost(&draws(30_000, 1));
        assert!((2785..=3215).contains(&three), "{three}");
    }

    #[test]
    fn lateness_histogram_buckets() {
        let s = DelayDirStats::default();
        for ns in [0, 9_000, 10_000, 60_000, 150_000, 20_000_000] {
            s.record_late(ns);
        }
        assert_eq!(s.late_hist[0].load(Ordering::Relaxed), 3, "≤10 µs");
        assert_eq!(s.late_hist[2].load(Ordering::Relaxed), 1, "≤100 µs");
        assert_eq!(s.late_hist[3].load(Ordering::Relaxed), 1, "≤200 µs");
        assert_eq!(s.late_hist[LATE_BUCKETS - 1].load(Ordering::Relaxed), 1);
        assert_eq!(s.sent_within(100_000), 4);
        assert_eq!(s.late_max_ns.load(Ordering::Relaxed), 20_000_000);
    }
}
