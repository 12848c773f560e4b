//! autorate's decision log: `autorate.csv` in the daemon's state
//! directory (docs/autorate.md).
//!
//! # Principles
//! - The engine keeps the decisions worth a line (the rate moved, or the
//!   reason changed; bounded, oldest dropped first) and this thread
//!   collects them once a second under the engine lock, then writes
//!   outside it: the packet loop never waits on the disk.
//! - One line per decision, appended; the header is written when the file
//!   is empty. Times are wall-clock (Unix seconds, ms precision),
//!   converted from the engine's monotonic clock at collection.
//! - A file that cannot be written is one warning, not a stopped shaper.

use sluice_engine::autorate::Decision;
use sluice_engine::Engine;
use sluice_time::Instant;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub const FILE: &str = "autorate.csv";
pub const HEADER: &str =
    "time_unix_s,iface,delay_ms,flows,newest_age_ms,achieved_bps,old_bps,new_bps,reason,dry_run,signal";

/// One CSV line (no newline) for decision `d` on `iface`, which happened
/// `ago_ns` before the wall-clock time `wall_s`. `signal` says where the
/// delay came from: `tcp` (the traffic), `probe` (autorate's pings), or
/// nothing without a reading.
pub fn line(iface: &str, d: &Decision, wall_s: f64, ago_ns: u64) -> String {
    let ms = |ns: Option<u64>| ns.map_or(String::new(), |n| format!("{:.3}", n as f64 / 1e6));
    format!(
        "{:.3},{},{},{},{},{},{},{},{},{},{}",
        wall_s - ago_ns as f64 / 1e9,
        iface,
        ms(d.delay.map(|x| x.as_nanos())),
        d.flows,
        ms(d.newest_age.map(|x| x.as_nanos())),
        d.achieved.as_bps(),
        d.old.as_bps(),
        d.new.as_bps(),
        d.reason.name(),
        u8::from(d.dry_run),
        match (d.delay, d.probe) {
            (None, _) => "",
            (Some(_), false) => "tcp",
            (Some(_), true) => "probe",
        },
    )
}

fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if f.metadata()?.len() == 0 {
        writeln!(f, "{HEADER}")?;
    }
    Ok(f)
}

/// Opens `dir/autorate.csv` (and the directory) now: called before the
/// daemon drops its privileges when the configuration has autorate.
pub fn open_early(dir: &Path) -> Option<std::fs::File> {
    let path = dir.join(FILE);
    std::fs::create_dir_all(dir)
        .and_then(|_| open(&path))
        .map_err(|e| {
            crate::run::log(
                crate::run::Level::Warn,
                format_args!("autorate log {}: {e}", path.display()),
            )
        })
        .ok()
}

/// Starts the collector (after privileges are dropped: it is a thread):
/// decisions go to `dir/autorate.csv` — `early` if it was opened, else
/// opened at the first decision (a reload that brings autorate) — and,
/// for rate changes, to the log at info level.
pub fn spawn(
    dir: PathBuf,
    early: Option<std::fs::File>,
    engine: Arc<Mutex<Engine>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let path = dir.join(FILE);
    let mut file = early;
    let mut failed = false;
    std::thread::spawn(move || {
        let mut ticks = 0u32;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(200));
            ticks += 1;
            // The last collection happens after the stop, so nothing decided
            // before it is lost.
            let stopping = stop.load(Ordering::SeqCst);
            if !ticks.is_multiple_of(5) && !stopping {
                continue;
            }
            let got: Vec<(String, Decision)> = {
                let Ok(mut e) = engine.lock() else { return };
                std::iter::from_fn(|| e.poll_autorate()).collect()
            };
            if got.is_empty() {
                if stopping {
                    return;
                }
                continue;
            }
            let mono: Instant = sluice_io::now();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let mut text = String::new();
            for (iface, d) in &got {
                if d.new != d.old {
                    crate::run::log(
                        crate::run::Level::Info,
                        format_args!(
                            "autorate {iface}: {} -> {} ({}, delay {:?}, {} flows){}",
                            d.old,
                            d.new,
                            d.reason.name(),
                            d.delay,
                            d.flows,
                            if d.dry_run {
                                " [dry-run: not applied]"
                            } else {
                                ""
                            }
                        ),
                    );
                }
                text.push_str(&line(
                    iface,
                    d,
                    wall,
                    mono.saturating_since(d.at).as_nanos(),
                ));
                text.push('\n');
            }
            if file.is_none() && !failed {
                file = open_early(&dir);
                failed = file.is_none();
            }
            if let Some(f) = file.as_mut() {
                if let Err(e) = f.write_all(text.as_bytes()) {
                    crate::run::log(
                        crate::run::Level::Warn,
                        format_args!("autorate log {}: {e}", path.display()),
                    );
                    file = None;
                    failed = true;
                }
            }
            if stopping {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::autorate::Reason;
    use sluice_time::{Duration, Rate};

    #[test]
    fn a_decision_is_one_csv_line_in_header_order() {
        let d = Decision {
            at: Instant(5_000_000_000),
            delay: Some(Duration::from_micros(23_500)),
            flows: 4,
            newest_age: Some(Duration::from_millis(12)),
            probe: false,
            achieved: Rate::mbps(19),
            old: Rate::mbps(20),
            new: Rate::mbps(15),
            reason: Reason::Delay,
            dry_run: false,
        };
        let l = line("wan0", &d, 1_700_000_000.5, 250_000_000);
        assert_eq!(
            l,
            "1700000000.250,wan0,23.500,4,12.000,19000000,20000000,15000000,delay,0,tcp"
        );
        assert_eq!(l.split(',').count(), HEADER.split(',').count());
        let none = Decision {
            delay: None,
            newest_age: None,
            reason: Reason::Unsure,
            dry_run: true,
            ..d
        };
        assert!(line("lan0", &none, 10.0, 0).ends_with(",,4,,19000000,20000000,15000000,unsure,1,"));
        let probed = Decision { probe: true, ..d };
        assert!(line("wan0", &probed, 10.0, 0).ends_with(",delay,0,probe"));
    }
}
