//! What sits between `lan0` and `wan0` in the shaper namespace.
//!
//! # Principles
//! - Each kind joins the same two interfaces, so the rest of the path is
//!   identical whatever is under test: `none` is a kernel bridge and
//!   nothing else (the queue builds in the modem), `tc:` is the same bridge
//!   with the kernel's qdisc on `wan0` (upload) and optionally `lan0`
//!   (download), and a pf.conf runs `sluice run --bridge lan0,wan0` with the
//!   macros `ext_if=wan0` and `int_if=lan0`.
//! - A shaper that cannot start is an error that names the cause (the
//!   missing qdisc, sluice's own log), never a silent unshaped run.

use crate::model::ShaperSpec;
use crate::netns::ProcId;
use crate::topo::{bridge, LabNet, LAN_IF, WAN_IF};
use sluice_control::proto::{HealthReply, QueuesReply, Reply};
use std::path::{Path, PathBuf};

/// A started shaper.
pub struct Shaper {
    pub spec: ShaperSpec,
    /// The sluice process, for `sluice` shapers.
    proc_id: Option<ProcId>,
    control: PathBuf,
    log: PathBuf,
}

/// The error for a qdisc the running kernel lacks.
fn missing_qdisc(kind: &str, detail: &str) -> String {
    format!(
        "the running kernel has no `{kind}` qdisc ({detail}); see which it has with \
         `zcat /proc/config.gz | grep NET_SCH`, and run this comparison on a kernel that \
         builds it (a stock distribution kernel such as Debian's linux-image-amd64 has \
         cake, fq_codel, hfsc and netem as modules)"
    )
}

/// `tc qdisc replace dev DEV root ARGS…` in the shaper namespace.
fn tc_root(net: &LabNet, dev: &str, args: &str) -> Result<(), String> {
    let mut cmd = vec!["tc", "qdisc", "replace", "dev", dev, "root"];
    cmd.extend(args.split_whitespace());
    let out = net
        .topo
        .exec_unchecked(&net.shaper, &cmd)
        .map_err(|e| format!("tc: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let kind = args.split_whitespace().next().unwrap_or("");
    if err.contains("qdisc kind is unknown") || err.contains("Unknown qdisc") {
        return Err(missing_qdisc(kind, &err));
    }
    Err(format!(
        "`tc qdisc replace dev {dev} root {args}` failed: {err}"
    ))
}

impl Shaper {
    /// Starts `spec` in the shaper namespace of `net`; sluice's log goes to
    /// `dir`, its config is copied there (`shaper.conf`). The control socket
    /// lives in the temporary directory, not in `dir`: a run directory may
    /// be on a file system without Unix sockets (9p, some FUSE mounts) or
    /// deeper than a socket path may be (108 bytes).
    pub fn start(
        net: &mut LabNet,
        spec: &ShaperSpec,
        sluice_bin: &Path,
        dir: &Path,
        autorate_trace: bool,
    ) -> Result<Shaper, String> {
        let mut sh = Shaper {
            spec: spec.clone(),
            proc_id: None,
            control: std::env::temp_dir().join(format!("{}.ctl.sock", net.shaper.name())),
            log: dir.join("sluice.log"),
        };
        match spec {
            ShaperSpec::None => {
                bridge(&net.topo, &net.shaper, LAN_IF, WAN_IF).map_err(|e| e.to_string())?;
            }
            ShaperSpec::Tc { up, down } => {
                bridge(&net.topo, &net.shaper, LAN_IF, WAN_IF).map_err(|e| e.to_string())?;
                tc_root(net, WAN_IF, up)?;
                if let Some(d) = down {
                    tc_root(net, LAN_IF, d)?;
                }
            }
            ShaperSpec::Sluice { path } => {
                let conf = dir.join("shaper.conf");
                std::fs::copy(path, &conf).map_err(|e| format!("{path}: {e}"))?;
                let (bin, conf_s, ctl) = (
                    sluice_bin.to_string_lossy().into_owned(),
                    conf.to_string_lossy().into_owned(),
                    sh.control.to_string_lossy().into_owned(),
                );
                let ext = format!("ext_if={WAN_IF}");
                let int = format!("int_if={LAN_IF}");
                let bridge_arg = format!("{LAN_IF},{WAN_IF}");
                // autorate's decision log (autorate.csv) goes with the run.
                let state = dir.to_string_lossy().into_owned();
                let mut args = vec![
                    bin.as_str(),
                    "run",
                    "-f",
                    &conf_s,
                    "-D",
                    &ext,
                    "-D",
                    &int,
                    "--bridge",
                    &bridge_arg,
                    "--control",
                    &ctl,
                    "--state-dir",
                    &state,
                ];
                if autorate_trace {
                    args.push("--autorate-trace");
                }
                let ns = net.shaper.clone();
                let id = net
                    .topo
                    .spawn(&ns, &args, Some(&sh.log))
                    .map_err(|e| format!("starting {bin}: {e}"))?;
                sh.proc_id = Some(id);
            }
        }
        if let Err(e) = net.wait_path() {
            if !sh.alive(net) {
                return Err(format!("sluice exited at start:\n{}", sh.log_text()));
            }
            return Err(format!("{e}\n{}", sh.log_text()));
        }
        // Static neighbours: the hosts would never ARP, and sluice's
        // `from $ext_if` means the addresses LAN hosts claim in ARP/ND.
        for (i, h) in net.hosts.iter().enumerate() {
            net.topo
                .arp_from(h, crate::topo::UNUSED_CLIENT_NET_IP)
                .map_err(|e| format!("ARP of LAN host {}: {e}", crate::topo::host_ip(i)))?;
        }
        Ok(sh)
    }

    /// False once a sluice shaper has exited (kernel shapers cannot).
    pub fn alive(&self, net: &mut LabNet) -> bool {
        match self.proc_id {
            Some(id) => matches!(net.topo.try_status(id), Ok(None)),
            None => true,
        }
    }

    /// sluice's log so far ("" for kernel shapers).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `sluice show queues --json` of the running shaper, if it is sluice.
    pub fn queues(&self, net: &LabNet, sluice_bin: &Path) -> Option<QueuesReply> {
        match self.show(net, sluice_bin, "queues")? {
            Reply::Queues(q) => Some(q),
            _ => None,
        }
    }

    /// `sluice show health --json` of the running shaper, if it is sluice.
    pub fn health(&self, net: &LabNet, sluice_bin: &Path) -> Option<HealthReply> {
        match self.show(net, sluice_bin, "health")? {
            Reply::Health(h) => Some(h),
            _ => None,
        }
    }

    /// `sluice show WHAT --json` of the running shaper, if it is sluice.
    fn show(&self, net: &LabNet, sluice_bin: &Path, what: &str) -> Option<Reply> {
        self.proc_id?;
        let (bin, ctl) = (
            sluice_bin.to_string_lossy().into_owned(),
            self.control.to_string_lossy().into_owned(),
        );
        let out = net
            .topo
            .exec_unchecked(
                &net.shaper,
                &[&bin, "show", what, "--json", "--control", &ctl],
            )
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// Stops sluice with SIGTERM (its counters go to the log).
    pub fn stop(&mut self, net: &mut LabNet) {
        if let Some(id) = self.proc_id {
            let _ = net.topo.stop(id, "TERM");
        }
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        // A sluice killed rather than stopped leaves its socket file behind.
        let _ = std::fs::remove_file(&self.control);
    }
}
