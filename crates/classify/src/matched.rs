//! The path of a packet that matches a state: pf's window check, the
//! protocol state and timeout, the counters, and `max-src-conn(-rate)`
//! once the handshake completes.

use crate::state::StateKey;
use crate::{pick, BlockReason, Classifier, Decision, ProtoState, StateHit, TcpSeg, Verdict};
use sluice_time::Instant;
use sluice_wire::tcp_flags;

/// What `classify_seg` read of the packet, for the state path.
#[derive(Clone, Copy)]
pub(crate) struct PktFacts {
    pub flags: u8,
    /// The packet takes the second queue/priority of a pair.
    pub second: bool,
    pub bytes: u64,
    pub flow_hash: u64,
}

/// How a packet related to an existing state.
pub(crate) enum Matched {
    /// The state decided it.
    Decided(Decision),
    /// A SYN on a closed connection's 4-tuple: a new connection.
    Reuse,
    /// No live state.
    NoState,
}

impl Classifier {
    /// The state under `key`, if live, decides the packet.
    pub(crate) fn match_state(
        &mut self,
        now: Instant,
        key: &StateKey,
        lo_to_hi: bool,
        seg: Option<&TcpSeg>,
        p: PktFacts,
    ) -> Matched {
        let PktFacts {
            flags,
            second,
            bytes,
            flow_hash,
        } = p;
        let Some(st) = self.table.lookup(key, now) else {
            return Matched::NoState;
        };
        if st.proto.tcp_closed() && flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN {
            return Matched::Reuse;
        }
        let side = st.side(lo_to_hi);
        if let (Some(w), Some(g), ProtoState::Tcp(peers)) = (st.win.as_mut(), seg, st.proto) {
            if !w.track(side, g, peers) {
                self.bad_state += 1;
                return Matched::Decided(Decision {
                    verdict: Verdict::Block(BlockReason::BadState),
                    queue: None,
                    prio: None,
                    max_mss: None,
                    rule: Some(st.rule),
                    state: StateHit::Matched,
                    flow_hash,
                    rtt_path: None,
                    rtt_sample: None,
                });
            }
        }
        let tk = st.proto.update(side, flags);
        let sample = seg.and_then(|g| st.rtt.observe(side, g, now));
        if let Some((d, rtt)) = sample {
            // Both halves of a bridged connection see every
            // packet: the histogram takes the half whose
            // initiator's packets are evaluated Out.
            if st.key.lo_out == st.init_is_lo {
                self.rtt_hist[d].record(rtt);
            }
        }
        st.timeout = tk;
        st.last = now;
        // The rule's own timeouts while its rule set is current.
        let own = (st.gen == self.table_gen)
            .then(|| self.rules.get(st.rule as usize))
            .flatten()
            .and_then(|r| r.timeouts.as_deref());
        st.timeout_len = own.unwrap_or(&self.timeouts).get(tk);
        st.packets[side] += 1;
        st.bytes[side] += bytes;
        self.hits += 1;
        if let Some(rs) = self.rule_stats.get_mut(st.rule as usize) {
            rs.packets += 1;
            rs.bytes += bytes;
        }
        // max-src-conn(-rate): a connection that just completed
        // its handshake beyond its source's limits is ended (pf:
        // PFRES_SRCLIMIT) and the packet blocked; with
        // `overload`, the source goes into the table.
        let conn_limits =
            (st.gen == self.table_gen && !st.conn_counted && st.proto.tcp_established())
                .then(|| self.rules.get(st.rule as usize))
                .flatten()
                .and_then(|r| {
                    (r.max_src_conn.is_some() || r.max_src_conn_rate.is_some()).then_some((
                        r.max_src_conn,
                        r.max_src_conn_rate,
                        r.overload,
                    ))
                });
        let init = if st.init_is_lo {
            st.key.lo.0
        } else {
            st.key.hi.0
        };
        let d = Decision {
            verdict: Verdict::Pass,
            queue: pick(st.queue, second),
            prio: pick(st.prio, second),
            max_mss: st.max_mss,
            rule: Some(st.rule),
            state: StateHit::Matched,
            flow_hash,
            rtt_path: {
                let [a, b] = st.rtt.toward;
                (a.samples > 0 && b.samples > 0).then(|| a.min + b.min)
            },
            rtt_sample: sample.map(|(_, rtt)| rtt),
        };
        if let Some((max, rate, overload)) = conn_limits {
            if self.table.count_conn(key, now, max, rate) {
                self.table.remove(key);
                self.per_rule_limit_hits += 1;
                if let (Some((t, flush)), Some(rule)) = (overload, d.rule) {
                    self.overload(init, t, flush, rule);
                }
                return Matched::Decided(Decision {
                    verdict: Verdict::Block(BlockReason::StateLimit),
                    queue: None,
                    prio: None,
                    max_mss: None,
                    ..d
                });
            }
        }
        Matched::Decided(d)
    }
}
