//! Hand-written lexer for pf.conf text.
//!
//! # Principles
//! - Exact byte spans on every token, so diagnostics point at the token.
//! - Never fails and never panics: a character pf would reject becomes an
//!   [`Tok::Other`] token and the parser reports it where it matters (lines
//!   that sluice skips, like `nat … -> …`, may contain anything).
//! - Statements end at a newline, except inside `{ }` and `( )` (pf allows
//!   lists to span lines) and after a `\` continuation.
//! - Macro uses stay `$name` tokens here; expansion (with a depth cap) is the
//!   statement splitter's job in `expand`.

use crate::diag::Span;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// Identifier, number, address, `S/SA`, `100Kb`, `em0:network`, …
    Word(String),
    /// `"…"` contents.
    Str(String),
    /// `$name`.
    Macro(String),
    /// `<name>`.
    Table(String),
    LBrace,
    RBrace,
    LParen,
    RParen,
    Comma,
    Eq,
    Bang,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `><`
    Between,
    /// `<>`
    Outside,
    Newline,
    /// A character with no meaning in pf.conf (or an unterminated string).
    Other(char),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
    /// Written with no blank before it (`$if:network`): macro expansion glues
    /// such tokens to the one before, as pf's textual substitution does.
    pub joined: bool,
    /// End offset in the lexed text (differs from `span` inside macro values).
    pub real_end: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-' | '%' | '+' | '*')
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Lex `text`. When `fixed_span` is given (macro expansion), every token gets
/// that span: the place where the user wrote `$name`.
pub fn lex(text: &str, fixed_span: Option<Span>) -> Vec<Token> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let len = text.len();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let off = |i: usize| chars.get(i).map_or(len, |&(o, _)| o);
    // Newlines inside braces/parens do not end a statement; depth saturates so
    // stray closers cannot underflow.
    let mut depth: u32 = 0;
    let mut i = 0;
    // Every iteration consumes at least one char, so the loop is bounded by the text length.
    while let Some(c) = at(i) {
        let start = i;
        let tok = match c {
            ' ' | '\t' | '\r' => {
                i += 1;
                continue;
            }
            '#' => {
                while at(i).is_some_and(|c| c != '\n') {
                    i += 1;
                }
                continue;
            }
            '\\' => {
                // Continuation: backslash, optional blanks, newline.
                let mut j = i + 1;
                while at(j).is_some_and(|c| c == ' ' || c == '\t' || c == '\r') {
                    j += 1;
                }
                if at(j) == Some('\n') || at(j).is_none() {
                    i = j + 1;
                    continue;
                }
                i += 1;
                Tok::Other('\\')
            }
            '\n' => {
                i += 1;
                if depth > 0 {
                    continue;
                }
                Tok::Newline
            }
            '"' => {
                let mut s = String::new();
                let mut j = i + 1;
                let mut closed = false;
                while let Some(c) = at(j) {
                    if c == '"' {
                        closed = true;
                        j += 1;
                        break;
                    }
                    if c == '\n' {
                        break;
                    }
                    if c == '\\' && at(j + 1) == Some('"') {
                        s.push('"');
                        j += 2;
                        continue;
                    }
                    s.push(c);
                    j += 1;
                }
                i = j;
                if closed {
                    Tok::Str(s)
                } else {
                    Tok::Other('"')
                }
            }
            '$' => {
                let mut j = i + 1;
                while at(j).is_some_and(is_ident_char) {
                    j += 1;
                }
                let name: String = chars[i + 1..j].iter().map(|&(_, c)| c).collect();
                i = j;
                if name.is_empty() {
                    Tok::Other('$')
                } else {
                    Tok::Macro(name)
                }
            }
            '{' | '(' | '}' | ')' => {
                depth = match c {
                    '{' | '(' => depth.saturating_add(1),
                    _ => depth.saturating_sub(1),
                };
                i += 1;
                match c {
                    '{' => Tok::LBrace,
                    '(' => Tok::LParen,
                    '}' => Tok::RBrace,
                    _ => Tok::RParen,
                }
            }
            ',' => {
                i += 1;
                Tok::Comma
            }
            '=' => {
                i += 1;
                Tok::Eq
            }
            '!' => {
                i += 1;
                if at(i) == Some('=') {
                    i += 1;
                    Tok::Ne
                } else {
                    Tok::Bang
                }
            }
            '<' => {
                // `<name>` is a table; otherwise a comparison.
                let mut j = i + 1;
                if at(j).is_some_and(|c| c.is_ascii_alphabetic() || c == '_') {
                    while at(j).is_some_and(|c| is_ident_char(c) || c == '-' || c == '.') {
                        j += 1;
                    }
                    if at(j) == Some('>') {
                        let name: String = chars[i + 1..j].iter().map(|&(_, c)| c).collect();
                        i = j + 1;
                        push(&mut out, Tok::Table(name), off(start), off(i), fixed_span);
                        continue;
                    }
                }
                let (tok, len) =
                    operator(at(i + 1), [('=', Tok::Le), ('>', Tok::Outside)], Tok::Lt);
                i += len;
                tok
            }
            '>' => {
                let (tok, len) =
                    operator(at(i + 1), [('=', Tok::Ge), ('<', Tok::Between)], Tok::Gt);
                i += len;
                tok
            }
            c if is_word_char(c) => {
                let mut j = i;
                while at(j).is_some_and(is_word_char) {
                    j += 1;
                }
                let w: String = chars[i..j].iter().map(|&(_, c)| c).collect();
                i = j;
                Tok::Word(w)
            }
            other => {
                i += 1;
                Tok::Other(other)
            }
        };
        push(&mut out, tok, off(start), off(i), fixed_span);
    }
    out
}

/// A comparison operator starting with `<` or `>`: the two-character one
/// whose second character is `next`, else `single`; with its length.
fn operator(next: Option<char>, pairs: [(char, Tok); 2], single: Tok) -> (Tok, usize) {
    match pairs.into_iter().find(|(c, _)| Some(*c) == next) {
        Some((_, tok)) => (tok, 2),
        None => (single, 1),
    }
}

fn push(out: &mut Vec<Token>, tok: Tok, start: usize, end: usize, fixed: Option<Span>) {
    let joined = out.last().is_some_and(|t: &Token| t.real_end == start);
    let span = fixed.unwrap_or(Span::new(start, end));
    out.push(Token {
        tok,
        span,
        joined,
        real_end: end,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s, None).into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn words_tables_ops() {
        use Tok::*;
        assert_eq!(
            toks("pass from <bad> port >< 10 flags S/SA # x\n"),
            vec![
                Word("pass".into()),
                Word("from".into()),
                Table("bad".into()),
                Word("port".into()),
                Between,
                Word("10".into()),
                Word("flags".into()),
                Word("S/SA".into()),
                Newline
            ]
        );
        assert_eq!(toks("a <> b != c <= d"), {
            vec![
                Word("a".into()),
                Outside,
                Word("b".into()),
                Ne,
                Word("c".into()),
                Le,
                Word("d".into()),
            ]
        });
    }

    #[test]
    fn continuation_and_braces_join_lines() {
        let t = toks("pass \\\n out { a,\n b }\nx");
        assert_eq!(t.iter().filter(|t| **t == Tok::Newline).count(), 1);
    }

    #[test]
    fn spans_are_byte_exact() {
        let t = lex("a = \"em0\"", None);
        assert_eq!(t[2].span, Span::new(4, 9));
        assert_eq!(t[2].tok, Tok::Str("em0".into()));
    }
}
