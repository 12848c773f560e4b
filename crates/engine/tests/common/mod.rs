//! What the engine's integration tests share.

// Each test file uses what it needs of this.
#![allow(dead_code)]

pub mod tcp;

use sluice_conf::ir::Config;
use sluice_engine::{Engine, Options};
use sluice_time::Instant;
use sluice_wire::tcp::TcpOption;
use std::net::Ipv4Addr;

/// [`bridge`]'s interfaces, and a host on each side.
pub const LAN: usize = 0;
pub const WAN: usize = 1;
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

/// The checked configuration of pf.conf `text` (`$ext_if` = wan0,
/// `$int_if` = lan0). Panics with every diagnostic when the text does not
/// check.
pub fn config(text: &str) -> Config {
    let defines = [("ext_if", "wan0"), ("int_if", "lan0")].map(|(k, v)| (k.into(), v.into()));
    sluice_conf::check("t.conf", text, &defines)
        .unwrap_or_else(|d| {
            panic!(
                "{}",
                d.iter()
                    .map(|d| d.render("t.conf", text))
                    .collect::<String>()
            )
        })
        .config
}

/// The engine of pf.conf `text` ([`config`]) bridging lan0 (LAN) and wan0
/// (WAN), with a fixed hash key.
pub fn bridge(text: &str) -> Engine {
    bridge_keyed(text, [7; 16])
}

/// [`bridge`] with the hash key `key` (where a test's expectations were
/// taken with another key's flow hashing).
pub fn bridge_keyed(text: &str, key: [u8; 16]) -> Engine {
    Engine::new(&config(text), Options::bridge("lan0", "wan0", key)).expect("the trees build")
}

/// `n` UDP frames with `payload` bytes each from 10.0.0.2 to 192.0.2.1:53,
/// source ports from `first_port` on, received on the LAN at `now`.
pub fn udp_burst(e: &mut Engine, now: Instant, first_port: u16, n: u16, payload: usize) {
    for i in 0..n {
        e.handle_rx(now, LAN, udp_frame(first_port + i, payload));
    }
}

/// One frame of [`udp_burst`].
pub fn udp_frame(sport: u16, payload: usize) -> Vec<u8> {
    sluice_wire::build::udp_v4(
        Ipv4Addr::new(10, 0, 0, 2),
        Ipv4Addr::new(192, 0, 2, 1),
        sport,
        53,
        payload,
    )
}

pub use sluice_engine::testing::Conn;

/// The options of a segment stamped `(tsval, tsecr)`.
pub fn stamp(ts: (u32, u32)) -> Vec<u8> {
    let mut o = Vec::new();
    TcpOption::Timestamps {
        tsval: ts.0,
        tsecr: ts.1,
    }
    .encode(&mut o);
    o
}
