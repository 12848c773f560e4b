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

/// The index of interface `name` in this network namespace (SIOCGIFINDEX
/// on a throw-away socket, as if_nametoindex(3) does).
pub fn ifindex(name: &str) -> io::Result<libc::c_int> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let sock = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::netdevice::name_to_index(&sock, name) {
        Ok(i) if i > 0 => Ok(i as libc::c_int),
        _ => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name}"),
        )),
    }
}

/// `struct ifreq`: the name, then a union read here as plain words (the
/// kernel writes an int, a short or reads a pointer at its start), so no
/// union access needs `unsafe`.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    value: [usize; IFREQ_VALUE_WORDS],
}

const IFREQ_VALUE_WORDS: usize =
    (std::mem::size_of::<libc::ifreq>() - libc::IFNAMSIZ) / std::mem::size_of::<usize>();
const _: () = assert!(std::mem::size_of::<IfReq>() == std::mem::size_of::<libc::ifreq>());
const _: () = assert!(std::mem::align_of::<IfReq>() == std::mem::align_of::<libc::ifreq>());

impl IfReq {
    fn new(name: &str) -> io::Result<IfReq> {
        let b = name.as_bytes();
        let mut ifr = IfReq {
            name: [0; libc::IFNAMSIZ],
            value: [0; IFREQ_VALUE_WORDS],
        };
        if b.len() >= ifr.name.len() || b.contains(&0) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        ifr.name[..b.len()].copy_from_slice(b);
        Ok(ifr)
    }

    /// The union's first bytes, as the kernel left them.
    fn head<const N: usize>(&self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.value[0].to_ne_bytes()[..N]);
        out
    }
}

fn ifreq_ioctl(fd: RawFd, req: libc::c_ulong, ifr: &mut IfReq) -> io::Result<()> {
    // SAFETY: `ifr` is laid out as a `struct ifreq` (same size and
    // alignment, asserted above) with the name set; the requests used here
    // (SIOCGIFMTU, SIOCGIFFLAGS, SIOCETHTOOL) read and write only it and,
    // for SIOCETHTOOL, the buffer its first word points at, which
    // [`ethtool`] keeps borrowed for the call.
    cvt(unsafe { libc::ioctl(fd, req as _, ifr as *mut IfReq) })?;
    Ok(())
}

/// Interface MTU via SIOCGIFMTU (`fd`: any socket).
pub fn mtu(fd: RawFd, name: &str) -> io::Result<u32> {
    let mut ifr = IfReq::new(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFMTU as _, &mut ifr)?;
    Ok(i32::from_ne_bytes(ifr.head()) as u32)
}

/// Interface flags (IFF_*) via SIOCGIFFLAGS (`fd`: any socket).
pub fn if_flags(fd: RawFd, name: &str) -> io::Result<u32> {
    let mut ifr = IfReq::new(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFFLAGS as _, &mut ifr)?;
    Ok(u32::from(u16::from_ne_bytes(ifr.head())))
}

/// One SIOCETHTOOL command on `name`: `cmd` is a `struct ethtool_*`
/// starting with its command word, read and written by the kernel.
pub fn ethtool<T>(fd: RawFd, name: &str, cmd: &mut T) -> io::Result<()> {
    let mut ifr = IfReq::new(name)?;
    // The kernel follows this address: exposed, and `cmd` stays borrowed.
    ifr.value[0] = (cmd as *mut T).expose_provenance();
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

    fn any_socket() -> std::os::fd::OwnedFd {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let t = SocketType::DGRAM;
        rustix::net::socket_with(AddressFamily::UNIX, t, SocketFlags::CLOEXEC, None).unwrap()
    }

    #[test]
    fn loopback_is_read_through_ifreq() {
        use std::os::fd::AsRawFd;
        let s = any_socket();
        // Loopback is interface 1 in every namespace.
        assert_eq!(ifindex("lo").unwrap(), 1);
        let flags = if_flags(s.as_raw_fd(), "lo").unwrap();
        assert_ne!(flags & libc::IFF_LOOPBACK as u32, 0, "{flags:#x}");
        let mtu = mtu(s.as_raw_fd(), "lo").unwrap();
        if let Ok(sys) = std::fs::read_to_string("/sys/class/net/lo/mtu") {
            assert_eq!(mtu.to_string(), sys.trim());
        }
        assert!(mtu >= 1280, "{mtu}");
    }

    #[test]
    fn unknown_or_malformed_interface_names_are_errors() {
        use std::os::fd::AsRawFd;
        let e = ifindex("no-such-if9").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("no-such-if9"), "{e}");
        assert!(ifindex("a\0b").is_err());
        assert!(ifindex("sixteen-bytes-xx").is_err());
        let s = any_socket();
        let e = mtu(s.as_raw_fd(), "sixteen-bytes-xx").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

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
