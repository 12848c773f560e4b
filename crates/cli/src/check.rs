//! `sluice check [-nv] [--strict] [--json] [--explain] [-D name=value]… [-f] FILE…`
//!
//! # Principles
//! - pfctl's habits work: `check -f FILE` and `check -nf FILE` (`-n` is
//!   accepted and does nothing: check never loads anything).
//! - Exit status: 0 every file valid (warnings allowed), 1 a file invalid
//!   or unreadable, 2 a usage error (clap's). The same with `--json`.
//! - `--json` prints one JSON array on stdout, every diagnostic of every
//!   file in order, and nothing on stderr; `--explain --json` prints one
//!   object per file instead (docs/config.md has both schemas).

use crate::out::{ewrite, owrite, owriteln};
use clap::Args as ClapArgs;
use serde_json::{json, Value};
use sluice_conf::{Diagnostic, Severity};
use sluice_control::daemon::notify::for_stderr;
use sluice_control::log::Level;
use std::process::ExitCode;

#[derive(ClapArgs)]
pub struct Args {
    /// Print the canonical form of each file (it parses back to itself).
    #[arg(short, long, conflicts_with_all = ["json", "explain"])]
    verbose: bool,
    /// Accepted for pfctl's `-nf FILE`: check never loads anything.
    #[arg(short = 'n', hide = true)]
    noop: bool,
    /// Refuse what pfctl loads and sluice only warns about: a rule naming
    /// a queue that does not exist.
    #[arg(long)]
    strict: bool,
    /// Print the diagnostics as one JSON array on stdout (file, line,
    /// column, end_line, end_column, severity, message, label, hint, notes).
    #[arg(long)]
    json: bool,
    /// Say what the configuration does to each kind of packet (an empty
    /// ACK, DNS, ping, SSH, a bulk upload, a download): the queue it lands
    /// in on each interface, its rate, AQM and TCP control, found by
    /// running synthetic packets through the real classifier.
    #[arg(long)]
    explain: bool,
    /// Define a macro, as pfctl -D does (e.g. -D ext_if=em0). Repeatable.
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// A configuration file, as pfctl -f names it. Repeatable.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Vec<String>,
    /// Configuration files in the pf.conf dialect ("-" reads standard input).
    #[arg(value_name = "FILE", required_unless_present = "file")]
    files: Vec<String>,
}

fn parse_define(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got `{s}`")),
    }
}

/// A file through the daemon's own bounded read (regular files of at most
/// `sluice_control::MAX_CONFIG_BYTES`, text only); standard input through
/// the same cap and the same text check.
fn read(file: &str) -> Result<String, String> {
    if file == "-" {
        use std::io::Read;
        let cap = sluice_control::MAX_CONFIG_BYTES;
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        if bytes.len() as u64 > cap {
            return Err(format!(
                "standard input is over the cap of {cap} bytes on a configuration"
            ));
        }
        sluice_conf::text(&bytes)
            .map(str::to_owned)
            .map_err(|e| format!("cannot read standard input: {e}"))
    } else {
        sluice_control::read_config(std::path::Path::new(file))
    }
}

/// How a file is named in diagnostics: `<stdin>` for `-`.
fn shown(file: &str) -> &str {
    if file == "-" {
        "<stdin>"
    } else {
        file
    }
}

/// One diagnostic as a JSON object (positions 1-based, columns in chars).
pub fn diag_json(file: &str, text: &str, d: &Diagnostic) -> Value {
    let (line, column) = d.line_col(text);
    let (end_line, end_column) = sluice_conf::line_col(text, d.span.end.max(d.span.start));
    let notes: Vec<Value> = d
        .notes
        .iter()
        .map(|(span, msg)| {
            let (l, c) = sluice_conf::line_col(text, span.start);
            json!({ "line": l, "column": c, "message": msg })
        })
        .collect();
    json!({
        "file": file,
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "severity": severity(d.severity),
        "message": d.message,
        "label": d.label,
        "hint": d.hint,
        "notes": notes,
    })
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A file that could not be read, as a diagnostic without a position.
fn unreadable_json(file: &str, msg: &str) -> Value {
    json!({
        "file": file, "line": null, "column": null, "end_line": null, "end_column": null,
        "severity": "error", "message": msg, "label": null, "hint": null, "notes": [],
    })
}

pub fn run(a: Args) -> ExitCode {
    let _ = a.noop;
    let mut ok = true;
    // --json: every file's diagnostics; with --explain, one object per file.
    let mut all_json = Vec::new();
    for file in a.file.iter().chain(&a.files) {
        let name = shown(file);
        let mut file_json = Vec::new();
        let text = match read(file) {
            Ok(t) => t,
            Err(e) => {
                if a.json {
                    file_json.push(unreadable_json(name, &e));
                } else {
                    ewrite!("{}", for_stderr(Level::Error, &format!("error: {e}\n")));
                }
                ok = false;
                push_json(&a, &mut all_json, name, file_json, None);
                continue;
            }
        };
        // Table files are read as pfctl reads them: relative to our cwd.
        let opts = sluice_conf::CheckOptions {
            strict: a.strict,
            files: Some(&sluice_control::TableFiles),
        };
        let result = sluice_conf::check_with(name, &text, &a.define, &opts);
        let diags = match &result {
            Ok(c) => c.warnings.as_slice(),
            Err(d) => d.as_slice(),
        };
        for d in diags {
            if a.json {
                file_json.push(diag_json(name, &text, d));
            } else {
                let level = sluice_control::daemon::notify::diag_level(d.severity);
                ewrite!("{}", for_stderr(level, &d.render(name, &text)));
            }
        }
        let mut explained = None;
        match result {
            Ok(checked) if a.explain => {
                let ex = crate::explain::explain(&checked.config);
                if a.json {
                    explained = Some(crate::explain::to_json(&ex));
                } else {
                    owrite!("{}", crate::explain::render(name, &ex));
                }
            }
            Ok(checked) if a.verbose => owrite!("{}", sluice_conf::print(&checked.config)),
            Ok(_) => {}
            Err(_) => ok = false,
        }
        push_json(&a, &mut all_json, name, file_json, explained);
    }
    if a.json {
        let v = Value::Array(all_json);
        owriteln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Adds one file's JSON: its diagnostics to the flat array, or with
/// `--explain` an object `{file, diagnostics, explain}` (explain null when
/// the file is invalid or unreadable).
fn push_json(a: &Args, all: &mut Vec<Value>, file: &str, diags: Vec<Value>, ex: Option<Value>) {
    if !a.json {
        return;
    }
    if a.explain {
        all.push(json!({ "file": file, "diagnostics": diags, "explain": ex }));
    } else {
        all.extend(diags);
    }
}
