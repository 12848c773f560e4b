//! `autorate [(min BW, max BW, dry-run, probe ADDR, reconfig …)]` on an
//! interface's root (sluice's extension, issue #16; sema in
//! `sema/autorate.rs`).
//!
//! # Principles
//! - Options in any order, commas optional, as in the queue options
//!   around them.
//! - Where one value has a range of its own (`reconfig`'s `every`, `lead`,
//!   `hold`), the parser checks it, as it does CoDel's `target`; how values
//!   relate (`min ≤ max`, `at < every`) is sema's.
//! - A keyword of autorate where a value should be is a forgotten value,
//!   and is said so, not read as a bad value.
//! - `reconfig`'s durations need their unit: pf has no habit for them to
//!   follow, and `at 12` could be 12 s or 12 ms — a guess either way would
//!   shape at the wrong moments without a word. Only a bare `0` is taken.

use super::values::{bandwidth, duration_of};
use super::{PResult, P};
use crate::ast::{AutorateAst, ReconfigAst, Sp, PROBE_HINT};
use crate::diag::{Diagnostic, Span};
use crate::ir::Reconfig;
use crate::lex::Tok;
use sluice_time::Duration;

/// The words that start an option of autorate.
const WORDS: [&str; 5] = ["min", "max", "dry-run", "probe", "reconfig"];

/// The hint of the errors about `reconfig`'s words and form.
const RECONFIG_HINT: &str = "e.g. `reconfig (every 15s, at 12s, lead 100ms, hold 400ms)`: the link drops at 12, 27, 42 and 57 s past each minute (Starlink's, which `reconfig starlink` says in one word)";

/// `autorate [(min BW, max BW, dry-run, probe ADDR, reconfig …)]`: the
/// bounds of the rate the controller may set, the address it may ping, and
/// the moments the link is known to drop. `start` is the word `autorate`.
pub(super) fn autorate(p: &mut P, start: Span) -> PResult<AutorateAst> {
    let mut a = AutorateAst {
        min: None,
        max: None,
        dry_run: false,
        probe: None,
        reconfig: None,
        span: start,
    };
    if !p.eat(&Tok::LParen) {
        return Ok(a);
    }
    p.options("min, max, dry-run, probe, reconfig or `)`", &mut |p, w| {
        match w.v.as_str() {
            "min" => a.min = Some(bandwidth(p)?),
            "max" => a.max = Some(bandwidth(p)?),
            "dry-run" => a.dry_run = true,
            "probe" => {
                let addr = probe_addr(p)?;
                if let Some(first) = &a.probe {
                    return Err(second("probe", addr.span, first.span)
                        .label("one probe address per interface")
                        .hint("keep the one nearest the link: the modem or the ISP's first hop"));
                }
                a.probe = Some(addr);
            }
            "reconfig" => {
                let r = reconfig(p, w.span)?;
                if let Some(first) = &a.reconfig {
                    return Err(second("reconfig", r.span, first.span)
                        .label("one schedule per interface")
                        .hint("keep the one that matches the link: `reconfig starlink`, or the long form with its own times"));
                }
                a.reconfig = Some(r);
            }
            o => {
                return Err(
                    Diagnostic::error(format!("unexpected `{o}` in autorate"), w.span)
                        .label("expected min, max, dry-run, probe or reconfig")
                        .hint("e.g. `autorate (min 5M, max 40M)`; `dry-run` logs decisions only; `probe 192.0.2.1` pings the modem when the traffic has no TCP to read the delay from; `reconfig starlink` steps aside for Starlink's scheduled drops"),
                )
            }
        }
        Ok(())
    })?;
    a.span = start.to(p.prev_span());
    Ok(a)
}

/// A second `what` in one `autorate (…)`, at `at`; `first` is the one
/// written before it.
fn second(what: &str, at: Span, first: Span) -> Diagnostic {
    Diagnostic::error(format!("a second {what} in autorate"), at).note(first, "the first one")
}

/// The address of `probe ADDR`: one IPv4 or IPv6 literal, read as rules'
/// and tables' addresses are ([`super::ipnet`]) but without a prefix. No
/// host or interface names: the controller pings one fixed address, and
/// sluice resolves nothing at run time.
fn probe_addr(p: &mut P) -> PResult<Sp<std::net::IpAddr>> {
    // A keyword of autorate where the address should be is a forgotten
    // address, not a bad one.
    let w = match p.peek() {
        Some(Tok::Word(w)) if WORDS.contains(&w.as_str()) => None,
        Some(Tok::Word(_) | Tok::Str(_)) => Some(p.word("an address")?),
        _ => None,
    };
    let Some(w) = w else {
        return Err(
            Diagnostic::error("autorate probe without an address", p.here())
                .label("expected an IPv4 or IPv6 address")
                .hint(PROBE_HINT),
        );
    };
    match (super::ipnet(&w.v), w.v.split_once('/')) {
        (Some(n), None) => Ok(Sp::new(n.addr, w.span)),
        (Some(_), Some((_, prefix))) => Err(Diagnostic::error(
            format!("autorate probe `{}` is a network, not an address", w.v),
            w.span,
        )
        .label(format!("expected one address, without `/{prefix}`"))
        .hint(PROBE_HINT)),
        (None, _) => {
            // A mistyped literal needs no lecture on names.
            let literal = w.v.starts_with(|c: char| c.is_ascii_digit())
                || (w.v.contains(':')
                    && w.v
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.')));
            Err(Diagnostic::error(
                format!("autorate probe `{}` is not an IP address", w.v),
                w.span,
            )
            .label(if literal {
                "expected an IPv4 or IPv6 address"
            } else {
                "expected an IPv4 or IPv6 address: sluice looks up no host or interface names"
            })
            .hint(PROBE_HINT))
        }
    }
}

/// `reconfig starlink` or `reconfig (every P, at A[, lead L][, hold H])`,
/// in any order, commas optional (see [`Reconfig`] for what they mean).
/// `kw` is the word `reconfig`.
fn reconfig(p: &mut P, kw: Span) -> PResult<ReconfigAst> {
    if p.peek_word() == Some("starlink") {
        let at = p.here();
        p.next();
        let s = Reconfig::STARLINK;
        return Ok(ReconfigAst {
            every: Sp::new(s.every, at),
            at: Sp::new(s.at, at),
            lead: Some(Sp::new(s.lead, at)),
            hold: Some(Sp::new(s.hold, at)),
            span: kw.to(at),
        });
    }
    if !p.eat(&Tok::LParen) {
        let message = match p.peek() {
            Some(Tok::Word(w) | Tok::Str(w)) if !WORDS.contains(&w.as_str()) => {
                format!("unknown reconfig schedule `{w}`")
            }
            _ => "autorate reconfig without a schedule".to_string(),
        };
        return Err(Diagnostic::error(message, p.here())
            .label("expected `starlink` or `(every …, at …)`")
            .hint(RECONFIG_HINT));
    }
    let [mut every, mut at, mut lead, mut hold]: [Option<Sp<Duration>>; 4] = Default::default();
    p.options("every, at, lead, hold or `)`", &mut |p, w| {
        // The slot, the unit of the example, and the allowed range (`at`'s
        // is below `every`: sema's).
        let (slot, unit, range) = match w.v.as_str() {
            "every" => (
                &mut every,
                "s",
                Some((Duration::from_secs(1), Duration::from_secs(3600))),
            ),
            "at" => (&mut at, "s", None),
            "lead" => (
                &mut lead,
                "ms",
                Some((Duration::ZERO, Duration::from_secs(1))),
            ),
            "hold" => (
                &mut hold,
                "ms",
                Some((Duration::from_millis(10), Duration::from_secs(10))),
            ),
            o => {
                let hint = if WORDS.contains(&o) {
                    format!("`{o}` is an option of autorate: close reconfig's `(…)` before it")
                } else {
                    RECONFIG_HINT.to_string()
                };
                return Err(Diagnostic::error(
                    format!("unexpected `{o}` in autorate reconfig"),
                    w.span,
                )
                .label("expected every, at, lead or hold")
                .hint(hint));
            }
        };
        let d = reconfig_duration(p, &w.v, unit)?;
        if let Some(first) = slot {
            return Err(Diagnostic::error(
                format!("a second `{}` in autorate reconfig", w.v),
                d.span,
            )
            .label(format!("one `{}` per schedule", w.v))
            .note(first.span, "the first one"));
        }
        if let Some((lo, hi)) = range {
            if d.v < lo || d.v > hi {
                return Err(Diagnostic::error(
                    format!("autorate reconfig {} out of range: {}", w.v, d.v),
                    d.span,
                )
                // `0`, not the printer's `0ns`: no unit is needed for nothing.
                .label(if lo == Duration::ZERO {
                    format!("allowed 0..{hi}")
                } else {
                    format!("allowed {lo}..{hi}")
                })
                .hint(purpose(&w.v)));
            }
        }
        *slot = Some(d);
        Ok(())
    })?;
    let span = kw.to(p.prev_span());
    let (every, at) = match (every, at) {
        (Some(e), Some(a)) => (e, a),
        (e, a) => {
            let missing = match (e.is_none(), a.is_none()) {
                (true, true) => "`every` and `at`",
                (true, false) => "`every`",
                _ => "`at`",
            };
            return Err(
                Diagnostic::error(format!("autorate reconfig without {missing}"), span)
                    .label("the link drops `at` past each multiple of `every`: both are needed")
                    .hint("e.g. `reconfig (every 15s, at 12s)`, or `reconfig starlink` for Starlink's schedule"),
            );
        }
    };
    Ok(ReconfigAst {
        every,
        at,
        lead,
        hold,
        span,
    })
}

/// What `reconfig`'s option `what` is for: the hint of its range error.
fn purpose(what: &str) -> String {
    match what {
        "every" => "how often the link drops: Starlink's is `every 15s`".to_string(),
        "lead" => format!(
            "how long before each drop the rate goes down, for the modem's queue to empty: a round trip or two (default {})",
            Reconfig::DEFAULT_LEAD
        ),
        _ => format!(
            "how long after each drop the rate stays down: the drop itself and a round trip (default {})",
            Reconfig::DEFAULT_HOLD
        ),
    }
}

/// A duration of `reconfig`'s option `what`, with its unit: `15s`, `100ms`,
/// or pf's `100 ms` (the unit as the next word). A bare number is refused
/// (but `0`); `unit` is the one its error suggests.
fn reconfig_duration(p: &mut P, what: &str, unit: &str) -> PResult<Sp<Duration>> {
    let w = p.word("a duration")?;
    let bare = w.v.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if !bare {
        return duration_of(&w, 1).map(|d| Sp::new(d, w.span));
    }
    if let Some(u) = p
        .peek_word()
        .filter(|u| matches!(*u, "s" | "ms" | "us" | "ns"))
    {
        p.next();
        let span = w.span.to(p.prev_span());
        let joined = Sp::new(format!("{}{u}", w.v), span);
        return duration_of(&joined, 1).map(|d| Sp::new(d, span));
    }
    // `duration_of` also says what is wrong with `.` or an empty string.
    let d = duration_of(&w, 1)?;
    if d == Duration::ZERO {
        return Ok(Sp::new(d, w.span));
    }
    Err(Diagnostic::error(
        format!("autorate reconfig {what} `{}` without a unit", w.v),
        w.span,
    )
    .label("a bare number could be seconds or milliseconds")
    .hint(format!("write the unit, e.g. `{what} {}{unit}`", w.v)))
}
