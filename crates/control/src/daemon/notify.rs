//! Talking to systemd without libsystemd: readiness and watchdog
//! notifications (sd_notify(3)) and syslog priorities on log lines that go
//! to the journal (sd-daemon(3)).
//!
//! # Principles
//! - sd_notify is one datagram of `KEY=VALUE` lines to the `AF_UNIX` socket
//!   named by `$NOTIFY_SOCKET`: a path, or an abstract name written with a
//!   leading `@`. Without the variable every call is a no-op, so `sluice
//!   run` outside systemd behaves as before. A send that fails is dropped:
//!   a service manager that went away must not stop the shaper.
//! - `READY=1` is sent once the ports are open, the first configuration is
//!   live and the control socket answers (`systemctl start` returns then,
//!   not before XDP is attached). `STOPPING=1` once the loop has ended.
//!   A SIGHUP reload is framed by `RELOADING=1` (with `MONOTONIC_USEC=`,
//!   as sd_notify(3) asks) and `READY=1`, whatever its outcome: a refused
//!   file leaves the running configuration live.
//! - `WATCHDOG=1` comes from the packet loop itself (a tick per loop turn,
//!   rate-limited here to half of `$WATCHDOG_USEC`), so a wedged loop stops
//!   pinging and systemd restarts the service. `$WATCHDOG_PID`, when set,
//!   must be ours (sd_watchdog_enabled(3)).
//! - journald reads a leading `<N>` on a stream line as its priority
//!   (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug). It is added only
//!   when stderr is the journal: `$JOURNAL_STREAM` names the device and
//!   inode of the stream systemd connected, and stderr's must match (a
//!   redirected stderr must not get the prefixes).

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// Where notifications go: `$NOTIFY_SOCKET`, parsed.
pub struct Notifier {
    sock: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`; `None` when unset, empty or unusable (then
    /// there is nothing to notify).
    pub fn from_env() -> Option<Notifier> {
        let name = std::env::var_os("NOTIFY_SOCKET")?;
        let addr = socket_addr(name.to_str()?).ok()?;
        let sock = UnixDatagram::unbound().ok()?;
        Some(Notifier { sock, addr })
    }

    /// Sends `state` (`READY=1`, `WATCHDOG=1`, …); best effort.
    pub fn send(&self, state: &str) {
        let _ = self.sock.send_to_addr(state.as_bytes(), &self.addr);
    }
}

/// `$NOTIFY_SOCKET`'s forms: an absolute path, or `@name` for the
/// abstract namespace (sd_notify(3)).
fn socket_addr(name: &str) -> std::io::Result<SocketAddr> {
    match name.strip_prefix('@') {
        Some(abs) => SocketAddr::from_abstract_name(abs.as_bytes()),
        None if name.starts_with('/') => SocketAddr::from_pathname(name),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "NOTIFY_SOCKET is neither an absolute path nor @abstract",
        )),
    }
}

/// Sends `state` to `$NOTIFY_SOCKET`, if there is one.
pub fn notify(state: &str) {
    if let Some(n) = Notifier::from_env() {
        n.send(state);
    }
}

/// The `READY=1` message, with a status line for `systemctl status`.
pub fn ready_message(status: &str) -> String {
    let one_line: String = status
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    format!("READY=1\nSTATUS={one_line}")
}

/// `RELOADING=1` with the time systemd compares it against
/// (`CLOCK_MONOTONIC`, in µs).
pub fn reloading_message(monotonic_usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={monotonic_usec}")
}

/// `CLOCK_MONOTONIC` in microseconds, systemd's clock for `MONOTONIC_USEC`.
pub fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1000)
}

/// How often to ping: half of `$WATCHDOG_USEC` (sd_watchdog_enabled(3)),
/// or `None` when the watchdog is off or meant for another process.
pub fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    if let Some(p) = pid {
        if p.trim().parse::<u32>().ok()? != me {
            return None;
        }
    }
    let us: u64 = usec?.trim().parse().ok().filter(|&n| n > 0)?;
    Some(Duration::from_micros(us / 2))
}

/// `WATCHDOG=1` at most once per interval, driven by the caller's loop.
pub struct Watchdog {
    notifier: Notifier,
    every: Duration,
    next: Instant,
}

impl Watchdog {
    /// From the environment; `None` when systemd asked for no watchdog.
    pub fn from_env() -> Option<Watchdog> {
        let var = |k| std::env::var(k).ok();
        let every = watchdog_interval(
            var("WATCHDOG_USEC").as_deref(),
            var("WATCHDOG_PID").as_deref(),
            std::process::id(),
        )?;
        Some(Watchdog {
            notifier: Notifier::from_env()?,
            every,
            next: Instant::now(),
        })
    }

    /// Called on every turn of the packet loop; pings when due.
    pub fn tick(&mut self) {
        let now = Instant::now();
        if now >= self.next {
            self.notifier.send("WATCHDOG=1");
            self.next = now + self.every;
        }
    }
}

/// Whether `$JOURNAL_STREAM` (`DEVICE:INODE`, decimal) names the stream
/// whose device and inode are given.
pub fn is_journal_stream(var: Option<&str>, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = var.and_then(|v| v.trim().split_once(':')) else {
        return false;
    };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

/// Whether this process's stderr is the journal.
pub fn stderr_is_journal() -> bool {
    let Ok(st) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    is_journal_stream(
        std::env::var("JOURNAL_STREAM").ok().as_deref(),
        st.st_dev,
        st.st_ino,
    )
}

/// `text` as a client command writes it to stderr: with `level`'s priority
/// on every line when stderr is the journal (`check` as ExecStartPre,
/// `reload` as ExecReload), as it is otherwise.
pub fn for_stderr(level: crate::log::Level, text: &str) -> std::borrow::Cow<'_, str> {
    if stderr_is_journal() {
        with_priority(level.priority(), text).into()
    } else {
        text.into()
    }
}

/// The log level a configuration diagnostic is written at.
pub fn diag_level(severity: sluice_conf::Severity) -> crate::log::Level {
    match severity {
        sluice_conf::Severity::Error => crate::log::Level::Error,
        sluice_conf::Severity::Warning => crate::log::Level::Warn,
    }
}

/// `text` with `<N>` before every line, so that each line of a
/// multi-line message (a diagnostic and its caret) gets the priority.
pub fn with_priority(prio: u8, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.split_inclusive('\n') {
        out.push('<');
        out.push(char::from(b'0' + prio % 10));
        out.push('>');
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_socket_paths_and_abstract_names() {
        let a = socket_addr("/run/systemd/notify").unwrap();
        assert_eq!(
            a.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let a = socket_addr("@sluice/notify").unwrap();
        assert_eq!(a.as_abstract_name(), Some(&b"sluice/notify"[..]));
        assert!(socket_addr("relative").is_err());
        assert!(socket_addr("").is_err());
    }

    #[test]
    fn the_datagram_reaches_an_abstract_socket() {
        let name = format!("sluice-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier {
            sock: UnixDatagram::unbound().unwrap(),
            addr: socket_addr(&format!("@{name}")).unwrap(),
        };
        n.send(&ready_message("bridging lan0 <-> wan0\nvia xdp"));
        let mut buf = [0u8; 256];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(
            std::str::from_utf8(&buf[..len]).unwrap(),
            "READY=1\nSTATUS=bridging lan0 <-> wan0 via xdp"
        );
    }

    #[test]
    fn reloading_carries_the_monotonic_time() {
        assert_eq!(
            reloading_message(1_234_567),
            "RELOADING=1\nMONOTONIC_USEC=1234567"
        );
        let (a, b) = (monotonic_usec(), monotonic_usec());
        assert!(a > 0 && b >= a, "{a} {b}");
    }

    #[test]
    fn watchdog_interval_is_half_the_timeout_and_honours_the_pid() {
        let half = Some(Duration::from_millis(1500));
        assert_eq!(watchdog_interval(Some("3000000"), None, 42), half);
        assert_eq!(watchdog_interval(Some("3000000"), Some("42"), 42), half);
        assert_eq!(watchdog_interval(Some("3000000"), Some("41"), 42), None);
        assert_eq!(watchdog_interval(Some("3000000"), Some("x"), 42), None);
        assert_eq!(watchdog_interval(None, Some("42"), 42), None);
        assert_eq!(watchdog_interval(Some("0"), None, 42), None);
        assert_eq!(watchdog_interval(Some("soon"), None, 42), None);
    }

    #[test]
    fn journal_stream_must_match_device_and_inode() {
        assert!(is_journal_stream(Some("8:1234"), 8, 1234));
        assert!(!is_journal_stream(Some("8:1234"), 8, 1235));
        assert!(!is_journal_stream(Some("9:1234"), 8, 1234));
        assert!(!is_journal_stream(Some("garbage"), 8, 1234));
        assert!(!is_journal_stream(None, 8, 1234));
    }

    #[test]
    fn every_line_gets_the_priority() {
        assert_eq!(
            with_priority(4, "warn: a\n  | caret\n"),
            "<4>warn: a\n<4>  | caret\n"
        );
        assert_eq!(with_priority(3, "no newline"), "<3>no newline");
        assert_eq!(with_priority(6, ""), "");
    }
}
