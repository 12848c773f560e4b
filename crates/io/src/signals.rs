//! SIGTERM/SIGINT/SIGHUP delivered as values to a waiting thread.
//!
//! # Principles
//! The handler does only async-signal-safe work: it sets an atomic flag and
//! bumps an eventfd (write(2)). A dedicated thread blocks in
//! [`Signals::wait`] and acts (stop, reload) with ordinary locks, so no lock
//! is ever taken in signal context.

use crate::sys;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static FD: AtomicI32 = AtomicI32::new(-1);
static TERM: AtomicBool = AtomicBool::new(false);
static HUP: AtomicBool = AtomicBool::new(false);

/// What arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM or SIGINT: stop.
    Stop,
    /// SIGHUP: reload.
    Reload,
}

/// Installed handlers; only one instance per process is meaningful.
pub struct Signals {
    fd: OwnedFd,
}

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGHUP {
        HUP.store(true, Ordering::SeqCst);
    } else {
        TERM.store(true, Ordering::SeqCst);
    }
    let fd = FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: `FD` holds the eventfd of the live `Signals` (set after
        // it was created; the process keeps one for its lifetime), so the
        // descriptor is open for this borrow, which ends with the write.
        sys::bump_counter(unsafe { BorrowedFd::borrow_raw(fd) });
    }
}

impl Signals {
    /// Installs handlers for SIGTERM, SIGINT and SIGHUP.
    pub fn install() -> io::Result<Signals> {
        let efd = sys::eventfd()?;
        // The waiting thread blocks; make this eventfd blocking.
        rustix::fs::fcntl_setfl(&efd, rustix::fs::OFlags::empty())?;
        FD.store(efd.as_raw_fd(), Ordering::SeqCst);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            // SAFETY: an all-zero sigaction is valid; the handler is an
            // `extern "C" fn(c_int)` doing only async-signal-safe work.
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            // SAFETY: `sa` is initialised; the old action is not needed.
            sys::cvt(unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) })?;
        }
        Ok(Signals { fd: efd })
    }

    /// Blocks until a signal arrives; a stop wins over a reload.
    pub fn wait(&self) -> Signal {
        // Each wake-up consumes the counter; a spurious one loops again.
        loop {
            if TERM.swap(false, Ordering::SeqCst) {
                return Signal::Stop;
            }
            if HUP.swap(false, Ordering::SeqCst) {
                return Signal::Reload;
            }
            sys::drain_counter(self.fd.as_fd());
        }
    }

    /// Makes a blocked [`Signals::wait`] return `Stop` (e.g. the loop ended
    /// on its own and the signal thread must exit).
    pub fn stop(&self) {
        TERM.store(true, Ordering::SeqCst);
        sys::bump_counter(self.fd.as_fd());
    }
}
