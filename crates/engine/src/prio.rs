//! The egress queue of an interface without a queue tree: pf's `set prio`.
//!
//! # Principles
//!
//! - **OpenBSD's interface priority queue** (pf.conf(5), "set prio"; since
//!   OpenBSD 5.5 every interface sends through eight FIFO bands): a packet
//!   goes to the band of the priority its rules set (`set prio N`, 0 lowest
//!   to 7 highest; [`DEFAULT_PRIO`] when none did). With the pair form
//!   `set prio (N, M)` the classifier already chose M for packets with a
//!   low-delay ToS and TCP ACKs without data. The highest non-empty band
//!   sends first; within a band, arrival order.
//! - **When it matters.** Without a queue tree sluice does not shape: a
//!   frame waits here only while the interface's transmit ring is full (a
//!   slower egress link, a busy NIC). Then the bands decide who waits.
//!   An interface with a queue tree uses its queues and ignores `set prio`,
//!   as OpenBSD does where queueing is configured.
//! - **Bounded.** At most [`LIMIT`] frames in all, a full TX ring's worth
//!   and no bloated buffer of its own. When full, a newcomer displaces the
//!   newest frame of the lowest band below its own (OpenBSD's `priq_enq`
//!   does the same); with none below, the newcomer is refused.

use sluice_sched::Packet;
use std::collections::VecDeque;

/// Frames held in all.
pub const LIMIT: usize = 1024;
/// The band of a packet no rule gave a priority (OpenBSD's default).
pub const DEFAULT_PRIO: u8 = 3;
const BANDS: usize = 8;

/// Eight FIFO bands, highest first out.
#[derive(Default)]
pub struct PrioQueue {
    bands: [VecDeque<Packet>; BANDS],
    len: usize,
}

/// What became of a packet offered to [`PrioQueue::push`].
#[derive(Debug)]
pub enum Push {
    Queued,
    /// Queued in the place of this one, from a lower band.
    Displaced(Packet),
    /// Full, and nothing below it: refused.
    Refused(Packet),
}

impl PrioQueue {
    /// Queues `pkt` in band `prio` (values above 7 count as 7).
    pub fn push(&mut self, prio: u8, pkt: Packet) -> Push {
        let band = usize::from(prio).min(BANDS - 1);
        if self.len >= LIMIT {
            let Some(low) = (0..band).find(|&b| !self.bands[b].is_empty()) else {
                return Push::Refused(pkt);
            };
            let out = self.bands[low].pop_back().expect("non-empty band");
            self.bands[band].push_back(pkt);
            return Push::Displaced(out);
        }
        self.bands[band].push_back(pkt);
        self.len += 1;
        Push::Queued
    }

    /// The next frame to send: the oldest of the highest non-empty band.
    pub fn pop(&mut self) -> Option<Packet> {
        let b = (0..BANDS).rev().find(|&b| !self.bands[b].is_empty())?;
        self.len -= 1;
        self.bands[b].pop_front()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sched::ClassId;

    fn pkt(id: u64) -> Packet {
        Packet::synthetic(id, 100, id, ClassId::ROOT)
    }

    #[test]
    fn highest_band_first_and_fifo_within_a_band() {
        let mut q = PrioQueue::default();
        for (id, prio) in [(1, 3), (2, 7), (3, 0), (4, 7), (5, 3), (6, 9)] {
            assert!(matches!(q.push(prio, pkt(id)), Push::Queued));
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|p| p.id).collect();
        assert_eq!(order, [2, 4, 6, 1, 5, 3]);
        assert!(q.is_empty());
    }

    #[test]
    fn full_displaces_the_newest_of_the_lowest_band_below() {
        let mut q = PrioQueue::default();
        for id in 0..LIMIT as u64 {
            assert!(matches!(
                q.push(if id < 10 { 1 } else { 5 }, pkt(id)),
                Push::Queued
            ));
        }
        // Nothing below band 1: refused.
        assert!(matches!(q.push(1, pkt(9000)), Push::Refused(p) if p.id == 9000));
        // Band 6 displaces band 1's newest (id 9).
        assert!(matches!(q.push(6, pkt(9001)), Push::Displaced(p) if p.id == 9));
        assert_eq!(q.len(), LIMIT);
        assert_eq!(q.pop().map(|p| p.id), Some(9001));
    }
}
