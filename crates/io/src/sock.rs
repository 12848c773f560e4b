//! One AF_PACKET socket bound to one interface: a TPACKET_V2 RX ring when
//! the kernel offers it, plain `recvmmsg` otherwise; TX by `sendmmsg`.
//!
//! # Principles
//! - The socket sees every frame of the interface (promiscuous membership,
//!   ETH_P_ALL) except those it sent itself (PACKET_IGNORE_OUTGOING, and the
//!   `PACKET_OUTGOING` pkttype is skipped as a second line on older kernels).
//! - A ring slot is read only once its status says user space owns it
//!   (acquire load), and handed back (release store) after its frame was
//!   copied out; no reference into the ring outlives that.
//! - A V2 slot holds one MTU-sized frame: a longer frame arrives truncated
//!   and is reported as such, never forwarded as if whole.
//! - TX never blocks: `MSG_DONTWAIT`, and the caller keeps what was not sent.

use crate::ring::{
    self, PACKET_ADD_MEMBERSHIP, PACKET_IGNORE_OUTGOING, PACKET_MR_PROMISC, PACKET_OUTGOING,
    PACKET_RX_RING, PACKET_STATISTICS, PACKET_VERSION, SOL_PACKET, TPACKET_V2,
};
use crate::sockopt::{self, ifindex, setsockopt};
use crate::sys::cvt;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// Room in a V2 slot before the frame: tpacket2_hdr (32) + sockaddr_ll (20),
/// aligned, plus the kernel's 16-byte minimum MAC allowance (net offset 80).
const V2_SLOT_HEADROOM: usize = 80;
const ETH_P_ALL: u16 = 0x0003;
/// Socket buffers: a few milliseconds of a 1 Gbit/s burst.
const SOCK_BUF_BYTES: libc::c_int = 4 << 20;
/// Frames per `sendmmsg`/`recvmmsg` call.
pub const MMSG_BATCH: usize = 64;
/// Receive buffer per frame in the recvmmsg path: the largest frame a
/// GRO/GSO-enabled interface could still deliver, so oversize frames are
/// seen whole and counted rather than truncated.
const MMSG_FRAME_BYTES: usize = 65536 + 64;

/// `struct tpacket_req`, the ring geometry of TPACKET_V1/V2.
#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: u16,
    mr_alen: u16,
    mr_address: [u8; 8],
}

/// Ring geometry: `blocks` blocks of `block_bytes`, cut into fixed-size
/// slots (one frame each, its own status word, visible as soon as the
/// kernel wrote it).
#[derive(Clone, Copy, Debug)]
pub struct RingConfig {
    pub block_bytes: u32,
    pub blocks: u32,
}

struct Ring {
    base: *mut u8,
    len: usize,
    block_bytes: usize,
    blocks: usize,
    /// Next slot to read.
    next: usize,
    /// Slot size and slots per block.
    frame_bytes: usize,
    frames_per_block: usize,
}

// SAFETY: the mapping is owned exclusively by this Ring (and its socket); the
// raw pointer is not shared, so moving the Ring to another thread is sound.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `setup_ring`,
        // unmapped once here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A received frame's metadata, handed to the caller's closure with its bytes.
pub struct RxFrame<'a> {
    pub data: &'a [u8],
    pub vlan: Option<(u16, u16)>,
    /// The frame was longer than the ring slot: `data` is only its head.
    pub truncated: bool,
    /// Whether its TCP/UDP checksum was left to TX offload.
    pub csum: ring::Csum,
}

pub struct PacketSocket {
    fd: OwnedFd,
    ring: Option<Ring>,
    /// Scratch for the recvmmsg path (allocated only there).
    scratch: Vec<u8>,
}

/// A raw AF_PACKET socket with protocol 0 (nothing is queued to it until
/// it is bound with a protocol).
pub fn packet_socket(nonblock: bool) -> io::Result<OwnedFd> {
    let mut flags = SocketFlags::CLOEXEC;
    if nonblock {
        flags |= SocketFlags::NONBLOCK;
    }
    Ok(rustix::net::socket_with(
        AddressFamily::PACKET,
        SocketType::RAW,
        flags,
        None,
    )?)
}

/// Binds a packet socket to interface `ifindex` for `protocol` (an
/// ETH_P_* value in host order; 0: receive nothing, transmit only).
pub fn bind_ll(fd: RawFd, ifindex: libc::c_int, protocol: u16) -> io::Result<()> {
    // rustix has no link-layer address type; libc's, every field named.
    let sll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `sll` is a live sockaddr_ll the kernel only reads, for its
    // exact size.
    cvt(unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

impl PacketSocket {
    /// Opens and binds a socket on `name`. `ring: None` forces recvmmsg;
    /// with `Some`, a ring that cannot be set up is reported as an error
    /// so the caller can decide to fall back.
    pub fn open(name: &str, ring: Option<RingConfig>) -> io::Result<PacketSocket> {
        let ifindex = ifindex(name)?;
        // Protocol 0: nothing is queued before the ring exists and the bind
        // below selects ETH_P_ALL on this one interface.
        let fd = packet_socket(true)?;
        let one: libc::c_int = 1;
        // The recvmmsg path learns stripped VLAN tags from auxdata.
        setsockopt(fd.as_raw_fd(), SOL_PACKET, ring::PACKET_AUXDATA, &one)?;
        // Older kernels lack it; the pkttype check covers them.
        let _ = setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_IGNORE_OUTGOING, &one);
        sockopt::set_buf(fd.as_raw_fd(), false, SOCK_BUF_BYTES);
        sockopt::set_buf(fd.as_raw_fd(), true, SOCK_BUF_BYTES);
        let ring = match ring {
            Some(cfg) => {
                let mtu = sockopt::mtu(fd.as_raw_fd(), name).unwrap_or(1500) as usize;
                Some(setup_ring(&fd, cfg, mtu)?)
            }
            None => None,
        };
        bind_ll(fd.as_raw_fd(), ifindex, ETH_P_ALL)?;
        let mreq = PacketMreq {
            mr_ifindex: ifindex,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq)?;
        let scratch = if ring.is_none() {
            vec![0u8; MMSG_BATCH * MMSG_FRAME_BYTES]
        } else {
            Vec::new()
        };
        Ok(PacketSocket { fd, ring, scratch })
    }

    /// A transmit-only socket on `name`: protocol 0, so the kernel queues
    /// nothing to it, and never in epoll unless the kernel pushed back — a
    /// socket with an epoll entry is woken (a wait-queue spinlock round) for
    /// every frame it sent once the frame is freed (sock_wfree).
    pub fn open_tx(name: &str) -> io::Result<PacketSocket> {
        let ifindex = ifindex(name)?;
        let fd = packet_socket(true)?;
        sockopt::set_buf(fd.as_raw_fd(), true, SOCK_BUF_BYTES);
        bind_ll(fd.as_raw_fd(), ifindex, 0)?;
        Ok(PacketSocket {
            fd,
            ring: None,
            scratch: Vec::new(),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn has_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Receives up to `max_frames` frames and passes each one to `f`. Returns the number of frames taken from the kernel
    /// (including own outgoing ones that were skipped).
    pub fn recv(&mut self, max_frames: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> io::Result<usize> {
        match self.ring.as_mut() {
            Some(r) => Ok(recv_ring(r, max_frames, f)),
            None => {
                // Several recvmmsg calls fill one batch; a short one means
                // the socket is empty. Bounded by max_frames / MMSG_BATCH.
                let mut total = 0usize;
                while total < max_frames {
                    let want = (max_frames - total).min(MMSG_BATCH);
                    let (taken, _) = recv_mmsg(self.fd.as_raw_fd(), &mut self.scratch, want, f)?;
                    total += taken;
                    if taken < want {
                        break;
                    }
                }
                Ok(total)
            }
        }
    }

    /// Sends frames in order; returns how many left. `Ok(n < frames.len())`
    /// means the socket would block (EAGAIN/ENOBUFS) at frame `n`.
    /// A frame the kernel rejects for itself (too large, …) is reported as
    /// `Err((n, e))`: frames before `n` were sent, frame `n` is unsendable.
    pub fn send(&self, frames: &[Vec<u8>]) -> Result<usize, (usize, io::Error)> {
        use rustix::io::Errno;
        match send_batch(&self.fd, frames) {
            Ok(n) => Ok(n),
            Err(Errno::AGAIN) | Err(Errno::NOBUFS) | Err(Errno::INTR) => Ok(0),
            Err(e) => Err((0, e.into())),
        }
    }

    /// Kernel drop counter since the last call (PACKET_STATISTICS resets it).
    pub fn take_drops(&self) -> u64 {
        // struct tpacket_stats: packets, drops.
        let mut st = [0u32; 2];
        match sockopt::getsockopt(self.fd.as_raw_fd(), SOL_PACKET, PACKET_STATISTICS, &mut st) {
            Ok(_) => u64::from(st[1]),
            Err(_) => 0,
        }
    }
}

/// One non-blocking sendmmsg(2) of up to [`MMSG_BATCH`] `frames` on a
/// bound socket (no address): how many the kernel took. The headers are
/// built on the stack, so sending allocates nothing.
fn send_batch(fd: &OwnedFd, frames: &[Vec<u8>]) -> rustix::io::Result<usize> {
    use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags};
    use std::io::IoSlice;
    let n = frames.len().min(MMSG_BATCH);
    let iov: [IoSlice<'_>; MMSG_BATCH] =
        std::array::from_fn(|i| IoSlice::new(frames.get(i).map_or(&[], Vec::as_slice)));
    // No control messages: one empty buffer per header, as rustix wants.
    let mut ctl: [SendAncillaryBuffer<'_, '_, '_>; MMSG_BATCH] =
        std::array::from_fn(|_| SendAncillaryBuffer::default());
    let mut slots = iov.iter();
    let mut msgs = ctl
        .each_mut()
        .map(|c| MMsgHdr::new(slots.next().map_or(&[], std::slice::from_ref), c));
    rustix::net::sendmmsg(fd, &mut msgs[..n], SendFlags::DONTWAIT)
}

/// V2 slot size for an interface MTU: headroom plus the largest frame
/// (MTU + Ethernet + one VLAN tag), rounded up to a power of two so slots
/// tile a block exactly.
pub fn v2_frame_bytes(mtu: usize) -> usize {
    (V2_SLOT_HEADROOM + mtu.saturating_add(18))
        .max(2048)
        .next_power_of_two()
}

fn setup_ring(fd: &OwnedFd, cfg: RingConfig, mtu: usize) -> io::Result<Ring> {
    let frame_size = v2_frame_bytes(mtu).min(1 << 20) as u32;
    let block_bytes = cfg.block_bytes.max(frame_size);
    setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_VERSION, &TPACKET_V2)?;
    let req = TpacketReq {
        tp_block_size: block_bytes,
        tp_block_nr: cfg.blocks,
        tp_frame_size: frame_size,
        tp_frame_nr: block_bytes / frame_size * cfg.blocks,
    };
    setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_RX_RING, &req)?;
    let len = block_bytes as usize * cfg.blocks as usize;
    // SAFETY: maps the ring the kernel just allocated for this socket; the
    // length is exactly block_size × block_nr as requested.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Ring {
        base: base.cast(),
        len,
        block_bytes: block_bytes as usize,
        blocks: cfg.blocks as usize,
        next: 0,
        frame_bytes: frame_size as usize,
        frames_per_block: (block_bytes / frame_size).max(1) as usize,
    })
}

fn recv_ring(r: &mut Ring, max_frames: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
    let slots = r.blocks * r.frames_per_block;
    let mut taken = 0usize;
    // At most one pass over the ring, and at most `max_frames` slots.
    for _ in 0..max_frames.min(slots) {
        let idx = r.next;
        let off =
            (idx / r.frames_per_block) * r.block_bytes + (idx % r.frames_per_block) * r.frame_bytes;
        // SAFETY: slot `idx < slots` lies inside the mapping (block
        // `idx / frames_per_block < blocks`, slot offset + frame_bytes <=
        // block_bytes); its first word is the u32 tp_status the kernel
        // updates concurrently, 16-byte aligned, hence the atomic view. The
        // mapping lives as long as `r`.
        let status = unsafe { AtomicU32::from_ptr(r.base.add(off).cast()) };
        if status.load(Ordering::Acquire) & ring::TP_STATUS_USER == 0 {
            break;
        }
        // SAFETY: the slot belongs to user space until TP_STATUS_KERNEL is
        // stored below; the kernel does not write it meanwhile, and the
        // slice is dropped before that store.
        let slot = unsafe { std::slice::from_raw_parts(r.base.add(off), r.frame_bytes) };
        if let Some(fr) = ring::parse_v2_frame(slot) {
            if fr.pkttype != PACKET_OUTGOING {
                f(RxFrame {
                    data: fr.data,
                    vlan: fr.vlan,
                    truncated: (fr.wire_len as usize) > fr.data.len(),
                    csum: ring::csum_of(fr.status),
                });
            }
        }
        status.store(0, Ordering::Release);
        r.next = (idx + 1) % slots;
        taken += 1;
    }
    taken
}

/// Control buffer per message: one `tpacket_auxdata` (20 B) behind its
/// 16-byte header, rounded up, with room to spare.
const CONTROL_WORDS: usize = 8;
// `ring::auxdata` parses the 64-bit Linux cmsghdr layout.
const _: () = assert!(std::mem::size_of::<libc::cmsghdr>() == 16);

fn control_bytes(words: &[u64; CONTROL_WORDS]) -> [u8; CONTROL_WORDS * 8] {
    let mut out = [0u8; CONTROL_WORDS * 8];
    for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_ne_bytes());
    }
    out
}

/// One recvmmsg call: (messages taken from the socket, frames passed to `f`).
fn recv_mmsg(
    fd: RawFd,
    scratch: &mut [u8],
    max_frames: usize,
    f: &mut dyn FnMut(RxFrame<'_>),
) -> io::Result<(usize, usize)> {
    let n = max_frames.clamp(1, MMSG_BATCH);
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MMSG_BATCH];
    // SAFETY: an all-zero array of mmsghdr is a valid value (null pointers,
    // zero lengths); its fields differ by libc (musl pads them), hence not
    // spelled out.
    let mut msgs: [libc::mmsghdr; MMSG_BATCH] = unsafe { std::mem::zeroed() };
    let mut addrs = [libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }; MMSG_BATCH];
    // u64 elements keep each control buffer aligned for struct cmsghdr.
    let mut control = [[0u64; CONTROL_WORDS]; MMSG_BATCH];
    let mut chunks = scratch.chunks_exact_mut(MMSG_FRAME_BYTES);
    for i in 0..n {
        let Some(c) = chunks.next() else { break };
        iov[i].iov_base = c.as_mut_ptr().cast();
        iov[i].iov_len = c.len();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_ll).cast();
        msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msgs[i].msg_hdr.msg_control = control[i].as_mut_ptr().cast();
        msgs[i].msg_hdr.msg_controllen = CONTROL_WORDS * 8;
    }
    // SAFETY: each message points at its own scratch chunk, address slot and
    // control buffer, all live and exclusively borrowed for the call.
    let r = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok((0, 0)),
            _ => Err(e),
        };
    }
    let mut got = 0;
    for (i, m) in msgs.iter().enumerate().take(r as usize) {
        if addrs[i].sll_pkttype == PACKET_OUTGOING {
            continue;
        }
        let len = (m.msg_len as usize).min(MMSG_FRAME_BYTES);
        let start = i * MMSG_FRAME_BYTES;
        let clen = m.msg_hdr.msg_controllen.min(CONTROL_WORDS * 8);
        let (status, vlan) =
            ring::auxdata(&control_bytes(&control[i])[..clen]).unwrap_or((0, None));
        if let Some(data) = scratch.get(start..start + len) {
            got += 1;
            f(RxFrame {
                data,
                vlan,
                truncated: false,
                csum: ring::csum_of(status),
            });
        }
    }
    Ok((r as usize, got))
}
