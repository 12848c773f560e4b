//! `sluice run --user NAME` (security review L6): set up as root, then run
//! as the user, its group and no other, with only the capabilities the
//! packet loop needs, still forwarding and still answering `show info`;
//! an unknown user is refused before anything is set up.
//!
//! Needs root, `ip`, `ping` (scripts/setup.sh) and a user `nobody`;
//! otherwise SKIP, or a failure under `SLUICE_REQUIRE_NETNS=1`
//! (sluice-testkit).

use sluice_io::caps;
use sluice_lab::BridgeLab;
use sluice_testkit::{bridge_lab, require_io, require_netns, unavailable, Sluice};

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// A `/proc/PID/status` line's value (`Uid`, `CapEff`), whitespace-trimmed.
fn status(pid: u32, field: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{field} in\n{s}"))
        .trim()
        .to_string()
}

fn cap_set(pid: u32, field: &str) -> u64 {
    u64::from_str_radix(&status(pid, field), 16).expect("hex capability set")
}

#[test]
fn run_as_nobody_forwards_with_the_loop_s_capabilities_only() {
    let Some(_serial) = require_netns(&["ping"]) else {
        return;
    };
    let Ok(Some(nobody)) = caps::lookup_user("nobody") else {
        unavailable("no user `nobody`", "useradd --system nobody");
        return;
    };
    let b = bin();
    for io in ["xdp", "ring"] {
        let mut lab = BridgeLab::new("us").expect("namespaces");
        // The control socket's directory: the user's (sluice takes over
        // only one it made, or /run/sluice).
        std::os::unix::fs::chown(&lab.dir, Some(nobody.uid), Some(nobody.gid)).unwrap();
        lab.start_sluice(&b, "pass all\n", &["--io", io, "--user", "nobody", "-v"])
            .unwrap_or_else(|e| panic!("--io {io} --user nobody: {e}"));
        if !require_io(&lab, &b, io) {
            continue;
        }
        let pid = lab.sluice_pid().expect("pid");
        let ids = |f| {
            status(pid, f)
                .split_whitespace()
                .map(|v| v.parse::<u32>().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids("Uid"),
            [nobody.uid; 4],
            "real, effective, saved, fs uid"
        );
        assert_eq!(
            ids("Gid"),
            [nobody.gid; 4],
            "real, effective, saved, fs gid"
        );
        assert_eq!(status(pid, "Groups"), "", "no supplementary groups");
        let (eff, prm) = (cap_set(pid, "CapEff"), cap_set(pid, "CapPrm"));
        let wanted = caps::mask(&[caps::CAP_NET_ADMIN])
            | if io == "xdp" {
                caps::mask(&[caps::bpf_cap()])
            } else {
                0
            };
        assert_eq!(
            (eff, prm),
            (wanted, wanted),
            "--io {io}: CapEff {} CapPrm {}\n{}",
            caps::names(eff),
            caps::names(prm),
            lab.log()
        );
        assert!(
            lab.ping_once(),
            "--io {io}: no ping as nobody\n{}",
            lab.log()
        );
        let info = lab
            .info(&b)
            .unwrap_or_else(|e| panic!("--io {io}: show info: {e}\n{}", lab.log()));
        assert_eq!(info.pid, pid);
        let st = lab.stop_sluice().expect("stop");
        assert!(
            st.is_some_and(|s| s.success()),
            "--io {io}: exit {st:?}\n{}",
            lab.log()
        );
        eprintln!(
            "netns_user: --io {io} as uid {}: CapEff {}, ping and show info answered",
            nobody.uid,
            caps::names(eff)
        );
    }
}

/// `sluice run … --user USER` in the lab's shaper namespace, to its end.
fn run_as(lab: &BridgeLab, user: &str) -> (Option<i32>, String) {
    let conf = lab.write_conf("pass all\n").unwrap();
    let (ctl, bridge) = (
        lab.control_path(),
        format!("{},{}", lab.wiring.lan, lab.wiring.wan),
    );
    let out = lab
        .topo
        .exec_unchecked(
            &lab.shaper,
            &[
                &bin(),
                "run",
                "-f",
                &conf,
                "--bridge",
                &bridge,
                "--control",
                &ctl,
                "--user",
                user,
            ],
        )
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err)
}

#[test]
fn an_unknown_user_or_someone_else_s_directory_is_refused_before_set_up() {
    use std::os::unix::fs::MetadataExt;
    let Some((_serial, lab)) = bridge_lab("un", &[]) else {
        return;
    };
    let ctl = lab.control_path();
    let (code, err) = run_as(&lab, "no-such-user-sluice");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--user no-such-user-sluice: no such user"),
        "{err}"
    );
    // The lab's directory is root's: not taken over for the control socket.
    if let Ok(Some(_)) = caps::lookup_user("nobody") {
        let (code, err) = run_as(&lab, "nobody");
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("owned by uid 0, not --user's"), "{err}");
        assert_eq!(std::fs::metadata(&lab.dir).unwrap().uid(), 0);
    }
    let link = lab
        .topo
        .exec(&lab.shaper, &["ip", "-d", "link", "show", lab.wiring.lan])
        .unwrap();
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(!link.contains("xdp") && !link.contains("PROMISC"), "{link}");
    assert!(!std::path::Path::new(&ctl).exists(), "no control socket");
}

/// The unit's `AmbientCapabilities=`, as setpriv(1) spells them
/// (`+net_raw,+net_admin,…`).
fn unit_ambient_caps() -> String {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/sluice.service"
    ))
    .expect("contrib/sluice.service");
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("AmbientCapabilities= in the unit");
    line.split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// As contrib/sluice.service runs it (`User=` with the unit's ambient
/// capabilities, `/run/sluice` the user's as `RuntimeDirectory=` makes
/// it): set-up itself runs as that user, not root. `/run/sluice` is a
/// tmpfs private to the daemon's mount namespace here, so other daemons'
/// lock files are not touched.
#[test]
fn as_the_unit_runs_it_a_user_with_ambient_capabilities_sets_up_and_forwards() {
    let Some(_serial) = require_netns(&["ping", "unshare", "setpriv"]) else {
        return;
    };
    let Ok(Some(nobody)) = caps::lookup_user("nobody") else {
        unavailable("no user `nobody`", "useradd --system nobody");
        return;
    };
    let b = bin();
    let mut lab = BridgeLab::new("uu").expect("namespaces");
    let conf = lab.write_conf("pass all\n").unwrap();
    // The lab's directory holds the control socket: the user's, as
    // /run/sluice is under the unit.
    std::os::unix::fs::chown(&lab.dir, Some(nobody.uid), Some(nobody.gid)).unwrap();
    let script = format!(
        "mount -t tmpfs -o mode=0700,uid={u},gid={g} sluice-run /run/sluice && \
         exec setpriv --reuid={u} --regid={g} --clear-groups --inh-caps={c} --ambient-caps={c} \
         {b} run -f {conf} --bridge {lan},{wan} --control {ctl} -v",
        u = nobody.uid,
        g = nobody.gid,
        c = unit_ambient_caps(),
        lan = lab.wiring.lan,
        wan = lab.wiring.wan,
        ctl = lab.control_path(),
    );
    lab.spawn_sluice(
        "unshare",
        &["-m", "--propagation", "private", "sh", "-c", &script],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pid = lab.sluice_pid().expect("pid");
    assert!(
        status(pid, "Uid").starts_with(&format!("{}\t", nobody.uid)),
        "{}",
        lab.log()
    );
    assert!(lab.ping_once(), "no ping\n{}", lab.log());
    lab.info(&b)
        .unwrap_or_else(|e| panic!("show info: {e}\n{}", lab.log()));
    let st = lab.stop_sluice().expect("stop");
    assert!(
        st.is_some_and(|s| s.success()),
        "exit {st:?}\n{}",
        lab.log()
    );
}
