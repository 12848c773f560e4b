//! Recursive-descent parser: one statement (a token list from `expand`) at a
//! time into an [`ast::Stmt`](crate::ast::Stmt).
//!
//! # Principles
//! - Follows pf.conf(5) and pfctl's parse.y in what it accepts, but lets the
//!   keywords of a statement come in any order where pf's grammar is a
//!   sequence of optional parts (accepting more is harmless; rejecting a
//!   working file is not).
//! - The first error in a statement ends that statement; the other statements
//!   are still parsed so one run reports every broken line.
//! - No recursion without a cap: nested `{ }` lists at most [`MAX_NEST`] deep.

mod autorate;
mod queue;
mod rule;
mod values;

pub use crate::units::ipnet;

use crate::ast::{Sp, Stmt, TableDecl, TimeoutName};
use crate::diag::{Diagnostic, Span};
use crate::ir::TimeoutKind;
use crate::lex::{Tok, Token};
use crate::units;

/// Deepest `{ { … } }` nesting accepted (macros inside lists nest one level each).
pub const MAX_NEST: u32 = 8;

pub type PResult<T> = Result<T, Diagnostic>;

pub struct P<'a> {
    toks: &'a [Token],
    pos: usize,
}

impl<'a> P<'a> {
    pub fn new(toks: &'a [Token]) -> P<'a> {
        P { toks, pos: 0 }
    }
    pub fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }
    pub fn peek_at(&self, n: usize) -> Option<&'a Tok> {
        self.toks.get(self.pos + n).map(|t| &t.tok)
    }
    pub fn next(&mut self) -> Option<&'a Token> {
        let t = self.toks.get(self.pos);
        if t.is_some() {
            self.pos += 1;
        }
        t
    }
    /// Span of the next token, or an empty span just after the statement.
    pub fn here(&self) -> Span {
        match self.toks.get(self.pos) {
            Some(t) => t.span,
            None => self
                .toks
                .last()
                .map_or(Span::default(), |t| Span::new(t.span.end, t.span.end)),
        }
    }
    pub fn prev_span(&self) -> Span {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map_or(self.here(), |t| t.span)
    }
    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }
    pub fn peek_word(&self) -> Option<&'a str> {
        match self.peek() {
            Some(Tok::Word(w)) => Some(w.as_str()),
            _ => None,
        }
    }
    pub fn eat(&mut self, t: &Tok) -> bool {
        let hit = self.peek() == Some(t);
        self.step_if(hit)
    }
    pub fn eat_word(&mut self, w: &str) -> bool {
        let hit = self.peek_word() == Some(w);
        self.step_if(hit)
    }
    /// Moves past the current token if `hit`; returns `hit`.
    fn step_if(&mut self, hit: bool) -> bool {
        self.pos += usize::from(hit);
        hit
    }
    /// A word or quoted string.
    pub fn word(&mut self, what: &str) -> PResult<Sp<String>> {
        match self.toks.get(self.pos) {
            Some(Token {
                tok: Tok::Word(w) | Tok::Str(w),
                span,
                ..
            }) => {
                self.pos += 1;
                Ok(Sp::new(w.clone(), *span))
            }
            _ => Err(self.unexpected(what)),
        }
    }
    /// A name (queue, pipe, interface): letters, digits, `_ - .` only, so
    /// that it prints back as one word.
    pub fn name(&mut self, what: &str) -> PResult<Sp<String>> {
        let w = self.word(what)?;
        let ok = !w.v.is_empty()
            && w.v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(w)
        } else {
            Err(
                Diagnostic::error(format!("invalid {what} `{}`", w.v), w.span)
                    .label("letters, digits, `_`, `-` and `.` only"),
            )
        }
    }
    pub fn expect(&mut self, t: Tok, what: &str) -> PResult<Span> {
        if self.peek() == Some(&t) {
            Ok(self.next().map_or(self.here(), |t| t.span))
        } else {
            Err(self.unexpected(what))
        }
    }
    pub fn unexpected(&self, what: &str) -> Diagnostic {
        match self.toks.get(self.pos) {
            Some(t) => Diagnostic::error(
                format!("expected {what}, found {}", describe(&t.tok)),
                t.span,
            )
            .label(format!("expected {what}")),
            None => Diagnostic::error(format!("expected {what}, found end of line"), self.here())
                .label(format!("expected {what}")),
        }
    }
    /// A number in `lo..=hi`.
    pub fn number(&mut self, what: &str, lo: u64, hi: u64) -> PResult<Sp<u64>> {
        let w = self.word(what)?;
        match units::number(&w.v) {
            Some(n) if (lo..=hi).contains(&n) => Ok(Sp::new(n, w.span)),
            Some(n) => Err(
                Diagnostic::error(format!("{what} out of range: {n}"), w.span)
                    .label(format!("allowed {lo}..{hi}")),
            ),
            None => Err(
                Diagnostic::error(format!("invalid {what}: `{}`", w.v), w.span)
                    .label("expected a number"),
            ),
        }
    }
    /// A `{ a, b }` list (commas optional, nested lists flattened) or a single item.
    pub fn list<T>(&mut self, item: &mut dyn FnMut(&mut P<'a>) -> PResult<T>) -> PResult<Vec<T>> {
        let mut out = Vec::new();
        self.list_into(item, &mut out, 0)?;
        Ok(out)
    }
    /// The options of a `( a 1, b 2 )` group whose `(` is eaten, up to and
    /// with its `)`: each option's word goes to `option`, which reads the
    /// value; commas between options are optional.
    pub fn options(
        &mut self,
        what: &str,
        option: &mut dyn FnMut(&mut P<'a>, Sp<String>) -> PResult<()>,
    ) -> PResult<()> {
        // Each iteration consumes at least one token or returns.
        while !self.eat(&Tok::RParen) {
            if self.eat(&Tok::Comma) {
                continue;
            }
            let w = self.word(what)?;
            option(self, w)?;
        }
        Ok(())
    }
    fn list_into<T>(
        &mut self,
        item: &mut dyn FnMut(&mut P<'a>) -> PResult<T>,
        out: &mut Vec<T>,
        depth: u32,
    ) -> PResult<()> {
        if !self.eat(&Tok::LBrace) {
            out.push(item(self)?);
            return Ok(());
        }
        if depth >= MAX_NEST {
            return Err(Diagnostic::error("lists nest too deeply", self.prev_span())
                .label(format!("more than {MAX_NEST} levels")));
        }
        let open = self.prev_span();
        // Each iteration consumes at least one token or returns.
        loop {
            match self.peek() {
                Some(Tok::RBrace) => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(Tok::Comma) => self.pos += 1,
                Some(t) => {
                    let stray = matches!(t, Tok::Table(_))
                        || matches!(t, Tok::Word(w) if STATEMENT_WORDS.contains(&w.as_str()));
                    if let Err(e) = self.list_into(item, out, depth + 1) {
                        // A statement keyword inside a list: the `}` is missing.
                        return Err(if stray {
                            e.note(open, "this `{` is never closed")
                                .hint("add the missing `}`")
                        } else {
                            e
                        });
                    }
                }
                None => {
                    return Err(
                        Diagnostic::error("unclosed `{`", open).label("this list is never closed")
                    )
                }
            }
        }
    }
    /// Skip one value of an option sluice ignores: a word, string, table,
    /// `!value`, or a balanced `( … )` / `{ … }` group.
    pub fn skip_value(&mut self, what: &str) -> PResult<()> {
        match self.peek() {
            Some(Tok::Word(_) | Tok::Str(_) | Tok::Table(_)) => {
                self.pos += 1;
                Ok(())
            }
            Some(Tok::Bang) => {
                self.pos += 1;
                self.skip_value(what)
            }
            Some(Tok::LParen | Tok::LBrace) => self.skip_group(),
            _ => Err(self.unexpected(what)),
        }
    }
    /// Skip a balanced group starting at `(` or `{`.
    pub fn skip_group(&mut self) -> PResult<()> {
        let open = self.here();
        let mut depth = 0u32;
        // Bounded by the statement's length.
        while let Some(t) = self.next() {
            match t.tok {
                Tok::LParen | Tok::LBrace => depth += 1,
                Tok::RParen | Tok::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(Diagnostic::error("unclosed group", open).label("never closed"))
    }
    pub fn end(&self) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.unexpected("end of statement"))
        }
    }
}

pub fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Str(s) => format!("\"{s}\""),
        Tok::Macro(m) => format!("`${m}`"),
        Tok::Table(t) => format!("`<{t}>`"),
        Tok::LBrace => "`{`".into(),
        Tok::RBrace => "`}`".into(),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::Comma => "`,`".into(),
        Tok::Eq => "`=`".into(),
        Tok::Bang => "`!`".into(),
        Tok::Ne => "`!=`".into(),
        Tok::Lt => "`<`".into(),
        Tok::Le => "`<=`".into(),
        Tok::Gt => "`>`".into(),
        Tok::Ge => "`>=`".into(),
        Tok::Between => "`><`".into(),
        Tok::Outside => "`<>`".into(),
        Tok::Newline => "end of line".into(),
        Tok::Other('"') => "an unterminated string".into(),
        Tok::Other(c) => format!("`{c}`"),
    }
}

/// Words that start statements: seeing one inside a list means a `}` is missing.
const STATEMENT_WORDS: &[&str] = &[
    "pass", "block", "match", "queue", "altq", "table", "set", "pipe", "oldqueue",
];

/// The statements sluice reads (for "did you mean").
const STATEMENTS: &[&str] = &[
    "altq", "queue", "pipe", "pass", "block", "match", "scrub", "set", "table", "include",
    "oldqueue",
];

/// Whole-line statements of pf that sluice accepts and does not act on.
const SKIPPED: &[&str] = &[
    "nat",
    "rdr",
    "binat",
    "antispoof",
    "anchor",
    "load",
    "nat-anchor",
    "rdr-anchor",
    "binat-anchor",
    "no",
];

/// `set` options that parse and are ignored.
const IGNORED_SET: &[&str] = &[
    "skip",
    "block-policy",
    "optimization",
    "loginterface",
    "state-policy",
    "ruleset-optimization",
    "reassemble",
    "debug",
    "hostid",
    "fingerprints",
    "state-defaults",
    "syncookies",
    "require-order",
    "keepcounters",
];

pub fn statement(toks: &[Token]) -> PResult<Stmt> {
    let mut p = P::new(toks);
    let first = p.word("a statement")?;
    match first.v.as_str() {
        "altq" => queue::altq(&mut p, first.span).map(Stmt::Altq),
        "queue" => queue::queue(&mut p, first.span).map(|q| Stmt::Queue(Box::new(q))),
        // OpenBSD 5.5 kept ALTQ for one release under this name while
        // `queue` became the new scheduler's: the same grammar as ALTQ's queue.
        "oldqueue" => queue::queue(&mut p, first.span).map(|mut q| {
            q.oldqueue = Some(first.span);
            Stmt::Queue(Box::new(q))
        }),
        "pipe" => queue::pipe(&mut p, first.span).map(Stmt::Pipe),
        "pass" | "block" | "match" => rule::rule(&mut p, &first).map(|r| Stmt::Rule(Box::new(r))),
        // pf before 4.6: `scrub [in|out] [on IF] … [max-mss N] …` is a
        // `match` rule whose scrub options stand bare. Without `max-mss`
        // it does nothing here (pf's default scrub reassembles fragments).
        "scrub" => rule::rule(&mut p, &first).map(|r| {
            if r.max_mss.is_some() {
                Stmt::Rule(Box::new(r))
            } else {
                let mut what = r.ignored;
                what.insert(0, first);
                Stmt::Ignored(what)
            }
        }),
        "set" => set(&mut p),
        "table" => table(&mut p),
        w if SKIPPED.contains(&w) => Ok(Stmt::Ignored(vec![first])),
        "include" => Err(Diagnostic::error("`include` is not supported", first.span)
            .hint("sluice reads one file; paste the included rules in")),
        w => Err(Diagnostic::error(format!("unknown statement `{w}`"), first.span)
            .label("not a pf.conf statement")
            .hint("statements start with a macro definition, altq, queue, pipe, set, table, pass, block, match, scrub, or a pf statement sluice skips (nat, rdr, binat, antispoof, anchor, load)")
            .did_you_mean(w, STATEMENTS.iter().chain(SKIPPED).copied())),
    }
}

fn set(p: &mut P) -> PResult<Stmt> {
    let opt = p.word("a `set` option")?;
    match opt.v.as_str() {
        "overhead" => {
            if !p.eat_word("on") {
                return Err(p.unexpected("`on`"));
            }
            let iface = p.name("interface name")?;
            let v = p.word("overhead bytes or a preset")?;
            let ov = if let Some(pre) = units::overhead_preset(&v.v) {
                pre
            } else {
                let n: i32 = match v.v.parse() {
                    Ok(n) if (-64..=256).contains(&n) => n,
                    _ => {
                        const PRESETS: &str = "raw ethernet docsis pppoe-ptm bridged-ptm pppoe-vcmux pppoe-llcsnap pppoa-vcmux pppoa-llc bridged-vcmux bridged-llcsnap ipoa-vcmux ipoa-llcsnap conservative";
                        return Err(Diagnostic::error(format!("invalid overhead `{}`", v.v), v.span)
                            .label("expected bytes -64..256 or a preset")
                            .hint(format!("presets: {PRESETS}"))
                            .did_you_mean(&v.v, PRESETS.split(' ')))
                    }
                };
                if p.eat_word("atm") {
                    sluice_time::Overhead::atm(n)
                } else {
                    sluice_time::Overhead::plain(n)
                }
            };
            p.end()?;
            Ok(Stmt::Overhead(iface, ov))
        }
        "limit" => {
            let mut states = None;
            let mut ignored = Vec::new();
            let mut item = |p: &mut P| -> PResult<()> {
                let what = p.word("a limit name")?;
                let n = p.number("limit", 0, u64::from(u32::MAX))?;
                if what.v == "states" {
                    states = Some(n);
                } else {
                    ignored.push(Sp::new(format!("set limit {}", what.v), what.span));
                }
                Ok(())
            };
            p.list(&mut item)?;
            p.end()?;
            Ok(Stmt::Limit { states, ignored })
        }
        "timeout" => {
            let mut item = |p: &mut P| timeout_item(p);
            let items = p.list(&mut item)?;
            p.end()?;
            Ok(Stmt::Timeouts(items))
        }
        "queue" | "prio" => Err(Diagnostic::error(format!("`set {}` belongs on a pass or match rule", opt.v), opt.span)
            .hint(format!("write e.g. `match out on egress set {} …`", opt.v))),
        "block-policy" => {
            let mut what = vec![Sp::new("set block-policy".to_string(), opt.span)];
            let value = p.word("`drop` or `return`")?;
            if value.v == "return" {
                what.push(Sp::new(crate::ast::BLOCK_POLICY_RETURN.to_string(), value.span));
            }
            Ok(Stmt::Ignored(what))
        }
        w if IGNORED_SET.contains(&w) => Ok(Stmt::Ignored(vec![Sp::new(format!("set {w}"), opt.span)])),
        w => Err(Diagnostic::error(format!("unknown option `set {w}`"), opt.span)
            .hint("known: overhead, limit, timeout, and pf's skip, block-policy, optimization, loginterface, state-policy, ruleset-optimization, reassemble, debug, hostid, fingerprints, state-defaults, syncookies (accepted and ignored)")
            .did_you_mean(w, ["overhead", "limit", "timeout", "queue", "prio"].into_iter().chain(IGNORED_SET.iter().copied()))),
    }
}

/// Longest timeout accepted, in seconds (pf keeps them in 32 bits).
pub const MAX_TIMEOUT_S: u64 = i32::MAX as u64;

/// One `NAME SECONDS` of `set timeout` or of a rule's state options.
pub fn timeout_item(p: &mut P) -> PResult<(Sp<TimeoutName>, Sp<u64>)> {
    let w = p.word("a timeout name")?;
    let name = match w.v.as_str() {
        "interval" => TimeoutName::Interval,
        "adaptive.start" => TimeoutName::AdaptiveStart,
        "adaptive.end" => TimeoutName::AdaptiveEnd,
        "frag" => TimeoutName::Other("frag"),
        "src.track" => TimeoutName::Other("src.track"),
        n => match TimeoutKind::from_name(n) {
            Some(k) => TimeoutName::State(k),
            None => {
                const KNOWN: &str = "tcp.first tcp.opening tcp.established tcp.closing tcp.finwait tcp.closed udp.first udp.single udp.multiple icmp.first icmp.error other.first other.single other.multiple interval adaptive.start adaptive.end frag src.track";
                return Err(Diagnostic::error(format!("unknown timeout `{n}`"), w.span)
                    .label("not a pf timeout")
                    .hint(format!("known: {KNOWN}"))
                    .did_you_mean(n, KNOWN.split(' ')));
            }
        },
    };
    let what = match name {
        TimeoutName::AdaptiveStart | TimeoutName::AdaptiveEnd => "state count",
        _ => "timeout in seconds",
    };
    let n = p.number(what, 0, MAX_TIMEOUT_S)?;
    Ok((Sp::new(name, w.span), n))
}

fn table(p: &mut P) -> PResult<Stmt> {
    let name = match p.next() {
        Some(Token {
            tok: Tok::Table(n),
            span,
            ..
        }) => Sp::new(n.clone(), *span),
        _ => {
            p.pos = p.pos.saturating_sub(1);
            return Err(p.unexpected("a table name `<name>`"));
        }
    };
    let mut entries = Vec::new();
    let mut ignored = Vec::new();
    let mut files = Vec::new();
    // Each iteration consumes at least one token or returns.
    while !p.at_end() {
        // A table sluice never changes is what `const` and `persist` ask for.
        if p.eat_word("persist") || p.eat_word("const") {
            continue;
        }
        if p.eat_word("counters") {
            ignored.push(Sp::new("counters".to_string(), p.prev_span()));
            continue;
        }
        if p.eat_word("file") {
            let kw = p.prev_span();
            files.push((kw, p.word("a file name")?));
            continue;
        }
        if p.peek() == Some(&Tok::LBrace) {
            let mut item = |p: &mut P| -> PResult<Option<(crate::ir::IpNet, bool)>> {
                let neg = p.eat(&Tok::Bang);
                let w = p.word("a table entry")?;
                Ok(ipnet(&w.v).map(|n| (n, neg)))
            };
            // Non-address entries (interface names, `self`, host names) are ignored: sluice
            // resolves nothing at run time.
            entries.extend(p.list(&mut item)?.into_iter().flatten());
            continue;
        }
        return Err(p.unexpected("persist, const, counters, file or `{`"));
    }
    Ok(Stmt::Table(TableDecl {
        name,
        entries,
        ignored,
        files,
    }))
}
