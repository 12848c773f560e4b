//! The health families (docs/control.md, "health"): per shaped direction,
//! the verdict as a state set, how loaded the link was, the latency added
//! under load by sluice and beyond it (a histogram since the start, any
//! window's quantiles by `rate()`), and the modem's queue episodes. Base
//! units, `iface` and `direction` as labels.

use super::{histogram, secs, Out};
use crate::proto::{HealthJson, HealthReply};
use sluice_time::Histogram;

/// Every verdict a direction can have: the state set's members.
const VERDICTS: [&str; 3] = ["not-enough-traffic", "in-control", "not-in-control"];

/// A family: its name, its help and its value for one direction.
type Family<T> = (&'static str, &'static str, fn(&HealthJson) -> T);

/// `added`: each direction's latency since the start, sluice's and
/// beyond, in `h`'s order.
pub(super) fn health_families(o: &mut Out, h: &HealthReply, added: &[[Histogram; 2]]) {
    if h.directions.is_empty() {
        return;
    }
    let labels = |d: &HealthJson| {
        [
            ("iface", d.iface.clone()),
            ("direction", d.direction.clone()),
        ]
    };
    let name = "sluice_health_verdict";
    o.family(
        name,
        "gauge",
        "Whether the shaper is in control of its link: 1 for the verdict it has, 0 for the others.",
    );
    for d in &h.directions {
        let [i, dir] = labels(d);
        for v in VERDICTS {
            let l = [(i.0, i.1.as_str()), (dir.0, dir.1.as_str()), ("verdict", v)];
            o.sample(name, &l, u8::from(d.verdict == v));
        }
    }
    let gauges: [Family<Option<f64>>; 3] = [
        (
            "sluice_health_loaded_ratio",
            "Share of the verdict's window (the last 20 s) the link was loaded.",
            |d| Some(d.loaded_ns as f64 / d.evidence_ns.max(1) as f64),
        ),
        (
            "sluice_health_suggested_rate_bytes_per_second",
            "Not in control: the rate to configure (the link's delivery rate x 0.95).",
            |d| d.suggested_bps.map(super::bytes_per_second),
        ),
        (
            "sluice_health_added_latency_mean_seconds",
            "Mean latency added under load over the last minute, sluice's and beyond (the grade's basis).",
            |d| d.added_ns.map(secs),
        ),
    ];
    for (name, help, f) in gauges {
        o.family(name, "gauge", help);
        for d in &h.directions {
            if let Some(v) = f(d) {
                let [i, dir] = labels(d);
                o.sample(name, &[(i.0, &i.1), (dir.0, &dir.1)], v);
            }
        }
    }
    latency_families(o, h, added);
    episode_families(o, h);
}

/// Latency added under load, by sluice (its queue) or beyond it (the
/// link's), one sample per loaded control tick.
fn latency_families(o: &mut Out, h: &HealthReply, added: &[[Histogram; 2]]) {
    let name = "sluice_health_added_latency_seconds";
    o.family(
        name,
        "histogram",
        "Latency added under load, by sluice or beyond it: one sample per loaded 100 ms tick since the start.",
    );
    for (d, [own, beyond]) in h.directions.iter().zip(added) {
        for (at, w) in [("sluice", own), ("beyond", beyond)] {
            let l = [
                ("iface", d.iface.as_str()),
                ("direction", &d.direction),
                ("where", at),
            ];
            histogram(o, name, &l, w);
        }
    }
}

/// The modem's queue grown under load: episodes and their time.
fn episode_families(o: &mut Out, h: &HealthReply) {
    let counters: [Family<f64>; 2] = [
        (
            "sluice_health_modem_queue_episodes_total",
            "Episodes of the queue beyond sluice grown under load.",
            |d| d.episodes.count as f64,
        ),
        (
            "sluice_health_modem_queue_seconds_total",
            "Time the queue beyond sluice stood grown under load.",
            |d| secs(d.episodes.total_ns),
        ),
    ];
    for (name, help, f) in counters {
        o.family(name, "counter", help);
        for d in &h.directions {
            let l = [("iface", d.iface.as_str()), ("direction", &d.direction)];
            o.sample(name, &l, f(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{LatencyJson, LatencyWindowsJson};

    fn ms(n: u64) -> Option<u64> {
        Some(n * 1_000_000)
    }

    /// The exposition of a fixed reply, pinned line by line.
    #[test]
    fn health_families_golden() {
        let up = HealthJson {
            iface: "wan0".into(),
            direction: "upload".into(),
            verdict: "not-in-control".into(),
            suggested_bps: Some(9_490_000),
            loaded_ns: 15_000_000_000,
            evidence_ns: 20_000_000_000,
            sluice: LatencyWindowsJson {
                minute: LatencyJson {
                    p50_ns: ms(2),
                    p99_ns: ms(5),
                    mean_ns: ms(2),
                    samples: 150,
                },
                ..Default::default()
            },
            beyond: LatencyWindowsJson {
                minute: LatencyJson {
                    p50_ns: ms(40),
                    p99_ns: ms(80),
                    mean_ns: ms(45),
                    samples: 150,
                },
                ..Default::default()
            },
            added_ns: ms(47),
            episodes: crate::proto::EpisodesJson {
                count: 2,
                total_ns: 12_500_000_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let down = HealthJson {
            iface: "lan0".into(),
            direction: "download".into(),
            verdict: "not-enough-traffic".into(),
            evidence_ns: 20_000_000_000,
            ..Default::default()
        };
        let mut own = Histogram::new();
        let mut beyond = Histogram::new();
        for ms in [1, 2, 2, 2, 5] {
            own.record(sluice_time::Duration::from_millis(ms));
        }
        for ms in [30, 40, 40, 80] {
            beyond.record(sluice_time::Duration::from_millis(ms));
        }
        let mut o = Out::default();
        health_families(
            &mut o,
            &HealthReply {
                directions: vec![up, down],
            },
            &[[own, beyond], Default::default()],
        );
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics/health_golden.txt");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &o.text).expect("write the golden file");
        }
        assert_eq!(o.text, std::fs::read_to_string(&path).unwrap_or_default());
    }

    #[test]
    fn no_shaped_direction_no_families() {
        let mut o = Out::default();
        health_families(&mut o, &HealthReply::default(), &[]);
        assert_eq!(o.text, "");
    }
}
