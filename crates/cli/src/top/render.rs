//! Drawing `sluice top` with ratatui: a title line (the views, the delay,
//! pause and filter), the health verdicts, the current view, and a status
//! line (keys, or the last poll's error). Laid out for 80×24 and up: every
//! table's columns fit in 80 (the widths are the model's).

use super::app::App;
use super::model;
use super::View;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Cell, Chart, Clear, Dataset, GraphType, Paragraph, Row, Table,
};
use ratatui::Frame;
use std::collections::VecDeque;

pub fn draw(f: &mut Frame, app: &App) {
    let verdicts = model::verdict_lines(&app.now.health);
    let [title, health, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(verdicts.len().min(4) as u16),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(title_line(app), title);
    let colours = app
        .now
        .health
        .directions
        .iter()
        .map(|d| verdict_colour(&d.verdict));
    let lines: Vec<Line> = verdicts
        .into_iter()
        .zip(colours.chain(std::iter::repeat(Color::Reset)))
        .map(|(l, c)| Line::styled(l, Style::new().fg(c)))
        .collect();
    f.render_widget(Paragraph::new(lines), health);
    let shown = match app.view {
        View::Queues => table(f, body, app, model::queue_rows(app.prev.as_ref(), &app.now)),
        View::Hosts => table(f, body, app, model::host_rows(app.prev.as_ref(), &app.now)),
        View::States => table(f, body, app, model::state_rows(app.prev.as_ref(), &app.now)),
        View::Autorate => {
            autorate(f, body, app);
            None
        }
    };
    f.render_widget(status_line(app, shown), status);
    if app.help {
        help(f, body);
    }
}

fn verdict_colour(v: &str) -> Color {
    match v {
        "in-control" => Color::Green,
        "not-in-control" => Color::Red,
        _ => Color::Yellow,
    }
}

fn title_line(app: &App) -> Line<'static> {
    let mut spans = vec![Span::styled(
        "sluice top ",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    for (i, v) in View::ALL.iter().enumerate() {
        let s = format!("{}:{}", i + 1, v.name());
        let style = if *v == app.view {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
        };
        spans.push(Span::styled(s, style));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::raw(format!(" every {:.1}s", app.delay.as_secs_f64())));
    if app.paused {
        spans.push(Span::styled(
            " PAUSED",
            Style::new().add_modifier(Modifier::REVERSED),
        ));
    }
    Line::from(spans)
}

/// The keys, the filter being typed, or the last poll's error; `shown`:
/// rows shown of how many.
fn status_line(app: &App, shown: Option<(usize, usize)>) -> Line<'static> {
    if let Some(e) = &app.error {
        return Line::styled(format!("poll failed: {e}"), Style::new().fg(Color::Red));
    }
    if app.editing {
        return Line::from(format!(
            "filter: {}_   (Enter keeps, Esc clears)",
            app.filter
        ));
    }
    let mut s = String::new();
    if !app.filter.is_empty() {
        s.push_str(&format!("/{}  ", app.filter));
    }
    if let Some((n, of)) = shown {
        s.push_str(&format!("{n} of {of}  "));
    }
    s.push_str("h help  q quit  s/S sort  / filter  p pause  </> view");
    Line::from(s)
}

/// A table of the current view: filtered, sorted, scrolled. Returns the
/// rows that pass the filter and all rows.
fn table<R: model::Row>(
    f: &mut Frame,
    area: Rect,
    app: &App,
    rows: Vec<R>,
) -> Option<(usize, usize)> {
    let i = app.view.index();
    let (col, reverse) = (app.sort[i], app.reverse[i]);
    let all = rows.len();
    let mut rows = model::filter(rows, &app.filter);
    model::sort(&mut rows, col, reverse);
    let passing = rows.len();
    let header = Row::new(R::HEADERS.iter().enumerate().map(|(c, h)| {
        // The sorted column in reverse video (a mark would not fit the
        // narrowest columns); reversed order also underlined.
        let mut style = Style::new().add_modifier(Modifier::BOLD);
        if c == col {
            style = style.add_modifier(Modifier::REVERSED);
            if reverse {
                style = style.add_modifier(Modifier::UNDERLINED);
            }
        }
        cell(h.to_string(), R::RIGHT[c]).style(style)
    }));
    let body = rows
        .iter()
        .skip(app.scroll.min(passing.saturating_sub(1)))
        .map(|r| {
            Row::new(
                r.cells()
                    .into_iter()
                    .enumerate()
                    .map(|(c, s)| cell(s, R::RIGHT[c])),
            )
        });
    let widths = R::WIDTHS.iter().map(|w| Constraint::Length(*w));
    f.render_widget(
        Table::new(body, widths).header(header).column_spacing(1),
        area,
    );
    Some((passing, all))
}

fn cell(s: String, right: bool) -> Cell<'static> {
    let align = if right {
        Alignment::Right
    } else {
        Alignment::Left
    };
    Cell::from(Line::from(s).alignment(align))
}

/// Per shaped interface: the rate it is shaped at and its output against
/// time, then a line of the latest point and a strip of the decisions.
fn autorate(f: &mut Frame, area: Rect, app: &App) {
    let ifaces = &app.history.ifaces;
    if ifaces.is_empty() {
        f.render_widget(Paragraph::new("no shaped interface"), area);
        return;
    }
    let parts = Layout::vertical(ifaces.iter().map(|_| Constraint::Fill(1))).split(area);
    for ((iface, points), part) in ifaces.iter().zip(parts.iter()) {
        let [chart, text] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(2)]).areas(*part);
        rate_chart(f, chart, iface, points);
        let mut lines = Vec::new();
        if let Some(p) = points.back() {
            lines.push(Line::from(super::plain::rate_line(iface, p)));
            if p.autorate {
                let strip = decision_strip(points, text.width as usize);
                lines.push(Line::from(format!("decisions: {strip}")));
            }
        }
        f.render_widget(Paragraph::new(lines), text);
    }
}

/// The shaped rate and the output of one interface against time (seconds
/// since top started), from zero to a tenth above the highest.
fn rate_chart(f: &mut Frame, area: Rect, iface: &str, points: &VecDeque<model::RatePoint>) {
    let rate: Vec<(f64, f64)> = points.iter().map(|p| (p.at, p.rate_bps as f64)).collect();
    let output: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.at, p.output_bps?)))
        .collect();
    let x0 = points.front().map_or(0.0, |p| p.at);
    let x1 = points.back().map_or(1.0, |p| p.at).max(x0 + 1.0);
    let top = rate
        .iter()
        .chain(output.iter())
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.1;
    let line = |name: &'static str, colour: Color, data| {
        Dataset::default()
            .name(name)
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(colour))
            .data(data)
    };
    let c = Chart::new(vec![
        line("shaped at", Color::Cyan, &rate),
        line("output", Color::Green, &output),
    ])
    .block(Block::default().title(iface))
    .x_axis(
        Axis::default()
            .bounds([x0, x1])
            .labels([format!("{x0:.0}s"), format!("{x1:.0}s")]),
    )
    .y_axis(
        Axis::default()
            .bounds([0.0, top])
            .labels(["0".to_string(), model::rate_cell(Some(top))]),
    );
    f.render_widget(c, area);
}

/// The recent polls' decisions, one character each, newest last: the
/// reason's initial (`d`elay, `l`oad, `i`dle …), `.` for none.
pub fn decision_strip(
    points: &std::collections::VecDeque<model::RatePoint>,
    width: usize,
) -> String {
    let n = width.saturating_sub("decisions: ".len());
    let skip = points.len().saturating_sub(n);
    points
        .iter()
        .skip(skip)
        .map(|p| {
            p.decisions
                .iter()
                .max_by_key(|(_, n)| *n)
                .and_then(|(r, _)| r.chars().next())
                .unwrap_or('.')
        })
        .collect()
}

const HELP: &[&str] = &[
    "1 2 3 4      queues, hosts, states, autorate",
    "< > v Tab    previous / next view",
    "s            sort on the next column",
    "S r          reverse the sort",
    "/            filter rows (Enter keeps, Esc clears)",
    "p space      pause / resume polling",
    "j k arrows   scroll; PgUp PgDn Home",
    "h ?          this help (any key closes)",
    "q Ctrl-C     quit",
];

fn help(f: &mut Frame, area: Rect) {
    let w = 56.min(area.width);
    let h = (HELP.len() as u16 + 2).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, r);
    let text: Vec<Line> = HELP.iter().map(|l| Line::from(*l)).collect();
    f.render_widget(
        Paragraph::new(text).block(Block::bordered().title("sluice top: keys")),
        r,
    );
}
