//! The control protocol: one JSON object per line each way. The schema is
//! documented in docs/control.md; `sluice show … --json` prints the `Reply`
//! objects as they arrive.

use serde::{Deserialize, Serialize};
/// A queue's TCP control counters: the engine's report, serialised as it
/// is (its one definition, with their meaning).
pub use sluice_engine::TcpControlReport;

/// A request line longer than this is refused (requests are a few dozen
/// bytes; a reload path is at most PATH_MAX).
pub const MAX_REQUEST_BYTES: usize = 8192;
/// `show states` returns at most this many states (the rest are counted in
/// `StatesReply::total`): copying them holds the engine lock.
pub const STATES_SHOWN_CAP: usize = 100_000;

/// A client's request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    ShowQueues,
    ShowStates,
    ShowRules,
    ShowInfo,
    /// Whether each shaper is in control of its link (docs/control.md).
    ShowHealth,
    /// `file`: an absolute path; none reloads the daemon's `-f` file.
    Reload {
        #[serde(default)]
        file: Option<String>,
        /// `sluice reload --strict`: refuse what `sluice check --strict`
        /// refuses (a daemon started with `--strict` always is).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        strict: bool,
    },
    Stop,
}

/// The server's answer: exactly one line per request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reply {
    Queues(QueuesReply),
    States(StatesReply),
    Rules(RulesReply),
    /// Boxed: the largest reply, and the rarest.
    Info(Box<InfoReply>),
    Health(HealthReply),
    Reloaded(ReloadReport),
    Stopping,
    /// The request failed; `message` is meant for a person (for a refused
    /// reload: the rendered diagnostics of `sluice check`).
    Error {
        message: String,
    },
}

/// What a successful reload did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// The file that was loaded.
    pub file: String,
    /// Packets moved into a queue of the same name in the new tree.
    pub kept: u64,
    /// Packets whose queue vanished or no longer fitted (counted as drops).
    pub dropped: u64,
    /// Rendered warnings of the check (as `sluice check` prints them).
    pub warnings: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueuesReply {
    pub ifaces: Vec<IfaceQueues>,
}

/// The queue tree of one interface; `sched` is none for an unshaped one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IfaceQueues {
    pub name: String,
    /// `priq`, `cbq`, `hfsc`, `fairq`, `pipe`.
    pub sched: Option<String>,
    /// The rate the interface is shaped at now (autorate moves it).
    pub bandwidth_bps: Option<u64>,
    pub queues: Vec<QueueJson>,
    /// The autorate controller of this interface (docs/autorate.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autorate: Option<AutorateJson>,
}

/// What autorate is doing on one interface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutorateJson {
    pub min_bps: u64,
    pub max_bps: u64,
    pub dry_run: bool,
    /// The rate the controller chose (in dry-run: would have set).
    pub rate_bps: u64,
    /// The delay signal it last acted on: median delay beyond sluice,
    /// the flows it is over, the age of the newest sample.
    pub delay_ns: Option<u64>,
    pub flows: u32,
    pub newest_age_ns: Option<u64>,
    /// Decisions (ticks) by reason: delay, load, idle, unsure,
    /// refractory, steady, reconfig, link.
    pub decisions: Vec<(String, u64)>,
    /// That delay was the probe's round trip (no TCP to read).
    #[serde(default)]
    pub delay_from_probe: bool,
    /// The delay signal's samples (the WAN side's, which both directions
    /// read): taken, and left out because sluice's own wait they were to
    /// be corrected by was longer than the round trip itself.
    #[serde(default)]
    pub samples: u64,
    #[serde(default)]
    pub samples_unsound: u64,
    /// Holds made (an upload's cuts: its shaper silent while the modem's
    /// queue drains), and their time in all.
    #[serde(default)]
    pub holds: u64,
    #[serde(default)]
    pub held_ns: u64,
    /// `probe ADDR`: the echo requests sluice sends for a reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeJson>,
    /// `reconfig`: the link's schedule of drops, as configured
    /// (`(every 15s, at 12s, lead 100ms, hold 400ms)`); off while the
    /// daemon has no wall clock (`reconfig_active` false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconfig: Option<String>,
    #[serde(default)]
    pub reconfig_active: bool,
}

/// autorate's probe on one interface (docs/autorate.md, "Probes").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeJson {
    pub target: String,
    pub sent: u64,
    pub answered: u64,
    /// Unanswered within 2 s, or overtaken by a later reply.
    pub lost: u64,
    pub last_rtt_ns: Option<u64>,
}

/// One class. Counters are cumulative since the queue was created (a queue
/// that keeps its name across a reload starts again from zero).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueJson {
    pub id: u32,
    /// pfctl's name for the unnamed root: `root_IFACE`.
    pub name: String,
    pub parent: Option<String>,
    /// Options in the order and spelling of `sluice check -v` (the config
    /// printer's `queue_options`): `default`, `borrow`, `red`, `ecn`,
    /// `rio`, `realtime 1Mb`, `flows 1024` …
    pub options: Vec<String>,
    pub bandwidth_bps: Option<u64>,
    pub priority: Option<u8>,
    pub qlimit: Option<u32>,
    pub packets: u64,
    pub bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub drops: Vec<DropJson>,
    pub ecn_marks: u64,
    pub borrows: u64,
    /// Times the class was held back by its rate (pfctl's "suspends").
    pub overlimits: u64,
    pub qlength: u64,
    pub backlog_bytes: u64,
    /// Time forwarded packets waited in the queue since it was created.
    pub sojourn_p50_ns: Option<u64>,
    pub sojourn_p99_ns: Option<u64>,
    pub sojourn_max_ns: Option<u64>,
    /// The same over the last interval only: the previous
    /// `sluice_engine::SOJOURN_INTERVAL` (10 s) and the current one so far;
    /// none when no packet left the queue in that time.
    #[serde(default)]
    pub sojourn_last_p50_ns: Option<u64>,
    #[serde(default)]
    pub sojourn_last_p99_ns: Option<u64>,
    /// Ingress mode: packets and bytes (with link overhead) of this queue's
    /// drops the interface's shaper charged as if sent (the root: the
    /// interface's total); none when the queue is not in ingress mode.
    #[serde(default)]
    pub ingress_charged_packets: Option<u64>,
    #[serde(default)]
    pub ingress_charged_bytes: Option<u64>,
    /// TCP control (`ack-pacing`, `window-clamp`; docs/tcp-control.md):
    /// what it did to the connections whose data uses this queue; none when
    /// the queue has neither option.
    #[serde(default)]
    pub tcp: Option<TcpControlReport>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropJson {
    /// `queue-full`, `aqm`, `loss`, `no-class`, `purge`.
    pub reason: String,
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatesReply {
    /// Resident states, including those shown.
    pub total: u64,
    pub limit: u64,
    pub states: Vec<StateJson>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateJson {
    /// `tcp`, `udp`, `icmp`, `ipv6-icmp` or the protocol number.
    pub proto: String,
    /// The initiator and the responder.
    pub src: String,
    pub src_port: u16,
    pub dst: String,
    pub dst_port: u16,
    /// Direction at which the initiator's packets were seen: `in` or `out`.
    pub direction: String,
    /// pfctl's `ESTABLISHED:ESTABLISHED`, `MULTIPLE:SINGLE`, `0:0`.
    pub state: String,
    pub queue: Option<String>,
    pub queue_pri: Option<String>,
    /// Index of the rule that created the state (`@N` of `show rules`);
    /// none for a state created under a previous rule set (before a reload).
    pub rule: Option<u32>,
    /// [initiator→responder, responder→initiator].
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub age_ns: u64,
    /// 0 for a state that has expired and waits to be purged.
    pub expires_in_ns: u64,
    /// Passive RTT from sluice to the responder and back (TCP; absent
    /// until a round trip could be timed). docs/control.md, `states`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_to_dst: Option<RttJson>,
    /// From sluice to the initiator and back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_to_src: Option<RttJson>,
    /// pf's sequence windows of [the initiator, the responder] (TCP
    /// tracked without `sloppy`); what `pfctl -vss` prints in brackets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<[WindowJson; 2]>,
}

/// One peer's sequence window as the state table tracks it: the segments
/// it may send lie in `[seqlo, seqhi)` (modulo 2^32).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowJson {
    /// Highest sequence number it sent, plus one.
    pub seqlo: u32,
    /// Right edge the other peer allowed it (that peer's ACK plus window).
    pub seqhi: u32,
    /// Largest window it offered, in bytes.
    pub max_win: u32,
    /// Its window scale; none until the handshake was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wscale: Option<u8>,
}

/// A passive RTT estimate: the latest sample, the smallest, the smoothed
/// value (RFC 6298, α = 1/8) and how many samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RttJson {
    pub last_ns: u64,
    pub min_ns: u64,
    pub smoothed_ns: u64,
    pub samples: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RulesReply {
    pub rules: Vec<RuleJson>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleJson {
    /// Position after list expansion (pfctl's `@N`).
    pub number: u32,
    pub line: u32,
    /// The rule in canonical form, from the configuration that runs; none
    /// only if the engine counts a rule that configuration lacks.
    pub text: Option<String>,
    pub evaluations: u64,
    pub matches: u64,
    pub packets: u64,
    pub bytes: u64,
    /// States it created since loaded, and those resident now.
    pub state_creations: u64,
    pub states: u64,
    /// SYNs of its connections whose MSS `scrub (max-mss …)` lowered.
    #[serde(default)]
    pub mss_clamped: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InfoReply {
    pub version: String,
    pub pid: u32,
    pub uptime_ns: u64,
    /// `[lan, wan]`.
    pub ifaces: Vec<String>,
    pub io_method: String,
    pub config: String,
    pub counters: Vec<IfaceCountersJson>,
    pub states: u64,
    pub state_limit: u64,
    pub state_inserts: u64,
    pub state_removals: u64,
    pub state_limit_hits: u64,
    /// Unanswered states evicted to admit new ones into a full table.
    #[serde(default)]
    pub state_evictions: u64,
    /// States refused by a rule's `max` / `max-src-states`.
    #[serde(default)]
    pub state_rule_limit_hits: u64,
    pub io: Vec<(String, u64)>,
    /// The control socket's and the metrics endpoint's clients: served
    /// now, the cap, refused at the cap.
    #[serde(default)]
    pub clients: Vec<ClientsJson>,
    /// Memory held by queued frames and the caps on it (absent from an
    /// older daemon's answer).
    #[serde(default)]
    pub memory: MemoryJson,
    /// Bridge mode: the addresses each interface is known by (`from
    /// $ext_if`), learned from ARP/ND on the LAN side. Empty for an
    /// interface with configured addresses.
    #[serde(default)]
    pub learned_addrs: Vec<LearnedAddrsJson>,
    /// AF_XDP: each interface's attach mode and RX queues (empty on
    /// AF_PACKET).
    #[serde(default)]
    pub xdp: Vec<XdpIfaceJson>,
}

/// AF_XDP on one interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpIfaceJson {
    pub iface: String,
    /// How the XDP program is attached: `native` (driver) or `generic` (skb).
    pub attach: String,
    /// The queue frames are transmitted on.
    pub tx_queue: u32,
    /// Every RX queue, each with a socket of its own.
    pub queues: Vec<XdpQueueJson>,
}

/// One RX queue's AF_XDP socket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpQueueJson {
    pub queue: u32,
    /// `zerocopy` or `copy`.
    pub mode: String,
    /// Why the queue runs in copy mode (absent in zero-copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_reason: Option<String>,
    /// Frames received on this queue (refreshed once a second).
    pub rx_frames: u64,
    /// Frames the kernel dropped on this queue (no fill chunk, ring full).
    pub ring_drops: u64,
    /// Receive chunks of this queue (`--xdp-frames`; 0 from a daemon
    /// before it was reported).
    #[serde(default)]
    pub chunks: u32,
}

/// One server's clients (`control`, `metrics`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientsJson {
    pub server: String,
    pub serving: u64,
    pub cap: u64,
    pub refused: u64,
}

/// Memory held by queued frames (each charged its buffer's capacity plus a
/// fixed per-frame overhead, as Linux charges `skb->truesize`), and the
/// caps on it. See docs/dataplane.md, "Memory".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryJson {
    pub held_bytes: u64,
    pub peak_bytes: u64,
    /// The engine's cap on `held_bytes` (`sluice run --memory-limit`).
    pub limit_bytes: u64,
    /// Frames refused because of the cap.
    pub limit_drops: u64,
    /// Queued frames now.
    pub frames: u64,
    /// Queued small frames copied out of a full-sized receive buffer.
    pub right_sized: u64,
    /// Per-queue memory limits in force (FQ-CoDel's `memory_limit`).
    pub queue_limits: Vec<QueueMemoryLimit>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMemoryLimit {
    pub iface: String,
    pub queue: String,
    pub limit_bytes: u64,
}

/// One interface's addresses in bridge mode: learned, or configured.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedAddrsJson {
    pub iface: String,
    /// Newcomers refused because every slot held a recently seen address.
    pub refused: u64,
    pub addrs: Vec<LearnedAddrJson>,
    /// `--iface-addr` (CIDR): given, the interface learns nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configured: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedAddrJson {
    pub addr: String,
    /// Since it was first learned.
    pub age_ns: u64,
    /// Since it was last claimed in ARP/ND or seen sending; it is forgotten
    /// at `sluice_classify::LEARNED_ADDR_TTL`.
    pub idle_ns: u64,
}

/// `show health`: one entry per shaped direction (the engine's
/// `health::HealthReport`, mapped: durations in `_ns`, rates in `_bps`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthReply {
    pub directions: Vec<HealthJson>,
}

/// The health of the traffic leaving by one shaped interface.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthJson {
    pub iface: String,
    /// `upload` (leaving by the WAN side) or `download` (by the LAN side).
    pub direction: String,
    /// `not-enough-traffic`, `in-control` or `not-in-control`.
    pub verdict: String,
    /// Not in control: the rate to configure (the link's delivery rate ×
    /// 0.95); none there means "enable autorate".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_bps: Option<u64>,
    /// Not enough traffic, yet traffic, while the other direction (this
    /// interface) is not in control: its ACKs wait in that link's queue,
    /// which is to be fixed first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back_by: Option<String>,
    /// The verdict as a sentence (the daemon's log line says the same,
    /// without the held-back clause).
    pub text: String,
    /// How long the verdict has held.
    pub since_ns: u64,
    /// The last 100 ms tick: loaded or not, sluice's output and its rate.
    pub loaded: bool,
    pub output_bps: u64,
    pub rate_bps: u64,
    /// Loaded time within the last `evidence_ns` (the verdict's window).
    pub loaded_ns: u64,
    pub evidence_ns: u64,
    /// Latency added under load by sluice (its wait) and beyond it.
    pub sluice: LatencyWindowsJson,
    pub beyond: LatencyWindowsJson,
    /// The modem's queue grown under load, since the daemon started.
    pub episodes: EpisodesJson,
    /// DSLReports' grade of the last minute's mean added latency under
    /// load, and that mean (none: no loaded time in the last minute).
    pub grade: Option<String>,
    pub added_ns: Option<u64>,
}

/// One quantity over the last minute, hour and day.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyWindowsJson {
    pub minute: LatencyJson,
    pub hour: LatencyJson,
    pub day: LatencyJson,
}

/// Quantiles and mean of loaded ticks' readings (one sample per tick).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyJson {
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub mean_ns: Option<u64>,
    pub samples: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodesJson {
    pub count: u64,
    pub total_ns: u64,
    pub longest_ns: u64,
    /// How long the current one lasts, if one does.
    pub current_ns: Option<u64>,
}

/// An interface's packet counters; the drop causes add up to every frame
/// received and not forwarded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceCountersJson {
    pub name: String,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub non_ip: u64,
    pub malformed: u64,
    pub blocked: u64,
    pub state_limit: u64,
    /// TCP segments outside their state's sequence window (pf's "bad state").
    #[serde(default)]
    pub bad_state: u64,
    pub no_route: u64,
    pub queue_drops: u64,
    /// Queue drops by reason, summed over the leaf queues.
    pub queue_drops_by_reason: Vec<DropJson>,
    pub reload_drops: u64,
    pub ecn_marked: u64,
    /// Frames refused because queued frames held the memory cap.
    #[serde(default)]
    pub memory_drops: u64,
    /// SYNs arriving here whose MSS `scrub (max-mss …)` lowered, and those
    /// under it whose options could not be walked (passed unmodified).
    #[serde(default)]
    pub mss_clamped: u64,
    #[serde(default)]
    pub mss_untouched: u64,
    /// autorate's echo requests sent here (sluice's own frames, not in
    /// `tx_packets`), and the replies taken here (not forwarded).
    #[serde(default)]
    pub probes_sent: u64,
    #[serde(default)]
    pub probe_replies: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counters of `show queues --json` and the metrics: the engine's
    /// report serialised as it is, so its spelling is pinned here.
    #[test]
    fn tcp_control_counters_have_the_documented_spelling() {
        let full = r#"{"flows":2,"acks_passed":10,"acks_held":20,"held_now":3,"acks_paced":12,"acks_flushed":4,"acks_capped":1,"windows_clamped":30,"windows_untouched":5,"acks_unsent":6,"syns_ignored":7,"pace_bps":8000000,"path_queue_ns":3000000}"#;
        let t: TcpControlReport = serde_json::from_str(full).unwrap();
        assert_eq!((t.flows, t.acks_capped, t.pace_bps), (2, 1, 8_000_000));
        assert_eq!(serde_json::to_string(&t).unwrap(), full);
        // An older daemon's answer, without the later counters; no queue
        // standing before sluice is left out.
        let old = r#"{"flows":1,"acks_passed":1,"acks_held":1,"held_now":0,"acks_paced":1,"acks_flushed":0,"acks_capped":0,"windows_clamped":0,"windows_untouched":0}"#;
        let t: TcpControlReport = serde_json::from_str(old).unwrap();
        assert_eq!((t.acks_unsent, t.syns_ignored, t.pace_bps), (0, 0, 0));
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"flows":1,"acks_passed":1,"acks_held":1,"held_now":0,"acks_paced":1,"acks_flushed":0,"acks_capped":0,"windows_clamped":0,"windows_untouched":0,"acks_unsent":0,"syns_ignored":0,"pace_bps":0}"#
        );
    }

    /// docs/control.md's table of TCP control's fields is written by hand:
    /// every field the engine's report serialises has its row.
    #[test]
    fn every_tcp_control_counter_has_its_row_in_the_docs() {
        let doc = include_str!("../../../docs/control.md");
        let t = TcpControlReport {
            path_queue: Some(sluice_time::Duration::from_millis(1)),
            ..TcpControlReport::default()
        };
        let v = serde_json::to_value(t).unwrap();
        let fields = v.as_object().unwrap();
        assert_eq!(fields.len(), 13);
        for name in fields.keys() {
            assert!(
                doc.contains(&format!("| `{name}` |")),
                "docs/control.md has no row for `{name}`"
            );
        }
    }

    #[test]
    fn xdp_queues_have_the_documented_spelling() {
        let q = XdpIfaceJson {
            iface: "lan0".into(),
            attach: "generic".into(),
            tx_queue: 0,
            queues: vec![
                XdpQueueJson {
                    queue: 0,
                    mode: "copy".into(),
                    copy_reason: Some("generic XDP".into()),
                    rx_frames: 5,
                    ring_drops: 0,
                    chunks: 8192,
                },
                XdpQueueJson {
                    queue: 1,
                    mode: "zerocopy".into(),
                    copy_reason: None,
                    rx_frames: 7,
                    ring_drops: 1,
                    chunks: 8192,
                },
            ],
        };
        let text = serde_json::to_string(&q).unwrap();
        assert_eq!(
            text,
            r#"{"iface":"lan0","attach":"generic","tx_queue":0,"queues":[{"queue":0,"mode":"copy","copy_reason":"generic XDP","rx_frames":5,"ring_drops":0,"chunks":8192},{"queue":1,"mode":"zerocopy","rx_frames":7,"ring_drops":1,"chunks":8192}]}"#
        );
        assert_eq!(serde_json::from_str::<XdpIfaceJson>(&text).unwrap(), q);
    }

    #[test]
    fn requests_have_the_documented_spelling() {
        let cases = [
            (Request::ShowQueues, r#"{"cmd":"show-queues"}"#),
            (Request::ShowStates, r#"{"cmd":"show-states"}"#),
            (Request::ShowRules, r#"{"cmd":"show-rules"}"#),
            (Request::ShowInfo, r#"{"cmd":"show-info"}"#),
            (Request::ShowHealth, r#"{"cmd":"show-health"}"#),
            (
                Request::Reload {
                    file: Some("/etc/sluice/pf.conf".into()),
                    strict: false,
                },
                r#"{"cmd":"reload","file":"/etc/sluice/pf.conf"}"#,
            ),
            (Request::Stop, r#"{"cmd":"stop"}"#),
        ];
        for (req, text) in cases {
            assert_eq!(serde_json::to_string(&req).unwrap(), text);
            assert_eq!(serde_json::from_str::<Request>(text).unwrap(), req);
        }
        // `file` may be left out.
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"cmd":"reload"}"#).unwrap(),
            Request::Reload {
                file: None,
                strict: false
            }
        );
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"cmd":"reload","strict":true}"#).unwrap(),
            Request::Reload {
                file: None,
                strict: true
            }
        );
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"format-disk"}"#).is_err());
    }

    #[test]
    fn replies_are_tagged_by_kind() {
        let e = Reply::Error {
            message: "no".into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"kind":"error","message":"no"}"#
        );
        assert_eq!(
            serde_json::to_string(&Reply::Stopping).unwrap(),
            r#"{"kind":"stopping"}"#
        );
        let r = Reply::Rules(RulesReply {
            rules: vec![RuleJson {
                number: 0,
                line: 3,
                text: Some("pass all".into()),
                evaluations: 1,
                matches: 1,
                packets: 1,
                bytes: 40,
                state_creations: 1,
                states: 1,
                mss_clamped: 0,
            }],
        });
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.starts_with(r#"{"kind":"rules","rules":[{"number":0,"line":3,"#));
        assert_eq!(serde_json::from_str::<Reply>(&s).unwrap(), r);
    }

    /// The schema in docs/control.md is the schema: every JSON example there
    /// parses as a reply and prints back with exactly the same fields.
    #[test]
    fn documented_examples_are_the_schema() {
        let doc = include_str!("../../../docs/control.md");
        let mut kinds = Vec::new();
        let mut rest = doc;
        // Bounded by the number of code blocks in the file.
        while let Some(start) = rest.find("```json\n") {
            let body = &rest[start + 8..];
            let end = body.find("```").expect("unterminated block");
            let text = &body[..end];
            let reply: Reply = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{e} in documented example:\n{text}"));
            let doc_value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_value(&reply).unwrap(), doc_value, "{text}");
            kinds.push(doc_value["kind"].as_str().unwrap().to_string());
            rest = &body[end..];
        }
        assert_eq!(
            kinds,
            ["queues", "states", "rules", "info", "health", "reloaded"]
        );
    }
}
