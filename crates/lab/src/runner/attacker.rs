//! Plays a scenario's attack (crate::attack) during a run: the attacker's
//! peer in the server namespace from the start, the attacker itself from
//! its planned start, stopped at its planned end, and its record.
//!
//! # Principles
//! - The attacker bounds itself (`--secs`, its frame budget); the runner
//!   still stops it [`STOP_AFTER_S`] past its end, with SIGINT so it
//!   prints its count, and the lab's `Topology` kills what is left.
//! - Its output is data: one JSON object (crate::attack::AttackerOutput)
//!   in `attack.json`, its diagnostics in `attack.err`.

use super::LabError;
use crate::attack::{self, AttackRecord, AttackerOutput, Plan};
use crate::model::Scenario;
use crate::netns::ProcId;
use crate::topo::{LabNet, CLIENT_IP, LIAR_IP, SERVER_IP};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Past its planned end, the attacker gets this long to stop by itself.
const STOP_AFTER_S: f64 = 2.0;
/// How long the peer gets to start listening (20 ms steps).
const SINK_READY_TRIES: u32 = 150;
/// Where the attack runs from (crate::attack's principles).
const FROM: &str = "the client namespace (a second process beside the victim)";

pub(super) struct Attacker {
    plan: Plan,
    bin: PathBuf,
    json: PathBuf,
    proc_id: Option<ProcId>,
    end_s: Option<f64>,
    stop_sent: bool,
    error: Option<String>,
    lying: attack::Lying,
}

impl Attacker {
    /// The scenario's attacker, its peer listening already; `None` without
    /// an attack.
    pub(super) fn start(
        net: &mut LabNet,
        s: &Scenario,
        bin: &Path,
        dir: &Path,
    ) -> Result<Option<Attacker>, LabError> {
        let Some(plan) = s.attack_plan() else {
            return Ok(None);
        };
        if plan.attack.needs_sink() {
            sink(net, s, bin, dir)?;
        }
        Ok(Some(Attacker {
            plan,
            bin: bin.to_path_buf(),
            json: dir.join("attack.json"),
            proc_id: None,
            end_s: None,
            stop_sent: false,
            error: None,
            lying: s.lying,
        }))
    }

    /// Starts the attacker when its time comes, stops it when it overruns.
    pub(super) fn tend(&mut self, net: &mut LabNet, t: f64) -> Result<(), LabError> {
        let p = self.plan;
        match self.proc_id {
            None if t >= p.start_s && self.error.is_none() => {
                let gw = net.gateway_mac()?;
                let (port, secs) = (attack::SINK_PORT.to_string(), format!("{:.3}", p.secs));
                let liars = self.lying.liars.to_string();
                let bin = self.bin.to_string_lossy().into_owned();
                // The liars' own remote host; the other attacks target the
                // victim's server.
                let server = match p.attack {
                    attack::Attack::LyingClock => LIAR_IP,
                    _ => SERVER_IP,
                };
                let args = [
                    bin.as_str(),
                    "lab",
                    "attack",
                    p.attack.name(),
                    "--dev",
                    "c0",
                    "--src",
                    CLIENT_IP,
                    "--server",
                    server,
                    "--port",
                    &port,
                    "--gw-mac",
                    &gw,
                    "--secs",
                    &secs,
                    "--liars",
                    &liars,
                ];
                let ns = net.hosts[0].clone();
                let err = self.json.with_extension("err");
                self.proc_id = Some(net.topo.spawn_split(&ns, &args, &self.json, &err)?);
            }
            Some(id) if self.end_s.is_none() => {
                if !matches!(net.topo.try_status(id), Ok(None)) {
                    self.end_s = Some(t);
                } else if !self.stop_sent && t >= p.start_s + p.secs + STOP_AFTER_S {
                    let _ = net.topo.signal(id, "INT");
                    self.stop_sent = true;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// What the attack did; stops it if it still runs.
    pub(super) fn finish(mut self, net: &mut LabNet, t: f64) -> AttackRecord {
        if let (Some(id), None) = (self.proc_id, self.end_s) {
            let _ = net.topo.stop(id, "INT");
            self.end_s = Some(t);
        }
        let out = match (self.proc_id, &self.error) {
            (_, Some(e)) => Err(e.clone()),
            (None, None) => Err("never started (the run ended first)".to_string()),
            (Some(_), None) => read_output(&self.json),
        };
        let (sent, detail, error) = match out {
            Ok(o) => (o.sent, o.detail, o.error),
            Err(e) => (0, String::new(), Some(e)),
        };
        AttackRecord {
            kind: self.plan.attack,
            from: FROM.into(),
            start_s: self.plan.start_s,
            end_s: self.end_s,
            sent,
            detail,
            lying: (self.plan.attack == attack::Attack::LyingClock).then_some(self.lying),
            error,
        }
    }
}

/// The attacker's JSON, or why there is none (its stderr's last line).
fn read_output(json: &Path) -> Result<AttackerOutput, String> {
    let text = std::fs::read_to_string(json).unwrap_or_default();
    serde_json::from_str(text.trim()).map_err(|e| {
        let err = std::fs::read_to_string(json.with_extension("err")).unwrap_or_default();
        match err.lines().last() {
            Some(l) => format!("no report from the attacker: {l}"),
            None => format!("no report from the attacker ({e})"),
        }
    })
}

/// The attacker's peer in the server namespace: a listener on
/// [`attack::SINK_PORT`] that trickles a few bytes to whoever connects,
/// for the whole run.
fn sink(net: &mut LabNet, s: &Scenario, bin: &Path, dir: &Path) -> Result<(), LabError> {
    let port = attack::SINK_PORT.to_string();
    let secs = format!("{:.0}", s.total_secs() + super::LINGER_MAX_S * 3.0);
    let bin = bin.to_string_lossy();
    let ns = net.server.clone();
    net.topo.spawn(
        &ns,
        &[
            &bin, "lab", "attack", "sink", "--port", &port, "--secs", &secs,
        ],
        Some(&dir.join("attack-sink.log")),
    )?;
    let needle = format!(":{port} ");
    for _ in 0..SINK_READY_TRIES {
        let out = net.topo.exec(&ns, &["ss", "-Hltn"])?;
        if String::from_utf8_lossy(&out.stdout).contains(&needle) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(LabError::Failed(
        "the attacker's peer did not start listening (see attack-sink.log)".into(),
    ))
}
