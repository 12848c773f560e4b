//! Copies of the engine's statistics in the protocol's shape. Each function
//! holds the engine lock only while it copies.

use crate::proto::*;
use crate::{lock, DaemonState};
use sluice_classify::StateView;
use sluice_conf::ir::{self, Direction};
use sluice_conf::{queue_options, sched_name};
use sluice_engine::{ClassReport, IfaceCounters, IfaceReport, MemoryReport};
use sluice_time::Instant;

mod health;
pub use health::{direction, health_from, health_reports, reply_of};

fn queue_json(iface: &IfaceReport, c: &ClassReport, conf: Option<&ir::IfaceQueueing>) -> QueueJson {
    let name = match &c.name {
        Some(n) => n.clone(),
        None if c.id.0 == 0 => format!("root_{}", iface.name),
        None => format!("class{}", c.id.0),
    };
    let options = conf
        .and_then(|q| q.queues.iter().find(|x| Some(&x.name) == c.name.as_ref()))
        .map(queue_options)
        .unwrap_or_default();
    QueueJson {
        id: c.id.0,
        name,
        parent: c.parent.clone(),
        options,
        bandwidth_bps: c.bandwidth.map(|r| r.as_bps()),
        priority: c.priority,
        qlimit: c.qlimit,
        packets: c.passed_packets,
        bytes: c.passed_bytes,
        dropped_packets: c.dropped_packets(),
        dropped_bytes: c.drops.iter().map(|d| d.2).sum(),
        drops: c
            .drops
            .iter()
            .map(|(r, p, b)| DropJson {
                reason: r.name().to_string(),
                packets: *p,
                bytes: *b,
            })
            .collect(),
        ecn_marks: c.ecn_marks,
        borrows: c.borrows,
        overlimits: c.overlimits,
        qlength: c.qlen,
        backlog_bytes: c.backlog_bytes,
        sojourn_p50_ns: c.sojourn_p50.map(|d| d.as_nanos()),
        sojourn_p99_ns: c.sojourn_p99.map(|d| d.as_nanos()),
        sojourn_max_ns: c.sojourn_max.map(|d| d.as_nanos()),
        sojourn_last_p50_ns: c.sojourn_last.quantile(0.5).map(|d| d.as_nanos()),
        sojourn_last_p99_ns: c.sojourn_last.quantile(0.99).map(|d| d.as_nanos()),
        ingress_charged_packets: c.ingress_charged.map(|x| x.0),
        ingress_charged_bytes: c.ingress_charged.map(|x| x.1),
        tcp: c.tcp,
    }
}

/// Queue drops by reason of an interface, summed over its leaves (classful
/// disciplines also count a child's drops in its parent).
fn leaf_drops(iface: &IfaceReport) -> Vec<DropJson> {
    let mut out: Vec<DropJson> = Vec::new();
    let is_parent = |name: &str| {
        iface
            .classes
            .iter()
            .any(|c| c.parent.as_deref() == Some(name))
    };
    // One pass over the classes of one tree: bounded by the config's queues.
    for c in &iface.classes {
        let leaf = match &c.name {
            Some(n) => !is_parent(n),
            // An unnamed root is a leaf only of a tree without named classes.
            None => iface.classes.iter().all(|x| x.name.is_none()),
        };
        if !leaf {
            continue;
        }
        for (r, p, b) in &c.drops {
            match out.iter_mut().find(|d| d.reason == r.name()) {
                Some(d) => {
                    d.packets += p;
                    d.bytes += b;
                }
                None => out.push(DropJson {
                    reason: r.name().to_string(),
                    packets: *p,
                    bytes: *b,
                }),
            }
        }
    }
    out
}

fn counters_json(iface: &IfaceReport) -> IfaceCountersJson {
    let c: &IfaceCounters = &iface.counters;
    IfaceCountersJson {
        name: iface.name.clone(),
        rx_packets: c.rx_frames,
        rx_bytes: c.rx_bytes,
        tx_packets: c.tx_frames,
        tx_bytes: c.tx_bytes,
        non_ip: c.non_ip,
        malformed: c.malformed,
        blocked: c.blocked,
        state_limit: c.state_limit,
        bad_state: c.bad_state,
        no_route: c.no_route,
        queue_drops: c.queue_drops,
        queue_drops_by_reason: leaf_drops(iface),
        reload_drops: c.reload_drops,
        ecn_marked: c.ecn_marked,
        memory_drops: c.memory_drops,
        mss_clamped: c.mss_clamped,
        mss_untouched: c.mss_untouched,
        probes_sent: c.probes_sent,
        probe_replies: c.probe_replies,
    }
}

pub fn queues(state: &DaemonState) -> QueuesReply {
    let (report, running) = {
        let e = lock(state);
        (e.report(), state.running.get())
    };
    queues_from(&report, Some(&running.config))
}

pub fn queues_from(report: &[IfaceReport], conf: Option<&ir::Config>) -> QueuesReply {
    let ifaces = report
        .iter()
        .map(|i| {
            let iq = conf.and_then(|c| c.interfaces.iter().find(|q| q.ifname == i.name));
            IfaceQueues {
                name: i.name.clone(),
                sched: i.sched.map(|k| sched_name(k).to_string()),
                bandwidth_bps: i.bandwidth.map(|r| r.as_bps()),
                queues: i.classes.iter().map(|c| queue_json(i, c, iq)).collect(),
                autorate: i.autorate.as_ref().map(|a| crate::proto::AutorateJson {
                    min_bps: a.min.as_bps(),
                    max_bps: a.max.as_bps(),
                    dry_run: a.dry_run,
                    rate_bps: a.rate.as_bps(),
                    delay_ns: a.delay.map(|d| d.as_nanos()),
                    flows: a.flows,
                    newest_age_ns: a.newest_age.map(|d| d.as_nanos()),
                    decisions: a
                        .decisions
                        .iter()
                        .map(|(r, n)| (r.to_string(), *n))
                        .collect(),
                    delay_from_probe: a.delay_from_probe,
                    samples: a.samples,
                    samples_unsound: a.samples_unsound,
                    holds: a.holds,
                    held_ns: a.held.as_nanos(),
                    probe: a.probe.map(|p| crate::proto::ProbeJson {
                        target: p.target.to_string(),
                        sent: p.stats.sent,
                        answered: p.stats.answered,
                        lost: p.stats.lost,
                        last_rtt_ns: p.stats.last_rtt.map(|d| d.as_nanos()),
                    }),
                    reconfig: a.reconfig.map(|r| r.to_string()),
                    reconfig_active: a.reconfig.is_some() && a.wall_clock,
                }),
            }
        })
        .collect();
    QueuesReply { ifaces }
}

fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        58 => "ipv6-icmp".into(),
        n => n.to_string(),
    }
}

/// A state copied out under the engine lock. Queue names become indices into
/// a short list, so the copy allocates nothing per state; the strings are
/// made after the lock is released (100k states: the lock is held for the
/// copy only, not for ~7 string allocations per state).
#[derive(Clone, Copy)]
struct RawState {
    proto: u8,
    src: (std::net::IpAddr, u16),
    dst: (std::net::IpAddr, u16),
    direction: Direction,
    proto_state: sluice_classify::ProtoState,
    queue: Option<usize>,
    queue_pri: Option<usize>,
    rule: u32,
    packets: [u64; 2],
    bytes: [u64; 2],
    created: Instant,
    expires: Instant,
    rtt: [sluice_classify::RttEstimate; 2],
    windows: Option<[sluice_classify::PeerWindow; 2]>,
}

/// Index of `name` in `names`, added if new. The list holds the queue names
/// of the config: a few dozen at most, so a linear search is cheapest.
fn intern<'a>(names: &mut Vec<&'a str>, name: Option<&'a str>) -> Option<usize> {
    let name = name?;
    Some(match names.iter().position(|n| *n == name) {
        Some(i) => i,
        None => {
            names.push(name);
            names.len() - 1
        }
    })
}

fn raw_state<'a>(s: &StateView<'a>, names: &mut Vec<&'a str>) -> RawState {
    RawState {
        proto: s.proto,
        src: s.src,
        dst: s.dst,
        direction: s.direction,
        proto_state: s.proto_state,
        queue: intern(names, s.queue),
        queue_pri: intern(names, s.queue_pri),
        rule: s.rule,
        packets: s.packets,
        bytes: s.bytes,
        created: s.created,
        expires: s.expires,
        rtt: s.rtt,
        windows: s.windows,
    }
}

fn rtt_json(e: &sluice_classify::RttEstimate) -> Option<RttJson> {
    (e.samples > 0).then(|| RttJson {
        last_ns: e.last.as_nanos(),
        min_ns: e.min.as_nanos(),
        smoothed_ns: e.smoothed.as_nanos(),
        samples: e.samples,
    })
}

fn state_json(s: &RawState, names: &[String], now: Instant, since: Instant) -> StateJson {
    let name = |i: Option<usize>| i.and_then(|i| names.get(i).cloned());
    StateJson {
        proto: proto_name(s.proto),
        src: s.src.0.to_string(),
        src_port: s.src.1,
        dst: s.dst.0.to_string(),
        dst_port: s.dst.1,
        direction: match s.direction {
            Direction::In => "in".into(),
            Direction::Out => "out".into(),
        },
        state: s.proto_state.to_string(),
        queue: name(s.queue),
        queue_pri: name(s.queue_pri),
        rule: (s.created >= since).then_some(s.rule),
        packets: s.packets,
        bytes: s.bytes,
        age_ns: now.saturating_since(s.created).as_nanos(),
        expires_in_ns: s.expires.saturating_since(now).as_nanos(),
        rtt_to_dst: rtt_json(&s.rtt[0]),
        rtt_to_src: rtt_json(&s.rtt[1]),
        windows: s.windows.map(|w| w.map(|p| window_json(&p))),
    }
}

fn window_json(p: &sluice_classify::PeerWindow) -> WindowJson {
    WindowJson {
        seqlo: p.seqlo,
        seqhi: p.seqhi,
        max_win: p.max_win,
        wscale: p.wscale,
    }
}

pub fn states(state: &DaemonState) -> StatesReply {
    let now = (state.now)();
    let (st, raw, names, since) = {
        let e = lock(state);
        // Under the engine lock: the rules that index the states copied.
        let since = state.running.get().since;
        let c = e.classifier();
        let mut names: Vec<&str> = Vec::new();
        let mut raw = Vec::with_capacity(c.stats().states.min(STATES_SHOWN_CAP));
        for s in c.states().take(STATES_SHOWN_CAP) {
            raw.push(raw_state(&s, &mut names));
        }
        let names: Vec<String> = names.into_iter().map(str::to_string).collect();
        (c.stats(), raw, names, since)
    };
    StatesReply {
        total: st.states as u64,
        limit: st.state_limit as u64,
        states: raw
            .iter()
            .map(|s| state_json(s, &names, now, since))
            .collect(),
    }
}

/// Canonical text of one rule (the printer writes a config of just it).
fn rule_text(r: &ir::Rule) -> String {
    let cfg = ir::Config {
        interfaces: Vec::new(),
        rules: vec![r.clone()],
        tables: Vec::new(),
        options: ir::Options::default(),
    };
    sluice_conf::print(&cfg).trim_end().to_string()
}

pub fn rules(state: &DaemonState) -> RulesReply {
    let (stats, per_rule_states, running) = {
        let e = lock(state);
        // Under the engine lock: the configuration these counters are of.
        let running = state.running.get();
        let stats = e.classifier().rule_stats().to_vec();
        let mut n = vec![0u64; stats.len()];
        // Bounded by the state limit.
        for s in e
            .classifier()
            .states()
            .filter(|s| s.created >= running.since)
        {
            if let Some(c) = n.get_mut(s.rule as usize) {
                *c += 1;
            }
        }
        (stats, n, running)
    };
    let rules = stats
        .iter()
        .enumerate()
        .map(|(i, s)| RuleJson {
            number: i as u32,
            line: s.line,
            text: running.config.rules.get(i).map(rule_text),
            evaluations: s.evaluations,
            matches: s.matches,
            packets: s.packets,
            bytes: s.bytes,
            state_creations: s.states_created,
            states: per_rule_states.get(i).copied().unwrap_or(0),
            mss_clamped: s.mss_clamped,
        })
        .collect();
    RulesReply { rules }
}

/// An interface's name, configured networks, learned addresses and refusals.
type IfaceAddrs = (
    String,
    Vec<ir::IpNet>,
    Vec<sluice_classify::LearnedAddr>,
    u64,
);

/// The learned addresses of every interface, as of `now`. An entry past its
/// TTL that housekeeping has not removed yet (an idle engine) is not shown:
/// it no longer counts.
fn learned_json(learned: Vec<IfaceAddrs>, now: Instant) -> Vec<LearnedAddrsJson> {
    let ttl = sluice_classify::LEARNED_ADDR_TTL;
    learned
        .into_iter()
        .map(|(iface, configured, addrs, refused)| LearnedAddrsJson {
            iface,
            refused,
            configured: configured
                .iter()
                .map(|n| format!("{}/{}", n.addr, n.prefix))
                .collect(),
            addrs: addrs
                .iter()
                .filter(|a| now.saturating_since(a.seen) < ttl)
                .map(|a| LearnedAddrJson {
                    addr: a.addr.to_string(),
                    age_ns: now.saturating_since(a.since).as_nanos(),
                    idle_ns: now.saturating_since(a.seen).as_nanos(),
                })
                .collect(),
        })
        .collect()
}

pub fn info(state: &DaemonState) -> InfoReply {
    let copy = InfoCopy::take(&lock(state));
    info_from(state, copy, &state.running.get())
}

/// `show health`: each shaped direction's report, copied under the lock.
pub fn health(state: &DaemonState) -> HealthReply {
    let e = lock(state);
    health_from(&e, &state.ifaces[1], (state.now)())
}

/// What `info` and a metrics scrape copy of the engine under its lock.
struct InfoCopy {
    report: Vec<IfaceReport>,
    st: sluice_classify::ClassifierStats,
    mem: MemoryReport,
    learned: Vec<IfaceAddrs>,
}

impl InfoCopy {
    fn take(e: &sluice_engine::Engine) -> InfoCopy {
        // At most MAX_LEARNED_ADDRS per interface are copied under the lock.
        let learned: Vec<_> = (0..e.iface_count())
            .map(|i| {
                let (addrs, refused) = e.learned_addrs(i);
                let name = e.iface_name(i).unwrap_or("").to_string();
                (name, e.configured_addrs(i), addrs, refused)
            })
            .collect();
        InfoCopy {
            report: e.report(),
            st: e.classifier().stats(),
            mem: e.memory(),
            learned,
        }
    }
}

/// A metrics scrape: `show queues`, `show info`, `show health` and the
/// histograms behind them, from one copy taken under one engine lock.
pub struct Scrape {
    pub queues: QueuesReply,
    pub info: InfoReply,
    pub health: HealthReply,
    pub rtt: [sluice_time::Histogram; 2],
    /// Each queue's sojourn since its creation, in `queues`' order.
    pub sojourn: Vec<QueueHistogram>,
    /// Each shaped direction's latency added under load since the start:
    /// sluice's and beyond it, in `health`'s order.
    pub added: Vec<[sluice_time::Histogram; 2]>,
}

/// One queue's histogram, named as the metrics label it.
pub struct QueueHistogram {
    pub iface: String,
    pub queue: String,
    pub histogram: sluice_time::Histogram,
}

pub fn scrape(state: &DaemonState) -> Scrape {
    let (copy, rtt, health, running) = {
        let e = lock(state);
        let rtt = e.classifier().rtt_histograms().clone();
        (
            InfoCopy::take(&e),
            rtt,
            health_reports(&e),
            state.running.get(),
        )
    };
    let queues = queues_from(&copy.report, Some(&running.config));
    let sojourn = sojourn_histograms(&copy.report, &queues);
    let added = health
        .iter()
        .map(|(_, r)| [r.sluice_since_start.clone(), r.beyond_since_start.clone()])
        .collect();
    Scrape {
        queues,
        health: reply_of(&health, &state.ifaces[1], (state.now)()),
        info: info_from(state, copy, &running),
        rtt,
        sojourn,
        added,
    }
}

/// The report's histograms under the names `queues` gave its classes.
fn sojourn_histograms(report: &[IfaceReport], queues: &QueuesReply) -> Vec<QueueHistogram> {
    let mut v = Vec::new();
    for (i, qi) in report.iter().zip(&queues.ifaces) {
        for (c, q) in i.classes.iter().zip(&qi.queues) {
            v.push(QueueHistogram {
                iface: qi.name.clone(),
                queue: q.name.clone(),
                histogram: c.sojourn.clone(),
            });
        }
    }
    v
}

fn info_from(state: &DaemonState, c: InfoCopy, running: &crate::Loaded) -> InfoReply {
    let now = (state.now)();
    let InfoCopy {
        report,
        st,
        mem,
        learned,
    } = c;
    let config = running.path.display().to_string();
    InfoReply {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        uptime_ns: u64::try_from(state.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        ifaces: state.ifaces.to_vec(),
        io_method: state.io_method.clone(),
        config,
        counters: report.iter().map(counters_json).collect(),
        states: st.states as u64,
        state_limit: st.state_limit as u64,
        state_inserts: st.inserts,
        state_removals: st.removals,
        state_limit_hits: st.state_limit_hits,
        state_evictions: st.states_evicted,
        state_rule_limit_hits: st.rule_limit_hits,
        io: (state.io_stats)(),
        clients: [
            ("control", &state.clients.control),
            ("metrics", &state.clients.metrics),
        ]
        .into_iter()
        .map(|(server, slots)| ClientsJson {
            server: server.into(),
            serving: slots.busy() as u64,
            cap: slots.cap() as u64,
            refused: slots.refused.load(std::sync::atomic::Ordering::Relaxed),
        })
        .collect(),
        memory: memory_json(&mem, &running.config),
        learned_addrs: learned_json(learned, now),
        xdp: (state.xdp_queues)(),
    }
}

fn memory_json(m: &MemoryReport, cfg: &ir::Config) -> MemoryJson {
    let mut queue_limits = Vec::new();
    for iq in &cfg.interfaces {
        for q in &iq.queues {
            if let Some(limit_bytes) = sluice_engine::build::queue_memory_limit(q) {
                queue_limits.push(QueueMemoryLimit {
                    iface: iq.ifname.clone(),
                    queue: q.name.clone(),
                    limit_bytes,
                });
            }
        }
    }
    MemoryJson {
        held_bytes: m.held_bytes,
        peak_bytes: m.peak_bytes,
        limit_bytes: m.limit_bytes,
        limit_drops: m.limit_drops,
        frames: m.frames,
        right_sized: m.right_sized,
        queue_limits,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sluice_engine::{Engine, Options};
    use std::net::Ipv4Addr;

    const HFSC: &str = "\
altq on wan0 hfsc bandwidth 1Mb queue { parent, bulk }
queue parent bandwidth 50% { voip, interactive }
  queue voip bandwidth 50% qlimit 5 hfsc(realtime (160Kb 20 64Kb))
  queue interactive bandwidth 50% qlimit 5 hfsc(red)
queue bulk bandwidth 50% qlimit 5 hfsc(default ecn upperlimit 95%)
pass out on wan0 proto udp to port 5060 queue voip
pass out on wan0 proto udp to port 53 queue bulk
";

    fn engine() -> (Engine, ir::Config) {
        engine_of(HFSC)
    }

    fn engine_of(text: &str) -> (Engine, ir::Config) {
        let cfg = sluice_conf::check("t.conf", text, &[]).unwrap().config;
        let mut e = Engine::new(&cfg, Options::bridge("lan0", "wan0", [3; 16])).unwrap();
        for (i, port) in (0..40u16).map(|i| (i, if i % 2 == 0 { 5060 } else { 53 })) {
            let f = sluice_wire::build::udp_v4(
                Ipv4Addr::new(10, 0, 0, 2),
                Ipv4Addr::new(192, 0, 2, 1),
                6000 + i,
                port,
                500,
            );
            e.handle_rx(Instant(1), 0, f);
        }
        (e, cfg)
    }

    #[test]
    fn queue_options_as_pf_conf_spells_them() {
        let (e, cfg) = engine();
        let q = queues_from(&e.report(), Some(&cfg));
        let wan = &q.ifaces[1];
        let opts = |n: &str| {
            wan.queues
                .iter()
                .find(|q| q.name == n)
                .unwrap()
                .options
                .clone()
        };
        // As `sluice check -v` prints them (conf's printer): d with its unit.
        assert_eq!(opts("voip"), ["realtime (160Kb 20ms 64Kb)"]);
        assert_eq!(opts("interactive"), ["red"]);
        assert_eq!(opts("bulk"), ["default", "red", "ecn", "upperlimit 950Kb"]);
        assert!(opts("parent").is_empty());
        // Without the config, the counters are still there.
        let bare = queues_from(&e.report(), None);
        assert!(bare.ifaces[1].queues.iter().all(|q| q.options.is_empty()));
        assert_eq!(bare.ifaces[1].queues.len(), wan.queues.len());
    }

    /// `show` and `sluice check -v` spell a queue's options alike: the
    /// options of each queue are those the printer writes in its
    /// parentheses, in the printer's order, not the file's.
    #[test]
    fn queue_options_are_the_printers() {
        let (e, cfg) = engine_of(
            "altq on wan0 cbq bandwidth 1Mb queue { a, b }\n\
             queue a bandwidth 50% cbq(ecn red borrow)\n\
             queue b bandwidth 50% cbq(default)\n",
        );
        let printed = sluice_conf::print(&cfg);
        let q = queues_from(&e.report(), Some(&cfg));
        let a = q.ifaces[1].queues.iter().find(|q| q.name == "a").unwrap();
        assert_eq!(a.options, ["borrow", "red", "ecn"]);
        for q in q.ifaces[1].queues.iter().filter(|q| q.id != 0) {
            let line = printed
                .lines()
                .find(|l| l.starts_with(&format!("queue {} on wan0", q.name)))
                .unwrap_or_else(|| panic!("{printed}"));
            assert!(
                line.contains(&format!("cbq({})", q.options.join(" "))),
                "{line} vs {:?}",
                q.options
            );
        }
    }

    #[test]
    fn drops_by_reason_count_each_drop_once() {
        let (e, _) = engine();
        let rep = e.report();
        let c = counters_json(&rep[1]);
        // 20 datagrams into each of two 5-packet leaves.
        assert_eq!(c.queue_drops, 30);
        let sum: u64 = c.queue_drops_by_reason.iter().map(|d| d.packets).sum();
        assert_eq!(sum, c.queue_drops, "{:?}", c.queue_drops_by_reason);
        assert_eq!(c.queue_drops_by_reason[0].reason, "queue-full");
        assert_eq!(c.queue_drops_by_reason[0].bytes, 30 * 542);
        assert!(counters_json(&rep[0]).queue_drops_by_reason.is_empty());
    }

    /// An upload queue with `ack-filter`, fed the ACKs of one download
    /// (each newer than the last), as `show queues` sees it.
    pub(crate) fn ack_filtered() -> (Engine, ir::Config) {
        let cfg = sluice_conf::check(
            "t.conf",
            "altq on wan0 priq bandwidth 64Kb queue { up }\nqueue up priq(default ack-filter)\n",
            &[],
        )
        .unwrap()
        .config;
        let mut e = Engine::new(&cfg, Options::bridge("lan0", "wan0", [3; 16])).unwrap();
        for n in 0..10u32 {
            let f = sluice_sched::testing::TcpFrame::ack(
                Ipv4Addr::new(10, 0, 0, 2),
                Ipv4Addr::new(192, 0, 2, 1),
                40_000,
                443,
                1000 * n,
            );
            e.handle_rx(Instant(1), 0, f.build());
        }
        (e, cfg)
    }

    /// Distinct values, so a counter copied into the wrong field shows.
    pub(crate) const TCP: TcpControlReport = TcpControlReport {
        flows: 12,
        acks_passed: 3400,
        acks_held: 900,
        held_now: 14,
        acks_paced: 880,
        acks_flushed: 6,
        acks_capped: 1,
        windows_clamped: 4100,
        windows_untouched: 2,
        acks_unsent: 7,
        syns_ignored: 5,
        pace_bps: 4_600_000,
        path_queue: Some(sluice_time::Duration::from_millis(3)),
    };

    /// The HFSC tree's reply with TCP control on `bulk` only, its report
    /// set by hand (the engine's own counting is the engine's tests).
    pub(crate) fn tcp_controlled() -> QueuesReply {
        let (e, cfg) = engine();
        let mut rep = e.report();
        let bulk = rep[1]
            .classes
            .iter_mut()
            .find(|c| c.name.as_deref() == Some("bulk"))
            .unwrap();
        bulk.tcp = Some(TCP);
        queues_from(&rep, Some(&cfg))
    }

    #[test]
    fn tcp_control_counters_reach_their_queue_only() {
        let q = tcp_controlled();
        let wan = &q.ifaces[1];
        let bulk = wan.queues.iter().find(|q| q.name == "bulk").unwrap();
        assert_eq!(bulk.tcp, Some(TCP));
        let others: Vec<_> = q
            .ifaces
            .iter()
            .flat_map(|i| &i.queues)
            .filter(|q| q.name != "bulk")
            .collect();
        assert!(others.len() >= 4, "{others:?}");
        assert!(others.iter().all(|q| q.tcp.is_none()), "{others:?}");
        // In JSON, a nested object beside the other counters; `null` where
        // there is no TCP control, as every absent field of a queue.
        let v = serde_json::to_value(bulk).unwrap();
        assert_eq!(v["tcp"]["held_now"], 14);
        assert_eq!(v["tcp"]["windows_untouched"], 2);
        assert_eq!(v["tcp"]["path_queue_ns"], 3_000_000);
        assert!(serde_json::to_value(others[0]).unwrap()["tcp"].is_null());
    }

    #[test]
    fn filtered_acks_show_as_their_own_drop_reason() {
        let (e, cfg) = ack_filtered();
        let rep = e.report();
        let q = queues_from(&rep, Some(&cfg));
        let up = q.ifaces[1].queues.iter().find(|q| q.name == "up").unwrap();
        assert_eq!(up.options, ["default", "ack-filter"]);
        // Ten ACKs, none sent yet, conservative: the newest and one older
        // stay, eight went as redundant.
        assert_eq!(up.qlength, 2, "{up:?}");
        assert_eq!(up.drops.len(), 1, "{:?}", up.drops);
        assert_eq!(
            (up.drops[0].reason.as_str(), up.drops[0].packets),
            ("ack-filter", 8)
        );
        let c = counters_json(&rep[1]);
        assert_eq!(c.queue_drops, 8);
        assert_eq!(c.queue_drops_by_reason[0].reason, "ack-filter");
    }

    /// FAIRQ shows as the other disciplines do: its options as the printer
    /// spells them, each class's counters (40 datagrams of 40 connections
    /// queued at once, 20 per class, behind a 1-frame token bucket).
    #[test]
    fn fairq_queues_show_their_options_and_counters() {
        let (e, cfg) = engine_of(
            "altq on wan0 fairq bandwidth 1Mb queue { voip, rest }\n\
             queue voip priority 7 bandwidth 20% fairq(buckets 64)\n\
             queue rest priority 1 bandwidth 80% fairq(default buckets 100 hogs 100Kb)\n\
             pass out on wan0 proto udp to port 5060 no state queue voip\n",
        );
        let q = queues_from(&e.report(), Some(&cfg));
        let wan = &q.ifaces[1];
        assert_eq!(wan.sched.as_deref(), Some("fairq"));
        let find = |n: &str| wan.queues.iter().find(|q| q.name == n).unwrap();
        assert_eq!(find("voip").options, ["buckets 64"]);
        assert_eq!(
            find("rest").options,
            ["default", "buckets 128", "hogs 100Kb"]
        );
        assert_eq!(find("voip").qlength + find("voip").packets, 20);
        assert_eq!(find("rest").qlength + find("rest").packets, 20);
    }
}
