//! The AF_XDP sockets of one interface: set-up, receive on every RX
//! queue, transmit on one (see `xdp/mod.rs` for the principles).

use super::program::{self, XdpMode};
use super::queue::{rx_frames_for, split_batch, xdp_socket, QueueSpec, RxQueue};
use super::umem::*;
use crate::ring::Csum;
use crate::sock::RxFrame;
use crate::sockopt;
use rustix::net::xdp::{SocketAddrXdp, SocketAddrXdpFlags, SocketAddrXdpWithSharedUmem};
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// Send buffer of the transmit socket (copy mode charges each frame's skb to it).
const TX_SNDBUF: libc::c_int = 8 << 20;
/// Copy-mode kicks per `send`/`service` call at most.
const KICKS_MAX: usize = 16;
/// The queue the interface transmits on (every interface has a queue 0).
pub const TX_QUEUE: u32 = 0;
/// Most RX queues served (the XSKMAP's size): each queue holds at least
/// `RX_FRAMES_MIN` chunks, 2 MiB, so 64 queues pin 128 MiB per interface.
/// A NIC with more runs AF_PACKET unless `ethtool -L` lowers its count.
pub(super) const QUEUES_MAX: u32 = 64;

// SAFETY: the rings and the UMEMs are owned exclusively by their XdpSocket;
// no pointer into them is shared, so moving the socket to another thread
// (the I/O thread) is sound.
unsafe impl Send for XdpSocket {}

/// One receiving queue as `show info` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueInfo {
    pub queue: u32,
    pub zerocopy: bool,
    /// Why the queue runs in copy mode (none: zero-copy).
    pub copy_why: Option<String>,
    /// Frames received on the queue since open.
    pub rx_frames: u64,
    /// Frames the kernel dropped on the queue (no fill chunk, RX ring full).
    pub ring_drops: u64,
    /// Receive chunks (and fill / RX ring slots) of the queue.
    pub chunks: u32,
}

/// The transmit-only socket: a TX ring on the UMEM of the `TX_QUEUE`
/// socket, whose completion ring and TX chunks it uses.
struct Tx {
    /// Kept out of epoll: every transmitted frame's skb, when freed, wakes
    /// the wait queue of the socket that sent it (sock_wfree), which costs
    /// a spinlock round per frame if that socket sits in epoll.
    fd: OwnedFd,
    ring: Ring,
    comp: Ring,
    /// TX chunks not in flight.
    free: Vec<u64>,
    chunk: usize,
    zerocopy: bool,
}

/// AF_XDP sockets on every RX queue of one interface, a transmit socket
/// on queue 0, and the program that redirects each queue to its socket.
pub struct XdpSocket {
    // Field order is drop order: the transmit socket (it shares queue 0's
    // UMEM), then the link (detaches the program: no more redirects), the
    // map (lets go of the sockets), then the queues' sockets and memory.
    tx: Tx,
    /// The attachment; replaced by a new link if someone detaches it.
    link: OwnedFd,
    /// Kept to attach again after a detach (it holds the map).
    prog: OwnedFd,
    _map: OwnedFd,
    /// Queue `k` is RX queue `k`; queue `TX_QUEUE` also owns the TX chunks.
    queues: Vec<RxQueue>,
    /// The queue first in line for the frame a batch's share leaves over;
    /// turns round so no queue is always last.
    next: usize,
    mode: XdpMode,
    ifindex: u32,
    name: String,
    /// A datagram socket for ethtool queries while running.
    ctl: OwnedFd,
    /// The RX queue count last seen (the served one at open).
    queues_seen: u32,
}

fn context(what: &str) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The transmit-only socket: a TX ring on the UMEM of `owner` (same
/// interface and queue, so it shares its fill and completion rings).
fn open_tx(owner: BorrowedFd<'_>, ifindex: u32) -> io::Result<(OwnedFd, Ring)> {
    let fd = xdp_socket()?;
    let raw = fd.as_raw_fd();
    rustix::net::sockopt::set_xdp_tx_ring_size(&fd, TX_FRAMES)?;
    // Copy mode allocates an skb per frame against the socket's send
    // buffer: with the default (~200 KiB) a kick stops (EAGAIN) after ~90
    // frames of 1.5 KB still in flight. Room for the whole TX ring.
    sockopt::set_buf(raw, true, TX_SNDBUF);
    // Larger kicks where the kernel allows (≥ 6.17); a refusal is fine.
    let _ = set(raw, XDP_MAX_TX_SKB_BUDGET, &TX_FRAMES);
    let off = rustix::net::sockopt::xdp_mmap_offsets(&fd)?;
    let d = std::mem::size_of::<libc::xdp_desc>();
    let ring = map_ring(raw, &off.tx, XDP_PGOFF_TX_RING, TX_FRAMES, d)?;
    // A socket sharing a UMEM takes no other flag: need-wakeup and
    // copy/zero-copy come from the owner.
    let addr = SocketAddrXdpWithSharedUmem {
        addr: SocketAddrXdp::new(SocketAddrXdpFlags::XDP_SHARED_UMEM, ifindex, TX_QUEUE),
        shared_umem_fd: owner,
    };
    rustix::net::bind(&fd, &addr)?;
    Ok((fd, ring))
}

/// The RX queues of `name` that sluice serves, or why it cannot.
fn count_queues(ioctl_fd: RawFd, name: &str) -> io::Result<u32> {
    let queues =
        sockopt::rx_queues(ioctl_fd, name).map_err(context("cannot count the RX queues"))?;
    if queues > QUEUES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{queues} RX queues, sluice serves at most {QUEUES_MAX} \
                 (`ethtool -L {name} combined {QUEUES_MAX}` lowers the count)"
            ),
        ));
    }
    Ok(queues)
}

/// The attach modes to try, best first, and the checksum state of
/// received frames, from the driver's name.
fn driver_plan(driver: &str, generic_only: bool) -> (&'static [XdpMode], Csum) {
    // A veth or tap peer may leave checksums to offload; AF_XDP is not
    // told which frames (AF_PACKET is: ring.rs), so they are looked at.
    let csum = if driver == "veth" || driver == "tun" {
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
    (order, csum)
}

impl XdpSocket {
    /// Loads and attaches the program to `name`, opens a socket on each of
    /// its RX queues and puts it into the map, then the transmit socket on
    /// queue 0. `ioctl_fd`: any socket for ethtool queries (an AF_XDP
    /// socket does not take them). `generic_only` skips the native attempt.
    /// `rx_frames`: RX chunks per queue (`None`: the default depth).
    pub fn open(
        name: &str,
        mtu: usize,
        ioctl_fd: RawFd,
        generic_only: bool,
        rx_frames: Option<u32>,
    ) -> io::Result<XdpSocket> {
        XdpSocket::open_in(name, mtu, ioctl_fd, generic_only, rx_frames, None)
    }

    /// As [`XdpSocket::open`] in native mode only, whatever the driver
    /// (tests: veth's native mode, where zero-copy is refused).
    #[cfg(test)]
    pub fn open_native(name: &str, mtu: usize, ioctl_fd: RawFd) -> io::Result<XdpSocket> {
        XdpSocket::open_in(name, mtu, ioctl_fd, false, None, Some(&[XdpMode::Native]))
    }

    fn open_in(
        name: &str,
        mtu: usize,
        ioctl_fd: RawFd,
        generic_only: bool,
        want_frames: Option<u32>,
        modes: Option<&'static [XdpMode]>,
    ) -> io::Result<XdpSocket> {
        let ifindex = crate::sockopt::ifindex(name)? as u32;
        let nqueues = count_queues(ioctl_fd, name)?;
        let chunk = chunk_bytes(mtu).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("MTU {mtu} does not fit a 4 KiB UMEM chunk"),
            )
        })?;
        let map = program::create_xskmap(nqueues).map_err(context("XSKMAP"))?;
        let prog = program::load_program(&map)?;
        let driver = sockopt::driver(ioctl_fd, name).unwrap_or_default();
        let (order, csum) = driver_plan(&driver, generic_only);
        let order = modes.unwrap_or(order);
        let (link, mode) = program::attach_first(&prog, ifindex, order)?;
        let rx_frames = rx_frames_for(nqueues, want_frames);
        let mut queues = Vec::with_capacity(nqueues as usize);
        for queue in 0..nqueues {
            let spec = QueueSpec {
                ifindex,
                queue,
                chunk,
                rx_frames,
                tx_frames: if queue == TX_QUEUE { TX_FRAMES } else { 0 },
                csum,
            };
            let q = RxQueue::open(spec, mode)?;
            program::map_insert(&map, queue, q.fd() as u32).map_err(context("XSKMAP insert"))?;
            queues.push(q);
        }
        let owner = queues
            .get_mut(TX_QUEUE as usize)
            .ok_or_else(|| io::Error::other("no RX queue to transmit on"))?;
        let tx = Tx::open(owner, ifindex)?;
        let ctl = rustix::net::socket_with(
            AddressFamily::INET,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        Ok(XdpSocket {
            tx,
            link,
            prog,
            _map: map,
            queues,
            next: 0,
            mode,
            ifindex,
            name: name.to_string(),
            ctl,
            queues_seen: nqueues,
        })
    }

    /// The receiving sockets, one per RX queue (all in epoll).
    pub fn fds(&self) -> Vec<RawFd> {
        self.queues.iter().map(RxQueue::fd).collect()
    }

    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Every queue runs in zero-copy mode.
    pub fn zerocopy(&self) -> bool {
        self.queues.iter().all(RxQueue::zerocopy)
    }

    /// Some queue runs in zero-copy mode.
    pub fn any_zerocopy(&self) -> bool {
        self.queues.iter().any(RxQueue::zerocopy)
    }

    /// Each RX queue's mode and counters.
    pub fn queue_info(&self) -> Vec<QueueInfo> {
        self.queues
            .iter()
            .map(|q| QueueInfo {
                queue: q.queue(),
                zerocopy: q.zerocopy(),
                copy_why: q.copy_why().map(str::to_string),
                rx_frames: q.frames(),
                ring_drops: q.drops(),
                chunks: q.spec.rx_frames,
            })
            .collect()
    }

    /// Passes up to `max_frames` received frames to `f`, shared among the
    /// queues holding frames ([`split_batch`]). Returns the number taken.
    pub fn recv(&mut self, max_frames: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        // count_queues keeps the count within QUEUES_MAX.
        let n = self.queues.len().min(QUEUES_MAX as usize);
        if n == 1 {
            return self.queues[0].recv(max_frames, f);
        }
        let mut ready = [0u32; QUEUES_MAX as usize];
        let mut take = [0u32; QUEUES_MAX as usize];
        for (r, q) in ready.iter_mut().zip(self.queues.iter_mut()) {
            *r = q.ready();
        }
        let budget = u32::try_from(max_frames).unwrap_or(u32::MAX);
        split_batch(&ready[..n], budget, self.next, &mut take[..n]);
        let mut taken = 0;
        for (q, &t) in self.queues.iter_mut().zip(&take[..n]) {
            if t > 0 {
                taken += q.recv(t as usize, f);
            }
        }
        self.next = (self.next + 1) % n.max(1);
        taken
    }

    /// TX descriptors the kernel has not taken yet: `service` must run again.
    pub fn tx_waiting(&mut self) -> bool {
        self.tx.waiting()
    }

    /// Kicks queued descriptors and reclaims completions.
    pub fn service(&mut self) -> io::Result<()> {
        self.tx.service()
    }

    /// Copies frames into free TX chunks and submits them in order; returns
    /// how many were taken (fewer when chunks or ring slots ran out). A
    /// frame too long for a chunk is `Err((n, _))` like a refused send.
    pub fn send(&mut self, frames: &[Vec<u8>]) -> Result<usize, (usize, io::Error)> {
        let umem = &self.queues[TX_QUEUE as usize].umem;
        self.tx.send(umem, frames)
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

    /// The interface's RX queue count, once it differs from the last one
    /// seen (`ethtool -L` since open): `Some((served, now))`. A queue
    /// added has no socket, so its frames pass to the host stack until
    /// sluice opens the interface again; a queue removed only idles its
    /// socket. `None` also when the count cannot be read.
    pub fn queue_change(&mut self) -> Option<(u32, u32)> {
        let now = sockopt::rx_queues(self.ctl.as_raw_fd(), &self.name).ok()?;
        if now == self.queues_seen {
            return None;
        }
        self.queues_seen = now;
        Some((self.queues.len() as u32, now))
    }

    /// Detaches our program as someone else would (tests).
    #[cfg(test)]
    pub fn detach_for_test(&self) -> io::Result<()> {
        program::link_detach(&self.link)
    }

    /// Kernel-side receive drops on every queue since the last call.
    pub fn take_drops(&mut self) -> u64 {
        self.queues.iter_mut().map(RxQueue::take_drops).sum()
    }
}

impl Tx {
    /// The transmit socket on `owner`'s UMEM, taking its completion ring
    /// and the TX chunks after its RX ones.
    fn open(owner: &mut RxQueue, ifindex: u32) -> io::Result<Tx> {
        let comp = owner
            .comp
            .take()
            .ok_or_else(|| io::Error::other("the TX queue has no completion ring"))?;
        let (fd, ring) = open_tx(owner.as_fd(), ifindex).map_err(context("AF_XDP TX socket"))?;
        let (rx_frames, chunk) = (owner.spec.rx_frames, owner.spec.chunk);
        let free = (rx_frames..rx_frames + owner.spec.tx_frames)
            .rev()
            .map(|i| (i as usize * chunk) as u64)
            .collect();
        Ok(Tx {
            fd,
            ring,
            comp,
            free,
            chunk,
            zerocopy: owner.zerocopy(),
        })
    }

    /// Takes completed TX chunks back into the free list.
    fn reclaim(&mut self) {
        let n = self.comp.cons_ready(u32::MAX);
        for i in 0..n {
            // SAFETY: a completion entry between our consumer index and the
            // kernel's producer index.
            let addr = unsafe { self.comp.addr_ptr(self.comp.local.wrapping_add(i)).read() };
            self.free.push(addr & !(self.chunk as u64 - 1));
        }
        self.comp.cons_release(n);
    }

    /// Kicks the kernel to transmit what sits in the TX ring. Returns
    /// `Err` only for a lasting failure (the device went away).
    fn kick(&mut self) -> io::Result<()> {
        for _ in 0..KICKS_MAX {
            let before = self.ring.unconsumed();
            // Copy mode transmits only inside sendto; zero-copy drivers
            // only need it when they say so.
            if before == 0 || (self.zerocopy && !self.ring.need_wakeup()) {
                break;
            }
            // A zero-length send: the kernel transmits from the TX ring.
            use rustix::io::Errno;
            match rustix::net::send(&self.fd, &[], rustix::net::SendFlags::DONTWAIT) {
                Ok(_) => {}
                // More than one budget queued: go on while it moves.
                Err(Errno::AGAIN) | Err(Errno::INTR) => {
                    if self.ring.unconsumed() >= before {
                        break;
                    }
                }
                // The device is busy or a frame was dropped by it: try later.
                Err(Errno::BUSY) | Err(Errno::NOBUFS) => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.reclaim();
        Ok(())
    }

    /// Descriptors the kernel has not taken yet: `service` must run again.
    fn waiting(&mut self) -> bool {
        self.ring.unconsumed() > 0
    }

    /// Kicks queued descriptors and reclaims completions.
    fn service(&mut self) -> io::Result<()> {
        if self.ring.unconsumed() > 0 {
            self.kick()
        } else {
            self.reclaim();
            Ok(())
        }
    }

    /// As [`XdpSocket::send`], into the TX chunks of `umem`.
    fn send(&mut self, umem: &Umem, frames: &[Vec<u8>]) -> Result<usize, (usize, io::Error)> {
        self.reclaim();
        let room = self.ring.prod_free(frames.len() as u32) as usize;
        let n = frames.len().min(room).min(self.free.len());
        let mut taken = 0usize;
        let mut err = None;
        for f in &frames[..n] {
            if f.len() > self.chunk {
                err = Some(io::Error::from_raw_os_error(libc::EMSGSIZE));
                break;
            }
            let Some(addr) = self.free.pop() else {
                break;
            };
            // SAFETY: `addr` is a free TX chunk of `umem` (not in any ring),
            // so the kernel does not touch it; `f.len() <= chunk` keeps the
            // copy inside it, and the TX chunks lie inside the UMEM.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), umem.base.add(addr as usize), f.len());
                self.ring
                    .desc_ptr(self.ring.local.wrapping_add(taken as u32))
                    .write(libc::xdp_desc {
                        addr,
                        len: f.len() as u32,
                        options: 0,
                    });
            }
            taken += 1;
        }
        if taken > 0 {
            self.ring.prod_submit(taken as u32);
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
}
