//! One memory account for every queued frame (see [`DEFAULT_MEMORY_LIMIT`]).

use super::*;

/// Memory held by queued frames
///
/// # Principles
/// - What is counted is what is held: every queued frame is charged its
///   [`Packet::truesize`] (buffer capacity plus a fixed per-frame overhead,
///   Linux's `skb->truesize`), from the moment it enters a queue (tree or
///   passthrough) until it leaves through `poll_tx` or is handed back. The
///   sum is exact because nothing changes a buffer's capacity meanwhile;
///   with every queue empty it is zero (checked by [`crate::testing`]).
/// - One global cap, [`DEFAULT_MEMORY_LIMIT`] unless set: a frame that
///   would take the held memory over it is refused at the door and counted
///   as [`DropCause::MemoryLimit`] on its egress interface. Per-queue limits
///   (qlimit, FQ-CoDel's `memory_limit`) bound each queue; this one bounds
///   their sum, whatever the configuration. It is a safety net, not an AQM:
///   it refuses the newcomer (tail drop) rather than choosing a victim.
/// - Hold what the frame needs: the I/O layer receives into MTU-sized pool
///   buffers. A frame that must wait behind others (its egress already has
///   a backlog) and whose buffer is mostly empty is copied into a buffer of
///   its own size; the big one goes back to the caller through
///   [`Engine::poll_spare`] for reuse. A frame that finds its queue empty
///   usually leaves in the same turn and is not copied.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 << 20;
/// A queued frame's buffer is right-sized when it wastes at least this many
/// bytes and more than its own length: a 60-byte ACK in a 1518-byte buffer
/// is, a full-sized frame never is.
const SHRINK_MIN_WASTE: usize = 512;
/// Emptied big buffers kept for `poll_spare`; beyond this they are freed.
const SPARE_CAP: usize = 256;

/// Memory held by queued frames, the engine's cap on it, and how often it
/// was reached (`sluice show info`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// Sum of [`Packet::truesize`] over every queued frame, now.
    pub held_bytes: u64,
    /// Highest `held_bytes` since start.
    pub peak_bytes: u64,
    /// The cap on `held_bytes`.
    pub limit_bytes: u64,
    /// Frames refused because of the cap, all interfaces.
    pub limit_drops: u64,
    /// Queued frames copied into a right-sized buffer.
    pub right_sized: u64,
    /// Frames queued now, all interfaces.
    pub frames: u64,
}

/// The account: nothing else writes `held_bytes`.
impl MemoryReport {
    /// Whether a frame of `size` bytes ([`Packet::truesize`]) may be held
    /// without going over the cap.
    pub(super) fn fits(&self, size: u64) -> bool {
        self.held_bytes.saturating_add(size) <= self.limit_bytes
    }

    /// A frame of `size` bytes begins to wait (any of the three places).
    pub(super) fn charge(&mut self, size: u64) {
        self.held_bytes += size;
        self.peak_bytes = self.peak_bytes.max(self.held_bytes);
    }

    /// A frame of `size` bytes stopped waiting (sent, dropped).
    #[inline]
    pub(super) fn release(&mut self, size: u64) {
        self.held_bytes = self.held_bytes.saturating_sub(size);
    }
}

impl Engine {
    /// A frame refused at the cap, on `egress`.
    pub(super) fn refuse_over_cap(&mut self, egress: usize, pkt: Packet) -> Rx {
        self.memory.limit_drops += 1;
        self.ifaces[egress].counters.memory_drops += 1;
        self.give_back(egress, pkt.data, DropCause::MemoryLimit);
        Rx::Dropped(DropCause::MemoryLimit)
    }

    /// The buffer a frame that is about to wait keeps: its own, unless that
    /// is mostly empty (see [`DEFAULT_MEMORY_LIMIT`]'s principles).
    pub(super) fn right_size(&mut self, mut frame: Vec<u8>) -> Vec<u8> {
        let waste = frame.capacity() - frame.len();
        if waste < SHRINK_MIN_WASTE || waste <= frame.len() {
            return frame;
        }
        let small = frame.as_slice().to_vec();
        self.memory.right_sized += 1;
        if self.spare.len() < SPARE_CAP {
            frame.clear();
            self.spare.push(frame);
        }
        small
    }

    /// Caps the memory queued frames may hold (bytes of
    /// [`Packet::truesize`]); [`DEFAULT_MEMORY_LIMIT`] until set. Frames
    /// already queued stay; new ones are refused while over.
    pub fn set_memory_limit(&mut self, bytes: u64) {
        self.memory.limit_bytes = bytes;
    }

    /// Memory held by queued frames and its cap.
    pub fn memory(&self) -> MemoryReport {
        MemoryReport {
            frames: (0..self.ifaces.len()).map(|i| self.queued(i) as u64).sum(),
            ..self.memory
        }
    }
}
