//! The round held ACKs leave in: deficit round robin (Shreedhar & Varghese
//! 1996) between a pacer's flows, or, where the class shares by host,
//! between its hosts and then round robin between each host's flows.
//!
//! # Principles
//!
//! - **Equal bytes per turn.** Each turn of a flow (of a host, by host)
//!   adds [`QUANTUM`] bytes of credit; its held ACKs leave while it has
//!   credit, each charged the wire bytes it acknowledges (at most
//!   [`MAX_CHARGE`], so one huge ACK cannot make the round spin).
//! - **Work per byte is bounded.** A turn grants a whole quantum whatever
//!   the number of flows or hosts, so each spin of the loop releases an ACK
//!   or ends a turn: a host with two thousand flows costs no more per paced
//!   byte than a host with one (a quantum divided by the host's flows once
//!   cost one spin per byte).
//! - **Order within a flow.** A flow's ACKs leave in the order they came.

use super::flow::{Flow, Key};
use super::{MAX_CHARGE, QUANTUM};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// A host's place in a by-host round: its credit and its flows with held
/// ACKs. A host is in [`Round::hosts`] exactly while it has a turn.
#[derive(Default)]
struct HostTurn {
    deficit: i64,
    flows: VecDeque<Key>,
}

#[derive(Default)]
pub(super) struct Round {
    /// Flows with held ACKs (not by host).
    flows: VecDeque<Key>,
    /// By host: hosts with flows with held ACKs, and their turns.
    hosts: VecDeque<IpAddr>,
    turns: HashMap<IpAddr, HostTurn>,
}

/// Flow `key`, at the front of `ring`, holds nothing now: it leaves the
/// round.
fn leave(ring: &mut VecDeque<Key>, key: Key, flows: &mut HashMap<Key, Flow>) {
    ring.pop_front();
    if let Some(f) = flows.get_mut(&key) {
        f.in_round = false;
    }
}

/// DRR's turn rule for the front of `ring`: once its credit is spent it
/// gets a quantum and goes to the back (true), else it goes on (false).
fn out_of_credit<T>(deficit: &mut i64, ring: &mut VecDeque<T>) -> bool {
    if *deficit > 0 {
        return false;
    }
    *deficit += QUANTUM;
    ring.rotate_left(1);
    true
}

/// What the round says next.
pub(super) enum Next {
    /// Release the oldest held ACK of this flow.
    Release(Key),
    /// A turn ended or an empty entry left: ask again.
    Again,
    /// Nothing is held.
    Empty,
}

impl Round {
    pub(super) fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.hosts.is_empty()
    }

    /// Flow `key` (of `host`, by host) holds its first ACK.
    pub(super) fn join(&mut self, key: Key, host: Option<IpAddr>, f: &mut Flow) {
        match host {
            None => {
                f.deficit = 0;
                self.flows.push_back(key);
            }
            Some(h) => {
                let t = self.turns.entry(h).or_insert_with(|| {
                    self.hosts.push_back(h);
                    HostTurn::default()
                });
                t.flows.push_back(key);
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.flows.clear();
        self.hosts.clear();
        self.turns.clear();
    }

    /// Every flow in the round.
    pub(super) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        let by_host = self.turns.values().flat_map(|t| t.flows.iter());
        self.flows.iter().chain(by_host).copied()
    }

    /// The next step of the round over `flows`.
    pub(super) fn next(&mut self, flows: &mut HashMap<Key, Flow>) -> Next {
        if !self.flows.is_empty() {
            return self.next_flow(flows);
        }
        self.next_host(flows)
    }

    fn next_flow(&mut self, flows: &mut HashMap<Key, Flow>) -> Next {
        let Some(key) = self.flows.front().copied() else {
            return Next::Empty;
        };
        let Some(f) = flows.get_mut(&key).filter(|f| !f.held.is_empty()) else {
            leave(&mut self.flows, key, flows);
            return Next::Again;
        };
        if out_of_credit(&mut f.deficit, &mut self.flows) {
            return Next::Again;
        }
        Next::Release(key)
    }

    fn next_host(&mut self, flows: &mut HashMap<Key, Flow>) -> Next {
        let Some(host) = self.hosts.front().copied() else {
            return Next::Empty;
        };
        let Some(t) = self.turns.get_mut(&host).filter(|t| !t.flows.is_empty()) else {
            self.hosts.pop_front();
            self.turns.remove(&host);
            return Next::Again;
        };
        let Some(key) = t.flows.front().copied() else {
            return Next::Again;
        };
        if flows.get(&key).is_none_or(|f| f.held.is_empty()) {
            leave(&mut t.flows, key, flows);
            return Next::Again;
        }
        if out_of_credit(&mut t.deficit, &mut self.hosts) {
            return Next::Again;
        }
        Next::Release(key)
    }

    /// `key`'s oldest held ACK left, charged `cost`: its flow (its host's
    /// turn, by host) pays, and by host the next of the host's flows is up.
    pub(super) fn released(&mut self, key: Key, host: Option<IpAddr>, cost: u64, f: &mut Flow) {
        let charge = i64::try_from(cost).unwrap_or(i64::MAX).min(MAX_CHARGE);
        match host.and_then(|h| self.turns.get_mut(&h)) {
            None => {
                f.deficit -= charge;
                if f.held.is_empty() {
                    f.in_round = false;
                    self.flows.pop_front();
                }
            }
            Some(t) => {
                t.deficit -= charge;
                t.flows.pop_front();
                if f.held.is_empty() {
                    f.in_round = false;
                } else {
                    t.flows.push_back(key);
                }
            }
        }
    }
}
