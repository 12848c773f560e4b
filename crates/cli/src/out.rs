//! Writing to stderr and stdout without ever panicking.
//!
//! # Principles
//! `print!` and `eprint!` panic when the write fails (ENOSPC when the log
//! is on a full disk, EPIPE when the reader went away), and a panic in the
//! daemon's signal thread leaves it deaf to SIGTERM and SIGHUP. So nothing
//! in this binary uses them: a log line (stderr) is best effort, a failed
//! write is dropped and counted (`log_write_errors` in `show info`), and the
//! first line that gets through again says how many were lost. A client
//! command's stdout is its result: when it cannot be written the command
//! stops with status 1, silently for a closed pipe (`sluice show rules |
//! head -1`), with one line on stderr otherwise.
//!
//! The daemon's log (`sluice_control::log`, the `error!` … `debug!`
//! macros) is written here too ([`set_log`]): `-v`'s verbosity, and
//! journald's `<N>` priorities when stderr is the journal.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Best-effort writes to one stream, with a count of the lost ones.
pub struct Sink {
    /// Writes that failed since start.
    errors: AtomicU64,
    /// How many of `errors` a later line has already reported.
    reported: AtomicU64,
}

impl Sink {
    pub const fn new() -> Sink {
        Sink {
            errors: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        }
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Writes `args` to `w`; a failure is counted, never raised. Returns
    /// whether the line got through.
    pub fn write(&self, w: &mut dyn Write, args: fmt::Arguments<'_>) -> bool {
        if w.write_fmt(args).and_then(|()| w.flush()).is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let lost = self.errors.load(Ordering::Relaxed);
        let told = self.reported.swap(lost, Ordering::Relaxed);
        if lost > told {
            // Best effort too: if this fails, the next line tries again.
            let note = format!(
                "sluice: warn: {} log line(s) lost: stderr could not be written\n",
                lost - told
            );
            if w.write_all(note.as_bytes())
                .and_then(|()| w.flush())
                .is_err()
            {
                self.reported.store(told, Ordering::Relaxed);
            }
        }
        true
    }
}

static STDERR: Sink = Sink::new();

/// Log lines lost because stderr could not be written.
pub fn log_write_errors() -> u64 {
    STDERR.errors()
}

/// Writes to stderr; never panics (see the principles).
pub fn err(args: fmt::Arguments<'_>) {
    STDERR.write(&mut std::io::stderr().lock(), args);
}

/// Writes a client command's output to stdout; when stdout cannot be
/// written, ends the process with status 1 (quietly for a closed pipe).
pub fn out(args: fmt::Arguments<'_>) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            err(format_args!("sluice: cannot write the output: {e}\n"));
        }
        std::process::exit(1);
    }
}

/// `eprint!` that never panics.
macro_rules! ewrite {
    ($($t:tt)*) => { $crate::out::err(format_args!($($t)*)) }
}

/// `eprintln!` that never panics.
macro_rules! ewriteln {
    ($($t:tt)*) => { $crate::out::err(format_args!("{}\n", format_args!($($t)*))) }
}

/// `print!` for a client command's output (see [`out`]).
macro_rules! owrite {
    ($($t:tt)*) => { $crate::out::out(format_args!($($t)*)) }
}

/// `println!` for a client command's output (see [`out`]).
macro_rules! owriteln {
    ($($t:tt)*) => { $crate::out::out(format_args!("{}\n", format_args!($($t)*))) }
}

pub(crate) use {ewrite, ewriteln, owrite, owriteln};

pub use sluice_control::log::Level;

/// Default verbosity shows warnings; each -v adds one level.
static VERBOSITY: AtomicU8 = AtomicU8::new(Level::Warn as u8);

/// Whether stderr is the journal: lines then carry `<N>` priorities
/// instead of the `sluice:` prefix journald adds itself
/// (`sluice_control::daemon::notify`).
static JOURNAL: AtomicBool = AtomicBool::new(false);

/// The daemon's log writer (sluice_control::log): stderr, through
/// [`STDERR`]'s count of lost lines.
struct Log;

impl sluice_control::log::Writer for Log {
    fn line(&self, level: Level, msg: fmt::Arguments<'_>) {
        if level as u8 <= VERBOSITY.load(Ordering::Relaxed) {
            let tag = level.tag();
            if JOURNAL.load(Ordering::Relaxed) {
                self.text(level, &format!("{tag}: {msg}\n"));
            } else {
                ewrite!("sluice: {tag}: {msg}\n");
            }
        }
    }

    fn text(&self, level: Level, text: &str) {
        if JOURNAL.load(Ordering::Relaxed) {
            ewrite!(
                "{}",
                sluice_control::daemon::notify::with_priority(level.priority(), text)
            );
        } else {
            ewrite!("{text}");
        }
    }

    fn lost(&self) -> u64 {
        log_write_errors()
    }
}

/// Sets the log's verbosity (`-v` given `extra` times) and whether stderr
/// is the journal, and makes this the daemon's log writer; called once,
/// before the first line.
pub fn set_log(extra: u8, journal: bool) {
    let v = (Level::Warn as u8)
        .saturating_add(extra)
        .min(Level::Debug as u8);
    VERBOSITY.store(v, Ordering::Relaxed);
    JOURNAL.store(journal, Ordering::Relaxed);
    sluice_control::log::set_writer(&Log);
}

// The log for every subcommand, under the names the binary has always
// used: sluice_control's (its writer is the one above).
#[allow(unused_imports)]
pub(crate) use sluice_control::log::{log, log_text};
#[allow(unused_imports)]
pub(crate) use sluice_control::{debug, error, info, log_warn as warn};

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// A disk that is full until `full` is cleared.
    struct Disk {
        full: bool,
        got: Vec<u8>,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.full {
                return Err(io::Error::from_raw_os_error(28)); // ENOSPC
            }
            self.got.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_is_counted_not_raised_and_reported_once_writes_work() {
        let sink = Sink::new();
        let mut d = Disk {
            full: true,
            got: Vec::new(),
        };
        assert!(!sink.write(&mut d, format_args!("sluice: error: one\n")));
        assert!(!sink.write(&mut d, format_args!("sluice: error: two\n")));
        assert_eq!(sink.errors(), 2);
        assert!(d.got.is_empty());
        d.full = false;
        assert!(sink.write(&mut d, format_args!("sluice: info: three\n")));
        assert!(sink.write(&mut d, format_args!("sluice: info: four\n")));
        assert_eq!(
            String::from_utf8(d.got).unwrap(),
            "sluice: info: three\n\
             sluice: warn: 2 log line(s) lost: stderr could not be written\n\
             sluice: info: four\n"
        );
        assert_eq!(sink.errors(), 2, "the count stays for show info");
    }

    #[test]
    fn a_closed_pipe_is_counted_too() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::new();
        for _ in 0..3 {
            sink.write(&mut Closed, format_args!("x\n"));
        }
        assert_eq!(sink.errors(), 3);
    }
}
