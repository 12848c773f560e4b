//! `--ts-lie MODE --ts-lie-port PORT`: the delay line plays a remote host
//! whose TCP timestamp clock lies (issue #36's lying clocks), on the
//! connections whose server side uses PORT.
//!
//! # Principles
//! - The server's own TCP sends; only its TSval (RFC 7323 §3) is rewritten
//!   on the way to the client, as a host with a lying clock would send it.
//!   `fast` runs its clock 1.2× from the start (inside the 0.8–1.25 ratio a
//!   receiver's one-off clock check accepts). `frozen` and `slow` tick
//!   honestly for [`HONEST_TICKS`] first, past such a check, then stop or
//!   run 0.8× (falling behind as if each segment waited longer and
//!   longer: a server adding delay).
//! - The liar keeps its own view straight: the client's TSecr is mapped
//!   back to the server's real clock on the way in (the inverse of the
//!   rewrite; for `frozen`, the latest real TSval), so the server's RTT
//!   estimate and PAWS are those of an honest host. Only what the path and
//!   the client see lies.
//! - B side = the server (the lab's `--between d0,d1`: d1 faces it).
//!   Bounded: at most [`MAX_FLOWS`] connections are followed; more pass
//!   unchanged. A frame that is not such a segment passes untouched; the
//!   TCP checksum of a rewritten one is recomputed.

use sluice_wire::tcp::{opt_kind, TcpHeader};
use std::collections::HashMap;
use std::net::IpAddr;

/// Connections followed at most.
const MAX_FLOWS: usize = 4096;
/// Ticks of the server's clock (1 ms on Linux) shown honestly before
/// `frozen` stops and `slow` falls behind: past a 2 s clock check.
pub const HONEST_TICKS: u64 = 3000;

pub use sluice_lab::attack::Clock as Lie;

pub fn parse_lie(s: &str) -> Result<Lie, String> {
    Lie::parse(s)
}

#[derive(Clone, Copy, Debug)]
struct Flow {
    first: u32,
    last_real: u32,
}

pub struct TsLie {
    lie: Lie,
    port: u16,
    /// Keyed by the client's address and port.
    flows: HashMap<(IpAddr, u16), Flow>,
}

impl TsLie {
    pub fn new(lie: Lie, port: u16) -> TsLie {
        TsLie {
            lie,
            port,
            flows: HashMap::new(),
        }
    }

    /// Rewrites `frame` going in direction `dir` (1: from the server).
    pub fn apply(&mut self, dir: usize, frame: &mut [u8]) {
        let Ok(info) = sluice_wire::parse(frame) else {
            return;
        };
        let Some(ip) = info.ip.as_ref() else {
            return;
        };
        let Ok(h) = TcpHeader::in_frame(frame, &info) else {
            return;
        };
        let from_server = dir == 1 && h.sport() == self.port;
        let to_server = dir == 0 && h.dport() == self.port;
        if !(from_server || to_server) {
            return;
        }
        let key = if from_server {
            (ip.dst, h.dport())
        } else {
            (ip.src, h.sport())
        };
        let Some(at) = ts_offset(h.option_bytes()).map(|o| ip.l4_offset + 20 + o) else {
            return;
        };
        let (val_at, ecr_at) = (at + 2, at + 6);
        let read = |f: &[u8], i: usize| {
            f.get(i..i + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (Some(tsval), Some(tsecr)) = (read(frame, val_at), read(frame, ecr_at)) else {
            return;
        };
        let (field, new) = if from_server {
            if !self.flows.contains_key(&key) && self.flows.len() >= MAX_FLOWS {
                return;
            }
            let f = self.flows.entry(key).or_insert(Flow {
                first: tsval,
                last_real: tsval,
            });
            f.last_real = tsval;
            let e = u64::from(tsval.wrapping_sub(f.first));
            (val_at, f.first.wrapping_add(show(self.lie, e) as u32))
        } else {
            let Some(f) = self.flows.get(&key) else {
                return;
            };
            let shown = u64::from(tsecr.wrapping_sub(f.first));
            let real = match self.lie {
                Lie::Frozen if shown >= HONEST_TICKS => f.last_real,
                Lie::Frozen => tsecr,
                Lie::Fast => f.first.wrapping_add((shown * 5 / 6) as u32),
                Lie::Slow if shown <= HONEST_TICKS => tsecr,
                Lie::Slow => {
                    let late = (shown - HONEST_TICKS) * 5 / 4;
                    f.first.wrapping_add((HONEST_TICKS + late) as u32)
                }
            };
            (ecr_at, real)
        };
        if let Some(b) = frame.get_mut(field..field + 4) {
            b.copy_from_slice(&new.to_be_bytes());
        }
        let sum_at = ip.l4_offset + 16;
        if let Ok(sum) = sluice_wire::tcp::tcp_checksum(frame, &info) {
            if let Some(b) = frame.get_mut(sum_at..sum_at + 2) {
                b.copy_from_slice(&sum.to_be_bytes());
            }
        }
    }
}

/// The ticks shown `e` real ticks into a connection.
fn show(lie: Lie, e: u64) -> u64 {
    let (num, den) = lie.rate();
    match lie {
        Lie::Fast => e * num / den,
        Lie::Frozen | Lie::Slow if e <= HONEST_TICKS => e,
        Lie::Frozen | Lie::Slow => HONEST_TICKS + (e - HONEST_TICKS) * num / den,
    }
}

/// Offset of the timestamps option (its kind byte) in the option bytes.
fn ts_offset(opts: &[u8]) -> Option<usize> {
    let mut i = 0;
    // Bounded by the 40 option bytes: each step moves at least one.
    while i < opts.len() {
        match opts[i] {
            opt_kind::EOL => return None,
            opt_kind::NOP => i += 1,
            kind => {
                let len = usize::from(*opts.get(i + 1)?);
                if len < 2 {
                    return None;
                }
                if kind == opt_kind::TIMESTAMPS && len == 10 && i + 10 <= opts.len() {
                    return Some(i);
                }
                i += len;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::build::{self, TcpSpec};
    use sluice_wire::tcp::TcpOption;
    use std::net::Ipv4Addr;

    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

    fn seg(from_server: bool, tsval: u32, tsecr: u32) -> Vec<u8> {
        let mut opts = vec![opt_kind::NOP, opt_kind::NOP];
        TcpOption::Timestamps { tsval, tsecr }.encode(&mut opts);
        let (src, dst, sport, dport) = if from_server {
            (SERVER, CLIENT, 5399, 40000)
        } else {
            (CLIENT, SERVER, 40000, 5399)
        };
        let spec = TcpSpec {
            sport,
            dport,
            seq: 1,
            ack: 1,
            flags: sluice_wire::tcp_flags::ACK,
            window: 100,
            options: &opts,
            payload_len: 10,
        };
        build::tcp_with(src, dst, &spec)
    }

    /// (TSval, TSecr) of a frame, and whether its checksum is right.
    fn ts(f: &[u8]) -> ((u32, u32), bool) {
        let info = sluice_wire::parse(f).unwrap();
        let h = TcpHeader::in_frame(f, &info).unwrap();
        let ok = sluice_wire::tcp::tcp_checksum(f, &info) == Ok(h.checksum());
        (h.segment().options.timestamps.unwrap(), ok)
    }

    #[test]
    fn each_lie_rewrites_the_servers_clock_and_maps_the_echo_back() {
        // (lie, shown 1000 ticks in, shown 5000 ticks in)
        for (lie, at_1k, at_5k) in [
            (Lie::Frozen, 6000, 8000),
            (Lie::Fast, 6200, 11000),
            (Lie::Slow, 6000, 9600),
        ] {
            let mut l = TsLie::new(lie, 5399);
            let mut a = seg(true, 5000, 1);
            l.apply(1, &mut a);
            assert_eq!(ts(&a), ((5000, 1), true), "{lie:?}: the first is as sent");
            for (real, shown) in [(6000, at_1k), (10_000, at_5k)] {
                let mut b = seg(true, real, 2);
                l.apply(1, &mut b);
                assert_eq!(ts(&b), ((shown, 2), true), "{lie:?} at {real}");
                // The client echoes what it saw; the server gets its own clock.
                let mut echo = seg(false, 7, shown);
                l.apply(0, &mut echo);
                assert_eq!(ts(&echo), ((7, real), true), "{lie:?} echo of {shown}");
            }
        }
    }

    #[test]
    fn other_connections_and_directions_pass_untouched() {
        let mut l = TsLie::new(Lie::Fast, 5399);
        let mut a = seg(true, 5000, 1);
        l.apply(0, &mut a);
        assert_eq!(
            a,
            seg(true, 5000, 1),
            "a server segment going the other way"
        );
        let mut b = seg(true, 5000, 1);
        let mut other = TsLie::new(Lie::Fast, 5201);
        other.apply(1, &mut b);
        assert_eq!(b, seg(true, 5000, 1), "another port");
        let mut garbage = vec![0u8; 30];
        l.apply(1, &mut garbage);
        assert_eq!(garbage, vec![0u8; 30]);
        assert_eq!(parse_lie("fast"), Ok(Lie::Fast));
        assert!(parse_lie("1.2").is_err());
    }
}
