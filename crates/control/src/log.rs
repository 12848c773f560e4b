//! The daemon's log: the levels, and the one writer every thread logs
//! through.
//!
//! # Principles
//! - The binary owns stderr (never panicking on a full disk, journald's
//!   priorities): it installs its writer once, before the daemon's first
//!   line ([`set_writer`]). Until then, and in tests, lines go to stderr
//!   as they are, a failed write dropped.
//! - Logging never blocks on anything but the write and never panics: a
//!   log line is best effort, the shaper goes on.

use std::fmt;
use std::io::Write;
use std::sync::OnceLock;

/// Log levels, in increasing verbosity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    /// journald's priority for the level (syslog(3)'s numbers).
    pub fn priority(self) -> u8 {
        match self {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Debug => 7,
        }
    }

    /// The word a line starts with (`sluice: warn: …`).
    pub fn tag(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// Where the daemon's log lines go.
pub trait Writer: Send + Sync {
    /// One line at `level` (the writer adds the prefix and the newline,
    /// and drops what its verbosity hides).
    fn line(&self, level: Level, msg: fmt::Arguments<'_>);
    /// Text already formatted (a configuration's diagnostics, whole
    /// lines), every line at `level`.
    fn text(&self, level: Level, text: &str);
    /// Lines lost because they could not be written (`show info`).
    fn lost(&self) -> u64;
}

static WRITER: OnceLock<&'static dyn Writer> = OnceLock::new();

/// Installs the daemon's writer; a second call is ignored.
pub fn set_writer(w: &'static dyn Writer) {
    let _ = WRITER.set(w);
}

/// A log line (see the macros [`error!`](crate::error) …).
pub fn log(level: Level, msg: fmt::Arguments<'_>) {
    match WRITER.get() {
        Some(w) => w.line(level, msg),
        None => {
            let _ = writeln!(std::io::stderr(), "sluice: {}: {msg}", level.tag());
        }
    }
}

/// Formatted text, every line at `level`.
pub fn log_text(level: Level, text: &str) {
    match WRITER.get() {
        Some(w) => w.text(level, text),
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
}

/// Log lines lost since start.
pub fn lost() -> u64 {
    WRITER.get().map_or(0, |w| w.lost())
}

/// A log line at [`Level::Error`].
#[macro_export]
macro_rules! error {
    ($($t:tt)*) => { $crate::log::log($crate::log::Level::Error, format_args!($($t)*)) }
}

/// A log line at [`Level::Warn`] (`warn` is also a built-in attribute:
/// import it as `sluice_control::log_warn as warn` or call it so).
#[macro_export]
macro_rules! log_warn {
    ($($t:tt)*) => { $crate::log::log($crate::log::Level::Warn, format_args!($($t)*)) }
}

/// A log line at [`Level::Info`].
#[macro_export]
macro_rules! info {
    ($($t:tt)*) => { $crate::log::log($crate::log::Level::Info, format_args!($($t)*)) }
}

/// A log line at [`Level::Debug`].
#[macro_export]
macro_rules! debug {
    ($($t:tt)*) => { $crate::log::log($crate::log::Level::Debug, format_args!($($t)*)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_has_journald_s_priority() {
        let p: Vec<u8> = [Level::Error, Level::Warn, Level::Info, Level::Debug]
            .iter()
            .map(|l| l.priority())
            .collect();
        assert_eq!(p, [3, 4, 6, 7]);
    }

    /// Captures what the daemon logs (other tests of the crate may log
    /// into it too: only this test's lines are looked for).
    struct Capture(std::sync::Mutex<Vec<String>>);

    impl Writer for Capture {
        fn line(&self, level: Level, msg: fmt::Arguments<'_>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{}: {msg}", level.tag()));
        }
        fn text(&self, level: Level, text: &str) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} text: {text}", level.tag()));
        }
        fn lost(&self) -> u64 {
            7
        }
    }

    #[test]
    fn the_daemon_logs_through_the_writer_the_binary_installed() {
        static CAPTURE: Capture = Capture(std::sync::Mutex::new(Vec::new()));
        set_writer(&CAPTURE);
        crate::log_warn!("link {} down", "wan0");
        crate::debug!("a debug line, {}", 1);
        log_text(Level::Error, "conf:1: bad\n");
        let got = CAPTURE.0.lock().unwrap().clone();
        for want in [
            "warn: link wan0 down",
            "debug: a debug line, 1",
            "error text: conf:1: bad\n",
        ] {
            assert!(got.iter().any(|l| l == want), "{want} in {got:?}");
        }
        assert_eq!(lost(), 7);
    }
}
