//! TCP segments through the engine: a download queue under TCP control,
//! segments of numbered flows between LAN clients and one server, the
//! handshake (ack_pacing.rs, tcp_hostile.rs).

use sluice_conf::ir::TcpControl;
use sluice_engine::{Engine, Options, TcpControlReport};
use sluice_time::Instant;
use sluice_wire::tcp::TcpOption;
use sluice_wire::tcp_flags::{ACK, SYN};
use std::net::Ipv4Addr;

// For the files that glob this module; not every one uses each name.
#[allow(unused_imports)]
pub use super::{Conn, LAN, SERVER, WAN};

pub const MSS: u32 = 1448;
pub const WS: u8 = 7;

thread_local! {
    /// Flows from this index on share one client host (host isolation's
    /// tests); by default each flow has its own.
    pub static ONE_HOST_FROM: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

pub fn client(i: usize) -> Ipv4Addr {
    let i = i.min(ONE_HOST_FROM.with(|c| c.get()));
    Ipv4Addr::new(192, 168, 1, 10 + i as u8)
}

/// The download queue `dl` at `rate` on lan0 (FIFO, room for everything),
/// under control as `tcp` says.
pub fn engine(rate: &str, tcp: TcpControl) -> Engine {
    engine_rule(rate, "pass", tcp)
}

/// [`engine`] with the rule `rule` (`pass keep state (sloppy)`: TCP
/// control alone, without the state table's window check in front).
pub fn engine_rule(rate: &str, rule: &str, tcp: TcpControl) -> Engine {
    engine_with(
        &format!(
            "queue down on lan0 bandwidth {rate}\n\
             queue dl parent down bandwidth {rate} qlimit 4000 default\n\
             queue up on wan0 bandwidth 100M\n\
             queue ul parent up bandwidth 100M qlimit 4000 default\n\
             {rule}\n"
        ),
        tcp,
    )
}

/// The engine of `text` (with a download queue `dl` on lan0), `dl` under
/// control as `tcp` says.
pub fn engine_with(text: &str, tcp: TcpControl) -> Engine {
    engine_ctl(text, "lan0", "dl", tcp)
}

/// The engine of `text`, queue `queue` of interface `iface` under control
/// as `tcp` says.
pub fn engine_ctl(text: &str, iface: &str, queue: &str, tcp: TcpControl) -> Engine {
    let mut cfg = super::config(text);
    let tree = cfg
        .interfaces
        .iter_mut()
        .find(|q| q.ifname == iface)
        .expect("the interface's tree");
    for q in tree.queues.iter_mut().filter(|q| q.name == queue) {
        q.tcp = tcp;
    }
    Engine::new(&cfg, Options::bridge("lan0", "wan0", [7; 16])).unwrap()
}

/// Flow `i`: its client's port 40000 + `i` to the server's 443.
pub fn conn(i: usize) -> Conn {
    Conn::to_server(client(i), 40_000 + i as u16)
}

#[allow(clippy::too_many_arguments)]
pub fn seg(
    i: usize,
    from_client: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    opts: &[u8],
    len: usize,
) -> Vec<u8> {
    Conn { window, ..conn(i) }.seg(from_client, seq, ack, flags, opts, len)
}

pub fn syn_opts() -> Vec<u8> {
    let mut o = Vec::new();
    TcpOption::Mss(MSS as u16 + 12).encode(&mut o);
    TcpOption::WindowScale(WS).encode(&mut o);
    o
}

/// (flow, seq, ack, window, payload) of a frame the simulation built.
pub fn read(f: &[u8]) -> (usize, u32, u32, u16, usize) {
    let l4 = 14 + 20;
    let sport = u16::from_be_bytes([f[l4], f[l4 + 1]]);
    let dport = u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]);
    let flow = usize::from(if sport == 443 { dport } else { sport } - 40_000);
    let seq = u32::from_be_bytes(f[l4 + 4..l4 + 8].try_into().unwrap());
    let ack = u32::from_be_bytes(f[l4 + 8..l4 + 12].try_into().unwrap());
    let win = u16::from_be_bytes([f[l4 + 14], f[l4 + 15]]);
    let hl = usize::from(f[l4 + 12] >> 4) * 4;
    (flow, seq, ack, win, f.len() - l4 - hl)
}

/// The handshake of flow `i` (client SYN, server SYN-ACK, client ACK) at `t`.
pub fn handshake(e: &mut Engine, t: Instant, i: usize) {
    let o = syn_opts();
    e.handle_rx(t, LAN, seg(i, true, 0, 0, SYN, 65535, &o, 0));
    e.handle_rx(t, WAN, seg(i, false, 0, 1, SYN | ACK, 65535, &o, 0));
    e.handle_rx(t, LAN, seg(i, true, 1, 1, ACK, 32768, &[], 0));
    while e.poll_tx(t, WAN).is_some() {}
    while e.poll_tx(t, LAN).is_some() {}
}

pub fn dl_report(e: &Engine) -> TcpControlReport {
    e.report()[LAN].class("dl").and_then(|c| c.tcp).unwrap()
}

pub const BOTH: TcpControl = TcpControl {
    ack_pacing: true,
    window_clamp: true,
};

/// `n` segments of data of flow `i` from the server from `seq` on, drained.
pub fn server_data(e: &mut Engine, t: Instant, i: usize, seq: u32, n: u32) {
    for k in 0..n {
        e.handle_rx(
            t,
            WAN,
            seg(i, false, seq + k * MSS, 1, ACK, 65535, &[], MSS as usize),
        );
    }
    while e.poll_tx(t, LAN).is_some() {}
}
