//! The lab's scenarios: the classic bufferbloat experiments, each with the
//! link it models and the shaper configuration it ships with.
//!
//! # Principles
//! - A scenario is data ([`Scenario`]): the runner, the analysis and the
//!   report know nothing about a particular one, so adding one is adding a
//!   constructor here and its configuration under `examples/`.
//! - Defaults model the articles the scenarios come from (DESIGN.md §6):
//!   `ack_priority`'s download has a fixed 64 KB socket buffer, because the
//!   classic collapse needs a window that cannot grow to cover an ACK delay
//!   of seconds; its upload is autotuned and its modem's FIFO counts bytes,
//!   so that the upload's data fills it as in the article (measured:
//!   docs/notebook/2026-11-24-seeds-collapse.md).
//! - Hosts run with ECN off (`net.ipv4.tcp_ecn=0`): the articles' hosts did
//!   not negotiate it; `--ecn on` is the experiment with it.

use crate::model::{Dir, FifoKind, FlowSpec, IrttSpec, Link, PhaseSpec, Scenario};

const KBIT: u64 = 1_000;
const MBIT: u64 = 1_000_000;

fn phase(name: &str, secs: f64) -> PhaseSpec {
    PhaseSpec {
        name: name.into(),
        secs,
    }
}

fn flow(dir: Dir, streams: u32, from: usize, to: usize) -> FlowSpec {
    FlowSpec {
        dir,
        streams,
        from,
        to,
        window: None,
        host: 0,
    }
}

/// `streams` TCP streams each way, through the loaded phase (index 1).
fn both_ways(streams: u32) -> Vec<FlowSpec> {
    vec![flow(Dir::Up, streams, 1, 1), flow(Dir::Down, streams, 1, 1)]
}

fn link(down_bps: u64, up_bps: u64, buffer_pkts: u32) -> Link {
    Link {
        down_bps,
        up_bps,
        rtt_ms: 20.0,
        buffer_pkts,
        fifo: FifoKind::Packets,
        overhead_bytes: 0,
        atm: false,
        overhead_name: "none".into(),
        trace: None,
        drop_icmp: false,
        loss: None,
    }
}

/// What every scenario shares: `idle_s` idle, the `loaded` phases, `idle_s`
/// idle again (so latency under load has an idle baseline on both sides);
/// ping every 100 ms, no irtt, CUBIC. Scenarios override the rest.
fn scenario(name: &str, about: &str, link: Link, idle_s: f64, loaded: &[(&str, f64)]) -> Scenario {
    let mut phases = vec![phase("idle", idle_s)];
    phases.extend(loaded.iter().map(|&(n, secs)| phase(n, secs)));
    phases.push(phase("idle again", idle_s));
    Scenario {
        name: name.into(),
        about: about.into(),
        link,
        phases,
        flows: Vec::new(),
        ping_interval_ms: 100,
        ping_host: 0,
        hosts: 1,
        irtt: None,
        cc: "cubic".into(),
        ecn: false,
        sack: true,
        timestamps: true,
        attack: None,
        lying: Default::default(),
        shaper_example: String::new(),
    }
}

/// A G.711-like stream (20 ms, 172 B) through the whole run (phases 0 to 2).
const G711_IRTT: IrttSpec = IrttSpec {
    interval_ms: 20,
    payload_bytes: 172,
    from: 0,
    to: 2,
    host: 0,
};

/// DSL 512/128 with PPPoE over ATM; the PRIQ empty-ACK configuration.
pub fn ack_priority() -> Scenario {
    let mut l = link(512 * KBIT, 128 * KBIT, 100);
    l.overhead_bytes = 40;
    l.atm = true;
    l.overhead_name = "pppoe-llcsnap".into();
    // Counted in bytes: in a packet-counted FIFO the download's ACKs (about
    // one per segment, 159 B on the ATM line) took ~54 of the 100 slots,
    // leaving ~44 upload frames queued ahead of them
    // (docs/notebook/2026-11-24-seeds-collapse.md).
    l.fifo = FifoKind::Bytes;
    // A 64 KB download window is starved by the ACK delay. An upload of
    // 64 KB (an 80 KB window on kernel 6.18, 64 KB on 6.1: ~55 or ~44
    // packets) leaves the FIFO part-empty; autotuned, it keeps the FIFO
    // full, as the article's upload did (measured:
    // docs/notebook/2026-11-24-seeds-collapse.md).
    let mut down = flow(Dir::Down, 1, 1, 2);
    down.window = Some(64 << 10);
    let up = flow(Dir::Up, 1, 2, 3);
    let loaded = [
        ("download", 30.0),
        ("download+upload", 30.0),
        ("upload", 30.0),
    ];
    Scenario {
        flows: vec![down, up],
        ping_interval_ms: 200,
        shaper_example: "examples/priq-ack.conf".into(),
        ..scenario(
            "ack_priority",
            "DSL 512k/128k: does a download survive a concurrent upload? (PRIQ, empty ACKs first)",
            l,
            30.0,
            &loaded,
        )
    }
}

/// Cable 5/1: ping during one saturating upload (HFSC, qlimit 9).
pub fn tcp_1up() -> Scenario {
    Scenario {
        flows: vec![flow(Dir::Up, 1, 1, 1)],
        shaper_example: "examples/hfsc-qlimit9.conf".into(),
        ..scenario(
            "tcp_1up",
            "cable 5M/1M: ping before, during and after one saturating TCP upload (HFSC qlimit 9)",
            link(5 * MBIT, MBIT, 200),
            20.0,
            &[("upload", 30.0)],
        )
    }
}

/// Cable 5/1: ping during one saturating download (FQ-CoDel and TCP control
/// on the LAN side).
pub fn tcp_1down() -> Scenario {
    Scenario {
        flows: vec![flow(Dir::Down, 1, 1, 1)],
        shaper_example: "examples/lab/tcp1down-paced.conf".into(),
        ..scenario(
            "tcp_1down",
            "cable 5M/1M: ping before, during and after one saturating TCP download (FQ-CoDel on int_if, ACK pacing and window clamp)",
            link(5 * MBIT, MBIT, 200),
            20.0,
            &[("download", 30.0)],
        )
    }
}

/// Realtime Response Under Load at 30/5: 4 TCP up, 4 down, ping and irtt.
pub fn rrul() -> Scenario {
    Scenario {
        flows: both_ways(4),
        irtt: Some(G711_IRTT),
        shaper_example: "examples/lab/rrul-paced.conf".into(),
        ..scenario(
            "rrul",
            "30M/5M: 4 TCP up + 4 TCP down + ping + irtt (FQ-CoDel pipes at 97 %, weighted queues, ACK pacing and window clamp)",
            link(30 * MBIT, 5 * MBIT, 1000),
            10.0,
            &[("rrul", 60.0)],
        )
    }
}

/// A G.711-like call during RRUL load at 25/2.
pub fn voip() -> Scenario {
    Scenario {
        flows: both_ways(4),
        ping_interval_ms: 200,
        irtt: Some(G711_IRTT),
        shaper_example: "examples/lab/voip-fqcodel.conf".into(),
        ..scenario(
            "voip",
            "25M/2M: a G.711-like irtt stream (20 ms, 172 B) during rrul load; delay, jitter, loss, MOS",
            link(25 * MBIT, 2 * MBIT, 1000),
            10.0,
            &[("call under load", 60.0)],
        )
    }
}

/// RRUL with 100 flows each way at 30/5.
pub fn rrul_heavy() -> Scenario {
    Scenario {
        flows: both_ways(100),
        shaper_example: "examples/lab/rrul-paced.conf".into(),
        ..scenario(
            "rrul_heavy",
            "30M/5M: 100 TCP up + 100 TCP down + ping (FQ-CoDel pipes at 97 %, ACK pacing and window clamp)",
            link(30 * MBIT, 5 * MBIT, 1000),
            10.0,
            &[("rrul heavy", 60.0)],
        )
    }
}

/// Two LAN hosts at 10/2 behind one bloated modem: host A (a laptop on a
/// call) runs one upload, one download, ping and a G.711-like irtt stream;
/// host B (a torrent client) joins with 32 uploads and 32 downloads.
/// Per-flow fairness gives A 2 of 66 flows (~3 %); host isolation (the
/// shipped configuration) should give it about half of each direction.
/// iperf3 clients that make up host B's 32 connections each way.
const B_CLIENTS: u32 = 8;

pub fn host_fair() -> Scenario {
    const A: usize = 0;
    const B: usize = 1;
    let on = |host: usize, dir: Dir, streams: u32, from: usize| FlowSpec {
        host,
        ..flow(dir, streams, from, 2)
    };
    let loaded = [("host A alone", 20.0), ("both hosts", 40.0)];
    // Host B as a torrent client: its 32 + 32 connections open at once.
    // iperf3 opens its streams one after another, each connect waiting
    // for the last, which behind a bloated FIFO took B 74 s; eight clients
    // of four streams each way open together.
    let mut flows = vec![on(A, Dir::Up, 1, 1), on(A, Dir::Down, 1, 1)];
    for _ in 0..B_CLIENTS {
        flows.push(on(B, Dir::Up, 32 / B_CLIENTS, 2));
        flows.push(on(B, Dir::Down, 32 / B_CLIENTS, 2));
    }
    Scenario {
        hosts: 2,
        flows,
        ping_host: A,
        irtt: Some(IrttSpec {
            to: 3,
            host: A,
            ..G711_IRTT
        }),
        shaper_example: "examples/lab/host-fair.conf".into(),
        ..scenario(
            "host_fair",
            "10M/2M, two LAN hosts: A (1 up + 1 down + ping + irtt) alone, then with B (32 up + 32 down); per-host shares (host isolation)",
            // A cable modem's FIFO: 0.3 s down, 1.5 s up when full.
            link(10 * MBIT, 2 * MBIT, 256),
            10.0,
            &loaded,
        )
    }
}

/// Every scenario, in the order `sluice lab list` shows them.
pub fn all() -> Vec<Scenario> {
    vec![
        tcp_1up(),
        ack_priority(),
        rrul(),
        voip(),
        rrul_heavy(),
        tcp_1down(),
        host_fair(),
    ]
}

/// The scenario called `name`.
pub fn by_name(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_and_probes_stay_inside_the_phases() {
        for s in all() {
            assert!(!s.phases.is_empty(), "{}", s.name);
            let n = s.phases.len();
            for f in &s.flows {
                assert!(f.from <= f.to && f.to < n, "{}: {:?}", s.name, f);
                assert!(
                    f.streams >= 1 && f.streams <= 128,
                    "iperf3 -P allows 1..128"
                );
            }
            if let Some(i) = &s.irtt {
                assert!(i.from <= i.to && i.to < n, "{}", s.name);
            }
            assert!(by_name(&s.name).is_some());
        }
    }

    #[test]
    fn ack_priority_has_the_five_phases_of_the_article() {
        let s = ack_priority();
        let names: Vec<_> = s.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "idle",
                "download",
                "download+upload",
                "upload",
                "idle again"
            ]
        );
        assert_eq!(s.load_in_phase(0), (false, false));
        assert_eq!(s.load_in_phase(2), (true, true));
        assert_eq!(s.load_in_phase(3), (false, true));
        let w = s.phase_windows();
        assert_eq!(w[2], (60.0, 90.0));
        assert_eq!(s.total_secs(), 150.0);
        // The article's physics: a fixed 64 KB download window, an upload
        // that may fill the modem's FIFO, no ECN.
        let window = |d: Dir| s.flows.iter().find(|f| f.dir == d).unwrap().window;
        assert_eq!(window(Dir::Down), Some(65_536));
        assert_eq!(window(Dir::Up), None);
        assert_eq!(s.link.fifo, FifoKind::Bytes);
        assert!(all()
            .iter()
            .filter(|s| s.name != "ack_priority")
            .all(|s| s.link.fifo == FifoKind::Packets));
        assert!(all().iter().all(|s| !s.ecn));
    }

    #[test]
    fn host_fair_is_a_laptop_on_a_call_next_to_a_torrent_client() {
        let s = host_fair();
        assert_eq!(s.hosts, 2);
        let names: Vec<_> = s.phases.iter().map(|p| (p.name.as_str(), p.secs)).collect();
        assert_eq!(
            names,
            [
                ("idle", 10.0),
                ("host A alone", 20.0),
                ("both hosts", 40.0),
                ("idle again", 10.0)
            ]
        );
        // Host A: one stream each way through both loaded phases, the ping
        // and the call; host B: 32 each way in `both hosts` only, from
        // eight clients of four streams.
        let of = |host: usize| -> Vec<(Dir, u32, usize, usize)> {
            s.flows
                .iter()
                .filter(|f| f.host == host)
                .map(|f| (f.dir, f.streams, f.from, f.to))
                .collect()
        };
        assert_eq!(of(0), [(Dir::Up, 1, 1, 2), (Dir::Down, 1, 1, 2)]);
        let b = of(1);
        assert_eq!(b.len(), 16);
        for d in [Dir::Up, Dir::Down] {
            let streams: u32 = b.iter().filter(|f| f.0 == d).map(|f| f.1).sum();
            assert_eq!(streams, 32);
        }
        assert!(b.iter().all(|f| (f.2, f.3) == (2, 2)));
        assert_eq!(s.ping_host, 0);
        let irtt = s.irtt.as_ref().unwrap();
        assert_eq!(
            (irtt.host, irtt.from, irtt.to, irtt.interval_ms),
            (0, 0, 3, 20)
        );
        assert_eq!(
            (s.link.down_bps, s.link.up_bps, s.link.buffer_pkts),
            (10 * MBIT, 2 * MBIT, 256)
        );
        // Every other scenario keeps its one host.
        for other in all().iter().filter(|o| o.name != "host_fair") {
            assert_eq!(other.hosts, 1, "{}", other.name);
            assert!(other.flows.iter().all(|f| f.host == 0));
        }
        for s in all() {
            assert_eq!(crate::runner::check_hosts(&s), Ok(()), "{}", s.name);
        }
    }
}
