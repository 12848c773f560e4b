//! Dropping privileges once the daemon is set up: capabilities(7) reduced
//! to what the running loop still uses, and `PR_SET_NO_NEW_PRIVS`.
//!
//! # Principles
//! - Everything that needs full root happens before: the sockets are open
//!   (CAP_NET_RAW is checked at `socket(2)` only), offloads are set
//!   (CAP_NET_ADMIN), the UMEM is locked (CAP_IPC_LOCK), the XDP program is
//!   loaded and attached (CAP_BPF). What is left to a running daemon is
//!   attaching the same program again after someone detached it
//!   (CAP_NET_ADMIN + CAP_BPF, or CAP_SYS_ADMIN on kernels before 5.8,
//!   which lack CAP_BPF) and handing the interfaces back at exit
//!   (CAP_NET_ADMIN). The caller names the set ([`restrict_to`]).
//! - Without a user ([`restrict_to`]) the uid stays 0: files the daemon
//!   reads or removes later (the configuration on reload, its control
//!   socket and lock files at exit) are root's, which the owner's
//!   permission bits grant without CAP_DAC_OVERRIDE; root-owned files
//!   elsewhere stay writable the same way. With one ([`restrict_as`],
//!   `run --user`) the process becomes that user and group, supplementary
//!   groups cleared, keeping across the change (`PR_SET_KEEPCAPS`) only
//!   the capabilities named: a compromise of the packet path is then that
//!   user's, not root's (security review L6). What it still writes must
//!   be that user's (the caller chowns it first).
//! - Reduced are the effective, permitted and inheritable sets, the
//!   ambient set (cleared) and the bounding set (needs CAP_SETPCAP; under a
//!   systemd unit whose `CapabilityBoundingSet=` already bounds it, EPERM
//!   is expected and said). With `PR_SET_NO_NEW_PRIVS`, nothing executed
//!   later gains a capability the daemon no longer has (capabilities(7),
//!   "Capabilities and execution of programs by root"; prctl(2)).
//! - Capabilities are per thread and inherited at creation: this runs
//!   before any other thread exists, and refuses to run otherwise. So do
//!   the id changes, which `rustix` makes for the calling thread only (the
//!   raw syscalls; glibc's `setresuid` would signal every thread).

use rustix::thread::{self as th, CapabilitySet, CapabilitySets};
use std::io;

pub const CAP_DAC_OVERRIDE: u32 = 1;
pub const CAP_SETPCAP: u32 = 8;
pub const CAP_NET_BIND_SERVICE: u32 = 10;
pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_NET_RAW: u32 = 13;
pub const CAP_IPC_LOCK: u32 = 14;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_BPF: u32 = 39;

/// The thread's privileges after [`restrict_to`] (bit `n` is capability `n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Privileges {
    pub effective: u64,
    pub permitted: u64,
    pub bounding: u64,
    pub no_new_privs: bool,
    /// The bounding set could be reduced (false: CAP_SETPCAP is missing).
    pub bounding_reduced: bool,
}

/// The highest capability this kernel knows.
pub fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(CAP_BPF)
        .min(63)
}

/// What loading or attaching a BPF program takes here: CAP_BPF where the
/// kernel has it (5.8+), else CAP_SYS_ADMIN.
pub fn bpf_cap() -> u32 {
    if last_cap() >= CAP_BPF {
        CAP_BPF
    } else {
        CAP_SYS_ADMIN
    }
}

/// A capability mask from capability numbers.
pub fn mask(caps: &[u32]) -> u64 {
    caps.iter().filter(|&&c| c < 64).fold(0, |m, &c| m | 1 << c)
}

/// The names of the capabilities in `m`, as capabilities(7) spells them
/// (lower case), comma-separated; `none` for the empty set.
pub fn names(m: u64) -> String {
    const KNOWN: [(u32, &str); 8] = [
        (CAP_DAC_OVERRIDE, "cap_dac_override"),
        (CAP_SETPCAP, "cap_setpcap"),
        (CAP_NET_BIND_SERVICE, "cap_net_bind_service"),
        (CAP_NET_ADMIN, "cap_net_admin"),
        (CAP_NET_RAW, "cap_net_raw"),
        (CAP_IPC_LOCK, "cap_ipc_lock"),
        (CAP_SYS_ADMIN, "cap_sys_admin"),
        (CAP_BPF, "cap_bpf"),
    ];
    let v: Vec<String> = (0..64u32)
        .filter(|c| m & (1 << c) != 0)
        .map(|c| match KNOWN.iter().find(|(n, _)| *n == c) {
            Some((_, name)) => name.to_string(),
            None => format!("cap_{c}"),
        })
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(",")
    }
}

/// Capability `c` as a one-bit set (rustix takes sets; `c` < 64).
fn cap(c: u32) -> CapabilitySet {
    CapabilitySet::from_bits_retain(1 << c)
}

/// The calling thread's privileges as they are.
pub fn current() -> io::Result<Privileges> {
    let d = th::capabilities(None)?;
    let mut bounding = 0u64;
    for c in 0..=last_cap() {
        if th::capability_is_in_bounding_set(cap(c))? {
            bounding |= 1 << c;
        }
    }
    Ok(Privileges {
        effective: d.effective.bits(),
        permitted: d.permitted.bits(),
        bounding,
        no_new_privs: th::no_new_privs()?,
        bounding_reduced: true,
    })
}

/// A user to become: its uid and primary gid ([`lookup_user`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
}

/// The user `name` (or a numeric uid) as the system's user database
/// (getpwnam(3), NSS included) knows it; `Ok(None)` if it has none.
pub fn lookup_user(name: &str) -> io::Result<Option<User>> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the user name"))?;
    let mut buf = vec![0u8; 4096];
    loop {
        let mut pw = std::mem::MaybeUninit::<libc::passwd>::uninit();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `cname` is NUL-terminated; `pw`, `buf` (its length
        // given) and `found` outlive the call. On success with an entry,
        // `found` points at `pw`, which getpwnam_r filled (its strings
        // live in `buf`); only its numeric fields are read, before `pw`
        // or `buf` change.
        let (r, ids) = unsafe {
            let r = libc::getpwnam_r(
                cname.as_ptr(),
                pw.as_mut_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            );
            let ids = (r == 0 && !found.is_null()).then(|| ((*found).pw_uid, (*found).pw_gid));
            (r, ids)
        };
        match (r, ids) {
            (0, None) => break,
            (0, Some((uid, gid))) => return Ok(Some(User { uid, gid })),
            (libc::ERANGE, _) if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            (e, _) => return Err(io::Error::from_raw_os_error(e)),
        }
    }
    Ok(name.parse::<u32>().ok().map(|uid| User { uid, gid: uid }))
}

/// Sets `PR_SET_NO_NEW_PRIVS` and reduces every capability set to `keep`
/// (a [`mask`]; what is not permitted now stays out). Must run before the
/// process has a second thread (refused otherwise: it would keep all).
pub fn restrict_to(keep: u64) -> io::Result<Privileges> {
    restrict_as(keep, None)
}

/// [`restrict_to`], becoming `user` on the way (real, effective and saved
/// ids; no supplementary groups) with `keep` carried across the change.
/// Needs CAP_SETUID and CAP_SETGID, which are then dropped like the rest.
pub fn restrict_as(keep: u64, user: Option<User>) -> io::Result<Privileges> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "{threads} threads already run; capabilities are per thread"
        )));
    }
    th::set_no_new_privs(true)?;
    let mut bounding_reduced = true;
    for c in 0..=last_cap() {
        if keep & (1 << c) != 0 || !th::capability_is_in_bounding_set(cap(c))? {
            continue;
        }
        match th::remove_capability_from_bounding_set(cap(c)) {
            Ok(()) => {}
            Err(rustix::io::Errno::PERM) => {
                bounding_reduced = false;
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Older kernels have no ambient set (EINVAL): nothing to clear.
    match th::clear_ambient_capability_set() {
        Err(e) if e != rustix::io::Errno::INVAL => return Err(e.into()),
        _ => {}
    }
    if let Some(u) = user {
        become_user(u)?;
    }
    let permitted = th::capabilities(None)?.permitted & CapabilitySet::from_bits_retain(keep);
    th::set_capabilities(
        None,
        CapabilitySets {
            effective: permitted,
            permitted,
            inheritable: CapabilitySet::empty(),
        },
    )?;
    let mut p = current()?;
    p.bounding_reduced = bounding_reduced;
    Ok(p)
}

/// setgroups, setresgid, setresuid to `u`, the permitted set kept
/// (the effective one is emptied by the uid change and restored by the
/// caller's `capset`).
fn become_user(u: User) -> io::Result<()> {
    use rustix::thread::{Gid, Uid};
    th::set_keep_capabilities(true)?;
    th::set_thread_groups(&[])?;
    let gid = Gid::from_raw(u.gid);
    th::set_thread_res_gid(gid, gid, gid)?;
    let uid = Uid::from_raw(u.uid);
    th::set_thread_res_uid(uid, uid, uid)?;
    th::set_keep_capabilities(false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_names() {
        let m = mask(&[CAP_NET_ADMIN, CAP_BPF]);
        assert_eq!(m, 1 << 12 | 1 << 39);
        assert_eq!(names(m), "cap_net_admin,cap_bpf");
        assert_eq!(names(0), "none");
        assert_eq!(names(1 << 5), "cap_5");
        assert_eq!(mask(&[64, 70]), 0, "out of range is ignored");
    }

    #[test]
    fn users_are_looked_up_by_name_or_number() {
        assert_eq!(lookup_user("root").unwrap(), Some(User { uid: 0, gid: 0 }));
        assert_eq!(lookup_user("no-such-user-sluice").unwrap(), None);
        assert!(lookup_user("a\0b").is_err());
    }

    #[test]
    fn current_reads_this_thread() {
        let p = current().unwrap();
        assert_eq!(p.effective & !p.permitted, 0, "effective ⊆ permitted");
        assert!(p.bounding != 0 || p.permitted == 0);
    }
}
