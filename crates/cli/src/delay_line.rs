//! `sluice delay-line --between A,B --delay MS [--delay-back MS] [--loss P%
//! --loss-seed N]`: a plain fixed delay between two interfaces, the lab's
//! base RTT, and optionally random loss (both directions, seeded).
//!
//! # Principles
//! Independent of the shaper under test: it runs `sluice_io::DelayLine`
//! (packet sockets, epoll, timerfd) and nothing of the engine, classifier
//! or schedulers, so a shaper bug cannot hide in the reference path. Two
//! threads: the I/O loop (SCHED_FIFO by default, see `--rt-prio`) and a
//! signal thread turning SIGTERM/SIGINT into a clean stop (SIGHUP is
//! ignored: there is nothing to reload). Counters go
//! to stderr on exit. Exit 0 on a clean stop, 1 otherwise.

mod ts_lie;

use crate::out::ewriteln;
use clap::Args as ClapArgs;
use sluice_io::delay::DelayDirStats;
use sluice_io::{DelayLine, DelayOptions, Signal, Signals};
use sluice_time::{units, Duration};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Longest delay accepted, per direction: far beyond any lab RTT, and
/// `cap_frames` frames must fit in it at the rates the lab runs.
const MAX_DELAY_MS: u64 = 60_000;

#[derive(ClapArgs)]
/// Long help is the doc comment of `Cmd::DelayLine` in main.rs (clap takes
/// the variant's).
pub struct Args {
    /// The two interfaces to join (they must exist and be up).
    #[arg(long, value_name = "A,B", value_parser = parse_pair)]
    between: (String, String),
    /// Delay A→B in milliseconds; fractions allowed (0.5 = 500 µs; 0 = none).
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    delay: Duration,
    /// Delay B→A in milliseconds (default: the same as --delay).
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    delay_back: Option<Duration>,
    /// Frames held per direction at most; beyond it frames are dropped and
    /// counted.
    #[arg(long, value_name = "FRAMES", default_value_t = 65536,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    cap_frames: u64,
    /// Busy-wait for due times closer than this many microseconds instead of
    /// sleeping on the timer (0: always sleep; less CPU, later departures).
    #[arg(long, value_name = "US", default_value_t = 10)]
    spin_us: u64,
    /// Run the forwarding thread as SCHED_FIFO at this priority (1-99; 0:
    /// normal scheduling). Without it, a busy shared machine delays some
    /// frames by milliseconds; if refused, a warning and normal scheduling.
    #[arg(long, value_name = "PRIO", default_value_t = 10,
          value_parser = clap::value_parser!(u8).range(0..=99))]
    rt_prio: u8,
    /// Leave NIC offloads (GRO/GSO/TSO/LRO/rxvlan) as they are.
    #[arg(long)]
    keep_offloads: bool,
    /// Random loss in both directions, a percentage (`1%`, `0.5%`; 0 =
    /// none): each frame is lost independently with that probability.
    #[arg(long, value_name = "P%", value_parser = parse_loss_ppm, default_value = "0%")]
    loss: u32,
    /// Seed of the loss draws (the same seed replays the same draws).
    #[arg(long, value_name = "N", default_value_t = 0)]
    loss_seed: u64,
    /// Play a remote host with a lying timestamp clock on the connections
    /// of --ts-lie-port (B is the server's side): frozen, fast (1.2x) or
    /// slow (0.8x).
    #[arg(long, value_name = "MODE", value_parser = ts_lie::parse_lie, requires = "ts_lie_port")]
    ts_lie: Option<ts_lie::Lie>,
    /// The server-side TCP port of the lying connections.
    #[arg(long, value_name = "PORT", requires = "ts_lie")]
    ts_lie_port: Option<u16>,
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once(',') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() && a != b => {
            Ok((a.to_string(), b.to_string()))
        }
        _ => Err(format!("expected A,B (two different names), got `{s}`")),
    }
}

/// Milliseconds as a decimal (`10`, `0.5`, `2.125`) to nanoseconds, exact:
/// no float rounding, at most 6 fractional digits (1 ns).
pub fn parse_ms(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!("expected milliseconds 0..={MAX_DELAY_MS} with up to 6 decimals (e.g. 10 or 0.5), got `{s}`")
    };
    // A bare number only, and a finer fraction is refused rather than cut.
    match units::decimal(s) {
        Ok((_, scale)) if scale <= 1_000_000 => {}
        _ => return Err(bad()),
    }
    match units::parse_duration(s, Duration::from_millis(1)) {
        Ok(d) if d <= Duration::from_millis(MAX_DELAY_MS) => Ok(d),
        _ => Err(bad()),
    }
}

/// Most random loss accepted: beyond it TCP hardly moves at all.
pub const MAX_LOSS_PPM: u32 = 500_000;

/// A loss percentage (`1%`, `0.5%`, `3%`, `0%`) as parts per million,
/// exact: the number is read by `sluice_time::units::decimal`, the
/// project's one decimal grammar; the `%` is required so `1` cannot be
/// read as 100 %.
pub fn parse_loss_ppm(s: &str) -> Result<u32, String> {
    let bad = || {
        format!(
            "expected a loss percentage from 0% to {}% with up to 4 decimals (e.g. 1% or 0.5%),              got `{s}`",
            MAX_LOSS_PPM / 10_000
        )
    };
    let num = s.strip_suffix('%').ok_or_else(bad)?;
    let (m, scale) = units::decimal(num).map_err(|_| bad())?;
    if scale > 10_000 {
        return Err(bad());
    }
    let ppm = m.checked_mul(10_000).ok_or_else(bad)? / scale;
    u32::try_from(ppm)
        .ok()
        .filter(|&p| p <= MAX_LOSS_PPM)
        .ok_or_else(bad)
}

fn report(label: &str, s: &DelayDirStats) {
    ewriteln!("sluice delay-line: {label}: {}", s.summary());
}

pub fn run(a: Args) -> ExitCode {
    let (ia, ib) = a.between.clone();
    let o = DelayOptions {
        a_to_b: a.delay,
        b_to_a: a.delay_back.unwrap_or(a.delay),
        cap_frames: a.cap_frames as usize,
        disable_offloads: !a.keep_offloads,
        spin_ns: a.spin_us.saturating_mul(1000),
        loss_ppm: [a.loss; 2],
        loss_seed: a.loss_seed,
    };
    let mut line = match DelayLine::open(&ia, &ib, o.clone()) {
        Ok(l) => l,
        Err(e) => {
            ewriteln!("sluice delay-line: cannot open {ia},{ib}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let (Some(lie), Some(port)) = (a.ts_lie, a.ts_lie_port) {
        let mut l = ts_lie::TsLie::new(lie, port);
        line.set_hook(Box::new(move |dir, f| l.apply(dir, f)));
        ewriteln!("sluice delay-line: TSval of port {port}'s connections lies: {lie:?}");
    }
    line.set_log(std::sync::Arc::new(|m: &str| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "sluice delay-line: {m}");
    }));
    for off in line.offloads() {
        if let Err(msg) = &off.outcome {
            ewriteln!(
                "sluice delay-line: warn: {}: could not turn {} off: {msg}",
                off.iface,
                off.feature
            );
        }
    }
    let signals = match Signals::install() {
        Ok(s) => Arc::new(s),
        Err(e) => {
            ewriteln!("sluice delay-line: cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    ewriteln!(
        "sluice delay-line: {ia} -> {ib} {:.3} ms, {ib} -> {ia} {:.3} ms, cap {} frames, \
         SCHED_FIFO priority {} (0 = off), random loss {} ppm each way (seed {})",
        o.a_to_b.as_millis_f64(),
        o.b_to_a.as_millis_f64(),
        o.cap_frames,
        a.rt_prio,
        a.loss,
        a.loss_seed
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sig_thread = {
        let (signals, stop, waker) = (signals.clone(), stop.clone(), line.waker());
        // Bounded by the signals that arrive: each wait returns one.
        std::thread::spawn(move || loop {
            if signals.wait() == Signal::Stop {
                stop.store(true, Ordering::SeqCst);
                waker.wake();
                return;
            }
        })
    };
    // After the signal thread is spawned: it need not inherit the policy.
    if a.rt_prio > 0 {
        if let Err(e) = sluice_io::delay::set_thread_fifo(a.rt_prio) {
            ewriteln!(
                "sluice delay-line: warn: SCHED_FIFO {} refused ({e}); normal scheduling, \
                 expect millisecond outliers on a busy machine",
                a.rt_prio
            );
        }
    }
    let result = line.run(stop.clone());
    stop.store(true, Ordering::SeqCst);
    signals.stop();
    let _ = sig_thread.join();
    let st = line.stats();
    report(&format!("{ia} -> {ib}"), &st.dirs[0]);
    report(&format!("{ib} -> {ia}"), &st.dirs[1]);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            ewriteln!("sluice delay-line: packet loop failed: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_parse_exactly() {
        let ns = |s| parse_ms(s).map(|d| d.as_nanos());
        assert_eq!(ns("10"), Ok(10_000_000));
        assert_eq!(ns("0"), Ok(0));
        assert_eq!(ns("0.5"), Ok(500_000));
        assert_eq!(ns(".25"), Ok(250_000));
        assert_eq!(ns("2.000001"), Ok(2_000_001));
        assert_eq!(ns("60000"), Ok(60_000_000_000));
        for bad in [
            "",
            ".",
            "-1",
            "1e3",
            "0.0000001",
            "60000.1",
            "abc",
            "1.2.3",
            "99999999999999999999",
            " 1",
        ] {
            assert!(parse_ms(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn loss_is_a_percentage_read_exactly() {
        assert_eq!(parse_loss_ppm("1%"), Ok(10_000));
        assert_eq!(parse_loss_ppm("3%"), Ok(30_000));
        assert_eq!(parse_loss_ppm("0.5%"), Ok(5_000));
        assert_eq!(parse_loss_ppm("0.0001%"), Ok(1));
        assert_eq!(parse_loss_ppm("0%"), Ok(0));
        assert_eq!(parse_loss_ppm("50%"), Ok(500_000));
        for bad in [
            "", "1", "%", "-1%", "1e2%", "50.01%", "0.00001%", "x%", " 1%",
        ] {
            let e = parse_loss_ppm(bad).unwrap_err();
            assert!(e.contains("percentage"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn pair_needs_two_names() {
        assert_eq!(
            parse_pair("a0,b0"),
            Ok(("a0".to_string(), "b0".to_string()))
        );
        for bad in ["a0", "a0,", ",b0", "a0,a0"] {
            assert!(parse_pair(bad).is_err(), "{bad:?} accepted");
        }
    }
}
