//! Statistics snapshots, the material of `sluice show queues`.

use crate::build::ClassInfo;
use crate::IfaceCounters;
use sluice_conf::ir::SchedKind;
use sluice_sched::{ClassId, DropReason, QueueStats};
use sluice_time::{Duration, Histogram, Rate};

mod marks;
pub use marks::{SojournMarks, SOJOURN_INTERVAL};

/// One class (queue) of an interface tree.
#[derive(Clone, Debug)]
pub struct ClassReport {
    pub id: ClassId,
    /// Queue name; `None` for the interface root (and internal nodes the
    /// discipline reports without a name).
    pub name: Option<String>,
    pub parent: Option<String>,
    pub bandwidth: Option<Rate>,
    pub priority: Option<u8>,
    pub qlimit: Option<u32>,
    pub passed_packets: u64,
    pub passed_bytes: u64,
    /// (reason, packets, bytes) for every reason with drops.
    pub drops: Vec<(DropReason, u64, u64)>,
    pub ecn_marks: u64,
    pub borrows: u64,
    pub overlimits: u64,
    pub qlen: u64,
    pub backlog_bytes: u64,
    pub sojourn_p50: Option<Duration>,
    pub sojourn_p99: Option<Duration>,
    pub sojourn_max: Option<Duration>,
    /// Every forwarded packet's wait since the class was created (the
    /// metrics' histogram), and the last interval's alone
    /// ([`SojournMarks::last`]): what `show queues -v` reads its p50 and p99
    /// from.
    pub sojourn: Histogram,
    pub sojourn_last: Histogram,
    /// Ingress mode: packets and bytes (cost) of this class's drops the
    /// interface's shaper charged as if sent; `None` when not in ingress
    /// mode. The root reports the interface's total.
    pub ingress_charged: Option<(u64, u64)>,
    /// TCP control (`ack-pacing`, `window-clamp`) of the connections whose
    /// data uses this class; `None` when the class has neither.
    pub tcp: Option<TcpControlReport>,
}

impl TcpControlReport {
    /// Adds `o`'s counters and gauges (a root reporting for the classes of
    /// a discipline that shows no classes of its own).
    pub fn add(&mut self, o: &TcpControlReport) {
        self.flows += o.flows;
        self.acks_passed += o.acks_passed;
        self.acks_held += o.acks_held;
        self.held_now += o.held_now;
        self.acks_paced += o.acks_paced;
        self.acks_flushed += o.acks_flushed;
        self.acks_capped += o.acks_capped;
        self.windows_clamped += o.windows_clamped;
        self.windows_untouched += o.windows_untouched;
        self.acks_unsent += o.acks_unsent;
        self.syns_ignored += o.syns_ignored;
        self.pace_bps += o.pace_bps;
        self.path_queue = self.path_queue.max(o.path_queue);
    }
}

/// What TCP control did for one queue's connections (docs/tcp-control.md),
/// through the segments their receivers sent back. Counters since the
/// queue was created, except the gauges `flows`, `held_now`, `pace_bps` and
/// `path_queue`. `acks_passed + acks_held` are the pure ACKs seen;
/// `acks_paced`, `acks_flushed`, `acks_capped` count the held ones as they
/// leave. The control protocol carries it as it is (`show queues --json`,
/// the metrics; `path_queue` as `path_queue_ns`): this is its one
/// definition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TcpControlReport {
    /// Connections under control now (gauge).
    pub flows: u64,
    /// Pure ACKs the pacer let through on arrival.
    pub acks_passed: u64,
    /// Pure ACKs held to pace their flow.
    pub acks_held: u64,
    /// ACKs held now (gauge).
    pub held_now: u64,
    /// Held ACKs released at their paced time.
    pub acks_paced: u64,
    /// Held ACKs released early, in order, ahead of a segment that must pass
    /// at once (duplicate ACK, SACK, data, SYN/FIN/RST, ECE).
    pub acks_flushed: u64,
    /// Held ACKs released early by a cap (per flow, total, or hold time).
    pub acks_capped: u64,
    /// Segments whose advertised window was lowered.
    pub windows_clamped: u64,
    /// Segments of controlled connections whose window could not be
    /// controlled (handshake not seen, malformed options, signed) and passed
    /// untouched.
    pub windows_untouched: u64,
    /// ACKs of data the sender never sent: forwarded, neither paced nor
    /// charged (docs/tcp-control.md, hostile peers).
    #[cfg_attr(feature = "serde", serde(default))]
    pub acks_unsent: u64,
    /// SYNs that answer no SYN of the connection, or come after its
    /// handshake: forwarded, ignored by the clamp and the shares.
    #[cfg_attr(feature = "serde", serde(default))]
    pub syns_ignored: u64,
    /// The pace now, bit/s (gauge): the queue's rate, less while a queue
    /// stood in sluice or before it.
    #[cfg_attr(feature = "serde", serde(default))]
    pub pace_bps: u64,
    /// The queue standing before sluice that the connections' data met on
    /// the way in, from their senders' timestamps (a download's: the
    /// modem's; gauge, crate::owd); `None` where it is not read (not a
    /// LAN-side interface) or not known.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "path_queue_ns",
            with = "nanos",
            default,
            skip_serializing_if = "Option::is_none"
        )
    )]
    pub path_queue: Option<Duration>,
}

/// A duration in the protocol: whole nanoseconds, as every `*_ns` field.
#[cfg(feature = "serde")]
mod nanos {
    use serde::{Deserialize, Deserializer, Serializer};
    use sluice_time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_nanos()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_nanos))
    }
}

impl ClassReport {
    pub fn new(id: ClassId, info: Option<&ClassInfo>, st: &QueueStats) -> ClassReport {
        let drops = DropReason::ALL
            .iter()
            .filter(|r| st.drop_packets[r.index()] > 0)
            .map(|r| (*r, st.drop_packets[r.index()], st.drop_bytes[r.index()]))
            .collect();
        let has = st.sojourn.count() > 0;
        ClassReport {
            id,
            name: info.map(|i| i.name.clone()),
            parent: info.and_then(|i| i.parent.clone()),
            bandwidth: info.and_then(|i| i.bandwidth),
            priority: info.map(|i| i.priority),
            qlimit: info.map(|i| i.qlimit),
            passed_packets: st.deq_packets,
            passed_bytes: st.deq_bytes,
            drops,
            ecn_marks: st.ecn_marks,
            borrows: st.borrows,
            overlimits: st.overlimits,
            qlen: st.qlen,
            backlog_bytes: st.backlog_bytes,
            sojourn_p50: st.sojourn.quantile(0.5),
            sojourn_p99: st.sojourn.quantile(0.99),
            sojourn_max: has.then(|| st.sojourn.max()),
            sojourn: st.sojourn.clone(),
            sojourn_last: st.sojourn.clone(),
            ingress_charged: None,
            tcp: None,
        }
    }

    pub fn dropped_packets(&self) -> u64 {
        self.drops.iter().map(|d| d.1).sum()
    }
}

/// One interface.
#[derive(Clone, Debug)]
pub struct IfaceReport {
    pub name: String,
    pub sched: Option<SchedKind>,
    pub bandwidth: Option<Rate>,
    pub counters: IfaceCounters,
    pub classes: Vec<ClassReport>,
    /// The autorate controller of this interface's shaper, if configured.
    pub autorate: Option<AutorateReport>,
}

/// What autorate is doing on one interface (crate::autorate).
#[derive(Clone, Debug, PartialEq)]
pub struct AutorateReport {
    pub min: Rate,
    pub max: Rate,
    pub dry_run: bool,
    /// The rate the controller chose (in dry-run: would have set).
    pub rate: Rate,
    /// The latest delay signal it acted on: median delay beyond sluice,
    /// flows, age of the newest sample.
    pub delay: Option<Duration>,
    pub flows: u32,
    pub newest_age: Option<Duration>,
    /// Decisions (ticks) by reason, [`crate::autorate::Reason::ALL`] order.
    pub decisions: Vec<(&'static str, u64)>,
    /// The delay signal it reads (the WAN side's): samples taken, and
    /// samples left out as shorter than their correction
    /// ([`crate::delay_signal::DelaySignal::unsound`]).
    pub samples: u64,
    pub samples_unsound: u64,
    /// Holds the controller made (an upload's cuts: the shaper silent
    /// while the modem's queue drains), and their time in all.
    pub holds: u64,
    pub held: Duration,
    /// That delay was the probe's round trip, not the traffic's.
    pub delay_from_probe: bool,
    /// The probe on the WAN side of the interface's pair, if one is sent.
    pub probe: Option<ProbeReport>,
    /// The link's schedule of drops (`reconfig`), and whether the wall
    /// clock it needs is known.
    pub reconfig: Option<sluice_conf::ir::Reconfig>,
    pub wall_clock: bool,
}

/// autorate's probe (crate::probe): where to, and how it fares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeReport {
    pub target: std::net::IpAddr,
    pub stats: crate::probe::ProbeStats,
}

impl IfaceReport {
    pub fn class(&self, name: &str) -> Option<&ClassReport> {
        self.classes
            .iter()
            .find(|c| c.name.as_deref() == Some(name))
    }
}
