//! What a run needs before it starts: the tools, the hosts a scenario
//! names, flow windows the kernel would not clamp, a latency probe that
//! crosses the link. Each `Err` says what is missing and how to fix it.

use crate::model::Scenario;

/// The tools a scenario needs, with the Debian package of each.
pub fn required_tools(scenario: &Scenario) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("ss", "iproute2"),
        ("ethtool", "ethtool"),
        ("iperf3", "iperf3"),
        ("ping", "iputils-ping"),
    ];
    if scenario.irtt.is_some() {
        v.push(("irtt", "irtt"));
    }
    v
}

/// `Err` names every missing tool and its package.
pub fn check_tools(scenario: &Scenario) -> Result<(), String> {
    let missing: Vec<String> = required_tools(scenario)
        .into_iter()
        .filter(|(tool, _)| {
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(std::process::Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        })
        .map(|(tool, pkg)| format!("`{tool}` (Debian package {pkg})"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "missing tools: {}; install them, e.g. `apt-get install {}`",
            missing.join(", "),
            required_tools(scenario)
                .into_iter()
                .map(|(_, p)| p)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(" ")
        ))
    }
}

/// Refuses a flow window the kernel would silently clamp: a socket buffer
/// request above `net.core.rmem_max`/`wmem_max` gets the maximum instead
/// (socket(7), SO_RCVBUF/SO_SNDBUF). These two sysctls are the host's,
/// whichever namespace reads them.
pub fn check_windows(scenario: &Scenario) -> Result<(), String> {
    let Some(w) = scenario.flows.iter().filter_map(|f| f.window).max() else {
        return Ok(());
    };
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let limits = [
        ("rmem_max", read("rmem_max")),
        ("wmem_max", read("wmem_max")),
    ];
    window_fits(w, &limits)
}

/// `Err` when the link drops ICMP (`--drop-icmp`) and the scenario has no
/// irtt stream to measure latency with instead.
pub fn check_latency_probe(scenario: &Scenario) -> Result<(), String> {
    if !scenario.link.drop_icmp || scenario.irtt.is_some() {
        return Ok(());
    }
    let with: Vec<String> = crate::scenario::all()
        .into_iter()
        .filter(|s| s.irtt.is_some())
        .map(|s| s.name)
        .collect();
    Err(format!(
        "--drop-icmp: scenario `{}` has no irtt stream, and with ICMP dropped beyond the modem \
         its latency can only be measured with irtt's round trips; scenarios with one: {}",
        scenario.name,
        with.join(", ")
    ))
}

/// `Err` when `window` exceeds one of the named kernel limits (an unread
/// limit is not checked).
fn window_fits(window: u64, limits: &[(&str, Option<u64>)]) -> Result<(), String> {
    for (name, limit) in limits {
        if let Some(max) = *limit {
            if window > max {
                return Err(format!(
                    "a window of {window} bytes is above net.core.{name} ({max} bytes): the \
                     kernel would clamp the socket buffer to it; give a smaller --window, or \
                     raise the limit (sysctl -w net.core.{name}={window})"
                ));
            }
        }
    }
    Ok(())
}

/// `Err` when a flow, the ping or the irtt stream names a LAN host the
/// scenario does not have, or the scenario has no host or too many.
pub fn check_hosts(s: &Scenario) -> Result<(), String> {
    use crate::model::MAX_HOSTS;
    if !(1..=MAX_HOSTS).contains(&s.hosts) {
        return Err(format!(
            "scenario {}: {} LAN hosts; a scenario has 1 to {MAX_HOSTS}",
            s.name, s.hosts
        ));
    }
    let users = s
        .flows
        .iter()
        .map(|f| ("a bulk flow", f.host))
        .chain([("the ping", s.ping_host)])
        .chain(s.irtt.as_ref().map(|i| ("the irtt stream", i.host)));
    for (what, host) in users {
        if host >= s.hosts {
            return Err(format!(
                "scenario {}: {what} runs on LAN host {host}, but the hosts are 0 to {}",
                s.name,
                s.hosts - 1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod host_tests {
    use super::*;

    #[test]
    fn windows_above_the_kernel_limits_are_refused() {
        let limits = [("rmem_max", Some(212_992)), ("wmem_max", Some(4 << 20))];
        assert_eq!(window_fits(64 << 10, &limits), Ok(()));
        assert_eq!(window_fits(212_992, &limits), Ok(()));
        let e = window_fits(256 << 10, &limits).unwrap_err();
        assert!(
            e.contains("262144") && e.contains("net.core.rmem_max (212992 bytes)"),
            "{e}"
        );
        assert!(e.contains("sysctl -w net.core.rmem_max=262144"), "{e}");
        // A limit that could not be read is not a reason to refuse.
        assert_eq!(window_fits(1 << 30, &[("rmem_max", None)]), Ok(()));
        // Autotuned flows need no check.
        let mut s = crate::scenario::tcp_1up();
        s.flows[0].window = None;
        assert_eq!(check_windows(&s), Ok(()));
    }

    #[test]
    fn dropping_icmp_needs_an_irtt_stream() {
        let mut s = crate::scenario::tcp_1up();
        assert_eq!(check_latency_probe(&s), Ok(()));
        s.link.drop_icmp = true;
        let e = check_latency_probe(&s).unwrap_err();
        assert!(
            e.starts_with("--drop-icmp: scenario `tcp_1up` has no irtt stream")
                && e.contains("rrul")
                && e.contains("voip"),
            "{e}"
        );
        let mut r = crate::scenario::by_name("rrul").unwrap();
        r.link.drop_icmp = true;
        assert_eq!(check_latency_probe(&r), Ok(()));
        assert_eq!(r.link.latency_probe(), "irtt");
    }
}

#[cfg(test)]
mod hosts_tests {
    use super::*;

    #[test]
    fn flows_and_probes_must_name_a_host_of_the_scenario() {
        let mut s = crate::scenario::host_fair();
        assert_eq!(check_hosts(&s), Ok(()));
        s.flows[2].host = 2;
        let e = check_hosts(&s).unwrap_err();
        assert!(e.contains("LAN host 2, but the hosts are 0 to 1"), "{e}");
        let mut s = crate::scenario::tcp_1up();
        s.ping_host = 1;
        assert!(check_hosts(&s).unwrap_err().contains("the ping"));
        s.ping_host = 0;
        s.hosts = 0;
        assert!(check_hosts(&s).unwrap_err().contains("1 to 16"));
    }
}
