//! The metrics endpoint's HTTP/1.0 server: accept, serve each request
//! (a scrape, the dashboard or its JSON: [`super::dashboard`]) on a thread
//! of its own up to [`MAX_CLIENTS`], refuse beyond it.
//!
//! # Principles
//! - A request head is read up to [`MAX_HEAD_BYTES`] within
//!   [`CLIENT_TIMEOUT`] of the accept, in total, and the answer written
//!   within as long again: a slow client holds one thread for seconds.
//! - The accept thread never waits on a client: one over the cap gets its
//!   503 without blocking, and its connection is drained between accepts
//!   (bounded in number and time) so that the close does not reset it.

use super::dashboard::{answer, Answer};
use crate::conn::Deadlined;
use crate::DaemonState;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An HTTP request head longer than this is answered 431 and dropped.
pub const MAX_HEAD_BYTES: usize = 8192;
/// Input read and discarded after refusing an oversized head.
const MAX_DRAIN_BYTES: u64 = 1 << 20;
/// Time a client has to send its whole request head, counted from the
/// accept however the bytes trickle in; the answer gets as long again.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Scrapes served at once. Anyone local can connect: 8 leave room for a
/// few Prometheus servers and curls while slow clients are waited out, and
/// bound the threads (and engine-lock takers) anyone can make.
pub const MAX_CLIENTS: usize = 8;
/// How often the idle server looks at `stop` (see the socket server).
const STOP_POLL: Duration = Duration::from_millis(50);

/// Serves `GET /metrics` and the dashboard on `addr` until `state.stop`
/// is set.
pub fn spawn_metrics(addr: SocketAddr, state: Arc<DaemonState>) -> io::Result<JoinHandle<()>> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("sluice-metrics".into())
        .spawn(move || {
            let slots = state.clients.metrics.clone();
            let mut refused = Refused::default();
            while !state.stop.load(Ordering::SeqCst) {
                refused.poll(Instant::now());
                match listener.accept() {
                    Ok((s, _)) => {
                        let st = state.clone();
                        slots.serve(
                            "sluice-scrape",
                            s,
                            |s| refused.add(s, Instant::now()),
                            move |s| drop(scrape(s, &st)),
                        );
                    }
                    Err(_) => std::thread::sleep(STOP_POLL),
                }
            }
        })
}

/// How long a refused client's connection stays open for its request to
/// be read: closing on unread input would reset the connection before the
/// client reads its 503.
const REFUSED_LINGER: Duration = Duration::from_secs(1);
/// Refused connections kept open at once; beyond it the oldest is closed.
const MAX_REFUSED: usize = 64;

/// Clients over [`MAX_CLIENTS`], answered 503 at once and then drained
/// by the accept loop between accepts, never waited for: the socket is
/// non-blocking, the answer fits a fresh socket's send buffer.
#[derive(Default)]
struct Refused(Vec<(TcpStream, Instant)>);

impl Refused {
    fn add(&mut self, mut s: TcpStream, now: Instant) {
        // Accepted sockets do not inherit the listener's O_NONBLOCK.
        let answered = s.set_nonblocking(true).and_then(|()| {
            respond(
                &mut s,
                "503 Service Unavailable",
                "busy: too many scrapes at once\n",
            )
        });
        if answered.and_then(|()| s.shutdown(Shutdown::Write)).is_err() || drained(&mut s) {
            return;
        }
        if self.0.len() >= MAX_REFUSED {
            self.0.remove(0);
        }
        self.0.push((s, now + REFUSED_LINGER));
    }

    /// Closes those whose client is done (or out of time).
    fn poll(&mut self, now: Instant) {
        self.0.retain_mut(|(s, until)| now < *until && !drained(s));
    }
}

/// Reads what has arrived on non-blocking `s` (bounded); true once the
/// client has closed its side (or the connection failed).
fn drained(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    for _ in 0..MAX_HEAD_BYTES / buf.len() {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => return e.kind() != io::ErrorKind::WouldBlock,
        }
    }
    false
}

fn scrape(s: TcpStream, state: &DaemonState) -> io::Result<()> {
    s.set_nonblocking(false)?;
    let mut s = Deadlined::new(s, CLIENT_TIMEOUT, CLIENT_TIMEOUT);
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    // Bounded by MAX_HEAD_BYTES (each read adds at least one byte or ends).
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() > MAX_HEAD_BYTES {
            respond(&mut s, "431 Request Header Fields Too Large", "")?;
            // Closing with unread input would reset the connection before
            // the client reads the answer: send FIN, then drain (bounded).
            s.stream.shutdown(std::net::Shutdown::Write)?;
            let _ = io::copy(&mut (&mut s).take(MAX_DRAIN_BYTES), &mut io::sink());
            return Ok(());
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(buf.get(..n).unwrap_or(&[]));
    }
    s.write_by = Instant::now() + CLIENT_TIMEOUT;
    let first = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let first = String::from_utf8_lossy(first);
    let mut words = first.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    answer(method, path, state).write(&mut s, method == "HEAD")
}

fn respond(s: &mut impl Write, status: &'static str, body: &'static str) -> io::Result<()> {
    Answer::text(status, body).write(s, false)
}
