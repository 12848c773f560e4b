//! `--metrics ADDR:PORT`: the Prometheus text exposition (format 0.0.4) of a
//! running daemon over a minimal HTTP/1.0 server (`GET /metrics`).
//!
//! # Principles
//!
//! - **Loopback unless told otherwise**: the counters tell who talks to whom
//!   how much; `sluice run` refuses a non-loopback address without
//!   `--metrics-public`.
//! - **Cheap for the data plane**: a scrape copies the same snapshots as
//!   `sluice show`, all under one engine lock (held only to copy), and
//!   formats outside.
//! - **Bounded**: each scrape is served on its own thread, at most
//!   [`MAX_CLIENTS`] at once (more are answered 503 and counted); a request
//!   head is read up to [`MAX_HEAD_BYTES`] within [`CLIENT_TIMEOUT`] of the
//!   accept, in total, and the answer written within as long again, so a
//!   slow client holds one thread for seconds, never the endpoint. A refused
//!   client is answered without waiting for it: the accept thread never
//!   blocks on one. Slots are not counted per client: on loopback every
//!   local user is 127.0.0.1, and a TCP peer's uid is not known, so any
//!   local user can keep the 8 busy (scrapes fail, counted as refused;
//!   the data plane only sees the bounded lock takers).
//! - Names follow Prometheus conventions: `_total` counters, base units
//!   (`_bytes`, `_seconds`), labels `iface`, `queue`, `reason`, `cause`,
//!   `action`.

use crate::proto::{IfaceCountersJson, InfoReply, QueueJson, QueuesReply, TcpControlReport};
use crate::{snapshot, DaemonState};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

mod autorate;
pub mod dashboard;
mod health;
mod serve;
use autorate::autorate_families;
use health::health_families;
pub use serve::{spawn_metrics, CLIENT_TIMEOUT, MAX_CLIENTS, MAX_HEAD_BYTES};

/// The exposition of a running daemon, from one copy of the engine taken
/// under one lock ([`snapshot::scrape`]).
pub fn render(state: &DaemonState) -> String {
    let s = snapshot::scrape(state);
    let mut o = Out {
        text: render_from(&s.queues, &s.info),
    };
    health_families(&mut o, &s.health);
    let name = "sluice_clients_refused_total";
    o.family(
        name,
        "counter",
        "Connections refused because the server was serving its maximum of clients.",
    );
    for (server, slots) in [
        ("control", &state.clients.control),
        ("metrics", &state.clients.metrics),
    ] {
        let v = slots.refused.load(Ordering::Relaxed);
        o.sample(name, &[("server", server)], v);
    }
    rtt_histograms(&mut o, &s.rtt);
    o.text
}

/// `le` bounds of the RTT histogram, seconds: a LAN's sub-millisecond
/// round trips to a bloated line's seconds.
const RTT_BOUNDS_S: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
];

/// Passive TCP RTT samples (sluice to an endpoint and back), by endpoint.
fn rtt_histograms(o: &mut Out, h: &[sluice_time::Histogram; 2]) {
    let name = "sluice_tcp_rtt_seconds";
    o.family(
        name,
        "histogram",
        "Passive TCP round-trip times from sluice to the connection's responder or initiator and back.",
    );
    for (endpoint, h) in [("responder", &h[0]), ("initiator", &h[1])] {
        let bucket = format!("{name}_bucket");
        for le in RTT_BOUNDS_S {
            let n = h.count_at_most(sluice_time::Duration((le * 1e9) as u64));
            o.sample(
                &bucket,
                &[("endpoint", endpoint), ("le", &le.to_string())],
                n,
            );
        }
        o.sample(
            &bucket,
            &[("endpoint", endpoint), ("le", "+Inf")],
            h.count(),
        );
        o.sample(
            &format!("{name}_sum"),
            &[("endpoint", endpoint)],
            h.sum().as_secs_f64(),
        );
        o.sample(
            &format!("{name}_count"),
            &[("endpoint", endpoint)],
            h.count(),
        );
    }
}

/// Exposition text, written family by family (`# HELP`, `# TYPE`, samples).
struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Label values escape backslash, double quote and newline (format 0.0.4).
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Pure formatter over the same snapshots `sluice show` uses.
pub fn render_from(q: &QueuesReply, info: &InfoReply) -> String {
    let mut o = Out {
        text: String::new(),
    };
    o.family(
        "sluice_info",
        "gauge",
        "Constant 1, labelled with the version and I/O method.",
    );
    o.sample(
        "sluice_info",
        &[("version", &info.version), ("io_method", &info.io_method)],
        1,
    );
    o.family(
        "sluice_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
    );
    o.sample("sluice_uptime_seconds", &[], secs(info.uptime_ns));

    queue_families(&mut o, q);
    iface_families(&mut o, info);
    autorate_families(&mut o, q);

    o.family("sluice_states", "gauge", "Resident states.");
    o.sample("sluice_states", &[], info.states);
    o.family(
        "sluice_state_limit",
        "gauge",
        "Maximum number of states (set limit states).",
    );
    o.sample("sluice_state_limit", &[], info.state_limit);
    o.family("sluice_state_inserts_total", "counter", "States created.");
    o.sample("sluice_state_inserts_total", &[], info.state_inserts);
    o.family(
        "sluice_state_removals_total",
        "counter",
        "States removed (expired or replaced).",
    );
    o.sample("sluice_state_removals_total", &[], info.state_removals);
    o.family(
        "sluice_state_limit_hits_total",
        "counter",
        "Packets blocked because the state table was full.",
    );
    o.sample("sluice_state_limit_hits_total", &[], info.state_limit_hits);

    o.family(
        "sluice_io",
        "untyped",
        "Counters of the packet I/O layer, by name.",
    );
    for (name, v) in &info.io {
        o.sample("sluice_io", &[("stat", name)], v);
    }
    memory_families(&mut o, info);
    o.text
}

/// Memory held by queued frames and its caps (docs/dataplane.md, "Memory").
fn memory_families(o: &mut Out, info: &InfoReply) {
    let m = &info.memory;
    for (name, kind, help, v) in [
        (
            "sluice_memory_held_bytes",
            "gauge",
            "Memory held by queued frames (buffer capacity plus per-frame overhead).",
            m.held_bytes,
        ),
        (
            "sluice_memory_peak_bytes",
            "gauge",
            "Highest memory held by queued frames since start.",
            m.peak_bytes,
        ),
        (
            "sluice_memory_limit_bytes",
            "gauge",
            "Cap on the memory queued frames may hold (--memory-limit).",
            m.limit_bytes,
        ),
        (
            "sluice_memory_limit_drops_total",
            "counter",
            "Frames refused because queued frames held the memory cap.",
            m.limit_drops,
        ),
        (
            "sluice_memory_right_sized_total",
            "counter",
            "Queued small frames copied out of a full-sized receive buffer.",
            m.right_sized,
        ),
    ] {
        o.family(name, kind, help);
        o.sample(name, &[], v);
    }
    if !m.queue_limits.is_empty() {
        let name = "sluice_queue_memory_limit_bytes";
        o.family(name, "gauge", "Memory limit of a queue (FQ-CoDel).");
        for q in &m.queue_limits {
            o.sample(
                name,
                &[("iface", &q.iface), ("queue", &q.queue)],
                q.limit_bytes,
            );
        }
    }
}

fn queue_families(o: &mut Out, q: &QueuesReply) {
    type Get = fn(&QueueJson) -> Option<f64>;
    let simple: [(&str, &str, &str, Get); 9] = [
        (
            "sluice_queue_packets_total",
            "counter",
            "Packets passed by the queue.",
            |c| Some(c.packets as f64),
        ),
        (
            "sluice_queue_bytes_total",
            "counter",
            "Bytes passed by the queue.",
            |c| Some(c.bytes as f64),
        ),
        (
            "sluice_queue_ecn_marks_total",
            "counter",
            "Packets marked CE instead of dropped.",
            |c| Some(c.ecn_marks as f64),
        ),
        (
            "sluice_queue_borrows_total",
            "counter",
            "Times the class borrowed from its parent (CBQ).",
            |c| Some(c.borrows as f64),
        ),
        (
            "sluice_queue_overlimits_total",
            "counter",
            "Times the class was held back by its rate.",
            |c| Some(c.overlimits as f64),
        ),
        (
            "sluice_queue_qlength",
            "gauge",
            "Packets in the queue now.",
            |c| Some(c.qlength as f64),
        ),
        (
            "sluice_queue_backlog_bytes",
            "gauge",
            "Bytes in the queue now.",
            |c| Some(c.backlog_bytes as f64),
        ),
        (
            "sluice_queue_qlimit",
            "gauge",
            "Queue limit in packets.",
            |c| c.qlimit.map(f64::from),
        ),
        (
            "sluice_queue_sojourn_max_seconds",
            "gauge",
            "Longest time a forwarded packet waited in the queue.",
            |c| c.sojourn_max_ns.map(secs),
        ),
    ];
    for (name, kind, help, get) in simple {
        o.family(name, kind, help);
        for i in &q.ifaces {
            for c in &i.queues {
                if let Some(v) = get(c) {
                    o.sample(name, &[("iface", &i.name), ("queue", &c.name)], v);
                }
            }
        }
    }
    for (name, help, bytes) in [
        (
            "sluice_queue_drops_total",
            "Packets the queue dropped, by reason.",
            false,
        ),
        (
            "sluice_queue_dropped_bytes_total",
            "Bytes the queue dropped, by reason.",
            true,
        ),
    ] {
        o.family(name, "counter", help);
        for i in &q.ifaces {
            for c in &i.queues {
                for d in &c.drops {
                    let v = if bytes { d.bytes } else { d.packets };
                    o.sample(
                        name,
                        &[
                            ("iface", &i.name),
                            ("queue", &c.name),
                            ("reason", &d.reason),
                        ],
                        v,
                    );
                }
            }
        }
    }
    for (name, help, bytes) in [
        (
            "sluice_queue_ingress_charged_total",
            "Ingress mode: packets the queue dropped that its shaper charged as if sent.",
            false,
        ),
        (
            "sluice_queue_ingress_charged_bytes_total",
            "Ingress mode: bytes (with link overhead) of dropped packets charged to the shaper as if sent.",
            true,
        ),
    ] {
        o.family(name, "counter", help);
        for i in &q.ifaces {
            for c in &i.queues {
                let v = if bytes {
                    c.ingress_charged_bytes
                } else {
                    c.ingress_charged_packets
                };
                if let Some(v) = v {
                    o.sample(name, &[("iface", &i.name), ("queue", &c.name)], v);
                }
            }
        }
    }
    tcp_families(o, q);
    let name = "sluice_queue_sojourn_seconds";
    o.family(
        name,
        "gauge",
        "Time forwarded packets waited in the queue, by quantile.",
    );
    for i in &q.ifaces {
        for c in &i.queues {
            for (qt, v) in [("0.5", c.sojourn_p50_ns), ("0.99", c.sojourn_p99_ns)] {
                if let Some(v) = v {
                    let l = [
                        ("iface", i.name.as_str()),
                        ("queue", &c.name),
                        ("quantile", qt),
                    ];
                    o.sample(name, &l, secs(v));
                }
            }
        }
    }
}

/// TCP control per queue (`ack-pacing`, `window-clamp`), for queues that
/// have it. ACKs by what happened to them: `passed` + `held` are the pure
/// ACKs seen, `paced` + `flushed` + `capped` the held ones released.
fn tcp_families(o: &mut Out, q: &QueuesReply) {
    let controlled = || {
        q.ifaces.iter().flat_map(|i| {
            i.queues
                .iter()
                .filter_map(move |c| Some((i.name.as_str(), c.name.as_str(), c.tcp?)))
        })
    };
    type Get = fn(&TcpControlReport) -> u64;
    /// A family's name, help, and its `action` labels with their counter.
    type ByAction = (&'static str, &'static str, &'static [(&'static str, Get)]);
    let by_action: [ByAction; 3] = [
        (
            "sluice_queue_tcp_acks_total",
            "TCP control: pure ACKs passed on arrival or held, and held ACKs released paced, flushed ahead of a segment that must pass, or capped.",
            &[
                ("passed", |t| t.acks_passed),
                ("held", |t| t.acks_held),
                ("paced", |t| t.acks_paced),
                ("flushed", |t| t.acks_flushed),
                ("capped", |t| t.acks_capped),
            ],
        ),
        (
            "sluice_queue_tcp_windows_total",
            "TCP control: segments whose advertised window was clamped, or could not be controlled and passed untouched.",
            &[
                ("clamped", |t| t.windows_clamped),
                ("untouched", |t| t.windows_untouched),
            ],
        ),
        (
            "sluice_queue_tcp_ignored_total",
            "TCP control: segments forwarded but ignored, as ACKs of data never sent or SYNs that answer nothing.",
            &[
                ("ack_unsent", |t| t.acks_unsent),
                ("syn", |t| t.syns_ignored),
            ],
        ),
    ];
    for (name, help, actions) in by_action {
        o.family(name, "counter", help);
        for (iface, queue, t) in controlled() {
            for (action, get) in actions {
                let l = [("iface", iface), ("queue", queue), ("action", action)];
                o.sample(name, &l, get(&t));
            }
        }
    }
    let gauges: [(&str, &str, Get); 3] = [
        (
            "sluice_queue_tcp_flows",
            "TCP control: connections under control now.",
            |t| t.flows,
        ),
        (
            "sluice_queue_tcp_acks_held",
            "TCP control: ACKs held now.",
            |t| t.held_now,
        ),
        (
            "sluice_queue_tcp_pace_bps",
            "TCP control: the pace now, bit/s (the queue's rate, less while a queue stood in sluice or before it).",
            |t| t.pace_bps,
        ),
    ];
    for (name, help, get) in gauges {
        o.family(name, "gauge", help);
        for (iface, queue, t) in controlled() {
            o.sample(name, &[("iface", iface), ("queue", queue)], get(&t));
        }
    }
}

fn iface_families(o: &mut Out, info: &InfoReply) {
    type Get = fn(&IfaceCountersJson) -> u64;
    let simple: [(&str, &str, Get); 10] = [
        ("sluice_iface_rx_packets_total", "Frames received.", |c| {
            c.rx_packets
        }),
        ("sluice_iface_rx_bytes_total", "Bytes received.", |c| {
            c.rx_bytes
        }),
        (
            "sluice_iface_tx_packets_total",
            "Frames transmitted.",
            |c| c.tx_packets,
        ),
        ("sluice_iface_tx_bytes_total", "Bytes transmitted.", |c| {
            c.tx_bytes
        }),
        (
            "sluice_iface_non_ip_total",
            "Non-IP frames forwarded (ARP, LLDP …).",
            |c| c.non_ip,
        ),
        (
            "sluice_iface_ecn_marked_total",
            "Frames sent with CE set by an AQM.",
            |c| c.ecn_marked,
        ),
        (
            "sluice_iface_mss_clamped_total",
            "SYNs received whose MSS option scrub (max-mss) lowered.",
            |c| c.mss_clamped,
        ),
        (
            "sluice_iface_mss_untouched_total",
            "SYNs under max-mss whose TCP options could not be walked (passed unmodified).",
            |c| c.mss_untouched,
        ),
        (
            "sluice_iface_probes_sent_total",
            "autorate's echo requests sent (sluice's own frames, not in tx_packets).",
            |c| c.probes_sent,
        ),
        (
            "sluice_iface_probe_replies_total",
            "Replies to autorate's probes taken here (not forwarded).",
            |c| c.probe_replies,
        ),
    ];
    for (name, help, get) in simple {
        o.family(name, "counter", help);
        for c in &info.counters {
            o.sample(name, &[("iface", &c.name)], get(c));
        }
    }
    let name = "sluice_iface_dropped_total";
    o.family(
        name,
        "counter",
        "Frames received and not forwarded, by cause (queue drops counted on the egress interface).",
    );
    for c in &info.counters {
        for (cause, v) in [
            ("malformed", c.malformed),
            ("blocked", c.blocked),
            ("state-limit", c.state_limit),
            ("bad-state", c.bad_state),
            ("no-route", c.no_route),
            ("queue", c.queue_drops),
            ("reload", c.reload_drops),
            ("memory-limit", c.memory_drops),
        ] {
            o.sample(name, &[("iface", &c.name), ("cause", cause)], v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_samples_are_a_prometheus_histogram() {
        let mut h = [sluice_time::Histogram::new(), sluice_time::Histogram::new()];
        for ms in [3u64, 12, 40, 40, 250] {
            h[0].record(sluice_time::Duration::from_millis(ms));
        }
        let mut o = Out {
            text: String::new(),
        };
        rtt_histograms(&mut o, &h);
        let t = o.text;
        assert!(
            t.contains("# TYPE sluice_tcp_rtt_seconds histogram\n"),
            "{t}"
        );
        let at = |le: &str| {
            let key =
                format!("sluice_tcp_rtt_seconds_bucket{{endpoint=\"responder\",le=\"{le}\"}} ");
            let line = t
                .lines()
                .find(|l| l.starts_with(&key))
                .unwrap_or_else(|| panic!("{key}\n{t}"));
            line[key.len()..].parse::<u64>().unwrap()
        };
        assert_eq!(at("0.002"), 0);
        assert_eq!(at("0.005"), 1);
        assert_eq!(at("0.02"), 2);
        assert_eq!(at("0.05"), 4);
        assert_eq!(at("0.5"), 5);
        assert_eq!(at("+Inf"), 5);
        assert!(
            t.contains("sluice_tcp_rtt_seconds_count{endpoint=\"responder\"} 5\n"),
            "{t}"
        );
        assert!(
            t.contains("sluice_tcp_rtt_seconds_sum{endpoint=\"responder\"} 0.345\n"),
            "{t}"
        );
        assert!(
            t.contains("sluice_tcp_rtt_seconds_count{endpoint=\"initiator\"} 0\n"),
            "{t}"
        );
    }

    /// One scrape copies the engine under one lock (it took three: the
    /// queues, the info and the RTT histograms each locked it), the
    /// health reports included.
    #[test]
    fn a_scrape_takes_the_engine_lock_once() {
        let d = crate::testing::example_daemon("one-lock");
        let before = crate::LOCKS_TAKEN.with(|n| n.get());
        let text = render(&d.state);
        let taken = crate::LOCKS_TAKEN.with(|n| n.get()) - before;
        assert_eq!(taken, 1, "engine locks per scrape");
        for family in [
            "sluice_queue_packets_total",
            "sluice_states",
            "sluice_tcp_rtt_seconds",
            "sluice_health_verdict",
        ] {
            assert!(text.contains(&format!("# TYPE {family} ")), "{family}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), r"x\ny");
    }

    /// Every counter of a queue with TCP control, under the queue's labels
    /// and its action; nothing for the queues without it.
    #[test]
    fn tcp_control_counters_per_queue() {
        let q = crate::snapshot::tests::tcp_controlled();
        let mut o = Out {
            text: String::new(),
        };
        queue_families(&mut o, &q);
        let tcp: Vec<&str> = o
            .text
            .lines()
            .filter(|l| l.starts_with("sluice_queue_tcp_"))
            .collect();
        assert_eq!(
            tcp,
            [
                r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="passed"} 3400"#,
                r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="held"} 900"#,
                r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="paced"} 880"#,
                r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="flushed"} 6"#,
                r#"sluice_queue_tcp_acks_total{iface="wan0",queue="bulk",action="capped"} 1"#,
                r#"sluice_queue_tcp_windows_total{iface="wan0",queue="bulk",action="clamped"} 4100"#,
                r#"sluice_queue_tcp_windows_total{iface="wan0",queue="bulk",action="untouched"} 2"#,
                r#"sluice_queue_tcp_ignored_total{iface="wan0",queue="bulk",action="ack_unsent"} 7"#,
                r#"sluice_queue_tcp_ignored_total{iface="wan0",queue="bulk",action="syn"} 5"#,
                r#"sluice_queue_tcp_flows{iface="wan0",queue="bulk"} 12"#,
                r#"sluice_queue_tcp_acks_held{iface="wan0",queue="bulk"} 14"#,
                r#"sluice_queue_tcp_pace_bps{iface="wan0",queue="bulk"} 4600000"#,
            ],
            "{}",
            o.text
        );
        for (name, kind) in [
            ("sluice_queue_tcp_acks_total", "counter"),
            ("sluice_queue_tcp_windows_total", "counter"),
            ("sluice_queue_tcp_ignored_total", "counter"),
            ("sluice_queue_tcp_flows", "gauge"),
            ("sluice_queue_tcp_acks_held", "gauge"),
            ("sluice_queue_tcp_pace_bps", "gauge"),
        ] {
            let t = format!("# TYPE {name} {kind}\n");
            assert_eq!(o.text.matches(&t).count(), 1, "{}", o.text);
        }
    }

    /// The autorate families of a 20 Mbit/s upload root with `autorate
    /// (min 5M, max 40M, OPTION)`, its rate set by hand to `rate`.
    fn autorate_metrics(option: &str, rate: Option<sluice_time::Rate>) -> Out {
        let text = format!(
            "queue up on wan0 bandwidth 20M autorate (min 5M, max 40M, {option})\n\
             queue bulk parent up bandwidth 100% default\n"
        );
        let cfg = sluice_conf::check("t.conf", &text, &[]).unwrap().config;
        let mut e = sluice_engine::Engine::new(
            &cfg,
            sluice_engine::Options::bridge("lan0", "wan0", [1; 16]),
        )
        .unwrap();
        if let Some(r) = rate {
            e.set_rate(1, r, sluice_time::Instant(1)).unwrap();
        }
        let q = crate::snapshot::queues_from(&e.report(), Some(&cfg));
        let mut o = Out {
            text: String::new(),
        };
        autorate_families(&mut o, &q);
        o
    }

    #[test]
    fn autorate_and_the_current_rate_are_exported() {
        let o = autorate_metrics("dry-run", Some(sluice_time::Rate::mbps(12)));
        for want in [
            r#"sluice_iface_rate_bps{iface="wan0"} 12000000"#,
            r#"sluice_autorate_rate_bps{iface="wan0"} 20000000"#,
            r#"sluice_autorate_min_bps{iface="wan0"} 5000000"#,
            r#"sluice_autorate_max_bps{iface="wan0"} 40000000"#,
            r#"sluice_autorate_dry_run{iface="wan0"} 1"#,
            r#"sluice_autorate_flows{iface="wan0"} 0"#,
            r#"sluice_autorate_samples_total{iface="wan0"} 0"#,
            r#"sluice_autorate_samples_unsound_total{iface="wan0"} 0"#,
            "# TYPE sluice_autorate_samples_unsound_total counter",
            r#"sluice_autorate_holds_total{iface="wan0"} 0"#,
            r#"sluice_autorate_held_seconds_total{iface="wan0"} 0"#,
            "# TYPE sluice_autorate_held_seconds_total counter",
            r#"sluice_autorate_decisions_total{iface="wan0",reason="delay"} 0"#,
            "# TYPE sluice_autorate_decisions_total counter",
        ] {
            assert!(o.text.lines().any(|l| l == want), "{want} in\n{}", o.text);
        }
        assert!(
            !o.text.contains("sluice_autorate_delay_seconds{"),
            "no signal, no sample"
        );
        assert!(!o.text.contains(r#"iface="lan0""#), "lan0 is not shaped");
        assert!(
            !o.text.contains("sluice_autorate_probe"),
            "no probe asked for"
        );
    }

    #[test]
    fn autorates_probe_is_exported_where_one_is_sent() {
        let o = autorate_metrics("probe 192.0.2.1", None);
        for want in [
            r#"sluice_autorate_probe_sent_total{iface="wan0",target="192.0.2.1"} 0"#,
            r#"sluice_autorate_probe_answered_total{iface="wan0",target="192.0.2.1"} 0"#,
            r#"sluice_autorate_probe_lost_total{iface="wan0",target="192.0.2.1"} 0"#,
            "# TYPE sluice_autorate_probe_rtt_seconds gauge",
        ] {
            assert!(o.text.lines().any(|l| l == want), "{want} in\n{}", o.text);
        }
        assert!(
            !o.text.contains("sluice_autorate_probe_rtt_seconds{"),
            "no reply yet"
        );
    }

    #[test]
    fn filtered_acks_are_a_drop_reason_of_the_queue() {
        let (e, cfg) = crate::snapshot::tests::ack_filtered();
        let q = crate::snapshot::queues_from(&e.report(), Some(&cfg));
        let mut o = Out {
            text: String::new(),
        };
        queue_families(&mut o, &q);
        let line = o
            .text
            .lines()
            .find(|l| l.starts_with(r#"sluice_queue_drops_total{iface="wan0",queue="up""#))
            .unwrap_or_else(|| panic!("{}", o.text));
        assert_eq!(
            line,
            r#"sluice_queue_drops_total{iface="wan0",queue="up",reason="ack-filter"} 8"#
        );
    }
}
