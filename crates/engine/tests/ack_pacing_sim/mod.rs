//! The hosts of tests/ack_pacing.rs on the shared simulator's network
//! ([`Net`]): a window-limited, ACK-clocked server (no congestion
//! control: the worst case) and clients that ACK every second segment.

use super::common::tcp::*;
use sluice_engine::testing::netsim::{Arrival, Link, Net, INSTANT};
use sluice_engine::{Engine, Rx, TcpControlReport};
use sluice_time::{Duration, Instant, Rate};
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, SYN};

struct Sender {
    una: u32,
    nxt: u32,
    /// What the client's window allows beyond `una`.
    rwnd: u64,
}

/// The hosts' timers: the samples of the modem and of sluice's queue,
/// and the server's turn to send (at its start, and once the frames that
/// reached it at one instant are all read).
#[derive(Debug)]
enum Tick {
    Sample,
    Send,
}

/// How often the modem's backlog and sluice's queue are sampled.
const SAMPLE_EVERY: Duration = Duration::from_micros(100);

/// A window-limited, ACK-clocked server and its clients on the shared
/// simulator's network ([`Net`]: sluice, the modem's FIFO before it on
/// the way down, the delay line, the uplink after it).
pub struct Sim {
    net: Net<Tick>,
    senders: Vec<Sender>,
    /// The sender's own limit in segments (no congestion control: the
    /// worst case, a window it never backs off from).
    pub cwnd: u32,
    /// Client: next expected sequence number, segments not yet ACKed.
    pub rcv_nxt: Vec<u32>,
    pub unacked: Vec<u32>,
    /// Bytes delivered to each client after `measure_from`.
    pub delivered: Vec<u64>,
    pub measure_from: Instant,
    pub modem_max: u64,
    /// Most frames waiting in sluice's download queue.
    pub dl_max: usize,
    /// ACK numbers the server received, per flow, in order.
    pub acks_at_server: Vec<Vec<u32>>,
    pub acks_sent: u64,
    pub acks_received: u64,
    /// The server has no more data.
    pub done: bool,
    /// An upload from another host keeps this many full-sized UDP frames
    /// in sluice's upload queue (0: none); how many it handed in.
    pub upload_backlog: usize,
    pub upload_in: u64,
    /// The server sends no data before this (iperf3 starts every stream
    /// together once all are connected).
    pub start_at: Instant,
    /// The server's turn to send is due (at most one at a time).
    pub send_due: bool,
    /// The server stamps its data with TCP timestamps (a 1 kHz clock with
    /// an offset per flow, as Linux sends them).
    pub stamps: bool,
    /// Sum of the modem's backlog (bytes) and samples, after `measure_from`.
    pub modem_sum: u128,
    pub modem_steps: u64,
}

impl Sim {
    /// `flows` downloads through `e` from a modem of rate `modem` (its
    /// FIFO unbounded), 10 ms from the server, the uplink after sluice
    /// `up` (`None`: frames pass at once).
    pub fn new(e: Engine, flows: usize, modem: Rate, cwnd: u32) -> Sim {
        Sim::with_uplink(e, flows, modem, cwnd, None)
    }

    pub fn with_uplink(e: Engine, flows: usize, modem: Rate, cwnd: u32, up: Option<Rate>) -> Sim {
        let link = Link {
            down: modem,
            up: up.unwrap_or(INSTANT),
            fifo_bytes: u64::MAX,
            one_way: Duration::from_millis(10),
        };
        let now = Instant::ZERO + Duration::from_secs(1);
        let mut net = Net::new(e, link, now);
        net.down.watch();
        net.timer(now, Tick::Sample);
        Sim {
            net,
            senders: (0..flows)
                .map(|_| Sender {
                    una: 1,
                    nxt: 1,
                    rwnd: 0,
                })
                .collect(),
            cwnd,
            rcv_nxt: vec![1; flows],
            unacked: vec![0; flows],
            delivered: vec![0; flows],
            measure_from: Instant::ZERO + Duration::from_secs(3),
            modem_max: 0,
            dl_max: 0,
            acks_at_server: vec![Vec::new(); flows],
            acks_sent: 0,
            acks_received: 0,
            done: false,
            upload_backlog: 0,
            upload_in: 0,
            start_at: Instant::ZERO,
            send_due: false,
            stamps: false,
            modem_sum: 0,
            modem_steps: 0,
        }
    }

    pub fn now(&self) -> Instant {
        self.net.now()
    }

    pub fn e(&self) -> &Engine {
        &self.net.engine
    }

    /// The server sends no data before `t`.
    pub fn start_at(&mut self, t: Instant) {
        self.start_at = t;
        self.net.timer(t, Tick::Send);
    }

    /// Handshakes: the client's SYN (MSS, scale 7, window 65535) up, the
    /// server's SYN-ACK down, the client's ACK up; ISNs 0 on both sides.
    pub fn open(&mut self, i: usize) {
        let o = syn_opts();
        let syn = seg(i, true, 0, 0, SYN, 65535, &o, 0);
        let now = self.now();
        assert!(matches!(
            self.net.engine.handle_rx(now, LAN, syn),
            Rx::Queued { .. }
        ));
    }

    /// `n` more flows open now and start at once (their hosts as
    /// [`client`] says).
    pub fn add_flows(&mut self, n: usize) {
        for _ in 0..n {
            let i = self.senders.len();
            self.senders.push(Sender {
                una: 1,
                nxt: 1,
                rwnd: 0,
            });
            self.rcv_nxt.push(1);
            self.unacked.push(0);
            self.delivered.push(0);
            self.acks_at_server.push(Vec::new());
            self.open(i);
        }
    }

    /// The upload's frames in sluice's queue, kept at `upload_backlog`.
    fn client_up(&mut self) {
        let gone = self.net.sent_up.get(&17).copied().unwrap_or(0);
        let mut queued = self.upload_in - gone;
        while queued < self.upload_backlog as u64 {
            let f = sluice_wire::build::udp_v4(client(200), SERVER, 5000, 5001, 1472);
            let now = self.now();
            if let Rx::Queued { .. } = self.net.engine.handle_rx(now, LAN, f) {
                self.upload_in += 1;
                queued += 1;
            }
        }
    }

    /// The client: ACKs every second segment, or at once on a SYN-ACK.
    fn client_rx(&mut self, f: Vec<u8>) {
        let (i, seq, _, _, len) = read(&f);
        let flags = f[14 + 20 + 13];
        if flags & SYN != 0 {
            self.acks_sent += 1;
            self.net.client_send(seg(i, true, 1, 1, ACK, 32768, &[], 0));
            return;
        }
        assert_eq!(seq, self.rcv_nxt[i], "flow {i}: data in order");
        self.rcv_nxt[i] = seq.wrapping_add(len as u32);
        if self.now() >= self.measure_from {
            self.delivered[i] += len as u64;
        }
        self.unacked[i] += 1;
        if self.unacked[i] >= 2 {
            self.unacked[i] = 0;
            // 4 MB of receive buffer, scaled by 7.
            let a = seg(i, true, 1, self.rcv_nxt[i], ACK, 32768, &[], 0);
            self.acks_sent += 1;
            self.net.client_send(a);
        }
    }

    fn server_rx(&mut self, f: Vec<u8>) {
        if f[14 + 9] == 17 {
            // The upload's: the server only discards it.
            return;
        }
        let (i, _seq, ack, win, _) = read(&f);
        let flags = f[14 + 20 + 13];
        let s = &mut self.senders[i];
        if flags & SYN != 0 {
            // SYN-ACK: the SYN's window is not scaled.
            s.rwnd = u64::from(win);
            let o = syn_opts();
            self.net
                .server_send(seg(i, false, 0, 1, SYN | ACK, 65535, &o, 0));
        } else {
            self.acks_received += 1;
            self.acks_at_server[i].push(ack);
            if sluice_wire::tcp::seq_after(ack, s.una) {
                s.una = ack;
            }
            s.rwnd = u64::from(win) << WS;
        }
        // Data follows what arrived at this instant, all of it read: the
        // SYN-ACKs of flows opened together go ahead of any flow's data.
        if !self.send_due {
            self.send_due = true;
            let now = self.now();
            self.net.timer(now, Tick::Send);
        }
    }

    /// Each flow's data in turn, as much as its windows allow.
    fn server_send(&mut self) {
        self.send_due = false;
        if self.done || self.now() < self.start_at {
            return;
        }
        for i in 0..self.senders.len() {
            self.server_send_flow(i);
        }
    }

    fn server_send_flow(&mut self, i: usize) {
        loop {
            let s = &self.senders[i];
            let flight = u64::from(s.nxt.wrapping_sub(s.una));
            let limit = s.rwnd.min(u64::from(self.cwnd) * u64::from(MSS));
            if s.rwnd == 0 || flight + u64::from(MSS) > limit {
                break;
            }
            let nxt = s.nxt;
            let mut o = Vec::new();
            if self.stamps {
                let ms = (self.now().0 / 1_000_000) as u32;
                o.extend([1, 1]);
                TcpOption::Timestamps {
                    tsval: ms.wrapping_add(0x9e37_79b9u32.wrapping_mul(i as u32 + 1)),
                    tsecr: 0,
                }
                .encode(&mut o);
            }
            // The frame stays 1502 bytes: options take payload's room.
            let len = MSS as usize - o.len();
            let f = seg(i, false, nxt, 1, ACK, 65535, &o, len);
            self.senders[i].nxt = nxt.wrapping_add(len as u32);
            self.net.server_send(f);
        }
    }

    /// The modem's backlog now (frames waiting behind the one it sends).
    pub fn modem_bytes(&mut self) -> u64 {
        let now = self.now();
        self.net.down.waiting_at(now).unwrap_or(0)
    }

    fn sample(&mut self) {
        let now = self.now();
        if now >= self.measure_from {
            let m = self.modem_bytes();
            self.modem_max = self.modem_max.max(m);
            self.modem_sum += u128::from(m);
            self.modem_steps += 1;
            self.dl_max = self.dl_max.max(self.net.engine.queued(LAN));
        }
        self.net.timer(now + SAMPLE_EVERY, Tick::Sample);
    }

    pub fn run(&mut self, until: Duration) {
        for i in 0..self.senders.len() {
            self.open(i);
        }
        self.run_more(until);
    }

    pub fn run_more(&mut self, d: Duration) {
        self.net.run_until(self.now() + d);
        while let Some(a) = self.net.poll() {
            match a {
                Arrival::Client(f) => self.client_rx(f),
                Arrival::Server(f) => self.server_rx(f),
                Arrival::Timer(Tick::Sample) => self.sample(),
                Arrival::Timer(Tick::Send) => self.server_send(),
            }
            self.client_up();
        }
    }

    pub fn report(&self) -> Option<TcpControlReport> {
        self.e().report()[LAN].class("dl").and_then(|c| c.tcp)
    }
}
