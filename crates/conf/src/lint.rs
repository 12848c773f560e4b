//! Warnings about a file as a whole or about how it spells a value, made
//! beside the parser: a bandwidth written in "bytes" (`20MB`), a file with
//! no queues, and the refusal of bytes that are not text.
//!
//! # Principles
//! - pfctl compatibility first: `20MB` keeps pfctl's reading (megabits);
//!   the warning says so and how to write the rate either way was meant.
//! - These never make a valid file invalid: warnings only, except for
//!   [`text`], which stands before the lexer and names the first bad byte.

use crate::diag::{Diagnostic, Span};
use crate::lex::{Tok, Token};
use sluice_time::units::{format_rate, parse_rate};
use sluice_time::Rate;

/// Statements whose words hold bandwidths (altq, the queue forms, pipes).
const RATE_STATEMENTS: &[&str] = &["altq", "queue", "oldqueue", "pipe"];

/// A warning for each rate spelt with a capital-B byte unit (`20MB`,
/// `512KB`, `1GB`): pfctl reads them as bits, and so does sluice.
pub fn byte_units(stmts: &[Vec<Token>]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for st in stmts {
        let first = match st.first().map(|t| &t.tok) {
            Some(Tok::Word(w)) => w.as_str(),
            _ => continue,
        };
        if !RATE_STATEMENTS.contains(&first) {
            continue;
        }
        for t in st {
            if let Tok::Word(w) = &t.tok {
                if let Some(d) = byte_unit(w, t.span) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// The warning for one word, when it is a rate written `NNKB`/`NNMB`/`NNGB`.
fn byte_unit(w: &str, span: Span) -> Option<Diagnostic> {
    let num_end = w.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = w.split_at(num_end);
    if num.is_empty() || !matches!(unit, "KB" | "MB" | "GB") {
        return None;
    }
    let bits = parse_rate(w).ok()?;
    let as_bits = format_rate(bits);
    let bytes = Rate::bps(bits.as_bps().checked_mul(8)?);
    let prefix = &unit[..1];
    Some(
        Diagnostic::warning(
            format!("`{w}` is read as {as_bits}it/s: pf's `{unit}` means {prefix}bit/s, not bytes"),
            span,
        )
        .label(format!("{num} {prefix}bit/s, as pfctl reads it"))
        .hint(format!(
            "write `{as_bits}` to say bits; if you meant {num} {prefix}byte/s, write `{}`",
            format_rate(bytes)
        )),
    )
}

/// A file with no queue, pipe or altq: sluice would forward every packet
/// unshaped. Said at the top of the file.
pub fn unshaped() -> Diagnostic {
    Diagnostic::warning(
        "no queues: sluice forwards every packet unshaped with this file",
        Span::new(0, 0),
    )
    .label("no `altq`, `queue` or `pipe` in the file")
    .hint("`sluice init --down RATE --up RATE` writes a complete shaper for a line; docs/config.md has the dialects")
}

/// `bytes` as configuration text: UTF-8 without NUL bytes. The error
/// names the byte offset of the first byte that is not text.
pub fn text(bytes: &[u8]) -> Result<&str, String> {
    let bad = match std::str::from_utf8(bytes) {
        Ok(s) => match s.find('\0') {
            None => return Ok(s),
            Some(at) => at,
        },
        Err(e) => e.valid_up_to(),
    };
    let byte = bytes.get(bad).copied().unwrap_or(0);
    Err(format!(
        "not a text file: byte {bad} (0x{byte:02x}) is not UTF-8 text; a configuration is pf.conf text"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capital_b_rates_are_warned_about_with_both_readings() {
        let d = byte_unit("20MB", Span::new(0, 4)).unwrap();
        assert!(d.message.contains("20Mbit/s"), "{}", d.message);
        assert_eq!(
            d.hint.as_deref(),
            Some("write `20Mb` to say bits; if you meant 20 Mbyte/s, write `160Mb`")
        );
        assert!(byte_unit("1.5KB", Span::default()).is_some());
        for fine in [
            "20Mb", "20M", "20Mbit", "20mb", "20MBit", "20", "20B", "MB", "20Mbps",
        ] {
            assert!(byte_unit(fine, Span::default()).is_none(), "{fine}");
        }
    }

    #[test]
    fn binary_input_names_its_first_bad_byte() {
        assert_eq!(text(b"pass\n"), Ok("pass\n"));
        assert_eq!(
            text(b"pass\n\xff\xfe"),
            Err(
                "not a text file: byte 5 (0xff) is not UTF-8 text; a configuration is pf.conf text"
                    .into()
            )
        );
        assert!(text(b"ab\0c").unwrap_err().contains("byte 2 (0x00)"));
        assert_eq!(text("é".as_bytes()), Ok("é"));
    }
}
