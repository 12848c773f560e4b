//! A controlled class's pacer: the token bucket at the class's pace, the
//! flows and hosts sharing it, and how the pace follows the queues.

use super::round::Round;
use super::*;

/// One host's flows in a pacer that shares by host: active this epoch and
/// the last (as [`Pacer::active_cur`] / `active_prev`), and opening.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HostFlows {
    pub(super) cur: u32,
    pub(super) prev: u32,
    pub(super) pending: u32,
    /// Counted in [`Pacer::hosts_sharing`] (until the next epoch's count,
    /// even if its flows went meanwhile).
    pub(super) counted: bool,
}

impl HostFlows {
    pub(super) fn flows(&self) -> u32 {
        self.cur.max(self.prev) + self.pending
    }
}

pub(super) struct Pacer {
    pub(super) iface: usize,
    pub(super) class: ClassId,
    pub(super) name: String,
    pub(super) ctl: ir::TcpControl,
    pub(super) rate: Rate,
    pub(super) overhead: Overhead,
    /// Credit in [`UNITS_PER_BYTE`] units; negative is debt.
    pub(super) tokens: i128,
    pub(super) burst: i128,
    pub(super) refilled: Instant,
    pub(super) round: Round,
    pub(super) epoch: u64,
    pub(super) epoch_start: Instant,
    pub(super) active_cur: u32,
    pub(super) active_prev: u32,
    /// Connections that opened (receiver's SYN seen) and have not moved
    /// data yet, for at most [`PENDING_FOR`]: they share the class before
    /// they move any data, so many set up one after another and started
    /// together (iperf3, a page's fetches) each get a small start.
    pub(super) pending: u32,
    /// The latest handshake RTT among the class's flows: the guess for a
    /// flow that has none yet (a SYN's window).
    pub(super) recent_rtt: Option<Duration>,
    /// Bytes queued in the class now (every packet, not only controlled ones).
    pub(super) backlog: u64,
    /// A standing queue above this (see [`STANDING`]) slows the pacer to
    /// [`DRAIN`] of its rate.
    pub(super) gate: u64,
    /// The least backlog since `window_start`, and whether the last whole
    /// window stood above the gate.
    pub(super) window_min: u64,
    pub(super) window_start: Instant,
    /// The pace now (bit/s): the class's rate, less while its queue stood.
    pub(super) pace_bps: u64,
    pub(super) report: TcpControlReport,
    /// Shares by host: the data's source or destination (host isolation).
    pub(super) by_host: Option<ir::HostIsolation>,
    pub(super) hosts: HashMap<IpAddr, HostFlows>,
    /// Opening flows per host that opened them (at most
    /// [`OPENING_PER_HOST`] each).
    pub(super) opening: HashMap<IpAddr, u32>,
    /// Connections whose SYN passed and whose handshake has not completed
    /// (for at most [`PENDING_FOR`]), in all and by host: they size the
    /// first windows of the connections opening with them, and nothing
    /// else — a SYN costs nothing, so it takes no share from anyone.
    pub(super) syns: u32,
    pub(super) syn_hosts: HashMap<IpAddr, u32>,
    /// The light flows (hosts, by host) at the last look at demand, and
    /// what they used then in millionths of the pace ([`super::share`]).
    pub(super) light: (u32, u32),
    pub(super) light_hosts: (u32, u32),
    /// Hosts with active or opening flows (a host counts from its first
    /// such flow until the epoch after its last).
    pub(super) hosts_sharing: u32,
    /// The class's data crossed the link before sluice (a LAN-side
    /// interface of a bridge): the queue it meets there is read.
    pub(super) reads_path: bool,
    /// The median standing queue before sluice over the class's flows
    /// ([`crate::owd`]); `None` without a fresh reading.
    pub(super) beyond: Option<Duration>,
    /// `beyond` when the pace was last lowered for it.
    pub(super) beyond_drained: Option<Duration>,
    /// A queue before sluice above this stands: [`BEYOND_GATE`], at least
    /// two full frames' time at the class's rate.
    pub(super) beyond_gate: Duration,
}

impl Pacer {
    /// The pace that drains a queue of `d` before sluice down to its gate
    /// within [`DRAIN_WITHIN`] — under the rate by the excess's size over
    /// that time, no lower than [`DEEP_FLOOR`] of it — when the excess is
    /// deeper than [`DEEP_GATE`]; `None` otherwise. The gate is the queue
    /// the pacer leaves by design (two frames on a slow line: 49 ms at 490
    /// kbit/s), which no cut should drain.
    pub(super) fn deep_pace(&self, d: Duration) -> Option<u64> {
        let excess = Duration(d.0.saturating_sub(self.beyond_gate.0));
        if excess <= DEEP_GATE {
            return None;
        }
        let rate = self.rate.as_bps();
        let cut = u128::from(rate) * u128::from(excess.0) / u128::from(DRAIN_WITHIN.0);
        let pace = rate.saturating_sub(u64::try_from(cut).unwrap_or(u64::MAX));
        Some(pace.max(rate / DEEP_FLOOR.1 * DEEP_FLOOR.0))
    }

    /// A fresh reading of the queue before sluice: one deep past its gate
    /// is cut at once to [`Pacer::deep_pace`], where the window's steps
    /// would leave it standing for half a second (a host's 32 downloads
    /// starting together put 70 ms in the modem).
    pub(super) fn on_path_reading(&mut self) {
        let Some(d) = self.beyond else {
            return;
        };
        let Some(deep) = self.deep_pace(d) else {
            return;
        };
        if self.falling(d) {
            return;
        }
        if deep < self.pace_bps {
            self.pace_bps = deep;
            self.beyond_drained = Some(d);
        }
    }

    /// The queue before sluice, now `d`, is already falling: below 3/4 of
    /// where it was at the last cut, which is left to work.
    pub(super) fn falling(&self, d: Duration) -> bool {
        self.beyond_drained
            .is_some_and(|was| d.0.saturating_mul(4) < was.0.saturating_mul(3))
    }

    pub(super) fn refill(&mut self, now: Instant) {
        let dt = now.saturating_since(self.refilled);
        self.refilled = now;
        // A standing queue in the class drains when the ACKs that feed it
        // slow down: a slower pace while it is above the gate.
        if now.saturating_since(self.window_start) >= STANDING {
            let rate = self.rate.as_bps();
            // By host, a standing queue is the many-flow host's (flows at
            // their two-segment floor, which no pace holds back), and
            // FQ-CoDel's isolation already keeps it to that host's share;
            // slowing the class's pace would only slow the other hosts,
            // whose ACKs the round releases at their share of it.
            let own = self.window_min > self.gate && self.by_host.is_none();
            // A queue before sluice (the modem's FIFO on a download) delays
            // every flow of the class, isolated or not, and drains only as
            // fast as the link outruns the pace: at 97 % of it, a burst
            // of fifty frames stands for seconds. Below the pace it drains
            // in a few hundred ms; while it is already falling (below 3/4 of
            // where it was at the last cut) the cut is left to work.
            let beyond = self.beyond.filter(|d| *d > self.beyond_gate);
            let falling = beyond.is_some_and(|d| self.falling(d));
            if own || (beyond.is_some() && !falling) {
                let floor = if own { MIN_PACE } else { BEYOND_FLOOR };
                let step = self.pace_bps - self.pace_bps / DRAIN.1 * DRAIN.0;
                let mut lowered = step.max(rate / floor.1 * floor.0);
                if let Some(deep) = beyond.and_then(|d| self.deep_pace(d)) {
                    lowered = lowered.min(deep);
                }
                self.pace_bps = lowered.min(self.pace_bps);
                if beyond.is_some() {
                    self.beyond_drained = beyond;
                }
            } else if beyond.is_none() && (self.window_min == 0 || self.by_host.is_some()) {
                // By host the class's own queue never empties (the
                // many-flow host's), and only a queue before sluice ever
                // lowered the pace: it comes back once that one is gone.
                // Under BEYOND_FLOOR only a deep queue's one cut put it:
                // that queue is gone, so back to the floor at once.
                let back = self.pace_bps.max(rate / BEYOND_FLOOR.1 * BEYOND_FLOOR.0);
                self.pace_bps = (back + rate / RAISE.1 * RAISE.0).min(rate);
            }
            if beyond.is_none() {
                self.beyond_drained = None;
            }
            self.window_min = self.backlog;
            self.window_start = now;
        }
        let bps = self.pace_bps as i128;
        self.tokens = (self.tokens + bps * dt.0 as i128).min(self.burst);
        let since = now.saturating_since(self.epoch_start);
        if since >= EPOCH {
            self.active_prev = if since >= EPOCH + EPOCH {
                0
            } else {
                self.active_cur
            };
            self.active_cur = 0;
            self.epoch += 1;
            self.epoch_start = now;
            if self.by_host.is_some() {
                let gap = since >= EPOCH + EPOCH;
                self.hosts.retain(|_, h| {
                    h.prev = if gap { 0 } else { h.cur };
                    h.cur = 0;
                    h.counted = true;
                    h.flows() > 0
                });
                self.hosts_sharing = self.hosts.len() as u32;
            }
        }
    }

    /// The host of the flow `key` in this pacer, if it shares by host.
    pub(super) fn host_of(&self, key: &Key) -> Option<IpAddr> {
        match self.by_host {
            Some(ir::HostIsolation::SrcHost) => Some(key.src),
            Some(ir::HostIsolation::DstHost) => Some(key.dst),
            _ => None,
        }
    }

    /// `host`'s count, the host counted among those sharing if new.
    pub(super) fn host_mut(&mut self, host: IpAddr) -> &mut HostFlows {
        let h = self.hosts.entry(host).or_default();
        if !h.counted {
            h.counted = true;
            self.hosts_sharing += 1;
        }
        h
    }

    /// The flows of `host` (at least 1): its DRR quantum's divisor.
    pub(super) fn host_load(&self, host: Option<IpAddr>) -> u32 {
        host.and_then(|h| self.hosts.get(&h))
            .map_or(1, |h| h.flows())
            .max(1)
    }

    /// A flow's share of the pace: over the flows sharing the class, or
    /// over the hosts and then its host's flows.
    pub(super) fn share(&self, host: Option<IpAddr>) -> Rate {
        let level = |n: u32, (light, ppm): (u32, u32)| {
            let used = u128::from(self.pace_bps) * u128::from(ppm) / 1_000_000;
            share::level(self.pace_bps, n, light, used as u64)
        };
        match host {
            None => Rate(level(self.sharing(), self.light)),
            Some(_) => {
                let hosts = level(self.hosts_sharing.max(1), self.light_hosts);
                Rate(hosts / u64::from(self.host_load(host)))
            }
        }
    }

    /// A look at demand: `light` flows (hosts) used `used_bps` over the
    /// last while; kept as a fraction of the pace for [`Pacer::share`].
    pub(super) fn note_demand(&mut self, flows: (u32, u64), hosts: (u32, u64)) {
        let ppm = |used: u64| {
            let p = u128::from(used) * 1_000_000 / u128::from(self.pace_bps.max(1));
            u32::try_from(p.min(1_000_000)).unwrap_or(1_000_000)
        };
        self.light = (flows.0, ppm(flows.1));
        self.light_hosts = (hosts.0, ppm(hosts.1));
    }

    /// The equal share of a flow (a host, by host), bit/s.
    pub(super) fn equal_bps(&self, by_host: bool) -> u64 {
        let n = if by_host {
            self.hosts_sharing.max(1)
        } else {
            self.sharing()
        };
        self.pace_bps / u64::from(n)
    }

    /// The share an opening connection's first window is sized from: as
    /// [`Pacer::share`], with the connections still in their handshake
    /// counted too (many opened together each get a small first flight).
    pub(super) fn opening_share(&self, host: Option<IpAddr>) -> Rate {
        match host {
            None => Rate(self.pace_bps / u64::from(self.sharing() + self.syns)),
            Some(h) => {
                let known = self.hosts.get(&h);
                let new = u32::from(!known.is_some_and(|k| k.counted));
                let hosts = u64::from((self.hosts_sharing + new).max(1));
                let syns = self.syn_hosts.get(&h).copied().unwrap_or(0);
                let load = known.map_or(0, |k| k.flows()) + syns;
                Rate(self.pace_bps / hosts / u64::from(load.max(1)))
            }
        }
    }

    /// A connection's SYN passed (`true`), or its handshake completed or
    /// it was forgotten (`false`): see [`Pacer::syns`].
    pub(super) fn count_syn(&mut self, host: Option<IpAddr>, up: bool) {
        if up {
            self.syns += 1;
        } else {
            self.syns = self.syns.saturating_sub(1);
        }
        let Some(h) = host else {
            return;
        };
        let n = self.syn_hosts.entry(h).or_default();
        if up {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
        }
        if *n == 0 {
            self.syn_hosts.remove(&h);
        }
    }

    pub(super) fn active(&self) -> u32 {
        self.active_cur.max(self.active_prev).max(1)
    }

    /// Flows a new connection shares with: the active ones and those that
    /// just opened (many that start together each get a small start).
    pub(super) fn sharing(&self) -> u32 {
        self.active() + self.pending
    }

    /// Charges `bytes` to the bucket; its debt never exceeds
    /// [`DEBT_BURSTS`] bursts, whatever was charged (flushes, caps): the
    /// longest the class's ACKs can then wait for credit is that many
    /// bursts' time.
    pub(super) fn charge(&mut self, bytes: u64) {
        let floor = -self.burst * DEBT_BURSTS;
        self.tokens = (self.tokens - bytes as i128 * UNITS_PER_BYTE).max(floor);
    }

    /// The bucket's depth in bytes.
    pub(super) fn burst_bytes(&self) -> u64 {
        u64::try_from(self.burst / UNITS_PER_BYTE).unwrap_or(u64::MAX)
    }

    /// When the bucket is out of debt.
    pub(super) fn ready_at(&self) -> Instant {
        if self.tokens >= 0 || self.pace_bps == 0 {
            return self.refilled;
        }
        let r = self.pace_bps as i128;
        let ns = (-self.tokens + r - 1) / r;
        self.refilled + Duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}
