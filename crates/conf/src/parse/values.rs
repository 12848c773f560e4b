//! Value parsers shared by the statements: a bandwidth and a duration
//! (with their diagnostics), so `queue`/`altq`/`pipe` and `autorate`
//! read them one way.

use super::{PResult, P};
use crate::ast::Sp;
use crate::diag::Diagnostic;
use crate::units::{self, Bw};
use sluice_time::Duration;

pub(super) fn bandwidth(p: &mut P) -> PResult<Sp<Bw>> {
    let w = p.word("a bandwidth")?;
    units::bandwidth(&w.v)
        .map(|b| Sp::new(b, w.span))
        .ok_or_else(|| {
            if sluice_time::units::parse_rate(&w.v) == Err(sluice_time::units::UnitError::TooLarge) {
                return Diagnostic::error(format!("bandwidth `{}` is too large", w.v), w.span)
                    .label("over the 64-bit limit of 18446744073709551615 bit/s")
                    .hint("sluice shapes up to the link's rate; e.g. 10Gb, 100Gb");
            }
            Diagnostic::error(format!("invalid bandwidth `{}`", w.v), w.span)
                .label("expected a number with b, Kb, Mb, Gb, or a percentage")
                .hint("e.g. 970Kb, 20Mb, 1.5Gb, 25%; pfctl's other spellings work too: K, Kbit, KB (bits, as in pfctl), and the same with M and G")
        })
}

pub(super) fn duration(p: &mut P, default_unit_ns: u64) -> PResult<Duration> {
    let w = p.word("a duration")?;
    let d = duration_of(&w, default_unit_ns)?;
    // pf writes `for 100 ms` as well as `for 100ms`.
    p.eat_word("ms");
    Ok(d)
}

/// The duration word `w` says (a bare number in `default_unit_ns`), or why
/// it says none.
pub(super) fn duration_of(w: &Sp<String>, default_unit_ns: u64) -> PResult<Duration> {
    units::duration(&w.v, default_unit_ns).ok_or_else(|| {
        Diagnostic::error(format!("invalid duration `{}`", w.v), w.span)
            .label("expected e.g. 20ms, 1s, 500us")
    })
}
