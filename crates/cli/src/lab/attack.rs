//! `sluice lab attack KIND` (hidden): the lab's hostile host, started by
//! the lab runner inside the lab's namespaces (sluice_lab::attack), and
//! `sluice lab attack sink`, the attacker's own peer in the server
//! namespace.
//!
//! # Principles
//! - Bounded in count and time by its own arguments: it stops at `--secs`
//!   and sends at most its kind's budget of frames, whatever happens.
//! - Lab addresses only: it refuses a source, server or claimed address
//!   outside 10.77.0.0/16 (the lab's, crates/lab/src/topo.rs), so even a
//!   mistaken invocation on a real machine cannot write anyone else's.
//! - Frames are built by `sluice_wire::build` (valid checksums) and sent
//!   through `sluice_io::raw::RawLink`; the forged ACK reads the
//!   connection's sequence numbers from the server's own segments as they
//!   arrive on `--dev` (the receive side of the data plane's packet
//!   socket), not from the kernel's socket state.
//! - The report is one JSON object on stdout (`AttackerOutput`), written
//!   even when the attack failed part way.

use crate::out::owriteln;
use clap::Args;
use sluice_lab::attack::{
    AttackerOutput, CLAIMS, CLAIM_REFRESH_S, FORGED_ACK_EVERY_S, FORGED_ADVANCE, MAX_LIARS,
    SINK_PORT, SYN_PER_S,
};
use sluice_time::random::SplitMix64;
use sluice_wire::build::{self, TcpSpec};
use sluice_wire::tcp::{seq_after, TcpHeader, TcpOption};
use sluice_wire::tcp_flags;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The lab's addresses: 10.77.0.0/16.
const LAB_NET: (u8, u8) = (10, 77);
/// Most connections the sink serves at once (the lying clocks' at most).
const SINK_MAX_CONNS: usize = MAX_LIARS as usize;
/// The sink's trickle: this many bytes every [`TRICKLE_EVERY`].
const TRICKLE_BYTES: usize = 100;
const TRICKLE_EVERY: Duration = Duration::from_millis(100);
/// Polling step of the attack loops.
const STEP: Duration = Duration::from_millis(2);
/// How long the forged-ACK attacker waits for its connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The window field of a forged ACK (unscaled; any plausible value).
const FORGED_WINDOW: u16 = 1024;

#[derive(Args)]
pub struct AttackArgs {
    /// forged-ack, syn-flood, addr-claims, or `sink` (the peer).
    kind: String,
    /// Interface to send on (the LAN host's).
    #[arg(long, value_name = "IF", default_value = "c0")]
    dev: String,
    /// The attacker's own address.
    #[arg(long, value_name = "ADDR", default_value = "10.77.0.1")]
    src: Ipv4Addr,
    /// The server namespace's address.
    #[arg(long, value_name = "ADDR", default_value = "10.77.1.2")]
    server: Ipv4Addr,
    /// The peer's port (the sink listens there).
    #[arg(long, value_name = "PORT", default_value_t = SINK_PORT)]
    port: u16,
    /// The LAN gateway's MAC (crafted frames go to it).
    #[arg(long, value_name = "MAC", value_parser = sluice_io::blast::parse_mac)]
    gw_mac: Option<[u8; 6]>,
    /// How long, seconds (at most 600).
    #[arg(long, value_name = "S")]
    secs: f64,
    /// lying-clock: how many connections to hold open to the peer.
    #[arg(long, value_name = "N", default_value_t = 6,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LIARS)))]
    liars: u32,
}

pub fn run(a: AttackArgs) -> std::process::ExitCode {
    let out = match check(&a) {
        Err(e) => AttackerOutput {
            error: Some(e),
            ..AttackerOutput::default()
        },
        Ok(deadline) => match a.kind.as_str() {
            "sink" => sink(&a, deadline),
            "forged-ack" => forged_ack(&a, deadline),
            "syn-flood" => syn_flood(&a, deadline),
            "addr-claims" => addr_claims(&a, deadline),
            "lying-clock" => lying_clock(&a, deadline),
            k => AttackerOutput {
                error: Some(format!(
                    "`{k}`: allowed: forged-ack, syn-flood, addr-claims, lying-clock, sink"
                )),
                ..AttackerOutput::default()
            },
        },
    };
    let failed = out.error.is_some();
    owriteln!("{}", serde_json::to_string(&out).unwrap_or_default());
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

fn in_lab(a: Ipv4Addr) -> bool {
    let o = a.octets();
    (o[0], o[1]) == LAB_NET
}

/// The deadline, once the arguments are known to stay inside the lab.
fn check(a: &AttackArgs) -> Result<Instant, String> {
    for (what, ip) in [("--src", a.src), ("--server", a.server)] {
        if !in_lab(ip) {
            return Err(format!("{what} {ip}: outside the lab's 10.77.0.0/16"));
        }
    }
    let secs = Duration::try_from_secs_f64(a.secs)
        .ok()
        .filter(|d| !d.is_zero() && d.as_secs_f64() <= sluice_lab::attack::MAX_SECS)
        .ok_or_else(|| format!("--secs {}: more than 0 and at most 600", a.secs))?;
    Ok(Instant::now() + secs)
}

fn failed(sent: u64, detail: String, e: impl std::fmt::Display) -> AttackerOutput {
    AttackerOutput {
        sent,
        detail,
        error: Some(e.to_string()),
    }
}

/// Accepts connections on `--port` and trickles a few bytes to each until
/// the deadline, so the attacker's connection carries data (sequence
/// numbers that move) without competing with the victim.
fn sink(a: &AttackArgs, deadline: Instant) -> AttackerOutput {
    let l = match TcpListener::bind(("0.0.0.0", a.port)).and_then(|l| {
        l.set_nonblocking(true)?;
        Ok(l)
    }) {
        Ok(l) => l,
        Err(e) => return failed(0, String::new(), format!("listen on {}: {e}", a.port)),
    };
    let mut conns: Vec<TcpStream> = Vec::new();
    let mut next = Instant::now();
    let chunk = [b'x'; TRICKLE_BYTES];
    let mut sent = 0u64;
    while Instant::now() < deadline {
        while let Ok((c, _)) = l.accept() {
            if conns.len() < SINK_MAX_CONNS && c.set_nonblocking(true).is_ok() {
                conns.push(c);
            }
        }
        if Instant::now() >= next {
            next += TRICKLE_EVERY;
            conns.retain_mut(|c| {
                let mut buf = [0u8; 4096];
                let open = !matches!(c.read(&mut buf), Ok(0));
                let wrote = match c.write(&chunk) {
                    Ok(n) => {
                        sent += n as u64;
                        true
                    }
                    Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                };
                open && wrote
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    AttackerOutput {
        sent,
        detail: format!("sink on port {}: {sent} bytes trickled", a.port),
        error: None,
    }
}

/// What the server's latest segment on the attacker's connection says.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Seen {
    /// The server's next sequence number (its seq + data + SYN/FIN).
    next_seq: u32,
    /// What the server acknowledges: the attacker's own next sequence.
    ack: u32,
    /// (TSval, TSecr) of the server's segment.
    ts: Option<(u32, u32)>,
    /// The frame's Ethernet source (the gateway) and destination (us).
    gw: [u8; 6],
    me: [u8; 6],
}

/// The server's segment on connection `server:port -> me:lport`, if
/// `frame` is one.
fn seen_from(frame: &[u8], server: Ipv4Addr, port: u16, me: Ipv4Addr, lport: u16) -> Option<Seen> {
    let info = sluice_wire::parse(frame).ok()?;
    let ip = info.ip.as_ref()?;
    if ip.src != IpAddr::V4(server) || ip.dst != IpAddr::V4(me) {
        return None;
    }
    let h = TcpHeader::in_frame(frame, &info).ok()?;
    if h.sport() != port || h.dport() != lport || h.flags() & tcp_flags::ACK == 0 {
        return None;
    }
    let seg = h.segment();
    let syn_fin = u32::from(h.flags() & (tcp_flags::SYN | tcp_flags::FIN) != 0);
    Some(Seen {
        next_seq: seg.seq.wrapping_add(seg.payload_len).wrapping_add(syn_fin),
        ack: seg.ack,
        ts: seg.options.timestamps,
        gw: frame.get(6..12)?.try_into().ok()?,
        me: frame.get(..6)?.try_into().ok()?,
    })
}

/// The forged pure ACK: in sequence on the attacker's own connection, but
/// acknowledging [`FORGED_ADVANCE`] bytes beyond what the server sent.
fn forged_frame(s: &Seen, me: Ipv4Addr, lport: u16, server: Ipv4Addr, port: u16) -> Vec<u8> {
    let mut opts = Vec::new();
    if let Some((tsval, tsecr)) = s.ts {
        // Echo the server's clock; ours one tick on from what it echoed.
        TcpOption::Timestamps {
            tsval: tsecr.wrapping_add(1),
            tsecr: tsval,
        }
        .encode(&mut opts);
    }
    let mut f = build::tcp_with(
        me,
        server,
        &TcpSpec {
            sport: lport,
            dport: port,
            seq: s.ack,
            ack: s.next_seq.wrapping_add(FORGED_ADVANCE),
            flags: tcp_flags::ACK,
            window: FORGED_WINDOW,
            options: &opts,
            payload_len: 0,
        },
    );
    f[..6].copy_from_slice(&s.gw);
    f[6..12].copy_from_slice(&s.me);
    f
}

/// Opens its own connection to the sink, then every
/// [`FORGED_ACK_EVERY_S`] sends one forged ACK on it (the first after a
/// second of ordinary traffic).
fn forged_ack(a: &AttackArgs, deadline: Instant) -> AttackerOutput {
    let mut link = match sluice_io::raw::RawLink::open(&a.dev) {
        Ok(l) => l,
        Err(e) => return failed(0, String::new(), format!("{}: {e}", a.dev)),
    };
    let peer = SocketAddr::from((a.server, a.port));
    let mut conn = match TcpStream::connect_timeout(&peer, CONNECT_TIMEOUT)
        .and_then(|c| c.set_nonblocking(true).map(|()| c))
    {
        Ok(c) => c,
        Err(e) => return failed(0, String::new(), format!("connect to {peer}: {e}")),
    };
    let lport = conn.local_addr().map_or(0, |l| l.port());
    let every = Duration::from_secs_f64(FORGED_ACK_EVERY_S);
    let mut next_at = Instant::now() + Duration::from_secs(1);
    let (mut last, mut sent, mut last_ack) = (None::<Seen>, 0u64, 0u32);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        while conn.read(&mut buf).is_ok_and(|n| n > 0) {}
        let r = link.recv(256, &mut |f| {
            if let Some(s) = seen_from(f, a.server, a.port, a.src, lport) {
                if last.is_none_or(|l| !seq_after(l.next_seq, s.next_seq)) {
                    last = Some(s);
                }
            }
        });
        if let Err(e) = r {
            return failed(sent, String::new(), format!("receive on {}: {e}", a.dev));
        }
        if let Some(s) = last.filter(|_| Instant::now() >= next_at) {
            let f = forged_frame(&s, a.src, lport, a.server, a.port);
            match link.send(std::slice::from_ref(&f)) {
                Ok(n) => sent += n as u64,
                Err(e) => return failed(sent, String::new(), format!("send: {e}")),
            }
            last_ack = s.next_seq.wrapping_add(FORGED_ADVANCE);
            next_at += every;
        }
        std::thread::sleep(STEP);
    }
    let detail = format!(
        "own connection {}:{lport} -> {peer}: {sent} pure ACKs each acknowledging {FORGED_ADVANCE:#x} \
         bytes beyond the server's next sequence number (last forged ack {last_ack}, server's \
         next seq then {})",
        a.src,
        last.map_or(0, |s| s.next_seq)
    );
    match last {
        None => failed(
            sent,
            detail,
            "saw no segment of the connection from the server",
        ),
        Some(_) => AttackerOutput {
            sent,
            detail,
            error: None,
        },
    }
}

/// Holds `--liars` connections to the peer open until the deadline,
/// reading what it trickles: their TSval lies on the way (the delay
/// line's `--ts-lie`), so the shaper sees one remote host's lying clocks.
fn lying_clock(a: &AttackArgs, deadline: Instant) -> AttackerOutput {
    let peer = SocketAddr::from((a.server, a.port));
    let mut conns = Vec::new();
    for _ in 0..a.liars {
        match TcpStream::connect_timeout(&peer, CONNECT_TIMEOUT)
            .and_then(|c| c.set_nonblocking(true).map(|()| c))
        {
            Ok(c) => conns.push((c, 0u64)),
            Err(e) => {
                return failed(0, String::new(), format!("connect to {peer}: {e}"));
            }
        }
    }
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        for (c, got) in conns.iter_mut() {
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                *got += n as u64;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive = conns.iter().filter(|(_, got)| *got > 0).count();
    let total: u64 = conns.iter().map(|(_, g)| g).sum();
    let detail = format!(
        "{} connections to {peer} held open; {alive} received data ({total} bytes in all)",
        conns.len()
    );
    if alive < conns.len() {
        return failed(0, detail, "some lying connections carried no data");
    }
    AttackerOutput {
        sent: 0,
        detail,
        error: None,
    }
}

/// The stream spoofed fields are drawn from (not the loss stream: any
/// seed will do).
type Draw = SplitMix64;

fn draw() -> Draw {
    let k = sluice_io::random_key().unwrap_or([7; 16]);
    SplitMix64::new(u64::from_le_bytes(k[..8].try_into().unwrap_or_default()))
}

/// A spoofed LAN source: 10.77.0.2 to .252 (the client is .1, .253 is
/// kept unused, the modem is .254), with a MAC of its own.
fn spoofed_host(d: &mut Draw) -> (Ipv4Addr, [u8; 6]) {
    let h = 2 + (d.next_u64() % 251) as u8;
    (Ipv4Addr::new(10, 77, 0, h), [0x02, 0x77, 0xee, 0, 0, h])
}

/// A SYN as Linux sends one (MSS, SACK permitted, window scale), from a
/// spoofed LAN host to the peer.
fn syn_frame(d: &mut Draw, server: Ipv4Addr, port: u16, gw: [u8; 6]) -> Vec<u8> {
    let (src, mac) = spoofed_host(d);
    let mut opts = Vec::new();
    for o in [
        TcpOption::Mss(1460),
        TcpOption::SackPermitted,
        TcpOption::WindowScale(7),
    ] {
        o.encode(&mut opts);
    }
    let r = d.next_u64();
    let mut f = build::tcp_with(
        src,
        server,
        &TcpSpec {
            sport: 1024 + (r % 64_000) as u16,
            dport: port,
            seq: (r >> 32) as u32,
            ack: 0,
            flags: tcp_flags::SYN,
            window: 64_240,
            options: &opts,
            payload_len: 0,
        },
    );
    f[..6].copy_from_slice(&gw);
    f[6..12].copy_from_slice(&mac);
    f
}

/// [`SYN_PER_S`] SYNs per second from spoofed LAN sources to the peer, on
/// schedule (each step sends what is due), until the deadline.
fn syn_flood(a: &AttackArgs, deadline: Instant) -> AttackerOutput {
    let Some(gw) = a.gw_mac else {
        return failed(0, String::new(), "--gw-mac is required");
    };
    let link = match sluice_io::raw::RawLink::open(&a.dev) {
        Ok(l) => l,
        Err(e) => return failed(0, String::new(), format!("{}: {e}", a.dev)),
    };
    let mut d = draw();
    let t0 = Instant::now();
    let budget = (a.secs * f64::from(SYN_PER_S)).ceil() as u64;
    let mut sent = 0u64;
    while Instant::now() < deadline && sent < budget {
        let due = ((t0.elapsed().as_secs_f64() * f64::from(SYN_PER_S)) as u64).min(budget);
        let frames: Vec<Vec<u8>> = (sent..due)
            .map(|_| syn_frame(&mut d, a.server, a.port, gw))
            .collect();
        match link.send(&frames) {
            Ok(n) => sent += n as u64,
            Err(e) => return failed(sent, String::new(), format!("send: {e}")),
        }
        std::thread::sleep(STEP);
    }
    let secs = t0.elapsed().as_secs_f64();
    AttackerOutput {
        sent,
        detail: format!(
            "{sent} SYNs in {secs:.1} s ({:.0}/s) to {}:{} from spoofed sources in \
             10.77.0.2-252",
            sent as f64 / secs.max(1e-9),
            a.server,
            a.port
        ),
        error: None,
    }
}

/// The fabricated addresses: 251 in the LAN's /24 nobody owns, and 5
/// outside it standing in for Internet addresses (still the lab's).
fn claimed(i: u32) -> Ipv4Addr {
    match i {
        0..=250 => Ipv4Addr::new(10, 77, 0, 2 + i as u8),
        _ => Ipv4Addr::new(10, 77, 3, (i - 250) as u8),
    }
}

/// A gratuitous ARP (request, sender = target) for `ip` from a fabricated
/// MAC.
fn claim_frame(i: u32) -> Vec<u8> {
    let ip = claimed(i);
    let mut f = build::arp(ip, ip);
    let mac = [0x02, 0x77, 0xcc, 0, (i >> 8) as u8, i as u8];
    f[6..12].copy_from_slice(&mac);
    f[22..28].copy_from_slice(&mac);
    f
}

/// [`CLAIMS`] gratuitous ARPs, again every [`CLAIM_REFRESH_S`], until the
/// deadline.
fn addr_claims(a: &AttackArgs, deadline: Instant) -> AttackerOutput {
    let link = match sluice_io::raw::RawLink::open(&a.dev) {
        Ok(l) => l,
        Err(e) => return failed(0, String::new(), format!("{}: {e}", a.dev)),
    };
    let frames: Vec<Vec<u8>> = (0..CLAIMS).map(claim_frame).collect();
    let (mut sent, mut rounds) = (0u64, 0u32);
    let every = Duration::from_secs_f64(CLAIM_REFRESH_S);
    let mut next = Instant::now();
    while Instant::now() < deadline {
        if Instant::now() >= next {
            match link.send(&frames) {
                Ok(n) => sent += n as u64,
                Err(e) => return failed(sent, String::new(), format!("send: {e}")),
            }
            rounds += 1;
            next += every;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    AttackerOutput {
        sent,
        detail: format!(
            "{CLAIMS} addresses claimed by gratuitous ARP {rounds} times (10.77.0.2-252 and \
             10.77.3.1-5, fabricated MACs 02:77:cc:…)"
        ),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
    const ME: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
    const GW: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xbb];

    fn server_segment(seq: u32, ack: u32, len: usize) -> Vec<u8> {
        let mut opts = Vec::new();
        TcpOption::Timestamps {
            tsval: 5000,
            tsecr: 900,
        }
        .encode(&mut opts);
        let mut f = build::tcp_with(
            SERVER,
            ME,
            &TcpSpec {
                sport: 5399,
                dport: 40000,
                seq,
                ack,
                flags: tcp_flags::ACK,
                window: 500,
                options: &opts,
                payload_len: len,
            },
        );
        f[..6].copy_from_slice(&MAC);
        f[6..12].copy_from_slice(&GW);
        f
    }

    #[test]
    fn the_forged_ack_is_in_sequence_and_acknowledges_2_31_minus_1_unsent_bytes() {
        let f = server_segment(1000, 77, 100);
        let s = seen_from(&f, SERVER, 5399, ME, 40000).expect("the server's segment");
        assert!(
            seen_from(&f, SERVER, 5399, ME, 40001).is_none(),
            "another connection"
        );
        let forged = forged_frame(&s, ME, 40000, SERVER, 5399);
        let info = sluice_wire::parse(&forged).unwrap();
        let ip = info.ip.as_ref().unwrap();
        assert_eq!((ip.src, ip.dst), (IpAddr::V4(ME), IpAddr::V4(SERVER)));
        let h = TcpHeader::in_frame(&forged, &info).unwrap();
        assert_eq!((h.sport(), h.dport()), (40000, 5399));
        assert_eq!(h.seq(), 77, "the attacker's own next sequence number");
        assert_eq!(h.ack(), 1100u32.wrapping_add(0x7fff_ffff));
        assert_eq!((h.flags(), h.payload_len()), (tcp_flags::ACK, 0));
        assert_eq!(h.segment().options.timestamps, Some((901, 5000)));
        assert_eq!((&forged[..6], &forged[6..12]), (&GW[..], &MAC[..]));
        assert_eq!(
            sluice_wire::tcp::tcp_checksum(&forged, &info),
            Ok(h.checksum()),
            "a valid checksum"
        );
    }

    #[test]
    fn spoofed_syns_and_claims_stay_inside_the_lab() {
        let mut d = SplitMix64::new(1);
        for _ in 0..1000 {
            let f = syn_frame(&mut d, SERVER, 5399, GW);
            let info = sluice_wire::parse(&f).unwrap();
            let ip = info.ip.as_ref().unwrap();
            let IpAddr::V4(src) = ip.src else {
                panic!("v4")
            };
            assert!(
                in_lab(src) && !matches!(src.octets()[3], 0 | 1 | 253..=255),
                "{src}"
            );
            let h = TcpHeader::in_frame(&f, &info).unwrap();
            assert_eq!(h.flags(), tcp_flags::SYN);
        }
        let all: std::collections::BTreeSet<Ipv4Addr> = (0..CLAIMS).map(claimed).collect();
        assert_eq!(all.len(), CLAIMS as usize, "distinct addresses");
        assert!(all
            .iter()
            .all(|a| in_lab(*a) && *a != Ipv4Addr::new(10, 77, 0, 1)));
        let f = claim_frame(3);
        assert_eq!(&f[28..32], &f[38..42], "gratuitous: sender = target");
    }
}
