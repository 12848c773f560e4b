//! One vote per far network: how the delay readings of many flows become
//! one (issue #36 item 2): autorate's signal ([`crate::delay_signal`]) and
//! the pacer's queue before sluice ([`crate::tcpctl`]).
//!
//! # Principles
//!
//! - **Voters are networks, not flows.** A flow costs its sender nothing:
//!   a web page can hold fifty connections to one server. So the flows of
//!   one far network (IPv4 /24, IPv6 /48, [`network`]) are one voter, whose
//!   value is the median of its flows' (the upper middle one for an even
//!   count, as the signal always read one network's flows: the network
//!   controls all of them anyway, and its own noisy flows do not move
//!   it). A sender with fifty flows has one vote.
//! - **The lower median over voters.** With `n` voters sorted, the reading
//!   is the value of rank `⌈n/2⌉` (the lesser middle one for an even `n`,
//!   never a mean: with two voters a mean lets one value of any size move
//!   the reading by half).
//! - **Enough voters, or none.** A reading needs at least a caller's
//!   number of voters ([`MIN_VOTERS`] for autorate: one, the link loaded
//!   by a single far network being the common case); with fewer it is
//!   `None`, which the controller treats as it treats silence: it holds
//!   (and the probe's reading, where one is sent, stands in).
//! - **The guarantee.** To raise the reading above every honest voter's
//!   value, liars must be more than half of the voters (`⌊n/2⌋ + 1`); to
//!   lower it below every honest one, at least half (`⌈n/2⌉`). Fewer move
//!   it at most to the honest values' own range: never above the largest
//!   nor below the least of the honest voters. Two voters read the lesser:
//!   a liar beside one honest network can lower the reading (a clock
//!   check bounds how: [`crate::owd`]) but not raise it to a cut. A lone
//!   network decides alone, for the traffic that is then all its own.

use sluice_time::Duration;
use std::net::IpAddr;

/// A far network: IPv4 /24 or IPv6 /48 (hosts of one network share the
/// path beyond the link, and an address within one costs little).
pub type Voter = (bool, u64);

/// Voters autorate's reading needs before it says anything: one. The link
/// loaded by one far network alone (a single large download, a video
/// upload) is the common case autorate exists for; that network's word is
/// then the only word, and it slows only the link its own traffic fills.
/// With two the lesser decides, so one liar cannot raise the reading.
pub const MIN_VOTERS: usize = 1;

/// The network of address `a`.
pub fn network(a: IpAddr) -> Voter {
    match a {
        IpAddr::V4(v) => (false, u64::from(u32::from(v) >> 8)),
        IpAddr::V6(v) => (true, (u128::from(v) >> 80) as u64),
    }
}

/// The outcome of a vote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// The lower median over voters; `None` with fewer than asked for.
    pub delay: Option<Duration>,
    /// Voters that had a value.
    pub voters: u32,
}

/// The lower median over voters of the values `flows` (each flow's voter
/// and value), a reading only with `min_voters` voters or more.
pub fn tally(flows: impl IntoIterator<Item = (Voter, Duration)>, min_voters: usize) -> Tally {
    let mut v: Vec<(Voter, Duration)> = flows.into_iter().collect();
    v.sort_unstable();
    let mut per_voter = Vec::new();
    for group in v.chunk_by(|a, b| a.0 == b.0) {
        per_voter.push(group[group.len() / 2].1);
    }
    per_voter.sort_unstable();
    let n = per_voter.len();
    Tally {
        delay: (n >= min_voters.max(1)).then(|| *lower_median(&per_voter)),
        voters: n as u32,
    }
}

/// The lesser middle element of a sorted, non-empty slice.
fn lower_median<T>(v: &[T]) -> &T {
    &v[(v.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn net(i: u8) -> Voter {
        network(IpAddr::V4(Ipv4Addr::new(198, 51, i, 7)))
    }

    #[test]
    fn fifty_flows_of_one_network_are_one_vote() {
        let mut v: Vec<(Voter, Duration)> = (0..50).map(|_| (net(9), ms(10_000))).collect();
        v.extend((1..=3).map(|i| (net(i), ms(u64::from(i)))));
        let t = tally(v, MIN_VOTERS);
        assert_eq!(
            t,
            Tally {
                delay: Some(ms(2)),
                voters: 4
            }
        );
    }

    #[test]
    fn two_values_give_the_lesser_not_the_mean() {
        let t = tally([(net(1), ms(0)), (net(2), ms(10_000))], 1);
        assert_eq!(t.delay, Some(ms(0)));
    }

    #[test]
    fn too_few_voters_read_nothing_and_say_how_many() {
        let v = [(net(1), ms(40)), (net(1), ms(50)), (net(2), ms(60))];
        assert_eq!(
            tally(v, 3),
            Tally {
                delay: None,
                voters: 2
            }
        );
        assert_eq!(
            tally([], 1),
            Tally {
                delay: None,
                voters: 0
            }
        );
    }

    #[test]
    fn a_minority_of_voters_stays_within_the_honest_range() {
        // 3 honest of 5: the liars at 0 or at 10 s cannot leave 20..40.
        let honest = [(net(1), ms(20)), (net(2), ms(30)), (net(3), ms(40))];
        for lie in [0, 10_000] {
            let mut v = honest.to_vec();
            v.extend([(net(8), ms(lie)), (net(9), ms(lie))]);
            let d = tally(v, MIN_VOTERS).delay.unwrap();
            assert!((ms(20)..=ms(40)).contains(&d), "{lie}: {d:?}");
        }
    }

    #[test]
    fn a_networks_value_is_the_median_of_its_flows() {
        let mut v: Vec<(Voter, Duration)> = [5, 6, 900].map(|d| (net(1), ms(d))).to_vec();
        v.extend([(net(2), ms(5)), (net(3), ms(6))]);
        assert_eq!(tally(v, MIN_VOTERS).delay, Some(ms(6)));
    }
}
