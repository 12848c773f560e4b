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
//!   mean sojourn of packets leaving through X (an EWMA over packets,
//!   gain 1/8), never below zero. ACKs held by TCP control are not in
//!   that sojourn: a constant hold ends up in the base.
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
//! - **Robust across flows.** The signal is the median over flows with a
//!   sample in the last [`Params::fresh`] (1 s): a minority of noisy
//!   flows (a slow far server, a Wi-Fi client) cannot move it.
//! - **Confidence, not a guess.** A reading carries how many flows it is
//!   the median of and the age of the newest sample; no fresh flow means
//!   no signal (`delay: None`), never zero.
//! - Bounded memory: at most [`Params::max_prefixes`] bases and
//!   [`Params::max_flows`] flows (the stalest one makes room); stale
//!   entries leave at [`DelaySignal::expire`].

use sluice_time::{Duration, Instant};
use std::collections::HashMap;
use std::net::IpAddr;

/// Tuning of the signal (the defaults are what the engine runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub base_window: Duration,
    pub flow_window: Duration,
    pub fresh: Duration,
    pub max_prefixes: usize,
    pub max_flows: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            base_window: Duration::from_secs(60),
            flow_window: Duration::from_millis(100),
            fresh: Duration::from_secs(1),
            max_prefixes: 4096,
            max_flows: 1024,
        }
    }
}

/// The least value of a sliding window, kept as the minima of its two
/// halves: covers the last `window / 2` to `window`.
#[derive(Clone, Copy, Debug)]
struct WindowMin {
    cur: Duration,
    cur_start: Instant,
    prev: Option<Duration>,
    last: Instant,
}

impl WindowMin {
    fn new(v: Duration, now: Instant) -> Self {
        WindowMin {
            cur: v,
            cur_start: now,
            prev: None,
            last: now,
        }
    }

    fn add(&mut self, v: Duration, now: Instant, window: Duration) {
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

    fn get(&self) -> Duration {
        self.prev.map_or(self.cur, |p| p.min(self.cur))
    }
}

/// A network beyond the link: IPv4 /24, IPv6 /48.
fn prefix(a: IpAddr) -> (bool, u64) {
    match a {
        IpAddr::V4(v) => (false, u64::from(u32::from(v) >> 8)),
        IpAddr::V6(v) => (true, (u128::from(v) >> 80) as u64),
    }
}

/// One reading of the signal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The median delay beyond sluice over fresh flows; `None` without any.
    pub delay: Option<Duration>,
    /// Flows the median is taken over.
    pub flows: u32,
    /// Age of the newest sample (any flow); `None` before the first.
    pub newest_age: Option<Duration>,
}

/// The delay signal of the path through one interface.
#[derive(Clone, Debug)]
pub struct DelaySignal {
    params: Params,
    bases: HashMap<(bool, u64), WindowMin>,
    flows: HashMap<u64, WindowMin>,
    newest: Option<Instant>,
    /// Samples taken (counter).
    pub samples: u64,
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
            bases: HashMap::new(),
            flows: HashMap::new(),
            newest: None,
            samples: 0,
        }
    }

    /// A sample `rtt` of flow `flow` to far host `far`, taken at `now`,
    /// with sluice's own recent sojourn on the way out `own`.
    pub fn add(&mut self, now: Instant, far: IpAddr, flow: u64, rtt: Duration, own: Duration) {
        let p = self.params;
        let corrected = Duration(rtt.0.saturating_sub(own.0));
        let key = prefix(far);
        if !self.bases.contains_key(&key) && self.bases.len() >= p.max_prefixes {
            evict_stalest(&mut self.bases);
        }
        let base = self
            .bases
            .entry(key)
            .and_modify(|b| b.add(corrected, now, p.base_window))
            .or_insert_with(|| WindowMin::new(corrected, now))
            .get();
        let delay = Duration(corrected.0.saturating_sub(base.0));
        if !self.flows.contains_key(&flow) && self.flows.len() >= p.max_flows {
            evict_stalest(&mut self.flows);
        }
        self.flows
            .entry(flow)
            .and_modify(|f| f.add(delay, now, p.flow_window))
            .or_insert_with(|| WindowMin::new(delay, now));
        self.newest = Some(self.newest.map_or(now, |n| n.max(now)));
        self.samples += 1;
    }

    /// The signal at `now`.
    pub fn read(&self, now: Instant) -> Reading {
        let fresh = self.params.fresh;
        let mut v: Vec<Duration> = self
            .flows
            .values()
            .filter(|f| now.saturating_since(f.last) <= fresh)
            .map(WindowMin::get)
            .collect();
        v.sort_unstable();
        let delay = match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some(Duration((v[n / 2 - 1].0 + v[n / 2].0) / 2)),
        };
        Reading {
            delay,
            flows: v.len() as u32,
            newest_age: self.newest.map(|t| now.saturating_since(t)),
        }
    }

    /// Forgets flows not heard from in four freshness periods and bases
    /// older than their window.
    pub fn expire(&mut self, now: Instant) {
        let p = self.params;
        let flow_ttl = Duration(p.fresh.0.saturating_mul(4));
        self.flows
            .retain(|_, f| now.saturating_since(f.last) <= flow_ttl);
        self.bases
            .retain(|_, b| now.saturating_since(b.last) <= p.base_window);
    }

    /// Bases and flows held (for tests and reports).
    pub fn sizes(&self) -> (usize, usize) {
        (self.bases.len(), self.flows.len())
    }
}

fn evict_stalest<K: Copy + Eq + std::hash::Hash>(m: &mut HashMap<K, WindowMin>) {
    if let Some(k) = m.iter().min_by_key(|(_, w)| w.last).map(|(k, _)| *k) {
        m.remove(&k);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
        let mut s = DelaySignal::default();
        feed(&mut s, 1, 0, 1000, ms(0), |_, _| ms(0));
        // The path gets 15 ms longer for good (a route change): after at
        // most a base window it no longer reads as queueing.
        feed(&mut s, 1, 1000, 62_000, ms(0), |_, _| ms(15));
        assert_eq!(s.read(at(62_000)).delay, Some(ms(0)));
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
