//! `blast`: the packet generator of `sluice_io::blast` as a stand-alone
//! program, for `crates/io/scripts/pps.sh` (`sluice lab blast` is the same
//! generator inside the sluice binary).
//!
//! ```text
//! blast --dev c0 --dst-mac 02:.. [--src 10.77.0.1 --dst 10.77.0.2 --dport 9]
//!       [--sport 10000] [--len 60] [--flows 1] [--secs 5] [--pps 0] [--batch 256]
//!       [--rx-file /proc/PID/net/dev --rx-if v0]
//! ```
//!
//! Prints frames sent per second, and with `--rx-file FILE --rx-if IF` also
//! frames received by IF (read from a `/proc/<pid>/net/dev` of the receiving
//! namespace): the receiver needs no socket, packets to a closed port die in
//! the kernel.

use sluice_io::blast::{self, BlastOptions};
use std::net::Ipv4Addr;
use std::time::Duration;

fn parse_args() -> Result<(BlastOptions, Option<String>, String), String> {
    let mut o = BlastOptions {
        dev: String::new(),
        dst_mac: [0xff; 6],
        src: Ipv4Addr::new(10, 77, 0, 1),
        dst: Ipv4Addr::new(10, 77, 0, 2),
        sport: 10_000,
        dport: 9,
        len: 60,
        flows: 1,
        duration: Duration::from_secs(5),
        pps: 0.0,
        batch: 256,
    };
    let (mut rx_file, mut rx_if) = (None, String::new());
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        let bad = |e: &dyn std::fmt::Display| format!("{k}: {e}");
        match k.as_str() {
            "--dev" => o.dev = v()?,
            "--dst-mac" => o.dst_mac = blast::parse_mac(&v()?)?,
            "--src" => o.src = v()?.parse().map_err(|e| bad(&e))?,
            "--dst" => o.dst = v()?.parse().map_err(|e| bad(&e))?,
            "--sport" => o.sport = v()?.parse().map_err(|e| bad(&e))?,
            "--dport" => o.dport = v()?.parse().map_err(|e| bad(&e))?,
            "--len" => o.len = v()?.parse().map_err(|e| bad(&e))?,
            "--flows" => o.flows = v()?.parse().map_err(|e| bad(&e))?,
            "--secs" => {
                let s: f64 = v()?.parse().map_err(|e| bad(&e))?;
                o.duration = Duration::try_from_secs_f64(s).map_err(|e| bad(&e))?;
            }
            "--pps" => o.pps = v()?.parse().map_err(|e| bad(&e))?,
            "--batch" => o.batch = v()?.parse().map_err(|e| bad(&e))?,
            "--rx-file" => rx_file = Some(v()?),
            "--rx-if" => rx_if = v()?,
            _ => {
                return Err(format!(
                    "unknown option {k} (see the doc comment of blast.rs)"
                ))
            }
        }
    }
    o.validate()?;
    Ok((o, rx_file, rx_if))
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
    let (o, rx_file, rx_if) = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("blast: {e}");
            std::process::exit(2);
        }
    };
    let rx0 = rx_file.as_deref().and_then(|f| rx_packets(f, &rx_if));
    let r = match blast::run(&o, &mut |pps| eprintln!("blast: {pps:.0} pps")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("blast: {e}");
            std::process::exit(1);
        }
    };
    // Let the last frames cross before reading the receiver's counter.
    std::thread::sleep(Duration::from_millis(200));
    let rx1 = rx_file.as_deref().and_then(|f| rx_packets(f, &rx_if));
    let secs = r.elapsed.as_secs_f64();
    print!("{}", r.summary(o.len));
    match (rx0, rx1) {
        (Some(r0), Some(r1)) => println!(
            "; received {} ({:.0} pps, {:.1} %)",
            r1 - r0,
            (r1 - r0) as f64 / secs,
            100.0 * (r1 - r0) as f64 / r.sent.max(1) as f64
        ),
        _ => println!(),
    }
}
