//! A child discipline as a classful parent stores it.
//!
//! # Principles
//! - A [`Fifo`] (ALTQ's default leaf, and what nearly every class gets) is
//!   stored inline in the parent's class table: no pointer to chase to a
//!   separate allocation, and no virtual call on the packet path, so the
//!   FIFO's enqueue and dequeue fold into the parent's. Any other
//!   discipline stays behind its `Box<dyn Qdisc>`.
//! - Transparent: parents keep taking `Box<dyn Qdisc>`; [`Leaf::new`]
//!   recognizes a boxed FIFO and unboxes it. Behaviour and statistics are
//!   the child's own either way — the enum only changes where it lives and
//!   how it is called.

use crate::fifo::Fifo;
use crate::{ClassId, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::any::Any;

// Inline on purpose: the FIFO variant is the point of this type.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Leaf {
    Fifo(Fifo),
    Boxed(Box<dyn Qdisc>),
}

impl Leaf {
    /// Stores `q` inline if it is a FIFO, else keeps the box.
    pub(crate) fn new(q: Box<dyn Qdisc>) -> Leaf {
        if (q.as_ref() as &dyn Any).is::<Fifo>() {
            let any: Box<dyn Any + Send> = q;
            match any.downcast::<Fifo>() {
                Ok(f) => return Leaf::Fifo(*f),
                // `is` said it is one; nothing else can come back here.
                Err(_) => unreachable!("a Fifo that does not downcast to Fifo"),
            }
        }
        Leaf::Boxed(q)
    }

    pub(crate) fn as_dyn(&self) -> &dyn Qdisc {
        match self {
            Leaf::Fifo(f) => f,
            Leaf::Boxed(q) => q.as_ref(),
        }
    }

    #[inline]
    pub(crate) fn enqueue(&mut self, pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        match self {
            Leaf::Fifo(f) => f.enqueue(pkt, now, drops),
            Leaf::Boxed(q) => q.enqueue(pkt, now, drops),
        }
    }

    #[inline]
    pub(crate) fn dequeue(&mut self, now: Instant, drops: &mut Drops) -> Option<Packet> {
        match self {
            Leaf::Fifo(f) => f.dequeue(now, drops),
            Leaf::Boxed(q) => q.dequeue(now, drops),
        }
    }

    #[inline]
    pub(crate) fn peek_len(&mut self, now: Instant, drops: &mut Drops) -> Option<u32> {
        match self {
            Leaf::Fifo(f) => f.peek_len(now, drops),
            Leaf::Boxed(q) => q.peek_len(now, drops),
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Leaf::Fifo(f) => f.is_empty(),
            Leaf::Boxed(q) => q.is_empty(),
        }
    }

    pub(crate) fn purge(&mut self, drops: &mut Drops) {
        match self {
            Leaf::Fifo(f) => f.purge(drops),
            Leaf::Boxed(q) => q.purge(drops),
        }
    }

    pub(crate) fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        self.as_dyn().visit_stats(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codel::{self, Codel};
    use crate::fifo;

    #[test]
    fn an_inline_fifo_costs_no_more_than_a_fifo() {
        // The discriminant lives in a niche of the FIFO, not in front of it.
        assert_eq!(std::mem::size_of::<Leaf>(), std::mem::size_of::<Fifo>());
    }

    #[test]
    fn a_boxed_fifo_is_unboxed_and_others_stay_boxed() {
        let f: Box<dyn Qdisc> = Box::new(Fifo::new(fifo::Params::default()));
        assert!(matches!(Leaf::new(f), Leaf::Fifo(_)));
        let c: Box<dyn Qdisc> = Box::new(Codel::new(codel::Params::default(), 10));
        assert!(matches!(Leaf::new(c), Leaf::Boxed(_)));
    }

    #[test]
    fn an_unboxed_fifo_keeps_its_packets_and_limits() {
        let mut q = Fifo::new(fifo::Params {
            limit_packets: 2,
            limit_bytes: None,
        });
        let mut drops = Vec::new();
        q.enqueue(
            Packet::synthetic(1, 100, 0, ClassId::ROOT),
            Instant(5),
            &mut drops,
        );
        let mut leaf = Leaf::new(Box::new(q));
        assert_eq!(
            (leaf.as_dyn().len(), leaf.as_dyn().backlog_bytes()),
            (1, 100)
        );
        let p = Packet::synthetic(2, 100, 0, ClassId::ROOT);
        assert_eq!(leaf.enqueue(p, Instant(6), &mut drops), Enqueue::Queued);
        let p = Packet::synthetic(3, 100, 0, ClassId::ROOT);
        assert_eq!(leaf.enqueue(p, Instant(7), &mut drops), Enqueue::Rejected);
        let out: Vec<u64> = std::iter::from_fn(|| leaf.dequeue(Instant(8), &mut drops))
            .map(|p| p.id)
            .collect();
        assert_eq!(out, vec![1, 2]);
        let mut seen = Vec::new();
        leaf.visit_stats(&mut |id, st| seen.push((id, st.enq_packets, st.total_drops())));
        assert_eq!(seen, vec![(ClassId::ROOT, 2, 1)]);
    }
}
