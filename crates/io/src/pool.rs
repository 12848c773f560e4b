//! A free list of frame buffers.
//!
//! # Principles
//! The engine takes frames by value (`Vec<u8>`) and hands them back through
//! `poll_tx`/`poll_dropped`; returning those vectors here means the steady
//! state allocates nothing. The pool is bounded (`max_buffers`) so a burst
//! cannot pin memory forever, and buffers that grew beyond `max_capacity`
//! (a rare jumbo frame) are released rather than kept. Buffers smaller than
//! `buffer_capacity` (the engine's right-sized copies of small queued
//! frames) are released too: kept, they would be grown again by the next
//! full-sized frame, and the pool would hold a mix it cannot size.

/// Bounded free list of byte buffers.
#[derive(Debug)]
pub struct Pool {
    free: Vec<Vec<u8>>,
    max_buffers: usize,
    buffer_capacity: usize,
    max_capacity: usize,
    allocated: u64,
}

impl Pool {
    /// `buffer_capacity`: capacity of fresh buffers (one MTU-sized frame);
    /// `max_buffers`: how many free buffers are kept at most.
    pub fn new(buffer_capacity: usize, max_buffers: usize) -> Pool {
        Pool {
            free: Vec::with_capacity(max_buffers),
            max_buffers,
            buffer_capacity,
            max_capacity: buffer_capacity.saturating_mul(4).max(65536),
            allocated: 0,
        }
    }

    /// A buffer holding a copy of `data`.
    pub fn take_copy(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = match self.free.pop() {
            Some(v) => v,
            None => {
                self.allocated += 1;
                Vec::with_capacity(self.buffer_capacity.max(data.len()))
            }
        };
        v.clear();
        v.extend_from_slice(data);
        v
    }

    /// An empty buffer with at least `len` bytes of zeroed length, for
    /// receiving into.
    pub fn take_zeroed(&mut self, len: usize) -> Vec<u8> {
        let mut v = match self.free.pop() {
            Some(v) => v,
            None => {
                self.allocated += 1;
                Vec::with_capacity(self.buffer_capacity.max(len))
            }
        };
        v.clear();
        v.resize(len, 0);
        v
    }

    /// Gives a buffer back; kept unless the pool is full or it is oversized
    /// or undersized.
    pub fn put(&mut self, v: Vec<u8>) {
        if self.free.len() < self.max_buffers
            && v.capacity() <= self.max_capacity
            && v.capacity() >= self.buffer_capacity
        {
            self.free.push(v);
        }
    }

    /// Free buffers currently held.
    pub fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Buffers allocated since creation (a steady state keeps this flat).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Capacity of a fresh buffer.
    pub fn buffer_capacity(&self) -> usize {
        self.buffer_capacity
    }

    /// Most free buffers kept.
    pub fn max_buffers(&self) -> usize {
        self.max_buffers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycles_without_allocating() {
        let mut p = Pool::new(2048, 8);
        let a = p.take_copy(&[1, 2, 3]);
        assert_eq!(a, vec![1, 2, 3]);
        assert_eq!(p.allocated(), 1);
        let ptr = a.as_ptr();
        p.put(a);
        assert_eq!(p.free_len(), 1);
        let b = p.take_copy(&[9; 100]);
        assert_eq!(b.len(), 100);
        assert!(b.iter().all(|&x| x == 9));
        assert_eq!(b.as_ptr(), ptr, "the same allocation is reused");
        assert_eq!(p.allocated(), 1);
        p.put(b);
        let c = p.take_zeroed(64);
        assert_eq!(c, vec![0; 64], "recycled buffers are cleared");
    }

    #[test]
    fn bounded_and_drops_oversized() {
        let mut p = Pool::new(2048, 2);
        for _ in 0..5 {
            p.put(Vec::with_capacity(2048));
        }
        assert_eq!(p.free_len(), 2, "never more than max_buffers");
        let mut q = Pool::new(2048, 4);
        q.put(Vec::with_capacity(1 << 20));
        assert_eq!(q.free_len(), 0, "a jumbo buffer is released, not pinned");
        q.put(vec![0u8; 60]);
        assert_eq!(q.free_len(), 0, "a right-sized copy is released, not kept");
    }

    #[test]
    fn steady_state_is_flat() {
        let mut p = Pool::new(1514, 64);
        for round in 0..100u32 {
            let bufs: Vec<Vec<u8>> = (0..32).map(|i| p.take_copy(&[i as u8; 60])).collect();
            for b in bufs {
                p.put(b);
            }
            if round > 0 {
                assert_eq!(p.allocated(), 32, "no allocation after the first round");
            }
        }
    }
}
