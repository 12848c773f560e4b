//! The daemon's privileges: the `--user` to run as, the directories it
//! must own, and the drop to the packet loop's capabilities once set up.

use super::{autorate_log, Config};
use crate::{debug, info, log_warn as warn};
use sluice_io::{caps, Bridge};

/// `--user NAME`: the user, or an error saying there is none (before
/// anything is set up).
pub(super) fn lookup_user(name: &str) -> Result<caps::User, String> {
    match caps::lookup_user(name) {
        Ok(Some(u)) => Ok(u),
        Ok(None) => Err(format!(
            "--user {name}: no such user; create a system user for sluice \
             (useradd --system --no-create-home --shell /usr/sbin/nologin sluice) or name one"
        )),
        Err(e) => Err(format!("--user {name}: {e}")),
    }
}

/// The directories the daemon writes after the drop: the state
/// directory (autorate's log) and the control socket's; with `--user`,
/// those to be given to the user just before the drop.
pub(super) struct Dirs {
    pub(super) state: std::path::PathBuf,
    /// (directory, owner) to chown to before the drop.
    give: Vec<(std::path::PathBuf, caps::User)>,
}

impl Dirs {
    /// Checks them before set-up (a refusal is an error). A directory is
    /// given to `--user` only if made now or if it is sluice's own
    /// `/run/sluice`; any other must be the user's already, so that no
    /// directory of someone else's (`/var/lib`, a home) is ever taken
    /// over. `/run/sluice` left to a user by an earlier `--user` run is
    /// taken back by a run without.
    pub(super) fn check(
        cfg: &Config,
        user: Option<caps::User>,
        logs_now: bool,
    ) -> Result<Dirs, String> {
        use std::os::unix::fs::MetadataExt;
        let control = cfg
            .control
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf();
        let state = cfg.state_dir.clone().unwrap_or_else(|| control.clone());
        let runtime = std::path::Path::new(crate::RUNTIME_DIR);
        let me = caps::User {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        };
        let target = user.unwrap_or(me);
        let mut checked: Vec<(&std::path::Path, &str, bool)> = Vec::new();
        if logs_now || user.is_some() {
            let made = autorate_log::check_dir(&state, user.map(|u| u.uid))
                .map_err(|e| format!("state directory (--state-dir) {e}"))?;
            checked.push((&state, "--state-dir", made));
        }
        if user.is_some() {
            let made = autorate_log::check_dir(&control, user.map(|u| u.uid))
                .map_err(|e| format!("control socket directory (--control) {e}"))?;
            checked.push((&control, "--control", made));
        } else if control == runtime {
            checked.push((&control, "--control", false));
        }
        let mut give = Vec::new();
        for (dir, flag, made) in checked {
            let owner = std::fs::metadata(dir).map_or(target.uid, |m| m.uid());
            if owner == target.uid || give.iter().any(|(d, _)| d == dir) {
                continue;
            }
            if user.is_none() {
                if dir == runtime && owner != 0 {
                    give.push((dir.to_path_buf(), target));
                }
                continue;
            }
            if !(made || dir == runtime) {
                return Err(format!(
                    "{flag} {}: owned by uid {owner}, not --user's {}: give it to the user \
                     (chown {}:{} {}) or name a directory of the user's own",
                    dir.display(),
                    target.uid,
                    target.uid,
                    target.gid,
                    dir.display()
                ));
            }
            give.push((dir.to_path_buf(), target));
        }
        if let Some(u) = user {
            warn_unreadable(&cfg.file, u);
        }
        Ok(Dirs { state, give })
    }

    pub(super) fn give(&self) -> Result<(), String> {
        for (dir, u) in &self.give {
            debug!("{}: given to uid {}", dir.display(), u.uid);
            std::os::unix::fs::chown(dir, Some(u.uid), Some(u.gid))
                .map_err(|e| format!("{}: cannot give it to uid {}: {e}", dir.display(), u.uid))?;
        }
        Ok(())
    }
}

/// `--user`: a configuration the user cannot read would fail every reload.
fn warn_unreadable(conf: &std::path::Path, u: caps::User) {
    use std::os::unix::fs::MetadataExt;
    let readable = std::fs::metadata(conf).is_ok_and(|m| {
        let mode = m.mode();
        (m.uid() == u.uid && mode & 0o400 != 0)
            || (m.gid() == u.gid && mode & 0o040 != 0)
            || mode & 0o004 != 0
    });
    if !readable {
        warn!(
            "{} is not readable by uid {}: reloads will fail",
            conf.display(),
            u.uid
        );
    }
}

/// Before any other thread exists: keep only the capabilities the loop
/// uses (plus binding a low metrics port, which happens later), set
/// no_new_privs (sluice_io::caps has why the rest is not needed).
pub(super) fn drop_privileges(
    bridge: &Bridge,
    metrics: Option<std::net::SocketAddr>,
    user: Option<caps::User>,
) -> std::io::Result<()> {
    let mut keep = bridge.caps_needed();
    if metrics.is_some_and(|m| (1..1024).contains(&m.port())) {
        keep |= caps::mask(&[caps::CAP_NET_BIND_SERVICE]);
    }
    let p = caps::restrict_as(keep, user)?;
    info!(
        "privileges: kept {} (bounding set {}), no_new_privs, uid {}",
        caps::names(p.effective),
        caps::names(p.bounding),
        rustix::process::geteuid().as_raw()
    );
    if !p.bounding_reduced {
        // Expected under the systemd unit, whose CapabilityBoundingSet= bounds it.
        info!(
            "bounding set left as the service manager set it (no CAP_SETPCAP): {}",
            caps::names(p.bounding)
        );
    }
    Ok(())
}
