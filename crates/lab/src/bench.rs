//! The data-plane benchmark of issue #3: sluice forwarding versus the kernel
//! forwarding the same path.
//!
//! # Principles
//! - One topology ([`BridgeLab`]: client — middle — server), one traffic
//!   generator (iperf3, CUBIC for TCP), and the same measurements for every
//!   path: UDP 64 B frames per second, UDP 1514 B frames per second (both
//!   received, `-b 0`), TCP goodput. The reference is the kernel bridging
//!   the same two interfaces in the middle namespace; every sluice figure
//!   is reported with its ratio to the kernel's.
//! - The sluice paths are unshaped (`pass keep state`) and FQ-CoDel at a
//!   rate it cannot reach (10 Gbit/s on the measured direction), so the
//!   second measures the cost of classification, queueing and AQM, not a
//!   rate limit.
//! - The generator runs on the same cores as the forwarder, so absolute
//!   packet rates are bounded by it; the ratio is the figure to read. A
//!   shared machine is noisy: `repeats` > 1 keeps the best of each figure
//!   (interference only ever lowers a figure).
//! - Everything the benchmark creates belongs to one `BridgeLab`, torn down
//!   on every exit path (errors are returned, not panicked).

use crate::bridge::{BridgeLab, SERVER_IP};
use crate::iperf3::{self, ClientOptions};
use crate::netns::have_tools;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long the kernel bridge gets to start forwarding (ports start in the
/// blocking/listening states for a moment after `ip link set master`).
const BRIDGE_WAIT_TRIES: u32 = 50;
const BRIDGE_WAIT_STEP: Duration = Duration::from_millis(100);
/// Ethernet + IPv4 + UDP headers: 14 + 20 + 8.
const UDP_FRAME_OVERHEAD: u32 = 42;
/// UDP payload of a 60-byte frame (64 B on the wire with the FCS).
const SMALL_PAYLOAD: u32 = 18;
/// UDP payload of a 1514-byte frame (1518 B with the FCS).
const LARGE_PAYLOAD: u32 = 1472;
/// Upper bound on `repeats`, so a typo cannot run the benchmark for hours.
const MAX_REPEATS: u32 = 10;

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchOptions {
    /// Seconds per iperf3 measurement (three per path).
    pub seconds: u32,
    /// Leading TCP seconds left out (slow start), iperf3 `-O`.
    pub tcp_omit_seconds: u32,
    /// Each path is measured this many times; the best figure is kept.
    pub repeats: u32,
    /// sluice receive paths to measure (`mmsg`, `ring`); each is measured
    /// unshaped and with FQ-CoDel.
    pub io_methods: Vec<String>,
    /// FQ-CoDel's configured bandwidth (pf.conf syntax), above what the
    /// path can carry.
    pub fq_codel_bandwidth: String,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            seconds: 4,
            tcp_omit_seconds: 1,
            repeats: 1,
            io_methods: vec!["mmsg".into()],
            fq_codel_bandwidth: "10G".into(),
        }
    }
}

/// The three figures of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// UDP 60-byte frames (64 B with FCS) received per second.
    pub udp_64b_pps: f64,
    /// UDP 1514-byte frames received per second.
    pub udp_1514b_pps: f64,
    /// TCP goodput (payload bit/s at the receiver), one CUBIC flow.
    pub tcp_bps: f64,
}

impl Figures {
    /// Each figure divided by the reference's (0 where the reference is 0).
    pub fn ratio_to(&self, reference: &Figures) -> Figures {
        let r = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        Figures {
            udp_64b_pps: r(self.udp_64b_pps, reference.udp_64b_pps),
            udp_1514b_pps: r(self.udp_1514b_pps, reference.udp_1514b_pps),
            tcp_bps: r(self.tcp_bps, reference.tcp_bps),
        }
    }

    /// The better of two measurements, figure by figure.
    pub fn best(&self, other: &Figures) -> Figures {
        Figures {
            udp_64b_pps: self.udp_64b_pps.max(other.udp_64b_pps),
            udp_1514b_pps: self.udp_1514b_pps.max(other.udp_1514b_pps),
            tcp_bps: self.tcp_bps.max(other.tcp_bps),
        }
    }
}

/// One sluice path and its ratios to the kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SluiceRow {
    /// e.g. "sluice mmsg, unshaped".
    pub path: String,
    /// `--io` method.
    pub io: String,
    /// True for FQ-CoDel at `fq_codel_bandwidth`, false for unshaped.
    pub shaped: bool,
    pub figures: Figures,
    /// `figures` / kernel figures.
    pub ratio: Figures,
}

/// Everything the benchmark measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// The sluice binary measured.
    pub sluice_bin: String,
    /// `uname -r` of the machine.
    pub kernel_release: String,
    /// CPUs available to this process.
    pub cpus: usize,
    pub seconds: u32,
    pub repeats: u32,
    /// The kernel bridging the same path: the reference.
    pub kernel: Figures,
    pub sluice: Vec<SluiceRow>,
}

/// FQ-CoDel on the measured direction (client → server leaves on wan0 =
/// `$ext_if`) at a rate the path cannot reach.
fn fq_codel_conf(bandwidth: &str) -> String {
    format!(
        "queue fq on $ext_if bandwidth {bandwidth} flows 1024 qlimit 10240 default\n\
         pass keep state\n"
    )
}

const UNSHAPED_CONF: &str = "pass keep state\n";

/// Ports for one-shot iperf3 servers: a fresh one per run, so a server
/// that lingers (TIME_WAIT, a slow exit) never refuses the next.
struct Ports(u16);

impl Ports {
    fn next(&mut self) -> u16 {
        self.0 = self.0.wrapping_add(1).max(5300);
        self.0
    }
}

fn measure_once(
    lab: &mut BridgeLab,
    ports: &mut Ports,
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    label: &str,
) -> Result<Figures, String> {
    let mut run = |what: &str, udp: Option<u32>| -> Result<iperf3::Iperf3Result, String> {
        progress(&format!("{label}: {what}"));
        let port = ports.next();
        let server = lab.server.clone();
        iperf3::server(&mut lab.topo, &server, port)
            .map_err(|e| format!("{label}: iperf3 server: {e}"))?;
        let mut c = ClientOptions::new(SERVER_IP, port);
        c.seconds = o.seconds;
        c.udp_len = udp;
        if udp.is_none() {
            c.omit_seconds = o.tcp_omit_seconds;
        }
        iperf3::client(&lab.topo, &lab.client, &c).map_err(|e| format!("{label}: {what}: {e}"))
    };
    let pps = |r: iperf3::Iperf3Result| r.udp.map_or(0.0, |u| u.received_pps());
    let small = pps(run(
        &format!("UDP {} B frames", SMALL_PAYLOAD + UDP_FRAME_OVERHEAD),
        Some(SMALL_PAYLOAD),
    )?);
    let large = pps(run(
        &format!("UDP {} B frames", LARGE_PAYLOAD + UDP_FRAME_OVERHEAD),
        Some(LARGE_PAYLOAD),
    )?);
    let tcp = run("TCP", None)?.goodput_bps;
    Ok(Figures {
        udp_64b_pps: small,
        udp_1514b_pps: large,
        tcp_bps: tcp,
    })
}

fn measure(
    lab: &mut BridgeLab,
    ports: &mut Ports,
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    label: &str,
) -> Result<Figures, String> {
    let mut best = Figures::default();
    // Bounded by MAX_REPEATS (checked in `run`).
    for i in 0..o.repeats {
        let l = if o.repeats > 1 {
            format!("{label} (run {}/{})", i + 1, o.repeats)
        } else {
            label.to_string()
        };
        best = best.best(&measure_once(lab, ports, o, progress, &l)?);
    }
    Ok(best)
}

fn kernel_bridge(
    lab: &mut BridgeLab,
    ports: &mut Ports,
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Figures, String> {
    let mid = lab.shaper.clone();
    let ip = |lab: &BridgeLab, args: &[&str]| {
        lab.topo
            .ip(&mid, args)
            .map(|_| ())
            .map_err(|e| format!("kernel bridge: {e}"))
    };
    ip(lab, &["link", "add", "br0", "type", "bridge"])?;
    ip(lab, &["link", "set", "lan0", "master", "br0"])?;
    ip(lab, &["link", "set", "wan0", "master", "br0"])?;
    ip(lab, &["link", "set", "br0", "up"])?;
    let mut up = false;
    for _ in 0..BRIDGE_WAIT_TRIES {
        if lab.ping_once() {
            up = true;
            break;
        }
        std::thread::sleep(BRIDGE_WAIT_STEP);
    }
    let result = if up {
        measure(lab, ports, o, progress, "kernel bridge")
    } else {
        Err("kernel bridge: no path".to_string())
    };
    ip(lab, &["link", "del", "br0"])?;
    // Released ports keep their state; set them up anyway for sluice.
    ip(lab, &["link", "set", "lan0", "up"])?;
    ip(lab, &["link", "set", "wan0", "up"])?;
    result
}

fn sluice_path(
    lab: &mut BridgeLab,
    bin: &str,
    ports: &mut Ports,
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    io: &str,
    shaped: bool,
) -> Result<SluiceRow, String> {
    let path = if shaped {
        format!("sluice {io}, fq-codel {}", o.fq_codel_bandwidth)
    } else {
        format!("sluice {io}, unshaped")
    };
    let conf = if shaped {
        fq_codel_conf(&o.fq_codel_bandwidth)
    } else {
        UNSHAPED_CONF.to_string()
    };
    progress(&format!("{path}: starting"));
    lab.start_sluice(bin, &conf, &["--io", io])
        .map_err(|e| format!("{path}: {e}"))?;
    let figures = measure(lab, ports, o, progress, &path);
    let stopped = lab.stop_sluice();
    let figures = figures.map_err(|e| format!("{e}\n{}", lab.log()))?;
    match stopped {
        Ok(Some(st)) if st.success() => {}
        other => {
            return Err(format!(
                "{path}: sluice did not stop cleanly ({other:?})\n{}",
                lab.log()
            ))
        }
    }
    Ok(SluiceRow {
        path,
        io: io.to_string(),
        shaped,
        figures,
        ratio: Figures::default(),
    })
}

/// Runs the benchmark with the sluice binary `bin` (an optimised build:
/// a debug build measures the compiler, not the design). Needs root, `ip`,
/// `ethtool`, `ss`, `iperf3`. `progress` receives one line per step.
pub fn run(
    bin: &str,
    opts: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchReport, String> {
    have_tools(&["iperf3", "ethtool", "ss", "ping"])?;
    if opts.seconds == 0 || opts.repeats == 0 || opts.repeats > MAX_REPEATS {
        return Err(format!(
            "seconds must be ≥ 1 and repeats 1..={MAX_REPEATS} (got {} and {})",
            opts.seconds, opts.repeats
        ));
    }
    if let Some(m) = opts
        .io_methods
        .iter()
        .find(|m| !matches!(m.as_str(), "mmsg" | "ring"))
    {
        return Err(format!("unknown io method `{m}` (mmsg or ring)"));
    }
    if !std::path::Path::new(bin).exists() {
        return Err(format!("no sluice binary at {bin}"));
    }
    let mut lab = BridgeLab::new("bench").map_err(|e| format!("namespaces: {e}"))?;
    let mut ports = Ports(5300);
    let kernel = kernel_bridge(&mut lab, &mut ports, opts, progress)?;
    let mut sluice = Vec::new();
    for io in &opts.io_methods {
        for shaped in [false, true] {
            let mut row = sluice_path(&mut lab, bin, &mut ports, opts, progress, io, shaped)?;
            row.ratio = row.figures.ratio_to(&kernel);
            sluice.push(row);
        }
    }
    Ok(BenchReport {
        sluice_bin: bin.to_string(),
        kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        seconds: opts.seconds,
        repeats: opts.repeats,
        kernel,
        sluice,
    })
}

/// The report as a Markdown table: each figure and its ratio to the kernel.
pub fn table(r: &BenchReport) -> String {
    let mut out = String::new();
    out.push_str(
        "| path | UDP 64 B kpps | ratio | UDP 1514 B kpps | ratio | TCP Gbit/s | ratio |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    let one = Figures {
        udp_64b_pps: 1.0,
        udp_1514b_pps: 1.0,
        tcp_bps: 1.0,
    };
    let rows = std::iter::once(("kernel bridge", &r.kernel, &one)).chain(
        r.sluice
            .iter()
            .map(|s| (s.path.as_str(), &s.figures, &s.ratio)),
    );
    for (name, f, ratio) in rows {
        out.push_str(&format!(
            "| {name} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} |\n",
            f.udp_64b_pps / 1e3,
            ratio.udp_64b_pps,
            f.udp_1514b_pps / 1e3,
            ratio.udp_1514b_pps,
            f.tcp_bps / 1e9,
            ratio.tcp_bps
        ));
    }
    out.push_str(&format!(
        "\n{} s per measurement, best of {}, kernel {}, {} CPUs; one iperf3 on the same \
         cores generates the traffic, so the ratios are the figures to read.\n",
        r.seconds, r.repeats, r.kernel_release, r.cpus
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(a: f64, b: f64, c: f64) -> Figures {
        Figures {
            udp_64b_pps: a,
            udp_1514b_pps: b,
            tcp_bps: c,
        }
    }

    fn report() -> BenchReport {
        let kernel = fig(300_000.0, 250_000.0, 5e9);
        let f = fig(150_000.0, 125_000.0, 2.5e9);
        BenchReport {
            sluice_bin: "target/release/sluice".into(),
            kernel_release: "6.18.0".into(),
            cpus: 2,
            seconds: 4,
            repeats: 1,
            kernel,
            sluice: vec![SluiceRow {
                path: "sluice mmsg, unshaped".into(),
                io: "mmsg".into(),
                shaped: false,
                figures: f,
                ratio: f.ratio_to(&kernel),
            }],
        }
    }

    #[test]
    fn ratios_divide_by_the_reference_and_survive_a_zero() {
        let r = fig(150.0, 50.0, 3.0).ratio_to(&fig(300.0, 100.0, 0.0));
        assert_eq!(r, fig(0.5, 0.5, 0.0));
        assert_eq!(
            fig(1.0, 5.0, 2.0).best(&fig(3.0, 4.0, 2.5)),
            fig(3.0, 5.0, 2.5)
        );
    }

    #[test]
    fn table_has_every_figure_and_ratio() {
        let t = table(&report());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[2],
            "| kernel bridge | 300 | 1.00 | 250 | 1.00 | 5.00 | 1.00 |"
        );
        assert_eq!(
            lines[3],
            "| sluice mmsg, unshaped | 150 | 0.50 | 125 | 0.50 | 2.50 | 0.50 |"
        );
        assert!(t.contains("best of 1, kernel 6.18.0, 2 CPUs"), "{t}");
    }

    #[test]
    fn report_round_trips_through_json() {
        let r = report();
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.contains("\"udp_64b_pps\":150000.0"), "{j}");
        assert!(j.contains("\"ratio\""), "{j}");
        let back: BenchReport = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn fq_codel_config_names_the_rate() {
        let c = fq_codel_conf("10G");
        assert!(c.starts_with("queue fq on $ext_if bandwidth 10G flows 1024"));
        assert!(c.contains("pass keep state"));
    }
}
