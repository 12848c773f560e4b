//! The one event loop under both packet loops (the bridge driving the
//! engine, the lab's delay line driving its delay queues): epoll, one
//! timerfd, one eventfd waker, the netlink link watch, and the decision
//! when to sleep, arm the timer or spin.
//!
//! # Principles
//! - Level-triggered epoll over the two ports' receiving sockets (several
//!   per port under AF_XDP, one per RX queue: any of them readable marks
//!   the port readable, and reading the port serves them all), the timer
//!   (absolute CLOCK_MONOTONIC), the waker and netlink. A transmit socket
//!   joins (EPOLLOUT) only while the kernel pushes back: a socket in epoll
//!   is woken for every frame it sent once that frame is freed.
//! - The timing decision is a pure function, [`plan`]: inputs are the time,
//!   the user's next deadline, whether the kernel pushed back, whether a
//!   socket is still readable, the wake-up estimate and the [`Policy`];
//!   the output says whether to poll again at once (spin) or sleep, and at
//!   what the timer must be armed. Where the bridge and the delay line
//!   want different things, [`Policy`] says so.
//! - A timer wake-up comes late by tens to hundreds of µs; [`WakeEstimator`]
//!   learns by how much and far deadlines are armed that much early, the
//!   rest is spun. The timer is not re-armed for an unchanged deadline (a
//!   syscall per turn for nothing at high rates).
//! - Interface events are handled here, once: EPOLLERR on a port is read
//!   and cleared (SO_ERROR) so it cannot spin the loop; an interface that
//!   goes down or loses carrier is logged and reported to the user (which
//!   counts it and stops sending there) and the loop sleeps as usual; an
//!   interface that is deleted ends the loop with an error naming it
//!   (`link.rs` has why netlink, not socket errors, decides).
//! - While a socket keeps filling whole batches, epoll_wait is skipped up
//!   to `Policy::epoll_skip_max` turns in a row (a syscall per batch for an
//!   answer we know), then consulted so the timer, the waker and the other
//!   socket are never starved.

use crate::link::{LinkChange, LinkWatch};
use crate::sockopt;
use crate::sys::{self, EpollOp};
use rustix::event::epoll::{Event, EventFlags};
use sluice_time::{Duration, Instant};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Retry delay after the kernel pushed back (no EPOLLOUT comes for a full
/// peer queue, ENOBUFS).
pub const TX_RETRY: Duration = Duration::from_micros(20);
/// Longest epoll sleep, so a stop flag set without a wake-up is still seen.
pub const IDLE_WAIT_MS: i32 = 100;
/// The timer is never armed earlier than this before a deadline: a
/// wake-up later than that is preemption, not timer latency, and spinning
/// through it would only burn the core.
pub const MAX_EARLY_NS: u64 = 500_000;
/// EWMA weight of a new timer-latency sample, as a shift (1/8).
const EARLY_EWMA_SHIFT: u32 = 3;

const TOK_TIMER: u64 = 100;
const TOK_WAKER: u64 = 101;
const TOK_LINK: u64 = 102;
/// EPOLLOUT of port `i`'s separate transmit socket: `TOK_OUT + i`.
const TOK_OUT: u64 = 8;
/// Receiving socket `k` of port `i`: `TOK_RX | k << 1 | i` (above every
/// other token).
const TOK_RX: u64 = 1 << 32;

fn rx_token(port: usize, k: usize) -> u64 {
    TOK_RX | (k as u64) << 1 | (port as u64 & 1)
}

/// The port and socket of a receive token.
fn rx_of(tok: u64) -> Option<(usize, usize)> {
    (tok & TOK_RX != 0).then_some(((tok & 1) as usize, ((tok & !TOK_RX) >> 1) as usize))
}

/// Where a message of the I/O layer goes (one line, no newline, no level:
/// all are warnings); the daemon passes its own logger. Must not panic.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// The logger used until the user sets one: stderr, errors ignored (a full
/// disk must not end the loop).
pub fn stderr_log() -> Log {
    Arc::new(|m: &str| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "sluice: warn: {m}");
    })
}

/// Makes the loop re-read its deadline (after a reload) or notice a stop
/// flag at once. Cheap to clone, usable from any thread.
#[derive(Clone, Debug)]
pub struct Waker(Arc<OwnedFd>);

impl Waker {
    pub fn wake(&self) {
        sys::bump_counter(self.0.as_fd());
    }
}

/// Running estimate of how late a timerfd wake-up arrives, so the timer can
/// be armed that much before a deadline. Pure: samples are arguments.
#[derive(Clone, Copy, Debug, Default)]
pub struct WakeEstimator {
    early_ns: u64,
}

impl WakeEstimator {
    /// Records one wake-up that came `late_ns` after the armed time.
    /// Samples are clamped to `MAX_EARLY_NS` so one preemption cannot
    /// make the loop spin for milliseconds.
    pub fn observe(&mut self, late_ns: u64) {
        let s = late_ns.min(MAX_EARLY_NS) as i64;
        let e = self.early_ns as i64;
        self.early_ns = (e + ((s - e) >> EARLY_EWMA_SHIFT)).max(0) as u64;
    }

    /// How long before a deadline to arm the timer.
    pub fn early_ns(&self) -> u64 {
        self.early_ns
    }
}

/// How a loop wants its time spent; the bridge and the delay line differ.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// A deadline closer than this is busy-waited: sleeping would overshoot
    /// it by the timer's jitter.
    pub spin_ns: u64,
    /// Deadlines farther than this are armed early by the wake-up estimate
    /// (and what is left after the early wake-up is spun); closer ones are
    /// armed at the deadline and spun only within `spin_ns`. The bridge
    /// uses 1 ms (below it pf's token buckets absorb lateness and a wider
    /// spin would take CPU from the traffic), the delay line 0 (every due
    /// time matters to the µs).
    pub early_arm_min: Duration,
    /// Spin towards a deadline even while the kernel pushes back. The
    /// bridge does not (frames are due but cannot leave: retry after
    /// `TX_RETRY` instead); the delay line folds its per-direction retry
    /// into its deadline and passes `blocked = false`.
    pub spin_while_blocked: bool,
    /// Turns in a row that may skip epoll_wait while a socket is readable
    /// (0: always ask epoll).
    pub epoll_skip_max: u32,
}

/// What the timer is set to, carried from one plan to the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerState {
    /// `Some(at)`: the timer is known to be armed at `at` (`None`:
    /// disarmed); `None`: unknown (fired, or never set).
    pub armed: Option<Option<Instant>>,
    /// The far deadline the timer was armed early for: once that early
    /// wake-up came, the rest up to it is spun.
    pub early_for: Option<Instant>,
}

/// One turn's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Poll epoll without sleeping next turn (spin, or a socket is still
    /// readable); else sleep up to `IDLE_WAIT_MS` or until the timer.
    pub poll: bool,
    /// Set the timer to this (`Some(None)`: disarm); `None`: leave it.
    pub set_timer: Option<Option<Instant>>,
    pub timer: TimerState,
}

/// The state a loop reports at the end of a turn.
#[derive(Clone, Copy, Debug)]
pub struct Want {
    pub now: Instant,
    /// The user's next deadline (engine timeout, head of a delay queue).
    pub deadline: Option<Instant>,
    /// The kernel refused frames that still wait.
    pub blocked: bool,
    /// A socket filled its last batch: more is likely waiting.
    pub readable: bool,
}

/// Decides the next wait. Pure: the caller applies it.
pub fn plan(w: Want, early_ns: u64, p: &Policy, timer: TimerState) -> Plan {
    let poll_now = Plan {
        poll: true,
        set_timer: None,
        timer,
    };
    // The next turn follows at once: a timer would be a syscall for nothing.
    if w.readable {
        return poll_now;
    }
    let now = w.now;
    let at = if w.blocked {
        let retry = now + TX_RETRY;
        Some(w.deadline.map_or(retry, |d| d.max(retry)))
    } else {
        w.deadline
    };
    let early = Duration::from_nanos(early_ns);
    let far = |d: Instant| d > now + p.early_arm_min;
    let window = match at {
        Some(d) if timer.early_for == Some(d) || far(d) => p.spin_ns + early.as_nanos(),
        _ => p.spin_ns,
    };
    let may_spin = !w.blocked || p.spin_while_blocked;
    if may_spin && at.is_some_and(|d| d.as_nanos() <= now.as_nanos() + window) {
        return poll_now;
    }
    let early_for = at.filter(|&d| far(d));
    let arm = match early_for {
        Some(d) => Some(d - early),
        None => at,
    };
    Plan {
        poll: false,
        set_timer: (timer.armed != Some(arm)).then_some(arm),
        timer: TimerState {
            armed: Some(arm),
            early_for,
        },
    }
}

/// What one wait brought besides readable sockets.
#[derive(Clone, Copy, Debug, Default)]
pub struct Events {
    /// EPOLLOUT: the kernel has room again on port `i`'s egress.
    pub writable: [bool; 2],
    /// Port `i` went down / came back up during this wait.
    pub went_down: [bool; 2],
    pub came_up: [bool; 2],
}

/// epoll, timer, waker and link watch of one two-port loop.
pub struct Reactor {
    epoll: OwnedFd,
    timer: OwnedFd,
    waker: Waker,
    links: LinkWatch,
    policy: Policy,
    wake: WakeEstimator,
    timer_state: TimerState,
    /// The absolute time the timer is armed for, to measure its lateness.
    armed_at: Option<Instant>,
    poll_next: bool,
    skipped: u32,
    /// Receiving sockets of each port (EPOLLIN, [`rx_token`]).
    rx_fd: [Vec<RawFd>; 2],
    /// EPOLLOUT subscribed on port `i`.
    want_out: [bool; 2],
    log: Log,
    /// Room for every descriptor's event in one wait.
    events: Vec<Event>,
}

impl Reactor {
    /// A reactor for ports on interfaces `names`, receiving on `rx_fd`.
    pub fn new(names: [&str; 2], rx_fd: [RawFd; 2], policy: Policy) -> io::Result<Reactor> {
        Reactor::with_fds(names, [&[rx_fd[0]], &[rx_fd[1]]], policy)
    }

    /// A reactor for ports that receive on several sockets each (AF_XDP:
    /// one per RX queue).
    pub fn with_fds(
        names: [&str; 2],
        rx_fds: [&[RawFd]; 2],
        policy: Policy,
    ) -> io::Result<Reactor> {
        let epoll = sys::epoll_create()?;
        let timer = sys::timerfd()?;
        let wfd = sys::eventfd()?;
        let links = LinkWatch::open(&names)?;
        let inn = EventFlags::IN;
        for (i, fds) in rx_fds.iter().enumerate() {
            for (k, fd) in fds.iter().enumerate() {
                sys::epoll_ctl(&epoll, EpollOp::Add, *fd, inn, rx_token(i, k))?;
            }
        }
        // The receiving sockets, the timer, the waker, netlink, two EPOLLOUTs.
        let slots = rx_fds[0].len() + rx_fds[1].len() + 5;
        sys::epoll_ctl(&epoll, EpollOp::Add, timer.as_raw_fd(), inn, TOK_TIMER)?;
        sys::epoll_ctl(&epoll, EpollOp::Add, wfd.as_raw_fd(), inn, TOK_WAKER)?;
        sys::epoll_ctl(&epoll, EpollOp::Add, links.fd(), inn, TOK_LINK)?;
        Ok(Reactor {
            epoll,
            timer,
            waker: Waker(Arc::new(wfd)),
            links,
            policy,
            wake: WakeEstimator::default(),
            timer_state: TimerState::default(),
            armed_at: None,
            poll_next: false,
            skipped: 0,
            rx_fd: rx_fds.map(<[RawFd]>::to_vec),
            want_out: [false; 2],
            log: stderr_log(),
            events: (0..slots).map(|_| sys::epoll_event()).collect(),
        })
    }

    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    pub fn set_log(&mut self, log: Log) {
        self.log = log;
    }

    /// Port `i`'s interface name.
    pub fn name(&self, i: usize) -> &str {
        self.links.name(i)
    }

    /// Logs one line through the user's logger.
    pub fn log(&self, msg: &str) {
        (self.log)(msg)
    }

    /// Port `i`'s interface is up with carrier.
    pub fn is_up(&self, i: usize) -> bool {
        self.links.is_up(i)
    }

    /// How early the timer is armed (the wake-up latency estimate), ns.
    pub fn early_ns(&self) -> u64 {
        self.wake.early_ns()
    }

    /// Waits as the last plan said (or not at all while a socket is
    /// readable, up to `epoll_skip_max` turns), marks readable ports in
    /// `readable` and returns the other events. Ends with an error when a
    /// port's interface disappeared.
    pub fn wait(&mut self, readable: &mut [bool; 2]) -> io::Result<Events> {
        let mut ev = Events::default();
        let any = readable.iter().any(|&r| r);
        if any && self.skipped < self.policy.epoll_skip_max {
            self.skipped += 1;
            return Ok(ev);
        }
        self.skipped = 0;
        let ms = if self.poll_next || any {
            0
        } else {
            IDLE_WAIT_MS
        };
        let n = sys::epoll_wait(&self.epoll, &mut self.events, ms)?;
        let mut link_ready = false;
        for k in 0..n {
            let (tok, bits) = (self.events[k].data.u64(), self.events[k].flags);
            if let Some((i, k)) = rx_of(tok) {
                if bits.contains(EventFlags::IN) {
                    readable[i] = true;
                }
                if bits.contains(EventFlags::OUT) {
                    ev.writable[i] = true;
                }
                if bits.contains(EventFlags::ERR) {
                    // ENETDOWN and the like: netlink tells the state;
                    // the error only has to stop being reported.
                    if let Some(&fd) = self.rx_fd[i].get(k) {
                        let _ = sockopt::take_error(fd);
                    }
                }
                continue;
            }
            match tok {
                TOK_TIMER => {
                    if sys::drain_counter(self.timer.as_fd()) > 0 {
                        if let Some(at) = self.armed_at.take() {
                            self.wake
                                .observe(sys::now().saturating_since(at).as_nanos());
                        }
                        // A fired one-shot timer is disarmed.
                        self.timer_state.armed = Some(None);
                    }
                }
                TOK_WAKER => {
                    sys::drain_counter(self.waker.0.as_fd());
                }
                TOK_LINK => link_ready = true,
                t => {
                    if let Some(w) = ev.writable.get_mut((t - TOK_OUT) as usize) {
                        *w = true;
                    }
                }
            }
        }
        if link_ready {
            self.read_links(&mut ev)?;
        }
        Ok(ev)
    }

    fn read_links(&mut self, ev: &mut Events) -> io::Result<()> {
        let mut gone = None;
        let mut changes = [None::<LinkChange>; 2];
        self.links.read(&mut |i, c| {
            if c == LinkChange::Gone {
                gone.get_or_insert(i);
            } else if let Some(slot) = changes.get_mut(i) {
                // Down then up within one read is a flap: both are counted.
                match (slot.take(), c) {
                    (Some(LinkChange::Down), LinkChange::Up) => {
                        ev.went_down[i] = true;
                        *slot = Some(LinkChange::Up);
                    }
                    _ => *slot = Some(c),
                }
            }
        })?;
        if let Some(i) = gone {
            // The caller reports the error; no log line of its own.
            let name = self.links.name(i);
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "interface {name} disappeared (deleted or moved to another namespace); \
                     restart sluice once it exists again"
                ),
            ));
        }
        for (i, c) in changes.iter().enumerate() {
            let name = self.links.name(i);
            // A flap within one read was marked down above; it is logged too.
            if ev.went_down[i] || *c == Some(LinkChange::Down) {
                ev.went_down[i] = true;
                (self.log)(&format!(
                    "{name} is down (link or carrier); waiting for it, \
                     frames for it are dropped and counted"
                ));
            }
            if *c == Some(LinkChange::Up) {
                ev.came_up[i] = true;
                (self.log)(&format!("{name} is up; forwarding on it"));
            }
        }
        Ok(())
    }

    /// (Un)subscribes EPOLLOUT for port `i`: on `fd` (a transmit socket
    /// of its own, token `TOK_OUT + i`), or on the receiving socket when
    /// `fd` is it (one socket for both directions).
    pub fn want_out(&mut self, i: usize, fd: RawFd, want: bool) -> io::Result<()> {
        if want == self.want_out[i] {
            return Ok(());
        }
        let out = EventFlags::OUT;
        if let Some(k) = self.rx_fd[i].iter().position(|&r| r == fd) {
            let bits = EventFlags::IN | if want { out } else { EventFlags::empty() };
            sys::epoll_ctl(&self.epoll, EpollOp::Modify, fd, bits, rx_token(i, k))?;
        } else {
            let op = if want { EpollOp::Add } else { EpollOp::Delete };
            sys::epoll_ctl(&self.epoll, op, fd, out, TOK_OUT + i as u64)?;
        }
        self.want_out[i] = want;
        Ok(())
    }

    /// Plans the next wait ([`plan`]) and sets the timer if it changed.
    pub fn schedule(&mut self, w: Want) -> io::Result<()> {
        let p = plan(w, self.wake.early_ns(), &self.policy, self.timer_state);
        if let Some(arm) = p.set_timer {
            sys::timer_set(&self.timer, arm)?;
            self.armed_at = arm;
        }
        self.timer_state = p.timer;
        self.poll_next = p.poll;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    const BRIDGE: Policy = Policy {
        spin_ns: 50_000,
        early_arm_min: Duration::from_millis(1),
        spin_while_blocked: false,
        epoll_skip_max: 8,
    };
    const DELAY: Policy = Policy {
        spin_ns: 10_000,
        early_arm_min: Duration::ZERO,
        spin_while_blocked: true,
        epoll_skip_max: 0,
    };

    fn want(now: u64, deadline: Option<u64>) -> Want {
        Want {
            now: t(now),
            deadline: deadline.map(t),
            blocked: false,
            readable: false,
        }
    }

    #[test]
    fn receive_tokens_name_their_port_and_socket() {
        for (i, k) in [(0, 0), (1, 0), (0, 5), (1, 63), (1, 100_000)] {
            assert_eq!(rx_of(rx_token(i, k)), Some((i, k)));
        }
        for other in [TOK_TIMER, TOK_WAKER, TOK_LINK, TOK_OUT, TOK_OUT + 1] {
            assert_eq!(rx_of(other), None, "{other}");
        }
        assert_ne!(rx_token(0, 1), rx_token(1, 0));
    }

    #[test]
    fn far_deadline_is_armed_early_then_spun() {
        // 5 ms ahead, wake-ups 100 µs late: armed 100 µs early.
        let p = plan(want(0, Some(5000)), 100_000, &BRIDGE, TimerState::default());
        assert!(!p.poll);
        assert_eq!(p.set_timer, Some(Some(t(4900))));
        assert_eq!(p.timer.early_for, Some(t(5000)));
        // The early wake-up came 30 µs late (4930): 70 µs are left, more
        // than spin_ns but within spin_ns + early for this deadline: spin.
        let mut fired = p.timer;
        fired.armed = Some(None);
        let q = plan(want(4930, Some(5000)), 100_000, &BRIDGE, fired);
        assert!(q.poll, "{q:?}");
        assert_eq!(q.set_timer, None);
        // The delay line arms every future deadline early, with no minimum.
        let d = plan(want(0, Some(500)), 100_000, &DELAY, TimerState::default());
        assert_eq!(d.set_timer, Some(Some(t(400))));
    }

    #[test]
    fn near_deadline_is_spun_or_armed_at_the_deadline() {
        // Within spin_ns: spin, timer untouched.
        let p = plan(want(0, Some(40)), 100_000, &BRIDGE, TimerState::default());
        assert!(p.poll);
        assert_eq!(p.set_timer, None);
        // 300 µs ahead, below the bridge's 1 ms early-arming minimum: armed
        // at the deadline, not early, and not spun (beyond spin_ns).
        let q = plan(want(0, Some(300)), 100_000, &BRIDGE, TimerState::default());
        assert!(!q.poll);
        assert_eq!(q.set_timer, Some(Some(t(300))));
        assert_eq!(q.timer.early_for, None);
        // The delay line spins everything within spin_ns + early.
        let d = plan(want(0, Some(100)), 100_000, &DELAY, TimerState::default());
        assert!(d.poll);
    }

    #[test]
    fn kernel_push_back_retries_after_tx_retry() {
        let mut w = want(1000, Some(1000));
        w.blocked = true;
        let p = plan(w, 0, &BRIDGE, TimerState::default());
        assert!(!p.poll, "the bridge does not spin on a full kernel queue");
        assert_eq!(p.set_timer, Some(Some(t(1000) + TX_RETRY)));
        // Nothing due but frames wait for the kernel: the retry still comes.
        let mut w = want(1000, None);
        w.blocked = true;
        assert_eq!(
            plan(w, 0, &BRIDGE, TimerState::default()).set_timer,
            Some(Some(t(1020)))
        );
        // A later deadline is kept.
        let mut w = want(1000, Some(9000));
        w.blocked = true;
        assert_eq!(
            plan(w, 0, &BRIDGE, TimerState::default()).set_timer,
            Some(Some(t(9000)))
        );
    }

    #[test]
    fn idle_sleeps_with_the_timer_disarmed() {
        let p = plan(want(0, None), 100_000, &BRIDGE, TimerState::default());
        assert!(!p.poll, "sleeps (up to IDLE_WAIT_MS)");
        assert_eq!(p.set_timer, Some(None));
        // Already disarmed: no syscall.
        let q = plan(want(5, None), 100_000, &BRIDGE, p.timer);
        assert_eq!(q.set_timer, None);
        assert!(!q.poll);
    }

    #[test]
    fn unchanged_deadline_is_not_re_armed() {
        let p = plan(want(0, Some(300)), 0, &BRIDGE, TimerState::default());
        assert_eq!(p.set_timer, Some(Some(t(300))));
        let q = plan(want(10, Some(300)), 0, &BRIDGE, p.timer);
        assert_eq!(q.set_timer, None, "same deadline, timer still armed");
        // After it fired (one-shot: disarmed), the same deadline is armed
        // again; a new deadline is armed at once.
        let mut fired = q.timer;
        fired.armed = Some(None);
        assert_eq!(
            plan(want(20, Some(300)), 0, &BRIDGE, fired).set_timer,
            Some(Some(t(300)))
        );
        assert_eq!(
            plan(want(20, Some(400)), 0, &BRIDGE, q.timer).set_timer,
            Some(Some(t(400)))
        );
    }

    #[test]
    fn readable_socket_polls_without_touching_the_timer() {
        let mut w = want(0, Some(50_000));
        w.readable = true;
        let p = plan(w, 0, &DELAY, TimerState::default());
        assert!(p.poll);
        assert_eq!(p.set_timer, None);
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
}
