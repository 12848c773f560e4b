//! One RX queue of an interface: its AF_XDP socket, UMEM, fill and RX rings
//! (see `xdp/mod.rs` for the principles), and the pure arithmetic of how
//! many chunks each queue gets.

use super::program::XdpMode;
use super::umem::*;
use crate::ring::Csum;
use crate::sock::RxFrame;
use rustix::net::sockopt as so;
use rustix::net::xdp::{
    SocketAddrXdp, SocketAddrXdpFlags, XdpOptionsFlags, XdpUmemReg, XdpUmemRegFlags,
};
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// Fewest RX chunks a queue gets however many queues share the budget:
/// 1024 full-sized frames absorb ~12 ms of line rate at 1 Gbit/s while the
/// loop is descheduled.
pub(super) const RX_FRAMES_MIN: u32 = 1024;
/// Completion ring of a socket that never transmits: the kernel wants one
/// on every UMEM owner; it is never mapped.
const COMP_UNUSED: u32 = 64;

/// RX chunks of all the queues of one interface together, at most: four
/// queues' worth of the single-queue depth (64 MiB of 2 KiB chunks).
pub(super) const RX_FRAMES_IFACE: u32 = 4 * RX_FRAMES;

/// RX chunks (and fill/RX ring slots) of each of `queues` queues: the
/// single-queue depth `RX_FRAMES` for up to four queues, then
/// `RX_FRAMES_IFACE` shared out, a power of two as the rings want, never
/// below `RX_FRAMES_MIN`.
///
/// Why each queue gets the whole single-queue depth rather than a share
/// of it: the traffic is not spread evenly. RSS puts a flow on one queue,
/// a few heavy flows can all hash to the same one, and a sender with one
/// TX queue (veth) fills one queue only, so one queue must absorb what
/// the single ring absorbs. Measured on veth (`scripts/mq-cost.sh`, all
/// traffic on queue 0 of 4): with a quarter of the depth the ring
/// overflowed where the single one did not, and the hosts' TCP recovery
/// ran inside sluice's transmit calls (0.60–0.66 host transmits per
/// forwarded frame against 0.12–0.22, system time +20–40 % per frame);
/// with the full depth both were at 0.29–0.32.
pub(super) fn rx_frames_per_queue(queues: u32) -> u32 {
    let share = RX_FRAMES_IFACE / queues.max(1);
    // The largest power of two not above the share.
    let pow2 = 1u32 << (31 - share.max(1).leading_zeros());
    pow2.clamp(RX_FRAMES_MIN, RX_FRAMES)
}

/// Fewest and most RX chunks per queue an operator may ask for
/// (`--xdp-frames`): a power of two in between.
pub const RX_FRAMES_ASK: (u32, u32) = (256, 32_768);

/// `n` as an operator's RX chunks per queue, or why not (the rings want
/// a power of two; fewer than 256 drop a burst of one batch's size).
pub fn check_rx_frames(n: u32) -> Result<u32, String> {
    let (lo, hi) = RX_FRAMES_ASK;
    if n.is_power_of_two() && (lo..=hi).contains(&n) {
        return Ok(n);
    }
    Err(format!(
        "{n} receive chunks per queue: a power of two from {lo} to {hi} \
         (each 2 KiB, 4 KiB above MTU 1774; default {RX_FRAMES} for up to 4 queues)"
    ))
}

/// RX chunks per queue: `want` (checked by [`check_rx_frames`]) or the
/// default depth for `queues` queues.
pub(super) fn rx_frames_for(queues: u32, want: Option<u32>) -> u32 {
    want.unwrap_or_else(|| rx_frames_per_queue(queues))
}

/// Shares a port's receive batch of `budget` frames among its queues,
/// which hold `ready[k]` frames each, into `take`: every queue with frames
/// gets an equal share, one that holds less leaves the rest to the others
/// (water-filling), and what does not divide evenly goes a frame each to
/// the queues from `start` on (the caller turns it round). The sum is
/// `min(budget, Σ ready)`, as one ring would give.
///
/// Why not drain one queue after another: with one flow per queue (RSS,
/// or veth's per-sender-queue delivery), a queue holding a whole batch
/// would take the turn and the other flows' frames would wait turns
/// behind it (and overflow their rings), where one ring serves every flow
/// every turn.
pub(super) fn split_batch(ready: &[u32], budget: u32, start: usize, take: &mut [u32]) {
    take.fill(0);
    let n = ready.len().min(take.len());
    let mut left = budget;
    // Each pass satisfies a queue or hands out all but fewer than
    // `hungry` frames, so it ends within n + 1 passes.
    while left > 0 {
        let hungry = (0..n).filter(|&k| ready[k] > take[k]).count() as u32;
        if hungry == 0 {
            break;
        }
        let share = (left / hungry).max(1);
        for i in 0..n {
            let k = (start + i) % n;
            let more = (ready[k] - take[k]).min(share).min(left);
            take[k] += more;
            left -= more;
            if left == 0 {
                break;
            }
        }
    }
}

/// What to ask of `bind` for one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BindMode {
    /// `XDP_ZEROCOPY`: the driver maps the UMEM into its ring, or bind fails.
    ZeroCopy,
    /// `XDP_COPY`: the kernel copies each frame into a chunk.
    Copy,
}

/// The bind attempts for a queue whose program runs in `mode`, and why
/// zero-copy is not among them (zero-copy is a driver's RX ring filled
/// from the UMEM, reached only by native XDP; in generic mode the program
/// runs on an skb the driver already built).
pub(super) fn bind_order(mode: XdpMode) -> (&'static [BindMode], Option<&'static str>) {
    match mode {
        XdpMode::Native => (&[BindMode::ZeroCopy, BindMode::Copy], None),
        XdpMode::Generic => (
            &[BindMode::Copy],
            Some("generic XDP (zero-copy needs native mode)"),
        ),
    }
}

/// A fresh AF_XDP socket (not yet bound).
pub(super) fn xdp_socket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::XDP,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// A UMEM-owning socket bound to one queue, before it becomes an `RxQueue`.
struct Bound {
    fd: OwnedFd,
    rx: Ring,
    fill: Ring,
    comp: Option<Ring>,
}

/// Where and how one queue's socket is set up.
#[derive(Clone, Copy, Debug)]
pub(super) struct QueueSpec {
    pub ifindex: u32,
    pub queue: u32,
    pub chunk: usize,
    /// RX chunks (a power of two: the fill and RX ring sizes).
    pub rx_frames: u32,
    /// TX chunks after the RX ones (0: this socket never transmits).
    pub tx_frames: u32,
    pub csum: Csum,
}

/// One queue's AF_XDP socket: its own UMEM, fill and RX rings. The queue
/// the interface transmits on also holds the TX chunks and the completion
/// ring (`comp`), which the transmit socket shares.
pub(super) struct RxQueue {
    // Field order is drop order: the socket (unregisters the UMEM), then
    // the rings, then the memory.
    fd: OwnedFd,
    rx: Ring,
    fill: Ring,
    /// Mapped on the transmitting queue only.
    pub(super) comp: Option<Ring>,
    pub(super) umem: Umem,
    pub(super) spec: QueueSpec,
    zerocopy: bool,
    /// Why this queue runs in copy mode (none: zero-copy).
    copy_why: Option<String>,
    /// Frames received since open (plain: only the data-plane thread counts).
    frames: u64,
    drops: u64,
    /// Kernel drop counters at the last `take_drops`.
    drops_seen: u64,
}

impl RxQueue {
    /// Opens the socket of one queue for a program attached in `mode`:
    /// zero-copy first where the mode allows, then copy mode, each on a
    /// fresh socket (a failed bind leaves a socket half set up).
    pub(super) fn open(spec: QueueSpec, mode: XdpMode) -> io::Result<RxQueue> {
        let frames = spec.rx_frames + spec.tx_frames;
        let umem = Umem::new(spec.chunk * frames as usize)?;
        let (order, generic_why) = bind_order(mode);
        let mut why = generic_why.map(str::to_string);
        let mut last = None;
        for &c in order {
            match bind_queue(&umem, &spec, c) {
                Ok(b) => {
                    let zerocopy = so::xdp_options(&b.fd)
                        .is_ok_and(|o| o.contains(XdpOptionsFlags::XDP_OPTIONS_ZEROCOPY));
                    if zerocopy {
                        why = None;
                    }
                    return Ok(RxQueue {
                        fd: b.fd,
                        rx: b.rx,
                        fill: b.fill,
                        comp: b.comp,
                        umem,
                        spec,
                        zerocopy,
                        copy_why: why,
                        frames: 0,
                        drops: 0,
                        drops_seen: 0,
                    });
                }
                Err(e) if c == BindMode::ZeroCopy => {
                    why = Some(format!("zero-copy refused by the driver: {e}"));
                }
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| io::Error::from(io::ErrorKind::Unsupported));
        Err(io::Error::new(
            e.kind(),
            format!("bind AF_XDP socket to queue {}: {e}", spec.queue),
        ))
    }

    pub(super) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub(super) fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(super) fn queue(&self) -> u32 {
        self.spec.queue
    }

    pub(super) fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    pub(super) fn copy_why(&self) -> Option<&str> {
        self.copy_why.as_deref()
    }

    pub(super) fn frames(&self) -> u64 {
        self.frames
    }

    pub(super) fn drops(&self) -> u64 {
        self.drops
    }

    /// Frames waiting in the RX ring now (reads the kernel's index).
    pub(super) fn ready(&mut self) -> u32 {
        self.rx.cons_ready(u32::MAX)
    }

    /// Passes up to `max_frames` received frames to `f`, returning their
    /// chunks to the fill ring. Returns the number taken.
    pub(super) fn recv(&mut self, max_frames: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let max = u32::try_from(max_frames).unwrap_or(u32::MAX);
        let n = self.rx.cons_ready(max).min(max);
        if n == 0 {
            return 0;
        }
        // Every RX chunk is either in the fill ring, in the RX ring or being
        // read here, and the fill ring holds them all: there is room.
        let room = self.fill.prod_free(n);
        let give = n.min(room);
        let mask = !(self.spec.chunk as u64 - 1);
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
                    csum: self.spec.csum,
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
        self.frames += u64::from(n);
        n as usize
    }

    fn wake_rx(&self) {
        // A zero-length receive: only a wake-up; nothing to report.
        let _ = rustix::net::recv(&self.fd, &mut [0u8; 0], rustix::net::RecvFlags::DONTWAIT);
    }

    /// Kernel-side receive drops since the last call: frames dropped for
    /// want of a fill-ring chunk or as too long (`rx_dropped`, which
    /// includes the fill-ring-empty case) and for a full RX ring.
    pub(super) fn take_drops(&mut self) -> u64 {
        let Ok(st) = so::xdp_statistics(&self.fd) else {
            return 0;
        };
        let total = st.rx_dropped + st.rx_ring_full.unwrap_or(0);
        let d = total.saturating_sub(self.drops_seen);
        self.drops_seen = total;
        self.drops += d;
        d
    }
}

/// Creates a socket with `umem` registered, its rings sized and the first
/// `rx_frames` chunks in the fill ring, and binds it to the queue as `c`
/// asks.
fn bind_queue(umem: &Umem, spec: &QueueSpec, c: BindMode) -> io::Result<Bound> {
    let fd = xdp_socket()?;
    let raw = fd.as_raw_fd();
    let reg = XdpUmemReg {
        addr: umem.base as u64,
        len: umem.len as u64,
        chunk_size: spec.chunk as u32,
        headroom: 0,
        flags: XdpUmemRegFlags::empty(),
        tx_metadata_len: 0,
    };
    so::set_xdp_umem_reg(&fd, reg)?;
    let comp_size = if spec.tx_frames > 0 {
        spec.tx_frames
    } else {
        COMP_UNUSED
    };
    // Ring sizes (powers of two): each ring can hold every chunk of its side.
    so::set_xdp_umem_fill_ring_size(&fd, spec.rx_frames)?;
    so::set_xdp_umem_completion_ring_size(&fd, comp_size)?;
    so::set_xdp_rx_ring_size(&fd, spec.rx_frames)?;
    let off = so::xdp_mmap_offsets(&fd)?;
    let d = std::mem::size_of::<libc::xdp_desc>();
    let rx = map_ring(raw, &off.rx, XDP_PGOFF_RX_RING, spec.rx_frames, d)?;
    let mut fill = map_ring(raw, &off.fr, XDP_UMEM_PGOFF_FILL_RING, spec.rx_frames, 8)?;
    let comp = match spec.tx_frames {
        0 => None,
        n => Some(map_ring(
            raw,
            &off.cr,
            XDP_UMEM_PGOFF_COMPLETION_RING,
            n,
            8,
        )?),
    };
    // The RX chunks to the fill ring, before bind.
    let n = fill.prod_free(spec.rx_frames).min(spec.rx_frames);
    for i in 0..n {
        // SAFETY: `addr_ptr` points at a fill-ring slot we own until the
        // producer index is published.
        unsafe {
            fill.addr_ptr(fill.local.wrapping_add(i))
                .write((i as usize * spec.chunk) as u64)
        };
    }
    fill.prod_submit(n);
    let flags = SocketAddrXdpFlags::XDP_USE_NEED_WAKEUP
        | match c {
            BindMode::ZeroCopy => SocketAddrXdpFlags::XDP_ZEROCOPY,
            BindMode::Copy => SocketAddrXdpFlags::XDP_COPY,
        };
    rustix::net::bind(&fd, &SocketAddrXdp::new(flags, spec.ifindex, spec.queue))?;
    Ok(Bound { fd, rx, fill, comp })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_of_up_to_four_queues_is_as_deep_as_a_single_ring() {
        // One queue can carry all the traffic: up to four queues, each has
        // the single-queue depth.
        for q in 1..=4 {
            assert_eq!(rx_frames_per_queue(q), RX_FRAMES, "{q}");
        }
        // Beyond, the interface's budget shared out in powers of two.
        assert_eq!(rx_frames_per_queue(5), RX_FRAMES / 2);
        assert_eq!(rx_frames_per_queue(8), RX_FRAMES / 2);
        assert_eq!(rx_frames_per_queue(16), RX_FRAMES / 4);
        // Many queues: each keeps the floor.
        assert_eq!(rx_frames_per_queue(64), RX_FRAMES_MIN);
        // Nonsense in, the single-queue size out.
        assert_eq!(rx_frames_per_queue(0), RX_FRAMES);
        for ok in [256, 1024, 8192, 32_768] {
            assert_eq!(check_rx_frames(ok), Ok(ok));
        }
        for bad in [0, 128, 1000, 65_536] {
            let e = check_rx_frames(bad).unwrap_err();
            assert!(e.contains("a power of two from 256 to 32768"), "{e}");
        }
        // An operator's depth replaces the policy, however many queues.
        for q in [1, 4, 64] {
            assert_eq!(rx_frames_for(q, Some(1024)), 1024, "{q}");
            assert_eq!(rx_frames_for(q, None), rx_frames_per_queue(q));
        }
        for q in 1..=256 {
            let n = rx_frames_per_queue(q);
            assert!(n.is_power_of_two(), "{q}: {n}");
            assert!(q * n <= RX_FRAMES_IFACE || n == RX_FRAMES_MIN, "{q}: {n}");
        }
    }

    fn split(ready: &[u32], budget: u32, start: usize) -> Vec<u32> {
        let mut take = vec![0; ready.len()];
        split_batch(ready, budget, start, &mut take);
        take
    }

    #[test]
    fn a_batch_is_shared_by_every_queue_holding_frames() {
        // Four busy queues: a quarter each, not the whole batch to one.
        assert_eq!(split(&[1000; 4], 256, 0), [64; 4]);
        // A light queue takes what it has; the busy ones share the rest.
        assert_eq!(split(&[1000, 10, 0, 1000], 256, 0), [123, 10, 0, 123]);
        // The remainder goes from `start` on.
        assert_eq!(split(&[1000; 3], 256, 1), [85, 86, 85]);
        assert_eq!(split(&[1000; 3], 256, 2), [85, 85, 86]);
        // Less waiting than the budget: everything.
        assert_eq!(split(&[5, 0, 7, 0], 256, 3), [5, 0, 7, 0]);
        // One queue: the single ring's batch.
        assert_eq!(split(&[1000], 256, 0), [256]);
        assert_eq!(split(&[1000; 4], 0, 0), [0; 4]);
        assert!(split(&[], 256, 0).is_empty());
        // A budget smaller than the busy queues: a frame each from `start`.
        assert_eq!(split(&[9; 4], 2, 3), [1, 0, 0, 1]);
    }

    #[test]
    fn a_shared_batch_sums_as_one_ring_and_is_level() {
        // Deterministic pseudo-random cases (xorshift).
        let mut x = 0x9e37_79b9_u32;
        let mut rnd = |m: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % m
        };
        for _ in 0..2000 {
            let n = 1 + rnd(8) as usize;
            let ready: Vec<u32> = (0..n).map(|_| rnd(400)).collect();
            let budget = rnd(600);
            let take = split(&ready, budget, rnd(8) as usize);
            let sum: u32 = take.iter().sum();
            assert_eq!(sum, budget.min(ready.iter().sum()), "{ready:?} {budget}");
            assert!(take.iter().zip(&ready).all(|(t, r)| t <= r));
            // Queues left wanting differ by at most one frame, and a
            // satisfied queue got no more than one above them.
            let wanting: Vec<u32> = (0..n)
                .filter(|&k| take[k] < ready[k])
                .map(|k| take[k])
                .collect();
            if let (Some(lo), Some(hi)) = (wanting.iter().min(), wanting.iter().max()) {
                assert!(hi - lo <= 1, "{ready:?} {budget} {take:?}");
                assert!(
                    take.iter().all(|&t| t <= hi + 1),
                    "{ready:?} {budget} {take:?}"
                );
            }
        }
    }

    #[test]
    fn zero_copy_is_tried_only_where_native_xdp_runs() {
        let (native, why) = bind_order(XdpMode::Native);
        assert_eq!(native, &[BindMode::ZeroCopy, BindMode::Copy]);
        assert_eq!(why, None);
        let (generic, why) = bind_order(XdpMode::Generic);
        assert_eq!(generic, &[BindMode::Copy]);
        assert!(why.is_some_and(|w| w.contains("generic")));
    }
}
