//! `sluice top` when stdout is not a terminal (or `--once`): every view
//! once, as plain text, from two snapshots one interval apart — what
//! `top -b -n 1` prints. The same rows and cells as the screen's.

use super::model::{self, Row, Snapshot};
use std::fmt::Write as _;

/// The whole report: the verdicts, then the queues, hosts, states (each
/// sorted as the screen starts) and the shaped interfaces' rates.
pub fn report(prev: &Snapshot, now: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "sluice top: rates over {:.2} s",
        model::interval(prev, now)
    );
    for line in model::verdict_lines(&now.health) {
        let _ = writeln!(o, "{line}");
    }
    o.push('\n');
    table(&mut o, model::queue_rows(Some(prev), now));
    o.push('\n');
    table(&mut o, model::host_rows(Some(prev), now));
    o.push('\n');
    table(&mut o, model::state_rows(Some(prev), now));
    if let Some(st) = now
        .states
        .as_ref()
        .filter(|s| s.total > s.states.len() as u64)
    {
        let _ = writeln!(o, "({} of {} states shown)", st.states.len(), st.total);
    }
    o.push('\n');
    for (iface, p) in model::rate_points(Some(prev), now, prev.at) {
        let _ = writeln!(o, "{}", rate_line(&iface, &p));
    }
    o
}

/// One interface's line of the autorate view.
pub fn rate_line(iface: &str, p: &model::RatePoint) -> String {
    let head = format!(
        "{iface}: shaped at {}, output {}",
        model::rate_cell(Some(p.rate_bps as f64)),
        model::rate_cell(p.output_bps),
    );
    if !p.autorate {
        return format!("{head}, no autorate");
    }
    let decisions: Vec<String> = p
        .decisions
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    format!(
        "{head}, delay {}, decisions {}",
        model::ms_cell(p.delay_ns),
        if decisions.is_empty() {
            "none".into()
        } else {
            decisions.join(", ")
        }
    )
}

/// Rows sorted on their default column, laid out in their widths (a
/// longer cell is never cut here: a pipe has no right margin).
fn table<R: Row>(o: &mut String, mut rows: Vec<R>) {
    model::sort(&mut rows, R::DEFAULT_SORT, false);
    let headers: Vec<String> = R::HEADERS.iter().map(|h| h.to_string()).collect();
    line::<R>(o, &headers);
    for r in &rows {
        line::<R>(o, &r.cells());
    }
}

fn line<R: Row>(o: &mut String, cells: &[String]) {
    let mut s = String::new();
    for (i, c) in cells.iter().enumerate() {
        let w = R::WIDTHS.get(i).copied().unwrap_or(0) as usize;
        if i > 0 {
            s.push(' ');
        }
        if R::RIGHT.get(i).copied().unwrap_or(false) {
            let _ = write!(s, "{c:>w$}");
        } else {
            let _ = write!(s, "{c:<w$}");
        }
    }
    let _ = writeln!(o, "{}", s.trim_end());
}
