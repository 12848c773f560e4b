//! `table <t> … file "path"`: the entries of a table file.
//!
//! # Principles
//! - pfctl's format (pfctl_radix.c, `pfr_next_token`): entries separated by
//!   white space, a `#` starting a token comments out the rest of the line,
//!   `!` before an entry negates it (pf.conf(5) "TABLES").
//! - The crate does no I/O: a [`FileLoader`] given by the caller reads the
//!   file (the CLI opens the path as written, as pfctl does). Without one
//!   the file is parsed, not read, and the warning says so.
//! - A file that cannot be read is an error at its `file` keyword: a table
//!   silently empty would make every rule using it never match.
//! - What is not an address (a host or interface name, which pfctl
//!   resolves) is left out, as in a `{ … }` list, with one warning per file.

use super::Ctx;
use crate::ast::Sp;
use crate::diag::{Diagnostic, Span};
use crate::ir::IpNet;
use crate::FileLoader;

/// The entries of every file of one `table` statement.
pub fn read_files(
    cx: &mut Ctx,
    files: &[(Span, Sp<String>)],
    loader: Option<&dyn FileLoader>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    for (kw, path) in files {
        let Some(loader) = loader else {
            cx.ignored.push(Sp::new("file".to_string(), *kw));
            continue;
        };
        let text = match loader.read(&path.v) {
            Ok(t) => t,
            Err(e) => {
                cx.err(
                    Diagnostic::error(format!("cannot read table file \"{}\"", path.v), *kw)
                        .label(e)
                        .note(path.span, "the path, opened as written")
                        .hint("pfctl reads table files when it loads the rules; a relative path is relative to the working directory (of `sluice check`, or of the daemon for `sluice run` and every reload)"),
                );
                continue;
            }
        };
        let (entries, skipped) = entries(&text);
        out.extend(entries);
        if let Some((first, line)) = skipped.first() {
            let more = match skipped.len() - 1 {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            cx.err(
                Diagnostic::warning(
                    format!(
                        "table file \"{}\": `{first}` (line {line}){more} is not an address",
                        path.v
                    ),
                    path.span,
                )
                .label("left out of the table")
                .hint("sluice resolves no host or interface names (pfctl does, once, at load): write the addresses"),
            );
        }
    }
    out
}

/// A table entry: the network and whether `!` negates it.
type Entry = (IpNet, bool);

/// The addresses of a table file, and what was not one (with its line).
fn entries(text: &str) -> (Vec<Entry>, Vec<(String, usize)>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for tok in line.split_whitespace() {
            if tok.starts_with('#') {
                break;
            }
            let (neg, addr) = match tok.strip_prefix('!') {
                Some(a) => (true, a),
                None => (false, tok),
            };
            match crate::units::ipnet(addr) {
                Some(net) => out.push((net, neg)),
                None => skipped.push((tok.to_string(), n + 1)),
            }
        }
    }
    (out, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfctl_table_file_format() {
        let (e, skipped) = entries(
            "# blocklist\n10.0.0.0/8 192.0.2.1 # a host\n\n!10.1.0.0/16\tfe80::/10\nhost.example\n",
        );
        let shown: Vec<String> = e
            .iter()
            .map(|(n, neg)| format!("{}{}/{}", if *neg { "!" } else { "" }, n.addr, n.prefix))
            .collect();
        assert_eq!(
            shown,
            ["10.0.0.0/8", "192.0.2.1/32", "!10.1.0.0/16", "fe80::/10"]
        );
        assert_eq!(skipped, [("host.example".to_string(), 5)]);
    }
}
