//! Values of command-line options shared by subcommands, parsed with a
//! clear error (clap prints it with the option's name).

use sluice_conf::ir::IpNet;
use sluice_io::Method;
use std::net::IpAddr;

pub fn parse_bridge(s: &str) -> Result<(String, String), String> {
    match s.split_once(',') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() && a != b => {
            Ok((a.to_string(), b.to_string()))
        }
        _ => Err(format!(
            "expected LAN_IF,WAN_IF (two different names), got `{s}`"
        )),
    }
}

pub fn parse_define(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got `{s}`")),
    }
}

/// Smallest `--memory-limit`: room for a few dozen full-sized frames; below
/// it a queue could not even absorb one burst.
const MEMORY_LIMIT_MIN: u64 = 64 << 10;

pub fn parse_memory_limit(s: &str) -> Result<u64, String> {
    let n = sluice_time::units::parse_bytes(s).map_err(|e| {
        format!("`{s}`: {e}; write bytes with an optional K, M or G (powers of 1024), e.g. 64MiB")
    })?;
    if n < MEMORY_LIMIT_MIN {
        return Err(format!(
            "`{s}` is below the smallest memory limit, {}; the default is {}",
            sluice_time::units::format_bytes(MEMORY_LIMIT_MIN),
            sluice_time::units::format_bytes(sluice_engine::DEFAULT_MEMORY_LIMIT)
        ));
    }
    Ok(n)
}

pub fn parse_method(s: &str) -> Result<Method, String> {
    match s {
        "ring" => Ok(Method::Ring),
        "mmsg" => Ok(Method::Mmsg),
        "xdp" => Ok(Method::Xdp),
        "xdp-generic" => Ok(Method::XdpGeneric),
        _ => Err(format!(
            "expected mmsg, ring, xdp or xdp-generic, got `{s}`"
        )),
    }
}

/// `--xdp-frames N`: AF_XDP receive chunks per RX queue.
pub fn parse_xdp_frames(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("expected a number of chunks (e.g. 2048), got `{s}`"))?;
    sluice_io::check_rx_frames(n)
}

pub fn parse_iface_addr(s: &str) -> Result<(String, IpNet), String> {
    let hint = "expected IF=ADDR[/LEN], e.g. wan0=203.0.113.2/24 or wan0=2001:db8::2";
    let Some((name, net)) = s.split_once('=').filter(|(n, _)| !n.is_empty()) else {
        return Err(format!("{hint}, got `{s}`"));
    };
    let (addr, len) = match net.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (net, None),
    };
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("`{addr}` is not an IPv4 or IPv6 address ({hint})"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match len {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| format!("prefix length `{l}` of {addr}: 0 to {max}"))?,
    };
    Ok((name.to_string(), IpNet { addr, prefix }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iface_addr_values() {
        let (n, net) = parse_iface_addr("wan0=203.0.113.2/24").unwrap();
        assert_eq!(
            (n.as_str(), net.addr.to_string(), net.prefix),
            ("wan0", "203.0.113.2".into(), 24)
        );
        let (_, net) = parse_iface_addr("wan0=2001:db8::2").unwrap();
        assert_eq!(net.prefix, 128);
        for (bad, says) in [
            ("wan0", "expected IF=ADDR"),
            ("=1.2.3.4", "expected IF=ADDR"),
            ("wan0=1.2.3", "not an IPv4 or IPv6 address"),
            ("wan0=1.2.3.4/33", "0 to 32"),
            ("wan0=::1/129", "0 to 128"),
        ] {
            let e = parse_iface_addr(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn xdp_frames_values() {
        assert_eq!(parse_xdp_frames("2048"), Ok(2048));
        for (bad, says) in [
            ("2k", "expected a number of chunks"),
            ("1000", "a power of two from 256 to 32768"),
            ("65536", "a power of two from 256 to 32768"),
        ] {
            let e = parse_xdp_frames(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
