//! A plain delay line between two interfaces: the lab's base RTT.
//!
//! # Principles
//! - Independent of the code under test: no engine, classifier or
//!   scheduler, only this crate's packet sockets, epoll and timerfd. Every
//!   frame read on A is sent on B after `a_to_b`, every frame read on B is
//!   sent on A after `b_to_a` (ARP, ND, anything), unchanged.
//! - One FIFO per direction. The delay is constant per direction, so due
//!   times are non-decreasing along each FIFO and only its head needs a
//!   timer: the timerfd is armed at the earliest head (absolute
//!   CLOCK_MONOTONIC). A timer wake-up comes late by tens to hundreds of
//!   µs (more in a VM), so the timer is armed early by a running estimate
//!   of that lateness ([`WakeEstimator`]) and a head closer than `spin_ns`
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
//! - recvmmsg, not the TPACKET_V3 ring: a ring block waits up to its retire
//!   timeout (≥ 1 ms) before user space sees a lone frame, which would be
//!   added to the delay.

use crate::bridge::Waker;
use crate::offload::{self, OffloadResult};
use crate::pool::Pool;
use crate::sock::{PacketSocket, MMSG_BATCH};
use crate::sys;
use sluice_time::{Duration, Instant};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Frames read per socket per loop turn, so one direction cannot starve
/// the other or the due frames' departure.
const RX_BATCH_FRAMES: usize = 256;
/// Frames sent per direction per loop turn (a few `sendmmsg` calls); the
/// rest are sent on the next turn, which follows at once (spin).
const TX_TURN_FRAMES: usize = 1024;
/// Retry delay after ENOBUFS (no EPOLLOUT comes for a full peer queue).
const TX_RETRY: Duration = Duration::from_micros(20);
/// Longest epoll sleep, so a stop flag set without a wake-up is still seen.
const IDLE_WAIT_MS: i32 = 100;
/// How often the kernel's receive-drop counters are collected.
const STATS_PERIOD: Duration = Duration::from_secs(1);
/// Free buffers kept for reuse.
const POOL_BUFFERS: usize = 8192;
/// Ethernet header + one VLAN tag beyond the MTU.
const L2_MAX_OVERHEAD: usize = 18;
/// Upper bounds (ns) of the lateness histogram buckets; the last bucket is
/// everything above the last bound.
pub const LATE_BOUNDS_NS: [u64; 7] = [
    10_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 10_000_000,
];
const LATE_BUCKETS: usize = LATE_BOUNDS_NS.len() + 1;
/// The timer is never armed earlier than this before a due time: a wake-up
/// later than that is preemption, not timer latency, and spinning through
/// it would only burn the core.
const MAX_EARLY_NS: u64 = 500_000;
/// EWMA weight of a new timer-latency sample, as a shift (1/8).
const EARLY_EWMA_SHIFT: u32 = 3;

const TOK_SOCK_A: u64 = 0;
const TOK_SOCK_B: u64 = 1;
const TOK_TIMER: u64 = 2;
const TOK_WAKER: u64 = 3;

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
    /// Frames the kernel refused outright (too large, …).
    pub tx_errors: AtomicU64,
    /// Times the kernel pushed back (EAGAIN/ENOBUFS); frames were kept.
    pub tx_blocked: AtomicU64,
    /// Frames the kernel dropped before we could read them (socket full).
    pub rx_kernel_drops: AtomicU64,
    /// Frames currently held (gauge).
    pub held: AtomicU64,
    /// How early the timer is armed (gauge, ns; the same in both
    /// directions: the latency estimate of [`WakeEstimator`]).
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
            "rx {} tx {} frames {} bytes, dropped {} (full) {} (kernel rx) {} (tx error), \
             tx blocked {}, held {}, timer armed {} µs early, late max {} µs, lateness {}",
            l(&self.rx_frames),
            l(&self.tx_frames),
            l(&self.tx_bytes),
            l(&self.drops_full),
            l(&self.rx_kernel_drops),
            l(&self.tx_errors),
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

/// Running estimate of how late a timerfd wake-up arrives, so the timer can
/// be armed that much before a due time. Pure: samples are arguments.
#[derive(Clone, Copy, Debug, Default)]
pub struct WakeEstimator {
    early_ns: u64,
}

impl WakeEstimator {
    /// Records one wake-up that came `late_ns` after the armed time.
    /// Samples are clamped to `MAX_EARLY_NS` so one preemption cannot
    /// make the line spin for milliseconds.
    pub fn observe(&mut self, late_ns: u64) {
        let s = late_ns.min(MAX_EARLY_NS) as i64;
        let e = self.early_ns as i64;
        self.early_ns = (e + ((s - e) >> EARLY_EWMA_SHIFT)).max(0) as u64;
    }

    /// How long before a due time to arm the timer.
    pub fn early_ns(&self) -> u64 {
        self.early_ns
    }
}

/// Two interfaces joined by a fixed delay in each direction.
pub struct DelayLine {
    socks: [PacketSocket; 2],
    epoll: OwnedFd,
    timer: OwnedFd,
    waker: Waker,
    stats: Arc<DelayStats>,
    pool: Pool,
    /// `queues[d]`: frames read on socket `d`, leaving on socket `1 - d`.
    queues: [DelayQueue; 2],
    /// The kernel pushed back on socket `i`'s egress: no send before this
    /// time unless EPOLLOUT comes first (`Instant::ZERO`: not blocked).
    blocked_until: [Instant; 2],
    want_out: [bool; 2],
    offloads: Vec<OffloadResult>,
    spin_ns: u64,
    wake: WakeEstimator,
    /// The absolute time the timer is armed for, if it is.
    armed_at: Option<Instant>,
}

/// Timer slack of this thread: the kernel may postpone a timer by up to
/// its slack (50 µs by default) to batch wake-ups; a delay line wants none.
pub(crate) fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument, no pointers; it
    // only affects the calling thread.
    sys::cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// Puts the calling thread in SCHED_FIFO at `priority` (1..=99). On a
/// shared machine a CFS thread waits for a core for milliseconds now and
/// then, which a delay line adds to the RTT; a real-time thread preempts
/// the traffic generators. Safe for the system because the loop sleeps
/// between due times (it spins at most `spin_ns` + the timer estimate,
/// ≤ 510 µs by default, at a time) and the kernel's RT throttling keeps 5 % of every
/// core for others anyway.
pub fn set_thread_fifo(priority: u8) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: i32::from(priority.clamp(1, 99)),
    };
    // SAFETY: `p` is a valid sched_param for the duration of the call; pid 0
    // is the calling thread.
    sys::cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) })?;
    Ok(())
}

impl DelayLine {
    /// Opens both interfaces (they must exist and be up).
    pub fn open(a: &str, b: &str, o: DelayOptions) -> io::Result<DelayLine> {
        let sa = PacketSocket::open(a, None)?;
        let sb = PacketSocket::open(b, None)?;
        let mut offloads = Vec::new();
        if o.disable_offloads {
            offloads.extend(offload::disable(sa.fd(), a));
            offloads.extend(offload::disable(sb.fd(), b));
        }
        let mtu = [
            crate::sock::mtu(sa.fd(), a).unwrap_or(1500) as usize,
            crate::sock::mtu(sb.fd(), b).unwrap_or(1500) as usize,
        ];
        let epoll = sys::epoll_create()?;
        let timer = sys::timerfd()?;
        let wfd = sys::eventfd()?;
        let inn = libc::EPOLLIN as u32;
        sys::epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, sa.fd(), inn, TOK_SOCK_A)?;
        sys::epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, sb.fd(), inn, TOK_SOCK_B)?;
        let tfd = timer.as_raw_fd();
        sys::epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, tfd, inn, TOK_TIMER)?;
        sys::epoll_ctl(&epoll, libc::EPOLL_CTL_ADD, wfd.as_raw_fd(), inn, TOK_WAKER)?;
        let buf = (mtu[0].max(mtu[1]) + L2_MAX_OVERHEAD).max(1518);
        let cap = o.cap_frames.max(1);
        Ok(DelayLine {
            socks: [sa, sb],
            epoll,
            timer,
            waker: Waker(Arc::new(wfd)),
            stats: Arc::new(DelayStats::default()),
            pool: Pool::new(buf, POOL_BUFFERS),
            queues: [
                DelayQueue::new(o.a_to_b, cap),
                DelayQueue::new(o.b_to_a, cap),
            ],
            blocked_until: [Instant::ZERO; 2],
            want_out: [false; 2],
            offloads,
            spin_ns: o.spin_ns,
            wake: WakeEstimator::default(),
            armed_at: None,
        })
    }

    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    pub fn stats(&self) -> Arc<DelayStats> {
        self.stats.clone()
    }

    /// What happened to each offload at open.
    pub fn offloads(&self) -> &[OffloadResult] {
        &self.offloads
    }

    /// Forwards until `stop` is set (noticed at once when woken, else
    /// within `IDLE_WAIT_MS`). Frames still held are released.
    pub fn run(&mut self, stop: Arc<AtomicBool>) -> io::Result<()> {
        // Best effort: without it the timer may fire up to 50 µs late.
        let _ = set_timer_slack_ns(1);
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let mut readable = [true, true];
        let mut spin = false;
        let mut next_stats = sys::now() + STATS_PERIOD;
        while !stop.load(Ordering::Relaxed) {
            let wait_ms = if spin { 0 } else { IDLE_WAIT_MS };
            let n = sys::epoll_wait(&self.epoll, &mut events, wait_ms)?;
            for ev in events.iter().take(n) {
                match ev.u64 {
                    TOK_SOCK_A | TOK_SOCK_B => {
                        let i = ev.u64 as usize;
                        // An error or hang-up is read too: the read clears
                        // it (or ends the loop), so epoll cannot spin on it.
                        let rx = (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32;
                        if ev.events & rx != 0 {
                            readable[i] = true;
                        }
                        if ev.events & libc::EPOLLOUT as u32 != 0 {
                            self.blocked_until[i] = Instant::ZERO;
                        }
                    }
                    TOK_TIMER => {
                        if sys::drain_counter(self.timer.as_raw_fd()) > 0 {
                            if let Some(armed) = self.armed_at.take() {
                                self.wake
                                    .observe(sys::now().saturating_since(armed).as_nanos());
                            }
                        }
                    }
                    _ => {
                        sys::drain_counter(self.waker.0.as_raw_fd());
                    }
                }
            }
            self.receive(&mut readable)?;
            let now = sys::now();
            for d in 0..2 {
                self.flush(d, now)?;
            }
            if now >= next_stats {
                for (s, st) in self.socks.iter().zip(&self.stats.dirs) {
                    st.rx_kernel_drops
                        .fetch_add(s.take_drops(), Ordering::Relaxed);
                }
                next_stats = now + STATS_PERIOD;
            }
            let at = self.next_wakeup();
            // Still-readable sockets (a full batch was read) need no timer.
            // Within the timer's own latency of a due time, sleeping would
            // only overshoot it: spin.
            let window_ns = self.spin_ns + self.wake.early_ns();
            spin = readable.iter().any(|&r| r)
                || at.is_some_and(|d| d.as_nanos() <= now.as_nanos() + window_ns);
            if !spin {
                // Armed early by the measured wake-up latency; what is left
                // when it fires is spun (at most `spin_ns`) or re-armed.
                let early = Duration::from_nanos(self.wake.early_ns());
                let arm = at.map(|d| (d - early).max(now));
                sys::timer_set(&self.timer, arm)?;
                self.armed_at = arm;
                for st in &self.stats.dirs {
                    st.timer_early_ns.store(early.as_nanos(), Ordering::Relaxed);
                }
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
            let (pool, queue) = (&mut self.pool, &mut self.queues[i]);
            let now = sys::now();
            let got = self.socks[i].recv(RX_BATCH_FRAMES, &mut |f| {
                let mut v = pool.take_copy(&[]);
                crate::ring::copy_with_vlan(&mut v, f.data, f.vlan);
                st.rx_frames.fetch_add(1, Ordering::Relaxed);
                if let Err(v) = queue.push(now, v) {
                    st.drops_full.fetch_add(1, Ordering::Relaxed);
                    pool.put(v);
                }
            });
            // Reading consumed the socket's pending error, so epoll stops
            // reporting it. ENETDOWN (link set down) is survivable: the
            // socket receives again once the link is up. Anything else
            // (interface deleted) ends the loop rather than spinning on it.
            let got = match got {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => 0,
                Err(e) => return Err(e),
            };
            // Level-triggered epoll reports a socket again if more waits;
            // a partial batch means it is (momentarily) empty.
            *ready = got >= RX_BATCH_FRAMES;
            st.held.store(queue.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Sends the frames of direction `d` that are due at `now` on socket
    /// `1 - d`, keeping what the kernel refuses for now.
    fn flush(&mut self, d: usize, now: Instant) -> io::Result<()> {
        let out = 1 - d;
        let st = &self.stats.dirs[d];
        let mut budget = TX_TURN_FRAMES;
        // Each pass sends one batch or stops; `budget` bounds the passes.
        while budget > 0 && now >= self.blocked_until[out] {
            let (batch, _) = self.queues[d].due_batch(now, budget.min(MMSG_BATCH));
            if batch.is_empty() {
                break;
            }
            let sent_at = sys::now();
            match self.socks[out].send(batch) {
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
        let want = self.blocked_until[out] > now;
        if want != self.want_out[out] {
            let mut bits = libc::EPOLLIN as u32;
            if want {
                bits |= libc::EPOLLOUT as u32;
            }
            sys::epoll_ctl(
                &self.epoll,
                libc::EPOLL_CTL_MOD,
                self.socks[out].fd(),
                bits,
                out as u64,
            )?;
            self.want_out[out] = want;
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
    fn wake_estimate_follows_latency_and_is_clamped() {
        let mut w = WakeEstimator::default();
        for _ in 0..100 {
            w.observe(120_000);
        }
        // EWMA 1/8 converges to within 1 % of a steady sample in 100 steps.
        assert!(
            (118_000..=120_000).contains(&w.early_ns()),
            "{}",
            w.early_ns()
        );
        // One preemption of 50 ms moves the estimate by at most
        // (MAX_EARLY_NS - estimate) / 8, never to 50 ms.
        w.observe(50_000_000);
        assert!(w.early_ns() <= 120_000 + (MAX_EARLY_NS - 118_000) / 8 + 1);
        for _ in 0..1000 {
            w.observe(10_000_000);
        }
        assert!(w.early_ns() <= MAX_EARLY_NS);
        for _ in 0..200 {
            w.observe(0);
        }
        assert!(w.early_ns() < 1_000, "falls back when wake-ups are prompt");
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
