//! The XDP side of AF_XDP: the redirect program, its XSKMAP and the BPF
//! link that attaches it (see `xdp/mod.rs` for the principles).

use crate::sys::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// bpf(2) commands, types and helpers (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_CREATE: libc::c_long = 28;
#[cfg(test)]
const BPF_LINK_DETACH: libc::c_long = 34;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One BPF instruction (`struct bpf_insn`): opcode, dst/src registers in
/// one byte (dst in the low nibble), offset, immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }

    /// The eight bytes the kernel reads (little- or big-endian host order).
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        // On a big-endian host the bitfield order flips: dst in the high nibble.
        b[1] = if cfg!(target_endian = "little") {
            self.regs
        } else {
            self.regs.rotate_left(4)
        };
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }
}

/// The redirect program for an XSKMAP descriptor `map_fd`.
pub fn redirect_program(map_fd: i32) -> [Insn; 6] {
    // BPF_LDX | BPF_MEM | BPF_W: r2 = *(u32 *)(r1 + 16)
    const LDX_W: u8 = 0x61;
    // BPF_LD | BPF_IMM | BPF_DW (two slots): r1 = map (pseudo fd)
    const LD_IMM64: u8 = 0x18;
    // BPF_ALU64 | BPF_MOV | BPF_K: r3 = XDP_PASS
    const MOV64_K: u8 = 0xb7;
    // BPF_JMP | BPF_CALL, BPF_JMP | BPF_EXIT
    const CALL: u8 = 0x85;
    const EXIT: u8 = 0x95;
    [
        Insn::new(LDX_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        Insn::new(LD_IMM64, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(MOV64_K, 3, 0, 0, XDP_PASS),
        Insn::new(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        Insn::new(EXIT, 0, 0, 0, 0),
    ]
}

/// Which XDP attach mode took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    Native,
    Generic,
}

impl XdpMode {
    /// As `Bridge::method` and the logs spell it.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

fn bpf(cmd: libc::c_long, attr: &mut [u64]) -> io::Result<libc::c_int> {
    let len = std::mem::size_of_val(attr);
    // SAFETY: `attr` is a writable, 8-byte aligned buffer of `len` bytes laid
    // out as the command's part of `union bpf_attr`; pointers inside it point
    // to live buffers of the caller for the duration of the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), len) };
    cvt(r as libc::c_int)
}

fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` comes from a successful syscall and has no other owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `union bpf_attr` as u64 words; fields are packed into them by offset.
fn put_u32(attr: &mut [u64], off: usize, v: u32) {
    let w = &mut attr[off / 8];
    let mut b = w.to_ne_bytes();
    b[off % 8..off % 8 + 4].copy_from_slice(&v.to_ne_bytes());
    *w = u64::from_ne_bytes(b);
}

/// An XSKMAP with one slot per RX queue: key = `rx_queue_index`.
pub(crate) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    // map_type, key_size, value_size, max_entries, map_flags …
    let mut attr = [0u64; 8];
    put_u32(&mut attr, 0, BPF_MAP_TYPE_XSKMAP);
    put_u32(&mut attr, 4, 4);
    put_u32(&mut attr, 8, 4);
    put_u32(&mut attr, 12, entries.max(1));
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

pub(crate) fn load_program(map: &OwnedFd) -> io::Result<OwnedFd> {
    let insns = redirect_program(map.as_raw_fd());
    let bytes: Vec<u8> = insns.iter().flat_map(|i| i.to_bytes()).collect();
    let license = b"BSD\0";
    let mut log = vec![0u8; 4096];
    // prog_type @0, insn_cnt @4, insns @8, license @16, log_level @24,
    // log_size @28, log_buf @32, kern_version @40, prog_flags @44,
    // prog_name @48, prog_ifindex @64, expected_attach_type @68.
    let mut attr = [0u64; 9];
    let load = |attr: &mut [u64; 9], log: &mut Vec<u8>, level: u32| {
        *attr = [0; 9];
        put_u32(attr, 0, BPF_PROG_TYPE_XDP);
        put_u32(attr, 4, insns.len() as u32);
        attr[1] = bytes.as_ptr() as u64;
        attr[2] = license.as_ptr() as u64;
        if level > 0 {
            put_u32(attr, 24, level);
            put_u32(attr, 28, log.len() as u32);
            attr[4] = log.as_mut_ptr() as u64;
        }
        let name = *b"sluice_xsk\0\0\0\0\0\0";
        attr[6] = u64::from_ne_bytes(name[..8].try_into().unwrap_or([0; 8]));
        attr[7] = u64::from_ne_bytes(name[8..].try_into().unwrap_or([0; 8]));
        put_u32(attr, 68, BPF_XDP);
        bpf(BPF_PROG_LOAD, attr)
    };
    match load(&mut attr, &mut log, 0) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            // Again with the verifier's log, for the error message.
            let _ = load(&mut attr, &mut log, 1);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                e.kind(),
                format!("BPF_PROG_LOAD: {e}; verifier: {}", text.trim()),
            ))
        }
    }
}

fn attach(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    // prog_fd @0, target_ifindex @4, attach_type @8, flags @12.
    let mut attr = [0u64; 8];
    put_u32(&mut attr, 0, prog.as_raw_fd() as u32);
    put_u32(&mut attr, 4, ifindex);
    put_u32(&mut attr, 8, BPF_XDP);
    put_u32(&mut attr, 12, flags);
    bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}

pub(super) fn map_insert(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    // map_fd @0, key @8, value @16, flags @24.
    let mut attr = [0u64; 4];
    put_u32(&mut attr, 0, map.as_raw_fd() as u32);
    attr[1] = &key as *const u32 as u64;
    attr[2] = &value as *const u32 as u64;
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr)?;
    Ok(())
}

/// Another XDP program holds the interface: a link attach over any
/// program answers EBUSY, one in the other mode EEXIST ("native and generic
/// XDP can't be active at the same time"). That is a refusal, never a
/// reason to fall back: falling back would run two bridges on one link.
fn busy(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST))
}

/// Attaches `prog` to `ifindex` in the first mode of `order` that the
/// driver takes; the link is the attachment. An interface that already has
/// an XDP program is `ErrorKind::ResourceBusy` at once.
pub fn attach_first(
    prog: &OwnedFd,
    ifindex: u32,
    order: &[XdpMode],
) -> io::Result<(OwnedFd, XdpMode)> {
    let mut refused = Vec::new();
    // At most two attempts.
    for &m in order {
        let flags = match m {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        };
        match attach(prog, ifindex, flags) {
            Ok(l) => return Ok((l, m)),
            Err(e) if busy(&e) => {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "another XDP program is attached ({} mode attach: {e}); \
                         `bpftool net show` names it",
                        m.name()
                    ),
                ))
            }
            Err(e) => refused.push((m, e)),
        }
    }
    let kind = refused
        .last()
        .map_or(io::ErrorKind::Unsupported, |(_, e)| e.kind());
    let why: Vec<String> = refused
        .iter()
        .map(|(m, e)| format!("{} {e}", m.name()))
        .collect();
    Err(io::Error::new(
        kind,
        format!("attach XDP: {}", why.join(", ")),
    ))
}

/// The ifindex a BPF link is attached to, from `BPF_OBJ_GET_INFO_BY_FD`:
/// 0 once the link was detached (`bpftool link detach`, `BPF_LINK_DETACH`),
/// which leaves the descriptor valid but the program off the interface.
/// Needs no privilege beyond holding the descriptor.
pub fn link_ifindex(link: &OwnedFd) -> io::Result<u32> {
    // struct bpf_link_info: type @0, id @4, prog_id @8, then the per-type
    // union at @16, whose `xdp.ifindex` is its first u32. The kernel fills
    // at most `info_len` bytes.
    let mut info = [0u64; 8];
    // bpf_fd @0, info_len @4, info @8.
    let mut attr = [0u64; 2];
    put_u32(&mut attr, 0, link.as_raw_fd() as u32);
    put_u32(&mut attr, 4, std::mem::size_of_val(&info) as u32);
    attr[1] = info.as_mut_ptr() as u64;
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info[2].to_ne_bytes()[..4]
        .try_into()
        .map(u32::from_ne_bytes)
        .unwrap_or(0))
}

/// Detaches a link as `bpftool link detach` does (tests play the intruder).
#[cfg(test)]
pub fn link_detach(link: &OwnedFd) -> io::Result<()> {
    // link_fd @0.
    let mut attr = [0u64; 1];
    put_u32(&mut attr, 0, link.as_raw_fd() as u32);
    bpf(BPF_LINK_DETACH, &mut attr).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encodes_as_the_kernel_reads_it() {
        let p = redirect_program(7);
        let bytes: Vec<u8> = p.iter().flat_map(|i| i.to_bytes()).collect();
        if cfg!(target_endian = "little") {
            let want: [u8; 48] = [
                0x61, 0x12, 16, 0, 0, 0, 0, 0, // r2 = *(u32 *)(r1 + 16)
                0x18, 0x11, 0, 0, 7, 0, 0, 0, // r1 = map fd 7 (pseudo)
                0, 0, 0, 0, 0, 0, 0, 0, // upper half of the 64-bit immediate
                0xb7, 0x03, 0, 0, 2, 0, 0, 0, // r3 = XDP_PASS
                0x85, 0x00, 0, 0, 51, 0, 0, 0, // call bpf_redirect_map
                0x95, 0, 0, 0, 0, 0, 0, 0, // exit
            ];
            assert_eq!(bytes, want);
        }
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn attr_words_take_fields_at_byte_offsets() {
        let mut a = [0u64; 2];
        put_u32(&mut a, 4, 0xdead_beef);
        put_u32(&mut a, 8, 1);
        assert_eq!(a[0].to_ne_bytes()[4..8], 0xdead_beefu32.to_ne_bytes());
        assert_eq!(a[1].to_ne_bytes()[..4], 1u32.to_ne_bytes());
    }
}
