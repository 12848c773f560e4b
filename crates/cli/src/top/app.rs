//! The interactive loop of `sluice top`: the user's choices (view, sort,
//! filter, pause, help) and the keys that change them, pftop's where they
//! fit, then a poll every delay and a redraw on each poll, key or resize.
//!
//! Principles
//! - The key handling ([`App::key`]) is a pure state change, tested
//!   without a terminal; the loop only feeds it and draws.
//! - The terminal is restored on every way out (quit, error, panic):
//!   ratatui's init installs a panic hook that restores it, and [`Screen`]
//!   restores it when dropped.
//! - A poll that fails keeps the last data on screen with the error on the
//!   status line, and the next poll tries again: a daemon restart is seen
//!   through.

use super::model::{self, History, Snapshot};
use super::{poll, render, View};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::path::Path;
use std::time::{Duration, Instant};

/// Points kept per interface for the autorate view's chart.
const HISTORY: usize = 600;

/// What the user chose and what the daemon said last.
pub struct App {
    pub view: View,
    /// Sort column per view (`usize::MAX`: the reply's own order) and
    /// whether reversed.
    pub sort: [usize; 4],
    pub reverse: [bool; 4],
    pub paused: bool,
    pub help: bool,
    /// The substring rows must contain; `editing` while it is typed.
    pub filter: String,
    pub editing: bool,
    /// First row shown of the current table.
    pub scroll: usize,
    pub prev: Option<Snapshot>,
    pub now: Snapshot,
    pub history: History,
    /// The first poll's time: the autorate chart's zero.
    pub t0: Duration,
    pub delay: Duration,
    /// The last poll's failure, until one succeeds.
    pub error: Option<String>,
    pub quit: bool,
}

impl App {
    pub fn new(first: Snapshot, delay: Duration, view: View) -> App {
        let mut history = History::new(HISTORY);
        history.push(model::rate_points(None, &first, first.at));
        App {
            view,
            sort: [
                <model::QueueRow as model::Row>::DEFAULT_SORT,
                <model::HostRow as model::Row>::DEFAULT_SORT,
                <model::StateRow as model::Row>::DEFAULT_SORT,
                usize::MAX,
            ],
            reverse: [false; 4],
            paused: false,
            help: false,
            filter: String::new(),
            editing: false,
            scroll: 0,
            prev: None,
            t0: first.at,
            now: first,
            history,
            delay,
            error: None,
            quit: false,
        }
    }

    /// A new snapshot: the previous one becomes the rates' base.
    pub fn update(&mut self, s: Snapshot) {
        self.history
            .push(model::rate_points(Some(&self.now), &s, self.t0));
        self.prev = Some(std::mem::replace(&mut self.now, s));
        self.error = None;
    }

    /// Columns of the current view's table (none for autorate).
    fn columns(&self) -> usize {
        use model::Row;
        match self.view {
            View::Queues => model::QueueRow::HEADERS.len(),
            View::Hosts => model::HostRow::HEADERS.len(),
            View::States => model::StateRow::HEADERS.len(),
            View::Autorate => 0,
        }
    }

    fn switch(&mut self, v: View) {
        self.view = v;
        self.scroll = 0;
    }

    /// One key press.
    pub fn key(&mut self, k: KeyEvent) {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.editing {
            match k.code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            self.scroll = 0;
            return;
        }
        if self.help {
            // Any key closes the help, as pftop's does; q still quits.
            self.help = false;
            self.quit = k.code == KeyCode::Char('q');
            return;
        }
        let i = self.view.index();
        let n = View::ALL.len();
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char(c @ '1'..='4') => self.switch(View::ALL[c as usize - '1' as usize]),
            KeyCode::Right | KeyCode::Char('v') | KeyCode::Tab => {
                self.switch(View::ALL[(i + 1) % n])
            }
            KeyCode::Left | KeyCode::BackTab => self.switch(View::ALL[(i + n - 1) % n]),
            KeyCode::Char('s') => {
                // The next column, then the reply's own order, then the first.
                let cols = self.columns();
                self.sort[i] = match self.sort[i] {
                    c if c.saturating_add(1) < cols => c + 1,
                    usize::MAX => 0,
                    _ => usize::MAX,
                };
                if cols == 0 {
                    self.sort[i] = usize::MAX;
                }
            }
            KeyCode::Char('S') | KeyCode::Char('r') => self.reverse[i] = !self.reverse[i],
            KeyCode::Char('p') | KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('h') | KeyCode::Char('?') => self.help = true,
            KeyCode::Char('/') => {
                self.editing = true;
                self.filter.clear();
            }
            KeyCode::Esc => self.filter.clear(),
            KeyCode::Down | KeyCode::Char('j') => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(10),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Home => self.scroll = 0,
            _ => {}
        }
    }
}

/// The terminal in ratatui's full-screen mode; restored when dropped.
struct Screen(ratatui::DefaultTerminal);

impl Drop for Screen {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

pub fn run(
    socket: &Path,
    epoch: Instant,
    first: Snapshot,
    delay: Duration,
    view: View,
) -> std::io::Result<()> {
    let mut app = App::new(first, delay, view);
    let mut screen = Screen(ratatui::try_init()?);
    let mut next = Instant::now() + delay;
    loop {
        screen.0.draw(|f| render::draw(f, &app))?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => app.key(k),
                // A resize (or anything else) redraws.
                _ => {}
            }
            if app.quit {
                return Ok(());
            }
            // A view of the states shown first: poll now, not at the
            // next tick (the rates need two polls with states).
            if app.view.shows_states() && app.now.states.is_none() && !app.paused {
                next = Instant::now();
            }
            continue;
        }
        next = Instant::now() + delay;
        if app.paused {
            continue;
        }
        match poll(socket, epoch, app.view.shows_states()) {
            Ok(s) => app.update(s),
            Err(e) => app.error = Some(e),
        }
    }
}
