//! `show health`: the engine's health reports, one per shaped direction,
//! mapped to the protocol's units.

use crate::proto::{EpisodesJson, HealthJson, HealthReply, LatencyJson, LatencyWindowsJson};
use sluice_engine::health::{held_back, ByWindow, HealthReport, Latency, Verdict, EVIDENCE};
use sluice_engine::Engine;
use sluice_time::Instant;

/// Every shaped interface's report as of `now`; the one named `wan`
/// carries the upload.
pub fn health_from(e: &Engine, wan: &str, now: Instant) -> HealthReply {
    reply_of(&health_reports(e), wan, now)
}

/// Each shaped interface's name and engine report, as the engine has them
/// now (copied under its lock).
pub fn health_reports(e: &Engine) -> Vec<(String, HealthReport)> {
    (0..e.iface_count())
        .filter_map(|i| Some((e.iface_name(i)?.to_string(), e.health(i)?)))
        .collect()
}

/// `show health`'s reply of `reports`; the one named `wan` is the upload.
pub fn reply_of(reports: &[(String, HealthReport)], wan: &str, now: Instant) -> HealthReply {
    let directions = reports
        .iter()
        .map(|(name, r)| {
            let mut j = health_json(name, direction(name, wan), r, now);
            let by = reports
                .iter()
                .find(|(other, o)| other != name && held_back(r, o));
            if let Some((other, _)) = by {
                j.text = format!(
                    "{}: held back by the {} ({other}), not in control — fix that first",
                    j.text,
                    direction(other, wan)
                );
                j.held_back_by = Some(other.clone());
            }
            j
        })
        .collect();
    HealthReply { directions }
}

/// What the protocol calls the direction leaving by `iface`.
pub fn direction(iface: &str, wan: &str) -> &'static str {
    if iface == wan {
        "upload"
    } else {
        "download"
    }
}

fn health_json(iface: &str, direction: &str, r: &HealthReport, now: Instant) -> HealthJson {
    let (verdict, suggested) = match r.verdict {
        Verdict::NotEnoughTraffic => ("not-enough-traffic", None),
        Verdict::InControl => ("in-control", None),
        Verdict::NotInControl { suggested } => ("not-in-control", suggested),
    };
    let ep = &r.episodes;
    HealthJson {
        iface: iface.to_string(),
        direction: direction.into(),
        verdict: verdict.into(),
        suggested_bps: suggested.map(|s| s.as_bps()),
        held_back_by: None,
        text: r.verdict.to_string(),
        since_ns: now.saturating_since(r.since).as_nanos(),
        loaded: r.loaded,
        output_bps: r.output.as_bps(),
        rate_bps: r.rate.as_bps(),
        loaded_ns: r.loaded_recent.as_nanos(),
        evidence_ns: sluice_time::Duration::from_secs(EVIDENCE as u64).as_nanos(),
        sluice: windows(&r.sluice),
        beyond: windows(&r.beyond),
        episodes: EpisodesJson {
            count: ep.count,
            total_ns: ep.total.as_nanos(),
            longest_ns: ep.longest.as_nanos(),
            current_ns: ep.current_since.map(|s| now.saturating_since(s).as_nanos()),
        },
        grade: r.grade.map(str::to_string),
        added_ns: r.added.map(|d| d.as_nanos()),
    }
}

fn windows(w: &ByWindow) -> LatencyWindowsJson {
    LatencyWindowsJson {
        minute: latency(&w.minute),
        hour: latency(&w.hour),
        day: latency(&w.day),
    }
}

fn latency(l: &Latency) -> LatencyJson {
    LatencyJson {
        p50_ns: l.p50.map(|d| d.as_nanos()),
        p99_ns: l.p99.map(|d| d.as_nanos()),
        mean_ns: l.mean.map(|d| d.as_nanos()),
        samples: l.samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::Options;
    use sluice_time::{Duration, Rate};

    /// A shaped WAN side and an unshaped LAN side: one direction, the
    /// upload, idle, with the rate its ticks read.
    #[test]
    fn each_shaped_interface_is_one_direction() {
        let text = "altq on wan0 priq bandwidth 1Mb queue q\nqueue q priq(default)\n";
        let cfg = sluice_conf::check("t.conf", text, &[]).unwrap().config;
        let mut e = Engine::new(&cfg, Options::bridge("lan0", "wan0", [3; 16])).unwrap();
        let mut now = Instant(0);
        for _ in 0..3 {
            now += Duration::from_millis(100);
            e.handle_timeout(now);
        }
        let r = health_from(&e, "wan0", now + Duration::from_secs(1));
        assert_eq!(r.directions.len(), 1);
        let d = &r.directions[0];
        assert_eq!((d.iface.as_str(), d.direction.as_str()), ("wan0", "upload"));
        assert_eq!(d.verdict, "not-enough-traffic");
        assert_eq!(d.text, "not enough traffic to say");
        assert_eq!(d.rate_bps, 1_000_000);
        assert_eq!(d.evidence_ns, 20_000_000_000);
        assert!(!d.loaded);
        assert_eq!(d.sluice.minute.samples, 0);
        assert_eq!(d.grade, None);
        // Read as the LAN side's name, the same interface is the download.
        let r = health_from(&e, "lan0", now);
        assert_eq!(r.directions[0].direction, "download");
    }

    /// A download with traffic but no verdict behind an upload not in
    /// control says so; the upload, and a download behind an upload in
    /// control, do not.
    #[test]
    fn a_download_behind_an_upload_not_in_control_is_held_back() {
        let up = HealthReport {
            verdict: Verdict::NotInControl {
                suggested: Some(Rate::kbps(238)),
            },
            rate: Rate::kbps(300),
            output_recent: Rate::kbps(290),
            ..HealthReport::default()
        };
        let down = HealthReport {
            rate: Rate::kbps(1200),
            output_recent: Rate::kbps(480),
            ..HealthReport::default()
        };
        let reports = [("lan0".to_string(), down.clone()), ("wan0".to_string(), up)];
        let r = reply_of(&reports, "wan0", Instant(0));
        let (d, u) = (&r.directions[0], &r.directions[1]);
        assert_eq!(d.held_back_by.as_deref(), Some("wan0"));
        assert_eq!(
            d.text,
            "not enough traffic to say: held back by the upload (wan0), not in control — fix that first"
        );
        assert_eq!(u.held_back_by, None);
        assert!(u.text.starts_with("not in control"), "{}", u.text);

        let calm = HealthReport {
            verdict: Verdict::InControl,
            rate: Rate::kbps(300),
            ..HealthReport::default()
        };
        let reports = [("lan0".to_string(), down), ("wan0".to_string(), calm)];
        let r = reply_of(&reports, "wan0", Instant(0));
        assert_eq!(r.directions[0].held_back_by, None);
        assert_eq!(r.directions[0].text, "not enough traffic to say");
    }
}
