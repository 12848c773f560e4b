//! The network between the hosts: sluice (the real engine), a modem each
//! way and the delay line, in virtual time. Hosts are the caller's: it
//! pulls what arrives for them ([`Net::poll`]) and sends through
//! [`Net::client_send`] and [`Net::server_send`].

use super::Link;
use crate::{Engine, Rx};
use sluice_time::{Instant, Rate};
use std::collections::{BTreeMap, VecDeque};

/// The engine's interfaces, as [`Options::bridge`](crate::Options::bridge)
/// numbers them.
pub const LAN: usize = 0;
pub const WAN: usize = 1;

/// A modem's FIFO in one direction: frames leave in order at its rate.
#[derive(Debug)]
pub struct Fifo {
    rate: Rate,
    cap: u64,
    /// (departure, bytes) of the frames not yet gone.
    queue: VecDeque<(Instant, u64)>,
    bytes: u64,
    /// Frames tail-dropped, and the most bytes ever held.
    pub drops: u64,
    pub max_bytes: u64,
}

impl Fifo {
    fn new(rate: Rate, cap: u64) -> Fifo {
        Fifo {
            rate,
            cap,
            queue: VecDeque::new(),
            bytes: 0,
            drops: 0,
            max_bytes: 0,
        }
    }

    fn expire(&mut self, at: Instant) {
        while let Some(&(d, l)) = self.queue.front() {
            if d > at {
                break;
            }
            self.queue.pop_front();
            self.bytes -= l;
        }
    }

    /// A frame of `len` bytes arrives at `at` (arrivals come in time
    /// order): when it has left, or `None` when the FIFO is full.
    fn push(&mut self, at: Instant, len: u64) -> Option<Instant> {
        self.expire(at);
        if self.bytes + len > self.cap {
            self.drops += 1;
            return None;
        }
        let start = self.queue.back().map_or(at, |&(d, _)| d.max(at));
        let done = start + self.rate.tx_time(len);
        self.queue.push_back((done, len));
        self.bytes += len;
        self.max_bytes = self.max_bytes.max(self.bytes);
        Some(done)
    }

    /// Bytes waiting (or being sent) at `at`.
    pub fn bytes_at(&mut self, at: Instant) -> u64 {
        self.expire(at);
        self.bytes
    }
}

/// What reaches a host.
#[derive(Debug)]
pub enum Arrival<T> {
    /// A frame sluice sent toward the LAN.
    Client(Vec<u8>),
    /// A frame that crossed the modem and the delay line to the server.
    Server(Vec<u8>),
    /// A host's timer.
    Timer(T),
}

#[derive(Debug)]
enum Ev<T> {
    ToSluice(usize, Vec<u8>),
    Arrive(Arrival<T>),
}

/// The network; `T` is the hosts' timer.
pub struct Net<T> {
    pub engine: Engine,
    link: Link,
    now: Instant,
    end: Instant,
    events: BTreeMap<(Instant, u64), Ev<T>>,
    seq: u64,
    /// The modem toward the LAN (before sluice) and toward the server.
    pub down: Fifo,
    pub up: Fifo,
    /// Frames sluice handed back, by cause name.
    pub engine_drops: BTreeMap<&'static str, u64>,
    /// The batch of events at `now` is done: sluice's output is due.
    batch: bool,
    stuck: u32,
}

impl<T> Net<T> {
    /// `engine` bridging `lan0` (LAN) and `wan0` (WAN) on the path `link`,
    /// at `now`.
    pub fn new(engine: Engine, link: Link, now: Instant) -> Net<T> {
        Net {
            engine,
            link,
            now,
            end: now,
            events: BTreeMap::new(),
            seq: 0,
            down: Fifo::new(link.down, link.fifo_bytes),
            up: Fifo::new(link.up, link.fifo_bytes),
            engine_drops: BTreeMap::new(),
            batch: false,
            stuck: 0,
        }
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// A host's timer fires at `t`.
    pub fn timer(&mut self, t: Instant, timer: T) {
        self.at(t, Ev::Arrive(Arrival::Timer(timer)));
    }

    fn at(&mut self, t: Instant, e: Ev<T>) {
        self.seq += 1;
        self.events.insert((t, self.seq), e);
    }

    /// A LAN host sends: the frame reaches sluice now (the LAN is instant);
    /// one it refuses is counted as sluice hands it back.
    pub fn client_send(&mut self, f: Vec<u8>) {
        let _: Rx = self.engine.handle_rx(self.now, LAN, f);
    }

    /// The server sends: the delay line, then the modem's FIFO, then sluice.
    pub fn server_send(&mut self, f: Vec<u8>) {
        let arrive = self.now + self.link.one_way;
        if let Some(gone) = self.down.push(arrive, f.len() as u64) {
            self.at(gone, Ev::ToSluice(WAN, f));
        }
    }

    /// Runs until `until`; [`poll`](Self::poll) returns `None` there.
    pub fn run_until(&mut self, until: Instant) {
        self.end = until;
    }

    /// The next thing that reaches a host, in time order, or `None` at the
    /// end set by [`run_until`](Self::run_until). Between batches of
    /// events at one time it serves sluice: its timer, and all it may send.
    pub fn poll(&mut self) -> Option<Arrival<T>> {
        loop {
            if let Some(entry) = self.events.first_entry() {
                if entry.key().0 <= self.now && self.batch {
                    match entry.remove() {
                        Ev::ToSluice(i, f) => {
                            let _: Rx = self.engine.handle_rx(self.now, i, f);
                        }
                        Ev::Arrive(a) => return Some(a),
                    }
                    continue;
                }
            }
            if self.batch {
                self.drain();
                self.batch = false;
            }
            if self.now >= self.end {
                return None;
            }
            self.advance();
        }
    }

    /// To the next event or sluice's deadline, no later than the end.
    fn advance(&mut self) {
        let ev = self.events.first_key_value().map(|(k, _)| k.0);
        let timer = self.engine.poll_timeout();
        let t = ev.into_iter().chain(timer).min().unwrap_or(self.end);
        let t = t.min(self.end);
        self.stuck = if t <= self.now { self.stuck + 1 } else { 0 };
        assert!(self.stuck < 1_000_000, "the simulation stands still");
        self.now = t.max(self.now);
        if timer.is_some_and(|d| d <= self.now) {
            self.engine.handle_timeout(self.now);
        }
        self.batch = true;
    }

    /// Everything sluice may send now, onto its wires; what it handed back,
    /// counted.
    fn drain(&mut self) {
        loop {
            let mut any = false;
            while let Some(f) = self.engine.poll_tx(self.now, LAN) {
                any = true;
                self.at(self.now, Ev::Arrive(Arrival::Client(f)));
            }
            while let Some(f) = self.engine.poll_tx(self.now, WAN) {
                any = true;
                if let Some(gone) = self.up.push(self.now, f.len() as u64) {
                    let t = gone + self.link.one_way;
                    self.at(t, Ev::Arrive(Arrival::Server(f)));
                }
            }
            if !any {
                break;
            }
        }
        while let Some(d) = self.engine.poll_dropped() {
            *self.engine_drops.entry(d.cause.name()).or_default() += 1;
        }
        while self.engine.poll_spare().is_some() {}
    }
}
