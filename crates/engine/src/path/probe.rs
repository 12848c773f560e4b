//! autorate's active probes (issue #16 item 2, the optional part;
//! docs/autorate.md "Probes"): a delay reading for a link that carries no
//! TCP sluice can read — QUIC, games, calls, TCP without timestamps.
//!
//! # Principles
//!
//! - **Only where asked, never required.** `autorate (…, probe ADDR)`
//!   names the address (the modem, the ISP's first hop); the reading
//!   stands in only for a direction whose TCP reading is empty
//!   ([`crate::delay_signal`] is per direction, a ping's round trip is not).
//! - **Beside sluice's queue, not in it.** A probe leaves ahead of the
//!   shaped traffic and its reply is taken before sluice's queue on the
//!   way back: the round trip is the path beyond sluice and nothing of
//!   sluice's own wait, so nothing is subtracted.
//! - **In the name of the traffic it stands beside.** sluice has no
//!   address: a probe borrows the link-layer header and source address of
//!   the latest frame of its family that left by the same way (the
//!   router's, or a host's behind a NAT router, which forwards the reply
//!   back). No such frame in the last [`TEMPLATE_FRESH`]: no probe — an
//!   idle line is not pinged.
//! - **Only a name that works.** A frame lends its header only if the
//!   rules passed it (the engine asks after classifying), it goes to the
//!   gateway — its destination MAC is one that frames from the far side
//!   came from ([`Prober::heard`]) — and its source address is one that
//!   frames from the far side were sent to, both within
//!   [`TEMPLATE_FRESH`]. A LAN host sending to a bogus MAC or from an
//!   address nobody answers cannot become the template and steer the
//!   probes nowhere: the engine can tell those two things of every frame,
//!   while "a state admitted it" holds for any frame a default-pass rule
//!   set lets through.
//! - **Known by its payload, one cookie a probe.** A NAT may rewrite an
//!   echo's identifier; the payload comes back as sent (RFC 792, RFC 4443
//!   §4.2). It carries the sequence number and a cookie, SipHash-1-3 of
//!   the target, an epoch and that sequence number under a key of the
//!   probe's own derived from the engine's secret: it discloses nothing of
//!   the secret, differs for each probe, and cannot be guessed for the
//!   next one. A reply is sluice's (taken out of the traffic: the host
//!   whose name was borrowed never sees it) only if its cookie is its
//!   sequence number's.
//! - **Cheap on a slow line.** One request per interval, the interval
//!   chosen so probes take at most [`SHARE`] of the slower direction's
//!   shaped rate, and never shorter than [`MIN_INTERVAL`] (IPv4 over
//!   Ethernet, 58 bytes: at 128 kbit/s one every 0.36 s; from 464 kbit/s
//!   every 100 ms).
//! - **A reading like the traffic's, a base no one reply sets.** The base
//!   is the least, over a sliding window (60 s, as the TCP signal's), of
//!   the median of each [`MEDIAN_OF`] latest replies: one early reply (a
//!   forgery by whoever saw a probe go by) cannot pin it near zero and read
//!   every real reply as delay for a minute. The delay is the median of
//!   the last [`MEDIAN_OF`] replies less the base; a reply older than
//!   [`fresh`] leaves no reading (`None`, never zero). A request not
//!   answered within [`LOST_AFTER`] is counted lost and gives no sample:
//!   a loss says nothing a queue's growth does not say sooner.

use super::delay_signal::Reading;
use super::minmax::WindowMin;
use siphasher::sip::SipHasher13;
use sluice_time::{Duration, Instant, Rate};
use sluice_wire::PacketInfo;
use std::collections::VecDeque;
use std::hash::Hasher;
use std::net::IpAddr;

/// Share of the slower direction's rate the probes may take.
pub const SHARE: f64 = 0.01;
/// The shortest interval between two requests.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// A template older than this is not used: the line is idle.
pub const TEMPLATE_FRESH: Duration = Duration::from_secs(10);
/// A request unanswered this long is lost.
pub const LOST_AFTER: Duration = Duration::from_secs(2);
/// The reading is the median of this many latest replies.
pub const MEDIAN_OF: usize = 3;
/// The base's window, as the TCP signal's.
const BASE_WINDOW: Duration = Duration::from_secs(60);
/// Requests remembered while unanswered.
const OUTSTANDING: usize = 32;
/// The link-layer header is refreshed from the traffic this often.
const RELEARN: Duration = Duration::from_secs(1);
/// Bytes of payload: the cookie, then the sequence number again.
const PAYLOAD: usize = 16;
/// The longest link-layer header kept (Ethernet, two tags, PPPoE + PPP).
const L2_MAX: usize = 14 + 8 + 8;
/// Gateway MACs remembered from the far side's frames (a modem, a
/// router and their spares).
const GATEWAYS: usize = 4;
/// Addresses the far side's frames went to, remembered: the router's, or
/// the busiest hosts' of a bridged LAN (a template is relearned from any
/// of them).
const ADDRESSES: usize = 16;

/// What a probe of this family borrows from the traffic.
#[derive(Clone, Debug)]
struct Template {
    l2: Vec<u8>,
    src: IpAddr,
    at: Instant,
}

/// Counters and the latest round trip, for `show queues` and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeStats {
    pub sent: u64,
    pub answered: u64,
    pub lost: u64,
    /// Replies with the cookie but a sequence number not outstanding (late
    /// after being counted lost, or duplicated): taken, no sample.
    pub stray: u64,
    pub last_rtt: Option<Duration>,
}

/// The prober of one WAN side.
#[derive(Clone, Debug)]
pub struct Prober {
    target: IpAddr,
    /// The probe's own key, derived from the engine's secret.
    key: (u64, u64),
    /// Mixed into each cookie: when this prober's sequence began.
    epoch: u64,
    ident: u16,
    seq: u16,
    /// Source MACs of frames from the far side, and the addresses they
    /// were sent to, with when last seen.
    gateways: [Option<([u8; 6], Instant)>; GATEWAYS],
    addresses: [Option<(IpAddr, Instant)>; ADDRESSES],
    next_send: Instant,
    template: Option<Template>,
    outstanding: VecDeque<(u16, Instant)>,
    replies: VecDeque<(Instant, Duration)>,
    base: Option<WindowMin>,
    pub stats: ProbeStats,
}

impl Prober {
    /// A prober of `target`; `key` (the engine's secret) gives, through a
    /// key of the probe's own, the cookies and the identifier, so that
    /// another sluice's probes, or a host's pings, are not taken for this
    /// one's.
    pub fn new(target: IpAddr, key: [u8; 16]) -> Prober {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&key[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let derive = |what: &[u8]| {
            let mut h = SipHasher13::new_with_keys(word(0), word(8));
            h.write(b"sluice probe key ");
            h.write(what);
            h.finish()
        };
        let key = (derive(b"0"), derive(b"1"));
        Prober {
            target,
            key,
            epoch: 0,
            ident: derive(b"ident") as u16,
            seq: 0,
            gateways: [None; GATEWAYS],
            addresses: [None; ADDRESSES],
            next_send: Instant::ZERO,
            template: None,
            outstanding: VecDeque::new(),
            replies: VecDeque::new(),
            base: None,
            stats: ProbeStats::default(),
        }
    }

    pub fn target(&self) -> IpAddr {
        self.target
    }

    /// The cookie of the probe of sequence number `seq` in this epoch.
    fn cookie(&self, seq: u16) -> [u8; 8] {
        let mut h = SipHasher13::new_with_keys(self.key.0, self.key.1);
        match self.target {
            IpAddr::V4(a) => h.write(&a.octets()),
            IpAddr::V6(a) => h.write(&a.octets()),
        }
        h.write_u64(self.epoch);
        h.write_u16(seq);
        h.finish().to_be_bytes()
    }

    /// A frame from the far side at `now`: its source MAC is a gateway's,
    /// its destination address one that answers reach.
    pub fn heard(&mut self, now: Instant, frame: &[u8], info: &PacketInfo) {
        let Some(ip) = &info.ip else { return };
        let Some(mac) = frame.get(6..12).and_then(|m| <[u8; 6]>::try_from(m).ok()) else {
            return;
        };
        remember(&mut self.gateways, mac, now);
        remember(&mut self.addresses, ip.dst, now);
    }

    /// Whether frames from the far side came from `mac` and were sent to
    /// `addr` lately.
    fn answered(&self, now: Instant, mac: &[u8], addr: IpAddr) -> bool {
        let fresh = |at: Instant| now.saturating_since(at) < TEMPLATE_FRESH;
        let gw = self
            .gateways
            .iter()
            .flatten()
            .any(|(m, at)| m[..] == *mac && fresh(*at));
        gw && self
            .addresses
            .iter()
            .flatten()
            .any(|(a, at)| *a == addr && fresh(*at))
    }

    /// A frame the rules passed, leaving by the probe's way at `now`: an
    /// IP frame of the target's family to a gateway, from an address the
    /// far side answers, lends its link-layer header and source address
    /// (taken again at most every [`RELEARN`]).
    pub fn learn(&mut self, now: Instant, frame: &[u8], info: &PacketInfo) {
        // Most frames stop here: one look at the clock.
        if self
            .template
            .as_ref()
            .is_some_and(|t| now.saturating_since(t.at) < RELEARN)
        {
            return;
        }
        let Some(ip) = &info.ip else { return };
        // The frame's EtherType (or PPP protocol) is then the family's.
        if ip.src.is_ipv4() != self.target.is_ipv4()
            || !self.may_borrow(frame, ip)
            || !frame
                .get(..6)
                .is_some_and(|dst| self.answered(now, dst, ip.src))
        {
            return;
        }
        let Some(l2) = frame.get(..info.l3_offset).filter(|h| h.len() <= L2_MAX) else {
            return;
        };
        self.template = Some(Template {
            l2: l2.to_vec(),
            src: ip.src,
            at: now,
        });
    }

    /// Whether a frame's header and source can carry a probe: sent to one
    /// station (a DHCP discover is broadcast, from no address), from a
    /// unicast address a reply can come back to — link-local only for a
    /// link-local target (a router answers a global address from beyond
    /// the link, not a `169.254` or `fe80::` one).
    fn may_borrow(&self, frame: &[u8], ip: &sluice_wire::IpInfo) -> bool {
        let to_one = frame.first().is_some_and(|b| b & 1 == 0);
        let local = |a: IpAddr| match a {
            IpAddr::V4(v) => v.is_link_local(),
            IpAddr::V6(v) => v.is_unicast_link_local(),
        };
        let unicast = |a: IpAddr| match a {
            IpAddr::V4(v) => !(v.is_unspecified() || v.is_broadcast() || v.is_multicast()),
            IpAddr::V6(v) => !(v.is_unspecified() || v.is_multicast()),
        };
        to_one && unicast(ip.src) && unicast(ip.dst) && (!local(ip.src) || local(self.target))
    }

    /// The interval between requests at the slower direction's shaped
    /// `rate`: at most [`SHARE`] of it, never below [`MIN_INTERVAL`].
    pub fn interval(&self, rate: Rate) -> Duration {
        let bits = (self.frame_len() * 8) as f64;
        let per_s = rate.as_bps() as f64 * SHARE;
        if per_s <= 0.0 {
            return MIN_INTERVAL;
        }
        Duration::from_nanos((bits / per_s * 1e9) as u64).max(MIN_INTERVAL)
    }

    fn frame_len(&self) -> usize {
        let l2 = self.template.as_ref().map_or(14, |t| t.l2.len());
        let ip = if self.target.is_ipv4() { 20 } else { 40 };
        l2 + ip + 8 + PAYLOAD
    }

    /// When the next request is due; `None` without a fresh template
    /// (nothing to stand beside: the line is idle).
    pub fn next_send(&self, now: Instant) -> Option<Instant> {
        let t = self.template.as_ref()?;
        (now.saturating_since(t.at) < TEMPLATE_FRESH).then_some(self.next_send)
    }

    /// The request due at `now`, if any; the next one `interval` later.
    pub fn poll(&mut self, now: Instant, interval: Duration) -> Option<Vec<u8>> {
        if self.next_send(now)? > now {
            return None;
        }
        let t = self.template.as_ref()?;
        if self.stats.sent == 0 || self.seq == u16::MAX {
            // A new epoch: no cookie of an earlier one (this prober's
            // before the sequence wrapped, or one before a reload) is
            // this one's again.
            self.epoch = now.0.wrapping_add(self.stats.sent);
            self.stats.lost += self.outstanding.len() as u64;
            self.outstanding.clear();
        }
        self.seq = self.seq.wrapping_add(1);
        let mut payload = [0u8; PAYLOAD];
        payload[..8].copy_from_slice(&self.cookie(self.seq));
        payload[8..10].copy_from_slice(&self.seq.to_be_bytes());
        let f = sluice_wire::echo::echo_request(
            &t.l2,
            t.src,
            self.target,
            self.ident,
            self.seq,
            &payload,
        )?;
        self.next_send = now + interval;
        self.expire(now);
        if self.outstanding.len() >= OUTSTANDING {
            self.outstanding.pop_front();
            self.stats.lost += 1;
        }
        self.outstanding.push_back((self.seq, now));
        self.stats.sent += 1;
        Some(f)
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(_, at)) = self.outstanding.front() {
            if now.saturating_since(at) < LOST_AFTER {
                break;
            }
            self.outstanding.pop_front();
            self.stats.lost += 1;
        }
    }

    /// A frame arriving from the far side at `now`: `true` when it is a
    /// reply to this prober (take it out of the traffic), after noting its
    /// round trip.
    pub fn on_reply(&mut self, now: Instant, frame: &[u8], info: &PacketInfo) -> bool {
        let Some(r) = sluice_wire::echo::echo_reply(frame, info) else {
            return false;
        };
        // The sequence number in the payload: a NAT may rewrite the header's.
        let Some(&[a, b]) = r.payload.get(8..10) else {
            return false;
        };
        let seq = u16::from_be_bytes([a, b]);
        if r.src != self.target || r.payload.get(..8) != Some(&self.cookie(seq)[..]) {
            return false;
        }
        let Some(pos) = self.outstanding.iter().position(|&(s, _)| s == seq) else {
            self.stats.stray += 1;
            return true;
        };
        let (_, sent) = self.outstanding[pos];
        // Requests sent before it and still unanswered were overtaken: lost.
        self.outstanding.drain(..=pos);
        self.stats.lost += pos as u64;
        let rtt = now.saturating_since(sent);
        self.stats.answered += 1;
        self.stats.last_rtt = Some(rtt);
        if self.replies.len() >= MEDIAN_OF {
            self.replies.pop_front();
        }
        self.replies.push_back((now, rtt));
        if let Some(m) = self.median().filter(|_| self.replies.len() >= MEDIAN_OF) {
            match self.base.as_mut() {
                Some(b) => b.add(m, now, BASE_WINDOW),
                None => self.base = Some(WindowMin::new(m, now)),
            }
        }
        true
    }

    /// The median of the latest replies' round trips.
    fn median(&self) -> Option<Duration> {
        let mut v: Vec<Duration> = self.replies.iter().map(|&(_, r)| r).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    }

    /// The delay beyond sluice, both ways, at `now` (requests sent
    /// `interval` apart): the median of the latest replies less the base;
    /// `None` when the newest reply is older than [`fresh`] of it.
    pub fn reading(&self, now: Instant, interval: Duration) -> Reading {
        let newest = self.replies.back().map(|&(at, _)| now.saturating_since(at));
        let base = match (newest, &self.base) {
            (Some(age), Some(base)) if age <= fresh(interval) => base.get(),
            _ => {
                return Reading {
                    newest_age: newest,
                    ..Reading::default()
                }
            }
        };
        let Some(median) = self.median() else {
            return Reading::default();
        };
        Reading {
            delay: Some(median - base),
            flows: 1,
            newest_age: newest,
            probe: true,
        }
    }
}

/// Puts `v` seen at `now` in `memo`: in its own entry if there, else in
/// an empty or the stalest one.
fn remember<T: Copy + PartialEq>(memo: &mut [Option<(T, Instant)>], v: T, now: Instant) {
    let i = memo
        .iter()
        .position(|e| e.is_some_and(|(x, _)| x == v))
        .or_else(|| memo.iter().position(Option::is_none))
        .or_else(|| (0..memo.len()).min_by_key(|&i| memo[i].map(|(_, at)| at)));
    if let Some(i) = i {
        memo[i] = Some((v, now));
    }
}

/// How old the newest reply may be for a reading: three intervals, and at
/// least the TCP signal's second.
pub fn fresh(interval: Duration) -> Duration {
    Duration(interval.0.saturating_mul(3)).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::{build, parse};
    use std::net::Ipv4Addr;

    const KEY: [u8; 16] = *b"0123456789abcdef";
    const MODEM: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::ZERO + ms(n)
    }

    /// A frame of the router's leaving for the far side.
    fn outbound() -> Vec<u8> {
        build::udp_v4(
            Ipv4Addr::new(203, 0, 113, 5),
            Ipv4Addr::new(198, 51, 100, 9),
            4000,
            443,
            1200,
        )
    }

    /// A frame from the far side to the router: its source MAC is the one
    /// the router's frames go to.
    fn inbound() -> Vec<u8> {
        let mut f = build::udp_v4(
            Ipv4Addr::new(198, 51, 100, 9),
            Ipv4Addr::new(203, 0, 113, 5),
            443,
            4000,
            100,
        );
        let (dst, src) = (f[..6].to_vec(), f[6..12].to_vec());
        f[..6].copy_from_slice(&src);
        f[6..12].copy_from_slice(&dst);
        f
    }

    /// A prober that heard the far side answer the router at `now`.
    fn answered(now: Instant) -> Prober {
        let mut p = Prober::new(MODEM, KEY);
        let f = inbound();
        p.heard(now, &f, &parse(&f).unwrap());
        p
    }

    /// The target's answer to `req`, as the wire would bring it.
    fn reply_to(req: &[u8]) -> Vec<u8> {
        build::echo_reply_to(req).expect("an echo request")
    }

    fn taught(now: Instant) -> Prober {
        let mut p = answered(now);
        let f = outbound();
        p.learn(now, &f, &parse(&f).unwrap());
        p
    }

    #[test]
    fn no_traffic_no_probe() {
        let mut p = Prober::new(MODEM, KEY);
        assert_eq!(p.next_send(at(0)), None);
        assert_eq!(p.poll(at(0), ms(100)), None);
        let mut p = taught(at(0));
        assert!(p.poll(at(0), ms(100)).is_some());
        // The line has been idle for longer than the template lasts.
        assert_eq!(p.poll(at(0) + TEMPLATE_FRESH, ms(100)), None);
    }

    #[test]
    fn a_probe_borrows_the_traffics_header_and_source() {
        let mut p = taught(at(0));
        let req = p.poll(at(0), ms(100)).unwrap();
        let out = outbound();
        assert_eq!(&req[..14], &out[..14], "the same MACs");
        let ip = parse(&req).unwrap().ip.unwrap();
        assert_eq!(ip.src, IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5)));
        assert_eq!(ip.dst, MODEM);
        // Not again before the interval.
        assert_eq!(p.poll(at(99), ms(100)), None);
        assert!(p.poll(at(100), ms(100)).is_some());
        assert_eq!(p.stats.sent, 2);
    }

    #[test]
    fn a_broadcast_or_a_frame_from_no_address_lends_nothing() {
        let mut p = answered(at(0));
        // A DHCP discover: from 0.0.0.0 to 255.255.255.255, broadcast MAC.
        let mut dhcp = build::udp_v4(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, 68, 67, 300);
        dhcp[..6].copy_from_slice(&[0xff; 6]);
        p.learn(at(0), &dhcp, &parse(&dhcp).unwrap());
        // mDNS to a multicast group, and a link-local source.
        let mdns = build::udp_v4(
            Ipv4Addr::new(192, 168, 1, 7),
            Ipv4Addr::new(224, 0, 0, 251),
            5353,
            5353,
            100,
        );
        p.learn(at(0), &mdns, &parse(&mdns).unwrap());
        let ll = build::udp_v4(
            Ipv4Addr::new(169, 254, 3, 4),
            Ipv4Addr::new(198, 51, 100, 9),
            1,
            2,
            100,
        );
        p.learn(at(0), &ll, &parse(&ll).unwrap());
        assert_eq!(p.next_send(at(0)), None, "nothing borrowed");
        let f = outbound();
        p.learn(at(0), &f, &parse(&f).unwrap());
        assert!(p.next_send(at(0)).is_some());
    }

    #[test]
    fn a_frame_to_no_gateway_or_from_no_answered_address_lends_nothing() {
        // A LAN host's frames to a MAC no answer came from, or from an
        // address nothing was sent to: probes in their name go nowhere.
        let mut p = answered(at(0));
        let mut bogus = build::udp_v4(
            Ipv4Addr::new(10, 99, 9, 9),
            Ipv4Addr::new(198, 51, 100, 9),
            1,
            2,
            100,
        );
        bogus[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        p.learn(at(0), &bogus, &parse(&bogus).unwrap());
        assert_eq!(p.poll(at(0), ms(100)), None, "to no gateway");
        let mut spoofed = outbound();
        spoofed[26..30].copy_from_slice(&[10, 99, 9, 9]);
        p.learn(at(0), &spoofed, &parse(&spoofed).unwrap());
        assert_eq!(p.poll(at(0), ms(100)), None, "from no answered address");
        // Nor does one replace a good template a second later.
        let good = outbound();
        p.learn(at(0), &good, &parse(&good).unwrap());
        p.learn(at(1_500), &bogus, &parse(&bogus).unwrap());
        let req = p.poll(at(1_500), ms(100)).unwrap();
        assert_eq!(&req[..14], &good[..14]);
        assert_eq!(
            parse(&req).unwrap().ip.unwrap().src,
            IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5))
        );
        // Without an answer from the far side lately, nothing lends.
        let mut q = Prober::new(MODEM, KEY);
        q.learn(at(0), &good, &parse(&good).unwrap());
        assert_eq!(q.poll(at(0), ms(100)), None);
    }

    #[test]
    fn each_probe_has_a_cookie_of_its_own_that_shows_nothing_of_the_key() {
        let mut p = taught(at(0));
        let a = p.poll(at(0), ms(100)).unwrap();
        let b = p.poll(at(100), ms(100)).unwrap();
        let cookie = |f: &[u8]| f[f.len() - PAYLOAD..][..8].to_vec();
        assert_ne!(cookie(&a), cookie(&b));
        let xor: Vec<u8> = (0..8)
            .map(|i| KEY[i] ^ KEY[i + 8] ^ b"sluicePr"[i])
            .collect();
        for c in [cookie(&a), cookie(&b)] {
            assert!(c != xor && c[..] != KEY[..8] && c[..] != KEY[8..], "{c:?}");
        }
        // The first probe's cookie on the second's sequence number is
        // no reply of ours.
        let mut forged = reply_to(&b);
        let at_cookie = forged.len() - PAYLOAD;
        forged[at_cookie..at_cookie + 8].copy_from_slice(&cookie(&a));
        assert!(!p.on_reply(at(110), &forged, &parse(&forged).unwrap()));
        let real = reply_to(&b);
        assert!(p.on_reply(at(120), &real, &parse(&real).unwrap()));
    }

    #[test]
    fn one_forged_early_reply_does_not_pin_the_base() {
        // Whoever saw the first probe go by answers it after 0.1 ms; the
        // target answers every probe after 20 ms (the forgery's is late).
        let mut p = taught(at(0));
        let iv = ms(100);
        for i in 0..10u64 {
            let t = at(i * 100);
            let f = outbound();
            p.learn(t, &f, &parse(&f).unwrap());
            let req = p.poll(t, iv).unwrap();
            let rep = reply_to(&req);
            let rtt = if i == 0 {
                Duration::from_micros(100)
            } else {
                ms(20)
            };
            assert!(p.on_reply(t + rtt, &rep, &parse(&rep).unwrap()));
        }
        let d = p.reading(at(1_000), iv).delay.unwrap();
        assert!(d <= ms(1), "{d:?}");
    }

    #[test]
    fn replies_are_taken_and_timed_and_others_pass() {
        let mut p = taught(at(0));
        let req = p.poll(at(0), ms(100)).unwrap();
        let rep = reply_to(&req);
        // A host's own ping reply (another payload) passes.
        let host = reply_to(&build::icmp_v4_echo(
            Ipv4Addr::new(203, 0, 113, 5),
            Ipv4Addr::new(192, 0, 2, 1),
            1,
            1,
            16,
        ));
        assert!(!p.on_reply(at(10), &host, &parse(&host).unwrap()));
        // The same cookie from another address is not ours either.
        let mut other = rep.clone();
        other[26..30].copy_from_slice(&[192, 0, 2, 99]);
        assert!(!p.on_reply(at(10), &other, &parse(&other).unwrap()));
        assert!(p.on_reply(at(23), &rep, &parse(&rep).unwrap()));
        assert_eq!(p.stats.answered, 1);
        assert_eq!(p.stats.last_rtt, Some(ms(23)));
        // A duplicate is still ours (taken), but no sample.
        assert!(p.on_reply(at(30), &rep, &parse(&rep).unwrap()));
        assert_eq!((p.stats.answered, p.stats.stray), (1, 1));
    }

    #[test]
    fn a_nat_rewriting_the_identifier_and_sequence_does_not_hide_a_reply() {
        let mut p = taught(at(0));
        let req = p.poll(at(0), ms(100)).unwrap();
        let mut rep = reply_to(&req);
        rep[38..42].copy_from_slice(&[0x55, 0x66, 0x77, 0x88]);
        assert!(p.on_reply(at(20), &rep, &parse(&rep).unwrap()));
        assert_eq!(p.stats.last_rtt, Some(ms(20)));
    }

    #[test]
    fn the_reading_is_the_median_of_the_latest_over_the_base() {
        let mut p = taught(at(0));
        let iv = ms(100);
        // Idle path: 20 ms. Then a queue of 30 ms, with one outlier.
        let rtts = [20, 21, 20, 50, 52, 200, 51];
        for (i, r) in rtts.iter().enumerate() {
            let t = at(i as u64 * 100);
            let f = outbound();
            p.learn(t, &f, &parse(&f).unwrap());
            let req = p.poll(t, iv).unwrap();
            let rep = reply_to(&req);
            assert!(p.on_reply(t + ms(*r), &rep, &parse(&rep).unwrap()));
        }
        let now = at(700);
        let r = p.reading(now, iv);
        assert!(r.probe);
        // Latest three: 52, 200, 51 → 52; base 20.
        assert_eq!(r.delay, Some(ms(32)));
        // No reply for longer than three intervals (and a second): none.
        let r = p.reading(now + ms(1100), iv);
        assert_eq!(r.delay, None);
        assert!(r.newest_age.is_some());
    }

    #[test]
    fn unanswered_requests_are_lost_not_samples() {
        let mut p = taught(at(0));
        let iv = ms(100);
        let first = p.poll(at(0), iv).unwrap();
        let _second = p.poll(at(100), iv).unwrap();
        let third = p.poll(at(200), iv).unwrap();
        // The third's reply overtakes the first two: both counted lost.
        let rep = reply_to(&third);
        assert!(p.on_reply(at(230), &rep, &parse(&rep).unwrap()));
        assert_eq!((p.stats.answered, p.stats.lost), (1, 2));
        // The first's reply, late, is taken but is no sample.
        let late = reply_to(&first);
        assert!(p.on_reply(at(240), &late, &parse(&late).unwrap()));
        assert_eq!((p.stats.answered, p.stats.stray), (1, 1));
        // Requests never answered are lost after LOST_AFTER.
        let mut q = taught(at(0));
        q.poll(at(0), iv).unwrap();
        let f = outbound();
        q.learn(at(2500), &f, &parse(&f).unwrap());
        q.poll(at(2500), iv).unwrap();
        assert_eq!(q.stats.lost, 1);
    }

    #[test]
    fn probes_take_a_hundredth_of_a_slow_line_and_no_more_than_ten_a_second() {
        let p = taught(at(0));
        // 14 + 20 + 8 + 16 = 58 bytes, 464 bits; 1 % of 128 kbit/s is 1280 bit/s.
        let slow = p.interval(Rate::kbps(128)).as_secs_f64();
        assert!((slow - 0.3625).abs() < 0.001, "{slow}");
        assert_eq!(p.interval(Rate::mbps(1)), MIN_INTERVAL);
        assert_eq!(p.interval(Rate(0)), MIN_INTERVAL);
    }
}
