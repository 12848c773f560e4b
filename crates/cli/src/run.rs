//! `sluice run -f FILE --bridge LAN_IF,WAN_IF`: shape real traffic.
//!
//! # Principles
//! The options become a `sluice_control::daemon::Config`; the daemon
//! (its checks, start-up order, threads and stop) is sluice-control's.
//! Here: the log's verbosity, `--attach --dry-run`'s plan on stdout, and
//! the exit status: 0 on a clean stop, 1 otherwise.

use crate::args::{
    parse_bridge, parse_define, parse_iface_addr, parse_memory_limit, parse_method,
    parse_xdp_frames,
};
use crate::attach::Side;
use crate::out::error;
use clap::Args as ClapArgs;
use sluice_conf::ir::IpNet;
use sluice_control::daemon::{self, Config, Ports};
use sluice_io::{IoOptions, Method};
use std::process::ExitCode;

#[derive(ClapArgs)]
pub struct Args {
    /// Configuration file in the pf.conf dialect.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: String,
    /// Define a macro, as pfctl -D does. `int_if` and `ext_if` default to
    /// the bridged LAN and WAN interfaces.
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// Refuse what `sluice check --strict` refuses, at start and on every
    /// reload (a rule naming a queue that does not exist).
    #[arg(long)]
    strict: bool,
    /// The two interfaces to bridge: LAN (int_if) and WAN (ext_if).
    #[arg(long, value_name = "LAN_IF,WAN_IF", value_parser = parse_bridge,
          required_unless_present = "attach")]
    bridge: Option<(String, String)>,
    #[command(flatten)]
    attach: crate::attach::RunArgs,
    /// Control socket for `sluice show|reload|stop` (root only).
    #[arg(long, value_name = "PATH", default_value = sluice_control::DEFAULT_SOCKET)]
    control: String,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    /// Cap on the memory queued frames may hold, all queues together, each
    /// frame charged its buffer plus a fixed overhead (`64MiB`, `256M`,
    /// bytes without a unit; K/M/G are powers of 1024). Frames beyond it
    /// are dropped and counted as `memory-limit`.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_memory_limit)]
    memory_limit: u64,
    /// Packet I/O: xdp (AF_XDP sockets on queue 0 of single-queue
    /// interfaces, XDP program in generic mode on veth and native mode
    /// elsewhere, each falling back to the other; where AF_XDP cannot be set
    /// up, ring with a warning), xdp-generic (generic mode only), ring
    /// (TPACKET_V2 RX ring + sendmmsg, recvmmsg where the kernel refuses the
    /// ring) or mmsg (recvmmsg/sendmmsg). With AF_XDP, tcpdump on the
    /// bridged interfaces sees none of the bridged traffic: capture with
    /// --io ring.
    #[arg(long, value_name = "METHOD", default_value = "xdp", value_parser = parse_method)]
    io: Method,
    /// Busy-wait for deadlines closer than this many microseconds instead of
    /// sleeping on the timer (0: always sleep).
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
    /// RX ring block size in KiB: the unit the ring's frame slots are carved
    /// from (64 blocks per interface).
    #[arg(long, value_name = "KIB", default_value_t = 256)]
    ring_block_kib: u32,
    /// --io xdp: receive chunks per RX queue, a power of two from 256 to
    /// 32768 (2 KiB each). Default 8192 for up to 4 queues (16 MiB each),
    /// then 32768 shared out; lower it on a router short of memory.
    #[arg(long, value_name = "N", value_parser = parse_xdp_frames)]
    xdp_frames: Option<u32>,
    /// Leave NIC offloads (GRO/GSO/TSO/LRO/rxvlan) as they are.
    #[arg(long)]
    keep_offloads: bool,
    /// What the interfaces do once sluice stops. down (fail-closed):
    /// nothing forwards until sluice runs again; the LAN is offline.
    /// bridge (fail-open): on SIGTERM/SIGINT, `sluice stop`, a failed
    /// packet loop or a panic, the interfaces are handed to a kernel bridge
    /// (sluice-brN): the LAN stays online, but unshaped and unfiltered
    /// (no pf rule applies; everything crosses). A killed daemon (SIGKILL,
    /// OOM) cannot: run `sluice on-exit bridge` after it (systemd:
    /// ExecStopPost=). At start, run always takes the interfaces back from
    /// such a bridge (docs/dataplane.md, "When sluice stops").
    #[arg(long, value_name = "MODE", value_enum, default_value = "down")]
    on_exit: crate::failopen::Mode,
    /// More log output (-v info, -vv debug).
    #[arg(short, action = clap::ArgAction::Count)]
    verbose: u8,
    /// An address of a bridged interface, or a network (CIDR) whose host
    /// address it is: what `IF` (`from $ext_if`) and `IF:network` mean in
    /// rules. Repeatable. An interface given none takes the addresses LAN-side
    /// hosts claim in ARP/ND (docs/dataplane.md).
    #[arg(long = "iface-addr", value_name = "IF=ADDR[/LEN]", value_parser = parse_iface_addr)]
    iface_addr: Vec<(String, IpNet)>,
    /// The daemon's state directory: autorate's decision log
    /// (`autorate.csv`, docs/autorate.md) goes there. Default: the
    /// directory of the control socket.
    #[arg(long = "state-dir", value_name = "DIR")]
    state_dir: Option<String>,
    /// Diagnosis of autorate: write every decision to `autorate.csv` (not
    /// only those that move the rate or change the reason) and every delay
    /// sample's parts to `autorate-samples.csv` in the state directory
    /// (docs/autorate.md). Thousands of lines a second under load.
    #[arg(long = "autorate-trace")]
    autorate_trace: bool,
    /// Run as this user (a name, or a uid) once set up: its uid and
    /// primary group, no supplementary groups, only the capabilities the
    /// packet loop needs. The control socket's and the state directories
    /// are given to it; the configuration must be readable by it for
    /// reloads. Use a dedicated system user: the control socket admits
    /// root and this user (docs/dataplane.md, "Privileges").
    #[arg(long, value_name = "USER")]
    user: Option<String>,
}

pub fn run(a: Args) -> ExitCode {
    crate::out::set_log(a.verbose, daemon::notify::stderr_is_journal());
    let cfg = match config(a) {
        Ok(c) => c,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // The daemon logs its own failures, where they happen.
    let Ok(checked) = daemon::check(cfg) else {
        return ExitCode::FAILURE;
    };
    if let Some(name) = checked.dry_run() {
        return match crate::attach::print_plan(name) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    match checked.start().and_then(daemon::Daemon::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(daemon::Failed) => ExitCode::FAILURE,
    }
}

/// The daemon's configuration from the options.
fn config(a: Args) -> Result<Config, String> {
    let ports = match (a.bridge, a.attach.attach) {
        (Some((lan, wan)), _) => Ports::Bridge { lan, wan },
        (None, Some(name)) => Ports::Attach {
            name,
            wan_side: a.attach.attach_side == Side::Wan,
            nat: a.attach.nat,
            dry_run: a.attach.dry_run,
        },
        (None, None) => return Err("--bridge LAN_IF,WAN_IF or --attach IF".into()),
    };
    Ok(Config {
        metrics: a.metrics.addr()?,
        file: a.file.into(),
        defines: a.define,
        strict: a.strict,
        ports,
        control: a.control.into(),
        memory_limit: a.memory_limit,
        io: IoOptions {
            method: a.io,
            disable_offloads: !a.keep_offloads,
            spin_ns: a.spin_us.saturating_mul(1000),
            ring_block_bytes: a.ring_block_kib.saturating_mul(1024),
            ring_blocks: (16384 / a.ring_block_kib.max(4)).max(8),
            xdp_rx_frames: a.xdp_frames,
        },
        fail_open: a.on_exit == crate::failopen::Mode::Bridge,
        iface_addrs: a.iface_addr,
        state_dir: a.state_dir.map(Into::into),
        autorate_trace: a.autorate_trace,
        user: a.user,
    })
}
