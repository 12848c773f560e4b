//! The pf.conf queueing dialect: text in, validated IR out, and back to text.
//!
//! Owns: lexer, parser, macro/list/table expansion, the AST with spans,
//! semantic checks, diagnostics, the canonical printer, and the IR in [`ir`].
//! Depends only on `sluice-time` (for units). Knows nothing of schedulers.
//!
//! # Principles
//! - Text → tokens with spans ([`lex`]) → statements with macros expanded
//!   (`expand`) → AST (`parse`) → validated IR (`sema`); nothing skips a step.
//! - Never panics on any input (proptest and [`fuzz_entry`] hold us to it);
//!   every problem is a [`Diagnostic`] pointing at the offending token.
//! - pf.conf files people have run for years are accepted unchanged; what
//!   sluice does not act on is parsed and left out of the IR (docs/config.md).
#![forbid(unsafe_code)]

mod ast;
mod diag;
mod expand;
pub mod ir;
mod lex;
mod lint;
mod parse;
mod print;
pub mod recipe;
mod sema;
mod suggest;
mod units;

pub use diag::{line_col, Diagnostic, Severity, Span};
pub use print::{print, queue_options, sched_name, sched_options};

/// A configuration that passed every check, and the warnings about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub config: ir::Config,
    pub warnings: Vec<Diagnostic>,
}

/// Reads the files a configuration names (`table <t> file "path"`). The
/// crate does no I/O: the caller decides where a path leads (pfctl opens
/// it as given, i.e. relative to its working directory) and how much it
/// reads. The error is one line, meant for a person.
pub trait FileLoader {
    fn read(&self, path: &str) -> Result<String, String>;
}

/// How [`check_with`] checks.
#[derive(Clone, Copy, Default)]
pub struct CheckOptions<'a> {
    /// Refuse what pfctl loads but sluice can only warn about: a rule
    /// naming a queue that does not exist (`--strict` of the CLI).
    pub strict: bool,
    /// Reads table files. Without one, `file "path"` is parsed and
    /// not read (a warning says so).
    pub files: Option<&'a dyn FileLoader>,
}

/// Parse and check a pf.conf file. `defines` are `-D name=value` macros and
/// win over the file's definitions. On failure every diagnostic (errors and
/// warnings) is returned in file order. Table files are not read; see
/// [`check_with`].
pub fn check(
    file_name: &str,
    text: &str,
    defines: &[(String, String)],
) -> Result<Checked, Vec<Diagnostic>> {
    check_with(file_name, text, defines, &CheckOptions::default())
}

/// [`check`] with options: strictness and a [`FileLoader`] for table files.
pub fn check_with(
    file_name: &str,
    text: &str,
    defines: &[(String, String)],
    opts: &CheckOptions,
) -> Result<Checked, Vec<Diagnostic>> {
    let _ = file_name; // Spans are byte offsets; the name is only needed to render.
    let (stmts, mut diags) = expand::statements(text, defines);
    let spelling = lint::byte_units(&stmts);
    let mut ast = Vec::with_capacity(stmts.len());
    for s in &stmts {
        match parse::statement(s) {
            Ok(st) => ast.push(st),
            Err(d) => diags.push(d),
        }
    }
    // Checking a file with broken statements mostly reports their echoes
    // (a queue that failed to parse is "unknown" everywhere): stop at syntax.
    if diags.is_empty() {
        let (cfg, more) = sema::build(text, ast, opts);
        // A queue `on { em1 em2 }` is checked once per interface: its
        // findings at the same token are said once.
        let mut seen = std::collections::HashSet::new();
        diags.extend(
            more.into_iter()
                .filter(|d| seen.insert((d.span.start, d.span.end, d.message.clone()))),
        );
        diags.extend(spelling);
        if !diags.iter().any(|d| d.severity == Severity::Error) {
            diags.sort_by_key(|d| d.span.start);
            // Said of a valid file only (a failed tree leaves no interface
            // too), and last: it sums the file up.
            if cfg.interfaces.is_empty() {
                diags.push(lint::unshaped());
            }
            return Ok(Checked {
                config: cfg,
                warnings: diags,
            });
        }
    }
    diags.sort_by_key(|d| (d.span.start, d.severity == Severity::Warning));
    Err(diags)
}

/// `bytes` as configuration text, or why not: "not a text file" with the
/// offset of the first byte that is not UTF-8 (or is NUL). For every
/// reader of a configuration (`check`, `run`, `reload`, the daemon).
pub fn text(bytes: &[u8]) -> Result<&str, String> {
    lint::text(bytes)
}

/// cake's overhead keywords (tc-cake(8)): `ethernet` 38, `docsis` 18,
/// `pppoe-vcmux` 32 atm, … `raw` 0.
pub fn overhead_preset(name: &str) -> Option<sluice_time::Overhead> {
    units::overhead_preset(name)
}

/// Entry point for a cargo-fuzz target. Any bytes are checked and every
/// diagnostic rendered; when the input is valid, the printed form must check
/// to the same config and print identically. A violation panics on purpose
/// (that is the finding); anything else returns normally.
pub fn fuzz_entry(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match check("fuzz.conf", &text, &[]) {
        Ok(c) => {
            for w in &c.warnings {
                let _ = w.render("fuzz.conf", &text);
            }
            let printed = print(&c.config);
            match check("printed.conf", &printed, &[]) {
                Ok(again) => {
                    assert_eq!(
                        strip_lines(&again.config),
                        strip_lines(&c.config),
                        "printer round trip changed the config:\n{printed}"
                    );
                    assert_eq!(
                        print(&again.config),
                        printed,
                        "printer is not a fixed point"
                    );
                }
                Err(d) => panic!("printed config does not check: {d:?}\n{printed}"),
            }
        }
        Err(diags) => {
            for d in &diags {
                let _ = d.render("fuzz.conf", &text);
            }
        }
    }
}

/// The config with every `line` zeroed, for comparisons across printing.
pub fn strip_lines(c: &ir::Config) -> ir::Config {
    let mut c = c.clone();
    for i in &mut c.interfaces {
        i.line = 0;
        for q in &mut i.queues {
            q.line = 0;
        }
    }
    for r in &mut c.rules {
        r.line = 0;
    }
    c
}
