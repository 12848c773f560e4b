//! The state table: a bounded, keyed-hash map of connections.
//!
//! # Principles
//!
//! - **Bounded memory.** At most `limit` states exist; an insert into a full
//!   table fails (the caller blocks the packet, as pf does with
//!   `PFRES_MAXSTATES`) after one bounded reclaim attempt. Storage is a slab
//!   (`Vec<Option<State>>` with a free list, never longer than `limit`) plus
//!   a hash index.
//! - **Reclaim: expired first, then embryonic, never established.** The
//!   attempt examines [`RECLAIM_SCAN_SLOTS`] slots from the sweep cursor (so
//!   consecutive attempts walk the whole slab, and a flood costs a constant
//!   per packet). It removes the expired states it meets; if there were
//!   none, it evicts the least recently used *embryonic* state among those
//!   slots. Embryonic means the other side never answered: a TCP state
//!   whose peers are not both ESTABLISHED (a handshake that has not
//!   completed — what a SYN flood leaves, pf's `tcp.first`/`tcp.opening`
//!   states), a UDP or other-protocol state whose responder is still
//!   NO_TRAFFIC, an ICMP state that saw only its first packet. A
//!   connection that has been answered is never evicted to admit a new one
//!   (pf never evicts; sluice adds only the eviction of states pf's
//!   adaptive timeouts would expire first). If the scanned slots hold
//!   neither, the insert fails.
//! - **Keyed hash.** The index hashes keys with SipHash-1-3 under the
//!   caller's 128-bit key, so a sender who does not know the key cannot aim
//!   a flood of 5-tuples at one bucket.
//! - **One key for both directions.** A state created at direction D for a
//!   packet A→B must match A→B at D and B→A at the opposite direction, and
//!   nothing else. The key orders the two endpoints (lower `(addr, port)`
//!   first) and records the direction at which lower→higher packets travel,
//!   so both cases give the same key with one lookup, while A→B at the
//!   opposite direction (the other half of a routed packet's double
//!   evaluation) gives a different key.
//! - **Expired never matches.** `lookup` checks the expiry against `now` and
//!   removes an expired state it finds; `expire` sweeps the slab with a
//!   cursor and a caller-given budget, so purging never stalls the data path.
//! - **Adaptive timeouts** (pf.conf(5) `adaptive.start`, `adaptive.end`;
//!   OpenBSD `pf_state_expires`). A state keeps its last packet's instant
//!   and the unscaled timeout then in force; its expiry is computed when
//!   looked at, from the number of states *now*: with `n` states above
//!   `start`, every timeout is multiplied by `(end − n) / (end − start)`,
//!   and at `n ≥ end` a state expires at once. So a flood that swells the
//!   table shortens every idle state's life, not just the new ones'.
//!   `end <= start` turns it off (pf: both 0).
//! - **Per-rule counts** (`max`, `max-src-states`, `max-src-nodes`): the
//!   table counts the states of each rule of the current rule set, of each
//!   (rule, source address) the rule tracks, and the sources (pf's source
//!   nodes) of each such rule; a state counts until it is removed, a source
//!   until its last state is. `max-src-conn` counts, per (rule, source),
//!   the TCP states past the handshake (both peers ESTABLISHED or later).
//!   A reload starts a new generation: states of the old rules no longer
//!   count against the new ones (pf keeps them with their old rule).
//!   The source counts have one entry per (rule, source) with a state, so
//!   they are bounded by the table's limit.

use crate::hash::{tuple_bytes, KeyedSip};
use crate::track::{ProtoState, PseudoPeer, TcpPeer, TimeoutKind};
use crate::QueueName;
use sluice_conf::ir::MaxMss;
use sluice_time::{Duration, Instant};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

/// Slots examined to find an expired (else an embryonic) state before
/// refusing an insert into a full table: enough to recover from a burst of
/// dead states between two `expire` calls, small enough to keep a flood's
/// per-packet cost constant.
pub const RECLAIM_SCAN_SLOTS: usize = 32;

/// The lookup key of a state (see the module doc for its orientation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StateKey {
    pub proto: u8,
    pub lo: (IpAddr, u16),
    pub hi: (IpAddr, u16),
    /// lower→higher packets are evaluated at direction Out.
    pub lo_out: bool,
}

/// One fixed-size write per key: consistent with `Eq` (equal keys give equal
/// bytes) and cheaper than hashing each field.
impl Hash for StateKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&tuple_bytes(
            self.lo,
            self.hi,
            self.proto,
            u8::from(self.lo_out),
        ));
    }
}

impl StateKey {
    /// The key of the same connection at the other half of a double
    /// evaluation (a bridge's or router's other interface).
    pub(crate) fn other_half(self) -> StateKey {
        StateKey {
            lo_out: !self.lo_out,
            ..self
        }
    }

    /// The key a packet src→dst evaluated at `out` (true = Out) looks up,
    /// and whether the packet travels lower→higher.
    pub(crate) fn of(
        proto: u8,
        src: (IpAddr, u16),
        dst: (IpAddr, u16),
        out: bool,
    ) -> (StateKey, bool) {
        if src <= dst {
            (
                StateKey {
                    proto,
                    lo: src,
                    hi: dst,
                    lo_out: out,
                },
                true,
            )
        } else {
            (
                StateKey {
                    proto,
                    lo: dst,
                    hi: src,
                    lo_out: !out,
                },
                false,
            )
        }
    }
}

/// Ports (or ICMP id) that key a state; None when the packet cannot have a
/// state (a later fragment of TCP/UDP/ICMP).
pub(crate) fn state_ports(pkt: &sluice_wire::IpInfo) -> Option<(u16, u16)> {
    use sluice_wire::{proto::*, L4};
    match pkt.l4 {
        L4::Tcp { sport, dport, .. } | L4::Udp { sport, dport, .. } => Some((sport, dport)),
        L4::Icmp { id, .. } => Some((id, id)),
        L4::None => match pkt.proto {
            TCP | UDP | ICMP | ICMPV6 => None,
            _ => Some((0, 0)),
        },
    }
}

/// One connection.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub key: StateKey,
    /// The initiator is the `lo` endpoint.
    pub init_is_lo: bool,
    /// Index of the rule that created it.
    pub rule: u32,
    pub queue: Option<(QueueName, Option<QueueName>)>,
    pub prio: Option<(u8, Option<u8>)>,
    /// `scrub (max-mss …)` of the rules that made it: both ends' SYNs.
    pub max_mss: Option<MaxMss>,
    pub proto: ProtoState,
    pub timeout: TimeoutKind,
    /// The timeout in force since `last`, before adaptive scaling.
    pub timeout_len: Duration,
    pub created: Instant,
    pub last: Instant,
    /// Rule-set generation the state was created in ([`StateTable::reload`]).
    pub gen: u32,
    /// Counted under (rule, initiator address) for `max-src-states`.
    pub src_tracked: bool,
    /// Counted as an established connection of (rule, initiator) for
    /// `max-src-conn`.
    pub conn_counted: bool,
    /// [initiator→responder, responder→initiator].
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    /// Passive RTT (TCP; `rtt.rs`).
    pub rtt: crate::rtt::RttTracker,
    /// Sequence windows (TCP without `sloppy`; `window.rs`).
    pub win: Option<crate::window::TcpWindow>,
}

impl State {
    /// The other side never answered (see the module doc): the only kind of
    /// live state a full table gives up for a new one.
    pub(crate) fn embryonic(&self) -> bool {
        match self.proto {
            ProtoState::Tcp([a, b]) => a < TcpPeer::Established || b < TcpPeer::Established,
            ProtoState::Udp([_, r]) | ProtoState::Other([_, r]) => r == PseudoPeer::NoTraffic,
            ProtoState::Icmp => self.timeout == TimeoutKind::IcmpFirst,
        }
    }

    /// 0 if a packet travelling lower→higher (`fwd_lo`) comes from the
    /// initiator, else 1.
    pub(crate) fn side(&self, lo_to_hi: bool) -> usize {
        if lo_to_hi == self.init_is_lo {
            0
        } else {
            1
        }
    }
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableCounters {
    pub inserts: u64,
    pub removals: u64,
    /// Removals of states found expired (by lookup, sweep or reclaim).
    pub expired: u64,
    pub limit_hits: u64,
    /// Embryonic states evicted to admit a new one into a full table.
    pub evicted: u64,
}

pub(crate) struct StateTable {
    index: HashMap<StateKey, u32, KeyedSip>,
    slots: Vec<Option<State>>,
    free: Vec<u32>,
    limit: usize,
    cursor: usize,
    /// `(adaptive.start, adaptive.end)` in states.
    adaptive: (u64, u64),
    gen: u32,
    /// States of each rule of generation `gen`.
    rule_states: Vec<u32>,
    /// States of each (rule, initiator) of generation `gen`, for the rules
    /// with `max-src-states` or `max-src-nodes`.
    src_states: HashMap<(u32, IpAddr), u32, KeyedSip>,
    /// Entries of `src_states` per rule: its source nodes.
    rule_nodes: Vec<u32>,
    /// Established TCP connections of each (rule, initiator) of generation
    /// `gen`, for the rules with `max-src-conn`.
    src_conns: HashMap<(u32, IpAddr), SrcConns, KeyedSip>,
    pub counters: TableCounters,
}

/// One source's established connections under one rule.
#[derive(Clone, Copy, Debug)]
struct SrcConns {
    /// Counted states still in the table.
    open: u32,
    /// pf's decaying connection count (`pf_check_threshold`), in
    /// thousandths of a connection, as of `last`.
    rate: u64,
    last: Instant,
}

/// pf's threshold unit: one connection.
const CONN: u64 = 1000;

/// `last + timeout`, scaled by pf's adaptive factor for `n` states.
fn expiry(last: Instant, timeout: Duration, n: usize, (start, end): (u64, u64)) -> Instant {
    let n = n as u64;
    if end <= start || n <= start {
        return last + timeout;
    }
    if n >= end {
        return last;
    }
    let scaled = u128::from(timeout.0) * u128::from(end - n) / u128::from(end - start);
    last + Duration(u64::try_from(scaled).unwrap_or(u64::MAX))
}

/// Why an insert failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InsertError {
    Full,
}

impl StateTable {
    pub(crate) fn new(limit: u32, hasher: KeyedSip) -> StateTable {
        StateTable {
            index: HashMap::with_hasher(hasher),
            slots: Vec::new(),
            free: Vec::new(),
            limit: limit as usize,
            cursor: 0,
            adaptive: (0, 0),
            gen: 0,
            rule_states: Vec::new(),
            src_states: HashMap::with_hasher(hasher),
            rule_nodes: Vec::new(),
            src_conns: HashMap::with_hasher(hasher),
            counters: TableCounters::default(),
        }
    }

    /// A new rule set of `rules` rules and adaptive thresholds: per-rule
    /// counts restart (module doc).
    /// Returns the new generation.
    pub(crate) fn reload(&mut self, rules: usize, adaptive: (u32, u32)) -> u32 {
        self.gen = self.gen.wrapping_add(1);
        self.rule_states = vec![0; rules];
        self.rule_nodes = vec![0; rules];
        self.src_states.clear();
        self.src_conns.clear();
        self.adaptive = (u64::from(adaptive.0), u64::from(adaptive.1));
        self.gen
    }

    /// The instant `s` stops matching, with the table as it is now.
    pub(crate) fn expires(&self, s: &State) -> Instant {
        expiry(s.last, s.timeout_len, self.index.len(), self.adaptive)
    }

    /// States of rule `rule` of the current rule set.
    pub(crate) fn rule_count(&self, rule: usize) -> u32 {
        self.rule_states.get(rule).copied().unwrap_or(0)
    }

    /// Source addresses rule `rule` has states from.
    pub(crate) fn node_count(&self, rule: usize) -> u32 {
        self.rule_nodes.get(rule).copied().unwrap_or(0)
    }

    /// States of rule `rule` initiated by `src`.
    pub(crate) fn src_count(&self, rule: u32, src: IpAddr) -> u32 {
        self.src_states.get(&(rule, src)).copied().unwrap_or(0)
    }

    /// Counts the connection of `key` (now past its handshake) under
    /// (rule, initiator): true if that makes more than `max` open ones, or
    /// more than `rate.0` in `rate.1` seconds by pf's decaying count (the
    /// count decays linearly to zero over the window; each connection adds
    /// one). Only states of the current generation count.
    pub(crate) fn count_conn(
        &mut self,
        key: &StateKey,
        now: Instant,
        max: Option<u32>,
        rate: Option<(u32, u32)>,
    ) -> bool {
        let Some(Some(s)) = self
            .index
            .get(key)
            .and_then(|&i| self.slots.get_mut(i as usize))
        else {
            return false;
        };
        if s.conn_counted || s.gen != self.gen {
            return false;
        }
        s.conn_counted = true;
        let init = if s.init_is_lo { s.key.lo.0 } else { s.key.hi.0 };
        let c = self.src_conns.entry((s.rule, init)).or_insert(SrcConns {
            open: 0,
            rate: 0,
            last: now,
        });
        c.open += 1;
        if let Some((_, secs)) = rate {
            let window = u128::from(Duration::from_secs(u64::from(secs)).0);
            let elapsed = u128::from(now.saturating_since(c.last).0);
            let kept = u128::from(c.rate) * window.saturating_sub(elapsed) / window.max(1);
            c.rate = u64::try_from(kept).unwrap_or(u64::MAX).saturating_add(CONN);
            c.last = now;
        }
        max.is_some_and(|m| c.open > m) || rate.is_some_and(|(n, _)| c.rate > u64::from(n) * CONN)
    }

    /// Removes the states initiated by `src` — of rule `rule` of the current
    /// rule set, or all of them — for `overload … flush`. A full pass over
    /// the slab: done once per overloading source, and only after it
    /// completed more handshakes than its rule allows.
    pub(crate) fn flush_src(&mut self, src: IpAddr, rule: Option<u32>) -> usize {
        let gen = self.gen;
        let doomed: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref()?;
                let init = if s.init_is_lo { s.key.lo.0 } else { s.key.hi.0 };
                let hit = init == src && rule.is_none_or(|r| s.rule == r && s.gen == gen);
                hit.then_some(i)
            })
            .collect();
        for &i in &doomed {
            self.remove_slot(i);
        }
        doomed.len()
    }

    /// Adjusts the per-rule counts for a state added (+1) or removed (−1).
    fn count(&mut self, s: &State, add: bool) {
        if s.gen != self.gen {
            return;
        }
        if s.conn_counted && !add {
            let init = if s.init_is_lo { s.key.lo.0 } else { s.key.hi.0 };
            let k = (s.rule, init);
            if let Some(c) = self.src_conns.get_mut(&k) {
                c.open = c.open.saturating_sub(1);
                // pf forgets a source node with its last state (src.track 0).
                if c.open == 0 {
                    self.src_conns.remove(&k);
                }
            }
        }
        if let Some(n) = self.rule_states.get_mut(s.rule as usize) {
            *n = if add {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            };
        }
        if s.src_tracked {
            let init = if s.init_is_lo { s.key.lo.0 } else { s.key.hi.0 };
            let k = (s.rule, init);
            let nodes = self.rule_nodes.get_mut(s.rule as usize);
            if add {
                let n = self.src_states.entry(k).or_insert(0);
                if *n == 0 {
                    if let Some(c) = nodes {
                        *c += 1;
                    }
                }
                *n += 1;
            } else if let Some(n) = self.src_states.get_mut(&k) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.src_states.remove(&k);
                    if let Some(c) = nodes {
                        *c = c.saturating_sub(1);
                    }
                }
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The live state under `key`, or None; an expired one is removed.
    pub(crate) fn lookup(&mut self, key: &StateKey, now: Instant) -> Option<&mut State> {
        let idx = *self.index.get(key)?;
        let expired = match self.slots.get(idx as usize) {
            Some(Some(s)) => now >= self.expires(s),
            _ => return None,
        };
        if expired {
            self.counters.expired += 1;
            self.remove_slot(idx as usize);
            return None;
        }
        self.slots.get_mut(idx as usize).and_then(|s| s.as_mut())
    }

    /// The live state under `key`, without removing an expired one.
    pub(crate) fn peek(&self, key: &StateKey, now: Instant) -> Option<&State> {
        let idx = *self.index.get(key)?;
        match self.slots.get(idx as usize) {
            Some(Some(s)) if now < self.expires(s) => Some(s),
            _ => None,
        }
    }

    /// Remove the state under `key` (e.g. a closed TCP state whose 4-tuple
    /// is reused by a new SYN).
    pub(crate) fn remove(&mut self, key: &StateKey) -> bool {
        match self.index.get(key) {
            Some(&idx) => {
                self.remove_slot(idx as usize);
                true
            }
            None => false,
        }
    }

    /// Insert a new state (its key must not be present).
    pub(crate) fn insert(&mut self, state: State, now: Instant) -> Result<(), InsertError> {
        if self.index.len() >= self.limit {
            self.reclaim(now);
            if self.index.len() >= self.limit {
                self.counters.limit_hits += 1;
                return Err(InsertError::Full);
            }
        }
        let key = state.key;
        self.count(&state, true);
        let idx = match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.slots.get_mut(i as usize) {
                    *slot = Some(state);
                }
                i
            }
            None => {
                self.slots.push(Some(state));
                (self.slots.len() - 1) as u32
            }
        };
        if let Some(old) = self.index.insert(key, idx) {
            // Callers look up first; a duplicate would leak the old slot, so free it.
            if old != idx {
                self.release(old as usize);
            }
        }
        self.counters.inserts += 1;
        Ok(())
    }

    /// Sweep at most `budget` slots from the cursor, removing expired
    /// states; returns how many were removed.
    pub(crate) fn expire(&mut self, now: Instant, budget: usize) -> usize {
        let n = self.slots.len();
        if n == 0 {
            return 0;
        }
        let mut removed = 0;
        // Bounded by `budget` and by one full turn of the slab.
        for _ in 0..budget.min(n) {
            if self.cursor >= n {
                self.cursor = 0;
            }
            let i = self.cursor;
            self.cursor += 1;
            if matches!(self.slots.get(i), Some(Some(s)) if now >= self.expires(s)) {
                self.counters.expired += 1;
                self.remove_slot(i);
                removed += 1;
            }
        }
        removed
    }

    /// One bounded pass of [`RECLAIM_SCAN_SLOTS`] slots (module doc).
    fn reclaim(&mut self, now: Instant) {
        let n = self.slots.len();
        let mut removed = false;
        let mut victim: Option<(usize, Instant)> = None;
        for _ in 0..RECLAIM_SCAN_SLOTS.min(n) {
            if self.cursor >= n {
                self.cursor = 0;
            }
            let i = self.cursor;
            self.cursor += 1;
            let Some(Some(s)) = self.slots.get(i) else {
                continue;
            };
            if now >= self.expires(s) {
                self.counters.expired += 1;
                self.remove_slot(i);
                removed = true;
            } else if s.embryonic() && victim.is_none_or(|(_, last)| s.last < last) {
                victim = Some((i, s.last));
            }
        }
        if let (false, Some((i, _))) = (removed, victim) {
            self.counters.evicted += 1;
            self.remove_slot(i);
        }
    }

    fn remove_slot(&mut self, i: usize) {
        if let Some(slot) = self.slots.get_mut(i) {
            if let Some(s) = slot.take() {
                self.index.remove(&s.key);
                self.free.push(i as u32);
                self.counters.removals += 1;
                self.count(&s, false);
            }
        }
    }

    fn release(&mut self, i: usize) {
        if let Some(slot) = self.slots.get_mut(i) {
            if let Some(s) = slot.take() {
                self.free.push(i as u32);
                self.counters.removals += 1;
                self.count(&s, false);
            }
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &State> {
        self.slots.iter().filter_map(|s| s.as_ref())
    }

    /// Slab slots allocated (≤ limit): the memory bound made observable.
    pub(crate) fn slots_allocated(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests;
