//! UMEM and the four AF_XDP rings: memory shared with the kernel (see
//! `xdp/mod.rs` for the principles).

use crate::sockopt;
use rustix::net::xdp::XdpRingOffset;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

// The socket options, addresses and flags of AF_XDP come typed from
// `rustix::net` (`sockopt::set_xdp_*`, `xdp::SocketAddrXdp`); what it
// lacks is here.
pub(super) const SOL_XDP: libc::c_int = 283;
/// Frames one `sendto` kick may transmit in copy mode (Linux ≥ 6.17;
/// older kernels refuse the option and keep their 32).
pub(super) const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
pub(super) const XDP_RING_NEED_WAKEUP: u32 = 1;
pub(super) const XDP_PGOFF_RX_RING: libc::off_t = 0;
pub(super) const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
pub(super) const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
pub(super) const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;
/// Room the kernel keeps in front of a received frame in a chunk
/// (XDP_PACKET_HEADROOM); the UMEM's own headroom is 0.
pub(super) const XDP_PACKET_HEADROOM: usize = 256;

/// RX chunks of an interface with one queue (all in the fill ring); with
/// more, each queue's share (`queue::rx_frames_per_queue`).
pub(super) const RX_FRAMES: u32 = 8192;
/// TX chunks, in the UMEM of the queue the interface transmits on.
pub(super) const TX_FRAMES: u32 = 2048;

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
pub(super) struct Ring {
    pub(super) map: *mut u8,
    pub(super) map_len: usize,
    pub(super) producer: *const AtomicU32,
    pub(super) consumer: *const AtomicU32,
    pub(super) flags: *const AtomicU32,
    pub(super) descs: *mut u8,
    pub(super) idx: RingIdx,
    /// Our side's index (the producer for fill/TX, the consumer for RX/completion).
    pub(super) local: u32,
    /// The last value read of the kernel's index.
    pub(super) cached: u32,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are exactly the mapping made in `map_ring`,
        // unmapped once here.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

impl Ring {
    pub(super) fn producer(&self) -> &AtomicU32 {
        // SAFETY: the producer word lies inside the mapping at the offset the
        // kernel gave (u32-aligned), lives as long as `self`, and is shared
        // with the kernel, hence the atomic view.
        unsafe { &*self.producer }
    }

    pub(super) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    pub(super) fn need_wakeup(&self) -> bool {
        // SAFETY: as for `producer`; the kernel sets the flags word.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: slots free to write (refreshing the consumer index if needed).
    pub(super) fn prod_free(&mut self, want: u32) -> u32 {
        let free = self.idx.free(self.local, self.cached);
        if free >= want {
            return free;
        }
        self.cached = self.consumer().load(Ordering::Acquire);
        self.idx.free(self.local, self.cached)
    }

    pub(super) fn prod_submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }

    /// Consumer side: entries ready to read, up to `want` of them known
    /// without reading the kernel's index again. The index is read again
    /// whenever the cached one holds fewer than `want`: a batch is not cut
    /// short by a stale count (and then taken for an empty ring).
    pub(super) fn cons_ready(&mut self, want: u32) -> u32 {
        let ready = self.idx.ready(self.cached, self.local);
        if ready >= want {
            return ready;
        }
        self.cached = self.producer().load(Ordering::Acquire);
        self.idx.ready(self.cached, self.local)
    }

    pub(super) fn cons_release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }

    /// Entries the kernel has not consumed yet (producer rings).
    pub(super) fn unconsumed(&mut self) -> u32 {
        self.cached = self.consumer().load(Ordering::Acquire);
        self.local.wrapping_sub(self.cached)
    }

    /// Address descriptor (fill/completion rings: one u64 each).
    pub(super) fn addr_ptr(&self, idx: u32) -> *mut u64 {
        // SAFETY: `slot < size` and the mapping holds `size` u64 descriptors
        // from `descs` (the length was computed from them in `map_ring`).
        unsafe { self.descs.cast::<u64>().add(self.idx.slot(idx)) }
    }

    /// Packet descriptor (RX/TX rings: struct xdp_desc each).
    pub(super) fn desc_ptr(&self, idx: u32) -> *mut libc::xdp_desc {
        // SAFETY: as for `addr_ptr`, with `size` xdp_desc descriptors.
        unsafe { self.descs.cast::<libc::xdp_desc>().add(self.idx.slot(idx)) }
    }
}

/// Anonymous memory registered as the UMEM.
pub(super) struct Umem {
    pub(super) base: *mut u8,
    pub(super) len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Umem::new`, unmapped once; the
        // sockets that registered or share it are closed first (field order
        // of `RxQueue` and `XdpSocket`).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

impl Umem {
    /// `len` bytes of anonymous memory, populated.
    pub fn new(len: usize) -> io::Result<Umem> {
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
        Ok(Umem {
            base: base.cast(),
            len,
        })
    }
}

/// setsockopt at SOL_XDP.
pub fn set<T>(fd: RawFd, name: libc::c_int, val: &T) -> io::Result<()> {
    sockopt::setsockopt(fd, SOL_XDP, name, val)
}

pub(super) fn map_ring(
    fd: RawFd,
    off: &XdpRingOffset,
    pgoff: libc::off_t,
    size: u32,
    desc_bytes: usize,
) -> io::Result<Ring> {
    // Need-wakeup lives in the flags word (XDP_MMAP_OFFSETS v2, Linux ≥ 5.4).
    let flags_at = off.flags.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "kernel without ring flags (XDP_MMAP_OFFSETS v1)",
        )
    })?;
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
            map.add(flags_at as usize).cast::<AtomicU32>(),
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

/// Chunk size for an interface MTU: the frame (MTU + Ethernet + one VLAN
/// tag) after the kernel's receive headroom, in 2 or 4 KiB.
pub fn chunk_bytes(mtu: usize) -> Option<usize> {
    let need = XDP_PACKET_HEADROOM + mtu + 18;
    [2048, 4096].into_iter().find(|&c| need <= c)
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

    /// A ring over anonymous memory laid out as the kernel's (producer,
    /// consumer, flags, then descriptors), the test playing the kernel.
    fn anon_ring(size: u32) -> Ring {
        let map_len = 64 + size as usize * std::mem::size_of::<libc::xdp_desc>();
        // The ring's Drop unmaps it, not the Umem's.
        let umem = std::mem::ManuallyDrop::new(Umem::new(map_len).unwrap());
        let map = umem.base;
        // SAFETY: the offsets lie inside the fresh mapping, u32-aligned.
        let (producer, consumer, flags, descs) = unsafe {
            (
                map.cast::<AtomicU32>(),
                map.add(4).cast::<AtomicU32>(),
                map.add(8).cast::<AtomicU32>(),
                map.add(64),
            )
        };
        Ring {
            map,
            map_len,
            producer,
            consumer,
            flags,
            descs,
            idx: RingIdx { size },
            local: 0,
            cached: 0,
        }
    }

    #[test]
    fn a_consumer_reads_the_kernels_index_again_when_its_count_is_short() {
        let mut rx = anon_ring(1024);
        rx.producer().store(300, Ordering::Release);
        assert_eq!(rx.cons_ready(256), 300);
        rx.cons_release(256);
        // The kernel wrote 200 more meanwhile: a batch of 256 sees all 244,
        // not the 44 left of the cached count.
        rx.producer().store(500, Ordering::Release);
        assert_eq!(rx.cons_ready(256), 244);
        // A smaller want is answered from the cache, without reading.
        rx.producer().store(600, Ordering::Release);
        assert_eq!(rx.cons_ready(200), 244);
        assert_eq!(rx.cons_ready(245), 344);
    }

    #[test]
    fn chunk_size_fits_the_frame_after_headroom() {
        assert_eq!(chunk_bytes(1500), Some(2048));
        assert_eq!(chunk_bytes(1774), Some(2048));
        assert_eq!(chunk_bytes(1775), Some(4096));
        assert_eq!(chunk_bytes(9000), None);
    }
}
