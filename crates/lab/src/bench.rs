//! The data-plane benchmark of issue #3: sluice forwarding versus the kernel
//! forwarding the same path.
//!
//! # Principles
//! - One topology ([`BridgeLab`]: client — middle — server), the same
//!   generators and measurements for every path: 64 B and 1518 B frames
//!   per second received by the server, sent unpaced by `sluice lab blast`
//!   (AF_PACKET sendmmsg, 16 UDP flows, to a MAC nobody owns so the server
//!   drops them at the door and its IP stack stays out of the figure), and
//!   TCP goodput of one iperf3 CUBIC flow. The reference is the kernel
//!   bridging the same two interfaces in the middle namespace; every sluice
//!   figure is reported with its ratio to the kernel's.
//! - The generator and the forwarder share the machine's cores, so a
//!   wall-clock packet rate may be the generator's limit. sluice's own CPU
//!   time per forwarded frame (utime + stime of the process over the
//!   measured span, from /proc) says what one core of sluice carries
//!   whatever the generator manages: 1 s ÷ CPU per frame.
//! - The sluice paths are unshaped (`pass keep state`) and FQ-CoDel at a
//!   rate it cannot reach (10 Gbit/s on the measured direction), so the
//!   second measures the cost of classification, queueing and AQM, not a
//!   rate limit.
//! - A shared machine is noisy: `repeats` > 1 keeps the best of each
//!   figure (interference only ever lowers a rate or raises a CPU cost).
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
/// Frame lengths without the FCS: 64 B and 1518 B on the wire.
const SMALL_FRAME: usize = 60;
const LARGE_FRAME: usize = 1514;
/// Generator flows (source ports): several states, FQ-CoDel buckets.
const BLAST_FLOWS: &str = "16";
/// A MAC nobody on the path owns: the kernel bridge floods such frames to
/// its other port, sluice forwards every frame, and the server drops them
/// before its IP stack (PACKET_OTHERHOST).
const BLAST_DST_MAC: &str = "02:00:00:00:00:02";
/// The generator runs this long before and after the measured span.
const BLAST_MARGIN: Duration = Duration::from_millis(500);
/// /proc/PID/stat counts CPU time in USER_HZ ticks, 100 per second in the
/// Linux ABI.
const USER_HZ: f64 = 100.0;
/// Upper bound on `repeats`, so a typo cannot run the benchmark for hours.
const MAX_REPEATS: u32 = 10;

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchOptions {
    /// Seconds per measurement (three per path).
    pub seconds: u32,
    /// Leading TCP seconds left out (slow start), iperf3 `-O`.
    pub tcp_omit_seconds: u32,
    /// Each path is measured this many times; the best figure is kept.
    pub repeats: u32,
    /// sluice packet I/O methods to measure (`sluice run --io`: `xdp`,
    /// `xdp-generic`, `ring`, `mmsg`); each unshaped and with FQ-CoDel.
    pub io_methods: Vec<String>,
    /// FQ-CoDel's configured bandwidth (pf.conf syntax), above what the
    /// path can carry.
    pub fq_codel_bandwidth: String,
    /// Measure the forwarding figures (kernel bridge and sluice paths);
    /// false runs only the accuracy part.
    pub forwarding: bool,
    /// Rates for the accuracy part (HFSC, one TCP flow); empty skips it.
    pub accuracy_rates_bps: Vec<u64>,
    /// Seconds of the measured span at each rate (after the warm-up).
    pub accuracy_seconds: u32,
    /// Seconds of TCP before the span: slow start, the queue filling.
    pub accuracy_warmup_seconds: u32,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            seconds: 4,
            tcp_omit_seconds: 1,
            repeats: 1,
            io_methods: vec!["xdp".into(), "ring".into()],
            fq_codel_bandwidth: "10G".into(),
            forwarding: true,
            accuracy_rates_bps: vec![128_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000],
            accuracy_seconds: 10,
            accuracy_warmup_seconds: 3,
        }
    }
}

/// The three figures of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// 60-byte UDP frames (64 B with FCS) received per second.
    pub udp_64b_pps: f64,
    /// 1514-byte UDP frames (1518 B with FCS) received per second.
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
    /// The I/O method sluice reported running (`show info`), e.g.
    /// `af_xdp-copy-generic`; differs from `io` where it fell back.
    #[serde(default)]
    pub method: String,
    /// True for FQ-CoDel at `fq_codel_bandwidth`, false for unshaped.
    pub shaped: bool,
    pub figures: Figures,
    /// `figures` / kernel figures.
    pub ratio: Figures,
    /// sluice's CPU time per forwarded frame, 64 B and 1518 B frames (ns).
    #[serde(default)]
    pub cpu_ns_per_frame: CpuPerFrame,
}

/// CPU time of the forwarder per forwarded frame (ns; 0 = not measured).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuPerFrame {
    pub frame_64b: f64,
    pub frame_1518b: f64,
}

impl CpuPerFrame {
    /// The cheaper of two measurements, size by size (0 = unmeasured).
    fn best(&self, other: &CpuPerFrame) -> CpuPerFrame {
        let m = |a: f64, b: f64| match (a > 0.0, b > 0.0) {
            (true, true) => a.min(b),
            (true, false) => a,
            _ => b,
        };
        CpuPerFrame {
            frame_64b: m(self.frame_64b, other.frame_64b),
            frame_1518b: m(self.frame_1518b, other.frame_1518b),
        }
    }
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
    /// Rate accuracy at each configured rate (empty if skipped).
    #[serde(default)]
    pub accuracy: Vec<AccuracyRow>,
}

/// How close the delivered rate is to the configured one (issue #3: 1 %).
///
/// Measured on the wire, not from iperf3's goodput: the bytes counter of
/// the server's interface (`stats64.rx.bytes`, whole frames, 1514 B per
/// full TCP frame, what the shaper charges) read right after it changed at
/// the start and at the end of the span, so both ends fall just after a
/// frame arrival and the span holds whole frames; the counter is polled
/// with `ip -s -j link` (a few ms per read), an error of a few ms over the
/// span. iperf3's receiver goodput over a short run is not usable at low
/// rates: one frame is 95 ms at 128 kbit/s, 1.9 % of a 5 s window, and
/// 5 s runs measured there ranged from −3.2 % to +5.8 % while the wire rate
/// (frames captured on the server's interface) was within 0.3 %.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccuracyRow {
    pub rate_bps: u64,
    pub qlimit: u32,
    /// Frame bytes × 8 received per second over the span.
    pub wire_bps: f64,
    /// (wire_bps − rate_bps) / rate_bps.
    pub error: f64,
    pub span_seconds: f64,
    pub frames: u64,
    /// iperf3's receiver goodput over the whole run (warm-up included),
    /// for reference; payload only (1448 of 1514 B per full frame).
    pub goodput_bps: f64,
    /// TCP retransmissions of the run (drops at the shaper's queue).
    pub retransmits: u64,
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

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // The command name may hold spaces; fields count from after its ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("/proc/PID/stat: no command field")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 here.
    let tick = |k: usize| {
        f.get(k)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or("/proc/PID/stat: no utime/stime")
    };
    Ok((tick(11)? + tick(12)?) as f64 / USER_HZ)
}

/// Frames per second received by the server while `sluice lab blast`
/// sends `len`-byte frames unpaced from the client, and the forwarder's
/// CPU time per frame when `forwarder` is sluice's pid (ns).
fn blast_once(
    lab: &mut BridgeLab,
    bin: &str,
    o: &BenchOptions,
    len: usize,
    forwarder: Option<u32>,
) -> Result<(f64, f64), String> {
    let span = Duration::from_secs(u64::from(o.seconds));
    let secs = (span + 2 * BLAST_MARGIN).as_secs_f64().to_string();
    let len_s = len.to_string();
    let client = lab.client.clone();
    let log = lab.dir.join("blast.log");
    let id = lab
        .topo
        .spawn(
            &client,
            &[
                bin,
                "lab",
                "blast",
                "--dev",
                "c0",
                "--dst-mac",
                BLAST_DST_MAC,
                "--src",
                crate::bridge::CLIENT_IP,
                "--dst",
                SERVER_IP,
                "--len",
                &len_s,
                "--flows",
                BLAST_FLOWS,
                "--secs",
                &secs,
                "--json",
            ],
            Some(&log),
        )
        .map_err(|e| format!("starting the generator: {e}"))?;
    let measured = (|| {
        std::thread::sleep(BLAST_MARGIN);
        let cpu = |p: Option<u32>| p.map(cpu_seconds).transpose();
        let (t0, c0, rx0) = (
            std::time::Instant::now(),
            cpu(forwarder)?,
            rx_counters(lab)?.1,
        );
        std::thread::sleep(span);
        let (t1, c1, rx1) = (
            std::time::Instant::now(),
            cpu(forwarder)?,
            rx_counters(lab)?.1,
        );
        let frames = rx1.saturating_sub(rx0);
        let pps = frames as f64 / t1.duration_since(t0).as_secs_f64();
        let cpu_ns = match (c0, c1) {
            (Some(a), Some(b)) if frames > 0 => (b - a) * 1e9 / frames as f64,
            _ => 0.0,
        };
        Ok::<_, String>((pps, cpu_ns))
    })();
    // The generator stops by itself after `secs`; TERM after that.
    let status = lab
        .topo
        .wait(id, BLAST_MARGIN * 10)
        .map_err(|e| e.to_string())?;
    let status = match status {
        Some(s) => Some(s),
        None => lab.topo.stop(id, "TERM").map_err(|e| e.to_string())?,
    };
    if !status.is_some_and(|s| s.success()) {
        return Err(format!(
            "the generator failed ({status:?}): {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        ));
    }
    measured
}

/// Frame rates (64 B, 1518 B) and TCP goodput through the path under
/// test, each the best of `o.repeats` runs.
fn measure(
    lab: &mut BridgeLab,
    bin: &str,
    ports: &mut Ports,
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    label: &str,
    forwarder: Option<u32>,
) -> Result<(Figures, CpuPerFrame), String> {
    let mut best = (Figures::default(), CpuPerFrame::default());
    // Bounded by MAX_REPEATS (checked in `run`).
    for i in 0..o.repeats {
        let label = if o.repeats > 1 {
            format!("{label} (run {}/{})", i + 1, o.repeats)
        } else {
            label.to_string()
        };
        let mut frames = |len: usize| {
            progress(&format!("{label}: {} B frames", len + 4));
            blast_once(lab, bin, o, len, forwarder).map_err(|e| format!("{label}: {e}"))
        };
        let (small, small_cpu) = frames(SMALL_FRAME)?;
        let (large, large_cpu) = frames(LARGE_FRAME)?;
        progress(&format!("{label}: TCP"));
        let port = ports.next();
        let server = lab.server.clone();
        iperf3::server(&mut lab.topo, &server, port)
            .map_err(|e| format!("{label}: iperf3 server: {e}"))?;
        let mut c = ClientOptions::new(SERVER_IP, port);
        c.seconds = o.seconds;
        c.omit_seconds = o.tcp_omit_seconds;
        let tcp = iperf3::client(&lab.topo, &lab.client, &c)
            .map_err(|e| format!("{label}: TCP: {e}"))?
            .goodput_bps;
        let f = Figures {
            udp_64b_pps: small,
            udp_1514b_pps: large,
            tcp_bps: tcp,
        };
        let cpu = CpuPerFrame {
            frame_64b: small_cpu,
            frame_1518b: large_cpu,
        };
        best = (best.0.best(&f), best.1.best(&cpu));
    }
    Ok(best)
}

fn kernel_bridge(
    lab: &mut BridgeLab,
    bin: &str,
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
        measure(lab, bin, ports, o, progress, "kernel bridge", None).map(|(f, _)| f)
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
    // What runs, which is not what was asked for where a method fell back.
    let method = lab.io_method(bin).unwrap_or_default();
    progress(&format!("{path}: running as {method}"));
    let pid = lab.sluice_pid();
    let figures = measure(lab, bin, ports, o, progress, &path, pid);
    let stopped = lab.stop_sluice();
    let (figures, cpu) = figures.map_err(|e| format!("{e}\n{}", lab.log()))?;
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
        path: format!("{path} [{method}]"),
        io: io.to_string(),
        method,
        shaped,
        figures,
        ratio: Figures::default(),
        cpu_ns_per_frame: cpu,
    })
}

/// The shaper's queue at `rate_bps`: ~10 ms of full frames, at least 8 (so
/// TCP keeps it backlogged at low rates) and at most 500.
fn accuracy_qlimit(rate_bps: u64) -> u32 {
    let frames = rate_bps / 100 / (1514 * 8);
    frames.clamp(8, 500) as u32
}

/// HFSC at `rate_bps` on the measured direction (client → server leaves
/// on wan0 = `$ext_if`), the configuration of tests/netns_rate.rs.
fn accuracy_conf(rate_bps: u64, qlimit: u32) -> String {
    format!(
        "altq on $ext_if hfsc bandwidth {rate_bps} queue {{ up_bulk }}\n\
         queue up_bulk bandwidth 100% qlimit {qlimit} hfsc(default linkshare 100% upperlimit 100%)\n\
         pass keep state\n"
    )
}

/// `stats64.rx.bytes` and `.packets` of `v0` in the server namespace.
fn rx_counters(lab: &BridgeLab) -> Result<(u64, u64), String> {
    let out = lab
        .topo
        .ip(&lab.server, &["-s", "-j", "link", "show", "dev", "v0"])
        .map_err(|e| format!("reading counters: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("ip -s -j link: {e}"))?;
    let rx = v
        .pointer("/0/stats64/rx")
        .ok_or("ip -s -j link: no stats64.rx")?;
    let get = |k: &str| {
        rx.get(k)
            .and_then(|x| x.as_u64())
            .ok_or("ip -s -j link: no rx count")
    };
    Ok((get("bytes")?, get("packets")?))
}

/// Counter reads per edge at most: ~3 ms each, so ~3 s, well beyond the
/// 95 ms between frames at 128 kbit/s.
const EDGE_POLL_CAP: u32 = 1000;

/// Polls until the counters change: (time of the read, bytes, packets).
fn next_edge(lab: &BridgeLab) -> Result<(std::time::Instant, u64, u64), String> {
    let (b0, _) = rx_counters(lab)?;
    for _ in 0..EDGE_POLL_CAP {
        let (b, p) = rx_counters(lab)?;
        if b != b0 {
            return Ok((std::time::Instant::now(), b, p));
        }
    }
    Err("no frames arrived: the path is not backlogged".into())
}

fn accuracy_at(
    lab: &mut BridgeLab,
    bin: &str,
    ports: &mut Ports,
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    rate_bps: u64,
) -> Result<AccuracyRow, String> {
    let qlimit = accuracy_qlimit(rate_bps);
    let label = format!("accuracy {rate_bps} bit/s (qlimit {qlimit})");
    progress(&format!("{label}: starting"));
    lab.start_sluice(bin, &accuracy_conf(rate_bps, qlimit), &[])
        .map_err(|e| format!("{label}: {e}"))?;
    let port = ports.next();
    let server = lab.server.clone();
    let measured = iperf3::server(&mut lab.topo, &server, port)
        .map_err(|e| format!("{label}: iperf3 server: {e}"))
        .and_then(|_| {
            let mut c = ClientOptions::new(SERVER_IP, port);
            // One second of slack after the span for the last edge.
            c.seconds = o.accuracy_warmup_seconds + o.accuracy_seconds + 1;
            let lab_ref: &BridgeLab = lab;
            std::thread::scope(|scope| {
                let client = scope.spawn(|| iperf3::client(&lab_ref.topo, &lab_ref.client, &c));
                let span = (|| {
                    std::thread::sleep(Duration::from_secs(u64::from(o.accuracy_warmup_seconds)));
                    let start = next_edge(lab_ref)?;
                    std::thread::sleep(Duration::from_secs(u64::from(o.accuracy_seconds)));
                    let end = next_edge(lab_ref)?;
                    Ok::<_, String>((start, end))
                })();
                let run = client
                    .join()
                    .map_err(|_| "iperf3 client thread panicked".to_string())?
                    .map_err(|e| format!("iperf3: {e}"));
                Ok::<_, String>((span?, run?))
            })
        });
    let stopped = lab.stop_sluice();
    let ((start, end), run) = measured.map_err(|e| format!("{label}: {e}\n{}", lab.log()))?;
    if !matches!(stopped, Ok(Some(st)) if st.success()) {
        return Err(format!(
            "{label}: sluice did not stop cleanly\n{}",
            lab.log()
        ));
    }
    let span = end.0.duration_since(start.0).as_secs_f64();
    let wire_bps = (end.1 - start.1) as f64 * 8.0 / span;
    let row = AccuracyRow {
        rate_bps,
        qlimit,
        wire_bps,
        error: (wire_bps - rate_bps as f64) / rate_bps as f64,
        span_seconds: span,
        frames: end.2 - start.2,
        goodput_bps: run.goodput_bps,
        retransmits: run.retransmits,
    };
    progress(&format!(
        "{label}: wire {:.0} bit/s ({:+.2} %) over {:.2} s, {} frames",
        row.wire_bps,
        row.error * 100.0,
        row.span_seconds,
        row.frames
    ));
    Ok(row)
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
    if !opts.accuracy_rates_bps.is_empty()
        && (opts.accuracy_seconds == 0 || opts.accuracy_rates_bps.contains(&0))
    {
        return Err("accuracy: seconds ≥ 1 and rates > 0 bit/s".into());
    }
    if let Some(m) = opts
        .io_methods
        .iter()
        .find(|m| !matches!(m.as_str(), "xdp" | "xdp-generic" | "ring" | "mmsg"))
    {
        return Err(format!(
            "unknown io method `{m}` (xdp, xdp-generic, ring or mmsg)"
        ));
    }
    if !std::path::Path::new(bin).exists() {
        return Err(format!("no sluice binary at {bin}"));
    }
    let mut lab = BridgeLab::new("bench").map_err(|e| format!("namespaces: {e}"))?;
    let mut ports = Ports(5300);
    let kernel = if opts.forwarding {
        kernel_bridge(&mut lab, bin, &mut ports, opts, progress)?
    } else {
        Figures::default()
    };
    let mut sluice = Vec::new();
    let methods: &[String] = if opts.forwarding {
        &opts.io_methods
    } else {
        &[]
    };
    for io in methods {
        for shaped in [false, true] {
            let mut row = sluice_path(&mut lab, bin, &mut ports, opts, progress, io, shaped)?;
            row.ratio = row.figures.ratio_to(&kernel);
            sluice.push(row);
        }
    }
    let mut accuracy = Vec::new();
    // Bounded by the configured list.
    for &rate in &opts.accuracy_rates_bps {
        accuracy.push(accuracy_at(
            &mut lab, bin, &mut ports, opts, progress, rate,
        )?);
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
        accuracy,
    })
}

/// The report as a Markdown table: each figure and its ratio to the kernel.
pub fn table(r: &BenchReport) -> String {
    let mut out = String::new();
    if r.sluice.is_empty() && r.kernel == Figures::default() {
        // Only the accuracy part ran.
        accuracy_table(r, &mut out);
        return out;
    }
    out.push_str(
        "| path | 64 B kpps | ratio | 1518 B kpps | ratio | TCP Gbit/s | ratio \
         | CPU ns/frame 64 B | 1518 B | 64 B Mpps per core |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let one = Figures {
        udp_64b_pps: 1.0,
        udp_1514b_pps: 1.0,
        tcp_bps: 1.0,
    };
    let none = CpuPerFrame::default();
    let rows = std::iter::once(("kernel bridge", &r.kernel, &one, &none)).chain(
        r.sluice
            .iter()
            .map(|s| (s.path.as_str(), &s.figures, &s.ratio, &s.cpu_ns_per_frame)),
    );
    let ns = |v: f64| {
        if v > 0.0 {
            format!("{v:.0}")
        } else {
            "–".to_string()
        }
    };
    for (name, f, ratio, cpu) in rows {
        let per_core = if cpu.frame_64b > 0.0 {
            format!("{:.2}", 1e3 / cpu.frame_64b)
        } else {
            "–".to_string()
        };
        out.push_str(&format!(
            "| {name} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {per_core} |\n",
            f.udp_64b_pps / 1e3,
            ratio.udp_64b_pps,
            f.udp_1514b_pps / 1e3,
            ratio.udp_1514b_pps,
            f.tcp_bps / 1e9,
            ratio.tcp_bps,
            ns(cpu.frame_64b),
            ns(cpu.frame_1518b),
        ));
    }
    out.push_str(&format!(
        "\n{} s per measurement, best of {}, kernel {}, {} CPUs. Frames: `sluice lab blast` \
         (16 UDP flows, unpaced) from the client, counted at the server; TCP: one iperf3 \
         CUBIC flow. Generator and forwarder share the cores, so the rates may be the \
         generator's; CPU ns/frame is sluice's own time (all threads) per forwarded frame, \
         and 1 s divided by it is what one core of sluice carries.\n",
        r.seconds, r.repeats, r.kernel_release, r.cpus
    ));
    accuracy_table(r, &mut out);
    out
}

/// The accuracy rows as a second table (nothing if there are none).
fn accuracy_table(r: &BenchReport, out: &mut String) {
    if !r.accuracy.is_empty() {
        out.push_str(
            "\n| rate (HFSC, TCP) | qlimit | on the wire | error | span s | frames | iperf3 goodput | retransmits |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for a in &r.accuracy {
            out.push_str(&format!(
                "| {} | {} | {} | {:+.2} % | {:.2} | {} | {} | {} |\n",
                fmt_bps(a.rate_bps as f64),
                a.qlimit,
                fmt_bps(a.wire_bps),
                a.error * 100.0,
                a.span_seconds,
                a.frames,
                fmt_bps(a.goodput_bps),
                a.retransmits
            ));
        }
    }
}

/// `128.0 kbit/s`, `9.998 Mbit/s`, `1.000 Gbit/s`.
fn fmt_bps(bps: f64) -> String {
    sluice_time::units::format_measured(bps, 3)
}

#[cfg(test)]
mod tests;
