//! Ingress mode: a shaper behind the bottleneck charges the packets its
//! queues drop as if it had sent them.
//!
//! # Principles
//! - **Why.** On the download side sluice sits *behind* the bottleneck
//!   (server → modem → sluice → LAN): a packet that reaches sluice has
//!   already crossed the modem's link, whether sluice forwards it or drops
//!   it, and the sender will send its bytes across that link again. A
//!   shaper that only counts what it forwards lets the bottleneck carry
//!   forwarded + dropped bytes, more than the rate it was set to, so the
//!   modem's queue fills. Charging the dropped bytes to the shaper makes
//!   its output fall by the dropped share, and forwarded + dropped stays
//!   at the configured rate (CAKE's `ingress`, tc-cake(8); sch_cake.c
//!   charges `cake_advance_shaper(…, drop = true)` for AQM and overflow
//!   drops alike).
//! - **What is charged.** Drops by the AQM ([`DropReason::Aqm`]: CoDel,
//!   FQ-CoDel, RED) and by a full queue ([`DropReason::QueueFull`]) of the
//!   classes in ingress mode, at their `cost` (wire length plus link
//!   overhead), as a send would be. Not charged: a pipe's emulated random
//!   loss (the modelled link lost it, not our queue), packets without a
//!   class, and purges (reconfiguration, not traffic).
//! - **Where.** At the interface's rate, i.e. the shaper that models the
//!   bottleneck link: the token-bucket regulator over PRIQ/CBQ/HFSC
//!   ([`crate::tbr`]) and the dummynet pipe's link ([`crate::pipe`]). The
//!   rates of classes inside the tree (HFSC curves, CBQ rates) are shares
//!   of that link; the bottleneck is the link, so the link pays.
//! - **Failsafe.** A flood that does not respond to drops (UDP above the
//!   rate) would otherwise drive the charge above the rate and the output
//!   to zero: every arrival dropped and charged. As in CAKE, a second
//!   clock charged for sent packets only, at [`FAILSAFE_NUM`]/[`FAILSAFE_DEN`]
//!   of their time, may release a packet too: ingress mode never slows the
//!   output below 2/3 of the rate. Below a dropped share of 1/3 the charge
//!   is exact.
//! - **Bounded debt.** The charge may run the shaper's clock at most
//!   [`MAX_DEBT`] of transmission time (at least [`MIN_DEBT_BYTES`]) ahead
//!   of the decision that charges it (CAKE lets it run without bound, so the output stays at the
//!   failsafe's 2/3 for long after a flood has ended). Charges beyond it
//!   are counted as forgiven.
//! - **AQM.** CoDel keeps its target and interval (CAKE changes neither);
//!   the charge itself is what makes the AQM's drops slow the shaper.
//!   CAKE's one other ingress change is left out on purpose: its CoDel
//!   does not count a sojourn as over target below two MTU-times per bulk
//!   flow, so that each of many flows keeps two packets queued (a
//!   retransmission behind the bottleneck crosses it again). With 100
//!   downloads at 29 Mbit/s that is 83 ms of standing queue before the
//!   AQM acts — the latency sluice is there to remove. Many flows are
//!   held at their share by the window and pace of their ACKs instead
//!   (issue #13 items 2–3).
//! - Counting: per class, the packets and bytes (cost) charged, plus the
//!   bytes forgiven by the debt bound; nothing is reset behind the user's
//!   back.

use crate::{ClassId, DropReason, Dropped};
use sluice_time::Duration;

/// The failsafe clock charges a sent packet `NUM/DEN` of its time (CAKE's
/// `global_dur + global_dur / 2`), so the output never falls below `DEN/NUM`
/// of the rate.
pub const FAILSAFE_NUM: u64 = 3;
pub const FAILSAFE_DEN: u64 = 2;

/// The furthest the charge for drops may push the shaper's clock ahead of
/// the moment of the charge: one CoDel interval, the time the AQM takes to
/// react, so a debt older than that no longer describes the queue upstream
/// (see [`max_debt_bytes`]).
pub const MAX_DEBT: Duration = Duration::from_millis(100);

/// The debt bound in bytes at `rate`: [`MAX_DEBT`] of it, but never less
/// than [`MIN_DEBT_BYTES`], so that at a low rate (128 kbit/s: 100 ms is
/// 1600 bytes) a couple of full-size drops are still charged in full.
pub fn max_debt_bytes(rate: sluice_time::Rate) -> u64 {
    rate.bytes_in(MAX_DEBT).max(MIN_DEBT_BYTES)
}

/// Four full-size Ethernet frames.
pub const MIN_DEBT_BYTES: u64 = 4 * 1514;

/// Packets and bytes (cost) charged for one class's drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charged {
    pub packets: u64,
    pub bytes: u64,
}

/// Which drops a shaper charges, and what it has charged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ingress {
    /// Every class's drops are charged, whatever the class.
    all: bool,
    /// Charged classes, sorted, with their counters.
    classes: Vec<(ClassId, Charged)>,
    /// Sum over classes.
    total: Charged,
    /// Bytes of charges dropped by the [`MAX_DEBT`] bound.
    forgiven_bytes: u64,
}

impl Ingress {
    /// Ingress mode off: drops cost nothing (egress shaping).
    pub fn off() -> Ingress {
        Ingress::default()
    }

    /// Every drop of the shaper's queues is charged.
    pub fn all() -> Ingress {
        Ingress {
            all: true,
            ..Ingress::default()
        }
    }

    /// Drops of packets of these classes are charged.
    pub fn classes(ids: impl IntoIterator<Item = ClassId>) -> Ingress {
        let mut classes: Vec<(ClassId, Charged)> =
            ids.into_iter().map(|c| (c, Charged::default())).collect();
        classes.sort_unstable_by_key(|c| c.0);
        classes.dedup_by_key(|c| c.0);
        Ingress {
            classes,
            ..Ingress::default()
        }
    }

    pub fn is_on(&self) -> bool {
        self.all || !self.classes.is_empty()
    }

    /// What was charged for `class`'s drops; `None` if the class is not in
    /// ingress mode. With [`Ingress::all`], every class reports the total.
    pub fn charged(&self, class: ClassId) -> Option<Charged> {
        if self.all {
            return Some(self.total);
        }
        self.slot(class).map(|i| self.classes[i].1)
    }

    /// What was charged over all classes.
    pub fn total(&self) -> Charged {
        self.total
    }

    /// Bytes of charges not applied because of [`MAX_DEBT`].
    pub fn forgiven_bytes(&self) -> u64 {
        self.forgiven_bytes
    }

    fn slot(&self, class: ClassId) -> Option<usize> {
        self.classes.binary_search_by_key(&class, |c| c.0).ok()
    }

    /// Counts the drops among `dropped` this shaper charges and returns
    /// their summed cost in bytes (0 when off).
    pub(crate) fn charge(&mut self, dropped: &[Dropped]) -> u64 {
        if !self.is_on() {
            return 0;
        }
        let mut sum = 0u64;
        for d in dropped {
            if !matches!(d.reason, DropReason::Aqm | DropReason::QueueFull) {
                continue;
            }
            let cost = u64::from(d.pkt.cost);
            if !self.all {
                let Some(i) = self.slot(d.pkt.class) else {
                    continue;
                };
                self.classes[i].1.packets += 1;
                self.classes[i].1.bytes += cost;
            }
            self.total.packets += 1;
            self.total.bytes += cost;
            sum += cost;
        }
        sum
    }

    pub(crate) fn forgive(&mut self, bytes: u64) {
        self.forgiven_bytes = self.forgiven_bytes.saturating_add(bytes);
    }
}

#[cfg(test)]
mod tests;
