//! A packet generator that is not the bottleneck (`sluice lab blast`, the
//! `blast` example, and the forwarding part of `sluice lab bench`).
//!
//! # Principles
//! - The generator must outrun what it measures: frames are built once
//!   (one per flow) and sent from a fixed iovec array with AF_PACKET
//!   `sendmmsg` in batches and `PACKET_QDISC_BYPASS` (straight to the
//!   driver, no qdisc lock), so the hot loop is only the system call;
//!   nothing is allocated or copied in user space.
//! - Frames are UDP/IPv4 with valid IP and UDP checksums
//!   (`sluice_wire::build`), over N flows (source ports `sport..sport+N`,
//!   interleaved within each batch), for a duration or paced to a rate.
//! - `len` is the frame length without the 4-byte FCS: 60 is a 64 B frame
//!   on the wire, 1514 a 1518 B one (MTU 1500).
//! - A frame the kernel refuses for now (EAGAIN/ENOBUFS) is retried, never
//!   counted as sent; any other error ends the run with that error.

use crate::ring::{PACKET_QDISC_BYPASS, SOL_PACKET};
use crate::sock::{bind_ll, packet_socket};
use crate::sockopt::{self, ifindex};
use sluice_wire::build;
use std::io::{self, Write as _};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Upper bound of `batch`: the iovec/mmsghdr arrays are this long.
pub const MAX_BATCH: usize = 1024;
/// Upper bound of `flows`: one prebuilt frame each.
pub const MAX_FLOWS: usize = 65_536;
/// Ethernet + IPv4 + UDP headers.
pub const MIN_LEN: usize = 42 + 1;
/// The largest frame `len` may ask for (a jumbo frame).
pub const MAX_LEN: usize = 9000;
/// Send buffer of the generator's socket.
const SNDBUF_BYTES: libc::c_int = 8 << 20;

/// What to send.
#[derive(Clone, Debug)]
pub struct BlastOptions {
    pub dev: String,
    pub dst_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    /// Frame length without the FCS, `MIN_LEN..=MAX_LEN`.
    pub len: usize,
    /// Flows, `1..=MAX_FLOWS`.
    pub flows: usize,
    pub duration: Duration,
    /// Frames per second; 0 = as fast as possible.
    pub pps: f64,
    /// Frames per `sendmmsg`, `1..=MAX_BATCH`.
    pub batch: usize,
}

impl BlastOptions {
    /// Checks the ranges: what is wrong, and the allowed values.
    pub fn validate(&self) -> Result<(), String> {
        if self.dev.is_empty() {
            return Err("an interface is required".into());
        }
        if !(MIN_LEN..=MAX_LEN).contains(&self.len) {
            return Err(format!(
                "frame length {} out of range: allowed {MIN_LEN}..={MAX_LEN} \
                 (without the FCS; the Ethernet, IPv4 and UDP headers take 42 B)",
                self.len
            ));
        }
        if !(1..=MAX_FLOWS).contains(&self.flows) {
            return Err(format!(
                "flows {} out of range: allowed 1..={MAX_FLOWS}",
                self.flows
            ));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(format!(
                "batch {} out of range: allowed 1..={MAX_BATCH}",
                self.batch
            ));
        }
        if !(self.pps >= 0.0 && self.pps.is_finite()) {
            return Err(format!("rate {} pps: must be ≥ 0 (0 = unpaced)", self.pps));
        }
        Ok(())
    }
}

/// What was sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct BlastReport {
    pub sent: u64,
    /// `sendmmsg` calls the kernel pushed back on (retried).
    pub blocked: u64,
    pub elapsed: Duration,
}

impl BlastReport {
    pub fn pps(&self) -> f64 {
        self.sent as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// One line for people: frames, rate, wire bit rate (frames of `len`
    /// bytes plus FCS, preamble and gap: 24 B each).
    pub fn summary(&self, len: usize) -> String {
        let secs = self.elapsed.as_secs_f64();
        format!(
            "sent {} frames of {len} B in {secs:.2} s: {:.0} pps, {:.3} Gbit/s on the wire (blocked {})",
            self.sent,
            self.pps(),
            self.sent as f64 * (len + 24) as f64 * 8.0 / secs.max(1e-9) / 1e9,
            self.blocked
        )
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!(
            "bad MAC address `{s}` (expected aa:bb:cc:dd:ee:ff)"
        ));
    }
    for (d, p) in m.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16)
            .map_err(|_| format!("bad MAC address `{s}` (expected aa:bb:cc:dd:ee:ff)"))?;
    }
    Ok(m)
}

fn if_mac(dev: &str) -> io::Result<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))?;
    parse_mac(s.trim()).map_err(io::Error::other)
}

/// A TX-only packet socket bound to `dev` with the qdisc bypassed.
fn tx_socket(dev: &str) -> io::Result<OwnedFd> {
    let ifindex = ifindex(dev)?;
    // Protocol 0: this socket never receives, so the kernel does not clone
    // every frame of the interface into it. Blocking: the generator waits
    // for room rather than spinning.
    let fd = packet_socket(false)?;
    let one: libc::c_int = 1;
    if let Err(e) = sockopt::setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_QDISC_BYPASS, &one) {
        // A lost warning must not end the generator (stderr may be full).
        let _ = writeln!(
            io::stderr(),
            "blast: PACKET_QDISC_BYPASS: {e} (going through the qdisc)"
        );
    }
    sockopt::set_buf(fd.as_raw_fd(), true, SNDBUF_BYTES);
    bind_ll(fd.as_raw_fd(), ifindex, 0)?;
    Ok(fd)
}

/// The prebuilt frames, one per flow.
fn frames(o: &BlastOptions, src_mac: [u8; 6]) -> Vec<Vec<u8>> {
    (0..o.flows)
        .map(|i| {
            let sport = o.sport.wrapping_add(i as u16);
            let mut f = build::udp_v4(o.src, o.dst, sport, o.dport, o.len - 42);
            f[0..6].copy_from_slice(&o.dst_mac);
            f[6..12].copy_from_slice(&src_mac);
            f
        })
        .collect()
}

/// Sends until `o.duration` has passed. `progress` is called about once a
/// second with the rate of the last second (frames per second).
pub fn run(o: &BlastOptions, progress: &mut dyn FnMut(f64)) -> io::Result<BlastReport> {
    o.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let frames = frames(o, if_mac(&o.dev)?);
    let fd = tx_socket(&o.dev)?;

    // One iovec per slot; slot j of every batch carries flow (k + j) mod N,
    // so the flows interleave. Rebuilt only when N does not divide the batch.
    // SAFETY: all-zero iovec/mmsghdr arrays are valid values.
    let mut iov: Vec<libc::iovec> = vec![unsafe { std::mem::zeroed() }; o.batch];
    // SAFETY: as above.
    let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; o.batch];
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

    let start = Instant::now();
    let end = start + o.duration;
    let mut r = BlastReport::default();
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
            progress((r.sent - last_sent) as f64 / dt);
            last_print = now;
            last_sent = r.sent;
        }
        let mut want = o.batch;
        if o.pps > 0.0 {
            let due = (now.duration_since(start).as_secs_f64() * o.pps) as u64;
            let ahead = due.saturating_sub(r.sent) as usize;
            if ahead == 0 {
                std::hint::spin_loop();
                continue;
            }
            want = want.min(ahead);
        }
        // SAFETY: `msgs[..want]` point at `iov[..want]`, which point at the
        // frames in `frames`, all alive and unmodified during the call; the
        // socket is bound, so no destination address is needed.
        let n =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), want as libc::c_uint, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                    r.blocked += 1;
                    continue;
                }
                _ => return Err(e),
            }
        }
        r.sent += n as u64;
        if frames.len() > 1 && !o.batch.is_multiple_of(frames.len()) {
            next_flow = (next_flow + n as usize) % frames.len();
            fill(&mut iov, &mut msgs, next_flow);
        }
    }
    r.elapsed = start.elapsed();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> BlastOptions {
        BlastOptions {
            dev: "c0".into(),
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            sport: 65_535,
            dport: 9,
            len: 60,
            flows: 3,
            duration: Duration::from_secs(1),
            pps: 0.0,
            batch: 256,
        }
    }

    #[test]
    fn frames_are_whole_udp_frames_one_per_flow() {
        let o = opts();
        let f = frames(&o, [2, 0, 0, 0, 0, 1]);
        assert_eq!(f.len(), 3);
        for (i, fr) in f.iter().enumerate() {
            assert_eq!(fr.len(), 60);
            assert_eq!(&fr[0..6], &[2, 0, 0, 0, 0, 2]);
            assert_eq!(&fr[6..12], &[2, 0, 0, 0, 0, 1]);
            let info = sluice_wire::parse(fr).expect("a valid frame");
            let ip = info.ip.expect("IPv4");
            assert_eq!(ip.src, std::net::IpAddr::from(o.src));
            // Source ports count up from `sport`, wrapping.
            let sport = u16::from_be_bytes([fr[34], fr[35]]);
            assert_eq!(sport, o.sport.wrapping_add(i as u16));
        }
    }

    #[test]
    fn out_of_range_options_say_what_is_allowed() {
        let mut o = opts();
        o.len = 42;
        assert!(o.validate().unwrap_err().contains("allowed 43..=9000"));
        let mut o = opts();
        o.flows = 0;
        assert!(o.validate().unwrap_err().contains("allowed 1..=65536"));
        let mut o = opts();
        o.batch = 5000;
        assert!(o.validate().unwrap_err().contains("allowed 1..=1024"));
        let mut o = opts();
        o.pps = f64::NAN;
        assert!(o.validate().is_err());
        assert!(opts().validate().is_ok());
        assert!(parse_mac("02:00:00:00:00").is_err());
        assert_eq!(parse_mac("02:00:00:00:00:0a").unwrap()[5], 10);
    }
}
