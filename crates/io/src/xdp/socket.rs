//! The AF_XDP sockets of one interface: set-up, receive, transmit (see
//! `xdp/mod.rs` for the principles).

use super::program::{self, XdpMode};
use super::umem::*;
use crate::ring::Csum;
use crate::sock::RxFrame;
use crate::sockopt;
use crate::sys::{bind, cvt};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Send buffer of the transmit socket (copy mode charges each frame's skb to it).
const TX_SNDBUF: libc::c_int = 8 << 20;
/// Copy-mode kicks per `send`/`service` call at most.
const KICKS_MAX: usize = 16;

// SAFETY: the rings and the UMEM are owned exclusively by their XdpSocket;
// no pointer into them is shared, so moving the socket to another thread
// (the I/O thread) is sound.
unsafe impl Send for XdpSocket {}

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
    /// The attachment; replaced by a new link if someone detaches it.
    link: OwnedFd,
    /// Kept to attach again after a detach (it holds the map).
    prog: OwnedFd,
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
    ifindex: u32,
    /// What received frames' checksums are known to be (veth, tap: unknown).
    rx_csum: Csum,
}

fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` comes from a successful syscall and has no other owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The transmit-only socket: a TX ring on the UMEM of `owner` (same
/// interface and queue, so it shares its fill and completion rings).
fn open_tx(owner: RawFd, ifindex: u32) -> io::Result<(OwnedFd, Ring)> {
    // SAFETY: plain syscall without pointers.
    let fd = owned(cvt(unsafe {
        libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
    })?);
    let raw = fd.as_raw_fd();
    set(raw, XDP_TX_RING, &TX_FRAMES)?;
    // Copy mode allocates an skb per frame against the socket's send
    // buffer: with the default (~200 KiB) a kick stops (EAGAIN) after ~90
    // frames of 1.5 KB still in flight. Room for the whole TX ring.
    sockopt::set_buf(raw, true, TX_SNDBUF);
    // Larger kicks where the kernel allows (≥ 6.17); a refusal is fine.
    let _ = set(raw, XDP_MAX_TX_SKB_BUDGET, &TX_FRAMES);
    // SAFETY: all-zero is a valid xdp_mmap_offsets.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    get(raw, XDP_MMAP_OFFSETS, &mut off)?;
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
    bind(raw, &sxdp)?;
    Ok((fd, ring))
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
        let ifindex = crate::sockopt::ifindex(name)? as u32;
        let queues = sockopt::rx_queues(ioctl_fd, name)
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
        let umem = Umem::new(len)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.base as u64,
            len: len as u64,
            chunk_size: chunk as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        set(raw, XDP_UMEM_REG, &reg)?;
        // Ring sizes (powers of two): each ring can hold every chunk of its side.
        for (opt, size) in [
            (XDP_UMEM_FILL_RING, RX_FRAMES),
            (XDP_UMEM_COMPLETION_RING, TX_FRAMES),
            (XDP_RX_RING, RX_FRAMES),
        ] {
            set(raw, opt, &size)?;
        }
        // SAFETY: all-zero is a valid xdp_mmap_offsets.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let got = get(raw, XDP_MMAP_OFFSETS, &mut off)?;
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

        let map = program::create_xskmap()
            .map_err(|e| io::Error::new(e.kind(), format!("XSKMAP: {e}")))?;
        let prog = program::load_program(&map)?;
        let driver = sockopt::driver(ioctl_fd, name).unwrap_or_default();
        // A veth or tap peer may leave checksums to offload; AF_XDP is not
        // told which frames (AF_PACKET is: ring.rs), so they are looked at.
        let rx_csum = if driver == "veth" || driver == "tun" {
            Csum::Unknown
        } else {
            Csum::Complete
        };
        let order: &[XdpMode] = if generic_only {
            &[XdpMode::Generic]
        } else if driver == "veth" {
            // veth's native XDP copies each frame into a page-pool page
            // before the socket copies it again; generic mode runs on the
            // skb the peer sent (measured: −11 % CPU per 1518 B frame).
            &[XdpMode::Generic, XdpMode::Native]
        } else {
            &[XdpMode::Native, XdpMode::Generic]
        };
        let (link, mode) = program::attach_first(&prog, ifindex, order)?;
        // SAFETY: all-zero is a valid sockaddr_xdp; fields set below.
        let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sxdp.sxdp_family = libc::AF_XDP as u16;
        sxdp.sxdp_ifindex = ifindex;
        sxdp.sxdp_queue_id = 0;
        sxdp.sxdp_flags = XDP_USE_NEED_WAKEUP;
        bind(raw, &sxdp)
            .map_err(|e| io::Error::new(e.kind(), format!("bind AF_XDP socket: {e}")))?;
        program::map_insert(&map, 0, raw as u32)
            .map_err(|e| io::Error::new(e.kind(), format!("XSKMAP insert: {e}")))?;
        let (tx_fd, tx) = open_tx(raw, ifindex)
            .map_err(|e| io::Error::new(e.kind(), format!("AF_XDP TX socket: {e}")))?;
        let mut opts = 0u32;
        let zerocopy = get(raw, XDP_OPTIONS, &mut opts).is_ok() && opts & XDP_OPTIONS_ZEROCOPY != 0;
        Ok(XdpSocket {
            tx_fd,
            fd,
            link,
            prog,
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
            ifindex,
            rx_csum,
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
                    csum: self.rx_csum,
                });
            } else {
                // Cannot come from a sane kernel; counted (as not received
                // whole), not forwarded.
                f(RxFrame {
                    data: &[],
                    vlan: None,
                    truncated: true,
                    csum: Csum::Complete,
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

    /// Checks that our link still attaches the program; if someone
    /// detached it (`bpftool link detach`: the link stays open but the
    /// interface runs no program, so the socket receives nothing), attaches
    /// the same program again in the same mode. The socket stays bound and
    /// in the map meanwhile, so forwarding resumes with the new link.
    /// `Ok(true)`: it was detached and is attached again; `Err`: it cannot
    /// be (another program took the interface, or a privilege is missing).
    pub fn ensure_attached(&mut self) -> io::Result<bool> {
        if program::link_ifindex(&self.link)? != 0 {
            return Ok(false);
        }
        let (link, _) = program::attach_first(&self.prog, self.ifindex, &[self.mode])?;
        self.link = link;
        Ok(true)
    }

    /// Detaches our program as someone else would (tests).
    #[cfg(test)]
    pub fn detach_for_test(&self) -> io::Result<()> {
        program::link_detach(&self.link)
    }

    /// Kernel-side receive drops since the last call: frames dropped for
    /// want of a fill-ring chunk or as too long (`rx_dropped`, which
    /// includes the fill-ring-empty case) and for a full RX ring.
    pub fn take_drops(&mut self) -> u64 {
        // SAFETY: all-zero is a valid xdp_statistics.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        if get(self.fd(), XDP_STATISTICS, &mut st).is_err() {
            return 0;
        }
        let total = st.rx_dropped + st.rx_ring_full;
        let d = total.saturating_sub(self.drops_seen);
        self.drops_seen = total;
        d
    }
}
