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
    /// While watched ([`Fifo::watch`]): (arrival, start of sending, bytes)
    /// of the frames not yet being sent, for [`Fifo::waiting_at`].
    watched: Option<VecDeque<(Instant, Instant, u64)>>,
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
            watched: None,
        }
    }

    /// Keeps what [`Fifo::waiting_at`] needs from now on (each frame's
    /// arrival and start, until it starts).
    pub fn watch(&mut self) {
        self.watched.get_or_insert_with(VecDeque::new);
    }

    /// Bytes that have arrived by `at` and wait behind the frame being
    /// sent (`at` never earlier than the last call's): the modem's backlog
    /// as its queue holds it, not what is still on the delay line before
    /// it. `None` unless watched.
    pub fn waiting_at(&mut self, at: Instant) -> Option<u64> {
        let w = self.watched.as_mut()?;
        while w.front().is_some_and(|&(_, start, _)| start <= at) {
            w.pop_front();
        }
        Some(
            w.iter()
                .filter(|&&(a, _, _)| a <= at)
                .map(|&(_, _, l)| l)
                .sum(),
        )
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
        let done = if self.rate == super::INSTANT {
            start
        } else {
            start + self.rate.tx_time(len)
        };
        if let Some(w) = self.watched.as_mut() {
            w.push_back((at, start, len));
        }
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
    /// Frames sluice sent toward the server, by IP protocol (0: not IP).
    pub sent_up: BTreeMap<u8, u64>,
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
            sent_up: BTreeMap::new(),
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
                let proto = sluice_wire::parse(&f)
                    .ok()
                    .and_then(|i| i.ip)
                    .map_or(0, |ip| ip.proto);
                *self.sent_up.entry(proto).or_default() += 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_time::Duration;

    fn at(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn the_backlog_is_what_arrived_and_waits_behind_the_frame_being_sent() {
        // 1 Mbit/s: a 125-byte frame takes 1 ms.
        let mut f = Fifo::new(Rate::mbps(1), u64::MAX);
        assert_eq!(f.waiting_at(at(0)), None, "not watched");
        f.watch();
        // Three frames pushed now that arrive at 10 ms (still on the delay
        // line before it), one more at 10.5 ms.
        for _ in 0..3 {
            f.push(at(10_000), 125);
        }
        f.push(at(10_500), 125);
        assert_eq!(f.waiting_at(at(5_000)), Some(0), "on the delay line");
        assert_eq!(f.waiting_at(at(10_000)), Some(250), "one being sent");
        assert_eq!(f.waiting_at(at(10_600)), Some(375));
        assert_eq!(f.waiting_at(at(11_000)), Some(250));
        assert_eq!(f.waiting_at(at(13_000)), Some(0), "the last being sent");
        assert_eq!(f.bytes_at(at(13_000)), 125);
    }

    #[test]
    fn an_instant_link_takes_no_time() {
        let mut f = Fifo::new(crate::testing::netsim::INSTANT, u64::MAX);
        assert_eq!(f.push(at(7), 1514), Some(at(7)));
        assert_eq!(
            f.push(at(7), 1514),
            Some(at(7)),
            "sent together, arrive together"
        );
    }

    #[test]
    fn what_sluice_sends_toward_the_server_is_counted_by_protocol() {
        let cfg = sluice_conf::check("t.conf", "pass\n", &[]).unwrap().config;
        let e = Engine::new(&cfg, crate::Options::bridge("lan0", "wan0", [7; 16])).unwrap();
        let link = Link {
            down: Rate::mbps(10),
            up: Rate::mbps(10),
            fifo_bytes: 1 << 20,
            one_way: Duration::from_millis(5),
        };
        let mut n: Net<()> = Net::new(e, link, at(0));
        let (a, b) = ([192, 168, 1, 10].into(), [198, 51, 100, 1].into());
        n.client_send(sluice_wire::build::udp_v4(a, b, 5000, 5001, 100));
        n.run_until(at(100_000));
        let mut arrived = 0;
        while let Some(a) = n.poll() {
            arrived += usize::from(matches!(a, Arrival::Server(_)));
        }
        assert_eq!(arrived, 1);
        assert_eq!(n.sent_up, BTreeMap::from([(17, 1)]));
    }
}
