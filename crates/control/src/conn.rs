//! What both servers (the control socket and the metrics endpoint) share to
//! stay bounded against slow clients: total deadlines for reading a request
//! and writing a reply, and a cap on the clients served at once.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A stream whose per-call timeouts can be set (both kinds of socket).
pub(crate) trait Timeouts {
    fn read_timeout(&self, d: Duration) -> io::Result<()>;
    fn write_timeout(&self, d: Duration) -> io::Result<()>;
}

impl Timeouts for UnixStream {
    fn read_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(d))
    }
    fn write_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(d))
    }
}

impl Timeouts for TcpStream {
    fn read_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(d))
    }
    fn write_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(d))
    }
}

/// A stream with a total deadline for reading and one for writing: before
/// each read (write) the socket's timeout is shrunk to the time left, so a
/// client that trickles bytes (or reads a byte now and then) cannot extend
/// it; past the deadline every call fails with `TimedOut`.
pub(crate) struct Deadlined<S> {
    pub stream: S,
    pub read_by: Instant,
    pub write_by: Instant,
}

impl<S> Deadlined<S> {
    pub fn new(stream: S, read_for: Duration, write_for: Duration) -> Self {
        let now = Instant::now();
        Deadlined {
            stream,
            read_by: now + read_for,
            write_by: now + write_for,
        }
    }
}

fn left(by: Instant) -> io::Result<Duration> {
    let d = by.saturating_duration_since(Instant::now());
    if d.is_zero() {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client's deadline passed",
        ))
    } else {
        Ok(d)
    }
}

impl<S: Timeouts> Read for Deadlined<S>
where
    for<'a> &'a S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read_timeout(left(self.read_by)?)?;
        (&self.stream).read(buf)
    }
}

impl<S: Timeouts> Write for Deadlined<S>
where
    for<'a> &'a S: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write_timeout(left(self.write_by)?)?;
        (&self.stream).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&self.stream).flush()
    }
}

/// Clients served at once by one server, up to a cap; the refused ones
/// are counted.
#[derive(Debug)]
pub struct Slots {
    cap: usize,
    busy: AtomicUsize,
    /// Connections refused because `cap` clients were being served.
    pub refused: AtomicU64,
}

impl Slots {
    pub fn new(cap: usize) -> Self {
        Slots {
            cap,
            busy: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Clients served at once at most.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Clients being served now.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// A slot, held until dropped, or `None` (counted) at the cap.
    pub(crate) fn take(self: &Arc<Self>) -> Option<Slot> {
        let got = self
            .busy
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.cap).then_some(n + 1)
            })
            .is_ok();
        if got {
            Some(Slot(self.clone()))
        } else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

impl Slots {
    /// Serves one accepted connection on a thread of its own, holding a
    /// slot until it ends; at the cap (or if no thread can be had) the
    /// connection is counted and handed to `refuse` on the caller's thread.
    /// The one accept policy of both servers.
    pub(crate) fn serve<S: Send + 'static>(
        self: &Arc<Self>,
        thread_name: &str,
        stream: S,
        refuse: impl FnOnce(S),
        serve: impl FnOnce(S) + Send + 'static,
    ) {
        let Some(slot) = self.take() else {
            refuse(stream);
            return;
        };
        // Errors of one client (gone, too slow, refused) are its own.
        let spawned = std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || {
                let _slot = slot;
                serve(stream);
            });
        if spawned.is_err() {
            // No thread (the slot and stream went with the closure).
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One client being served; its slot is free again when this is dropped.
pub(crate) struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The servers' client slots, by server (in [`crate::DaemonState`]).
#[derive(Debug)]
pub struct Clients {
    pub control: Arc<Slots>,
    pub metrics: Arc<Slots>,
}

impl Clients {
    /// Slots for at most `control` clients of the control socket and
    /// `metrics` scrapes at once (each server's `MAX_CLIENTS`).
    pub fn new(control: usize, metrics: usize) -> Clients {
        Clients {
            control: Arc::new(Slots::new(control)),
            metrics: Arc::new(Slots::new(metrics)),
        }
    }
}
