//! FQ-CoDel's two lists of flows (RFC 8290 §4.2) and what a flow's run on
//! them has done: the marks that decide whether it was sparse.

use super::slab::NIL;
use super::{FqCodel, FRAC_BITS};

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum OnList {
    None,
    New,
    Old,
}

/// Marks of a flow's active run (one byte: [`Flow`] fills its cache line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run(u8);

impl Run {
    pub(super) const EMPTY: Run = Run(0);
    /// Its phase was spread (isolation only).
    pub(super) const SPREAD: u8 = 1;
    /// A newcomer whose credit did not cover its packet: until it empties
    /// it sends when its credit covers its packet, not as soon as it is
    /// positive (isolation only).
    pub(super) const WAITS: u8 = 2;
    /// A packet over the sparse size ([`SPARSE_SHARE`]) left: the run is
    /// not sparse ([`FqCodel::sparse_run`]).
    pub(super) const LARGE: u8 = 4;
    /// Packets sent, saturating at seven (three bits).
    const SENT_SHIFT: u32 = 3;
    const SENT_MASK: u8 = 7 << Self::SENT_SHIFT;

    pub(super) fn has(self, mark: u8) -> bool {
        self.0 & mark != 0
    }

    pub(super) fn set(&mut self, mark: u8) {
        self.0 |= mark;
    }

    pub(super) fn sent(self) -> u8 {
        (self.0 & Self::SENT_MASK) >> Self::SENT_SHIFT
    }

    pub(super) fn count_sent(&mut self) {
        let n = (self.sent() + 1).min(7);
        self.0 = (self.0 & !Self::SENT_MASK) | (n << Self::SENT_SHIFT);
    }
}

/// A run of a flow on the new list that sends at most a quantum over this
/// (378 bytes of the default 1514), or a few packets each at most that
/// size, is sparse ([`FqCodel::sparse_run`]).
pub(super) const SPARSE_SHARE: i64 = 4;

/// A run of at most this many small packets is sparse whatever their
/// bytes: those of a call that queue behind the frame on the link and the
/// one the shaper has taken to send next (two full frames at 450 kbit/s,
/// 54 ms, against a packet every 20 ms). A train of ACKs is not: three
/// are under a quarter quantum anyway, and more are the bytes' rule.
pub(super) const SPARSE_PACKETS: u8 = 3;

/// Intrusive singly linked list of flows; only the head is ever removed.
#[derive(Clone, Copy, Debug)]
pub(super) struct FlowList {
    pub(super) head: u32,
    pub(super) tail: u32,
}

impl FlowList {
    pub(super) const EMPTY: FlowList = FlowList {
        head: NIL,
        tail: NIL,
    };
}

impl FqCodel {
    #[inline]
    pub(super) fn push_tail(&mut self, which: OnList, idx: u32) {
        if which == OnList::New {
            self.count_new(idx, 1);
        }
        let list = match which {
            OnList::New => &mut self.new_flows,
            OnList::Old => &mut self.old_flows,
            OnList::None => return,
        };
        self.flows[idx as usize].0.next = NIL;
        self.flows[idx as usize].0.list = which;
        if list.tail == NIL {
            list.head = idx;
        } else {
            self.flows[list.tail as usize].0.next = idx;
        }
        list.tail = idx;
    }

    #[inline]
    pub(super) fn pop_head(&mut self, which: OnList) -> Option<u32> {
        let list = match which {
            OnList::New => &mut self.new_flows,
            OnList::Old => &mut self.old_flows,
            OnList::None => return None,
        };
        let idx = list.head;
        if idx == NIL {
            return None;
        }
        list.head = self.flows[idx as usize].0.next;
        if list.head == NIL {
            list.tail = NIL;
        }
        self.flows[idx as usize].0.next = NIL;
        self.flows[idx as usize].0.list = OnList::None;
        if which == OnList::New {
            self.count_new(idx, -1);
        }
        Some(idx)
    }

    /// Whether flow `idx`, emptied on the new list, was sparse in the run
    /// that ends: each packet it sent was at most a [`SPARSE_SHARE`]th of
    /// its quantum, together at most that much or at most
    /// [`SPARSE_PACKETS`] of them, and CoDel is not dropping from it.
    ///
    /// A sparse flow leaves the lists instead of joining the old one, so
    /// its next packet is new again and waits only for the packet on the
    /// link (CAKE's sparse set). Under RFC 8290's rule a call's packet
    /// every 20 ms finds its flow still on the old list whenever a round of
    /// the bulk flows' quanta takes longer than that (four full frames at
    /// 450 kbit/s: 108 ms), and waits for the round. Bytes, not packets,
    /// bound a train of ACKs, so a download's ACKs do not all go ahead of a
    /// ping. The price, as in CAKE: a flow of small packets that empties
    /// within each run goes first however many there are; a bulk flow, or
    /// one of full frames, never does.
    ///
    /// A run's quantum is known only without isolation (with it, it is a
    /// host's share), so there no flow is sparse and RFC 8290's rule stands.
    pub(super) fn sparse_run(&self, idx: u32) -> bool {
        if self.params.isolation.is_on() {
            return false;
        }
        let Some(f) = self.flows.get(idx as usize).map(|l| &l.0) else {
            return false;
        };
        let q = i64::from(self.params.quantum_bytes) << FRAC_BITS;
        let small = q - f.deficit <= q / SPARSE_SHARE || f.run.sent() <= SPARSE_PACKETS;
        !f.vars.dropping() && !f.run.has(Run::LARGE) && small
    }
}
