//! `blast`: a packet generator that is not the bottleneck.
//!
//! Sends fixed-size UDP/IPv4 Ethernet frames (valid IP and UDP checksums,
//! built by `sluice_wire::build`) from one interface as fast as one core can
//! with AF_PACKET `sendmmsg` in batches and `PACKET_QDISC_BYPASS` (the
//! frames go straight to the driver, no qdisc lock), optionally over N flows
//! (source ports `sport..sport+N`), for D seconds or paced to a target rate.
//! Prints frames sent per second, and with `--rx-file FILE --rx-if IF` also
//! frames received by IF (read from a `/proc/<pid>/net/dev` of the receiving
//! namespace): the receiver needs no socket, packets to a closed port die in
//! the kernel.
//!
//! ```text
//! blast --dev c0 --dst-mac 02:.. [--src 10.77.0.1 --dst 10.77.0.2 --dport 9]
//!       [--len 60] [--flows 1] [--secs 5] [--pps 0] [--batch 256]
//!       [--rx-file /proc/PID/net/dev --rx-if v0]
//! ```
//!
//! # Principles
//! - The generator must outrun what it measures: frames are built once
//!   (one per flow) and sent from a fixed iovec array, so the hot loop is
//!   only `sendmmsg`; nothing is allocated or copied in user space.
//! - `--len` is the frame length without the 4-byte FCS: 60 is a 64 B frame
//!   on the wire, 1514 a 1518 B one (MTU 1500).
//! - A frame the kernel refuses for now (EAGAIN/ENOBUFS) is retried, never
//!   counted as sent; any other error stops the run.

use sluice_wire::build;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const SOL_PACKET: libc::c_int = 263;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// Upper bound of `--batch`: the iovec/mmsghdr arrays are this long.
const MAX_BATCH: usize = 1024;
/// Upper bound of `--flows`: one prebuilt frame each.
const MAX_FLOWS: usize = 65_536;

struct Args {
    dev: String,
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    len: usize,
    flows: usize,
    secs: f64,
    pps: f64,
    batch: usize,
    rx_file: Option<String>,
    rx_if: String,
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC {s}"));
    }
    for (d, p) in m.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC {s}"))?;
    }
    Ok(m)
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        dev: String::new(),
        dst_mac: [0xff; 6],
        src: Ipv4Addr::new(10, 77, 0, 1),
        dst: Ipv4Addr::new(10, 77, 0, 2),
        sport: 10_000,
        dport: 9,
        len: 60,
        flows: 1,
        secs: 5.0,
        pps: 0.0,
        batch: 256,
        rx_file: None,
        rx_if: String::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        let bad = |e: &dyn std::fmt::Display| format!("{k}: {e}");
        match k.as_str() {
            "--dev" => a.dev = v()?,
            "--dst-mac" => a.dst_mac = parse_mac(&v()?)?,
            "--src" => a.src = v()?.parse().map_err(|e| bad(&e))?,
            "--dst" => a.dst = v()?.parse().map_err(|e| bad(&e))?,
            "--sport" => a.sport = v()?.parse().map_err(|e| bad(&e))?,
            "--dport" => a.dport = v()?.parse().map_err(|e| bad(&e))?,
            "--len" => a.len = v()?.parse().map_err(|e| bad(&e))?,
            "--flows" => a.flows = v()?.parse().map_err(|e| bad(&e))?,
            "--secs" => a.secs = v()?.parse().map_err(|e| bad(&e))?,
            "--pps" => a.pps = v()?.parse().map_err(|e| bad(&e))?,
            "--batch" => a.batch = v()?.parse().map_err(|e| bad(&e))?,
            "--rx-file" => a.rx_file = Some(v()?),
            "--rx-if" => a.rx_if = v()?,
            _ => {
                return Err(format!(
                    "unknown option {k} (see the doc comment of blast.rs)"
                ))
            }
        }
    }
    if a.dev.is_empty() {
        return Err("--dev IF is required".into());
    }
    if !(42 + 1..=9000).contains(&a.len) {
        return Err("--len must be 43..=9000 (Ethernet+IPv4+UDP headers are 42 B)".into());
    }
    a.flows = a.flows.clamp(1, MAX_FLOWS);
    a.batch = a.batch.clamp(1, MAX_BATCH);
    Ok(a)
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn if_mac(dev: &str) -> io::Result<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))?;
    parse_mac(s.trim()).map_err(io::Error::other)
}

/// A TX-only packet socket bound to `dev` with the qdisc bypassed.
fn tx_socket(dev: &str) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(dev).map_err(io::Error::other)?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {dev}"),
        ));
    }
    // Protocol 0: this socket never receives, so the kernel does not clone
    // every frame of the interface into it.
    // SAFETY: plain syscall without pointers.
    let raw =
        cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let one: libc::c_int = 1;
    // SAFETY: `one` is a live c_int for the call; the length matches it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_QDISC_BYPASS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        eprintln!(
            "blast: PACKET_QDISC_BYPASS: {} (going through the qdisc)",
            io::Error::last_os_error()
        );
    }
    let sndbuf: libc::c_int = 8 << 20;
    // SAFETY: as above; failure only leaves the default buffer size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            (&sndbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    // SAFETY: an all-zero sockaddr_ll is valid; the fields that matter are set.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// rx_packets of `iface` in a /proc/net/dev-format file.
fn rx_packets(file: &str, iface: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != iface {
            return None;
        }
        rest.split_whitespace().nth(1)?.parse().ok()
    })
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("blast: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&a) {
        eprintln!("blast: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> io::Result<()> {
    let src_mac = if_mac(&a.dev)?;
    let payload = a.len - 42;
    let frames: Vec<Vec<u8>> = (0..a.flows)
        .map(|i| {
            let sport = a.sport.wrapping_add(i as u16);
            let mut f = build::udp_v4(a.src, a.dst, sport, a.dport, payload);
            f[0..6].copy_from_slice(&a.dst_mac);
            f[6..12].copy_from_slice(&src_mac);
            f
        })
        .collect();
    let fd = tx_socket(&a.dev)?;

    // One iovec per slot; slot j of every batch carries flow (k + j) mod N,
    // so the flows interleave. Rebuilt only when N does not divide the batch.
    // SAFETY: all-zero iovec/mmsghdr arrays are valid values.
    let mut iov: Vec<libc::iovec> = vec![unsafe { std::mem::zeroed() }; a.batch];
    // SAFETY: as above.
    let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; a.batch];
    let mut next_flow = 0usize;
    let fill = |iov: &mut [libc::iovec], msgs: &mut [libc::mmsghdr], first: usize| {
        for (j, (v, m)) in iov.iter_mut().zip(msgs.iter_mut()).enumerate() {
            let f = &frames[(first + j) % frames.len()];
            v.iov_base = f.as_ptr() as *mut libc::c_void;
            v.iov_len = f.len();
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
    };
    fill(&mut iov, &mut msgs, 0);

    let rx0 = a.rx_file.as_deref().and_then(|f| rx_packets(f, &a.rx_if));
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.secs);
    let mut sent: u64 = 0;
    let mut blocked: u64 = 0;
    let mut last_print = start;
    let mut last_sent = 0u64;
    // The loop runs until `end`; each pass sends at most one batch.
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if now.duration_since(last_print) >= Duration::from_secs(1) {
            let dt = now.duration_since(last_print).as_secs_f64();
            eprintln!("blast: {:.0} pps", (sent - last_sent) as f64 / dt);
            last_print = now;
            last_sent = sent;
        }
        let mut want = a.batch;
        if a.pps > 0.0 {
            let due = (now.duration_since(start).as_secs_f64() * a.pps) as u64;
            let ahead = due.saturating_sub(sent) as usize;
            if ahead == 0 {
                std::hint::spin_loop();
                continue;
            }
            want = want.min(ahead);
        }
        // SAFETY: `msgs[..want]` point at `iov[..want]`, which point at the
        // frames in `frames`, all alive and unmodified during the call; the
        // socket is bound, so no destination address is needed.
        let r =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), want as libc::c_uint, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                    blocked += 1;
                    continue;
                }
                _ => return Err(e),
            }
        }
        sent += r as u64;
        if frames.len() > 1 && !a.batch.is_multiple_of(frames.len()) {
            next_flow = (next_flow + r as usize) % frames.len();
            fill(&mut iov, &mut msgs, next_flow);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    // Let the last frames cross before reading the receiver's counter.
    std::thread::sleep(Duration::from_millis(200));
    let rx1 = a.rx_file.as_deref().and_then(|f| rx_packets(f, &a.rx_if));
    print!(
        "sent {sent} frames of {} B in {secs:.2} s: {:.0} pps, {:.3} Gbit/s on the wire (blocked {blocked})",
        a.len,
        sent as f64 / secs,
        sent as f64 * (a.len + 24) as f64 * 8.0 / secs / 1e9,
    );
    match (rx0, rx1) {
        (Some(r0), Some(r1)) => println!(
            "; received {} ({:.0} pps, {:.1} %)",
            r1 - r0,
            (r1 - r0) as f64 / secs,
            100.0 * (r1 - r0) as f64 / sent.max(1) as f64
        ),
        _ => println!(),
    }
    Ok(())
}
