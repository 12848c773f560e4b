//! Ingress mode: a shaper behind the bottleneck charges the packets its
//! queues drop as if it had sent them.
//!
//! # Principles
//! - **Why.** On the download side sluice sits *behind* the bottleneck
//!   (server → modem → sluice → LAN): a packet it drops has already crossed
//!   the modem's link, and will cross it again. A shaper that counts only
//!   what it forwards lets the link carry forwarded + dropped bytes, more
//!   than its rate, and the modem's queue fills. Charging drops to the
//!   shaper keeps forwarded + dropped at the configured rate (CAKE's
//!   `ingress`, tc-cake(8); sch_cake.c's `cake_advance_shaper(…, drop)`).
//! - **What is charged.** Drops by the AQM ([`DropReason::Aqm`]) and by a
//!   full queue ([`DropReason::QueueFull`]) of the classes in ingress mode,
//!   at their `cost`, as a send would be. Not charged: a pipe's emulated
//!   loss, packets without a class, purges.
//! - **Where.** At the interface's rate, the shaper that models the
//!   bottleneck: the token-bucket regulator ([`crate::tbr`]) and the
//!   dummynet pipe's link ([`crate::pipe`]); class rates inside the tree
//!   are shares of that link, so the link pays.
//! - **Failsafe.** As in CAKE, a second clock charged for sent packets
//!   only ([`FAILSAFE_NUM`]) may release a packet too: an unresponsive flood
//!   never slows the output below 2/3 of the rate; below a dropped share of
//!   1/3 the charge is exact.
//! - **Bounded debt.** The charge runs the shaper's clock at most
//!   [`MAX_DEBT`] ahead (unlike CAKE, whose output stays at the failsafe's
//!   2/3 long after a flood ends); beyond it the charge is forgiven.
//! - **AQM.** CoDel keeps its target and interval, as in CAKE. CAKE's other
//!   ingress change, no sojourn over target below two MTU-times per bulk
//!   flow, is left out: at 100 downloads and 29 Mbit/s it would stand 83 ms
//!   of queue before the AQM acts; many flows are held at their share by
//!   TCP control's ACK pacing instead (docs/tcp-control.md).
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
