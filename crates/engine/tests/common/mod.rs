//! What the engine's integration tests share.

// Each test file uses what it needs of this.
#![allow(dead_code)]

pub mod tcp;

use sluice_engine::{Engine, Options};
use std::net::Ipv4Addr;

/// [`bridge`]'s interfaces, and a host on each side.
pub const LAN: usize = 0;
pub const WAN: usize = 1;
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

/// The engine of pf.conf `text` (`$ext_if` = wan0, `$int_if` = lan0)
/// bridging lan0 (LAN) and wan0 (WAN), with a fixed hash key. Panics with
/// every diagnostic when the text does not check.
pub fn bridge(text: &str) -> Engine {
    let defines = [("ext_if", "wan0"), ("int_if", "lan0")].map(|(k, v)| (k.into(), v.into()));
    let cfg = sluice_conf::check("t.conf", text, &defines)
        .unwrap_or_else(|d| {
            panic!(
                "{}",
                d.iter()
                    .map(|d| d.render("t.conf", text))
                    .collect::<String>()
            )
        })
        .config;
    Engine::new(&cfg, Options::bridge("lan0", "wan0", [7; 16])).expect("the trees build")
}
