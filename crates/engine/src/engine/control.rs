//! The shaper under control: autorate's ticks, rate changes, pauses and
//! the readings they act on.

use super::*;

impl Engine {
    /// Runs the autorate controllers that are due (crate::autorate): each
    /// reads its direction of the path ([`Monitor::reading`]) and the
    /// bytes its interface sent, and unless in dry-run applies the rate
    /// it chose.
    pub(super) fn autorate(&mut self, now: Instant) {
        let mut next: Option<Instant> = None;
        for idx in 0..self.ifaces.len() {
            // What this direction reads is the monitor's choice.
            let path = self.path.reading(now, idx);
            let reading = path.beyond;
            let i = &mut self.ifaces[idx];
            let Some((ctl, last)) = i.autorate.as_mut() else {
                continue;
            };
            let previous = ctl.last_reason();
            // An upload's link is read from what its far ends acknowledge.
            let decision = ctl.tick(now, i.counters.tx_bytes, path.delivered, reading);
            let t = ctl.next_tick();
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
            let Some(d) = decision else {
                continue;
            };
            *last = reading;
            let log = self.autorate_trace || ctl.worth_logging(&d, previous);
            if d.new != d.old && !d.dry_run {
                // The same change as by hand: it cannot fail here (the
                // controller exists only on a tree with a rate).
                let _ = self.set_rate(idx, d.new, now);
            }
            if d.hold > Duration::ZERO && !d.dry_run {
                self.hold(idx, d.hold, now);
            }
            if d.reason == Reason::Reconfig && d.new < d.old && !d.dry_run {
                // A `reconfig` window begins: the ACKs TCP control holds
                // are the senders' leave to send, taken at the first drop
                // in sluice's queue (a loss's ACK passes after its flow's
                // held ones), which comes an AQM interval later, in the
                // stall (lab, `starlink`: 26 ACKs at once, 23 KB in the
                // modem at 2 Mbit/s, a ping at 147 ms). Released now, what
                // they let through crosses the link before it stalls.
                self.tcp.release_iface(idx);
            }
            if log {
                if self.autorate_log.len() >= AUTORATE_LOG_CAP {
                    self.autorate_log.pop_front();
                }
                self.autorate_log.push_back((idx, d));
            }
        }
        self.next_autorate = next;
    }

    /// Where the wall clock is: at the engine's `mono` the Unix time (since
    /// the epoch) was `unix`. The engine's clock is monotonic and has no
    /// date; an autorate `reconfig` schedule is the wall clock's (Starlink
    /// changes at 12, 27, 42 and 57 s past the minute). The daemon calls
    /// this at start and again from time to time, as the clock is adjusted.
    pub fn set_wall_clock(&mut self, mono: Instant, unix: Duration) {
        let offset = Duration(unix.0.saturating_sub(mono.0));
        self.wall = Some(offset);
        for i in &mut self.ifaces {
            if let Some((c, _)) = i.autorate.as_mut() {
                c.set_wall_clock(Some(offset));
            }
        }
    }

    /// Diagnosis (`sluice run --autorate-trace`): every autorate decision
    /// goes to [`Engine::poll_autorate`], not only those worth a line, and
    /// every delay sample's parts to [`Engine::poll_signal_trace`].
    pub fn set_autorate_trace(&mut self, on: bool) {
        self.autorate_trace = on;
        self.path.set_trace(on);
    }

    /// The delay samples traced since the last call, with the name of the
    /// interface whose signal took each, and how many were dropped for
    /// want of room since tracing began.
    pub fn poll_signal_trace(&mut self) -> (Vec<(String, SampleTrace)>, u64) {
        let (traced, lost) = self.path.drain_trace();
        let name = |i: usize| self.ifaces[i].name.clone();
        (
            traced.into_iter().map(|(i, t)| (name(i), t)).collect(),
            lost,
        )
    }

    /// The next autorate decision worth logging (the rate moved, or the
    /// reason changed), with the name of its interface; the daemon writes
    /// them to its state directory.
    pub fn poll_autorate(&mut self) -> Option<(String, RateDecision)> {
        let (idx, d) = self.autorate_log.pop_front()?;
        Some((self.ifaces[idx].name.clone(), d))
    }

    /// Changes the rate of interface `iface`'s shaper (the root token
    /// bucket or the pipe) at `now`, with packets waiting: none is lost,
    /// those sent before `now` were paced at the old rate. The root
    /// queue's bandwidth and TCP control's shares that followed it follow;
    /// child classes keep the rates they were built with (docs/autorate.md).
    /// Returns the previous rate. A reload rebuilds the tree at the
    /// configured bandwidth.
    pub fn set_rate(&mut self, iface: usize, rate: Rate, now: Instant) -> Result<Rate, String> {
        let now = self.clamp(now);
        let Some(i) = self.ifaces.get_mut(iface) else {
            return Err(format!("no interface {iface}"));
        };
        let Some(t) = i.tree.as_mut() else {
            return Err(format!(
                "interface {}: no queues to change the rate of",
                i.name
            ));
        };
        if rate == Rate::ZERO {
            return Err(format!(
                "interface {}: rate 0 (a shaper needs a rate)",
                i.name
            ));
        }
        let Some(old) = retune(t, rate, now, &mut self.drops) else {
            return Err(format!("interface {}: its root has no rate", i.name));
        };
        self.tcp.follow_iface_rate(iface, old, rate);
        self.path.set_rate(iface, Some(rate));
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        Ok(old)
    }

    /// Interface `iface`'s shaper (the root token bucket or the pipe)
    /// sends nothing for `hold` from `now` ([`sluice_sched::Qdisc::hold`]):
    /// autorate's cut of an upload, which lets the queue beyond drain at
    /// the link's rate. Nothing waiting is lost; `false` where the root
    /// has no rate.
    pub fn hold(&mut self, iface: usize, hold: Duration, now: Instant) -> bool {
        let now = self.clamp(now);
        let Some(t) = self.ifaces.get_mut(iface).and_then(|i| i.tree.as_mut()) else {
            return false;
        };
        let held = t.root.hold(hold, now, &mut self.drops);
        if !self.drops.is_empty() {
            self.absorb_drops(iface);
        }
        held
    }

    /// The rate interface `iface` is shaped at now (its configured
    /// bandwidth, or the latest [`Engine::set_rate`]).
    pub fn rate(&self, iface: usize) -> Option<Rate> {
        self.ifaces.get(iface)?.tree.as_ref().map(|t| t.bandwidth)
    }

    /// The delay signal of the path through interface `iface` at `now`
    /// (crate::delay_signal) and the samples it has taken.
    pub fn delay_signal(&self, iface: usize, now: Instant) -> Option<(Reading, u64)> {
        self.path.round_trip(now, iface)
    }
}

/// Moves the rate of tree `t`'s root to `rate` at `now` (packets keep
/// waiting), with what follows the interface's rate: the root classes
/// shown at it and the classes paced at it. The old rate, or `None` when
/// the root has none.
pub(super) fn retune(t: &mut Tree, rate: Rate, now: Instant, drops: &mut Drops) -> Option<Rate> {
    let old = t.bandwidth;
    if !t.root.set_rate(rate, now, drops) {
        return None;
    }
    t.bandwidth = rate;
    for c in t.classes.iter_mut() {
        if c.parent.is_none() && c.bandwidth == Some(old) {
            c.bandwidth = Some(rate);
        }
        if c.pace_rate == old {
            c.pace_rate = rate;
        }
    }
    Some(old)
}

/// Verdict changes kept for [`Engine::poll_health`] when nobody collects them.
const HEALTH_LOG_CAP: usize = 64;

impl Engine {
    /// The health tick (crate::health): each shaped direction reads what
    /// the monitor and its interface measured, once.
    pub(super) fn health_tick(&mut self, now: Instant) {
        for idx in 0..self.ifaces.len() {
            let Some(rate) = self.rate(idx) else {
                continue;
            };
            let path = self.path.reading(now, idx);
            let Some(h) = self.health.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            let sample = crate::health::Sample {
                sent: self.ifaces[idx].counters.tx_bytes,
                rate,
                own: path.own,
                beyond: path.beyond.delay,
            };
            if let Some(change) = h.tick(now, sample) {
                if self.health_log.len() >= HEALTH_LOG_CAP {
                    self.health_log.pop_front();
                }
                self.health_log.push_back((idx, change));
            }
        }
        self.next_health = now + crate::health::TICK;
    }

    /// The health of the direction leaving by `iface`, as of the engine's
    /// latest `now`; `None` where it has no shaper.
    pub fn health(&self, iface: usize) -> Option<HealthReport> {
        let h = self.health.get(iface)?.as_ref()?;
        Some(h.report(self.last_now))
    }

    /// The next change of a direction's verdict, with the name of its
    /// interface: the daemon logs one line each.
    pub fn poll_health(&mut self) -> Option<(String, HealthChange)> {
        let (idx, c) = self.health_log.pop_front()?;
        Some((self.ifaces[idx].name.clone(), c))
    }
}

impl Engine {
    /// NAT-aware hosts (crate::nat): the engine records the connections
    /// whose original host it needs ([`Engine::take_nat_lookups`]) and
    /// uses the answers ([`Engine::answer_nat_lookup`]) in host isolation.
    pub fn set_nat_hosts(&mut self, on: bool) {
        self.nat.set_on(on);
    }

    /// The connections whose original host the caller should look up.
    pub fn take_nat_lookups(&mut self) -> Vec<crate::nat::NatKey> {
        self.nat.take_lookups()
    }

    /// Conntrack's answer for `key`: the original host, or none known.
    pub fn answer_nat_lookup(
        &mut self,
        key: crate::nat::NatKey,
        original: Option<std::net::IpAddr>,
    ) {
        self.nat.answer(key, original);
    }
}
