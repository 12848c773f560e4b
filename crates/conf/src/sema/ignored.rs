//! Warnings for what sluice parses and does not act on.
//!
//! # Principles
//! - pf.conf files are accepted unchanged, but nothing is ignored in
//!   silence: every option, `set` option, state option and skipped
//!   statement that has no effect in sluice draws a warning from `sluice
//!   check` (and from a reload, which runs the same checks).
//! - One warning per name, at its first use, counting the others: a
//!   pfSense file with `label` on 200 rules gets one line, not 200.
//! - Each says why it has no effect here, and what to do instead when
//!   there is something.

use super::Ctx;
use crate::ast::Sp;
use crate::diag::Diagnostic;

/// Why `name` has no effect, and what to do instead.
fn hint(name: &str) -> &'static str {
    match name {
        "set skip" => "sluice forwards between the two interfaces it is given; there is nothing to skip",
        "set block-policy" | "return" | "return-rst" | "return-icmp" | "return-icmp6" => {
            "sluice drops blocked packets silently; it sends no RST or ICMP error"
        }
        "set optimization" | "set ruleset-optimization" => "sluice evaluates the rules as written",
        "set loginterface" | "log" => {
            "sluice keeps no pflog; `sluice show rules` counts what each rule matched"
        }
        "set state-policy" | "if-bound" => {
            "sluice states float: a state matches on either interface"
        }
        "set reassemble" | "scrub" => "sluice does not reassemble or normalise packets",
        "set debug" => "use `sluice run -v` for more logging",
        "set hostid" | "no-sync" | "pflow" => "sluice has no pfsync or pflow",
        "set fingerprints" => "sluice does not fingerprint hosts (`os` is not evaluated)",
        "set state-defaults" => "write the state options on each rule instead",
        "set syncookies" => "sluice forwards SYNs and answers none",
        "set timeout interval" => {
            "sluice purges expired states continuously, and an expired state never matches"
        }
        "set timeout frag" => "sluice keeps no fragments",
        "set timeout src.track" => {
            "sluice forgets a source when its last state goes; it keeps no source nodes after that"
        }
        "source-track" => {
            "sluice tracks sources per rule whenever max-src-states or max-src-nodes is given; `global` tracking is not done"
        }
        "overload without a connection limit" => {
            "a source is overloaded when it exceeds max-src-conn or max-src-conn-rate; give one of them"
        }
        "modulate state" | "synproxy state" => {
            "treated as keep state: sluice neither modulates sequence numbers nor proxies the handshake"
        }
        "state options without state" => "state options need a pass rule that keeps state",
        "allow-related" => "sluice creates no related states",
        "label" | "tag" | "tracker" | "ridentifier" => "sluice keeps no labels, tags or trackers",
        "dnpipe" | "dnqueue" => "name the queue or pipe with `queue NAME`",
        "counters" => "sluice keeps no per-entry table counters",
        "file" => "this check was given no way to read files (sluice check, run and reload read them): the table gets none of that file's entries",
        "nat-to" | "rdr-to" | "binat-to" | "af-to" | "nat" | "rdr" | "binat" | "nat-anchor"
        | "rdr-anchor" | "binat-anchor" => "sluice translates no addresses; a bridge passes them as they are",
        "route-to" | "reply-to" | "dup-to" | "divert-to" | "divert-packet" | "divert-reply"
        | "rtable" | "on rdomain" | "fastroute" => {
            "sluice routes nothing: it forwards between its two interfaces"
        }
        "anchor" | "load" => "sluice reads one ruleset; paste the anchor's rules in",
        "antispoof" => "write the block rules antispoof would expand to",
        "set tos" | "set delay" | "min-ttl" | "no-df" | "random-id" | "once" | "allow-opts"
        | "set-tos" | "reassemble tcp" => {
            "sluice rewrites no packets beyond queueing, prio and `scrub (max-mss …)`"
        }
        n if n.starts_with("set limit ") => "only `set limit states` is acted on",
        n if n.starts_with("fragment ") => {
            "sluice reassembles nothing: fragments are forwarded as they come"
        }
        n if n.starts_with("state option ") => {
            "per-rule timeouts other than the state kinds (tcp.first … other.multiple) are not acted on"
        }
        _ => "sluice shapes traffic between two interfaces; this pf option has no effect there",
    }
}

/// The warning's first line for `name`.
fn message(name: &str) -> String {
    match name {
        "overload without a connection limit" => {
            "`overload` has no effect without max-src-conn or max-src-conn-rate".to_string()
        }
        "state options without state" => {
            "state options have no effect on a rule that keeps no state".to_string()
        }
        n => match n.strip_prefix("state option ") {
            Some(o) => format!("per-rule `{o}` is not acted on by sluice"),
            None => format!("`{n}` is not acted on by sluice"),
        },
    }
}

/// One warning per distinct name in `cx.ignored`, at its first use.
pub(super) fn warn(cx: &mut Ctx) {
    let all = std::mem::take(&mut cx.ignored);
    let mut seen: Vec<(&Sp<String>, usize)> = Vec::new();
    for w in &all {
        match seen.iter_mut().find(|(s, _)| s.v == w.v) {
            Some((_, n)) => *n += 1,
            None => seen.push((w, 1)),
        }
    }
    for (w, n) in seen {
        let label = match n {
            1 => "parsed and ignored".to_string(),
            2 => "parsed and ignored, here and in 1 more place".to_string(),
            n => format!("parsed and ignored, here and in {} more places", n - 1),
        };
        cx.err(
            Diagnostic::warning(message(&w.v), w.span)
                .label(label)
                .hint(hint(&w.v)),
        );
    }
}
