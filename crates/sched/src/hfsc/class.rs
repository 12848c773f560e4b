//! One HFSC class and the map from class ids to slots.

use super::curve::{Curve, Runtime};
use crate::{ClassId, Qdisc, QueueStats};
use std::collections::BTreeMap;

/// Slot of the root class (the link) in the class vector.
pub(crate) const ROOT: u32 = 0;

/// Where a real-time leaf sits in the eligible structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RtSlot {
    /// Not backlogged, or no real-time curve.
    Out,
    /// Backlogged, eligible time still in the future: keyed by `e`.
    Pending,
    /// Eligible: keyed by deadline `d`.
    Ready,
}

/// Where an active class sits among its parent's children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LsSlot {
    /// Not link-sharing active.
    Out,
    /// Fit (`f <= now` when placed): keyed by vt.
    Fit,
    /// Held by an upper limit (its own or all its children's): keyed by `f`.
    Held,
}

/// State of one class. Field names follow the paper / ALTQ where they have
/// one; times in ns, service in bytes.
///
/// `repr(C)` keeps the declared order, which groups what one dequeue touches
/// per level (link-sharing state, then the leaf's queue and real-time state)
/// into the first few cache lines; configuration and counters read rarely sit
/// at the end. With a hundred classes the tree no longer fits in L1; this
/// order cut the L1 misses of the link-sharing update from 3 to under 1 per
/// packet (cachegrind, 100 classes). Aligned to a line so that grouping
/// holds for every class of the table, not only for the allocator's luck.
#[repr(C, align(64))]
pub(crate) struct Class {
    // Link-sharing criterion: read and written at every level, every packet.
    /// Virtual time: the key of this class in its parent's `fit` heap.
    pub(crate) vt: u64,
    /// Bytes served by either criterion (this class and its subtree).
    pub(crate) total: u64,
    /// Catch-up applied when the class was skipped (see `update_vf`).
    pub(crate) vtadj: u64,
    /// Fit time: max(own upper-limit fit time, children's smallest).
    pub(crate) f: u64,
    /// Upper-limit fit time of this class alone.
    pub(crate) myf: u64,
    /// Smallest vt handed out among the children this period.
    pub(crate) cvtmin: u64,
    pub(crate) parent: Option<u32>,
    /// Active (link-sharing backlogged) children; 0/1 for a leaf.
    pub(crate) nactive: u32,
    pub(crate) ls_slot: LsSlot,
    pub(crate) rt_slot: RtSlot,
    /// The leaf holds packets and takes part in scheduling.
    pub(crate) backlogged: bool,
    /// Cost of the head packet of a backlogged leaf (from `peek_len`).
    pub(crate) head_cost: u32,
    pub(crate) virt: Runtime,
    pub(crate) ls: Option<Curve>,
    /// Some for leaves: only leaves hold packets.
    pub(crate) leaf: Option<Box<dyn Qdisc>>,

    // Upper limit and real-time criterion (leaves only for the latter).
    pub(crate) ul: Option<Curve>,
    pub(crate) ulimit: Runtime,
    /// Bytes served by the real-time criterion.
    pub(crate) cumul: u64,
    /// Eligible time and deadline of the head packet.
    pub(crate) e: u64,
    pub(crate) d: u64,
    pub(crate) deadline: Runtime,
    pub(crate) eligible: Runtime,
    pub(crate) rt: Option<Curve>,

    // Per backlog period, configuration, counters.
    /// Backlog periods of this class, and of its parent as last seen.
    pub(crate) vtperiod: u64,
    pub(crate) parentperiod: u64,
    /// Largest vt a child had when it went passive (ALTQ's `cvtmax`).
    pub(crate) cvtoff: u64,
    pub(crate) id: ClassId,
    pub(crate) children: Vec<u32>,
    pub(crate) stats: QueueStats,
}

impl Class {
    pub(crate) fn new(
        id: ClassId,
        parent: Option<u32>,
        rt: Option<Curve>,
        ls: Option<Curve>,
        ul: Option<Curve>,
        leaf: Option<Box<dyn Qdisc>>,
    ) -> Class {
        let mut c = Class {
            id,
            parent,
            children: Vec::new(),
            leaf,
            rt,
            ls,
            ul,
            head_cost: 0,
            backlogged: false,
            cumul: 0,
            e: 0,
            d: 0,
            deadline: Runtime::default(),
            eligible: Runtime::default(),
            rt_slot: RtSlot::Out,
            total: 0,
            vt: 0,
            vtadj: 0,
            virt: Runtime::default(),
            nactive: 0,
            vtperiod: 0,
            parentperiod: 0,
            cvtmin: 0,
            cvtoff: 0,
            f: 0,
            ls_slot: LsSlot::Out,
            myf: 0,
            ulimit: Runtime::default(),
            stats: QueueStats::default(),
        };
        c.reset_runtime();
        c
    }

    /// Back to the state of a class that never sent (after a purge); the
    /// curves, children and statistics stay.
    pub(crate) fn reset_runtime(&mut self) {
        self.head_cost = 0;
        self.backlogged = false;
        self.cumul = 0;
        self.e = 0;
        self.d = 0;
        self.rt_slot = RtSlot::Out;
        self.total = 0;
        self.vt = 0;
        self.vtadj = 0;
        self.nactive = 0;
        self.vtperiod = 0;
        self.parentperiod = 0;
        self.cvtmin = 0;
        self.cvtoff = 0;
        self.f = 0;
        self.ls_slot = LsSlot::Out;
        self.myf = 0;
        let anchor = |c: &Option<Curve>| {
            c.as_ref()
                .map(|c| Runtime::new(c, 0, 0))
                .unwrap_or_default()
        };
        self.deadline = anchor(&self.rt);
        self.eligible = self.deadline;
        self.virt = anchor(&self.ls);
        self.ulimit = anchor(&self.ul);
    }

    pub(crate) fn is_leaf(&self) -> bool {
        self.leaf.is_some()
    }
}

/// Class id → slot. Ids below `DENSE_IDS` (what an engine numbering its queues
/// uses) are a direct table lookup; larger ones fall back to a B-tree.
#[derive(Default)]
pub(crate) struct ClassIndex {
    dense: Vec<u32>,
    sparse: BTreeMap<u32, u32>,
}

const DENSE_IDS: u32 = 1 << 16;
const NONE: u32 = u32::MAX;

impl ClassIndex {
    pub(crate) fn get(&self, id: ClassId) -> Option<u32> {
        if id.0 < DENSE_IDS {
            match self.dense.get(id.0 as usize) {
                Some(&s) if s != NONE => Some(s),
                _ => None,
            }
        } else {
            self.sparse.get(&id.0).copied()
        }
    }

    pub(crate) fn insert(&mut self, id: ClassId, slot: u32) {
        if id.0 < DENSE_IDS {
            let i = id.0 as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, NONE);
            }
            self.dense[i] = slot;
        } else {
            self.sparse.insert(id.0, slot);
        }
    }
}
