//! One sluice per interface: an exclusive `flock` on a file per bridged
//! interface, taken before any socket is opened.
//!
//! # Principles
//! - Two bridges on one link forward every frame twice (or, with AF_XDP,
//!   one silently starves the other). The lock is what refuses the second;
//!   the control socket cannot, as it can be removed or given another path.
//! - The key is the interface as the kernel knows it: the network
//!   namespace (the inode of `/proc/self/ns/net`: names repeat across
//!   namespaces) and the ifindex (kept by a rename). File:
//!   `DIR/if-<netns inode>-<ifindex>.lock`, mode 0600 in a 0700 directory
//!   (`/run/sluice`, systemd's `RuntimeDirectory=`).
//! - `flock(2)` locks belong to the open file description: the kernel drops
//!   them when the process dies, however it dies, so a crash never leaves a
//!   stale lock. The holder writes its pid into the file, for the refusal
//!   message only.
//! - The file is removed by its holder on a clean exit, while still locked.
//!   A taker that locked a file just unlinked (it opened it before the
//!   unlink) notices that the path no longer names its inode and starts
//!   over, so two processes can never both hold "the" lock.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Attempts when the file keeps being replaced under us (each one means
/// another sluice just exited): more would hide a bug.
const TRIES: usize = 8;

/// The held locks; dropping them removes the files and releases them.
#[derive(Debug)]
pub struct IfaceLock {
    held: Vec<(PathBuf, File)>,
}

impl IfaceLock {
    /// The lock files held, for logs.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.held.iter().map(|(p, _)| p.as_path())
    }
}

impl Drop for IfaceLock {
    fn drop(&mut self) {
        // Unlink before closing: the lock is released only by the close.
        for (path, _file) in self.held.drain(..) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The lock file name of interface `ifindex` in the namespace whose
/// `/proc/self/ns/net` has inode `netns`.
pub fn lock_name(netns: u64, ifindex: u32) -> String {
    format!("if-{netns}-{ifindex}.lock")
}

/// Locks every interface of `names` in directory `dir` (created 0700 if
/// missing), or says which one another process holds, and its pid.
pub fn lock_interfaces(dir: &Path, names: &[&str]) -> io::Result<IfaceLock> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("lock directory {}: {e}", dir.display())))?;
    let netns = std::fs::metadata("/proc/self/ns/net")
        .map_err(|e| io::Error::new(e.kind(), format!("/proc/self/ns/net: {e}")))?
        .ino();
    let mut lock = IfaceLock { held: Vec::new() };
    for name in names {
        let ifindex = crate::sockopt::ifindex(name)? as u32;
        let path = dir.join(lock_name(netns, ifindex));
        let file = lock_one(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{name}: {e} (lock {}); one sluice per interface",
                    path.display()
                ),
            )
        })?;
        lock.held.push((path, file));
    }
    Ok(lock)
}

fn lock_one(path: &Path) -> io::Result<File> {
    for _ in 0..TRIES {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        if let Err(e) = rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if e != rustix::io::Errno::WOULDBLOCK {
                return Err(e.into());
            }
            let mut pid = String::new();
            // Bounded: only a pid is expected there.
            let _ = (&f).take(32).read_to_string(&mut pid);
            let pid = match pid.trim() {
                "" => "pid unknown".to_string(),
                p => format!("pid {p}"),
            };
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!("already bridged by another sluice ({pid})"),
            ));
        }
        // Locked; but is it still the file the path names?
        let same = std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.ino() == f.metadata().map(|n| n.ino()).unwrap_or(0));
        if !same {
            continue;
        }
        f.set_len(0)?;
        f.rewind()?;
        writeln!(f, "{}", std::process::id())?;
        return Ok(f);
    }
    Err(io::Error::other("the lock file keeps being replaced"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("sluice-lock-{tag}-{}", std::process::id()))
    }

    #[test]
    fn second_taker_is_refused_with_the_holders_pid_and_may_take_it_after() {
        let d = dir("two");
        let p = d.join("x.lock");
        std::fs::create_dir_all(&d).unwrap();
        let first = lock_one(&p).unwrap();
        // A second open file description conflicts even in one process.
        let e = lock_one(&p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy);
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(first);
        assert!(lock_one(&p).is_ok(), "released on close");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn loopback_is_locked_and_the_file_removed_on_drop() {
        let d = dir("lo");
        let l = lock_interfaces(&d, &["lo"]).unwrap();
        let paths: Vec<PathBuf> = l.paths().map(Path::to_path_buf).collect();
        assert_eq!(paths.len(), 1);
        assert!(paths[0].exists());
        let e = lock_interfaces(&d, &["lo"]).unwrap_err();
        assert!(e.to_string().starts_with("lo: already bridged"), "{e}");
        drop(l);
        assert!(!paths[0].exists());
        assert!(lock_interfaces(&d, &["lo"]).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }
}
