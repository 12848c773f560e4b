//! Statement splitting and macro expansion (pf.conf(5) "MACROS").
//!
//! # Principles
//! - pf expands macros in the lexer: a use `$name` is replaced by the tokens
//!   of the macro's value. We do the same, and give every token of the
//!   expansion the span of the `$name` it came from, so errors point at what
//!   the user wrote.
//! - `-D name=value` definitions win over the file's (pfctl marks them
//!   persistent).
//! - Expansion depth is capped ([`MAX_DEPTH`]) so `a = "$b"`, `b = "$a"` ends
//!   with an error instead of looping.

use crate::diag::{Diagnostic, Span};
use crate::lex::{lex, Tok, Token};
use std::collections::HashMap;

/// Nested macro uses deeper than this are a cycle in practice.
const MAX_DEPTH: u32 = 16;
/// A macro value may not exceed this (definitions that paste other macros
/// several times each would otherwise grow exponentially).
const MAX_VALUE_BYTES: usize = 64 * 1024;
/// No single statement may expand beyond this many tokens (a macro bomb guard).
const MAX_STMT_TOKENS: usize = 100_000;

struct Macros {
    values: HashMap<String, String>,
    from_cmdline: HashMap<String, ()>,
}

/// Split `text` into statements (token lists, never empty) with macros expanded.
pub fn statements(text: &str, defines: &[(String, String)]) -> (Vec<Vec<Token>>, Vec<Diagnostic>) {
    let mut m = Macros {
        values: HashMap::new(),
        from_cmdline: HashMap::new(),
    };
    for (k, v) in defines {
        m.values.insert(k.clone(), v.clone());
        m.from_cmdline.insert(k.clone(), ());
    }
    let mut diags = Vec::new();
    let mut out = Vec::new();
    let toks = lex(text, None);
    for raw in toks.split(|t| t.tok == Tok::Newline) {
        if raw.is_empty() {
            continue;
        }
        if let (Some(Tok::Word(name)), Some(Tok::Eq)) =
            (raw.first().map(|t| &t.tok), raw.get(1).map(|t| &t.tok))
        {
            if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                define(&mut m, name, &raw[2..], raw[0].span, &mut diags);
                continue;
            }
        }
        let mut stmt = Vec::new();
        match expand_into(&m, raw, 0, &mut stmt, &mut (MAX_STMT_TOKENS * 4)) {
            Ok(()) if !stmt.is_empty() => out.push(stmt),
            Ok(()) => {}
            Err(d) => diags.push(d),
        }
    }
    (out, diags)
}

fn define(
    m: &mut Macros,
    name: &str,
    value: &[Token],
    name_span: Span,
    diags: &mut Vec<Diagnostic>,
) {
    let mut parts: Vec<String> = Vec::new();
    for (i, t) in value.iter().enumerate() {
        // Adjacent pieces (`$int_if:network`) join without a blank, as in pf.
        if i > 0 && !t.joined {
            parts.push(" ".to_string());
        }
        match &t.tok {
            Tok::Str(s) | Tok::Word(s) => parts.push(s.clone()),
            Tok::Macro(n) => match m.values.get(n) {
                Some(v) => parts.push(v.clone()),
                None => {
                    diags.push(undefined(m, n, t.span));
                    return;
                }
            },
            _ => {
                diags.push(
                    Diagnostic::error(format!("invalid value for macro `{name}`"), t.span)
                        .label("expected a quoted string")
                        .hint(format!(
                            "write {name} = \"…\"; lists go inside the quotes: \"{{ a b }}\""
                        )),
                );
                return;
            }
        }
    }
    if value.is_empty() {
        diags.push(
            Diagnostic::error(format!("macro `{name}` has no value"), name_span)
                .hint("write name = \"value\""),
        );
        return;
    }
    if m.from_cmdline.contains_key(name) {
        return;
    }
    let value = parts.concat();
    if value.len() > MAX_VALUE_BYTES {
        diags.push(
            Diagnostic::error(format!("macro `{name}` is too long"), name_span)
                .label(format!("more than {MAX_VALUE_BYTES} bytes after expansion")),
        );
        return;
    }
    m.values.insert(name.to_string(), value);
}

fn undefined(m: &Macros, name: &str, span: Span) -> Diagnostic {
    Diagnostic::error(format!("undefined macro `${name}`"), span)
        .label("not defined above this line")
        .hint(format!(
            "define it first (`{name} = \"…\"`) or on the command line with -D {name}=…"
        ))
        .did_you_mean(name, {
            // Sorted: a tie between two near names is decided the same way every run.
            let mut known: Vec<&str> = m.values.keys().map(String::as_str).collect();
            known.sort_unstable();
            known
        })
}

fn expand_into(
    m: &Macros,
    toks: &[Token],
    depth: u32,
    out: &mut Vec<Token>,
    budget: &mut usize,
) -> Result<(), Diagnostic> {
    for t in toks {
        // Every token visited costs one unit, so empty macros nested many
        // times over cannot spin without producing output.
        *budget = budget.saturating_sub(1);
        if out.len() > MAX_STMT_TOKENS || *budget == 0 {
            return Err(
                Diagnostic::error("statement too long after macro expansion", t.span)
                    .label(format!("more than {MAX_STMT_TOKENS} tokens")),
            );
        }
        match &t.tok {
            Tok::Macro(n) => {
                let Some(v) = m.values.get(n) else {
                    return Err(undefined(m, n, t.span));
                };
                if depth >= MAX_DEPTH {
                    return Err(Diagnostic::error(
                        format!("macro `${n}` nests too deeply"),
                        t.span,
                    )
                    .label(format!("more than {MAX_DEPTH} levels"))
                    .hint("a macro probably refers to itself"));
                }
                let mut inner: Vec<Token> = lex(v, Some(t.span))
                    .into_iter()
                    .filter(|t| t.tok != Tok::Newline)
                    .collect();
                // The value starts where `$name` stood: it is glued if `$name` was.
                if let Some(first) = inner.first_mut() {
                    first.joined = t.joined;
                }
                let before = out.len();
                expand_into(m, &inner, depth + 1, out, budget)?;
                glue_from(out, before);
            }
            _ => {
                out.push(t.clone());
                glue_from(out, out.len() - 1);
            }
        }
    }
    Ok(())
}

/// pf substitutes macros as text, so `$if:network` and `10.0.$net` glue the
/// value to the word written right next to it. A suffix glued to a list,
/// `{ em1 em2 }:network`, is given to every word of the list (a sluice
/// extension: pf would reject it).
fn glue_from(out: &mut Vec<Token>, at: usize) {
    let Some(t) = out.get(at) else { return };
    if !t.joined || at == 0 {
        return;
    }
    let Tok::Word(w) = &t.tok else { return };
    let w = w.clone();
    let span = t.span;
    match &mut out[at - 1] {
        Token {
            tok: Tok::Word(prev),
            span: ps,
            ..
        } => {
            prev.push_str(&w);
            *ps = ps.to(span);
            out.remove(at);
        }
        Token {
            tok: Tok::RBrace, ..
        } if w.starts_with(':') => {
            let mut depth = 0u32;
            // Walk back to the matching `{`; bounded by the statement length.
            for i in (0..at).rev() {
                match &mut out[i].tok {
                    Tok::RBrace => depth += 1,
                    Tok::LBrace => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            break;
                        }
                    }
                    Tok::Word(x) => x.push_str(&w),
                    _ => {}
                }
            }
            out.remove(at);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str, d: &[(String, String)]) -> Vec<String> {
        let (s, diags) = statements(text, d);
        assert!(diags.is_empty(), "{diags:?}");
        s.iter()
            .map(|st| {
                st.iter()
                    .map(|t| match &t.tok {
                        Tok::Word(w) => w.clone(),
                        Tok::LBrace => "{".into(),
                        Tok::RBrace => "}".into(),
                        other => format!("{other:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn nested_macros_and_lists() {
        let t = "a = \"em0\"\nb = \"{ $a em1 }\"\nc = \"$b\"\npass on $c\n";
        assert_eq!(words(t, &[]), vec!["pass on { em0 em1 }"]);
    }

    #[test]
    fn cmdline_defines_win() {
        let t = "ext_if = \"em0\"\npass on $ext_if\n";
        assert_eq!(
            words(t, &[("ext_if".into(), "kue0".into())]),
            vec!["pass on kue0"]
        );
    }

    #[test]
    fn undefined_and_cyclic_macros_are_errors() {
        let (_, d) = statements("pass on $nope\n", &[]);
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("$nope"));
        assert_eq!(d[0].span, Span::new(8, 13));
        let (_, d) = statements("a = \"x\"\nb = $c\n", &[]);
        assert_eq!(d.len(), 1);
        let (_, d) = statements("pass on $a\n", &[("a".into(), "$a".into())]);
        assert!(d[0].message.contains("nests too deeply"));
    }

    #[test]
    fn macros_glue_to_adjacent_words() {
        let d = [("i".to_string(), "em0".to_string())];
        assert_eq!(
            words("pass from $i:network to 10.0.$i\n", &d),
            vec!["pass from em0:network to 10.0.em0"]
        );
        assert_eq!(
            words("pass from $i :network\n", &d),
            vec!["pass from em0 :network"]
        );
    }

    #[test]
    fn macro_bombs_are_bounded() {
        let mut t = String::from("a0 = \"\"\n");
        for i in 1..30 {
            let p = i - 1;
            t.push_str(&format!("a{i} = \"$a{p} $a{p} $a{p} $a{p}\"\n"));
        }
        t.push_str("pass on $a15\n");
        let (_, d) = statements(&t, &[]);
        assert!(!d.is_empty());
        let mut t = String::from("b0 = x\n");
        for i in 1..40 {
            let p = i - 1;
            t.push_str(&format!("b{i} = $b{p} $b{p}\n"));
        }
        let (_, d) = statements(&t, &[]);
        assert!(d.iter().any(|d| d.message.contains("too long")));
    }

    #[test]
    fn macro_tokens_carry_the_use_span() {
        let (s, _) = statements("pass on $x\n", &[("x".into(), "{ a b }".into())]);
        assert!(s[0][2..].iter().all(|t| t.span == Span::new(8, 10)));
    }
}
