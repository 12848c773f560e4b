//! Socket options and interface queries, written once for every socket
//! kind of the crate (AF_PACKET, AF_XDP, netlink).
//!
//! # Principles
//! - One typed wrapper per syscall shape: `setsockopt`/`getsockopt` take a
//!   `&T` / `&mut T` and pass its exact size, so no caller spells a pointer
//!   cast or a length. Interface lookups go by name through an `ifreq`
//!   (`ifreq_ioctl`), ethtool commands through [`ethtool`].
//! - Packet-socket constants live in `ring.rs` (the format module), XDP ones
//!   in `xdp/`; nothing here knows a protocol.

use crate::sys::cvt;
use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

/// Socket buffers big enough for a burst; `SO_*BUFFORCE` (root) first,
/// the capped plain option if that is refused.
pub fn set_buf(fd: RawFd, send: bool, bytes: libc::c_int) {
    let (force, plain) = if send {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    } else {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    };
    if setsockopt(fd, libc::SOL_SOCKET, force, &bytes).is_err() {
        // Best effort: the default size only costs burst tolerance.
        let _ = setsockopt(fd, libc::SOL_SOCKET, plain, &bytes);
    }
}

pub fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of the given size for the call's duration.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// getsockopt into a `T`; returns the length the kernel wrote.
pub fn getsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &mut T,
) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is writable for `len` bytes; the kernel writes at most that.
    cvt(unsafe { libc::getsockopt(fd, level, name, (val as *mut T).cast(), &mut len) })?;
    Ok(len as usize)
}

/// Reads and clears a socket's pending error (SO_ERROR): what makes epoll
/// stop reporting EPOLLERR on a socket nobody calls recv on (a ring).
pub fn take_error(fd: RawFd) -> Option<io::Error> {
    let mut err: libc::c_int = 0;
    match getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err) {
        Ok(_) if err != 0 => Some(io::Error::from_raw_os_error(err)),
        Ok(_) => None,
        Err(e) => Some(e),
    }
}

pub fn ifindex(name: &str) -> io::Result<libc::c_int> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name}"),
        ))
    } else {
        Ok(idx as libc::c_int)
    }
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: an all-zero ifreq is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.len() >= ifr.ifr_name.len() || b.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok(ifr)
}

fn ifreq_ioctl(fd: RawFd, req: libc::c_ulong, ifr: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: `ifr` is a valid ifreq with the name set; the requests used
    // here (SIOCGIFMTU, SIOCGIFFLAGS, SIOCETHTOOL) read and write only it
    // and, for SIOCETHTOOL, the buffer its `ifru_data` points at, which
    // [`ethtool`] keeps alive for the call.
    cvt(unsafe { libc::ioctl(fd, req as _, ifr) })?;
    Ok(())
}

/// Interface MTU via SIOCGIFMTU (`fd`: any socket).
pub fn mtu(fd: RawFd, name: &str) -> io::Result<u32> {
    let mut ifr = ifreq(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFMTU as _, &mut ifr)?;
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
}

/// Interface flags (IFF_*) via SIOCGIFFLAGS (`fd`: any socket).
pub fn if_flags(fd: RawFd, name: &str) -> io::Result<u32> {
    let mut ifr = ifreq(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFFLAGS as _, &mut ifr)?;
    // SAFETY: SIOCGIFFLAGS filled the ifru_flags member of the union.
    Ok(u32::from(unsafe { ifr.ifr_ifru.ifru_flags } as u16))
}

/// One SIOCETHTOOL command on `name`: `cmd` is a `struct ethtool_*`
/// starting with its command word, read and written by the kernel.
pub fn ethtool<T>(fd: RawFd, name: &str, cmd: &mut T) -> io::Result<()> {
    let mut ifr = ifreq(name)?;
    ifr.ifr_ifru.ifru_data = (cmd as *mut T).cast();
    ifreq_ioctl(fd, libc::SIOCETHTOOL as _, &mut ifr)
}

/// Number of RX queues of `name`: ETHTOOL_GCHANNELS (rx + combined)
/// where the driver answers it, else the `rx-N` entries sysfs lists for
/// every device (`/sys/class/net/NAME/queues`), believed only if that
/// directory's ifindex is this namespace's (sysfs shows the namespace it
/// was mounted in).
pub fn rx_queues(fd: RawFd, name: &str) -> io::Result<u32> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    // cmd, max_rx, max_tx, max_other, max_combined, rx_count, tx_count,
    // other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    match ethtool(fd, name, &mut ch) {
        Ok(()) => Ok((ch[5].saturating_add(ch[8])).max(1)),
        Err(e) => sysfs_rx_queues(name).ok_or(e),
    }
}

fn sysfs_rx_queues(name: &str) -> Option<u32> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let idx: i32 = std::fs::read_to_string(dir.join("ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if ifindex(name).ok()? != idx {
        return None;
    }
    let names: Vec<String> = std::fs::read_dir(dir.join("queues"))
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    count_rx_queues(names.iter().map(String::as_str))
}

/// The RX queue count from a `queues/` directory listing (`rx-0`, `tx-0`,
/// …): the `rx-N` entries, which must run 0..n without a gap (anything
/// else is not a listing to trust).
pub fn count_rx_queues<'a>(entries: impl IntoIterator<Item = &'a str>) -> Option<u32> {
    let mut seen: Vec<u32> = entries
        .into_iter()
        .filter_map(|e| e.strip_prefix("rx-")?.parse().ok())
        .collect();
    seen.sort_unstable();
    let contiguous = seen.iter().enumerate().all(|(i, &q)| q as usize == i);
    (!seen.is_empty() && contiguous).then_some(seen.len() as u32)
}

/// The driver of `name` (ETHTOOL_GDRVINFO), e.g. `veth`.
pub fn driver(fd: RawFd, name: &str) -> io::Result<String> {
    const ETHTOOL_GDRVINFO: u32 = 0x03;
    /// `struct ethtool_drvinfo`: cmd, then driver[32], version[32],
    /// fw_version[32], bus_info[32], erom_version[32], reserved2[12], five
    /// u32 counts.
    const DRVINFO_BYTES: usize = 4 + 5 * 32 + 12 + 5 * 4;
    let mut info = [0u8; DRVINFO_BYTES];
    info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
    ethtool(fd, name, &mut info)?;
    let drv = &info[4..36];
    let end = drv.iter().position(|&b| b == 0).unwrap_or(drv.len());
    Ok(String::from_utf8_lossy(&drv[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_queues_are_counted_from_a_sysfs_listing() {
        let l = ["tx-1", "rx-1", "rx-0", "tx-0", "rx-3", "rx-2"];
        assert_eq!(count_rx_queues(l), Some(4));
        assert_eq!(count_rx_queues(["rx-0", "tx-0"]), Some(1));
        // A gap, no RX queue, or junk: not a listing to trust.
        assert_eq!(count_rx_queues(["rx-0", "rx-2"]), None);
        assert_eq!(count_rx_queues(["tx-0"]), None);
        assert_eq!(count_rx_queues([]), None);
        assert_eq!(count_rx_queues(["rx-x", "rx-"]), None);
        assert_eq!(count_rx_queues(["rx-0", "rx-0"]), None);
    }
}
