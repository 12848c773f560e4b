//! Per-state protocol tracking and pf's timeouts.
//!
//! # Principles
//!
//! - TCP follows pf's coarse peer tracking (OpenBSD `pf_tcp_track_full`, the
//!   state part; its sequence-window check is `window.rs`): each peer moves forward
//!   only, `Closed < SynSent < Established < Closing < FinWait2 < TimeWait`.
//!   A SYN from a peer makes it `SynSent`, a FIN `Closing`; an ACK moves the
//!   *other* peer from `SynSent` to `Established` or from `Closing` to
//!   `FinWait2`; a RST puts both in `TimeWait`.
//! - The timeout is chosen from the pair, in pf's order: both ≥ FinWait2 →
//!   `tcp.closed`; both ≥ Closing → `tcp.finwait`; either < Established →
//!   `tcp.opening`; either ≥ Closing → `tcp.closing`; else `tcp.established`.
//!   A new state starts with `tcp.first`.
//! - UDP and other protocols get pf's pseudo-states (NoTraffic, Single,
//!   Multiple): `*.multiple` once both sides have spoken twice, else
//!   `*.single`; a new state starts with `*.first`.
//! - ICMP: `icmp.first` for a new state, `icmp.error` after any later packet
//!   (pf's "error reply" timeout applies to echo replies as well).
//! - A state expires `timeout` after its last packet; the values are the
//!   config's `set timeout` (pf's defaults, [`Timeouts`]), or the rule's own
//!   `keep state (tcp.established N, …)`, scaled by pf's adaptive factor
//!   (`state.rs`).

pub use sluice_conf::ir::{TimeoutKind, Timeouts};
use sluice_wire::tcp_flags;
use std::fmt;

/// One TCP peer's state, ordered: it only ever moves forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TcpPeer {
    Closed,
    SynSent,
    Established,
    Closing,
    FinWait2,
    TimeWait,
}

/// One side of a UDP / other-protocol pseudo-state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PseudoPeer {
    NoTraffic,
    Single,
    Multiple,
}

/// Protocol state of a connection; index 0 is the initiator, 1 the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoState {
    Tcp([TcpPeer; 2]),
    Udp([PseudoPeer; 2]),
    Icmp,
    Other([PseudoPeer; 2]),
}

impl ProtoState {
    /// The state for a connection whose first packet has protocol `proto`.
    pub fn new(proto: u8) -> (ProtoState, TimeoutKind) {
        use sluice_wire::proto::*;
        match proto {
            TCP => (
                ProtoState::Tcp([TcpPeer::SynSent, TcpPeer::Closed]),
                TimeoutKind::TcpFirst,
            ),
            UDP => (
                ProtoState::Udp([PseudoPeer::Single, PseudoPeer::NoTraffic]),
                TimeoutKind::UdpFirst,
            ),
            ICMP | ICMPV6 => (ProtoState::Icmp, TimeoutKind::IcmpFirst),
            _ => (
                ProtoState::Other([PseudoPeer::Single, PseudoPeer::NoTraffic]),
                TimeoutKind::OtherFirst,
            ),
        }
    }

    /// Account a later packet sent by peer `from` (0 initiator, 1 responder)
    /// with TCP flags `flags` (ignored for other protocols); returns the
    /// timeout that now applies.
    pub fn update(&mut self, from: usize, flags: u8) -> TimeoutKind {
        let (s, d) = if from == 0 { (0, 1) } else { (1, 0) };
        match self {
            ProtoState::Tcp(p) => {
                if flags & tcp_flags::SYN != 0 && p[s] < TcpPeer::SynSent {
                    p[s] = TcpPeer::SynSent;
                }
                if flags & tcp_flags::FIN != 0 && p[s] < TcpPeer::Closing {
                    p[s] = TcpPeer::Closing;
                }
                if flags & tcp_flags::ACK != 0 {
                    if p[d] == TcpPeer::SynSent {
                        p[d] = TcpPeer::Established;
                    } else if p[d] == TcpPeer::Closing {
                        p[d] = TcpPeer::FinWait2;
                    }
                }
                if flags & tcp_flags::RST != 0 {
                    p[s] = TcpPeer::TimeWait;
                    p[d] = TcpPeer::TimeWait;
                }
                tcp_timeout(p)
            }
            ProtoState::Udp(p) => {
                if pseudo_update(p, s, d) {
                    TimeoutKind::UdpMultiple
                } else {
                    TimeoutKind::UdpSingle
                }
            }
            ProtoState::Other(p) => {
                if pseudo_update(p, s, d) {
                    TimeoutKind::OtherMultiple
                } else {
                    TimeoutKind::OtherSingle
                }
            }
            ProtoState::Icmp => TimeoutKind::IcmpError,
        }
    }

    /// The same connection seen from peer `side` (0 initiator, 1
    /// responder) as the initiator: what the other half of a doubly
    /// evaluated connection starts from when that peer's packet creates it.
    pub fn mirrored(self, side: usize) -> ProtoState {
        match self {
            ProtoState::Tcp([a, b]) if side == 1 => ProtoState::Tcp([b, a]),
            ProtoState::Udp([a, b]) if side == 1 => ProtoState::Udp([b, a]),
            ProtoState::Other([a, b]) if side == 1 => ProtoState::Other([b, a]),
            p => p,
        }
    }

    /// A TCP connection past its three-way handshake (pf's notion for
    /// `max-src-conn`): both peers ESTABLISHED or later.
    pub fn tcp_established(&self) -> bool {
        matches!(self, ProtoState::Tcp(p) if p[0] >= TcpPeer::Established && p[1] >= TcpPeer::Established)
    }

    /// Both TCP peers are done (≥ FinWait2): a new SYN on the same 4-tuple is
    /// a new connection (port reuse), not part of this one.
    pub fn tcp_closed(&self) -> bool {
        matches!(self, ProtoState::Tcp(p) if p[0] >= TcpPeer::FinWait2 && p[1] >= TcpPeer::FinWait2)
    }
}

/// Moves the pseudo-state of a UDP or other flow on a packet from `s` to
/// `d`; true once both sides are `Multiple` (pf's MULTIPLE:MULTIPLE, the
/// longer timeout).
fn pseudo_update(p: &mut [PseudoPeer; 2], s: usize, d: usize) -> bool {
    if p[s] < PseudoPeer::Single {
        p[s] = PseudoPeer::Single;
    }
    if p[d] == PseudoPeer::Single {
        p[d] = PseudoPeer::Multiple;
    }
    p[0] == PseudoPeer::Multiple && p[1] == PseudoPeer::Multiple
}

fn tcp_timeout(p: &[TcpPeer; 2]) -> TimeoutKind {
    let (a, b) = (p[0], p[1]);
    if a >= TcpPeer::FinWait2 && b >= TcpPeer::FinWait2 {
        TimeoutKind::TcpClosed
    } else if a >= TcpPeer::Closing && b >= TcpPeer::Closing {
        TimeoutKind::TcpFinWait
    } else if a < TcpPeer::Established || b < TcpPeer::Established {
        TimeoutKind::TcpOpening
    } else if a >= TcpPeer::Closing || b >= TcpPeer::Closing {
        TimeoutKind::TcpClosing
    } else {
        TimeoutKind::TcpEstablished
    }
}

impl fmt::Display for TcpPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TcpPeer::Closed => "CLOSED",
            TcpPeer::SynSent => "SYN_SENT",
            TcpPeer::Established => "ESTABLISHED",
            TcpPeer::Closing => "CLOSING",
            TcpPeer::FinWait2 => "FIN_WAIT_2",
            TcpPeer::TimeWait => "TIME_WAIT",
        })
    }
}

impl fmt::Display for PseudoPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PseudoPeer::NoTraffic => "NO_TRAFFIC",
            PseudoPeer::Single => "SINGLE",
            PseudoPeer::Multiple => "MULTIPLE",
        })
    }
}

/// `pfctl -ss` style: `ESTABLISHED:ESTABLISHED`, `MULTIPLE:SINGLE`, `0:0`.
impl fmt::Display for ProtoState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoState::Tcp([a, b]) => write!(f, "{a}:{b}"),
            ProtoState::Udp([a, b]) | ProtoState::Other([a, b]) => write!(f, "{a}:{b}"),
            ProtoState::Icmp => f.write_str("0:0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_time::Duration;
    use sluice_wire::tcp_flags::*;
    use TcpPeer::*;

    #[test]
    fn tcp_handshake_data_and_close() {
        let (mut s, k) = ProtoState::new(6);
        assert_eq!(
            (s, k),
            (ProtoState::Tcp([SynSent, Closed]), TimeoutKind::TcpFirst)
        );
        assert_eq!(s.update(1, SYN | ACK), TimeoutKind::TcpOpening);
        assert_eq!(s, ProtoState::Tcp([Established, SynSent]));
        assert_eq!(s.update(0, ACK), TimeoutKind::TcpEstablished);
        assert_eq!(s.to_string(), "ESTABLISHED:ESTABLISHED");
        assert_eq!(s.update(1, ACK | PSH), TimeoutKind::TcpEstablished);
        assert_eq!(s.update(0, FIN | ACK), TimeoutKind::TcpClosing);
        assert_eq!(s.update(1, ACK), TimeoutKind::TcpClosing);
        assert_eq!(s, ProtoState::Tcp([FinWait2, Established]));
        assert_eq!(s.update(1, FIN | ACK), TimeoutKind::TcpFinWait);
        assert!(!s.tcp_closed());
        assert_eq!(s.update(0, ACK), TimeoutKind::TcpClosed);
        assert_eq!(s.to_string(), "FIN_WAIT_2:FIN_WAIT_2");
        assert!(s.tcp_closed());
    }

    #[test]
    fn tcp_rst_closes_both_and_states_never_regress() {
        let (mut s, _) = ProtoState::new(6);
        s.update(1, SYN | ACK);
        s.update(0, ACK);
        assert_eq!(s.update(1, RST), TimeoutKind::TcpClosed);
        assert_eq!(s, ProtoState::Tcp([TimeWait, TimeWait]));
        assert_eq!(
            s.update(0, SYN),
            TimeoutKind::TcpClosed,
            "no regress after RST"
        );
        assert_eq!(s, ProtoState::Tcp([TimeWait, TimeWait]));
    }

    #[test]
    fn tcp_unanswered_syn_stays_opening() {
        let (mut s, _) = ProtoState::new(6);
        assert_eq!(s.update(0, SYN), TimeoutKind::TcpOpening);
        assert_eq!(s.update(0, SYN), TimeoutKind::TcpOpening);
    }

    #[test]
    fn udp_single_then_multiple() {
        let (mut s, k) = ProtoState::new(17);
        assert_eq!(k, TimeoutKind::UdpFirst);
        assert_eq!(s.update(0, 0), TimeoutKind::UdpSingle);
        assert_eq!(s.update(1, 0), TimeoutKind::UdpSingle);
        assert_eq!(s.to_string(), "MULTIPLE:SINGLE");
        assert_eq!(s.update(0, 0), TimeoutKind::UdpMultiple);
        let (mut o, k) = ProtoState::new(47);
        assert_eq!(k, TimeoutKind::OtherFirst);
        o.update(1, 0);
        assert_eq!(o.update(0, 0), TimeoutKind::OtherMultiple);
        let (mut i, k) = ProtoState::new(1);
        assert_eq!(k, TimeoutKind::IcmpFirst);
        assert_eq!(i.update(1, 0), TimeoutKind::IcmpError);
    }

    #[test]
    fn default_timeouts_are_pfs() {
        let t = Timeouts::default();
        assert_eq!(
            t.get(TimeoutKind::TcpEstablished),
            Duration::from_secs(86_400)
        );
        assert_eq!(t.get(TimeoutKind::TcpClosed), Duration::from_secs(90));
        assert_eq!(t.get(TimeoutKind::IcmpError), Duration::from_secs(10));
        assert_eq!(t.get(TimeoutKind::OtherMultiple), Duration::from_secs(60));
    }
}
