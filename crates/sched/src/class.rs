//! Class administration the classful disciplines share (DRR, WF2Q+, CBQ):
//! why a class is refused ([`ClassError`]), ids to slots and the default
//! class ([`ClassIndex`]), dummynet's weight range, the refusal of a packet
//! without a class, and a class's queue with its counters ([`Counted`]).
//! HFSC, with its own tree and errors, keeps its own.

use crate::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, QueueStats};
use std::collections::HashMap;

mod counted;
pub(crate) use counted::{resident_from_totals, Counted, Totals};

/// Why a class could not be added or chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassError {
    /// A class with this id exists already.
    Duplicate(ClassId),
    /// No such class (for `set_default`, or as a parent).
    Unknown(ClassId),
    /// Weight outside 1..=100 (dummynet's range).
    Weight(u32),
    /// Priority outside 0..=7 (CBQ).
    Priority(u8),
    /// The class has no queue of its own (an interior CBQ class): it cannot
    /// be the default or receive packets.
    NotALeaf(ClassId),
    /// The class has a queue of its own, so it cannot be a parent (CBQ).
    HasQueue(ClassId),
}

impl std::fmt::Display for ClassError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClassError::Duplicate(c) => write!(f, "class {} defined twice", c.0),
            ClassError::Unknown(c) => write!(f, "no class {}", c.0),
            ClassError::Weight(w) => write!(f, "weight {w} out of range: 1..=100"),
            ClassError::Priority(p) => write!(f, "priority {p} out of range: 0..=7"),
            ClassError::NotALeaf(c) => write!(f, "class {} has no queue of its own", c.0),
            ClassError::HasQueue(c) => {
                write!(f, "class {} has a queue, it cannot have children", c.0)
            }
        }
    }
}

impl std::error::Error for ClassError {}

/// Largest weight dummynet accepts.
pub const MAX_WEIGHT: u32 = 100;

/// Resolves a packet's class to an index: its own class, else the default.
pub(crate) fn route(
    index: &HashMap<ClassId, usize>,
    default: Option<usize>,
    class: ClassId,
) -> Option<usize> {
    index.get(&class).copied().or(default)
}

/// Where DRR and WF2Q+ find a class: ids to slots, the default slot, and
/// the packets refused for want of either.
#[derive(Default)]
pub(crate) struct ClassIndex {
    slots: HashMap<ClassId, usize>,
    default: Option<usize>,
    refused: QueueStats,
}

impl ClassIndex {
    /// Checks a new class (weight in 1..=[`MAX_WEIGHT`], id not taken) and
    /// gives it `slot`.
    pub(crate) fn admit(
        &mut self,
        id: ClassId,
        weight: u32,
        slot: usize,
    ) -> Result<(), ClassError> {
        check_weight(weight)?;
        if self.slots.contains_key(&id) {
            return Err(ClassError::Duplicate(id));
        }
        self.slots.insert(id, slot);
        Ok(())
    }

    /// The slot of class `id`.
    pub(crate) fn slot(&self, id: ClassId) -> Result<usize, ClassError> {
        self.slots.get(&id).copied().ok_or(ClassError::Unknown(id))
    }

    /// Packets whose class is unknown go to `id`.
    pub(crate) fn set_default(&mut self, id: ClassId) -> Result<(), ClassError> {
        self.default = Some(self.slot(id)?);
        Ok(())
    }

    /// A packet's slot: its own class's, else the default.
    #[inline]
    pub(crate) fn route(&self, class: ClassId) -> Option<usize> {
        route(&self.slots, self.default, class)
    }

    /// Refuses `pkt`, which [`ClassIndex::route`] found no slot for, and
    /// counts it (there is no class to count it in).
    pub(crate) fn refuse(&mut self, pkt: Packet, drops: &mut Drops) -> Enqueue {
        self.refused.on_drop(&pkt, DropReason::NoClass);
        reject_no_class(pkt, drops)
    }

    /// The packets [`ClassIndex::refuse`] refused.
    pub(crate) fn refused(&self) -> &QueueStats {
        &self.refused
    }
}

/// A weight dummynet accepts: 1..=[`MAX_WEIGHT`].
pub(crate) fn check_weight(weight: u32) -> Result<(), ClassError> {
    if (1..=MAX_WEIGHT).contains(&weight) {
        Ok(())
    } else {
        Err(ClassError::Weight(weight))
    }
}

/// Gives a packet back as having no class.
pub(crate) fn reject_no_class(pkt: Packet, drops: &mut Drops) -> Enqueue {
    drops.push(Dropped {
        pkt,
        reason: DropReason::NoClass,
    });
    Enqueue::Rejected
}
