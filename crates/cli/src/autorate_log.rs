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
use sluice_engine::delay_signal::SampleTrace;
use sluice_engine::Engine;
use sluice_time::{Duration, Instant};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub const FILE: &str = "autorate.csv";
pub const HEADER: &str =
    "time_unix_s,iface,delay_ms,flows,newest_age_ms,achieved_bps,old_bps,new_bps,reason,dry_run,signal,hold_ms";

/// One CSV line (no newline) for decision `d` on `iface`, which happened
/// `ago_ns` before the wall-clock time `wall_s`. `signal` says where the
/// delay came from: `tcp` (the traffic), `probe` (autorate's pings), or
/// nothing without a reading; `hold_ms` how long an upload's cut kept the
/// shaper silent (0 for any other decision).
pub fn line(iface: &str, d: &Decision, wall_s: f64, ago_ns: u64) -> String {
    let ms = |ns: Option<u64>| ns.map_or(String::new(), |n| format!("{:.3}", n as f64 / 1e6));
    format!(
        "{:.3},{},{},{},{},{},{},{},{},{},{},{:.3}",
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
        d.hold.as_nanos() as f64 / 1e6,
    )
}

/// `--autorate-trace`'s file of delay samples, beside the decisions.
pub const SAMPLES_FILE: &str = "autorate-samples.csv";
pub const SAMPLES_HEADER: &str =
    "time_unix_s,iface,kind,flow,far,rtt_ms,own_ms,own_floor_ms,base_ms,delay_ms,in_ms,out_ms";

/// One CSV line (no newline) for delay sample `t` taken on `iface`
/// `ago_ns` before the wall-clock time `wall_s`: the round trip, sluice's
/// own wait it was corrected by (and the least of it, the base's
/// correction), the destination's base, what is left
/// (delay), the way in's part of it (empty when not read) and the way
/// out's. `kind` is `data` or `ack` (completed by a pure ACK).
pub fn sample_line(iface: &str, t: &SampleTrace, wall_s: f64, ago_ns: u64) -> String {
    let ms = |d: Duration| format!("{:.3}", d.as_nanos() as f64 / 1e6);
    format!(
        "{:.4},{},{},{:016x},{},{},{},{},{},{},{},{}",
        wall_s - ago_ns as f64 / 1e9,
        iface,
        if t.ack { "ack" } else { "data" },
        t.flow,
        t.far,
        ms(t.rtt),
        ms(t.own.wait),
        ms(t.own.floor),
        ms(t.base),
        ms(t.delay),
        t.inbound.map_or(String::new(), ms),
        ms(t.out),
    )
}

/// Opens `dir/file` for appending (and the directory), the header
/// written when it is empty; a failure is one warning and `None`.
fn open_in(dir: &Path, file: &str, header: &str) -> Option<std::fs::File> {
    let path = dir.join(file);
    let open = || -> std::io::Result<std::fs::File> {
        std::fs::create_dir_all(dir)?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        if f.metadata()?.len() == 0 {
            writeln!(f, "{header}")?;
        }
        Ok(f)
    };
    open()
        .map_err(|e| {
            crate::run::log(
                crate::run::Level::Warn,
                format_args!("autorate log {}: {e}", path.display()),
            )
        })
        .ok()
}

/// Opens `dir/autorate-samples.csv` before privileges are dropped
/// (`--autorate-trace`).
pub fn open_samples(dir: &Path) -> Option<std::fs::File> {
    open_in(dir, SAMPLES_FILE, SAMPLES_HEADER)
}

/// Opens `dir/autorate.csv` (and the directory) now: called before the
/// daemon drops its privileges when the configuration has autorate.
pub fn open_early(dir: &Path) -> Option<std::fs::File> {
    open_in(dir, FILE, HEADER)
}

/// Tells the engine where the wall clock is (for autorate's `reconfig`
/// schedules, which are the wall clock's): its monotonic now against Unix
/// time now. A clock before 1970 is no clock: the schedule stays off.
pub fn set_wall_clock(e: &mut Engine) {
    let mono = sluice_io::now();
    if let Ok(unix) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        let unix = Duration(u64::try_from(unix.as_nanos()).unwrap_or(u64::MAX));
        e.set_wall_clock(mono, unix);
    }
}

/// Starts the collector (after privileges are dropped: it is a thread):
/// decisions go to `dir/autorate.csv` — `files[0]` if it was opened, else
/// opened at the first decision (a reload that brings autorate) — and,
/// for rate changes, to the log at info level; with `--autorate-trace`,
/// the delay samples to `files[1]`.
pub fn spawn(
    dir: PathBuf,
    files: [Option<std::fs::File>; 2],
    engine: Arc<Mutex<Engine>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let path = dir.join(FILE);
    let [mut file, mut samples] = files;
    let mut failed = false;
    std::thread::spawn(move || {
        let mut ticks = 0u32;
        let mut lost_seen = 0;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(200));
            ticks += 1;
            // The last collection happens after the stop, so nothing decided
            // before it is lost.
            let stopping = stop.load(Ordering::SeqCst);
            if !ticks.is_multiple_of(5) && !stopping {
                continue;
            }
            let (got, (traced, lost)) = {
                let Ok(mut e) = engine.lock() else { return };
                // Kept in step as the clock is adjusted (NTP).
                set_wall_clock(&mut e);
                let got: Vec<(String, Decision)> =
                    std::iter::from_fn(|| e.poll_autorate()).collect();
                let traced = if samples.is_some() {
                    e.poll_signal_trace()
                } else {
                    (Vec::new(), 0)
                };
                (got, traced)
            };
            let mono: Instant = sluice_io::now();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            if let Some(f) = samples.as_mut() {
                if lost > lost_seen {
                    crate::run::log(
                        crate::run::Level::Warn,
                        format_args!(
                            "autorate trace: {} samples dropped for want of room",
                            lost - lost_seen
                        ),
                    );
                    lost_seen = lost;
                }
                let mut text = String::new();
                for (iface, t) in &traced {
                    text.push_str(&sample_line(
                        iface,
                        t,
                        wall,
                        mono.saturating_since(t.at).as_nanos(),
                    ));
                    text.push('\n');
                }
                if let Err(e) = f.write_all(text.as_bytes()) {
                    crate::run::log(
                        crate::run::Level::Warn,
                        format_args!("autorate samples: {e}"),
                    );
                    samples = None;
                }
            }
            if got.is_empty() {
                if stopping {
                    return;
                }
                continue;
            }
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
            hold: Duration::from_micros(18_500),
            dry_run: false,
        };
        let l = line("wan0", &d, 1_700_000_000.5, 250_000_000);
        assert_eq!(
            l,
            "1700000000.250,wan0,23.500,4,12.000,19000000,20000000,15000000,delay,0,tcp,18.500"
        );
        assert_eq!(l.split(',').count(), HEADER.split(',').count());
        let none = Decision {
            delay: None,
            newest_age: None,
            reason: Reason::Unsure,
            hold: Duration::ZERO,
            dry_run: true,
            ..d
        };
        assert!(line("lan0", &none, 10.0, 0)
            .ends_with(",,4,,19000000,20000000,15000000,unsure,1,,0.000"));
        let probed = Decision { probe: true, ..d };
        assert!(line("wan0", &probed, 10.0, 0).ends_with(",delay,0,probe,18.500"));
    }

    #[test]
    fn a_sample_is_one_csv_line_in_header_order() {
        use sluice_engine::delay_signal::Own;
        let t = SampleTrace {
            at: Instant(5_000_000_000),
            far: "192.0.2.7".parse().unwrap(),
            flow: 0xab,
            ack: false,
            rtt: Duration::from_micros(23_470),
            own: Own {
                wait: Duration::from_micros(1_612),
                floor: Duration::from_micros(21),
            },
            base: Duration::from_micros(20_101),
            delay: Duration::from_micros(1_757),
            inbound: Some(Duration::from_micros(1_102)),
            out: Duration::from_micros(655),
        };
        let l = sample_line("wan0", &t, 1_700_000_000.5, 250_000_000);
        assert_eq!(
            l,
            "1700000000.2500,wan0,data,00000000000000ab,192.0.2.7,23.470,1.612,0.021,20.101,1.757,1.102,0.655"
        );
        assert_eq!(l.split(',').count(), SAMPLES_HEADER.split(',').count());
        let ack = SampleTrace {
            ack: true,
            inbound: None,
            ..t
        };
        assert!(sample_line("wan0", &ack, 10.0, 0).contains(",ack,"));
        assert!(sample_line("wan0", &ack, 10.0, 0).ends_with(",1.757,,0.655"));
    }
}
