//! Thin, checked wrappers over the few syscalls the data plane uses.
//!
//! # Principles
//! The syscalls without a socket family of their own (clock, epoll,
//! timerfd, eventfd, netlink, getrandom) live here, each `unsafe` block with
//! the reason it is sound; socket options and interface ioctls are in
//! `sockopt.rs`, packet and XDP sockets in `sock.rs` and `xdp/`. Wrappers
//! turn `-1` into `io::Error` and own their descriptors (`OwnedFd`), so no
//! path leaks one.

use sluice_time::Instant;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Current CLOCK_MONOTONIC time, the engine's clock.
pub fn now() -> Instant {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists
    // on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
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
        let rest = &mut key[filled..];
        // SAFETY: the pointer/length pair describes the writable tail of `key`.
        let r = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += r as usize;
        }
    }
    if filled == key.len() {
        Ok(key)
    } else {
        Err(io::Error::other("getrandom returned too few bytes"))
    }
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by a successful syscall and is owned by
    // nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall without pointers.
    owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
}

pub fn epoll_ctl(
    ep: &OwnedFd,
    op: libc::c_int,
    fd: RawFd,
    events: u32,
    token: u64,
) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: `ev` is a valid epoll_event for the duration of the call; the
    // kernel copies it.
    cvt(unsafe { libc::epoll_ctl(ep.as_raw_fd(), op, fd, &mut ev) })?;
    Ok(())
}

/// Waits for events; EINTR is reported as zero events (a signal arrived).
pub fn epoll_wait(
    ep: &OwnedFd,
    events: &mut [libc::epoll_event],
    timeout_ms: i32,
) -> io::Result<usize> {
    let cap = events.len().min(i32::MAX as usize) as i32;
    // SAFETY: `events` is a writable array of `cap` epoll_event entries.
    let r = unsafe { libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), cap, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

pub fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall without pointers.
    owned(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    })
}

/// Arms the timer at the absolute CLOCK_MONOTONIC time `at`, or disarms it.
pub fn timer_set(fd: &OwnedFd, at: Option<Instant>) -> io::Result<()> {
    // A zero it_value disarms; an absolute deadline of 0 ns is "now" anyway.
    let ns = at.map_or(0, |t| t.as_nanos().max(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: `spec` is valid for reading; the old value pointer may be null.
    cvt(unsafe {
        libc::timerfd_settime(
            fd.as_raw_fd(),
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    })?;
    Ok(())
}

pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall without pointers.
    owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
}

/// Reads and discards the 8-byte counter of an eventfd/timerfd; a
/// non-blocking fd with nothing to read is fine.
pub fn drain_counter(fd: RawFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into `v`, which is 8 bytes long.
    let r = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if r == 8 {
        v
    } else {
        0
    }
}

/// Adds one to an eventfd counter. Async-signal-safe (only write(2)).
pub fn bump_counter(fd: RawFd) {
    let v = 1u64;
    // SAFETY: writes the 8 bytes of `v`; an error (counter overflow) only
    // means a wake-up is already pending.
    unsafe { libc::write(fd, (&v as *const u64).cast(), 8) };
}

/// Binds `fd` to `addr`, one of libc's `sockaddr_*` structs (its size is
/// the length the kernel expects for the family).
pub fn bind<T>(fd: RawFd, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` is a live `T` the kernel only reads, for its exact size;
    // the kernel checks the family and the length itself.
    cvt(unsafe {
        libc::bind(
            fd,
            (addr as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// A NETLINK_ROUTE socket bound to the multicast `groups` (RTMGRP_*),
/// non-blocking.
pub fn netlink_route(groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall without pointers.
    let fd = owned(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: an all-zero sockaddr_nl is valid; fields are set below.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa.nl_groups = groups;
    bind(fd.as_raw_fd(), &sa)?;
    Ok(fd)
}

/// One non-blocking receive into `buf`; `Ok(0)` when nothing is queued.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length for the call's duration.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
            _ => Err(e),
        };
    }
    Ok(r as usize)
}

/// Timer slack of this thread: the kernel may postpone a timer by up to
/// its slack (50 µs by default) to batch wake-ups; a delay line wants none.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument, no pointers; it
    // only affects the calling thread.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) })?;
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
    netlink_requests(libc::NETLINK_ROUTE, timeout)
}

/// [`netlink_route_requests`] for another netlink family (`protocol`:
/// `NETLINK_NETFILTER` for conntrack).
pub fn netlink_requests(
    protocol: libc::c_int,
    timeout: std::time::Duration,
) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall without pointers.
    let fd = owned(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
        )
    })?;
    // SAFETY: an all-zero sockaddr_nl is valid (port id 0: the kernel picks one).
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    bind(fd.as_raw_fd(), &sa)?;
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    crate::sockopt::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
    Ok(fd)
}

/// Sends all of `buf` as one datagram (to the kernel, for an unconnected
/// netlink socket).
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    // SAFETY: `buf` is readable for its length for the call's duration.
    let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if r as usize != buf.len() {
        return Err(io::Error::other("short send on a datagram socket"));
    }
    Ok(())
}

/// One blocking receive into `buf` (EINTR retried); the socket's receive
/// timeout ends the wait with `TimedOut`.
pub fn recv_wait(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is writable for its length for the call's duration.
        let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the kernel did not answer a netlink request",
                ))
            }
            _ => return Err(e),
        }
    }
}
