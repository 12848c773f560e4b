//! Thin, checked wrappers over the few syscalls the data plane uses.
//!
//! # Principles
//! The syscalls without a socket family of their own (clock, epoll,
//! timerfd, eventfd, netlink, getrandom) live here. They go through
//! `rustix`, which types their flags and owns every descriptor it returns
//! (`OwnedFd`), so no path leaks one and none needs `unsafe`; what rustix
//! lacks (SCHED_FIFO) stays on libc with the reason it is sound. Socket
//! options and interface ioctls are in `sockopt.rs`, packet and XDP
//! sockets in `sock.rs` and `xdp/`.

use rustix::event::epoll;
use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, Protocol, SocketFlags, SocketType};
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use sluice_time::Instant;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Current CLOCK_MONOTONIC time, the engine's clock (vDSO, no syscall).
pub fn now() -> Instant {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Instant::from_nanos((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
}

/// 16 random bytes from the kernel (getrandom(2)), for the classifier's hash key.
pub fn random_key() -> io::Result<[u8; 16]> {
    let mut key = [0u8; 16];
    let mut filled = 0usize;
    // At most a few iterations: getrandom returns up to 256 bytes per call
    // once the pool is initialised; EINTR retries.
    for _ in 0..16 {
        if filled == key.len() {
            return Ok(key);
        }
        match rustix::rand::getrandom(&mut key[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if filled == key.len() {
        Ok(key)
    } else {
        Err(io::Error::other("getrandom returned too few bytes"))
    }
}

pub fn epoll_create() -> io::Result<OwnedFd> {
    Ok(epoll::create(epoll::CreateFlags::CLOEXEC)?)
}

/// What [`epoll_ctl`] does with a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpollOp {
    Add,
    Modify,
    Delete,
}

/// Adds, changes or removes `fd`'s entry: `events` with `token` as its data.
/// `fd` is a socket of a port or the reactor's own, open for the call.
pub fn epoll_ctl(
    ep: &OwnedFd,
    op: EpollOp,
    fd: RawFd,
    events: epoll::EventFlags,
    token: u64,
) -> io::Result<()> {
    // SAFETY: the caller owns `fd` (a port's socket, or the reactor's timer,
    // waker or netlink socket) and keeps it open past this call; the borrow
    // ends with it (epoll keeps no reference, only the open file).
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let data = epoll::EventData::new_u64(token);
    match op {
        EpollOp::Add => epoll::add(ep, fd, data, events)?,
        EpollOp::Modify => epoll::modify(ep, fd, data, events)?,
        EpollOp::Delete => epoll::delete(ep, fd)?,
    }
    Ok(())
}

/// An empty slot for [`epoll_wait`] to fill.
pub fn epoll_event() -> epoll::Event {
    epoll::Event {
        flags: epoll::EventFlags::empty(),
        data: epoll::EventData::new_u64(0),
    }
}

/// Waits for events, at most `timeout_ms` (negative: for ever, as in
/// epoll_wait(2)); EINTR is reported as zero events (a signal arrived).
pub fn epoll_wait(ep: &OwnedFd, events: &mut [epoll::Event], timeout_ms: i32) -> io::Result<usize> {
    let timeout = u64::try_from(timeout_ms).ok().map(|ms| Timespec {
        tv_sec: (ms / 1000) as i64,
        tv_nsec: (ms % 1000 * 1_000_000) as i64,
    });
    match epoll::wait(ep, events, timeout.as_ref()) {
        Ok(n) => Ok(n),
        Err(rustix::io::Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

pub fn timerfd() -> io::Result<OwnedFd> {
    Ok(rustix::time::timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?)
}

/// Arms the timer at the absolute CLOCK_MONOTONIC time `at`, or disarms it.
pub fn timer_set(fd: &OwnedFd, at: Option<Instant>) -> io::Result<()> {
    // A zero it_value disarms; an absolute deadline of 0 ns is "now" anyway.
    let ns = at.map_or(0, |t| t.as_nanos().max(1));
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        },
    };
    rustix::time::timerfd_settime(fd, TimerfdTimerFlags::ABSTIME, &spec)?;
    Ok(())
}

pub fn eventfd() -> io::Result<OwnedFd> {
    use rustix::event::EventfdFlags;
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
    )?)
}

/// Reads and discards the 8-byte counter of an eventfd/timerfd; a
/// non-blocking fd with nothing to read is fine.
pub fn drain_counter(fd: BorrowedFd<'_>) -> u64 {
    let mut v = [0u8; 8];
    match rustix::io::read(fd, &mut v) {
        Ok(8) => u64::from_ne_bytes(v),
        _ => 0,
    }
}

/// Adds one to an eventfd counter. Async-signal-safe (only write(2)).
pub fn bump_counter(fd: BorrowedFd<'_>) {
    // An error (counter overflow) only means a wake-up is already pending.
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// A netlink socket of `protocol` (None: NETLINK_ROUTE, whose number is 0)
/// bound to the multicast `groups` (RTMGRP_*; 0: none), the kernel picking
/// the port id.
fn netlink(protocol: Option<Protocol>, groups: u32, flags: SocketFlags) -> io::Result<OwnedFd> {
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        flags | SocketFlags::CLOEXEC,
        protocol,
    )?;
    rustix::net::bind(&fd, &SocketAddrNetlink::new(0, groups))?;
    Ok(fd)
}

/// A NETLINK_ROUTE socket bound to the multicast `groups` (RTMGRP_*),
/// non-blocking.
pub fn netlink_route(groups: u32) -> io::Result<OwnedFd> {
    netlink(None, groups, SocketFlags::NONBLOCK)
}

/// One non-blocking receive into `buf`; `Ok(0)` when nothing is queued.
pub fn recv(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    match rustix::net::recv(fd, buf, rustix::net::RecvFlags::DONTWAIT) {
        Ok((n, _)) => Ok(n),
        Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Timer slack of this thread: the kernel may postpone a timer by up to
/// its slack (50 µs by default) to batch wake-ups; a delay line wants none.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // 0 (None) resets it to the thread's default, as prctl(2) says.
    rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(ns))?;
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
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) })?;
    Ok(())
}

/// A NETLINK_ROUTE socket for requests and their answers (no multicast
/// groups), blocking, with receives bounded by `timeout`: a request of
/// the exit path must not hang it.
pub fn netlink_route_requests(timeout: std::time::Duration) -> io::Result<OwnedFd> {
    netlink_requests(None, timeout)
}

/// [`netlink_route_requests`] for another netlink family (`protocol`:
/// `rustix::net::netlink::NETFILTER` for conntrack).
pub fn netlink_requests(
    protocol: Option<Protocol>,
    timeout: std::time::Duration,
) -> io::Result<OwnedFd> {
    let fd = netlink(protocol, 0, SocketFlags::empty())?;
    // Zero is the kernel's "for ever" (rustix refuses it): the least bound.
    let timeout = timeout.max(std::time::Duration::from_micros(1));
    rustix::net::sockopt::set_socket_timeout(
        &fd,
        rustix::net::sockopt::Timeout::Recv,
        Some(timeout),
    )?;
    Ok(fd)
}

/// Sends all of `buf` as one datagram (to the kernel, for an unconnected
/// netlink socket).
pub fn send(fd: impl AsFd, buf: &[u8]) -> io::Result<()> {
    let n = rustix::net::send(fd, buf, rustix::net::SendFlags::empty())?;
    if n != buf.len() {
        return Err(io::Error::other("short send on a datagram socket"));
    }
    Ok(())
}

/// One blocking receive into `buf` (EINTR retried); the socket's receive
/// timeout ends the wait with `TimedOut`.
pub fn recv_wait(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    let fd = fd.as_fd();
    loop {
        match rustix::net::recv(fd, &mut *buf, rustix::net::RecvFlags::empty()) {
            Ok((n, _)) => return Ok(n),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the kernel did not answer a netlink request",
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn watch(ep: &OwnedFd, fd: &OwnedFd, token: u64) {
        let ev = epoll::EventFlags::IN;
        epoll_ctl(ep, EpollOp::Add, fd.as_raw_fd(), ev, token).unwrap();
    }

    #[test]
    fn an_eventfd_bump_wakes_epoll_with_its_token_and_drains_once() {
        let (ep, efd) = (epoll_create().unwrap(), eventfd().unwrap());
        watch(&ep, &efd, 7);
        let mut evs = [epoll_event(), epoll_event()];
        assert_eq!(epoll_wait(&ep, &mut evs, 0).unwrap(), 0, "nothing yet");
        bump_counter(efd.as_fd());
        bump_counter(efd.as_fd());
        assert_eq!(epoll_wait(&ep, &mut evs, 100).unwrap(), 1);
        assert_eq!(evs[0].data.u64(), 7);
        assert_eq!(drain_counter(efd.as_fd()), 2);
        assert_eq!(drain_counter(efd.as_fd()), 0, "non-blocking and empty");
        epoll_ctl(
            &ep,
            EpollOp::Delete,
            efd.as_raw_fd(),
            epoll::EventFlags::empty(),
            0,
        )
        .unwrap();
        bump_counter(efd.as_fd());
        assert_eq!(
            epoll_wait(&ep, &mut evs, 0).unwrap(),
            0,
            "no longer watched"
        );
    }

    #[test]
    fn a_timer_armed_in_the_past_fires_at_once_and_disarming_silences_it() {
        let (ep, t) = (epoll_create().unwrap(), timerfd().unwrap());
        watch(&ep, &t, 3);
        let mut evs = [epoll_event()];
        timer_set(&t, Some(now())).unwrap();
        assert_eq!(epoll_wait(&ep, &mut evs, 1000).unwrap(), 1);
        assert_eq!(evs[0].data.u64(), 3);
        assert_eq!(drain_counter(t.as_fd()), 1);
        let later = now() + sluice_time::Duration::from_secs(3600);
        timer_set(&t, Some(later)).unwrap();
        timer_set(&t, None).unwrap();
        assert_eq!(epoll_wait(&ep, &mut evs, 0).unwrap(), 0);
    }

    #[test]
    fn the_clock_runs_forward_and_keys_differ() {
        let a = now();
        assert!(now() >= a);
        assert!(
            a > Instant::ZERO,
            "CLOCK_MONOTONIC starts at boot, not at 0"
        );
        assert_ne!(random_key().unwrap(), random_key().unwrap());
    }

    #[test]
    fn netlink_requests_time_out_rather_than_hang() {
        let fd = netlink_route_requests(std::time::Duration::from_millis(20)).unwrap();
        let mut buf = [0u8; 64];
        let e = recv_wait(&fd, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        let fd = netlink_route(0).unwrap();
        assert_eq!(
            recv(&fd, &mut buf).unwrap(),
            0,
            "non-blocking: nothing queued"
        );
    }
}
