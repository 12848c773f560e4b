//! Diagnostics as data: an error or warning with a byte span, a label under
//! the span, an optional hint and secondary notes ("first defined here"),
//! rendered separately in the rustc/gleam layout.
//!
//! # Principles
//! - Every message says what is wrong, where (the offending token), the
//!   allowed values when there are any, and a hint when a habit from another
//!   tool or era is the likely cause.
//! - Rendering never panics: spans are clamped to the text and to char
//!   boundaries, so a stale span degrades to a caret at the end of the file.

use std::fmt::Write as _;

/// A byte range `start..end` into the configuration text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub const fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }
    /// The smallest span that covers both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One message about the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Span,
    /// Short text printed under the carets.
    pub label: Option<String>,
    pub hint: Option<String>,
    /// Secondary locations, e.g. where a duplicate was first defined.
    pub notes: Vec<(Span, String)>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            label: None,
            hint: None,
            notes: Vec::new(),
        }
    }
    pub fn warning(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message, span)
        }
    }
    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = Some(label.into());
        self
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }
    pub fn note(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.notes.push((span, text.into()));
        self
    }

    /// Puts "did you mean `X`?" at the head of the hint when `word` is a
    /// typo of one of `candidates` (crate::suggest); otherwise unchanged.
    pub fn did_you_mean<'a>(
        mut self,
        word: &str,
        candidates: impl IntoIterator<Item = &'a str>,
    ) -> Diagnostic {
        if let Some(s) = crate::suggest::nearest(word, candidates) {
            self.hint = Some(match self.hint.take() {
                Some(h) => format!("did you mean `{s}`? {h}"),
                None => format!("did you mean `{s}`?"),
            });
        }
        self
    }

    /// 1-based (line, column) of the span's start; columns count chars.
    pub fn line_col(&self, text: &str) -> (usize, usize) {
        line_col(text, self.span.start)
    }

    /// Render like rustc: header, `-->` location, the source line with carets,
    /// then notes and the hint.
    pub fn render(&self, file_name: &str, text: &str) -> String {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = String::new();
        let _ = writeln!(out, "{kind}: {}", self.message);
        let mut width = digits(line_col(text, self.span.start).0);
        for (s, _) in &self.notes {
            width = width.max(digits(line_col(text, s.start).0));
        }
        snippet(
            &mut out,
            file_name,
            text,
            self.span,
            self.label.as_deref(),
            width,
        );
        for (span, note) in &self.notes {
            let _ = writeln!(out, "{:w$}  |", "", w = width);
            let _ = writeln!(out, "{:w$}  = note: {note}", "", w = width);
            snippet(&mut out, file_name, text, *span, None, width);
        }
        if let Some(h) = &self.hint {
            let _ = writeln!(out, "{:w$}  |", "", w = width);
            let _ = writeln!(out, "{:w$}  = hint: {h}", "", w = width);
        }
        out
    }
}

fn digits(n: usize) -> usize {
    n.to_string().len()
}

fn clamp(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    // Bounded by 3 steps: a UTF-8 char is at most 4 bytes.
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// 1-based line and char column of byte offset `at`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = clamp(text, at);
    let before = &text[..at];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

fn snippet(out: &mut String, file: &str, text: &str, span: Span, label: Option<&str>, w: usize) {
    let start = clamp(text, span.start);
    let end = clamp(text, span.end.max(span.start));
    let (line, col) = line_col(text, start);
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let src = text[line_start..line_end].trim_end_matches('\r');
    // Tabs are shown as 4 spaces so that the carets line up in any terminal.
    let shown = |s: &str| s.replace('\t', "    ");
    let pad = shown(&text[line_start..start]).chars().count();
    let under_end = end.min(line_end).max(start);
    let n = shown(&text[start..under_end]).chars().count().max(1);
    let _ = writeln!(out, "{:w$}--> {file}:{line}:{col}", "", w = w + 1);
    let _ = writeln!(out, "{:w$}  |", "", w = w);
    let _ = writeln!(out, " {line:>w$} | {}", shown(src), w = w);
    let carets = "^".repeat(n);
    match label {
        Some(l) => {
            let _ = writeln!(
                out,
                "{:w$}  | {:pad$}{carets} {l}",
                "",
                "",
                w = w,
                pad = pad
            );
        }
        None => {
            let _ = writeln!(out, "{:w$}  | {:pad$}{carets}", "", "", w = w, pad = pad);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_rustc() {
        let text = "# c\n\nqueue q_def priority 1 qlimit 70000\n";
        let at = text.find("70000").unwrap();
        let d = Diagnostic::error("qlimit out of range: 70000", Span::new(at, at + 5))
            .label("allowed 1..65535")
            .hint("pf's default qlimit is 50 packets");
        let want = "error: qlimit out of range: 70000\n  --> pf.conf:3:31\n   |\n 3 | queue q_def priority 1 qlimit 70000\n   |                               ^^^^^ allowed 1..65535\n   |\n   = hint: pf's default qlimit is 50 packets\n";
        assert_eq!(d.render("pf.conf", text), want);
    }

    #[test]
    fn stale_spans_do_not_panic() {
        let d = Diagnostic::error("x", Span::new(100, 50));
        let r = d.render("f", "é\n");
        assert!(r.contains("f:2:1"), "{r}");
    }
}
