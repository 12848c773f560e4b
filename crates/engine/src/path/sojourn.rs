//! Sluice's own wait on the way out, which corrects each delay sample
//! ([`crate::delay_signal`]): per interface and per connection.
//!
//! # Principles
//!
//! - **A connection's own wait.** Under flow queueing a bulk flow waits
//!   while the ACKs and pings beside it do not: a mean over an interface's
//!   packets ([`Sojourn`]) would leave the bulk flows' own wait in their
//!   samples, so each connection's recent wait is kept apart
//!   ([`FlowSojourn`]), direct-mapped, O(1), fixed memory.
//! - **A hold travels with its packet.** An ACK held by TCP control counts
//!   its hold when it leaves, not the next packet of its connection.
//! - **Errs short, never long.** A collision or a lost hold under-corrects
//!   one sample (the per-flow minimum discards it); an over-correction
//!   would sink a destination's base for its whole window.

use super::minmax::WindowMin;
use sluice_time::{Duration, Instant};

/// Sluice's own wait out that a sample is corrected by ([`FlowSojourn::get`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Own {
    /// The connection's recent wait: the sample's delay is corrected by it.
    pub wait: Duration,
    /// The least wait of its recent packets (never above `wait`): the
    /// base is corrected by this alone, so that no over-correction takes
    /// it under the path.
    pub floor: Duration,
}

impl From<Duration> for Own {
    /// A wait known exactly (one packet's, or a mean with nothing better).
    fn from(d: Duration) -> Own {
        Own { wait: d, floor: d }
    }
}

/// Sluice's own recent sojourn on an interface: an EWMA (gain 1/8) of the
/// queue wait of the packets leaving through it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sojourn(u64);

impl Sojourn {
    pub fn add(&mut self, wait: Duration) {
        let (cur, w) = (self.0 as i128, wait.0 as i128);
        self.0 = (cur + (w - cur) / 8).max(0) as u64;
    }

    pub fn get(&self) -> Duration {
        Duration(self.0)
    }
}

/// The recent sojourn of each connection's packets through one interface's
/// queue: what corrects a sample, since the packet that began its
/// measurement waited as its own flow waits — in a flow-queueing shaper a
/// bulk upload's data waits tens of milliseconds while the ACKs and pings
/// around it (most of the packets, so most of [`Sojourn`]'s mean) wait
/// none. Direct-mapped on the connection hash's high 32 bits
/// ([`sluice_sched::Packet::flow`]): O(1), fixed memory; a colliding
/// connection takes the slot over.
pub struct FlowSojourn {
    slots: Box<[Slot]>,
    /// The holds of packets TCP control released, not yet out, by packet
    /// id (direct-mapped; a later hold that maps to the same entry takes
    /// it over, and its packet counts its queue's wait alone: an
    /// under-correction, the side that cannot sink the base).
    holds: Box<[(u64, u64)]>,
}

#[derive(Clone, Copy)]
struct Slot {
    /// The connection's tag (the hash's high 32 bits).
    tag: u32,
    /// Its packets' recent sojourn, ns (EWMA, gain 1/2), and the last
    /// one's; `u64::MAX`: none yet.
    mean: u64,
    last: u64,
    /// The least wait of its packets over [`FLOOR_WINDOW`].
    least: Option<WindowMin>,
}

const EMPTY: Slot = Slot {
    tag: 0,
    mean: u64::MAX,
    last: u64::MAX,
    least: None,
};

/// The window of a connection's least wait ([`Own::floor`]; it covers
/// the last half to whole of it), which should reach back to the packet that began the measurement, a round
/// trip ago: while sluice's own queue grows (after a cut) the waits of
/// the last moments are longer than that packet's. Too long a window errs
/// the safe way (a base over the path is replaced by the next sample
/// corrected better; one under it stays for the base's window), at the
/// price of a bulk flow whose wait fell reading a little less.
const FLOOR_WINDOW: Duration = Duration::from_secs(1);

/// Slots of a [`FlowSojourn`] (a power of two).
const FLOW_SLOTS: usize = 1024;

/// Held packets a [`FlowSojourn`] remembers the hold of (a power of two):
/// more than TCP control releases between two departures on a link.
const HOLD_SLOTS: usize = 1024;

impl Default for FlowSojourn {
    fn default() -> Self {
        FlowSojourn {
            slots: vec![EMPTY; FLOW_SLOTS].into_boxed_slice(),
            holds: vec![(u64::MAX, 0); HOLD_SLOTS].into_boxed_slice(),
        }
    }
}

impl FlowSojourn {
    fn slot(&mut self, flow: u64) -> &mut Slot {
        let tag = (flow >> 32) as u32;
        let s = &mut self.slots[tag as usize & (FLOW_SLOTS - 1)];
        if s.tag != tag {
            *s = Slot { tag, ..EMPTY };
        }
        s
    }

    /// Packet `id` was held `held` by TCP control before its queue: its
    /// wait there adds to the queue's when *it* leaves (the measurement it
    /// begins includes both). The hold travels with the packet, not the
    /// connection: a window update or a SACK of the same connection passes
    /// at once and begins measurements of its own, which a hold handed to
    /// the next packet out would over-correct (in the lab, a download's
    /// sample of 23.5 ms corrected by 48 ms, and the base at 0).
    pub fn hold(&mut self, id: u64, held: Duration) {
        self.holds[id as usize & (HOLD_SLOTS - 1)] = (id, held.0);
    }

    /// Packet `id` of connection `flow` left at `now` after waiting `wait`
    /// in the queue (and its hold before it, if it had one).
    pub fn add(&mut self, flow: u64, id: u64, wait: Duration, now: Instant) {
        let h = &mut self.holds[id as usize & (HOLD_SLOTS - 1)];
        let held = if h.0 == id {
            std::mem::replace(h, (u64::MAX, 0)).1
        } else {
            0
        };
        let s = self.slot(flow);
        let w = wait.0.saturating_add(held);
        s.mean = if s.mean == u64::MAX {
            w
        } else {
            s.mean / 2 + w / 2
        };
        s.last = w;
        match s.least.as_mut() {
            Some(m) => m.add(Duration(w), now, FLOOR_WINDOW),
            None => s.least = Some(WindowMin::new(Duration(w), now)),
        }
    }

    /// What a sample of connection `flow` is corrected by: the lesser of
    /// its packets' recent mean and its last packet's wait, if any passed.
    /// The lesser, because an over-correction lowers the destination's
    /// base for its whole window (every later sample reads as delay),
    /// while an under-correction raises one sample, which the per-flow
    /// minimum over [`crate::delay_signal::Params::flow_window`] discards; and the last, because
    /// a flow of one packet per round trip has just that one.
    /// Its floor is the least wait of its packets of the last 0.5–1 s.
    pub fn get(&self, flow: u64) -> Option<Own> {
        let tag = (flow >> 32) as u32;
        let s = self.slots[tag as usize & (FLOW_SLOTS - 1)];
        (s.tag == tag && s.mean != u64::MAX).then(|| {
            let wait = Duration(s.mean.min(s.last));
            Own {
                wait,
                floor: s.least.map_or(wait, |m| m.get().min(wait)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::test_time::{at, ms};

    #[test]
    fn each_connection_keeps_its_own_sojourn() {
        let mut f = FlowSojourn::default();
        let wait = |f: &FlowSojourn, c: u64| f.get(c).map(|o| o.wait);
        let (bulk, ack) = (0xabcd_0001_0000_0000u64, 0x1234_0002_0000_0000u64);
        assert_eq!(f.get(bulk), None);
        for _ in 0..8 {
            f.add(bulk, 0, ms(30), at(0));
            f.add(ack, 0, ms(0), at(0));
        }
        assert_eq!(wait(&f, bulk), Some(ms(30)));
        assert_eq!(wait(&f, ack), Some(ms(0)));
        // The low 32 bits (host isolation's host hashes) do not matter.
        assert_eq!(wait(&f, bulk | 0xffff), Some(ms(30)));
        // One long wait (a SYN behind a burst) does not over-correct the
        // next samples: the lesser of the mean (20) and the last (10).
        f.add(bulk, 0, ms(10), at(0));
        assert_eq!(wait(&f, bulk), Some(ms(10)));
        f.add(bulk, 0, ms(40), at(0));
        assert_eq!(wait(&f, bulk), Some(ms(30)), "the mean, 20/2 + 40/2");
        // A connection mapping to the same slot takes it over.
        let other = bulk + (1u64 << 42);
        f.add(other, 0, ms(5), at(0));
        assert_eq!((wait(&f, other), wait(&f, bulk)), (Some(ms(5)), None));
        // A packet held 40 ms by TCP control, then queued 2 ms: 42 ms,
        // counted once.
        f.hold(7, ms(40));
        f.add(ack, 7, ms(2), at(0));
        assert_eq!(wait(&f, ack), Some(ms(21)), "the mean of 0 and 42");
        f.add(ack, 7, ms(2), at(0));
        assert_eq!(wait(&f, ack), Some(ms(2)), "the last");
    }

    #[test]
    fn a_hold_counts_for_the_packet_that_was_held() {
        // A download's ACKs 8 and 9 are held 40 and 45 ms and released
        // together; a window update (10) passes at once and leaves
        // first. Each packet's wait is its own: the update's 1 ms, the
        // held ones' hold plus their 1 ms in the queue. (Kept per
        // connection, the update took the last hold released and the held
        // ACKs none: a sample the update began, corrected by 45 ms.)
        let mut f = FlowSojourn::default();
        let c = 0x7777_0004_0000_0000u64;
        f.hold(8, ms(40));
        f.hold(9, ms(45));
        f.add(c, 10, ms(1), at(0));
        assert_eq!(f.get(c).unwrap().wait, ms(1), "the update was not held");
        f.add(c, 8, ms(1), at(1));
        assert_eq!(f.get(c).unwrap().wait, ms(21), "the mean of 1 and 41");
        f.add(c, 9, ms(1), at(2));
        let w = Duration::from_micros(33_500);
        assert_eq!(f.get(c).unwrap().wait, w, "the mean of 21 and 46");
        assert_eq!(f.get(c).unwrap().floor, ms(1), "the update's wait");
        // A hold is taken once: the entry is free after its packet left.
        f.add(c, 9, ms(1), at(3));
        assert_eq!(f.get(c).unwrap().wait, ms(1));
        // Another packet mapping to the same entry takes it over; the
        // first one's hold is lost (counted short, never long).
        f.hold(5, ms(30));
        f.hold(5 + HOLD_SLOTS as u64, ms(20));
        f.add(c, 5, ms(1), at(4));
        assert_eq!(f.get(c).unwrap().wait, ms(1));
    }

    #[test]
    fn the_floor_is_the_least_wait_of_the_last_moments() {
        let mut f = FlowSojourn::default();
        let c = 0x5555_0003_0000_0000u64;
        // ACKs behind frames on the wire: 0, 6, 3, 8 ms, one every 10 ms.
        for (i, w) in [0, 6, 3, 8].into_iter().enumerate() {
            f.add(c, 0, ms(w), at(10 * i as u64));
        }
        let o = f.get(c).unwrap();
        assert_eq!(
            (o.wait, o.floor),
            (Duration::from_micros(5500), ms(0)),
            "the lesser of the mean (0, 3, 3, 5.5) and the last (8)"
        );
        // Then every packet waits 12 ms or more: the 0 is remembered for
        // half a second at least, forgotten within a second.
        for t in (40..500).step_by(10) {
            f.add(c, 0, ms(12 + t % 3), at(t));
        }
        assert_eq!(f.get(c).unwrap().floor, ms(0));
        for t in (500..1100).step_by(10) {
            f.add(c, 0, ms(12 + t % 3), at(t));
        }
        assert_eq!(f.get(c).unwrap().floor, ms(12));
        // Never above the wait itself.
        f.add(c, 0, ms(1), at(1100));
        let o = f.get(c).unwrap();
        assert_eq!((o.wait, o.floor), (ms(1), ms(1)));
    }
}
