//! "Did you mean …?": the nearest known word to a misspelt one.
//!
//! # Principles
//! - Optimal string alignment distance (Levenshtein plus the swap of two
//!   neighbours), so `hsfc` is one edit from `hfsc` and `mian` from `main`:
//!   the typos of fingers, which swap, drop, double or miss a key.
//! - A suggestion is offered only when it is close enough to be a typo:
//!   at most one edit for words of up to four letters, two up to eight,
//!   three beyond, and never the whole word. Ties go to the first candidate,
//!   so callers list the likelier words first.
//! - Comparison ignores ASCII case (`HFSC` → `hfsc`); the candidate is
//!   returned as spelt in the list.

/// Optimal string alignment distance between `a` and `b` (ASCII case
/// ignored), in O(|a|·|b|) time; words here are short.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[(i - 1) * w + j] + 1)
                    .min(d[i * w + j - 1] + 1)
                    .min(d[(i - 1) * w + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[(i - 2) * w + j - 2] + 1);
                }
                v
            };
        }
    }
    d[a.len() * w + b.len()]
}

/// The most edits `word` may be from a suggestion.
fn budget(word: &str) -> usize {
    match word.chars().count() {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    }
}

/// The candidate nearest to `word` when it is near enough to be a typo of
/// it (the same word in another case first); `None` when `word` is itself a
/// candidate or nothing is close.
pub fn nearest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let max = budget(word).min(word.chars().count().saturating_sub(1));
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        if word == c {
            return None;
        }
        let d = distance(word, c);
        if d == 0 {
            return Some(c);
        }
        if d <= max && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_drops_and_doubles_are_one_edit() {
        assert_eq!(distance("hsfc", "hfsc"), 1);
        assert_eq!(distance("mian", "main"), 1);
        assert_eq!(distance("bandwith", "bandwidth"), 1);
        assert_eq!(distance("qlimitt", "qlimit"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("PRIQ", "priq"), 0);
    }

    #[test]
    fn only_typos_are_suggested() {
        let scheds = ["priq", "cbq", "hfsc", "fairq"];
        assert_eq!(nearest("hsfc", scheds), Some("hfsc"));
        assert_eq!(nearest("hfsc", scheds), None, "a match is no typo");
        assert_eq!(nearest("HFSC", scheds), Some("hfsc"));
        assert_eq!(nearest("wfq", scheds), None);
        assert_eq!(nearest("fq_codel", scheds), None);
        // A one-letter word is never "one edit from" another.
        assert_eq!(nearest("x", ["a", "b"]), None);
        assert_eq!(
            nearest("bandwith", ["bandwidth", "qlimit"]),
            Some("bandwidth")
        );
    }
}
