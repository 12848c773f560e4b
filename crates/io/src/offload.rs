//! Turning off the offloads that make the kernel build super-packets.
//!
//! # Principles
//! The shaper must account wire-size packets: GRO/LRO would hand us 64 KiB
//! aggregates, GSO/TSO would let a sender's aggregate reach us unsplit, and
//! RX VLAN offload would strip tags from the frame bytes. Each feature is
//! switched off with the legacy SIOCETHTOOL commands (stable kernel ABI, no
//! string-set lookup needed); if the ioctl is refused, `ethtool -K` is tried.
//! The outcome of every feature is reported, never assumed.

use crate::sockopt;
use std::io;
use std::os::fd::RawFd;

const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_SFLAGS: u32 = 0x26;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETH_FLAG_RXVLAN: u32 = 1 << 8;
const ETH_FLAG_LRO: u32 = 1 << 15;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Outcome for one feature of one interface.
#[derive(Clone, Debug)]
pub struct OffloadResult {
    pub iface: String,
    /// ethtool's feature name (`gro`, `gso`, `tso`, `lro`, `rxvlan`).
    pub feature: &'static str,
    /// `Ok(method)`: off, and how; `Err(msg)`: still possibly on.
    pub outcome: Result<&'static str, String>,
}

fn ethtool(fd: RawFd, iface: &str, v: &mut EthtoolValue) -> io::Result<()> {
    sockopt::ethtool(fd, iface, v)
}

fn set_flag_off(fd: RawFd, iface: &str, flag: u32) -> io::Result<()> {
    let mut v = EthtoolValue {
        cmd: ETHTOOL_GFLAGS,
        data: 0,
    };
    ethtool(fd, iface, &mut v)?;
    if v.data & flag == 0 {
        return Ok(());
    }
    let mut s = EthtoolValue {
        cmd: ETHTOOL_SFLAGS,
        data: v.data & !flag,
    };
    ethtool(fd, iface, &mut s)
}

fn ethtool_cmd(iface: &str, feature: &str) -> Result<(), String> {
    match std::process::Command::new("ethtool")
        .args(["-K", iface, feature, "off"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(format!("ethtool: {e}")),
    }
}

/// Switches GRO, GSO, TSO, LRO and RX VLAN offload off on `iface`, using
/// `fd` (any socket) for the ioctls.
pub fn disable(fd: RawFd, iface: &str) -> Vec<OffloadResult> {
    let mut out = Vec::with_capacity(5);
    let plain = [
        ("gro", ETHTOOL_SGRO),
        ("gso", ETHTOOL_SGSO),
        ("tso", ETHTOOL_STSO),
    ];
    for (feature, cmd) in plain {
        let mut v = EthtoolValue { cmd, data: 0 };
        let r = ethtool(fd, iface, &mut v);
        out.push(finish(iface, feature, r));
    }
    for (feature, flag) in [("lro", ETH_FLAG_LRO), ("rxvlan", ETH_FLAG_RXVLAN)] {
        let r = set_flag_off(fd, iface, flag);
        out.push(finish(iface, feature, r));
    }
    out
}

fn finish(iface: &str, feature: &'static str, r: io::Result<()>) -> OffloadResult {
    let outcome = match r {
        Ok(()) => Ok("ioctl"),
        // Not offered by the driver: it cannot be on.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok("not supported"),
        Err(e) => match ethtool_cmd(iface, feature) {
            Ok(()) => Ok("ethtool -K"),
            Err(msg) => Err(format!("ioctl: {e}; {msg}")),
        },
    };
    OffloadResult {
        iface: iface.to_string(),
        feature,
        outcome,
    }
}
