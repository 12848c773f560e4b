//! The pf.conf queueing dialect: text in, validated IR out, and back to text.
//!
//! Owns: lexer, parser, macro/list/table expansion, the AST with spans,
//! semantic checks, diagnostics, the canonical printer, and the IR in [`ir`].
//! Depends only on `sluice-time` (for units). Knows nothing of schedulers.

pub mod ir;
