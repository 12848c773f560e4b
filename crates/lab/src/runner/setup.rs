//! Set-up: the network, the shaper, a server per flow, the irtt server,
//! the rate sampler and the ping, up to `t = 0` on the wall clock.

use super::attacker::Attacker;
use super::hosts::host_tcp;
use super::progress::Bar;
use super::{dir_name, span, LabError, RunOptions};
use crate::model::{Scenario, ShaperSpec, RATE_PERIOD};
use crate::netns::ProcId;
use crate::probes::{self, RateSampler, RxPoint};
use crate::shaper::Shaper;
use crate::topo::{LabNet, SERVER_IP};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Set-up margin between building the network and `t = 0`.
const START_MARGIN: Duration = Duration::from_millis(300);
const FIRST_PORT: u16 = 5201;
/// How long an iperf3 server gets to start listening (20 ms steps).
const SERVER_READY_TRIES: u32 = 150;
pub(super) const IRTT_PORT: u16 = 2112;
/// How long the irtt server gets to start listening (20 ms steps).
const IRTT_READY_TRIES: u32 = 150;

/// A bulk flow while it runs.
pub(super) struct Flow {
    pub port: u16,
    /// Its iperf3 server (stopped with SIGINT before an interrupted
    /// upload's count is read from it).
    pub server: ProcId,
    pub proc_id: Option<ProcId>,
    pub interrupted_at: Option<f64>,
    pub start_s: f64,
    pub end_s: Option<f64>,
    pub json: PathBuf,
}

/// The irtt client while it runs.
pub(super) struct Irtt {
    pub proc_id: Option<ProcId>,
    pub interrupted_at: Option<f64>,
    pub json: PathBuf,
}

/// Everything a run holds between its set-up and its collection. All the
/// processes and namespaces live in `net`, whose drop removes them.
pub(super) struct Lab {
    pub net: LabNet,
    pub sh: Shaper,
    pub flows: Vec<Flow>,
    pub attacker: Option<Attacker>,
    pub irtt: Option<Irtt>,
    /// Taken when the run is collected.
    pub sampler: Option<RateSampler>,
    pub ping: ProcId,
    pub ping_txt: PathBuf,
    /// The ping's interval, seconds.
    pub interval_s: f64,
    /// When the ping was started, on the wall clock.
    pub ping_start_wall: f64,
    /// `t = 0`, on the monotonic and on the wall clock.
    pub t0: Instant,
    pub t0_wall: f64,
    pub warnings: Vec<String>,
}

impl Lab {
    /// Builds everything `scenario` needs and returns at `t = 0`, the
    /// ping running.
    pub fn start(
        scenario: &Scenario,
        shaper: &ShaperSpec,
        o: &RunOptions,
        bar: &mut Bar,
    ) -> Result<Lab, LabError> {
        bar.note("building the network");
        let ts_lie = (scenario.attack == Some(crate::attack::Attack::LyingClock))
            .then_some((scenario.lying.clock, crate::attack::SINK_PORT));
        let mut net = LabNet::build(
            &scenario.link,
            scenario.hosts,
            &o.sluice_bin,
            &o.dir,
            ts_lie,
        )?;
        if o.stopped() {
            return Err(LabError::Interrupted);
        }
        host_tcp(&net, scenario)?;
        let sh = Shaper::start(&mut net, shaper, &o.sluice_bin, &o.dir, o.autorate_trace)
            .map_err(LabError::Failed)?;
        // After the shaper's start, which waits for a ping to cross.
        if scenario.link.drop_icmp {
            net.drop_forwarded_icmp()?;
        }
        let flows = flow_servers(&mut net, scenario, &o.dir)?;
        let attacker = Attacker::start(&mut net, scenario, &o.sluice_bin, &o.dir)?;
        let irtt = irtt_server(&mut net, scenario, &o.dir)?;
        let (sampler, t0, t0_wall) = sample_from_t0(&mut net, scenario, bar)?;
        wait_until(t0, o, bar)?;
        let interval_s = f64::from(scenario.ping_interval_ms.max(1)) / 1000.0;
        let ping_txt = o.dir.join("ping.txt");
        let ping_start_wall = probes::wall_now();
        let ping_i = format!("{interval_s}");
        let ping_ns = net.hosts[scenario.ping_host].clone();
        let ping = net.topo.spawn_split(
            &ping_ns,
            &["ping", "-n", "-D", "-i", &ping_i, SERVER_IP],
            &ping_txt,
            &o.dir.join("ping.err"),
        )?;
        Ok(Lab {
            net,
            sh,
            flows,
            attacker,
            irtt,
            sampler: Some(sampler),
            ping,
            ping_txt,
            interval_s,
            ping_start_wall,
            t0,
            t0_wall,
            warnings: Vec::new(),
        })
    }
}

/// One iperf3 server per flow (one server serves one test at a time).
fn flow_servers(net: &mut LabNet, s: &Scenario, dir: &Path) -> Result<Vec<Flow>, LabError> {
    let mut flows = Vec::with_capacity(s.flows.len());
    for (i, f) in s.flows.iter().enumerate() {
        let port = FIRST_PORT + i as u16;
        let json = dir.join(format!("flow{i}-{}.json", dir_name(f.dir)));
        let server = iperf3_server(net, port, &json.with_extension("server.json"))?;
        flows.push(Flow {
            port,
            server,
            proc_id: None,
            interrupted_at: None,
            start_s: span(s, f.from, f.to).0,
            end_s: None,
            json,
        });
    }
    Ok(flows)
}

/// A one-shot iperf3 server on `port` in the server namespace, its JSON
/// (the receiver's counts for an upload) kept in `json`.
fn iperf3_server(net: &mut LabNet, port: u16, json: &Path) -> Result<ProcId, LabError> {
    let p = port.to_string();
    let ns = net.server.clone();
    let id = net.topo.spawn_split(
        &ns,
        &["iperf3", "-s", "-1", "-J", "-p", &p],
        json,
        &json.with_extension("err"),
    )?;
    let needle = format!(":{port} ");
    for _ in 0..SERVER_READY_TRIES {
        let out = net.topo.exec(&ns, &["ss", "-Hltn"])?;
        if String::from_utf8_lossy(&out.stdout).contains(&needle) {
            return Ok(id);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(LabError::Failed(format!(
        "iperf3 server on port {port} did not start"
    )))
}

/// The irtt server, listening, when the scenario has an irtt stream.
fn irtt_server(net: &mut LabNet, s: &Scenario, dir: &Path) -> Result<Option<Irtt>, LabError> {
    if s.irtt.is_none() {
        return Ok(None);
    }
    let server_ns = net.server.clone();
    let bind = format!("{SERVER_IP}:{IRTT_PORT}");
    net.topo.spawn(
        &server_ns,
        &["irtt", "server", "-b", &bind, "-i", "0"],
        Some(&dir.join("irtt-server.log")),
    )?;
    let needle = format!(":{IRTT_PORT} ");
    for _ in 0..IRTT_READY_TRIES {
        let out = net.topo.exec(&server_ns, &["ss", "-Hlun"])?;
        if String::from_utf8_lossy(&out.stdout).contains(&needle) {
            return Ok(Some(Irtt {
                proc_id: None,
                interrupted_at: None,
                json: dir.join("irtt.json"),
            }));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(LabError::Failed("irtt server did not start".into()))
}

/// The rate sampler, counting from `t = 0`, and `t = 0` on the monotonic
/// and the wall clock: after a margin for set-up, or, for a trace that
/// says `align`, at a multiple of its period of the wall clock (a schedule
/// of the clock's, as Starlink's; the wait is under one period).
fn sample_from_t0(
    net: &mut LabNet,
    s: &Scenario,
    bar: &mut Bar,
) -> Result<(RateSampler, Instant, f64), LabError> {
    // Anchors: processes whose /proc/PID/net/dev is each end's view (the
    // LAN's: the single host's, or the switch's with several).
    let (lan_ns, lan_if) = net.lan_rx_point();
    let lan_ns = lan_ns.clone();
    let server_ns = net.server.clone();
    let anchor_c = net.topo.spawn(&lan_ns, &["sleep", "1000000"], None)?;
    let anchor_v = net.topo.spawn(&server_ns, &["sleep", "1000000"], None)?;
    let pid = |id| {
        net.topo
            .pid(id)
            .ok_or_else(|| LabError::Failed("anchor pid".into()))
    };
    let (pid_c, pid_v) = (pid(anchor_c)?, pid(anchor_v)?);

    let (now_wall, now) = (probes::wall_now(), Instant::now());
    let margin = START_MARGIN.as_secs_f64();
    let wait = s
        .link
        .trace
        .as_ref()
        .map_or(margin, |tr| tr.start_wait_s(now_wall, margin));
    if wait > 1.0 {
        bar.note(&format!(
            "waiting {wait:.1} s to start on the trace's clock"
        ));
    }
    let t0_wall = now_wall + wait;
    let t0 = now + Duration::from_secs_f64(wait);
    let sampler = RateSampler::start(
        RxPoint {
            pid: pid_c,
            ifname: lan_if.into(),
        },
        RxPoint {
            pid: pid_v,
            ifname: "v0".into(),
        },
        RATE_PERIOD,
        t0_wall,
    );
    Ok((sampler, t0, t0_wall))
}

/// Sleeps until `t0`, or returns `Interrupted` as soon as the stop flag is
/// raised.
fn wait_until(t0: Instant, o: &RunOptions, bar: &mut Bar) -> Result<(), LabError> {
    while let Some(left) = t0.checked_duration_since(Instant::now()) {
        if o.stopped() {
            bar.done();
            return Err(LabError::Interrupted);
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    Ok(())
}
