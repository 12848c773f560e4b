//! A virtual-time network around the real engine, in the spirit of
//! smoltcp's `netsim` and quinn's test `Pair`: LAN hosts, sluice, a modem
//! and a delay line to a server, with ACK-clocked TCP in the hosts.
//!
//! # Principles
//! - The engine is the real one: every frame enters through
//!   [`Engine::handle_rx`] and leaves through [`Engine::poll_tx`]; time
//!   jumps to the next event (a frame's arrival, a host's timer, or
//!   [`Engine::poll_timeout`]), never by a fixed step.
//! - The path, each direction: LAN host ⇄ sluice (`lan0` | `wan0`) ⇄
//!   modem ⇄ delay line ⇄ server. The modem is the bottleneck: a rate and
//!   a FIFO of bounded bytes, tail-dropping, as a DSL or cable modem; the
//!   LAN is instant. A download meets the modem before sluice, an upload
//!   after it.
//! - Hosts: per flow one TCP sender and receiver ([`tcp`]), timestamps on
//!   every segment as Linux sends them, its own client address; one
//!   pinger (ICMP echo at a fixed interval) whose round trips are the
//!   latency under load.
//! - Deterministic: events are ordered by (time, sequence of scheduling);
//!   nothing random, no clock, no hash-map order in any output.
//! - [`net`] is the network alone (sluice, modems, delay line), for any
//!   hosts: a test with hosts of its own pulls their arrivals from
//!   [`Net::poll`]; [`Sim`] is the hosts of a [`Load`] on it.
//! - [`case`] builds a fixed set of configurations on [`Sim`]; the engine's
//!   snapshot test (`tests/netsim.rs`) pins their outcomes.

pub mod case;
pub mod net;
pub mod tcp;

use crate::Engine;
pub use net::{Arrival, Net, LAN, WAN};
use sluice_time::{Duration, Instant, Rate};
use sluice_wire::build::{echo_reply_to, icmp_v4_echo};
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, SYN};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use tcp::{AckNow, Block, Receiver, Sender, MSS, RWND_FIELD, WSCALE};

/// The server every flow and the pinger talk to.
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const SERVER_PORT: u16 = 5201;
/// The pinger's host and ICMP identifier.
pub const PINGER: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 200);
const PING_ID: u16 = 7;
const DELACK: Duration = Duration::from_millis(40);
const RTO: Duration = Duration::from_secs(1);
/// How often senders check their retransmission timer.
const TICK: Duration = Duration::from_millis(10);

/// The client host of flow `i`.
pub fn client(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(192, 168, 1, 10 + (i % 180) as u8)
}

/// Which way the bulk flows' data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Server to LAN clients.
    Down,
    /// LAN clients to the server.
    Up,
}

/// A [`Link`] rate that takes no time: frames sent together arrive
/// together.
pub const INSTANT: Rate = Rate(u64::MAX);

/// The path beyond sluice.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// The modem's rate toward the LAN, and toward the server;
    /// [`INSTANT`]: no modem that way, frames pass at once.
    pub down: Rate,
    pub up: Rate,
    /// The modem's FIFO in each direction, bytes.
    pub fifo_bytes: u64,
    /// One way from the modem to the server.
    pub one_way: Duration,
}

/// What runs over the path.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub flows: usize,
    pub dir: Dir,
    /// The pinger's interval.
    pub ping_every: Duration,
    /// Outcomes count from this time on, to the end.
    pub warmup: Duration,
    pub duration: Duration,
}

/// What a run measured after its warm-up.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Each flow's goodput (bytes delivered in order at its receiver).
    pub goodput: Vec<Rate>,
    /// The pinger's round trips, sorted.
    pub rtts: Vec<Duration>,
    /// Echo requests sent after the warm-up that got no reply.
    pub pings_lost: u64,
    /// Frames sluice handed back, by cause name.
    pub engine_drops: BTreeMap<&'static str, u64>,
    /// Frames the modem's FIFOs tail-dropped.
    pub modem_drops: u64,
    /// The senders' retransmissions and timeouts.
    pub retransmits: u64,
    pub timeouts: u64,
    /// Where autorate left the shapers (LAN side, WAN side) at the end,
    /// and how many decisions it logged; `None` without autorate.
    pub autorate: Option<(Rate, Rate, u64)>,
    /// Each direction's health at the end (LAN side, WAN side), and the
    /// verdict changes on the way (crate::health).
    pub health: [Option<crate::health::HealthReport>; 2],
    pub health_changes: Vec<(String, crate::health::HealthChange)>,
}

impl Outcome {
    /// Jain's fairness index of the goodputs (1: equal shares).
    pub fn jain(&self) -> f64 {
        let x: Vec<f64> = self.goodput.iter().map(|r| r.as_bps() as f64).collect();
        let (s, q) = (x.iter().sum::<f64>(), x.iter().map(|v| v * v).sum::<f64>());
        if q == 0.0 {
            return 0.0;
        }
        s * s / (x.len() as f64 * q)
    }

    /// The `p`-th percentile round trip (nearest rank).
    pub fn rtt_percentile(&self, p: usize) -> Option<Duration> {
        let n = self.rtts.len();
        (n > 0).then(|| self.rtts[((n * p).div_ceil(100)).clamp(1, n) - 1])
    }

    pub fn total(&self) -> Rate {
        Rate(self.goodput.iter().map(|r| r.as_bps()).sum())
    }
}

/// The hosts' timers.
#[derive(Debug)]
enum Timer {
    Open(usize),
    DelAck { flow: usize, at_server: bool },
    Ping,
    Tick,
}

/// One flow's two ends.
#[derive(Debug, Default)]
struct Flow {
    tx: Sender,
    rx: Receiver,
    /// The latest TSval each end received (client, server): its TSecr.
    ts_recent: [u32; 2],
}

/// The simulation: the hosts of a [`Load`] on a [`Net`].
pub struct Sim {
    net: Net<Timer>,
    load: Load,
    start: Instant,
    flows: Vec<Flow>,
    ping_seq: u16,
    /// Echo requests in flight: sequence → sent at.
    pings: BTreeMap<u16, Instant>,
    out: Outcome,
}

impl Sim {
    /// `engine` bridging `lan0` (LAN) and `wan0` (WAN), the path `link`,
    /// the traffic `load`. Flows open 1 ms apart from t = 1 s.
    pub fn new(engine: Engine, link: Link, load: Load) -> Sim {
        let start = Instant::ZERO + Duration::from_secs(1);
        let mut net = Net::new(engine, link, start);
        for i in 0..load.flows {
            net.timer(start + Duration::from_millis(i as u64), Timer::Open(i));
        }
        net.timer(start, Timer::Ping);
        net.timer(start, Timer::Tick);
        Sim {
            net,
            load,
            start,
            flows: (0..load.flows).map(|_| Flow::default()).collect(),
            ping_seq: 0,
            pings: BTreeMap::new(),
            out: Outcome::default(),
        }
    }

    fn counting(&self) -> bool {
        self.net.now() >= self.start + self.load.warmup
    }

    /// Runs the load to its end and returns what it measured.
    pub fn run(mut self) -> Outcome {
        self.net.run_until(self.start + self.load.duration);
        while let Some(a) = self.net.poll() {
            match a {
                Arrival::Client(f) => self.client_rx(f),
                Arrival::Server(f) => self.server_rx(f),
                Arrival::Timer(t) => self.timer(t),
            }
        }
        self.finish()
    }

    fn finish(mut self) -> Outcome {
        let secs = self.load.duration.as_nanos() - self.load.warmup.as_nanos();
        self.out.goodput = self
            .flows
            .iter()
            .map(|f| Rate((f.rx.delivered as u128 * 8 * 1_000_000_000 / secs as u128) as u64))
            .collect();
        self.out.rtts.sort();
        // A reply still owed a second before the end is lost.
        let late = self.net.now() - Duration::from_secs(1);
        let warm = self.start + self.load.warmup;
        self.out.pings_lost = self
            .pings
            .values()
            .filter(|&&t| t >= warm && t < late)
            .count() as u64;
        self.out.modem_drops = self.net.down.drops + self.net.up.drops;
        self.out.engine_drops = std::mem::take(&mut self.net.engine_drops);
        self.out.retransmits = self.flows.iter().map(|f| f.tx.retransmits).sum();
        self.out.timeouts = self.flows.iter().map(|f| f.tx.timeouts).sum();
        let e = &mut self.net.engine;
        self.out.health = [e.health(LAN), e.health(WAN)];
        while let Some(c) = e.poll_health() {
            self.out.health_changes.push(c);
        }
        if e.report().iter().any(|r| r.autorate.is_some()) {
            let (down, up) = (e.rate(LAN), e.rate(WAN));
            let (down, up) = (down.unwrap_or(Rate::ZERO), up.unwrap_or(Rate::ZERO));
            let mut logged = 0;
            while e.poll_autorate().is_some() {
                logged += 1;
            }
            self.out.autorate = Some((down, up, logged));
        }
        self.out
    }

    fn timer(&mut self, t: Timer) {
        match t {
            Timer::Open(i) => {
                let syn = self.segment(i, true, 0, 0, SYN, &syn_opts(), 0);
                self.net.client_send(syn);
            }
            Timer::DelAck { flow, at_server } => {
                if self.flows[flow].rx.on_delack() {
                    self.send_ack(flow, at_server);
                }
            }
            Timer::Ping => {
                let f = icmp_v4_echo(PINGER, SERVER, PING_ID, self.ping_seq, 56);
                self.pings.insert(self.ping_seq, self.net.now());
                self.ping_seq = self.ping_seq.wrapping_add(1);
                self.net.client_send(f);
                self.net
                    .timer(self.net.now() + self.load.ping_every, Timer::Ping);
            }
            Timer::Tick => {
                for i in 0..self.flows.len() {
                    let tx = &mut self.flows[i].tx;
                    if tx.open && tx.nxt > tx.una && self.net.now() - tx.progress >= RTO {
                        tx.on_timeout(self.net.now());
                        self.push_data(i);
                    }
                }
                self.net.timer(self.net.now() + TICK, Timer::Tick);
            }
        }
    }

    /// Whether the data sender of the flows is the server.
    fn server_sends(&self) -> bool {
        self.load.dir == Dir::Down
    }

    /// Sends segment `seq` of flow `i` from its data sender.
    fn send_data(&mut self, i: usize, seq: u64) {
        let from_client = !self.server_sends();
        let f = self.segment(i, from_client, seq as u32, 1, ACK, &[], MSS as usize);
        if from_client {
            self.net.client_send(f);
        } else {
            self.net.server_send(f);
        }
    }

    /// New segments of flow `i`, as far as its windows allow.
    fn push_data(&mut self, i: usize) {
        while let Some(seq) = self.flows[i].tx.next_new() {
            self.send_data(i, seq);
        }
    }

    /// A pure ACK from flow `i`'s receiver (at the server, or the client).
    fn send_ack(&mut self, i: usize, at_server: bool) {
        let ack = self.flows[i].rx.nxt as u32;
        let opts = sack_opts(&self.flows[i].rx.sack_blocks());
        let f = self.segment(i, !at_server, 1, ack, ACK, &opts, 0);
        if at_server {
            self.net.server_send(f);
        } else {
            self.net.client_send(f);
        }
    }

    /// A segment arrives at the data end or the ACK end of flow `i`.
    fn tcp_rx(&mut self, f: &[u8], at_server: bool) {
        let Some(s) = read(f) else { return };
        let i = s.flow;
        if i >= self.flows.len() {
            return;
        }
        if let Some((tsval, _)) = s.ts {
            self.flows[i].ts_recent[usize::from(at_server)] = tsval;
        }
        if s.flags & SYN != 0 {
            if at_server {
                let sa = self.segment(i, false, 0, 1, SYN | ACK, &syn_opts(), 0);
                self.net.server_send(sa);
            } else {
                // SYN-ACK: its window is not scaled.
                let ack = self.segment(i, true, 1, 1, ACK, &[], 0);
                self.net.client_send(ack);
                if !self.server_sends() {
                    self.flows[i].tx.establish(self.net.now(), u64::from(s.win));
                    self.push_data(i);
                }
            }
            return;
        }
        let sender_here = at_server == self.server_sends();
        if s.len > 0 && !sender_here {
            let counting = self.counting();
            match self.flows[i].rx.on_data(s.seq, counting) {
                AckNow::Yes => self.send_ack(i, at_server),
                AckNow::Delay => {
                    if !self.flows[i].rx.delack_armed {
                        self.flows[i].rx.delack_armed = true;
                        let flow = i;
                        self.net
                            .timer(self.net.now() + DELACK, Timer::DelAck { flow, at_server });
                    }
                }
            }
            return;
        }
        if !sender_here {
            return;
        }
        let tx = &mut self.flows[i].tx;
        if !tx.open {
            // The handshake's third segment: the server may send.
            tx.establish(self.net.now(), u64::from(s.win) << WSCALE);
        } else {
            for seq in tx.on_ack(self.net.now(), s.ack, s.win, &s.sack) {
                self.send_data(i, seq);
            }
        }
        self.push_data(i);
    }

    /// A segment of flow `i`, from its client or to it, stamped as Linux
    /// stamps every segment (RFC 7323: a 1 kHz clock, an offset per host,
    /// the peer's latest TSval echoed), then the options `opts`.
    #[allow(clippy::too_many_arguments)]
    fn segment(
        &self,
        i: usize,
        from_client: bool,
        seq: u32,
        ack: u32,
        flags: u8,
        opts: &[u8],
        len: usize,
    ) -> Vec<u8> {
        let offset = if from_client {
            1000 + 7919 * i as u32
        } else {
            0x0100_0000
        };
        let tsval = ((self.net.now().as_nanos() / 1_000_000) as u32).wrapping_add(offset);
        let tsecr = self
            .flows
            .get(i)
            .map_or(0, |f| f.ts_recent[usize::from(!from_client)]);
        let mut o = vec![1, 1];
        TcpOption::Timestamps { tsval, tsecr }.encode(&mut o);
        o.extend_from_slice(opts);
        conn(i).seg(from_client, seq, ack, flags, &o, len)
    }

    fn server_rx(&mut self, f: Vec<u8>) {
        if f.get(14 + 9) == Some(&1) {
            if let Some(r) = echo_reply_to(&f) {
                self.net.server_send(r);
            }
            return;
        }
        self.tcp_rx(&f, true);
    }

    fn client_rx(&mut self, f: Vec<u8>) {
        if f.get(14 + 9) == Some(&1) {
            // An echo reply: its sequence number at ICMP offset 6.
            let at = 14 + 20 + 6;
            if let Some(b) = f.get(at..at + 2) {
                let seq = u16::from_be_bytes([b[0], b[1]]);
                if let Some(sent) = self.pings.remove(&seq) {
                    if sent >= self.start + self.load.warmup {
                        self.out.rtts.push(self.net.now() - sent);
                    }
                }
            }
            return;
        }
        self.tcp_rx(&f, false);
    }
}

/// The options of both ends' SYN: MSS, window scale, SACK permitted.
fn syn_opts() -> Vec<u8> {
    let mut o = Vec::new();
    // 1448 bytes of payload beside the timestamps, as Linux on a 1500 MTU.
    TcpOption::Mss(MSS as u16 + 12).encode(&mut o);
    TcpOption::WindowScale(WSCALE).encode(&mut o);
    o.push(1);
    TcpOption::SackPermitted.encode(&mut o);
    o
}

/// SACK blocks as an ACK carries them (two NOPs align them).
fn sack_opts(blocks: &[Block]) -> Vec<u8> {
    if blocks.is_empty() {
        return Vec::new();
    }
    let mut o = vec![1, 1, 5, 2 + 8 * blocks.len() as u8];
    for &(l, r) in blocks {
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
    }
    o
}

/// The SACK blocks and the timestamps among the options `opts`.
fn read_opts(mut opts: &[u8]) -> (Vec<Block>, Option<(u32, u32)>) {
    let mut out = Vec::new();
    let mut ts = None;
    while let [kind, rest @ ..] = opts {
        match kind {
            0 => break,
            1 => opts = rest,
            _ => {
                let Some(&len) = rest.first() else { break };
                let len = usize::from(len).max(2);
                let Some(body) = opts.get(2..len) else { break };
                if *kind == 8 && body.len() == 8 {
                    let w = |k: usize| {
                        u32::from_be_bytes([body[k], body[k + 1], body[k + 2], body[k + 3]])
                    };
                    ts = Some((w(0), w(4)));
                }
                if *kind == 5 {
                    for b in body.chunks_exact(8) {
                        let w = |k: usize| u32::from_be_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]]);
                        out.push((w(0), w(4)));
                    }
                }
                opts = &opts[len..];
            }
        }
    }
    (out, ts)
}

/// Flow `i`: its client on the LAN side, the server on the WAN side.
fn conn(i: usize) -> super::Conn {
    super::Conn {
        client: client(i),
        cport: 40_000 + i as u16,
        server: SERVER,
        sport: SERVER_PORT,
        window: RWND_FIELD,
    }
}

/// The fields of a simulated segment the hosts read.
struct Seg {
    flow: usize,
    seq: u32,
    ack: u32,
    win: u16,
    flags: u8,
    len: usize,
    sack: Vec<Block>,
    ts: Option<(u32, u32)>,
}

/// Reads a segment the simulation built (untagged IPv4, as sluice passes
/// it on with its own rewrites of window, options and ECN).
fn read(f: &[u8]) -> Option<Seg> {
    let info = sluice_wire::parse(f).ok()?;
    let ip = info.ip?;
    let l4 = ip.l4_offset;
    let b = f.get(l4..l4 + 20)?;
    let sport = u16::from_be_bytes([b[0], b[1]]);
    let dport = u16::from_be_bytes([b[2], b[3]]);
    let port = if sport == SERVER_PORT { dport } else { sport };
    let hl = usize::from(b[12] >> 4) * 4;
    let end = info.l3_offset + usize::from(ip.ip_len);
    let (sack, ts) = read_opts(f.get(l4 + 20..l4 + hl)?);
    Some(Seg {
        flow: usize::from(port.checked_sub(40_000)?),
        seq: u32::from_be_bytes(b[4..8].try_into().ok()?),
        ack: u32::from_be_bytes(b[8..12].try_into().ok()?),
        win: u16::from_be_bytes([b[14], b[15]]),
        flags: b[13],
        len: end.checked_sub(l4 + hl)?,
        sack,
        ts,
    })
}
