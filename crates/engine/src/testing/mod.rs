//! Op-sequence checking of the whole engine: arbitrary frames and clock steps
//! against the contract of [`Engine`], for the `engine_ops` fuzz target and
//! its seed-corpus test (`tests/fuzz_seeds.rs`).
//!
//! # Principles
//! - Every byte string is a valid input: the first byte picks a shipped
//!   configuration (`examples/*.conf`), the rest decode to operations
//!   ([`decode`]); bytes that run out end the sequence. [`Script`] writes the
//!   same format, so seeds are readable code rather than hex.
//! - The checker keeps its own books (frames in, out, handed back, in flight
//!   by length) and compares them with the engine's after every step:
//!   - a frame in is a frame out, a frame handed back by `poll_dropped`, or a
//!     frame still queued; the per-cause counters add up to what was handed
//!     back, and every frame out or back has the length of one that went in;
//!   - `Rx::Dropped(cause)` hands the frame back with that cause at once, and
//!     `Rx::Queued` names the peer of the receiving interface;
//!   - anything queued has a deadline, and once serviced (`handle_timeout`
//!     then `poll_tx` until `None`) `poll_timeout` lies in the future, or a
//!     data plane arming its timer from it would spin;
//!   - at the end, stepping from deadline to deadline drains every queue.
//! - The clock only moves within `[1 s, CLOCK_CAP]`: a monotonic clock never
//!   nears `u64::MAX` ns (584 years), where saturating time makes "in the
//!   future" impossible to honour. Backward steps are offered and must be
//!   clamped.

mod conn;
pub mod netsim;

pub use conn::Conn;

use crate::{DropCause, Engine, Options, Rx};
use sluice_conf::ir;
use sluice_time::{Duration, Instant};
use sluice_wire::build;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

/// The shipped configurations the first input byte chooses from, plus one
/// without queues (the passthrough path) and one with TCP control (held
/// ACKs count as queued: they too must come out).
const CONFIGS: [(&str, &str); 9] = [
    (
        "cbq-borrow",
        include_str!("../../../../examples/cbq-borrow.conf"),
    ),
    (
        "dummynet-opnsense",
        include_str!("../../../../examples/dummynet-opnsense.conf"),
    ),
    (
        "hfsc-qlimit9",
        include_str!("../../../../examples/hfsc-qlimit9.conf"),
    ),
    (
        "hfsc-realtime",
        include_str!("../../../../examples/hfsc-realtime.conf"),
    ),
    (
        "openbsd-fqcodel",
        include_str!("../../../../examples/openbsd-fqcodel.conf"),
    ),
    (
        "priq-ack",
        include_str!("../../../../examples/priq-ack.conf"),
    ),
    ("no-queues", "pass all\n"),
    (
        "lab-rrul-paced",
        include_str!("../../../../examples/lab/rrul-paced.conf"),
    ),
    ("fairq", include_str!("../../../../examples/fairq.conf")),
];

const LAN: usize = 0;
const WAN: usize = 1;

/// Latest time the checker's clock reaches (about 146 years).
pub const CLOCK_CAP: Instant = Instant(1 << 62);

/// Clock steps an op may take: from a nanosecond to a century, so timers,
/// state expiry and every scheduler's idle handling see big jumps.
const STEPS: [Duration; 16] = [
    Duration(0),
    Duration(1),
    Duration::from_micros(1),
    Duration::from_micros(100),
    Duration::from_millis(1),
    Duration::from_millis(5),
    Duration::from_millis(20),
    Duration::from_millis(100),
    Duration::from_secs(1),
    Duration::from_secs(10),
    Duration::from_secs(61),
    Duration::from_secs(3_600),
    Duration::from_secs(86_400),
    Duration::from_secs(30 * 86_400),
    Duration::from_secs(365 * 86_400),
    Duration::from_secs(100 * 365 * 86_400),
];

/// TCP flag combinations a frame op picks from (SYN, SYN+ACK, ACK, PSH+ACK,
/// FIN+ACK, RST): enough to walk states open and closed.
const TCP_FLAGS: [u8; 6] = [0x02, 0x12, 0x10, 0x18, 0x11, 0x04];

/// Ports that the shipped rules name, and two ephemeral ones.
const PORTS: [u16; 8] = [22, 53, 80, 443, 5060, 6000, 40_000, 40_001];

/// How an IP frame is built (see [`Frame::build`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    pub v6: bool,
    pub l4: L4,
    /// Index into the TCP flag table.
    pub flags: u8,
    /// Low two bits: ECN codepoint; bit 2: low-delay TOS.
    pub tos: u8,
    pub vlan: bool,
    /// LAN host and remote host, 0..4 each.
    pub host: u8,
    pub remote: u8,
    /// Index into the port table; `alt_sport` swaps in a second source port.
    pub port: u8,
    pub alt_sport: bool,
    /// Payload bytes, in units of five.
    pub payload: u8,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum L4 {
    #[default]
    Tcp,
    Udp,
    Icmp,
    /// Not IP at all: forwarded without classification.
    Arp,
}

/// A damaged frame: cut short, or one byte flipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    Truncate(u8),
    Xor(u8, u8),
}

/// One step of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Rx {
        iface: u8,
        frame: Frame,
        damage: Option<Damage>,
    },
    /// Arbitrary bytes as a frame.
    RxRaw { iface: u8, bytes: Vec<u8> },
    /// `poll_tx` up to `max` times.
    PollTx { iface: u8, max: u8 },
    /// Move the clock by `STEPS[step]`, backwards if `back`.
    Step { step: u8, back: bool },
    /// Wake up at `poll_timeout` as the I/O layer does and drain every interface.
    Service,
    /// `handle_timeout` at the current time.
    Timeout,
    /// Swap in another shipped configuration.
    Reload { config: u8 },
}

impl Frame {
    fn to_bytes(self) -> [u8; 3] {
        let l4 = match self.l4 {
            L4::Tcp => 0,
            L4::Udp => 1,
            L4::Icmp => 2,
            L4::Arp => 3,
        };
        [
            u8::from(self.v6) | l4 << 1 | (self.tos & 7) << 3 | u8::from(self.vlan) << 6,
            (self.host & 3)
                | (self.remote & 3) << 2
                | (self.port & 7) << 4
                | u8::from(self.alt_sport) << 7,
            self.payload,
        ]
    }

    fn from_bytes(flags: u8, [a, b, c]: [u8; 3]) -> Frame {
        Frame {
            v6: a & 1 != 0,
            l4: [L4::Tcp, L4::Udp, L4::Icmp, L4::Arp][usize::from(a >> 1 & 3)],
            flags: flags % TCP_FLAGS.len() as u8,
            tos: a >> 3 & 7,
            vlan: a & 0x40 != 0,
            host: b & 3,
            remote: b >> 2 & 3,
            port: b >> 4 & 7,
            alt_sport: b & 0x80 != 0,
            payload: c,
        }
    }

    /// The frame as received on `iface`: from a LAN host outwards on the LAN
    /// side, from a remote host inwards on the WAN side.
    pub fn build(self, iface: usize) -> Vec<u8> {
        let (lan, remote): (IpAddr, IpAddr) = if self.v6 {
            (
                Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, u16::from(self.host) + 2).into(),
                Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(self.remote) + 1).into(),
            )
        } else {
            (
                Ipv4Addr::new(192, 168, 1, self.host + 2).into(),
                // 192.0.2.10 is hfsc-realtime.conf's VoIP gateway.
                Ipv4Addr::new(192, 0, 2, 7 + self.remote).into(),
            )
        };
        let service = PORTS[usize::from(self.port)];
        let client = 40_000 + u16::from(self.alt_sport);
        let (src, dst, sport, dport) = if iface == LAN {
            (lan, remote, client, service)
        } else {
            (remote, lan, service, client)
        };
        let payload = usize::from(self.payload) * 5;
        let mut f = match (self.l4, src, dst) {
            (L4::Tcp, ..) => build::tcp(
                src,
                dst,
                sport,
                dport,
                TCP_FLAGS[usize::from(self.flags)],
                payload,
            ),
            (L4::Udp, ..) => build::udp(src, dst, sport, dport, payload),
            (L4::Icmp, IpAddr::V4(s), IpAddr::V4(d)) => {
                build::icmp_v4_echo(s, d, sport, 1, payload)
            }
            (L4::Icmp, IpAddr::V6(s), IpAddr::V6(d)) => {
                build::icmp_v6_echo(s, d, sport, 1, payload)
            }
            _ => build::arp(
                Ipv4Addr::new(192, 168, 1, 1),
                Ipv4Addr::new(192, 168, 1, 2 + self.host),
            ),
        };
        if self.tos != 0 && self.l4 != L4::Arp {
            let tos = (self.tos & 3) | if self.tos & 4 != 0 { 0x10 } else { 0 };
            // Only fails on a frame without IP, excluded above.
            let _ = build::set_tos(&mut f, tos);
        }
        if self.vlan {
            f = build::vlan_wrap(&f, 0x8100, 42);
        }
        f
    }
}

impl Damage {
    fn apply(self, f: &mut Vec<u8>) {
        match self {
            Damage::Truncate(at) => f.truncate(usize::from(at) % f.len().max(1)),
            Damage::Xor(at, x) => {
                let i = usize::from(at) % f.len().max(1);
                if let Some(b) = f.get_mut(i) {
                    *b ^= x;
                }
            }
        }
    }
}

/// Writes ops in the byte format [`decode`] reads.
#[derive(Clone, Debug)]
pub struct Script(Vec<u8>);

impl Script {
    /// `config` indexes the shipped configurations; `fixed_addrs` gives the
    /// WAN side a configured address instead of learning it.
    pub fn new(config: u8, fixed_addrs: bool) -> Script {
        Script(vec![config & 0x7f | u8::from(fixed_addrs) << 7])
    }

    pub fn op(mut self, op: &Op) -> Script {
        let kind_arg = |kind: u8, arg: u8| kind | arg << 3;
        match op {
            Op::Rx {
                iface,
                frame,
                damage,
            } => {
                let arg = iface & 1 | (frame.flags & 15) << 1;
                match damage {
                    None => {
                        self.0.push(kind_arg(0, arg));
                        self.0.extend(frame.to_bytes());
                    }
                    Some(d) => {
                        let (cut, at, x) = match *d {
                            Damage::Truncate(at) => (1, at, 0),
                            Damage::Xor(at, x) => (0, at, x),
                        };
                        // Three flag bits here: the fourth says which damage.
                        self.0
                            .push(kind_arg(1, iface & 1 | (frame.flags & 7) << 1 | cut << 4));
                        self.0.extend(frame.to_bytes());
                        self.0.extend([at, x]);
                    }
                }
            }
            Op::RxRaw { iface, bytes } => {
                self.0.push(kind_arg(2, iface & 1));
                let n = bytes.len().min(255);
                self.0.push(n as u8);
                self.0.extend(&bytes[..n]);
            }
            Op::PollTx { iface, max } => self
                .0
                .push(kind_arg(3, iface & 1 | (max.saturating_sub(1) & 15) << 1)),
            Op::Step { step, back } => self.0.push(kind_arg(4, step & 15 | u8::from(*back) << 4)),
            Op::Service => self.0.push(kind_arg(5, 0)),
            Op::Timeout => self.0.push(kind_arg(6, 0)),
            Op::Reload { config } => self.0.push(kind_arg(7, config & 31)),
        }
        self
    }

    pub fn ops(self, ops: &[Op]) -> Script {
        ops.iter().fold(self, |s, op| s.op(op))
    }

    pub fn bytes(self) -> Vec<u8> {
        self.0
    }
}

/// How the engine is set up, from the first input byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub config: usize,
    pub fixed_addrs: bool,
}

/// Bytes to a setup and ops; `None` for an empty input.
pub fn decode(bytes: &[u8]) -> Option<(Setup, Vec<Op>)> {
    let (&first, mut rest) = bytes.split_first()?;
    let setup = Setup {
        config: usize::from(first & 0x7f) % CONFIGS.len(),
        fixed_addrs: first & 0x80 != 0,
    };
    let mut ops = Vec::new();
    fn take(n: usize, rest: &mut &[u8]) -> Option<Vec<u8>> {
        let (a, b) = rest.split_at_checked(n)?;
        *rest = b;
        Some(a.to_vec())
    }
    while let Some((&o, tail)) = rest.split_first() {
        rest = tail;
        let arg = o >> 3;
        let op = match o & 7 {
            0 => {
                let Some(f) = take(3, &mut rest) else { break };
                Op::Rx {
                    iface: arg & 1,
                    frame: Frame::from_bytes(arg >> 1, [f[0], f[1], f[2]]),
                    damage: None,
                }
            }
            1 => {
                let Some(f) = take(5, &mut rest) else { break };
                let damage = if arg & 16 != 0 {
                    Damage::Truncate(f[3])
                } else {
                    Damage::Xor(f[3], f[4])
                };
                Op::Rx {
                    iface: arg & 1,
                    frame: Frame::from_bytes(arg >> 1 & 7, [f[0], f[1], f[2]]),
                    damage: Some(damage),
                }
            }
            2 => {
                let Some(n) = take(1, &mut rest) else { break };
                let n = usize::from(n[0]).min(rest.len());
                let bytes = take(n, &mut rest).unwrap_or_default();
                Op::RxRaw {
                    iface: arg & 1,
                    bytes,
                }
            }
            3 => Op::PollTx {
                iface: arg & 1,
                max: 1 + (arg >> 1),
            },
            4 => Op::Step {
                step: arg & 15,
                back: arg & 16 != 0,
            },
            5 => Op::Service,
            6 => Op::Timeout,
            _ => Op::Reload { config: arg },
        };
        ops.push(op);
    }
    Some((setup, ops))
}

fn configs() -> &'static [ir::Config] {
    static PARSED: OnceLock<Vec<ir::Config>> = OnceLock::new();
    PARSED.get_or_init(|| {
        let d =
            [("ext_if", "wan0"), ("int_if", "lan0")].map(|(k, v)| (k.to_string(), v.to_string()));
        CONFIGS
            .iter()
            .map(|(name, text)| match sluice_conf::check(name, text, &d) {
                Ok(c) => c.config,
                Err(e) => panic!("{}", e[0].render(name, text)),
            })
            .collect()
    })
}

/// Runs the engine through `ops` with the invariants of the module docs
/// asserted after every step; panics on the first violation.
pub fn check_ops(setup: Setup, ops: &[Op]) {
    let mut c = Checker::new(setup);
    for (i, op) in ops.iter().enumerate() {
        c.step = i;
        c.apply(op);
        c.check_books();
    }
    c.drain();
}

/// Entry point for the fuzz target: raw bytes to ops, then [`check_ops`].
pub fn check_bytes(bytes: &[u8]) {
    if let Some((setup, ops)) = decode(bytes) {
        check_ops(setup, &ops);
    }
}

/// The engine and the checker's own books.
struct Checker {
    e: Engine,
    now: Instant,
    step: usize,
    rx: u64,
    tx: u64,
    handed_back: u64,
    /// Frames in the engine by length: whatever comes out must have gone in.
    in_flight: HashMap<usize, u64>,
}

impl Checker {
    fn new(setup: Setup) -> Checker {
        let iface_addrs = if setup.fixed_addrs {
            let net = |addr: IpAddr, prefix| ir::IpNet { addr, prefix };
            let v4 = net(Ipv4Addr::new(198, 51, 100, 1).into(), 24);
            let v6 = net(Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 1).into(), 64);
            vec![(WAN, vec![v4, v6])]
        } else {
            vec![]
        };
        let opts = Options {
            iface_addrs,
            ..Options::bridge("lan0", "wan0", [7; 16])
        };
        let name = CONFIGS[setup.config].0;
        let e = Engine::new(&configs()[setup.config], opts).unwrap_or_else(|err| {
            panic!("{name}: the engine cannot build a shipped config: {err}")
        });
        Checker {
            e,
            now: Instant::from_nanos(1_000_000_000),
            step: 0,
            rx: 0,
            tx: 0,
            handed_back: 0,
            in_flight: HashMap::new(),
        }
    }

    fn out(&mut self, len: usize, what: &str) {
        let step = self.step;
        match self.in_flight.get_mut(&len) {
            Some(n) if *n > 0 => *n -= 1,
            _ => panic!("step {step}: a {len}-byte frame {what} that never went in"),
        }
    }

    /// Collects what the engine handed back; returns the causes seen.
    fn collect_dropped(&mut self) -> Vec<DropCause> {
        let mut causes = Vec::new();
        while let Some(d) = self.e.poll_dropped() {
            assert!(
                d.iface < self.e.iface_count(),
                "step {}: dropped on {}",
                self.step,
                d.iface
            );
            self.out(d.frame.len(), "handed back");
            self.handed_back += 1;
            causes.push(d.cause);
        }
        causes
    }

    fn poll_tx(&mut self, at: Instant, iface: usize, max: usize) -> usize {
        let mut sent = 0;
        while sent < max {
            let probes = |e: &Engine| e.counters(iface).map_or(0, |c| c.probes_sent);
            let before = probes(&self.e);
            let Some(f) = self.e.poll_tx(at, iface) else {
                break;
            };
            // autorate's probes are sluice's own: they never went in.
            if probes(&self.e) == before {
                self.out(f.len(), "sent");
            }
            self.tx += 1;
            sent += 1;
        }
        self.collect_dropped();
        sent
    }

    fn queued(&self) -> usize {
        (0..self.e.iface_count()).map(|i| self.e.queued(i)).sum()
    }

    /// What the I/O layer does when its timer fires: `handle_timeout`, then
    /// `poll_tx` until `None` on every interface. Afterwards nothing may be
    /// due: the next deadline lies in the future.
    fn service(&mut self) {
        self.e.handle_timeout(self.now);
        for i in 0..self.e.iface_count() {
            // Every poll sends or empties a queue by at least one, so this is
            // enough; the books catch a frame that neither left nor stayed.
            let budget = self.e.queued(i) + 1;
            self.poll_tx(self.now, i, budget);
            assert!(
                self.e.poll_tx(self.now, i).is_none(),
                "step {}: iface {i} still sends after {budget} polls",
                self.step
            );
        }
        self.collect_dropped();
        if let Some(t) = self.e.poll_timeout() {
            assert!(
                t > self.now,
                "step {}: poll_timeout {t:?} is not after {:?} once serviced",
                self.step,
                self.now
            );
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Rx {
                iface,
                frame,
                damage,
            } => self.rx_built(usize::from(*iface), frame, *damage),
            Op::RxRaw { iface, bytes } => self.rx_frame(usize::from(*iface), bytes.clone()),
            Op::PollTx { iface, max } => {
                self.poll_tx(self.now, usize::from(*iface), usize::from(*max));
            }
            Op::Step { step, back } => {
                let d = STEPS[usize::from(*step)];
                if *back {
                    // Offered to the engine once; it must clamp, and the
                    // checker's clock stays where it was.
                    let earlier = self.now - d;
                    self.e.handle_timeout(earlier);
                    self.poll_tx(earlier, WAN, 1);
                } else {
                    self.now = (self.now + d).min(CLOCK_CAP);
                }
            }
            Op::Service => {
                if let Some(t) = self.e.poll_timeout() {
                    self.now = self.now.max(t).min(CLOCK_CAP);
                }
                self.service();
            }
            Op::Timeout => {
                self.e.handle_timeout(self.now);
                self.collect_dropped();
            }
            Op::Reload { config } => {
                let cfg = &configs()[usize::from(*config) % CONFIGS.len()];
                let before = self.queued() as u64;
                let r = self
                    .e
                    .reload(cfg)
                    .unwrap_or_else(|err| panic!("step {}: reload failed: {err}", self.step));
                assert!(
                    r.kept + r.dropped <= before,
                    "step {}: reload moved {r:?} of {before}",
                    self.step
                );
                self.collect_dropped();
            }
        }
    }

    fn rx_built(&mut self, iface: usize, frame: &Frame, damage: Option<Damage>) {
        let mut f = frame.build(iface);
        if let Some(d) = damage {
            d.apply(&mut f);
        }
        self.rx_frame(iface, f);
    }

    fn rx_frame(&mut self, iface: usize, f: Vec<u8>) {
        *self.in_flight.entry(f.len()).or_default() += 1;
        self.rx += 1;
        // Every other frame in an MTU-sized buffer, as the I/O layer's pool
        // hands them over, so right-sizing and its memory books are
        // exercised; its spare buffers are taken back as the I/O layer does.
        let f = if self.rx.is_multiple_of(2) {
            let mut big = Vec::with_capacity(f.len().max(1518));
            big.extend_from_slice(&f);
            big
        } else {
            f
        };
        while let Some(spare) = self.e.poll_spare() {
            assert!(
                spare.is_empty(),
                "step {}: a spare buffer holds data",
                self.step
            );
        }
        match self.e.handle_rx(self.now, iface, f) {
            Rx::Queued { egress } => assert_eq!(
                egress,
                1 - iface,
                "step {}: queued on the wrong side",
                self.step
            ),
            Rx::Dropped(cause) => {
                let causes = self.collect_dropped();
                assert!(
                    causes.contains(&cause),
                    "step {}: dropped as {cause:?} but handed back {causes:?}",
                    self.step
                );
            }
        }
        self.collect_dropped();
    }

    /// The engine's counters and queues agree with the checker's books.
    fn check_books(&self) {
        let n = self.e.iface_count();
        let sum = |f: &dyn Fn(&crate::IfaceCounters) -> u64| -> u64 {
            (0..n).filter_map(|i| self.e.counters(i)).map(f).sum()
        };
        let step = self.step;
        assert_eq!(sum(&|c| c.rx_frames), self.rx, "step {step}: rx_frames");
        // autorate's probes are sluice's own frames, not forwarded ones.
        let probes = sum(&|c| c.probes_sent);
        assert_eq!(
            sum(&|c| c.tx_frames) + probes,
            self.tx,
            "step {step}: tx_frames"
        );
        let drops = sum(&|c| {
            c.malformed
                + c.blocked
                + c.state_limit
                + c.bad_state
                + c.no_route
                + c.queue_drops
                + c.reload_drops
                + c.memory_drops
                + c.probe_replies
        });
        assert_eq!(
            drops, self.handed_back,
            "step {step}: drop counters against frames handed back"
        );
        let queued = self.queued() as u64;
        assert_eq!(
            self.rx + probes,
            self.tx + self.handed_back + queued,
            "step {step}: frames in != out + handed back + queued ({queued})"
        );
        assert_eq!(
            self.in_flight.values().sum::<u64>(),
            queued,
            "step {step}: books by length"
        );
        assert!(
            sum(&|c| c.ecn_marked) <= self.tx,
            "step {step}: more marks than frames sent"
        );
        // Memory books: every queued frame is charged at least the fixed
        // overhead, nothing is charged once the queues are empty, and the
        // cap holds.
        let mem = self.e.memory();
        assert_eq!(mem.frames, queued, "step {step}: memory report's frames");
        assert!(
            mem.held_bytes >= queued * sluice_sched::PACKET_OVERHEAD
                && (queued > 0 || mem.held_bytes == 0)
                && mem.held_bytes <= mem.limit_bytes,
            "step {step}: {} bytes held by {queued} frames (limit {})",
            mem.held_bytes,
            mem.limit_bytes
        );
        if queued > 0 {
            assert!(
                self.e.poll_timeout().is_some(),
                "step {step}: {queued} frames queued and no deadline"
            );
        }
    }

    /// Steps from deadline to deadline until every queue is empty.
    fn drain(&mut self) {
        self.step = usize::MAX;
        // Each round sends what is due; the slowest shipped queue (64 kbit/s)
        // needs one round per frame, so this bound is generous.
        for _ in 0..4 * self.queued() + 16 {
            if self.queued() == 0 {
                break;
            }
            // Past the cap if need be: a frame may be due just after it.
            if let Some(t) = self.e.poll_timeout() {
                self.now = self.now.max(t);
            }
            self.service();
            self.check_books();
        }
        assert_eq!(
            self.queued(),
            0,
            "queues never drained (clock at {:?})",
            self.now
        );
        assert_eq!(self.rx, self.tx + self.handed_back);
        assert_eq!(self.e.report().len(), self.e.iface_count());
    }
}

#[cfg(test)]
mod tests;
