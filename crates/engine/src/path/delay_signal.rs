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
//!   given with [`Params::min_voters`] (1) voters or more. A noisy
//!   minority (a slow far server, a Wi-Fi client) cannot move it, nor can
//!   one server with fifty connections.
//! - **The guarantee.** Of `n` voting networks, liars must be more than
//!   half to raise the reading above every honest network's value (a cut
//!   to `min`), and at least half to lower it below every honest one (a
//!   raise to `max`); fewer keep it within the honest values' range. So
//!   one hostile server beside one honest download cannot cut the rate;
//!   a lone network's word decides for the link it alone loads.
//! - **The way in only from conversations sluice carries.** A sender's
//!   stamps ([`DelaySignal::add_inbound`]) count only for connections
//!   the LAN host acknowledged lately ([`DelaySignal::answered`]; the
//!   engine tells): an unsolicited or spoofed segment, which the LAN host
//!   answers with a RST if at all, creates no entry. This needs no state
//!   (a rule set that keeps none still reads). Its clock is checked all
//!   the time ([`crate::owd`]).
//! - **Confidence, not a guess.** A reading carries how many networks
//!   voted and the age of the newest sample; no fresh flow means no
//!   signal (`delay: None`), never zero.
//! - Bounded memory: at most [`Params::max_prefixes`] bases and
//!   [`Params::max_flows`] flows; room is made in O(1) amortised, new
//!   entries (an inbound flow whose clock is not yet verified) first
//!   ([`crate::bounded`]); stale entries leave at [`DelaySignal::expire`].

use super::minmax::WindowMin;
use super::owd::Owd;
pub use super::sojourn::{FlowSojourn, Own, Sojourn};
use crate::bounded::{Bounded, PreHashed};
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
    /// Per connection, by its flow hash (a keyed hash already).
    flows: Bounded<u64, FlowDelay, PreHashed>,
    /// The same for samples a pure ACK completed (see [`DelaySignal::add_ack`]).
    ack_bases: Bounded<Voter, WindowMin>,
    ack_flows: Bounded<u64, FlowDelay, PreHashed>,
    /// Each flow's one-way delay on the way in (see
    /// [`DelaySignal::add_inbound`]).
    inbound: Bounded<u64, Inbound, PreHashed>,
    /// Connections (by the far end's flow hash) the LAN host acknowledged
    /// lately: only their stamps count ([`DelaySignal::add_inbound`]).
    answered: Bounded<u64, Instant, PreHashed>,
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
            answered: Bounded::new(params.max_flows),
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
        (bases, flows): (
            &mut Bounded<Voter, WindowMin>,
            &mut Bounded<u64, FlowDelay, PreHashed>,
        ),
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

    /// The signal at `now`: the vote of the far networks of fresh flows
    /// with data samples ([`crate::votes`]), or of every fresh flow when
    /// fewer than [`MIN_DATA_FLOWS`] have.
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
        let values = |m: &Bounded<u64, FlowDelay, PreHashed>| -> Vec<(Voter, Duration)> {
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
    /// Counted only for a connection the LAN host acknowledged lately
    /// ([`DelaySignal::answered`]; see the Principles).
    pub fn add_inbound(&mut self, now: Instant, far: IpAddr, flow: u64, tsval: u32) {
        let ttl = self.flow_ttl();
        if self
            .answered
            .get(&flow)
            .is_none_or(|t| now.saturating_since(*t) > ttl)
        {
            return;
        }
        let voter = network(far);
        let make = || Inbound {
            voter,
            owd: Owd::default(),
        };
        let i = self.inbound.entry(flow, make, |i| i.owd.verified());
        i.voter = voter;
        i.owd.on_data(now, tsval);
    }

    /// The LAN host acknowledged a segment of the connection whose far
    /// end's packets have flow hash `flow`: its stamps count for a while.
    pub fn answered(&mut self, now: Instant, flow: u64) {
        *self.answered.entry(flow, || now, |_| true) = now;
    }

    fn flow_ttl(&self) -> Duration {
        Duration(self.params.fresh.0.saturating_mul(4))
    }

    /// Forgets flows not heard from in four freshness periods and bases
    /// older than their window.
    pub fn expire(&mut self, now: Instant) {
        let p = self.params;
        let flow_ttl = self.flow_ttl();
        self.answered
            .retain(|t| now.saturating_since(*t) <= flow_ttl);
        for flows in [&mut self.flows, &mut self.ack_flows] {
            flows.retain(|f| now.saturating_since(f.rtt.last()) <= flow_ttl);
        }
        self.inbound.retain(|i| {
            i.owd
                .last()
                .is_some_and(|t| now.saturating_since(t) <= flow_ttl)
        });
        for bases in [&mut self.bases, &mut self.ack_bases] {
            bases.retain(|b| now.saturating_since(b.last()) <= p.base_window);
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

#[cfg(test)]
mod tests;
