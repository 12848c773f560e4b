//! The queueing delay beyond sluice, read from the traffic it forwards
//! (issue #16 item 2): the signal autorate ([`crate::autorate`]) acts on.
//!
//! # Principles
//!
//! - **One measurement.** The samples are the classifier's passive RTT
//!   ([`sluice_classify::rtt`], TCP timestamps or sequence/ACK timing):
//!   a packet arriving on interface X that completes a measurement gives
//!   the time from sluice, through X's side of the path to the far host,
//!   back to sluice. Nothing is sent and nothing is timed twice; there is
//!   no reflector to lose.
//! - **Own delay out.** The measurement started when the far host's
//!   packet's counterpart left *through sluice's queue on X*; that wait
//!   is sluice's, not the link's. Each sample is corrected by the recent
//!   sojourn of its own connection's packets leaving through X
//!   ([`FlowSojourn`]; the mean over all of X's packets, [`Sojourn`], when
//!   none passed lately), never below zero: under flow queueing a bulk
//!   flow waits while the ACKs and pings beside it do not, and a mean over
//!   packets would leave the bulk flows' own wait in their samples. An ACK
//!   held by TCP control counts its hold too (the measurement began when
//!   it arrived), as the held packet's own, not its connection's next
//!   packet out. A sample shorter than its correction is left out
//!   ([`DelaySignal::unsound`]): the correction is not its measurement's.
//! - **The base never under the path.** The correction is the
//!   connection's recent wait, not the wait of the very packet that began
//!   the measurement: it errs both ways, and a least value over a window
//!   keeps the worst over-correction. Corrected that way the base sank
//!   2–4 ms under the path in the lab (ACKs waiting 0–3 ms behind a frame
//!   at 4 Mbit/s), 15 ms at 1.44 Mbit/s, and every reading rose by as much
//!   for up to a minute: the upload held at its floor on a link 2.8 times
//!   faster. So the base is corrected only by the *least* wait of the
//!   connection's recent packets ([`Own::floor`], 0.5–1 s): the
//!   packet that began a measurement waited at least that, so the base
//!   cannot fall under the path; it may stand over it by what every
//!   packet waited, which reads as a little less delay than there is.
//! - **Base per destination.** The path's own RTT differs per far host;
//!   the base of a destination prefix (IPv4 /24, IPv6 /48: hosts of one
//!   network share the path beyond the link) is the least corrected
//!   sample of the last [`Params::base_window`] (60 s; kept as two
//!   half-window minima, so the memory is 30 to 60 s, O(1) per sample). A
//!   longer window remembers a base the path no longer has (a route or a
//!   satellite change); a shorter one takes a standing queue for the base.
//!   The sample's delay is corrected − base.
//! - **Per flow, the least of the last moments.** A receiver's delayed
//!   ACK lengthens a single sample by up to its timer; a flow's value is
//!   its least delay over the last [`Params::flow_window`] (100 ms, two
//!   halves), which a queue raises and a delayed ACK does not.
//! - **One vote per far network, not per flow.** A flow costs its sender
//!   nothing, so the flows with a sample in the last [`Params::fresh`]
//!   (1 s) vote by far network ([`crate::votes`]: IPv4 /24, IPv6 /48),
//!   one vote each, and the signal is the lower median over those votes,
//!   given only with [`Params::min_voters`] (3) voters or more. A noisy
//!   minority (a slow far server, a Wi-Fi client) cannot move it, nor can
//!   one server with fifty connections.
//! - **The guarantee.** Of `n` ≥ 3 voting networks, liars must be more
//!   than half to raise the reading above every honest network's value
//!   (a cut to `min`), and at least half to lower it below every honest
//!   one (a raise to `max`); fewer keep it within the honest values'
//!   range. With fewer than 3 networks there is no reading: the
//!   controller holds, as on silence (and a probe, where one is sent,
//!   stands in), rather than follow one or two far ends' word.
//! - **The way in only from conversations sluice carries.** A sender's
//!   stamps ([`DelaySignal::add_inbound`]) count only for connections
//!   whose two ends have answered each other's timestamps through sluice
//!   (the engine's gate): an unsolicited or spoofed segment creates no
//!   entry. Its clock is checked all the time ([`crate::owd`]).
//! - **Confidence, not a guess.** A reading carries how many networks
//!   voted and the age of the newest sample; no fresh flow means no
//!   signal (`delay: None`), never zero.
//! - Bounded memory: at most [`Params::max_prefixes`] bases and
//!   [`Params::max_flows`] flows; room is made in O(1) amortised, new
//!   entries (an inbound flow whose clock is not yet verified) first
//!   ([`crate::bounded`]); stale entries leave at [`DelaySignal::expire`].

use crate::bounded::Bounded;
use crate::owd::Owd;
use crate::votes::{network, tally, Voter, MIN_VOTERS};
use sluice_time::{Duration, Instant};
use std::net::IpAddr;

/// Tuning of the signal (the defaults are what the engine runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub base_window: Duration,
    pub flow_window: Duration,
    /// A flow's window for samples completed by pure ACKs.
    pub ack_window: Duration,
    pub fresh: Duration,
    pub max_prefixes: usize,
    pub max_flows: usize,
    /// Far networks a reading needs ([`crate::votes`]).
    pub min_voters: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            base_window: Duration::from_secs(60),
            flow_window: Duration::from_millis(100),
            ack_window: Duration::from_millis(250),
            fresh: Duration::from_secs(1),
            max_prefixes: 4096,
            max_flows: 1024,
            min_voters: MIN_VOTERS,
        }
    }
}

/// Fresh flows with data samples enough for the signal to leave out those
/// with pure-ACK samples only.
pub const MIN_DATA_FLOWS: usize = 2;

/// The least value of a sliding window, kept as the minima of its two
/// halves: covers the last `window / 2` to `window`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowMin {
    cur: Duration,
    cur_start: Instant,
    prev: Option<Duration>,
    last: Instant,
}

impl WindowMin {
    pub(crate) fn new(v: Duration, now: Instant) -> Self {
        WindowMin {
            cur: v,
            cur_start: now,
            prev: None,
            last: now,
        }
    }

    pub(crate) fn add(&mut self, v: Duration, now: Instant, window: Duration) {
        let half = Duration(window.0 / 2);
        let age = now.saturating_since(self.cur_start);
        if age >= half {
            // The half that ends now becomes the previous one, unless it
            // ended so long ago that it is out of the window altogether.
            self.prev = (age < window).then_some(self.cur);
            self.cur = v;
            self.cur_start = now;
        } else {
            self.cur = self.cur.min(v);
        }
        self.last = now;
    }

    /// When the last value was added.
    pub(crate) fn last(&self) -> Instant {
        self.last
    }

    pub(crate) fn get(&self) -> Duration {
        self.prev.map_or(self.cur, |p| p.min(self.cur))
    }
}

/// One reading of the signal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The lower median delay beyond sluice over the far networks of
    /// fresh flows ([`crate::votes`]); `None` with too few of them.
    pub delay: Option<Duration>,
    /// Far networks that voted (a probe's reading: 1).
    pub flows: u32,
    /// Age of the newest sample (any flow); `None` before the first.
    pub newest_age: Option<Duration>,
    /// From autorate's probes ([`crate::probe`]), not the traffic: a round
    /// trip, both directions' queues.
    pub probe: bool,
}

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

/// One sample as the signal took it: what `sluice run --autorate-trace`
/// writes, one line each, to tell why a reading is what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleTrace {
    pub at: Instant,
    pub far: IpAddr,
    pub flow: u64,
    /// Completed by a pure ACK ([`DelaySignal::add_ack`]).
    pub ack: bool,
    /// The round trip as measured, sluice's own wait out included.
    pub rtt: Duration,
    /// Sluice's own wait it was corrected by, and the base by.
    pub own: Own,
    /// The destination's base after this sample.
    pub base: Duration,
    /// (rtt − own) − base: the round trip's delay.
    pub delay: Duration,
    /// The queue its completing packet met on the way in, if read.
    pub inbound: Option<Duration>,
    /// What the way out took: delay − inbound.
    pub out: Duration,
}

/// Samples kept for [`DelaySignal::drain_trace`] between collections.
pub const TRACE_CAP: usize = 1 << 16;

/// The delay signal of the path through one interface.
#[derive(Clone, Debug)]
pub struct DelaySignal {
    params: Params,
    bases: Bounded<Voter, WindowMin>,
    flows: Bounded<u64, FlowDelay>,
    /// The same for samples a pure ACK completed (see [`DelaySignal::add_ack`]).
    ack_bases: Bounded<Voter, WindowMin>,
    ack_flows: Bounded<u64, FlowDelay>,
    /// Each flow's one-way delay on the way in (see
    /// [`DelaySignal::add_inbound`]).
    inbound: Bounded<u64, Inbound>,
    newest: Option<Instant>,
    /// Samples taken (counter).
    pub samples: u64,
    /// Samples left out because sluice's own wait they were to be
    /// corrected by is longer than the round trip itself (counter): the
    /// correction is not that measurement's, and the sample is no evidence
    /// of the path.
    pub unsound: u64,
    /// Each sample's parts, while tracing ([`DelaySignal::set_trace`]).
    trace: Option<Vec<SampleTrace>>,
    /// Traced samples dropped for want of room (counter).
    pub trace_lost: u64,
}

impl Default for DelaySignal {
    fn default() -> Self {
        DelaySignal::new(Params::default())
    }
}

impl DelaySignal {
    pub fn new(params: Params) -> Self {
        DelaySignal {
            params,
            bases: Bounded::new(params.max_prefixes),
            flows: Bounded::new(params.max_flows),
            ack_bases: Bounded::new(params.max_prefixes),
            ack_flows: Bounded::new(params.max_flows),
            inbound: Bounded::new(params.max_flows),
            newest: None,
            samples: 0,
            unsound: 0,
            trace: None,
            trace_lost: 0,
        }
    }

    /// Keeps each sample's parts for [`DelaySignal::drain_trace`] (at
    /// most [`TRACE_CAP`] between drains; beyond, counted in
    /// `trace_lost`), or stops and forgets them.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on.then(|| self.trace.take().unwrap_or_default());
    }

    /// The samples traced since the last drain, oldest first.
    pub fn drain_trace(&mut self) -> Vec<SampleTrace> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A sample `rtt` of flow `flow` to far host `far`, taken at `now`,
    /// with sluice's own recent sojourn on the way out `own`, completed by
    /// a segment carrying data: the far host sent it as our packet came,
    /// so the sample is the path's.
    pub fn add(
        &mut self,
        now: Instant,
        far: IpAddr,
        flow: u64,
        rtt: Duration,
        own: impl Into<Own>,
    ) {
        self.sample(false, (now, far, flow, rtt, own.into()));
    }

    /// The same for a sample a pure ACK completed (an upload's): the far
    /// host may have delayed it by up to its delayed-ACK timer (40 ms in
    /// Linux, up to 200 ms elsewhere, RFC 9293 §3.8.6.3), and whether it
    /// does changes with the flow's rate: once segments come one by one
    /// every sample is late by the timer. Such samples have bases and flows
    /// of their own, a longer window ([`Params::ack_window`]), and count
    /// only when fewer than [`MIN_DATA_FLOWS`] flows give data samples.
    /// (Measured in the lab: with them in the median, four uploads slowed
    /// to one segment at a time read 10-20 ms of delay on an empty link
    /// and drove the rate to its minimum.)
    pub fn add_ack(
        &mut self,
        now: Instant,
        far: IpAddr,
        flow: u64,
        rtt: Duration,
        own: impl Into<Own>,
    ) {
        self.sample(true, (now, far, flow, rtt, own.into()));
    }

    fn sample(&mut self, ack: bool, s: (Instant, IpAddr, u64, Duration, Own)) {
        let (p, now, flow) = (self.params, s.0, s.2);
        // The packet that began the measurement waited no longer than the
        // round trip: a correction over it belongs to other packets (a
        // connection's recent wait errs both ways). Taken, it would read
        // as no delay at all and set the base at 0 for a minute: every
        // later reading the whole path (seen once in five `lte` runs).
        if s.3 < s.4.wait {
            self.unsound += 1;
            return;
        }
        let inbound = self.inbound.get(&flow).and_then(|i| i.owd.latest(now));
        let (maps, window) = if ack {
            ((&mut self.ack_bases, &mut self.ack_flows), p.ack_window)
        } else {
            ((&mut self.bases, &mut self.flows), p.flow_window)
        };
        let t = Self::take(maps, s, inbound, p, window);
        match self.trace.as_mut() {
            Some(buf) if buf.len() < TRACE_CAP => buf.push(SampleTrace { ack, ..t }),
            Some(_) => self.trace_lost += 1,
            None => {}
        }
        self.newest = Some(self.newest.map_or(now, |n| n.max(now)));
        self.samples += 1;
    }

    fn take(
        (bases, flows): (&mut Bounded<Voter, WindowMin>, &mut Bounded<u64, FlowDelay>),
        (now, far, flow, rtt, own): (Instant, IpAddr, u64, Duration, Own),
        inbound: Option<Duration>,
        p: Params,
        window: Duration,
    ) -> SampleTrace {
        let corrected = rtt - own.wait;
        let for_base = rtt - own.floor.min(own.wait);
        let voter = network(far);
        let mut made = false;
        let b = bases.entry(
            voter,
            || {
                made = true;
                WindowMin::new(for_base, now)
            },
            |_| true,
        );
        if !made {
            b.add(for_base, now, p.base_window);
        }
        let base = b.get();
        let delay = Duration(corrected.0.saturating_sub(base.0));
        // Without a reading of the way in, all of it may be the way out.
        let out = delay - inbound.unwrap_or(Duration::ZERO);
        let mut made = false;
        let f = flows.entry(
            flow,
            || {
                made = true;
                FlowDelay {
                    voter,
                    rtt: WindowMin::new(delay, now),
                    out: WindowMin::new(out, now),
                }
            },
            |_| true,
        );
        if !made {
            f.voter = voter;
            f.rtt.add(delay, now, window);
            f.out.add(out, now, window);
        }
        SampleTrace {
            at: now,
            far,
            flow,
            ack: false,
            rtt,
            own,
            base,
            delay,
            inbound,
            out,
        }
    }

    /// The signal at `now`: the median over fresh flows with data samples,
    /// or over every fresh flow when fewer than [`MIN_DATA_FLOWS`] have.
    /// The round trip's delay: the queues of both directions.
    pub fn read(&self, now: Instant) -> Reading {
        self.read_by(now, |f| f.rtt.get())
    }

    /// The same for the way out alone: each sample less the queue its
    /// completing packet met on the way in ([`DelaySignal::add_inbound`]);
    /// a sample of a flow without that reading counts whole.
    pub fn read_out(&self, now: Instant) -> Reading {
        self.read_by(now, |f| f.out.get())
    }

    fn read_by(&self, now: Instant, value: impl Fn(&FlowDelay) -> Duration) -> Reading {
        let fresh = self.params.fresh;
        let values = |m: &Bounded<u64, FlowDelay>| -> Vec<(Voter, Duration)> {
            m.values()
                .filter(|f| now.saturating_since(f.rtt.last()) <= fresh)
                .map(|f| (f.voter, value(f)))
                .collect()
        };
        let mut v = values(&self.flows);
        if v.len() < MIN_DATA_FLOWS {
            v.extend(values(&self.ack_flows));
        }
        self.reading(now, v)
    }

    /// The queue on the way in: the vote over fresh flows' far networks
    /// of the queue standing before sluice ([`Owd::standing`]).
    pub fn read_in(&self, now: Instant) -> Reading {
        let v = self
            .inbound
            .values()
            .filter_map(|i| Some((i.voter, i.owd.standing(now)?)))
            .collect();
        self.reading(now, v)
    }

    fn reading(&self, now: Instant, v: Vec<(Voter, Duration)>) -> Reading {
        let t = tally(v, self.params.min_voters);
        Reading {
            delay: t.delay,
            flows: t.voters,
            newest_age: self.newest.map(|t| now.saturating_since(t)),
            probe: false,
        }
    }

    /// A segment of flow `flow` stamped `tsval` by its sender `far`
    /// (RFC 7323) arrived at `now` from the far side: its one-way delay,
    /// whose variation is the queue on the way in ([`crate::owd`]). Data
    /// and pure ACKs alike: a sender stamps each segment as it leaves.
    /// Only for a connection whose ends answered each other through
    /// sluice (the caller's gate: see the Principles).
    pub fn add_inbound(&mut self, now: Instant, far: IpAddr, flow: u64, tsval: u32) {
        let voter = network(far);
        let make = || Inbound {
            voter,
            owd: Owd::default(),
        };
        let i = self.inbound.entry(flow, make, |i| i.owd.verified());
        i.voter = voter;
        i.owd.on_data(now, tsval);
    }

    /// Forgets flows not heard from in four freshness periods and bases
    /// older than their window.
    pub fn expire(&mut self, now: Instant) {
        let p = self.params;
        let flow_ttl = Duration(p.fresh.0.saturating_mul(4));
        for flows in [&mut self.flows, &mut self.ack_flows] {
            flows.retain(|f| now.saturating_since(f.rtt.last()) <= flow_ttl);
        }
        self.inbound.retain(|i| {
            i.owd
                .last()
                .is_some_and(|t| now.saturating_since(t) <= flow_ttl)
        });
        for bases in [&mut self.bases, &mut self.ack_bases] {
            bases.retain(|b| now.saturating_since(b.last) <= p.base_window);
        }
    }

    /// Bases and flows held (for tests and reports).
    pub fn sizes(&self) -> (usize, usize) {
        (self.bases.len(), self.flows.len())
    }
}

/// A flow's least delays over its window: of the round trip, and of the
/// way out alone; and its far end's network, its vote's.
#[derive(Clone, Copy, Debug)]
struct FlowDelay {
    voter: Voter,
    rtt: WindowMin,
    out: WindowMin,
}

/// A flow's way in, and its sender's network.
#[derive(Clone, Copy, Debug)]
struct Inbound {
    voter: Voter,
    owd: Owd,
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
    /// minimum over [`Params::flow_window`] discards; and the last, because
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
    use std::net::Ipv4Addr;

    #[test]
    fn pure_ack_samples_count_only_without_data_samples() {
        // Two downloads give data samples on an empty path (20 ms); four
        // uploads' ACKs were prompt at first, then (their segments coming
        // one at a time) all 40 ms late: the receiver's delayed-ACK timer.
        let mut s = one_vote();
        let far = host(1);
        for t in (0..3000).step_by(10) {
            for f in 0..2 {
                s.add(at(t), far, f, ms(20), ms(0));
            }
            let late = if t < 1000 { 0 } else { 40 };
            for f in 10..14 {
                s.add_ack(at(t), far, f, ms(20 + late), ms(0));
            }
        }
        let r = s.read(at(3000));
        assert_eq!((r.delay, r.flows), (Some(ms(0)), 1), "the data flows only");
        // Without data samples the ACKs' are the signal (with a window of
        // their own): a real queue still shows.
        let mut u = one_vote();
        for t in (0..3000).step_by(10) {
            let q = if t < 2000 { 0 } else { 30 };
            for f in 10..14 {
                u.add_ack(at(t), far, f, ms(20 + q), ms(0));
            }
        }
        let r = u.read(at(3000));
        assert_eq!((r.delay, r.flows), (Some(ms(30)), 1));
    }

    #[test]
    fn each_direction_reads_its_own_queue() {
        // Four downloads: each data segment arrives stamped by its
        // sender's clock (its own offset) and completes a round trip of
        // 20 ms plus the queues both ways. The way in is read from the
        // stamps, the way out is the round trip less it.
        let mut s = DelaySignal::default();
        let far = host(1);
        let queues = |t: u64| match t {
            0..3000 => (0, 0),
            3000..4000 => (30, 0),
            _ => (0, 20),
        };
        let at_ms = |s: &mut DelaySignal, from: u64, to: u64| {
            for t in (from..to).step_by(10) {
                let (q_in, q_out) = queues(t);
                for f in 0..4u64 {
                    let tsval = (7_000 * f + 100 + t - 10 - q_in) as u32;
                    s.add_inbound(at(t), host(f as u8), f, tsval);
                    s.add(at(t), host(f as u8), f, ms(20 + q_in + q_out), ms(0));
                }
            }
        };
        let read = |s: &DelaySignal, t: u64| {
            let now = at(t);
            let (r, o, i) = (s.read(now), s.read_out(now), s.read_in(now));
            (
                r.delay.unwrap(),
                o.delay.unwrap(),
                i.delay.unwrap(),
                i.flows,
            )
        };
        at_ms(&mut s, 0, 3000);
        assert_eq!(read(&s, 3000), (ms(0), ms(0), ms(0), 4));
        at_ms(&mut s, 3000, 4000);
        assert_eq!(
            read(&s, 4000),
            (ms(30), ms(0), ms(30), 4),
            "a queue on the way in"
        );
        at_ms(&mut s, 4000, 5000);
        assert_eq!(
            read(&s, 5000),
            (ms(20), ms(20), ms(0), 4),
            "a queue on the way out"
        );
        // Without stamps there is no way in, and the way out is the whole
        // round trip: it may all be that way.
        let mut n = one_vote();
        for t in (0..3000).step_by(10) {
            n.add(at(t), far, 1, ms(if t < 2000 { 20 } else { 45 }), ms(0));
        }
        assert_eq!(n.read_in(at(3000)).delay, None);
        assert_eq!(n.read_out(at(3000)).delay, Some(ms(25)));
    }

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

    #[test]
    fn noisy_corrections_do_not_sink_the_base() {
        // A download's ACKs leave behind frames on the wire, waiting 0 to
        // 8 ms (one 1514-byte frame at 1.5 Mbit/s); each measurement began
        // with one of them, and is corrected by the connection's recent
        // wait, which errs both ways. The path: 20 ms, no queue beyond.
        let mut s = one_vote();
        let mut f = FlowSojourn::default();
        let far = host(1);
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % 9
        };
        // Each connection's packets, one every 2 ms, and their waits; a
        // sample at t completes the measurement its packet of t - 20 began.
        let mut waits = vec![[0u64; 4]; 10_000];
        for (i, t) in (0..20_000).step_by(2).enumerate() {
            for c in 0..4u64 {
                let flow = (c + 1) << 40;
                waits[i][c as usize] = next();
                f.add(flow, 0, ms(waits[i][c as usize]), at(t));
                if t % 10 == 0 && t >= 20 {
                    let began = waits[i - 10][c as usize];
                    let own = f.get(flow).unwrap();
                    s.add(at(t), far, flow, ms(20 + began), own);
                }
            }
        }
        // Corrected by the recent wait alone, the base took the worst
        // over-correction (8 ms under the path) and read 3 ms of delay on
        // an empty path (each flow's least over 100 ms takes some back).
        let r = s.read(at(20_000));
        assert_eq!(r.flows, 1, "one far network");
        assert!(r.delay.unwrap() <= ms(1), "{r:?}");
    }

    #[test]
    fn a_correction_longer_than_the_round_trip_is_no_evidence() {
        // Two downloads on a 20 ms path, sluice's queue 5 ms. Then one
        // sample of each comes corrected by more than it measured (the
        // lab's `rtt 23.5 ms, own 48.3`, and an upload's `rtt 45.1, own
        // 34.9`, whose floor was as long): left out, the base stays at
        // the path and the reading at the queue beyond.
        let mut s = one_vote();
        let far = host(1);
        for t in (0..2000).step_by(10) {
            for f in 0..2 {
                s.add(at(t), far, f, ms(25 + t / 200), ms(5));
            }
        }
        let before = s.read(at(2000));
        assert_eq!(before.delay, Some(ms(9)), "the queue beyond, 9 ms");
        let unsound = Own {
            wait: ms(48),
            floor: ms(48),
        };
        s.add(at(2000), far, 0, Duration::from_micros(23_500), unsound);
        s.add_ack(at(2000), far, 1, ms(45), unsound);
        for t in (2010..2200).step_by(10) {
            for f in 0..2 {
                s.add(at(t), far, f, ms(34), ms(5));
            }
        }
        let r = s.read(at(2200));
        assert_eq!(r.delay, Some(ms(9)), "{r:?}");
        assert_eq!(s.unsound, 2);
        // Corrected by no more than it measured, a sample counts.
        s.add(at(2200), far, 0, ms(30), ms(30));
        assert_eq!(s.unsound, 2);
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A signal that reads one far network alone (the tests of what one
    /// network's flows read; the vote is tested on its own).
    fn one_vote() -> DelaySignal {
        DelaySignal::new(Params {
            min_voters: 1,
            ..Params::default()
        })
    }

    fn at(n: u64) -> Instant {
        Instant(1_000_000_000) + ms(n)
    }

    fn host(i: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(198, 51, i, 10))
    }

    /// `flows` flows to distinct networks with base RTTs 20 + 5·i ms, one
    /// sample each per 10 ms from `from` to `to`, each `extra(flow, t)`
    /// above its base; sluice's own sojourn `own`.
    fn feed(
        s: &mut DelaySignal,
        flows: u64,
        from: u64,
        to: u64,
        own: Duration,
        extra: impl Fn(u64, u64) -> Duration,
    ) {
        let mut t = from;
        while t < to {
            for f in 0..flows {
                let rtt = ms(20 + 5 * f) + own + extra(f, t);
                s.add(at(t), host(f as u8), f, rtt, own);
            }
            t += 10;
        }
    }

    #[test]
    fn a_queue_beyond_sluice_reads_as_its_delay_over_each_base() {
        let mut s = DelaySignal::default();
        // 2 s idle path (only the base), then 30 ms of queue for everyone.
        feed(&mut s, 5, 0, 2000, ms(0), |_, _| ms(0));
        assert_eq!(s.read(at(2000)).delay, Some(ms(0)));
        feed(&mut s, 5, 2000, 2500, ms(0), |_, _| ms(30));
        let r = s.read(at(2500));
        assert_eq!(r.delay, Some(ms(30)), "{r:?}");
        assert_eq!(r.flows, 5);
        assert!(r.newest_age.unwrap() <= ms(10));
    }

    #[test]
    fn sluices_own_sojourn_is_not_read_as_the_links() {
        let mut s = DelaySignal::default();
        feed(&mut s, 3, 0, 1000, ms(0), |_, _| ms(0));
        // Sluice's own queue grows to 25 ms: the link has none.
        feed(&mut s, 3, 1000, 2000, ms(25), |_, _| ms(0));
        assert_eq!(s.read(at(2000)).delay, Some(ms(0)));
    }

    #[test]
    fn a_few_noisy_flows_and_delayed_acks_do_not_move_the_median() {
        let mut s = DelaySignal::default();
        // 7 flows; flows 0 and 1 jump by up to 150 ms on every sample
        // (a slow server, a bad Wi-Fi), every flow has a delayed ACK
        // (+40 ms) on one sample in three.
        let noise = |f: u64, t: u64| {
            let h = (f * 7919 + t * 104_729) % 151;
            let mut d = if f < 2 { ms(h) } else { ms(0) };
            if (t / 10 + f).is_multiple_of(3) {
                d = d + ms(40);
            }
            d
        };
        feed(&mut s, 7, 0, 5000, ms(0), noise);
        let r = s.read(at(5000));
        assert_eq!(r.flows, 7);
        assert!(r.delay.unwrap() <= ms(2), "{r:?}");
        // The same noise on top of a real 40 ms queue reads about 40 ms.
        feed(&mut s, 7, 5000, 5500, ms(0), |f, t| noise(f, t) + ms(40));
        let d = s.read(at(5500)).delay.unwrap();
        assert!((ms(38)..=ms(45)).contains(&d), "{d:?}");
    }

    #[test]
    fn missing_signal_is_none_not_zero_and_ages() {
        let mut s = DelaySignal::default();
        assert_eq!(s.read(at(0)), Reading::default());
        feed(&mut s, 2, 0, 500, ms(0), |_, _| ms(0));
        let r = s.read(at(3000));
        assert_eq!(r.delay, None, "no flow heard from in the last second");
        assert_eq!(r.flows, 0);
        assert_eq!(r.newest_age, Some(ms(3000 - 490)));
        s.expire(at(3000));
        assert_eq!(s.sizes().1, 2, "kept four freshness periods");
        s.expire(at(5000));
        assert_eq!(s.sizes().1, 0, "stale flows leave");
        s.expire(at(70_000));
        assert_eq!(s.sizes(), (0, 0), "stale bases leave");
    }

    #[test]
    fn the_base_forgets_a_path_it_no_longer_has() {
        let mut s = one_vote();
        feed(&mut s, 1, 0, 1000, ms(0), |_, _| ms(0));
        // The path gets 15 ms longer for good (a route change): after at
        // most a base window it no longer reads as queueing.
        feed(&mut s, 1, 1000, 62_000, ms(0), |_, _| ms(15));
        assert_eq!(s.read(at(62_000)).delay, Some(ms(0)));
    }

    #[test]
    fn a_liar_beside_an_honest_sender_does_not_read_as_a_queue() {
        // Two downloads from two servers, both clocks verified; from 3 s
        // on, one server's stamps fall behind by 0.4 s a second (slow
        // enough to pass the clock checks) up to 10 s: a growing queue
        // that is not there. The honest one reads none.
        let lag = |t: u64| t.saturating_sub(3_000).min(25_000) * 2 / 5;
        let feed = |s: &mut DelaySignal| {
            for t in (0..30_000).step_by(10) {
                s.add_inbound(at(t), host(1), 1, (t + 500) as u32);
                s.add_inbound(at(t), host(2), 2, (t + 900 - lag(t)) as u32);
            }
        };
        let mut s = DelaySignal::default();
        feed(&mut s);
        let r = s.read_in(at(30_000));
        assert_eq!((r.delay, r.flows), (None, 2), "two networks decide nothing");
        // Read even with one network enough, the lesser of two is the
        // honest one (the mean read 5 s).
        let mut one = one_vote();
        feed(&mut one);
        let r = one.read_in(at(30_000));
        assert_eq!(r.delay, Some(ms(0)), "{r:?}");
    }

    #[test]
    fn fifty_flows_of_one_server_are_one_vote_against_three_honest_ones() {
        // Three servers on their own networks, a 30 ms queue beyond sluice
        // from 2 s on; one more server with 50 connections whose answers
        // it delays by 10 s after the first second.
        let mut s = DelaySignal::default();
        let liar = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 66));
        for t in (0..3_000).step_by(10) {
            let q = if t < 2_000 { 0 } else { 30 };
            for f in 0..3u64 {
                s.add(at(t), host(f as u8), f, ms(20 + q), ms(0));
            }
            for f in 100..150 {
                let lie = if t < 1_000 { 0 } else { 10_000 };
                s.add(at(t), liar, f, ms(20 + lie), ms(0));
            }
        }
        let r = s.read(at(3_000));
        assert_eq!((r.delay, r.flows), (Some(ms(30)), 4), "{r:?}");
    }

    #[test]
    fn a_flood_of_new_inbound_flows_leaves_the_verified_ones() {
        // Three servers' verified downloads, then a flood of new flow
        // hashes, ten times the room: the three still vote.
        let mut s = DelaySignal::new(Params {
            max_flows: 64,
            ..Params::default()
        });
        for t in (0..3_000).step_by(10) {
            for f in 0..3u64 {
                s.add_inbound(at(t), host(f as u8), f, t as u32);
            }
        }
        for (i, f) in (1_000..1_640u64).enumerate() {
            s.add_inbound(at(3_000) + Duration(i as u64), host(9), f, 5);
        }
        for t in (3_000..3_200).step_by(10) {
            for f in 0..3u64 {
                s.add_inbound(at(t), host(f as u8), f, t as u32);
            }
        }
        let r = s.read_in(at(3_200));
        assert_eq!((r.delay, r.flows), (Some(ms(0)), 3), "{r:?}");
    }

    #[test]
    fn memory_is_bounded() {
        let mut s = DelaySignal::new(Params {
            max_prefixes: 8,
            max_flows: 8,
            ..Params::default()
        });
        feed(&mut s, 50, 0, 100, ms(0), |_, _| ms(0));
        assert_eq!(s.sizes(), (8, 8));
    }
}
