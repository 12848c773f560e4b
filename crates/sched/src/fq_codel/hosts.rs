//! Host isolation for FQ-CoDel (CAKE's `dual-srchost`, `dual-dsthost` and
//! `triple-isolate`): fair between hosts first, then between a host's flows.
//!
//! # Principles
//! - A flow's quantum is divided by its host's *load*: the host's flows
//!   that were bulk in the current or the last CoDel interval (in
//!   `triple-isolate` the larger of the source's and the destination's, so
//!   neither end can take more by opening flows). A host with 64 bulk
//!   flows gets per round the bytes a host with one gets.
//! - A flow is bulk when it runs out of credit with packets left (CAKE's
//!   rule) or comes back with its credit used up. It keeps its debt (never
//!   its credit) across absences, and an empty flow out of credit leaves
//!   without a fresh quantum, so flows that send a packet and empty pay for
//!   every packet; sparse flows never use their credit, so they neither
//!   dilute their host's share nor lose the new-flow priority.
//! - A host's newcomers share one quantum of first-in-line credit: one
//!   whose credit does not cover its packet waits on the old list
//!   (`Run::WAITS`) until it does. The phases of flows that start together
//!   are spread ([`FqCodel::spread_phase`]).
//! - Hosts are the 16-bit keyed hashes in [`Packet::flow`]'s low bits
//!   ([`Packet::flow_key`]), counted in a table of 2^[`HOST_BITS`] entries
//!   allocated only when isolating; two hosts in one entry count as one.
//!   Deficits are in 1/65536 bytes, so a share keeps its fraction.
//! - Cost: a flow of a host with load L waits about L rounds per packet, so
//!   a dequeue visits up to ~L flows (within `MAX_VISITS_PER_DEQUEUE`).
//! - The why, and what was measured: docs/host-isolation.md.
//!
//! [`Packet::flow`]: crate::Packet::flow
//! [`Packet::flow_key`]: crate::Packet::flow_key

use super::lists::Run;
use super::{FqCodel, Isolation, FRAC_BITS};
use sluice_time::Instant;

/// A flow's `bulk_epoch` before it was ever bulk.
pub(super) const NEVER: u32 = u32::MAX;

/// Host table entries: the low 14 bits of the 16-bit host hashes.
pub(super) const HOST_BITS: u32 = 14;

/// Bulk flows of one host as a source or as a destination: in the interval
/// `epoch` (`cur`) and the one before (`prev`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Load {
    epoch: u32,
    cur: u16,
    prev: u16,
}

impl Load {
    /// The host's load in interval `e`: its bulk flows over this interval
    /// and the last, as if rolled to `e`.
    fn at(&self, e: u32) -> u32 {
        if self.epoch == e {
            u32::from(self.cur.max(self.prev))
        } else if self.epoch.wrapping_add(1) == e {
            u32::from(self.cur)
        } else {
            0
        }
    }

    /// Counts one more bulk flow in interval `e`.
    fn add(&mut self, e: u32) {
        if self.epoch != e {
            self.prev = if self.epoch.wrapping_add(1) == e {
                self.cur
            } else {
                0
            };
            self.cur = 0;
            self.epoch = e;
        }
        self.cur = self.cur.saturating_add(1);
    }
}

/// A host's loads as source and as destination, and its flows on the new
/// list as each (isolation only).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HostLoad {
    pub(super) src: Load,
    pub(super) dst: Load,
    pub(super) new_src: u16,
    pub(super) new_dst: u16,
}

impl FqCodel {
    /// The interval `now` falls in: host loads count bulk flows over the
    /// current and the last CoDel `interval` (100 ms by default).
    #[inline]
    pub(super) fn epoch(&self, now: Instant) -> u32 {
        (now.0 / self.params.interval.0.max(1)) as u32
    }

    #[inline]
    pub(super) fn host_slot(h: u16) -> usize {
        usize::from(h) & ((1 << HOST_BITS) - 1)
    }

    /// What flow `idx` adds to its deficit per round: a quantum, divided by
    /// its host's load when isolating. Joining (`joining`), the host's flows
    /// already on the new list count too: a host's newcomers share one
    /// quantum of first-in-line credit, however many arrive together.
    #[inline]
    pub(super) fn flow_quantum(&self, idx: u32, now: Instant, joining: bool) -> i64 {
        let q = i64::from(self.params.quantum_bytes) << FRAC_BITS;
        if !self.params.isolation.is_on() {
            return q;
        }
        let Some(f) = self.flows.get(idx as usize).map(|l| &l.0) else {
            return q;
        };
        let e = self.epoch(now);
        let host = |h: u16| {
            self.hosts
                .get(Self::host_slot(h))
                .copied()
                .unwrap_or_default()
        };
        let (sh, dh) = (host(f.src_host), host(f.dst_host));
        let (mut src, mut dst) = (sh.src.at(e), dh.dst.at(e));
        if joining {
            src = src.max(1) + u32::from(sh.new_src);
            dst = dst.max(1) + u32::from(dh.new_dst);
        }
        let load = match self.params.isolation {
            Isolation::Flows => 1,
            Isolation::SrcHost => src,
            Isolation::DstHost => dst,
            Isolation::Both => src.max(dst),
        };
        q / i64::from(load.max(1))
    }

    /// Flow `idx` is bulk now (out of credit with packets left, or back
    /// with its credit used up): it counts in its hosts' loads for this
    /// interval and the next.
    #[inline]
    pub(super) fn mark_bulk(&mut self, idx: u32, now: Instant) {
        let e = self.epoch(now);
        let Some(f) = self.flows.get_mut(idx as usize).map(|l| &mut l.0) else {
            return;
        };
        if f.bulk_epoch == e || self.hosts.is_empty() {
            return;
        }
        f.bulk_epoch = e;
        let (s, d) = (Self::host_slot(f.src_host), Self::host_slot(f.dst_host));
        if let Some(h) = self.hosts.get_mut(s) {
            h.src.add(e);
        }
        if let Some(h) = self.hosts.get_mut(d) {
            h.dst.add(e);
        }
    }

    /// Flow `idx` used up its quantum with packets left, the first time
    /// since it last emptied: spread the flows' phases. A host's flows that
    /// start together would otherwise all reach a positive deficit in the
    /// same round, every `load` rounds, and that round would send one
    /// packet of each (a 77 ms burst for 64 flows at 10 Mbit/s) while a
    /// sparse flow waits on the old list. A fraction of one quantum, from
    /// the bucket (a keyed hash: uniform), once per active run.
    #[inline]
    pub(super) fn spread_phase(&mut self, idx: u32) {
        let Some(f) = self.flows.get_mut(idx as usize).map(|l| &mut l.0) else {
            return;
        };
        if f.run.has(Run::SPREAD) || self.hosts.is_empty() {
            return;
        }
        f.run.set(Run::SPREAD);
        let spread = (u64::from(idx).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as i64;
        f.deficit -= (i64::from(self.params.quantum_bytes) * spread) << (FRAC_BITS - 16);
    }

    /// Hosts with bulk flows over the last interval or two at `now`, as
    /// sources and as destinations (a scan of the host table, for tests).
    pub fn bulk_hosts(&self, now: Instant) -> (u32, u32) {
        let e = self.epoch(now);
        let n =
            |f: &dyn Fn(&HostLoad) -> u32| self.hosts.iter().filter(|h| f(h) > 0).count() as u32;
        (n(&|h| h.src.at(e)), n(&|h| h.dst.at(e)))
    }

    /// Counts flow `idx` on (`+1`) or off (`-1`) the new list in its hosts'
    /// newcomers (isolation only).
    #[inline]
    pub(super) fn count_new(&mut self, idx: u32, delta: i16) {
        if self.hosts.is_empty() {
            return;
        }
        let f = &self.flows[idx as usize].0;
        let (s, d) = (Self::host_slot(f.src_host), Self::host_slot(f.dst_host));
        if let Some(h) = self.hosts.get_mut(s) {
            h.new_src = h.new_src.saturating_add_signed(delta);
        }
        if let Some(h) = self.hosts.get_mut(d) {
            h.new_dst = h.new_dst.saturating_add_signed(delta);
        }
    }
}
