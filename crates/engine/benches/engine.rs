//! ns per forwarded frame through the whole engine (`handle_rx` then
//! `poll_tx`): 64 established TCP flows, each iteration one full-sized
//! data segment from the server and the client's ACK for it, on four
//! configurations — stateful `pass` alone, FQ-CoDel queues both ways,
//! an HFSC tree, and FQ-CoDel with TCP control (`ack-pacing window-clamp`)
//! on the download. Rates are far above what the loop offers, so every
//! frame leaves at once: this is the per-frame cost, not the shaping.
//! Time advances 10 µs an iteration, so timers, CoDel and the pacer run.
//!
//! Run: `cargo bench -p sluice-engine --bench engine -- --warm-up-time 1
//! --measurement-time 3`; with `SLUICE_BENCH_ROUNDS=N` it runs N rounds
//! of each and no timing, for instruction counts from callgrind
//! (docs/benchmarks.md has the figures and the command).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_engine::testing::Conn;
use sluice_engine::{Engine, Options};
use sluice_time::{Duration, Instant};
use sluice_wire::checksum_update16;
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, SYN};
use std::net::Ipv4Addr;

const LAN: usize = 0;
const WAN: usize = 1;
const FLOWS: usize = 64;
const MSS: u32 = 1448;

const PASS: &str = "pass\n";
const FQ_CODEL: &str = "\
queue up on wan0 bandwidth 10G
queue ul parent up bandwidth 10G flows 1024 qlimit 10000 default
queue down on lan0 bandwidth 10G
queue dl parent down bandwidth 10G flows 1024 qlimit 10000 default
pass
";
const HFSC: &str = "\
altq on wan0 hfsc bandwidth 10G queue { u_ack, u_bulk }
queue u_ack bandwidth 20% priority 7 hfsc (realtime 10%)
queue u_bulk bandwidth 80% hfsc (default, upperlimit 95%)
altq on lan0 hfsc bandwidth 10G queue { d_int, d_bulk }
queue d_int bandwidth 30% hfsc (realtime 20%)
queue d_bulk bandwidth 70% qlimit 10000 hfsc (default)
pass
";
const TCP_CONTROL: &str = "\
queue up on wan0 bandwidth 10G
queue ul parent up bandwidth 10G flows 1024 qlimit 10000 default
queue down on lan0 bandwidth 10G
queue dl parent down bandwidth 10G flows 1024 qlimit 10000 default ack-pacing window-clamp
pass
";

fn client(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(192, 168, 1, 10 + i as u8)
}

/// Flow `i`: a client on the LAN side, the server on the WAN side.
fn conn(i: usize) -> Conn {
    Conn::to_server(client(i), 40_000 + i as u16)
}

fn engine(text: &str) -> Engine {
    let cfg = sluice_conf::check("bench.conf", text, &[])
        .unwrap_or_else(|d| panic!("{}", d[0].render("bench.conf", text)))
        .config;
    Engine::new(&cfg, Options::bridge("lan0", "wan0", [7; 16])).expect("the trees build")
}

fn drain(e: &mut Engine, now: Instant) {
    for iface in [LAN, WAN] {
        while let Some(f) = e.poll_tx(now, iface) {
            black_box(&f);
        }
    }
}

/// Opens every flow (SYN, SYN-ACK, ACK with MSS and window scale).
fn handshakes(e: &mut Engine, now: Instant) {
    let mut o = Vec::new();
    TcpOption::Mss(MSS as u16).encode(&mut o);
    TcpOption::WindowScale(7).encode(&mut o);
    for i in 0..FLOWS {
        e.handle_rx(now, LAN, conn(i).seg(true, 0, 0, SYN, &o, 0));
        e.handle_rx(now, WAN, conn(i).seg(false, 0, 1, SYN | ACK, &o, 0));
        e.handle_rx(now, LAN, conn(i).seg(true, 1, 1, ACK, &[], 0));
    }
    drain(e, now);
}

/// One configuration's engine with its flows open, and the per-flow
/// templates whose sequence numbers each round moves on (the state table
/// and TCP control see a live download, not replays).
struct Rig {
    e: Engine,
    now: Instant,
    data: Vec<Vec<u8>>,
    acks: Vec<Vec<u8>>,
    sent: [u32; FLOWS],
    k: usize,
    rounds: u64,
}

impl Rig {
    fn new(text: &str) -> Rig {
        let mut e = engine(text);
        let now = Instant(1_000_000_000);
        handshakes(&mut e, now);
        Rig {
            e,
            now,
            data: (0..FLOWS)
                .map(|i| conn(i).seg(false, 1, 1, ACK, &[], MSS as usize))
                .collect(),
            acks: (0..FLOWS)
                .map(|i| conn(i).seg(true, 1, 1 + MSS, ACK, &[], 0))
                .collect(),
            sent: [0; FLOWS],
            k: 0,
            rounds: 0,
        }
    }
}

/// One data segment in from the server and its ACK in from the client,
/// each forwarded: two frames. Not inlined, so that
/// `callgrind --toggle-collect=*round*` counts exactly this.
#[inline(never)]
fn round(r: &mut Rig) {
    let i = r.k % FLOWS;
    r.k += 1;
    r.rounds += 1;
    let off = r.sent[i];
    r.sent[i] = off.wrapping_add(MSS);
    let mut d = r.data[i].clone();
    set_u32(&mut d, 14 + 20 + 4, 1u32.wrapping_add(off));
    let mut a = r.acks[i].clone();
    set_u32(
        &mut a,
        14 + 20 + 8,
        1u32.wrapping_add(off).wrapping_add(MSS),
    );
    r.now += Duration::from_micros(10);
    black_box(r.e.handle_rx(r.now, WAN, d));
    drain(&mut r.e, r.now);
    black_box(r.e.handle_rx(r.now, LAN, a));
    drain(&mut r.e, r.now);
}

fn bench_config(c: &mut Criterion, name: &str, text: &str) {
    let mut rig = Rig::new(text);
    // A fixed count instead of criterion's timing: for callgrind, whose
    // total over `round` divided by the frames is instructions per frame.
    if let Some(n) = std::env::var("SLUICE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        if only().is_none_or(|f| name.contains(&f)) {
            (0..n).for_each(|_| round(&mut rig));
            eprintln!("{name}: {} frames", 2 * rig.rounds);
        }
        return;
    }
    c.bench_function(name, |b| b.iter(|| round(&mut rig)));
}

/// The name filter given on the command line (criterion's first free
/// argument), for the fixed-count mode.
fn only() -> Option<String> {
    std::env::args().skip(1).find(|a| !a.starts_with('-'))
}

/// Writes a TCP sequence or ack number at `at` and updates the TCP
/// checksum for it (RFC 1624), so the frame stays one a host would send.
fn set_u32(f: &mut [u8], at: usize, v: u32) {
    const CSUM: usize = 14 + 20 + 16;
    let mut sum = u16::from_be_bytes([f[CSUM], f[CSUM + 1]]);
    for (k, new) in v.to_be_bytes().chunks(2).enumerate() {
        let at = at + 2 * k;
        let old = u16::from_be_bytes([f[at], f[at + 1]]);
        sum = checksum_update16(sum, old, u16::from_be_bytes([new[0], new[1]]));
    }
    f[at..at + 4].copy_from_slice(&v.to_be_bytes());
    f[CSUM..CSUM + 2].copy_from_slice(&sum.to_be_bytes());
}

fn engine_frames(c: &mut Criterion) {
    bench_config(c, "engine/pass", PASS);
    bench_config(c, "engine/fq_codel", FQ_CODEL);
    bench_config(c, "engine/hfsc", HFSC);
    bench_config(c, "engine/fq_codel+tcp_control", TCP_CONTROL);
}

criterion_group!(benches, engine_frames);
criterion_main!(benches);
