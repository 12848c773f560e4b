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
//! - Bounded: each file rotates at [`ROTATE_BYTES`] to `NAME.1`, so the
//!   two take at most 16 MiB of the tmpfs the unit charges to its memory
//!   (security review M3). Every decision is kept (no sampling): the
//!   lab's timelines and `--autorate-trace` read them all.
//! - The files are the daemon's alone: no symlink followed, mode 0600, in
//!   a directory only root or the daemon's user can write ([`check_dir`]).

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

/// Size at which a log file is rotated: `autorate.csv` becomes
/// `autorate.csv.1` (the one before is removed) and a new file starts.
/// The state directory is a tmpfs under the unit (`/run/sluice`), charged
/// to the service's `MemoryMax=256M`: two files of 8 MiB stay a small
/// part of it. A controller that moves its rate on every tick writes
/// ~95 B × 20 a second, ~7 MB an hour; a link loaded a few hours a day
/// keeps days of decisions.
pub const ROTATE_BYTES: u64 = 8 << 20;

/// An append-only CSV file capped at `cap` bytes, rotated to `NAME.1`.
///
/// # Principles
/// - Opened with `O_NOFOLLOW` (a symlink planted at its name is refused,
///   its target untouched) and created mode 0600 (forced to 0600 if it
///   was not): the decisions and samples name hosts and their traffic.
/// - Lines are never split: a line that would take the file past the cap
///   starts the next one, so each file is whole CSV under its header.
/// - At most two files, each ≤ `cap` (a single line longer than the cap,
///   which no decision is, is written whole into a fresh file).
pub struct Log {
    path: PathBuf,
    header: &'static str,
    cap: u64,
    file: std::fs::File,
    len: u64,
}

impl Log {
    /// Opens (creating) `dir/name` for appending; the header is written
    /// when the file is empty.
    pub fn open(dir: &Path, name: &str, header: &'static str, cap: u64) -> std::io::Result<Log> {
        let path = dir.join(name);
        let (file, len) = open_file(&path, header)?;
        Ok(Log {
            path,
            header,
            cap,
            file,
            len,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `text` (whole lines), rotating whenever the next line
    /// would not fit under the cap.
    pub fn append(&mut self, text: &str) -> std::io::Result<()> {
        let mut rest = text.as_bytes();
        let fresh = self.header.len() as u64 + 1;
        while !rest.is_empty() {
            let room = usize::try_from(self.cap.saturating_sub(self.len)).unwrap_or(usize::MAX);
            // All of it, or the whole lines that fit.
            let fit = match rest.get(..room) {
                None => rest.len(),
                Some(head) => head.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1),
            };
            let fit = match fit {
                0 if self.len > fresh => {
                    self.rotate()?;
                    continue;
                }
                // A line longer than the cap, in a fresh file: written whole.
                0 => rest
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(rest.len(), |i| i + 1),
                n => n,
            };
            self.file.write_all(&rest[..fit])?;
            self.len += fit as u64;
            rest = &rest[fit..];
        }
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, &old)?;
        let (file, len) = open_file(&self.path, self.header)?;
        (self.file, self.len) = (file, len);
        Ok(())
    }
}

/// `path` opened for appending, never through a symlink, mode 0600; the
/// header written if it is empty. Also the file's length.
fn open_file(path: &Path, header: &str) -> std::io::Result<(std::fs::File, u64)> {
    use rustix::fs::{Mode, OFlags};
    use std::os::unix::fs::PermissionsExt;
    // NONBLOCK: a FIFO planted there must not hang the daemon.
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::APPEND
        | OFlags::NOFOLLOW
        | OFlags::CLOEXEC
        | OFlags::NONBLOCK;
    let fd = rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)).map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            std::io::Error::other("is a symbolic link; refused (remove it)")
        } else {
            std::io::Error::from(e)
        }
    })?;
    let mut f = std::fs::File::from(fd);
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file; refused"));
    }
    if meta.permissions().mode() & 0o777 != 0o600 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let mut len = meta.len();
    if len == 0 {
        writeln!(f, "{header}")?;
        len = header.len() as u64 + 1;
    }
    Ok((f, len))
}

/// Makes sure `dir` is a directory only its owner can write, the owner
/// root, this process's user or `user` (`run --user`): created 0700 if
/// missing (then true); a symlink, or a directory others may write into
/// (where they could plant `autorate.csv`), is refused with what to do
/// instead.
pub fn check_dir(dir: &Path, user: Option<u32>) -> Result<bool, String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let hint = "use a directory only root (or run --user's user) can write, e.g. /var/lib/sluice";
    let what = |why: String| format!("{}: {why}; {hint}", dir.display());
    let mut made = false;
    let meta = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| what(format!("cannot create it: {e}")))?;
            made = true;
            std::fs::symlink_metadata(dir).map_err(|e| what(e.to_string()))?
        }
        r => r.map_err(|e| what(e.to_string()))?,
    };
    if meta.file_type().is_symlink() {
        return Err(what("is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Err(what("is not a directory".into()));
    }
    let euid = rustix::process::geteuid().as_raw();
    if ![0, euid].contains(&meta.uid()) && user != Some(meta.uid()) {
        return Err(what(format!("owned by uid {}, not root", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(what(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o7777
        )));
    }
    Ok(made)
}

/// Opens `dir/file` as a [`Log`] (the directory checked by the caller:
/// [`check_dir`]); a failure is one warning and `None`.
fn open_in(dir: &Path, file: &str, header: &'static str) -> Option<Log> {
    Log::open(dir, file, header, ROTATE_BYTES)
        .map_err(|e| {
            crate::log::log(
                crate::log::Level::Warn,
                format_args!("autorate log {}: {e}", dir.join(file).display()),
            )
        })
        .ok()
}

/// Opens `dir/autorate-samples.csv` before privileges are dropped
/// (`--autorate-trace`).
pub fn open_samples(dir: &Path) -> Option<Log> {
    open_in(dir, SAMPLES_FILE, SAMPLES_HEADER)
}

/// Opens `dir/autorate.csv` now: called before the daemon drops its
/// privileges when the configuration has autorate.
pub fn open_early(dir: &Path) -> Option<Log> {
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
/// the delay samples to `files[1]`. Health verdicts' changes go to the
/// log too (daemon::health_log).
pub fn spawn(
    dir: PathBuf,
    files: [Option<Log>; 2],
    engine: Arc<Mutex<Engine>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
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
            let (got, (traced, lost), health) = {
                let Ok(mut e) = engine.lock() else { return };
                // Kept in step as the clock is adjusted (NTP).
                set_wall_clock(&mut e);
                let got: Vec<(String, Decision)> =
                    std::iter::from_fn(|| e.poll_autorate()).collect();
                // Health verdicts change on the same engine's ticks: one
                // collector, one lock taken a second, for both.
                let health: Vec<_> = std::iter::from_fn(|| e.poll_health()).collect();
                let traced = if samples.is_some() {
                    e.poll_signal_trace()
                } else {
                    (Vec::new(), 0)
                };
                (got, traced, health)
            };
            super::health_log::log_changes(&health);
            let mono: Instant = sluice_io::now();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            if samples.is_some() && lost > lost_seen {
                crate::log::log(
                    crate::log::Level::Warn,
                    format_args!(
                        "autorate trace: {} samples dropped for want of room",
                        lost - lost_seen
                    ),
                );
                lost_seen = lost;
            }
            let text: String = traced
                .iter()
                .map(|(iface, t)| {
                    sample_line(iface, t, wall, mono.saturating_since(t.at).as_nanos()) + "\n"
                })
                .collect();
            append_or_close(&mut samples, &text);
            if !got.is_empty() {
                log_rate_changes(&got);
                if file.is_none() && !failed {
                    // After the drop: the directory is checked again as it is now.
                    file = check_dir(&dir, None)
                        .map_err(|e| {
                            crate::log::log(
                                crate::log::Level::Warn,
                                format_args!("autorate log not written: state directory {e}"),
                            )
                        })
                        .ok()
                        .and_then(|_| open_early(&dir));
                    failed = file.is_none();
                }
                failed |= !append_or_close(&mut file, &decisions_text(&got, wall, mono));
            }
            if stopping {
                return;
            }
        }
    })
}

/// The CSV lines of the decisions `got`, collected at `wall`/`mono`.
fn decisions_text(got: &[(String, Decision)], wall: f64, mono: Instant) -> String {
    got.iter()
        .map(|(iface, d)| line(iface, d, wall, mono.saturating_since(d.at).as_nanos()) + "\n")
        .collect()
}

/// Appends `text` to `log` if it is open; a failure is one warning and
/// closes it (false).
fn append_or_close(log: &mut Option<Log>, text: &str) -> bool {
    let Some(f) = log.as_mut() else { return true };
    if text.is_empty() {
        return true;
    }
    match f.append(text) {
        Ok(()) => true,
        Err(e) => {
            crate::log::log(
                crate::log::Level::Warn,
                format_args!("autorate log {}: {e}", f.path().display()),
            );
            *log = None;
            false
        }
    }
}

/// The decisions that moved a rate, at info level.
fn log_rate_changes(got: &[(String, Decision)]) {
    for (iface, d) in got.iter().filter(|(_, d)| d.new != d.old) {
        crate::log::log(
            crate::log::Level::Info,
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

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-arlog-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn decision(at: Instant, old: u64, new: u64) -> Decision {
        Decision {
            at,
            delay: Some(Duration::from_micros(23_500)),
            flows: 4,
            newest_age: Some(Duration::from_millis(12)),
            probe: false,
            achieved: Rate::mbps(19),
            old: Rate::mbps(old),
            new: Rate::mbps(new),
            reason: Reason::Delay,
            hold: Duration::ZERO,
            dry_run: false,
        }
    }

    #[test]
    fn hours_of_a_decision_every_tick_stay_under_the_cap_and_rotate() {
        let dir = tmpdir("rotate");
        let cap = 256 << 10;
        let mut log = Some(Log::open(&dir, FILE, HEADER, cap).unwrap());
        let (cur, old) = (dir.join(FILE), dir.join(format!("{FILE}.1")));
        // Three simulated hours, one collection a second of 20 decisions
        // (a 50 ms tick) for each direction, every one moving the rate.
        let mut rotations = 0;
        let mut last = 0;
        for s in 0..3 * 3600u64 {
            let mono = Instant(s * 1_000_000_000);
            let got: Vec<(String, Decision)> = (0..40u64)
                .map(|i| {
                    let iface = if i % 2 == 0 { "wan0" } else { "lan0" };
                    let at = Instant(mono.0.saturating_sub(i * 25_000_000));
                    (iface.to_string(), decision(at, 20 + i % 3, 19 + i % 5))
                })
                .collect();
            assert!(append_or_close(
                &mut log,
                &decisions_text(&got, 1.7e9 + s as f64, mono)
            ));
            let len = std::fs::metadata(&cur).unwrap().len();
            assert!(len <= cap, "{len} > {cap} after {s} s");
            if len < last {
                rotations += 1;
            }
            last = len;
        }
        assert!(rotations > 100, "rotated {rotations} times");
        let old_text = std::fs::read_to_string(&old).unwrap();
        assert!(old_text.len() as u64 <= cap);
        let cur_text = std::fs::read_to_string(&cur).unwrap();
        for t in [&old_text, &cur_text] {
            assert!(t.starts_with(&format!("{HEADER}\n")));
            assert!(t.ends_with('\n'));
            assert!(t
                .lines()
                .all(|l| l.split(',').count() == HEADER.split(',').count()));
        }
        // Only the one old file is kept.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lines_longer_than_the_cap_are_written_whole_one_file_each() {
        let dir = tmpdir("tiny");
        let mut log = Log::open(&dir, "t.csv", "h", 8).unwrap();
        log.append("0123456789\nabcdefghijkl\n").unwrap();
        log.append("x\n").unwrap();
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
        assert_eq!(read("t.csv.1"), "h\nabcdefghijkl\n");
        assert_eq!(read("t.csv"), "h\nx\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_symlink_at_the_log_s_name_is_refused_and_its_target_untouched() {
        let dir = tmpdir("symlink");
        let target = dir.join("target");
        std::fs::write(&target, "precious\n").unwrap();
        std::os::unix::fs::symlink(&target, dir.join(FILE)).unwrap();
        let e = Log::open(&dir, FILE, HEADER, ROTATE_BYTES)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(open_early(&dir).is_none());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_log_is_mode_0600_under_umask_022() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmpdir("mode");
        let prev = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
        let log = open_early(&dir);
        rustix::process::umask(prev);
        assert!(log.is_some());
        let mode = std::fs::metadata(dir.join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // An old file that others could read is made private when reopened.
        let f = dir.join(SAMPLES_FILE);
        std::fs::write(&f, "").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(open_samples(&dir).is_some());
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_dir_others_could_write_or_a_symlink_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = tmpdir("dirs");
        let new = base.join("a/b");
        assert!(check_dir(&new, None).expect("created"));
        assert!(!check_dir(&new, None).expect("there"));
        let mode = std::fs::metadata(&new).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = check_dir(&open, None).unwrap_err();
        assert!(e.contains("writable by group or others (mode 1777)"), "{e}");
        assert!(e.contains("only root"), "{e}");
        let link = base.join("link");
        std::os::unix::fs::symlink(&new, &link).unwrap();
        let e = check_dir(&link, None).unwrap_err();
        assert!(e.contains("is a symbolic link"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
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
