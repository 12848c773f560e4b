//! AF_XDP: XDP sockets on queue 0 of an interface, fed by a hand-assembled
//! XDP program.
//!
//! # Principles
//! - The XDP program is six BPF instructions:
//!   `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`. Every
//!   frame of queue 0 (ARP, ND, non-IP included) goes to the socket; a queue
//!   without a socket passes to the kernel stack, which is why an interface
//!   with more than one RX queue is refused (the caller falls back).
//! - The program is attached through a BPF link (`BPF_LINK_CREATE`): the
//!   link's descriptor is the attachment, so closing it (or the process
//!   dying) detaches the program. Native (driver) mode is tried first, then
//!   generic (skb) mode — the other way round on veth, whose native mode
//!   copies every frame once more.
//! - One UMEM per interface, `FRAMES` chunks: `RX_FRAMES` are handed to
//!   the fill ring for reception (as many slots as the TPACKET_V2 ring
//!   has, to absorb the same bursts while the loop is descheduled), the
//!   other `TX_FRAMES` are a free list for transmission. A received frame
//!   is copied out by the caller's closure and its chunk goes straight back
//!   to the fill ring, so the fill ring never runs dry because of us; a
//!   transmit chunk returns to the free list through the completion ring.
//! - Ring indices are free-running `u32`s shared with the kernel: the
//!   producer publishes with a release store after writing descriptors, the
//!   consumer reads the other side's index with an acquire load before
//!   reading descriptors ([`RingIdx`] holds the arithmetic, unit-tested).
//! - Two sockets per interface on queue 0: the receiving one (in the map
//!   and in epoll) owns the UMEM, fill and completion rings; a
//!   transmit-only one shares its UMEM and stays out of epoll.
//! - TX never blocks and never drops: a frame for which there is no free
//!   chunk or ring slot is not taken (the caller keeps it); descriptors
//!   the kernel has not consumed yet are kicked again on the next call
//!   ([`XdpSocket::service`]).
//! - Zero-copy mode needs no other code: the kernel picks it where the
//!   driver offers it, and completions, asynchronous there, are reclaimed
//!   on every send. Only copy mode (veth) has been run.

use crate::sock::RxFrame;
use crate::sys::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
/// Frames one `sendto` kick may transmit in copy mode (Linux ≥ 6.17;
/// older kernels refuse the option and keep their 32).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_SHARED_UMEM: u16 = 1;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;
/// Room the kernel keeps in front of a received frame in a chunk
/// (XDP_PACKET_HEADROOM); the UMEM's own headroom is 0.
const XDP_PACKET_HEADROOM: usize = 256;

/// UMEM chunks per socket: half for RX (all in the fill ring), half for TX.
const RX_FRAMES: u32 = 8192;
const TX_FRAMES: u32 = 2048;
const FRAMES: u32 = RX_FRAMES + TX_FRAMES;
/// Send buffer of the transmit socket (copy mode charges each frame's skb to it).
const TX_SNDBUF: libc::c_int = 8 << 20;
/// Copy-mode kicks per `send`/`service` call at most.
const KICKS_MAX: usize = 16;

// bpf(2) commands, types and helpers (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
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

/// Free-running ring indices as the kernel keeps them (`u32`, wrapping;
/// the slot is `index & (size - 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingIdx {
    pub size: u32,
}

impl RingIdx {
    /// Entries a producer at `prod` may still write when the consumer is at `cons`.
    pub fn free(self, prod: u32, cons: u32) -> u32 {
        self.size.saturating_sub(prod.wrapping_sub(cons))
    }

    /// Entries a consumer at `cons` may read when the producer is at `prod`.
    pub fn ready(self, prod: u32, cons: u32) -> u32 {
        prod.wrapping_sub(cons).min(self.size)
    }

    pub fn slot(self, idx: u32) -> usize {
        (idx & (self.size - 1)) as usize
    }
}

/// One mmapped ring: producer and consumer words, flags, descriptors.
struct Ring {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut u8,
    idx: RingIdx,
    /// Our side's index (the producer for fill/TX, the consumer for RX/completion).
    local: u32,
    /// The last value read of the kernel's index.
    cached: u32,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are exactly the mapping made in `map_ring`,
        // unmapped once here.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

impl Ring {
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the producer word lies inside the mapping at the offset the
        // kernel gave (u32-aligned), lives as long as `self`, and is shared
        // with the kernel, hence the atomic view.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn need_wakeup(&self) -> bool {
        // SAFETY: as for `producer`; the kernel sets the flags word.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: slots free to write (refreshing the consumer index if needed).
    fn prod_free(&mut self, want: u32) -> u32 {
        let free = self.idx.free(self.local, self.cached);
        if free >= want {
            return free;
        }
        self.cached = self.consumer().load(Ordering::Acquire);
        self.idx.free(self.local, self.cached)
    }

    fn prod_submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }

    /// Consumer side: entries ready to read.
    fn cons_ready(&mut self) -> u32 {
        let ready = self.idx.ready(self.cached, self.local);
        if ready > 0 {
            return ready;
        }
        self.cached = self.producer().load(Ordering::Acquire);
        self.idx.ready(self.cached, self.local)
    }

    fn cons_release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }

    /// Entries the kernel has not consumed yet (producer rings).
    fn unconsumed(&mut self) -> u32 {
        self.cached = self.consumer().load(Ordering::Acquire);
        self.local.wrapping_sub(self.cached)
    }

    /// Address descriptor (fill/completion rings: one u64 each).
    fn addr_ptr(&self, idx: u32) -> *mut u64 {
        // SAFETY: `slot < size` and the mapping holds `size` u64 descriptors
        // from `descs` (the length was computed from them in `map_ring`).
        unsafe { self.descs.cast::<u64>().add(self.idx.slot(idx)) }
    }

    /// Packet descriptor (RX/TX rings: struct xdp_desc each).
    fn desc_ptr(&self, idx: u32) -> *mut libc::xdp_desc {
        // SAFETY: as for `addr_ptr`, with `size` xdp_desc descriptors.
        unsafe { self.descs.cast::<libc::xdp_desc>().add(self.idx.slot(idx)) }
    }
}

// SAFETY: the rings and the UMEM are owned exclusively by their XdpSocket;
// no pointer into them is shared, so moving the socket to another thread
// (the I/O thread) is sound.
unsafe impl Send for XdpSocket {}

/// Anonymous memory registered as the UMEM.
struct Umem {
    base: *mut u8,
    len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `XdpSocket::open`, unmapped once; the
        // socket that registered it is closed first (field order).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
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

/// An AF_XDP socket on queue 0 of one interface, with its program attached.
pub struct XdpSocket {
    // Field order is drop order: sockets first (unregister the UMEM and
    // leave the map), then the link (detaches the program), then memory.
    /// Transmit-only socket sharing the UMEM (XDP_SHARED_UMEM, same queue),
    /// kept out of epoll: every transmitted frame's skb, when freed, wakes
    /// the wait queue of the socket that sent it (sock_wfree), which costs
    /// a spinlock round per frame if that socket sits in epoll.
    tx_fd: OwnedFd,
    /// The receiving socket: RX, fill and completion rings; in the map and in epoll.
    fd: OwnedFd,
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    umem: Umem,
    chunk: usize,
    /// TX chunks not in flight.
    tx_free: Vec<u64>,
    mode: XdpMode,
    zerocopy: bool,
    /// Kernel drop counters at the last `take_drops`.
    drops_seen: u64,
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

fn create_xskmap() -> io::Result<OwnedFd> {
    // map_type, key_size, value_size, max_entries, map_flags …
    let mut attr = [0u64; 8];
    put_u32(&mut attr, 0, BPF_MAP_TYPE_XSKMAP);
    put_u32(&mut attr, 4, 4);
    put_u32(&mut attr, 8, 4);
    put_u32(&mut attr, 12, 1);
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

fn load_program(map: &OwnedFd) -> io::Result<OwnedFd> {
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

fn map_insert(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    // map_fd @0, key @8, value @16, flags @24.
    let mut attr = [0u64; 4];
    put_u32(&mut attr, 0, map.as_raw_fd() as u32);
    attr[1] = &key as *const u32 as u64;
    attr[2] = &value as *const u32 as u64;
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr)?;
    Ok(())
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of the given size for the call.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// getsockopt into a `T`; returns the length the kernel wrote.
fn getsockopt<T>(fd: RawFd, name: libc::c_int, val: &mut T) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is writable for `len` bytes; the kernel writes at most that.
    cvt(unsafe { libc::getsockopt(fd, SOL_XDP, name, (val as *mut T).cast(), &mut len) })?;
    Ok(len as usize)
}

fn map_ring(
    fd: RawFd,
    off: &libc::xdp_ring_offset,
    pgoff: libc::off_t,
    size: u32,
    desc_bytes: usize,
) -> io::Result<Ring> {
    let map_len = off.desc as usize + size as usize * desc_bytes;
    // SAFETY: maps the ring the kernel allocated for this socket at its
    // documented page offset; the length covers the descriptors it sized.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let map = map.cast::<u8>();
    // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this very mapping
    // and lie inside it (the kernel places the header words before `desc`).
    let (producer, consumer, flags, descs) = unsafe {
        (
            map.add(off.producer as usize).cast::<AtomicU32>(),
            map.add(off.consumer as usize).cast::<AtomicU32>(),
            map.add(off.flags as usize).cast::<AtomicU32>(),
            map.add(off.desc as usize),
        )
    };
    let mut r = Ring {
        map,
        map_len,
        producer,
        consumer,
        flags,
        descs,
        idx: RingIdx { size },
        local: 0,
        cached: 0,
    };
    // Start from wherever the kernel's indices are (0 on a fresh socket).
    let (p, c) = (
        r.producer().load(Ordering::Acquire),
        r.consumer().load(Ordering::Acquire),
    );
    match pgoff {
        XDP_PGOFF_RX_RING | XDP_UMEM_PGOFF_COMPLETION_RING => {
            r.local = c;
            r.cached = p;
        }
        _ => {
            r.local = p;
            r.cached = c;
        }
    }
    Ok(r)
}

/// The transmit-only socket: a TX ring on the UMEM of `owner` (same
/// interface and queue, so it shares its fill and completion rings).
fn open_tx(owner: RawFd, ifindex: u32) -> io::Result<(OwnedFd, Ring)> {
    // SAFETY: plain syscall without pointers.
    let fd = owned(cvt(unsafe {
        libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
    })?);
    let raw = fd.as_raw_fd();
    setsockopt(raw, XDP_TX_RING, &TX_FRAMES)?;
    // Copy mode allocates an skb per frame against the socket's send
    // buffer: with the default (~200 KiB) a kick stops (EAGAIN) after ~90
    // frames of 1.5 KB still in flight. Room for the whole TX ring.
    let sndbuf = TX_SNDBUF;
    // SAFETY: `sndbuf` is a live c_int for the duration of each call.
    let forced = cvt(unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            (&sndbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    });
    if forced.is_err() {
        // SAFETY: as above.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&sndbuf as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    // Larger kicks where the kernel allows (≥ 6.17); a refusal is fine.
    let _ = setsockopt(raw, XDP_MAX_TX_SKB_BUDGET, &TX_FRAMES);
    // SAFETY: all-zero is a valid xdp_mmap_offsets.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    getsockopt(raw, XDP_MMAP_OFFSETS, &mut off)?;
    let d = std::mem::size_of::<libc::xdp_desc>();
    let ring = map_ring(raw, &off.tx, XDP_PGOFF_TX_RING, TX_FRAMES, d)?;
    // SAFETY: all-zero is a valid sockaddr_xdp; fields set below.
    let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
    sxdp.sxdp_family = libc::AF_XDP as u16;
    sxdp.sxdp_ifindex = ifindex;
    sxdp.sxdp_queue_id = 0;
    // A socket sharing a UMEM takes no other flag: need-wakeup and
    // copy/zero-copy come from the owner.
    sxdp.sxdp_flags = XDP_SHARED_UMEM;
    sxdp.sxdp_shared_umem_fd = owner as u32;
    // SAFETY: `sxdp` is a valid sockaddr_xdp and the length matches it.
    cvt(unsafe {
        libc::bind(
            raw,
            (&sxdp as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })?;
    Ok((fd, ring))
}

/// Number of RX queues of `name` (ETHTOOL_GCHANNELS: rx + combined), if
/// the driver says.
pub fn rx_queues(fd: RawFd, name: &str) -> io::Result<u32> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    // cmd, max_rx, max_tx, max_other, max_combined, rx_count, tx_count,
    // other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    // SAFETY: an all-zero ifreq is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    crate::sock::copy_name(&mut ifr, name)?;
    ifr.ifr_ifru.ifru_data = ch.as_mut_ptr().cast();
    // SAFETY: `ifr` names the interface and points at `ch`, a live
    // struct ethtool_channels the kernel fills.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as _, &mut ifr) })?;
    Ok((ch[5] + ch[8]).max(1))
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
    // SAFETY: an all-zero ifreq is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    crate::sock::copy_name(&mut ifr, name)?;
    ifr.ifr_ifru.ifru_data = info.as_mut_ptr().cast();
    // SAFETY: `ifr` names the interface and points at `info`, a live buffer
    // of the size of struct ethtool_drvinfo, which the kernel fills.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as _, &mut ifr) })?;
    let drv = &info[4..36];
    let end = drv.iter().position(|&b| b == 0).unwrap_or(drv.len());
    Ok(String::from_utf8_lossy(&drv[..end]).into_owned())
}

/// Chunk size for an interface MTU: the frame (MTU + Ethernet + one VLAN
/// tag) after the kernel's receive headroom, in 2 or 4 KiB.
pub fn chunk_bytes(mtu: usize) -> Option<usize> {
    let need = XDP_PACKET_HEADROOM + mtu + 18;
    [2048, 4096].into_iter().find(|&c| need <= c)
}

impl XdpSocket {
    /// Loads and attaches the program to `name`, creates the socket on
    /// queue 0 and puts it into the map. `ioctl_fd`: any socket for ethtool
    /// queries (an AF_XDP socket does not take them). `generic_only`
    /// skips the native attempt.
    pub fn open(
        name: &str,
        mtu: usize,
        ioctl_fd: RawFd,
        generic_only: bool,
    ) -> io::Result<XdpSocket> {
        let ifindex = crate::sock::ifindex(name)? as u32;
        let queues = rx_queues(ioctl_fd, name)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot count the RX queues: {e}")))?;
        if queues != 1 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{queues} RX queues (sluice binds queue 0 only; `ethtool -L {name} combined 1` makes one)"),
            ));
        }
        let chunk = chunk_bytes(mtu).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("MTU {mtu} does not fit a 4 KiB UMEM chunk"),
            )
        })?;
        // SAFETY: plain syscall without pointers.
        let fd = owned(cvt(unsafe {
            libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
        })?);
        let raw = fd.as_raw_fd();
        let len = chunk * FRAMES as usize;
        // SAFETY: a fresh private anonymous mapping; no pointer is involved.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let umem = Umem {
            base: base.cast(),
            len,
        };
        let reg = libc::xdp_umem_reg {
            addr: umem.base as u64,
            len: len as u64,
            chunk_size: chunk as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, XDP_UMEM_REG, &reg)?;
        // Ring sizes (powers of two): each ring can hold every chunk of its side.
        for (opt, size) in [
            (XDP_UMEM_FILL_RING, RX_FRAMES),
            (XDP_UMEM_COMPLETION_RING, TX_FRAMES),
            (XDP_RX_RING, RX_FRAMES),
        ] {
            setsockopt(raw, opt, &size)?;
        }
        // SAFETY: all-zero is a valid xdp_mmap_offsets.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let got = getsockopt(raw, XDP_MMAP_OFFSETS, &mut off)?;
        if got != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "kernel without ring flags (XDP_MMAP_OFFSETS v1)",
            ));
        }
        let d = std::mem::size_of::<libc::xdp_desc>();
        let rx = map_ring(raw, &off.rx, XDP_PGOFF_RX_RING, RX_FRAMES, d)?;
        let mut fill = map_ring(raw, &off.fr, XDP_UMEM_PGOFF_FILL_RING, RX_FRAMES, 8)?;
        let comp = map_ring(raw, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, TX_FRAMES, 8)?;
        // The first half of the chunks to the fill ring, before bind.
        let n = fill.prod_free(RX_FRAMES).min(RX_FRAMES);
        for i in 0..n {
            // SAFETY: `addr_ptr` points at a fill-ring slot we own until the
            // producer index is published.
            unsafe {
                fill.addr_ptr(fill.local.wrapping_add(i))
                    .write((i as usize * chunk) as u64)
            };
        }
        fill.prod_submit(n);
        let tx_free = (RX_FRAMES..FRAMES)
            .rev()
            .map(|i| (i as usize * chunk) as u64)
            .collect();

        let map = create_xskmap().map_err(|e| io::Error::new(e.kind(), format!("XSKMAP: {e}")))?;
        let prog = load_program(&map)?;
        let order: &[XdpMode] = if generic_only {
            &[XdpMode::Generic]
        } else if driver(ioctl_fd, name).is_ok_and(|d| d == "veth") {
            // veth's native XDP copies each frame into a page-pool page
            // before the socket copies it again; generic mode runs on the
            // skb the peer sent (measured: −11 % CPU per 1518 B frame).
            &[XdpMode::Generic, XdpMode::Native]
        } else {
            &[XdpMode::Native, XdpMode::Generic]
        };
        let mut refused = Vec::new();
        let mut attached = None;
        // At most two attempts.
        for &m in order {
            let flags = match m {
                XdpMode::Native => XDP_FLAGS_DRV_MODE,
                XdpMode::Generic => XDP_FLAGS_SKB_MODE,
            };
            match attach(&prog, ifindex, flags) {
                Ok(l) => {
                    attached = Some((l, m));
                    break;
                }
                Err(e) => refused.push((m, e)),
            }
        }
        let Some((link, mode)) = attached else {
            let kind = refused
                .last()
                .map_or(io::ErrorKind::Unsupported, |(_, e)| e.kind());
            let why: Vec<String> = refused
                .iter()
                .map(|(m, e)| format!("{} {e}", m.name()))
                .collect();
            return Err(io::Error::new(
                kind,
                format!("attach XDP: {}", why.join(", ")),
            ));
        };
        // SAFETY: all-zero is a valid sockaddr_xdp; fields set below.
        let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sxdp.sxdp_family = libc::AF_XDP as u16;
        sxdp.sxdp_ifindex = ifindex;
        sxdp.sxdp_queue_id = 0;
        sxdp.sxdp_flags = XDP_USE_NEED_WAKEUP;
        // SAFETY: `sxdp` is a valid sockaddr_xdp and the length matches it.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        })
        .map_err(|e| io::Error::new(e.kind(), format!("bind AF_XDP socket: {e}")))?;
        map_insert(&map, 0, raw as u32)
            .map_err(|e| io::Error::new(e.kind(), format!("XSKMAP insert: {e}")))?;
        let (tx_fd, tx) = open_tx(raw, ifindex)
            .map_err(|e| io::Error::new(e.kind(), format!("AF_XDP TX socket: {e}")))?;
        let mut opts = 0u32;
        let zerocopy =
            getsockopt(raw, XDP_OPTIONS, &mut opts).is_ok() && opts & XDP_OPTIONS_ZEROCOPY != 0;
        Ok(XdpSocket {
            tx_fd,
            fd,
            _link: link,
            _prog: prog,
            _map: map,
            rx,
            tx,
            fill,
            comp,
            umem,
            chunk,
            tx_free,
            mode,
            zerocopy,
            drops_seen: 0,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    pub fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// Passes up to `max_frames` received frames to `f`, returning their
    /// chunks to the fill ring. Returns the number taken.
    pub fn recv(&mut self, max_frames: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let n = self.rx.cons_ready().min(max_frames as u32);
        if n == 0 {
            return 0;
        }
        // Every RX chunk is either in the fill ring, in the RX ring or being
        // read here, and the fill ring holds them all: there is room.
        let room = self.fill.prod_free(n);
        let give = n.min(room);
        let mask = !(self.chunk as u64 - 1);
        for i in 0..n {
            let at = self.rx.local.wrapping_add(i);
            // SAFETY: entries between our consumer index and the kernel's
            // producer index (acquired in `cons_ready`) are written and ours.
            let desc = unsafe { self.rx.desc_ptr(at).read() };
            let (addr, len) = (desc.addr as usize, desc.len as usize);
            if addr
                .checked_add(len)
                .is_some_and(|end| end <= self.umem.len)
            {
                // SAFETY: the range lies inside the UMEM (checked above); the
                // kernel does not write a chunk it handed to the RX ring until
                // it comes back through the fill ring, which happens below.
                let data = unsafe { std::slice::from_raw_parts(self.umem.base.add(addr), len) };
                f(RxFrame {
                    data,
                    vlan: None,
                    truncated: false,
                });
            } else {
                // Cannot come from a sane kernel; counted (as not received
                // whole), not forwarded.
                f(RxFrame {
                    data: &[],
                    vlan: None,
                    truncated: true,
                });
            }
            if i < give {
                // SAFETY: a fill-ring slot below the free count, ours until
                // the producer index is published.
                unsafe {
                    self.fill
                        .addr_ptr(self.fill.local.wrapping_add(i))
                        .write(desc.addr & mask)
                };
            }
        }
        self.rx.cons_release(n);
        self.fill.prod_submit(give);
        if self.fill.need_wakeup() {
            self.wake_rx();
        }
        n as usize
    }

    fn wake_rx(&self) {
        // SAFETY: a zero-length receive without buffer: only a wake-up.
        unsafe {
            libc::recvfrom(
                self.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Takes completed TX chunks back into the free list.
    fn reclaim(&mut self) {
        let n = self.comp.cons_ready();
        for i in 0..n {
            // SAFETY: a completion entry between our consumer index and the
            // kernel's producer index.
            let addr = unsafe { self.comp.addr_ptr(self.comp.local.wrapping_add(i)).read() };
            self.tx_free.push(addr & !(self.chunk as u64 - 1));
        }
        self.comp.cons_release(n);
    }

    /// Kicks the kernel to transmit what sits in the TX ring. Returns
    /// `Err` only for a lasting failure (the device went away).
    fn kick(&mut self) -> io::Result<()> {
        for _ in 0..KICKS_MAX {
            let before = self.tx.unconsumed();
            // Copy mode transmits only inside sendto; zero-copy drivers
            // only need it when they say so.
            if before == 0 || (self.zerocopy && !self.tx.need_wakeup()) {
                break;
            }
            // SAFETY: a zero-length send without buffer or address: the
            // kernel transmits from the TX ring.
            let r = unsafe {
                libc::sendto(
                    self.tx_fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // More than one budget queued: go on while it moves.
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        if self.tx.unconsumed() >= before {
                            break;
                        }
                    }
                    // The device is busy or a frame was dropped by it: try later.
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => break,
                    _ => return Err(e),
                }
            }
        }
        self.reclaim();
        Ok(())
    }

    /// TX descriptors the kernel has not taken yet: `service` must run again.
    pub fn tx_waiting(&mut self) -> bool {
        self.tx.unconsumed() > 0
    }

    /// Kicks queued descriptors and reclaims completions.
    pub fn service(&mut self) -> io::Result<()> {
        if self.tx.unconsumed() > 0 {
            self.kick()
        } else {
            self.reclaim();
            Ok(())
        }
    }

    /// Copies frames into free chunks and submits them in order; returns
    /// how many were taken (fewer when chunks or ring slots ran out). A
    /// frame too long for a chunk is `Err((n, _))` like a refused send.
    pub fn send(&mut self, frames: &[Vec<u8>]) -> Result<usize, (usize, io::Error)> {
        self.reclaim();
        let room = self.tx.prod_free(frames.len() as u32) as usize;
        let n = frames.len().min(room).min(self.tx_free.len());
        let mut taken = 0usize;
        let mut err = None;
        for f in &frames[..n] {
            if f.len() > self.chunk {
                err = Some(io::Error::from_raw_os_error(libc::EMSGSIZE));
                break;
            }
            let Some(addr) = self.tx_free.pop() else {
                break;
            };
            // SAFETY: `addr` is a free TX chunk (not in any ring), so the
            // kernel does not touch it; `f.len() <= chunk` keeps the copy
            // inside it, and the UMEM holds `FRAMES` chunks.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    f.as_ptr(),
                    self.umem.base.add(addr as usize),
                    f.len(),
                );
                self.tx
                    .desc_ptr(self.tx.local.wrapping_add(taken as u32))
                    .write(libc::xdp_desc {
                        addr,
                        len: f.len() as u32,
                        options: 0,
                    });
            }
            taken += 1;
        }
        if taken > 0 {
            self.tx.prod_submit(taken as u32);
        }
        if let Err(e) = self.kick() {
            // Frames already in the ring stay there; the error is lasting.
            return Err((taken, e));
        }
        match err {
            Some(e) => Err((taken, e)),
            None => Ok(taken),
        }
    }

    /// Kernel-side receive drops since the last call: frames dropped for
    /// want of a fill-ring chunk or as too long (`rx_dropped`, which
    /// includes the fill-ring-empty case) and for a full RX ring.
    pub fn take_drops(&mut self) -> u64 {
        // SAFETY: all-zero is a valid xdp_statistics.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        if getsockopt(self.fd(), XDP_STATISTICS, &mut st).is_err() {
            return 0;
        }
        let total = st.rx_dropped + st.rx_ring_full;
        let d = total.saturating_sub(self.drops_seen);
        self.drops_seen = total;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_indices_wrap() {
        let r = RingIdx { size: 8 };
        assert_eq!(r.free(0, 0), 8);
        assert_eq!(r.free(8, 0), 0);
        assert_eq!(r.free(5, 2), 5);
        assert_eq!(r.ready(5, 2), 3);
        // Across the u32 wrap.
        let p = 3u32;
        let c = u32::MAX - 2; // 6 behind p
        assert_eq!(r.ready(p, c), 6);
        assert_eq!(r.free(p, c), 2);
        assert_eq!(r.slot(u32::MAX), 7);
        assert_eq!(r.slot(u32::MAX.wrapping_add(1)), 0);
        // A corrupt index never yields more than the ring holds.
        assert_eq!(r.ready(1000, 0), 8);
        assert_eq!(r.free(1000, 0), 0);
    }

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
    fn chunk_size_fits_the_frame_after_headroom() {
        assert_eq!(chunk_bytes(1500), Some(2048));
        assert_eq!(chunk_bytes(1774), Some(2048));
        assert_eq!(chunk_bytes(1775), Some(4096));
        assert_eq!(chunk_bytes(9000), None);
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
