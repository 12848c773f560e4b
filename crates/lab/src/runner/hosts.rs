//! The hosts' TCP stacks: ECN, SACK, timestamps and congestion control of
//! the LAN hosts and the server, set per network namespace.
//!
//! # Principles
//! - Every sysctl here is per network namespace (checked on kernel 6.18:
//!   setting one in a namespace leaves the host's as it was), so each run
//!   sets them on every host it builds and the machine's own TCP is never
//!   touched. Both ends get the same values, whichever opens a connection.
//! - The congestion control is the exception: outside the initial
//!   namespace the kernel lets a namespace's default be only one of the
//!   machine's `tcp_allowed_congestion_control` (EPERM otherwise), and
//!   widening that list would touch the machine. So the default is set
//!   where allowed, and every bulk flow sets its own anyway (iperf3 `-C`,
//!   per socket, passed to the server too), which the runner checks
//!   against what iperf3 reports.
//! - A congestion control the kernel lacks is refused before a namespace
//!   exists ([`check_cc`]), after one `modprobe tcp_NAME`: a run must never
//!   fall back to another sender quietly (iperf3 `-C` would fail per flow).

use super::LabError;
use crate::model::Scenario;
use crate::topo::LabNet;

/// The sysctls a run sets on every host, in `tcp.txt`'s snapshots too.
pub(crate) const HOST_SYSCTLS: [&str; 4] = [
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_congestion_control",
];

const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// `net.ipv4.tcp_ecn`: 1 asks for ECN on the connections a host opens and
/// accepts it on those it is offered (RFC 3168 §6.1.1); 0 does neither
/// (Linux's default, 2, only accepts: the same as 0 here, where the client
/// opens every connection). SACK (RFC 2018) and timestamps (RFC 7323) are
/// 1 or 0; the congestion control is the scenario's.
fn sysctl_values(s: &Scenario) -> [String; 4] {
    let v = [
        u8::from(s.ecn).to_string(),
        u8::from(s.sack).to_string(),
        u8::from(s.timestamps).to_string(),
        s.cc.clone(),
    ];
    let mut out = v.clone();
    for (o, (k, v)) in out.iter_mut().zip(HOST_SYSCTLS.iter().zip(v)) {
        *o = format!("{k}={v}");
    }
    out
}

/// Sets the scenario's TCP on every LAN host and the server (the
/// congestion control's default only where the kernel allows it).
pub(super) fn host_tcp(net: &LabNet, s: &Scenario) -> Result<(), LabError> {
    let values = sysctl_values(s);
    let (cc, rest) = values.split_last().unwrap_or((&values[0], &[]));
    let mut cmd = vec!["sysctl", "-qw"];
    cmd.extend(rest.iter().map(String::as_str));
    for ns in net.hosts.iter().chain([&net.server]) {
        net.topo.exec(ns, &cmd)?;
        let _ = net.topo.exec_unchecked(ns, &["sysctl", "-qw", cc]);
    }
    Ok(())
}

/// Whether the kernel offers congestion control `cc`, loading its module
/// once if not; `Err` says what is offered and what failed.
pub fn check_cc(cc: &str) -> Result<(), String> {
    let offered = || std::fs::read_to_string(AVAILABLE_CC).unwrap_or_default();
    if offered().split_whitespace().any(|c| c == cc) {
        return Ok(());
    }
    let module = format!("tcp_{cc}");
    let tried = match std::process::Command::new("modprobe").arg(&module).output() {
        Ok(o) if o.status.success() => "loaded".to_string(),
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run modprobe: {e}"),
    };
    if offered().split_whitespace().any(|c| c == cc) {
        return Ok(());
    }
    Err(format!(
        "congestion control `{cc}` is not available on this kernel (it offers: {}); \
         `modprobe {module}`: {tried}",
        offered().trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_sysctl_follows_the_scenario() {
        let mut s = crate::scenario::tcp_1down();
        assert_eq!(
            sysctl_values(&s),
            [
                "net.ipv4.tcp_ecn=0",
                "net.ipv4.tcp_sack=1",
                "net.ipv4.tcp_timestamps=1",
                "net.ipv4.tcp_congestion_control=cubic"
            ]
        );
        (s.ecn, s.sack, s.timestamps, s.cc) = (true, false, false, "bbr".into());
        assert_eq!(
            sysctl_values(&s),
            [
                "net.ipv4.tcp_ecn=1",
                "net.ipv4.tcp_sack=0",
                "net.ipv4.tcp_timestamps=0",
                "net.ipv4.tcp_congestion_control=bbr"
            ]
        );
    }

    #[test]
    fn an_unknown_congestion_control_is_refused_with_what_is_offered() {
        let e = check_cc("no-such-cc").unwrap_err();
        assert!(
            e.contains("no-such-cc") && e.contains("modprobe tcp_no-such-cc"),
            "{e}"
        );
        // What every Linux kernel has built in.
        assert_eq!(check_cc("reno"), Ok(()));
    }
}
