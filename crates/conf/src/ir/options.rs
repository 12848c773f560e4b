//! `set …` options of the IR: state limits and timeouts, link overhead,
//! autorate (split from the IR's queue and rule types; re-exported there).

use super::*;

/// `set …` options that matter to sluice.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// `set limit states N`.
    pub state_limit: u32,
    /// Link-layer overhead per interface name (`set overhead on IF …`, an
    /// sluice extension); interfaces not listed use none.
    pub overhead: Vec<(String, sluice_time::Overhead)>,
    /// `set timeout` of the state kinds.
    pub timeouts: Timeouts,
    /// `set timeout adaptive.start N` / `adaptive.end N` (states); None:
    /// pfctl's 60 % / 120 % of `state_limit` ([`Options::adaptive`]).
    pub adaptive_start: Option<u32>,
    pub adaptive_end: Option<u32>,
    /// `set timeout interval N` (seconds), kept for printing: sluice purges
    /// continuously and an expired state never matches, so it has no
    /// effect (`sluice check` says so).
    pub interval: Option<u32>,
    /// `autorate (…)` per interface name (on its root queue, `altq on`
    /// line or pipe; sluice's extension, docs/autorate.md).
    pub autorate: Vec<(String, Autorate)>,
}

/// The bounds of the rate the autorate controller may set on an
/// interface's shaper, whether it only logs (`dry-run`), the address
/// it may ping when the traffic gives no delay (`probe`), and the link's
/// known schedule of reconfigurations (`reconfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Autorate {
    pub min: Rate,
    pub max: Rate,
    pub dry_run: bool,
    pub probe: Option<IpAddr>,
    pub reconfig: Option<Reconfig>,
}

/// `reconfig (every P, at A, lead L, hold H)`: the link drops for a moment
/// at known times of the wall clock — the moments whose Unix time is `at`
/// past a multiple of `every` (Starlink: every 15 s, at 12 s, so 12, 27, 42
/// and 57 s past each minute). The controller takes the rate to `min` from
/// `lead` before each moment to `hold` after it, then back towards the rate
/// before (docs/autorate.md). Invariants (checked in sema): `at < every`,
/// `lead + hold < every`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reconfig {
    pub every: Duration,
    pub at: Duration,
    pub lead: Duration,
    pub hold: Duration,
}

/// `(every 15s, at 12s, lead 100ms, hold 400ms)`: the long form, defaults
/// written out, in units the parser reads back as the same durations.
impl std::fmt::Display for Reconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "(every {}, at {}, lead {}, hold {})",
            self.every, self.at, self.lead, self.hold
        )
    }
}

impl Reconfig {
    /// `reconfig starlink`: the satellite schedule's changes at 12, 27, 42
    /// and 57 s past the minute, each a dip of up to a few hundred ms.
    pub const STARLINK: Reconfig = Reconfig {
        every: Duration::from_secs(15),
        at: Duration::from_secs(12),
        lead: Reconfig::DEFAULT_LEAD,
        hold: Reconfig::DEFAULT_HOLD,
    };
    /// Before the moment: a round trip or two for the senders to slow
    /// down, so the queue in the modem is gone when the link drops.
    pub const DEFAULT_LEAD: Duration = Duration::from_millis(100);
    /// After it: the drop itself (up to ~300 ms) and a round trip.
    pub const DEFAULT_HOLD: Duration = Duration::from_millis(400);
}

impl Default for Options {
    fn default() -> Self {
        Options {
            state_limit: 100_000,
            overhead: Vec::new(),
            timeouts: Timeouts::default(),
            adaptive_start: None,
            adaptive_end: None,
            interval: None,
            autorate: Vec::new(),
        }
    }
}

impl Options {
    /// `autorate` of interface `ifname`, if configured.
    pub fn autorate_of(&self, ifname: &str) -> Option<Autorate> {
        self.autorate
            .iter()
            .find(|(n, _)| n == ifname)
            .map(|(_, a)| *a)
    }

    /// The link overhead of interface `ifname` (none unless set).
    pub fn overhead_of(&self, ifname: &str) -> sluice_time::Overhead {
        self.overhead
            .iter()
            .find(|(n, _)| n == ifname)
            .map_or(sluice_time::Overhead::NONE, |(_, o)| *o)
    }

    /// The adaptive thresholds in force `(start, end)`: as written, else
    /// pfctl's 60 % and 120 % of the state limit. `end <= start` (pf.conf(5):
    /// both 0) disables adaptive scaling.
    pub fn adaptive(&self) -> (u32, u32) {
        let pct = |p: u64| u32::try_from(u64::from(self.state_limit) * p / 100).unwrap_or(u32::MAX);
        (
            self.adaptive_start.unwrap_or_else(|| pct(60)),
            self.adaptive_end.unwrap_or_else(|| pct(120)),
        )
    }
}

/// Defines the timeout kinds once: the [`Timeouts`] field, the
/// [`TimeoutKind`] variant, pf's name and pf's default (seconds) of each.
macro_rules! timeouts {
    ($($kind:ident, $field:ident, $name:literal, $secs:expr;)*) => {
        /// pf's state timeouts (pf.conf(5) "OPTIONS", `set timeout`); the
        /// defaults are pf's.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Timeouts {
            $(pub $field: Duration,)*
        }

        impl Default for Timeouts {
            fn default() -> Self {
                Timeouts {
                    $($field: Duration::from_secs($secs),)*
                }
            }
        }

        /// Which timeout currently applies to a state.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum TimeoutKind {
            $($kind,)*
        }

        impl Timeouts {
            pub fn get_mut(&mut self, k: TimeoutKind) -> &mut Duration {
                match k {
                    $(TimeoutKind::$kind => &mut self.$field,)*
                }
            }
        }

        impl TimeoutKind {
            pub const ALL: [TimeoutKind; [$(TimeoutKind::$kind),*].len()] =
                [$(TimeoutKind::$kind),*];

            /// pf's name (`tcp.first`).
            pub fn name(self) -> &'static str {
                match self {
                    $(TimeoutKind::$kind => $name,)*
                }
            }
        }
    };
}

timeouts! {
    TcpFirst, tcp_first, "tcp.first", 120;
    TcpOpening, tcp_opening, "tcp.opening", 30;
    TcpEstablished, tcp_established, "tcp.established", 86_400;
    TcpClosing, tcp_closing, "tcp.closing", 900;
    TcpFinWait, tcp_finwait, "tcp.finwait", 45;
    TcpClosed, tcp_closed, "tcp.closed", 90;
    UdpFirst, udp_first, "udp.first", 60;
    UdpSingle, udp_single, "udp.single", 30;
    UdpMultiple, udp_multiple, "udp.multiple", 60;
    IcmpFirst, icmp_first, "icmp.first", 20;
    IcmpError, icmp_error, "icmp.error", 10;
    OtherFirst, other_first, "other.first", 60;
    OtherSingle, other_single, "other.single", 30;
    OtherMultiple, other_multiple, "other.multiple", 60;
}

impl Timeouts {
    pub fn get(&self, k: TimeoutKind) -> Duration {
        let mut t = *self;
        *t.get_mut(k)
    }
}

impl TimeoutKind {
    pub fn from_name(s: &str) -> Option<TimeoutKind> {
        TimeoutKind::ALL.into_iter().find(|k| k.name() == s)
    }
}
